"""The charis leaderboard page."""

from leaderboard.app.render import benchmark_page

benchmark_page("charis")
