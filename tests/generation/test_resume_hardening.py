"""`idbench generate` / `run` on a crafted resume folder, and on an adapter whose images a submission may
not hold (issue 29, item 6): one line each, no traceback, nothing written outside the output folder."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.generation.adapters import register_generator
from idbench.generation.run import GenerationRunError, generate_submission, write_image_atomically

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SIZE = 32
CALLS: list[tuple[str, int]] = []


def plain(request):
    CALLS.append((request.prompt_id, request.seed))
    return Image.new("RGB", (request.resolution, request.resolution), (request.seed % 256, 90, 40))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data") / "charis"
    build("charis", out=folder)
    register_generator("test-plain-resume", plain)
    return load_benchmark_data(folder)


def listing(folder: Path) -> set[str]:
    """Every path under ``folder`` (the output folder's parent: nothing may appear there but the output)."""
    return {
        os.path.relpath(os.path.join(root, name), folder)
        for root, dirs, files in os.walk(folder)
        for name in dirs + files
    }


def started(data, out: Path) -> list[list[str]]:
    """A resume folder: the template with its first image generated; its manifest rows."""
    generate_submission(data, plain, out, resolution=SIZE, limit=1, progress=False)
    with (out / "manifest.csv").open(newline="") as handle:
        return list(csv.reader(handle))


def write_manifest(out: Path, rows: list[list[str]]) -> None:
    with (out / "manifest.csv").open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def spoil_file(name):
    def spoil(out, rows):
        rows[2][2] = name
        write_manifest(out, rows)

    return spoil


def spoil_seed(seed):
    def spoil(out, rows):
        rows[2][1] = seed
        write_manifest(out, rows)

    return spoil


def spoil_json(out, rows):
    (out / "submission.json").write_text("[" * 100_000 + "]" * 100_000)


def spoil_column(out, rows):
    write_manifest(out, [[p, f] for p, _, f in rows])


def spoil_benchmark_keys(out, rows):
    metadata = json.loads((out / "submission.json").read_text())
    (out / "submission.json").write_text(json.dumps(metadata | {"modle": "typo"}))


CRAFTED = {
    "empty file name": (spoil_file(""), "empty file"),
    "'.' as a file name": (spoil_file("."), "names a folder"),
    "a sub-folder as a file name": (spoil_file("images"), "names a folder"),
    "'images/.' as a file name": (spoil_file("images/."), "names a folder"),
    "a file outside the folder": (spoil_file("../escaped.png"), "relative path inside"),
    "a 255-byte file name": (spoil_file("images/" + "a" * 251 + ".png"), None),  # accepted: its temporary name is cut
    "a 300-byte file name": (spoil_file("images/" + "a" * 296 + ".png"), "over the 255-byte limit"),
    "a seed that is not a number": (spoil_seed("x"), "not a non-negative integer"),
    "a negative seed": (spoil_seed("-1"), "not a non-negative integer"),
    "a seed of 30 digits": (spoil_seed("9" * 30), "is not required"),
    "submission.json 100,000 deep": (spoil_json, "nested 100000 levels deep"),
    "a manifest without its seed column": (spoil_column, "expected exactly the columns"),
    "an unknown metadata field": (spoil_benchmark_keys, "unknown field 'modle'"),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_resume_folder_is_one_line_and_writes_nothing_outside(data, tmp_path, capsys, case):
    spoil, expected = CRAFTED[case]
    parent = tmp_path / "parent"
    out = parent / "sub"
    rows = started(data, out)
    spoil(out, rows)
    before = listing(parent)
    CALLS.clear()
    argv = [
        "generate",
        "charis",
        "--data",
        str(data.folder),
        "--model",
        "test-plain-resume",
        "--out",
        str(out),
        "--resolution",
        str(SIZE),
    ]
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    after = listing(parent)
    assert {
        path for path in after - before if not path.startswith("sub" + os.sep)
    } == set()  # nothing outside the output folder
    if expected is None:
        assert code == 0, captured.err
        assert not list(out.rglob("*.tmp"))
        return
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(out) in lines[0], lines
    assert CALLS == [] and after == before  # refused before any image was drawn or written


@pytest.mark.slow
def test_run_refuses_a_crafted_resume_folder_in_one_line(data, tmp_path, capsys):
    out = tmp_path / "run"
    rows = started(data, out / "submission")
    spoil_file(".")(out / "submission", rows)
    code = main(
        [
            "run",
            "charis",
            "--data",
            str(data.folder),
            "--model",
            "test-plain-resume",
            "--out",
            str(out),
            "--resolution",
            str(SIZE),
            "--profile",
            "tiny",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "names a folder" in err[0], err


def test_the_temporary_name_of_a_long_file_name_stays_within_the_folder_and_the_name_limit(tmp_path):
    target = tmp_path / "out" / ("a" * 251 + ".png")
    write_image_atomically(Image.new("RGB", (4, 4)), target)
    assert target.is_file() and listing(tmp_path) == {"out", os.path.join("out", target.name)}


@pytest.mark.parametrize(
    "image, rule",
    [
        (Image.new("RGB", (2560, 256)), "2560x256 pixels, an aspect ratio over the 8:1 limit"),
        (Image.new("L", (9000, 1200)), "a side over the 8192-pixel limit"),
        (Image.new("I;16", (64, 64)), "mode 'I;16', not an 8-bit image"),
        (Image.new("F", (64, 64)), "mode 'F', not an 8-bit image"),
    ],
)
def test_an_adapter_image_a_submission_may_not_hold_stops_the_run_at_the_first_row(data, tmp_path, image, rule):
    calls = []

    def adapter(request):
        calls.append((request.prompt_id, request.seed))
        return image

    adapter.name = "wide-adapter"
    with pytest.raises(GenerationRunError) as caught:
        generate_submission(data, adapter, tmp_path / "sub", resolution=SIZE, progress=False)
    message = str(caught.value)
    first = calls[0]
    assert len(calls) == 1 and "\n" not in message
    assert message.startswith(f"adapter wide-adapter, prompt_id {first[0]!r} seed {first[1]}: ") and rule in message
    assert not list((tmp_path / "sub").rglob("*.png")) and not list((tmp_path / "sub").rglob("*.tmp"))


def test_the_cli_names_the_adapter_row_and_rule_in_one_line(data, tmp_path, capsys):
    register_generator("test-wide", lambda request: Image.new("RGB", (2560, 256)))
    argv = [
        "generate",
        "charis",
        "--data",
        str(data.folder),
        "--model",
        "test-wide",
        "--out",
        str(tmp_path / "sub"),
        "--resolution",
        str(SIZE),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "adapter test-wide, prompt_id" in err[0] and "aspect ratio over the 8:1 limit" in err[0], (
        err
    )
