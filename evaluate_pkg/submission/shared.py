"""What the formats share: rows, the bound on a listing's length, CSV reading, pairing, the scratch folder.

Each image format (a manifest, parquet files) is read into :class:`_Row` records, one per listed
image; :func:`_match_pairs` then pairs them with the benchmark's required (prompt_id, seed) pairs,
reporting unknown ids, seeds that are not asked for, duplicates and missing pairs. A listing (a
manifest, ``rankings.csv``, the rows of the parquet files) longer than :func:`max_listing_rows` is
refused at that row and read no further. The CSV files (a manifest, ``rankings.csv``) are read as a
stream with :func:`_csv_rows`: at most ``MAX_MANIFEST_BYTES``, UTF-8, exactly the expected columns, and
a field over ``MAX_CSV_FIELD_CHARS`` (usually a quote left open) is one problem naming the line. A zip's
extraction and a parquet file's images go to one temporary folder, :class:`_Scratch`.
"""

from __future__ import annotations

import csv
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from idbench.evaluate_pkg.data import BenchmarkData

from .problems import MAX_PROBLEMS, Problem, _shown

# A CSV listing (manifest.csv, rankings.csv) is read as a stream; a bigger file than this is refused.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024

# A manifest, rankings.csv or the parquet files together may hold at most LISTING_ROWS_FACTOR times
# the rows the benchmark asks for, plus MAX_PROBLEMS; a longer listing is refused at that row, read
# no further (parquet: from its metadata, before any image is spooled).
LISTING_ROWS_FACTOR = 2
# A CSV field over this many characters is refused (Python's csv module's own limit, not changed here).
MAX_CSV_FIELD_CHARS = csv.field_size_limit()
_SEED = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class _Row:
    """One row of a manifest or a parquet file, before its image is checked."""

    prompt_id: str
    seed: int
    source: str  # for messages: the image file, or "<parquet> row <n>"
    where: str  # the manifest / parquet row, for messages about the row itself
    path: Path | None  # the image file; None when ``error`` says why there is none
    error: str | None = None

    def problem(self, message: str) -> Problem:
        """A problem about this row, naming its pair, its file and (for a manifest) its row."""
        at = f" ({self.where})" if self.where != self.source else ""
        return Problem(self.prompt_id, self.seed, self.source, message + at)


def max_listing_rows(pairs: int) -> int:
    """The most rows a listing of ``pairs`` required entries may hold (see ``LISTING_ROWS_FACTOR``)."""
    return LISTING_ROWS_FACTOR * pairs + MAX_PROBLEMS


def _csv_rows(path: Path, columns: tuple[str, ...], problem, max_rows: int) -> list[tuple[str, dict[str, str]]] | None:
    """A submission's CSV (manifest or rankings) as (where, stripped values) per non-blank row; None when
    the file as a whole is unusable (too large, not UTF-8, not CSV, another header, more than
    ``max_rows`` rows: reading stops there). Problems go to ``problem``: the file's own ones as
    ``problem(message)``, a row's as ``problem(message, where=...)``."""
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        problem(f"{size} bytes, over the {MAX_MANIFEST_BYTES}-byte limit")
        return None
    # Read as a stream, not whole: a listing is refused at its row bound without holding the rest.
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            return _csv_listing(path, reader, columns, problem, max_rows)
        except UnicodeDecodeError as err:
            problem(f"not UTF-8 text ({err.reason}, near line {reader.line_num + 1})")
            return None


def _csv_listing(
    path: Path, reader, columns: tuple[str, ...], problem, max_rows: int
) -> list[tuple[str, dict[str, str]]] | None:
    """The rows of ``reader`` as :func:`_csv_rows` returns them."""
    try:
        header = [h.strip() for h in next(reader, [])]
        if sorted(header) != sorted(columns):
            shown = _shown(",".join(header)) or "(empty)"
            problem(f"header is {shown}; expected exactly the columns {','.join(columns)}")
            return None
        rows = []
        for number, fields in enumerate(reader, start=1):
            if number > max_rows:
                problem(f"more than {max_rows} rows, more than this benchmark could need; not read further")
                return None
            if not any(f.strip() for f in fields):
                continue  # a blank line
            where = f"{path.name} row {number}"
            if len(fields) != len(header):
                problem(f"{len(fields)} fields, but the header has {len(header)} columns", where=where)
                continue
            rows.append((where, dict(zip(header, (f.strip() for f in fields)))))
    except csv.Error as err:
        # A field over MAX_CSV_FIELD_CHARS (often an unterminated quote running to the end of the file).
        problem(
            f"line {reader.line_num}: not readable as CSV ({err}; fields hold at most {MAX_CSV_FIELD_CHARS} characters; is a quote left open?)"
        )
        return None
    return rows


def _match_pairs(rows: list[_Row], data: BenchmarkData, problems: list[Problem], listing: str) -> list[_Row]:
    """The row of every required pair, in ``data.required_pairs`` order; every mismatch is a problem."""
    required = set(data.required_pairs)
    prompts = data.prompt_rows
    first: dict[tuple[str, int], _Row] = {}
    for row in rows:
        pair = (row.prompt_id, row.seed)
        if row.prompt_id not in prompts:
            problems.append(row.problem(f"unknown prompt_id; {data.name} has no such prompt"))
        elif pair not in required:
            seeds = ", ".join(str(s) for s in data.seeds_of(prompts[row.prompt_id]))
            problems.append(row.problem(f"seed {row.seed} is not required (this prompt's seeds: {seeds})"))
        elif pair in first:
            earlier = first[pair]
            earlier_at = earlier.where if earlier.where == earlier.source else f"{earlier.where}, file {earlier.source}"
            problems.append(row.problem(f"duplicate pair, already given in {earlier_at}; give each pair once"))
        else:
            first[pair] = row
    for pair in data.required_pairs:
        if pair not in first:
            problems.append(Problem(pair[0], pair[1], listing, "missing: no image for this required pair"))
    return [first[pair] for pair in data.required_pairs if pair in first]


class _Scratch:
    """A temporary folder made on first use (a zip's extraction, a parquet's images), removed on failure."""

    def __init__(self, parent: Path | None):
        self.parent = parent
        self.path: Path | None = None

    def folder(self, name: str) -> Path:
        if self.path is None:
            if self.parent is not None:
                Path(self.parent).mkdir(parents=True, exist_ok=True)
            self.path = Path(tempfile.mkdtemp(prefix="idbench-submission-", dir=self.parent))
        (self.path / name).mkdir(exist_ok=True)
        return self.path / name

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
