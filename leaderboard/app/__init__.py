"""The Streamlit leaderboard app: ``APP_PATH`` is its entry script, :func:`serve` runs it.

The app only reads the results store under ``$IDBENCH_HOME`` (and queues submissions through
:func:`idbench.leaderboard.queue.submit`); scoring is the worker's job. This module imports no Streamlit, so
``idbench serve`` can start the server without paying for the import.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

APP_PATH: Path = Path(__file__).resolve().parent / "main.py"
#: Where ``idbench serve`` listens unless told otherwise: the loopback interface.
LOCAL_ADDRESS = "127.0.0.1"


def streamlit_command(port: int | None = None, headless: bool = True, address: str = LOCAL_ADDRESS) -> list[str]:
    """The ``streamlit run APP_PATH`` command line :func:`serve` runs.

    ``--server.port`` is passed only when ``port`` is given: otherwise Streamlit's own configuration
    decides (``STREAMLIT_SERVER_PORT``, ``.streamlit/config.toml``, else its default 8501), as a
    deployment (a Hugging Face Space, a container) expects. The server listens on ``address``: this machine
    only unless asked (``idbench serve --address 0.0.0.0``), since the app shows every local submission. Usage
    statistics are never sent to Streamlit: nothing a reader does on the leaderboard leaves the machine.
    """
    command = [sys.executable, "-m", "streamlit", "run", str(APP_PATH)]
    if port is not None:
        command += ["--server.port", str(int(port))]
    command += [
        "--server.address",
        address,
        "--server.headless",
        "true" if headless else "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",  # no "Deploy" or developer menu for the leaderboard's readers
    ]
    return command


#: Seconds the server has to stop after a forwarded signal before it is killed.
STOP_GRACE_S = 20.0


def serve(port: int | None = None, headless: bool = True, address: str = LOCAL_ADDRESS) -> int:
    """Run :func:`streamlit_command` as a child until it stops; its exit status (0 when it stopped because
    this process was asked to stop).

    SIGINT and SIGTERM sent to this process (a terminal's Ctrl-C, ``kill``, a container's stop) are
    passed on to the server, which is then waited for (killed after :data:`STOP_GRACE_S`): when
    ``serve`` returns, no server is left behind and the port is free. Signal handlers can only be set
    in the main thread; called from another one, the child is still stopped if ``serve`` is interrupted.
    """
    child = subprocess.Popen(streamlit_command(port, headless, address))
    stopping = threading.Event()
    # A server that ignores the signal is killed after the grace period, not waited for forever.
    deadline = threading.Timer(STOP_GRACE_S, _kill_if_running, (child,))
    deadline.daemon = True

    def forward(signum: int, frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)
            if not stopping.is_set():
                deadline.start()
        stopping.set()

    handled = (signal.SIGINT, signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, forward) for s in handled} if in_main else {}
    try:
        code = child.wait()
    finally:
        deadline.cancel()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:  # interrupted by something other than a forwarded signal
            child.terminate()
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _kill_if_running(child)
                child.wait()
    return 0 if stopping.is_set() and code in (0, *(-s for s in handled)) else code


def _kill_if_running(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
