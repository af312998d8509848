"""The Hub mirror: request and result files written by hand into the local stand-in repos, read back as a store.

Every file here is written from the layout in the contract (requests ``<b>/<slug>/<hash12>.json``,
results ``<b>/<slug>/<hash12>/aggregates.json`` + ``results.parquet``), never by the code under test,
and the expected rows are the hand-written values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import hub_mirror
from idbench.leaderboard.hubrepo import FileAdd, FileDelete, LocalRepoStandIn
from idbench.leaderboard.queue import jobs_table
from idbench.leaderboard.store import Store

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def model_names(links) -> list[str]:
    """The model names of a benchmark table, whose model cells link to ``./model?...&model=<name>``."""
    from urllib.parse import parse_qs, urlsplit

    return [parse_qs(urlsplit(url).query)["model"][0] for url in links]


BENCHMARK = "identity-collapse"
HASH_A = "a" * 64
HASH_B = "b" * 64
HASH_C = "c" * 64


def aggregates(dino: float) -> dict:
    """A hand-made, complete overall block: every metric of the suite, dino_sim as given."""
    spec = get_benchmark(BENCHMARK)
    overall = {m.name: {"mean": 0.25, "ci_low": 0.2, "ci_high": 0.3, "n": 10} for m in spec.task_metrics("reference")}
    overall["dino_sim"] = {"mean": dino, "ci_low": dino - 0.05, "ci_high": dino + 0.05, "n": 10}
    return {"overall": overall, "breakdowns": {}}


def result_record(model: str, digest: str, dino: float, slug: str | None = None, **extra) -> dict:
    folder = f"{BENCHMARK}/{slug or model}/{digest[:12]}"
    return {
        "model": model,
        "benchmark": BENCHMARK,
        "benchmark_version": "v1",
        "suite_version": "s1",
        "idbench_version": "0.1.0",
        "profile": "paper",
        "models": {"dino": "facebook/dinov2-base@abc"},
        "aggregates": aggregates(dino),
        "not_run": {},
        "scored_at": "2026-01-02T03:04:05+00:00",
        "content_hash": digest,
        "samples": f"{folder}/results.parquet",
        "task": "reference",
        "metadata": {"family": "Hand-made", "link": "https://example.org/model"},
    } | extra


def request_record(model: str, digest: str, state: str, **extra) -> dict:
    return {
        "schema": 1,
        "model": model,
        "benchmark": BENCHMARK,
        "benchmark_version": "v1",
        "content_hash": digest,
        "task": "reference",
        "metadata": {"family": "Hand-made", "link": "https://example.org/model", "model": model},
        "state": state,
        "submitted_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T01:00:00+00:00",
        "attempts": 1 if state != "PENDING" else 0,
        "worker": None,
        "lease_until": None,
        "reason": None,
        "files": f"{BENCHMARK}/{model}/{digest[:12]}.zip",
    } | extra


def _json(record: dict) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def samples_parquet(tmp_path, values: list[float]) -> bytes:
    frame = pd.DataFrame(
        {"prompt_id": [f"p{i}" for i in range(len(values))], "seed": 0, "metric": "dino_sim", "value": values}
    )
    path = tmp_path / "samples.parquet"
    frame.to_parquet(path, index=False)
    return path.read_bytes()


def add_result(repo: LocalRepoStandIn, record: dict, parquet: bytes | None) -> str:
    folder = record["samples"].rsplit("/", 1)[0] if record.get("samples") else None
    folder = folder or f"{BENCHMARK}/{record['model']}/{record['content_hash'][:12]}"
    ops = [FileAdd(f"{folder}/aggregates.json", data=_json(record))]
    if parquet is not None:
        ops.append(FileAdd(f"{folder}/results.parquet", data=parquet))
    return repo.commit(ops, "result", repo.head())


def add_request(repo: LocalRepoStandIn, record: dict) -> str:
    path = f"{BENCHMARK}/{record['model']}/{record['content_hash'][:12]}.json"
    return repo.commit([FileAdd(path, data=_json(record))], "request", repo.head())


def add_scored(
    requests: LocalRepoStandIn,
    results: LocalRepoStandIn,
    model: str,
    digest: str,
    dino: float,
    parquet: bytes | None = None,
) -> None:
    """A FINISHED request and its result: the two commits a worker makes (a result is shown only with its request)."""
    add_request(requests, request_record(model, digest, "FINISHED"))
    add_result(results, result_record(model, digest, dino), parquet)


@pytest.fixture
def repos(tmp_path):
    return LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests"), LocalRepoStandIn(
        tmp_path / "hub" / "org" / "results", "org/results"
    )


def test_results_and_requests_become_the_stores_rows(repos, tmp_path):
    requests, results = repos
    add_request(requests, request_record("model-a", HASH_A, "FINISHED"))
    add_request(requests, request_record("model-b", HASH_B, "FAILED", reason="3 images are not 512x512"))
    add_result(results, result_record("model-a", HASH_A, 0.71), samples_parquet(tmp_path, [0.5, 0.9]))

    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert (info.requests_revision, info.results_revision) == (requests.head(), results.head())
    assert (info.submissions, info.results, info.skipped) == (2, 1, ())

    store = Store(info.store_home)
    [row] = store.current_results(BENCHMARK).to_dict("records")
    assert row["model_name"] == "model-a" and row["content_hash"] == HASH_A and row["submitter"] is None
    assert row["aggregates"]["overall"]["dino_sim"] == {
        "mean": 0.71,
        "ci_low": 0.71 - 0.05,
        "ci_high": 0.71 + 0.05,
        "n": 10,
    }
    assert (row["profile"], row["suite_version"], row["benchmark_version"], row["plumbing"]) == (
        "paper",
        "s1",
        "v1",
        False,
    )
    assert row["metadata"] == {"family": "Hand-made", "link": "https://example.org/model", "model": "model-a"}
    assert row["models"] == {"dino": "facebook/dinov2-base@abc"}
    assert pd.read_parquet(f"{row['results_path']}/results.parquet")["value"].tolist() == [0.5, 0.9]

    jobs = {job["model"]: job for job in jobs_table(store)}
    assert jobs["model-a"]["state"] == "FINISHED"
    assert (jobs["model-b"]["state"], jobs["model-b"]["reason"]) == ("FAILED", "3 images are not 512x512")
    assert jobs["model-b"]["created"] == "2026-01-01T00:00:00+00:00"


def test_a_sync_stores_the_boards_intervals_so_the_space_resamples_nothing(repos, tmp_path):
    from idbench.leaderboard import board

    requests, results = repos
    low = [0.2, 0.5, 0.3, 0.6, 0.4, 0.25, 0.55, 0.35]
    for model, digest, values in (("model-a", HASH_A, low), ("model-b", HASH_B, [v + 0.3 for v in low])):
        frame = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(8)], "seed": 0, "metric": "dino_sim_floored"})
        frame.assign(value=values).to_parquet(tmp_path / "samples.parquet", index=False)
        add_scored(requests, results, model, digest, sum(values) / 8, (tmp_path / "samples.parquet").read_bytes())
    store = Store(hub_mirror.mirror(requests, results, tmp_path / "mirror").store_home)
    shown = board.standings(store, BENCHMARK, metric="dino_sim_floored", filters={})
    # b is a + 0.3 on every prompt: told apart, first, by hand (the hand-made aggregates tie them at 0.25).
    assert dict(zip(shown.ranked["model"], shown.ranked["rank interval"])) == {"model-b": "1", "model-a": "2"}
    assert "8 prompt(s)" in shown.caption


def test_a_new_commit_is_mirrored_and_an_unchanged_head_is_not_rebuilt(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "model-a", HASH_A, 0.71)
    first = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert hub_mirror.mirror(requests, results, tmp_path / "mirror") == first  # same heads: the same build

    add_scored(requests, results, "model-b", HASH_B, 0.8)
    second = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert second.store_home != first.store_home and hub_mirror.current(tmp_path / "mirror") == second
    table = Store(second.store_home).current_results(BENCHMARK)
    assert sorted(table["model_name"]) == ["model-a", "model-b"]
    assert Store(first.store_home).current_results(BENCHMARK)["model_name"].tolist() == [
        "model-a"
    ]  # the old build is untouched


def test_a_withdrawn_result_disappears(repos, tmp_path):
    requests, results = repos
    add_request(requests, request_record("model-a", HASH_A, "FINISHED"))
    add_result(results, result_record("model-a", HASH_A, 0.71), samples_parquet(tmp_path, [0.5]))
    assert len(Store(hub_mirror.mirror(requests, results, tmp_path / "m").store_home).current_results(BENCHMARK)) == 1

    # Withdrawal, in the contract's two commits: the request marked WITHDRAWN, then the result files deleted.
    add_request(requests, request_record("model-a", HASH_A, "WITHDRAWN", reason="asked by the authors"))
    between = Store(hub_mirror.mirror(requests, results, tmp_path / "m").store_home)
    assert between.current_results(BENCHMARK).empty  # the files are still there, the withdrawn request hides them
    folder = f"{BENCHMARK}/model-a/{HASH_A[:12]}"
    results.commit(
        [FileDelete(f"{folder}/aggregates.json"), FileDelete(f"{folder}/results.parquet")], "withdraw", results.head()
    )
    after = Store(hub_mirror.mirror(requests, results, tmp_path / "m").store_home)
    assert after.current_results(BENCHMARK).empty and after.results() == []
    [job] = jobs_table(after)
    assert job["state"] == "FAILED" and job["reason"] == "withdrawn: asked by the authors" and job["withdrawn"]


@pytest.mark.slow
def test_malformed_files_are_skipped_and_reported_by_path(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "good", HASH_A, 0.7)
    bad = [
        FileAdd(f"{BENCHMARK}/broken/{HASH_B[:12]}/aggregates.json", data=b"{not json"),
        FileAdd(
            f"{BENCHMARK}/noagg/{HASH_C[:12]}/aggregates.json",
            data=_json({k: v for k, v in result_record("noagg", HASH_C, 0.1).items() if k != "aggregates"}),
        ),
        FileAdd(
            f"charis/moved/{'d' * 12}/aggregates.json", data=_json(result_record("moved", "d" * 64, 0.2, slug="moved"))
        ),
        FileAdd(
            f"{BENCHMARK}/tiny/{'e' * 12}/aggregates.json",
            data=_json(result_record("tiny", "e" * 64, 0.3, profile="tiny")),
        ),
    ]
    results.commit(bad, "bad files", results.head())
    requests.commit(
        [FileAdd(f"{BENCHMARK}/x/{'f' * 12}.json", data=_json(request_record("x", "f" * 64, "DONE")))],
        "bad",
        requests.head(),
    )

    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert Store(info.store_home).current_results(BENCHMARK)["model_name"].tolist() == ["good"]
    assert len(info.skipped) == 5
    by_path = {line.split(": ")[1]: line for line in info.skipped}
    assert by_path[f"{BENCHMARK}/broken/{HASH_B[:12]}/aggregates.json"].startswith("org/results: ")
    assert "not readable JSON" in by_path[f"{BENCHMARK}/broken/{HASH_B[:12]}/aggregates.json"]
    assert "'aggregates' is missing" in by_path[f"{BENCHMARK}/noagg/{HASH_C[:12]}/aggregates.json"]
    assert "does not match its folder 'charis'" in by_path[f"charis/moved/{'d' * 12}/aggregates.json"]
    assert "plumbing" in by_path[f"{BENCHMARK}/tiny/{'e' * 12}/aggregates.json"]
    assert "state 'DONE'" in by_path[f"{BENCHMARK}/x/{'f' * 12}.json"]
    assert hub_mirror.current(tmp_path / "mirror").skipped == info.skipped  # what the Status page reads


def test_records_of_the_older_sync_get_defaults(repos, tmp_path):
    requests, results = repos
    old = {
        "model": "old",
        "benchmark": BENCHMARK,
        "benchmark_version": "v1",
        "content_hash": HASH_A,
        "state": "PENDING",
        "submitted_at": "2026-01-01T00:00:00+00:00",
    }
    add_request(requests, old)
    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert info.skipped == ()
    [job] = jobs_table(Store(info.store_home))
    assert (job["state"], job["attempts"], job["model"]) == ("PENDING", 0, "old")
    assert Store(info.store_home).submission(1)["task"] == "reference"


def test_refresher_checks_heads_only_when_due_and_keeps_the_last_mirror_on_failure(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "model-a", HASH_A, 0.7)
    clock = [0.0]
    refresher = hub_mirror.Refresher(requests, results, tmp_path / "mirror", interval=300, clock=lambda: clock[0])
    first = refresher.get()
    add_scored(requests, results, "model-b", HASH_B, 0.8)
    clock[0] = 299.0
    assert refresher.get() == first  # not due yet: the new commit is not read
    clock[0] = 300.0
    assert refresher.get().results == 2

    class Down:
        repo_id = "org/results"

        def head(self):
            raise OSError("the Hub is unreachable")

    refresher.results = Down()
    clock[0] = 600.0
    kept = refresher.get()
    assert kept.results == 2 and refresher.error == "OSError: the Hub is unreachable"


def test_refresh_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(hub_mirror.REFRESH_ENV, raising=False)
    assert hub_mirror.refresh_interval() == 300
    monkeypatch.setenv(hub_mirror.REFRESH_ENV, "0")
    assert hub_mirror.refresh_interval() == 0
    monkeypatch.setenv(hub_mirror.REFRESH_ENV, "soon")
    with pytest.raises(ValueError, match="IDBENCH_HUB_REFRESH_S='soon'"):
        hub_mirror.refresh_interval()


# --- the app over the mirror (AppTest) ----------------------------------------------------------------

APP_TIMEOUT = 60


@pytest.fixture
def hub_app(tmp_path, monkeypatch):
    """The app configured as a Space (the two repo ids) over the local stand-in, refreshing on every rerun."""
    from idbench.leaderboard.hubrepo import STAND_IN_ENV

    monkeypatch.setenv(STAND_IN_ENV, str(tmp_path / "hub"))
    monkeypatch.setenv("IDBENCH_HUB_REQUESTS", "org/requests")
    monkeypatch.setenv("IDBENCH_HUB_RESULTS", "org/results")
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(hub_mirror.REFRESH_ENV, "0")
    monkeypatch.setenv("IDBENCH_DATA_DIR", str(tmp_path / "benchmarks"))
    requests = LocalRepoStandIn(tmp_path / "hub" / "org" / "requests", "org/requests")
    results = LocalRepoStandIn(tmp_path / "hub" / "org" / "results", "org/results")
    return requests, results


def _app():
    from streamlit.testing.v1 import AppTest

    from idbench.leaderboard.app import APP_PATH

    return AppTest.from_file(str(APP_PATH), default_timeout=APP_TIMEOUT).run()


@pytest.mark.browser
def test_the_benchmark_page_shows_the_mirrored_model(hub_app, tmp_path):
    requests, results = hub_app
    add_request(requests, request_record("hub-model", HASH_A, "FINISHED"))
    add_result(results, result_record("hub-model", HASH_A, 0.71), samples_parquet(tmp_path, [0.7]))
    at = _app().switch_page("views/benchmark.py").run()
    assert not at.exception
    [table] = at.dataframe
    assert model_names(table.value["model"]) == ["hub-model"]

    add_scored(requests, results, "second", HASH_B, 0.9)  # a worker finishes another request
    at.run()
    [table] = at.dataframe
    assert sorted(model_names(table.value["model"])) == ["hub-model", "second"]

    at.switch_page("views/model.py").run()  # no images are public: the page shows values, not a traceback
    assert not at.exception
    [metadata] = [frame.value for frame in at.dataframe if list(frame.value.columns) == ["field", "value"]]
    fields = dict(zip(metadata["field"], metadata["value"]))  # the newest first
    assert (fields["model"], fields["family"], fields["submitter"]) == ("second", "Hand-made", "(not given)")

    at.switch_page("views/status.py").run()
    assert not at.exception
    assert any(f"org/results at {results.head()[:12]}" in t.value for t in at.text)  # the revision shown
    assert any("Admin actions act on the Hub repos" in t.value for t in at.text)


@pytest.mark.browser
def test_the_status_page_reports_a_malformed_file(hub_app):
    requests, results = hub_app
    results.commit([FileAdd(f"{BENCHMARK}/bad/{HASH_C[:12]}/aggregates.json", data=b"[]")], "bad", None)
    at = _app().switch_page("views/status.py").run()
    assert not at.exception
    assert any("1 file(s)" in w.value for w in at.warning)
    assert any(
        f"org/results: {BENCHMARK}/bad/{HASH_C[:12]}/aggregates.json: not a JSON object" in t.value for t in at.text
    )


class FakeHubQueue:
    """A stand-in for ``queue.hub.submit_request``: it writes the request record and the zip the layout
    describes, in one commit, and records how the page called it."""

    def __init__(self):
        self.calls = []

    def submit_request(
        self, requests, submission_path, data_dir, model_name=None, *, family=None, link=None, submitter=None, **options
    ):
        from types import SimpleNamespace

        # options: what else the page passes (client, rate_limit); test_hub_queue.py checks their effect
        self.calls.append(
            dict(
                repo=requests.repo_id,
                data_dir=data_dir,
                model_name=model_name,
                family=family,
                link=link,
                submitter=submitter,
                **options,
            )
        )
        record = request_record(
            model_name, HASH_A, "PENDING", metadata={"family": family, "link": link, "model": model_name}
        )
        path = f"{BENCHMARK}/{model_name}/{HASH_A[:12]}"
        ops = [
            FileAdd(f"{path}.json", data=_json(record)),
            FileAdd(f"{path}.zip", data=Path(submission_path).read_bytes()),
        ]
        requests.commit(ops, "submission", requests.head())
        return SimpleNamespace(path=f"{path}.json", duplicate=False)


@pytest.mark.browser
def test_the_submit_page_queues_a_request_on_the_hub(hub_app, tmp_path, monkeypatch):
    fake = FakeHubQueue()  # the page's side only; test_hub_queue.py checks the real submit_request
    monkeypatch.setattr("idbench.leaderboard.queue.hub.submit_request", fake.submit_request)
    monkeypatch.setattr("idbench.leaderboard.admission.IN_PROCESS", True)  # a child would not see the fake
    requests, _ = hub_app
    at = _app().switch_page("views/submit.py").run()
    assert not at.error  # the stand-in needs no token
    at.file_uploader(key="submit-file").upload("mine.zip", b"PK zip bytes", "application/zip")
    at.text_input(key="submit-model").input("my-model")
    at.text_input(key="submit-family").input("Mine")
    at.text_input(key="submit-submitter").input("carol")
    at.button(key="submit-button").click().run()
    assert not at.exception and not at.error
    assert f"request {BENCHMARK}/my-model/{HASH_A[:12]}.json in org/requests" in at.success[0].value
    [call] = fake.calls
    assert call["repo"] == "org/requests" and call["data_dir"] == tmp_path / "benchmarks" / BENCHMARK
    assert (call["model_name"], call["family"], call["submitter"]) == ("my-model", "Mine", "carol")
    files = sorted(
        p.relative_to(requests.snapshot(requests.head())).as_posix()
        for p in requests.snapshot(requests.head()).rglob("*.*")
    )
    assert files == [f"{BENCHMARK}/my-model/{HASH_A[:12]}.json", f"{BENCHMARK}/my-model/{HASH_A[:12]}.zip"]

    at.switch_page("views/status.py").run()  # the mirror reads the new request at once
    [jobs] = at.dataframe
    assert jobs.value["model"].tolist() == ["my-model"] and jobs.value["state"].tolist() == ["PENDING"]
    assert jobs.value["submitter"].isna().all()  # never public


@pytest.mark.browser
def test_the_submit_page_says_when_the_space_has_no_token(hub_app, monkeypatch):
    from idbench.leaderboard.hubrepo import STAND_IN_ENV

    monkeypatch.delenv(STAND_IN_ENV)  # the real Hub: HubDatasetRepo, which the page never reaches here
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", "/nonexistent/token")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    from idbench.leaderboard.app import backend

    monkeypatch.setattr(backend, "store", lambda: Store())  # no Hub to mirror in a test
    at = _app().switch_page("views/submit.py").run()
    assert not at.exception
    [error] = at.error
    assert "HF_TOKEN" in error.value and "org/requests" in error.value


# --- provenance: forged, duplicate and orphan records (issue 18) --------------------------------------


def _shown(info) -> list[tuple[str, str]]:
    """(model, content hash) of every result the mirrored leaderboard ranks."""
    table = Store(info.store_home).current_results(BENCHMARK)
    return sorted(zip(table["model_name"], table["content_hash"]))


def _listed(lines, path: str) -> str:
    [line] = [line for line in lines if line.split(": ")[1] == path]
    return line


def test_a_forged_request_carrying_anothers_hash_relabels_nothing(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "model-a", HASH_A, 0.71, samples_parquet(tmp_path, [0.7]))
    add_scored(requests, results, "model-b", HASH_B, 0.5)
    # A request named FLUX.1-dev, in its own path, with model-a's content hash (and an earlier submitted_at,
    # so it comes first in any order by time): before, the mirror showed model-a's numbers under its name.
    add_request(requests, request_record("FLUX.1-dev", HASH_A, "FINISHED", submitted_at="2025-01-01T00:00:00+00:00"))

    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert _shown(info) == [("model-b", HASH_B)]  # neither name is shown with the disputed result
    names = {job["model"] for job in jobs_table(Store(info.store_home))}
    assert names == {"model-b"}
    assert (info.submissions, info.results, info.skipped) == (1, 1, ())
    for path in (f"{BENCHMARK}/FLUX.1-dev/{HASH_A[:12]}.json", f"{BENCHMARK}/model-a/{HASH_A[:12]}.json"):
        assert _listed(info.conflicts, path).startswith("org/requests: ") and "conflict: 2 request records" in _listed(
            info.conflicts, path
        )
    assert _listed(info.conflicts, f"{BENCHMARK}/model-a/{HASH_A[:12]}/aggregates.json").startswith("org/results: ")
    assert hub_mirror.current(tmp_path / "mirror").conflicts == info.conflicts  # what the Status page reads


def test_a_second_result_for_a_real_hash_replaces_nothing(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "model-a", HASH_A, 0.71)
    add_result(
        results, result_record("FLUX.1-dev", HASH_A, 0.99), None
    )  # better numbers, another folder, the same hash
    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert _shown(info) == [] and jobs_table(Store(info.store_home)) == []
    assert "conflict: 2 results claim content hash" in _listed(
        info.conflicts, f"{BENCHMARK}/FLUX.1-dev/{HASH_A[:12]}/aggregates.json"
    )
    assert "conflict: 2 results" in _listed(info.conflicts, f"{BENCHMARK}/model-a/{HASH_A[:12]}/aggregates.json")
    assert "conflict: 2 results" in _listed(info.conflicts, f"{BENCHMARK}/model-a/{HASH_A[:12]}.json")


def test_a_result_without_a_request_or_unlike_its_request_is_not_ranked(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "model-a", HASH_A, 0.71)
    add_result(results, result_record("orphan", HASH_B, 0.99), None)  # no request at all
    add_request(requests, request_record("model-c", HASH_C, "FINISHED"))
    add_result(results, result_record("model-c", HASH_C, 0.8, task="text-to-image"), None)  # its request says otherwise
    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert _shown(info) == [("model-a", HASH_A)]
    assert "no request record for content hash" in _listed(
        info.conflicts, f"{BENCHMARK}/orphan/{HASH_B[:12]}/aggregates.json"
    )
    mismatch = _listed(info.conflicts, f"{BENCHMARK}/model-c/{HASH_C[:12]}/aggregates.json")
    assert "does not match the request record" in mismatch and "'text-to-image'" in mismatch
    jobs = {job["model"]: job["state"] for job in jobs_table(Store(info.store_home))}
    assert jobs == {"model-a": "FINISHED", "model-c": "FINISHED"}  # the request itself is shown, without numbers


def test_hostile_files_are_skipped_and_listed_and_the_rest_is_shown(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "good", HASH_A, 0.7, samples_parquet(tmp_path, [0.7]))
    nested = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # 200 KB: json.loads raises RecursionError
    corrupt = samples_parquet(tmp_path, [0.1, 0.2])
    corrupt = corrupt[:-20] + b"\x00" * 20
    hostile = {
        "nested": ("d" * 64, nested),
        "ci-text": ("e" * 64, None),
        "huge": ("f" * 64, None),
        "torn": ("0" * 64, None),
    }
    for model, (digest, _) in hostile.items():
        add_request(requests, request_record(model, digest, "FINISHED"))
    bad_stats = result_record("ci-text", "e" * 64, 0.5)
    bad_stats["aggregates"]["overall"]["dino_sim"]["ci_low"] = "x"
    huge = result_record("huge", "f" * 64, 0.5)
    huge["aggregates"]["overall"]["dino_sim"]["mean"] = 1e308
    results.commit(
        [
            FileAdd(f"{BENCHMARK}/nested/{'d' * 12}/aggregates.json", data=nested),
            FileAdd(f"{BENCHMARK}/ci-text/{'e' * 12}/aggregates.json", data=_json(bad_stats)),
            FileAdd(f"{BENCHMARK}/huge/{'f' * 12}/aggregates.json", data=_json(huge)),
            FileAdd(f"{BENCHMARK}/torn/{'0' * 12}/aggregates.json", data=_json(result_record("torn", "0" * 64, 0.5))),
            FileAdd(f"{BENCHMARK}/torn/{'0' * 12}/results.parquet", data=corrupt),
        ],
        "hostile results",
        results.head(),
    )
    requests.commit(
        [
            FileAdd(
                f"{BENCHMARK}/big/{'1' * 12}.json", data=nested
            ),  # over a request's size limit, said before parsing
            FileAdd(
                f"{BENCHMARK}/deep/{'3' * 12}.json", data=b"[" * 30_000 + b"]" * 30_000
            ),  # 60 KB: within it, too deep
            FileAdd(
                f"{BENCHMARK}/early/{'2' * 12}.json",
                data=_json(request_record("early", "2" * 64, "PENDING", submitted_at="0000")),
            ),
        ],
        "hostile requests",
        requests.head(),
    )

    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    assert _shown(info) == [("good", HASH_A)]
    assert "nested 100001 levels deep" in _listed(info.skipped, f"{BENCHMARK}/nested/{'d' * 12}/aggregates.json")
    assert "over the 65536-byte limit" in _listed(info.skipped, f"{BENCHMARK}/big/{'1' * 12}.json")
    assert "nested 30000 levels deep" in _listed(info.skipped, f"{BENCHMARK}/deep/{'3' * 12}.json")
    assert "ci_low is 'x'" in _listed(info.skipped, f"{BENCHMARK}/ci-text/{'e' * 12}/aggregates.json")
    assert "mean is 1e+308" in _listed(info.skipped, f"{BENCHMARK}/huge/{'f' * 12}/aggregates.json")
    assert "results.parquet is not a readable parquet file" in _listed(
        info.skipped, f"{BENCHMARK}/torn/{'0' * 12}/aggregates.json"
    )
    assert "'submitted_at' is not an ISO 8601 time" in _listed(info.skipped, f"{BENCHMARK}/early/{'2' * 12}.json")
    assert len(info.skipped) == 7 and info.conflicts == ()
    jobs = {job["model"] for job in jobs_table(Store(info.store_home))}
    assert jobs == {"good", "nested", "ci-text", "huge", "torn"}  # their requests are fine: shown without numbers


def test_a_judges_evidence_is_mirrored_beside_the_samples(repos, tmp_path):
    requests, results = repos
    add_scored(requests, results, "judged", HASH_A, 0.7, samples_parquet(tmp_path, [0.7]))
    evidence = pd.DataFrame(
        {"prompt_id": ["p0"], "seed": [0], "metric": ["judge_score"], "evidence": ['{"answer": "yes"}']}
    )
    evidence.to_parquet(tmp_path / "evidence.parquet", index=False)
    folder = f"{BENCHMARK}/judged/{HASH_A[:12]}"
    results.commit(
        [FileAdd(f"{folder}/judge_evidence.parquet", data=(tmp_path / "evidence.parquet").read_bytes())],
        "evidence",
        results.head(),
    )
    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    [row] = Store(info.store_home).current_results(BENCHMARK).to_dict("records")
    assert pd.read_parquet(Path(row["results_path"]) / "judge_evidence.parquet").equals(evidence)


@pytest.mark.browser
def test_the_status_page_lists_the_conflicts(hub_app):
    requests, results = hub_app
    add_scored(requests, results, "model-a", HASH_A, 0.71)
    add_request(requests, request_record("FLUX.1-dev", HASH_A, "FINISHED"))
    at = _app().switch_page("views/status.py").run()
    assert not at.exception
    assert any("3 record(s) in the Hub repos are not shown" in w.value for w in at.warning)
    [listing] = [t.value for t in at.text if "conflict: 2 request records" in t.value]
    assert f"org/requests: {BENCHMARK}/FLUX.1-dev/{HASH_A[:12]}.json" in listing
    assert f"org/results: {BENCHMARK}/model-a/{HASH_A[:12]}/aggregates.json" in listing


@pytest.mark.browser
def test_the_status_page_lists_at_most_max_problems_conflicts(hub_app):
    from idbench.evaluate_pkg.submission import MAX_PROBLEMS

    requests, results = hub_app
    orphans = [f"{n:012x}" + "0" * 52 for n in range(MAX_PROBLEMS + 3)]
    results.commit(
        [FileAdd(f"{BENCHMARK}/o/{d[:12]}/aggregates.json", data=_json(result_record("o", d, 0.5))) for d in orphans],
        "orphans",
        None,
    )
    at = _app().switch_page("views/status.py").run()
    assert not at.exception
    assert any(f"{MAX_PROBLEMS + 3} record(s) in the Hub repos are not shown" in w.value for w in at.warning)
    [listing] = [t.value for t in at.text if "no request record" in t.value]
    assert listing.count("\n") == MAX_PROBLEMS and listing.endswith("... and 3 more (the Space's log lists them all)")
