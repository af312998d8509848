"""Start a Streamlit server for a test and always stop it: shared by the serve and browser tests."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

STARTUP_TIMEOUT = 90  # seconds for /_stcore/health to answer: streamlit imports are slow on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running(command: Sequence[str], env: Mapping[str, str], port: int, log_path: Path) -> Iterator[str]:
    """Run ``command`` (a streamlit server on ``port``) until the block ends; yield its base URL."""
    with started(command, env, port, log_path) as (url, _):
        yield url


@contextlib.contextmanager
def started(
    command: Sequence[str], env: Mapping[str, str], port: int, log_path: Path
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start ``command`` (a streamlit server on ``port``, or what runs one); yield its base URL and the
    process once it answers. The process is stopped at the end of the block if it is still running.

    Fails the test, with the server's log, when the process exits or the health endpoint does not
    answer within ``STARTUP_TIMEOUT``.
    """
    url = f"http://127.0.0.1:{port}"
    with Path(log_path).open("wb") as log:
        process = subprocess.Popen(list(command), env=dict(env), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                if process.poll() is not None:
                    pytest.fail(
                        f"streamlit exited with {process.returncode}:\n{Path(log_path).read_text(errors='replace')}"
                    )
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"nothing answered on port {port} in {STARTUP_TIMEOUT}s:\n{Path(log_path).read_text(errors='replace')}"
                    )
                time.sleep(0.2)  # polling the health endpoint, not waiting on a page
            yield url, process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=15)
