"""The status page; in a Hub-backed deployment also the records the mirror does not show for want of provenance."""

from idbench.leaderboard.app.screens.status import page

page()
