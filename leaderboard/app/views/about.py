"""The about page."""

from idbench.leaderboard.app.screens.about import about_page

about_page()
