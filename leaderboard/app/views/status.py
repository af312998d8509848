"""The status page."""

from leaderboard.app.render import status_page

status_page()
