"""Print or rewrite the README's "Models" section: each profile's models, licences, gating, what needs them.

    .venv/bin/python scripts/models_table.py            # print the rendering
    .venv/bin/python scripts/models_table.py --write    # rewrite README.md between its two markers

The rendering is ``idbench.evaluate_pkg.models.readme.models_markdown()``, from the model cards, the
profiles, the download plan and the benchmarks' metric declarations. Only the part of the README between
the markers is replaced; tests/test_models_section.py fails when the README differs from the rendering.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START = "<!-- models table: begin -->\n"
END = "<!-- models table: end -->"


def rewrite(text: str, rendering: str) -> str:
    """``text`` with the part between the markers replaced by ``rendering``."""
    if START not in text or END not in text:
        raise SystemExit(f"{README} has no {START.strip()} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + START + rendering + END + tail


def main(argv: list[str]) -> int:
    from idbench.evaluate_pkg.models.readme import models_markdown

    rendering = models_markdown()
    if argv[1:] == ["--write"]:
        README.write_text(rewrite(README.read_text(encoding="utf-8"), rendering), encoding="utf-8")
        print(f"rewrote the models table of {README}")
    elif argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    else:
        sys.stdout.write(rendering)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
