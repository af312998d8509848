"""The status page; in a Hub-backed deployment also the records the mirror does not show for want of provenance."""

import streamlit as st

from idbench.evaluate_pkg.submission import MAX_PROBLEMS
from idbench.leaderboard.app import backend
from idbench.leaderboard.app.render import status_page


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


status_page()
provenance_status()
