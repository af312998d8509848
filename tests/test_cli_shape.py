"""The command line stays thin: small modules and short functions (the work is in the library), and the
choices it offers are the registries' names, not a copy of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import idbench.cli

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

CLI_DIR = Path(idbench.cli.__file__).parent
MODULES = sorted(CLI_DIR.glob("*.py"))
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60


def test_the_cli_is_a_package_of_command_modules():
    assert Path(idbench.cli.__file__).name == "__init__.py"
    assert len(MODULES) > 2


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_every_cli_module_and_function_is_short(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: {len(text.splitlines())} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.name}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


def _subcommands() -> dict:
    parser = idbench.cli.make_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def test_the_profile_choices_are_the_registrys_profiles():
    from idbench.evaluate_pkg.models.registry import DEFAULT_PROFILE, PROFILES

    offering = {
        name: action
        for name, sub in _subcommands().items()
        for action in sub._actions
        if action.dest == "profile" and action.choices is not None
    }
    assert set(offering) == {"build", "run", "score", "baseline", "worker"}
    for name, action in offering.items():
        assert list(action.choices) == list(PROFILES), name
        assert action.default == DEFAULT_PROFILE, name


def test_the_baseline_choices_are_the_baselines_and_the_rankers():
    from idbench.benchmarks.cogcanvas.retrieval import RANKERS
    from idbench.evaluate_pkg.baselines import BASELINES

    name = next(a for a in _subcommands()["baseline"]._actions if a.dest == "name")
    assert tuple(name.choices) == BASELINES + RANKERS
