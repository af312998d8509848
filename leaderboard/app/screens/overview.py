"""The overview, the app's landing page: each benchmark's leaders (per track) with a link to its page,
then the latest submissions."""

from __future__ import annotations

import streamlit as st

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import query
from idbench.leaderboard.app.data import current_results, store, stored_rank_intervals
from idbench.leaderboard.app.widgets import TRACK_LABELS, benchmark_names, benchmark_pages, ranked_frame, show_table
from idbench.leaderboard.queue import jobs_table

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
            table, _ = stored_rank_intervals(table, results, spec, metric, filters, track)
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
    show_table(query.latest_jobs(jobs, tasks, LATEST_JOBS), hide_index=True, key="overview-latest")
    st.caption("Every job with its reason is on the Status page.")
