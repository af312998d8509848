"""Scoring generations against the benchmarks (submission validation, feature store, metrics).

Filled in by the scoring-engine issue; the benchmark descriptions it reads live in builders.benchmarks.
"""
