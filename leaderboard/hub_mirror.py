"""Read the two Hub dataset repos of a public deployment back into a results store the app can show.

A Hub-backed leaderboard (docs/deploy.md) keeps its durable state in a requests repo and a results
repo (layouts: ``hub.py`` sync and ``hub_queue``). The Space does not keep a database of its own: it
**mirrors** the two repos' snapshots into a fresh, read-only :class:`~idbench.leaderboard.store.Store`,
so every page of the app works exactly as over the embedded store.

- each request record ``<benchmark>/<slug>/<hash12>.json`` becomes a submission with one job in the
  record's state and reason (the Status page); WITHDRAWN becomes a withdrawn submission;
- each result ``<benchmark>/<slug>/<hash12>/aggregates.json`` becomes that submission's FINISHED job
  and current result; its ``results.parquet`` is copied beside it (``results_path``), so the model
  page reads per-sample values as it does locally. A withdrawn result has had its files deleted from
  the results repo, so it has nothing to mirror; if the deletion lags the WITHDRAWN record, the
  withdrawn submission hides it all the same.

Nothing in the repos holds a submitter's name or images, so the mirror has neither: ``submitter`` is
NULL and the submission's ``data_dir`` / ``stored_path`` name a folder that does not exist.

A file that cannot be read (bad JSON, a missing field, a path that does not match its content) is
skipped and reported by repo and path in :attr:`MirrorInfo.skipped` (and the log): one bad file never
takes the leaderboard down.

Each build goes into a new folder ``home/mirror-<requests rev>-<results rev>`` (written completely
by :func:`~idbench.atomic.atomic_directory`), then ``home/CURRENT.json`` is replaced in one rename:
readers see the old mirror or the new one, never a half-built one. A build happens only when a repo
head changed. :class:`Refresher` checks the heads at most every ``IDBENCH_HUB_REFRESH_S`` seconds
(default 300), on the app's reruns.

Example::

    info = mirror(open_repo("org/idbench-requests"), open_repo("org/idbench-results"), Path("~/.idbench/hub-mirror"))
    Store(info.store_home).current_results("identity-collapse")
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from idbench.atomic import atomic_directory
from idbench.builders.spec import DEFAULT_TASK
from idbench.leaderboard.hubrepo import JSON_FILES, DatasetRepo
from idbench.leaderboard.judges import check_copies, check_judge, judge_columns
from idbench.leaderboard.store import JOB_STATES, Store

logger = logging.getLogger(__name__)

REFRESH_ENV, DEFAULT_REFRESH_S = "IDBENCH_HUB_REFRESH_S", 300.0
POINTER = "CURRENT.json"
SAMPLES_FILE = "results.parquet"  # the per-sample values beside each aggregates.json (evaluate_pkg's file name)
AGGREGATES_FILE = "aggregates.json"
REQUEST_STATES = (*JOB_STATES, "WITHDRAWN")
KEEP_BUILDS = 2  # the current mirror and the one before it (a rerun may still be reading it)
NOT_PUBLIC = "not-public"  # the data_dir / stored_path of mirrored submissions: no images are published


class MalformedFile(ValueError):
    """One repo file that cannot be mirrored; the message says why (the caller adds repo and path)."""


@dataclass(frozen=True)
class MirrorInfo:
    """What the app shows of the mirror it reads: where, of which revisions, built when, what was skipped."""

    store_home: Path
    requests_repo: str
    results_repo: str
    requests_revision: str | None
    results_revision: str | None
    built_at: float  # epoch seconds
    submissions: int
    results: int
    skipped: tuple[str, ...] = field(default_factory=tuple)  # "repo: path: why", one per skipped file

    def to_json(self) -> str:
        record = asdict(self) | {"store_home": self.store_home.name, "skipped": list(self.skipped)}
        return json.dumps(record, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, home: Path) -> "MirrorInfo":
        record = json.loads(text)
        return cls(**(record | {"store_home": Path(home) / record["store_home"], "skipped": tuple(record["skipped"])}))


def current(home: Path) -> MirrorInfo | None:
    """The mirror last swapped in under ``home``, or None when there is none (yet)."""
    try:
        return MirrorInfo.from_json((Path(home) / POINTER).read_text(encoding="utf-8"), Path(home))
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return None


def mirror(requests: DatasetRepo, results: DatasetRepo, home: Path, now: Callable[[], float] = time.time) -> MirrorInfo:
    """The mirror of the two repos' current heads under ``home``: the existing one when neither head moved."""
    home = Path(home)
    heads = requests.head(), results.head()
    existing = current(home)
    if existing is not None and (existing.requests_revision, existing.results_revision) == heads and existing.store_home.is_dir():
        return existing
    name = f"mirror-{(heads[0] or 'empty')[:12]}-{(heads[1] or 'empty')[:12]}"
    with atomic_directory(home / name, overwrite=True) as staging:
        counts, skipped = build_store(
            Store(staging),
            home / name,
            requests.snapshot(heads[0], JSON_FILES) if heads[0] else None,  # not the zips
            results.snapshot(heads[1]) if heads[1] else None,
            requests.repo_id,
            results.repo_id,
        )
    info = MirrorInfo(home / name, requests.repo_id, results.repo_id, *heads, now(), *counts, tuple(skipped))
    (home / (POINTER + ".tmp")).write_text(info.to_json(), encoding="utf-8")
    os.replace(home / (POINTER + ".tmp"), home / POINTER)
    _drop_old_builds(home, keep=info.store_home.name)
    return info


def _drop_old_builds(home: Path, keep: str) -> None:
    builds = sorted((p for p in home.glob("mirror-*") if p.is_dir() and p.name != keep), key=lambda p: p.stat().st_mtime)
    for old in builds[: max(len(builds) - (KEEP_BUILDS - 1), 0)]:
        shutil.rmtree(old, ignore_errors=True)


# --- reading the snapshots into a store ---------------------------------------------------------------


def build_store(
    store: Store, final_home: Path, requests_dir: Path | None, results_dir: Path | None, requests_repo: str, results_repo: str
) -> tuple[tuple[int, int], list[str]]:
    """Fill an empty ``store`` from the two snapshot folders; ``((submissions, results), skipped files)``.

    ``final_home`` is where the store's folder will be once swapped in (it is built in a staging
    folder): the paths recorded in it point there.
    """
    skipped: list[str] = []
    # content hash -> (parsed record, its path in the repo)
    requests = _parsed_by_hash(requests_dir, "*/*/*.json", requests_repo, parse_request, "request", skipped)
    results = _parsed_by_hash(results_dir, f"*/*/*/{AGGREGATES_FILE}", results_repo, parse_result, "result", skipped)
    requests = {digest: request for digest, (request, _) in requests.items()}
    scored = {digest: (result, results_dir / Path(path).parent) for digest, (result, path) in results.items()}

    not_public = str(Path(final_home) / NOT_PUBLIC)
    with store.transaction() as db:
        for digest in sorted(set(requests) | set(scored), key=lambda d: (_created(requests.get(d), scored.get(d)), d)):
            request, (result, folder) = requests.get(digest), scored.get(digest, (None, None))
            submission_id = _insert_submission(db, request or _request_of(result), result, not_public)
            if result is not None:
                created = request["submitted_at"] if request is not None else result["scored_at"]
                job_id = _insert_job(db, submission_id, "FINISHED", None, 1, created, result["scored_at"])
                _insert_result(db, store, Path(final_home), submission_id, job_id, result, folder)
            if request is not None and not (result is not None and request["state"] == "FINISHED"):
                _insert_job(db, submission_id, *_job_state(request), request["attempts"], request["submitted_at"], request["updated_at"])
    return (len(set(requests) | set(scored)), len(scored)), skipped


def _parsed_by_hash(
    folder: Path | None, pattern: str, repo: str, parse: Callable[[dict[str, Any], str], dict[str, Any]], what: str, skipped: list[str]
) -> dict[str, tuple[dict[str, Any], str]]:
    """content hash -> (``parse`` of each record under ``folder``, its path); a malformed record, or a
    second one for the same content hash, is skipped and listed in ``skipped``."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for path, record in _records(folder, pattern, repo, skipped):
        try:
            parsed = parse(record, path)
            if parsed["content_hash"] in out:
                raise MalformedFile(f"a second {what} for content hash {parsed['content_hash']}")
        except MalformedFile as error:
            _skip(skipped, repo, path, error)
            continue
        out[parsed["content_hash"]] = (parsed, path)
    return out


def _records(folder: Path | None, pattern: str, repo: str, skipped: list[str]):
    """(repo path, decoded JSON object) of every file matching ``pattern``; unreadable ones go to ``skipped``."""
    if folder is None:
        return
    for file in sorted(Path(folder).glob(pattern)):
        path = file.relative_to(folder).as_posix()
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            _skip(skipped, repo, path, f"not readable JSON ({error})")
            continue
        if not isinstance(record, dict):
            _skip(skipped, repo, path, "not a JSON object")
            continue
        yield path, record


def _skip(skipped: list[str], repo: str, path: str, why: object) -> None:
    line = f"{repo}: {path}: {why}"
    logger.warning("hub mirror: skipped %s", line)
    skipped.append(line)


def _text(record: dict[str, Any], key: str, default: str | None = None) -> str:
    value = record.get(key, default)
    if not isinstance(value, str) or not value:
        raise MalformedFile(f"field {key!r} is missing or not a non-empty string")
    return value


def _epoch(record: dict[str, Any], key: str) -> float:
    value = record.get(key)
    if value is None:
        return 0.0
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise MalformedFile(f"field {key!r} is not an ISO 8601 time: {value!r}") from None


def _check_place(path: str, benchmark: str, content_hash: str) -> None:
    # The path names the benchmark and the hash: a file whose content says otherwise was misplaced
    # (or tampered with), and trusting either side would show it under the wrong submission.
    parts = path.split("/")
    if parts[0] != benchmark:
        raise MalformedFile(f"benchmark {benchmark!r} does not match its folder {parts[0]!r}")
    if parts[2].removesuffix(".json") != content_hash[:12]:
        raise MalformedFile(f"content hash {content_hash[:12]}... does not match its name {parts[2]!r}")


def _metadata(record: dict[str, Any]) -> dict[str, Any]:
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise MalformedFile("field 'metadata' is not an object")
    return {key: value for key, value in metadata.items() if key in ("family", "link", "model")}


def parse_request(record: dict[str, Any], path: str) -> dict[str, Any]:
    """A request record with every field the mirror uses (older ``idbench sync`` records get defaults)."""
    request = {key: _text(record, key) for key in ("model", "benchmark", "content_hash", "state")}
    if request["state"] not in REQUEST_STATES:
        raise MalformedFile(f"state {request['state']!r} is not one of {', '.join(REQUEST_STATES)}")
    _check_place(path, request["benchmark"], request["content_hash"])
    attempts = record.get("attempts", 0)
    if not isinstance(attempts, int) or attempts < 0:
        raise MalformedFile(f"field 'attempts' is not a count: {attempts!r}")
    reason = record.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise MalformedFile("field 'reason' is not a string")
    submitted = _epoch(record, "submitted_at")
    return request | {
        "benchmark_version": str(record.get("benchmark_version") or ""),
        "task": _text(record, "task", DEFAULT_TASK),
        "metadata": _metadata(record),
        "attempts": attempts,
        "reason": reason,
        "submitted_at": submitted,
        "updated_at": _epoch(record, "updated_at") or submitted,
    }


def parse_result(record: dict[str, Any], path: str) -> dict[str, Any]:
    """A results record as the store's columns need it; plumbing results are refused (never published)."""
    result = {
        key: _text(record, key)
        for key in ("model", "benchmark", "benchmark_version", "suite_version", "idbench_version", "profile", "content_hash")
    }
    _check_place(path, result["benchmark"], result["content_hash"])
    if record.get("plumbing") or result["profile"] == "tiny":
        raise MalformedFile("a plumbing (tiny-profile) result: such numbers are never published")
    for key in ("aggregates", "models", "not_run"):
        value = record.get(key, {} if key != "aggregates" else None)
        if not isinstance(value, dict):
            raise MalformedFile(f"field {key!r} is missing or not an object")
        result[key] = value
    # Who judged and the copy check (absent in older records: loaded as not recorded). A record whose
    # fields are malformed or oversized is skipped whole, named by its path, rather than half loaded.
    for key, check in (("judge", check_judge), ("copies", check_copies)):
        problem = check(record.get(key))
        if problem is not None:
            raise MalformedFile(problem)
        result[key] = record.get(key)
    samples = record.get("samples")
    if samples is not None and samples != f"{Path(path).parent.as_posix()}/{SAMPLES_FILE}":
        raise MalformedFile(f"field 'samples' names {samples!r}, not the {SAMPLES_FILE} beside it")
    return result | {
        "task": _text(record, "task", DEFAULT_TASK),
        "metadata": _metadata(record),
        "scored_at": _epoch(record, "scored_at"),
        "samples": samples,
    }


def _request_of(result: dict[str, Any]) -> dict[str, Any]:
    """The submission of a result with no request record (e.g. pushed by an older ``idbench sync``)."""
    keys = ("model", "benchmark", "benchmark_version", "content_hash", "task", "metadata")
    return {key: result[key] for key in keys} | {"state": "FINISHED", "submitted_at": result["scored_at"]}


def _created(request: dict[str, Any] | None, scored: tuple[dict[str, Any], Path] | None) -> float:
    return request["submitted_at"] if request is not None else scored[0]["scored_at"]


def _job_state(request: dict[str, Any]) -> tuple[str, str | None]:
    if request["state"] == "WITHDRAWN":  # as Store.withdraw leaves it: off the rankings, not rescored
        return "FAILED", f"withdrawn: {request['reason'] or 'no reason given'}"
    return request["state"], request["reason"]


def _insert_submission(db: sqlite3.Connection, request: dict[str, Any], result: dict[str, Any] | None, not_public: str) -> int:
    # The result's metadata (family, link) is what its model page shows; the request's fills the gaps.
    metadata = dict(request["metadata"], **(result["metadata"] if result else {}), model=request["model"])
    withdrawn = request["state"] == "WITHDRAWN"
    cursor = db.execute(
        "INSERT INTO submissions (benchmark, benchmark_version, data_dir, model_name, metadata_json, content_hash,"
        " stored_path, submitter, created_at, task, withdrawn_at, withdrawn_reason) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
        (
            request["benchmark"], request["benchmark_version"] or (result or {}).get("benchmark_version", ""), not_public,
            request["model"], json.dumps(metadata, sort_keys=True), request["content_hash"], not_public,
            request["submitted_at"], request["task"],
            request.get("updated_at") if withdrawn else None, (request.get("reason") or "withdrawn") if withdrawn else None,
        ),
    )  # fmt: skip
    return cursor.lastrowid


def _insert_job(
    db: sqlite3.Connection, submission_id: int, state: str, reason: str | None, attempts: int, created: float, updated: float
) -> int:
    finished = updated if state in ("FINISHED", "FAILED", "PARKED") else None
    cursor = db.execute(
        "INSERT INTO jobs (submission_id, state, reason, attempts, created_at, finished_at) VALUES (?, ?, ?, ?, ?, ?)",
        (submission_id, state, reason, attempts, created, finished),
    )
    return cursor.lastrowid


def _insert_result(
    db: sqlite3.Connection, store: Store, final_home: Path, submission_id: int, job_id: int, result: dict[str, Any], folder: Path
) -> None:
    target = store.results_dir / str(submission_id)
    target.mkdir(parents=True, exist_ok=True)
    if result["samples"] is not None and (folder / SAMPLES_FILE).is_file():
        shutil.copyfile(folder / SAMPLES_FILE, target / SAMPLES_FILE)  # follows the Hub cache's symlinks
    db.execute(
        "INSERT INTO results (submission_id, job_id, benchmark, benchmark_version, suite_version, profile, plumbing,"
        " models_json, idbench_version, aggregates_json, not_run_json, results_path, created_at, current,"
        " judge_json, judge_key, copies_json)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (
            submission_id, job_id, result["benchmark"], result["benchmark_version"], result["suite_version"], result["profile"],
            json.dumps(result["models"], sort_keys=True), result["idbench_version"], json.dumps(result["aggregates"], sort_keys=True),
            json.dumps(result["not_run"], sort_keys=True), str(final_home / target.relative_to(store.home)), result["scored_at"],
            *judge_columns(result["judge"], result["copies"]),
        ),
    )  # fmt: skip


# --- refreshing on a schedule ----------------------------------------------------------------------


def refresh_interval() -> float:
    """``$IDBENCH_HUB_REFRESH_S`` (seconds between head checks; 0 checks on every rerun), default 300."""
    text = os.environ.get(REFRESH_ENV) or str(DEFAULT_REFRESH_S)
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{REFRESH_ENV}={text!r}: expected a number of seconds") from None
    if seconds < 0:
        raise ValueError(f"{REFRESH_ENV}={text!r}: expected a number of seconds >= 0")
    return seconds


class Refresher:
    """The app's mirror: built on first use, its repo heads checked again at most every ``interval`` seconds.

    One refresh at a time per process; a rerun that finds another refresh under way reads the mirror
    it has. A refresh that fails (the Hub is down, say) keeps the last mirror and records the error in
    :attr:`error`, so the Status page can say why the numbers may be stale.
    """

    def __init__(self, requests: DatasetRepo, results: DatasetRepo, home: Path, interval: float, clock: Callable[[], float] = time.monotonic):
        self.requests, self.results, self.home, self.interval, self.clock = requests, results, Path(home), interval, clock
        self.info: MirrorInfo | None = None
        self.checked_at: float | None = None  # epoch time of the last head check
        self.error: str | None = None
        self._last: float | None = None
        self._lock = threading.Lock()

    def get(self) -> MirrorInfo:
        """The mirror to read now, refreshed first when it is due (blocking only when there is none yet)."""
        due = self._last is None or self.clock() - self._last >= self.interval
        if due and self._lock.acquire(blocking=self.info is None):
            try:
                self._refresh()
            finally:
                self._lock.release()
        if self.info is None:
            raise RuntimeError(self.error or "the Hub mirror is not built yet")
        return self.info

    def expire(self) -> None:
        """Make the next :meth:`get` check the heads (after this process committed to a repo itself)."""
        self._last = None

    def _refresh(self) -> None:
        self._last = self.clock()
        try:
            self.info = mirror(self.requests, self.results, self.home)
            self.error = None
        except Exception as error:  # noqa: BLE001 - a failed refresh must not take the app down
            logger.exception("hub mirror: refresh of %s / %s failed", self.requests.repo_id, self.results.repo_id)
            self.error = f"{type(error).__name__}: {error}"
            if self.info is None:
                self.info = current(self.home)  # a mirror an earlier process left is better than none
        self.checked_at = time.time()
