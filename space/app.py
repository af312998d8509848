"""The Space's entry point: run the installed idbench's leaderboard app (Streamlit) on the Space's port.

The app is the one ``idbench serve`` runs (``idbench.leaderboard.app.APP_PATH``), so the Space and a
local server draw the same pages. With ``IDBENCH_HUB_REQUESTS`` and ``IDBENCH_HUB_RESULTS`` set (the
Space's variables), it reads the mirror of those two dataset repos and queues submissions as request
files there (docs/deploy.md).
"""

import os
import sys

from idbench.leaderboard.app import APP_PATH

PORT = "8501"  # app_port in README.md's front matter


def command() -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_PATH),
        "--server.port",
        os.environ.get("IDBENCH_SPACE_PORT", PORT),
        "--server.address",
        "0.0.0.0",  # the Space's proxy reaches the container from outside it
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",  # readers' use of the board is not reported to Streamlit
        "--client.toolbarMode",
        "viewer",  # no "Deploy" or developer menu for the readers
    ]


if __name__ == "__main__":
    os.execv(sys.executable, command())  # streamlit replaces this process: its signals, its exit status
