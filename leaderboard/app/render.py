"""What each page of the leaderboard app draws; the files under ``views/`` call one function each.

Data comes from :mod:`leaderboard.query` (pure pandas) over :meth:`Store.current_results`, cached with
``st.cache_data`` under a key that includes :func:`leaderboard.query.store_version`, so a finished job
shows up on the next rerun without serving stale tables. Anything a submitter typed (model name,
metadata, failure reasons) is drawn only through ``st.text``, ``st.dataframe``, ``st.error`` of plain
strings or ``st.json``: never as HTML, and never as Markdown, where a link or image would render.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a server; set before pyplot is imported
# Model names label the plots: a "$" in one must stay a dollar sign, not start mathtext (or fail to parse).
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import streamlit as st

from builders.benchmarks import BENCHMARKS, get_benchmark
from builders.spec import BenchmarkSpec
from evaluate_pkg.data import BenchmarkDataError
from evaluate_pkg.submission import SubmissionError
from leaderboard import query
from leaderboard.queue import jobs_table, submit
from leaderboard.store import Store

MAX_UPLOAD_MB = 512  # per submission zip; Streamlit refuses larger uploads before our code sees them
MAX_MODEL_NAME = 100
MAX_SUBMITTER = 100
ALL = "all"  # the filter choice that means "no filter on this axis"
# Benchmarks in the order pages and pickers list them: the stress test first (the default page).
ORDER = tuple(sorted(BENCHMARKS, key=lambda name: (name != "identity-collapse", name)))


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:])")


def plain(text: str) -> str:
    """``text`` with every Markdown-special character backslash-escaped, for alerts that render Markdown.

    ``st.error`` and friends have no plain-text mode; escaping keeps a file name such as
    ``![x](http://...)`` from a submitted zip from rendering as an image or link.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


# --- data ----------------------------------------------------------------------------------------


def store() -> Store:
    """The store under ``$IDBENCH_HOME`` (read on every rerun, so tests can point it elsewhere)."""
    return Store()


@st.cache_data(show_spinner=False, max_entries=32)
def _current_results(home: str, benchmark: str, version: tuple[int, int]) -> pd.DataFrame:
    # ``version`` is only part of the cache key: a new result changes it and misses the cache.
    return Store(Path(home)).current_results(benchmark)


def current_results(benchmark: str) -> pd.DataFrame:
    """The current results of ``benchmark``, cached until the store's results change."""
    s = store()
    return _current_results(str(s.home), benchmark, query.store_version(s))


def data_dir(s: Store, benchmark: str) -> Path:
    """The built benchmark submissions are validated against, as ``idbench submit`` finds it."""
    return s.home / "benchmarks" / benchmark


# --- a benchmark's page --------------------------------------------------------------------------


def benchmark_page(benchmark: str) -> None:
    """Ranked table with metric, filters and plumbing switch; CSV download; the benchmark's plots."""
    spec = get_benchmark(benchmark)
    st.title(spec.title)
    st.caption(spec.summary)
    results = current_results(benchmark)
    if results.empty:
        st.info("No scored submissions yet.")
        return

    metrics = query.available_metrics(results, spec)
    specs = query.metric_specs(spec)
    metric = st.selectbox(
        "Rank by",
        metrics,
        index=metrics.index(query.default_metric(results, spec)),
        format_func=lambda m: f"{m} ({'higher' if specs[m].higher_is_better else 'lower'} is better)",
        key=f"{benchmark}-metric",
    )
    options = query.filter_options(results, spec)
    filters = {}
    columns = st.columns(max(len(options), 1))
    for column, (axis, values) in zip(columns, options.items()):
        choice = column.selectbox(axis, [ALL, *values], key=f"{benchmark}-filter-{axis}")
        filters[axis] = None if choice == ALL else choice
    plumbing = st.checkbox(
        "show plumbing-check rows",
        value=False,
        key=f"{benchmark}-plumbing",
        help="Rows scored with the tiny profile (random weights): they check the pipeline, not the model.",
    )

    try:
        table = query.ranked_table(results, spec, metric=metric, filters=filters, include_plumbing=plumbing)
    except ValueError as error:  # a combination of filters no breakdown answers (e.g. type alone for a 2-axis-only spec)
        st.warning(plain(str(error)))
        return
    shown = query.display_table(table, spec)
    st.dataframe(shown, hide_index=True)
    # Exactly the shown table, so the download is what the reader saw (filters and all).
    st.download_button(
        "Download CSV",
        shown.to_csv(index=False).encode("utf-8"),
        file_name=f"{benchmark}-leaderboard.csv",
        mime="text/csv",
        on_click="ignore",
        key=f"{benchmark}-csv",
    )
    if table.empty:
        hidden = int(results["plumbing"].astype(bool).sum())
        st.info(f"No rows to show; {hidden} plumbing-check row(s) hidden." if hidden else "No rows to show.")
        return
    _plots(results, spec, metric, plumbing)


def _plots(results: pd.DataFrame, spec: BenchmarkSpec, metric: str, plumbing: bool) -> None:
    """The benchmark's figures, each from the same rows as the table (plumbing included or not)."""
    by_size = query.metric_vs_group_size(results, spec, metric, include_plumbing=plumbing)
    if not by_size.empty:
        st.subheader(f"{metric} vs number of subjects")
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for model, group in by_size.groupby("model", sort=True):
            ax.plot(group["group_size"], group["mean"], marker="o", label=model)
            ax.fill_between(group["group_size"], group["ci_low"], group["ci_high"], alpha=0.15)
        ax.set_xlabel(query.group_size_axis(spec) or "group size")
        ax.set_ylabel(metric)
        ax.set_xticks(sorted(by_size["group_size"].unique()))
        ax.legend(fontsize="small")
        _show(fig)

    matrix = query.type_style_matrix(results, spec, metric, include_plumbing=plumbing)
    if not matrix.empty:
        st.subheader(f"{metric} per subject type x style")
        fig, ax = plt.subplots(figsize=(1 + 0.8 * matrix.shape[1], 1 + 0.5 * matrix.shape[0]))
        image = ax.imshow(matrix.to_numpy(dtype=float), aspect="auto", cmap="viridis")
        ax.set_xticks(range(matrix.shape[1]), matrix.columns, rotation=45, ha="right")
        ax.set_yticks(range(matrix.shape[0]), matrix.index)
        fig.colorbar(image, ax=ax, label=metric)
        _show(fig)

    identity = next((m for m in spec.ranking if m != "clip_t"), None)
    overall = query.ranked_table(results, spec, metric=metric, include_plumbing=plumbing)
    if identity in overall.columns and "clip_t" in overall.columns:
        st.subheader(f"CLIP-T vs {identity}")
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.scatter(overall["clip_t"], overall[identity])
        for _, row in overall.iterrows():
            ax.annotate(str(row["model"]), (row["clip_t"], row[identity]), fontsize="small")
        ax.set_xlabel("clip_t")
        ax.set_ylabel(identity)
        _show(fig)

    scr = [m.name for m in spec.metric_suite if m.name.startswith("scr@") and m.name in overall.columns]
    if scr:
        st.subheader("Subject Collapse Rate at each threshold (%)")
        fig, ax = plt.subplots(figsize=(6, 3.5))
        width = 0.8 / len(scr)
        for i, name in enumerate(scr):
            ax.bar(np.arange(len(overall)) + i * width, 100 * overall[name], width, label=name)
        ax.set_xticks(np.arange(len(overall)) + width * (len(scr) - 1) / 2, overall["model"].astype(str), rotation=30, ha="right")
        ax.set_ylabel("% of references collapsed")
        ax.legend(fontsize="small")
        _show(fig)

    radar = query.radar_axes(results, spec, include_plumbing=plumbing)
    if radar.shape[1] >= 3:
        st.subheader("Profile (outward is better)")
        angles = np.linspace(0, 2 * np.pi, radar.shape[1], endpoint=False)
        fig, ax = plt.subplots(figsize=(4.5, 4.5), subplot_kw={"polar": True})
        for model, values in radar.iterrows():
            closed = np.append(values.to_numpy(dtype=float), values.iloc[0])
            ax.plot(np.append(angles, angles[0]), closed, label=str(model))
        ax.set_xticks(angles, radar.columns, fontsize="small")
        ax.legend(fontsize="x-small", loc="upper right", bbox_to_anchor=(1.3, 1.1))
        _show(fig)


def _show(fig: plt.Figure) -> None:
    fig.tight_layout()
    st.pyplot(fig)
    plt.close(fig)  # figures are not garbage collected while pyplot tracks them


# --- model page ----------------------------------------------------------------------------------


def model_page() -> None:
    """One scored submission: its metadata and encoders as text, and every breakdown table."""
    st.title("Model")
    benchmark = st.selectbox("Benchmark", list(ORDER), format_func=lambda n: BENCHMARKS[n].title, key="model-benchmark")
    spec = get_benchmark(benchmark)
    results = current_results(benchmark)
    if results.empty:
        st.info("No scored submissions yet.")
        return
    labels = dict(zip(results["submission_id"], query.model_labels(results)))
    submission = st.selectbox("Submission", list(labels), format_func=lambda i: labels[i], key="model-submission")
    row = results[results["submission_id"] == submission].iloc[0].to_dict()
    marks = query.marks(row, spec)
    if marks:
        st.warning(f"Marked: {marks}")
    st.subheader("Metadata")
    # st.text: the submitter wrote these; they must not render as Markdown or HTML.
    st.text(f"model: {row['model_name']}\nsubmitter: {row['submitter'] or ''}\nprofile: {row['profile']}")
    st.json(row["metadata"], expanded=False)
    st.text(
        f"benchmark version: {row['benchmark_version']}\nsuite version: {row['suite_version']}\n"
        f"idbench version: {row['idbench_version']}"
    )
    st.json(row["models"], expanded=False)
    if row["not_run"]:
        st.text("not run:\n" + "\n".join(f"  {m}: {why}" for m, why in row["not_run"].items()))
    st.subheader("Overall")
    overall = query.ranked_table(results[results["submission_id"] == submission], spec, include_plumbing=True)
    st.dataframe(query.display_table(overall, spec), hide_index=True)
    for name, table in query.breakdown_tables(row, spec).items():
        if not table.empty:
            st.subheader(f"By {name}")
            st.dataframe(table.reset_index(), hide_index=True)


# --- submit page ---------------------------------------------------------------------------------


def submit_page() -> None:
    """Upload a zip, validate it through :func:`leaderboard.queue.submit`, show the job id or the problems."""
    st.title("Submit")
    benchmark = st.selectbox("Benchmark", list(ORDER), format_func=lambda n: BENCHMARKS[n].title, key="submit-benchmark")
    upload = st.file_uploader(
        "Submission (.zip of manifest.csv, submission.json and images)", type=["zip"], max_upload_size=MAX_UPLOAD_MB, key="submit-file"
    )
    model_name = st.text_input("Model name (empty: the one in submission.json)", max_chars=MAX_MODEL_NAME, key="submit-model")
    submitter = st.text_input("Submitter (optional)", max_chars=MAX_SUBMITTER, key="submit-submitter")
    if not st.button("Submit", key="submit-button"):
        return
    if upload is None:
        st.error("Choose a .zip file first.")
        return
    if upload.size > MAX_UPLOAD_MB * 1024 * 1024:  # Streamlit enforces this too; belt and braces
        st.error(f"The file is larger than {MAX_UPLOAD_MB} MB.")
        return
    s = store()
    with tempfile.TemporaryDirectory(prefix="idbench-upload-") as folder:
        path = Path(folder) / "submission.zip"
        with path.open("wb") as handle:
            shutil.copyfileobj(upload, handle)
        try:
            result = submit(s, path, data_dir(s, benchmark), model_name=model_name.strip() or None, submitter=submitter.strip() or None)
        except SubmissionError as error:
            # One st.error per problem, as plain text; the temporary path means nothing to the submitter.
            st.error(f"The submission was not queued: {len(error.problems)} problem(s).")
            for problem in error.problems:
                st.error(plain(str(problem).replace(str(path), upload.name)))
            return
        except BenchmarkDataError as error:
            st.error(plain(f"This server cannot score {benchmark} submissions: {error}"))
            return
    if result.duplicate:
        st.info(f"Already submitted: submission {result.submission_id}, job {result.job_id}. Nothing new was queued.")
    else:
        st.success(f"Queued: submission {result.submission_id}, job {result.job_id}. See the Status page.")


# --- status and about ----------------------------------------------------------------------------


def status_page() -> None:
    """Every job with its state and, for a failure, the reason (plain text in a table)."""
    st.title("Status")
    jobs = pd.DataFrame(jobs_table(store()))
    if jobs.empty:
        st.info("No submissions yet.")
        return
    counts = jobs["state"].value_counts()
    st.text("  ".join(f"{state}: {int(counts.get(state, 0))}" for state in ("PENDING", "RUNNING", "FINISHED", "FAILED")))
    st.dataframe(jobs.iloc[::-1], hide_index=True)  # newest first


def about_page() -> None:
    """Each benchmark's title, summary, paper and citation (our own text, from the specs)."""
    st.title("About")
    st.write(
        "idbench measures identity preservation in image generation. Rows marked *plumbing* were scored "
        "with random weights (the tiny profile); rows marked *incomplete suite* lack some metrics."
    )
    for spec in BENCHMARKS.values():
        st.header(spec.title)
        st.write(spec.summary)
        st.text(f"Paper: {spec.paper}")
        st.code(spec.citation, language="bibtex")
