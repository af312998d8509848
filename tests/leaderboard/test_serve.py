"""`idbench serve`: the streamlit command it runs, and Streamlit's own configuration reaching it."""

from __future__ import annotations

import os
import sys

import pytest
from streamlit_server import free_port, running

import idbench.leaderboard.app as app
from idbench.cli import main


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


def test_streamlit_server_port_from_the_environment_is_used(tmp_path):
    """No --server.port in the command: the server listens where STREAMLIT_SERVER_PORT says."""
    pytest.importorskip("streamlit")
    port = free_port()
    env = {
        **os.environ,
        "IDBENCH_HOME": str(tmp_path / "home"),
        "STREAMLIT_SERVER_PORT": str(port),
        "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    }
    with running(app.streamlit_command(), env, port, tmp_path / "serve.log") as url:
        assert url.endswith(f":{port}")  # running() returned: the health endpoint answered on that port
