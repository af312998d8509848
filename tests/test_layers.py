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
        [str(LINT_IMPORTS), "--no-cache", str(PYPROJECT)], cwd=tree, env=env, capture_output=True, text=True, timeout=120
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
