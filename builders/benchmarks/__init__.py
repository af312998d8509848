"""The registry of benchmark descriptions: the one place each benchmark is described."""

from __future__ import annotations

from idbench.builders.spec import BenchmarkSpec


def _load() -> dict[str, BenchmarkSpec]:
    from idbench.builders.benchmarks import charis, cogcanvas, identity_collapse

    return {spec.name: spec for spec in (charis.SPEC, cogcanvas.SPEC, identity_collapse.SPEC)}


BENCHMARKS: dict[str, BenchmarkSpec] = _load()


def get_benchmark(name: str) -> BenchmarkSpec:
    """The description of benchmark ``name``; the error lists the benchmarks that exist."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}") from None
