"""The model page: one scored result in full.

Which result is shown comes from the link (a submission id, or a model name that only one current row
has) or the pickers. The page then warns of what a reader must know first, and shows the metadata, how
the images were made, the judge and its control pairs, the copy check, the overall row and every
breakdown, a comparison with another result of the same track, and (from
:mod:`~idbench.leaderboard.app.screens.model_samples`) who became whom and the best and worst images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from idbench import settings
from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.evaluate_pkg.report import not_run_lines
from idbench.leaderboard import query, samples
from idbench.leaderboard.app.data import current_results, read_results, stored_rank_intervals
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.app.screens.model_samples import sample_grid, who_became_whom
from idbench.leaderboard.app.widgets import (
    INVALID,
    PLUMBING_BANNER,
    benchmark_names,
    initial,
    link_notes,
    show_table,
    stored_text,
    track_choice,
    units_caption,
    units_raw,
)


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
    submission = _submission_choice(benchmark, track, results, labels, notes)
    if submission is None:
        return
    link_notes(notes)
    row = results[results["submission_id"] == submission].iloc[0].to_dict()
    params = {"benchmark": benchmark, "submission": str(submission), "model": str(row["model_name"])}
    compare_param = st.query_params.get("compare")  # read before the address bar is rewritten below
    st.query_params.from_dict(params | ({"track": track} if track != query.tracks(spec)[0] else {}))
    _warnings(row, spec)
    _details(row, spec, results, submission)
    _compare_with(row, results, spec, labels, submission, compare_param)
    if query.records_who_became_whom(spec, track):
        who_became_whom(row, spec)
    sample_grid(row, spec)


def _submission_choice(
    benchmark: str, track: str, results: pd.DataFrame, labels: dict[int, str], notes: list[str]
) -> int | None:
    """The "Submission" choice, first set from the link's ``submission`` or ``model``; None when the link
    names a model that several current rows have (the page then lists them to choose from)."""
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
            show_table(
                choices,
                hide_index=True,
                column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
                key="model-choices",
            )
            link_notes(notes)
            return None
        chosen = match.chosen if match is not None else None
        initial("model-submission", "model", ids, ids[0], notes, parse=lambda _: INVALID if chosen is None else chosen)
    submission = st.selectbox("Submission", ids, format_func=lambda i: labels[i], key="model-submission")
    return submission


def _warnings(row: dict, spec: BenchmarkSpec) -> None:
    """One alert with what a reader must know before the numbers, when there is any."""
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


def _details(row: dict, spec: BenchmarkSpec, results: pd.DataFrame, submission: int) -> None:
    """The scores first (the overall row, what was not run), then the metadata, generation, raw JSON,
    judge and copy check, then every breakdown."""
    st.subheader("Overall")
    overall = query.display_table(_model_overall(results, spec, submission), spec, compact=True, raw=units_raw())
    show_table(_dash_unranked(overall), hide_index=True, key="model-overall")
    if row["not_run"]:  # one line per reason; metrics of the benchmark's other tasks only counted
        st.text(
            "\n".join(line.strip() for line in not_run_lines({"not_run": row["not_run"], "task": row["task"]}, spec))
        )
    st.subheader("Metadata")
    # A table of plain strings: the submitter wrote these; they must not render as Markdown or HTML.
    show_table(query.metadata_table(row), hide_index=True, key="model-metadata")
    _generation(row)
    with st.expander("metadata as submitted (JSON)"):
        st.json(row["metadata"])
    with st.expander("models and revisions it was scored with (JSON)"):
        st.json(row["models"])
    _judge_card(row, spec)
    _copy_check(row)
    for name, table in query.breakdown_tables(row, spec, intervals=True).items():
        if not table.empty:
            # As the ranked table: each cell "mean [ci_low, ci_high]" in the metric's one format and unit.
            st.subheader(f"By {name}")
            shown = query.display_table(table, spec, compact=True, raw=units_raw())
            show_table(shown.reset_index(), hide_index=True)
    st.caption(units_caption())


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
    track = str(results["task"].iloc[0]) if not results.empty else DEFAULT_TASK
    ranked, _ = stored_rank_intervals(ranking.ranked, results, spec, metric, {}, track)
    table = pd.concat([ranked, query.with_rank_uncertainty(ranking.unranked)], ignore_index=True)
    return table[table["submission"] == submission].reset_index(drop=True)


NO_COMPARISON = "(none)"


def _run_of(row: dict[str, Any]):
    """A stored result as :mod:`idbench.evaluate_pkg.compare` reads a run: the fields its refusal checks
    (benchmark, build: the submission's benchmark version, suite, profile, task, judge), the aggregates
    (resampling design, breakdown prompts) and the per-sample values; None without readable values."""
    from idbench.evaluate_pkg.compare import Run

    frame = read_results(str(row["results_path"]), ("prompt_id", "seed", "metric", "subject", "value"))
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
        show_table(tables.pop("overall"), hide_index=True, key="model-compare-overall")
    else:
        st.text("No metric of the suite holds values in both results.")
    if tables:
        with st.expander(f"per breakdown cell ({len(tables)} cells)"):
            cells = pd.concat([t.assign(cell=name) for name, t in tables.items()], ignore_index=True)
            show_table(
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
    show_table(
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
    show_table(table, hide_index=True, key="model-generation")


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
