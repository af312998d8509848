"""The queue protocol: every operation a leaderboard queue offers, whichever backend keeps it.

Two backends implement :class:`JobQueue`: the SQLite store and submissions folder of a local
leaderboard (:class:`~idbench.leaderboard.queue.local.StoreQueue`) and the requests/results repos of a
Hub deployment (:class:`~idbench.leaderboard.queue.hub.HubQueue`). The worker loop and its fault ladder
(:mod:`idbench.leaderboard.worker`) are written once, over this interface; the CLI picks a backend
(:func:`~idbench.leaderboard.queue.open_queue`) and nothing else.

``submit`` puts a validated submission in the queue as one PENDING job (a duplicate of one already
queued adds nothing). The other operations are the queue's states and nothing more: a claim hands out a
:class:`Lease` (fenced by worker and attempt number, so a worker whose lease ran out can no longer
record anything), and every outcome is recorded through the lease: ``finish`` (results kept), ``fail``
(the submission's fault), ``requeue`` (a fault of the worker: back to PENDING, PARKED after
:data:`MAX_ATTEMPTS`), ``park`` (not worth retrying as it is, e.g. over the time limit), ``release``
(the operator stopped the worker). Each of these raises
:class:`~idbench.leaderboard.store.LeaseLostError` when the lease is not ours any more, and records
nothing. ``list_jobs``, ``withdraw`` and ``rescore`` are the maintainer's view and actions.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import BenchmarkDataError, load_benchmark_data
from idbench.evaluate_pkg.runner import model_roles, select_metrics
from idbench.settings import redact_url

log = logging.getLogger(__name__)

# The lease a claim takes, and extends every third of it while the job runs.
DEFAULT_LEASE_SECONDS = 600.0
DEFAULT_POLL_SECONDS = 5.0

# A job whose attempts ended this many times in worker faults (its lease ran out: the worker was
# killed; or the worker reported a fault of its own) is not handed out again but PARKED, so a job
# that breaks workers cannot occupy them forever, and is not blamed on its submitter either.
MAX_ATTEMPTS = 3


class WorkerNotReadyError(IdbenchError):
    """The worker lacks what the queued jobs need (models, judge, benchmark data); it claimed nothing."""


class WorkerFaultError(IdbenchError):
    """A job hit a fault of this worker: the job went back to the queue (or was parked) and the worker stopped."""


@dataclass(frozen=True)
class Lease:
    """A claimed job, as the worker loop sees it; ``record`` is the backend's own (a store Job, a Hub Claim).

    ``label`` names the job in logs and messages ("job 7", "identity-collapse/m/0123456789ab.json").
    ``worker`` and ``attempts`` together are the fencing token the backend checks on every write.
    """

    label: str
    worker: str
    attempts: int
    benchmark: str
    model: str
    record: Any


@dataclass(frozen=True)
class Work:
    """What scoring one claimed job reads and writes: a validated submission folder, the benchmark
    folder, the output folder; ``benchmark_version`` is the build scored, read before scoring."""

    submission: Path
    data_dir: Path
    out: Path
    benchmark_version: str | None = None


@dataclass(frozen=True)
class RateLimit:
    """At most ``max_submissions`` new submissions per submitter in any ``window_s`` seconds.

    A submitter is who :func:`~idbench.names.submitter_identity` says: a named one by the name's key
    (``Alice`` and `` alice `` are one), an anonymous one per client (see
    :func:`~idbench.leaderboard.queue.local.submit`).
    """

    max_submissions: int
    window_s: float

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"5/86400"`` -> 5 per day; ValueError names a malformed value (it comes from the environment)."""
        try:
            count, window = text.split("/")
            limit = cls(int(count), float(window))
        except ValueError:
            raise ValueError(f"rate limit {text!r}: expected COUNT/SECONDS, e.g. 5/86400") from None
        if limit.max_submissions < 1 or limit.window_s <= 0:
            raise ValueError(f"rate limit {text!r}: COUNT and SECONDS must be positive")
        return limit


def parked_reason(attempts: int, last: str, rescore: str) -> str:
    """The reason a PARKED job shows, in either backend: not the submitter's fault, the command that
    requeues it (``rescore``, e.g. ``idbench rescore --submission 7``), and the last fault."""
    return (
        f"parked after {attempts} attempts ended by worker faults; not a fault of the submission"
        f" (requeue with `{rescore}` once the workers are fixed); last: {last}"
    )


#: The space a local queue holds back on its database's disk (:class:`DiskReserve`).
RESERVE_BYTES = 8 * 1024 * 1024


_random_bytes = os.urandom  # what the reserve holds (random: a compressing file system stores it whole)


class DiskReserve:
    """Space held back on the disk of a queue's records, so that a worker can still record a job's outcome
    when the disk fills up (issue 40, item 7).

    A file of ``size`` random bytes (random, so a compressing file system stores it whole) beside the
    store's database. When an outcome cannot be recorded (a full disk: SQLite needs room for its
    write-ahead log even to change one row), the worker deletes it (:meth:`free`) and records again, so
    the job leaves RUNNING at once instead of when its lease runs out. :meth:`ensure` puts it back when
    there is room (a worker does before each claim).
    """

    def __init__(self, path: Path, size: int = RESERVE_BYTES):
        self.path, self.size = Path(path), size

    def ensure(self) -> str | None:
        """Create the reserve when it is not in place; None when it is, else one line saying why not."""
        try:
            if self.path.stat().st_size == self.size:
                return None
        except FileNotFoundError:
            pass
        except OSError as err:
            return f"no disk reserve at {self.path.name}: {one_line(err)}"
        staging = self.path.with_name(self.path.name + ".new")
        try:
            with open(staging, "wb") as out:
                for start in range(0, self.size, 1 << 20):
                    out.write(_random_bytes(min(1 << 20, self.size - start)))
                out.flush()
                os.fsync(out.fileno())
            os.replace(staging, self.path)
        except OSError as err:
            with contextlib.suppress(OSError):
                staging.unlink()
            return (
                f"no disk reserve: {self.size // (1024 * 1024)} MiB could not be set aside beside the store "
                f"({one_line(err)}); a full disk may leave a job RUNNING until its lease runs out"
            )
        return None

    def free(self) -> bool:
        """Delete the reserve; True when there was one to free."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as err:
            log.warning("could not free the disk reserve %s: %s", self.path.name, one_line(err))
            return False
        return True


class JobQueue(Protocol):
    """A leaderboard queue: what submissions, a worker and a maintainer do with it (the module docstring says
    what each operation guarantees)."""

    #: what the queue is, for messages ("the queue", "the requests repo org/requests")
    description: str
    #: space held back on the disk of the queue's records (None: the records are not on a local disk)
    reserve: DiskReserve | None
    #: what one job is called in counts ("job", "request")
    unit: str
    #: the worker's folder: ``logs/`` (tracebacks); its features go to the one feature cache ($IDBENCH_CACHE)
    home: Path

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
    ) -> Any:
        """Validate a submission against the benchmark in ``data_dir`` and queue it as one PENDING job.

        Raises :class:`~idbench.evaluate_pkg.submission.SubmissionError` (every problem listed) before
        anything is queued, :class:`~idbench.leaderboard.store.RateLimitError` past ``rate_limit``.
        Returns the backend's receipt, whose ``duplicate`` says the same files and model were queued
        already (then nothing new is): a ``SubmitResult`` locally, a ``RequestRef`` on the Hub.
        """

    def sweep(self) -> list[str]:
        """Clear what a killed worker left mid-write; one line per thing cleared."""

    def readiness(self, options: ScoreOptions, models: Models, checked: set[Path], started: bool) -> list[str]:
        """Why this worker cannot score what a claim could hand out now (empty: ready)."""

    def waiting(self) -> list[str]:
        """One line per job a claim could take now, in the order it would take them (``--dry-run``)."""

    def claim(self, worker_id: str, lease_seconds: float, *, checked: bool) -> Lease | None:
        """Take the next job for ``worker_id`` (None: nothing to take). ``checked``: only jobs the
        readiness check covered (a job queued since is checked on the next round)."""

    def heartbeat(self, lease: Lease, lease_seconds: float) -> bool:
        """Extend the lease; False when it is no longer ours."""

    def work(self, lease: Lease) -> AbstractContextManager[Work]:
        """The job's inputs while it is scored (a Hub backend downloads and validates them again)."""

    def finish(self, lease: Lease, work: Work, summary: dict[str, Any]) -> None:
        """Record the results and mark the job FINISHED."""

    def fail(self, lease: Lease, reason: str) -> None:
        """Mark the job FAILED: the submission's fault, ``reason`` says what to fix."""

    def requeue(self, lease: Lease, reason: str) -> str:
        """After a fault of the worker: PENDING with the attempt counted, PARKED at the limit; the state."""

    def park(self, lease: Lease, reason: str) -> None:
        """Mark the job PARKED now (not the submitter's fault; an admin requeues it)."""

    def release(self, lease: Lease) -> bool:
        """Put the job back to PENDING without counting the attempt; False when it was not ours."""

    def list_jobs(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Every job (JSON-ready rows, oldest first) and one line per record that could not be read."""

    def withdraw(self, ref: str, reason: str) -> str:
        """Withdraw a submission (by the backend's id); one line saying what was done."""

    def rescore(self, ref: str) -> str:
        """An admin's requeue of one submission (by the backend's id); one line saying what was done."""


def readiness_problems(
    data_dirs: Iterable[Path], options: ScoreOptions, models: Models | None = None, checked: set[Path] | None = None
) -> list[str]:
    """What keeps this worker from scoring submissions of the benchmark folders ``data_dirs`` (one line each).

    Checks, without loading any model or calling the network: the judge configuration (when one is
    given: an http(s) URL and a model name), each benchmark folder (it loads), and the models of the
    profile that the metrics to compute there need (``Models.missing``). Folders in ``checked`` are
    skipped; those that pass are added, so a polling worker checks each folder once.
    """
    models = models or Models(options)
    checked = set() if checked is None else checked
    problems = judge_problems(options.judge)
    missing: dict[str, str] = {}
    for data_dir in data_dirs:
        if data_dir in checked:
            continue
        try:
            data = load_benchmark_data(data_dir)
        except (BenchmarkDataError, OSError) as err:
            problems.append(f"benchmark data of queued jobs not readable here: {one_line(err)}")
            continue
        try:
            metrics, _ = select_metrics(data, options.metrics, options.judge)
        except IdbenchError as err:  # --metrics naming one this benchmark does not have
            problems.append(f"{data.name}: {one_line(err)}")
            continue
        found = models.missing(model_roles(data, metrics))
        missing.update(found)
        if not found:
            checked.add(data_dir)
    if missing:
        for message in missing.values():
            log.info("%s", message)  # how to get each one: shown with `idbench -v worker`
        problems.insert(
            0,
            f"{len(missing)} model(s) of profile {options.profile!r} not on this machine: {', '.join(sorted(missing))}"
            " (`idbench -v worker` or `idbench models list` tells how to get them)",
        )
    return problems


def judge_problems(judge: Any) -> list[str]:
    """What is wrong with a judge configuration (a JudgeConfig); nothing for None or a ready judge object."""
    from urllib.parse import urlparse

    if judge is None or hasattr(judge, "ask"):
        return []
    problems = []
    url = urlparse(str(getattr(judge, "base_url", "") or ""))
    if url.scheme not in ("http", "https") or not url.netloc:
        problems.append(f"judge URL {redact_url(str(getattr(judge, 'base_url', '')))!r} is not an http(s) URL")
    if not getattr(judge, "model", None):
        problems.append("no judge model named")
    return problems


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
