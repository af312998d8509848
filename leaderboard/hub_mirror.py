"""Read the two Hub dataset repos of a public deployment back into a results store the app can show.

A Hub-backed leaderboard (docs/deploy.md) keeps its durable state in a requests repo and a results
repo (layouts: ``hub.py`` sync and ``queue/hub.py``). The Space does not keep a database of its own: it
**mirrors** the two repos' snapshots into a fresh, read-only :class:`~idbench.leaderboard.store.Store`,
so every page of the app works exactly as over the embedded store.

- each request record ``<benchmark>/<slug>/<hash12>.json`` becomes a submission with one job in the
  record's state and reason (the Status page); WITHDRAWN becomes a withdrawn submission;
- each result ``<benchmark>/<slug>/<hash12>/aggregates.json`` becomes that submission's FINISHED job
  and current result; its ``results.parquet`` (and ``judge_evidence.parquet``, when a judge ran) is
  copied beside it (``results_path``), so the model page reads per-sample values as it does locally. A withdrawn result has had its files deleted from
  the results repo, so it has nothing to mirror; if the deletion lags the WITHDRAWN record, the
  withdrawn submission hides it all the same.

Nothing in the repos holds a submitter's name or images, so the mirror has neither: ``submitter`` is
NULL and the submission's ``data_dir`` / ``stored_path`` name a folder that does not exist.

Every file is read by ``hub_records`` (the bounded reader and the schema checks the workers use too):
a file that cannot be read (over its size or nesting limit, bad JSON, a non-finite number, a missing
field, a bad timestamp, a path that does not match its content) or whose parquet footer is corrupt is
skipped and reported by repo and path in :attr:`MirrorInfo.skipped` (and the log): one bad file never
takes the leaderboard down.

A result is shown only when it is **proven** (:func:`prove`): exactly one request record claims its
content hash, with the same model, benchmark and task, in the folder beside it. An orphan result, a
mismatched one, and every record of a content hash that two requests (or two results) claim are
not shown and are listed in :attr:`MirrorInfo.conflicts`, which the Status page shows.

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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from idbench import settings
from idbench.atomic import atomic_directory
from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.results import AGGREGATES_FILE, EVIDENCE_FILE, SAMPLES_FILE
from idbench.leaderboard import board
from idbench.leaderboard.hub_records import (
    MAX_REQUEST_BYTES,
    MAX_RESULT_BYTES,
    RESULT_PROVENANCE,
    MalformedRecord,
    parse_time,
    read_record,
    request_problems,
    result_problems,
    samples_problem,
)
from idbench.leaderboard.hubrepo import JSON_FILES, DatasetRepo
from idbench.leaderboard.judges import judge_columns
from idbench.leaderboard.store import JOB_STATES, Store

logger = logging.getLogger(__name__)

REFRESH_ENV, DEFAULT_REFRESH_S = settings.HUB_REFRESH_S, float(settings.BY_NAME[settings.HUB_REFRESH_S].default)
POINTER = "CURRENT.json"
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
    skipped: tuple[str, ...] = field(default_factory=tuple)  # "repo: path: why", one per malformed file
    # "repo: path: why", one per well-formed record not shown: an orphan or mismatched result, a conflict
    conflicts: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        record = asdict(self) | {
            "store_home": self.store_home.name,
            "skipped": list(self.skipped),
            "conflicts": list(self.conflicts),
        }
        return json.dumps(record, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, home: Path) -> MirrorInfo:
        record = json.loads(text)
        lists = {
            key: tuple(record.get(key) or ()) for key in ("skipped", "conflicts")
        }  # older pointers had no conflicts
        return cls(**(record | {"store_home": Path(home) / record["store_home"]} | lists))


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
    if (
        existing is not None
        and (existing.requests_revision, existing.results_revision) == heads
        and existing.store_home.is_dir()
    ):
        return existing
    name = f"mirror-{(heads[0] or 'empty')[:12]}-{(heads[1] or 'empty')[:12]}"
    with atomic_directory(home / name, overwrite=True) as staging:
        counts, skipped, conflicts = build_store(
            Store(staging),
            home / name,
            requests.snapshot(heads[0], JSON_FILES) if heads[0] else None,  # not the zips
            results.snapshot(heads[1]) if heads[1] else None,
            requests.repo_id,
            results.repo_id,
            now(),
        )
    # The boards' rank intervals and tiers, resampled once per sync (the pages read them, never resample);
    # in place, where the store's result paths point, before the pointer shows this mirror.
    board.refresh_quietly(Store(home / name))
    info = MirrorInfo(
        home / name, requests.repo_id, results.repo_id, *heads, now(), *counts, tuple(skipped), tuple(conflicts)
    )
    (home / (POINTER + ".tmp")).write_text(info.to_json(), encoding="utf-8")
    os.replace(home / (POINTER + ".tmp"), home / POINTER)
    _drop_old_builds(home, keep=info.store_home.name)
    return info


def _drop_old_builds(home: Path, keep: str) -> None:
    builds = sorted(
        (p for p in home.glob("mirror-*") if p.is_dir() and p.name != keep), key=lambda p: p.stat().st_mtime
    )
    for old in builds[: max(len(builds) - (KEEP_BUILDS - 1), 0)]:
        shutil.rmtree(old, ignore_errors=True)


# --- reading the snapshots into a store ---------------------------------------------------------------


def build_store(
    store: Store,
    final_home: Path,
    requests_dir: Path | None,
    results_dir: Path | None,
    requests_repo: str,
    results_repo: str,
    now: float | None = None,
) -> tuple[tuple[int, int], list[str], list[str]]:
    """Fill an empty ``store`` from the two snapshot folders; ``((submissions, results), skipped, conflicts)``.

    ``final_home`` is where the store's folder will be once swapped in (it is built in a staging
    folder): the paths recorded in it point there. ``skipped`` lists the malformed files, ``conflicts``
    the well-formed records that :func:`prove` does not show (orphans, mismatches, two claims on one
    content hash), one ``"repo: path: why"`` line each.
    """
    now = time.time() if now is None else now
    skipped: list[str] = []
    requests = list(
        _parsed(
            requests_dir, "*/*/*.json", requests_repo, lambda r, p: parse_request(r, p, now), MAX_REQUEST_BYTES, skipped
        )
    )
    results = list(
        _parsed(
            results_dir,
            f"*/*/*/{AGGREGATES_FILE}",
            results_repo,
            lambda r, p: parse_result(r, p, now),
            MAX_RESULT_BYTES,
            skipped,
        )
    )
    results = [
        (result, path) for result, path in results if not _samples_skipped(results_dir, path, results_repo, skipped)
    ]
    shown, unproven = prove(requests, results)
    # a request record is <benchmark>/<slug>/<hash12>.json, a result <benchmark>/<slug>/<hash12>/aggregates.json
    conflicts = [f"{requests_repo if path.count('/') == 2 else results_repo}: {path}: {why}" for path, why in unproven]
    for line in conflicts:
        logger.warning("hub mirror: not shown: %s", line)

    not_public = str(Path(final_home) / NOT_PUBLIC)
    with store.transaction() as db:
        for request, scored in sorted(shown, key=lambda pair: (pair[0]["submitted_at"], pair[0]["content_hash"])):
            submission_id = _insert_submission(db, request, scored[0] if scored else None, not_public)
            if scored is not None:
                result, path = scored
                job_id = _insert_job(
                    db, submission_id, "FINISHED", None, 1, request["submitted_at"], result["scored_at"]
                )
                _insert_result(
                    db, store, Path(final_home), submission_id, job_id, result, results_dir / Path(path).parent
                )
            if not (scored is not None and request["state"] == "FINISHED"):
                _insert_job(
                    db,
                    submission_id,
                    *_job_state(request),
                    request["attempts"],
                    request["submitted_at"],
                    request["updated_at"],
                )
    return (len(shown), sum(scored is not None for _, scored in shown)), skipped, conflicts


Record = tuple[dict[str, Any], str]  # a parsed record and its path in its repo


def prove(
    requests: list[Record], results: list[Record]
) -> tuple[list[tuple[dict[str, Any], Record | None]], list[tuple[str, str]]]:
    """Which records the mirror shows: ``(shown, unproven)``.

    ``shown`` is each request that alone claims its content hash, with the one result proven to be
    its own (or None); ``unproven`` is ``(path, why)`` of every record not shown. A result is its
    request's when it has the same content hash, model, benchmark and task, and lives in the folder
    beside the request's path (``<benchmark>/<slug>/<hash12>``). Then:

    - two (or more) requests with one content hash: a **conflict**; none of them and no result of that
      hash is shown (a forged request must not relabel the real submission, nor hide it unnoticed);
    - two (or more) results with one content hash: a **conflict**; none of them is shown, nor their
      request (a second aggregates.json must not replace or shadow the real numbers);
    - a result whose request is missing (an orphan) or says otherwise (model, benchmark, task,
      folder): not shown; the request, if any, is shown without a result.
    """
    by_hash: dict[str, tuple[list[Record], list[Record]]] = {}
    for record in requests:
        by_hash.setdefault(record[0]["content_hash"], ([], []))[0].append(record)
    for record in results:
        by_hash.setdefault(record[0]["content_hash"], ([], []))[1].append(record)

    shown: list[tuple[dict[str, Any], Record | None]] = []
    unproven: list[tuple[str, str]] = []
    for digest, (claims, scored) in sorted(by_hash.items()):
        if len(claims) > 1 or len(scored) > 1:
            kind = f"{len(claims)} request records" if len(claims) > 1 else f"{len(scored)} results"
            others = ", ".join(path for _, path in claims + scored)
            unproven += [
                (path, f"conflict: {kind} claim content hash {digest[:12]}... ({others}); none is shown")
                for _, path in claims + scored
            ]
            continue
        request = claims[0][0] if claims else None
        result = scored[0] if scored else None
        if result is not None and request is None:
            unproven.append(
                (
                    result[1],
                    f"no request record for content hash {digest[:12]}...: a result without provenance is not shown",
                )
            )
            result = None
        elif result is not None and (why := _mismatch(request, claims[0][1], *result)) is not None:
            unproven.append((result[1], f"does not match the request record {claims[0][1]}: {why}; not shown"))
            result = None
        if request is not None:
            shown.append((request, result))
    return shown, unproven


def _mismatch(request: dict[str, Any], request_path: str, result: dict[str, Any], result_path: str) -> str | None:
    for key in ("model", "benchmark", "task"):
        if request[key] != result[key]:
            return f"its {key} is {result[key]!r}, the request's {request[key]!r}"
    if Path(result_path).parent.as_posix() != request_path.removesuffix(".json"):
        return f"it is in {Path(result_path).parent.as_posix()}, not beside the request ({request_path.removesuffix('.json')})"
    return None


def _parsed(
    folder: Path | None,
    pattern: str,
    repo: str,
    parse: Callable[[dict[str, Any], str], dict[str, Any]],
    max_bytes: int,
    skipped: list[str],
) -> Iterator[Record]:
    """``(parse(record, path), path)`` of every file matching ``pattern`` under ``folder``, in path order;
    a file that is unreadable, over ``max_bytes``, too deep or malformed goes to ``skipped``."""
    if folder is None:
        return
    for file in sorted(Path(folder).glob(pattern)):
        path = file.relative_to(folder).as_posix()
        try:
            yield parse(read_record(Path(folder), path, max_bytes=max_bytes), path), path
        except (MalformedRecord, MalformedFile) as error:
            _skip(skipped, repo, path, "; ".join(error.problems) if isinstance(error, MalformedRecord) else error)


def _samples_skipped(results_dir: Path | None, path: str, repo: str, skipped: list[str]) -> bool:
    """Whether a parquet file beside the result at ``path`` is corrupt or oversized (then it is listed)."""
    for name in (SAMPLES_FILE, EVIDENCE_FILE):
        file = Path(results_dir) / Path(path).parent / name
        if file.is_file() and (problem := samples_problem(file)) is not None:
            _skip(skipped, repo, path, f"{problem}; the result is not shown")
            return True
    return False


def _skip(skipped: list[str], repo: str, path: str, why: object) -> None:
    line = f"{repo}: {path}: {why}"
    logger.warning("hub mirror: skipped %s", line)
    skipped.append(line)


def _epoch(record: dict[str, Any], key: str) -> float:
    value = record.get(key)
    return 0.0 if value is None else parse_time(value)  # hub_records checked it: a sane time with a zone


def _metadata(record: dict[str, Any]) -> dict[str, Any]:
    metadata = record.get("metadata") or {}
    return {key: value for key, value in metadata.items() if key in ("family", "link", "model")}


def parse_request(record: dict[str, Any], path: str, now: float | None = None) -> dict[str, Any]:
    """A request record with every field the mirror uses (older ``idbench sync`` records get defaults).

    The record is checked by :func:`hub_records.request_problems`, the check the workers make:
    :class:`MalformedRecord` lists what is wrong.
    """
    problems = request_problems(path, record, time.time() if now is None else now)
    if problems:
        raise MalformedRecord(path, problems)
    submitted = _epoch(record, "submitted_at")
    return {key: record[key] for key in ("model", "benchmark", "content_hash", "state")} | {
        "benchmark_version": str(record.get("benchmark_version") or ""),
        "task": record.get("task") or DEFAULT_TASK,
        "metadata": _metadata(record),
        "attempts": record.get("attempts", 0),
        "reason": record.get("reason"),
        "submitted_at": submitted,
        "updated_at": _epoch(record, "updated_at") or submitted,
    }


def parse_result(record: dict[str, Any], path: str, now: float | None = None) -> dict[str, Any]:
    """A results record as the store's columns need it, checked by :func:`hub_records.result_problems`
    (plumbing results are refused: never published); :class:`MalformedRecord` lists what is wrong."""
    problems = result_problems(path, record, time.time() if now is None else now)
    if problems:
        raise MalformedRecord(path, problems)
    return {key: record[key] for key in RESULT_PROVENANCE} | {
        "aggregates": record["aggregates"],
        "models": record.get("models") or {},
        "not_run": record.get("not_run") or {},
        "judge": record.get("judge"),
        "copies": record.get("copies"),
        "task": record.get("task") or DEFAULT_TASK,
        "metadata": _metadata(record),
        "scored_at": _epoch(record, "scored_at"),
        "samples": record.get("samples"),
    }


def _job_state(request: dict[str, Any]) -> tuple[str, str | None]:
    if request["state"] == "WITHDRAWN":  # as Store.withdraw leaves it: off the rankings, not rescored
        return "FAILED", f"withdrawn: {request['reason'] or 'no reason given'}"
    return request["state"], request["reason"]


def _insert_submission(
    db: sqlite3.Connection, request: dict[str, Any], result: dict[str, Any] | None, not_public: str
) -> int:
    # The result's metadata (family, link) is what its model page shows; the request's fills the gaps.
    metadata = dict(request["metadata"], **(result["metadata"] if result else {}), model=request["model"])
    withdrawn = request["state"] == "WITHDRAWN"
    cursor = db.execute(
        "INSERT INTO submissions (benchmark, benchmark_version, data_dir, model_name, metadata_json, content_hash,"
        " stored_path, submitter, created_at, task, withdrawn_at, withdrawn_reason) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
        (
            request["benchmark"],
            request["benchmark_version"] or (result or {}).get("benchmark_version", ""),
            not_public,
            request["model"],
            json.dumps(metadata, sort_keys=True),
            request["content_hash"],
            not_public,
            request["submitted_at"],
            request["task"],
            request.get("updated_at") if withdrawn else None,
            (request.get("reason") or "withdrawn") if withdrawn else None,
        ),
    )
    return cursor.lastrowid


def _insert_job(
    db: sqlite3.Connection,
    submission_id: int,
    state: str,
    reason: str | None,
    attempts: int,
    created: float,
    updated: float,
) -> int:
    finished = updated if state in ("FINISHED", "FAILED", "PARKED") else None
    cursor = db.execute(
        "INSERT INTO jobs (submission_id, state, reason, attempts, created_at, finished_at) VALUES (?, ?, ?, ?, ?, ?)",
        (submission_id, state, reason, attempts, created, finished),
    )
    return cursor.lastrowid


def _insert_result(
    db: sqlite3.Connection,
    store: Store,
    final_home: Path,
    submission_id: int,
    job_id: int,
    result: dict[str, Any],
    folder: Path,
) -> None:
    target = store.results_dir / str(submission_id)
    target.mkdir(parents=True, exist_ok=True)
    if result["samples"] is not None and (folder / SAMPLES_FILE).is_file():
        shutil.copyfile(folder / SAMPLES_FILE, target / SAMPLES_FILE)  # follows the Hub cache's symlinks
    if (folder / EVIDENCE_FILE).is_file():  # a judge's evidence, which the model page shows beside the samples
        shutil.copyfile(folder / EVIDENCE_FILE, target / EVIDENCE_FILE)
    db.execute(
        "INSERT INTO results (submission_id, job_id, benchmark, benchmark_version, suite_version, profile, plumbing,"
        " models_json, idbench_version, aggregates_json, not_run_json, results_path, created_at, current,"
        " judge_json, judge_key, copies_json)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (
            submission_id,
            job_id,
            result["benchmark"],
            result["benchmark_version"],
            result["suite_version"],
            result["profile"],
            json.dumps(result["models"], sort_keys=True),
            result["idbench_version"],
            json.dumps(result["aggregates"], sort_keys=True),
            json.dumps(result["not_run"], sort_keys=True),
            str(final_home / target.relative_to(store.home)),
            result["scored_at"],
            *judge_columns(result["judge"], result["copies"]),
        ),
    )


# --- refreshing on a schedule ----------------------------------------------------------------------


def refresh_interval() -> float:
    """``$IDBENCH_HUB_REFRESH_S`` (seconds between head checks; 0 checks on every rerun), default 300."""
    return settings.hub_refresh_s()


class Refresher:
    """The app's mirror: built on first use, its repo heads checked again at most every ``interval`` seconds.

    One refresh at a time per process; a rerun that finds another refresh under way reads the mirror
    it has. A refresh that fails (the Hub is down, say) keeps the last mirror and records the error in
    :attr:`error`, so the Status page can say why the numbers may be stale.
    """

    def __init__(
        self,
        requests: DatasetRepo,
        results: DatasetRepo,
        home: Path,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.requests, self.results, self.home, self.interval, self.clock = (
            requests,
            results,
            Path(home),
            interval,
            clock,
        )
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
        except Exception as error:
            logger.exception("hub mirror: refresh of %s / %s failed", self.requests.repo_id, self.results.repo_id)
            self.error = f"{type(error).__name__}: {error}"
            if self.info is None:
                self.info = current(self.home)  # a mirror an earlier process left is better than none
        self.checked_at = time.time()
