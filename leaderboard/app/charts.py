"""The benchmark page's charts, drawn with Altair (Vega-Lite) as SVG.

Each chart is built from the rows the ranked table shows, in the units the sidebar's switch selects,
and comes with the tooltip a reader hovers for (model, value, interval, n). A chart with nothing to
compare says so in one line instead of drawing an empty panel.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from idbench.builders.spec import BenchmarkSpec
from idbench.leaderboard import query
from idbench.leaderboard.app.widgets import units_raw

LEGEND = alt.Legend(orient="bottom", columns=3, labelLimit=240, title=None)  # under the chart: never over the data
CHART_HEIGHT = 320


def _draw(chart: alt.TopLevelMixin, key: str, stretch: bool = True) -> None:
    """``st.altair_chart`` drawing SVG rather than vega-embed's default canvas (through the spec's
    ``usermeta.embedOptions``, which vega-embed reads): axis labels, titles and legends are then text
    in the page, which a reader can select, a screen reader can reach and the browser tests can read.
    The charts hold a few hundred marks at most, so SVG costs nothing noticeable."""
    chart = chart.properties(usermeta={"embedOptions": {"renderer": "svg"}})
    if stretch:
        st.altair_chart(chart, width="stretch", key=key)
    else:
        st.altair_chart(chart, key=key)


def _tooltip(value_title: str) -> list:
    return [
        alt.Tooltip("model:N"),
        alt.Tooltip("value:Q", title=value_title, format=".4~f"),
        alt.Tooltip("low:Q", title="interval low", format=".4~f"),
        alt.Tooltip("high:Q", title="interval high", format=".4~f"),
        alt.Tooltip("n:Q", title="n (prompts)"),
    ]


def plots(results: pd.DataFrame, spec: BenchmarkSpec, metric: str) -> None:
    """The benchmark's charts (Vega-Lite through Altair: tooltips with model, value, interval and n), each
    from the rows the table shows (``results`` is already filtered), in the app's units. A chart with
    nothing to compare is replaced by one line saying why."""
    raw = units_raw()
    name = query.display_name(spec, metric, raw)
    _degradation(results, spec, metric, name, raw)
    _type_style(results, spec, metric, name, raw)
    _clip_vs_identity(results, spec, raw)
    _collapse_rates(results, spec, raw)
    _profile(results, spec, raw)


def _degradation(results: pd.DataFrame, spec: BenchmarkSpec, metric: str, name: str, raw: bool) -> None:
    """The ranked metric per group size, one line and interval band per model."""
    by_size = query.degradation_frame(results, spec, metric, raw)
    if not by_size.empty:
        axis = spec.group_size_axis or "N"
        st.subheader(f"{name} as the number of subjects grows")
        base = alt.Chart(by_size).encode(
            x=alt.X("N:O", title=f"{axis} (subjects in the prompt)", axis=alt.Axis(labelAngle=0)),
            color=alt.Color("model:N", legend=LEGEND),
        )
        band = base.mark_area(opacity=0.15).encode(
            y=alt.Y("low:Q", title=name, scale=alt.Scale(zero=False)), y2="high:Q"
        )
        line = base.mark_line(point=True).encode(y="value:Q", tooltip=_tooltip(name))
        _draw((band + line).properties(height=CHART_HEIGHT), "chart-degradation")
        st.caption(
            f"Bands: each cell's interval ({len(by_size['model'].unique())} model(s)); hover a point for its values."
        )


def _type_style(results: pd.DataFrame, spec: BenchmarkSpec, metric: str, name: str, raw: bool) -> None:
    """The ranked metric per subject type x style cell, a heat map of the models."""
    matrix = query.type_style_matrix(results, spec, metric, include_plumbing=True)
    if not matrix.empty:
        st.subheader(f"{name} per subject type x style")
        cells = matrix.rename_axis("model").reset_index().melt(id_vars="model", var_name="cell", value_name="raw")
        cells["value"] = query.in_units(cells["raw"], spec, metric, raw)
        chart = (
            alt.Chart(cells.drop(columns="raw"))
            .mark_rect()
            .encode(
                # Twelve cells: upright labels overlap and Vega drops every other one (3 of 12 were
                # left); vertical ones never overlap, and labelOverlap=False keeps all of them.
                x=alt.X(
                    "cell:N", title="type x style", axis=alt.Axis(labelAngle=-90, labelLimit=220, labelOverlap=False)
                ),
                y=alt.Y("model:N", title=None, axis=alt.Axis(labelLimit=240)),
                color=alt.Color("value:Q", title=name, legend=alt.Legend(orient="bottom")),
                tooltip=[
                    alt.Tooltip("model:N"),
                    alt.Tooltip("cell:N"),
                    alt.Tooltip("value:Q", title=name, format=".4~f"),
                ],
            )
        )
        _draw(chart, "chart-type-style")


def _clip_vs_identity(results: pd.DataFrame, spec: BenchmarkSpec, raw: bool) -> None:
    """Text alignment (CLIP-T) against the first identity metric of the ranking, one point per model."""
    identity = next((m for m in spec.ranking if m not in ("clip_t", "clip_t_floored")), None)
    if identity is not None and any("clip_t" in (r.get("overall") or {}) for r in results["aggregates"]):
        points = query.scatter_frame(results, spec, "clip_t", identity, raw)
        x, y = query.display_name(spec, "clip_t", raw), query.display_name(spec, identity, raw)
        st.subheader(f"Text alignment (CLIP-T) vs identity ({identity})")
        if points.empty:
            st.text(f"CLIP-T vs {identity}: no shown model has both values.")
        else:
            chart = (
                alt.Chart(points)
                .mark_circle(size=90)
                .encode(
                    # Vega's own tick format (from the tick step): "~g" wrote 80 as "8e+1".
                    x=alt.X(f"{x}:Q", scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=6)),
                    y=alt.Y(f"{y}:Q", scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=6)),
                    color=alt.Color("model:N", legend=LEGEND),
                    tooltip=[alt.Tooltip("model:N")]
                    + [alt.Tooltip(f"{c}:Q", format=".4~f") for c in points.columns if c != "model"],
                )
            )
            _draw(chart.properties(height=CHART_HEIGHT), "chart-clip-vs-identity")


def _collapse_rates(results: pd.DataFrame, spec: BenchmarkSpec, raw: bool) -> None:
    """The Subject Collapse Rate at each of the suite's thresholds, grouped bars per model."""
    # The paper's rate at each threshold (a copy-floored twin is a ranked column, not a threshold).
    scr = [m.name for m in spec.metric_suite if m.name.startswith("scr@") and m.floor is None]
    rates = query.overall_frame(results, spec, scr, raw)
    if scr and not rates.empty:
        st.subheader("Subject Collapse Rate at each threshold")
        why = query.nothing_to_show(rates, "Subject Collapse Rate")
        if why:
            st.text(why)
        else:
            chart = (
                alt.Chart(rates)
                .mark_bar()
                .encode(
                    x=alt.X("model:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=200)),
                    xOffset="metric:N",
                    y=alt.Y("value:Q", title="share of references collapsed"),
                    color=alt.Color("metric:N", legend=LEGEND, title=None),
                    tooltip=[alt.Tooltip("metric:N", title="threshold")] + _tooltip("rate"),
                )
            )
            _draw(chart.properties(height=CHART_HEIGHT), "chart-scr")


def _profile(results: pd.DataFrame, spec: BenchmarkSpec, raw: bool) -> None:
    """Every metric of the suite, one small panel each (with its own scale) and the intervals as rules."""
    profile = query.overall_frame(results, spec, [m.name for m in spec.metric_suite], raw)
    flat = query.flat_metrics(profile)
    if not profile.empty and profile["metric"].nunique() >= 2:
        st.subheader("Profile: every metric, one panel each")
        if flat:  # an empty panel says nothing: one line instead
            st.text(
                "Not drawn, every model shown has the same value: "
                + "; ".join(f"{m} = {v:g}" for m, v in flat.items())
                + "."
            )
        profile = profile[~profile["metric"].isin(list(flat))]
    # A metric the rows hold but no model shown has a value for (bg_sim where every image is foreground)
    # would be an empty panel: named in one line instead.
    valued = set(profile.dropna(subset=["value"])["metric"]) if not profile.empty else set()
    empty = list(dict.fromkeys(m for m in profile["metric"] if m not in valued)) if not profile.empty else []
    if empty:
        st.text("Not drawn, no model shown has a value (each model's report says why): " + ", ".join(empty) + ".")
    profile = profile[profile["metric"].isin(valued)] if not profile.empty else profile
    if not profile.empty and profile["metric"].nunique() >= 1:
        bars = (
            alt.Chart()
            .mark_bar()
            .encode(
                x=alt.X("model:N", title=None, axis=alt.Axis(labels=False, ticks=False)),
                y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
                color=alt.Color("model:N", legend=LEGEND),
                tooltip=_tooltip("value"),
            )
        )
        errors = alt.Chart().mark_rule().encode(x="model:N", y="low:Q", y2="high:Q")
        chart = (
            alt.layer(bars, errors, data=profile)
            .properties(width=150, height=120)
            .facet(facet=alt.Facet("metric:N", title=None), columns=4)
            .resolve_scale(y="independent")
        )
        _draw(chart, "chart-profile", stretch=False)
        st.caption(
            "Each panel has its own scale (the metrics' units differ); a lower-is-better metric (a collapse rate) "
            "is better short. Rules: each value's interval."
        )
