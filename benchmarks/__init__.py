"""The built-in benchmarks, one folder each: everything that names one benchmark lives in its folder.

Each folder is a plugin like a third-party one: its spec is declared as an entry point in
``pyproject.toml`` and the generic layers (builders, curation, evaluate_pkg, generation, leaderboard)
reach it only through :mod:`idbench.builders.registry` and the ``"module:attr"`` names its spec holds.
The benchmarks do not import each other. docs/architecture.md draws the picture.
"""
