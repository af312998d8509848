"""`idbench serve`: the streamlit command it runs, and Streamlit's own configuration reaching it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import idbench.leaderboard.app as app
from idbench.cli import main

STARTUP_TIMEOUT = 90  # seconds; streamlit imports take a while on a loaded 2-core machine


def _option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def test_no_port_flag_unless_asked():
    default = app.streamlit_command()
    assert default[:5] == [sys.executable, "-m", "streamlit", "run", str(app.APP_PATH)]
    assert "--server.port" not in default  # Streamlit's own configuration decides
    assert _option(default, "--server.headless") == "true"
    assert _option(app.streamlit_command(9123), "--server.port") == "9123"
    assert _option(app.streamlit_command(headless=False), "--server.headless") == "false"


@pytest.mark.parametrize("argv, port", [(["serve"], None), (["serve", "--port", "9123"], "9123")])
def test_cli_passes_the_port_only_when_given(monkeypatch, argv, port):
    commands = []
    monkeypatch.setattr(app.subprocess, "call", lambda command: commands.append(command) or 0)
    assert main(argv) == 0
    assert _option(commands[0], "--server.port") == port


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_streamlit_server_port_from_the_environment_is_used(tmp_path):
    pytest.importorskip("streamlit")
    port = _free_port()
    env = {
        **os.environ, "IDBENCH_HOME": str(tmp_path / "home"), "STREAMLIT_SERVER_PORT": str(port),
        "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    }  # fmt: skip
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(app.streamlit_command(), env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                if process.poll() is not None:
                    pytest.fail(f"streamlit exited with {process.returncode}:\n{log_path.read_text(errors='replace')}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"nothing answered on port {port}:\n{log_path.read_text(errors='replace')}")
                time.sleep(0.2)  # polling the health endpoint, not waiting on a page
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
