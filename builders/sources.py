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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from idbench.builders.spec import BenchmarkSpec, DistinctNames, SourceColumn
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
            raise SourceError(f"{where}: column {column.name!r} has {value!r}, which does not match {column.pattern}")
    return values if column.is_list else values[0]


def check_unique(rows: list[tuple[int, dict]], column: str, manifest: Path) -> None:
    seen: dict[str, int] = {}
    for number, values in rows:
        value = values[column]
        if value in seen:
            raise SourceError(
                f"{manifest}, row {number}: duplicate {column} {value!r} (first seen in row {seen[value]})"
            )
        seen[value] = number


_ARTICLES = ("the", "a", "an")


def reader_name(name: str) -> str:
    """A name as a reader of a prompt tells it apart: case, spacing and a leading article do not count.

    >>> reader_name("The  Dog "), reader_name("dog"), reader_name("an apple"), reader_name("A")
    ('dog', 'dog', 'apple', 'a')
    """
    words = name.casefold().split()
    if len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    return " ".join(words)


def check_distinct_names(rule: DistinctNames | None, rows: Sequence[tuple[int, Mapping]], manifest: Path) -> None:
    """Refuse subjects a prompt could name together under one name: one error listing every clash.

    ``rows`` are (row number, values) pairs: the manifest's rows, or the rows a recipe hands its sampler
    (after curation), numbered by the manifest row they came from. ``rule`` None: nothing to check.
    """
    if rule is None:
        return
    # reader name -> subject -> (its kind, [(row, name as written)]); dicts keep first-seen order
    by_name: dict[str, dict[str, tuple[str | None, list[tuple[int, str]]]]] = {}
    for number, values in rows:
        written = values.get(rule.column) or ""
        if not written.strip():
            continue  # an empty name is the column check's error (or curation's to fill)
        subject = str(values[rule.entity_column]) if rule.entity_column else f"row {number}"
        kind = values[rule.kind_column] if rule.kind_column else None
        by_name.setdefault(reader_name(written), {}).setdefault(subject, (kind, []))[1].append((number, written))

    def meet(kind_a, kind_b) -> bool:
        # Two subjects of a kind that a prompt holds once (a background) never stand side by side.
        return not (kind_a == kind_b and kind_a in rule.alone_kinds)

    clashes = []
    for name, subjects in by_name.items():
        clashing = [
            s for s, (kind, _) in subjects.items() if any(meet(kind, k) for t, (k, _) in subjects.items() if t != s)
        ]
        if not clashing:
            continue
        spellings = ", ".join(repr(w) for w in dict.fromkeys(w for s in clashing for _, w in subjects[s][1]))
        if rule.entity_column:
            holders = [
                f"entity {s} (row{'s' if len(subjects[s][1]) > 1 else ''} {', '.join(str(n) for n, _ in subjects[s][1])})"
                for s in clashing
            ]
        else:
            holders = clashing
        clashes.append(f"{', '.join(holders[:-1])} and {holders[-1]} share the name {name!r} ({spellings})")
    if clashes:
        raise SourceError(
            f"{manifest}: subjects that a prompt can name together must have names a reader can tell apart, "
            f"but {'; '.join(clashes)}. Give each a distinguishing name in the {rule.column!r} column "
            "(e.g. 'the brown terrier', 'the white poodle'); names are compared ignoring case, spacing and a "
            "leading 'the', 'a' or 'an'."
        )


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
    check_distinct_names(spec.distinct_names, rows, manifest)  # before the images load (and any model runs)
    root = manifest.parent
    images = []
    for number, values in rows:
        path, data, width, height = load_image(root, values["file"], f"{manifest}, row {number}")
        images.append(SourceImage(number, values, path, data, width, height))
    return Source(manifest=manifest, root=root, images=tuple(images))
