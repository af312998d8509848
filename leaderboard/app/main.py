"""Entry script of the leaderboard app (``streamlit run leaderboard/app/main.py``): the navigation.

An overview (the default page, served at ``/``), one page per registered benchmark (in the order of
``BenchmarkSpec.page_order``), then the model, submit, status and about pages. Each page is a file
under ``views/`` (file pages, so ``AppTest.switch_page`` can reach them in tests) that calls into its
module under ``screens/``; the benchmark pages share ``views/benchmark.py``, which shows the benchmark
recorded here for the page being run. The overview is a page of its own because Streamlit serves the
default page at ``/`` only and ignores its ``url_path``: a benchmark as the default would have no URL
of its own.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from idbench.leaderboard import query
from idbench.leaderboard.app.widgets import CURRENT_BENCHMARK, UNITS_KEY, benchmark_pages

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="idbench leaderboard", layout="wide")
benchmarks = benchmark_pages()
pages = {
    "Benchmarks": [st.Page(HERE / "views" / "overview.py", title="Overview", default=True), *benchmarks.values()],
    "Leaderboard": [
        st.Page(HERE / "views" / "model.py", title="Model", url_path="model"),
        st.Page(HERE / "views" / "submit.py", title="Submit", url_path="submit"),
        st.Page(HERE / "views" / "status.py", title="Status", url_path="status"),
        st.Page(HERE / "views" / "about.py", title="About", url_path="about"),
    ],
}
page = st.navigation(pages)
# One unit system for the whole app: every table, chart and model page reads this switch (widgets.units_raw).
st.sidebar.radio(
    "Units",
    query.UNITS,
    key=UNITS_KEY,
    help=query.units_help(),
)
st.session_state[CURRENT_BENCHMARK] = next(
    (name for name, p in benchmarks.items() if p.url_path == page.url_path), None
)
page.run()
