"""The charis leaderboard page."""

from idbench.leaderboard.app.render import benchmark_page

benchmark_page("charis")
