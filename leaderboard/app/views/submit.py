"""The submit page: the form, or, where this deployment cannot queue anything, only why (one box)."""

import streamlit as st

from idbench.leaderboard.app import backend
from idbench.leaderboard.app.render import submit_page

if backend.submissions_off_reason() is None:
    submit_page()  # its notice warns of benchmarks this deployment cannot take, if any
else:
    # No form at all: an upload that cannot be queued would only fail after the upload.
    st.title("Submit")
    backend.submit_notice()
