"""The model page."""

from idbench.leaderboard.app.render import model_page

model_page()
