"""The landing page."""

from idbench.leaderboard.app.render import overview_page

overview_page()
