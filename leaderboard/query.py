"""Pure pandas views of the results store for the leaderboard app (testable without Streamlit).

Every function takes the DataFrame of :meth:`idbench.leaderboard.store.Store.current_results` (one row per
current result, ``aggregates`` decoded) and the benchmark's :class:`~idbench.builders.spec.BenchmarkSpec`, and
returns a plain DataFrame. Values stay raw (a cosine stays a cosine) everywhere except
:func:`display_table`, which applies each metric's display convention for showing and downloading.

Aggregates look like (see :func:`idbench.evaluate_pkg.report.aggregate`)::

    {"overall": {metric: {mean, ci_low, ci_high, n, n_nan, n_prompts}},
     "breakdowns": {"n_subjects": {"2": {metric: {...}}}, "n_subjects x scene": {"2 x neutral": {...}}},
     "subject_breakdowns": {"gender": {"female": {metric: {...}}, "unknown": {...}}},  # CogCanvas only
     "ci": {"method": "percentile bootstrap over prompts", "unit": "prompt", "n_boot": 1000, ...}}

The leaderboard computes no interval of its own: it shows the scorer's, which resample prompts (all
seeds of a prompt together; ``functional/bootstrap.py``). A cell with one prompt has no interval (NaN).

Example::

    df = Store().current_results("identity-collapse")
    table = ranked_table(df, spec, metric="dino_sim", filters={"n_subjects": "4", "scene": "occlusion"})
    shown = display_table(table, spec)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import numpy as np
import pandas as pd

from idbench.builders.display import DISPLAYS, show, show_text
from idbench.builders.spec import DEFAULT_TASK, UNKNOWN_CELL, BenchmarkSpec, MetricSpec, version_key
from idbench.leaderboard.judges import copies_mark, judge_key, judge_label
from idbench.leaderboard.store import Store

PLUMBING_MARK = "plumbing"
INCOMPLETE_MARK = "incomplete suite"
UNCALIBRATED_MARK = "uncalibrated judge"
# The row's judge (who judged its judged columns), its copy check and, for a row left out of the
# ranking, why (see :func:`rank_rows`).
JUDGE, COPIES, NOT_RANKED = "judge", "copies", "not ranked"
ID_COLUMNS = ("rank", "model", "family", "submitter", "profile", "marks", JUDGE, COPIES, NOT_RANKED, "submission")
# Suffix of a judged metric's coverage column: n / (n + n_nan) of its stats, the share of images the
# score is over, shown beside every judged score.
COVERAGE = " coverage"
# The judge key of an older row that has judged values but no recorded judge: its own group, so it is
# never ranked with a known judge's rows (and older rows still rank among themselves).
UNRECORDED_JUDGE = "judge not recorded"
CI_LOW, CI_HIGH = " ci_low", " ci_high"  # suffixes of a metric's CI columns
# Suffix of a judged metric's failure-rate column: the share of images the judge could not settle,
# shown next to the score so a high score from a judge that mostly failed is not taken at face value.
FAILURES = " judge failures"
# Suffix of the column that counts a metric's missing evidence (``MetricSpec.missing_evidence``: a
# reference without a face, a subject with no core feature in view), the mean per image of that count:
# those samples are NaN and outside the mean, so a reader must see how many there were.
MISSING = " missing evidence"
# Per-sample diagnostics whose mean (a share of images) is shown beside a metric: metric ->
# (diagnostic, column suffix). CLIP-T's share of samples whose prompt was cut at 77 tokens.
PROMPTS_CUT = " prompts cut"
# prompt_adherence's share of pairs scored 0 because the subject was not confirmed in view (CHARIS 0.5).
SUBJECT_NOT_SHOWN = " subject not shown"
SHARES: dict[str, tuple[str, str]] = {
    "clip_t": ("clip_t.truncated", PROMPTS_CUT),
    "prompt_adherence": ("prompt_adherence.subject_not_shown", SUBJECT_NOT_SHOWN),
}
# Suffix of the column holding a metric's chance level (``MetricSpec.chance``: a retrieval metric's
# random-ranker expectation), shown under the metric's own display so the two read side by side.
CHANCE = " random"


# --- small helpers -------------------------------------------------------------------------------


def store_version(store: Store) -> tuple[int, int, int]:
    """A cache key that changes whenever the ranked results change: (result rows, highest result id,
    withdrawn submissions).

    Results are insert-only (a rescore inserts a new row and flips ``current`` in the same
    transaction), so any new result raises the max id; withdrawing a submission (the one other change
    to what :meth:`Store.current_results` returns) raises the withdrawn count.
    """
    with store.transaction(immediate=False) as db:
        count, top = db.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM results").fetchone()
        (withdrawn,) = db.execute("SELECT COUNT(*) FROM submissions WHERE withdrawn_at IS NOT NULL").fetchone()
    return int(count), int(top), int(withdrawn)


def metric_specs(spec: BenchmarkSpec) -> dict[str, MetricSpec]:
    """The benchmark's metric suite by name, in suite order."""
    return {m.name: m for m in spec.metric_suite}


def available_metrics(results: pd.DataFrame, spec: BenchmarkSpec) -> list[str]:
    """Suite metrics that at least one result computed, in suite order (if none did, the metrics of the
    rows' task: the whole reference-based suite for an empty table)."""
    computed = {m for aggregates in results.get("aggregates", []) for m in aggregates.get("overall", {})}
    names = [m.name for m in spec.metric_suite if m.name in computed]
    task = task_of(results.iloc[0]) if len(results) and "task" in results else DEFAULT_TASK
    return names or [m.name for m in spec.task_metrics(task)]


def rankable_metrics(results: pd.DataFrame, spec: BenchmarkSpec) -> list[str]:
    """The available metrics a ranking may use: not those shown only beside their intent-to-treat twin
    (``MetricSpec.itt_twin``: hiding the subject or making the judge fail would lift them), nor those
    shown beside their copy-floored twin (``MetricSpec.floored_twin``: a few copied images would lift
    them), unless no result computed that twin (results scored before it existed rank as they did)."""
    specs = metric_specs(spec)
    available = available_metrics(results, spec)
    return [
        m
        for m in available
        if specs[m].rankable
        or (not specs[m].itt_twin and specs[m].floored_twin and specs[m].floored_twin not in available)
    ]


def suite_rankable(results: pd.DataFrame, spec: BenchmarkSpec) -> list[str]:
    """The rankable metrics of the rows' task, computed or not: what :func:`default_metric` falls back to
    when the results computed only metrics shown beside an intent-to-treat twin (the paper's
    ``charis_score`` alone): a metric no row has ranks no row, never the paper's column."""
    task = task_of(results.iloc[0]) if len(results) and "task" in results else DEFAULT_TASK
    return [m.name for m in spec.task_metrics(task) if m.rankable]


def twin_note(spec: BenchmarkSpec, metric: str) -> str:
    """The short label of a paper's column that leaves judge failures out (``MetricSpec.itt_twin``), as
    the pages show it beside the column; empty for any other metric."""
    twin = metric_specs(spec)[metric].itt_twin if metric in metric_specs(spec) else ""
    return f"the paper's: leaves judge failures out; not ranked, see {twin}" if twin else ""


def default_metric(results: pd.DataFrame, spec: BenchmarkSpec) -> str:
    """The first of the spec's ranking metrics that some result computed (for results scored before
    its copy-floored twin existed, the metric the twin floors), else the first rankable one."""
    # Never a metric shown only beside its intent-to-treat twin, even when no result computed another.
    available = rankable_metrics(results, spec) or suite_rankable(results, spec)
    floored_from = {twin.name: metric for metric, twin in spec.floored_twins.items()}
    candidates = [name for m in spec.ranking for name in (m, floored_from.get(m)) if name]
    return next((m for m in candidates if m in available), available[0])


def filter_axes(spec: BenchmarkSpec) -> list[str]:
    """Every axis the benchmark breaks results down by (``n_subjects``, ``scene``, ``type``...), in order."""
    axes: list[str] = []
    for breakdown in spec.breakdowns:
        axes += [axis for axis in breakdown if axis not in axes]
    return axes


def _sort_key(value: str) -> tuple[int, float, str]:
    # Group sizes are labels like "10": sort them as numbers, so "10" comes after "8".
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def filter_options(results: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, list[str]]:
    """The values each axis takes in the stored breakdowns (labels as stored, e.g. ``"4"``), sorted."""
    options: dict[str, set[str]] = {axis: set() for axis in filter_axes(spec)}
    for aggregates in results.get("aggregates", []):
        for breakdown in spec.breakdowns:
            for label in aggregates.get("breakdowns", {}).get(" x ".join(breakdown), {}):
                for axis, value in zip(breakdown, label.split(" x ")):
                    options[axis].add(value)
    return {axis: sorted(values, key=_sort_key) for axis, values in options.items()}


POOLED = "all N (pooled)"  # how the choice of no group size is labelled wherever a group size is chosen


def group_size_label(value: Any) -> str:
    """A group-size choice as the page shows it: ``"N = 2"``; None (every prompt) is :data:`POOLED`."""
    return POOLED if value is None else f"N = {value}"


def default_filters(results: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, str | None]:
    """The filters a benchmark's ranking starts with: every axis open, except the group size when the
    spec ranks within one (``spec.default_group_size``; CogCanvas ranks at N = 2 first, as its paper's
    table does). Where the stored results lack that size, the smallest stored one; where they hold
    none, the pooled mean (None)."""
    filters: dict[str, str | None] = {axis: None for axis in filter_axes(spec)}
    axis = spec.group_size_axis
    if axis is not None and spec.default_group_size is not None:
        stored = filter_options(results, spec).get(axis, [])
        wanted = str(spec.default_group_size)
        filters[axis] = wanted if wanted in stored else (stored[0] if stored else None)
    return filters


def group_size_shares(results: pd.DataFrame, spec: BenchmarkSpec, metric: str) -> dict[str, float]:
    """Each group size's share of the prompts behind a pooled mean of ``metric`` (``"2" -> 0.41``), from
    the first result that has the cells: the weights the pooled mean gives each N. Empty without a
    group-size axis."""
    axis = spec.group_size_axis
    for aggregates in results.get("aggregates", []) if axis else []:
        cells = aggregates.get("breakdowns", {}).get(axis, {})
        counts = {size: (stats.get(metric) or {}).get("n_prompts") or 0 for size, stats in cells.items()}
        total = sum(counts.values())
        if total:
            return {size: counts[size] / total for size in sorted(counts, key=_sort_key)}
    return {}


def group_size_note(results: pd.DataFrame, spec: BenchmarkSpec, metric: str, filters: Mapping[str, Any] | None) -> str:
    """What the ranking's group-size choice means, for the caption under the table ("" without a
    group-size axis): within one N, or pooled over every prompt, where each N weighs by its share of
    the prompts, which the dataset's proportions set (CogCanvas: 41 % of its prompts have N = 2)."""
    axis = spec.group_size_axis
    if axis is None:
        return ""
    shares = group_size_shares(results, spec, metric)
    weights = ", ".join(f"{group_size_label(size)}: {share:.0%}" for size, share in shares.items())
    shares = "each N weighs by its share of the prompts, the dataset's proportions" + (
        f" ({weights} of those scored on {metric})" if weights else ""
    )
    size = (filters or {}).get(axis)
    if size is None:
        return f"Ranked over {POOLED}, the mean over every prompt: {shares}."
    return f"Ranked within {group_size_label(size)} ({axis} = {size}). In the pooled mean ({POOLED}), {shares}."


def ranking_scope(spec: BenchmarkSpec, filters: Mapping[str, Any] | None) -> str:
    """Which cell a ranking is of, in words ("N = 2", "all N (pooled)"); "" without a group-size axis."""
    axis = spec.group_size_axis
    return "" if axis is None else group_size_label((filters or {}).get(axis))


def breakdown_cell(spec: BenchmarkSpec, filters: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(breakdown name, cell label)`` selected by ``filters`` (axis -> value, None = all); None = overall.

    The set axes must be exactly one breakdown of the spec: ``{"n_subjects": 4, "scene": "occlusion"}``
    -> ``("n_subjects x scene", "4 x occlusion")``. Another combination raises ValueError, since no
    stored aggregate answers it.
    """
    chosen = {axis: value for axis, value in (filters or {}).items() if value is not None}
    if not chosen:
        return None
    for breakdown in spec.breakdowns:
        if set(breakdown) == set(chosen):
            return " x ".join(breakdown), " x ".join(str(chosen[axis]) for axis in breakdown)
    raise ValueError(
        f"{spec.name}: no breakdown by {' x '.join(chosen)}; known: {[' x '.join(b) for b in spec.breakdowns]}"
    )


def task_of(row: Mapping[str, Any]) -> str:
    """The task (track) of a result row: its submission's ``task``, the reference-based one if unset."""
    task = row.get("task")
    return task if isinstance(task, str) and task else DEFAULT_TASK


def missing_metrics(row: Mapping[str, Any], spec: BenchmarkSpec) -> list[str]:
    """The metrics of the row's task this result has no value for (not run, or not computed).

    Metrics of other tasks score other submissions (a text-to-image row has no ID-Sim, a ranking of
    references is the retrieval task), so a submission is complete with its own task's metrics.
    """
    overall = (row.get("aggregates") or {}).get("overall", {})
    return [m.name for m in spec.task_metrics(task_of(row)) if m.name not in overall]


def stale_metrics(row: Mapping[str, Any], spec: BenchmarkSpec) -> list[str]:
    """The suite's metrics whose name meant another quantity in the suite version the row was scored
    with (``MetricSpec.defined_in`` later than the row's ``suite_version``: a judge failure left out
    where it now scores 0). A row whose suite version is absent or not dotted digits (a hand-made one)
    cannot be placed and has none."""
    version = version_key(row.get("suite_version"))
    if not version:
        return []
    return [m.name for m in spec.metric_suite if m.defined_in and version < version_key(m.defined_in)]


def as_defined_now(results: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """``results`` with each row's :func:`stale_metrics` taken out of its aggregates (overall, every
    breakdown and subject-breakdown cell), so no table or plot shows or ranks an older quantity under
    a metric's present name: the row lacks the metric (an incomplete suite, :func:`missing_metrics`)
    until it is scored again. Rows without stale metrics are returned as they are."""
    if results.empty or "aggregates" not in results:
        return results
    stale = [stale_metrics(row, spec) for _, row in results.iterrows()]
    if not any(stale):
        return results
    out = results.copy()
    out["aggregates"] = [
        _without(aggregates, names) if names else aggregates for aggregates, names in zip(results["aggregates"], stale)
    ]
    return out


def _without(aggregates: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """A copy of ``aggregates`` whose every cell lacks the metrics ``names``."""
    drop = set(names)
    cell = lambda stats: {m: v for m, v in stats.items() if m not in drop}  # noqa: E731
    out = dict(aggregates)
    out["overall"] = cell(aggregates.get("overall") or {})
    for key in ("breakdowns", "subject_breakdowns"):
        if isinstance(aggregates.get(key), Mapping):
            out[key] = {
                axis: {value: cell(stats) for value, stats in cells.items()} for axis, cells in aggregates[key].items()
            }
    return out


def tracks(spec: BenchmarkSpec) -> list[str]:
    """The leaderboard tracks of a benchmark: its tasks that submit images (a ranking is scored alone).

    Each track is its own ranking (``Store.current_results(benchmark, task)``): rows of two tasks never
    share one, since their metrics mean different things (a text-to-image model saw no reference).
    """
    return [task for task in spec.tasks if task != "retrieval"]


def marks(row: Mapping[str, Any], spec: BenchmarkSpec) -> str:
    """What a reader must know before comparing this row: a plumbing check, metrics not run, a marked
    copy check, an uncalibrated judge, judged metrics the judge left incomplete."""
    out = [PLUMBING_MARK] if row.get("plumbing") else []
    if missing_metrics(row, spec):
        out.append(INCOMPLETE_MARK)
    stale = stale_metrics(row, spec)
    if stale:
        out.append(f"suite {row.get('suite_version')}: {', '.join(stale)} redefined since (score again)")
    facts = row_facts(row, spec)
    if facts.copies_marked:
        out.append(facts.copies)
    if facts.calibrated is False:
        out.append(UNCALIBRATED_MARK)
    if facts.incomplete:
        out.append(
            "incomplete: "
            + ", ".join(f"{m} (judge failed {100 * r:.0f} %)" for m, r in sorted(facts.incomplete.items()))
        )
    return ", ".join(out)


# --- who judged, copy checks, and the ranking rule -------------------------------------------------


@dataclass(frozen=True)
class RowFacts:
    """What the ranking rule needs to know of one result row beyond its numbers."""

    judge_key: str | None  # None: no judge ran (no judged values); UNRECORDED_JUDGE: judged, judge unknown
    judge: str  # the judge as a page names it ("" when none)
    calibrated: bool | None  # the judge card's verdict; None when the result has no card
    calibration_reason: str  # why the card says uncalibrated ("" otherwise)
    incomplete: dict[str, float]  # judged metric -> judge-failure rate, above the documented threshold
    copies_marked: bool
    copies: str  # the copy check in words ("copies references: 62 % of images", "not checked")


def row_facts(row: Mapping[str, Any], spec: BenchmarkSpec) -> RowFacts:
    """The judge and copy facts of a results row (``judge`` / ``copies`` decoded; absent in older rows)."""
    judge = row.get("judge") if isinstance(row.get("judge"), Mapping) else None
    key = judge_key(judge) or (row.get("judge_key") if isinstance(row.get("judge_key"), str) else None)
    label = judge_label(judge) if judge else ""
    if key is None:
        overall = (row.get("aggregates") or {}).get("overall", {})
        judged = [m.name for m in spec.metric_suite if m.judged]
        if any(not math.isnan(_num((overall.get(m) or {}).get("mean"))) for m in judged):
            key, label = UNRECORDED_JUDGE, UNRECORDED_JUDGE
    card = (judge or {}).get("card") if isinstance((judge or {}).get("card"), Mapping) else {}
    calibrated = (judge or {}).get("calibrated", card.get("calibrated"))
    incomplete = (judge or {}).get("incomplete") or {}
    copies = row.get("copies") if isinstance(row.get("copies"), Mapping) else None
    return RowFacts(
        judge_key=key,
        judge=label,
        calibrated=calibrated if isinstance(calibrated, bool) else None,
        calibration_reason=str(card.get("reason") or "") if calibrated is False else "",
        incomplete={str(m): float(r) for m, r in incomplete.items()} if isinstance(incomplete, Mapping) else {},
        copies_marked=bool(copies and copies.get("marked")),
        copies=copies_mark(copies),
    )


def judge_choices(results: pd.DataFrame, spec: BenchmarkSpec) -> list[tuple[str, str, int]]:
    """``(judge key, label, rows)`` of every judge among ``results``, the judge with the most rows
    first (then by label): the judge selector's options, the first its default."""
    counts: dict[str, list] = {}
    for _, row in results.iterrows():
        facts = row_facts(row, spec)
        if facts.judge_key is not None:
            counts.setdefault(facts.judge_key, [facts.judge, 0])[1] += 1
    return sorted(((k, label, n) for k, (label, n) in counts.items()), key=lambda c: (-c[2], c[1], c[0]))


def default_judge(results: pd.DataFrame, spec: BenchmarkSpec) -> str | None:
    """The key of the judge with the most rows (None when no row was judged)."""
    choices = judge_choices(results, spec)
    return choices[0][0] if choices else None


@dataclass(frozen=True)
class Ranking:
    """The ranked rows (rank 1..n, best first) and the rows shown apart, each with why it is not ranked."""

    ranked: pd.DataFrame
    unranked: pd.DataFrame  # same columns; rank <NA>, "not ranked" holds the reason; sorted by the metric too


def rank_rows(
    table: pd.DataFrame,
    facts: Mapping[int, RowFacts],
    spec: BenchmarkSpec,
    metric: str,
    *,
    judge: str | None,
    include_uncalibrated: bool = False,
    include_copies: bool = False,
    include_judge_failures: bool = False,
) -> Ranking:
    """The ranking rule: which rows of ``table`` (one per submission, ``facts`` by submission) are ranked on
    ``metric``, best first, and which are shown apart with the reason.

    - a row whose copy check is marked (it pastes references) is not ranked on any metric, unless
      ``include_copies``: a submission that returns its references is never first by default;
    - on a judged metric, only rows judged by ``judge`` (a key) are ranked: rows of two judges never
      share a ranking; a row with no judge has no value to rank; a row whose judge failed its controls
      (calibrated False) is not ranked unless ``include_uncalibrated``; nor is a row whose judge failed
      on more than the documented share of a judged metric's questions (``judge.card.INCOMPLETE_ABOVE``,
      5 %: its judged columns are incomplete) unless ``include_judge_failures``. Rows whose judge is not
      recorded (older results) have the key :data:`UNRECORDED_JUDGE` and rank among themselves;
    - in the ranked rows, the judged columns hold only ``judge``'s values: a ranked row judged by
      another judge (ranked here on an unjudged metric) shows NaN there (its ``judge`` column names its
      own judge), so each judged column is one judge's;
    - rows without judge or copy facts (older results) rank as before on unjudged metrics.

    Sorting respects ``higher_is_better``, NaN last; rows are listed in submission order among equal
    scores, but equal scores share a rank (:func:`shared_ranks`: 1, 1, 3), never broken by submission order.
    """
    specs = metric_specs(spec)
    judged_metric = specs[metric].judged
    reasons = []
    for submission in table["submission"].astype(int):
        f = facts[submission]
        reason = ""
        if f.copies_marked and not include_copies:
            reason = f.copies
        elif judged_metric and judge is not None and f.judge_key != judge:
            reason = "no judge ran" if f.judge_key is None else f"judged by another judge: {f.judge}"
        elif judged_metric and f.calibrated is False and not include_uncalibrated:
            reason = UNCALIBRATED_MARK + (f": {f.calibration_reason}" if f.calibration_reason else "")
        elif judged_metric and f.incomplete and not include_judge_failures:
            reason = (
                "judge failed on "
                + ", ".join(f"{100 * r:.0f} % of {m}" for m, r in sorted(f.incomplete.items()))
                + " (over 5 %)"
            )
        reasons.append(reason)
    if table[metric].isna().all():  # no row has it (a fallback to a metric nobody computed): rank none
        reasons = [reason or f"no {metric} computed" for reason in reasons]
    out = table.copy()
    out[NOT_RANKED] = reasons
    out = out.sort_values("submission", kind="stable")
    out = out.sort_values(metric, ascending=not specs[metric].higher_is_better, na_position="last", kind="stable")
    ranked = out[out[NOT_RANKED] == ""].reset_index(drop=True)
    unranked = out[out[NOT_RANKED] != ""].reset_index(drop=True)
    if judge is not None and not ranked.empty:
        other = [facts[int(s)].judge_key != judge for s in ranked["submission"]]
        for m in (name for name, ms in specs.items() if ms.judged):
            columns = [c for c in _metric_columns(m, specs) if c in ranked.columns]
            ranked.loc[other, columns] = math.nan
    ranked["rank"] = pd.array(shared_ranks(ranked[metric], specs[metric].higher_is_better), dtype="Int64")
    unranked["rank"] = pd.array([pd.NA] * len(unranked), dtype="Int64")
    return Ranking(ranked, unranked)


def shared_ranks(values: Iterable[Any], higher_is_better: bool) -> list[int]:
    """Competition ranks (1, 1, 3) of ``values`` in the order given: a value's rank is one plus the number
    of values strictly better. Values equal to 12 significant digits are equal (two runs of one model
    whose means differ only in float rounding share a rank). NaN ranks after every number, all NaN alike.

    >>> shared_ranks([0.9, 0.9, 0.5, float("nan")], higher_is_better=True)
    [1, 1, 3, 4]
    """
    numbers = [float(v) for v in values]
    keys = [
        math.inf if math.isnan(v) else -float(f"{v:.12g}") if higher_is_better else float(f"{v:.12g}") for v in numbers
    ]
    return [1 + sum(other < key for other in keys) for key in keys]


def split_ranking(table: pd.DataFrame) -> Ranking:
    """A :func:`ranked_table` back into its ranked rows and the rows shown apart (rank <NA>)."""
    ranked = table["rank"].notna() if "rank" in table else pd.Series(True, index=table.index)
    return Ranking(table[ranked].reset_index(drop=True), table[~ranked].reset_index(drop=True))


def family_of(row: Mapping[str, Any]) -> str:
    """The model family the submitter gave (``submission.json`` ``family``), "" when none."""
    family = (row.get("metadata") or {}).get("family")
    return family.strip() if isinstance(family, str) else ""


def families(results: pd.DataFrame) -> list[str]:
    """The model families present, sorted case-insensitively (rows without one are not listed)."""
    found = {family_of(row) for _, row in results.iterrows()} - {""}
    return sorted(found, key=str.casefold)


def model_labels(results: pd.DataFrame) -> pd.Series:
    """A unique label per row for plots: the model name, plus ``#<submission>`` where names repeat."""
    names = results["model_name"].astype(str)
    repeated = names.duplicated(keep=False)
    return names.where(~repeated, names + " #" + results["submission_id"].astype(str))


def visible_results(
    results: pd.DataFrame,
    include_plumbing: bool,
    spec: BenchmarkSpec | None = None,
    include_incomplete: bool = True,
    family: str | None = None,
) -> pd.DataFrame:
    """The rows a view shows: plumbing checks and incomplete suites only when asked; one family or all.

    The app filters once with this and hands the same rows to the table and to every plot.
    """
    if results.empty:
        return results
    keep = pd.Series(True, index=results.index)
    if not include_plumbing:
        keep &= ~results["plumbing"].astype(bool)
    if not include_incomplete and spec is not None:
        keep &= pd.Series([not missing_metrics(row, spec) for _, row in results.iterrows()], index=results.index)
    if family is not None:
        keep &= pd.Series([family_of(row) == family for _, row in results.iterrows()], index=results.index)
    return results[keep]


def _stats(aggregates: Mapping[str, Any], cell: tuple[str, str] | None) -> dict[str, Any]:
    """The ``{metric: {mean, ci_low, ...}}`` of the overall aggregates or of one breakdown cell."""
    if cell is None:
        return aggregates.get("overall", {})
    return aggregates.get("breakdowns", {}).get(cell[0], {}).get(cell[1], {})


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


# --- the ranked table ----------------------------------------------------------------------------


def ranked_table(
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    *,
    metric: str | None = None,
    filters: Mapping[str, Any] | None = None,
    include_plumbing: bool = False,
    include_incomplete: bool = True,
    family: str | None = None,
    judge: str | None = "",
    include_uncalibrated: bool = False,
    include_copies: bool = False,
    include_judge_failures: bool = False,
) -> pd.DataFrame:
    """One row per current result, best first by ``metric`` (default: the spec's ranking metric); the
    rows :func:`rank_rows` leaves out come last, with rank <NA> and the reason in ``"not ranked"``.

    ``judge`` is the key judged metrics rank among (default ``""``: the judge with the most rows,
    :func:`default_judge`; None: no judge filter). ``include_uncalibrated``, ``include_copies`` and
    ``include_judge_failures`` rank rows of an uncalibrated judge, rows that copy references and rows
    whose judge failed on more than 5 % of a judged metric (all left out by default).

    Columns: ``rank, model, submitter, profile, marks, submission``, then for each metric the suite
    computed (``metric`` first) its raw mean and ``"<metric> ci_low"`` / ``"<metric> ci_high"`` (plus
    ``"<metric> judge failures"`` for a judged metric, ``"<metric> missing evidence"`` for one that
    declares ``missing_evidence`` and ``"<metric> random"``, its chance level, for one that declares
    ``chance``), taken
    from the overall aggregates or, when ``filters`` set axes, from the matching breakdown cell (NaN
    where a result lacks that cell). Sorting respects the metric's ``higher_is_better``; NaN last.
    Plumbing-check rows are left out unless ``include_plumbing``, rows that lack a generation metric
    unless ``include_incomplete`` (both always marked); ``family`` keeps one model family.
    """
    mixed = sorted({task_of(row) for _, row in results.iterrows()}) if "task" in results else []
    if len(mixed) > 1:  # one ranking is one track: rows of other tasks have other metrics
        raise ValueError(
            f"{spec.name}: results of several tasks ({', '.join(mixed)}) in one ranking; rank each track apart"
        )
    results = as_defined_now(results, spec)  # no older quantity under a metric's present name
    metric = metric or default_metric(results, spec)
    specs = metric_specs(spec)
    if metric not in specs:
        raise ValueError(f"{spec.name}: unknown metric {metric!r}; known: {list(specs)}")
    cell = breakdown_cell(spec, filters)
    metrics = [metric] + [m for m in available_metrics(results, spec) if m != metric]
    columns = list(ID_COLUMNS) + [c for m in metrics for c in _metric_columns(m, specs)]
    rows, facts = [], {}
    visible = visible_results(results, include_plumbing, spec, include_incomplete, family)
    if judge == "":
        judge = default_judge(visible, spec)
    for _, row in visible.iterrows():
        stats = _stats(row["aggregates"], cell)
        facts[int(row["submission_id"])] = f = row_facts(row, spec)
        record: dict[str, Any] = {
            "model": row["model_name"],
            "family": family_of(row),
            "submitter": row["submitter"] if isinstance(row["submitter"], str) else "",
            "profile": row["profile"],
            "marks": marks(row, spec),
            JUDGE: f.judge,
            COPIES: f.copies,
            NOT_RANKED: "",
            "submission": int(row["submission_id"]),
        }
        for m in metrics:
            s = stats.get(m) or {}
            record[m], record[m + CI_LOW], record[m + CI_HIGH] = (
                _num(s.get("mean")),
                _num(s.get("ci_low")),
                _num(s.get("ci_high")),
            )
            if specs[m].judged:
                record[m + FAILURES] = _num((stats.get(f"{m}.failure_rate") or {}).get("mean"))
                record[m + COVERAGE] = coverage(s)
            if specs[m].missing_evidence:
                record[m + MISSING] = _num((stats.get(specs[m].missing_evidence) or {}).get("mean"))
            if specs[m].chance:
                record[m + CHANCE] = _num((stats.get(specs[m].chance) or {}).get("mean"))
            if m in SHARES:
                diagnostic, suffix = SHARES[m]
                record[m + suffix] = _num((stats.get(diagnostic) or {}).get("mean"))
        rows.append(record)
    table = pd.DataFrame(rows, columns=columns)
    if table.empty:
        return table
    ranking = rank_rows(
        table,
        facts,
        spec,
        metric,
        judge=judge,
        include_uncalibrated=include_uncalibrated,
        include_copies=include_copies,
        include_judge_failures=include_judge_failures,
    )
    return pd.concat([ranking.ranked, ranking.unranked], ignore_index=True)[columns]


def coverage(stats: Mapping[str, Any]) -> float:
    """n / (n + n_nan) of a metric's stats: the share of its samples the score is over (NaN unknown)."""
    n, missing = stats.get("n"), stats.get("n_nan")
    if n is None or missing is None or n + missing == 0:
        return math.nan
    return float(n) / float(n + missing)


def _metric_columns(metric: str, specs: Mapping[str, MetricSpec]) -> tuple[str, ...]:
    """A metric's columns in the ranked table: mean, CI, for a judged metric its judge-failure rate, and
    for a metric that declares one its missing-evidence count."""
    columns = (metric, metric + CI_LOW, metric + CI_HIGH)
    columns += (metric + FAILURES,) if specs[metric].judged else ()
    columns += (metric + MISSING,) if specs[metric].missing_evidence else ()
    columns += (metric + CHANCE,) if specs[metric].chance else ()
    columns += (metric + COVERAGE,) if specs[metric].judged else ()
    return columns + ((metric + SHARES[metric][1],) if metric in SHARES else ())


# The app's one unit switch (a sidebar choice every table, chart and model page follows): each metric in
# its display convention (docs/display-conventions.md), or every metric as its raw stored value.
UNITS_DISPLAY, UNITS_RAW = "display conventions", "raw values"
UNITS = (UNITS_DISPLAY, UNITS_RAW)


def display_of(spec: BenchmarkSpec, metric: str, raw: bool = False) -> str:
    """The display convention ``metric`` is shown in: its own, or ``"raw"`` under the raw-values switch."""
    return "raw" if raw else metric_specs(spec)[metric].display


def in_units(values: Any, spec: BenchmarkSpec, metric: str, raw: bool = False) -> Any:
    """Raw ``values`` (a number or a Series) of ``metric`` in the unit the page shows (:func:`display_of`),
    unrounded, for charts and breakdown tables."""
    display = display_of(spec, metric, raw)
    if isinstance(values, pd.Series):
        return values.astype(float).map(lambda v: show(v, display))
    return show(_num(values), display)


def display_name(spec: BenchmarkSpec, metric: str, raw: bool = False) -> str:
    """The column name :func:`display_table` gives ``metric`` (``"scr@0.5 (%)"``, ``"aesthetic (x10)"``;
    a raw metric, and every metric under the raw-values switch, keeps its bare name)."""
    return metric + DISPLAYS[display_of(spec, metric, raw)].suffix


def display_legend(spec: BenchmarkSpec, raw: bool = False) -> dict[str, str]:
    """Column name -> how its values are made and where the convention comes from (or that it is ours),
    for the metrics of the suite: what the app shows under the table."""
    return {
        display_name(spec, m.name, raw): "; ".join(
            filter(None, ("raw value" if raw else m.display_label, twin_note(spec, m.name)))
        )
        for m in spec.metric_suite
    }


def column_help(spec: BenchmarkSpec, raw: bool = False) -> dict[str, str]:
    """Displayed column name -> its header tooltip, for the papers' columns that leave judge failures out
    (:func:`twin_note`): the app's tables label them where they stand."""
    return {display_name(spec, m.name, raw): twin_note(spec, m.name) for m in spec.metric_suite if m.itt_twin}


# Columns about who and what a row is: after the metrics, so the ranked metric is the first column after
# the model's name (and its link) on any screen width.
METADATA_COLUMNS = ("family", "submitter", "profile", "marks", JUDGE, COPIES, NOT_RANKED, "submission")
LEADING_COLUMNS = ("rank", "rank interval", "tier", "model", "link")


def reading_order(shown: pd.DataFrame) -> pd.DataFrame:
    """The columns in reading order: rank, rank interval, tier, model (and link), the metrics (the ranked
    one first, in the table's order), then the metadata columns."""
    leading = [c for c in LEADING_COLUMNS if c in shown.columns]
    trailing = [c for c in METADATA_COLUMNS if c in shown.columns]
    middle = [c for c in shown.columns if c not in leading and c not in trailing]
    return shown[leading + middle + trailing]


def display_table(table: pd.DataFrame, spec: BenchmarkSpec, compact: bool = False, raw: bool = False) -> pd.DataFrame:
    """The table as shown and downloaded: each metric column under its display convention.

    Each metric's mean and CI go through its ``display`` (``idbench.builders.display``: x100, percent,
    x10, the CLIPScore scale 2.5 x max(cos, 0) x 100) and the column is renamed with the unit
    (``"scr@0.5 (%)"``, ``"aesthetic (x10)"``) so a reader of the CSV knows it;
    values are rounded as :func:`idbench.evaluate_pkg.report.display_value` rounds them (4 decimals
    raw, 2 scaled). Judge-failure rates are shown in percent, missing-evidence counts as they are (a
    mean per image), a chance level (``"<metric> random"``) under its metric's convention. Numbers stay numbers, so the app's table sorts numerically.

    ``raw`` (the app's unit switch set to raw values): every metric shown as its raw value, unrenamed.
    Columns come in :func:`reading_order`.

    ``compact`` (the app's table): each metric's mean and interval become one text column,
    ``"72.00 [65.00, 78.60]"`` (:func:`interval_text`), without the two CI columns; the CSV keeps
    the numbers (``compact=False``). Rows keep the ranking's order either way.
    """
    shown = table.copy()
    intervals = {}  # metric -> its compact texts, made from the raw values (one rounding, as show_text)
    for m in metric_specs(spec).values():
        if compact and m.name in table.columns:
            low, high = (
                table.get(m.name + suffix, pd.Series(math.nan, index=table.index)) for suffix in (CI_LOW, CI_HIGH)
            )
            intervals[m.name] = [
                interval_text(*values, display_of(spec, m.name, raw)) for values in zip(table[m.name], low, high)
            ]
            shown = shown.drop(columns=[c for c in (m.name + CI_LOW, m.name + CI_HIGH) if c in shown.columns])
    renames = {}
    for column in [
        c for c in shown.columns if c.endswith((FAILURES, COVERAGE, *(suffix for _, suffix in SHARES.values())))
    ]:  # a share of images: shown in percent
        shown[column] = (shown[column].astype(float) * 100).round(2)
        renames[column] = column + " (%)"
    for column in [c for c in shown.columns if c.endswith(MISSING)]:
        shown[column] = shown[column].astype(float).round(4)
        renames[column] = column + " (per image)"
    for m in metric_specs(spec).values():
        display = display_of(spec, m.name, raw)
        convention = DISPLAYS[display]
        for column in (m.name, m.name + CI_LOW, m.name + CI_HIGH, m.name + CHANCE):
            if column in shown.columns:
                if m.name in intervals and column == m.name:
                    shown[column] = pd.Series(intervals[m.name], index=shown.index, dtype=object)
                else:
                    shown[column] = (
                        shown[column].astype(float).map(lambda v, d=display: show(v, d)).round(convention.decimals)
                    )
                renames[column] = m.name + convention.suffix + column[len(m.name) :]
    return reading_order(shown.rename(columns=renames))


def interval_text(mean: Any, low: Any, high: Any, display: str) -> str:
    """A value and its interval as one short text in the display convention: ``"72.00 [65.00, 78.60]"``;
    the value alone when it has no interval (one prompt), "n/a" when it has no value."""
    text = show_text(_num(mean), display)
    if text == "n/a" or math.isnan(_num(low)) or math.isnan(_num(high)):
        return text
    return f"{text} [{show_text(_num(low), display)}, {show_text(_num(high), display)}]"


# --- what the app's table offers around the ranking ----------------------------------------------


def default_switches(results: pd.DataFrame, spec: BenchmarkSpec) -> tuple[bool, bool]:
    """Defaults of (show plumbing-check rows, show incomplete-suite rows): each kind is hidden only when
    rows remain without it, so a store of plumbing checks alone (the demo) shows them rather than
    nothing, while real, complete rows are ranked alone once they exist."""
    if results.empty:
        return False, False
    plumbing = bool(results["plumbing"].astype(bool).all())
    kept = visible_results(results, plumbing, spec)
    incomplete = all(missing_metrics(row, spec) for _, row in kept.iterrows())
    return plumbing, incomplete


def search_models(table: pd.DataFrame, text: str) -> pd.DataFrame:
    """The rows whose model name contains ``text`` (case-insensitive, literal); all rows for blank text.

    Ranks stay those of the whole ranking, so a found model shows its place among all of them.
    """
    needle = text.strip().casefold()
    if not needle or table.empty:
        return table
    return table[table["model"].astype(str).str.casefold().str.contains(needle, regex=False)].reset_index(drop=True)


def keep_metrics(table: pd.DataFrame, spec: BenchmarkSpec, metrics: Iterable[str]) -> pd.DataFrame:
    """The ranked table with only the columns of ``metrics`` (each with its CI and diagnostic columns)."""
    specs, kept = metric_specs(spec), set(metrics)
    dropped = [c for m in specs if m not in kept for c in _metric_columns(m, specs) if c in table.columns]
    return table.drop(columns=dropped)


MODEL_PAGE = "./model"  # relative, so a link works under whatever host and path serves the app
MODEL_NAME_IN_URL = r"[?&]model=([^&]*)$"  # the LinkColumn's display_text: the model name (the URL's last parameter)


def model_url(benchmark: str, task: str, submission: int, model: str) -> str:
    """The model page's deep link for one result: benchmark, track, submission, then the model's name
    last (the table shows it through :data:`MODEL_NAME_IN_URL`). Spaces as %20: the grid decodes those."""
    params = {"benchmark": benchmark, "track": task, "submission": str(int(submission)), "model": model}
    return f"{MODEL_PAGE}?{urlencode(params, quote_via=quote)}"


def safe_link(link: Any) -> str | None:
    """A submitter's link when it is an http(s) URL with a host, else None (nothing else becomes clickable)."""
    if not isinstance(link, str) or any(c.isspace() or ord(c) < 32 for c in link.strip()):
        return None
    parts = urlsplit(link.strip())
    return link.strip() if parts.scheme in ("http", "https") and parts.netloc else None


def with_links(shown: pd.DataFrame, results: pd.DataFrame, task: str) -> pd.DataFrame:
    """The displayed table with each model name turned into its model-page URL and, after it, a
    ``link`` column with the model's own link (``safe_link``: None when absent or not http(s))."""
    if shown.empty:
        return shown.assign(link=pd.Series(dtype=object))
    by_id = {int(row["submission_id"]): row for _, row in results.iterrows()}
    out = shown.copy()
    out["model"] = [
        model_url(by_id[i]["benchmark"], task, i, name)
        for i, name in zip(out["submission"].astype(int), out["model"].astype(str))
    ]
    out.insert(
        out.columns.get_loc("model") + 1,
        "link",
        [safe_link((by_id[i]["metadata"] or {}).get("link")) for i in out["submission"].astype(int)],
    )
    return out


def metadata_table(row: Mapping[str, Any]) -> pd.DataFrame:
    """One result's metadata as ``field, value`` rows of text (shown as a table, never as Markdown)."""
    metadata = row.get("metadata") or {}
    fields = [
        ("model", row.get("model_name")),
        ("family", family_of(row)),
        ("submitter", row.get("submitter")),
        ("link", metadata.get("link")),
        ("task", task_of(row)),
        ("profile", row.get("profile")),
        ("plumbing check", "yes (random weights)" if row.get("plumbing") else "no"),
        ("benchmark version", row.get("benchmark_version")),
        ("suite version", row.get("suite_version")),
        ("idbench version", row.get("idbench_version")),
        ("submission", row.get("submission_id")),
    ]
    return pd.DataFrame(
        [(name, "" if value is None else str(value)) for name, value in fields], columns=["field", "value"]
    )


# The generation record's fields (idbench generate, docs/generation.md) in the order the model page shows them.
GENERATION_FIELDS = (
    "adapter",
    "model_id",
    "revision",
    "pipeline_class",
    "dtype",
    "steps",
    "guidance",
    "resolution",
    "task",
    "references",
    "reference_side",
    "device",
    "processes",
    "seed_rule",
    "seconds_per_image",
)
# A value the submitter wrote is cut to this many characters on the page (the whole record is in the JSON expander).
GENERATION_VALUE_CHARS = 300
GENERATION_NOT_RECORDED = (
    "Generation: not recorded (made outside `idbench generate`: submission.json has no generation record "
    "of the adapter, model revision and sampling)."
)


def generation_table(row: Mapping[str, Any]) -> pd.DataFrame | None:
    """The generation record of ``idbench generate`` in ``submission.json`` as ``field, value`` rows of
    text, the libraries as one row; None when the submission has no record (the adapter field marks one).

    The submitter wrote these values: they are shown as plain text, cut to GENERATION_VALUE_CHARS.
    """
    record = (row.get("metadata") or {}).get("generation")
    if not isinstance(record, Mapping) or not isinstance(record.get("adapter"), str):
        return None

    def text(value: Any) -> str:
        shown = json.dumps(value, sort_keys=True, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
        return shown if len(shown) <= GENERATION_VALUE_CHARS else shown[: GENERATION_VALUE_CHARS - 3] + "..."

    rows = [(field, text(record[field])) for field in GENERATION_FIELDS if record.get(field) not in (None, "")]
    libraries = record.get("libraries")
    if isinstance(libraries, Mapping) and libraries:
        rows.append(("libraries", text(", ".join(f"{k} {v}" for k, v in sorted(libraries.items())))))
    return pd.DataFrame(rows, columns=["field", "value"])


def latest_jobs(jobs: list[Mapping[str, Any]], tasks: Mapping[int, str], n: int) -> pd.DataFrame:
    """The ``n`` newest jobs (of :func:`idbench.leaderboard.queue.jobs_table`, oldest first) newest first:
    ``submitted, model, benchmark, task, state``; ``tasks`` maps a submission id to its task."""
    columns = ["submitted", "model", "benchmark", "task", "state", "submission"]
    newest = sorted(jobs, key=lambda j: int(j["job"]), reverse=True)[:n]
    rows = [
        (
            j["created"],
            j["model"],
            j["benchmark"],
            tasks.get(int(j["submission"]), DEFAULT_TASK),
            j["state"],
            int(j["submission"]),
        )
        for j in newest
    ]
    return pd.DataFrame(rows, columns=columns)


# --- plots' data ---------------------------------------------------------------------------------


def group_size_axis(spec: BenchmarkSpec) -> str | None:
    """The breakdown that counts subjects (the x axis of "metric vs N"), if the spec has one."""
    return spec.group_size_axis


def metric_vs_group_size(
    results: pd.DataFrame, spec: BenchmarkSpec, metric: str, *, include_plumbing: bool = False
) -> pd.DataFrame:
    """Long table ``model, group_size, mean, ci_low, ci_high``: the metric per subject count, per model.

    Empty when the benchmark has no group-size breakdown (CHARIS). ``group_size`` is an int, sorted.
    """
    axis = group_size_axis(spec)
    columns = ["model", "group_size", "mean", "ci_low", "ci_high"]
    visible = visible_results(results, include_plumbing)
    if axis is None or visible.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for label, (_, row) in zip(model_labels(visible), visible.iterrows()):
        for size, stats in row["aggregates"].get("breakdowns", {}).get(axis, {}).items():
            s = stats.get(metric)
            if s is not None:
                rows.append((label, int(size), _num(s["mean"]), _num(s["ci_low"]), _num(s["ci_high"])))
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["model", "group_size"], kind="stable").reset_index(drop=True)


def type_style_matrix(
    results: pd.DataFrame, spec: BenchmarkSpec, metric: str, *, include_plumbing: bool = False
) -> pd.DataFrame:
    """Models x ``"type x style"`` cells of the metric's mean (CHARIS): rows models, columns cells.

    Empty when the benchmark has no ``type x style`` breakdown. Columns are sorted by label.
    """
    name = "type x style"
    visible = visible_results(results, include_plumbing)
    if ("type", "style") not in spec.breakdowns or visible.empty:
        return pd.DataFrame()
    matrix = {}
    for label, (_, row) in zip(model_labels(visible), visible.iterrows()):
        cells = row["aggregates"].get("breakdowns", {}).get(name, {})
        matrix[label] = {cell: _num((stats.get(metric) or {}).get("mean")) for cell, stats in cells.items()}
    out = pd.DataFrame.from_dict(matrix, orient="index")
    return out.reindex(columns=sorted(out.columns))


def radar_axes(results: pd.DataFrame, spec: BenchmarkSpec, *, include_plumbing: bool = False) -> pd.DataFrame:
    """Models x metrics, every axis oriented so that outward is better (the stress test's Figure 5).

    A lower-is-better metric (a collapse rate) becomes ``"1 - <metric>"``; values stay raw otherwise.
    Only metrics every shown model computed are kept, so each polygon has all its corners.
    """
    visible = visible_results(results, include_plumbing)
    if visible.empty:
        return pd.DataFrame()
    data = {}
    for label, (_, row) in zip(model_labels(visible), visible.iterrows()):
        overall = row["aggregates"].get("overall", {})
        values = {}
        for m in spec.metric_suite:
            mean = (overall.get(m.name) or {}).get("mean")
            if mean is not None:
                values[m.name if m.higher_is_better else f"1 - {m.name}"] = mean if m.higher_is_better else 1 - mean
        data[label] = values
    out = pd.DataFrame.from_dict(data, orient="index")
    return out.dropna(axis=1, how="any")


def breakdown_tables(row: Mapping[str, Any], spec: BenchmarkSpec) -> dict[str, pd.DataFrame]:
    """One result's per-axis breakdowns: ``{breakdown name: table cells x metrics (raw means)}``, the
    prompt-column breakdowns first, then the subject breakdowns (``aggregates["subject_breakdowns"]``:
    cells by the references' metadata, "unknown" last) when the result has them."""
    aggregates = row.get("aggregates") or {}
    by_subject = aggregates.get("subject_breakdowns") or {}
    named = [(" x ".join(b), aggregates.get("breakdowns", {}).get(" x ".join(b), {})) for b in spec.breakdowns]
    # A result scored before an axis existed has no table for it, rather than an empty one.
    named += [(b.name, by_subject[b.name]) for b in spec.subject_breakdowns if b.name in by_subject]
    out = {}
    for name, cells in named:
        table = pd.DataFrame.from_dict(
            {cell: {m: _num(s.get("mean")) for m, s in stats.items()} for cell, stats in cells.items()}, orient="index"
        )
        if not table.empty:
            table = table.loc[
                sorted(table.index, key=lambda label: [(v == UNKNOWN_CELL, *_sort_key(v)) for v in label.split(" x ")])
            ]
            table = table[[m.name for m in spec.metric_suite if m.name in table.columns]]
            if name in by_subject:  # how many subject rows and prompts each cell holds ("unknown" among them)
                table["rows"] = [
                    max((s.get("n", 0) + s.get("n_nan", 0) for s in cells[c].values()), default=0) for c in table.index
                ]
                table["prompts"] = [
                    max((s.get("n_prompts") or 0 for s in cells[c].values()), default=0) for c in table.index
                ]
            table.index.name = name
        out[name] = table
    return out


# --- who became whom (CogCanvas, suite 0.3 on) ---------------------------------------------------

# The per-image counts CogCanvas's scorer stores as ``who.<count>`` (benchmarks/cogcanvas/suite.py),
# with their definitions as the module doc of ``evaluate_pkg/functional/identity.py`` gives them
# (tests/leaderboard/test_who.py checks they still agree). Kept here as text, not imported: that module
# needs scipy, which the app of a Hub-backed Space does not install.
WHO_COUNTS: dict[str, str] = {
    "found": "the reference's Hungarian-matched face has cosine >= the face model's same-identity threshold and "
    "resembles this reference more than any other reference of the prompt (a positive margin), so a lookalike "
    "stranger or a neighbour's face does not count",
    "missing": "a reference with a face that was not found",
    "swapped": "a found identity out of place: its rank from the left among the found identities (by the centre "
    "of its face) differs from its rank in the prompt's layout among the same identities",
    "cloned": "generated faces that repeat a person another generated face already shows; each group of k faces "
    "of one person counts k - 1 clones",
    "extra": "faces beyond the persons the prompt asks for, max(0, k - n)",
}
WHO_PREFIX = "who."
# The metric computed from the face assignment: a track that scores it records who became whom.
WHO_GROUNDED_METRIC = "id_sim_strict"
WHO_ALL = "all"  # the summary's last row: every image of the result


def records_who_became_whom(spec: BenchmarkSpec, task: str) -> bool:
    """Whether results of this benchmark's ``task`` record who became whom (from suite 0.3 on): those
    whose metrics include the strict ID-Sim, which is computed from that assignment."""
    return any(m.name == WHO_GROUNDED_METRIC for m in spec.task_metrics(task))


def who_summary(aggregates: Mapping[str, Any], spec: BenchmarkSpec) -> pd.DataFrame:
    """One result's mean ``who.*`` counts per image, by group size then over all images.

    Index ``N`` (the group-size cells as stored, sorted as numbers, then ``"all"``), columns
    ``found, missing, swapped, cloned, extra`` (raw means per image) and ``images`` (how many images
    the means are over). Empty when the result has no ``who.*`` counts (scored before suite 0.3, or
    without the identity metrics).
    """
    columns = [*WHO_COUNTS, "images"]
    overall = (aggregates or {}).get("overall", {})
    if not any(WHO_PREFIX + name in overall for name in WHO_COUNTS):
        return pd.DataFrame(columns=columns, index=pd.Index([], name="N"))
    cells = aggregates.get("breakdowns", {}).get(spec.group_size_axis, {}) if spec.group_size_axis else {}
    rows = {label: cells[label] for label in sorted(cells, key=_sort_key)} | {WHO_ALL: overall}
    table = pd.DataFrame.from_dict(
        {label: _who_row(stats) for label, stats in rows.items()}, orient="index", columns=columns
    )
    table.index.name = "N"
    return table


def _who_row(stats: Mapping[str, Any]) -> dict[str, float]:
    row = {name: _num((stats.get(WHO_PREFIX + name) or {}).get("mean")) for name in WHO_COUNTS}
    # Every count is recorded for every image, so any one of them says how many images the cell has.
    row["images"] = _num((stats.get(WHO_PREFIX + "found") or {}).get("n"))
    return row


# --- ranks with uncertainty ----------------------------------------------------------------------
# A rank is a statistic too: with 40 prompts two models 0.01 apart swap places in many resamples. The
# ranked table carries, per ranked model, the interval of its rank over bootstrap resamples and its tier
# (the models that cannot be told apart from the tier's leader), from the per-prompt means of the
# per-sample results. The resamples follow the benchmark's own design, as its intervals do (CHARIS:
# subjects with their prompts; Identity Collapse, CogCanvas: prompts crossed with their reused
# references; aggregates["resampling"] records it). Every model is resampled with the same draws (a drawn
# unit brings its value for every model), so the comparison is paired, on the (prompt_id, seed) pairs
# all of them share.

RANK_INTERVAL, TIER = "rank interval", "tier"
RANK_DRAWS = 1000  # bootstrap resamples behind each rank interval and tier
RANK_LEVEL = 0.95  # joint: the chance that no claim of the board (a rank set, a tier boundary) is false
RANK_SEED = 0  # fixed: the same store shows the same intervals on every render
PROMPTS_ONLY = "percentile bootstrap over prompts"  # the design of results scored before designs were recorded


def resampling_design(
    aggregates: Iterable[Mapping[str, Any]],
) -> tuple[tuple[str, ...], dict[str, dict[str, list[str]]], str]:
    """(factors, each prompt's units, method) of the resampling design the results' ``aggregates.json``
    record (``aggregates["resampling"]``): the first result that records one gives the factors and the
    method; the prompt units are merged over every result with the same factors (builds of one benchmark
    share prompt ids). Prompts alone when none records a design (older results)."""
    factors, method, units = None, PROMPTS_ONLY, {}
    for record in aggregates:
        design = (record or {}).get("resampling") if isinstance(record, Mapping) else None
        if not isinstance(design, Mapping) or not design.get("factors"):
            continue
        names = tuple(str(f) for f in design["factors"])
        if factors is None:
            factors, method = names, str(design.get("method") or method)
        if names == factors:
            for prompt, levels in (design.get("prompt_units") or {}).items():
                units.setdefault(str(prompt), {k: [str(v) for v in vals] for k, vals in (levels or {}).items()})
    return factors or ("prompt",), units, method


def sample_values(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``prompt_id, seed, value``: one value per generated image of ``metric`` from a ``results.parquet``
    frame, as the aggregates use it: the whole-image rows (subject ""), or, for a metric that has only
    per-subject rows, their mean per image. NaN values dropped."""
    rows = frame[(frame["metric"] == metric) & frame["value"].notna()]
    if "subject" in rows and (rows["subject"] == "").any():
        rows = rows[rows["subject"] == ""]
    return rows.groupby(["prompt_id", "seed"], as_index=False, sort=True)["value"].mean()


def shared_prompt_means(values: Mapping[int, pd.DataFrame], prompts: Iterable[str] | None = None) -> pd.DataFrame:
    """Prompts x submissions: each submission's mean per prompt over the (prompt_id, seed) pairs that
    every submission of ``values`` (submission -> :func:`sample_values`) has a value for, so the models
    are compared on the same images. ``prompts`` keeps only those prompts (a breakdown cell's)."""
    if not values:
        return pd.DataFrame()
    wide = pd.concat(
        {int(s): frame.set_index(["prompt_id", "seed"])["value"] for s, frame in values.items()}, axis=1
    ).dropna()
    if prompts is not None:
        wide = wide[wide.index.get_level_values("prompt_id").isin(set(prompts))]
    return wide.groupby(level="prompt_id", sort=True).mean()


def rank_uncertainty(
    means: pd.DataFrame,
    higher_is_better: bool,
    *,
    n_draws: int = RANK_DRAWS,
    level: float = RANK_LEVEL,
    seed: int = RANK_SEED,
    factors: tuple[str, ...] = ("prompt",),
    units: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Rank intervals and tiers from per-prompt means (prompts x submissions, :func:`shared_prompt_means`),
    claimed jointly for the whole board (``functional/ranks.py``).

    The pairwise claims "model j is better than model k" come from the step-down max-T procedure
    (Romano & Wolf 2005) over every pair, with bootstrap-t draws of the resampling design ``factors``
    (``units``: each prompt's levels of the factors other than ``"prompt"``; :func:`resampling_design`
    reads both from the results), the same draws for every model: the chance of any false claim on the
    board is at most ``1 - level``, however many models it holds.

    - ``rank``: the rank of the full-sample means (:func:`shared_ranks`);
    - ``rank_low`` / ``rank_high``: 1 + the models shown better, and K - the models shown worse or
      identical to it (simultaneous rank sets, Mogstad et al. 2024); ``rank interval`` writes them ``"1-3"`` (``"2"``
      when both are equal);
    - ``tier``: models sorted by mean (ties in submission order); the first leads tier 1; each next
      model joins the current tier unless it is shown worse than that tier's leader, and then leads
      the next tier. Equal models are therefore always in one tier.

    Index: the submissions, in the columns' order. With one prompt there is nothing to resample: every
    model's interval is the whole board and every model is in tier 1 (one prompt tells no model
    apart); so too when no factor of the design has two levels among the prompts.
    """
    from idbench.evaluate_pkg.functional.bootstrap import design_factors
    from idbench.evaluate_pkg.functional.ranks import board_claims, rank_sets, tiers

    columns = ["rank", "rank_low", "rank_high", RANK_INTERVAL, TIER]
    submissions = [int(s) for s in means.columns]
    if not submissions:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="submission"))
    values = means.to_numpy(dtype=np.float64) * (1.0 if higher_is_better else -1.0)  # prompts x models, higher better
    point = values.mean(axis=0)
    ranks = np.array(shared_ranks(point, higher_is_better=True))
    prompts = [str(p) for p in means.index]
    design = design_factors({str(k): dict(v) for k, v in (units or {}).items()}, prompts, factors)
    claims = board_claims(values, design, n_draws, seed, level)
    low, high = rank_sets(claims.better, claims.equal)
    tier = tiers(point, claims.better, order=np.asarray(submissions))
    texts = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in zip(low, high)]
    out = pd.DataFrame(
        {"rank": ranks, "rank_low": low.astype(int), "rank_high": high.astype(int), RANK_INTERVAL: texts, TIER: tier},
        index=submissions,
    )
    out.index.name = "submission"
    return out


def with_rank_uncertainty(table: pd.DataFrame, uncertainty: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ranked table with ``rank interval`` and ``tier`` after ``rank`` (from :func:`rank_uncertainty`,
    by submission); rows it has no entry for (not ranked, no per-sample values; all rows when None)
    hold "" and <NA>."""
    out = table.copy()
    if uncertainty is None:
        uncertainty = pd.DataFrame(columns=[RANK_INTERVAL, TIER])
    found = out["submission"].astype(int).map(lambda s: s in uncertainty.index)
    intervals = [uncertainty.at[int(s), RANK_INTERVAL] if ok else "" for s, ok in zip(out["submission"], found)]
    tiers = [int(uncertainty.at[int(s), TIER]) if ok else pd.NA for s, ok in zip(out["submission"], found)]
    at = out.columns.get_loc("rank") + 1 if "rank" in out.columns else 0
    out.insert(at, RANK_INTERVAL, intervals)
    out.insert(at + 1, TIER, pd.array(tiers, dtype="Int64"))
    return out


def leaders_tied(table: pd.DataFrame) -> list[str]:
    """The models sharing the lead of a ranked table: every row of tier 1 when the table has tiers
    (they cannot be told apart from the leader), else every row of rank 1; [] when one model leads alone."""
    if table.empty:
        return []
    if TIER in table.columns and table[TIER].notna().any():
        first = table[table[TIER] == 1]
    else:
        first = table[table["rank"] == 1]
    return [str(m) for m in first["model"]] if len(first) > 1 else []


def cell_prompts(
    prompt_rows: Mapping[str, Mapping[str, Any]], spec: BenchmarkSpec, filters: Mapping[str, Any] | None
) -> list[str] | None:
    """The prompt ids of the breakdown cell ``filters`` select (None: no cell, every prompt), from the
    built benchmark's prompt rows (their breakdown columns, compared as the stored labels are, as text)."""
    chosen = {axis: str(value) for axis, value in (filters or {}).items() if value is not None}
    if not chosen:
        return None
    return [
        pid for pid, row in prompt_rows.items() if all(str(row.get(axis)) == value for axis, value in chosen.items())
    ]


# --- the charts' data, in the page's units -------------------------------------------------------
# Each chart of a benchmark page draws one of these long tables (one row per mark), with the columns its
# tooltip shows: model, value, the interval, n (prompts behind the value). Values are in the app's units
# (:func:`in_units`), so a chart and the table beside it read alike.


def _cell_n(stats: Mapping[str, Any]) -> float:
    return _num(stats.get("n_prompts", stats.get("n")))


def degradation_frame(results: pd.DataFrame, spec: BenchmarkSpec, metric: str, raw: bool = False) -> pd.DataFrame:
    """``model, N, value, low, high, n``: the metric per group size per model (empty without a group-size axis)."""
    axis = spec.group_size_axis
    columns = ["model", "N", "value", "low", "high", "n"]
    if axis is None or results.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for label, (_, row) in zip(model_labels(results), results.iterrows()):
        for size, stats in row["aggregates"].get("breakdowns", {}).get(axis, {}).items():
            s = stats.get(metric)
            if s is not None:
                rows.append(
                    (
                        label,
                        int(size),
                        *(in_units(s.get(k), spec, metric, raw) for k in ("mean", "ci_low", "ci_high")),
                        _cell_n(s),
                    )
                )
    return pd.DataFrame(rows, columns=columns).sort_values(["model", "N"], kind="stable").reset_index(drop=True)


def overall_frame(
    results: pd.DataFrame, spec: BenchmarkSpec, metrics: Iterable[str], raw: bool = False
) -> pd.DataFrame:
    """``model, metric, value, low, high, n``: each model's overall value of each of ``metrics`` it has;
    ``metric`` is the column name the table gives it (:func:`display_name`)."""
    rows = []
    for label, (_, row) in zip(model_labels(results), results.iterrows()):
        overall = row["aggregates"].get("overall", {})
        for m in metrics:
            s = overall.get(m)
            if s is not None:
                rows.append(
                    (
                        label,
                        display_name(spec, m, raw),
                        *(in_units(s.get(k), spec, m, raw) for k in ("mean", "ci_low", "ci_high")),
                        _cell_n(s),
                    )
                )
    return pd.DataFrame(rows, columns=["model", "metric", "value", "low", "high", "n"])


def scatter_frame(results: pd.DataFrame, spec: BenchmarkSpec, x: str, y: str, raw: bool = False) -> pd.DataFrame:
    """``model, <x>, <y>`` and each one's ``low``/``high`` and ``n`` (column names as :func:`display_name`
    gives them): one point per model having both metrics."""
    long = overall_frame(results, spec, [x, y], raw)
    names = {display_name(spec, x, raw): "x", display_name(spec, y, raw): "y"}
    wide = long.pivot_table(index="model", columns="metric", values=["value", "low", "high", "n"], aggfunc="first")
    if wide.empty or len(wide.columns.get_level_values(1).unique()) < 2:
        return pd.DataFrame()
    out = pd.DataFrame(index=wide.index)
    for name in names:
        out[name] = wide[("value", name)]
        out[f"{name} low"], out[f"{name} high"], out[f"{name} n"] = (
            wide[("low", name)],
            wide[("high", name)],
            wide[("n", name)],
        )
    return out.dropna(subset=list(names)).reset_index()


def nothing_to_show(frame: pd.DataFrame, what: str) -> str:
    """One line saying why a chart of ``frame`` (a :func:`overall_frame`) would show nothing, "" when it
    would show something: no values, or the same value for every bar (an all-zero collapse rate, say)."""
    values = frame["value"].dropna() if "value" in frame else pd.Series(dtype=float)
    if values.empty:
        return f"{what}: no value to chart for the models shown."
    if values.nunique() == 1:
        return f"{what}: every model shown has {values.iloc[0]:g} at every point, so there is nothing to compare in a chart."
    return ""


# --- paired comparisons on the model page -------------------------------------------------------


def comparison_tables(
    rows: Iterable[Mapping[str, Any]], spec: BenchmarkSpec, raw: bool = False
) -> dict[str, pd.DataFrame]:
    """The rows of ``idbench.evaluate_pkg.compare`` (one per table and metric, raw values) as one frame
    per table ("overall", then each breakdown cell): metric (named with its unit), A, B, B - A and its
    interval in the page's units, p, p_holm, verdict, shared images and prompts.

    Means are shown through the metric's display convention. A difference is scaled by the
    convention's factor (``apply(1) - apply(0)``: x100, x10, x250 for CLIPScore), which is the
    difference of the displayed means for every linear convention; CLIPScore's clamp at 0 is not
    applied to a difference (a negative difference is real, a negative mean cosine practically never).
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        metric = str(row["metric"])
        display = display_of(spec, metric, raw) if metric in metric_specs(spec) else "raw"
        convention = DISPLAYS[display]
        factor = convention.apply(1.0) - convention.apply(0.0)
        digits = convention.decimals
        scaled = lambda v, f=factor, n=digits: None if v is None else round(f * float(v), n)  # noqa: E731
        shown = lambda v, d=display, n=digits: None if v is None else round(show(v, d), n)  # noqa: E731
        low, high = scaled(row.get("ci_low")), scaled(row.get("ci_high"))
        out.setdefault(str(row["table"]), []).append(
            {
                "metric": display_name(spec, metric, raw) if metric in metric_specs(spec) else metric,
                "A": shown(row.get("a")),
                "B": shown(row.get("b")),
                "B - A": scaled(row.get("diff")),
                "interval": "n/a" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]",
                "p": row.get("p"),
                "p_holm": row.get("p_holm"),
                "verdict": row.get("verdict"),
                "images": row.get("n"),
                "prompts": row.get("n_prompts"),
            }
        )
    return {name: pd.DataFrame(table) for name, table in out.items()}


def flat_metrics(profile: pd.DataFrame, tolerance: float = 1e-12) -> dict[str, float]:
    """Metric -> its value, for the metrics of an :func:`overall_frame` on which every model shown has
    the same value (all SCRs 0, say; two models at least): a chart panel of them would be empty. Metrics with no value are
    not listed (their absence is said elsewhere)."""
    if profile.empty:
        return {}
    out = {}
    for metric, rows in profile.groupby("metric", sort=False):
        values = rows["value"].dropna().astype(float)
        if len(values) >= 2 and float(values.max() - values.min()) <= tolerance:
            out[str(metric)] = float(values.iloc[0])
    return out
