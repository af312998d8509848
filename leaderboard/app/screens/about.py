"""The about page: what idbench measures, and each benchmark's summary, paper, links and citation."""

from __future__ import annotations

import streamlit as st

from idbench.builders.registry import BENCHMARKS


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
