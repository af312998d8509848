"""What the queue's hostile cases of issue 18 cost now: time, peak RSS, scratch bytes, and how each ends.

Each case runs the real command (``idbench worker`` / ``jobs``) in a subprocess of its own, with its own
``IDBENCH_HOME`` and a fresh ``TMPDIR``, measured as ``bench/hostile_validation.py`` measures
``validate`` (peak RSS of the child, scratch polled every 20 ms). The cases:

- ``worker-png``: a stored submission whose image was swapped for a 40,000,000 x 1 PNG after it was
  queued (the upload checks refuse it now, so the store is edited by hand): the worker must end the job
  FAILED, not crash three times and park it;
- ``hub-nested``: a 200 KB request record nested 100,000 levels deep beside a valid one in the Hub
  stand-in: ``jobs --hub`` and the Hub worker's dry run must list it as skipped and go on;
- ``hub-lease``: a RUNNING request whose ``lease_until`` is 9999-12-31, written two days ago: the
  worker's dry run must offer it (its lease ended a day after it was written);
- ``judge-down``: a CHARIS job scored with a judge whose port refuses connections: the worker must put
  the job back (exit 2, PENDING), not end it FINISHED with empty judged columns.

    .venv/bin/python bench/hostile_queue.py                 # all cases
    .venv/bin/python bench/hostile_queue.py judge-down      # some of them
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_validation import IDBENCH, measure, png_header_only, template


def _env(work: Path, name: str) -> Path:
    home = work / f"home-{name}"
    os.environ["IDBENCH_HOME"] = str(home)
    os.environ["IDBENCH_HUB_STAND_IN"] = str(work / f"hub-{name}")
    return home


def _job_state(home: Path) -> str:
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        state, attempts, reason = db.execute("SELECT state, attempts, reason FROM jobs ORDER BY id LIMIT 1").fetchone()
    return f"{state} after {attempts} attempt(s): {(reason or '')[:90]}"


def case_worker_png(work: Path, data: dict[str, Path]) -> tuple[list[list[str]], str]:
    home = _env(work, "png")
    folder = template(data["identity-collapse"], work / "png")
    from idbench.leaderboard.queue import submit
    from idbench.leaderboard.store import Store

    store = Store(home)
    result = submit(store, folder, data["identity-collapse"])
    stored = Path(store.submission(result.submission_id)["stored_path"])
    victim = sorted((stored / "images").iterdir())[0]
    victim.write_bytes(png_header_only(40_000_000, 1))
    return [[*IDBENCH, "worker", "--once", "--profile", "tiny"]], "png"


def _hub_with(work: Path, name: str, data: dict[str, Path], extra: dict[str, bytes]) -> None:
    _env(work, name)
    from idbench.leaderboard.hubrepo import FileAdd, open_repo
    from idbench.leaderboard.queue.hub import submit_request

    requests = open_repo("org/requests")
    submit_request(
        requests, template(data["identity-collapse"], work / f"{name}-ok"), data["identity-collapse"], "valid-model"
    )
    requests.commit(
        [FileAdd(path, data=body) for path, body in extra.items()], "hostile records", parent=requests.head()
    )


def case_hub_nested(work: Path, data: dict[str, Path]) -> tuple[list[list[str]], str]:
    nested = b"[" * 100_000 + b"]" * 100_000  # 200 KB
    _hub_with(work, "nested", data, {"identity-collapse/evil/0123456789ab.json": nested})
    dry = [
        *IDBENCH,
        "worker",
        "--hub",
        "org/requests",
        "--results",
        "org/results",
        "--data",
        f"identity-collapse={data['identity-collapse']}",
        "--profile",
        "tiny",
        "--dry-run",
    ]
    return [[*IDBENCH, "jobs", "--hub", "org/requests"], dry], "nested"


def case_hub_lease(work: Path, data: dict[str, Path]) -> tuple[list[list[str]], str]:
    from idbench.leaderboard.hub import request_path

    digest = "ab" * 32
    path = request_path("identity-collapse", "squatter", digest)
    written = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="seconds")
    record = {
        "model": "squatter",
        "benchmark": "identity-collapse",
        "benchmark_version": "v",
        "content_hash": digest,
        "state": "RUNNING",
        "submitted_at": written,
        "updated_at": written,
        "attempts": 1,
        "worker": "w",
        "lease_until": "9999-12-31T23:59:59+00:00",
        "files": path.removesuffix(".json") + ".zip",
    }
    _hub_with(work, "lease", data, {path: json.dumps(record).encode()})
    dry = [
        *IDBENCH,
        "worker",
        "--hub",
        "org/requests",
        "--results",
        "org/results",
        "--data",
        f"identity-collapse={data['identity-collapse']}",
        "--profile",
        "tiny",
        "--dry-run",
    ]
    return [dry], "lease"


def case_judge_down(work: Path, data: dict[str, Path]) -> tuple[list[list[str]], str]:
    home = _env(work, "judge")
    folder = template(data["charis"], work / "judge")
    from idbench.leaderboard.queue import submit
    from idbench.leaderboard.store import Store

    submit(Store(home), folder, data["charis"])
    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [
        [
            *IDBENCH,
            "worker",
            "--once",
            "--profile",
            "tiny",
            "--judge-url",
            f"http://127.0.0.1:{port}/v1",
            "--judge-model",
            "vlm",
        ]
    ], "judge"


CASES = {
    "worker-png": ("worker: a stored 40,000,000 x 1 PNG", case_worker_png),
    "hub-nested": ("Hub: a 200 KB record nested 100,000 deep (jobs --hub, worker --dry-run)", case_hub_nested),
    "hub-lease": ("Hub: lease_until 9999-12-31 written 2 days ago (worker --dry-run)", case_hub_lease),
    "judge-down": ("worker: the judge refuses connections (CHARIS)", case_judge_down),
}


def main(argv: list[str]) -> int:
    chosen = argv or list(CASES)
    with tempfile.TemporaryDirectory(prefix="idbench-hostile-queue-") as folder:
        work = Path(folder)
        from idbench.builders.build import build

        data = {name: work / name for name in ("identity-collapse", "charis")}
        for name, out in data.items():
            build(name, out=out)
        print(
            "| case | command | exit | time (s) | peak RSS (MB) | scratch peak (MB) | scratch left (B) | traceback | how it ends |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for key in chosen:
            title, make = CASES[key]
            commands, name = make(work, data)
            for command in commands:
                row = measure(command, work)
                home = work / f"home-{name}"
                ends = (
                    _job_state(home)
                    if (home / "leaderboard.sqlite3").is_file() and "--hub" not in command
                    else " ".join(row["first_line"])[:120]
                )
                verb = " ".join(command[3:5]) if "--dry-run" not in command else "worker --hub --dry-run"
                print(
                    f"| {title} | {verb} | {row['exit']} | {row['seconds']:.1f} | {row['peak_rss_mb']:.0f} | {row['scratch_peak_mb']:.1f} "
                    f"| {row['scratch_left']} | {row['traceback']} | {ends} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
