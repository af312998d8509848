"""How the app's pages get their numbers: the store, the current results of a track, a result's
per-sample values, the stored rank intervals of a board and the built benchmark of a result.

Every reader of the store or of a result folder that more than one page uses lives here, with its
Streamlit cache: the current results are keyed by :func:`idbench.leaderboard.query.store_version`
(a finished job shows on the next rerun), and the built benchmark is held once per server process.
Rank intervals and tiers are read as :mod:`idbench.leaderboard.board` stored them: no page resamples.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import streamlit as st

from idbench.builders.registry import get_benchmark
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.evaluate_pkg import results as result_files
from idbench.evaluate_pkg.data import BenchmarkData, load_benchmark_data
from idbench.leaderboard import board, query
from idbench.leaderboard.app import backend
from idbench.leaderboard.store import Store

logger = logging.getLogger(__name__)


def store() -> Store:
    """The store under ``$IDBENCH_HOME``, or the Hub mirror of a Hub-backed deployment (:mod:`.backend`);
    found again on every rerun, so tests can point it elsewhere."""
    return backend.store()


@st.cache_data(show_spinner=False, max_entries=32)
def _current_results(home: str, benchmark: str, task: str, version: tuple[int, int, int]) -> pd.DataFrame:
    # ``version`` is only part of the cache key: a new result changes it and misses the cache. A metric
    # redefined since a row's suite version is taken out of that row (query.as_defined_now).
    return query.as_defined_now(Store(Path(home)).current_results(benchmark, task), get_benchmark(benchmark))


def current_results(benchmark: str, task: str = DEFAULT_TASK) -> pd.DataFrame:
    """The current results of one track (``task``) of ``benchmark``, cached until the store's results change."""
    s = store()
    return _current_results(str(s.home), benchmark, task, query.store_version(s))


def read_results(
    results_path: str, required: tuple[str, ...], optional: tuple[str, ...] = (), metric: str | None = None
) -> pd.DataFrame | None:
    """The ``required`` (and present ``optional``) columns of a result's per-sample values, only
    ``metric``'s rows when given; None when the file is absent, unreadable, over its bounds or lacks a
    required column (the callers then say the values are not available; the log says why)."""
    try:
        return result_files.read_samples(results_path, required, optional=optional, metric=metric)
    except result_files.ResultFileError as error:
        logger.warning("%s", error)
        return None


def stored_rank_intervals(
    ranked: pd.DataFrame,
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    metric: str,
    filters: dict,
    task: str = DEFAULT_TASK,
    judge: str | None = "",
) -> tuple[pd.DataFrame, str]:
    """The ranked rows with the rank interval and tier their board stored (:mod:`idbench.leaderboard.board`,
    computed when the results changed: a page view resamples nothing), and a caption saying what they
    claim, or why there are none."""
    return board.with_intervals(store(), ranked, results, spec, task, metric, filters, judge)


@st.cache_resource(show_spinner=False, max_entries=8)
def benchmark_data(folder: str) -> BenchmarkData:
    # The built benchmark of a result, read once per server (its content never changes under one path).
    return load_benchmark_data(Path(folder))
