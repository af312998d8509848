"""Which leaderboard a maintainer works on: the local store ($IDBENCH_HOME) or a Hub deployment's repos.

The same jobs (submit, list, withdraw, rescore, work) run on either; these functions pick the queue and
the built benchmark folders it scores against. The heavy modules are imported only for the queue asked
for: the local store needs no Hub client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def benchmark_data_dir(benchmark: str, data: Path | None = None) -> Path:
    """The built benchmark a local leaderboard scores against: ``data``, else $IDBENCH_HOME/benchmarks/<name>."""
    from idbench.leaderboard.store import Store

    return data if data is not None else Store().home / "benchmarks" / benchmark


def default_data_dirs() -> dict[str, Path]:
    """Every registered benchmark's default built folder, $IDBENCH_HOME/benchmarks/<name> (a Hub worker's)."""
    from idbench.builders.registry import BENCHMARKS
    from idbench.leaderboard.store import default_home

    return {name: default_home() / "benchmarks" / name for name in BENCHMARKS}


def open_queue(hub: str | None = None, results: str | None = None, data_dirs: dict[str, Path] | None = None):
    """The local store's :class:`~idbench.leaderboard.queue.StoreQueue` without ``hub``; with it, the
    :class:`~idbench.leaderboard.hub_queue.HubQueue` of that requests repo (and of the ``results`` repo,
    where one is given), scoring against ``data_dirs`` (benchmark -> built folder)."""
    if not hub:
        from idbench.leaderboard.queue import StoreQueue
        from idbench.leaderboard.store import Store

        return StoreQueue(Store())
    from idbench.leaderboard.hub_queue import HubQueue
    from idbench.leaderboard.hubrepo import open_repo

    results_repo = open_repo(results) if results else None
    return HubQueue(open_repo(hub), results_repo, data_dirs or {})


def submit_to(submission: str | Path, data_dir: Path, *, hub: str | None = None, **options: Any):
    """Queue ``submission`` (a manifest or parquet folder, a .zip, or a Hub dataset repo as
    ``hf://datasets/OWNER/NAME[@REVISION]``, fetched into a temporary folder first) on the local store
    (:func:`~idbench.leaderboard.queue.submit`, a ``SubmitResult``) or, with ``hub``, as a request of that
    Hub requests repo (:func:`~idbench.leaderboard.hub_queue.submit_request`, a ``RequestRef``)."""
    import functools
    import tempfile

    from idbench.evaluate_pkg.hub_submission import fetch_submission, is_hub_ref

    if hub:
        from idbench.leaderboard.hub_queue import submit_request
        from idbench.leaderboard.hubrepo import open_repo

        queue = functools.partial(submit_request, open_repo(hub))
    else:
        from idbench.leaderboard.queue import submit
        from idbench.leaderboard.store import Store

        queue = functools.partial(submit, Store())
    if not is_hub_ref(str(submission)):
        return queue(Path(submission), data_dir, **options)
    with tempfile.TemporaryDirectory(prefix="idbench-hub-") as folder:
        return queue(fetch_submission(str(submission), Path(folder) / "submission"), data_dir, **options)
