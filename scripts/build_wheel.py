"""Build idbench's wheel from a clean copy of the sources; print the wheel's path.

Usage: python scripts/build_wheel.py OUT_DIR   (the Python that runs it needs pip and setuptools)

setuptools stages a build in ``build/lib`` and never removes what is already there, so a wheel built
in a working tree can carry modules deleted since the last build. Copying only what pyproject.toml
names (its package-dir folders, README.md, pyproject.toml) into a temporary folder and building there
gives the wheel a fresh checkout would give, and proves that pyproject.toml declares everything.
Used by scripts/wheel_smoke.sh and tests/test_packaging.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_folders(pyproject: dict) -> list[str]:
    """The repository folders the wheel is built from: the values of [tool.setuptools.package-dir]."""
    return sorted(set(pyproject["tool"]["setuptools"]["package-dir"].values()))


def build_wheel(out_dir: Path, root: Path = ROOT) -> Path:
    """Build the wheel into ``out_dir`` (a fresh folder) from a copy of ``root``'s declared sources; its path."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    with tempfile.TemporaryDirectory(prefix="idbench-wheel-src-") as tmp:
        source = Path(tmp)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(root / name, source / name)
        for folder in source_folders(pyproject):
            shutil.copytree(root / folder, source / folder, ignore=ignore)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out_dir),
                str(source),
            ],
            check=True,
        )
    wheels = sorted(out_dir.glob("idbench-*.whl"))
    if len(wheels) != 1:  # OUT_DIR should be a fresh folder: which wheel is the new one is otherwise unclear
        raise SystemExit(f"expected one idbench wheel in {out_dir}, found {[w.name for w in wheels]}")
    return wheels[0]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.splitlines()[2])
    print(build_wheel(Path(sys.argv[1])))
