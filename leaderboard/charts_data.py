"""The long tables the benchmark and model pages draw their charts from.

A chart is drawn from a plain frame with one row per mark and the columns its tooltip shows (model, value,
interval, the prompts behind the value), so the charts can be tested without a browser. This module builds
those frames from the overall and per-group-size aggregates, in the page's units (:func:`.display.in_units`)
so that a chart reads like the table beside it, and says when a chart would be empty or flat (every model
at one value) so the page can write that instead. The radar's axes, oriented so that outward is better,
are here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from idbench.builders.spec import BenchmarkSpec
from idbench.leaderboard.display import display_name, in_units
from idbench.leaderboard.result_rows import as_number, model_labels, visible_results


def _cell_n(stats: Mapping[str, Any]) -> float:
    return as_number(stats.get("n_prompts", stats.get("n")))


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
