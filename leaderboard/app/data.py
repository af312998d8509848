"""How the app's pages get their numbers: the store, the current results of a track, a result's
per-sample values, the rank intervals of a board and the built benchmark of a result.

Every reader of the store or of a result folder that more than one page uses lives here, with its
Streamlit cache: the current results are keyed by :func:`idbench.leaderboard.query.store_version`
(a finished job shows on the next rerun), a result folder's values by its path (it never changes
once written), and the built benchmark is held once per server process.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import streamlit as st

from idbench.builders.registry import get_benchmark
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.evaluate_pkg import results as result_files
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError, load_benchmark_data
from idbench.leaderboard import query
from idbench.leaderboard.app import backend
from idbench.leaderboard.app.widgets import stored_text
from idbench.leaderboard.store import Store, UnknownIdError

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


@st.cache_data(show_spinner=False, max_entries=512)
def _sample_values(results_path: str, metric: str) -> pd.DataFrame | None:
    # One result's image values of one metric; a result folder never changes, so its path is the key.
    frame = read_results(results_path, ("prompt_id", "seed", "metric", "value"), ("subject",), metric)
    return None if frame is None else query.sample_values(frame, metric)


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


@st.cache_data(show_spinner=False, max_entries=64)
def _rank_uncertainty(
    paths: tuple[tuple[int, str], ...],
    metric: str,
    higher_is_better: bool,
    prompts: tuple[str, ...] | None,
    factors: tuple[str, ...],
    units_json: str,
) -> tuple[pd.DataFrame, int, list[int]]:
    # (rank intervals and tiers, prompts they rest on, submissions without per-sample values), cached
    # by the ranked rows' result folders, the metric, the cell's prompts and the resampling design
    # (a new result changes them).
    values, lacking = {}, []
    for submission, path in paths:
        found = _sample_values(path, metric)
        if found is None or found.empty:
            lacking.append(submission)
        else:
            values[submission] = found
    means = query.shared_prompt_means(values, prompts)
    uncertainty = query.rank_uncertainty(means, higher_is_better, factors=factors, units=json.loads(units_json))
    return uncertainty, len(means), lacking


def rank_uncertainty(
    ranked: pd.DataFrame, results: pd.DataFrame, spec: BenchmarkSpec, metric: str, filters: dict
) -> tuple[pd.DataFrame, str]:
    """The ranked rows with their rank interval and tier (:func:`query.rank_uncertainty`, from the
    per-sample results), and a caption naming the resampling unit, or saying why there are none."""
    ranked_ids = [int(s) for s in ranked.loc[ranked[metric].notna(), "submission"]] if not ranked.empty else []
    if not ranked_ids:
        return query.with_rank_uncertainty(ranked), ""
    prompts = None
    if any(v is not None for v in filters.values()):
        try:
            data = benchmark_data(str(store().submission(ranked_ids[0])["data_dir"]))
        except (BenchmarkDataError, UnknownIdError, KeyError, OSError):
            return query.with_rank_uncertainty(ranked), (
                "Rank intervals and tiers: not shown for this cell (the built benchmark, which says which prompts "
                "the cell holds, is not available here)."
            )
        prompts = tuple(query.cell_prompts(data.prompt_rows, spec, filters) or ())
    by_id = {int(r["submission_id"]): str(r["results_path"]) for _, r in results.iterrows()}
    records = {int(r["submission_id"]): r["aggregates"] for _, r in results.iterrows()}
    factors, units, method = query.resampling_design(records.get(i) for i in ranked_ids)
    higher = query.metric_specs(spec)[metric].higher_is_better
    uncertainty, n_prompts, lacking = _rank_uncertainty(
        tuple((i, by_id[i]) for i in ranked_ids), metric, higher, prompts, factors, json.dumps(units, sort_keys=True)
    )
    if lacking:  # ranks among some of the models only would mislead: none then
        return query.with_rank_uncertainty(ranked), (
            f"Rank intervals and tiers: not shown ({len(lacking)} ranked result(s) have no per-sample values here)."
        )
    if n_prompts == 0:
        return query.with_rank_uncertainty(
            ranked
        ), "Rank intervals and tiers: not shown (no image that every ranked model was scored on)."
    caption = (
        f"Rank intervals and tiers hold jointly for the whole board at {query.RANK_LEVEL:.0%}: the chance that any of "
        "them claims a difference that is not there is at most "
        f"{1 - query.RANK_LEVEL:.0%}, however many models are shown (step-down max-T over every pair of models, "
        f"{query.RANK_DRAWS} paired bootstrap-t resamples ({stored_text(method)}) of the {n_prompts} prompt(s) every ranked model "
        "was scored on). Rank interval: from 1 + the models shown better to the number of models minus those shown "
        "worse. Tier: a model joins the tier above unless it is shown worse than that tier's leader. "
        "Equal scores share a rank."
    )
    return query.with_rank_uncertainty(ranked, uncertainty), caption


@st.cache_resource(show_spinner=False, max_entries=8)
def benchmark_data(folder: str) -> BenchmarkData:
    # The built benchmark of a result, read once per server (its content never changes under one path).
    return load_benchmark_data(Path(folder))
