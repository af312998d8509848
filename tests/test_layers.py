"""The layering contract of pyproject.toml ([tool.importlinter]), checked with import-linter.

import-linter finds a package's modules by walking its folder, but idbench's subpackages live in the
repository-root folders that pyproject.toml maps to ``idbench.*`` (package-dir). So the check runs on a
throw-away tree laid out as the installed package is: each mapped folder's ``.py`` files copied to
``idbench/<name>/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

# runs lint-imports (import-linter's CLI) in a subprocess
pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _installed_layout(dest: Path) -> Path:
    """Copy the sources into ``dest`` laid out as installed (idbench/builders/..., idbench/cli/...)."""
    mapping = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]

    def not_python(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or not (n.endswith(".py") or Path(folder, n).is_dir())]

    for package, folder in sorted(mapping.items()):  # "idbench" first, then its subpackages
        shutil.copytree(ROOT / folder, dest.joinpath(*package.split(".")), ignore=not_python, dirs_exist_ok=True)
    return dest


def _lint(tree: Path) -> subprocess.CompletedProcess:
    assert LINT_IMPORTS.is_file(), "lint-imports is missing: install the dev extra (bash scripts/setup.sh)"
    # Run from the copied tree with it first on the path, so the copy, not the editable install, is analysed.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(PYPROJECT)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layering_contract_is_kept(tmp_path):
    result = _lint(_installed_layout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_import_against_the_layers_breaks_the_contract(tmp_path):
    """The check is live: a library module importing the CLI (here the bottom helper) is reported."""
    tree = _installed_layout(tmp_path)
    atomic = tree / "idbench" / "atomic.py"
    atomic.write_text(atomic.read_text() + "\nimport idbench.cli  # noqa\n")
    result = _lint(tree)
    assert result.returncode != 0
    assert "idbench.atomic is not allowed to import idbench.cli" in result.stdout


GENERIC_FOLDERS = ("builders", "curation", "evaluate_pkg", "generation", "leaderboard")


def _benchmark_names_in_code(source: str) -> list[tuple[int, str]]:
    """String constants in ``source`` that are a built-in benchmark's name (docstrings aside)."""
    import ast

    names = {"charis", "cogcanvas", "identity-collapse", "identity_collapse"}
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and node.value.lower() in names
    ]


def test_no_generic_module_names_a_benchmark_in_code():
    """A generic module that compares with (or looks up) "charis" holds that benchmark's logic: it belongs
    in benchmarks/charis/ and is reached through the spec. Docstrings and examples in them may name one."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for folder in GENERIC_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, value in _benchmark_names_in_code(path.read_text())
    ]
    assert found == []


def test_the_name_scan_sees_a_comparison():
    assert _benchmark_names_in_code('"""About charis."""\nif benchmark == "charis":\n    pass\n') == [(2, "charis")]


_CYCLES = """
import grimp
graph = grimp.build_graph("idbench")
for module in sorted(graph.modules):
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
        chain = graph.find_shortest_chain(importer=imported, imported=module)
        if chain:
            print(" -> ".join((module, *chain)))
"""


def test_no_module_imports_itself_back(tmp_path):
    """No import circles, function-local imports included (grimp, import-linter's graph, sees those too):
    a circle hidden inside a function is still two modules that cannot be understood one at a time."""
    tree = _installed_layout(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _CYCLES],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
