"""``idbench worker``: claim jobs, score them, record the outcome: one loop and one fault ladder for every queue.

The loop runs over a :class:`~idbench.leaderboard.queue.protocol.JobQueue`: the local store
(:class:`~idbench.leaderboard.queue.local.StoreQueue`) or a Hub deployment's repos
(:class:`~idbench.leaderboard.queue.hub.HubQueue`). Each job is scored with
:func:`idbench.evaluate_pkg.runner.score_submission` with the shared feature cache ``home/features``,
so a job re-claimed after its worker died recomputes only the features that had not been cached yet.
While a job runs, a heartbeat thread keeps extending its lease; a crash of the whole process stops
the heartbeat and lets the lease run out.

A worker checks itself before it claims anything: the models of its profile that the queued jobs'
metrics need (on this machine, not loaded), its judge configuration and the queued jobs' benchmark
folders. When something is missing it raises :class:`WorkerNotReadyError` (one line naming what) and
claims nothing: the queue stays as it was.

**The fault ladder.** Who is at fault decides how a job ends:

- the submission's (``SUBMISSION_FAULTS``: its files do not validate, an image does not decode or
  cannot be brought to the working size): FAILED with the reason, for the submitter to act on;
- the job ran past ``job_seconds`` (its wall-time limit): PARKED at once (running it again as it is
  would cost the same again; not the submitter's fault, an admin requeues it), and the worker goes on;
- anything else is the worker's (a model that does not load, CUDA out of memory, the judge
  unreachable or failing above its documented share, a full disk): the job goes back to PENDING with
  the attempt counted (PARKED after ``queue.protocol.MAX_ATTEMPTS``) and the worker stops with
  :class:`WorkerFaultError` (:class:`DiskFullError` for a full disk), since whatever broke it would
  likely break the next job too.

When an outcome cannot be recorded because the store's disk is full (SQLite needs room even to change
one row), the worker frees the queue's disk reserve
(:class:`~idbench.leaderboard.queue.protocol.DiskReserve`, 8 MiB beside the database, put back before
each claim when there is room) and records it again, so the job leaves RUNNING at once; only when that
fails too is the job handed back (released) or, failing even that, left to its lease.

The traceback goes to ``home/logs/<job>-attempt-<n>.log``; the reason a job's record shows is one
line naming that log file by name only. Reasons may be public (a Hub requests repo), so absolute
paths and the host name are taken out of them, and a worker id carries no host name.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import re
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from idbench.errors import IdbenchError, disk_full, storage_failure
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.images import ImageError
from idbench.evaluate_pkg.judge.card import judge_unavailable
from idbench.evaluate_pkg.runner import score_submission
from idbench.evaluate_pkg.submission import SubmissionError
from idbench.leaderboard.queue.protocol import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_POLL_SECONDS,
    JobQueue,
    Lease,
    WorkerFaultError,
    WorkerNotReadyError,
    one_line,
    readiness_problems,
)
from idbench.leaderboard.store import LeaseLostError, Store
from idbench.progress import Progress, Quiet, progress_for, seconds

__all__ = [
    "DEFAULT_JOB_SECONDS",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POLL_SECONDS",
    "SUBMISSION_FAULTS",
    "DiskFullError",
    "Heartbeat",
    "JobTimeLimit",
    "JudgeUnavailableError",
    "Scorer",
    "WorkerFaultError",
    "WorkerNotReadyError",
    "check_worker",
    "default_worker_id",
    "public_reason",
    "readiness_problems",
    "record_traceback",
    "run_worker",
    "score_work",
]

log = logging.getLogger(__name__)

# A job's wall-time limit. A submission is bounded (images, sides, prompts), so a job past this is a
# worker far slower than a scoring GPU, or one that hangs; six hours is a CPU worker's paper-profile
# run of the largest benchmark with room to spare.
DEFAULT_JOB_SECONDS = 6 * 3600.0
MAX_REASON_CHARS = 300

# The errors that are the submission's fault: the job ends FAILED. Every other error is the worker's.
SUBMISSION_FAULTS: tuple[type[BaseException], ...] = (SubmissionError, ImageError)


class DiskFullError(WorkerFaultError):
    """The worker's disk (or its database) is full: the job went back to the queue and the worker stopped."""


class JudgeUnavailableError(IdbenchError):
    """The judge was unreachable, or failed above ``judge.card.UNAVAILABLE_ABOVE``: a fault of the worker's
    environment, so the job goes back to the queue instead of ending FINISHED with empty judged columns."""


class JobTimeLimit(BaseException):
    """Raised inside the job's thread when it runs past its wall-time limit.

    A BaseException, as KeyboardInterrupt is: the scoring code's own ``except Exception`` (a judge
    retry, a per-sample guard) must not swallow it.
    """


# (validated submission folder, benchmark folder, output folder, options, feature cache) -> the summary.
Scorer = Callable[[Path, Path, Path, ScoreOptions, Path], dict[str, Any]]


def score_work(
    submission: Path,
    data_dir: Path,
    out: Path,
    options: ScoreOptions,
    cache_dir: Path | None,
    models: Models | None = None,
    progress: bool | Progress = False,
) -> dict[str, Any]:
    """The default scorer: a validated submission folder against its benchmark folder.

    ``overwrite``: a worker killed after writing its outputs but before recording them leaves a
    complete folder (outputs are moved into place whole); the retry replaces it. ``models``: loaded
    models shared across the jobs of one worker. ``progress``: the worker's reporter (stage lines).
    """
    return score_submission(
        submission, data_dir, out, options, cache_dir=cache_dir, overwrite=True, progress=progress, models=models
    )


def default_worker_id() -> str:
    """Unique per worker process; no host name, as worker ids are shown in public records (the log says where it runs)."""
    return f"worker-{uuid.uuid4().hex[:12]}"


def run_worker(
    queue: JobQueue | Store,
    *,
    once: bool = False,
    worker_id: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    options: ScoreOptions | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    scorer: Scorer | None = None,
    check: bool | None = None,
    dry_run: bool = False,
    job_seconds: float = DEFAULT_JOB_SECONDS,
    echo: Callable[[str], None] = print,
    progress: bool | Progress = True,
) -> int:
    """Claim and score jobs from ``queue``; with ``once`` return when nothing is claimable. Returns the jobs completed.

    ``queue``: a :class:`~idbench.leaderboard.queue.protocol.JobQueue`, or a local
    :class:`~idbench.leaderboard.store.Store` (served as ``StoreQueue(store)``). Before each claim the
    worker checks itself and raises :class:`WorkerNotReadyError`, claiming nothing, when it cannot
    score what is queued; ``check`` (default: only with the default scorer, whose needs are known)
    turns that off or on. ``dry_run`` lists (through ``echo``) what would be claimed, runs the check,
    changes nothing, and returns how many jobs are claimable.

    ``options`` default to the ``paper`` profile and the whole suite. Without ``once`` the worker
    polls every ``poll_seconds`` forever; Ctrl-C puts the job in hand back to PENDING. ``scorer``
    replaces the scoring call (tests). ``progress`` (``idbench.progress``): one line on stderr when a
    job starts and when it ends (state and seconds), and the scorer's stages in between (bars on a
    terminal, bounded log lines otherwise); False says nothing. A job counts as completed when its FINISHED, FAILED or PARKED
    state was recorded by this worker; one taken over by another worker (lease lost) does not. Example::

        run_worker(Store(), once=True, options=ScoreOptions(profile="tiny"))
    """
    if isinstance(queue, Store):
        from idbench.leaderboard.queue.local import StoreQueue

        queue = StoreQueue(queue)
    options = options or ScoreOptions(profile="paper")
    worker_id = worker_id or default_worker_id()
    check = scorer is None if check is None else check
    models = Models(options)
    reporter = progress_for(progress)
    # each model loaded once per worker, not per job
    scorer = scorer or functools.partial(score_work, models=models, progress=reporter)
    checked: set[Path] = set()

    if dry_run:
        waiting = queue.waiting()
        for line in waiting:
            echo(f"would claim {line}")
        if not waiting:
            echo(f"nothing to claim in {queue.description}")
        if check:
            _check(queue, options, models, checked, started=False)
        return len(waiting)

    log.info("worker %s on %s (pid %d) serves %s", worker_id, socket.gethostname(), os.getpid(), queue.description)
    # A worker killed mid-write (kill -9) left its staging folders; the next start clears them, and puts
    # back an old results folder that the kill caught between its two renames.
    for line in queue.sweep():
        log.warning("%s", line)
    done = 0
    reserve_warned: set[str] = set()
    while True:
        if check:
            _check(queue, options, models, checked, started=done > 0)
        _keep_reserve(queue, reserve_warned)
        lease = queue.claim(worker_id, lease_seconds, checked=check)
        if lease is None:
            if once:
                return done
            time.sleep(poll_seconds)
            continue
        done += run_one(queue, lease, lease_seconds, options, scorer, job_seconds, reporter)


def _check(queue: JobQueue, options: ScoreOptions, models: Models, checked: set[Path], *, started: bool) -> None:
    problems = queue.readiness(options, models, checked, started)
    if problems:
        raise WorkerNotReadyError(
            f"not ready, no {queue.unit} claimed ({queue.description} is as it was): " + "; ".join(problems)
        )


def check_worker(
    store: Store, options: ScoreOptions, models: Models | None = None, checked: set[Path] | None = None
) -> None:
    """Raise :class:`WorkerNotReadyError` unless this worker can score every job a claim on ``store`` could hand out."""
    from idbench.leaderboard.queue.local import StoreQueue

    _check(StoreQueue(store), options, models or Models(options), set() if checked is None else checked, started=False)


def run_one(
    queue: JobQueue,
    lease: Lease,
    lease_seconds: float,
    options: ScoreOptions,
    scorer: Scorer,
    job_seconds: float = DEFAULT_JOB_SECONDS,
    reporter: Progress | None = None,
) -> int:
    """Score one claimed job and record its outcome by the fault ladder; 1 if recorded, 0 if the lease was lost.

    ``reporter`` says when the job starts and when it ends FINISHED (with its seconds); FAILED and PARKED
    are warnings of the log, with their seconds and reason (shown on stderr without any logging set up).
    """
    reporter = reporter or Quiet()
    started = reporter.clock()
    log.debug("%s (%s): attempt %s by %s", lease.label, lease.model, lease.attempts, lease.worker)
    reporter.line(f"{lease.label} ({lease.model}): scoring, attempt {lease.attempts}")

    def took() -> str:
        return seconds(reporter.clock() - started)

    try:
        with Heartbeat(lambda: queue.heartbeat(lease, lease_seconds), lease.label, lease_seconds) as heart:
            with queue.work(lease) as work, TimeLimit(job_seconds):  # recording the outcome is never cut short
                with reporter.scope(f"{lease.label}: "):  # the scorer's stage lines name the job
                    # No cache of the worker's own: the run caches `idbench env` names ($IDBENCH_CACHE's
                    # features and judge answers), so a later `idbench score` reads what this job computed.
                    summary = scorer(work.submission, work.data_dir, work.out, options, None)
            down = judge_unavailable(summary.get("judge"))
            if down is not None:  # judged columns of an outage would rank the judge, not the model
                raise JudgeUnavailableError(down)
            with heart.last_act():  # no renewal may land on a finished lease (it would read as "lease lost")
                queue.finish(lease, work, summary)
        log.debug("%s: FINISHED", lease.label)
        reporter.line(f"{lease.label}: FINISHED in {took()}")
        return 1
    except LeaseLostError as err:
        log.warning("%s", err)
        return 0
    except KeyboardInterrupt:
        queue.release(lease)  # the operator stopped us: the job goes back to the queue, not to FAILED
        raise
    except JobTimeLimit as err:
        reason = (
            f"ran past its wall-time limit of {job_seconds:g} s on attempt {lease.attempts}; not a fault of the submission "
            f"(requeue it on a faster worker, or with a higher --job-time-limit)"
        )
        _record_traceback(queue, lease, err)
        return _recorded(
            lambda: queue.park(lease, reason),
            f"{lease.label}: PARKED after {took()}: {reason}",
            queue,
            lease,
            lease_seconds,
            f"PARKED: {reason}",
        )
    except SUBMISSION_FAULTS as err:  # the submission's fault: FAILED, with what to fix
        reason = _record_traceback(queue, lease, err)
        return _recorded(
            lambda: queue.fail(lease, reason),
            f"{lease.label}: FAILED after {took()}: {reason}",
            queue,
            lease,
            lease_seconds,
            f"FAILED: {reason}",
        )
    except Exception as err:
        reason = _record_traceback(queue, lease, err)
        full = disk_full(err)
        try:
            state = queue.requeue(lease, reason)
        except LeaseLostError as lost:
            log.warning("%s", lost)
            return 0
        except Exception as again:
            # Whatever it is, the job must not sit RUNNING under our lease until the lease runs out: with
            # the disk reserve freed, record it again; else hand it back.
            state = _with_reserve(queue, lambda: queue.requeue(lease, reason), again)
            if state is _LOST:
                return 0
            if state is None:
                raise _unrecorded(
                    queue, lease, lease_seconds, f"a fault of this worker ({one_line(err)})", again, full
                ) from err
            full = True
        where = "parked (not the submitter's fault)" if state == "PARKED" else "back in the queue"
        if full:
            freed = "; recorded in the disk reserve, now used up" if _reserve_used(queue) else ""
            raise DiskFullError(
                f"disk full: {lease.label} {where} (attempt {lease.attempts}{freed}); free space and restart the "
                f"worker: {public_reason(err)}"
            ) from err
        raise WorkerFaultError(
            f"{lease.label} {where} after a fault of this worker on attempt {lease.attempts}: {reason}"
        ) from err


def _recorded(
    record: Callable[[], Any], message: str, queue: JobQueue, lease: Lease, lease_seconds: float, outcome: str
) -> int:
    try:
        record()
    except LeaseLostError as lost:
        log.warning("%s", lost)
        return 0
    except Exception as again:
        done = _with_reserve(queue, record, again)
        if done is _LOST:
            return 0
        if done is None:
            raise _unrecorded(queue, lease, lease_seconds, outcome, again) from again
        # Recorded in the reserve's room: the disk is full, so this worker stops here.
        log.warning("%s", message)
        raise DiskFullError(
            one_line(
                f"disk full: {lease.label}: {outcome} (recorded in the disk reserve, now used up); free space and "
                f"restart the worker ({one_line(again)})"
            )
        ) from again
    log.warning("%s", message)
    return 1


_LOST = object()  # _with_reserve: the job turned out to be no longer ours


def _keep_reserve(queue: JobQueue, warned: set[str]) -> None:
    """Put the queue's disk reserve (:class:`~idbench.leaderboard.queue.protocol.DiskReserve`) in place when
    it is not; a warning when the disk has no room for it (once, until it is in place again)."""
    reserve = getattr(queue, "reserve", None)
    if reserve is None:
        return
    missing = reserve.ensure()
    if missing is None:
        warned.clear()
    elif not warned:
        warned.add(missing)
        log.warning("%s", missing)


def _reserve_used(queue: JobQueue) -> bool:
    reserve = getattr(queue, "reserve", None)
    return reserve is not None and not reserve.path.exists()


def _with_reserve(queue: JobQueue, record: Callable[[], Any], again: BaseException) -> Any:
    """After ``record`` failed with ``again``: free the disk reserve and record once more. What ``record``
    returned (True when it returns None), ``_LOST`` when the job is no longer ours, or None when there was
    no reserve to free or it failed again."""
    reserve = getattr(queue, "reserve", None)
    if reserve is None or not storage_failure(again) or not reserve.free():
        return None
    log.warning("could not record an outcome (%s); freed the disk reserve to record it", one_line(again))
    try:
        result = record()
    except LeaseLostError as lost:
        log.warning("%s", lost)
        return _LOST
    except Exception as still:
        log.warning("still not recorded with the reserve freed: %s", one_line(still))
        return None
    return True if result is None else result


#: Pauses before each try to hand a job back when its outcome could not be recorded: an I/O error may
#: pass, a full disk may free a page as other writers stop. About a second in all, far below a lease.
RELEASE_PAUSES_S: tuple[float, ...] = (0.0, 0.2, 0.8)


def _hand_back(queue: JobQueue, lease: Lease) -> str | None:
    """Put the job back in the queue at once (``queue.release``: PENDING, no lease) so that another worker
    can take it now rather than after the lease; None when done (or the job is no longer ours), else why not."""
    why = "not tried"
    for pause in RELEASE_PAUSES_S:
        time.sleep(pause)
        try:
            queue.release(lease)
            return None
        except LeaseLostError:
            return None
        except Exception as err:
            why = one_line(err)
    return why


def _unrecorded(
    queue: JobQueue, lease: Lease, lease_seconds: float, outcome: str, again: BaseException, full: bool = False
) -> WorkerFaultError:
    """The one-line error of a worker that could not record ``outcome`` (``again`` is why); the job is handed back first."""
    full = full or disk_full(again)
    left = _hand_back(queue, lease)
    if left is None:
        fate = f"{lease.label} was released back to the queue, another worker can take it now"
    else:
        fate = (
            f"{lease.label} could not be released either ({left}): its lease runs out in {lease_seconds:g} s "
            "and it is claimed again then"
        )
    kind, head = (DiskFullError, "disk full: ") if full else (WorkerFaultError, "")
    log.warning("%s: outcome not recorded (%s); %s", lease.label, one_line(again), fate)
    return kind(
        one_line(
            f"{head}{lease.label}: its outcome ({outcome}) could not be recorded ({one_line(again)}); {fate}; "
            "fix the store's disk and restart the worker"
        )
    )


def _record_traceback(queue: JobQueue, lease: Lease, err: BaseException) -> str:
    # "job 7" -> job-7, "identity-collapse/m/0123456789ab.json" -> identity-collapse--m--0123456789ab
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", lease.label.removesuffix(".json").replace("/", "--")).strip("-")
    return record_traceback(queue.home / "logs" / f"{slug}-attempt-{lease.attempts}.log", err)


def record_traceback(path: Path, err: BaseException) -> str:
    """Write ``err``'s traceback to ``path``; the one-line public reason (naming that log file by name) a record shows."""
    with contextlib.suppress(OSError):  # a full disk must not hide the fault being recorded
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(type(err), err, err.__traceback__)), encoding="utf-8")
    return f"{public_reason(err)} (traceback: {path.name} in the worker's logs)"


# An absolute path in a message (POSIX): everything up to its last component is the server's business.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s'\"/:]+/)+")


def public_reason(err: BaseException) -> str:
    """``err`` as one line for a record others read: no host name, no absolute path (only its last part), bounded."""
    message = one_line(err) or "(no message)"
    host = socket.gethostname()
    if host:
        message = message.replace(host, "<host>")
    message = _ABSOLUTE_PATH.sub(".../", message)
    if len(message) > MAX_REASON_CHARS:
        message = message[: MAX_REASON_CHARS - 3] + "..."
    return f"{type(err).__name__}: {message}"


class Heartbeat:
    """Call ``beat`` (extend a lease; False: the lease was lost) every third of ``lease_seconds`` while the block runs.

    It runs in a daemon thread, which dies with the process: a killed worker stops renewing and its
    lease expires. ``name`` (e.g. "job 7") is for the log.
    """

    def __init__(self, beat: Callable[[], bool], name: str, lease_seconds: float):
        self.beat, self.name, self.lease_seconds = beat, name, lease_seconds
        self._stop = threading.Event()
        self._acting = threading.Lock()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{name}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            with self._acting:
                if self._stop.is_set():  # the holder finished while this tick waited for the lock
                    return
                try:
                    if not self.beat():
                        log.warning("%s: lease lost to another worker; its outcome will not be recorded", self.name)
                        return
                except Exception:
                    log.exception("%s: heartbeat failed; retrying", self.name)

    @contextlib.contextmanager
    def last_act(self) -> Iterator[None]:
        """Run the lease's last act (recording its outcome) with no renewal during or after it.

        A renewal racing the act could land after the lease was closed and log a lost lease; one
        already running is waited for. The lease was renewed at most a third of its length ago, so the
        act has two thirds of it left.
        """
        with self._acting:
            try:
                yield
            finally:
                self._stop.set()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


class TimeLimit:
    """Raise :class:`JobTimeLimit` in the thread running the block once it has run ``seconds``.

    The exception is delivered between two Python bytecodes of that thread (``PyThreadState_SetAsyncExc``),
    so a long C call (one model forward) finishes first: the limit is a bound on a job, not a stopwatch.
    An exception still pending when the block ends by itself is withdrawn, so it never leaks out.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._lock = threading.Lock()
        self._active = False
        self._fired = False
        self._thread_id = 0
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        with self._lock:
            if self._active:
                self._fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._thread_id), ctypes.py_object(JobTimeLimit)
                )

    def __enter__(self) -> TimeLimit:
        self._thread_id = threading.get_ident()
        self._active = True
        if self.seconds and self.seconds > 0 and self.seconds != float("inf"):
            self._timer = threading.Timer(self.seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        with self._lock:
            self._active = False
            if self._timer is not None:
                self._timer.cancel()
            if self._fired and exc_type is not JobTimeLimit:  # fired, not yet delivered: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), None)
