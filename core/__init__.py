"""idbench: benchmarks for identity preservation in reference-guided and multi-subject generation.

Installed, everything lives under this one name: ``idbench.builders``, ``idbench.curation``,
``idbench.evaluate_pkg``, ``idbench.leaderboard``, ``idbench.ekb``, ``idbench.cards`` and the shipped
``idbench.samples`` (see docs/architecture.md). The command line is :mod:`idbench.cli`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    # From the installed distribution's metadata, so the version is stated once (pyproject.toml).
    __version__ = version("idbench")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
