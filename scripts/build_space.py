"""Assemble the Hugging Face Space repo's folder (its Docker build context) from space/ and an idbench wheel.

Usage: python scripts/build_space.py OUT [--wheel PATH]

No package index serves idbench, so the Space installs the wheel it ships. OUT receives space/'s
Dockerfile, app.py and README.md, the wheel (built from a clean copy of the sources with
scripts/build_wheel.py unless ``--wheel`` names one), and a requirements.txt rewritten from the
template space/requirements.txt: its guard line (which makes a raw upload of space/ fail at once) is
dropped and its idbench line becomes the wheel's relative path with the app's extra,
``./idbench-<version>-py3-none-any.whl[leaderboard]``; the other pins stay. The Dockerfile copies the
folder before ``pip install -r requirements.txt``, so the build installs what the folder holds.

OUT is written whole or not at all (staged beside it, renamed into place); an existing OUT that is
not an empty folder is refused. Upload OUT as the Space repo's content (docs/deploy.md, section 3).
Prints OUT's path.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # build_wheel, beside this file, also when imported by tests

from build_wheel import build_wheel  # noqa: E402

from idbench.atomic import atomic_directory  # noqa: E402
from idbench.errors import IdbenchError  # noqa: E402

COPIED = ("Dockerfile", "README.md", "app.py")  # copied as they are; requirements.txt is rewritten
GUARD = "-r NOT-A-SPACE-FOLDER"  # the template's first requirement; pip cannot open that file
EXTRA = "leaderboard"
# A pure-Python wheel's name (PEP 427): name-version-python-abi-platform.whl.
WHEEL_NAME = re.compile(r"idbench-(?P<version>[0-9][0-9A-Za-z.+!_]*)-py3-none-any\.whl")


class SpaceBuildError(Exception):
    """What the maintainer passed or the template holds cannot make a Space folder; nothing was written."""


def wheel_version(wheel: Path) -> str:
    """The version in an idbench wheel's file name; refuses anything that is not such a wheel."""
    match = WHEEL_NAME.fullmatch(wheel.name)
    if match is None:
        raise SpaceBuildError(f"{wheel.name} is not an idbench wheel's name (idbench-VERSION-py3-none-any.whl)")
    if not wheel.is_file() or not zipfile.is_zipfile(wheel):
        raise SpaceBuildError(f"{wheel} is not a wheel file (a zip archive)")
    return match["version"]


def _requirement_name(line: str) -> str:
    """The distribution a requirement line names (``idbench[leaderboard]==0.1.0`` -> ``idbench``)."""
    return re.split(r"[\s\[<>=!~;@]", line, maxsplit=1)[0].lower()


def space_requirements(template: str, wheel_name: str) -> str:
    """The Space's requirements.txt: the template without its guard and comments, idbench as the wheel's path."""
    kept, replaced = [], 0
    for raw in template.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith(GUARD):
            continue
        if _requirement_name(line) == "idbench":
            line, replaced = f"./{wheel_name}[{EXTRA}]", replaced + 1
        kept.append(line)
    if replaced != 1:
        raise SpaceBuildError(f"space/requirements.txt must name idbench once; it names it {replaced} time(s)")
    header = (
        "# Written by idbench's scripts/build_space.py from space/requirements.txt: the idbench wheel beside this\n"
        "# file, by its path (no index serves idbench), with the leaderboard app's extra.\n"
    )
    return header + "\n".join(kept) + "\n"


def _refuse_existing(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SpaceBuildError(f"{out} exists and is not a folder; choose a new OUT")
    if out.is_dir() and any(out.iterdir()):
        raise SpaceBuildError(f"{out} exists and is not empty; choose a new OUT or remove it")


def build_space(out: Path, wheel: Path | None = None, root: Path = ROOT) -> Path:
    """Write the Space folder ``out`` (absent or empty) from ``root``'s space/ and ``wheel`` (built if None)."""
    out = Path(out).absolute()
    _refuse_existing(out)
    space = root / "space"
    template = (space / "requirements.txt").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="idbench-space-wheel-") as scratch:
        if wheel is None:
            wheel = build_wheel(Path(scratch), root)
        wheel = Path(wheel)
        wheel_version(wheel)
        requirements = space_requirements(template, wheel.name)  # refuses a broken template before writing
        # An empty OUT is replaced in one rename, like an absent one; anything else was refused above.
        with atomic_directory(out, overwrite=out.is_dir()) as staging:
            staging.mkdir(parents=True, exist_ok=True)
            for name in COPIED:
                shutil.copy2(space / name, staging / name)
            shutil.copy2(wheel, staging / wheel.name)
            (staging / "requirements.txt").write_text(requirements, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the Space folder to write (absent or empty)")
    parser.add_argument("--wheel", type=Path, help="an idbench wheel to ship (default: build one from these sources)")
    args = parser.parse_args(argv)
    try:
        print(build_space(args.out, args.wheel))
    except (SpaceBuildError, IdbenchError, OSError) as error:  # IdbenchError: OUT appeared meanwhile
        print(f"build_space: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
