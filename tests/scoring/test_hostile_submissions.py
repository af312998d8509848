"""Hostile submissions: small files that describe huge content, refused up front with one clear error.

Each test writes its own hostile input (a hand-made PNG header claiming 40,000,000 x 1 pixels, a
parquet of a million rows, JSON nested 100,000 deep, a run-on CSV field, a 300-character member
name, listings of thousands of bad rows) and checks three things: the error names the file at fault,
nothing is left in the scratch folder, and the work was bounded by construction (the problem list is
capped, the parquet images were never spooled, the PNG was never decoded).
"""

from __future__ import annotations

import csv
import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import noise_jpeg
from PIL.PngImagePlugin import PngImageFile

from idbench.builders.build import build
from idbench.evaluate_pkg.data import BenchmarkData, load_benchmark_data
from idbench.evaluate_pkg.images import MAX_ASPECT_RATIO, MAX_IMAGE_SIDE, MAX_PIXELS, size_problem
from idbench.evaluate_pkg.submission import (
    MAX_JSON_DEPTH,
    MAX_PROBLEMS,
    SubmissionError,
    json_depth,
    max_listing_rows,
    validate_submission,
    write_template,
)
from idbench.evaluate_pkg.submission import archive as submission_archive
from idbench.evaluate_pkg.submission import parquet as submission_parquet

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> BenchmarkData:
    folder = tmp_path_factory.mktemp("bench") / "data"
    build("identity-collapse", out=folder)
    return load_benchmark_data(folder, cache_dir=str(tmp_path_factory.mktemp("hf-cache")))


def manifest_rows(folder: Path) -> list[list[str]]:
    with (folder / "manifest.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def write_rows(folder: Path, rows: list[list[str]]) -> None:
    with (folder / "manifest.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


@pytest.fixture
def filled(tmp_path: Path, data: BenchmarkData) -> Path:
    """A valid manifest submission: the template with every image written and the model named."""
    folder = write_template(data, tmp_path / "submission")
    for index, (_, _, file) in enumerate(manifest_rows(folder)[1:]):
        (folder / file).write_bytes(noise_jpeg(2000 + index, size=(24, 16)))
    metadata = json.loads((folder / "submission.json").read_text())
    (folder / "submission.json").write_text(json.dumps(metadata | {"model": "Hostile"}))
    return folder


def refusal(path: Path, data: BenchmarkData, scratch: Path, **options) -> SubmissionError:
    """The SubmissionError validating ``path`` raises, after checking that the scratch folder is empty."""
    with pytest.raises(SubmissionError) as info:
        validate_submission(path, data, scratch=scratch, **options)
    assert not scratch.exists() or list(scratch.iterdir()) == []  # nothing left behind
    error = info.value
    assert len(error.problems) <= MAX_PROBLEMS and len(str(error).splitlines()) <= MAX_PROBLEMS + 1
    return error


def png_header_only(width: int, height: int) -> bytes:
    """A valid 1-bit greyscale PNG of ``width`` x ``height`` black pixels: a few KB for 40 M pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # bit depth 1, greyscale
    row = b"\x00" + bytes((width + 7) // 8)  # filter byte, then the packed pixels
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height, 9))
        + chunk(b"IEND", b"")
    )


# --- image headers -------------------------------------------------------------------------------


def test_size_rule_bounds(data: BenchmarkData) -> None:
    assert size_problem(MAX_IMAGE_SIDE, MAX_IMAGE_SIDE // 8, submitted=True) is None
    assert "side over" in size_problem(MAX_IMAGE_SIDE + 1, 2000, submitted=True)
    assert "aspect ratio" in size_problem(int(100 * MAX_ASPECT_RATIO) + 1, 100, submitted=True)
    assert size_problem(40_000_000, 1, submitted=False) is None  # references keep the builder's rules
    assert "pixel limit" in size_problem(MAX_PIXELS + 1, 1, submitted=False)
    assert "empty" in size_problem(0, 5, submitted=True)


def test_forty_million_by_one_png_refused_on_its_header(
    filled: Path, data: BenchmarkData, tmp_path: Path, monkeypatch
) -> None:
    png = png_header_only(40_000_000, 1)
    assert len(png) < 100_000  # a small file that describes a huge image
    rows = manifest_rows(filled)
    (filled / rows[1][2]).write_bytes(png)
    # Never decoded: a decode would fail loudly here, and the refusal would not be about the side.
    monkeypatch.setattr(PngImageFile, "load", lambda self: pytest.fail("the pixels were decoded"))
    error = refusal(filled, data, tmp_path / "scratch")
    [problem] = error.problems
    assert (
        problem.file == rows[1][2] and "40000000x1" in problem.message and f"{MAX_IMAGE_SIDE}-pixel" in problem.message
    )


def test_long_thin_png_refused_by_its_aspect_ratio_in_a_zip(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    rows = manifest_rows(filled)
    (filled / rows[2][2]).write_bytes(png_header_only(4000, 10))
    archive = tmp_path / "thin.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(filled.rglob("*")):
            out.write(path, path.relative_to(filled).as_posix())
    [problem] = refusal(archive, data, tmp_path / "scratch").problems
    assert problem.file == rows[2][2] and "aspect ratio" in problem.message


# --- parquet, from its metadata ------------------------------------------------------------------


def parquet_folder(folder: Path, data: BenchmarkData, table: pa.Table, **write_options) -> Path:
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"benchmark": data.name, "model": "Hostile"}))
    pq.write_table(table, folder / "part-0.parquet", **write_options)
    return folder


def no_spooling(monkeypatch) -> None:
    """Make any spooling of parquet rows fail the test: the refusal must come from the metadata."""
    monkeypatch.setattr(submission_parquet, "_spool_parquet", lambda *a, **k: pytest.fail("rows were spooled"))


def test_a_million_row_parquet_is_refused_from_its_metadata(data: BenchmarkData, tmp_path: Path, monkeypatch) -> None:
    rows = 1_000_000
    table = pa.table(
        {
            "prompt_id": pa.array(np.full(rows, "01", dtype=object), pa.string()),
            "seed": pa.array(np.zeros(rows, dtype=np.int64)),
            "image": pa.array(np.full(rows, b"x", dtype=object), pa.binary()),
        }
    )
    folder = parquet_folder(tmp_path / "pq", data, table, compression="zstd")
    assert (folder / "part-0.parquet").stat().st_size < 200_000
    no_spooling(monkeypatch)
    [problem] = refusal(folder, data, tmp_path / "scratch").problems
    limit = max_listing_rows(len(data.required_pairs))
    assert problem.file == "the parquet files" and f"{rows} rows" in problem.message and str(limit) in problem.message


def test_parquet_images_over_the_byte_limit_refused_from_metadata(
    data: BenchmarkData, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(submission_parquet, "MAX_IMAGE_BYTES", 1024 * 1024)
    pairs = data.required_pairs[:4]
    zeros = bytes(2 * 1024 * 1024)  # all-zero "images": compressed to almost nothing inside the parquet
    table = pa.table(
        {"prompt_id": [p for p, _ in pairs], "seed": [s for _, s in pairs], "image": pa.array([zeros] * 4, pa.binary())}
    )
    folder = parquet_folder(tmp_path / "pq", data, table, compression="zstd", use_dictionary=False)
    assert (folder / "part-0.parquet").stat().st_size < 100_000
    no_spooling(monkeypatch)
    [problem] = refusal(folder, data, tmp_path / "scratch").problems
    assert problem.file == "part-0.parquet" and "average" in problem.message and "1048576-byte limit" in problem.message


def test_parquet_over_the_unpacked_bytes_limit_refused_from_metadata(
    data: BenchmarkData, tmp_path: Path, monkeypatch
) -> None:
    pairs = data.required_pairs[:8]
    images = [bytes(100_000) for _ in pairs]
    table = pa.table(
        {"prompt_id": [p for p, _ in pairs], "seed": [s for _, s in pairs], "image": pa.array(images, pa.binary())}
    )
    folder = parquet_folder(tmp_path / "pq", data, table, compression="zstd", use_dictionary=False)
    no_spooling(monkeypatch)
    [problem] = refusal(folder, data, tmp_path / "scratch", max_zip_bytes=500_000).problems
    assert problem.file == "the parquet files" and "500000-byte limit" in problem.message


def test_dictionary_encoded_big_images_are_refused_before_they_are_written(
    data: BenchmarkData, tmp_path: Path, monkeypatch
) -> None:
    """Identical values dictionary-encode: the metadata understates them, the row-by-row spool does not."""
    monkeypatch.setattr(submission_parquet, "MAX_IMAGE_BYTES", 1024 * 1024)
    pairs = data.required_pairs[:6]
    zeros = bytes(1024 * 1024 + 1)
    table = pa.table(
        {"prompt_id": [p for p, _ in pairs], "seed": [s for _, s in pairs], "image": pa.array([zeros] * 6, pa.binary())}
    )
    folder = parquet_folder(tmp_path / "pq", data, table, compression="zstd", use_dictionary=True)
    written: list[int] = []
    real_write = Path.write_bytes
    monkeypatch.setattr(
        Path, "write_bytes", lambda self, content: written.append(len(content)) or real_write(self, content)
    )
    error = refusal(folder, data, tmp_path / "scratch")
    assert all(size <= 1024 * 1024 for size in written)  # no over-limit image reached the disk
    over = [p for p in error.problems if "1048577 bytes" in p.message]
    assert over and all(p.file.startswith("part-0.parquet row ") for p in over)


# --- capped problem lists ------------------------------------------------------------------------


def test_unknown_rows_within_the_row_bound_are_listed_up_to_the_cap(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    bound = max_listing_rows(len(data.required_pairs))
    rows = [["prompt_id", "seed", "file"]] + [[f"nope{i}", "0", "x.png"] for i in range(bound)]
    write_rows(filled, rows)
    error = refusal(filled, data, tmp_path / "scratch")
    assert error.total == bound + len(data.required_pairs)  # every unknown row and every missing pair, counted
    assert len(error.problems) == MAX_PROBLEMS and error.more == error.total - MAX_PROBLEMS
    assert str(error).splitlines()[-1].startswith(f"... and {error.more} more problem(s)")


def test_a_manifest_longer_than_the_row_bound_is_read_no_further(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    bound = max_listing_rows(len(data.required_pairs))
    with (filled / "manifest.csv").open("w", encoding="utf-8") as handle:
        handle.write("prompt_id,seed,file\n" + "nope,0,x.png\n" * 200_000)
    [problem] = refusal(filled, data, tmp_path / "scratch").problems
    assert problem.file == "manifest.csv" and f"more than {bound} rows" in problem.message


def test_a_zip_of_thousands_of_unnamed_members_lists_the_cap_and_counts_the_rest(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(filled.rglob("*")):
            out.write(path, path.relative_to(filled).as_posix())
        for index in range(3 * MAX_PROBLEMS):
            out.writestr(f"junk/{index}.txt", b"")
    error = refusal(archive, data, tmp_path / "scratch")
    assert error.total == 3 * MAX_PROBLEMS and len(error.problems) == MAX_PROBLEMS
    assert all(p.file.startswith("many.zip:junk/") for p in error.problems)


def test_cli_prints_the_capped_list(filled: Path, data: BenchmarkData, tmp_path: Path, capsys) -> None:
    from idbench.cli import main

    unknown = max_listing_rows(len(data.required_pairs))  # within the row bound: every row is a problem
    write_rows(filled, [["prompt_id", "seed", "file"]] + [[f"nope{i}", "0", "x.png"] for i in range(unknown)])
    assert main(["validate", str(filled), "--data", str(data.folder)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 + MAX_PROBLEMS + 1  # the heading, the listed problems, the count of the rest
    assert (
        lines[-1].strip()
        == f"... and {unknown + len(data.required_pairs) - MAX_PROBLEMS} more problem(s), not listed (at most {MAX_PROBLEMS} are)"
    )


# --- what used to end in a traceback -------------------------------------------------------------


def test_deeply_nested_submission_json(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    (filled / "submission.json").write_text("[" * 100_000 + "]" * 100_000)
    [problem] = refusal(filled, data, tmp_path / "scratch").problems
    assert (
        problem.file == "submission.json"
        and "100000 levels" in problem.message
        and str(MAX_JSON_DEPTH) in problem.message
    )


def test_json_depth_ignores_brackets_in_strings() -> None:
    assert json_depth('{"notes": "[[[[{{{{\\"[[[", "generation": {"a": [1, [2]]}}') == 4
    assert json_depth('"just a string"') == 0


def test_brackets_in_a_metadata_string_are_not_nesting(filled: Path, data: BenchmarkData) -> None:
    metadata = json.loads((filled / "submission.json").read_text())
    (filled / "submission.json").write_text(json.dumps(metadata | {"notes": "[" * 1000}))
    with validate_submission(filled, data) as submission:
        assert submission.metadata["notes"] == "[" * 1000


@pytest.mark.parametrize(
    "row", ['01,0,"images/01_s0.png\n' + "x" * 200_000, "01,0," + "x" * 200_000], ids=["open-quote", "long-field"]
)
def test_unreadable_manifest_field(filled: Path, data: BenchmarkData, tmp_path: Path, row: str) -> None:
    with (filled / "manifest.csv").open("w", encoding="utf-8") as handle:
        handle.write("prompt_id,seed,file\n" + row + "\n")
    [problem] = refusal(filled, data, tmp_path / "scratch").problems
    assert problem.file == "manifest.csv" and problem.message.startswith("line ") and "field limit" in problem.message


def test_long_member_name_in_a_zip(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    rows = manifest_rows(filled)
    long_name = "images/" + "a" * 300 + ".png"
    rows[1][2] = long_name
    write_rows(filled, rows)
    archive = tmp_path / "long.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(filled.rglob("*")):
            out.write(path, path.relative_to(filled).as_posix())
        out.writestr(long_name, noise_jpeg(1, size=(8, 8)))
    [problem] = refusal(archive, data, tmp_path / "scratch").problems
    assert problem.file.startswith("long.zip:images/aaaa") and "255-byte limit" in problem.message
    assert len(str(problem)) < 400  # the name is cut for display


def test_long_file_name_in_a_folder_manifest(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    rows = manifest_rows(filled)
    rows[1][2] = "images/" + "b" * 300 + ".png"
    write_rows(filled, rows)
    problems = refusal(filled, data, tmp_path / "scratch").problems
    [problem] = [p for p in problems if "255-byte limit" in p.message]
    assert problem.prompt_id == rows[1][0] and "manifest.csv row 1" in problem.message
    assert [p.message for p in problems if p is not problem] == ["missing: no image for this required pair"]


def test_manifest_that_is_not_utf8(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    with (filled / "manifest.csv").open("ab") as handle:
        handle.write(b"01,0,images/\xff\xfe.png\n")
    [problem] = refusal(filled, data, tmp_path / "scratch").problems
    assert problem.file == "manifest.csv" and "not UTF-8" in problem.message


def test_a_zip_whose_manifest_is_over_the_row_bound_extracts_no_image(
    filled: Path, data: BenchmarkData, tmp_path: Path, monkeypatch
) -> None:
    bound = max_listing_rows(len(data.required_pairs))
    rows = manifest_rows(filled)
    rows += [[rows[1][0], rows[1][1], rows[1][2]]] * (bound + 1 - (len(rows) - 1))  # duplicates past the bound
    write_rows(filled, rows)
    archive = tmp_path / "long.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(filled.rglob("*")):
            out.write(path, path.relative_to(filled).as_posix())
    extracted: list[str] = []
    real_extract = submission_archive._Written.extract
    monkeypatch.setattr(
        submission_archive._Written,
        "extract",
        lambda self, z, m: extracted.append(m.filename) or real_extract(self, z, m),
    )
    [problem] = refusal(archive, data, tmp_path / "scratch").problems
    assert problem.file == "manifest.csv" and f"more than {bound} rows" in problem.message
    assert sorted(extracted) == ["manifest.csv", "submission.json"]
