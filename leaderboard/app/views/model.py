"""The model page."""

from idbench.leaderboard.app.screens.model import model_page

model_page()
