#!/usr/bin/env bash
# Creates .venv (once) and installs idbench into it in editable mode with the test tools.
# Idempotent: a second run only re-checks the install. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# This machine's pip config names local wheel folders that may be absent; its warnings about them are noise.
.venv/bin/python -m pip install --quiet -e '.[dev]' 2> >(grep -v "^WARNING: Location 'file://" >&2)
