"""Every benchmark's leaderboard page: main.py registers this file once per benchmark of the registry."""

from idbench.leaderboard.app.screens.benchmark import current_benchmark_page

current_benchmark_page()
