"""What each page of the leaderboard app draws; the files under ``views/`` call one function each.

Data comes from :mod:`idbench.leaderboard.query` (pure pandas) over :meth:`Store.current_results`, cached with
``st.cache_data`` under a key that includes :func:`idbench.leaderboard.query.store_version`, so a finished job
shows up on the next rerun without serving stale tables. Anything a submitter typed (model name,
metadata, failure reasons) is drawn only through ``st.text``, ``st.dataframe``, ``st.error`` of plain
strings or ``st.json``: never as HTML, and never as Markdown, where a link or image would render.
"""

from __future__ import annotations

import hmac
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image

from idbench import settings
from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.evaluate_pkg import results as result_files
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError, load_benchmark_data
from idbench.evaluate_pkg.hub_submission import HubSubmissionError, fetch_submission
from idbench.evaluate_pkg.submission import MAX_TEXT_CHARS, SubmissionError
from idbench.leaderboard import admission, query, samples
from idbench.leaderboard.app import backend
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.queue import RateLimit, jobs_table, rescore
from idbench.leaderboard.store import JOB_STATES, RateLimitError, Store, UnknownIdError

logger = logging.getLogger(__name__)

MAX_UPLOAD_MB = 512  # per submission zip or Hub repo; Streamlit refuses larger uploads before our code sees them
# Submissions are validated one at a time, in arrival order, each in a child process stopped at
# $IDBENCH_SUBMIT_DEADLINE_S; one upload per client waits or runs; the others see their place
# (idbench.leaderboard.admission). One line for the whole server process: every session is a thread of it.
ADMISSION = admission.Admission()
MAX_SUBMITTER = 100
MAX_REASON = 200
# New submissions per submitter through the app: COUNT/SECONDS. Named submitters count by their normalised
# name, anonymous ones per client (the logged-in Hub user, else the address): idbench.names.
RATE_LIMIT_ENV, DEFAULT_RATE_LIMIT = settings.RATE_LIMIT, settings.BY_NAME[settings.RATE_LIMIT].default
# Withdrawing and rescoring from the app need this token; with it unset the app offers neither.
ADMIN_TOKEN_ENV = settings.ADMIN_TOKEN
MAX_SEARCH = 100  # characters of the model search box (and of a link's ``search``)
# Above any table that holds a row scored with the tiny profile (the demo's rows among them).
PLUMBING_BANNER = "Plumbing check: random weights, not model scores"
SAMPLES_PER_SIDE = 3  # best and worst images on the model page
GENERATION_PX, REFERENCE_PX = 256, 128
WORST_ASSIGNMENTS = 6  # images in the model page's "who became whom" (each an expander of up to 5 persons)
FACE_PX = 96  # a reference thumbnail and the generated face crop beside it
UNMATCHED_SHOWN = 8  # crops of the faces no person got (all of them are listed in the table)
ALL = "all"  # the filter choice that means "no filter on this axis"
# One view file serves every benchmark's page; main.py records which benchmark the navigation chose
# under this session-state key, so a registered benchmark gets its page without a file of its own.
BENCHMARK_VIEW = Path(__file__).resolve().parent / "views" / "benchmark.py"
CURRENT_BENCHMARK = "idbench_benchmark_page"


def benchmark_names() -> tuple[str, ...]:
    """Benchmarks in the order pages and pickers list them (``BenchmarkSpec.page_order``, then name)."""
    return tuple(BENCHMARKS)


def benchmark_pages() -> dict[str, Any]:
    """name -> the ``st.Page`` of its leaderboard, served at ``/<name with _ for ->``."""
    return {
        name: st.Page(BENCHMARK_VIEW, title=BENCHMARKS[name].title, url_path=name.replace("-", "_"))
        for name in benchmark_names()
    }


def current_benchmark_page() -> None:
    """The page of the benchmark the navigation selected (the first one when none was recorded)."""
    benchmark_page(st.session_state.get(CURRENT_BENCHMARK) or benchmark_names()[0])


MAX_STORED_TEXT = 160  # characters of a stored description (a resampling method) a caption shows


def stored_text(value: object) -> str:
    """A description read from a result's files (``aggregates.json``: the resampling method), as caption
    text: one line, at most :data:`MAX_STORED_TEXT` characters, Markdown escaped. Results files are
    data, written by a scorer or edited in place on a results repo; a caption renders Markdown, so
    ``![x](https://...)`` in a method would load an image for every visitor."""
    text = " ".join(str(value).split())
    return plain(text if len(text) <= MAX_STORED_TEXT else text[: MAX_STORED_TEXT - 3] + "...")


# --- data ----------------------------------------------------------------------------------------


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
    frame = _read_results(results_path, ("prompt_id", "seed", "metric", "value"), ("subject",), metric)
    return None if frame is None else query.sample_values(frame, metric)


def _read_results(
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
            data = _benchmark_data(str(store().submission(ranked_ids[0])["data_dir"]))
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


UNITS_KEY = "idbench-units"  # the sidebar's unit switch (main.py), one for the whole app


def units_raw() -> bool:
    """Whether the app's unit switch shows raw values (else each metric's display convention)."""
    return st.session_state.get(UNITS_KEY) == query.UNITS_RAW


def units_caption() -> str:
    return (
        "Numbers are raw stored values (the unit switch in the sidebar)."
        if units_raw()
        else "Numbers are in each metric's display convention (docs/display-conventions.md); the sidebar switches to raw values."
    )


def _breakdown_in_units(table: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """A model page breakdown (cells x raw metric means) in the app's units, columns renamed with them."""
    specs, raw = query.metric_specs(spec), units_raw()
    out = table.copy()
    for column in [c for c in table.columns if c in specs]:
        decimals = query.DISPLAYS[query.display_of(spec, column, raw)].decimals
        out[column] = query.in_units(table[column], spec, column, raw).round(decimals)
    return out.rename(columns={c: query.display_name(spec, c, raw) for c in table.columns if c in specs})


TRACK_LABELS = {"reference": "reference-based", "text-to-image": "text-to-image (no references)"}


def track_choice(spec: BenchmarkSpec, key: str, notes: list[str] | None = None) -> str:
    """The track a page shows: a choice when the benchmark has several (CogCanvas's text-to-image task
    ranks apart from the reference-based one), else its only one. The URL's ``track`` picks the first."""
    tracks = query.tracks(spec)
    if len(tracks) == 1:
        return tracks[0]
    initial(key, "track", tracks, tracks[0], notes if notes is not None else [])
    return st.radio("Track", tracks, format_func=lambda t: TRACK_LABELS.get(t, t), horizontal=True, key=key)


# --- deep links ----------------------------------------------------------------------------------
# A page reads its URL's query parameters once per session (a page load, or a link opened in a new
# tab) to give its widgets their first values, then writes the widgets' values back, so the address
# bar always holds a link to what is on screen. A value the page cannot use is ignored and named in
# a caption: a hand-edited link never raises.

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


_INVALID = object()  # what a parser returns for a value it cannot read


def _allowed(value: Any, options: Sequence[Any] | None) -> bool:
    """``value`` is one of ``options`` (a list value: each of its items is); anything when None."""
    if value is _INVALID:
        return False
    if options is None:
        return True
    return all(v in options for v in value) if isinstance(value, list) else value in options


def initial(key: str, param: str, options: Sequence[Any] | None, default: Any, notes: list[str], parse=str) -> None:
    """Give widget ``key`` its first value in this session: the URL's ``param`` if ``parse`` reads it as
    one of ``options`` (any value when None), else ``default``. A value already chosen (still one of
    ``options``) is kept; an unusable URL value is appended to ``notes``. The widget is then created
    with ``key`` and no default of its own (Streamlit warns when both set one)."""
    if key in st.session_state and _allowed(st.session_state[key], options):
        return
    value, raw = default, st.query_params.get(param)
    if raw is not None and key not in st.session_state:
        try:
            parsed = parse(raw)
        except ValueError:
            parsed = _INVALID
        if _allowed(parsed, options):
            value = parsed
        else:
            notes.append(f"{param}={raw[:60]}")
    st.session_state[key] = value


def parse_bool(raw: str) -> bool:
    """A switch's URL value: 1/true/yes/on or 0/false/no/off (any case); ValueError otherwise."""
    if raw.strip().lower() in TRUE:
        return True
    if raw.strip().lower() in FALSE:
        return False
    raise ValueError(raw)


def link_notes(notes: list[str]) -> None:
    """One small caption naming the link's values the page ignored (escaped: the URL is anyone's text)."""
    if notes:
        st.caption(plain(f"Ignored in the link (not a value this page offers): {', '.join(notes)}."))


# --- a benchmark's page --------------------------------------------------------------------------


def benchmark_page(benchmark: str) -> None:
    """Ranked table with metric, filters, plumbing switch, model search and column choice; CSV download;
    the benchmark's plots. Every choice is read from and written to the URL (see "deep links")."""
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

    metrics = query.available_metrics(results, spec)
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
    families = query.families(results)
    family = None
    if families:
        initial(f"{benchmark}-family", "family", [ALL, *families], ALL, notes)
        choice = st.selectbox("model family", [ALL, *families], key=f"{benchmark}-family")
        family = None if choice == ALL else choice
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
    judge, include, judge_param = _judge_controls(benchmark, results, spec, metric, picked, notes)
    link_notes(notes)
    chosen = {
        "metric": metric if metric != default_metric else None,
        **choices,
        "family": family,
        "search": search.strip() or None,
    }
    chosen |= judge_param
    chosen["columns"] = ",".join(picked) if set(picked) != set(metrics) else None
    chosen |= {"plumbing": _flag(plumbing, show_plumbing), "incomplete": _flag(incomplete, show_incomplete)}
    if len(query.tracks(spec)) > 1 and track != query.tracks(spec)[0]:
        chosen["track"] = track
    st.query_params.from_dict({k: v for k, v in chosen.items() if v is not None})
    view = dict(
        include_plumbing=plumbing,
        include_incomplete=incomplete,
        family=family,
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
        return
    table = query.keep_metrics(query.search_models(table, search), spec, {metric, *picked})
    ranking = query.split_ranking(table)
    ranked, rank_caption = rank_uncertainty(ranking.ranked, results, spec, metric, filters)
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
    table = pd.concat([ranked, query.with_rank_uncertainty(ranking.unranked)], ignore_index=True)
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
    if table.empty:
        st.info(_hidden_note(results, spec, family) if not search.strip() else "No model name contains that text.")
        return
    shown_ids = set(table["submission"])
    _plots(results[results["submission_id"].isin(shown_ids)], spec, metric)


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


def ranked_frame(
    table: pd.DataFrame,
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    track: str,
    key: str | None = None,
    reasons_above: bool = False,
) -> None:
    """A ranked table as the app shows it: one compact column per metric (value [interval]), the model
    name linking to its model page and the model's own http(s) link beside it; the plumbing banner
    above it when a plumbing-check row is among the rows. ``reasons_above``: the caller has printed why
    each row is not ranked, so the table leaves that long column out and keeps its metrics in view."""
    if not table.empty and table["marks"].str.contains(query.PLUMBING_MARK).any():
        everything = table["marks"].str.contains(query.PLUMBING_MARK).all()
        st.warning(
            f"{PLUMBING_BANNER}. "
            + ("Every row here" if everything else "Each row marked plumbing")
            + " was scored with a plumbing profile (tiny or paper-random: random weights): it shows that the "
            "pipeline runs, not how good a model is."
        )
    shown = query.with_links(query.display_table(table, spec, compact=True, raw=units_raw()), results, track)
    if not table.empty and (table[query.NOT_RANKED] == "").all():  # ranked rows: nothing to say there
        shown = shown.drop(columns=[query.NOT_RANKED])
    elif not table.empty and (table[query.NOT_RANKED] != "").all():
        if reasons_above:
            shown = shown.drop(columns=[query.NOT_RANKED])
        # Rows shown apart: why (and the marks) is what a reader looks for first, so it follows the model.
        moved = [c for c in (query.NOT_RANKED, "marks") if c in shown.columns]
        at = (
            list(shown.columns).index("link") + 1 if "link" in shown.columns else list(shown.columns).index("model") + 1
        )
        rest = [c for c in shown.columns if c not in moved]
        shown = shown[rest[:at] + moved + rest[at:]]
    if not any(m.judged and m.name in table.columns for m in spec.metric_suite):  # no judged column: no judge to name
        shown = shown.drop(columns=[query.JUDGE], errors="ignore")
    _table(
        shown,
        hide_index=True,
        key=key,
        placeholder="-",  # a missing value (no link given, no judge-failure rate) reads as a dash, not "None"
        column_config={
            "model": st.column_config.LinkColumn(
                "model", display_text=query.MODEL_NAME_IN_URL, alignment="left", help="Opens the model page."
            ),
            "link": st.column_config.LinkColumn(
                "link", help="The model's own link (paper, code or weights), when given."
            ),
            # A medium width: a row's marks can be a long list, and the metrics after it must stay in view.
            "marks": st.column_config.TextColumn("marks", width="medium"),
            # The papers' columns that leave judge failures out say so on their header (never ranked).
            **{
                column: st.column_config.Column(column, help=note)
                for column, note in query.column_help(spec, units_raw()).items()
                if column in shown.columns
            },
        },
    )


def _index_or_first(options: list[str], wanted: str) -> int:
    """``wanted``'s place in ``options``, else 0 (the default ranking metric may be one no row computed)."""
    return options.index(wanted) if wanted in options else 0


def _hidden_note(results: pd.DataFrame, spec: BenchmarkSpec, family: str | None) -> str:
    """Why the table is empty: how many rows each switch hides (a reader should not think nothing was scored)."""
    rows = query.visible_results(results, True, spec, True, family)
    plumbing = int(rows["plumbing"].astype(bool).sum())
    incomplete = sum(bool(query.missing_metrics(row, spec)) for _, row in rows.iterrows())
    parts = [f"{plumbing} plumbing-check row(s)"] * bool(plumbing) + [f"{incomplete} incomplete-suite row(s)"] * bool(
        incomplete
    )
    return f"No rows to show; hidden: {', '.join(parts)}." if parts else "No rows to show."


def _table(frame: pd.DataFrame, **options: Any) -> None:
    """``st.dataframe`` with a missing value (no rank for a row shown apart, an empty cell of a breakdown)
    shown as a dash: the grid's own rendering of a missing value is the word "None"."""
    options.setdefault("placeholder", "-")
    st.dataframe(frame, **options)


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


def _plots(results: pd.DataFrame, spec: BenchmarkSpec, metric: str) -> None:
    """The benchmark's charts (Vega-Lite through Altair: tooltips with model, value, interval and n), each
    from the rows the table shows (``results`` is already filtered), in the app's units. A chart with
    nothing to compare is replaced by one line saying why."""
    raw = units_raw()
    name = query.display_name(spec, metric, raw)
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


# --- model page ----------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False, max_entries=8)
def _benchmark_data(folder: str) -> BenchmarkData:
    # The built benchmark of a result, read once per server (its content never changes under one path).
    return load_benchmark_data(Path(folder))


def model_page() -> None:
    """One scored submission: metadata as a table, encoders and raw metadata in expanders, every
    breakdown, best and worst samples. The URL's ``benchmark``, ``track`` and ``submission`` (or
    ``model``, a name: its newest result) pick the result, as the ranked tables' model links do."""
    st.title("Model")
    notes: list[str] = []
    names = list(benchmark_names())
    initial("model-benchmark", "benchmark", names, names[0], notes)
    benchmark = st.selectbox("Benchmark", names, format_func=lambda n: BENCHMARKS[n].title, key="model-benchmark")
    spec = get_benchmark(benchmark)
    track = track_choice(spec, "model-track", notes)
    results = current_results(benchmark, track)
    if results.empty:
        link_notes(notes)
        st.info("No scored submissions yet.")
        return
    labels = dict(zip(results["submission_id"].astype(int), query.model_labels(results)))
    ids = list(labels)
    # A name opens a result only when exactly one current row has it (compared by idbench.names.name_key:
    # case, width and spacing aside); several rows of one name are listed to choose from, never guessed
    # between, so an impostor's row cannot answer a link to the real one. An id, when given, wins.
    from idbench.names import resolve_name

    rows = [
        (i, name, None if pd.isna(who) else str(who))
        for i, name, who in zip(ids, results["model_name"].astype(str), results["submitter"])
    ]
    if "submission" in st.query_params or "model-submission" in st.session_state:
        initial("model-submission", "submission", ids, ids[0], notes, parse=int)
    else:
        raw = st.query_params.get("model")
        match = resolve_name(raw, rows) if raw is not None else None
        if match is not None and len(match.candidates) > 1:
            st.warning(
                plain(
                    f"{len(match.candidates)} scored submissions are named {raw[:100]!r}; a link by name opens one only when it is unique. Choose one:"
                )
            )
            choices = pd.DataFrame(
                [
                    (i, name, who or "(anonymous)", query.model_url(benchmark, track, i, name))
                    for i, name, who in match.candidates
                ],
                columns=["submission", "model", "submitter", "open"],
            )
            _table(
                choices,
                hide_index=True,
                column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
                key="model-choices",
            )
            link_notes(notes)
            return
        chosen = match.chosen if match is not None else None
        initial("model-submission", "model", ids, ids[0], notes, parse=lambda _: _INVALID if chosen is None else chosen)
    submission = st.selectbox("Submission", ids, format_func=lambda i: labels[i], key="model-submission")
    link_notes(notes)
    row = results[results["submission_id"] == submission].iloc[0].to_dict()
    params = {"benchmark": benchmark, "submission": str(submission), "model": str(row["model_name"])}
    compare_param = st.query_params.get("compare")  # read before the address bar is rewritten below
    st.query_params.from_dict(params | ({"track": track} if track != query.tracks(spec)[0] else {}))
    # What a reader must know before reading the numbers, in one alert: plumbing check, incomplete suite.
    missing = query.missing_metrics(row, spec)
    warnings = [
        f"{PLUMBING_BANNER}: this result was scored with a plumbing profile (tiny or paper-random: random weights)."
    ] * bool(row["plumbing"])
    warnings += [f"Incomplete suite: no value for {', '.join(missing)}."] * bool(missing)
    facts = query.row_facts(row, spec)
    warnings += [f"Not ranked by default: {facts.copies}."] * facts.copies_marked
    warnings += ["Uncalibrated judge: its judged metrics are shown, not ranked by default."] * (
        facts.calibrated is False
    )
    if warnings:
        st.warning(" ".join(warnings))
    st.subheader("Metadata")
    # A table of plain strings: the submitter wrote these; they must not render as Markdown or HTML.
    _table(query.metadata_table(row), hide_index=True, key="model-metadata")
    if row["not_run"]:
        st.text("not run:\n" + "\n".join(f"  {m}: {why}" for m, why in row["not_run"].items()))
    _generation(row)
    with st.expander("metadata as submitted (JSON)"):
        st.json(row["metadata"])
    with st.expander("models and revisions it was scored with (JSON)"):
        st.json(row["models"])
    _judge_card(row, spec)
    _copy_check(row)
    st.subheader("Overall")
    overall = query.display_table(_model_overall(results, spec, submission), spec, compact=True, raw=units_raw())
    _table(_dash_unranked(overall), hide_index=True, key="model-overall")
    for name, table in query.breakdown_tables(row, spec).items():
        if not table.empty:
            st.subheader(f"By {name}")
            _table(_breakdown_in_units(table, spec).reset_index(), hide_index=True)
    st.caption(units_caption())
    _compare_with(row, results, spec, labels, submission, compare_param)
    if query.records_who_became_whom(spec, track):
        _who_became_whom(row, spec)
    _sample_grid(row, spec)


def _dash_unranked(table: pd.DataFrame) -> pd.DataFrame:
    """A row shown apart has no rank, rank interval or tier: a dash in each, written in the cells (text
    a reader can copy and a screen reader reads), not left to the grid's rendering of a missing value."""
    out = table.copy()
    for column in ("rank", query.RANK_INTERVAL, query.TIER):
        if column in out.columns:
            values = out[column].astype(object)
            present = values.notna() & (values.astype(str) != "")
            if not present.all():  # a ranked row keeps its numbers (they sort as numbers)
                out[column] = values.where(present, "-").astype(str)
    return out


def _model_overall(results: pd.DataFrame, spec: BenchmarkSpec, submission: int) -> pd.DataFrame:
    """The model's row of its benchmark's ranking on the default metric, with its rank among every
    current result of the track (plumbing checks and incomplete suites included, so every model page
    has a place), its rank interval and tier; rank <NA> with the reason when the ranking shows it apart."""
    metric = query.default_metric(results, spec)
    table = query.ranked_table(results, spec, metric=metric, include_plumbing=True)
    ranking = query.split_ranking(table)
    ranked, _ = rank_uncertainty(ranking.ranked, results, spec, metric, {})
    table = pd.concat([ranked, query.with_rank_uncertainty(ranking.unranked)], ignore_index=True)
    return table[table["submission"] == submission].reset_index(drop=True)


NO_COMPARISON = "(none)"


def _run_of(row: dict[str, Any]):
    """A stored result as :mod:`idbench.evaluate_pkg.compare` reads a run: the fields its refusal checks
    (benchmark, build: the submission's benchmark version, suite, profile, task, judge), the aggregates
    (resampling design, breakdown prompts) and the per-sample values; None without readable values."""
    from idbench.evaluate_pkg.compare import Run

    frame = _read_results(str(row["results_path"]), ("prompt_id", "seed", "metric", "subject", "value"))
    if frame is None:
        return None
    judge_key = row.get("judge_key")
    summary = {
        "benchmark": row["benchmark"],
        "build": row.get("benchmark_version"),
        "suite_version": row["suite_version"],
        "profile": row["profile"],
        "task": row.get("task"),
        "judge": {"key": judge_key} if isinstance(judge_key, str) else None,
        "aggregates": row["aggregates"],
        "submission": {"model": str(row["model_name"])},
        "plumbing": bool(row["plumbing"]),
    }
    return Run(None, summary, frame)


@st.cache_data(show_spinner="Comparing (paired bootstrap) ...", max_entries=32)
def _comparison(path_a: str, path_b: str, _row_a: dict, _row_b: dict) -> tuple[dict | None, str]:
    # Cached by the two result folders (a result folder never changes); rows are not hashed.
    from idbench.evaluate_pkg.compare import CompareError, compare_runs

    a, b = _run_of(_row_a), _run_of(_row_b)
    if a is None or b is None:
        return None, "Comparison: not run (a result's per-sample values are not available here)."
    try:
        return compare_runs(a, b).as_dict(), ""
    except CompareError as err:
        return None, f"Comparison: not run ({err})."


def _compare_with(
    row: dict[str, Any],
    results: pd.DataFrame,
    spec: BenchmarkSpec,
    labels: dict[int, str],
    submission: int,
    compare_param: str | None = None,
) -> None:
    """The model page's "compare with ...": this result (A) against another current result (B) of the
    benchmark and track, per metric overall and per breakdown cell: B - A on the shared (prompt, seed)
    pairs with its interval, p and Holm-corrected p from the benchmark's resampling design."""
    from idbench.evaluate_pkg.compare import CORRECTION, P_VALUE

    st.subheader("Compare with ...")
    others = [i for i in labels if i != submission]
    if not others:
        st.text("Compare with: no other scored submission of this benchmark and track.")
        return
    options = [NO_COMPARISON, *others]
    key = f"model-compare-{submission}"
    if key not in st.session_state:
        raw = compare_param  # the link's B, when it names another current result
        st.session_state[key] = (
            int(raw)
            if raw and raw.isascii() and raw.isdigit() and len(raw) < 12 and int(raw) in others
            else NO_COMPARISON
        )
    other = st.selectbox("Compare with", options, format_func=lambda i: i if i == NO_COMPARISON else labels[i], key=key)
    if other == NO_COMPARISON:
        st.query_params.pop("compare", None)
        return
    st.query_params["compare"] = str(other)
    row_b = results[results["submission_id"] == other].iloc[0].to_dict()
    found, why = _comparison(str(row["results_path"]), str(row_b["results_path"]), row, row_b)
    if found is None:
        st.info(why)
        return
    raw = units_raw()
    if found["plumbing"]:
        st.warning(
            f"{PLUMBING_BANNER}: this comparison is of results scored with a plumbing profile (tiny or paper-random)."
        )
    tables = query.comparison_tables(found["rows"], spec, raw)
    st.text(f"A = {labels[submission]}, B = {labels[other]}: B - A on the (prompt, seed) pairs both hold.")
    if "overall" in tables:
        _table(tables.pop("overall"), hide_index=True, key="model-compare-overall")
    else:
        st.text("No metric of the suite holds values in both results.")
    if tables:
        with st.expander(f"per breakdown cell ({len(tables)} cells)"):
            cells = pd.concat([t.assign(cell=name) for name, t in tables.items()], ignore_index=True)
            _table(
                cells[["cell", *[c for c in cells.columns if c != "cell"]]], hide_index=True, key="model-compare-cells"
            )
    notes = "; ".join(found["notes"])
    st.caption(
        f"{found['confidence']:.0%} interval and p from {stored_text(found['method'])} ({found['n_resamples']} paired resamples, the same "
        f"draws for A and B). p: {P_VALUE}. p_holm: {CORRECTION}; verdict at alpha {found['alpha']}. "
        + (
            "Differences are raw values."
            if raw
            else "Values and differences in each metric's display convention "
            "(a difference scales by the convention's factor)."
        )
        + (f" Note: {notes}." if notes else "")
    )


JUDGE_NOT_RECORDED = "Judge: not recorded (scored before results kept their judge)."
CARD_NOT_RECORDED = "Judge card: not recorded (scored before judges ran control pairs)."
COPIES_NOT_RECORDED = (
    "Copy detection: not recorded (scored before generations were checked for copies of the references)."
)


def _share(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f} %"


def _judge_card(row: dict, spec: BenchmarkSpec) -> None:
    """Who judged this result and how its judge did on the control pairs (one line when not recorded)."""
    st.subheader("Judge")
    facts = query.row_facts(row, spec)
    if facts.judge_key is None:
        st.text("Judge: none ran for this result (no judged metric was computed).")
        return
    if facts.judge_key == query.UNRECORDED_JUDGE:
        st.text(JUDGE_NOT_RECORDED)
        return
    judge = row["judge"]
    st.text(
        f"Judge: {facts.judge}\nkey: {facts.judge_key}"
        + (f"\nendpoint: {settings.redact_url(str(judge['base_url']))}" if judge.get("base_url") else "")
    )
    card = judge.get("card")
    if not isinstance(card, dict):
        st.text(CARD_NOT_RECORDED)
        return
    controls = card.get("controls") or {}
    _table(
        pd.DataFrame(
            [
                (kind, c.get("n"), c.get("correct"), c.get("accuracy"), c.get("failed"))
                for kind, c in controls.items()
                if isinstance(c, dict)
            ],
            columns=["control kind", "pairs", "correct", "accuracy", "failed"],
        ),
        hide_index=True,
        key="model-judge-card",
    )
    repeat = card.get("repeat") or {}
    verdict = (
        "calibrated" if card.get("calibrated") else "UNCALIBRATED: " + str(card.get("reason") or "below the floor")
    )
    st.text(
        f"accuracy on the controls {_share(card.get('accuracy'))} (floor {_share(card.get('floor'))}); "
        f"yes-rate {_share(card.get('yes_rate'))}; failure rate {_share(card.get('failure_rate'))}; "
        f"determinism: {_share(repeat.get('agreement'))} agreement over {repeat.get('n', 0)} repeated pairs\n{verdict}"
    )
    if facts.incomplete:
        st.text(
            "Incomplete (judge failures above the threshold): "
            + ", ".join(f"{m} {_share(r)}" for m, r in sorted(facts.incomplete.items()))
        )


def _generation(row: dict) -> None:
    """How the images were made, from the generation record `idbench generate` writes (one line when absent)."""
    st.subheader("Generation")
    table = query.generation_table(row)
    if table is None:
        st.text(query.GENERATION_NOT_RECORDED)
        return
    _table(table, hide_index=True, key="model-generation")


def _copy_check(row: dict) -> None:
    """Whether the generations copy the references: share flagged, the mark's threshold, the criteria."""
    st.subheader("Copy detection")
    copies = row.get("copies")
    if not isinstance(copies, dict):
        st.text(COPIES_NOT_RECORDED)
        return
    st.text(
        f"{copies.get('flagged')} of {copies.get('images')} images flagged as near-duplicates of a reference "
        f"({_share(copies.get('share'))}; marked above {_share(copies.get('mark_above_share'))}): "
        + ("MARKED, not ranked by default" if copies.get("marked") else "not marked")
    )
    if copies.get("criteria"):
        with st.expander("copy criteria (JSON)"):
            st.json(copies["criteria"])
    try:
        flagged = samples.copy_figures(Path(row["results_path"])) if row.get("results_path") else []
    except (OSError, ValueError) as error:
        st.warning(plain(f"The copy check's figures of this result are not readable: {error}"))
        return
    drawn = [entry for entry in flagged if entry["figure"] is not None]
    if drawn:
        with st.expander(f"where each flagged image shows its reference ({len(drawn)} of {len(flagged)} drawn)"):
            for entry in drawn:
                st.image(
                    str(entry["figure"]),
                    caption=plain(f"{entry['prompt_id']} seed {entry['seed']}: {entry['transformation']}"),
                )


def _sample_grid(row: dict, spec: BenchmarkSpec) -> None:
    """Best and worst generated images by one metric, each beside its prompt's references (and judge evidence)."""
    s = store()
    submission = s.submission(int(row["submission_id"]))
    computed = [
        m for m in query.available_metrics(pd.DataFrame([row]), spec) if m in row["aggregates"].get("overall", {})
    ]
    if not computed:
        return
    st.subheader("Best and worst samples")
    metric = st.selectbox(
        "by metric",
        computed,
        index=_index_or_first(computed, query.default_metric(pd.DataFrame([row]), spec)),
        key="model-sample-metric",
    )
    try:
        scores = samples.sample_scores(Path(row["results_path"]), metric)
    except result_files.ResultsTooLarge as error:
        st.warning(_too_large(error))
        return
    if scores.empty:
        st.info(f"No per-sample values of {metric} in this result.")
        return
    try:
        data = _benchmark_data(submission["data_dir"])
    except BenchmarkDataError as error:
        st.warning(plain(f"The benchmark this was scored against is not available here: {error}"))
        return
    best, worst = samples.extremes(scores, query.metric_specs(spec)[metric].higher_is_better, SAMPLES_PER_SIDE)
    for title, chosen in (("Best", best), ("Worst", worst)):
        if chosen.empty:
            continue
        st.markdown(f"**{title}**")
        for sample in chosen.itertuples():
            _sample_row(data, Path(submission["stored_path"]), Path(row["results_path"]), sample, metric)


def _too_large(error: Exception) -> str:
    """A results file over its bounds, said without the server's path (evaluate_pkg.results_bounds)."""
    return plain("Not shown: this result's file is too large to read here (" + str(error).split(": ", 1)[-1] + ").")


WHO_NOT_RECORDED = (
    "Who became whom was not recorded for this result: it was scored before suite 0.3, or without the identity metrics."
)


def _who_became_whom(row: dict, spec: BenchmarkSpec) -> None:
    """Swaps, clones, misses and extras per image by group size (from the aggregates), then the worst
    images' face assignments: each person's reference beside the generated face it was matched to."""
    st.subheader("Who became whom")
    summary = query.who_summary(row["aggregates"], spec)
    if summary.empty:
        st.text(WHO_NOT_RECORDED)
        return
    _table(summary.round(3).reset_index(), hide_index=True, key="model-who-summary")
    st.caption(
        "Mean count per image, by the number of persons N the prompt asks for. "
        + " ".join(f"{name.capitalize()}: {text}." for name, text in query.WHO_COUNTS.items())
    )
    submission = store().submission(int(row["submission_id"]))
    stored = Path(submission["stored_path"])
    if not stored.is_dir():  # a Hub mirror: the public results repos hold numbers, never images
        st.text("The generated images of this result are not public here, so its faces are not shown.")
        return
    try:
        records = samples.evidence_of(Path(row["results_path"]), samples.WHO_BECAME_WHOM)
        strict = samples.sample_scores(Path(row["results_path"]), query.WHO_GROUNDED_METRIC)
    except result_files.ResultsTooLarge as error:
        st.warning(_too_large(error))
        return
    if not records:
        st.text("This result kept no per-image record of who became whom (its evidence file is absent).")
        return
    try:
        data = _benchmark_data(submission["data_dir"])
    except BenchmarkDataError as error:
        st.warning(plain(f"The benchmark this was scored against is not available here: {error}"))
        return
    worst = samples.worst_assignments(records, strict, WORST_ASSIGNMENTS)
    st.markdown(
        f"**The {len(worst)} image(s) where identities went most wrong** "
        f"(swaps + clones + misses + extras, then lowest {query.WHO_GROUNDED_METRIC})"
    )
    for image in worst.itertuples():
        _assignment(data, stored, image, records[(image.prompt_id, image.seed)])


def _assignment(data: BenchmarkData, stored: Path, image, record: dict) -> None:
    """One image's assignment in an expander: per person its reference, its matched face and the verdict;
    then the faces no person got."""
    prompt = data.prompt_rows[image.prompt_id]
    references = {p["slot"]: p["ref_id"] for p in prompt["persons"]}
    strict = "n/a" if np.isnan(image.id_sim_strict) else f"{image.id_sim_strict:.3f}"
    counts = ", ".join(f"{getattr(image, name)} {name}" for name in samples.WHO_ERRORS)
    with st.expander(plain(f"{image.prompt_id} seed {image.seed}: {counts}; {query.WHO_GROUNDED_METRIC} {strict}")):
        st.text(prompt.get("prompt", ""))
        table = samples.identity_table(record, references)
        generated = None
        try:
            generated = Image.open(samples.generation_file(stored, image.prompt_id, image.seed)).convert("RGB")
        except (KeyError, OSError):  # the stored folder lost the file: show the numbers without the faces
            st.text("The generated image is not in the stored submission.")
        for person in table.itertuples():
            reference, face, text = st.columns([1, 1, 3])
            reference.image(
                data.references[person.reference]["image"], caption=f"reference {person.slot}", width=FACE_PX
            )
            if generated is not None and person.box is not None:
                face.image(samples.face_crop(generated, person.box), caption=f"face {person.face}", width=FACE_PX)
            else:
                face.text("no face")
            text.text(
                f"{person.slot}: {person.verdict}\ncosine {_number(person.cosine)}, margin {_number(person.margin)}"
            )
        _table(table, hide_index=True)
        others = samples.unmatched_faces(record)
        if not record.get("faces"):
            st.text("No face was found in the generated image.")
        elif others.empty:
            st.text("Every generated face was matched to a person.")
        else:
            st.text(f"Faces matched to no person ({len(others)}; extra beyond N: {record['counts'].get('extra', 0)}):")
            _table(others, hide_index=True)
            if generated is not None:  # a crowd can hold dozens of faces: a row of the first few
                shown = others.head(UNMATCHED_SHOWN)
                for column, other in zip(st.columns(len(shown)), shown.itertuples()):
                    caption = f"face {other.face}" + (f", repeats {other.repeats}" if other.repeats else "")
                    column.image(samples.face_crop(generated, other.box), caption=caption, width=FACE_PX)


def _number(value: float) -> str:
    return "n/a" if value is None or np.isnan(value) else f"{value:.3f}"


def _sample_row(data: BenchmarkData, stored: Path, result_dir: Path, sample, metric: str) -> None:
    prompt = data.prompt_rows[sample.prompt_id]
    refs = samples.reference_ids(data, sample.prompt_id)
    # Fixed widths: the generation larger than its references, whatever the images' own sizes.
    columns = st.columns([2] + [1] * max(len(refs), 1))
    columns[0].image(
        str(samples.generation_file(stored, sample.prompt_id, sample.seed)),
        caption=f"generated (seed {sample.seed})",
        width=GENERATION_PX,
    )
    for column, ref in zip(columns[1:], refs):
        column.image(data.references[ref]["image"], caption=f"reference {ref}", width=REFERENCE_PX)
    st.text(f"{sample.prompt_id} seed {sample.seed}: {metric} = {sample.value:.4f}\n{prompt.get('prompt', '')}")
    try:
        found = samples.evidence(result_dir, sample.prompt_id, sample.seed)
    except result_files.ResultsTooLarge as error:
        found = {}
        st.caption(_too_large(error))
    if found:
        with st.expander("judge evidence"):
            st.json(found)


# --- submit page ---------------------------------------------------------------------------------


def rate_limit() -> RateLimit:
    """The app's per-submitter limit from ``$IDBENCH_SUBMIT_RATE_LIMIT`` (COUNT/SECONDS)."""
    return RateLimit(*settings.submit_rate_limit())


def _client() -> str | None:
    """Who is submitting, as far as the server knows (idbench.names.request_client): the signed-in Hub
    user (``st.user``, when the app is configured for Streamlit's OIDC login), else the connection's
    peer, or the address the first of ``$IDBENCH_TRUSTED_PROXIES`` reverse proxies appended to
    X-Forwarded-For. The rate limit counts by it, whatever submitter name is typed (docs/deploy.md)."""
    from idbench.names import request_client, trusted_proxies

    user = None
    try:
        if getattr(st.user, "is_logged_in", False):
            user = st.user.get("preferred_username") or st.user.get("name")
    except Exception:
        user = None
    context = st.context
    try:
        proxies = trusted_proxies()
    except ValueError as error:  # a misconfigured server takes no submission rather than trusting a header
        raise backend.QueueError(str(error)) from None
    return request_client(dict(context.headers or {}), getattr(context, "ip_address", None), user, proxies=proxies)


def _waiting(ahead: int) -> str:
    """What a waiting submitter sees: their place in the line (admission.Admission)."""
    deadline = admission.deadline_s()
    return (
        f"Waiting for a turn: {ahead} upload(s) ahead of yours are checked first, one at a time, each for at most "
        f"{deadline:g} s. Keep this page open."
    )


def submit_page() -> None:
    """Upload a zip or name a Hub dataset repo; validate through :func:`idbench.leaderboard.queue.submit`; job id or problems."""
    st.title("Submit")
    backend.submit_notice()
    # A form: typing in a field does not rerun the page; the button sends every field at once.
    form = st.form("submit-form", enter_to_submit=False)
    benchmark = form.selectbox(
        "Benchmark", list(benchmark_names()), format_func=lambda n: BENCHMARKS[n].title, key="submit-benchmark"
    )
    upload = form.file_uploader(
        "Submission (.zip of manifest.csv, submission.json and images)",
        type=["zip"],
        max_upload_size=MAX_UPLOAD_MB,
        key="submit-file",
    )
    repo = form.text_input(
        "... or a Hugging Face dataset repo (owner/name or owner/name@revision)", max_chars=200, key="submit-repo"
    )
    model_name = form.text_input(
        "Model name (empty: the one in submission.json)", max_chars=MAX_TEXT_CHARS["model"], key="submit-model"
    )
    family = form.text_input(
        "Model family (empty: the one in submission.json)", max_chars=MAX_TEXT_CHARS["family"], key="submit-family"
    )
    link = form.text_input(
        "Link to the paper, code or weights (http(s))", max_chars=MAX_TEXT_CHARS["link"], key="submit-link"
    )
    submitter = form.text_input("Submitter (optional)", max_chars=MAX_SUBMITTER, key="submit-submitter")
    if not form.form_submit_button("Submit", key="submit-button"):
        return
    if (upload is None) == (not repo.strip()):
        st.error("Choose a .zip file or give a dataset repo id (one of the two).")
        return
    if upload is not None and upload.size > MAX_UPLOAD_MB * 1024 * 1024:  # Streamlit enforces this too; belt and braces
        st.error(f"The file is larger than {MAX_UPLOAD_MB} MB.")
        return
    s = store()
    shown_name = upload.name if upload is not None else repo.strip()
    submitter = submitter.strip() or None
    with tempfile.TemporaryDirectory(prefix="idbench-upload-") as folder:
        try:
            client = _client()
            attempts = Store()  # refused uploads are kept here, also beside a Hub mirror
            admission.check_rate(attempts, rate_limit(), submitter, client)
            if upload is not None:
                path = Path(folder) / "submission.zip"
                with path.open("wb") as handle:
                    shutil.copyfileobj(upload, handle)
            else:
                path = fetch_submission(repo, Path(folder) / "submission", max_bytes=MAX_UPLOAD_MB * 1024 * 1024)
            too_big = admission.budget_problem(path)
            if too_big:
                raise admission.Refused(too_big)
            (scratch := Path(folder) / "scratch").mkdir()
            place = st.empty()
            with (
                st.spinner("Checking the submission (one at a time on this server)..."),
                ADMISSION.turn(client, report=lambda ahead: place.info(_waiting(ahead))),
            ):
                place.empty()
                result = backend.queue_submission(
                    s,
                    path,
                    benchmark,
                    model_name=model_name.strip() or None,
                    submitter=submitter,
                    family=family,
                    link=link,
                    rate_limit=rate_limit(),
                    client=client,
                    deadline=admission.deadline_s(),
                    scratch=scratch,
                )
        except SubmissionError as error:
            admission.record_refusal(attempts, submitter, client, f"{error.total} problem(s)")
            # One box however many problems: the count, then the listed ones (at most MAX_PROBLEMS,
            # then "... and N more", as SubmissionError words it) one a line, as plain text; the
            # temporary path means nothing to the submitter. "  \n" is Markdown's line break.
            lines = [f"The submission was not queued: {error.total} problem(s)."]
            lines += [plain(line.replace(str(path), shown_name)) for line in str(error).splitlines()]
            st.error("  \n".join(lines))
            return
        except (admission.Refused, HubSubmissionError) as error:  # the upload's own fault: counted
            admission.record_refusal(attempts, submitter, client, str(error))
            st.error(plain(f"The submission was not queued: {error}"))
            return
        except (admission.Busy, RateLimitError, backend.QueueError) as error:
            st.error(plain(f"The submission was not queued: {error}"))
            return
        except BenchmarkDataError as error:
            st.error(plain(f"This server cannot score {benchmark} submissions: {error}"))
            return
    if result.duplicate:
        st.info(result.message)
    else:
        st.success(result.message)


# --- status and about ----------------------------------------------------------------------------


def status_page() -> None:
    """Every job with its state and, for a failure, the reason (plain text in a table)."""
    st.title("Status")
    jobs = pd.DataFrame(jobs_table(store()))
    backend.mirror_status()  # after store(): the first read builds the mirror
    if jobs.empty:
        st.info("No submissions yet.")
        return
    counts = jobs["state"].value_counts()
    st.text("  ".join(f"{state}: {int(counts.get(state, 0))}" for state in JOB_STATES))
    if counts.get("PARKED", 0):
        st.caption(
            "PARKED: every attempt ended in a fault of the workers (models, GPU memory, judge, disk), not of the "
            "submission; the job waits for an admin to requeue it once the workers are fixed."
        )
    _table(jobs.iloc[::-1], hide_index=True)  # newest first
    _admin(sorted(set(jobs["submission"])))


def is_admin(token: str) -> bool:
    """True when ``token`` equals ``$IDBENCH_ADMIN_TOKEN`` (compared in constant time); never without one set."""
    expected = settings.admin_token()
    return bool(expected) and hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8"))


def _admin(submission_ids: list[int]) -> None:
    """Withdraw or rescore a submission, for whoever holds the admin token."""
    with st.expander("Admin"):
        if backend.admin_note():
            st.text(backend.admin_note())
            return
        if not settings.admin_token():
            st.text(f"Admin actions are off: the server has no {ADMIN_TOKEN_ENV} set.")
            return
        token = st.text_input("Admin token", type="password", key="admin-token")
        submission = st.selectbox("Submission", submission_ids, key="admin-submission")
        reason = st.text_input("Reason (shown on this page)", max_chars=MAX_REASON, key="admin-reason")
        withdraw, again = st.columns(2)
        action = "withdraw" if withdraw.button("Withdraw", key="admin-withdraw") else None
        action = "rescore" if again.button("Rescore", key="admin-rescore") else action
        if action is None:
            return
        if not is_admin(token):
            st.error("Wrong admin token; nothing was changed.")
            return
        try:
            if action == "withdraw":
                if not reason.strip():
                    st.error("Give a reason for withdrawing.")
                    return
                store().withdraw(int(submission), reason.strip())
                st.success(f"Withdrew submission {submission}; its files and results are kept.")
            else:
                job = rescore(store(), int(submission))
                st.success(
                    f"Queued job {job} for submission {submission}." if job else "A job is already queued for it."
                )
        except (UnknownIdError, ValueError) as error:
            st.error(plain(str(error)))


LATEST_JOBS = 10  # submissions listed on the overview


def overview_page() -> None:
    """The landing page: each benchmark's (and track's) leaders with a link to its page, then the latest
    submissions. A track of plumbing checks alone (the demo) shows them, marked, under the banner."""
    st.title("idbench leaderboard")
    st.caption("Identity preservation in reference-guided and multi-subject image generation.")
    pages = benchmark_pages()
    for name in benchmark_names():
        spec = get_benchmark(name)
        st.subheader(spec.title)
        st.text(spec.summary)
        tracks = query.tracks(spec)
        for track in tracks:
            results = current_results(name, track)
            if track != tracks[0] and results.empty:
                continue  # a second track (text-to-image) is listed once it has results
            label = f"{TRACK_LABELS.get(track, track)} track: " if len(tracks) > 1 else ""
            if results.empty:
                st.text(f"{label}0 scored submission(s).")
                continue
            plumbing, incomplete = query.default_switches(results, spec)
            # The leaders of the page's default ranking: within the spec's default group size, or pooled.
            filters = query.default_filters(results, spec)
            table = query.ranked_table(
                results, spec, filters=filters, include_plumbing=plumbing, include_incomplete=incomplete
            )
            table = query.split_ranking(table).ranked  # the leaders: never a row shown apart (a copy, say)
            if table.empty:  # cannot happen with the defaults above, but never show an empty frame
                st.text(f"{label}{len(results)} scored submission(s); none to rank.")
                continue
            metric = query.default_metric(results, spec)
            scope = query.ranking_scope(spec, filters)
            table, _ = rank_uncertainty(table, results, spec, metric, filters)
            st.text(
                f"{label}top of {len(table)} ranked submission(s), by {metric}" + (f", {scope}" if scope else "") + ":"
            )
            tied = query.leaders_tied(table)
            if tied:
                st.text(
                    f"Tied for first: {', '.join(tied)} (tier 1: not told apart at the {query.RANK_LEVEL:.0%} level)."
                )
            keep = table.head(3)[
                [
                    "rank",
                    query.RANK_INTERVAL,
                    query.TIER,
                    "model",
                    "family",
                    "marks",
                    query.JUDGE,
                    query.COPIES,
                    query.NOT_RANKED,
                    "submission",
                    metric,
                    metric + query.CI_LOW,
                    metric + query.CI_HIGH,
                ]
            ]
            ranked_frame(keep, results, spec, track, key=f"overview-{name}-{track}")
        st.page_link(pages[name], label=f"Open {spec.title}")
    _latest_submissions()


def _latest_submissions() -> None:
    """The newest jobs of the queue (any state), newest first, with their submission's task."""
    st.subheader("Latest submissions")
    s = store()
    jobs = jobs_table(s)[-LATEST_JOBS:]
    if not jobs:
        st.info("No submissions yet.")
        return
    tasks = {int(j["submission"]): query.task_of(s.submission(int(j["submission"]))) for j in jobs}
    _table(query.latest_jobs(jobs, tasks, LATEST_JOBS), hide_index=True, key="overview-latest")
    st.caption("Every job with its reason is on the Status page.")


def about_page() -> None:
    """Each benchmark's title, summary, paper and citation (our own text, from the specs)."""
    st.title("About")
    st.write(
        "idbench measures identity preservation in image generation. Rows marked *plumbing* were scored "
        "with random weights (the tiny or paper-random profile); rows marked *incomplete suite* lack some metrics."
    )
    for spec in BENCHMARKS.values():
        st.header(spec.title)
        st.write(spec.summary)
        st.text(f"Paper: {spec.paper}")
        for what, url in spec.links:
            st.markdown(f"- {what}: <{url}>")
        st.code(spec.citation, language="bibtex")
        st.caption(CITATION_NOTE)


CITATION_NOTE = (
    "The paper text this benchmark follows names no authors, venue, arXiv id or year, so the entry holds "
    "only its title (and the links it gives); complete it from the published paper when you cite it."
)
