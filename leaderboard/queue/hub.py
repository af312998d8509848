"""The Hub queue backend: request files in a dataset repo, claimed by commits on a parent revision.

A public deployment (a Space plus GPU workers elsewhere) keeps its queue in a **requests** dataset repo
and its public results in a **results** dataset repo, the pattern of the Hub's leaderboard template.
Everything here is a function over :class:`~idbench.leaderboard.hubrepo.DatasetRepo` (the Hub, or the
local stand-in in tests), and follows ``docs/deploy.md``'s layout:

    requests:  <benchmark>/<slug>/<hash12>.json    the request record (state, attempts, lease, reason)
               <benchmark>/<slug>/<hash12>.zip     the submission, normalised after validation
    results:   <benchmark>/<slug>/<hash12>/aggregates.json, results.parquet   (hub.result_record)

The states are the local queue's (``queue.local``): PENDING -> RUNNING -> FINISHED | FAILED |
PARKED, plus WITHDRAWN. Every change of a record is **one commit on the revision it was read at**
(``DatasetRepo.commit(..., parent=head)``): when two workers read the same head and both try to claim
a request, the Hub (or the stand-in) accepts the first commit and refuses the second with
:class:`RepoConflict`, whose worker re-reads and takes the next request. So no request is won twice.
A claim is a lease (``lease_until``) that a heartbeat extends; a worker that dies leaves a RUNNING
record whose lease runs out, and the next claim takes it again (PARKED after
``queue.protocol.MAX_ATTEMPTS``). Ending a request is fenced by (worker, attempts), as locally.

The worker loop and its fault ladder are ``leaderboard.worker``'s, the same as for the local queue:
:class:`HubQueue` is this module's :class:`~idbench.leaderboard.queue.protocol.JobQueue`. Results are pushed to the
results repo *before* the request is marked FINISHED: a crash in between leaves a RUNNING request
whose lease runs out and which is scored again (its result files are overwritten), never a FINISHED
request without results. Plumbing (tiny- or paper-random-profile) results are never pushed.

Example::

    requests, results = open_repo("org/idbench-requests"), open_repo("org/idbench-results")
    submit_request(requests, Path("my-submission.zip"), Path("data/identity-collapse"))
    run_hub_worker(requests, results, {"identity-collapse": Path("data/identity-collapse")}, once=True)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from idbench.atomic import sweep_staging
from idbench.builders.spec import DEFAULT_TASK
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.models.profiles import PLUMBING_PROFILES
from idbench.evaluate_pkg.results import AGGREGATES_FILE, SAMPLES_FILE
from idbench.evaluate_pkg.submission import Problem, SubmissionError, validate_submission
from idbench.leaderboard.hub import (
    json_bytes,
    request_path,
    result_folder,
    result_record,
)
from idbench.leaderboard.hub_records import (
    MAX_REQUEST_BYTES,
    MalformedRecord,
    checked_request,
    lease_expired,
    parse_time,
)
from idbench.leaderboard.hubrepo import (
    JSON_FILES,
    DatasetRepo,
    FileAdd,
    FileDelete,
    Operation,
    RepoConflict,
    backoff_delays,
)
from idbench.leaderboard.queue.local import benchmark_version, name_taken_message, queued_metadata, store_files
from idbench.leaderboard.queue.protocol import MAX_ATTEMPTS, Lease, RateLimit, Work, parked_reason, readiness_problems
from idbench.leaderboard.store import LeaseLostError, RateLimitError, default_home, iso
from idbench.leaderboard.worker import run_worker, score_work
from idbench.names import ANONYMOUS, confusable_keys, name_problems, rate_identity, submitter_identity

log = logging.getLogger(__name__)

SCHEMA = 1
STATES = ("PENDING", "RUNNING", "FINISHED", "FAILED", "PARKED", "WITHDRAWN")
# A commit refused because the head moved is retried on the new head this many times in a row; each
# refusal means another commit landed, so running out means a repo far busier than a leaderboard's.
CONFLICT_RETRIES = 50
# Between refused commits: full-jitter backoff from 50 ms doubling to 5 s, so racing workers spread out
# and a head read that lags the refusal (as the Hub's may) has time to catch up.
CONFLICT_BACKOFF_S, CONFLICT_BACKOFF_CAP_S = 0.05, 5.0
RECORD_METADATA = ("family", "link", "model")
# Above DEFLATE's own maximum (about 1032:1): the ratio check is off for the request zips we deflate.
REQUEST_ZIP_MAX_RATIO = 1100.0  # what a request record shows of submission.json


class HubQueueError(IdbenchError):
    """A request cannot be found, read or changed as asked; the message names it."""


# --- records -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request record of the requests repo (``path`` is where it lives there)."""

    path: str
    model: str
    benchmark: str
    benchmark_version: str
    content_hash: str
    state: str
    submitted_at: str
    task: str = DEFAULT_TASK
    metadata: dict = field(default_factory=dict)
    updated_at: str | None = None
    attempts: int = 0
    worker: str | None = None
    lease_until: str | None = None
    reason: str | None = None
    files: str | None = None  # the submission zip's repo path; None in records of the older `idbench sync`
    schema: int = SCHEMA
    # Who submitted, as a digest of idbench.names.submitter_identity (a logged-in Hub user or a named
    # submitter, else the client): it owns the model name and counts against the rate limit, and tells
    # nothing of the name or address. None in records from before it was kept.
    owner: str | None = None
    # The client the Space knew (a digest of idbench.names.rate_identity: the signed-in Hub user, else the
    # address), which the rate limit counts by whatever submitter name was typed. Written only when it
    # differs from ``owner`` (a named submitter); the limit reads ``owner`` when it is absent.
    requester: str | None = None

    def to_bytes(self) -> bytes:
        record = asdict(self)
        del record["path"]  # the path is where the record is, not what it holds
        if record["requester"] is None:  # records without it stay readable by readers from before it
            del record["requester"]
        return json_bytes(record)

    @classmethod
    def parse(cls, path: str, data: bytes, now: float | None = None) -> Request:
        """The record at ``path``; :class:`~idbench.leaderboard.hub_records.MalformedRecord` says what is
        wrong with a malformed one.

        Read by :func:`~idbench.leaderboard.hub_records.checked_request`, the one reader that the
        workers, ``jobs --hub`` and the Space's mirror share: size and nesting bounded before parsing,
        then the schema (types, timestamps, lease and attempt bounds, the record's own path). Records
        written by the older ``idbench sync`` (model, benchmark, benchmark_version, content_hash,
        state, submitted_at only) get the defaults of the other fields.
        """
        record = checked_request(path, data, now)
        record["task"] = record.get("task") or DEFAULT_TASK
        return cls(path=path, **record)

    @property
    def hash12(self) -> str:
        return self.content_hash[:12]

    def lease_expired(self, now: float) -> bool:
        """Whether the lease has ended at ``now``: none, unreadable, or past (capped a day after the record
        was written, so a forged ``lease_until`` of 9999-12-31 holds a request for a day, not forever)."""
        return lease_expired(asdict(self), now)


@dataclass(frozen=True)
class RequestRef:
    """What :func:`submit_request` made (or found): the record's and the zip's repo paths, and the commit."""

    path: str
    files: str
    content_hash: str
    model: str
    benchmark: str
    duplicate: bool  # True: this submission was already requested; nothing was committed
    revision: str | None  # the commit that added it (the head that already had it, for a duplicate)


@dataclass(frozen=True)
class Claim:
    """A request this worker won: the record as the claim wrote it, and the claim's commit."""

    request: Request
    revision: str

    @property
    def worker(self) -> str:
        return self.request.worker or ""

    @property
    def attempts(self) -> int:
        return self.request.attempts


def _now(now: float | None) -> float:
    return time.time() if now is None else now


# --- reading -----------------------------------------------------------------------------------------


def scan_requests(folder: Path) -> tuple[list[Request], list[str]]:
    """The request records in a snapshot folder, oldest first, and one problem line per malformed file.

    Records are the ``.json`` files three levels down (``<benchmark>/<slug>/<hash12>.json``); other
    files (the zips, a README, ``.gitattributes``) are not records.
    """
    requests, problems = [], []
    for file in sorted(folder.rglob("*.json")):
        relative = file.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in relative.split("/")):
            continue  # .cache/ of a local Hub download, hidden files
        if relative.count("/") != 2:
            problems.append(f"{relative}: not a request record (records are <benchmark>/<model>/<hash12>.json)")
            continue
        try:
            if file.stat().st_size > MAX_REQUEST_BYTES:  # not even read: a record is a few hundred bytes
                raise MalformedRecord(
                    relative,
                    f"{file.stat().st_size} bytes, over the {MAX_REQUEST_BYTES}-byte limit of a request record",
                )
            requests.append(Request.parse(relative, file.read_bytes()))
        except MalformedRecord as err:
            problems.append(str(err))
    # By the moment, not the text: "2026-01-01T09:00:00+09:00" is before "2026-01-01T01:00:00+00:00".
    return sorted(requests, key=lambda r: (parse_time(r.submitted_at) or 0.0, r.path)), problems


def list_requests(requests: DatasetRepo, revision: str | None = None) -> list[Request]:
    """Every well-formed request record at ``revision`` (default: the head), oldest first.

    A malformed record is logged as a warning naming its path and skipped: one bad file never stops a
    worker or the Space.
    """
    revision = revision or requests.head()
    if revision is None:
        return []
    found, problems = scan_requests(requests.snapshot(revision, JSON_FILES))
    for problem in problems:
        log.warning("%s: skipped: %s", requests.repo_id, problem)
    return found


def claimable(requests: Iterable[Request], now: float) -> list[Request]:
    """What a claim could take, in the order it takes them: PENDING oldest first, then expired RUNNING leases.

    Records without files (those of the older ``idbench sync``) cannot be scored and are left alone.
    """
    requests = [r for r in requests if r.files]
    pending = [r for r in requests if r.state == "PENDING"]
    expired = [r for r in requests if r.state == "RUNNING" and r.lease_expired(now)]
    return pending + expired


def _read(requests: DatasetRepo, revision: str | None, path: str) -> Request | None:
    if revision is None:
        return None
    file = requests.snapshot(revision, [path]) / path
    return Request.parse(path, file.read_bytes()) if file.is_file() else None


def _commit_retrying(
    repo: DatasetRepo, operations_at: Callable[[str | None], list[Operation]], message: str
) -> str | None:
    """Commit ``operations_at(head)`` on the head, again on the new head while it moves; None when nothing to do."""
    for pause in backoff_delays(CONFLICT_RETRIES, CONFLICT_BACKOFF_S, CONFLICT_BACKOFF_CAP_S):
        head = repo.head()
        operations = operations_at(head)
        if not operations:
            return None
        try:
            return repo.commit(operations, message, parent=head)
        except RepoConflict:  # HTTP 412 on the Hub: another commit landed first; the head read may lag
            time.sleep(pause)
    raise HubQueueError(f"{repo.repo_id}: {CONFLICT_RETRIES} commits in a row were overtaken by others; try again")


def _update(
    requests: DatasetRepo, path: str, change: Callable[[Request | None], Request | None], message: str
) -> Request | None:
    """Rewrite one record as ``change(current)`` in one commit on the revision it was read at.

    ``change`` returning None means there is nothing to write (then nothing is committed). When the
    head moved meanwhile the record is read again and ``change`` asked again, so it always decides on
    the record it replaces.
    """
    written: list[Request | None] = [None]

    def operations(head: str | None) -> list[Operation]:
        new = change(_read(requests, head, path))
        written[0] = new
        return [] if new is None else [FileAdd(path, data=new.to_bytes())]

    _commit_retrying(requests, operations, message)
    return written[0]


# --- submit ------------------------------------------------------------------------------------------


def submit_request(
    requests: DatasetRepo,
    submission_path: Path,
    data_dir: Path,
    model_name: str | None = None,
    *,
    family: str | None = None,
    link: str | None = None,
    submitter: str | None = None,
    client: str | None = None,
    rate_limit: RateLimit | None = None,
    now: float | None = None,
) -> RequestRef:
    """Validate a submission as ``queue.local.submit`` does and add it to the requests repo as one PENDING request.

    Raises :class:`~idbench.evaluate_pkg.submission.SubmissionError` (every problem listed) before
    anything is committed. The submission goes up normalised (submission.json with the overrides,
    manifest.csv, images/<sha>.<ext>, as the local store keeps it), zipped, in the same commit as its
    record. The same files and model submitted again (the record's path exists) come back with
    ``duplicate=True`` and nothing is committed. ``submitter`` is never written: the requests repo may
    be public. It is still checked (no control, format or mixed-script characters), as the local queue
    checks it, and with ``client`` (``idbench.names.request_client``: the logged-in Hub user, else the
    proxy's address) it makes the record's ``owner``, a digest (:func:`owner_of`).

    A model name is refused when a request of this benchmark (not withdrawn) already has it by
    :func:`~idbench.names.name_key` or looks like it (:func:`~idbench.names.looks_alike`), unless both requests have the same owner (a new version of one's
    own model). ``rate_limit`` (the app's) refuses a client's submission past ``max_submissions`` in
    ``window_s`` (by the record's ``requester``: the client whatever submitter name is typed, see
    :func:`~idbench.names.rate_identity`), counted from the records' ``submitted_at``, with
    :class:`~idbench.leaderboard.store.RateLimitError`; an owner is one person or one client, never one
    pool of every anonymous submitter. The checks run on the head each commit attempt builds on, so two
    racing submits of one name cannot both land.
    """
    if submitter is not None:
        problems = name_problems("submitter", submitter)
        if problems:
            raise SubmissionError([Problem(None, None, "submitter", message) for message in problems])
    owner = owner_of(submitter, client)
    requester = _digest(rate_identity(submitter, client))  # what the rate limit counts by: the client when known
    del submitter, client  # not published (see the docstring)
    data_dir = Path(data_dir).resolve()
    data = load_benchmark_data(data_dir)
    version = benchmark_version(data_dir)
    with (
        validate_submission(Path(submission_path), data) as submission,
        tempfile.TemporaryDirectory(prefix="idbench-request-") as tmp,
    ):
        name, metadata, digest = queued_metadata(submission, data.name, model_name, family=family, link=link)
        path = request_path(data.name, name, digest)
        ref = RequestRef(
            path, path.removesuffix(".json") + ".zip", digest, name, data.name, duplicate=False, revision=None
        )
        folder = store_files(Path(tmp), digest, metadata, submission.entries)
        archive = _zip_folder(folder, Path(tmp) / "submission.zip")
        duplicate_at: list[str | None] = [None]

        def operations(head: str | None) -> list[Operation]:
            if _read(requests, head, path) is not None:
                duplicate_at[0] = head
                return []
            others = list_requests(requests, head) if head is not None else []
            keys = confusable_keys(name)  # the same name, or one that looks like it (idbench.names)
            taken = [
                f"request {r.path} ({r.model!r})"
                for r in others
                if r.benchmark == data.name
                and r.state != "WITHDRAWN"
                and (owner is None or r.owner != owner)
                and keys & confusable_keys(r.model)
            ]
            if taken:
                raise SubmissionError(
                    [Problem(None, None, "model metadata", name_taken_message(name, data.name, taken))]
                )
            if rate_limit is not None and requester is not None:
                _check_owner_rate(others, requester, rate_limit, _now(now))
            moment = iso(_now(now))
            record = Request(
                path=path,
                model=name,
                benchmark=data.name,
                benchmark_version=version,
                content_hash=digest,
                state="PENDING",
                submitted_at=moment,
                updated_at=moment,
                task=submission.task,
                metadata={key: metadata.get(key) or None for key in RECORD_METADATA},
                files=ref.files,
                owner=owner,
                requester=requester if requester != owner else None,
            )
            return [FileAdd(path, data=record.to_bytes()), FileAdd(ref.files, local_path=archive)]

        revision = _commit_retrying(requests, operations, f"submit {path}")
    if revision is None:
        return replace(ref, duplicate=True, revision=duplicate_at[0])
    log.info("%s: requested %s (%s)", requests.repo_id, path, revision)
    return replace(ref, revision=revision)


def owner_of(submitter: str | None, client: str | None) -> str | None:
    """The ``owner`` a request record carries: a digest of :func:`~idbench.names.submitter_identity`, or
    None when nothing is known of the submitter (a maintainer's ``idbench submit --hub`` without names)."""
    return _digest(submitter_identity(submitter, client))


def _digest(identity: str) -> str | None:
    """``owner:<digest>`` of an identity of idbench.names (None for the one ``anonymous`` pool)."""
    if identity == ANONYMOUS:
        return None
    return "owner:" + hashlib.sha256(f"idbench-owner\0{identity}".encode()).hexdigest()[:24]


def _check_owner_rate(others: Iterable[Request], requester: str, limit: RateLimit, now: float) -> None:
    """RateLimitError when ``requester`` (a digest of idbench.names.rate_identity) made ``limit`` requests
    in its window; a record without ``requester`` was made by its ``owner``."""
    since = now - limit.window_s
    recent = sum(
        1 for r in others if (r.requester or r.owner) == requester and (parse_time(r.submitted_at) or 0.0) >= since
    )
    if recent >= limit.max_submissions:
        raise RateLimitError(
            f"this submitter made {recent} submissions in the last {limit.window_s / 3600:g} h; "
            f"the limit is {limit.max_submissions}"
        )


def _zip_folder(folder: Path, archive: Path) -> Path:
    """``folder``'s files as a deflated zip. PNGs hardly shrink, but a BMP or TIFF of flat colour does by
    hundreds of times (a 7.4 MB upload once made a 450 MB commit stored plain); the workers' bounded
    extraction (ratio and size limits) reads it back either way."""
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(file, file.relative_to(folder).as_posix())
    return archive


# --- claim and report back ---------------------------------------------------------------------------


# How a parked request is requeued, as its reason says (protocol.parked_reason).
_RESCORE_COMMAND = "idbench rescore --hub REQUESTS --request PATH"


def claim_request(
    requests: DatasetRepo,
    worker_id: str,
    lease_seconds: float,
    now: float | None = None,
    *,
    max_attempts: int = MAX_ATTEMPTS,
    accept: Callable[[Request], bool] | None = None,
) -> Claim | None:
    """Win the oldest claimable request (:func:`claimable`) for ``worker_id``; None when there is none.

    The claim is one commit on the revision the request was read at, rewriting its record: RUNNING,
    ``worker``, one more attempt, ``lease_until`` = now + ``lease_seconds``. When another commit landed
    first (a rival's claim), the repo refuses ours and the next claimable request at the new head is
    tried. An expired lease of a request that already had ``max_attempts`` is PARKED instead.
    ``accept`` skips requests this worker cannot score (the benchmark builds it has).
    """
    pauses = iter(backoff_delays(CONFLICT_RETRIES, CONFLICT_BACKOFF_S, CONFLICT_BACKOFF_CAP_S))
    for _ in range(CONFLICT_RETRIES):
        head = requests.head()
        if head is None:
            return None
        moment = _now(now)
        candidates = [r for r in claimable(list_requests(requests, head), moment) if accept is None or accept(r)]
        if not candidates:
            return None
        request = candidates[0]
        if request.state == "RUNNING" and request.attempts >= max_attempts:
            new = replace(
                request,
                state="PARKED",
                worker=None,
                lease_until=None,
                updated_at=iso(moment),
                reason=parked_reason(request.attempts, "the lease expired (worker killed or stuck?)", _RESCORE_COMMAND),
            )
            message = f"park {request.path}"
        else:
            new = replace(
                request,
                state="RUNNING",
                worker=worker_id,
                attempts=request.attempts + 1,
                lease_until=iso(moment + lease_seconds),
                updated_at=iso(moment),
                reason=None,
            )
            message = f"claim {request.path} by {worker_id} (attempt {new.attempts})"
        try:
            revision = requests.commit([FileAdd(new.path, data=new.to_bytes())], message, parent=head)
        except RepoConflict:  # someone committed first: read the new head and take what is claimable there
            time.sleep(next(pauses))
            continue
        if new.state == "RUNNING":
            return Claim(new, revision)
    raise HubQueueError(f"{requests.repo_id}: {CONFLICT_RETRIES} claims in a row were overtaken by others; try again")


def _is_ours(current: Request | None, claim: Claim) -> bool:
    return (
        current is not None
        and current.state == "RUNNING"
        and current.worker == claim.worker
        and current.attempts == claim.attempts
    )


def _end(requests: DatasetRepo, claim: Claim, what: str, **fields: Any) -> Request:
    """Rewrite a request we hold with ``fields``; :class:`LeaseLostError` (nothing written) if it is not ours."""
    path = claim.request.path

    def change(current: Request | None) -> Request:
        if not _is_ours(current, claim):
            state = (
                "gone" if current is None else f"{current.state} (worker {current.worker}, attempt {current.attempts})"
            )
            raise LeaseLostError(
                f"{path}: lease of {claim.worker} (attempt {claim.attempts}) was lost, it is {state}; {what} not recorded"
            )
        return replace(current, **fields)

    return _update(requests, path, change, f"{what} {path} ({claim.worker}, attempt {claim.attempts})")


def heartbeat(requests: DatasetRepo, claim: Claim, lease_seconds: float, now: float | None = None) -> bool:
    """Extend the lease of a request we still hold; False if it is no longer ours (stop working on it)."""
    try:
        _end(requests, claim, "heartbeat", lease_until=iso(_now(now) + lease_seconds))
    except LeaseLostError:
        return False
    return True


def finish_request(requests: DatasetRepo, claim: Claim, note: str | None = None, now: float | None = None) -> Request:
    """Mark a request we hold FINISHED (``note``: e.g. why no result was published); LeaseLostError if not ours."""
    return _end(requests, claim, "finish", state="FINISHED", lease_until=None, reason=note, updated_at=iso(_now(now)))


def fail_request(requests: DatasetRepo, claim: Claim, reason: str, now: float | None = None) -> Request:
    """Mark a request we hold FAILED with a ``reason`` for the submitter; LeaseLostError if not ours."""
    return _end(requests, claim, "fail", state="FAILED", lease_until=None, reason=reason, updated_at=iso(_now(now)))


def requeue_request(
    requests: DatasetRepo, claim: Claim, reason: str, now: float | None = None, max_attempts: int = MAX_ATTEMPTS
) -> str:
    """After a fault of the worker: back to PENDING with the attempt counted, or PARKED at ``max_attempts``; the state."""
    if claim.attempts >= max_attempts:
        state, reason = "PARKED", parked_reason(claim.attempts, reason, _RESCORE_COMMAND)
    else:
        state, reason = "PENDING", f"back in the queue after a worker fault (attempt {claim.attempts}): {reason}"
    _end(
        requests, claim, "requeue", state=state, worker=None, lease_until=None, reason=reason, updated_at=iso(_now(now))
    )
    return state


def park_request(requests: DatasetRepo, claim: Claim, reason: str, now: float | None = None) -> Request:
    """Mark a request we hold PARKED now (e.g. past its wall-time limit); LeaseLostError if not ours."""
    reason = f"{reason} (requeue with `idbench rescore --hub REQUESTS --request {claim.request.path}`)"
    return _end(
        requests, claim, "park", state="PARKED", worker=None, lease_until=None, reason=reason, updated_at=iso(_now(now))
    )


def release_request(requests: DatasetRepo, claim: Claim, now: float | None = None) -> bool:
    """Put a request we hold back to PENDING (a worker stopped by the user); False if it was not ours."""
    try:
        _end(requests, claim, "release", state="PENDING", worker=None, lease_until=None, updated_at=iso(_now(now)))
    except LeaseLostError:
        return False
    return True


def find_request(requests: DatasetRepo, ref: str, revision: str | None = None) -> Request:
    """The request named by ``ref``: its record path (with or without ``.json``) or a prefix of its content hash.

    :class:`HubQueueError` when none or several match (a hash prefix needs at least 8 characters).
    """
    ref = ref.strip()
    found = list_requests(requests, revision)
    matches = [r for r in found if r.path in (ref, ref + ".json")]
    if not matches and len(ref) >= 8:
        matches = [r for r in found if r.content_hash.startswith(ref.lower())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise HubQueueError(
            f"{requests.repo_id}: no request {ref!r} (give its path, e.g. <benchmark>/<model>/<hash12>.json, or its hash12)"
        )
    raise HubQueueError(
        f"{requests.repo_id}: {ref!r} names {len(matches)} requests: {', '.join(r.path for r in matches)}"
    )


def requeue(requests: DatasetRepo, ref: str, now: float | None = None) -> Request:
    """An admin's requeue of a PARKED or FAILED request: PENDING again, attempts reset; the new record."""

    def change(current: Request | None) -> Request:
        if current is None or current.state not in ("PARKED", "FAILED"):
            raise HubQueueError(
                f"{request.path}: is {current.state if current else 'gone'}; only PARKED or FAILED requests are requeued"
            )
        return replace(
            current, state="PENDING", attempts=0, worker=None, lease_until=None, reason=None, updated_at=iso(_now(now))
        )

    request = find_request(requests, ref)
    return _update(requests, request.path, change, f"requeue {request.path}")


def withdraw(
    requests: DatasetRepo, results: DatasetRepo, ref: str, reason: str, now: float | None = None
) -> tuple[Request, list[str]]:
    """Withdraw a request: its record WITHDRAWN (with ``reason``), then its public result files deleted.

    Two commits, in that order: once the record says WITHDRAWN no worker can finish it (a worker that
    pushed results meanwhile sees that and deletes them again). Returns the record and the result
    paths deleted. ``ref`` is as :func:`find_request` takes it.
    """
    if not reason.strip():
        raise HubQueueError("a withdrawal needs a reason (it is shown with the request)")
    request = find_request(requests, ref)
    record = _update(
        requests,
        request.path,
        lambda current: replace(
            current or request,
            state="WITHDRAWN",
            worker=None,
            lease_until=None,
            reason=reason.strip(),
            updated_at=iso(_now(now)),
        ),
        f"withdraw {request.path}",
    )
    return record, delete_results(results, request)


def delete_results(results: DatasetRepo, request: Request) -> list[str]:
    """Delete the request's result folder's files from the results repo (one commit, none if empty); their paths."""
    folder = result_folder(request.benchmark, request.model, request.content_hash)
    deleted: list[str] = []

    def operations(head: str | None) -> list[Operation]:
        root = results.snapshot(head) / folder if head is not None else None
        deleted[:] = (
            sorted(f"{folder}/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file())
            if root and root.is_dir()
            else []
        )
        return [FileDelete(path) for path in deleted]

    _commit_retrying(results, operations, f"withdraw {folder}")
    return deleted


# --- results -----------------------------------------------------------------------------------------


def is_plumbing(summary: Mapping[str, Any]) -> bool:
    """A summary that is (or may be) a plumbing check: never published. Fails closed when it does not say."""
    return bool(summary.get("plumbing", True)) or summary.get("profile") in PLUMBING_PROFILES


def result_operations(request: Request, summary: dict[str, Any], samples: Path | None, scored_at: str) -> list[FileAdd]:
    """The files one scored request puts in the results repo: aggregates.json and, when present, the samples parquet.

    The record is :func:`~idbench.leaderboard.hub.result_record`'s (the one ``idbench sync`` writes),
    with the request's model, benchmark build, task and public metadata. Raises :class:`HubQueueError`
    for a plumbing summary.
    """
    if is_plumbing(summary):
        raise HubQueueError(
            f"{request.path}: scored with the {summary.get('profile')!r} profile, a plumbing check; never published"
        )
    folder = result_folder(request.benchmark, request.model, request.content_hash)
    samples_in_repo = f"{folder}/{SAMPLES_FILE}" if samples is not None and Path(samples).is_file() else None
    record = result_record(
        summary,
        model=request.model,
        benchmark=request.benchmark,
        benchmark_version=request.benchmark_version,
        content_hash=request.content_hash,
        scored_at=scored_at,
        samples=samples_in_repo,
        task=request.task,
        metadata=request.metadata,
    )
    operations = [FileAdd(f"{folder}/{AGGREGATES_FILE}", data=json_bytes(record))]
    if samples_in_repo is not None:
        operations.append(FileAdd(samples_in_repo, local_path=Path(samples)))
    return operations


# --- the worker --------------------------------------------------------------------------------------

# The default scorer is the local worker's: a validated submission folder against its benchmark folder.
score_request = score_work


class _Builds:
    """The benchmark builds this worker has: ``benchmark -> folder``, each folder's version computed once."""

    def __init__(self, data_dirs: Mapping[str, Path]):
        self.folders = {name: Path(folder).resolve() for name, folder in data_dirs.items()}
        self._versions: dict[Path, str] = {}

    def version(self, benchmark: str) -> str | None:
        folder = self.folders.get(benchmark)
        if folder is None or not folder.is_dir():
            return None
        if folder not in self._versions:
            self._versions[folder] = benchmark_version(folder)
        return self._versions[folder]

    def can_score(self, request: Request) -> bool:
        return self.version(request.benchmark) == request.benchmark_version


def hub_readiness_problems(
    queued: Iterable[Request],
    builds: _Builds,
    options: ScoreOptions,
    models: Models | None = None,
    checked: set[Path] | None = None,
    *,
    started: bool = False,
) -> list[str]:
    """Why this worker cannot score the requests in ``queued`` (empty: ready).

    ``protocol.readiness_problems``' checks (models of the profile, judge configuration, the data
    loads), and for each queued benchmark: a folder given for it, of the build (``benchmark_version``)
    the requests were submitted against: a score against another build is not comparable. When only
    some of a benchmark's requests are of another build (left from before a benchmark update), the
    worker serves the others and warns about those; when none is of its build, it is not ready, unless
    it ``started`` already (it has served requests of this build: the rest are simply left from before).
    """
    problems, folders = [], []
    by_benchmark: dict[str, list[Request]] = {}
    for request in queued:
        by_benchmark.setdefault(request.benchmark, []).append(request)
    for benchmark, waiting in sorted(by_benchmark.items()):
        folder, version = builds.folders.get(benchmark), builds.version(benchmark)
        if folder is None:
            problems.append(
                f"{len(waiting)} queued request(s) of {benchmark}, but no benchmark data for it (--data {benchmark}=DIR)"
            )
            continue
        if version is None:
            problems.append(f"benchmark data of queued requests not readable here: {folder} is not a folder")
            continue
        other = [r for r in waiting if r.benchmark_version != version]
        if other:
            listed = f"{', '.join(r.path for r in other[:3])}{', ...' if len(other) > 3 else ''}"
            stale = (
                f"{benchmark}: {folder} is build {version}, but {len(other)} queued request(s) were submitted "
                f"against build {other[0].benchmark_version} ({listed})"
            )
            if len(other) == len(waiting) and not started:  # it can serve none of them: the wrong worker
                problems.append(stale)
                continue
            # Some match: serve those (claims skip the others, builds.can_score) rather than let requests
            # left from an older build stop every worker; they stay PENDING, listed here and by `jobs --hub`.
            log.warning("%s; skipping those, serving the %d of this build", stale, len(waiting) - len(other))
        folders.append(folder)
    return problems + readiness_problems(folders, options, models, checked)


class HubQueue:
    """A Hub deployment's requests and results repos as a :class:`~idbench.leaderboard.queue.protocol.JobQueue`.

    ``submit`` is :func:`submit_request` on the requests repo (a :class:`RequestRef`); it needs no results
    repo, so a queue opened only to submit may have ``results=None``. ``data_dirs`` maps each benchmark to its built folder. ``home`` (default ``$IDBENCH_HOME``) holds
    the scoring outputs (``hub-worker/``), the feature cache (``features/``, shared with the local
    worker) and the traceback logs (``logs/``). Results are pushed to the results repo *before* the
    request is marked FINISHED (see the module docstring); plumbing results are never pushed.
    """

    unit = "request"

    def __init__(
        self,
        requests: DatasetRepo,
        results: DatasetRepo | None,
        data_dirs: Mapping[str, Path],
        home: Path | None = None,
    ):
        self.requests, self.results = requests, results
        self.builds = _Builds(data_dirs)
        self._home = Path(home) if home is not None else None
        self.reserve = None  # outcomes are commits to the Hub, not writes to a local disk
        self.description = f"the requests repo {requests.repo_id}"

    @property
    def home(self) -> Path:
        # $IDBENCH_HOME is read when first needed, not on opening: a queue opened only to submit
        # (submit_to) never needs it, so a submission to the Hub does not depend on that setting.
        if self._home is None:
            self._home = default_home()
        return self._home

    def _queued(self) -> list[Request]:
        return claimable(list_requests(self.requests), time.time())

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
    ) -> RequestRef:
        return submit_request(
            self.requests,
            submission_path,
            data_dir,
            model_name,
            family=family,
            link=link,
            submitter=submitter,
            client=client,
            rate_limit=rate_limit,
        )

    def sweep(self) -> list[str]:
        return sweep_staging(self.home / "hub-worker", depth=4)

    def readiness(self, options: ScoreOptions, models: Models, checked: set[Path], started: bool) -> list[str]:
        return hub_readiness_problems(self._queued(), self.builds, options, models, checked, started=started)

    def waiting(self) -> list[str]:
        lines = []
        for request in self._queued():
            lease = f", lease ran out {request.lease_until}" if request.state == "RUNNING" else ""
            lines.append(f"{request.path}  {request.state}  attempts {request.attempts}{lease}")
        return lines

    def claim(self, worker_id: str, lease_seconds: float, *, checked: bool) -> Lease | None:
        # Only builds the check passed: a request submitted since is checked on the next round.
        claim = claim_request(
            self.requests, worker_id, lease_seconds, accept=self.builds.can_score if checked else None
        )
        if claim is None:
            return None
        return Lease(
            claim.request.path, claim.worker, claim.attempts, claim.request.benchmark, claim.request.model, claim
        )

    def heartbeat(self, lease: Lease, lease_seconds: float) -> bool:
        return heartbeat(self.requests, lease.record, lease_seconds)

    @contextlib.contextmanager
    def work(self, lease: Lease) -> Iterator[Work]:
        claim: Claim = lease.record
        request = claim.request
        data_dir = self.builds.folders.get(request.benchmark)
        if data_dir is None:
            raise HubQueueError(f"{request.path}: this worker has no benchmark data for {request.benchmark}")
        out = self.home / "hub-worker" / request.path.removesuffix(".json") / f"attempt-{claim.attempts}"
        with _downloaded(self.requests, claim, data_dir) as submission:
            yield Work(submission, data_dir, out, request.benchmark_version)

    def finish(self, lease: Lease, work: Work, summary: dict[str, Any]) -> None:
        claim: Claim = lease.record
        request = claim.request
        note = None
        if is_plumbing(summary):
            note = f"scored with the {summary.get('profile')!r} profile, a plumbing check: results not published"
        elif not _is_ours(_read(self.requests, self.requests.head(), request.path), claim):
            raise LeaseLostError(
                f"{request.path}: lease of {claim.worker} (attempt {claim.attempts}) was lost; results not pushed"
            )
        else:
            # Results first, then FINISHED: a crash in between leaves a request to claim again.
            operations = result_operations(request, summary, work.out / SAMPLES_FILE, iso(time.time()))
            _commit_retrying(self.results, lambda head: operations, f"results of {request.path} ({claim.worker})")
        try:
            finish_request(self.requests, claim, note)
        except LeaseLostError:
            if note is None:
                _withdrawn_meanwhile(self.requests, self.results, request)
            raise

    def fail(self, lease: Lease, reason: str) -> None:
        fail_request(self.requests, lease.record, reason)

    def requeue(self, lease: Lease, reason: str) -> str:
        return requeue_request(self.requests, lease.record, reason)

    def park(self, lease: Lease, reason: str) -> None:
        park_request(self.requests, lease.record, reason)

    def release(self, lease: Lease) -> bool:
        return release_request(self.requests, lease.record)

    def list_jobs(self) -> tuple[list[dict[str, Any]], list[str]]:
        head = self.requests.head()
        found, problems = scan_requests(self.requests.snapshot(head, JSON_FILES)) if head is not None else ([], [])
        return [asdict(r) for r in found], problems

    def withdraw(self, ref: str, reason: str) -> str:
        request, deleted = withdraw(self.requests, self.results, ref, reason)
        return f"withdrew {self.requests.repo_id}: {request.path}; deleted {len(deleted)} result file(s) from {self.results.repo_id}"

    def rescore(self, ref: str) -> str:
        request = requeue(self.requests, ref)
        return f"requeued {self.requests.repo_id}: {request.path} (PENDING, attempts reset)"


def run_hub_worker(
    requests: DatasetRepo,
    results: DatasetRepo,
    data_dirs: Mapping[str, Path],
    options: ScoreOptions | None = None,
    *,
    home: Path | None = None,
    **worker: Any,
) -> int:
    """``worker.run_worker`` over ``HubQueue(requests, results, data_dirs, home)``; the requests completed."""
    return run_worker(HubQueue(requests, results, data_dirs, home), options=options, **worker)


def _withdrawn_meanwhile(requests: DatasetRepo, results: DatasetRepo, request: Request) -> None:
    """A request withdrawn while we pushed its results: delete them again (withdrawal wins)."""
    current = _read(requests, requests.head(), request.path)
    if current is not None and current.state == "WITHDRAWN":
        deleted = delete_results(results, request)
        log.warning(
            "%s: withdrawn while it was scored; deleted the results just pushed (%d file(s))",
            request.path,
            len(deleted),
        )


@contextlib.contextmanager
def _downloaded(requests: DatasetRepo, claim: Claim, data_dir: Path) -> Iterator[Path]:
    """The claimed submission, fetched at the claim's revision and validated again (it is untrusted input).

    Yields the validated folder (the zip's bounded extraction), after checking that the files are the
    ones the request names (their content hash and model), so a record cannot be scored with others.
    """
    request = claim.request
    archive = requests.snapshot(claim.revision, [request.files]) / request.files
    data = load_benchmark_data(data_dir)
    # The zip is one submit_request deflated after validating the upload: a flat-colour BMP in it may
    # shrink 500:1, over the upload's ratio limit. The unpacked-bytes limit, counted on the bytes really
    # written, still bounds what it can put on disk, so the ratio is not held against it here.
    with validate_submission(archive, data, max_compression_ratio=REQUEST_ZIP_MAX_RATIO) as submission:
        _, _, digest = queued_metadata(submission, data.name)
        if digest != request.content_hash or submission.model != request.model:
            message = (
                f"its files (content hash {digest[:12]}, model {submission.model!r}) are not the ones "
                f"the request names ({request.hash12}, {request.model!r})"
            )
            raise SubmissionError([Problem(None, None, request.files, message)])
        yield submission.root
