"""The few Hub dataset-repo calls a Hub-backed leaderboard needs, behind one small interface.

A public deployment keeps its durable state in two Hub dataset repos (requests and results). Every
part that reads or writes them (the Space, ``idbench worker --hub``, withdrawals) goes through a
:class:`DatasetRepo`, which offers exactly three things:

- :meth:`~DatasetRepo.head`: the repo's current revision (a commit id);
- :meth:`~DatasetRepo.snapshot`: a local, read-only folder with the repo's files at a revision;
- :meth:`~DatasetRepo.commit`: add and delete files in one commit **on top of a given parent
  revision**, refused with :class:`RepoConflict` when the repo has moved on since. That
  compare-and-swap is what makes a claim safe: two workers that read the same revision and both
  try to mark one request as theirs cannot both succeed.

Two implementations:

- :class:`HubDatasetRepo`, the real one: ``HfApi.repo_info`` for the head, ``snapshot_download``
  for the files, ``HfApi.create_commit(parent_commit=...)`` for the commit (the Hub refuses a
  commit whose ``parent_commit`` is not the branch head, with HTTP 412 Precondition Failed:
  huggingface_hub PR #916, huggingface/dataset-viewer #2159). A 412 is a :class:`RepoConflict`
  whatever a head read says right after, because that read may lag behind the commit that won
  (evaleval/every_eval_ever PR #265).
- :class:`LocalRepoStandIn`, a **stand-in for tests and offline trials**, not a Hub: a folder holding
  one full copy of the files per revision and a ``HEAD`` file, with commits serialised by a file lock
  so that the parent check and the swap of ``HEAD`` happen as one step, across processes. Like the
  Hub, it refuses a commit on a stale parent with :class:`RepoConflict`; ``lag_reads`` makes its head
  reads lag behind its own commits, as the Hub's may.

A conflict is the caller's to retry, on a fresh head and after a pause that grows with each refusal
(:func:`backoff_delays`): two workers that keep colliding must not retry in lockstep.

:func:`open_repo` picks one: the stand-in only when ``IDBENCH_HUB_STAND_IN`` names a folder (each repo
id becomes a sub-folder of it), and then it says so in the log; otherwise the Hub.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from idbench import settings
from idbench.errors import IdbenchError

logger = logging.getLogger(__name__)

REPO_TYPE = "dataset"
STAND_IN_ENV = settings.HUB_STAND_IN
JSON_FILES = ("*.json",)  # snapshot patterns of the records alone (request files), not the zips beside them
# The HTTP statuses with which the Hub refuses a commit whose parent_commit is no longer the head.
STALE_PARENT_STATUSES = (412,)


def backoff_delays(
    attempts: int, base: float = 0.5, cap: float = 30.0, rng: random.Random | None = None
) -> list[float]:
    """The pauses (seconds) before each of ``attempts`` retries of a refused commit: "full jitter" backoff.

    Retry ``i`` (from 0) waits a uniform random time in ``[0, min(cap, base * 2**i)]``: the bound
    doubles with each refusal, up to ``cap``, and the randomness keeps colliding workers apart.
    ``rng`` (a seeded :class:`random.Random`) makes the pauses reproducible in tests.
    """
    if attempts < 0 or base < 0 or cap < 0:
        raise ValueError(f"backoff_delays({attempts}, {base}, {cap}): expected non-negative numbers")
    draw = (rng or random).uniform
    return [draw(0.0, min(cap, base * 2 ** min(i, 64))) for i in range(attempts)]


class RepoConflict(IdbenchError):
    """The repo's head is no longer the parent the commit was built on: someone else committed first."""


class HubRepoError(IdbenchError):
    """A Hub repo cannot be used as asked (bad id, offline mode, no token, a path that escapes the repo)."""


@dataclass(frozen=True)
class FileAdd:
    """Add or replace ``path`` (POSIX, relative to the repo root) with ``data`` or a local file's bytes."""

    path: str
    data: bytes | None = None
    local_path: Path | None = None

    def __post_init__(self) -> None:
        _check_path(self.path)
        if (self.data is None) == (self.local_path is None):
            raise ValueError(f"FileAdd({self.path!r}) needs exactly one of data and local_path")

    def read(self) -> bytes:
        return self.data if self.data is not None else Path(self.local_path).read_bytes()


@dataclass(frozen=True)
class FileDelete:
    """Delete ``path`` (a file) from the repo; deleting a file that is not there is not an error."""

    path: str

    def __post_init__(self) -> None:
        _check_path(self.path)


Operation = FileAdd | FileDelete


def _check_path(path: str) -> None:
    """A repo path must stay inside the repo: relative, POSIX, no empty or dot-dot component."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise HubRepoError(f"repo path {path!r} is not a plain relative path inside the repo")


class DatasetRepo(Protocol):
    repo_id: str

    def head(self) -> str | None:
        """The current revision, or None when the repo does not exist (or has no commit) yet."""

    def snapshot(self, revision: str, patterns: Sequence[str] | None = None) -> Path:
        """A local folder with the repo's files at ``revision``; callers must not write into it.

        ``patterns`` (fnmatch over the whole repo path, ``*`` crossing folders, as
        ``snapshot_download``'s ``allow_patterns``) limits what must be there: a worker scanning the
        request records asks for ``*.json`` and does not download every submission's zip. Files
        outside the patterns may be there too (the stand-in has them all).
        """

    def commit(self, operations: Sequence[Operation], message: str, parent: str | None) -> str:
        """Apply ``operations`` in one commit on top of ``parent``; the new revision.

        Raises :class:`RepoConflict` when the head is not ``parent`` any more (``None``: the repo must
        still be empty or absent).
        """


# --- the stand-in ------------------------------------------------------------------------------------


class LocalRepoStandIn:
    """A local stand-in for one Hub dataset repo (tests, offline trials): a folder with commit semantics.

    Layout: ``<root>/HEAD`` holds the current revision; ``<root>/revisions/<rev>/`` the files at each
    revision (a full copy: fine for the small JSON and parquet files of a leaderboard, not for a large
    dataset). Revisions are 40-hex ids like Hub commit ids. A commit takes ``<root>/.lock`` (``flock``),
    checks the parent against ``HEAD``, writes the new revision's folder completely, then replaces
    ``HEAD`` in one rename: readers see the old revision or the new one, never a half-made one.
    """

    def __init__(self, root: Path, repo_id: str | None = None, lag_reads: int = 0):
        self.root = Path(root)
        self.repo_id = repo_id or self.root.name
        # After each commit made through this object, the next ``lag_reads`` head reads still answer its
        # parent, as a Hub head read right after a commit may (tests of callers that must not trust it).
        self.lag_reads = lag_reads
        self._lagging: tuple[str | None, int] = (None, 0)  # (the parent a lagging read answers, reads left)

    def head(self) -> str | None:
        parent, left = self._lagging
        if left > 0:
            self._lagging = (parent, left - 1)
            return parent
        return self._head()

    def _head(self) -> str | None:
        try:
            return (self.root / "HEAD").read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def snapshot(self, revision: str, patterns: Sequence[str] | None = None) -> Path:
        folder = self.root / "revisions" / revision  # every file is local: patterns change nothing
        if not revision or not folder.is_dir():
            raise HubRepoError(f"{self.repo_id}: no revision {revision!r}")
        return folder

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def commit(self, operations: Sequence[Operation], message: str, parent: str | None) -> str:
        with self._locked():
            head = self._head()  # the true head: the parent check never lags
            if head != parent:
                raise RepoConflict(f"{self.repo_id}: head is {head}, not the parent {parent} this commit was built on")
            revisions = self.root / "revisions"
            revisions.mkdir(exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".commit-", dir=revisions))
            try:
                files = staging / "files"
                if head is not None:
                    shutil.copytree(revisions / head, files)
                else:
                    files.mkdir()
                digest = hashlib.sha1(f"{head}\n{message}\n{time.time_ns()}\n".encode())
                for op in operations:
                    target = files / op.path
                    if isinstance(op, FileDelete):
                        target.unlink(missing_ok=True)
                        digest.update(b"D" + op.path.encode())
                        continue
                    data = op.read()
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    digest.update(b"A" + op.path.encode() + hashlib.sha1(data).digest())
                revision = digest.hexdigest()
                os.rename(files, revisions / revision)
                (self.root / "HEAD.tmp").write_text(revision + "\n", encoding="utf-8")
                os.replace(self.root / "HEAD.tmp", self.root / "HEAD")
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            with open(self.root / "log", "a", encoding="utf-8") as log:
                log.write(f"{revision} {message}\n")
            self._lagging = (head, self.lag_reads)
            return revision


# --- the Hub ------------------------------------------------------------------------------------------


class HubDatasetRepo:
    """One Hub dataset repo through ``huggingface_hub``. ``api`` defaults to a plain ``HfApi()``."""

    def __init__(self, repo_id: str, api=None, revision: str = "main"):
        from huggingface_hub import HfApi, constants
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id

        try:
            validate_repo_id(repo_id)
        except HFValidationError as err:
            raise HubRepoError(f"invalid dataset repo id {repo_id!r}: {err}") from None
        if api is None and constants.HF_HUB_OFFLINE:
            raise HubRepoError(f"{repo_id}: huggingface_hub is in offline mode (HF_HUB_OFFLINE is set)")
        self.repo_id, self.branch = repo_id, revision
        self.api = api or HfApi()

    def head(self) -> str | None:
        from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

        try:
            return self.api.repo_info(self.repo_id, repo_type=REPO_TYPE, revision=self.branch).sha
        except (RepositoryNotFoundError, RevisionNotFoundError):
            return None

    def snapshot(self, revision: str, patterns: Sequence[str] | None = None) -> Path:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(
                self.repo_id,
                repo_type=REPO_TYPE,
                revision=revision,
                token=self.api.token,
                allow_patterns=list(patterns) if patterns is not None else None,
            )
        )

    def commit(self, operations: Sequence[Operation], message: str, parent: str | None) -> str:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete
        from huggingface_hub.errors import HfHubHTTPError

        if parent is None:  # a new repo: the Hub gives it a first commit, which becomes the parent
            self.api.create_repo(self.repo_id, repo_type=REPO_TYPE, exist_ok=True)
            parent = self.head()
        ops = [
            CommitOperationDelete(path_in_repo=op.path)
            if isinstance(op, FileDelete)
            else CommitOperationAdd(
                path_in_repo=op.path, path_or_fileobj=op.data if op.data is not None else str(op.local_path)
            )
            for op in operations
        ]
        try:
            info = self.api.create_commit(
                repo_id=self.repo_id,
                repo_type=REPO_TYPE,
                revision=self.branch,
                operations=ops,
                commit_message=message,
                parent_commit=parent,
            )
        except HfHubHTTPError as err:
            status = getattr(getattr(err, "response", None), "status_code", None)
            if status in STALE_PARENT_STATUSES:
                # 412: the parent is not the head. Do not ask the head to confirm: the read may lag and
                # answer the stale parent, which would turn a plain conflict into a worker fault.
                raise RepoConflict(
                    f"{self.repo_id}: the Hub refused a commit on {parent} (HTTP {status}: the head has moved)"
                ) from err
            # Another status: a moved head is still a conflict (older Hubs answered otherwise).
            head = self.head()
            if head != parent:
                raise RepoConflict(f"{self.repo_id}: head moved to {head} while committing on {parent}") from err
            raise
        return info.oid


def open_repo(repo_id: str, api=None) -> DatasetRepo:
    """The repo ``repo_id``: the local stand-in under ``$IDBENCH_HUB_STAND_IN/<repo_id>`` when that is set, else the Hub."""
    stand_in = settings.hub_stand_in()
    if stand_in is not None:
        _check_path(repo_id)
        logger.warning(
            "%s: using the LOCAL STAND-IN under %s (%s is set), not the Hub", repo_id, stand_in, STAND_IN_ENV
        )
        return LocalRepoStandIn(stand_in / repo_id, repo_id)
    return HubDatasetRepo(repo_id, api=api)
