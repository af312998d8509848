"""The leaderboard's queue: one protocol, two backends, and the choice between them.

- :mod:`~idbench.leaderboard.queue.protocol`: :class:`JobQueue`, every operation a queue offers
  (``submit``, the worker's claim / heartbeat / outcomes, the maintainer's list / withdraw / rescore),
  and what both backends share (:data:`MAX_ATTEMPTS`, :class:`RateLimit`, :func:`parked_reason`, the
  worker's readiness checks).
- :mod:`~idbench.leaderboard.queue.local`: the local store ($IDBENCH_HOME: SQLite and a submissions
  folder), :class:`StoreQueue`.
- :mod:`~idbench.leaderboard.queue.hub`: a Hub deployment's requests and results repos,
  :class:`HubQueue`.

The functions here pick the queue a maintainer works on, the local store or a Hub deployment's repos,
and the built benchmark folders it scores against; the same jobs (submit, list, withdraw, rescore,
work) then run on either through the protocol. A backend's module is imported only when it is asked
for: the local store needs no Hub client.

The names of the protocol and of the local backend are importable from this package, as they were
from the single ``leaderboard/queue.py`` before it; those of the Hub backend too, loaded on first
use. Where the two backends have a function of the same name (``heartbeat``, ``requeue``), the name
here is the local one; the Hub's are ``queue.hub.heartbeat`` and ``queue.hub.requeue``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from idbench.leaderboard.queue.local import (
    RETRIEVAL_NOT_QUEUED,
    AdminActionError,
    StoreQueue,
    SubmitResult,
    benchmark_version,
    claim,
    claimable_jobs,
    fail,
    finish,
    heartbeat,
    jobs_table,
    name_taken_message,
    park,
    queued_data_dirs,
    queued_metadata,
    release,
    requeue,
    rescore,
    rescore_all,
    store_files,
    submission_hash,
    submit,
)
from idbench.leaderboard.queue.protocol import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_POLL_SECONDS,
    MAX_ATTEMPTS,
    RESERVE_BYTES,
    DiskReserve,
    JobQueue,
    Lease,
    RateLimit,
    Work,
    WorkerFaultError,
    WorkerNotReadyError,
    judge_problems,
    one_line,
    parked_reason,
    readiness_problems,
)

# The Hub backend's names, resolved by __getattr__ below on first use. Importing queue.hub here would
# load the Hub client for every local use, and would go in a circle at import time: queue.hub imports
# the worker, and the worker's import of queue.protocol runs this file first.
_HUB_NAMES = frozenset(
    {
        "CONFLICT_BACKOFF_CAP_S",
        "CONFLICT_BACKOFF_S",
        "CONFLICT_RETRIES",
        "RECORD_METADATA",
        "REQUEST_ZIP_MAX_RATIO",
        "SCHEMA",
        "STATES",
        "Claim",
        "HubQueue",
        "HubQueueError",
        "Request",
        "RequestRef",
        "claim_request",
        "claimable",
        "delete_results",
        "fail_request",
        "find_request",
        "finish_request",
        "hub_readiness_problems",
        "is_plumbing",
        "list_requests",
        "owner_of",
        "park_request",
        "release_request",
        "requeue_request",
        "result_operations",
        "run_hub_worker",
        "scan_requests",
        "score_request",
        "submit_request",
        "withdraw",
    }
)


def __getattr__(name: str) -> Any:
    if name in _HUB_NAMES:
        from idbench.leaderboard.queue import hub

        return getattr(hub, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def benchmark_data_dir(benchmark: str, data: Path | None = None) -> Path:
    """The built benchmark a local leaderboard scores against: ``data``, else $IDBENCH_HOME/benchmarks/<name>."""
    from idbench.leaderboard.store import Store

    return data if data is not None else Store().home / "benchmarks" / benchmark


def default_data_dirs() -> dict[str, Path]:
    """Every registered benchmark's default built folder, $IDBENCH_HOME/benchmarks/<name> (a Hub worker's)."""
    from idbench.builders.registry import BENCHMARKS
    from idbench.leaderboard.store import default_home

    return {name: default_home() / "benchmarks" / name for name in BENCHMARKS}


def open_queue(
    hub: str | None = None, results: str | None = None, data_dirs: dict[str, Path] | None = None
) -> JobQueue:
    """The local store's :class:`~idbench.leaderboard.queue.local.StoreQueue` without ``hub``; with it, the
    :class:`~idbench.leaderboard.queue.hub.HubQueue` of that requests repo (and of the ``results`` repo,
    where one is given), scoring against ``data_dirs`` (benchmark -> built folder)."""
    if not hub:
        from idbench.leaderboard.store import Store

        return StoreQueue(Store())
    from idbench.leaderboard.hubrepo import open_repo
    from idbench.leaderboard.queue.hub import HubQueue

    results_repo = open_repo(results) if results else None
    return HubQueue(open_repo(hub), results_repo, data_dirs or {})


def submit_to(submission: str | Path, data_dir: Path, *, hub: str | None = None, **options: Any) -> Any:
    """Queue ``submission`` (a manifest or parquet folder, a .zip, or a Hub dataset repo as
    ``hf://datasets/OWNER/NAME[@REVISION]``, fetched into a temporary folder first) with the ``submit``
    of :func:`open_queue`'s queue: on the local store (:func:`~idbench.leaderboard.queue.local.submit`,
    a ``SubmitResult``) or, with ``hub``, as a request of that Hub requests repo
    (:func:`~idbench.leaderboard.queue.hub.submit_request`, a ``RequestRef``). ``options`` are the
    protocol's (model_name, submitter, family, link, rate_limit, client)."""
    import tempfile

    from idbench.evaluate_pkg.hub_submission import fetch_submission, is_hub_ref

    queue = open_queue(hub)
    if not is_hub_ref(str(submission)):
        return queue.submit(Path(submission), data_dir, **options)
    with tempfile.TemporaryDirectory(prefix="idbench-hub-") as folder:
        return queue.submit(fetch_submission(str(submission), Path(folder) / "submission"), data_dir, **options)


def __dir__() -> list[str]:
    return sorted(set(globals()) | _HUB_NAMES)


__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POLL_SECONDS",
    "MAX_ATTEMPTS",
    "RESERVE_BYTES",
    "RETRIEVAL_NOT_QUEUED",
    "AdminActionError",
    "DiskReserve",
    "JobQueue",
    "Lease",
    "RateLimit",
    "StoreQueue",
    "SubmitResult",
    "Work",
    "WorkerFaultError",
    "WorkerNotReadyError",
    "benchmark_data_dir",
    "benchmark_version",
    "claim",
    "claimable_jobs",
    "default_data_dirs",
    "fail",
    "finish",
    "heartbeat",
    "jobs_table",
    "judge_problems",
    "name_taken_message",
    "one_line",
    "open_queue",
    "park",
    "parked_reason",
    "queued_data_dirs",
    "queued_metadata",
    "readiness_problems",
    "release",
    "requeue",
    "rescore",
    "rescore_all",
    "store_files",
    "submission_hash",
    "submit",
    "submit_to",
    *sorted(_HUB_NAMES),
]
