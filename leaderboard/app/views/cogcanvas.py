"""The cogcanvas leaderboard page."""

from leaderboard.app.render import benchmark_page

benchmark_page("cogcanvas")
