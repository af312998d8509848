"""The landing page."""

from idbench.leaderboard.app.screens.overview import overview_page

overview_page()
