"""Whose fault: a worker checks itself before it claims; its own faults never fail a submission.

- a misconfigured worker (paper models absent, judge URL malformed, benchmark folder gone) claims
  nothing and exits non-zero with the reason; the queue stays PENDING;
- a fault of the worker mid-job puts the job back to PENDING with the attempt counted, and stops the
  worker; three such attempts park the job (not FAILED: not the submitter's fault);
- a fault of the submission still ends the job FAILED with a reason that names it;
- a store of schema 2 is upgraded in place to the PARKED state, rows and references kept.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge import JudgeConfig
from idbench.leaderboard.queue import claim, jobs_table, rescore, submit
from idbench.leaderboard.store import MIGRATIONS, Store, insert_job
from idbench.leaderboard.worker import WorkerFaultError, WorkerNotReadyError, run_worker

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

TINY = ScoreOptions(profile="tiny", metrics=("clip_t",))


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    root = tmp_path_factory.mktemp("collapse")
    build("identity-collapse", out=root / "data")
    data = load_benchmark_data(root / "data")
    make_baseline("collage", data, root / "collage", size=128)
    make_baseline("clone", data, root / "clone", size=128)
    return root


@pytest.fixture
def store(warm_home, monkeypatch) -> Store:
    """A fresh store whose feature cache is the session's (``warm_home``): the pictures are scored once."""
    monkeypatch.setenv("IDBENCH_HOME", str(warm_home))
    return Store()


def _untouched(store: Store) -> None:
    """Every job PENDING and never attempted, nothing scored or logged."""
    assert all(row["state"] == "PENDING" and row["attempts"] == 0 for row in jobs_table(store))
    assert store.results() == [] and not store.logs_dir.exists()


def _raising(error: BaseException):
    def scorer(submission, data_dir, out, options, cache_dir):
        raise error

    return scorer


# --- checks before any claim ---------------------------------------------------------------------


@pytest.mark.slow
def test_worker_without_the_paper_models_claims_nothing_and_exits_with_the_reason(
    store, collapse, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("IDBENCH_MODELS", str(tmp_path / "no-models"))  # empty model folder and Hub cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub-cache"))
    submit(store, collapse / "collage", collapse / "data")
    submit(store, collapse / "clone", collapse / "data")
    assert main(["worker", "--once", "--profile", "paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("idbench worker: error: not ready, no job claimed") and "\n" not in err
    # identity-collapse's suite reads CLIP, DINOv2 and the detector: each is named, with the profile
    assert "3 model(s) of profile 'paper'" in err
    assert all(name in err for name in ("clip-vit-l-14", "dinov2-base", "grounding-dino-tiny"))
    _untouched(store)
    assert main(["worker", "--once", "--profile", "tiny"]) == 0  # a worker that has its models drains it
    assert [row["state"] for row in jobs_table(store)] == ["FINISHED", "FINISHED"]


@pytest.mark.slow
def test_worker_refuses_a_malformed_judge_url(store, collapse):
    submit(store, collapse / "collage", collapse / "data")
    from types import SimpleNamespace

    with pytest.raises(ValueError, match="http\\(s\\) URL with a host"):  # a JudgeConfig refuses it when made
        JudgeConfig(base_url="localhost:8000", model="m")
    # A configuration that did not go through JudgeConfig is checked again before anything is claimed.
    options = ScoreOptions(
        profile="tiny", metrics=("clip_t",), judge=SimpleNamespace(base_url="localhost:8000", model="m")
    )
    with pytest.raises(WorkerNotReadyError, match="judge URL 'localhost:8000' is not an http"):
        run_worker(store, once=True, options=options)
    _untouched(store)


@pytest.mark.slow
def test_worker_refuses_when_the_queued_benchmark_folder_is_gone(store, collapse, tmp_path):
    data = shutil.copytree(collapse / "data", tmp_path / "data")
    submit(store, collapse / "collage", data)
    shutil.rmtree(data)  # the benchmark disappears between submit and scoring: the worker's problem
    with pytest.raises(WorkerNotReadyError, match="benchmark data") as error:
        run_worker(store, once=True, options=TINY)
    assert str(data) in str(error.value)
    _untouched(store)


# --- faults during a job -------------------------------------------------------------------------


@pytest.mark.slow
def test_worker_fault_mid_job_puts_the_job_back_and_stops_the_worker(store, collapse):
    first = submit(store, collapse / "collage", collapse / "data")
    second = submit(store, collapse / "clone", collapse / "data")
    full = OSError(28, "No space left on device")
    with pytest.raises(WorkerFaultError, match="back in the queue") as error:
        run_worker(store, once=True, options=TINY, scorer=_raising(full))
    assert "No space left on device" in str(error.value)
    job = store.job(first.job_id)
    assert job["state"] == "PENDING" and job["attempts"] == 1 and job["lease_owner"] is None
    assert "worker fault" in job["reason"] and "OSError" in job["reason"]
    assert store.job(second.job_id)["attempts"] == 0  # the broken worker took no other job
    assert (store.logs_dir / f"job-{first.job_id}-attempt-1.log").is_file()
    assert run_worker(store, once=True, options=TINY) == 2  # a sound worker scores both
    assert {row["state"] for row in jobs_table(store)} == {"FINISHED"} and store.job(first.job_id)["attempts"] == 2


@pytest.mark.slow
def test_repeated_worker_faults_park_the_job_not_fail_it(store, collapse, capsys):
    result = submit(store, collapse / "collage", collapse / "data")
    oom = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
    for attempt in (1, 2):
        with pytest.raises(WorkerFaultError, match="back in the queue"):
            run_worker(store, once=True, options=TINY, scorer=_raising(oom))
        assert store.job(result.job_id)["state"] == "PENDING" and store.job(result.job_id)["attempts"] == attempt
    with pytest.raises(WorkerFaultError, match="parked"):
        run_worker(store, once=True, options=TINY, scorer=_raising(oom))
    job = store.job(result.job_id)
    assert job["state"] == "PARKED" and job["attempts"] == 3
    assert "parked after 3 attempts" in job["reason"] and "not a fault of the submission" in job["reason"]
    assert "CUDA out of memory" in job["reason"]
    assert run_worker(store, once=True, options=TINY) == 0  # not handed out again
    assert main(["jobs"]) == 0
    assert "PARKED" in capsys.readouterr().out
    new_job = rescore(store, result.submission_id)  # an admin requeues it once the workers are fixed
    assert run_worker(store, once=True, options=TINY) == 1 and store.job(new_job)["state"] == "FINISHED"


def test_lease_expired_three_times_parks_the_job(store):
    store.add_submission(
        benchmark="identity-collapse",
        benchmark_version="v",
        data_dir=Path("/nowhere"),
        model_name="m",
        metadata={"model": "m"},
        content_hash="0" * 64,
        stored_path=Path("/nowhere"),
    )
    for _ in range(3):  # three workers, each killed at once (a lease that has already run out)
        assert claim(store, "killed", lease_seconds=-1) is not None
    assert claim(store, "next", lease_seconds=60) is None
    [row] = jobs_table(store)
    assert (
        row["state"] == "PARKED"
        and "lease expired" in row["reason"]
        and "not a fault of the submission" in row["reason"]
    )


@pytest.mark.slow
def test_submission_fault_still_ends_failed_with_what_to_fix(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")
    stored = Path(store.submission(result.submission_id)["stored_path"])
    manifest = pd.read_csv(stored / "manifest.csv", dtype=str)
    broken = manifest["file"].iloc[0]
    (stored / broken).write_bytes(b"not an image")  # the stored copy is corrupt: its images do not decode
    assert run_worker(store, once=True, options=TINY) == 1  # the default scorer, checks included
    job = store.job(result.job_id)
    assert job["state"] == "FAILED" and job["attempts"] == 1
    assert "SubmissionError" in job["reason"] and Path(broken).name in job["reason"] and "\n" not in job["reason"]


# --- the store upgrade ---------------------------------------------------------------------------


def test_a_schema_2_store_is_upgraded_in_place(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "leaderboard.sqlite3"
    with sqlite3.connect(path) as db:  # a store as idbench with two migrations left it
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (2)")
        for script in MIGRATIONS[:2]:
            db.executescript(script)
        db.execute(
            "INSERT INTO submissions (id, benchmark, benchmark_version, data_dir, model_name, metadata_json, content_hash,"
            " stored_path, created_at) VALUES (7, 'identity-collapse', 'v', '/d', 'm', '{}', 'h', '/s', 1.0)"
        )
        db.execute(
            "INSERT INTO jobs (id, submission_id, state, reason, attempts, created_at) VALUES (5, 7, 'FAILED', 'old', 2, 2.0)"
        )
        db.execute(
            "INSERT INTO jobs (id, submission_id, state, attempts, created_at) VALUES (6, 7, 'FINISHED', 1, 3.0)"
        )
        db.execute(
            "INSERT INTO results (submission_id, job_id, benchmark, benchmark_version, suite_version, profile, plumbing,"
            " models_json, idbench_version, aggregates_json, not_run_json, results_path, created_at, current)"
            " VALUES (7, 6, 'identity-collapse', 'v', 's', 'tiny', 1, '{}', '0', '{}', '{}', '/r', 4.0, 1)"
        )
        with pytest.raises(sqlite3.IntegrityError):  # schema 2 does not know PARKED
            db.execute("UPDATE jobs SET state = 'PARKED' WHERE id = 5")
    store = Store(home)
    assert store.schema_version() == len(MIGRATIONS) == 7
    assert [(j["id"], j["state"], j["reason"], j["attempts"]) for j in store.list_jobs()] == [
        (5, "FAILED", "old", 2),
        (6, "FINISHED", None, 1),
    ]
    assert [r["job_id"] for r in store.results()] == [6]
    with store.transaction() as db:
        db.execute("UPDATE jobs SET state = 'PARKED' WHERE id = 5")
        with pytest.raises(sqlite3.IntegrityError):  # foreign keys are enforced again after the rebuild
            db.execute("INSERT INTO jobs (submission_id, state, created_at) VALUES (99, 'PENDING', 0)")
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("UPDATE jobs SET state = 'LOST' WHERE id = 6")
    assert store.job(5)["state"] == "PARKED"
    with store.transaction() as db:
        assert insert_job(db, 7, 0.0) == 7  # AUTOINCREMENT carries on after the copied ids
    assert json.loads(json.dumps(jobs_table(store)))[0]["state"] == "PARKED"


@pytest.mark.e2e
@pytest.mark.slow
def test_a_worker_start_clears_what_a_killed_worker_left_mid_write(tmp_path, caplog):
    """kill -9 during the results swap leaves ``.<job>.staging-*``; the next worker start removes it
    and puts back the old results that the kill caught between the two renames."""
    import socket
    import subprocess
    import sys

    store = Store(tmp_path / "home")
    gone = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    holder = store.home / "results" / "1" / ".2.staging-k9"
    (holder / "2.old").mkdir(parents=True)
    (holder / "2.old" / "aggregates.json").write_text("{}")
    (holder / "2").mkdir()
    (holder / ".owner").write_text(f"{socket.gethostname()} {gone}")
    with caplog.at_level("WARNING"):
        assert run_worker(store, once=True, check=False, scorer=lambda *a, **k: {}) == 0  # the queue is empty
    assert not holder.exists() and (store.home / "results" / "1" / "2" / "aggregates.json").is_file()
    assert "restored" in caplog.text


# --- the judge down, the time limit, a full disk, what reasons publish ----------------------------


def _summary_with_judge(stats: dict):
    """A scorer whose run asked a judge with these statistics (and otherwise scored nothing)."""

    def scorer(submission, data_dir, out, options, cache_dir):
        return {
            "benchmark": "identity-collapse",
            "suite_version": "s",
            "profile": "tiny",
            "plumbing": True,
            "idbench_version": "0",
            "models": {},
            "aggregates": {},
            "not_run": {},
            "judge": {"model": "vlm", "stats": stats},
        }

    return scorer


@pytest.mark.slow
def test_a_judge_that_was_down_puts_the_job_back_instead_of_finishing_it(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")
    down = _summary_with_judge({"answers": 40, "failures": 40, "unreachable": "connection error: Connection refused"})
    with pytest.raises(
        WorkerFaultError, match="back in the queue .*JudgeUnavailableError: the judge 'vlm' was unreachable"
    ):
        run_worker(store, once=True, options=TINY, scorer=down)
    job = store.job(result.job_id)
    assert job["state"] == "PENDING" and job["attempts"] == 1 and "JudgeUnavailableError" in job["reason"]
    assert store.results() == []  # no FINISHED row with empty judged columns
    flaky = _summary_with_judge({"answers": 40, "failures": 30})  # answered, but mostly failed
    with pytest.raises(WorkerFaultError, match="failed 30 of 40"):
        run_worker(store, once=True, options=TINY, scorer=flaky)
    served = _summary_with_judge({"answers": 40, "failures": 2})  # a few failures are counted and shown, not refused
    assert run_worker(store, once=True, options=TINY, scorer=served) == 1
    assert store.job(result.job_id)["state"] == "FINISHED"


@pytest.mark.slow
def test_a_job_past_its_time_limit_is_parked_and_the_worker_goes_on(store, collapse):
    import time as clock

    first = submit(store, collapse / "collage", collapse / "data")
    second = submit(store, collapse / "clone", collapse / "data")
    calls = []

    def hangs_once(submission, data_dir, out, options, cache_dir):
        calls.append(out.name)
        if len(calls) == 1:
            while True:  # a scorer stuck in Python code (bytecode boundaries: the limit can land)
                clock.sleep(0.01)
        return _summary_with_judge({"answers": 0, "failures": 0})(submission, data_dir, out, options, cache_dir)

    assert run_worker(store, once=True, options=TINY, scorer=hangs_once, job_seconds=0.3) == 2
    parked, done = store.job(first.job_id), store.job(second.job_id)
    assert (
        parked["state"] == "PARKED"
        and "wall-time limit of 0.3 s" in parked["reason"]
        and "not a fault of the submission" in parked["reason"]
    )
    assert done["state"] == "FINISHED"
    assert (store.logs_dir / f"job-{first.job_id}-attempt-1.log").is_file()


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_job_goes_back(store, collapse):
    from idbench.leaderboard.worker import DiskFullError

    result = submit(store, collapse / "collage", collapse / "data")
    full = sqlite3.OperationalError("database or disk is full")
    with pytest.raises(DiskFullError) as error:
        run_worker(store, once=True, options=TINY, scorer=_raising(full))
    message = str(error.value)
    assert message.startswith("disk full:") and "\n" not in message and "back in the queue" in message
    assert store.job(result.job_id)["state"] == "PENDING"


@pytest.mark.slow
def test_reasons_and_worker_ids_carry_no_host_or_server_path(store, collapse):
    import socket

    result = submit(store, collapse / "collage", collapse / "data")
    secret_path = store.home / "models" / "weights.safetensors"
    broken = FileNotFoundError(2, "No such file or directory", str(secret_path))
    with pytest.raises(WorkerFaultError):
        run_worker(store, once=True, options=TINY, scorer=_raising(RuntimeError(f"{socket.gethostname()}: {broken}")))
    reason = store.job(result.job_id)["reason"]
    assert (
        str(store.home) not in reason and str(secret_path.parent) not in reason and socket.gethostname() not in reason
    )
    assert "weights.safetensors" in reason and "job-1-attempt-1.log" in reason  # what is useful stays
    job = claim(store, "x", lease_seconds=60)
    from idbench.leaderboard.worker import default_worker_id

    assert socket.gethostname() not in default_worker_id() and job is not None


def test_both_backends_implement_every_operation_of_the_queue_interface():
    import inspect

    from idbench.leaderboard.queue.hub import HubQueue
    from idbench.leaderboard.queue.local import StoreQueue
    from idbench.leaderboard.queue.protocol import JobQueue

    operations = {name for name, _ in inspect.getmembers(JobQueue, inspect.isfunction) if not name.startswith("_")}
    assert {
        "submit",
        "claim",
        "heartbeat",
        "finish",
        "fail",
        "requeue",
        "park",
        "release",
        "list_jobs",
        "withdraw",
        "rescore",
    } <= operations
    for backend in (StoreQueue, HubQueue):
        for name in operations:
            ours, theirs = inspect.signature(getattr(JobQueue, name)), inspect.signature(getattr(backend, name))
            assert list(ours.parameters) == list(theirs.parameters), (
                f"{backend.__name__}.{name}{theirs} differs from {ours}"
            )
        assert isinstance(backend.unit, str)


# --- what a worker says -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_worker_says_one_line_when_a_job_starts_and_one_when_it_ends(store, collapse, caplog):
    import io

    from idbench.evaluate_pkg.images import ImageError
    from idbench.progress import LogLines

    submit(store, collapse / "collage", collapse / "data", model_name="collage-model")
    submit(store, collapse / "clone", collapse / "data", model_name="clone-model")
    now = [0.0]
    stream = io.StringIO()
    served = _summary_with_judge({"answers": 0, "failures": 0})
    calls = []

    def scorer(submission, data_dir, out, options, cache_dir):
        calls.append(out)
        now[0] += 12.5 if len(calls) == 1 else 3.0
        if len(calls) == 2:
            raise ImageError("prompt_id '05' seed 1", "not an image")
        return served(submission, data_dir, out, options, cache_dir)

    with caplog.at_level("WARNING", logger="idbench.leaderboard.worker"):
        assert (
            run_worker(store, once=True, options=TINY, scorer=scorer, progress=LogLines(stream, clock=lambda: now[0]))
            == 2
        )
    assert stream.getvalue().splitlines() == [
        "job 1 (collage-model): scoring, attempt 1",
        "job 1: FINISHED in 12 s",
        "job 2 (clone-model): scoring, attempt 1",
    ]
    # FAILED (and PARKED) are the log's warnings, shown on stderr without any logging set up: one line
    (failed,) = [r.getMessage() for r in caplog.records if "job 2" in r.getMessage()]
    assert failed.startswith("job 2: FAILED after 3.0 s: ImageError: prompt_id '05' seed 1: not an image")


# --- a store that cannot record the outcome: the lease is handed back at once (issue 29, item 5) -----


class _FailingConnection:
    """A store connection whose statements matching ``fails`` raise ``error`` (a full or failing disk)."""

    def __init__(self, connection: sqlite3.Connection, fails, error: BaseException):
        self._connection, self._fails, self._error = connection, fails, error

    def execute(self, sql: str, *args):
        if self._fails(sql):
            raise self._error
        return self._connection.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._connection, name)


def _failing_writes(monkeypatch, store: Store, fails, error: BaseException) -> None:
    real = Store._connect
    monkeypatch.setattr(Store, "_connect", lambda self: _FailingConnection(real(self), fails, error))
    import idbench.leaderboard.worker as worker

    monkeypatch.setattr(worker, "RELEASE_PAUSES_S", (0.0, 0.0, 0.0))


def _finished_scorer(submission, data_dir, out, options, cache_dir):
    out.mkdir(parents=True, exist_ok=True)
    return _summary_with_judge({"answers": 0, "failures": 0})(submission, data_dir, out, options, cache_dir)


@pytest.mark.slow
def test_a_result_that_cannot_be_recorded_puts_the_job_back_at_once(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")
    io_error = sqlite3.OperationalError("disk I/O error")
    with pytest.MonkeyPatch.context() as patch:
        _failing_writes(patch, store, lambda sql: sql.startswith("INSERT INTO results"), io_error)
        with pytest.raises(WorkerFaultError) as error:
            run_worker(store, once=True, options=TINY, scorer=_finished_scorer, lease_seconds=3600)
    message = str(error.value)
    # the reason is public: the store is named by its file name only (paths are the server's business)
    assert (
        "\n" not in message
        and "back in the queue" in message
        and "leaderboard.sqlite3" in message
        and "disk I/O error" in message
    )
    job = store.job(result.job_id)
    assert job["state"] == "PENDING" and job["lease_owner"] is None  # not RUNNING for the hour of its lease
    assert claim(store, "another-worker", lease_seconds=60).id == result.job_id


@pytest.mark.slow
@pytest.mark.parametrize(
    "error", [sqlite3.OperationalError("database or disk is full"), sqlite3.OperationalError("disk I/O error")]
)
def test_when_the_requeue_fails_too_the_lease_is_released(store, collapse, error):
    from idbench.leaderboard.worker import DiskFullError

    result = submit(store, collapse / "collage", collapse / "data")
    refused = []

    def fails(sql: str) -> bool:  # the result and the requeue (both record a reason) are refused; the release passes
        if sql.startswith("INSERT INTO results") or (sql.startswith("UPDATE jobs SET state") and "reason = ?" in sql):
            refused.append(sql)
            return True
        return False

    with pytest.MonkeyPatch.context() as patch:
        _failing_writes(patch, store, fails, error)
        with pytest.raises(WorkerFaultError) as raised:
            run_worker(store, once=True, options=TINY, scorer=_finished_scorer, lease_seconds=3600)
    message = str(raised.value)
    # the result, the requeue, and the requeue again with the disk reserve freed (issue 40, item 7a)
    assert len(refused) == 3 and "\n" not in message and "released back to the queue" in message
    assert isinstance(raised.value, DiskFullError) == ("full" in str(error))
    job = store.job(result.job_id)
    assert job["state"] == "PENDING" and job["lease_owner"] is None
    assert claim(store, "another-worker", lease_seconds=60).id == result.job_id


@pytest.mark.slow
def test_a_failed_outcome_that_cannot_be_recorded_releases_the_lease(store, collapse):
    from idbench.evaluate_pkg.submission import SubmissionError

    result = submit(store, collapse / "collage", collapse / "data")
    full = OSError(28, "No space left on device")
    with pytest.MonkeyPatch.context() as patch:
        _failing_writes(
            patch,
            store,
            lambda sql: sql.startswith("UPDATE jobs SET state = 'FAILED'"),
            sqlite3.OperationalError("database or disk is full"),
        )
        with pytest.raises(WorkerFaultError) as raised:
            run_worker(
                store,
                once=True,
                options=TINY,
                scorer=_raising(SubmissionError(f"image 05: unreadable ({full})")),
                lease_seconds=3600,
            )
    message = str(raised.value)
    assert (
        message.startswith("disk full: job 1: its outcome (FAILED: SubmissionError")
        and "released back to the queue" in message
    )
    job = store.job(result.job_id)
    assert job["state"] == "PENDING" and job["lease_owner"] is None


@pytest.mark.slow
def test_a_store_that_refuses_every_write_says_the_lease_runs_out_in_one_line(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")

    def fails(sql: str) -> bool:  # every write after the claim
        return sql.startswith(("INSERT", "UPDATE")) and not sql.startswith("UPDATE jobs SET state = 'RUNNING'")

    with pytest.MonkeyPatch.context() as patch:
        _failing_writes(patch, store, fails, sqlite3.OperationalError("disk I/O error"))
        with pytest.raises(WorkerFaultError) as raised:
            run_worker(store, once=True, options=TINY, scorer=_finished_scorer, lease_seconds=600)
    message = str(raised.value)
    assert "\n" not in message and "could not be released either" in message and "lease runs out in 600 s" in message
    assert store.job(result.job_id)["state"] == "RUNNING"  # nothing could be written: the lease is all that is left


# --- a full disk while writing results: the job leaves RUNNING at once (issue 40, item 7a) ----------


def _disk_fills_while_writing_results(monkeypatch, store: Store) -> dict:
    """The results writer (``DataFrame.to_parquet``) raises ENOSPC; from then on the disk is full: every
    write of the store fails as SQLite's does on a full disk, until space is freed (the reserve deleted)."""
    import errno

    from idbench.leaderboard.queue import StoreQueue

    reserve = StoreQueue(store).reserve.path
    disk = {"full": False, "refused": 0}

    def writer(self, path, *args, **kwargs):
        disk["full"] = True
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    def fails(sql: str) -> bool:
        if disk["full"] and reserve.exists() and sql.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE")):
            disk["refused"] += 1
            return True
        return False

    monkeypatch.setattr(pd.DataFrame, "to_parquet", writer)
    _failing_writes(monkeypatch, store, fails, sqlite3.OperationalError("database or disk is full"))
    return disk


@pytest.mark.slow
def test_a_full_disk_while_writing_results_leaves_no_job_running(store, collapse, capsys):
    from idbench.leaderboard.queue import StoreQueue
    from idbench.leaderboard.worker import DiskFullError

    result = submit(store, collapse / "collage", collapse / "data")
    reserve = StoreQueue(store).reserve
    with pytest.MonkeyPatch.context() as patch:
        disk = _disk_fills_while_writing_results(patch, store)
        with pytest.raises(DiskFullError) as raised:
            run_worker(store, once=True, options=TINY, lease_seconds=3600)  # the default scorer
    message = str(raised.value)
    assert disk["refused"] == 1  # the requeue, refused on the full disk; recorded once the reserve was freed
    assert message.startswith("disk full: job 1 back in the queue") and "\n" not in message, message
    assert "disk reserve" in message and "No space left on device" in message
    job = store.job(result.job_id)
    # Not RUNNING for the hour of its lease: back in the queue now, with the one-line reason.
    assert job["state"] == "PENDING" and job["lease_owner"] is None and job["attempts"] == 1
    assert "No space left on device" in job["reason"] and "\n" not in job["reason"]
    assert not reserve.path.exists()
    # Space freed: the next worker puts the reserve back and scores the job.
    assert run_worker(store, once=True, options=TINY) == 1
    assert store.job(result.job_id)["state"] == "FINISHED" and reserve.path.stat().st_size == reserve.size


@pytest.mark.slow
def test_the_cli_says_a_full_disk_in_one_line_and_leaves_no_job_running(store, collapse, capsys):
    result = submit(store, collapse / "collage", collapse / "data")
    with pytest.MonkeyPatch.context() as patch:
        _disk_fills_while_writing_results(patch, store)
        assert main(["worker", "--once", "--profile", "tiny", "--lease-seconds", "3600"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("idbench worker")]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("idbench worker: error: disk full"), err
    assert store.job(result.job_id)["state"] == "PENDING"


@pytest.mark.slow
def test_a_failed_outcome_on_a_full_disk_is_recorded_with_the_reserve(store, collapse):
    from idbench.evaluate_pkg.images import ImageError
    from idbench.leaderboard.queue import StoreQueue
    from idbench.leaderboard.worker import DiskFullError

    result = submit(store, collapse / "collage", collapse / "data")
    reserve = StoreQueue(store).reserve.path
    with pytest.MonkeyPatch.context() as patch:
        _failing_writes(
            patch,
            store,
            lambda sql: reserve.exists() and sql.startswith("UPDATE jobs SET state = 'FAILED'"),
            sqlite3.OperationalError("database or disk is full"),
        )
        with pytest.raises(DiskFullError) as raised:
            run_worker(
                store,
                once=True,
                options=TINY,
                scorer=_raising(ImageError("prompt_id '05' seed 1", "not an image")),
                lease_seconds=3600,
            )
    message = str(raised.value)
    assert message.startswith("disk full: job 1: FAILED: ImageError") and "disk reserve" in message, message
    job = store.job(result.job_id)
    assert job["state"] == "FAILED" and "not an image" in job["reason"] and job["lease_expires_at"] is None


@pytest.mark.slow
def test_a_worker_without_room_for_its_reserve_says_so_and_goes_on(store, collapse, monkeypatch, caplog):
    import errno

    from idbench.leaderboard.queue import protocol

    submit(store, collapse / "collage", collapse / "data")

    def no_room(size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(protocol, "_random_bytes", no_room)
    served = _summary_with_judge({"answers": 0, "failures": 0})
    with caplog.at_level("WARNING", logger="idbench.leaderboard.worker"):
        assert run_worker(store, once=True, options=TINY, scorer=served) == 1
    (line,) = [r.getMessage() for r in caplog.records if "reserve" in r.getMessage()]
    assert line.startswith("no disk reserve: 8 MiB could not be set aside") and "No space left" in line
    assert not list(store.path.parent.glob("*.reserve*"))  # no partial reserve left behind


def test_no_renewal_lands_while_or_after_a_lease_records_its_outcome():
    """A renewal racing the job's finish once landed on the closed lease (an empty lease_until, a false
    "lease lost" in the log): ticks every 10 ms, none may run inside ``last_act`` or after it."""
    import threading

    from idbench.leaderboard.worker import Heartbeat

    calls: list[bool] = []
    first, acting = threading.Event(), [False]

    def beat() -> bool:
        calls.append(acting[0])
        first.set()
        return True

    with Heartbeat(beat, "job 1", lease_seconds=0.03) as heart:
        assert first.wait(30)
        with heart.last_act():
            acting[0] = True
            threading.Event().wait(0.1)  # about ten ticks' time: each must wait for the act, then stop
            acting[0] = False
        after = len(calls)
    assert not heart._thread.is_alive()
    assert True not in calls and len(calls) == after
