"""idbench: benchmarks for identity preservation in reference-guided and multi-subject generation.

Installed, everything lives under this one name: ``idbench.builders``, ``idbench.curation``,
``idbench.evaluate_pkg``, ``idbench.leaderboard``, ``idbench.ekb``, ``idbench.cards`` and the shipped
``idbench.samples`` (see docs/architecture.md). The command line is :mod:`idbench.cli`.

From Python, the public names are here, imported on first use: :func:`generate`, :func:`score`,
:func:`score_shard`, :func:`merge`, :func:`run`, :func:`compare` and :func:`standings` (:mod:`idbench.api`),
:mod:`metrics` (the ``evaluate`` modules by name), :func:`load_benchmark_data`,
:func:`validate_submission`, :class:`ScoreOptions`, :class:`JudgeConfig`, :class:`IdbenchError` and
:func:`release_models` (scoring keeps its models loaded for the life of the process; this lets them go).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    # From the installed distribution's metadata, so the version is stated once (pyproject.toml).
    __version__ = version("idbench")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
del PackageNotFoundError, version  # not public names

# The public names, imported on first use (PEP 562): `import idbench` stays a metadata read, with no
# torch, pandas or datasets, so the command line and tools that only want the version start fast.
# name -> (module, attribute in it; None: the module itself).
_PUBLIC = {
    "score": ("idbench.api", "score"),
    "generate": ("idbench.api", "generate"),
    "score_shard": ("idbench.api", "score_shard"),
    "merge": ("idbench.api", "merge"),
    "ScoreResult": ("idbench.api", "ScoreResult"),
    "compare": ("idbench.api", "compare"),
    "standings": ("idbench.api", "standings"),
    "run": ("idbench.api", "run"),
    "RunResult": ("idbench.api", "RunResult"),
    "metrics": ("idbench.metrics", None),
    "load_benchmark_data": ("idbench.evaluate_pkg.data", "load_benchmark_data"),
    "validate_submission": ("idbench.evaluate_pkg.submission", "validate_submission"),
    "ScoreOptions": ("idbench.evaluate_pkg.context", "ScoreOptions"),
    "JudgeConfig": ("idbench.evaluate_pkg.judge.client", "JudgeConfig"),
    "IdbenchError": ("idbench.errors", "IdbenchError"),
    "release_models": ("idbench.evaluate_pkg.context", "release_models"),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    """Import a public name on first access and keep it in the module, so later accesses are plain."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'idbench' has no attribute {name!r}; public names: {', '.join(_PUBLIC)}")
    from importlib import import_module

    module_name, attribute = _PUBLIC[name]
    module = import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, whether imported yet or not, with the module's other globals (its submodules...)."""
    return sorted((set(globals()) - {"annotations"}) | set(_PUBLIC))
