"""The status page: every job with its state and reason, the admin actions for whoever holds the
token, and, in a Hub-backed deployment, the records the mirror does not show for want of provenance.
"""

from __future__ import annotations

import hmac

import pandas as pd
import streamlit as st

from idbench import settings
from idbench.evaluate_pkg.submission import MAX_PROBLEMS
from idbench.leaderboard.app import backend
from idbench.leaderboard.app.data import store
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.app.widgets import show_table
from idbench.leaderboard.queue import jobs_table, rescore
from idbench.leaderboard.queue.local import StoreQueue
from idbench.leaderboard.store import JOB_STATES, UnknownIdError

MAX_REASON = 200
# Withdrawing and rescoring from the app need this token; with it unset the app offers neither.
ADMIN_TOKEN_ENV = settings.ADMIN_TOKEN


def page() -> None:
    """The page as the navigation runs it: the jobs, then the mirror's unproven records."""
    status_page()
    provenance_status()


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
    show_table(jobs.iloc[::-1], hide_index=True)  # newest first
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
                StoreQueue(store()).withdraw(str(int(submission)), reason.strip())  # the queue refreshes the board
                st.success(f"Withdrew submission {submission}; its files and results are kept.")
            else:
                job = rescore(store(), int(submission))
                st.success(
                    f"Queued job {job} for submission {submission}." if job else "A job is already queued for it."
                )
        except (UnknownIdError, ValueError) as error:
            st.error(plain(str(error)))


def provenance_status() -> None:
    """The mirror's conflicts (hub_mirror.prove): each record not shown because nothing proves it, and why."""
    mirror = backend.refresher()
    if mirror is None or mirror.info is None or not mirror.info.conflicts:
        return
    conflicts = mirror.info.conflicts
    st.warning(
        f"{len(conflicts)} record(s) in the Hub repos are not shown: a result without exactly one matching "
        "request record (an orphan or a mismatch), or two records claiming one content hash:"
    )
    shown = list(conflicts[:MAX_PROBLEMS])  # a repo full of forged files must not make a page of a million lines
    if len(conflicts) > MAX_PROBLEMS:
        shown.append(f"... and {len(conflicts) - MAX_PROBLEMS} more (the Space's log lists them all)")
    st.text("\n".join(shown))  # plain text: the lines hold repo paths and field values
