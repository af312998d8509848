"""The submit page: the form, or, where this deployment cannot queue anything, only why (one box)."""

from idbench.leaderboard.app.screens.submit import page

page()
