"""One current result as the leaderboard sees it, and the columns the ranked table gives it.

Every other leaderboard view module (ranking, breakdowns, display, chart frames) starts from the rows of
:meth:`idbench.leaderboard.store.Store.current_results`, so what those rows mean is settled here once:
the names of the ranked table's columns and the suffixes of a metric's side columns (interval, judge
failures, coverage, missing evidence, chance level), the task a row belongs to, which of its task's
metrics it lacks or holds under an older definition (and taking those out), the marks a reader must
see before comparing it, the judge and copy-check facts the ranking rule reads, its model family, and
which rows a view shows. It imports no other view module, so each of them may import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec, MetricSpec, version_key
from idbench.leaderboard.judges import copies_mark, judge_key, judge_label

PLUMBING_MARK = "plumbing"
INCOMPLETE_MARK = "incomplete suite"
UNCALIBRATED_MARK = "uncalibrated judge"
# The row's judge (who judged its judged columns), its copy check and, for a row left out of the
# ranking, why (see :func:`.ranking.rank_rows`).
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


def as_number(value: Any) -> float:
    """A stored number as a float, None as NaN (a stat the scorer did not write)."""
    return math.nan if value is None else float(value)


def label_order(value: str) -> tuple[int, float, str]:
    """The sort key of a stored cell label: numbers first, as numbers, then text."""
    # Group sizes are labels like "10": sort them as numbers, so "10" comes after "8".
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def metric_specs(spec: BenchmarkSpec) -> dict[str, MetricSpec]:
    """The benchmark's metric suite by name, in suite order."""
    return {m.name: m for m in spec.metric_suite}


def metric_columns(metric: str, specs: Mapping[str, MetricSpec]) -> tuple[str, ...]:
    """A metric's columns in the ranked table: mean, CI, for a judged metric its judge-failure rate, and
    for a metric that declares one its missing-evidence count."""
    columns = (metric, metric + CI_LOW, metric + CI_HIGH)
    columns += (metric + FAILURES,) if specs[metric].judged else ()
    columns += (metric + MISSING,) if specs[metric].missing_evidence else ()
    columns += (metric + CHANCE,) if specs[metric].chance else ()
    columns += (metric + COVERAGE,) if specs[metric].judged else ()
    return columns + ((metric + SHARES[metric][1],) if metric in SHARES else ())


def coverage(stats: Mapping[str, Any]) -> float:
    """n / (n + n_nan) of a metric's stats: the share of its samples the score is over (NaN unknown)."""
    n, missing = stats.get("n"), stats.get("n_nan")
    if n is None or missing is None or n + missing == 0:
        return math.nan
    return float(n) / float(n + missing)


def cell_stats(aggregates: Mapping[str, Any], cell: tuple[str, str] | None) -> dict[str, Any]:
    """The ``{metric: {mean, ci_low, ...}}`` of the overall aggregates or of one breakdown cell."""
    if cell is None:
        return aggregates.get("overall", {})
    return aggregates.get("breakdowns", {}).get(cell[0], {}).get(cell[1], {})


# --- a row's task, and the metrics it lacks or holds under an older definition --------------------


def task_of(row: Mapping[str, Any]) -> str:
    """The task (track) of a result row: its submission's ``task``, the reference-based one if unset."""
    task = row.get("task")
    return task if isinstance(task, str) and task else DEFAULT_TASK


def tracks(spec: BenchmarkSpec) -> list[str]:
    """The leaderboard tracks of a benchmark: its tasks that submit images (a ranking is scored alone).

    Each track is its own ranking (``Store.current_results(benchmark, task)``): rows of two tasks never
    share one, since their metrics mean different things (a text-to-image model saw no reference).
    """
    return [task for task in spec.tasks if task != "retrieval"]


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


# --- who judged, copy checks, and the marks a reader must see first -------------------------------


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
        if any(not math.isnan(as_number((overall.get(m) or {}).get("mean"))) for m in judged):
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


# --- families, plot labels, and the rows a view shows ---------------------------------------------


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
