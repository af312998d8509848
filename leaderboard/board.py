"""Standings: the ranked rows of a benchmark's board with their rank intervals and tiers, computed once.

A rank interval and a tier rest on a paired bootstrap over every pair of ranked models (1,000 draws,
:mod:`.rank_intervals`): seconds at the papers' size, far too much for a page view. So the resampling
runs here, when the results change (a job finishes: :mod:`.queue.local`; the Hub mirror syncs:
:mod:`.hub_mirror`; a withdrawal, or ``idbench standings --refresh``), for every board a reader can ask
for: each rankable metric, overall and in each breakdown cell, on each judge for a judged metric, with
the default view's switches (:func:`~.ranking.default_switches`). The answer is stored with the store
(its ``standings`` table), and the pages, the demo, ``idbench standings`` and the bench read it back.

A stored board names the results it ranked (submission and result id, in rank order). A reader attaches
its intervals only to the same ranked set: a view that ranks other rows (plumbing checks shown, one family,
copies included) or a store changed since shows its ranks with a caption saying why there are no
intervals, never intervals of another set and never a resample of its own.

This module imports no Streamlit. The rank statistics themselves are in
``evaluate_pkg/functional/ranks.py``; the glue that feeds them (per-sample values, shared prompt means,
the resampling design) in :mod:`.rank_intervals`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from idbench.builders.registry import get_benchmark
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.evaluate_pkg import results as result_files
from idbench.leaderboard.breakdowns import breakdown_cell, default_filters
from idbench.leaderboard.rank_intervals import (
    RANK_DRAWS,
    RANK_INTERVAL,
    RANK_LEVEL,
    RANK_SEED,
    TIER,
    cell_prompts,
    rank_uncertainty,
    resampling_design,
    sample_values,
    shared_prompt_means,
    with_rank_uncertainty,
)
from idbench.leaderboard.ranking import (
    default_judge,
    default_metric,
    default_switches,
    judge_choices,
    rankable_metrics,
    ranked_table,
    split_ranking,
    store_version,
)
from idbench.leaderboard.result_rows import (
    as_defined_now,
    as_number,
    cell_stats,
    metric_specs,
    tracks,
    visible_results,
)
from idbench.leaderboard.store import Store

logger = logging.getLogger(__name__)

OVERALL = ""  # the cell key of a board over every prompt


@dataclass(frozen=True)
class BoardKey:
    """Which board: a track of a benchmark, in a ``view`` (:func:`board_views`), ranked on ``metric``, in
    ``cell`` (:func:`cell_key`; "" overall), among ``judge``'s rows on a judged metric ("" on an unjudged
    one; also on a judged metric that no row was judged for)."""

    benchmark: str
    task: str
    view: str
    metric: str
    cell: str
    judge: str


def cell_key(spec: BenchmarkSpec, filters: Mapping[str, Any] | None) -> str:
    """``"n_subjects x scene=4 x occlusion"`` for the cell ``filters`` select, "" for none."""
    cell = breakdown_cell(spec, filters)
    return OVERALL if cell is None else f"{cell[0]}={cell[1]}"


def board_cells(results: pd.DataFrame, spec: BenchmarkSpec) -> list[dict[str, str | None]]:
    """The filters of every cell a reader can rank in: none (overall), then each label of each breakdown
    the stored aggregates hold (``{"n_subjects": "4", "scene": None}``)."""
    axes = {axis for breakdown in spec.breakdowns for axis in breakdown}
    cells: list[dict[str, str | None]] = [dict.fromkeys(sorted(axes))]
    for breakdown in spec.breakdowns:
        name = " x ".join(breakdown)
        labels = {
            label
            for aggregates in results.get("aggregates", [])
            for label in aggregates.get("breakdowns", {}).get(name, {})
        }
        for label in sorted(labels):
            values = label.split(" x ")
            if len(values) == len(breakdown):
                cells.append(dict.fromkeys(sorted(axes)) | dict(zip(breakdown, values)))
    return cells


def _judge_of(metric: str, spec: BenchmarkSpec, judge: str | None) -> str:
    return (judge or "") if metric_specs(spec)[metric].judged else ""


# --- computing: once per change of the results -------------------------------------------------------


class _Values:
    """Each result folder's per-sample values of one metric, read once per refresh (a result folder never
    changes under its path); None where the file is absent or unreadable (the log says why)."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], pd.Series | None] = {}
        self._designs: dict[tuple[int, ...], tuple] = {}
        self._means: dict[tuple[str, tuple[int, ...]], pd.DataFrame] = {}

    def get(self, path: str, metric: str) -> pd.Series | None:
        """The image values (indexed by ``prompt_id, seed``) of one result folder."""
        if (path, metric) not in self._found:
            try:
                frame = result_files.read_samples(
                    path, ("prompt_id", "seed", "metric", "value"), optional=("subject",), metric=metric
                )
                found = None if frame is None else sample_values(frame, metric)
                self._found[path, metric] = None if found is None else found.set_index(["prompt_id", "seed"])["value"]
            except result_files.ResultFileError as error:
                logger.warning("%s", error)
                self._found[path, metric] = None
        return self._found[path, metric]

    def prompt_means(self, metric: str, found: Mapping[int, pd.Series]) -> pd.DataFrame:
        """:func:`shared_prompt_means` of ``found`` over every prompt, once per metric and set of results (a
        cell's are its rows of it: the images all of them share do not depend on the cell)."""
        key = (metric, tuple(found))
        if key not in self._means:
            self._means[key] = shared_prompt_means(found)
        return self._means[key]

    def design(self, ids: tuple[int, ...], aggregates: Iterable[Mapping[str, Any]]) -> tuple:
        """The resampling design the results ``ids`` recorded (the same for every board of those results)."""
        if ids not in self._designs:
            self._designs[ids] = resampling_design(aggregates)
        return self._designs[ids]


def board_statistics(
    ids: list[int],
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    metric: str,
    prompts: Iterable[str] | None,
    values: _Values | None = None,
    *,
    unknown_cell: bool = False,
) -> dict[str, Any]:
    """The stored form of one board: the ranked rows it rests on (``[submission, result id]``, best first),
    each one's ``[rank, rank_low, rank_high, rank interval, tier]``, the prompts and design they rest on,
    and ``note``: why there are none ("" when there are). ``ids``: the submissions ranked on the board that
    have a value in its cell, best first; ``prompts``: the cell's (None: every prompt); ``unknown_cell``:
    the cell's prompts are not known here (no built benchmark at hand), so there is nothing to resample."""
    values = values or _Values()
    rows = results.set_index(results["submission_id"].astype(int))
    board: dict[str, Any] = {
        "ranked": [[i, int(rows.at[i, "id"])] for i in ids],
        "rows": {},
        "n_prompts": 0,
        "method": "",
        "draws": RANK_DRAWS,
        "level": RANK_LEVEL,
        "seed": RANK_SEED,
        "note": "",
    }
    if not ids:
        return board
    if unknown_cell:
        board["note"] = "the built benchmark, which says which prompts the cell holds, is not available here"
        return board
    found, lacking = {}, []
    for i in ids:
        frame = values.get(str(rows.at[i, "results_path"]), metric)
        if frame is None or frame.empty:
            lacking.append(i)
        else:
            found[i] = frame
    if lacking:  # ranks among some of the models only would mislead: none then
        board["note"] = f"{len(lacking)} ranked result(s) have no per-sample values here"
        return board
    factors, units, method = values.design(tuple(ids), [rows.at[i, "aggregates"] for i in ids])
    means = values.prompt_means(metric, found)
    if prompts is not None:
        means = means[means.index.isin(set(prompts))]
    board["n_prompts"], board["method"] = len(means), method
    if means.empty:
        board["note"] = "no image that every ranked model was scored on"
        return board
    higher = metric_specs(spec)[metric].higher_is_better
    table = rank_uncertainty(means, higher, factors=factors, units=units)
    board["rows"] = {
        str(i): [int(r["rank"]), int(r["rank_low"]), int(r["rank_high"]), str(r[RANK_INTERVAL]), int(r[TIER])]
        for i, r in table.iterrows()
    }
    return board


DEFAULT_VIEW = "default"  # the board's page as it opens: ranking.default_switches
EVERY_RESULT = "every result"  # plumbing checks and incomplete suites ranked too (a model page's place)


def board_views(results: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, tuple[bool, bool]]:
    """The views boards are computed for, as (show plumbing checks, show incomplete suites): the default
    view, and every result when the default view hides some (else the two rank the same rows)."""
    default = default_switches(results, spec)
    hidden = len(visible_results(results, *default[:1], spec, default[1])) < len(results)
    return {DEFAULT_VIEW: default} | ({EVERY_RESULT: (True, True)} if hidden else {})


def compute_boards(
    results: pd.DataFrame, spec: BenchmarkSpec, task: str, prompt_rows: Mapping[str, Mapping[str, Any]] | None
) -> dict[BoardKey, dict[str, Any]]:
    """Every board of one track (``results``: its current results), by key: each view of
    :func:`board_views`, rankable metric, cell and (on a judged metric) judge. ``prompt_rows``: the built
    benchmark's prompts (which prompts a cell holds); None where it is not at hand (a Hub mirror), and
    the cells' boards then say so."""
    if results.empty:
        return {}
    values, boards = _Values(), {}
    judges = [key for key, _, _ in judge_choices(results, spec)] or [None]
    cells = []  # (filters, key, its prompts, whether they are unknown here), computed once
    for filters in board_cells(results, spec):
        cell = cell_key(spec, filters)
        # The cell's prompts; a cell of a mirror (no built benchmark at hand) cannot be resampled.
        unknown = cell != OVERALL and prompt_rows is None
        prompts = None if cell == OVERALL or unknown else cell_prompts(prompt_rows, spec, filters) or []
        cells.append((breakdown_cell(spec, filters), cell, prompts, unknown))
    aggregates = dict(zip(results["submission_id"].astype(int), as_defined_now(results, spec)["aggregates"]))
    for view, (plumbing, incomplete) in board_views(results, spec).items():
        for metric in rankable_metrics(results, spec) or [default_metric(results, spec)]:
            judged = metric_specs(spec)[metric].judged
            for judge in judges if judged else [""]:
                # Which rows are ranked is the same in every cell (the rule reads the rows' facts, not their
                # values): one ranked table per (view, metric, judge); a cell keeps the rows with a value there.
                table = ranked_table(
                    results, spec, metric=metric, include_plumbing=plumbing, include_incomplete=incomplete, judge=judge
                )
                ranked = [] if table.empty else [int(s) for s in split_ranking(table).ranked["submission"]]
                for cell, key, prompts, unknown in cells:
                    ids = [i for i in ranked if _has_value(aggregates[i], cell, metric)]
                    board = board_statistics(ids, results, spec, metric, prompts, values, unknown_cell=unknown)
                    boards[BoardKey(spec.name, task, view, metric, key, judge or "")] = board
    return boards


def _has_value(aggregates: Mapping[str, Any], cell: tuple[str, str] | None, metric: str) -> bool:
    """Whether a result has a mean of ``metric`` in ``cell`` (None: overall), as the ranked table reads it."""
    return not math.isnan(as_number((cell_stats(aggregates, cell).get(metric) or {}).get("mean")))


def refresh(
    store: Store, benchmark: str | None = None, prompt_rows: Mapping[str, Mapping[str, Any]] | None = None
) -> int:
    """Compute and store every board of ``benchmark`` (all benchmarks with results when None), each
    track apart; the number of boards stored. Nothing is written when the results changed while it
    computed (another refresh, started after that change, writes the newer boards). ``prompt_rows``:
    the built benchmark's prompts where the caller holds them (else read from a result's data folder)."""
    from idbench.builders.registry import BENCHMARKS

    version = store_version(store)
    written = 0
    for name in [benchmark] if benchmark else sorted(BENCHMARKS):
        spec = get_benchmark(name)
        for task in tracks(spec):
            results = store.current_results(name, task)
            boards = compute_boards(results, spec, task, prompt_rows or _prompt_rows(store, results))
            payload = {
                _key_text(key): json.dumps(board | {"version": list(version)}, sort_keys=True)
                for key, board in boards.items()
            }
            if store.replace_standings(name, task, json.dumps(version), payload, expected_version=version):
                written += len(payload)
    return written


def refresh_quietly(store: Store, benchmark: str | None = None) -> None:
    """:func:`refresh` where the results were already recorded (a finished job, a withdrawal): a failure
    to compute the standings is logged, and the pages say the standings are not computed, but the
    recorded results stand."""
    try:
        refresh(store, benchmark)
    except Exception as error:  # noqa: BLE001 - the job's results are recorded; the boards are derived
        logger.warning("standings of %s not computed: %s", benchmark or "every benchmark", result_files.one_line(error))


def _prompt_rows(store: Store, results: pd.DataFrame) -> dict[str, dict] | None:
    """The prompt rows of the built benchmark the newest result was scored on, None when not at hand."""
    from idbench.evaluate_pkg.data import BenchmarkDataError, load_benchmark_data

    for submission in results.get("submission_id", []):
        try:
            folder = Path(str(store.submission(int(submission))["data_dir"]))
            if folder.is_dir():
                return load_benchmark_data(folder).prompt_rows
        except (BenchmarkDataError, KeyError, OSError, ValueError) as error:
            logger.warning("standings: built benchmark of submission %s not read: %s", submission, error)
    return None


def _key_text(key: BoardKey) -> tuple[str, str, str, str]:
    return key.view, key.metric, key.cell, key.judge


# --- reading: what a page, the demo or the CLI shows -------------------------------------------------


@dataclass(frozen=True)
class Standings:
    """A board as shown: the ranked rows with ``rank interval`` and ``tier``, the rows set apart with
    why, and ``caption``: what the intervals claim, or why there are none."""

    ranked: pd.DataFrame
    unranked: pd.DataFrame
    caption: str
    metric: str
    filters: dict[str, str | None]

    @property
    def table(self) -> pd.DataFrame:
        """Ranked rows then the rows set apart, every one with the interval columns (empty apart)."""
        return pd.concat([self.ranked, with_rank_uncertainty(self.unranked)], ignore_index=True)


NOT_COMPUTED = (
    "Rank intervals and tiers: not computed for these results yet (they are computed when a job finishes or "
    "the Hub mirror syncs; `idbench standings --refresh` computes them now)."
)
OTHER_VIEW = (
    "Rank intervals and tiers: not shown for this view. They are computed for the board as it opens, and "
    "with every result ranked; this view ranks another set of rows (one family, or rows of copies, "
    "uncalibrated or failing judges, plumbing checks or incomplete suites shown or hidden)."
)


def stored_boards(store: Store, key: BoardKey) -> list[dict[str, Any]]:
    """The stored boards of ``key`` in every view (``key.view`` is not read), the default view first;
    a board that cannot be decoded is left out (logged)."""
    boards = []
    found = store.standings(key.benchmark, key.task, key.metric, key.cell, key.judge)
    for view in sorted(found, key=lambda v: v != DEFAULT_VIEW):
        try:
            board = json.loads(found[view])
        except ValueError as error:
            logger.warning("standings of %s (%s view) in %s: unreadable (%s)", key, view, store.path, error)
            continue
        if _well_formed(board):
            boards.append(board)
        else:  # a reader indexes every ranked row of it: a malformed board is not shown, never a traceback
            logger.warning("standings of %s (%s view) in %s: malformed, not shown", key, view, store.path)
    return boards


def _well_formed(board: Any) -> bool:
    """Whether a decoded board has the shape :func:`board_statistics` writes: ``ranked`` a list of
    ``[submission, result id]`` integer pairs, and (unless a ``note`` says why there are none) a row of
    ``[rank, rank_low, rank_high, interval, tier]`` for every ranked submission."""
    if (
        not isinstance(board, dict)
        or not isinstance(board.get("ranked"), list)
        or not isinstance(board.get("rows"), dict)
    ):
        return False
    pairs = board["ranked"]
    if not all(isinstance(p, list) and len(p) == 2 and all(type(v) is int for v in p) for p in pairs):
        return False
    if board.get("note"):
        return isinstance(board["note"], str)
    rows = board["rows"]
    return all(
        isinstance(rows.get(str(s)), list)
        and len(rows[str(s)]) == 5
        and all(type(v) is int for v in rows[str(s)][:3] + rows[str(s)][4:])
        and isinstance(rows[str(s)][3], str)
        for s, _ in pairs
    )


def attach(
    ranked: pd.DataFrame,
    results: pd.DataFrame,
    boards: Iterable[Mapping[str, Any]],
    metric: str,
    version: Iterable[int] | None = None,
) -> tuple[pd.DataFrame, str]:
    """``ranked`` (the ranked rows of a view, in rank order) with the rank interval and tier of the stored
    board among ``boards`` that ranks the same results, and the caption; without them when none does,
    and the caption says why (none computed yet, boards of older results than ``version``, the store's
    :func:`~.ranking.store_version`, or another view)."""
    ids = [int(s) for s in ranked.loc[ranked[metric].notna(), "submission"]] if not ranked.empty else []
    if not ids:
        return with_rank_uncertainty(ranked), ""
    result_of = dict(zip(results["submission_id"].astype(int), results["id"].astype(int)))
    wanted = sorted((i, result_of.get(i)) for i in ids)
    boards = list(boards)
    board = next((b for b in boards if sorted(tuple(pair) for pair in b["ranked"]) == wanted), None)
    if board is None:
        stale = version is not None and any(b.get("version") != list(version) for b in boards)
        caption = NOT_COMPUTED if not boards or stale else OTHER_VIEW
        return with_rank_uncertainty(ranked), caption
    if board.get("note"):
        return with_rank_uncertainty(ranked), f"Rank intervals and tiers: not shown ({board['note']})."
    uncertainty = pd.DataFrame(
        [board["rows"][str(i)] for i in ids],
        index=pd.Index(ids, name="submission"),
        columns=["rank", "rank_low", "rank_high", RANK_INTERVAL, TIER],
    )
    return with_rank_uncertainty(ranked, uncertainty), interval_caption(board)


def interval_caption(board: Mapping[str, Any]) -> str:
    """What a board's intervals and tiers claim, from what it stored (level, draws, design, prompts)."""
    level = float(board.get("level", RANK_LEVEL))
    method = " ".join(str(board.get("method") or "").split())[:160]  # stored text: one bounded line
    return (
        f"Rank intervals and tiers hold jointly for the whole board at {level:.0%}: the chance that any of "
        f"them claims a difference that is not there is at most {1 - level:.0%}, however many models are shown "
        f"(step-down max-T over every pair of models, {board.get('draws', RANK_DRAWS)} paired bootstrap-t resamples "
        f"({method}) of the {board.get('n_prompts', 0)} prompt(s) every ranked model was scored on). Rank interval: "
        "from 1 + the models shown better to the number of models minus those shown worse. Tier: a model joins "
        "the tier above unless it is shown worse than that tier's leader. Equal scores share a rank."
    )


def with_intervals(
    store: Store,
    ranked: pd.DataFrame,
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    task: str,
    metric: str,
    filters: Mapping[str, Any] | None,
    judge: str | None = "",
) -> tuple[pd.DataFrame, str]:
    """A view's ranked rows with the stored intervals of its board (:func:`attach`); ``judge`` as
    :func:`~.ranking.ranked_table` takes it ("" the default judge)."""
    if judge == "":
        judge = default_judge(results, spec)
    key = BoardKey(spec.name, task, DEFAULT_VIEW, metric, cell_key(spec, filters), _judge_of(metric, spec, judge))
    return attach(ranked, results, stored_boards(store, key), metric, store_version(store))


def standings(
    store: Store,
    benchmark: str,
    task: str = DEFAULT_TASK,
    metric: str | None = None,
    filters: Mapping[str, Any] | None = None,
    every_result: bool = False,
) -> Standings:
    """The board of ``benchmark``'s ``task`` track as its page opens it (default view; ``metric`` and
    ``filters`` default to the page's; ``every_result`` ranks plumbing checks and incomplete suites too):
    ranked rows with their stored rank intervals and tiers, the rows set apart with why. No resampling:
    the intervals are those :func:`refresh` stored.

    Example::

        board = standings(Store(), "identity-collapse")
        print(board.table[["rank", "rank interval", "tier", "model", "dino_sim"]], board.caption)
    """
    spec = get_benchmark(benchmark)
    results = store.current_results(benchmark, task)
    metric = metric or default_metric(results, spec)
    chosen = dict(default_filters(results, spec) if filters is None else filters)
    if results.empty:
        return Standings(pd.DataFrame(), pd.DataFrame(), "", metric, chosen)
    plumbing, incomplete = (True, True) if every_result else default_switches(results, spec)
    table = ranked_table(
        results, spec, metric=metric, filters=chosen, include_plumbing=plumbing, include_incomplete=incomplete
    )
    ranking = split_ranking(table)
    ranked, caption = with_intervals(store, ranking.ranked, results, spec, task, metric, chosen)
    return Standings(ranked, ranking.unranked, caption, metric, chosen)
