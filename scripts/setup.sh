#!/usr/bin/env bash
# Creates .venv (once) and installs idbench into it in editable mode with the test tools.
# Idempotent: a second run only re-checks the install. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# This machine's pip config names local wheel folders that may be absent; its warnings about them are noise.
pip_install() { .venv/bin/python -m pip install --quiet "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
# torch first and pinned on every line, so no later resolution swaps it for another build
# (2.14.1 + torchvision 0.29.1 is the pair that works together here; see the README).
TORCH=(torch==2.14.1 torchvision==0.29.1)
pip_install "${TORCH[@]}"
pip_install "${TORCH[@]}" -e '.[dev,metrics,faces]'
