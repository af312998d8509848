"""The repo interface of the Hub-backed leaderboard: the local stand-in's commit semantics, and the real
client's parent check (against a recording fake of the two ``HfApi`` calls it makes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub.errors import HfHubHTTPError

from idbench.leaderboard.hubrepo import (
    FileAdd,
    FileDelete,
    HubDatasetRepo,
    HubRepoError,
    LocalRepoStandIn,
    RepoConflict,
    open_repo,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_commits_stack_and_old_revisions_stay_readable(tmp_path):
    repo = LocalRepoStandIn(tmp_path / "org" / "requests")
    assert repo.head() is None
    first = repo.commit([FileAdd("a/x.json", b"1"), FileAdd("b.json", b"2")], "first", parent=None)
    second = repo.commit(
        [FileAdd("a/x.json", b"3"), FileDelete("b.json"), FileDelete("absent.json")], "second", parent=first
    )
    assert repo.head() == second and len(second) == 40 and second != first
    assert files(repo.snapshot(first)) == {"a/x.json": b"1", "b.json": b"2"}
    assert files(repo.snapshot(second)) == {"a/x.json": b"3"}


def test_a_commit_on_a_stale_parent_is_refused_and_changes_nothing(tmp_path):
    repo = LocalRepoStandIn(tmp_path / "r")
    base = repo.commit([FileAdd("q.json", b"pending")], "base", parent=None)
    mine = repo.commit([FileAdd("q.json", b"claimed by A")], "A", parent=base)
    with pytest.raises(RepoConflict):
        repo.commit([FileAdd("q.json", b"claimed by B")], "B", parent=base)
    with pytest.raises(RepoConflict):
        repo.commit([FileAdd("new.json", b"x")], "on an empty repo", parent=None)
    assert repo.head() == mine and files(repo.snapshot(mine)) == {"q.json": b"claimed by A"}


RACE = """
import sys
from pathlib import Path
from idbench.leaderboard.hubrepo import FileAdd, LocalRepoStandIn, RepoConflict
root, parent, name = sys.argv[1:]
try:
    LocalRepoStandIn(Path(root)).commit([FileAdd("q.json", name.encode())], name, parent=parent)
    print("won")
except RepoConflict:
    print("lost")
"""


@pytest.mark.e2e
def test_concurrent_processes_on_one_parent_exactly_one_wins(tmp_path):
    """Four processes commit on the same parent at once: whatever the interleaving, one wins."""
    repo = LocalRepoStandIn(tmp_path / "r")
    base = repo.commit([FileAdd("q.json", b"pending")], "base", parent=None)
    procs = {
        f"w{i}": subprocess.Popen(
            [sys.executable, "-c", RACE, str(repo.root), base, f"w{i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(4)
    }
    outcomes = {name: p.communicate(timeout=120)[0].strip() for name, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values()), outcomes
    winners = [name for name, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1 and sorted(outcomes.values()) == ["lost", "lost", "lost", "won"]
    assert files(repo.snapshot(repo.head())) == {"q.json": winners[0].encode()}


@pytest.mark.parametrize("path", ["", "/abs.json", "../up.json", "a/../b.json", "a//b.json", "a\\b.json", "./a.json"])
def test_paths_outside_the_repo_are_refused(path):
    with pytest.raises(HubRepoError):
        FileAdd(path, b"x")


def test_open_repo_uses_the_stand_in_only_when_asked(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("IDBENCH_HUB_STAND_IN", str(tmp_path))
    repo = open_repo("org/results")
    assert isinstance(repo, LocalRepoStandIn) and repo.root == tmp_path / "org" / "results"
    assert "LOCAL STAND-IN" in caplog.text
    monkeypatch.delenv("IDBENCH_HUB_STAND_IN")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(HubRepoError, match="offline"):
        open_repo("org/results")


class FakeApi:
    """The two HfApi calls HubDatasetRepo makes, with the Hub's rule: parent_commit must be the head."""

    token = None

    def __init__(self, head: str):
        self.sha, self.commits = head, []

    def repo_info(self, repo_id, repo_type, revision):
        return SimpleNamespace(sha=self.sha)

    def create_commit(self, *, repo_id, repo_type, revision, operations, commit_message, parent_commit):
        if parent_commit != self.sha:
            raise HfHubHTTPError(
                "412 Precondition Failed", response=SimpleNamespace(status_code=412, headers={}, request=None)
            )
        self.commits.append((commit_message, [op.path_in_repo for op in operations]))
        self.sha = f"{len(self.commits):040x}"
        return SimpleNamespace(oid=self.sha)


def test_hub_client_passes_the_parent_and_reports_a_moved_head_as_a_conflict():
    api = FakeApi("a" * 40)
    repo = HubDatasetRepo("org/requests", api=api)
    new = repo.commit([FileAdd("x.json", b"1"), FileDelete("y.json")], "claim", parent="a" * 40)
    assert new == repo.head() and api.commits == [("claim", ["x.json", "y.json"])]
    with pytest.raises(RepoConflict):
        repo.commit([FileAdd("x.json", b"2")], "late claim", parent="a" * 40)


def test_hub_snapshots_download_only_the_patterns_asked(monkeypatch, tmp_path):
    """Scanning request records must not download every submission's zip: allow_patterns reaches the download,
    and huggingface_hub's own filter keeps the nested records and drops the zips."""
    from huggingface_hub.utils import filter_repo_objects

    from idbench.leaderboard.hubrepo import JSON_FILES

    calls = []
    monkeypatch.setattr(
        "huggingface_hub.snapshot_download", lambda repo_id, **kw: calls.append((repo_id, kw)) or str(tmp_path)
    )
    repo = HubDatasetRepo("org/requests", api=FakeApi("a" * 40))
    assert repo.snapshot("a" * 40, JSON_FILES) == tmp_path
    [(repo_id, kw)] = calls
    assert repo_id == "org/requests" and kw["revision"] == "a" * 40 and kw["repo_type"] == "dataset"
    paths = ["cogcanvas/m/abc.json", "cogcanvas/m/abc.zip", "README.md"]
    assert list(filter_repo_objects(paths, allow_patterns=kw["allow_patterns"])) == ["cogcanvas/m/abc.json"]


class LaggingApi(FakeApi):
    """The Hub as issue 18 reports it: a stale parent is refused with HTTP 412, and a head read right after
    a commit may still answer the old head."""

    def __init__(self, head: str, status: int = 412):
        super().__init__(head)
        self.status, self.lagging_head = status, None

    def repo_info(self, repo_id, repo_type, revision):
        return SimpleNamespace(sha=self.lagging_head or self.sha)

    def create_commit(self, *, parent_commit, **kwargs):
        if parent_commit != self.sha or self.status != 412:
            raise HfHubHTTPError(
                f"{self.status} refused", response=SimpleNamespace(status_code=self.status, headers={}, request=None)
            )
        return super().create_commit(parent_commit=parent_commit, **kwargs)


def test_a_412_is_a_conflict_even_when_the_head_read_lags():
    api = LaggingApi("a" * 40)
    repo = HubDatasetRepo("org/requests", api=api)
    api.sha = "b" * 40  # another worker committed; the head read still answers the old head
    api.lagging_head = "a" * 40
    with pytest.raises(RepoConflict, match="HTTP 412"):
        repo.commit([FileAdd("x.json", b"1")], "claim", parent="a" * 40)
    assert api.commits == []


def test_another_http_error_on_an_unmoved_head_is_not_a_conflict():
    api = LaggingApi("a" * 40, status=500)
    with pytest.raises(HfHubHTTPError) as caught:
        HubDatasetRepo("org/requests", api=api).commit([FileAdd("x.json", b"1")], "claim", parent="a" * 40)
    assert not isinstance(caught.value, RepoConflict)


def test_the_stand_in_can_lag_like_the_hub_and_still_refuses_a_stale_parent(tmp_path):
    repo = LocalRepoStandIn(tmp_path / "r", lag_reads=2)
    base = repo.commit([FileAdd("q.json", b"pending")], "base", parent=None)
    assert repo.head() is None and repo.head() is None  # two lagging reads answer the parent (no commit yet)
    assert repo.head() == base
    mine = repo.commit([FileAdd("q.json", b"claimed")], "claim", parent=base)
    stale = repo.head()
    assert stale == base  # lagging
    with pytest.raises(RepoConflict):
        repo.commit([FileAdd("q.json", b"claimed again")], "claim on the lagging head", parent=stale)
    assert LocalRepoStandIn(repo.root).head() == mine  # another reader sees the truth
    assert repo.head() == base and repo.head() == mine  # the lag runs out
    assert files(repo.snapshot(mine)) == {"q.json": b"claimed"}


def test_backoff_delays_grow_to_the_cap_with_jitter():
    import random

    from idbench.leaderboard.hubrepo import backoff_delays

    delays = backoff_delays(8, base=0.5, cap=4.0, rng=random.Random(7))
    assert len(delays) == 8
    for i, delay in enumerate(delays):
        assert 0.0 <= delay <= min(4.0, 0.5 * 2**i)
    assert delays == backoff_delays(8, base=0.5, cap=4.0, rng=random.Random(7))  # reproducible with a seed
    assert delays != backoff_delays(8, base=0.5, cap=4.0, rng=random.Random(8))  # jittered: no lockstep
    many = backoff_delays(2000, base=1.0, cap=2.0, rng=random.Random(1))[10:]  # all at the cap: uniform on [0, 2]
    assert max(many) <= 2.0 and 0.9 < sum(many) / len(many) < 1.1
    assert backoff_delays(0) == [] and backoff_delays(3, base=0.0) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        backoff_delays(-1)
