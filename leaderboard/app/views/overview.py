"""The landing page."""

from leaderboard.app.render import overview_page

overview_page()
