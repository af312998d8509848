"""The Hub-backed queue (leaderboard/queue/hub.py) against the local stand-in of a Hub dataset repo.

Offline: every repo is a ``LocalRepoStandIn`` under tmp_path (the CLI reaches it through
``IDBENCH_HUB_STAND_IN``). Scoring uses the tiny profile and one metric, as the local worker's tests do.
A tiny-profile result is a plumbing check and is never published, so the tests that need published
results wrap the real scorer and mark its summary as a real run, as filled_store.py does for the app.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import zipfile

import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.submission import Problem, SubmissionError
from idbench.leaderboard import worker
from idbench.leaderboard.hubrepo import FileAdd, LocalRepoStandIn
from idbench.leaderboard.queue import MAX_ATTEMPTS, benchmark_version
from idbench.leaderboard.queue import hub as hub_queue
from idbench.leaderboard.queue.hub import (
    Request,
    claim_request,
    list_requests,
    run_hub_worker,
    submit_request,
    withdraw,
)
from idbench.leaderboard.worker import WorkerFaultError, WorkerNotReadyError

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

BENCH = "identity-collapse"
TINY = ScoreOptions(profile="tiny", metrics=("clip_t",))


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    root = tmp_path_factory.mktemp("collapse")
    build(BENCH, out=root / "data")
    make_baseline("collage", load_benchmark_data(root / "data"), root / "collage", size=128)
    return root


@pytest.fixture
def repos(tmp_path):
    return LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests"), LocalRepoStandIn(
        tmp_path / "hub" / "org" / "results", "org/results"
    )


def _record(repo, path) -> dict:
    return json.loads((repo.snapshot(repo.head()) / path).read_text())


def _log(repo) -> list[str]:
    return (repo.root / "log").read_text().splitlines()


def _raising(error):
    def scorer(submission, data_dir, out, options, cache_dir):
        raise error

    return scorer


def _published(submission, data_dir, out, options, cache_dir):
    """The real tiny scorer, its summary marked as a real run (so that the worker publishes it)."""
    summary = hub_queue.score_request(submission, data_dir, out, options, cache_dir)
    return dict(summary, plumbing=False, profile="standard")


# --- submit ------------------------------------------------------------------------------------------


def test_submit_request_commits_record_and_zip_once(repos, collapse):
    requests, _ = repos
    ref = submit_request(
        requests, collapse / "collage", collapse / "data", "org/collage", family="Collages", submitter="alice"
    )
    assert not ref.duplicate and requests.head() == ref.revision and len(_log(requests)) == 1  # one commit
    assert ref.path == f"{BENCH}/org__collage/{ref.content_hash[:12]}.json" and ref.files == ref.path[:-5] + ".zip"
    record = _record(requests, ref.path)
    assert record["state"] == "PENDING" and record["attempts"] == 0 and record["worker"] is None
    assert record["model"] == "org/collage" and record["benchmark_version"] == benchmark_version(collapse / "data")
    assert (
        record["metadata"] == {"family": "Collages", "link": None, "model": "org/collage"}
        and record["task"] == "reference"
    )
    assert b"alice" not in (requests.snapshot(ref.revision) / ref.path).read_bytes()  # the submitter is not published
    with zipfile.ZipFile(requests.snapshot(ref.revision) / ref.files) as zf:
        names = zf.namelist()
        assert json.loads(zf.read("submission.json"))["model"] == "org/collage"
    n_images = len(pd.read_csv(collapse / "collage" / "manifest.csv"))
    assert {"submission.json", "manifest.csv"} <= set(names) and all(
        n.startswith("images/") for n in set(names) - {"submission.json", "manifest.csv"}
    )
    assert 0 < len(names) - 2 <= n_images
    again = submit_request(requests, collapse / "collage", collapse / "data", "org/collage")
    assert again.duplicate and again.path == ref.path and len(_log(requests)) == 1  # nothing committed


def test_a_malformed_submission_commits_nothing(repos, collapse, tmp_path):
    requests, _ = repos
    broken = shutil.copytree(collapse / "collage", tmp_path / "broken")
    first = sorted((broken / "images").iterdir())[0]
    first.write_bytes(b"not an image")
    with pytest.raises(SubmissionError, match=first.name):
        submit_request(requests, broken, collapse / "data")
    assert requests.head() is None


# --- claims ------------------------------------------------------------------------------------------


def _fake_requests(requests, n: int) -> list[str]:
    """``n`` PENDING records (no real files: a claim never reads them), in one commit."""
    paths, ops = [], []
    for k in range(n):
        digest = f"{k:02d}" + "a" * 62
        path = f"{BENCH}/m{k}/{digest[:12]}.json"
        record = Request(
            path=path,
            model=f"m{k}",
            benchmark=BENCH,
            benchmark_version="v",
            content_hash=digest,
            state="PENDING",
            submitted_at=f"2025-01-01T00:00:{k:02d}+00:00",
            files=path[:-5] + ".zip",
        )
        ops.append(FileAdd(path, data=record.to_bytes()))
        paths.append(path)
    requests.commit(ops, "seed", parent=requests.head())
    return paths


@pytest.mark.slow
def test_two_workers_never_win_the_same_request(repos):
    requests, _ = repos
    paths = _fake_requests(requests, 8)
    won: dict[str, list[str]] = {"w1": [], "w2": [], "w3": []}
    start = threading.Barrier(len(won))

    def work(worker: str) -> None:
        start.wait()
        while (claim := claim_request(requests, worker, lease_seconds=600)) is not None:
            won[worker].append(claim.request.path)

    threads = [threading.Thread(target=work, args=(w,)) for w in won]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    claimed = [path for paths_won in won.values() for path in paths_won]
    assert sorted(claimed) == sorted(paths)  # each request claimed exactly once, by one worker
    # The repo's own history agrees: one claim commit per request, oldest request first per worker.
    claims = [line.split()[2] for line in _log(requests) if line.split()[1] == "claim"]
    assert sorted(claims) == sorted(paths)
    for name, paths_won in won.items():
        assert paths_won == sorted(paths_won)
        assert all(_record(requests, p)["worker"] == name and _record(requests, p)["attempts"] == 1 for p in paths_won)


def test_expired_leases_are_claimed_again_then_parked(repos):
    requests, _ = repos
    [path] = _fake_requests(requests, 1)
    for attempt in range(1, MAX_ATTEMPTS + 1):  # each worker killed at once: its lease has run out
        claim = claim_request(requests, f"killed-{attempt}", lease_seconds=-5)
        assert claim is not None and claim.attempts == attempt
    assert claim_request(requests, "next", lease_seconds=600) is None
    record = _record(requests, path)
    assert (
        record["state"] == "PARKED"
        and "lease expired" in record["reason"]
        and "not a fault of the submission" in record["reason"]
    )


def test_a_malformed_record_is_reported_by_path_and_skipped(repos, caplog, capsys, tmp_path, monkeypatch):
    requests, _ = repos
    [good] = _fake_requests(requests, 1)
    bad = f"{BENCH}/broken/0123456789ab.json"
    requests.commit([FileAdd(bad, data=b"{not json")], "a broken record", parent=requests.head())
    with caplog.at_level(logging.WARNING, logger="idbench.leaderboard.queue.hub"):
        assert [r.path for r in list_requests(requests)] == [good]
    assert bad in caplog.text
    claim = claim_request(requests, "w", 600)
    assert claim is not None and claim.request.path == good  # the bad file does not stop a worker
    monkeypatch.setenv("IDBENCH_HUB_STAND_IN", str(tmp_path / "hub"))
    assert main(["jobs", "--hub", "org/requests"]) == 0
    out, err = capsys.readouterr()
    assert good in out and "RUNNING" in out and bad in err and bad not in out


# --- the worker --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_worker_fault_puts_the_request_back_then_parks_it(repos, collapse, tmp_path, monkeypatch, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    data_dirs = {BENCH: collapse / "data"}
    oom = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with pytest.raises(WorkerFaultError, match="back in the queue" if attempt < MAX_ATTEMPTS else "parked"):
            run_hub_worker(requests, results, data_dirs, TINY, once=True, scorer=_raising(oom), home=warm_home)
        record = _record(requests, ref.path)
        assert record["attempts"] == attempt and record["worker"] is None and "CUDA out of memory" in record["reason"]
        assert record["state"] == ("PENDING" if attempt < MAX_ATTEMPTS else "PARKED")
        assert (warm_home / "logs" / f"{ref.path[:-5].replace('/', '--')}-attempt-{attempt}.log").is_file()
    assert "back in the queue" not in record["reason"] and "not a fault of the submission" in record["reason"]
    assert run_hub_worker(requests, results, data_dirs, TINY, once=True, scorer=_raising(oom), home=warm_home) == 0
    assert results.head() is None
    monkeypatch.setenv("IDBENCH_HUB_STAND_IN", str(tmp_path / "hub"))  # an admin requeues it once the workers are fixed
    assert main(["rescore", "--hub", "org/requests", "--request", ref.content_hash[:12]]) == 0
    assert _record(requests, ref.path)["state"] == "PENDING" and _record(requests, ref.path)["attempts"] == 0


@pytest.mark.slow
def test_submission_fault_ends_failed_with_the_reason(repos, collapse, tmp_path, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    fault = SubmissionError([Problem("01", 0, "images/x.png", "does not decode")])
    assert (
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=_raising(fault), home=warm_home
        )
        == 1
    )
    record = _record(requests, ref.path)
    assert record["state"] == "FAILED" and record["attempts"] == 1
    assert "SubmissionError" in record["reason"] and "images/x.png" in record["reason"] and "\n" not in record["reason"]
    assert results.head() is None


@pytest.mark.slow
def test_files_that_are_not_the_requested_ones_fail_the_request(repos, collapse, tmp_path, warm_home):
    """The worker validates the download again and checks it is what the record names (untrusted input)."""
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(requests.snapshot(ref.revision) / ref.files) as src, zipfile.ZipFile(other, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "submission.json":  # the same images under another model name
                data = json.dumps(dict(json.loads(data), model="forged")).encode()
            dst.writestr(name, data)
    requests.commit([FileAdd(ref.files, local_path=other)], "swap the zip", parent=requests.head())
    assert run_hub_worker(requests, results, {BENCH: collapse / "data"}, TINY, once=True, home=warm_home) == 1
    record = _record(requests, ref.path)
    assert (
        record["state"] == "FAILED" and "not the ones the request names" in record["reason"] and results.head() is None
    )


@pytest.mark.slow
def test_a_misconfigured_worker_claims_nothing(repos, collapse, tmp_path, monkeypatch, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    head = requests.head()
    # another build of the benchmark: its version differs from the one the request was submitted against
    rebuilt = shutil.copytree(collapse / "data", tmp_path / "rebuilt")
    (rebuilt / "extra.txt").write_text("a changed build\n")
    with pytest.raises(WorkerNotReadyError, match="submitted against build") as error:
        run_hub_worker(requests, results, {BENCH: rebuilt}, TINY, once=True, home=warm_home)
    assert ref.path in str(error.value)
    with pytest.raises(WorkerNotReadyError, match=f"no benchmark data for it \\(--data {BENCH}=DIR\\)"):
        run_hub_worker(requests, results, {}, TINY, once=True, home=warm_home)
    monkeypatch.setenv("IDBENCH_MODELS", str(tmp_path / "no-models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub-cache"))
    with pytest.raises(WorkerNotReadyError, match="model\\(s\\) of profile 'paper' not on this machine"):
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, ScoreOptions(profile="paper"), once=True, home=warm_home
        )
    assert requests.head() == head and _record(requests, ref.path)["state"] == "PENDING" and results.head() is None


@pytest.mark.slow
def test_requests_of_an_older_build_are_skipped_not_blocking(repos, collapse, tmp_path, caplog, warm_home):
    """After a benchmark update: one request of the old build (seeded, oldest), one of this build. The
    worker serves the latter and leaves the former PENDING with a warning naming it."""
    requests, results = repos
    [stale] = _fake_requests(requests, 1)  # benchmark_version "v": not this build
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    with caplog.at_level(logging.WARNING):
        assert run_hub_worker(requests, results, {BENCH: collapse / "data"}, TINY, once=True, home=warm_home) == 1
    assert _record(requests, ref.path)["state"] == "FINISHED"
    assert _record(requests, stale)["state"] == "PENDING" and _record(requests, stale)["attempts"] == 0
    assert stale in caplog.text and "skipping those" in caplog.text


@pytest.mark.slow
def test_results_pushed_match_the_layout_and_withdraw_removes_them(repos, collapse, tmp_path, warm_home):
    requests, results = repos
    ref = submit_request(
        requests,
        collapse / "collage",
        collapse / "data",
        "org/collage",
        family="Collages",
        link="https://example.org/c",
    )
    out = warm_home
    assert (
        run_hub_worker(requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=_published, home=out) == 1
    )
    record = _record(requests, ref.path)
    assert record["state"] == "FINISHED" and record["attempts"] == 1 and record["lease_until"] is None
    folder = f"{BENCH}/org__collage/{ref.content_hash[:12]}"
    files = results.snapshot(results.head())
    assert sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()) == [
        f"{folder}/aggregates.json",
        f"{folder}/results.parquet",
    ]
    # compared by hand with what the scorer wrote locally (its own aggregates.json)
    summary = json.loads((out / "hub-worker" / folder / "attempt-1" / "aggregates.json").read_text())
    published = json.loads((files / folder / "aggregates.json").read_text())
    assert published["model"] == "org/collage" and published["benchmark"] == BENCH
    assert (
        published["benchmark_version"] == benchmark_version(collapse / "data")
        and published["content_hash"] == ref.content_hash
    )
    assert published["aggregates"] == summary["aggregates"] and published["models"] == summary["models"]
    assert published["not_run"] == summary["not_run"] and published["suite_version"] == summary["suite_version"]
    assert published["idbench_version"] == summary["idbench_version"] and published["profile"] == "standard"
    assert published["task"] == "reference" and published["metadata"] == {
        "family": "Collages",
        "link": "https://example.org/c",
    }
    assert published["samples"] == f"{folder}/results.parquet" and published["scored_at"]
    samples = pd.read_parquet(files / folder / "results.parquet")
    assert set(samples["metric"]) >= {"clip_t"} and len(samples) == len(
        pd.read_parquet(out / "hub-worker" / folder / "attempt-1" / "results.parquet")
    )
    # results first, then FINISHED: the results commit precedes the finish commit
    assert [line.split()[1] for line in _log(requests)] == ["submit", "claim", "finish"]

    request, deleted = withdraw(requests, results, ref.content_hash[:12], "asked by the authors")
    assert request.state == "WITHDRAWN" and _record(requests, ref.path)["reason"] == "asked by the authors"
    assert deleted == [f"{folder}/aggregates.json", f"{folder}/results.parquet"]
    assert not any(p.is_file() for p in results.snapshot(results.head()).rglob("*"))
    assert (
        run_hub_worker(requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=_published, home=out) == 0
    )


@pytest.mark.slow
def test_plumbing_results_are_never_published(repos, collapse, tmp_path, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    assert run_hub_worker(requests, results, {BENCH: collapse / "data"}, TINY, once=True, home=warm_home) == 1
    record = _record(requests, ref.path)
    assert record["state"] == "FINISHED" and "plumbing check" in record["reason"] and results.head() is None


@pytest.mark.slow
def test_dry_run_lists_and_commits_nothing(repos, collapse, tmp_path, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    head = requests.head()
    lines: list[str] = []
    assert (
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, TINY, dry_run=True, home=warm_home, echo=lines.append
        )
        == 1
    )
    assert lines == [f"would claim {ref.path}  PENDING  attempts 0"]
    assert requests.head() == head and results.head() is None


# --- the command line, end to end --------------------------------------------------------------------


@pytest.mark.slow
def test_cli_hub_worker_end_to_end_on_the_stand_in(collapse, tmp_path, monkeypatch, capsys, caplog, warm_home):
    monkeypatch.setenv("IDBENCH_HUB_STAND_IN", str(tmp_path / "hub"))
    monkeypatch.setenv("IDBENCH_HOME", str(warm_home))
    # The one worker loop's default scorer (local and Hub alike), wrapped to publish its summary.
    monkeypatch.setattr(worker, "score_work", _real_then_published(worker.score_work))
    data = f"{BENCH}={collapse / 'data'}"
    assert (
        main(
            [
                "submit",
                str(collapse / "collage"),
                "--benchmark",
                BENCH,
                "--data",
                str(collapse / "data"),
                "--hub",
                "org/requests",
            ]
        )
        == 0
    )
    assert "requested: org/requests:" in capsys.readouterr().out
    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    results = LocalRepoStandIn(tmp_path / "hub" / "org" / "results", "org/results")
    [request] = list_requests(requests)

    assert (
        main(
            [
                "worker",
                "--hub",
                "org/requests",
                "--results",
                "org/results",
                "--data",
                data,
                "--profile",
                "tiny",
                "--dry-run",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert f"would claim {request.path}" in out and "nothing was changed" in out
    assert "org/results: using the LOCAL STAND-IN" in caplog.text  # said, in the log
    assert (
        main(
            [
                "worker",
                "--hub",
                "org/requests",
                "--results",
                "org/results",
                "--data",
                data,
                "--profile",
                "tiny",
                "--once",
            ]
        )
        == 0
    )
    assert "worker finished 1 request(s)" in capsys.readouterr().out
    aggregates = results.snapshot(results.head()) / request.path.removesuffix(".json") / "aggregates.json"
    assert json.loads(aggregates.read_text())["content_hash"] == request.content_hash

    assert main(["jobs", "--hub", "org/requests"]) == 0
    assert f"FINISHED  attempts 1  {request.path}" in capsys.readouterr().out
    assert (
        main(
            [
                "withdraw",
                request.content_hash[:12],
                "--hub",
                "org/requests",
                "--results",
                "org/results",
                "--reason",
                "test",
            ]
        )
        == 0
    )
    assert "deleted 2 result file(s)" in capsys.readouterr().out
    assert not any(p.is_file() for p in results.snapshot(results.head()).rglob("*"))  # the stand-in keeps empty folders
    assert _record(requests, request.path)["state"] == "WITHDRAWN"

    # a misconfigured worker (another build of the benchmark): one line, exit 2, the requests repo as it was
    submit_request(requests, collapse / "collage", collapse / "data", "second")
    head = requests.head()
    rebuilt = shutil.copytree(collapse / "data", tmp_path / "rebuilt")
    (rebuilt / "extra.txt").write_text("a changed build\n")
    assert (
        main(
            [
                "worker",
                "--hub",
                "org/requests",
                "--results",
                "org/results",
                "--data",
                f"{BENCH}={rebuilt}",
                "--profile",
                "tiny",
                "--once",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("idbench worker: error: not ready, no request claimed") and "submitted against build" in err
    assert main(["worker", "--hub", "org/requests", "--once"]) == 2
    assert "needs both --hub ORG/REQUESTS and --results ORG/RESULTS" in capsys.readouterr().err
    assert requests.head() == head


def _real_then_published(real):
    def scorer(
        submission, data_dir, out, options, cache_dir, **keywords
    ):  # models=, progress=: as the worker passes them
        return dict(real(submission, data_dir, out, options, cache_dir, **keywords), plumbing=False, profile="standard")

    return scorer


@pytest.mark.slow
def test_a_request_withdrawn_while_it_is_scored_keeps_no_public_result(repos, collapse, tmp_path, warm_home):
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")

    def withdrawn_then_scored(submission, data_dir, out, options, cache_dir):
        summary = _published(submission, data_dir, out, options, cache_dir)
        withdraw(requests, results, ref.path, "withdrawn meanwhile")  # before the worker pushes
        return summary

    assert (
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=withdrawn_then_scored, home=warm_home
        )
        == 0
    )
    assert _record(requests, ref.path)["state"] == "WITHDRAWN"
    assert results.head() is None  # the lease check before the push saw the withdrawal: nothing pushed


@pytest.mark.slow
def test_a_withdrawal_between_the_lease_check_and_the_push_still_wins(
    repos, collapse, tmp_path, monkeypatch, warm_home
):
    """The narrow race: the worker has checked its lease, the withdrawal lands (deleting nothing: no results
    yet), then the worker pushes. Its FINISHED commit is refused, and it deletes what it pushed."""
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    real = hub_queue.result_operations

    def withdrawn_then_operations(*args, **kwargs):
        withdraw(requests, results, ref.path, "withdrawn during the push")
        return real(*args, **kwargs)

    monkeypatch.setattr(hub_queue, "result_operations", withdrawn_then_operations)
    assert (
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=_published, home=warm_home
        )
        == 0
    )
    assert _record(requests, ref.path)["state"] == "WITHDRAWN"
    pushed_then_deleted = results.snapshot(results.head())
    assert results.head() is not None and not any(p.is_file() for p in pushed_then_deleted.rglob("*"))


@pytest.mark.slow
def test_the_heartbeat_extends_the_lease_while_a_request_is_scored(repos, collapse, tmp_path, monkeypatch, warm_home):
    """A 3 s lease, renewed every second: the scorer waits (on an event, no fixed sleep) until two renewals
    landed, each a commit of lease_until; then the request finishes normally. (A 0.6 s lease expired on a
    loaded 2-core CI machine before its renewal's commit landed: the test measured the machine's load.)"""
    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data")
    leases, renewed = [], threading.Event()
    real = hub_queue.heartbeat

    def counted(repo, claim, lease_seconds, now=None):
        ok = real(repo, claim, lease_seconds, now)
        leases.append(_record(repo, ref.path)["lease_until"])
        if len(leases) >= 2:
            renewed.set()
        return ok

    def scorer(submission, data_dir, out, options, cache_dir):
        assert renewed.wait(60), "no heartbeat within 60 s"
        return _published(submission, data_dir, out, options, cache_dir)

    monkeypatch.setattr(hub_queue, "heartbeat", counted)
    assert (
        run_hub_worker(
            requests,
            results,
            {BENCH: collapse / "data"},
            TINY,
            once=True,
            scorer=scorer,
            home=warm_home,
            lease_seconds=3.0,
        )
        == 1
    )
    assert leases == sorted(leases)  # never moved back (ISO seconds: two renewals may share one)
    steps = [line.split()[1] for line in _log(requests)]
    assert steps[:2] == ["submit", "claim"] and steps[-1] == "finish" and steps.count("heartbeat") >= 2
    assert _record(requests, ref.path)["state"] == "FINISHED"


# --- the Space reads what a worker wrote ----------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.slow
def test_the_space_shows_results_a_worker_pushed(repos, collapse, tmp_path, monkeypatch, warm_home):
    """submit_request -> run_hub_worker -> results repo -> hub_mirror -> the app's benchmark and status pages."""
    from streamlit.testing.v1 import AppTest

    from idbench.leaderboard import hub_mirror
    from idbench.leaderboard.app import APP_PATH
    from idbench.leaderboard.hubrepo import STAND_IN_ENV
    from idbench.leaderboard.store import Store

    requests, results = repos
    ref = submit_request(requests, collapse / "collage", collapse / "data", "org/collage", family="Collages")
    assert (
        run_hub_worker(
            requests, results, {BENCH: collapse / "data"}, TINY, once=True, scorer=_published, home=warm_home
        )
        == 1
    )
    published = json.loads(
        (results.snapshot(results.head()) / f"{BENCH}/org__collage/{ref.content_hash[:12]}/aggregates.json").read_text()
    )

    info = hub_mirror.mirror(requests, results, tmp_path / "space")
    [row] = Store(info.store_home).current_results(BENCH).to_dict("records")
    assert (row["model_name"], row["content_hash"], row["submitter"]) == ("org/collage", ref.content_hash, None)
    assert row["aggregates"] == published["aggregates"] and row["metadata"]["family"] == "Collages"

    monkeypatch.setenv(STAND_IN_ENV, str(tmp_path / "hub"))
    monkeypatch.setenv("IDBENCH_HUB_REQUESTS", "org/requests")
    monkeypatch.setenv("IDBENCH_HUB_RESULTS", "org/results")
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "space-app"))
    monkeypatch.setenv(hub_mirror.REFRESH_ENV, "0")
    at = AppTest.from_file(str(APP_PATH), default_timeout=120).run()
    at.switch_page("views/status.py").run()
    assert not at.exception
    [jobs] = at.dataframe
    assert jobs.value["model"].tolist() == ["org/collage"] and jobs.value["state"].tolist() == ["FINISHED"]
    at.switch_page("views/benchmark.py").run()
    assert not at.exception
    # one metric scored (clip_t): an incomplete suite, listed once that switch is on
    at.checkbox(key=f"{BENCH}-incomplete").check().run()
    # the collage pastes its references: shown apart (the copy check) until that switch is on too
    at.checkbox(key=f"{BENCH}-copies").check().run()
    from test_hub_mirror import model_names

    assert "org/collage" in model_names(at.dataframe[0].value["model"])
