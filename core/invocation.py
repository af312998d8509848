"""How the user started idbench, so that a next step printed by a command is one they can paste as is.

A user who typed ``.venv/bin/idbench demo`` has no ``idbench`` on their PATH; one who ran
``python -m idbench`` may have none either. Hints name the command the way it was started.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def this_command() -> str:
    """``idbench`` when that is what PATH finds, else the script as it was typed (``.venv/bin/idbench``),
    else ``<the running interpreter> -m idbench`` (``python -m idbench``, a notebook, a test)."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "idbench":
        found = shutil.which("idbench")
        if found and Path(found).resolve() == script.resolve():
            return "idbench"
        return sys.argv[0]
    return f"{sys.executable} -m idbench" if not _on_path(sys.executable) else f"{Path(sys.executable).name} -m idbench"


def _on_path(executable: str) -> bool:
    """Whether typing the interpreter's bare name runs this very interpreter."""
    found = shutil.which(Path(executable).name)
    return bool(found) and Path(found).resolve() == Path(executable).resolve()


def command(arguments: str) -> str:
    """``this_command()`` followed by ``arguments``: ``command("serve")`` -> ``".venv/bin/idbench serve"``."""
    return f"{this_command()} {arguments}"
