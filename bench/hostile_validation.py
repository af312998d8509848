"""What ``idbench validate`` costs on hostile submissions: time, peak RSS, scratch bytes, output size.

Builds identity-collapse from the shipped samples, writes each hostile input of issue 18 (a
40,000,000 x 1 PNG, a parquet of eight 400 MB all-zero images, a parquet of 1,000,000 rows, a 60 MB
manifest of unknown ids, a zip of 99,000 unnamed members, submission.json nested 100,000 deep, a
run-on manifest field, a 300-character member name) and runs ``idbench validate`` on each in a
subprocess of its own. Peak RSS is the subprocess's (``resource.getrusage(RUSAGE_CHILDREN)``, read in
a one-off wrapper process so that each case gets its own figure); scratch bytes are the peak of the
subprocess's temporary folder (``TMPDIR``), polled every 20 ms, and what is left there at the end.

    .venv/bin/python bench/hostile_validation.py            # all cases
    .venv/bin/python bench/hostile_validation.py png zip    # some of them

Writing the 400 MB images takes about 1 GB of memory for a few seconds (one image at a time).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
IDBENCH = [sys.executable, "-m", "idbench"]
# Runs one command and prints its peak RSS in KiB (the only child this wrapper ever waits for).
WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[0] + '.err', 'wb')).returncode\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def folder_bytes(folder: Path) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(path, name)).st_size
            except OSError:
                pass  # removed while counting
    return total


def measure(command: list[str], work: Path) -> dict:
    """Run ``command`` with a fresh TMPDIR; its time, peak RSS, peak and leftover scratch, stderr size."""
    scratch = work / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    err_base = work / "run"
    peak = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], folder_bytes(scratch))
            time.sleep(0.02)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    env = os.environ | {"TMPDIR": str(scratch), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER.replace("sys.argv[0]", repr(str(err_base))), *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    seconds = time.perf_counter() - start
    done.set()
    watcher.join()
    code, rss_kib = out.stdout.split()
    err = Path(str(err_base) + ".err").read_bytes()
    return {
        "exit": int(code),
        "seconds": seconds,
        "peak_rss_mb": int(rss_kib) / 1024,
        "scratch_peak_mb": peak[0] / 1e6,
        "scratch_left": folder_bytes(scratch),
        "stderr_lines": err.count(b"\n"),
        "stderr_kb": len(err) / 1000,
        "traceback": b"Traceback" in err,
        "first_line": err.decode("utf-8", "replace").splitlines()[1:2],
    }


def png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" + bytes((width + 7) // 8)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height, 9))
        + chunk(b"IEND", b"")
    )


def template(data_folder: Path, out: Path) -> Path:
    """A valid manifest submission (tiny JPEGs) to spoil one way per case."""
    from PIL import Image

    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.submission import write_template

    folder = write_template(load_benchmark_data(data_folder), out)
    with (folder / "manifest.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    for index, (_, _, file) in enumerate(rows):
        Image.new("RGB", (24, 16), (index % 256, 40, 90)).save(folder / file, "JPEG")
    metadata = json.loads((folder / "submission.json").read_text())
    (folder / "submission.json").write_text(json.dumps(metadata | {"model": "Hostile"}))
    return folder


def parquet_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"benchmark": "identity-collapse", "model": "Hostile"}))
    return folder


def case_png(work: Path, data: Path) -> Path:
    folder = template(data, work / "png")
    first = sorted((folder / "images").iterdir())[0]
    first.write_bytes(png_header_only(40_000_000, 1))
    return folder


def case_parquet_big(work: Path, data: Path) -> Path:
    folder = parquet_folder(work / "pq-big")
    schema = pa.schema([("prompt_id", pa.string()), ("seed", pa.int64()), ("image", pa.binary())])
    zeros = bytes(400 * 1024 * 1024)
    with pq.ParquetWriter(folder / "part-0.parquet", schema, compression="zstd", use_dictionary=False) as writer:
        for index in range(8):
            writer.write_table(
                pa.table(
                    {"prompt_id": [f"{index + 1:02d}"], "seed": [0], "image": pa.array([zeros], pa.binary())},
                    schema=schema,
                )
            )
    return folder


def case_parquet_one_huge(work: Path, data: Path, huge_mb: int = 480, page_per_value: bool = False) -> Path:
    """A valid submission as parquet (every pair, tiny JPEGs, one row group), one image replaced by
    ``huge_mb`` MB of zeros, zipped: the row group's average image is some 2 MB, well under the
    per-image limit. pyarrow writes the column as one page, unless ``page_per_value`` (one value a
    page, as datasets' to_parquet writes images)."""

    folder = template(data, work / "pq-one-huge-src")
    with (folder / "manifest.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    images = [(folder / file).read_bytes() for _, _, file in rows]
    images[len(images) // 2] = bytes(huge_mb * 1024 * 1024)
    table = pa.table(
        {
            "prompt_id": pa.array([r[0] for r in rows], pa.string()),
            "seed": pa.array([int(r[1]) for r in rows], pa.int64()),
            "image": pa.array(images, pa.binary()),
        }
    )
    del images
    out = parquet_folder(work / "pq-one-huge")
    paging = {"data_page_size": 1, "write_batch_size": 1} if page_per_value else {}
    pq.write_table(
        table, out / "part-0.parquet", compression="zstd", use_dictionary=False, row_group_size=len(rows), **paging
    )
    del table
    shutil.rmtree(folder)
    archive = work / "one-huge.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(out.rglob("*")):
            zipped.write(path, path.relative_to(out).as_posix())
    shutil.rmtree(out)
    return archive


def case_parquet_rows(work: Path, data: Path) -> Path:
    folder = parquet_folder(work / "pq-rows")
    rows = 1_000_000
    table = pa.table(
        {
            "prompt_id": pa.array(np.full(rows, "01", dtype=object), pa.string()),
            "seed": pa.array(np.zeros(rows, dtype=np.int64)),
            "image": pa.array(np.full(rows, b"x", dtype=object), pa.binary()),
        }
    )
    pq.write_table(table, folder / "part-0.parquet", compression="zstd")
    return folder


def case_manifest(work: Path, data: Path) -> Path:
    folder = template(data, work / "manifest")
    with (folder / "manifest.csv").open("w") as handle:
        handle.write("prompt_id,seed,file\n")
        index = 0
        while handle.tell() < 60_000_000:
            handle.write("".join(f"unknown{index + i},0,images/x{index + i}.png\n" for i in range(10_000)))
            index += 10_000
    return folder


def case_zip(work: Path, data: Path) -> Path:
    folder = template(data, work / "zip")
    archive = work / "members.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(folder.rglob("*")):
            out.write(path, path.relative_to(folder).as_posix())
        for index in range(99_000):
            out.writestr(f"junk/{index}.txt", b"")
    return archive


def case_json(work: Path, data: Path) -> Path:
    folder = template(data, work / "json")
    (folder / "submission.json").write_text("[" * 100_000 + "]" * 100_000)
    return folder


def case_csv(work: Path, data: Path) -> Path:
    folder = template(data, work / "csv")
    with (folder / "manifest.csv").open("a") as handle:
        handle.write('01,0,"images/never-closed.png\n' + "x" * 200_000 + "\n")
    return folder


def case_name(work: Path, data: Path) -> Path:
    folder = template(data, work / "name")
    archive = work / "name.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(folder.rglob("*")):
            out.write(path, path.relative_to(folder).as_posix())
        out.writestr("images/" + "a" * 300 + ".png", b"x")
    return archive


def case_rgba(work: Path, data: Path, count: int = 16, side: int = 6324) -> Path:
    """A zipped submission whose first ``count`` images are RGBA PNGs of ``side`` x ``side`` (40 MP, the
    pixel limit), smooth gradients that compress to well under 1 MB each (issue 40: an 11 MB upload)."""
    from PIL import Image

    folder = template(data, work / "rgba")
    ramp = np.linspace(0, 255, side, dtype=np.float32)
    pixels = np.empty((side, side, 4), np.uint8)
    pixels[..., 0] = ramp[None, :]
    pixels[..., 1] = ramp[:, None]
    pixels[..., 2] = 128
    pixels[..., 3] = 200
    picture = Image.fromarray(pixels, "RGBA")
    del pixels
    for index, image in enumerate(sorted((folder / "images").iterdir())[:count]):
        picture.putpixel((index, 0), (index, 0, 0, 255))  # each image its own bytes
        image.unlink()
        picture.save(image.with_suffix(".png"), "PNG", compress_level=1)
        manifest = (folder / "manifest.csv").read_text()
        (folder / "manifest.csv").write_text(manifest.replace(image.name, image.with_suffix(".png").name))
    archive = work / "rgba.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(folder.rglob("*")):
            zipped.write(path, path.relative_to(folder).as_posix())
    shutil.rmtree(folder)
    return archive


CASES = {
    "rgba": ("zip, 16 RGBA PNGs of 6324 x 6324 (40 MP) and tiny JPEGs", case_rgba),
    "png": ("40,000,000 x 1 PNG (5 KB, 1-bit)", case_png),
    "parquet-big": ("parquet of eight 400 MB all-zero images", case_parquet_big),
    "parquet-one-huge": ("zipped parquet submission, one image 480 MB of zeros", case_parquet_one_huge),
    "parquet-one-huge-paged": (
        "zipped parquet submission, one image 480 MB of zeros, one image a page",
        lambda work, data: case_parquet_one_huge(work, data, page_per_value=True),
    ),
    "parquet-one-big": (
        "zipped parquet submission, one image 120 MB of zeros (page under the page limit)",
        lambda work, data: case_parquet_one_huge(work, data, huge_mb=120),
    ),
    "parquet-rows": ("parquet of 1,000,000 rows", case_parquet_rows),
    "manifest": ("60 MB manifest of unknown ids", case_manifest),
    "zip": ("zip of 99,000 unnamed members", case_zip),
    "json": ("submission.json nested 100,000 deep", case_json),
    "csv": ("manifest field over 131,072 characters (open quote)", case_csv),
    "name": ("zip member name of 300 characters", case_name),
}


def main(argv: list[str]) -> int:
    chosen = argv or list(CASES)
    with tempfile.TemporaryDirectory(prefix="idbench-hostile-") as folder:
        work = Path(folder)
        from idbench.builders.build import build

        data = work / "data"
        build("identity-collapse", out=data)
        print(
            "| case | exit | time (s) | peak RSS (MB) | scratch peak (MB) | scratch left (B) | stderr lines | stderr (KB) | traceback |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for key in chosen:
            title, make = CASES[key]
            path = make(work, data)
            row = measure([*IDBENCH, "validate", str(path), "--data", str(data)], work)
            print(
                f"| {title} | {row['exit']} | {row['seconds']:.1f} | {row['peak_rss_mb']:.0f} | {row['scratch_peak_mb']:.1f} "
                f"| {row['scratch_left']} | {row['stderr_lines']} | {row['stderr_kb']:.1f} | {row['traceback']} |",
                flush=True,
            )
            print(f"<!-- {key}: {row['first_line']} -->", flush=True)
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
