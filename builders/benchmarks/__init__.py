"""The registry of benchmark descriptions: the one place every layer finds a benchmark.

The three benchmarks of this repository are described in this package (``charis``, ``cogcanvas``,
``identity_collapse``). Others join in one of two ways, neither of which edits a shared module:

- :func:`register` with a :class:`~idbench.builders.spec.BenchmarkSpec` (tests, notebooks);
- a Python entry point in the group ``idbench.benchmarks`` of an installed distribution, naming a
  spec (or a function returning one)::

      [project.entry-points."idbench.benchmarks"]
      my-bench = "my_package.bench:SPEC"

  Entry points are read the first time a name is not found among the known ones, or when the list
  of all benchmarks is asked for, so commands that name a built-in benchmark never import plugins.

See docs/adding-a-benchmark.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points

from idbench.builders.spec import BenchmarkSpec
from idbench.errors import IdbenchError

ENTRY_POINT_GROUP = "idbench.benchmarks"


class UnknownBenchmarkError(IdbenchError, KeyError):
    """A benchmark name the registry does not know; the message lists those it knows."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a repr
        return str(self.args[0]) if self.args else ""


def _builtin() -> dict[str, BenchmarkSpec]:
    from idbench.builders.benchmarks import charis, cogcanvas, identity_collapse

    return {spec.name: spec for spec in (charis.SPEC, cogcanvas.SPEC, identity_collapse.SPEC)}


class Registry(Mapping):
    """name -> BenchmarkSpec, in page order (``spec.page_order``, then name); entry points load lazily."""

    def __init__(self, specs: dict[str, BenchmarkSpec]):
        self._specs = dict(specs)
        self._plugins_loaded = False

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                spec = point.load()
                spec = spec() if callable(spec) and not isinstance(spec, BenchmarkSpec) else spec
                if not isinstance(spec, BenchmarkSpec):
                    raise TypeError(f"it gives a {type(spec).__name__}, not a BenchmarkSpec")
            except Exception as err:  # a broken plugin must not take the built-in benchmarks down
                warnings.warn(f"entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}) not loaded: {err}", stacklevel=2)
                continue
            if spec.name in self._specs and self._specs[spec.name] is not spec:
                warnings.warn(f"entry point {point.name} ({ENTRY_POINT_GROUP}): benchmark {spec.name!r} already exists; ignored", stacklevel=2)
                continue
            self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> BenchmarkSpec:
        if name not in self._specs:
            self._load_plugins()
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownBenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(self)}") from None

    def __contains__(self, name: object) -> bool:
        if name not in self._specs:
            self._load_plugins()
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        self._load_plugins()
        return iter(sorted(self._specs, key=lambda n: (self._specs[n].page_order, n)))

    def __len__(self) -> int:
        self._load_plugins()
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


BENCHMARKS: Registry = Registry(_builtin())


def get_benchmark(name: str) -> BenchmarkSpec:
    """The description of benchmark ``name``; an :class:`UnknownBenchmarkError` lists those that exist."""
    return BENCHMARKS[name]


def register(spec: BenchmarkSpec, replace: bool = False) -> BenchmarkSpec:
    """Add a benchmark to the registry (every layer then finds it by name); returns ``spec``."""
    return BENCHMARKS.register(spec, replace=replace)


def unregister(name: str) -> None:
    """Remove a registered benchmark (tests clean up with it); unknown names are ignored."""
    BENCHMARKS.unregister(name)
