"""The Streamlit leaderboard app: ``APP_PATH`` is its entry script, :func:`serve` runs it.

The app only reads the results store under ``$IDBENCH_HOME`` (and queues submissions through
:func:`idbench.leaderboard.queue.submit`); scoring is the worker's job. This module imports no Streamlit, so
``idbench serve`` can start the server without paying for the import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

APP_PATH: Path = Path(__file__).resolve().parent / "main.py"


def serve(port: int = 8501, headless: bool = True) -> int:
    """Run ``streamlit run APP_PATH`` on ``port`` in this Python, until it stops; its exit status."""
    command = [
        sys.executable, "-m", "streamlit", "run", str(APP_PATH),
        "--server.port", str(int(port)),
        "--server.headless", "true" if headless else "false",
        "--client.toolbarMode", "viewer",  # no "Deploy" or developer menu for the leaderboard's readers
    ]  # fmt: skip
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:  # Ctrl-C reaches streamlit too; its own shutdown is the normal end
        return 0
