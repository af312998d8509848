"""``idbench worker``: claim jobs, score them, record the outcome.

Each job is scored with :func:`idbench.evaluate_pkg.runner.score_submission` into
``home/results/<submission_id>/<job_id>/`` with the shared feature cache ``home/features``, so a job
re-claimed after its worker died recomputes only the features that had not been cached yet. While
a job runs, a heartbeat thread keeps extending its lease; a crash of the whole process stops the
heartbeat and lets the lease run out.

A worker checks itself before it claims anything (:func:`check_worker`): the models of its profile
that the queued jobs' metrics need (on this machine, not loaded), its judge configuration and the
queued jobs' benchmark folders. When something is missing it raises :class:`WorkerNotReadyError`
(one line naming what) and claims nothing: the queue stays as it was. The check runs again for every
benchmark folder that appears in the queue later.

Who is at fault decides how a job ends. A fault of the submission (``SUBMISSION_FAULTS``: its files
do not validate, an image does not decode) ends it FAILED with the reason, for the submitter to act
on. Anything else is a fault of the worker (a model that does not load, CUDA out of memory, the judge
down beyond its retries, a full disk): the job goes back to PENDING with the attempt counted
(PARKED after ``queue.MAX_ATTEMPTS`` of them) and the worker stops with :class:`WorkerFaultError`,
since whatever broke it would likely break the next job too. Either way the traceback goes to
``home/logs/job-<id>-attempt-<n>.log`` and the one-line reason names that file.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

from idbench.atomic import sweep_staging
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import BenchmarkDataError, load_benchmark_data
from idbench.evaluate_pkg.images import ImageError
from idbench.evaluate_pkg.runner import model_roles, score_submission, select_metrics
from idbench.evaluate_pkg.submission import SubmissionError
from idbench.leaderboard.queue import benchmark_version, claim, fail, finish, heartbeat, queued_data_dirs, release, requeue
from idbench.leaderboard.store import Job, LeaseLostError, Store

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 600.0
DEFAULT_POLL_SECONDS = 5.0
MAX_REASON_CHARS = 300

# The errors that are the submission's fault: the job ends FAILED. Every other error is the worker's.
SUBMISSION_FAULTS: tuple[type[BaseException], ...] = (SubmissionError, ImageError)


class WorkerNotReadyError(IdbenchError):
    """The worker lacks what the queued jobs need (models, judge, benchmark data); it claimed nothing."""


class WorkerFaultError(IdbenchError):
    """A job hit a fault of this worker: the job went back to the queue (or was parked) and the worker stopped."""


# (job, output folder, options, feature cache folder) -> the summary score_submission returns.
Scorer = Callable[[Job, Path, ScoreOptions, Path], dict[str, Any]]


def score_job(job: Job, out: Path, options: ScoreOptions, cache_dir: Path, models: Models | None = None) -> dict[str, Any]:
    """The default scorer: the stored submission against its benchmark folder.

    ``overwrite``: a worker killed after writing its outputs but before recording them leaves a
    complete folder (outputs are moved into place whole); the retry replaces it. ``models``: loaded
    models shared across the jobs of one worker.
    """
    return score_submission(
        job.stored_path, job.data_dir, out, options, cache_dir=cache_dir, overwrite=True, progress=False, models=models
    )


def default_worker_id() -> str:
    """Unique per worker process: host, pid and a random suffix (pids are reused, hosts shared)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def run_worker(
    store: Store,
    *,
    once: bool = False,
    worker_id: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    options: ScoreOptions | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    scorer: Scorer = score_job,
    check: bool | None = None,
) -> int:
    """Claim and score jobs; with ``once`` return when the queue is empty. Returns the jobs completed.

    Before each claim the worker checks itself (:func:`check_worker`, for benchmark folders not yet
    checked) and raises :class:`WorkerNotReadyError`, claiming nothing, when it cannot score them;
    ``check`` (default: only with the default scorer, whose needs are known) turns that off or on. A
    fault of the worker during a job raises :class:`WorkerFaultError` once the job is back in the queue.

    ``options`` default to the ``paper`` profile and the whole suite. Without ``once`` the worker
    polls every ``poll_seconds`` forever; Ctrl-C puts the job in hand back to PENDING. ``scorer``
    replaces the scoring call (tests). A job counts as completed when its FINISHED or FAILED state was
    recorded by this worker; one taken over by another worker (lease lost) does not. Example::

        run_worker(Store(), once=True, options=ScoreOptions(profile="tiny"))
    """
    options = options or ScoreOptions(profile="paper")
    worker_id = worker_id or default_worker_id()
    check = scorer is score_job if check is None else check
    models = Models(options)
    if scorer is score_job:  # load each model once per worker, not once per job
        scorer = functools.partial(score_job, models=models)
    checked: set[Path] = set()
    done = 0
    # A worker killed mid-write (kill -9) left its staging folder; the next start clears it, and puts
    # back an old results folder that the kill caught between its two renames.
    for line in sweep_staging(store.home):
        log.warning("%s", line)
    while True:
        if check:
            check_worker(store, options, models, checked)
        job = claim(store, worker_id, lease_seconds)
        if job is None:
            if once:
                return done
            time.sleep(poll_seconds)
            continue
        done += _run_job(store, job, lease_seconds, options, scorer)


def check_worker(store: Store, options: ScoreOptions, models: Models | None = None, checked: set[Path] | None = None) -> None:
    """Raise :class:`WorkerNotReadyError` unless this worker can score every job a claim could hand out.

    Checks, without loading any model or calling the network: the judge configuration (when one is
    given: an http(s) URL and a model name), each queued benchmark folder (it loads), and the models of
    the profile that the metrics to compute there need (``Models.missing``). Folders in ``checked``
    are skipped; those that pass are added, so a polling worker checks each folder once.
    """
    problems = readiness_problems(queued_data_dirs(store), options, models, checked)
    if problems:
        raise WorkerNotReadyError("not ready, no job claimed (the queue is as it was): " + "; ".join(problems))


def readiness_problems(
    data_dirs: Iterable[Path], options: ScoreOptions, models: Models | None = None, checked: set[Path] | None = None
) -> list[str]:
    """What keeps this worker from scoring submissions of the benchmark folders ``data_dirs`` (one line each).

    The checks of :func:`check_worker`, for any queue (the local store or the Hub's requests repo).
    """
    models = models or Models(options)
    checked = set() if checked is None else checked
    problems = _judge_problems(options.judge)
    missing: dict[str, str] = {}
    for data_dir in data_dirs:
        if data_dir in checked:
            continue
        try:
            data = load_benchmark_data(data_dir)
        except (BenchmarkDataError, OSError) as err:
            problems.append(f"benchmark data of queued jobs not readable here: {_one_line(err)}")
            continue
        try:
            metrics, _ = select_metrics(data, options.metrics, options.judge)
        except IdbenchError as err:  # --metrics naming one this benchmark does not have
            problems.append(f"{data.name}: {_one_line(err)}")
            continue
        found = models.missing(model_roles(data, metrics))
        missing.update(found)
        if not found:
            checked.add(data_dir)
    if missing:
        for message in missing.values():
            log.info("%s", message)  # how to get each one: shown with `idbench -v worker`
        problems.insert(0, f"{len(missing)} model(s) of profile {options.profile!r} not on this machine: {', '.join(sorted(missing))}"
                        " (`idbench -v worker` or `idbench models list` tells how to get them)")
    return problems


def _judge_problems(judge: Any) -> list[str]:
    """What is wrong with a judge configuration (a JudgeConfig); nothing for None or a ready judge object."""
    from urllib.parse import urlparse

    if judge is None or hasattr(judge, "ask"):
        return []
    problems = []
    url = urlparse(str(getattr(judge, "base_url", "") or ""))
    if url.scheme not in ("http", "https") or not url.netloc:
        problems.append(f"judge URL {getattr(judge, 'base_url', None)!r} is not an http(s) URL")
    if not getattr(judge, "model", None):
        problems.append("no judge model named")
    return problems


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _run_job(store: Store, job: Job, lease_seconds: float, options: ScoreOptions, scorer: Scorer) -> int:
    """Score one claimed job and record the outcome; 1 if recorded, 0 if the lease was lost meanwhile."""
    out = store.results_dir / str(job.submission_id) / str(job.id)
    log.info("job %s (submission %s, %s): attempt %s by %s", job.id, job.submission_id, job.model_name, job.attempts, job.lease_owner)
    try:
        with Heartbeat(lambda: heartbeat(store, job, lease_seconds), f"job {job.id}", lease_seconds):
            version = benchmark_version(job.data_dir) if job.data_dir.is_dir() else None
            summary = scorer(job, out, options, store.features_dir)
        finish(store, job, summary, out, benchmark_version=version)
        log.info("job %s: FINISHED", job.id)
        return 1
    except LeaseLostError as err:
        log.warning("%s", err)
        return 0
    except KeyboardInterrupt:
        release(store, job)  # the user stopped us: the job goes back to the queue, not to FAILED
        raise
    except SUBMISSION_FAULTS as err:  # the submission's fault: FAILED, with what to fix
        reason = _record_traceback(store, job, err)
        try:
            fail(store, job, reason)
        except LeaseLostError as lost:
            log.warning("%s", lost)
            return 0
        log.warning("job %s: FAILED: %s", job.id, reason)
        return 1
    except Exception as err:  # noqa: BLE001 - any other error is this worker's: the job goes back
        reason = _record_traceback(store, job, err)
        try:
            state = requeue(store, job, reason)
        except LeaseLostError as lost:
            log.warning("%s", lost)
            return 0
        where = "parked (not the submitter's fault)" if state == "PARKED" else "back in the queue"
        raise WorkerFaultError(f"job {job.id} {where} after a fault of this worker on attempt {job.attempts}: {reason}") from err


def _record_traceback(store: Store, job: Job, err: BaseException) -> str:
    """Write the traceback to the job's log file; the one-line reason (naming that file) for the table."""
    return record_traceback(store.logs_dir / f"job-{job.id}-attempt-{job.attempts}.log", err)


def record_traceback(path: Path, err: BaseException) -> str:
    """Write ``err``'s traceback to ``path``; the one-line reason (naming that file) a job's record shows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(traceback.format_exception(type(err), err, err.__traceback__)), encoding="utf-8")
    message = _one_line(err) or "(no message)"  # the error on one line, whatever it held
    if len(message) > MAX_REASON_CHARS:
        message = message[: MAX_REASON_CHARS - 3] + "..."
    return f"{type(err).__name__}: {message} (traceback: {path})"


class Heartbeat:
    """Call ``beat`` (extend a lease; False: the lease was lost) every third of ``lease_seconds`` while the block runs.

    It runs in a daemon thread, which dies with the process: a killed worker stops renewing and its
    lease expires. ``name`` (e.g. "job 7") is for the log.
    """

    def __init__(self, beat: Callable[[], bool], name: str, lease_seconds: float):
        self.beat, self.name, self.lease_seconds = beat, name, lease_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{name}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                if not self.beat():
                    log.warning("%s: lease lost to another worker; its outcome will not be recorded", self.name)
                    return
            except Exception:  # noqa: BLE001 - a busy database (or Hub) now and then must not kill the heartbeat
                log.exception("%s: heartbeat failed; retrying", self.name)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
