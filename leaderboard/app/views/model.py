"""The model page."""

from leaderboard.app.render import model_page

model_page()
