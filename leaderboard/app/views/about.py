"""The about page."""

from leaderboard.app.render import about_page

about_page()
