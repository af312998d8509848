"""The identity-collapse leaderboard page."""

from leaderboard.app.render import benchmark_page

benchmark_page("identity-collapse")
