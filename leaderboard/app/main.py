"""Entry script of the leaderboard app (``streamlit run leaderboard/app/main.py``): the navigation.

One page per benchmark, then the model, submit, status and about pages. Each page is a file under
``views/`` (file pages, so ``AppTest.switch_page`` can reach them in tests).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from builders.benchmarks import BENCHMARKS

HERE = Path(__file__).resolve().parent
# Benchmark pages in a fixed order: the stress test first (it is the default page).
BENCHMARK_PAGES = {"identity-collapse": "identity_collapse.py", "cogcanvas": "cogcanvas.py", "charis": "charis.py"}

st.set_page_config(page_title="idbench leaderboard", layout="wide")
pages = {
    "Benchmarks": [
        st.Page(HERE / "views" / file, title=BENCHMARKS[name].title, url_path=name.replace("-", "_"), default=i == 0)
        for i, (name, file) in enumerate(BENCHMARK_PAGES.items())
    ],
    "Leaderboard": [
        st.Page(HERE / "views" / "model.py", title="Model", url_path="model"),
        st.Page(HERE / "views" / "submit.py", title="Submit", url_path="submit"),
        st.Page(HERE / "views" / "status.py", title="Status", url_path="status"),
        st.Page(HERE / "views" / "about.py", title="About", url_path="about"),
    ],
}
st.navigation(pages).run()
