"""One scoring suite per benchmark: how it computes the metrics its spec declares.

A benchmark's spec names its suite (``BenchmarkSpec.suite``, a module or ``"module:attr"``). The
metrics, and the model roles each needs, are declared once, on the spec (``MetricSpec.roles``). A
suite has ``NOT_RUN`` (metric -> why this engine does not compute it: e.g. a task that scores
something other than generations) and ``score(ctx, metrics) -> list[Result]``, raw values only, for
every other metric of the spec. Besides those it may store ``<judged metric>.failure_rate`` and
the per-image counts it lists in ``DIAGNOSTICS`` (name -> what it counts), nothing else (the
contract test ``tests/scoring/test_suite_contract.py`` holds every registered benchmark to this).
The runner adds the copy check's per-image ``copy.flag`` and ``copy.pasted`` (and, on multi-subject benchmarks, ``copy.foreign``) for every benchmark
(:mod:`idbench.evaluate_pkg.copies`).
Everything else (aggregation, display conventions, reports) is
generic. A suite module may also hold the benchmark's baseline layout (``BASELINES``, named by
``BenchmarkSpec.baselines``).
"""

from __future__ import annotations

from typing import Any

from idbench.builders.registry import get_benchmark


def suite_for(benchmark: str) -> Any:
    """The scoring suite of ``benchmark``, as its spec names it (imported on first use)."""
    return get_benchmark(benchmark).load("suite")
