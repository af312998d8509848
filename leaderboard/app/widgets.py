"""Pieces that several pages of the app draw the same way.

The benchmark pages of the navigation, the sidebar's unit switch as the pages read it, the track choice,
the deep links (a page's widgets take their first values from the URL and write them back), the ranked
table with its model links and plumbing banner, and a data grid that shows a missing value as a dash.
Nothing here reads the store: that is :mod:`idbench.leaderboard.app.data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from idbench.builders.registry import BENCHMARKS
from idbench.builders.spec import BenchmarkSpec
from idbench.leaderboard import query
from idbench.leaderboard.app.markdown import plain

# Above any table that holds a row scored with the tiny profile (the demo's rows among them).
PLUMBING_BANNER = "Plumbing check: random weights, not model scores"
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


MAX_STORED_TEXT = 160  # characters of a stored description (a resampling method) a caption shows


def stored_text(value: object) -> str:
    """A description read from a result's files (``aggregates.json``: the resampling method), as caption
    text: one line, at most :data:`MAX_STORED_TEXT` characters, Markdown escaped. Results files are
    data, written by a scorer or edited in place on a results repo; a caption renders Markdown, so
    ``![x](https://...)`` in a method would load an image for every visitor."""
    text = " ".join(str(value).split())
    return plain(text if len(text) <= MAX_STORED_TEXT else text[: MAX_STORED_TEXT - 3] + "...")


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


INVALID = object()  # what a parser returns for a value it cannot read


def _allowed(value: Any, options: Sequence[Any] | None) -> bool:
    """``value`` is one of ``options`` (a list value: each of its items is); anything when None."""
    if value is INVALID:
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
            parsed = INVALID
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
    show_table(
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
            # Headers that need a word: the papers' columns that leave judge failures out (never ranked), the
            # missing-evidence counts.
            **{
                column: st.column_config.Column(column, help=note)
                for column, note in query.column_help(spec, units_raw()).items()
                if column in shown.columns
            },
        },
    )


def show_table(frame: pd.DataFrame, **options: Any) -> None:
    """``st.dataframe`` with a missing value (no rank for a row shown apart, an empty cell of a breakdown)
    shown as a dash: the grid's own rendering of a missing value is the word "None"."""
    options.setdefault("placeholder", "-")
    st.dataframe(frame, **options)
