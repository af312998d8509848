"""Aggregates, breakdowns and the human-readable report of a scoring run.

Per-sample results hold raw values only. Here they become means with percentile-bootstrap confidence
intervals, overall and per breakdown cell of the benchmark description (group size, scene type,
subject type x style). The intervals resample prompts, all seeds of a prompt together: the seeds of
one prompt are not independent (``functional/bootstrap.py``, docs/statistics.md). Display conventions
(x100, percent, x10, CLIPScore scale) are applied when presenting only (report.md, the terminal
summary), from each metric's ``display`` in the benchmark description, and the report says for each
which was applied and where it comes from (docs/display-conventions.md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from idbench.builders.display import DISPLAYS, show_text
from idbench.builders.spec import ITEM_SUFFIX, UNKNOWN_CELL, BenchmarkSpec, Resampling, SubjectBreakdown
from idbench.evaluate_pkg.functional.bootstrap import design_ci
from idbench.evaluate_pkg.models.profiles import PLUMBING_PROFILES
from idbench.evaluate_pkg.results import REPORT_FILE
from idbench.evaluate_pkg.suites.text_alignment import TRUNCATED

#: The intervals of every aggregate: how many resamples, at what level, from which seed.
CI_RESAMPLES, CI_CONFIDENCE, CI_SEED = 1000, 0.95, 0


def resampling_of(spec: BenchmarkSpec, prompts: pd.DataFrame) -> Resampling:
    """The spec's resampling design, or prompts alone when the prompt table lacks a column the design
    reads (a hand-made or older table): never a design with no levels to draw."""
    design = spec.resampling
    return design if all(f.column in prompts.columns for f in design.factors) else Resampling()


def ci_settings(design: Resampling | None = None) -> dict[str, Any]:
    """What ``aggregates.json`` records under ``"ci"``: how its intervals were computed (the
    resampling design; prompts alone by default)."""
    design = design or Resampling()
    top = design.factors[0].name if design.prompts_nested else "prompt"
    return {
        "method": design.method,
        "unit": top,
        "factors": list(design.factor_names),
        "estimator": "mean of all known values (NaN excluded); resampled as the first-order weighted mean of the "
        "design's draws (docs/statistics.md), each drawn prompt with all its seeds",
        "n_boot": CI_RESAMPLES,
        "confidence": CI_CONFIDENCE,
        "seed": CI_SEED,
    }


def resampling_record(design: Resampling, units: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """``aggregates["resampling"]``: the design and every prompt's units, so that ``idbench compare``
    redraws the same design from the results folder alone."""
    return {
        "method": design.method,
        "factors": list(design.factor_names),
        "prompts_nested": design.prompts_nested,
        "units": {f.name: {"column": f.column, "key": f.key, "description": f.description} for f in design.factors},
        "prompt_units": units,
    }


def _as_float(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _ci(
    group: pd.DataFrame, units: dict[str, dict[str, list[str]]] | None = None, factors: tuple[str, ...] = ("prompt",)
) -> dict[str, Any]:
    """Mean and CI of one metric's rows under the resampling design ``factors`` (``units``: each
    prompt's levels of them; prompts alone by default)."""
    ci = design_ci(
        group["value"].to_numpy(),
        group["prompt_id"].to_numpy(),
        units or {},
        factors,
        CI_RESAMPLES,
        CI_CONFIDENCE,
        CI_SEED,
    )
    stats = {
        "mean": _as_float(ci.mean),
        "ci_low": _as_float(ci.low),  # None (no interval) with fewer than two units to resample
        "ci_high": _as_float(ci.high),
        "n": ci.n,
        "n_nan": ci.n_nan,
        "n_prompts": ci.n_clusters,
    }
    if set(factors) != {"prompt"}:
        stats["n_units"] = {name: count for name, count in (ci.n_levels or {}).items() if name != "prompt"}
    return stats


def image_level(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (prompt, seed, metric): the whole-image values (per-subject rows set aside)."""
    return results[results["subject"] == ""]


def aggregate(
    results: pd.DataFrame, prompts: pd.DataFrame, spec: BenchmarkSpec, references: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Means and 95 % bootstrap CIs per metric, overall, per breakdown cell and, when the spec declares
    subject breakdowns, per cell of the subjects' metadata (``"subject_breakdowns"``, see
    :func:`subject_breakdowns`; ``references`` holds the reference table's metadata columns)."""
    images = image_level(results)
    design = resampling_of(spec, prompts)
    units = design.units(prompts.to_dict("records"))
    ci = lambda group: _ci(group, units, design.factor_names)  # noqa: E731
    overall = {metric: ci(group) for metric, group in images.groupby("metric", sort=True)}
    breakdowns: dict[str, dict[str, dict[str, Any]]] = {}
    joined = images.merge(
        prompts[["prompt_id", *{c for axes in spec.breakdowns for c in axes}]], on="prompt_id", how="left"
    )
    members: dict[str, dict[str, list[str]]] = {}  # the prompts of each cell: what `idbench compare` pairs per cell
    for axes in spec.breakdowns:
        name = " x ".join(axes)
        cells: dict[str, dict[str, Any]] = {}
        members[name] = {}
        for cell, group in joined.groupby(list(axes), sort=True):
            label = " x ".join(str(v) for v in (cell if isinstance(cell, tuple) else (cell,)))
            cells[label] = {metric: ci(g) for metric, g in group.groupby("metric", sort=True)}
            members[name][label] = sorted(group["prompt_id"].unique().tolist())
        breakdowns[name] = cells
    out = {
        "overall": overall,
        "breakdowns": breakdowns,
        "ci": ci_settings(design),
        "ci_method": design.method,
        "resampling": resampling_record(design, units),
        "breakdown_prompts": members,
    }
    if spec.subject_breakdowns:
        out["subject_breakdowns"] = subject_breakdowns(results, prompts, spec, references, units, design)
    return out


def _cell_label(value: Any) -> str:
    """A metadata value as a cell label; an empty one (None, NaN, "") is the cell "unknown"."""
    if (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    ):
        return UNKNOWN_CELL
    return str(value)


def _subject_cells(
    prompts: pd.DataFrame, spec: BenchmarkSpec, axis: SubjectBreakdown, references: pd.DataFrame | None
) -> pd.DataFrame | None:
    """``prompt_id, subject, cell``: the cell of every row that ``axis`` groups; None when the data it
    reads was not given (no reference table, a prompt column missing), so the axis is left out whole."""
    needs = [axis.via or axis.field] if "image" in axis.levels else []
    needs += [spec.slot_records] if any(level != "image" for level in axis.levels) else []
    if any(c not in prompts.columns for c in needs) or (
        axis.via is not None
        and (references is None or spec.reference_id not in references.columns or axis.field not in references.columns)
    ):
        return None
    looked_up = {} if axis.via is None else dict(zip(references[spec.reference_id], references[axis.field]))

    def value(record: Any) -> str:
        # An id that names no reference is as unknown as an unannotated one.
        return _cell_label(record.get(axis.field) if axis.via is None else looked_up.get(record.get(axis.via)))

    rows = []
    for prompt in prompts.to_dict("records"):
        if "image" in axis.levels:
            rows.append((prompt["prompt_id"], "", value(prompt)))
        records = prompt.get(spec.slot_records) if spec.slot_records else None
        for record in [] if records is None else list(records):
            slot = record[spec.slot_key]
            if "slot" in axis.levels:
                rows.append((prompt["prompt_id"], slot, value(record)))
            if "item" in axis.levels:
                rows.append((prompt["prompt_id"], slot + ITEM_SUFFIX, value(record)))
    return pd.DataFrame(rows, columns=["prompt_id", "subject", "cell"])


def _cell_order(label: str) -> tuple[int, str]:
    return (label == UNKNOWN_CELL, label)  # "unknown" last


def subject_breakdowns(
    results: pd.DataFrame,
    prompts: pd.DataFrame,
    spec: BenchmarkSpec,
    references: pd.DataFrame | None = None,
    units: dict[str, dict[str, list[str]]] | None = None,
    design: Resampling | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{axis: {cell: {metric: stats}}}`` for each of the spec's ``subject_breakdowns``.

    Each per-sample row an axis groups (a person's ID-Sim, an item's DINO-Sim, a whole image's BG-Sim)
    goes to the cell of its subject's metadata. The interval resamples the spec's design with the
    prompt as the observation (``units``: each prompt's levels): a drawn prompt brings all its rows of that cell (all its seeds, all its persons of that gender), because the
    subjects of one image are no more independent than its seeds. So ``n`` counts rows (subjects x
    seeds), ``n_prompts`` the distinct prompts, and a cell of one prompt has no interval.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for axis in spec.subject_breakdowns:
        cells = _subject_cells(prompts, spec, axis, references)
        if cells is None:
            continue
        joined = results.merge(cells, on=["prompt_id", "subject"], how="inner")
        out[axis.name] = {
            label: {
                metric: _ci(g, units, (design or Resampling()).factor_names)
                for metric, g in joined[joined["cell"] == label].groupby("metric", sort=True)
            }
            for label in sorted(joined["cell"].unique(), key=_cell_order)
        }
    return out


def display_value(value: float | None, display: str) -> str:
    """A value as displayed under its convention (``idbench.builders.display``); "n/a" when missing."""
    return show_text(value, display)


def interval_text(stats: dict[str, Any], display: str, sep: str = " - ") -> str:
    """A metric's CI as displayed; a cell with fewer than two prompts has none, and says why."""
    if stats.get("ci_low") is None or stats.get("ci_high") is None:
        prompts, units = stats.get("n_prompts"), stats.get("n_units") or {}
        if prompts is not None and prompts < 2:
            return f"n/a ({prompts} prompt)"
        lone = [name for name, count in units.items() if count < 2]
        return f"n/a (1 {lone[0]})" if lone and len(units) == 1 else "n/a"
    return f"{display_value(stats['ci_low'], display)}{sep}{display_value(stats['ci_high'], display)}"


def ci_legend(aggregates: dict[str, Any]) -> str:
    """One sentence saying how the intervals were computed (older aggregates lack the record)."""
    ci = aggregates.get("ci")
    if not ci:
        return "95 % CI: bootstrap (resampling unit not recorded)."
    factors = ci.get("factors") or [ci["unit"]]
    if factors == ["prompt"]:
        how = (
            "each resample draws prompts with replacement, every seed of a drawn prompt with it, because the seeds "
            "of one prompt are not independent"
        )
    elif "prompt" not in factors:
        how = (
            f"each resample draws {ci['unit']}s with replacement, every prompt (and seed) of a drawn {ci['unit']} "
            f"with it, because the prompts of one {ci['unit']} share its reference"
        )
    else:
        how = (
            "each resample draws the prompts and, independently, the levels of every reused unit ("
            + ", ".join(f for f in factors if f != "prompt")
            + "); a prompt weighs by the draws of all its units "
            "(multi-way bootstrap: conservative)"
        )
    return (
        f"{ci['confidence']:.0%} CI: {ci['method']} ({ci['n_boot']} resamples, seed {ci['seed']}): {how}. "
        "n: images with a value (undefined ones left out and counted); docs/statistics.md says why."
    )


def ranking_metric(spec: BenchmarkSpec, computed: set[str]) -> str | None:
    """The benchmark's preferred ranking metric among those a run computed."""
    return next((m for m in spec.ranking if m in computed), None)


def metric_displays(spec: BenchmarkSpec) -> dict[str, str]:
    """Metric -> display name, a metric's chance-level diagnostic (``MetricSpec.chance``) shown like it."""
    return {
        **{m.chance: m.display for m in spec.metric_suite if m.chance},
        **{m.name: m.display for m in spec.metric_suite},
    }


def chance_text(overall: dict[str, Any], metric: str, spec: BenchmarkSpec) -> str:
    """ " (random 33.3)": a metric's chance level (its ``MetricSpec.chance`` diagnostic) to print beside
    its value, in the same display; empty for a metric without one or a run that lacks it."""
    specs = {m.name: m for m in spec.metric_suite}
    chance = specs[metric].chance if metric in specs else ""
    stats = overall.get(chance) if chance else None
    if not stats or stats.get("mean") is None:
        return ""
    return f" (random {display_value(stats['mean'], specs[metric].display)})"


def headline(summary: dict[str, Any]) -> str | None:
    """The metric a run is ranked by on its benchmark (the first of ``spec.ranking`` it computed), None
    when it computed none of them."""
    from idbench.builders.registry import get_benchmark

    return ranking_metric(get_benchmark(summary["benchmark"]), set(summary["aggregates"]["overall"]))


def verdict(summary: dict[str, Any]) -> str:
    """Whether the leaderboard ranks this run by default, in words: ``"ranked"`` or ``"not ranked by
    default: <reasons>"``, by the leaderboard's own rule (``leaderboard/ranking.py``, ``rank_rows``): copies
    of the references, no headline metric, a plumbing profile, and on a judged headline a judge that
    failed its controls or more than the documented share of its questions."""
    from idbench.builders.registry import get_benchmark
    from idbench.evaluate_pkg.judge.card import INCOMPLETE_ABOVE

    reasons = []
    copies = summary.get("copies") or {}
    if copies.get("marked"):
        reasons.append(
            f"copies references on {100 * float(copies['share']):.0f} % of images (over the "
            f"{100 * float(copies.get('mark_above_share', 0.05)):.0f} % mark; docs/copies.md)"
        )
    key = headline(summary)
    if key is None:
        reasons.append("none of the benchmark's ranking metrics was computed")
    judge = summary.get("judge") if isinstance(summary.get("judge"), dict) else {}
    if key is not None and get_benchmark(summary["benchmark"]).metric(key).judged:
        if judge.get("calibrated") is False:
            why = f": {judge['reason']}" if judge.get("reason") else ""
            reasons.append(f"its judge failed its controls{why} ({key} is judged; judge card in report.md)")
        rate = (judge.get("incomplete") or {}).get(key)
        if rate is not None:
            reasons.append(f"the judge failed on {float(rate):.0%} of {key}'s questions (over {INCOMPLETE_ABOVE:.0%})")
    if summary.get("plumbing"):
        reasons.append("a plumbing check (random weights): shown only when asked for, never a benchmark score")
    return "not ranked by default: " + "; ".join(reasons) if reasons else f"ranked (by {key})"


def _value_line(
    metric: str, overall: dict[str, Any], displays: dict[str, str], spec: BenchmarkSpec, width: int = 22
) -> str:
    stats, display = overall[metric], displays.get(metric, "raw")
    name = f"{metric + DISPLAYS[display].suffix:{width}s}"
    if stats.get("mean") is None:  # its reason on its own line, never a bare n/a
        return f"  {name} n/a: no image gave it a value ({stats.get('n_nan', 0)} undefined; report.md says why)"
    return (
        f"  {name} {display_value(stats['mean'], display):>9s}  "
        f"[{interval_text(stats, display, ', ')}]  n={stats['n']}"
        + (f" ({stats['n_prompts']} prompts)" if "n_prompts" in stats else "")
        + (f" ({stats['n_nan']} undefined)" if stats.get("n_nan") else "")
        + chance_text(overall, metric, spec)
    )


def not_run_lines(summary: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """The metrics not run, one line per reason naming them all; those that do not apply to the run's task
    (``MetricSpec.tasks``) are not listed, only counted."""
    tasks = {m.name: m.tasks for m in spec.metric_suite}
    task = summary.get("task")
    by_reason: dict[str, list[str]] = {}
    other_task = 0
    for metric, why in summary["not_run"].items():
        if task is not None and metric in tasks and task not in tasks[metric]:
            other_task += 1
            continue
        by_reason.setdefault(why, []).append(metric)
    lines = [f"  not run: {', '.join(metrics)}: {why}" for why, metrics in by_reason.items()]
    if other_task:
        lines.append(f"  ({other_task} metrics of the benchmark's other tasks do not apply to a {task} submission)")
    return lines


def format_summary(summary: dict[str, Any]) -> str:
    """The terminal's account of a run, verdict first: the headline metric with its interval, whether the
    leaderboard ranks the run by default and why not, then the other metrics in the benchmark's order (each
    name carrying its display's unit, e.g. ``aesthetic (x10)``), what was not run (one line per reason),
    and the copy check."""
    from idbench.builders.registry import get_benchmark

    spec = get_benchmark(summary["benchmark"])
    displays = metric_displays(spec)
    head = f"{spec.title} / {summary['submission'].get('model', '?')} / profile {summary['profile']}"
    lines = [head + ("  [PLUMBING CHECK: random weights]" if summary["plumbing"] else "")]
    overall = summary["aggregates"]["overall"]
    key = headline(summary)
    width = min(32, max((len(m + DISPLAYS[displays.get(m, "raw")].suffix) for m in overall), default=0) + 1)
    if key is not None:
        lines.append(_value_line(key, overall, displays, spec, width) + "   <- headline")
    lines.append(f"  verdict: {verdict(summary)}")
    order = {m.name: k for k, m in enumerate(spec.metric_suite)}
    lines += [_value_line(m, overall, displays, spec, width) for m in order if m in overall and m != key]
    diagnostics = sorted(m for m in overall if m not in order)
    if diagnostics:
        lines.append("  diagnostics (the counts and shares behind the metrics):")
        lines += [_value_line(m, overall, displays, spec, width) for m in diagnostics]
    lines += not_run_lines(summary, spec)
    copies = summary.get("copies") or {}
    if copies.get("flagged"):
        floored = (copies.get("floored") or {}).get("images", 0)
        lines.append(
            f"  copies: {copies['flagged']} of {copies['images']} images flagged; {floored} scored the floor in the "
            "ranked (*_floored) columns" + ("; the run is marked" if copies.get("marked") else "")
        )
    return "\n".join(lines)


def missing_evidence_lines(overall: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """The report's "Missing evidence" section: per metric that declares one, its count per image.

    Those samples (or references) are NaN and outside the metric's mean, never a 0 or a top score.
    """
    rows = []
    for m in spec.metric_suite:
        stats = overall.get(m.missing_evidence) if m.missing_evidence else None
        if m.name in overall and stats and stats.get("mean") is not None:
            total = stats["mean"] * stats["n"]
            rows.append(
                f"- `{m.name}`: `{m.missing_evidence}` {stats['mean']:.4f} per image, {total:g} in all "
                f"over {stats['n']} images (NaN, left out of the mean; not a 0)"
            )
    return ["", "Missing evidence:", "", *rows] if rows else []


def copies_lines(summary: dict[str, Any]) -> list[str]:
    """The report's "Copy check" section: how many images showed a reference, how many of them scored
    the floor in the ranked columns (``summary["copies"]["floored"]``, evaluate_pkg/floors.py), and
    whether the run is marked. Nothing for a run without a copy check (a ranking of references)."""
    copies = summary.get("copies")
    if not copies:
        return []
    floored = copies.get("floored") or {}
    columns = floored.get("columns") or {}
    lines = [
        "",
        "## Copy check",
        "",
        f"{copies['flagged']} of {copies['images']} images ({100 * copies['share']:.1f} %) show a reference copied or "
        "pasted (`copy.flag`; docs/copies.md).",
    ]
    if columns:
        lines += [
            "",
            f"{floored.get('images', 0)} images scored the floor because they were flagged: a flagged image "
            "scores its metric's worst possible value in every ranked column, so a copy earns nothing there; "
            "the metric keeps its own value beside it.",
            "",
            "| ranked column | floor | the metric, unchanged |",
            "| --- | --- | --- |",
            *(f"| `{twin}` | {entry['floor']:g} | `{entry['of']}` |" for twin, entry in columns.items()),
        ]
    share = copies.get("mark_above_share")
    limit = f"{100 * share:g} %" if isinstance(share, (int, float)) else "the limit"
    lines += [
        "",
        f"**Marked**: more than {limit} of the images are flagged; the leaderboard shows the run apart, not "
        "ranked by default."
        if copies.get("marked")
        else f"Not marked: at most {limit} of the images are flagged.",
    ]
    return lines


FLAGGED_ROWS = 50  # of the report's table: every flag is in judge_evidence.parquet (metric "copies")


def flagged_lines(flagged: list[dict[str, Any]]) -> list[str]:
    """The flagged (image, reference) pairs: where and how the reference was found, and its figure (the
    reference beside the generation, the place found outlined) for the first of them."""
    if not flagged:
        return []
    lines = [
        "",
        "### Flagged images",
        "",
        "| prompt | seed | reference | found by | what was found | figure |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for entry in flagged[:FLAGGED_ROWS]:
        reference = entry["reference"] + (" (not in the prompt)" if entry.get("foreign") else "")
        figure = f"[figure]({entry['figure']})" if entry.get("figure") else ""
        cells = (entry["prompt_id"], entry["seed"], reference, ", ".join(entry["by"]), entry["transformation"])
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + f" | {figure} |")
    if len(flagged) > FLAGGED_ROWS:
        lines += ["", f"... and {len(flagged) - FLAGGED_ROWS} more pairs in judge_evidence.parquet (metric `copies`)."]
    return lines


def coverage(stats: dict[str, Any]) -> float | None:
    """The share of the samples with a value (n over n + undefined); None when there are none."""
    total = stats.get("n", 0) + stats.get("n_nan", 0)
    return stats.get("n", 0) / total if total else None


def judged_note(summary: dict[str, Any], spec: BenchmarkSpec, metric: str, stats: dict[str, Any]) -> str:
    """What stands beside a judged metric's value: its coverage, and "incomplete" / "uncalibrated judge"
    marks (judge/card.py); empty for any other metric."""
    specs = {m.name: m for m in spec.metric_suite}
    if metric not in specs or not specs[metric].judged:
        return ""
    judge = summary.get("judge") or {}
    share = coverage(stats)
    parts = [f"coverage {share:.0%}" if share is not None else "coverage n/a"]
    if specs[metric].itt_twin:  # the paper's, which leaves out what it could not judge
        parts.append(f"failures left out, not ranked: see `{specs[metric].itt_twin}`")
    rate = (judge.get("incomplete") or {}).get(metric)
    if rate is not None:
        parts.append(f"**incomplete**: judge failures {rate:.1%}")
    if judge.get("calibrated") is False:
        parts.append("**uncalibrated judge**")
    return " (" + "; ".join(parts) + ")"


def judge_card_lines(summary: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """The report's "Judge card" section: who judged, how it did on the controls, the judged metrics'
    coverage, failure rates and marks. Nothing for a run without a judge."""
    judge = summary.get("judge")
    if not judge:
        return []
    from idbench.evaluate_pkg.judge.card import ACCURACY_FLOOR, INCOMPLETE_ABOVE

    overall = summary["aggregates"]["overall"]
    card = judge.get("card")
    lines = [
        "",
        "## Judge card",
        "",
        f"Judge `{judge.get('key') or judge.get('model')}`. "
        "Judged metrics of different judges are not comparable and are never ranked together.",
    ]
    if card is None:
        lines += ["", "No control was asked in this run (no judged metric with controls), so the judge is not checked."]
    else:
        verdict = (
            "**calibrated**"
            if card["calibrated"]
            else f"**uncalibrated judge**: {card['reason']}; its judged metrics are shown, not ranked by default"
        )
        show = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        lines += [
            "",
            f"Controls with known answers (docs/judge.md), asked through the same judge and code paths: "
            f"accuracy {show(card['accuracy'])} (floor {card.get('floor', ACCURACY_FLOOR)}), yes-rate "
            f"{show(card['yes_rate'])} (a truthful judge: {show(card.get('expected_yes_rate'))}), failure rate "
            f"{card['failure_rate']:.3f}, {card['repeat']['n']} repeated requests agreeing "
            f"{show(card['repeat']['agreement'])}: {verdict}.",
            "",
            "| control | expected | n | correct | failed | accuracy |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for kind, entry in card["controls"].items():
            lines.append(
                f"| `{kind}` | {entry.get('expected', '')} | {entry['n']} | {entry['correct']} | "
                f"{entry['failed']} | {show(entry['accuracy'])} |"
            )
    from idbench.evaluate_pkg.judge.card import failure_rates

    judged = [m.name for m in spec.metric_suite if m.judged and m.name in overall]
    rates = failure_rates(overall, judged)
    if judged:
        lines += [
            "",
            f"Judged metrics: coverage is the share of samples with a value; a metric whose judge failed on "
            f"more than {INCOMPLETE_ABOVE:.0%} of its questions is incomplete.",
            "",
            "| metric | coverage | judge failures | status |",
            "| --- | --- | --- | --- |",
        ]
        for metric in judged:
            share, rate = coverage(overall[metric]), rates.get(metric)
            status = [
                s
                for s, on in (
                    ("incomplete", metric in (judge.get("incomplete") or {})),
                    ("uncalibrated judge", judge.get("calibrated") is False),
                )
                if on
            ]
            lines.append(
                f"| `{metric}` | {'n/a' if share is None else f'{share:.1%}'} | "
                f"{'n/a' if rate is None else f'{rate:.1%}'} | {', '.join(status) or 'ok'} |"
            )
    return lines


LEVEL_ROWS = {"image": "whole-image rows", "slot": "per-subject rows", "item": "per-item rows"}


def subject_breakdown_lines(aggregates: dict[str, Any], spec: BenchmarkSpec, displays: dict[str, str]) -> list[str]:
    """The report's section per subject breakdown: each cell's means, with its rows and prompts counted.

    The counts are the cell's largest over its metrics: rows are subjects x seeds (a prompt with two
    women adds two rows per seed to "female"), prompts the independent units its intervals resample.
    """
    lines: list[str] = []
    described = {b.name: b for b in spec.subject_breakdowns}
    for name, cells in (aggregates.get("subject_breakdowns") or {}).items():
        axis = described.get(name)
        metrics = [m.name for m in spec.metric_suite if any(m.name in stats for stats in cells.values())]
        if not metrics:
            continue
        what = f" ({axis.description}; {', '.join(LEVEL_ROWS[level] for level in axis.levels)})" if axis else ""
        lines += [
            "",
            f"## By {name}",
            "",
            f'Cells by {name}{what}; an unannotated reference is the cell "{UNKNOWN_CELL}". '
            "Intervals resample the benchmark's design (above), each drawn prompt with all its rows of the cell.",
            "",
            "| " + name + " | " + " | ".join(f"`{m}`" for m in metrics) + " | rows | prompts |",
            "| --- |" + " --- |" * (len(metrics) + 2),
        ]
        for cell, stats in cells.items():
            values = [
                f"{display_value(stats[m]['mean'], displays.get(m, 'raw'))} [{interval_text(stats[m], displays.get(m, 'raw'))}]"
                if m in stats
                else ""
                for m in metrics
            ]
            rows = max((stats[m]["n"] + stats[m]["n_nan"] for m in metrics if m in stats), default=0)
            prompts = max((stats[m]["n_prompts"] for m in metrics if m in stats), default=0)
            lines.append(f"| {cell} | " + " | ".join(values) + f" | {rows} | {prompts} |")
    return lines


def _report_head(summary: dict[str, Any], spec: BenchmarkSpec, displays: dict[str, str]) -> list[str]:
    """The report's opening: the title, the plumbing warning, the headline metric, the verdict and how the
    numbers were made."""
    lines = [f"# {spec.title}: {summary['submission'].get('model', '?')}", ""]
    if summary["plumbing"]:
        what = PLUMBING_PROFILES.get(summary["profile"], "random weights")
        lines += [
            f"> **Plumbing check.** Scored with the `{summary['profile']}` profile: {what}. These numbers test "
            "the pipeline, not the model.",
            "",
        ]
    key = headline(summary)
    overall = summary["aggregates"]["overall"]
    if key is not None:
        display = displays.get(key, "raw")
        lines += [
            f"**`{key}`** {display_value(overall[key]['mean'], display)} "
            f"(95 % CI {interval_text(overall[key], display)}): the benchmark's headline metric.",
            "",
        ]
    return lines + [
        f"**Verdict:** {verdict(summary)}.",
        "",
        f"Profile `{summary['profile']}`, metric suite {summary['suite_version']}, "
        f"{summary['images']} generated images.",
        "",
        ci_legend(summary["aggregates"]),
        "",
        "Values are shown under each metric's display convention (last column; evidence in "
        "docs/display-conventions.md); results.parquet and aggregates.json hold the raw values.",
        "",
    ]


def _metric_table(summary: dict[str, Any], spec: BenchmarkSpec, displays: dict[str, str]) -> list[str]:
    """Every overall value as a Markdown table: the headline first, then the suite in its order, then the
    diagnostics behind it."""
    specs = {m.name: m for m in spec.metric_suite}
    higher = {m.name: m.higher_is_better for m in spec.metric_suite}
    chance_of = {m.chance: m.name for m in spec.metric_suite if m.chance}
    overall = summary["aggregates"]["overall"]
    lines = [
        "| metric | value | 95 % CI | n | prompts | better | shown as |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {name: k for k, name in enumerate(dict.fromkeys([headline(summary), *specs]))}
    for metric in sorted(overall, key=lambda m: (m not in order, order.get(m, 0), m)):
        stats = overall[metric]
        display = displays.get(metric, "raw")
        better = {True: "higher", False: "lower"}.get(higher.get(metric), "")
        nan = f" ({stats['n_nan']} undefined)" if stats["n_nan"] else ""
        shown_as = (
            specs[metric].display_label
            if metric in specs
            else f"chance level of `{chance_of[metric]}`, shown like it"
            if metric in chance_of
            else "raw value"
        )
        value = (
            display_value(stats["mean"], display)
            + chance_text(overall, metric, spec)
            + judged_note(summary, spec, metric, stats)
            + (
                f" (copies keep their value, not ranked: see `{specs[metric].floored_twin}`)"
                if metric in specs and specs[metric].floored_twin
                else ""
            )
        )
        lines.append(
            f"| `{metric}` | {value} | {interval_text(stats, display)} | "
            f"{stats['n']}{nan} | {stats.get('n_prompts', '')} | {better} | {shown_as} |"
        )
    return lines


def write_report(
    folder: Path, summary: dict[str, Any], spec: BenchmarkSpec, flagged: list[dict[str, Any]] | None = None
) -> list[str]:
    """README-style Markdown plus PNG plots; returns the files written (relative names). ``flagged``: the
    copy check's flagged pairs and their figures (copy_figures.write_copy_figures), listed under the check."""
    displays = metric_displays(spec)
    lines = _report_head(summary, spec, displays) + _metric_table(summary, spec, displays)
    lines += missing_evidence_lines(summary["aggregates"]["overall"], spec)
    lines += copies_lines(summary)
    lines += flagged_lines(flagged or [])
    lines += judge_card_lines(summary, spec)
    cut = summary["aggregates"]["overall"].get(TRUNCATED)
    if cut and cut.get("mean") is not None:
        lines += [
            "",
            f"`clip_t` read {cut['mean']:.0%} of the samples' prompts cut at CLIP's 77 tokens, as the papers' "
            "CLIP-T does (`clip_t.truncated`, by group size below); `clip_t_whole` reads every prompt whole.",
        ]
    if summary["not_run"]:
        lines += ["", "Not run:", ""] + [f"- {line.strip()}" for line in not_run_lines(summary, spec)]
    for axes, cells in summary["aggregates"]["breakdowns"].items():
        metrics = sorted({m for stats in cells.values() for m in stats})
        lines += [
            "",
            f"## By {axes}",
            "",
            "| " + axes + " | " + " | ".join(f"`{m}`" for m in metrics) + " |",
            "| --- |" + " --- |" * len(metrics),
        ]
        for cell, stats in cells.items():
            values = [display_value(stats[m]["mean"], displays.get(m, "raw")) if m in stats else "" for m in metrics]
            lines.append(f"| {cell} | " + " | ".join(values) + " |")
    lines += subject_breakdown_lines(summary["aggregates"], spec, displays)
    lines += ["", "## Models", ""] + [
        f"- {role}: `{m['name']}` ({m['hub_id'] or 'local'}@{m['revision'] or '-'}; weights key `{m['key']}`)"
        for role, m in summary["models"].items()
    ]
    if summary.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {k}: {v}" for k, v in summary["notes"].items()]
    plots = _plots(folder, summary, spec)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    (folder / REPORT_FILE).write_text("\n".join(lines) + "\n")
    return [REPORT_FILE, *plots]


def _plots(folder: Path, summary: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """Metric vs group size (line per metric) and type x style heat maps, as PNG files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    tag = " (plumbing check)" if summary["plumbing"] else ""
    suite = {m.name for m in spec.metric_suite}  # counts such as faces_detected stay in the tables
    for axes, cells in summary["aggregates"]["breakdowns"].items():
        if axes in ("n_subjects", "n_persons"):
            metrics = sorted({m for stats in cells.values() for m in stats if m in suite})
            sizes = sorted(cells, key=int)
            fig, ax = plt.subplots(figsize=(6, 4))
            for metric in metrics:
                means = [cells[s].get(metric, {}).get("mean") for s in sizes]
                ax.plot([int(s) for s in sizes], [np.nan if v is None else v for v in means], marker="o", label=metric)
            ax.set_xticks([int(s) for s in sizes])
            ax.set_xlabel(axes)
            ax.set_ylabel("raw value")
            ax.set_title(f"{spec.title}: metrics vs {axes}{tag}")
            ax.legend(fontsize=7)
            fig.tight_layout()
            name = f"by_{axes}.png"
            fig.savefig(folder / name, dpi=100)
            plt.close(fig)
            written.append(name)
        if axes == "type x style":
            types = sorted({c.split(" x ")[0] for c in cells})
            styles = sorted({c.split(" x ")[1] for c in cells})
            for metric in sorted({m for stats in cells.values() for m in stats if m in suite}):
                grid = np.full((len(types), len(styles)), np.nan)
                for c, stats in cells.items():
                    t, s = c.split(" x ")
                    value = stats.get(metric, {}).get("mean")
                    grid[types.index(t), styles.index(s)] = np.nan if value is None else value
                fig, ax = plt.subplots(figsize=(5, 4))
                image = ax.imshow(grid, cmap="viridis")
                ax.set_xticks(range(len(styles)), styles)
                ax.set_yticks(range(len(types)), types)
                for i in range(len(types)):
                    for j in range(len(styles)):
                        if not np.isnan(grid[i, j]):
                            ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", color="w", fontsize=8)
                fig.colorbar(image)
                ax.set_title(f"{metric} by type x style{tag}")
                fig.tight_layout()
                name = f"heatmap_{metric}.png"
                fig.savefig(folder / name, dpi=100)
                plt.close(fig)
                written.append(name)
    return written
