"""The submit page."""

from leaderboard.app.render import submit_page

submit_page()
