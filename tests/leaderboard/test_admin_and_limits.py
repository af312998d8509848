"""Admin actions, the per-submitter rate limit, metadata overrides, and the upgrade of an old store."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time

import pytest

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.submission import SubmissionError
from idbench.leaderboard.queue import RateLimit, claim, jobs_table, rescore, rescore_all, submit
from idbench.leaderboard.store import MIGRATIONS, RateLimitError, Store

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    """The identity-collapse sample and three baselines (three different submissions)."""
    root = tmp_path_factory.mktemp("limits")
    build("identity-collapse", out=root / "data")
    data = load_benchmark_data(root / "data")
    for name in ("collage", "clone", "swap"):
        make_baseline(name, data, root / name, size=64)
    return root


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "home")


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# A rate-limit window filled with real submissions.
@pytest.mark.slow
def test_rate_limit_counts_new_submissions_per_submitter(store, collapse):
    limit = RateLimit(2, 3600)
    submit(store, collapse / "collage", collapse / "data", submitter="alice", rate_limit=limit)
    # A resubmitted duplicate creates no row, so it does not use up the allowance.
    assert submit(store, collapse / "collage", collapse / "data", submitter="alice", rate_limit=limit).duplicate
    submit(store, collapse / "clone", collapse / "data", submitter="alice", rate_limit=limit)
    with pytest.raises(RateLimitError, match="alice.*limit is 2"):
        submit(store, collapse / "swap", collapse / "data", submitter="alice", rate_limit=limit)
    assert len(jobs_table(store)) == 2 and len(list(store.submissions_dir.iterdir())) == 2
    # Another submitter has their own allowance; the maintainer's CLI path (no limit) is never refused.
    submit(store, collapse / "swap", collapse / "data", submitter="bob", rate_limit=limit)
    submit(store, collapse / "swap", collapse / "data", model_name="swap-2", submitter="alice")
    assert len(jobs_table(store)) == 4


def test_rate_limit_window_moves(store, collapse):
    submit(store, collapse / "collage", collapse / "data", rate_limit=RateLimit(1, 3600))
    with sqlite3.connect(store.path) as db:  # the first submission happened two hours ago
        db.execute("UPDATE submissions SET created_at = ?", (time.time() - 7200,))
    submit(store, collapse / "clone", collapse / "data", rate_limit=RateLimit(1, 3600))
    with pytest.raises(RateLimitError, match="anonymous"):
        submit(store, collapse / "swap", collapse / "data", rate_limit=RateLimit(1, 3600))


@pytest.mark.parametrize("text", ["5", "a/b", "0/60", "5/-1", ""])
def test_rate_limit_parse_refuses_malformed_values(text):
    with pytest.raises(ValueError, match="rate limit"):
        RateLimit.parse(text)


def test_rate_limit_parse():
    assert RateLimit.parse("5/86400") == RateLimit(5, 86400.0)


def test_family_and_link_override_the_metadata(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data", family="Collage", link="https://example.org/paper")
    metadata = store.submission(result.submission_id)["metadata"]
    assert metadata["family"] == "Collage" and metadata["link"] == "https://example.org/paper"
    stored = json.loads(
        (store.submissions_dir / store.submission(result.submission_id)["content_hash"] / "submission.json").read_text()
    )
    assert stored["family"] == "Collage"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"link": "javascript:alert(1)"}, "http"),
        ({"family": "x" * 101}, "101 characters"),
        ({"model_name": "m" * 101}, "101 characters"),
    ],
)
def test_bad_overrides_are_refused_before_anything_is_stored(store, collapse, overrides, message):
    with pytest.raises(SubmissionError, match=message):
        submit(store, collapse / "collage", collapse / "data", **overrides)
    assert jobs_table(store) == [] and not store.submissions_dir.exists()


def test_unknown_metadata_key_names_the_known_ones(store, collapse, tmp_path):
    folder = shutil.copytree(collapse / "collage", tmp_path / "odd")
    metadata = json.loads((folder / "submission.json").read_text())
    (folder / "submission.json").write_text(json.dumps({**metadata, "famly": "typo"}))
    with pytest.raises(SubmissionError, match="unknown field 'famly'.*family"):
        submit(store, folder, collapse / "data")


def test_withdraw_keeps_everything_but_leaves_the_rankings(store, collapse):
    first = submit(store, collapse / "collage", collapse / "data")
    second = submit(store, collapse / "clone", collapse / "data")
    store.withdraw(second.submission_id, "duplicate account")
    states = {row["submission"]: (row["state"], row["reason"], row["withdrawn"]) for row in jobs_table(store)}
    assert (
        states[second.submission_id][0] == "FAILED"
        and states[second.submission_id][1] == "withdrawn: duplicate account"
    )
    assert states[second.submission_id][2] is not None and states[first.submission_id] == ("PENDING", None, None)
    # The files and the row are still there; no worker claims the withdrawn job.
    assert store.submission(second.submission_id)["withdrawn_reason"] == "duplicate account"
    assert (store.submissions_dir / store.submission(second.submission_id)["content_hash"]).is_dir()
    job = claim(store, "w", lease_seconds=60)
    assert job.submission_id == first.submission_id and claim(store, "w", lease_seconds=60) is None
    with pytest.raises(ValueError, match="withdrawn"):
        rescore(store, second.submission_id)
    with pytest.raises(KeyError, match="no submission with id 99"):
        store.withdraw(99, "x")


def test_rescore_one_queues_once(store, collapse):
    result = submit(store, collapse / "collage", collapse / "data")
    assert rescore(store, result.submission_id) is None  # its first job is still pending
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE jobs SET state = 'FINISHED'")
    job_id = rescore(store, result.submission_id)
    assert job_id is not None and rescore(store, result.submission_id) is None
    assert rescore_all(store) == []  # nothing with current results here; and nothing twice


def test_a_store_from_the_first_schema_is_upgraded_in_place(tmp_path):
    home = tmp_path / "old"
    home.mkdir()
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:  # what idbench 0.1's first release created
        db.executescript(MIGRATIONS[0])
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (1)")
        db.execute(
            "INSERT INTO submissions (benchmark, benchmark_version, data_dir, model_name, metadata_json,"
            " content_hash, stored_path, created_at) VALUES ('identity-collapse', 'v', '/d', 'm', '{}', 'h', '/s', 0)"
        )
    store = Store(home)
    assert store.schema_version() == len(MIGRATIONS)
    submission = store.submission(1)
    assert submission["model_name"] == "m" and submission["withdrawn_at"] is None
