"""Reading and validating source folders.

A source is a CSV manifest, one row per reference image, whose columns are declared by the benchmark's
``source_columns``. Image paths are relative to the manifest's folder and must stay inside it. Every
problem is reported as one :class:`SourceError` that names the file, the row and what was expected,
before anything is written.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from idbench.builders.spec import BenchmarkSpec, SourceColumn
from idbench.errors import IdbenchError

MANIFEST_NAME = "manifest.csv"
# A reference image larger than this is refused rather than decoded (decompression bombs).
MAX_IMAGE_PIXELS = 40_000_000
MAX_IMAGE_BYTES = 50 * 1024 * 1024
LIST_SEPARATOR = ";"


class SourceError(IdbenchError, ValueError):
    """A source folder or manifest is unusable; the message names the file and row."""


@dataclass(frozen=True)
class SourceImage:
    """One validated manifest row with its image bytes."""

    row: int  # 1-based data row number (the header is row 0); line = row + 1
    values: dict  # column -> str | list[str] | None
    path: Path
    data: bytes
    width: int
    height: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Source:
    manifest: Path
    root: Path
    images: tuple[SourceImage, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.manifest.read_bytes()).hexdigest()


def resolve_manifest(source: Path, benchmark: str) -> Path:
    """A source is a CSV file, or a folder holding ``<benchmark>.csv`` or ``manifest.csv``.

    The benchmark's own name wins, so a folder with several manifests (like ``samples/``, whose
    ``MANIFEST.csv`` is the license record) works on case-insensitive file systems too.
    """
    source = Path(source)
    if source.is_file():
        return source
    if not source.exists():
        raise SourceError(f"{source}: source folder or manifest does not exist")
    for name in (f"{benchmark}.csv", MANIFEST_NAME):
        if (source / name).is_file():
            return source / name
    raise SourceError(f"{source}: no {benchmark}.csv or {MANIFEST_NAME} in this folder")


def read_manifest(manifest: Path, columns: tuple[SourceColumn, ...]) -> list[tuple[int, dict]]:
    """Parse and validate the manifest's rows against ``columns``; returns (row number, values)."""
    try:
        text = manifest.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise SourceError(f"{manifest}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise SourceError(f"{manifest}: empty manifest, expected a header row") from None

    by_name = {c.name: c for c in columns}
    unknown = [h for h in header if h not in by_name]
    if unknown:
        raise SourceError(
            f"{manifest}: unknown column(s) {', '.join(map(repr, unknown))}; expected columns: {', '.join(by_name)}"
        )
    duplicated = sorted({h for h in header if header.count(h) > 1})
    if duplicated:
        raise SourceError(f"{manifest}: column(s) {', '.join(duplicated)} appear more than once in the header")
    missing = [c.name for c in columns if c.required and c.name not in header]
    if missing:
        raise SourceError(f"{manifest}: missing required column(s) {', '.join(missing)}")

    rows = []
    for number, fields in enumerate(reader, start=1):
        if not any(f.strip() for f in fields):
            continue  # blank line
        where = f"{manifest}, row {number} (line {reader.line_num})"
        if len(fields) != len(header):
            raise SourceError(f"{where}: {len(fields)} fields, but the header has {len(header)} columns")
        raw = dict(zip(header, (f.strip() for f in fields)))
        rows.append((number, {c.name: _parse_value(c, raw.get(c.name, ""), where) for c in columns}))
    if not rows:
        raise SourceError(f"{manifest}: no data rows")
    return rows


def _parse_value(column: SourceColumn, text: str, where: str):
    if not text:
        if column.required:
            raise SourceError(f"{where}: column {column.name!r} is empty ({column.description})")
        return [] if column.is_list else None
    values = [v.strip() for v in text.split(LIST_SEPARATOR) if v.strip()] if column.is_list else [text]
    for value in values:
        if column.choices is not None and value not in column.choices:
            raise SourceError(
                f"{where}: column {column.name!r} has {value!r}, expected one of {', '.join(column.choices)}"
            )
        if column.pattern is not None and not re.fullmatch(column.pattern, value):
            raise SourceError(
                f"{where}: column {column.name!r} has {value!r}, which does not match {column.pattern}"
            )
    return values if column.is_list else values[0]


def check_unique(rows: list[tuple[int, dict]], column: str, manifest: Path) -> None:
    seen: dict[str, int] = {}
    for number, values in rows:
        value = values[column]
        if value in seen:
            raise SourceError(f"{manifest}, row {number}: duplicate {column} {value!r} (first seen in row {seen[value]})")
        seen[value] = number


def load_image(root: Path, relative: str, where: str) -> tuple[Path, bytes, int, int]:
    """Read one image file and prove it decodes fully; the path must stay inside ``root``."""
    candidate = Path(relative)
    if candidate.is_absolute() or ".." in candidate.parts:
        raise SourceError(f"{where}: file {relative!r} must be a relative path inside {root}")
    path = (root / candidate).resolve()
    if not path.is_relative_to(root.resolve()):
        raise SourceError(f"{where}: file {relative!r} resolves outside {root}")
    if not path.is_file():
        raise SourceError(f"{where}: file {relative!r} does not exist in {root}")
    size = path.stat().st_size
    if size > MAX_IMAGE_BYTES:
        raise SourceError(f"{where}: file {relative!r} is {size} bytes, over the {MAX_IMAGE_BYTES}-byte limit")
    data = path.read_bytes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > MAX_IMAGE_PIXELS:
                    raise SourceError(
                        f"{where}: file {relative!r} is {width}x{height} pixels, over the {MAX_IMAGE_PIXELS}-pixel limit"
                    )
                image.load()  # a truncated file fails here, not at open()
    except SourceError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise SourceError(f"{where}: file {relative!r} is not a readable image ({err})") from None
    return path, data, width, height


def read_source(spec: BenchmarkSpec, source: Path, unique: str | None = None) -> Source:
    """Validate a benchmark's source manifest and load every image it names.

    ``unique``: the id column that must not repeat (None when the builder assigns ids).
    """
    manifest = resolve_manifest(Path(source), spec.name)
    rows = read_manifest(manifest, spec.source_columns)
    if unique is not None:
        check_unique(rows, unique, manifest)
    check_unique(rows, "file", manifest)
    root = manifest.parent
    images = []
    for number, values in rows:
        path, data, width, height = load_image(root, values["file"], f"{manifest}, row {number}")
        images.append(SourceImage(number, values, path, data, width, height))
    return Source(manifest=manifest, root=root, images=tuple(images))
