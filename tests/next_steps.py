"""Walk the next steps a command printed: every backticked idbench command in its output is run in the
situation it was printed in (the same environment, so the same store and caches) and must exit 0.

Commands are recognised by their ``idbench`` word, however it was started (``idbench``,
``.venv/bin/idbench``, ``python -m idbench``); that prefix must itself be runnable here. ``serve`` runs
as a subprocess on a free port until its health endpoint answers, is then sent SIGTERM, and must
exit 0 with its server stopped; every other command runs in-process through ``idbench.cli.main``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "leaderboard"))
from streamlit_server import free_port, started  # noqa: E402

from idbench.cli import main  # noqa: E402

BACKTICKED = re.compile(r"`([^`\n]+)`")


def printed_commands(text: str) -> list[list[str]]:
    """The idbench commands quoted in ``text``, as argument lists after the ``idbench`` word, in order, once each."""
    found: list[list[str]] = []
    for quoted in BACKTICKED.findall(text):
        words = shlex.split(quoted)
        at = next((i for i, w in enumerate(words) if Path(w).name == "idbench"), None)
        if at is None:
            continue
        prefix, arguments = words[: at + 1], words[at + 1 :]
        runnable = shutil.which(prefix[0]) or Path(prefix[0]).is_file()
        assert runnable, f"printed `{quoted}`: {prefix[0]!r} is not a command here"
        if len(prefix) > 1:
            assert prefix[1:] == ["-m", "idbench"], f"printed `{quoted}`: not a way to start idbench"
        if arguments not in found:
            found.append(arguments)
    return found


def walk(text: str, log_dir: Path) -> list[list[str]]:
    """Run every command :func:`printed_commands` finds in ``text``; returns them (a test checks it saw some)."""
    commands = printed_commands(text)
    for arguments in commands:
        if arguments[:1] == ["serve"]:
            _serve(arguments, log_dir)
        else:
            assert main(arguments) == 0, f"printed `idbench {shlex.join(arguments)}` did not exit 0"
    return commands


def _serve(arguments: list[str], log_dir: Path) -> None:
    port = free_port()  # the printed command on a port free here (8501 may be taken on a test machine)
    env = {
        **os.environ,
        "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    }
    command = [sys.executable, "-m", "idbench", *arguments, "--port", str(port)]
    with started(command, env, port, log_dir / "next-step-serve.log") as (_, process):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, f"printed `idbench {shlex.join(arguments)}`: exit {process.returncode}"
