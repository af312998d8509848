"""The identity-collapse leaderboard page."""

from idbench.leaderboard.app.render import benchmark_page

benchmark_page("identity-collapse")
