"""The registry of benchmark descriptions: the one place every layer finds a benchmark.

Every benchmark, the three built-in ones included, is a plugin: a Python entry point in the group
``idbench.benchmarks`` naming its spec (or a function returning one). idbench's own are declared in its
``pyproject.toml``::

    [project.entry-points."idbench.benchmarks"]
    charis = "idbench.benchmarks.charis.spec:SPEC"

so no generic module imports a benchmark (an import-linter contract checks it). A third-party package
declares its own the same way; tests and notebooks may also :func:`register` a spec directly.

Entry points are loaded lazily: looking a name up loads the entry point of that name alone (a spec
imports ``datasets`` but no model stack), and only listing every benchmark, or a name that no entry
point carries, loads them all. See docs/adding-a-benchmark.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any

from idbench.builders.spec import BenchmarkSpec
from idbench.errors import IdbenchError

ENTRY_POINT_GROUP = "idbench.benchmarks"


class UnknownBenchmarkError(IdbenchError, KeyError):
    """A benchmark name the registry does not know; the message lists those it knows."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a repr
        return str(self.args[0]) if self.args else ""


class Registry(Mapping):
    """name -> BenchmarkSpec, in page order (``spec.page_order``, then name); entry points load lazily."""

    def __init__(self, specs: dict[str, BenchmarkSpec] | None = None):
        self._specs = dict(specs or {})
        self._tried: set[tuple[str, str]] = set()  # entry points (name, value) already loaded or refused
        self._all_loaded = False

    def _load(self, point: Any) -> None:
        if (point.name, point.value) in self._tried:
            return
        self._tried.add((point.name, point.value))
        try:
            spec = point.load()
            spec = spec() if callable(spec) and not isinstance(spec, BenchmarkSpec) else spec
            if not isinstance(spec, BenchmarkSpec):
                raise TypeError(f"it gives a {type(spec).__name__}, not a BenchmarkSpec")
        except Exception as err:  # a broken plugin must not take the other benchmarks down
            warnings.warn(
                f"entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}) not loaded: {err}", stacklevel=3
            )
            return
        if spec.name in self._specs and self._specs[spec.name] is not spec:
            warnings.warn(
                f"entry point {point.name} ({ENTRY_POINT_GROUP}): benchmark {spec.name!r} already exists; ignored",
                stacklevel=3,
            )
            return
        self._specs[spec.name] = spec

    def _load_named(self, name: str) -> None:
        # An entry point is named after its benchmark, so a lookup imports that benchmark's spec alone.
        for point in entry_points(group=ENTRY_POINT_GROUP, name=name):
            self._load(point)
        if name not in self._specs:
            self._load_all()

    def _load_all(self) -> None:
        if self._all_loaded:
            return
        self._all_loaded = True
        for point in entry_points(group=ENTRY_POINT_GROUP):
            self._load(point)

    def __getitem__(self, name: str) -> BenchmarkSpec:
        if name not in self._specs:
            self._load_named(name)
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownBenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(self)}") from None

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str) and name not in self._specs:
            self._load_named(name)
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        self._load_all()
        return iter(sorted(self._specs, key=lambda n: (self._specs[n].page_order, n)))

    def __len__(self) -> int:
        self._load_all()
        return len(self._specs)

    def register(self, spec: BenchmarkSpec, replace: bool = False) -> BenchmarkSpec:
        if not isinstance(spec, BenchmarkSpec):
            raise TypeError(f"register() takes a BenchmarkSpec, not a {type(spec).__name__}")
        if not replace and spec.name in self._specs and self._specs[spec.name] is not spec:
            raise ValueError(f"benchmark {spec.name!r} is already registered (pass replace=True to replace it)")
        self._specs[spec.name] = spec
        return spec

    def unregister(self, name: str) -> None:
        self._specs.pop(name, None)
        # An entry point of that name may be loaded again (a plugin removed, then installed again).
        self._tried = {point for point in self._tried if point[0] != name}


BENCHMARKS: Registry = Registry()


def get_benchmark(name: str) -> BenchmarkSpec:
    """The description of benchmark ``name``; an :class:`UnknownBenchmarkError` lists those that exist."""
    return BENCHMARKS[name]


def register(spec: BenchmarkSpec, replace: bool = False) -> BenchmarkSpec:
    """Add a benchmark to the registry (every layer then finds it by name); returns ``spec``."""
    return BENCHMARKS.register(spec, replace=replace)


def unregister(name: str) -> None:
    """Remove a registered benchmark (tests clean up with it); unknown names are ignored."""
    BENCHMARKS.unregister(name)
