"""A benchmark's leaderboard page: the ranked table with its controls, the CSV and the charts.

One page function serves every registered benchmark (main.py records which one the navigation chose).
The page is drawn in sections: the controls (each taking its first value from the link), the link
written back to the address bar, the ranked table with the rows shown apart, the CSV, the charts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from idbench.builders.registry import get_benchmark
from idbench.builders.spec import BenchmarkSpec
from idbench.leaderboard import query
from idbench.leaderboard.app import charts
from idbench.leaderboard.app.data import current_results, stored_rank_intervals
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.app.widgets import (
    ALL,
    CURRENT_BENCHMARK,
    benchmark_names,
    initial,
    link_notes,
    parse_bool,
    ranked_frame,
    stored_text,
    track_choice,
    units_raw,
)

MAX_SEARCH = 100  # characters of the model search box (and of a link's ``search``)


def current_benchmark_page() -> None:
    """The page of the benchmark the navigation selected (the first one when none was recorded)."""
    benchmark_page(st.session_state.get(CURRENT_BENCHMARK) or benchmark_names()[0])


@dataclass
class _Choices:
    """What the page's controls hold; ``url_filters`` keeps a filter only where it is not the default."""

    metric: str
    default_metric: str
    metrics: list[str]
    filters: dict
    url_filters: dict
    family: str | None
    search: str
    picked: list[str]
    plumbing: bool
    incomplete: bool
    show_plumbing: bool
    show_incomplete: bool
    judge: str | None
    include: dict[str, bool]
    judge_param: dict[str, str | None]


def benchmark_page(benchmark: str) -> None:
    """Ranked table with metric, filters, plumbing switch, model search and column choice; CSV download;
    the benchmark's plots. Every choice is read from and written to the URL (see "deep links" in widgets.py)."""
    spec = get_benchmark(benchmark)
    st.title(spec.title)
    st.caption(spec.summary)
    notes: list[str] = []
    track = track_choice(spec, f"{benchmark}-track", notes)
    results = current_results(benchmark, track)
    if results.empty:
        link_notes(notes)
        st.info("No scored submissions yet.")
        return

    choices = _controls(benchmark, results, spec, notes)
    link_notes(notes)
    _write_link(choices, spec, track)
    table = _table_section(benchmark, results, spec, track, choices)
    if table is None:
        return
    _csv_section(benchmark, results, spec, table, choices)
    if table.empty:
        st.info(
            _hidden_note(results, spec, choices.family)
            if not choices.search.strip()
            else "No model name contains that text."
        )
        return
    shown_ids = set(table["submission"])
    charts.plots(results[results["submission_id"].isin(shown_ids)], spec, choices.metric)


def _controls(benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, notes: list[str]) -> _Choices:
    """Draw the page's controls in their order: the ranking metric, a filter per axis, the model family,
    the search box and metric columns, the two row switches, the judge's controls."""
    metrics = query.available_metrics(results, spec)
    metric, default_metric = _metric_select(benchmark, results, spec, notes)
    filters, url_filters = _filter_selects(benchmark, results, spec, notes)
    family = _family_select(benchmark, results, notes)
    search, picked = _search_and_columns(benchmark, spec, metrics, notes)
    plumbing, incomplete, show_plumbing, show_incomplete = _row_switches(benchmark, results, spec, notes)
    judge, include, judge_param = _judge_controls(benchmark, results, spec, metric, picked, notes)
    return _Choices(
        metric=metric,
        default_metric=default_metric,
        metrics=metrics,
        filters=filters,
        url_filters=url_filters,
        family=family,
        search=search,
        picked=picked,
        plumbing=plumbing,
        incomplete=incomplete,
        show_plumbing=show_plumbing,
        show_incomplete=show_incomplete,
        judge=judge,
        include=include,
        judge_param=judge_param,
    )


def _metric_select(benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, notes: list[str]) -> tuple[str, str]:
    """The "Rank by" choice; returns it and the page's default metric."""
    # A metric shown beside its intent-to-treat twin is a column, never the ranking (MetricSpec.itt_twin).
    # With none of those computed, the suite's rankable metric that no row has: nobody is ranked.
    rankable = query.rankable_metrics(results, spec) or [query.default_metric(results, spec)]
    specs = query.metric_specs(spec)
    default_metric = query.default_metric(results, spec)
    initial(f"{benchmark}-metric", "metric", rankable, default_metric, notes)
    metric = st.selectbox(
        "Rank by",
        rankable,
        format_func=lambda m: f"{m} ({'higher' if specs[m].higher_is_better else 'lower'} is better)",
        key=f"{benchmark}-metric",
    )
    return metric, default_metric


def _filter_selects(benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, notes: list[str]) -> tuple[dict, dict]:
    """One choice per breakdown axis, side by side; returns the filters and those the link records."""
    options = query.filter_options(results, spec)
    # The spec says where the ranking starts: within one group size (CogCanvas, N = 2) or pooled.
    starts = query.default_filters(results, spec)
    filters, choices = {}, {}
    columns = st.columns(max(len(options), 1))
    for column, (axis, values) in zip(columns, options.items()):
        start = ALL if starts.get(axis) is None else starts[axis]
        if axis == spec.group_size_axis:
            # "N = 2", ..., then the pooled mean, labelled as pooled (ALL in the URL, as before).
            offered = [*values, ALL] if spec.default_group_size is not None else [ALL, *values]
            label = lambda v: query.group_size_label(None if v == ALL else v)  # noqa: E731
        else:
            offered, label = [ALL, *values], str
        initial(f"{benchmark}-filter-{axis}", axis, offered, start, notes)
        choice = column.selectbox(axis, offered, format_func=label, key=f"{benchmark}-filter-{axis}")
        filters[axis] = None if choice == ALL else choice
        choices[axis] = None if choice == start else choice  # the URL holds a choice only where it is not the default
    return filters, choices


def _family_select(benchmark: str, results: pd.DataFrame, notes: list[str]) -> str | None:
    """The model family choice, offered when any row names a family; None for all of them."""
    families = query.families(results)
    family = None
    if families:
        initial(f"{benchmark}-family", "family", [ALL, *families], ALL, notes)
        choice = st.selectbox("model family", [ALL, *families], key=f"{benchmark}-family")
        family = None if choice == ALL else choice
    return family


def _search_and_columns(
    benchmark: str, spec: BenchmarkSpec, metrics: list[str], notes: list[str]
) -> tuple[str, list[str]]:
    """The model search box and, beside it, the metric columns shown."""
    search_column, picker_column = st.columns(2)
    initial(f"{benchmark}-search", "search", None, "", notes, parse=lambda raw: raw[:MAX_SEARCH])
    search = search_column.text_input(
        "Search models",
        max_chars=MAX_SEARCH,
        key=f"{benchmark}-search",
        placeholder="part of a model name",
        help="Case-insensitive.",
    )
    initial(f"{benchmark}-columns", "columns", metrics, metrics, notes, parse=lambda raw: _metric_list(raw, metrics))
    picked = picker_column.multiselect(
        "Metric columns",
        metrics,
        format_func=lambda m: query.display_name(spec, m, units_raw()),
        key=f"{benchmark}-columns",
        help="The metric ranked by is always shown.",
    )
    return search, picked


def _row_switches(
    benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, notes: list[str]
) -> tuple[bool, bool, bool, bool]:
    """The plumbing-check and incomplete-suite switches; returns their values, then their defaults."""
    # Plumbing checks and incomplete suites are hidden only when other rows remain (query.default_switches).
    show_plumbing, show_incomplete = query.default_switches(results, spec)
    left, right = st.columns(2)
    initial(f"{benchmark}-plumbing", "plumbing", (True, False), show_plumbing, notes, parse=parse_bool)
    plumbing = left.checkbox(
        "show plumbing-check rows",
        key=f"{benchmark}-plumbing",
        help="Rows scored with a plumbing profile (tiny or paper-random: random weights): they check the pipeline, "
        "not the model.",
    )
    initial(f"{benchmark}-incomplete", "incomplete", (True, False), show_incomplete, notes, parse=parse_bool)
    incomplete = right.checkbox(
        "show incomplete-suite rows",
        key=f"{benchmark}-incomplete",
        help="Rows that lack a metric of the suite (a judged metric with no judge configured, say): "
        "their ranking is not comparable on every axis.",
    )
    return plumbing, incomplete, show_plumbing, show_incomplete


def _write_link(choices: _Choices, spec: BenchmarkSpec, track: str) -> None:
    """Write the page's choices to the address bar, each only where it differs from the default."""
    chosen = {
        "metric": choices.metric if choices.metric != choices.default_metric else None,
        **choices.url_filters,
        "family": choices.family,
        "search": choices.search.strip() or None,
    }
    chosen |= choices.judge_param
    chosen["columns"] = ",".join(choices.picked) if set(choices.picked) != set(choices.metrics) else None
    chosen |= {
        "plumbing": _flag(choices.plumbing, choices.show_plumbing),
        "incomplete": _flag(choices.incomplete, choices.show_incomplete),
    }
    if len(query.tracks(spec)) > 1 and track != query.tracks(spec)[0]:
        chosen["track"] = track
    st.query_params.from_dict({k: v for k, v in chosen.items() if v is not None})


def _table_section(
    benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, track: str, choices: _Choices
) -> pd.DataFrame | None:
    """The ranked table with its rank intervals and captions, then the rows shown apart. Returns every
    row shown (ranked first), or None when the filters make no table (a warning says why)."""
    metric, filters, judge = choices.metric, choices.filters, choices.judge
    include = choices.include
    view = dict(
        include_plumbing=choices.plumbing,
        include_incomplete=choices.incomplete,
        family=choices.family,
        judge=judge,
        include_copies=include["copies"],
        include_uncalibrated=include["uncalibrated"],
        include_judge_failures=include["judge_failures"],
    )

    try:
        table = query.ranked_table(results, spec, metric=metric, filters=filters, **view)
    except (
        ValueError
    ) as error:  # a combination of filters no breakdown answers (e.g. type alone for a 2-axis-only spec)
        st.warning(plain(str(error)))
        return None
    ranking = query.split_ranking(table)
    # The board's intervals are those of every ranked row; a search then shows some of them, each with its
    # place on the whole board.
    ranked, rank_caption = stored_rank_intervals(ranking.ranked, results, spec, metric, filters, track, judge)

    def shown(frame: pd.DataFrame) -> pd.DataFrame:  # the rows the search finds, the columns picked
        return query.keep_metrics(query.search_models(frame, choices.search), spec, {metric, *choices.picked})

    table, ranking = shown(table), query.Ranking(shown(ranked), shown(ranking.unranked))
    ranked = ranking.ranked
    ranked_frame(ranked, results, spec, track)
    if rank_caption:
        st.caption(rank_caption)
    tied = query.leaders_tied(ranked)
    if tied:
        st.text(f"Tied for first (tier 1, cannot be told apart at the {query.RANK_LEVEL:.0%} level): {', '.join(tied)}")
    _judge_captions(table, results, spec, metric, judge)
    if not ranking.unranked.empty:
        _unranked(ranking.unranked, results, spec, track, benchmark)
    # The CSV: the same rows and columns (rank interval and tier too), with the numbers apart.
    return pd.concat([ranked, query.with_rank_uncertainty(ranking.unranked)], ignore_index=True)


def _csv_section(
    benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, table: pd.DataFrame, choices: _Choices
) -> None:
    """What the table's units and intervals are, the group size it is for, and the CSV of its rows."""
    metric, filters = choices.metric, choices.filters
    full = query.display_table(table, spec, raw=units_raw())
    # What each displayed unit is and where its convention comes from (docs/display-conventions.md).
    legend = [
        f"{column}: {text}"
        for column, text in query.display_legend(spec, units_raw()).items()
        if column in full.columns
    ]
    ci = results.iloc[0]["aggregates"].get("ci") or {}  # the scorer's interval, as it recorded it
    level = f"{ci['confidence']:.0%} " if isinstance(ci.get("confidence"), float) else ""
    st.caption(
        "Shown as: "
        + "; ".join(legend)
        + f". Each cell is the mean and its {level}interval [low, high]"
        + (f" ({stored_text(ci['method'])})" if ci.get("method") else "")
        + ". The CSV has the same rows and columns with the numbers apart (value, ci_low, ci_high), "
        "in these displayed units; stored values are raw."
    )
    scope = query.group_size_note(results, spec, metric, filters)
    if scope:
        st.caption(scope)
    # The rows and columns the reader sees, with full numbers (filters, search and all).
    st.download_button(
        "Download CSV",
        full.to_csv(index=False).encode("utf-8"),
        file_name=f"{benchmark}-leaderboard.csv",
        mime="text/csv",
        on_click="ignore",
        key=f"{benchmark}-csv",
    )


def _judge_controls(
    benchmark: str, results: pd.DataFrame, spec: BenchmarkSpec, metric: str, picked: list[str], notes: list[str]
) -> tuple[str | None, dict[str, bool], dict[str, str | None]]:
    """The judge selector (shown when a judged metric ranks or is shown: the judge with the most rows
    first and by default) and the switches that rank rows shown apart by default (copy-marked rows,
    rows of an uncalibrated judge, rows whose judge failed on more than 5 % of a judged metric;
    offered only when there are some). Returns ``(judge key or "" for the default, {"copies",
    "uncalibrated", "judge_failures": include?}, their URL parameters)``."""
    specs = query.metric_specs(spec)
    choices = query.judge_choices(results, spec)
    judge, params = "", {}
    if choices and any(specs[m].judged for m in {metric, *picked}):
        keys = [key for key, _, _ in choices]
        labels = {key: f"{label} ({n} row(s))" for key, label, n in choices}
        initial(f"{benchmark}-judge", "judge", keys, keys[0], notes)
        judge = st.selectbox(
            "Judge of the judged columns",
            keys,
            format_func=lambda k: labels[k],
            key=f"{benchmark}-judge",
            help="A judged metric ranks only rows judged by one judge (model, revision or endpoint, decoding settings).",
        )
        params["judge"] = judge if judge != keys[0] else None
    facts = [query.row_facts(row, spec) for _, row in results.iterrows()]
    include = {}
    for name, present, label, help_text in (
        (
            "copies",
            any(f.copies_marked for f in facts),
            "rank rows that copy references",
            "A row whose generations are near-duplicates of the references (above the marked share) is shown apart by default.",
        ),
        (
            "uncalibrated",
            any(f.calibrated is False for f in facts),
            "rank rows of an uncalibrated judge",
            "A judge that failed its control pairs (the judge card) does not rank its rows on judged metrics by default.",
        ),
        (
            "judge_failures",
            any(f.incomplete for f in facts),
            "rank rows whose judge failed on over 5 %",
            "A row whose judge gave no usable answer on more than 5 % of a judged metric's questions is incomplete: "
            "shown apart, not ranked on judged metrics by default (its judged columns count those failures as 0).",
        ),
    ):
        include[name] = False
        if present:
            initial(f"{benchmark}-{name}", name, (True, False), False, notes, parse=parse_bool)
            include[name] = st.checkbox(label, key=f"{benchmark}-{name}", help=help_text)
            params[name] = _flag(include[name], False)
    return judge, include, params


def _judge_captions(table: pd.DataFrame, results: pd.DataFrame, spec: BenchmarkSpec, metric: str, judge: str) -> None:
    """Name the judge of every judged column shown, and say whom a judged ranking is among."""
    specs = query.metric_specs(spec)
    judged = [m for m in specs if specs[m].judged and m in table.columns]
    choices = query.judge_choices(results, spec)
    if not judged or not choices:
        return
    key = judge or choices[0][0]
    label = next(label for k, label, _ in choices if k == key)
    who = (
        "rows whose judge was not recorded (scored before results kept it)"
        if key == query.UNRECORDED_JUDGE
        else f"rows judged by {label}"
    )
    text = f"Judged columns ({', '.join(judged)}): values of {who}; a row judged by another judge shows '-' there (its judge column names it)."
    if specs[metric].judged:
        text = f"{metric}: ranked among {who}. " + text
    st.caption(plain(text + " Coverage: the share of images each judged score is over, n / (n + undefined)."))


def _unranked(unranked: pd.DataFrame, results: pd.DataFrame, spec: BenchmarkSpec, track: str, benchmark: str) -> None:
    """The rows shown apart from the ranking, each with why (plain text: model names are anyone's)."""
    st.subheader("Not ranked")
    st.text(
        "\n".join(
            f"{model} (submission {sub}): {why}"
            for model, sub, why in zip(unranked["model"], unranked["submission"], unranked[query.NOT_RANKED])
        )
    )
    ranked_frame(unranked, results, spec, track, key=f"{benchmark}-unranked", reasons_above=True)


def _metric_list(raw: str, metrics: list[str]) -> list[str]:
    """The URL's ``columns`` (comma-separated metric names) when each is one of ``metrics``, in their order."""
    names = [name.strip() for name in raw.split(",") if name.strip()]
    if not names or any(name not in metrics for name in names):
        raise ValueError(raw)
    return [m for m in metrics if m in names]


def _flag(value: bool, default: bool) -> str | None:
    """A switch's URL value, only when it differs from the page's default (short links)."""
    return None if value == default else ("1" if value else "0")


def _hidden_note(results: pd.DataFrame, spec: BenchmarkSpec, family: str | None) -> str:
    """Why the table is empty: how many rows each switch hides (a reader should not think nothing was scored)."""
    rows = query.visible_results(results, True, spec, True, family)
    plumbing = int(rows["plumbing"].astype(bool).sum())
    incomplete = sum(bool(query.missing_metrics(row, spec)) for _, row in rows.iterrows())
    parts = [f"{plumbing} plumbing-check row(s)"] * bool(plumbing) + [f"{incomplete} incomplete-suite row(s)"] * bool(
        incomplete
    )
    return f"No rows to show; hidden: {', '.join(parts)}." if parts else "No rows to show."
