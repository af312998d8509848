"""The ranking rule and the ranked table: which rows are ranked, on which metric, in what order.

This is where the leaderboard decides standings from stored aggregates, with no Streamlit and no
resampling: the metrics a ranking may use and the default one, the judges a judged metric ranks among,
the rule that sets a row apart with its reason (a copy check, another or an uncalibrated judge, judge
failures), competition ranks with float-rounding ties, and :func:`ranked_table`, which puts one row per
current result together (raw values, overall or of one breakdown cell) and orders it. It also keeps the
small choices the app's table makes around the ranking (default switches, model search, kept metrics)
and the store's cache key. Rank intervals and tiers are added on top by :mod:`.rank_intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec, MetricSpec
from idbench.leaderboard.breakdowns import breakdown_cell
from idbench.leaderboard.result_rows import (
    CHANCE,
    CI_HIGH,
    CI_LOW,
    COPIES,
    COVERAGE,
    FAILURES,
    ID_COLUMNS,
    JUDGE,
    MISSING,
    NOT_RANKED,
    SHARES,
    UNCALIBRATED_MARK,
    RowFacts,
    as_defined_now,
    as_number,
    cell_stats,
    coverage,
    family_of,
    marks,
    metric_columns,
    metric_specs,
    missing_metrics,
    row_facts,
    task_of,
    visible_results,
)
from idbench.leaderboard.store import Store, results_version


def store_version(store: Store) -> tuple[int, int, int]:
    """A cache key that changes whenever the ranked results change: (result rows, highest result id,
    withdrawn submissions).

    Results are insert-only (a rescore inserts a new row and flips ``current`` in the same
    transaction), so any new result raises the max id; withdrawing a submission (the one other change
    to what :meth:`Store.current_results` returns) raises the withdrawn count.
    """
    with store.transaction(immediate=False) as db:
        return results_version(db)


# --- which metrics a ranking may use --------------------------------------------------------------


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


def default_metric(results: pd.DataFrame, spec: BenchmarkSpec) -> str:
    """The first of the spec's ranking metrics that some result computed (for results scored before
    its copy-floored twin existed, the metric the twin floors), else the first rankable one."""
    # Never a metric shown only beside its intent-to-treat twin, even when no result computed another.
    available = rankable_metrics(results, spec) or suite_rankable(results, spec)
    floored_from = {twin.name: metric for metric, twin in spec.floored_twins.items()}
    candidates = [name for m in spec.ranking for name in (m, floored_from.get(m)) if name]
    return next((m for m in candidates if m in available), available[0])


# --- the judges, and the ranking rule -------------------------------------------------------------


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
      recorded (older results) have the key :data:`~.result_rows.UNRECORDED_JUDGE` and rank among themselves;
    - in the ranked rows, the judged columns hold only ``judge``'s values: a ranked row judged by
      another judge (ranked here on an unjudged metric) shows NaN there (its ``judge`` column names its
      own judge), so each judged column is one judge's;
    - rows without judge or copy facts (older results) rank as before on unjudged metrics.

    Sorting respects ``higher_is_better``, NaN last; rows are listed in submission order among equal
    scores, but equal scores share a rank (:func:`shared_ranks`: 1, 1, 3), never broken by submission order.
    """
    specs = metric_specs(spec)
    judged_metric = specs[metric].judged
    reasons = [
        _not_ranked_reason(
            facts[submission],
            judged_metric,
            judge,
            include_uncalibrated=include_uncalibrated,
            include_copies=include_copies,
            include_judge_failures=include_judge_failures,
        )
        for submission in table["submission"].astype(int)
    ]
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
            columns = [c for c in metric_columns(m, specs) if c in ranked.columns]
            ranked.loc[other, columns] = math.nan
    ranked["rank"] = pd.array(shared_ranks(ranked[metric], specs[metric].higher_is_better), dtype="Int64")
    unranked["rank"] = pd.array([pd.NA] * len(unranked), dtype="Int64")
    return Ranking(ranked, unranked)


def _not_ranked_reason(
    f: RowFacts,
    judged_metric: bool,
    judge: str | None,
    *,
    include_uncalibrated: bool,
    include_copies: bool,
    include_judge_failures: bool,
) -> str:
    """Why :func:`rank_rows` sets a row with facts ``f`` apart on a (judged or not) metric, "" when it is ranked."""
    if f.copies_marked and not include_copies:
        return f.copies
    if judged_metric and judge is not None and f.judge_key != judge:
        return "no judge ran" if f.judge_key is None else f"judged by another judge: {f.judge}"
    if judged_metric and f.calibrated is False and not include_uncalibrated:
        return UNCALIBRATED_MARK + (f": {f.calibration_reason}" if f.calibration_reason else "")
    if judged_metric and f.incomplete and not include_judge_failures:
        return (
            "judge failed on "
            + ", ".join(f"{100 * r:.0f} % of {m}" for m, r in sorted(f.incomplete.items()))
            + " (over 5 %)"
        )
    return ""


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


# --- the ranked table -----------------------------------------------------------------------------


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
    _check_one_track(results, spec)
    results = as_defined_now(results, spec)  # no older quantity under a metric's present name
    metric = metric or default_metric(results, spec)
    specs = metric_specs(spec)
    if metric not in specs:
        raise ValueError(f"{spec.name}: unknown metric {metric!r}; known: {list(specs)}")
    cell = breakdown_cell(spec, filters)
    metrics = [metric] + [m for m in available_metrics(results, spec) if m != metric]
    columns = list(ID_COLUMNS) + [c for m in metrics for c in metric_columns(m, specs)]
    rows, facts = [], {}
    visible = visible_results(results, include_plumbing, spec, include_incomplete, family)
    if judge == "":
        judge = default_judge(visible, spec)
    for _, row in visible.iterrows():
        facts[int(row["submission_id"])] = f = row_facts(row, spec)
        rows.append(_table_row(row, spec, f, cell_stats(row["aggregates"], cell), metrics))
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


def _check_one_track(results: pd.DataFrame, spec: BenchmarkSpec) -> None:
    """Raise ValueError when ``results`` hold rows of several tasks: one ranking is one track."""
    mixed = sorted({task_of(row) for _, row in results.iterrows()}) if "task" in results else []
    if len(mixed) > 1:  # one ranking is one track: rows of other tasks have other metrics
        raise ValueError(
            f"{spec.name}: results of several tasks ({', '.join(mixed)}) in one ranking; rank each track apart"
        )


def _table_row(
    row: Mapping[str, Any], spec: BenchmarkSpec, f: RowFacts, stats: Mapping[str, Any], metrics: Iterable[str]
) -> dict[str, Any]:
    """One result's row of :func:`ranked_table`: who and what it is (``f``: its facts), then the columns
    of each of ``metrics`` from ``stats`` (the chosen cell's, :func:`~.result_rows.cell_stats`)."""
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
    specs = metric_specs(spec)
    for m in metrics:
        record.update(_metric_values(m, specs[m], stats))
    return record


def _metric_values(m: str, ms: MetricSpec, stats: Mapping[str, Any]) -> dict[str, float]:
    """Metric ``m``'s columns of one ranked-table row (:func:`~.result_rows.metric_columns`) from a cell's
    ``stats``: raw mean, CI, and the side columns its spec ``ms`` declares (NaN where not stored)."""
    s = stats.get(m) or {}
    record = {
        m: as_number(s.get("mean")),
        m + CI_LOW: as_number(s.get("ci_low")),
        m + CI_HIGH: as_number(s.get("ci_high")),
    }
    if ms.judged:
        record[m + FAILURES] = as_number((stats.get(f"{m}.failure_rate") or {}).get("mean"))
        record[m + COVERAGE] = coverage(s)
    if ms.missing_evidence:
        record[m + MISSING] = as_number((stats.get(ms.missing_evidence) or {}).get("mean"))
    if ms.chance:
        record[m + CHANCE] = as_number((stats.get(ms.chance) or {}).get("mean"))
    if m in SHARES:
        diagnostic, suffix = SHARES[m]
        record[m + suffix] = as_number((stats.get(diagnostic) or {}).get("mean"))
    return record


# --- what the app's table offers around the ranking -----------------------------------------------


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
    dropped = [c for m in specs if m not in kept for c in metric_columns(m, specs) if c in table.columns]
    return table.drop(columns=dropped)
