"""The results store, the submissions queue and the worker: submit, claim, lease expiry, rescore."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.runner import score_submission
from idbench.evaluate_pkg.submission import SubmissionError
from idbench.leaderboard.queue import claim, finish, jobs_table, rescore_all, submit
from idbench.leaderboard.store import MIGRATIONS, LeaseLostError, Store
from idbench.leaderboard.worker import run_worker

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

TINY = ScoreOptions(profile="tiny", metrics=("clip_t",))


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    """A built identity-collapse benchmark and its collage baseline (small images: quick to score)."""
    root = tmp_path_factory.mktemp("collapse")
    build("identity-collapse", out=root / "data")
    data = load_benchmark_data(root / "data")
    make_baseline("collage", data, root / "collage", size=128)
    return root


@pytest.fixture
def store(warm_home, monkeypatch) -> Store:
    """A fresh store whose feature cache is the session's (``warm_home``): the pictures are scored once."""
    monkeypatch.setenv("IDBENCH_HOME", str(warm_home))
    return Store()


def test_store_lives_under_idbench_home_in_wal_mode(store, tmp_path):
    assert store.home == tmp_path / "home" and store.path.is_file()
    assert store.schema_version() == len(MIGRATIONS) == 7
    Store()  # opening again migrates nothing
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"schema_version", "submissions", "jobs", "results", "standings"} <= tables


def test_submit_stores_files_and_queues_pending(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data", submitter="alice")
    assert not result.duplicate
    [row] = jobs_table(store)
    assert row["job"] == result.job_id and row["state"] == "PENDING" and row["model"] == "baseline-collage"
    assert row["submitter"] == "alice" and row["attempts"] == 0
    submission = store.submission(result.submission_id)
    stored = Path(submission["stored_path"])
    assert stored == store.submissions_dir / submission["content_hash"] and len(submission["content_hash"]) == 64
    assert (stored / "submission.json").is_file() and (stored / "manifest.csv").is_file()
    manifest = pd.read_csv(stored / "manifest.csv", dtype=str)
    assert len(manifest) == len(pd.read_csv(collapse / "collage" / "manifest.csv"))
    assert all((stored / file).is_file() for file in manifest["file"])
    assert submission["benchmark"] == "identity-collapse" and len(submission["benchmark_version"]) == 32
    assert not any(p.name.startswith(".") for p in store.submissions_dir.iterdir())  # no staging left


def test_invalid_submission_stores_and_queues_nothing(store, collapse, tmp_path):
    broken = shutil.copytree(collapse / "collage", tmp_path / "broken")
    first = sorted((broken / "images").iterdir())[0]
    first.unlink()
    with pytest.raises(SubmissionError) as error:
        submit(store, broken, collapse / "data")
    assert any(first.name in str(p) for p in error.value.problems)
    assert jobs_table(store) == []
    assert not store.submissions_dir.exists() or not any(store.submissions_dir.iterdir())


def test_duplicate_is_recognised_also_as_a_zip_but_not_under_another_model(store, collapse, tmp_path):
    first = submit(store, collapse / "collage", collapse / "data")
    archive = shutil.make_archive(str(tmp_path / "collage"), "zip", collapse / "collage")
    again = submit(store, Path(archive), collapse / "data")
    assert again.duplicate and (again.submission_id, again.job_id) == (first.submission_id, first.job_id)
    other = submit(store, collapse / "collage", collapse / "data", model_name="renamed")
    assert not other.duplicate and other.submission_id != first.submission_id
    assert (
        json.loads((Path(store.submission(other.submission_id)["stored_path"]) / "submission.json").read_text())[
            "model"
        ]
        == "renamed"
    )
    assert len(jobs_table(store)) == 2


@pytest.mark.slow
def test_worker_once_scores_and_finishes(tmp_path, monkeypatch, collapse):
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "cold-home"))
    monkeypatch.setenv("IDBENCH_CACHE", str(tmp_path / "cold-cache"))  # a feature cache of its own: checked below
    store = Store()
    result = submit(store, collapse / "collage", collapse / "data")
    assert run_worker(store, once=True, options=TINY) == 1
    [row] = jobs_table(store)
    assert row["state"] == "FINISHED" and row["reason"] is None and row["attempts"] == 1
    [res] = store.results(result.submission_id)
    assert (
        res["current"]
        and res["suite_version"] == get_benchmark(res["benchmark"]).suite_version
        and res["profile"] == "tiny"
        and res["plumbing"]
    )
    assert "clip" in res["models"] and {"hub_id", "revision"} <= set(res["models"]["clip"])
    assert res["benchmark_version"] == store.submission(result.submission_id)["benchmark_version"]
    out = Path(res["results_path"])
    assert out == store.results_dir / str(result.submission_id) / str(result.job_id)
    assert (out / "results.parquet").is_file() and (out / "report.md").is_file()
    assert res["aggregates"] == json.loads((out / "aggregates.json").read_text())["aggregates"]
    # One feature cache: the worker filled $IDBENCH_CACHE/features (what `idbench env` names), none under the
    # store's home, and a plain scoring of the same submission afterwards computes nothing again.
    assert store.features_dir == tmp_path / "cold-cache" / "features" and any(store.features_dir.rglob("*.npz"))
    assert not (tmp_path / "cold-home" / "features").exists()
    again = score_submission(collapse / "collage", collapse / "data", None, TINY, progress=False)
    assert sum(again["features"]["computed"].values()) == 0 and sum(again["features"]["cached"].values()) > 0
    board = store.current_results("identity-collapse")
    assert list(board["model_name"]) == ["baseline-collage"] and board["current"].all()
    assert run_worker(store, once=True, options=TINY) == 0  # drained


@pytest.mark.slow
def test_lease_expiry_reclaims_a_killed_workers_job(store, collapse, tmp_path, shared_features):
    result = submit(store, collapse / "collage", collapse / "data")
    dead = claim(store, "killed-worker", lease_seconds=0.2)
    assert dead is not None and dead.id == result.job_id
    assert claim(store, "other", lease_seconds=60) is None  # leased: nobody else may take it
    time.sleep(0.3)
    assert run_worker(store, once=True, options=TINY, worker_id="rescuer") == 1
    job = store.job(result.job_id)
    assert job["state"] == "FINISHED" and job["attempts"] == 2 and job["lease_owner"] == "rescuer"
    with pytest.raises(LeaseLostError):  # the "killed" worker waking up cannot record anything
        finish(store, dead, {}, tmp_path)
    [res] = store.results(result.submission_id)
    clean = score_submission(
        collapse / "collage", collapse / "data", None, TINY, cache_dir=shared_features, progress=False
    )
    assert res["aggregates"] == json.loads(json.dumps(clean["aggregates"], sort_keys=True, default=str))


@pytest.mark.slow
def test_rescore_all_keeps_old_results_versioned(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")
    run_worker(store, once=True, options=TINY)
    jobs = rescore_all(store)
    assert len(jobs) == 1 and rescore_all(store) == []  # already queued: not twice
    run_worker(store, once=True, options=TINY)
    old, new = store.results(result.submission_id)
    assert not old["current"] and new["current"] and new["job_id"] == jobs[0] and old["job_id"] == result.job_id
    assert Path(old["results_path"]).is_dir() and Path(new["results_path"]).is_dir()
    assert old["aggregates"] == new["aggregates"]  # same suite, same features: same numbers
    assert len(store.current_results("identity-collapse")) == 1


# --- concurrent workers --------------------------------------------------------------------------


def _fake_scorer(submission, data_dir, out, options, cache_dir):
    """Record who scored what (one appended line per scoring: job id, worker pid) and return a minimal summary."""
    time.sleep(0.02)  # long enough for the workers to interleave
    with open(Path(out).parents[2] / "scored.log", "a") as handle:  # out: <home>/results/<submission>/<job>
        handle.write(f"{out.name} {os.getpid()}\n")  # the output folder is results/<submission>/<job>
    return {
        "benchmark": "identity-collapse",
        "suite_version": "fake",
        "profile": options.profile,
        "plumbing": True,
        "idbench_version": "0",
        "models": {},
        "aggregates": {"overall": {"score": {"mean": float(out.name)}}},
        "not_run": {},
    }


def _worker_process(home: str, barrier) -> None:
    barrier.wait(timeout=120)  # start together, so that the claims really race
    run_worker(Store(Path(home)), once=True, options=TINY, scorer=_fake_scorer)


@pytest.mark.browser
@pytest.mark.slow
def test_concurrent_workers_never_claim_twice_and_lose_nothing(store, monkeypatch):
    # Spawned children re-run the parent's __main__ file; after an in-process AppTest that file is the
    # Streamlit app, which must not run outside Streamlit. The workers need no __main__ of ours.
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    for k in range(20):
        store.add_submission(
            benchmark="identity-collapse",
            benchmark_version="v",
            data_dir=Path("/nowhere"),
            model_name=f"model-{k}",
            metadata={"model": f"model-{k}"},
            content_hash=f"{k:064x}",
            stored_path=Path("/nowhere"),
        )
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_worker_process, args=(str(store.home), barrier)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=180)
    for process in processes:
        if process.is_alive():
            process.kill()
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    lines = (store.home / "scored.log").read_text().split()
    scored = [int(job_id) for job_id in lines[0::2]]
    assert sorted(scored) == list(range(1, 21))  # each job scored exactly once, none lost
    table = jobs_table(store)
    assert all(row["state"] == "FINISHED" and row["attempts"] == 1 for row in table)
    assert len({row["job"] for row in table}) == 20
    assert len(store.results()) == 20 and len(store.current_results("identity-collapse")) == 20
    assert len(set(lines[1::2])) > 1  # the work really was shared


# --- a full or failing disk: one line naming the path, from every command (issue 29, item 5) ---------


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("disk I/O error"),
        sqlite3.OperationalError("database or disk is full"),
        OSError(28, "No space left on device"),
    ],
    ids=["io-error", "sqlite-full", "enospc"],
)
def test_a_failing_store_is_one_line_naming_it_for_jobs_and_submit(store, collapse, monkeypatch, capsys, error):
    from idbench.cli import main

    def broken(self):
        raise error

    monkeypatch.setattr(Store, "_connect", broken)
    for argv in (
        ["jobs"],
        [
            "submit",
            str(collapse / "collage"),
            "--benchmark",
            "identity-collapse",
            "--data",
            str(collapse / "data"),
            "--model-name",
            "m",
        ],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"idbench {argv[0]}: error: ") and str(store.path) in err


def test_a_full_disk_while_storing_the_files_of_a_submission_is_one_line(store, collapse, monkeypatch, capsys):
    import errno

    from idbench.cli import main

    real = Path.write_bytes

    def full(self, data):
        if "submissions" in self.parts:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    assert (
        main(
            [
                "submit",
                str(collapse / "collage"),
                "--benchmark",
                "identity-collapse",
                "--data",
                str(collapse / "data"),
                "--model-name",
                "m",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith("idbench submit: error: disk full")
        and str(store.submissions_dir) in err
    )
    assert jobs_table(store) == []  # nothing queued


def test_a_bug_in_the_stores_sql_keeps_its_traceback(store):
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        with store.transaction(immediate=False) as db:
            db.execute("SELECT * FROM no_such_table")


@pytest.mark.e2e
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_real_file_size_limit_is_one_line_not_a_traceback(tmp_path):
    """A real write failure: the command runs with RLIMIT_FSIZE of 2 KB (SQLite cannot grow the store's file)."""
    import resource
    import signal
    import subprocess

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    env = dict(os.environ, IDBENCH_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-m", "idbench", "jobs"],
        preexec_fn=limited,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and str(tmp_path / "home" / "leaderboard.sqlite3") in done.stderr
