"""The about page."""

from idbench.leaderboard.app.render import about_page

about_page()
