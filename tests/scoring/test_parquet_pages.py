"""A parquet submission with one huge image among small ones (issue 29, item 1): refused in one line from
its page headers, without decoding the huge value, in bounded memory; and the page-header reader itself."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from idbench.builders.build import build
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.parquet_pages import PageHeaderError, chunk_range, column_pages
from idbench.evaluate_pkg.submission import SubmissionError, validate_submission, write_template
from idbench.evaluate_pkg.submission import parquet as submission_parquet

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

HUGE_MB = 200  # decoding it would take at least twice this: the bound asserted below is well under


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data") / "identity-collapse"
    build("identity-collapse", out=folder)
    return load_benchmark_data(folder)


def pairs_and_images(data, tmp_path) -> tuple[list[list[str]], list[bytes]]:
    folder = write_template(data, tmp_path / "template")
    with (folder / "manifest.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    images = []
    for index, _ in enumerate(rows):
        buffer = io.BytesIO()
        Image.new("RGB", (24, 16), (index % 256, 40, 90)).save(buffer, "PNG")
        images.append(buffer.getvalue())
    return rows, images


def write_parquet(folder: Path, rows, images, **options) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submission.json").write_text('{"benchmark": "identity-collapse", "model": "Hostile"}')
    table = pa.table(
        {
            "prompt_id": pa.array([r[0] for r in rows], pa.string()),
            "seed": pa.array([int(r[1]) for r in rows], pa.int64()),
            "image": pa.array(images, pa.binary()),
        }
    )
    pq.write_table(
        table, folder / "part-0.parquet", compression="zstd", use_dictionary=False, row_group_size=len(rows), **options
    )
    return folder


# Written in a child process, so that the test process never holds the huge value.
WRITER = textwrap.dedent(
    """
    import sys, pyarrow as pa, pyarrow.parquet as pq
    source, target, row, megabytes, paged = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
    table = pq.read_table(source)
    images = table.column("image").to_pylist()
    images[row] = bytes(megabytes * 1024 * 1024)
    table = table.set_column(2, "image", pa.array(images, pa.binary()))
    del images
    paging = {"data_page_size": 1, "write_batch_size": 1} if paged else {}
    pq.write_table(table, target, compression="zstd", use_dictionary=False, row_group_size=table.num_rows, **paging)
    """
)
# Validates through the CLI in a child process and prints that process's peak RSS in MiB. VmHWM, not
# ru_maxrss: Linux carries the parent's peak into a child's ru_maxrss across exec, so a pytest worker that had
# loaded models read as a 2 GB validation; VmHWM belongs to the new address space alone.
VALIDATOR = textwrap.dedent(
    """
    import sys
    from idbench.cli import main
    code = main(["validate", sys.argv[1], "--data", sys.argv[2]])
    status = open("/proc/self/status").read()
    peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    print(code, peak_kib // 1024)
    """
)


@pytest.mark.e2e
@pytest.mark.parametrize("paged", [False, True], ids=["one page of every image", "one image a page"])
def test_one_huge_image_among_small_ones_is_refused_from_its_page_headers(data, tmp_path, paged):
    rows, images = pairs_and_images(data, tmp_path)
    small = write_parquet(tmp_path / "small", rows, images)
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "submission.json").write_text((small / "submission.json").read_text())
    row = len(rows) // 2
    subprocess.run(
        [
            sys.executable,
            "-c",
            WRITER,
            str(small / "part-0.parquet"),
            str(huge / "part-0.parquet"),
            str(row),
            str(HUGE_MB),
            "1" if paged else "0",
        ],
        check=True,
    )
    # The metadata's checks pass: the row group's images average under the per-image limit.
    reader = pq.ParquetFile(huge / "part-0.parquet")
    assert submission_parquet._parquet_problem(reader) is None

    child = subprocess.run(
        [sys.executable, "-c", VALIDATOR, str(huge), str(data.folder)],
        capture_output=True,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    code, peak_mib = map(int, child.stdout.split())
    lines = child.stderr.strip().splitlines()
    assert code == 2 and "Traceback" not in child.stderr
    assert len(lines) == 2 and "1 problem(s)" in lines[0], lines  # the count, then the one problem
    if paged:
        assert f"row {row}: an image of about" in lines[1] and "not decoded" in lines[1]
    else:
        assert "a page of 225 values" in lines[1] and "not decoded" in lines[1]
    # Decoding the value would hold it at least twice (the page, then the value); nothing near that.
    assert peak_mib < HUGE_MB + 150, peak_mib


def test_a_value_over_the_limit_in_a_page_under_the_page_limit_is_refused_before_any_copy(data, tmp_path, monkeypatch):
    rows, images = pairs_and_images(data, tmp_path)
    monkeypatch.setattr(submission_parquet, "MAX_IMAGE_BYTES", 4096)
    images[3] = bytes(5000)
    folder = write_parquet(tmp_path / "p", rows, images)
    with pytest.raises(SubmissionError) as caught:
        validate_submission(folder, data)
    assert caught.value.total == 1 and "5000 bytes, over the 4096-byte limit" in str(caught.value)


def test_a_page_over_the_page_limit_is_refused_with_its_fix(data, tmp_path, monkeypatch):
    rows, images = pairs_and_images(data, tmp_path)
    monkeypatch.setattr(submission_parquet, "MAX_PAGE_BYTES", 10_000)
    folder = write_parquet(tmp_path / "p", rows, images)
    with pytest.raises(SubmissionError, match="over the 10000-byte limit per page .*one image a page"):
        validate_submission(folder, data)
    # One image a page (what datasets' to_parquet writes) passes the same limit.
    paged = write_parquet(tmp_path / "paged", rows, images, data_page_size=1, write_batch_size=1)
    with validate_submission(paged, data) as valid:
        assert len(valid.entries) == len(rows)


def test_the_page_reader_sees_every_page_and_value(tmp_path):
    values = [os.urandom(1000 * (k + 1)) for k in range(5)]
    table = pa.table({"image": pa.array(values, pa.binary()), "path": pa.array(["a", None, "b", None, "c"])})
    for options in (
        {},
        {"data_page_version": "2.0"},
        {"data_page_size": 1, "write_batch_size": 1},
        {"compression": "none"},
    ):
        pq.write_table(table, tmp_path / "t.parquet", **options)
        metadata = pq.ParquetFile(tmp_path / "t.parquet").metadata
        with (tmp_path / "t.parquet").open("rb") as stream:
            for index in range(2):
                pages = list(column_pages(stream, *chunk_range(metadata.row_group(0).column(index))))
                assert sum(p.values for p in pages if p.is_data) == 5, options
        image_pages = [p for p in pages if p.is_data]
        assert [p.first_value for p in image_pages] == [
            sum(q.values for q in image_pages[:k]) for k in range(len(image_pages))
        ]


def test_a_corrupt_page_header_is_an_error_not_a_crash(tmp_path):
    pq.write_table(pa.table({"image": pa.array([b"x" * 100], pa.binary())}), tmp_path / "t.parquet")
    column = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0).column(0)
    start, length = chunk_range(column)
    raw = bytearray((tmp_path / "t.parquet").read_bytes())
    raw[start : start + 16] = b"\xff" * 16
    with pytest.raises(PageHeaderError):
        list(column_pages(io.BytesIO(bytes(raw)), start, length))
