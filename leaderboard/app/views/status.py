"""The status page."""

from idbench.leaderboard.app.render import status_page

status_page()
