"""`idbench serve`: the streamlit command it runs, and Streamlit's own configuration reaching it."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import pytest
from streamlit_server import free_port, running, started

import idbench.leaderboard.app as app
from idbench.cli import main

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def _option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def test_no_port_flag_unless_asked():
    default = app.streamlit_command()
    assert default[:5] == [sys.executable, "-m", "streamlit", "run", str(app.APP_PATH)]
    assert "--server.port" not in default  # Streamlit's own configuration decides
    assert _option(default, "--server.headless") == "true"
    assert _option(app.streamlit_command(9123), "--server.port") == "9123"
    assert _option(app.streamlit_command(headless=False), "--server.headless") == "false"


def test_serve_listens_on_this_machine_only_and_reports_nothing_unless_asked():
    default = app.streamlit_command()
    assert _option(default, "--server.address") == "127.0.0.1"
    assert _option(default, "--browser.gatherUsageStats") == "false"
    assert _option(app.streamlit_command(address="0.0.0.0"), "--server.address") == "0.0.0.0"
    from space.app import command as space_command

    assert _option(space_command(), "--browser.gatherUsageStats") == "false"


class _Exited:
    """A stand-in for the server's Popen that has already exited with 0."""

    def __init__(self, command, commands):
        commands.append(command)

    def wait(self, timeout=None):
        return 0

    def poll(self):
        return 0


@pytest.mark.parametrize("argv, port", [(["serve"], None), (["serve", "--port", "9123"], "9123")])
def test_cli_passes_the_port_only_when_given(monkeypatch, argv, port):
    commands = []
    monkeypatch.setattr(app.subprocess, "Popen", lambda command: _Exited(command, commands))
    assert main(argv) == 0
    assert _option(commands[0], "--server.port") == port


def _children(pid: int) -> set[int]:
    """The pids of ``pid``'s child processes (Linux /proc)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = task / "children"
        if children.is_file():
            found |= {int(c) for c in children.read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split(") ", 1)[1].startswith("Z"))  # a zombie has ended


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_idbench_serve_stops_its_server_and_frees_the_port(tmp_path, signum):
    """The signal goes to `idbench serve` alone (not its process group, as a supervisor or `kill PID`
    sends it): serve passes it on to Streamlit, waits, and returns; no server is left on the port."""
    pytest.importorskip("streamlit")
    port = free_port()
    env = {
        **os.environ,
        "IDBENCH_HOME": str(tmp_path / "home"),
        "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    }
    command = [sys.executable, "-m", "idbench", "serve", "--port", str(port)]
    with started(command, env, port, tmp_path / "serve.log") as (url, process):
        servers = _children(process.pid)
        assert servers, "idbench serve started no child process"
        process.send_signal(signum)
        assert process.wait(timeout=60) == 0
    assert not any(_alive(pid) for pid in servers), "the Streamlit server outlived idbench serve"
    with socket.socket() as probe:
        # Nothing listens there any more, and a new server can take the port (servers set SO_REUSEADDR, so
        # the closed health-check connections' TIME_WAIT does not count).
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


@pytest.mark.browser
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
