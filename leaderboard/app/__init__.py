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


def streamlit_command(port: int | None = None, headless: bool = True) -> list[str]:
    """The ``streamlit run APP_PATH`` command line :func:`serve` runs.

    ``--server.port`` is passed only when ``port`` is given: otherwise Streamlit's own configuration
    decides (``STREAMLIT_SERVER_PORT``, ``.streamlit/config.toml``, else its default 8501), as a
    deployment (a Hugging Face Space, a container) expects.
    """
    command = [sys.executable, "-m", "streamlit", "run", str(APP_PATH)]
    if port is not None:
        command += ["--server.port", str(int(port))]
    command += [
        "--server.headless",
        "true" if headless else "false",
        "--client.toolbarMode",
        "viewer",  # no "Deploy" or developer menu for the leaderboard's readers
    ]
    return command


def serve(port: int | None = None, headless: bool = True) -> int:
    """Run :func:`streamlit_command` in this Python, until it stops; its exit status."""
    try:
        return subprocess.call(streamlit_command(port, headless))
    except KeyboardInterrupt:  # Ctrl-C reaches streamlit too; its own shutdown is the normal end
        return 0
