#!/usr/bin/env bash
# Creates .venv (once) and installs idbench into it in editable mode with the test tools, and
# Chromium for the browser tests when it is missing.
# Idempotent: a second run only re-checks the install. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# The leaderboard's browser tests drive Debian's Chromium (Playwright's own browser download cannot
# be used here). Installed when missing and possible; otherwise those tests fail and say how.
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "note: Chromium is not installed; the browser tests need it (e.g. sudo apt-get install chromium)" >&2
    fi
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# This machine's pip config names local wheel folders that may be absent; its warnings about them are noise.
pip_install() { .venv/bin/python -m pip install --quiet "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
# torch first and pinned on every line, so no later resolution swaps it for another build
# (2.14.1 + torchvision 0.29.1 is the pair that works together here; see the README).
TORCH=(torch==2.14.1 torchvision==0.29.1)
pip_install "${TORCH[@]}"
pip_install "${TORCH[@]}" -e '.[dev,metrics,faces,leaderboard,vlm,curation,generate]'
