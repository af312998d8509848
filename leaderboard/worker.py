"""``idbench worker``: claim jobs, score them, record the outcome.

Each job is scored with :func:`idbench.evaluate_pkg.runner.score_submission` into
``home/results/<submission_id>/<job_id>/`` with the shared feature cache ``home/features``, so a job
re-claimed after its worker died recomputes only the features that had not been cached yet. While
a job runs, a heartbeat thread keeps extending its lease; a crash of the whole process stops the
heartbeat and lets the lease run out. Any exception from scoring ends the job FAILED with a one-line
reason, the traceback going to ``home/logs/job-<id>-attempt-<n>.log``.
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
from typing import Any, Callable

from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.runner import score_submission
from idbench.leaderboard.queue import benchmark_version, claim, fail, finish, heartbeat, release
from idbench.leaderboard.store import Job, LeaseLostError, Store

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 600.0
DEFAULT_POLL_SECONDS = 5.0
MAX_REASON_CHARS = 300

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
) -> int:
    """Claim and score jobs; with ``once`` return when the queue is empty. Returns the jobs completed.

    ``options`` default to the ``paper`` profile and the whole suite. Without ``once`` the worker
    polls every ``poll_seconds`` forever; Ctrl-C puts the job in hand back to PENDING. ``scorer``
    replaces the scoring call (tests). A job counts as completed when its FINISHED or FAILED state was
    recorded by this worker; one taken over by another worker (lease lost) does not. Example::

        run_worker(Store(), once=True, options=ScoreOptions(profile="tiny"))
    """
    options = options or ScoreOptions(profile="paper")
    worker_id = worker_id or default_worker_id()
    if scorer is score_job:  # load each model once per worker, not once per job
        scorer = functools.partial(score_job, models=Models(options))
    done = 0
    while True:
        job = claim(store, worker_id, lease_seconds)
        if job is None:
            if once:
                return done
            time.sleep(poll_seconds)
            continue
        done += _run_job(store, job, lease_seconds, options, scorer)


def _run_job(store: Store, job: Job, lease_seconds: float, options: ScoreOptions, scorer: Scorer) -> int:
    """Score one claimed job and record the outcome; 1 if recorded, 0 if the lease was lost meanwhile."""
    out = store.results_dir / str(job.submission_id) / str(job.id)
    log.info("job %s (submission %s, %s): attempt %s by %s", job.id, job.submission_id, job.model_name, job.attempts, job.lease_owner)
    try:
        with _Heartbeat(store, job, lease_seconds):
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
    except Exception as err:  # noqa: BLE001 - any failure of one job must end that job, not the worker
        reason = _record_traceback(store, job, err)
        try:
            fail(store, job, reason)
        except LeaseLostError as lost:
            log.warning("%s", lost)
            return 0
        log.warning("job %s: FAILED: %s", job.id, reason)
        return 1


def _record_traceback(store: Store, job: Job, err: BaseException) -> str:
    """Write the traceback to the job's log file; the one-line reason (naming that file) for the table."""
    store.logs_dir.mkdir(parents=True, exist_ok=True)
    path = store.logs_dir / f"job-{job.id}-attempt-{job.attempts}.log"
    path.write_text("".join(traceback.format_exception(type(err), err, err.__traceback__)), encoding="utf-8")
    message = " ".join(str(err).split()) or "(no message)"  # the error on one line, whatever it held
    if len(message) > MAX_REASON_CHARS:
        message = message[: MAX_REASON_CHARS - 3] + "..."
    return f"{type(err).__name__}: {message} (traceback: {path})"


class _Heartbeat:
    """Extend a job's lease every third of ``lease_seconds`` while the block runs (in a daemon thread).

    A daemon thread dies with the process, so a killed worker stops renewing and its lease expires.
    """

    def __init__(self, store: Store, job: Job, lease_seconds: float):
        self.store, self.job, self.lease_seconds = store, job, lease_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-job-{job.id}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                if not heartbeat(self.store, self.job, self.lease_seconds):
                    log.warning("job %s: lease lost to another worker; its outcome will not be recorded", self.job.id)
                    return
            except Exception:  # noqa: BLE001 - a busy database now and then must not kill the heartbeat
                log.exception("job %s: heartbeat failed; retrying", self.job.id)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
