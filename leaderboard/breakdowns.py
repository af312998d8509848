"""The breakdown cells of a benchmark's results: which ones exist, which one a ranking is of, and the tables by cell.

A benchmark breaks its aggregates down by axes of its prompts (group size, scene, type x style) and, for
some, by the references' metadata. This module owns everything that reads those cells rather than the
overall values: the axes a page filters on and the values they take, the default cell (a benchmark that
ranks within one group size first), what a group-size choice means in words (including each size's weight
in the pooled mean), the stored cell a set of filters selects, the per-group-size and type x style tables,
one result's per-axis breakdown tables and its who-became-whom summary by group size. The ranking takes
its cell from here; nothing here ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from idbench.builders.spec import UNKNOWN_CELL, BenchmarkSpec
from idbench.leaderboard.result_rows import CI_HIGH, CI_LOW, as_number, label_order, model_labels, visible_results

# --- the axes, and the cell a ranking is of -------------------------------------------------------


def filter_axes(spec: BenchmarkSpec) -> list[str]:
    """Every axis the benchmark breaks results down by (``n_subjects``, ``scene``, ``type``...), in order."""
    axes: list[str] = []
    for breakdown in spec.breakdowns:
        axes += [axis for axis in breakdown if axis not in axes]
    return axes


def filter_options(results: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, list[str]]:
    """The values each axis takes in the stored breakdowns (labels as stored, e.g. ``"4"``), sorted."""
    options: dict[str, set[str]] = {axis: set() for axis in filter_axes(spec)}
    for aggregates in results.get("aggregates", []):
        for breakdown in spec.breakdowns:
            for label in aggregates.get("breakdowns", {}).get(" x ".join(breakdown), {}):
                for axis, value in zip(breakdown, label.split(" x ")):
                    options[axis].add(value)
    return {axis: sorted(values, key=label_order) for axis, values in options.items()}


POOLED = "all N (pooled)"  # how the choice of no group size is labelled wherever a group size is chosen


def group_size_label(value: Any) -> str:
    """A group-size choice as the page shows it: ``"N = 2"``; None (every prompt) is :data:`POOLED`."""
    return POOLED if value is None else f"N = {value}"


def group_size_axis(spec: BenchmarkSpec) -> str | None:
    """The breakdown that counts subjects (the x axis of "metric vs N"), if the spec has one."""
    return spec.group_size_axis


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
            return {size: counts[size] / total for size in sorted(counts, key=label_order)}
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


# --- tables by cell -------------------------------------------------------------------------------


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
                rows.append((label, int(size), as_number(s["mean"]), as_number(s["ci_low"]), as_number(s["ci_high"])))
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
        matrix[label] = {cell: as_number((stats.get(metric) or {}).get("mean")) for cell, stats in cells.items()}
    out = pd.DataFrame.from_dict(matrix, orient="index")
    return out.reindex(columns=sorted(out.columns))


def breakdown_tables(row: Mapping[str, Any], spec: BenchmarkSpec, intervals: bool = False) -> dict[str, pd.DataFrame]:
    """One result's per-axis breakdowns: ``{breakdown name: table cells x metrics (raw means)}``, the
    prompt-column breakdowns first, then the subject breakdowns (``aggregates["subject_breakdowns"]``:
    cells by the references' metadata, "unknown" last) when the result has them. ``intervals`` adds each
    metric's ``"<metric> ci_low"`` and ``"<metric> ci_high"`` (NaN where the cell has none: one prompt), as
    :func:`~.display.display_table` takes them."""
    aggregates = row.get("aggregates") or {}
    by_subject = aggregates.get("subject_breakdowns") or {}
    named = [(" x ".join(b), aggregates.get("breakdowns", {}).get(" x ".join(b), {})) for b in spec.breakdowns]
    # A result scored before an axis existed has no table for it, rather than an empty one.
    named += [(b.name, by_subject[b.name]) for b in spec.subject_breakdowns if b.name in by_subject]
    out = {}
    for name, cells in named:
        table = pd.DataFrame.from_dict(
            {cell: {m: as_number(s.get("mean")) for m, s in stats.items()} for cell, stats in cells.items()},
            orient="index",
        )
        if not table.empty:
            table = table.loc[
                sorted(
                    table.index, key=lambda label: [(v == UNKNOWN_CELL, *label_order(v)) for v in label.split(" x ")]
                )
            ]
            table = table[[m.name for m in spec.metric_suite if m.name in table.columns]]
            if intervals:
                table = _with_intervals(table, cells)
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


def _with_intervals(table: pd.DataFrame, cells: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """``table`` (cells x metric means) with each metric's interval bounds beside it, from the cells' stats."""
    columns = {}
    for metric in table.columns:
        columns[metric] = table[metric]
        for suffix, key in ((CI_LOW, "ci_low"), (CI_HIGH, "ci_high")):
            columns[metric + suffix] = [as_number((cells[c].get(metric) or {}).get(key)) for c in table.index]
    return pd.DataFrame(columns, index=table.index)


# --- who became whom (CogCanvas, suite 0.3 on) ----------------------------------------------------

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
    rows = {label: cells[label] for label in sorted(cells, key=label_order)} | {WHO_ALL: overall}
    table = pd.DataFrame.from_dict(
        {label: _who_row(stats) for label, stats in rows.items()}, orient="index", columns=columns
    )
    table.index.name = "N"
    return table


def _who_row(stats: Mapping[str, Any]) -> dict[str, float]:
    row = {name: as_number((stats.get(WHO_PREFIX + name) or {}).get("mean")) for name in WHO_COUNTS}
    # Every count is recorded for every image, so any one of them says how many images the cell has.
    row["images"] = as_number((stats.get(WHO_PREFIX + "found") or {}).get("n"))
    return row
