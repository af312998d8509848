"""The commands the README and the docs tell a user to type.

Every ``idbench`` command line of a ```bash block in README.md and docs/*.md must parse with the CLI's
own parser (a renamed flag or command fails here, naming the file and the line). The README's
"Scoring a model" block is then run for real in the situation it describes (a built CogCanvas folder,
a submission with its images): each command exits 0, or is listed in ``NOT_RUN_HERE`` with the reason
it cannot run on this machine, so a command added to the block needs a decision.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from idbench.cli import main, make_parser

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def command_lines(text: str) -> list[str]:
    """The shell lines of ``text``'s bash blocks, continuation lines joined."""
    lines = []
    for block in BASH_BLOCK.findall(text):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip():
                lines.append(line.strip())
    return lines


def idbench_arguments(line: str) -> list[str] | None:
    """The arguments after the ``idbench`` word of a shell line (``idbench``, ``.venv/bin/idbench``,
    ``python -m idbench``, ``accelerate launch ... -m idbench.cli``, after ``&&``), None without one.
    Placeholders (``<hub id>``) stand for one value; optional parts in brackets (``[--json]``) count as given."""
    line = re.sub(r"<[^<>]+>", "PLACEHOLDER", line)  # `--model-id <hub id>`
    line = re.sub(r"\[(--[^\]]*)\]", r"\1", line)  # `[--once] [--profile paper]`: optional, here given
    words = shlex.split(line, comments=True)
    # a chain (`bash scripts/setup.sh && .venv/bin/idbench demo`): the first part that starts idbench
    parts: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "|"):
            parts.append([])
        else:
            parts[-1].append(word)
    if len(parts) > 1:
        found = [a for a in (idbench_arguments(shlex.join(p)) for p in parts if p) if a is not None]
        return found[0] if found else None
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # HF_TOKEN=... idbench ...
        words = words[1:]
    if words and Path(words[0]).name == "idbench":
        start = 1
    else:  # python -m idbench ..., accelerate launch ... -m idbench.cli ...
        start = next(
            (i + 2 for i, w in enumerate(words[:-1]) if w == "-m" and words[i + 1] in ("idbench", "idbench.cli")), None
        )
        if start is None:
            return None
    return words[start:]


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(file, line, arguments) of every idbench command of the README's and the docs' bash blocks."""
    out = []
    for path in DOCS:
        for line in command_lines(path.read_text(encoding="utf-8")):
            arguments = idbench_arguments(line)
            if arguments is not None:
                out.append((path.relative_to(ROOT).as_posix(), line, arguments))
    return out


def test_every_documented_command_parses():
    commands = documented_commands()
    assert len(commands) > 40 and {f for f, _, _ in commands} >= {"README.md", "docs/deploy.md"}
    parser = make_parser()
    for file, line, arguments in commands:
        try:
            args = parser.parse_args(arguments)
        except SystemExit as stop:  # argparse's error (code 2), or --version / --help (code 0)
            assert stop.code == 0, f"{file}: `{line}` does not parse"
            continue
        assert args.command == next(a for a in arguments if not a.startswith("-")), f"{file}: `{line}`"


def _block(title: str) -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    first = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [a for a in (idbench_arguments(line) for line in command_lines(f"```bash\n{first}```")) if a is not None]


# The README's scoring commands that need what this machine lacks: they parse (above), and run where
# their situation holds (the paper profile's weights, a GPU, the network).
NOT_RUN_HERE = {
    ("score", "--device cuda"): "profile `paper` (seven models) on a GPU; the `accelerate launch` line on several",
    ("baseline", "retrieval-clip"): "the paper profile's CLIP weights",
    (
        "compare",
    ): "two scored folders (`idbench compare` runs on scored folders in tests/scoring/test_bootstrap_design.py)",
    ("models", "download"): "the network",
}


def _skip_reason(arguments: list[str]) -> str | None:
    joined = " ".join(arguments)
    for key, why in NOT_RUN_HERE.items():
        if arguments[0] == key[0] and all(part in joined for part in key[1:]):
            return why
    return None


@pytest.mark.slow
def test_the_readmes_scoring_commands_run_where_they_are_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # The situation the block is written in: a built CogCanvas folder (here the shipped sample's).
    assert main(["build", "cogcanvas", "--out", "built/cogcanvas"]) == 0
    commands = _block("Scoring a model")
    assert [a[0] for a in commands][:3] == ["template", "validate", "score"]
    ran = []
    for arguments in commands:
        why = _skip_reason(arguments)
        if why is not None:
            continue
        if arguments[0] == "validate":
            # "generate one image per manifest row": the collage baseline stands in for the generations
            assert main(["baseline", "collage", "cogcanvas", "--data", "built/cogcanvas", "--out", "generated"]) == 0
            shutil.rmtree("my-sub")
            shutil.copytree("generated", "my-sub")
        assert main(arguments) == 0, f"README: `idbench {shlex.join(arguments)}` did not exit 0"
        ran.append(arguments[0])
    capsys.readouterr()
    assert ran == ["template", "validate", "baseline", "models", "env"]
