#!/usr/bin/env bash
# Creates .venv (once) and installs idbench into it in editable mode with the test tools, and
# Chromium for the browser tests when it is missing.
# Idempotent: a second run only re-checks the install. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says what it does when it starts and how long it took when it ends: a first install takes
# minutes (torch alone is ~1 GB), and a silent terminal reads as a hung one.
SETUP_STARTED=$SECONDS
step() {  # step "what it does" command [args...]
    local what=$1 started=$SECONDS
    shift
    echo "setup: $what ..."
    "$@"
    echo "setup: $what: done in $((SECONDS - started)) s"
}
# The leaderboard's browser tests drive Debian's Chromium (Playwright's own browser download cannot
# be used here). Installed when missing and possible; otherwise those tests fail and say how.
install_chromium() { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        step "installing Chromium (apt) for the browser tests" install_chromium
    else
        echo "note: Chromium is not installed; the browser tests need it (e.g. sudo apt-get install chromium)" >&2
    fi
fi
if [ ! -x .venv/bin/python ]; then
    step "creating the virtual environment .venv" python3 -m venv .venv
fi
# This machine's pip config names local wheel folders that may be absent; its warnings about them are noise.
# (Not --no-compile: it saved 36 of 114 s here, but where PYTHONDONTWRITEBYTECODE is set, as on this
# machine, nothing is ever compiled afterwards and every import reads source: imports took 10.7 s instead
# of 6.5 s, and the suite and the wheel smoke slowed by minutes.)
# constraints.txt pins every package to the versions the committed figures were measured with (its header
# says why and how to move them).
pip_install() { .venv/bin/python -m pip install --quiet -c constraints.txt "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
# torch first and pinned on every line, so no later resolution swaps it for another build
# (2.14.1 + torchvision 0.29.1 is the pair that works together here; see the README).
TORCH=(torch==2.14.1 torchvision==0.29.1)
step "installing ${TORCH[*]} (the first time: ~1 GB)" pip_install "${TORCH[@]}"
step "installing idbench (editable) with its extras and the test tools" \
    pip_install "${TORCH[@]}" -e '.[dev,metrics,faces,leaderboard,vlm,curation,generate]'
echo "setup: ready in $((SECONDS - SETUP_STARTED)) s (.venv/bin/idbench; the tests: see the README)"
