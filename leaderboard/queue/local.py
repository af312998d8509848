"""The local queue backend: a SQLite store and a submissions folder under ``$IDBENCH_HOME``.

Submit (validate, store, queue), claim with a lease, report back, rescore; :class:`StoreQueue` is the
same as a :class:`~idbench.leaderboard.queue.protocol.JobQueue`.

A job moves PENDING -> RUNNING -> FINISHED | FAILED | PARKED. FAILED is the submission's fault (the
reason says what to fix); a fault of the worker (a missing model, GPU memory, the judge, the disk, a
killed worker) puts the job back to PENDING with the attempt counted (``requeue``), and a job whose
``MAX_ATTEMPTS`` attempts (the protocol's) all ended that way is PARKED: not failed, not retried,
until an admin requeues it (``rescore``). A claim is atomic (``BEGIN IMMEDIATE``: one writer at a
time), so any number of workers, in any number of processes, never claim a job twice. A
claim is a lease: a worker that dies leaves a RUNNING job whose lease runs out, and the next claim
takes it again (the feature cache under ``home/features`` makes the retry resume rather than restart).
Reporting back is fenced by (lease owner, attempt): a worker that lost its lease cannot overwrite the
outcome of the worker that took the job over.

Example::

    store = Store()
    result = submit(store, Path("my-submission.zip"), Path("data/identity-collapse"))
    job = claim(store, "worker-1", lease_seconds=600)
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idbench.atomic import atomic_directory, sweep_staging
from idbench.builders.spec import DEFAULT_TASK
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import content_cache_dir, load_benchmark_data
from idbench.evaluate_pkg.submission import (
    MANIFEST_COLUMNS,
    MANIFEST_NAME,
    METADATA_NAME,
    Entry,
    Problem,
    Submission,
    SubmissionError,
    metadata_text_problems,
    validate_submission,
)
from idbench.leaderboard import board
from idbench.leaderboard.judges import judge_columns
from idbench.leaderboard.queue.protocol import (
    MAX_ATTEMPTS,
    DiskReserve,
    Lease,
    RateLimit,
    Work,
    parked_reason,
    readiness_problems,
)
from idbench.leaderboard.store import Job, LeaseLostError, RateLimitError, Store, insert_job, iso
from idbench.names import (
    confusable_keys,
    lookalike_characters,
    name_problems,
    normalise_name,
    rate_identity,
    submitter_identity,
)

RETRIEVAL_NOT_QUEUED = (
    "task 'retrieval': the leaderboard ranks generated images (the reference-based and text-to-image tracks); "
    "score a ranking with `idbench score SUBMISSION --data DIR --out DIR`"
)


@dataclass(frozen=True)
class SubmitResult:
    submission_id: int
    job_id: int
    duplicate: bool  # True: these files and model were already submitted; nothing new was queued


# --- submit --------------------------------------------------------------------------------------


def submission_hash(benchmark: str, model_name: str, entries: Iterable[Entry], task: str = DEFAULT_TASK) -> str:
    """The content hash of a submission: benchmark, model name, task, and every (prompt_id, seed, image hash).

    The pairs are part of it (not only the image hashes): the same images assigned to other prompts
    are another submission, and so are the same images declared for another task. Sorting makes it
    independent of the manifest's row order and of the format (folder, zip or parquet) the files came in.
    """
    pairs = sorted((e.prompt_id, e.seed, e.content_hash) for e in entries)
    # The default task stays out of the payload, so hashes of reference-based submissions are unchanged.
    fields = {"benchmark": benchmark, "model": model_name, "pairs": pairs} | (
        {} if task == DEFAULT_TASK else {"task": task}
    )
    payload = json.dumps(fields, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def benchmark_version(data_dir: Path) -> str:
    """A digest of the built benchmark folder's content: two builds that differ in any byte differ."""
    return content_cache_dir(Path(data_dir)).name


def submit(
    store: Store,
    submission_path: Path,
    data_dir: Path,
    model_name: str | None = None,
    submitter: str | None = None,
    *,
    family: str | None = None,
    link: str | None = None,
    rate_limit: RateLimit | None = None,
    client: str | None = None,
) -> SubmitResult:
    """Validate a submission against the benchmark in ``data_dir``, store its files and queue a job.

    Raises :class:`~idbench.evaluate_pkg.submission.SubmissionError` (every problem listed) before anything is
    stored or queued. ``model_name`` overrides the ``model`` of ``submission.json`` (and is written
    into the stored copy, so the results carry the name the leaderboard shows). The files are stored
    under ``home/submissions/<content_hash>/`` as a manifest folder, whatever format they came in (a
    zip is stored extracted, parquet images as files). The same files and model submitted again are
    recognised: the existing ids come back with ``duplicate=True`` and nothing is queued.

    ``family`` and ``link`` override those fields of ``submission.json`` the same way, under the same
    limits (:func:`~idbench.evaluate_pkg.submission.metadata_text_problems`). With ``rate_limit`` (the app
    sets one; the maintainer's CLI does not), a submitter over the limit gets :class:`RateLimitError`
    before the files are even read; a duplicate does not count against it.

    Names cannot impersonate (:mod:`idbench.names`): the model name, family and submitter are refused
    with control, format (bidi, zero-width) or mixed-script characters and stored in NFKC; a model name
    that another submitter already uses on this benchmark (same :func:`~idbench.names.name_key`, not
    withdrawn) is refused, and so is one that looks like it (:func:`~idbench.names.looks_alike`:
    ``FLUX.1–dev`` with an en dash, Lisu or Armenian lookalike letters, small capitals, a middle dot), while the same submitter may
    submit new files under their name again.

    ``client`` is what the caller knows of the submitter's client: the app passes
    :func:`idbench.names.request_client` of the request (the signed-in Hub user on a Space, else the
    connection's address, through ``$IDBENCH_TRUSTED_PROXIES`` proxies at most); only a digest of it is
    stored. The rate limit counts by it whenever it is given (:func:`idbench.names.rate_identity`), so a
    new submitter name is no new allowance; anonymous submitters also own names by it. Without one (the
    local CLI) anonymous submissions are one submitter, ``anonymous``.
    """
    submitter = _checked_submitter(submitter)
    identity = submitter_identity(submitter, client)
    if rate_limit is not None:
        _check_rate(store, submitter, rate_limit, client)
    data_dir = Path(data_dir).resolve()
    data = load_benchmark_data(data_dir)
    version = benchmark_version(data_dir)
    with validate_submission(Path(submission_path), data) as submission:
        name, metadata, digest = queued_metadata(submission, data.name, model_name, family=family, link=link)
        existing = store.find_duplicate(digest)
        if existing is not None:
            return SubmitResult(existing[0], existing[1], duplicate=True)
        keys = confusable_keys(name)  # the same name, or one that looks like it (idbench.names)
        taken = [
            f"submission {i} ({model!r})"
            for i, model, _, owner in store.submission_identities(data.name)
            if owner != identity and keys & confusable_keys(model)
        ]
        if taken:
            raise SubmissionError([Problem(None, None, "model metadata", name_taken_message(name, data.name, taken))])
        stored = store_files(store.submissions_dir, digest, metadata, submission.entries)
    submission_id, job_id, duplicate = store.add_submission(
        benchmark=data.name,
        benchmark_version=version,
        data_dir=data_dir,
        model_name=name,
        metadata=metadata,
        content_hash=digest,
        stored_path=stored,
        submitter=submitter,
        rate_limit=None if rate_limit is None else (rate_limit.max_submissions, rate_limit.window_s),
        task=submission.task,
        client=client,
    )
    return SubmitResult(submission_id, job_id, duplicate)


def _checked_submitter(submitter: str | None) -> str | None:
    """The submitter's name in NFKC (None when blank); SubmissionError for refused characters."""
    if submitter is None:
        return None
    problems = name_problems("submitter", submitter)
    if problems:
        raise SubmissionError([Problem(None, None, "submitter", message) for message in problems])
    return normalise_name(submitter) or None


def name_taken_message(name: str, benchmark: str, taken: list[str]) -> str:
    """The one line that refuses a model name another submitter already uses (``taken``: where, e.g.
    ``"submission 3 ('FLUX.1-dev')"``)."""
    more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
    read = lookalike_characters(name)
    how = f" (its {', '.join(read)})" if read else ""
    return (
        f"field 'model': the name {name!r} is or looks like a name already used on {benchmark} by another submitter "
        f"({taken[0]}{more}){how}; names are compared ignoring case, width, spacing, combining marks and lookalike "
        "characters (Unicode's confusables, digits and dots of any script, small capitals): choose another name"
    )


def queued_metadata(
    submission: Submission,
    benchmark: str,
    model_name: str | None = None,
    *,
    family: str | None = None,
    link: str | None = None,
) -> tuple[str, dict, str]:
    """The model name, metadata and content hash a validated submission is queued under (any queue: local or Hub).

    ``model_name``, ``family`` and ``link`` override ``submission.json``'s fields (blank ones are
    ignored) under :func:`~idbench.evaluate_pkg.submission.metadata_text_problems`' limits. Raises
    :class:`SubmissionError` for a retrieval submission (the leaderboard ranks generations; a ranking
    is scored alone) or metadata over the limits.
    """
    if submission.task == "retrieval":
        raise SubmissionError([Problem(None, None, METADATA_NAME, RETRIEVAL_NOT_QUEUED)])
    overrides = {
        key: value.strip() for key, value in (("family", family), ("link", link)) if value is not None and value.strip()
    }
    name = (model_name or "").strip() or submission.model
    metadata = dict(submission.metadata, **overrides, model=name)
    problems = metadata_text_problems(metadata)
    # Character, script and link rules (idbench.names); a field that already has a problem keeps that one
    # line (metadata_text_problems may apply the same rules: nothing is said twice).
    for key in ("model", "family", "link"):
        if isinstance(metadata.get(key), str) and not any(p.startswith(f"field {key!r}") for p in problems):
            problems += name_problems(key, metadata[key])
    if not problems:  # stored and shown in NFKC, so 'ＦＬＵＸ' is 'FLUX' wherever it is read
        name = normalise_name(name)
        metadata.update(
            {key: normalise_name(metadata[key]) for key in ("model", "family") if isinstance(metadata.get(key), str)}
        )
        metadata["model"] = name
    if problems:
        raise SubmissionError([Problem(None, None, "model metadata", message) for message in problems])
    return name, metadata, submission_hash(benchmark, name, submission.entries, submission.task)


def _check_rate(store: Store, submitter: str | None, limit: RateLimit, client: str | None = None) -> None:
    """Raise :class:`RateLimitError` when the submitter (by :func:`~idbench.names.rate_identity`: the
    client, whatever name it types, else a name's key, else the one anonymous pool) is over ``limit``."""
    recent = store.count_recent_submissions(submitter, time.time() - limit.window_s, client=client)
    if recent >= limit.max_submissions:
        identity = rate_identity(submitter, client)
        if identity.startswith("client:"):
            who = "this client" if submitter else "this anonymous client"
        else:
            who = f"submitter {submitter!r}" if submitter else "anonymous submitters"
        hours = limit.window_s / 3600
        raise RateLimitError(
            f"{who} made {recent} submissions in the last {hours:g} h; the limit is {limit.max_submissions}"
        )


def store_files(root: Path, digest: str, metadata: dict, entries: tuple[Entry, ...]) -> Path:
    """Write the submission as ``root/<digest>/`` (submission.json, manifest.csv, images/<hash>.<ext>).

    Written into a temporary sibling and renamed into place, so the folder is complete or absent.
    Content addressed: if the folder already exists (a submit that crashed before its insert, or one
    racing us), it holds these very files and is used as it is.
    """
    final = root / digest
    if final.is_dir():
        return final
    # keep_existing: a concurrent submit of the same files may win the race; its folder is kept.
    with atomic_directory(final, keep_existing=True) as staging:
        (staging / "images").mkdir()
        rows = []
        for entry in entries:
            # Images named by their hash: identical images (one picture for every seed) are stored once.
            file = f"images/{entry.content_hash}{entry.path.suffix.lower() or '.img'}"
            if not (staging / file).exists():
                (staging / file).write_bytes(entry.data())  # data() re-checks the hash taken at validation
            rows.append((entry.prompt_id, entry.seed, file))
        with (staging / MANIFEST_NAME).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(MANIFEST_COLUMNS)
            writer.writerows(rows)
        text = json.dumps(metadata, indent=2, ensure_ascii=False) + "\n"
        (staging / METADATA_NAME).write_text(text, encoding="utf-8")
    return final


# --- claim and report back -----------------------------------------------------------------------


def claim(
    store: Store, worker_id: str, lease_seconds: float, max_attempts: int = MAX_ATTEMPTS, job_id: int | None = None
) -> Job | None:
    """Take the oldest claimable job (PENDING, or RUNNING with an expired lease) for ``worker_id``.

    Returns None when there is nothing to do. ``job_id``: that job only (``idbench run --submit``
    records the job it just queued, whatever else waits). The job becomes RUNNING with a lease of
    ``lease_seconds`` and one more attempt. An expired job that already had ``max_attempts`` is marked
    PARKED instead of being handed out again.
    """
    with store.transaction() as db:  # BEGIN IMMEDIATE: no other writer between our SELECT and UPDATE
        while True:
            now = time.time()
            row = db.execute(
                "SELECT jobs.id, jobs.submission_id, jobs.state, jobs.attempts, submissions.benchmark,"
                " submissions.data_dir, submissions.stored_path, submissions.model_name"
                " FROM jobs JOIN submissions ON submissions.id = jobs.submission_id"
                " WHERE (jobs.state = 'PENDING' OR (jobs.state = 'RUNNING' AND jobs.lease_expires_at < ?))"
                " AND (? IS NULL OR jobs.id = ?)"
                " ORDER BY jobs.created_at, jobs.id LIMIT 1",
                (now, job_id, job_id),
            ).fetchone()
            if row is None:
                return None
            if row["state"] == "RUNNING" and row["attempts"] >= max_attempts:
                db.execute(
                    "UPDATE jobs SET state = 'PARKED', reason = ?, finished_at = ?, lease_expires_at = NULL WHERE id = ?",
                    (
                        parked_reason(
                            row["attempts"],
                            "the lease expired (worker killed or stuck?)",
                            _rescore_command(row["submission_id"]),
                        ),
                        now,
                        row["id"],
                    ),
                )
                continue
            db.execute(
                "UPDATE jobs SET state = 'RUNNING', lease_owner = ?, lease_expires_at = ?, attempts = attempts + 1,"
                " started_at = ?, reason = NULL WHERE id = ?",
                (worker_id, now + lease_seconds, now, row["id"]),
            )
            return Job(
                id=row["id"],
                submission_id=row["submission_id"],
                attempts=row["attempts"] + 1,
                lease_owner=worker_id,
                benchmark=row["benchmark"],
                data_dir=Path(row["data_dir"]),
                stored_path=Path(row["stored_path"]),
                model_name=row["model_name"],
            )


_OURS = "id = ? AND lease_owner = ? AND attempts = ? AND state = 'RUNNING'"


def _fence(job: Job) -> tuple[int, str, int]:
    return (job.id, job.lease_owner, job.attempts)


def _rescore_command(submission_id: int) -> str:
    """What an admin runs to requeue a parked job of ``submission_id``."""
    return f"idbench rescore --submission {submission_id}"


def heartbeat(store: Store, job: Job, lease_seconds: float) -> bool:
    """Extend the lease of a job we still hold; False if it was taken over (stop working on it)."""
    with store.transaction() as db:
        cursor = db.execute(
            f"UPDATE jobs SET lease_expires_at = ? WHERE {_OURS}", (time.time() + lease_seconds, *_fence(job))
        )
        return cursor.rowcount == 1


def finish(
    store: Store, job: Job, summary: dict[str, Any], results_path: Path, benchmark_version: str | None = None
) -> int:
    """Mark the job FINISHED and record its results as the submission's current ones; returns the result id.

    Older results of the submission stay, with ``current = 0``. Raises :class:`LeaseLostError`, and
    records nothing, if the job is no longer ours. ``benchmark_version`` defaults to the one recorded
    at submit time.
    """
    now = time.time()
    with store.transaction() as db:
        if (
            db.execute(
                f"UPDATE jobs SET state = 'FINISHED', finished_at = ?, lease_expires_at = NULL WHERE {_OURS}",
                (now, *_fence(job)),
            ).rowcount
            != 1
        ):
            raise LeaseLostError(
                f"job {job.id}: lease of {job.lease_owner} (attempt {job.attempts}) was lost; results not recorded"
            )
        if benchmark_version is None:
            benchmark_version = db.execute(
                "SELECT benchmark_version FROM submissions WHERE id = ?", (job.submission_id,)
            ).fetchone()[0]
        db.execute("UPDATE results SET current = 0 WHERE submission_id = ? AND current", (job.submission_id,))
        cursor = db.execute(
            "INSERT INTO results (submission_id, job_id, benchmark, benchmark_version, suite_version, profile, plumbing,"
            " models_json, idbench_version, aggregates_json, not_run_json, results_path, created_at, current,"
            " judge_json, judge_key, copies_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
            (
                job.submission_id,
                job.id,
                summary["benchmark"],
                benchmark_version,
                summary["suite_version"],
                summary["profile"],
                bool(summary["plumbing"]),
                json.dumps(summary.get("models", {}), sort_keys=True),
                summary["idbench_version"],
                json.dumps(summary["aggregates"], sort_keys=True, default=str),
                json.dumps(summary.get("not_run", {}), sort_keys=True),
                str(results_path),
                now,
                *judge_columns(summary.get("judge"), summary.get("copies")),
            ),
        )
        return cursor.lastrowid


def fail(store: Store, job: Job, reason: str) -> None:
    """Mark the job FAILED with a one-line ``reason``; raises :class:`LeaseLostError` if it is not ours."""
    with store.transaction() as db:
        cursor = db.execute(
            f"UPDATE jobs SET state = 'FAILED', reason = ?, finished_at = ?, lease_expires_at = NULL WHERE {_OURS}",
            (reason, time.time(), *_fence(job)),
        )
        if cursor.rowcount != 1:
            raise LeaseLostError(
                f"job {job.id}: lease of {job.lease_owner} (attempt {job.attempts}) was lost; failure not recorded"
            )


def requeue(store: Store, job: Job, reason: str, max_attempts: int = MAX_ATTEMPTS) -> str:
    """After a fault of the worker: the job back to PENDING (its attempt counted), or PARKED at ``max_attempts``.

    ``reason`` (one line) is kept on the job until it is claimed again. Returns the new state; raises
    :class:`LeaseLostError` if the job is no longer ours.
    """
    parked = job.attempts >= max_attempts
    with store.transaction() as db:
        if parked:
            cursor = db.execute(
                f"UPDATE jobs SET state = 'PARKED', reason = ?, finished_at = ?, lease_expires_at = NULL WHERE {_OURS}",
                (parked_reason(job.attempts, reason, _rescore_command(job.submission_id)), time.time(), *_fence(job)),
            )
        else:
            cursor = db.execute(
                f"UPDATE jobs SET state = 'PENDING', reason = ?, lease_owner = NULL, lease_expires_at = NULL WHERE {_OURS}",
                (f"back in the queue after a worker fault (attempt {job.attempts}): {reason}", *_fence(job)),
            )
        if cursor.rowcount != 1:
            raise LeaseLostError(
                f"job {job.id}: lease of {job.lease_owner} (attempt {job.attempts}) was lost; fault not recorded"
            )
    return "PARKED" if parked else "PENDING"


def park(store: Store, job: Job, reason: str) -> None:
    """Mark a job we hold PARKED now (e.g. past its wall-time limit); raises :class:`LeaseLostError` if it is not ours."""
    with store.transaction() as db:
        cursor = db.execute(
            f"UPDATE jobs SET state = 'PARKED', reason = ?, finished_at = ?, lease_expires_at = NULL WHERE {_OURS}",
            (f"{reason} (requeue with `{_rescore_command(job.submission_id)}`)", time.time(), *_fence(job)),
        )
        if cursor.rowcount != 1:
            raise LeaseLostError(
                f"job {job.id}: lease of {job.lease_owner} (attempt {job.attempts}) was lost; parking not recorded"
            )


def claimable_jobs(store: Store) -> list[dict[str, Any]]:
    """The jobs a claim could hand out now, in the order it would (PENDING, or RUNNING with an expired lease)."""
    with store.transaction(immediate=False) as db:
        rows = db.execute(
            "SELECT jobs.id, jobs.state, jobs.attempts, submissions.benchmark, submissions.model_name"
            " FROM jobs JOIN submissions ON submissions.id = jobs.submission_id"
            " WHERE jobs.state = 'PENDING' OR (jobs.state = 'RUNNING' AND jobs.lease_expires_at < ?)"
            " ORDER BY jobs.created_at, jobs.id",
            (time.time(),),
        ).fetchall()
    return [dict(row) for row in rows]


def queued_data_dirs(store: Store) -> list[Path]:
    """The benchmark folders of the jobs a claim could hand out now (PENDING, or RUNNING with an expired lease)."""
    with store.transaction(immediate=False) as db:
        rows = db.execute(
            "SELECT DISTINCT submissions.data_dir FROM jobs JOIN submissions ON submissions.id = jobs.submission_id"
            " WHERE jobs.state = 'PENDING' OR (jobs.state = 'RUNNING' AND jobs.lease_expires_at < ?) ORDER BY 1",
            (time.time(),),
        ).fetchall()
    return [Path(row[0]) for row in rows]


def release(store: Store, job: Job) -> bool:
    """Put a job we hold back to PENDING (a worker stopped by the user); False if it was not ours."""
    with store.transaction() as db:
        cursor = db.execute(
            f"UPDATE jobs SET state = 'PENDING', lease_owner = NULL, lease_expires_at = NULL WHERE {_OURS}", _fence(job)
        )
        return cursor.rowcount == 1


# --- rescore and listing -------------------------------------------------------------------------


def rescore_all(store: Store, benchmark: str | None = None) -> list[int]:
    """Queue a new job for every submission with current results (of ``benchmark``, or all); the ids.

    A submission that already has a PENDING or RUNNING job is skipped, so running this twice queues
    nothing twice. The worker inserts the new results as current; the old ones stay with current=0.
    """
    query = (
        "SELECT DISTINCT submission_id FROM results WHERE current"
        " AND submission_id NOT IN (SELECT submission_id FROM jobs WHERE state IN ('PENDING', 'RUNNING'))"
        " AND submission_id NOT IN (SELECT id FROM submissions WHERE withdrawn_at IS NOT NULL)"
    )
    params: tuple = ()
    if benchmark is not None:
        query += " AND benchmark = ?"
        params = (benchmark,)
    now = time.time()
    with store.transaction() as db:
        ids = [row[0] for row in db.execute(query + " ORDER BY submission_id", params).fetchall()]
        return [insert_job(db, submission_id, now) for submission_id in ids]


def rescore(store: Store, submission_id: int) -> int | None:
    """Queue a new job for one submission (an admin action); its id, or None if one is already queued.

    A withdrawn submission is refused with ValueError; KeyError names a missing id.
    """
    submission = store.submission(submission_id)
    if submission["withdrawn_at"] is not None:
        raise ValueError(f"submission {submission_id} was withdrawn; it is not rescored")
    with store.transaction() as db:
        busy = db.execute(
            "SELECT 1 FROM jobs WHERE submission_id = ? AND state IN ('PENDING', 'RUNNING')", (submission_id,)
        ).fetchone()
        return None if busy else insert_job(db, submission_id, time.time())


def jobs_table(store: Store) -> list[dict[str, Any]]:
    """Every job for ``idbench jobs``: plain JSON-ready dicts, times in ISO 8601 UTC, oldest first."""
    return [
        {
            "job": row["id"],
            "submission": row["submission_id"],
            "benchmark": row["benchmark"],
            "model": row["model_name"],
            "submitter": row["submitter"],
            "state": row["state"],
            "reason": row["reason"],
            "attempts": row["attempts"],
            "created": iso(row["created_at"]),
            "started": iso(row["started_at"]),
            "finished": iso(row["finished_at"]),
            "withdrawn": iso(row["withdrawn_at"]),
        }
        for row in store.list_jobs()
    ]


# --- the worker's view ---------------------------------------------------------------------------


class StoreQueue:
    """The local store as a :class:`~idbench.leaderboard.queue.protocol.JobQueue` (what ``idbench worker`` serves by
    default, and ``idbench submit`` fills without ``--hub``).

    ``submit`` is :func:`submit` on this store (a :class:`SubmitResult`). Results go to
    ``home/results/<submission_id>/<job_id>/``, tracebacks to ``home/logs/``; a job's submission is the
    normalised copy the store kept at submit time.
    """

    unit = "job"

    def __init__(self, store: Store, job_id: int | None = None):
        self.store = store
        self.home = store.home
        self.job_id = job_id  # serve this job only (``idbench run --submit``)
        self.description = f"the queue at {store.home}" + (f" (job {job_id})" if job_id is not None else "")
        # Room to record an outcome on a full disk, beside the database (leaderboard.sqlite3.reserve).
        self.reserve = DiskReserve(store.path.with_name(store.path.name + ".reserve"))

    def submit(
        self,
        submission_path: Path,
        data_dir: Path,
        model_name: str | None = None,
        *,
        submitter: str | None = None,
        family: str | None = None,
        link: str | None = None,
        rate_limit: RateLimit | None = None,
        client: str | None = None,
    ) -> SubmitResult:
        return submit(
            self.store,
            submission_path,
            data_dir,
            model_name,
            submitter,
            family=family,
            link=link,
            rate_limit=rate_limit,
            client=client,
        )

    def sweep(self) -> list[str]:
        return sweep_staging(self.home)

    def readiness(self, options: ScoreOptions, models: Models, checked: set[Path], started: bool) -> list[str]:
        return readiness_problems(queued_data_dirs(self.store), options, models, checked)

    def waiting(self) -> list[str]:
        return [
            f"job {row['id']}  {row['state']}  attempts {row['attempts']}  {row['benchmark']}  {row['model_name']}"
            for row in claimable_jobs(self.store)
        ]

    def claim(self, worker_id: str, lease_seconds: float, *, checked: bool) -> Lease | None:
        job = claim(self.store, worker_id, lease_seconds, job_id=self.job_id)
        if job is None:
            return None
        return Lease(f"job {job.id}", job.lease_owner, job.attempts, job.benchmark, job.model_name, job)

    def heartbeat(self, lease: Lease, lease_seconds: float) -> bool:
        return heartbeat(self.store, lease.record, lease_seconds)

    @contextlib.contextmanager
    def work(self, lease: Lease) -> Iterator[Work]:
        job: Job = lease.record
        version = benchmark_version(job.data_dir) if job.data_dir.is_dir() else None
        yield Work(
            job.stored_path, job.data_dir, self.store.results_dir / str(job.submission_id) / str(job.id), version
        )

    def finish(self, lease: Lease, work: Work, summary: dict[str, Any]) -> None:
        finish(self.store, lease.record, summary, work.out, benchmark_version=work.benchmark_version)
        # The board's rank intervals and tiers are resampled now, once, not on each page view.
        board.refresh_quietly(self.store, str(summary["benchmark"]))

    def fail(self, lease: Lease, reason: str) -> None:
        fail(self.store, lease.record, reason)

    def requeue(self, lease: Lease, reason: str) -> str:
        return requeue(self.store, lease.record, reason)

    def park(self, lease: Lease, reason: str) -> None:
        park(self.store, lease.record, reason)

    def release(self, lease: Lease) -> bool:
        return release(self.store, lease.record)

    def list_jobs(self) -> tuple[list[dict[str, Any]], list[str]]:
        return jobs_table(self.store), []

    def withdraw(self, ref: str, reason: str) -> str:
        if not ref.isdigit():
            raise AdminActionError(f"submission id {ref!r} is not a number (a Hub request needs --hub and --results)")
        self.store.withdraw(int(ref), reason)
        board.refresh_quietly(self.store, str(self.store.submission(int(ref))["benchmark"]))
        return f"withdrew submission {ref}; its files and results are kept, off the rankings"

    def rescore(self, ref: str) -> str:
        if not ref.isdigit():
            raise AdminActionError(f"submission id {ref!r} is not a number (a Hub request needs --hub and --request)")
        try:
            job = rescore(self.store, int(ref))
        except ValueError as error:  # a withdrawn submission
            raise AdminActionError(str(error)) from None
        return f"queued job {job} for submission {ref}" if job else f"submission {ref} already has a job queued"


class AdminActionError(IdbenchError):
    """An admin action (withdraw, rescore) names no local submission it can act on: not an id, or withdrawn."""
