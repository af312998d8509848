"""The submit page."""

from idbench.leaderboard.app.render import submit_page

submit_page()
