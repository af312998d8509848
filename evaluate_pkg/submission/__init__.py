"""Submissions: the skeleton a user fills in, and the validation that stands between it and scoring.

A submission maps every (prompt_id, seed) the benchmark asks for to one generated image, explicitly.
Images are never paired with prompts by sorted file name: the pairing is data the user writes.

On-disk format
--------------
A submission is one of:

1. **A folder with a manifest** (what ``idbench template`` writes)::

       submission.json     metadata (below)
       manifest.csv        header ``prompt_id,seed,file``; one row per pair; ``file`` is a path
                           relative to the folder (any layout: ``images/01_s0.png``, ``a/b/c.jpg``)
       images/...          the images, anywhere inside the folder

   ``prompt_id`` is read as text (the collapse benchmark's ids look like ``01``: keep the zero),
   ``seed`` as a non-negative integer. The columns are exactly these three, in any order.

2. **A folder of parquet**: ``submission.json`` plus ``*.parquet`` files anywhere inside the folder,
   holding the columns ``prompt_id`` (string), ``seed`` (integer) and ``image``, either a
   ``datasets.Image()`` struct ``{bytes, path}`` with the bytes embedded, or plain binary (the encoded
   file). Other columns are ignored (the prompt text, say). ``Dataset.to_parquet`` writes this.
   Before any image is spooled, each file's metadata is checked: row groups over
   ``MAX_ROW_GROUP_BYTES``, a row group whose image column averages over ``MAX_IMAGE_BYTES`` a row,
   more rows in all than :func:`max_listing_rows` allows, and image bytes in all over the
   unpacked-bytes limit of zips (below) are refused. Then every page header of the columns read
   (:mod:`idbench.evaluate_pkg.parquet_pages`; a page is what parquet decodes whole): a page of one
   image over ``MAX_IMAGE_BYTES`` is refused naming its row, and any page over ``MAX_PAGE_BYTES``
   (128 MiB) as too large to decode, so each image is bounded by its own size, not a row group's
   average, before anything is decoded. Rows are then read one at a time, and an image over
   ``MAX_IMAGE_BYTES`` is refused on its length, before it is copied or written (dictionary encoding
   can make the metadata understate a column; the bytes actually written are counted against the
   limit too).

3. **A ``.zip``** of either folder, with its files at the top of the archive or inside one folder.
   Only what the submission is made of is extracted, into a fresh temporary folder: ``submission.json``,
   ``manifest.csv`` and the files the manifest names (or, without a manifest, the ``*.parquet``
   files). Any other member is refused by name, and so are nested archives (``.zip``, ``.tar``,
   ``.gz``, ...), named files that are not images (by suffix, ``IMAGE_SUFFIXES``), absolute paths,
   ``..``, symlinks and encrypted members (macOS's ``__MACOSX/`` and ``.DS_Store`` are skipped). The
   limits (:class:`ZipLimits`; environment variables, or arguments of :func:`validate_submission`):

   - ``IDBENCH_MAX_UNPACKED_BYTES`` (default 8 GiB): the unpacked bytes of the whole archive;
   - ``IDBENCH_MAX_COMPRESSION_RATIO`` (default 100): unpacked / compressed bytes of one member, once
     it passes ``RATIO_FLOOR_BYTES`` (1 MiB) unpacked (images hardly compress; zeros do 1000:1);
   - ``IDBENCH_MAX_ZIP_MEMBERS`` (default 100 000): the members of the archive.

   They are checked against the sizes the archive declares before anything is written, and again on
   the bytes actually streamed out (a crafted archive can lie), so no more than the limits ever lands
   on disk; a member refused halfway is deleted at once, and the temporary folder with it.

4. **A ranking** (``"task": "retrieval"``): ``submission.json`` plus ``rankings.csv`` with the header
   ``prompt_id,slot,rank,ref_id``, one row per ranked candidate: for each row of the benchmark's
   ``retrieval`` config (a prompt's slot: ``A``, ``A.item``, ``background``), its candidate ref ids
   with ranks 1, 2, ... (best first). A ranking may stop early (what is not ranked is never in a
   top k); every slot needs one, each ref id once, and only that slot's candidates.

``submission.json`` is a JSON object::

    {"benchmark": "identity-collapse",      the benchmark's name (must match --data)
     "model": "MyModel-v2",                 required, non-empty
     "link": "https://...",                 paper / code / weights (http(s) or empty)
     "license": "apache-2.0",               the license of the generated images
     "generation": {"steps": 28, "cfg": 3.5, "size": 1024},   generation settings, free-form
     "notes": "",                           free text
     "idbench_version": "0.1.0"}            the version that wrote the template

Only ``benchmark`` and ``model`` are required; any other key is refused, so that a typo (``"modle"``)
is caught rather than silently dropped. ``"task"`` says what the submission holds (one of the
benchmark's ``spec.tasks``, default ``"reference"``): ``"reference"`` images generated with the
references, ``"text-to-image"`` images generated from the prompts alone (CogCanvas: scored with count
accuracy and binding Attr-VQA, ranked on a track of its own), or ``"retrieval"``: no images but
a ranking of references (format 4).

Validation
----------
:func:`validate_submission` checks everything up front and raises one :class:`SubmissionError` that
lists the problems found (a :class:`Problem` each, naming the prompt id, seed and file), so a user
fixes all of them in one round: the first ``MAX_PROBLEMS`` (500), then ``... and N more``. A
submission that fails validation is not scored at all. Every image's header is checked first (the
pixel limit, and for a submitted image no side over ``MAX_IMAGE_SIDE`` and no aspect ratio over
``MAX_ASPECT_RATIO``: see :func:`idbench.evaluate_pkg.images.size_problem`), then it is decoded fully
as scoring decodes it (with :func:`idbench.evaluate_pkg.images.working_image`), so a truncated file
fails here and not halfway through scoring. The decode threads hold at most ``MAX_PIXELS_IN_FLIGHT``
pixels at once (by the headers' sizes), so validation's memory is bounded whatever the images and the
number of cores.

Work is bounded whatever the input: a listing (manifest, rankings, parquet rows) longer than
:func:`max_listing_rows` is refused at that row; ``submission.json`` nested deeper than
``MAX_JSON_DEPTH`` is refused before it is parsed; a CSV field over ``MAX_CSV_FIELD_CHARS`` (often an
unterminated quote) is one problem naming the line; zip member names and manifest file names over
``MAX_MEMBER_NAME_BYTES`` (or a part over ``MAX_NAME_COMPONENT_BYTES``) are refused by name, the name
cut to ``SHOWN_NAME_CHARS`` in messages. See ``docs/hostile-input.md``.

The returned :class:`Submission` holds no decoded images and no image bytes, only one file per
entry and its content hash, so memory stays bounded however large the submission. A manifest
folder's files are read where they are. A zip is extracted, and a parquet submission's images are
copied out one file each (so any one image is read without reading a whole row group), into a
temporary folder that the submission owns: use it as a context manager (or call
:meth:`Submission.close`) to remove that folder; it is also removed when the object is garbage
collected or the process exits, and at once when validation fails. Entries are picklable (hand them
to DataLoader workers); the Submission itself is not.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import weakref
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

import idbench
from idbench import settings
from idbench.atomic import atomic_directory
from idbench.builders.spec import DEFAULT_TASK
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.images import (
    MAX_IMAGE_BYTES,
    MAX_PIXELS,
    ImageError,
    content_hash,
    header_size,
    normalize_image,
    working_image,
)
from idbench.evaluate_pkg.parquet_pages import PageHeaderError, chunk_range, column_pages
from idbench.names import name_problems
from idbench.untrusted import json_depth  # one depth count, without parsing, for every untrusted JSON

METADATA_NAME = "submission.json"
MANIFEST_NAME = "manifest.csv"
RANKINGS_NAME = "rankings.csv"
RANKING_COLUMNS = ("prompt_id", "slot", "rank", "ref_id")
MANIFEST_COLUMNS = ("prompt_id", "seed", "file")
PARQUET_COLUMNS = ("prompt_id", "seed", "image")

# metadata key -> (type, what it holds); "benchmark" and "model" are required, the rest optional.
METADATA_FIELDS: dict[str, tuple[type, str]] = {
    "benchmark": (str, "the benchmark's name"),
    "model": (str, "the model's name"),
    "task": (
        str,
        "what the submission holds: reference (default), text-to-image or retrieval, as the benchmark offers",
    ),
    "family": (str, "the model family the leaderboard groups by (e.g. 'FLUX.1 Kontext', 'OmniGen'), or empty"),
    "link": (str, "a link to the paper, code or weights (http(s), or empty)"),
    "license": (str, "the license of the generated images"),
    "generation": (dict, "generation settings (steps, guidance, resolution, sampler, ...)"),
    "notes": (str, "free text"),
    "idbench_version": (str, "the idbench version that wrote the template"),
}
REQUIRED_METADATA = ("benchmark", "model")
# Free-text fields the leaderboard shows are bounded, so a page stays readable and a row stays small.
MAX_TEXT_CHARS = {"model": 100, "family": 100, "link": 500, "license": 100, "notes": 2000}

# Small text files are read whole; these bounds keep a hostile one from filling memory.
MAX_METADATA_BYTES = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
# A zip is refused when it has more members or more unpacked bytes than this, or a member that
# unpacks to more than MAX_COMPRESSION_RATIO times its compressed size (zip bombs, disk filling). The
# ratio is judged once a member passes RATIO_FLOOR_BYTES, so a small, very regular manifest passes.
# Each can be set through its environment variable (ZipLimits.from_env) or validate_submission's arguments.
MAX_ZIP_MEMBERS = 100_000
MAX_ZIP_BYTES = 8 * 1024**3
MAX_COMPRESSION_RATIO = 100.0
RATIO_FLOOR_BYTES = 1024 * 1024
UNPACKED_BYTES_ENV = settings.MAX_UNPACKED_BYTES
COMPRESSION_RATIO_ENV = settings.MAX_COMPRESSION_RATIO
ZIP_MEMBERS_ENV = settings.MAX_ZIP_MEMBERS
# What a manifest may name inside a zip; archives inside the archive are refused by these suffixes.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
ARCHIVE_SUFFIXES = (
    ".zip",
    ".tar",
    ".gz",
    ".tgz",
    ".bz2",
    ".tbz2",
    ".xz",
    ".txz",
    ".zst",
    ".lz4",
    ".lzma",
    ".7z",
    ".rar",
    ".jar",
    ".whl",
)
# Added by archiving tools, not by the submitter: skipped (never extracted), not refused.
_ZIP_JUNK = re.compile(r"(^|/)(__MACOSX/.*|\.DS_Store|Thumbs\.db|desktop\.ini)$")
# Parquet is read one row group at a time; a bigger group than this is refused to keep memory bounded.
MAX_ROW_GROUP_BYTES = 512 * 1024 * 1024
# A page is what parquet decodes whole (its header's uncompressed size is allocated, then one value is
# copied out of it): a page of the columns read over this is refused from its header, before any is
# decoded, so decoding holds at most about twice this. datasets' to_parquet writes one image a page.
MAX_PAGE_BYTES = 128 * 1024 * 1024
# A page of one value larger than MAX_IMAGE_BYTES by more than this (the value's length prefix and
# levels take a few bytes) holds an image over the limit: refused from its header, never decoded.
PAGE_OVERHEAD_BYTES = 4096
# Parquet files are read through a buffer of this size, so a column chunk is never read whole.
PARQUET_BUFFER_BYTES = 1024 * 1024
# Images are decoded in threads (Pillow releases the GIL while decoding); each holds one image.
DECODE_WORKERS = min(8, os.cpu_count() or 1)
# The pixels (width x height, from the headers) the decode threads hold at once: one image at the pixel
# limit, or many small ones side by side. A thread waits for its image's share before decoding it, so the
# memory of validation does not grow with the number of threads (16 RGBA images of 40 MP on 8 threads
# would otherwise hold 8 of them, and their copies, at once). An image is decoded as scoring decodes it
# (images.working_image: at most the decoded frame at full size, then the reduced copy).
MAX_PIXELS_IN_FLIGHT = MAX_PIXELS
# A SubmissionError lists at most this many problems and counts the rest ("... and N more"), so a
# hostile listing of millions of bad rows costs neither memory nor a page full of text (500 lines are
# some 50 KB). It is enough to list every problem of a whole listing for the wrong benchmark (a
# cogcanvas manifest checked against identity-collapse: 82 unknown rows and 225 missing pairs).
MAX_PROBLEMS = 500
# A manifest, rankings.csv or the parquet files together may hold at most LISTING_ROWS_FACTOR times
# the rows the benchmark asks for, plus MAX_PROBLEMS; a longer listing is refused at that row, read
# no further (parquet: from its metadata, before any image is spooled).
LISTING_ROWS_FACTOR = 2
# submission.json may nest objects and arrays this deep (the template nests 2); checked before parsing.
MAX_JSON_DEPTH = 20
# Zip member names and manifest file names: bytes (UTF-8) of the whole name and of each part between
# slashes (what file systems allow: 255 per name; longer ones fail with ENAMETOOLONG).
MAX_MEMBER_NAME_BYTES = 1024
MAX_NAME_COMPONENT_BYTES = 255
# A file or member name is cut to this many characters in messages (a 1000-character name helps nobody).
SHOWN_NAME_CHARS = 120
# A CSV field over this many characters is refused (Python's csv module's own limit, not changed here).
MAX_CSV_FIELD_CHARS = csv.field_size_limit()

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_SEED = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ZipLimits:
    """What a zipped submission may unpack to; see the module docstring. ``from_env`` reads the overrides."""

    max_bytes: int = MAX_ZIP_BYTES
    max_members: int = MAX_ZIP_MEMBERS
    max_ratio: float = MAX_COMPRESSION_RATIO

    @classmethod
    def from_env(
        cls, max_bytes: int | None = None, max_members: int | None = None, max_ratio: float | None = None
    ) -> ZipLimits:
        """The arguments given, else ``$IDBENCH_MAX_UNPACKED_BYTES`` / ``_ZIP_MEMBERS`` / ``_COMPRESSION_RATIO``, else the defaults."""

        def pick(value: Any, env: str, default: Any, kind: type) -> Any:
            if value is not None:
                return kind(value)
            # settings' defaults are these constants (tests/test_settings.py); an unset variable keeps the constant.
            return settings.zip_limit(env) if settings.is_set(env) else default

        return cls(
            pick(max_bytes, UNPACKED_BYTES_ENV, MAX_ZIP_BYTES, int),
            pick(max_members, ZIP_MEMBERS_ENV, MAX_ZIP_MEMBERS, int),
            pick(max_ratio, COMPRESSION_RATIO_ENV, MAX_COMPRESSION_RATIO, float),
        )


# --- records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission: the pair it concerns (if any), the file, what is wrong."""

    prompt_id: str | None
    seed: int | None
    file: str | None
    message: str

    def __str__(self) -> str:
        parts = []
        if self.prompt_id is not None:
            parts.append(
                f"prompt_id {_shown(self.prompt_id)!r}" + (f" seed {self.seed}" if self.seed is not None else "")
            )
        if self.file is not None:
            parts.append(f"file {_shown(self.file)}")
        return f"{', '.join(parts) or 'submission'}: {self.message}"


class SubmissionError(IdbenchError, ValueError):
    """A submission is unusable. ``problems`` lists the first ``MAX_PROBLEMS`` found and ``more`` counts
    the others; ``str()`` is one line each, then ``... and N more problem(s)`` when some are left out.
    ``total`` is how many there were in all."""

    def __init__(self, problems: Iterable[Problem], more: int = 0):
        kept: list[Problem] = []
        for problem in problems:
            if len(kept) < MAX_PROBLEMS:
                kept.append(problem)
            else:
                more += 1
        self.problems = tuple(kept)
        self.more = more + getattr(problems, "more", 0)  # a _Problems collector counted some itself
        lines = [str(p) for p in self.problems]
        if self.more:
            lines.append(f"... and {self.more} more problem(s), not listed (at most {MAX_PROBLEMS} are)")
        super().__init__("\n".join(lines))

    @property
    def total(self) -> int:
        return len(self.problems) + self.more

    def __reduce__(self):  # pickled as its problems (the app validates in a child process that sends it back)
        return (type(self), (self.problems, self.more))


class _Problems:
    """Problems as validation finds them: the first ``MAX_PROBLEMS`` kept, the others only counted.

    Used where a list would be (``append``, ``extend``, ``+=``, truth); ``SubmissionError(collector)``
    takes both the kept problems and the count.
    """

    def __init__(self) -> None:
        self.kept: list[Problem] = []
        self.more = 0

    def append(self, problem: Problem) -> None:
        if len(self.kept) < MAX_PROBLEMS:
            self.kept.append(problem)
        else:
            self.more += 1

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)

    def __iadd__(self, problems: Iterable[Problem]) -> _Problems:
        self.extend(problems)
        return self

    def __bool__(self) -> bool:
        return bool(self.kept)

    def __len__(self) -> int:
        return len(self.kept) + self.more

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.kept)


def _shown(name: str) -> str:
    """``name`` cut to ``SHOWN_NAME_CHARS`` for a message (the cut said), whole when short."""
    return name if len(name) <= SHOWN_NAME_CHARS else f"{name[:SHOWN_NAME_CHARS]}... ({len(name)} characters)"


def _name_length_problem(name: str) -> str | None:
    """Why a file name is too long to be written or looked up (``MAX_MEMBER_NAME_BYTES``, per part
    ``MAX_NAME_COMPONENT_BYTES``), or None."""
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_MEMBER_NAME_BYTES:
        return f"a name of {size} bytes, over the {MAX_MEMBER_NAME_BYTES}-byte limit"
    longest = max((len(part.encode("utf-8", "surrogateescape")) for part in name.split("/")), default=0)
    if longest > MAX_NAME_COMPONENT_BYTES:
        return f"a folder or file name of {longest} bytes, over the {MAX_NAME_COMPONENT_BYTES}-byte limit per name"
    return None


@dataclass(frozen=True)
class Entry:
    """One validated generation: its pair, where its bytes are, and their content hash.

    ``source`` says where the image came from, for people: the file relative to the submission, or
    ``"<parquet file> row <n>"``. ``path`` is the file on disk (for parquet, the image's bytes copied
    out at validation, so that any entry is read without reading its neighbours). Entries are small
    and picklable: hand them to DataLoader workers and call :meth:`data` or :meth:`load` there.
    """

    prompt_id: str
    seed: int
    source: str
    content_hash: str
    path: Path

    def data(self) -> bytes:
        """The encoded image bytes, checked against the hash taken at validation."""
        try:
            data = self.path.read_bytes()
        except OSError as err:
            raise self._error(f"cannot be read any more ({err}); was the submission closed or moved?") from None
        if content_hash(data) != self.content_hash:
            raise self._error("changed since the submission was validated")
        return data

    def load(self) -> Image.Image:
        """The image, decoded and normalised to 8-bit RGB (see :mod:`idbench.evaluate_pkg.images`)."""
        where = f"prompt_id {self.prompt_id!r} seed {self.seed}, file {self.source}"
        return normalize_image(self.data(), where=where, submitted=True)

    def _error(self, message: str) -> SubmissionError:
        return SubmissionError([Problem(self.prompt_id, self.seed, self.source, message)])


@dataclass(frozen=True)
class Submission:
    """A validated submission: metadata and one entry per required pair, in ``data.required_pairs`` order.

    ``workdir`` is the temporary folder of a zip's extraction or a parquet submission's images, owned
    by this object and removed by :meth:`close` (or leaving a ``with`` block, or garbage collection);
    entries in it cannot be read after that. It is None for a manifest folder, whose files are read
    where they are.
    """

    benchmark: str
    metadata: dict
    entries: tuple[Entry, ...]
    root: Path  # the folder holding submission.json
    workdir: Path | None = None
    # A retrieval submission's rankings: (prompt_id, slot) -> candidate ref ids, best first (no entries).
    rankings: Mapping[tuple[str, str], tuple[str, ...]] | None = None
    _finalizer: weakref.finalize | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.workdir is not None:
            object.__setattr__(self, "_finalizer", weakref.finalize(self, shutil.rmtree, str(self.workdir), True))

    @property
    def model(self) -> str:
        return self.metadata["model"]

    @property
    def task(self) -> str:
        """What the submission holds (``submission.json``'s ``task``; ``"reference"`` when absent)."""
        return self.metadata.get("task") or DEFAULT_TASK

    @cached_property
    def _by_pair(self) -> dict[tuple[str, int], Entry]:
        return {(e.prompt_id, e.seed): e for e in self.entries}

    def entry(self, prompt_id: str, seed: int) -> Entry:
        """The entry of one pair (KeyError names the pair when the benchmark has no such pair)."""
        try:
            return self._by_pair[(prompt_id, seed)]
        except KeyError:
            raise KeyError(f"no entry for prompt_id {prompt_id!r} seed {seed}") from None

    def only(self, keep: Callable[[Entry], bool]) -> Submission:
        """The entries ``keep`` accepts (in the same order), as a submission that does not own the
        temporary folder: this one must stay open while the other is used (a shard of a run)."""
        return replace(self, entries=tuple(e for e in self.entries if keep(e)), workdir=None)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def close(self) -> None:
        """Remove the temporary folder, if any (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> Submission:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# --- template ------------------------------------------------------------------------------------


def expected_file(prompt_id: str, seed: int) -> str:
    """The file name the template proposes for a pair (only a proposal: the manifest is what counts)."""
    return f"images/{_SAFE_NAME.sub('_', prompt_id)}_s{seed}.png"


def template_metadata(data: BenchmarkData) -> dict:
    """``submission.json`` as the template writes it: the benchmark filled in, the rest to fill."""
    return {
        "benchmark": data.name,
        "model": "",
        "family": "",
        "link": "",
        "license": "",
        "generation": {},
        "notes": "",
        "idbench_version": idbench.__version__,
    }


def write_template(data: BenchmarkData, out: Path, overwrite: bool = False, task: str = DEFAULT_TASK) -> Path:
    """Write an empty submission of ``task`` for ``data`` into ``out``; return ``out``.

    Image tasks (``reference``, ``text-to-image``) get ``images/`` and a manifest of every required
    (prompt_id, seed); ``retrieval`` gets ``rankings.csv`` listing each slot's candidates with the
    rank left empty, for the submitter to fill (1 = best) or to cut short. ``submission.json`` holds
    the metadata to fill, and the task when it is not the default. A task the benchmark does not
    offer is refused (:class:`~idbench.evaluate_pkg.data.BenchmarkDataError`).

    The folder is written next to ``out`` and renamed into place when complete; an existing ``out``
    is refused (:class:`~idbench.atomic.OutputExistsError`) unless ``overwrite``, and then replaced only
    once the new one is complete. Example::

        write_template(load_benchmark_data("data/identity-collapse"), Path("my-submission"))
    """
    if task not in data.spec.tasks:
        raise BenchmarkDataError(f"{data.name} offers the tasks {', '.join(data.spec.tasks)}, not {task!r}")
    out = Path(out)
    with atomic_directory(out, overwrite=overwrite) as staging:
        metadata = template_metadata(data) | ({} if task == DEFAULT_TASK else {"task": task})
        (staging / METADATA_NAME).write_text(
            json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if task == "retrieval":
            _write_rankings_template(data, staging / RANKINGS_NAME)
            return out
        (staging / "images").mkdir()
        files: set[str] = set()
        with (staging / MANIFEST_NAME).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(MANIFEST_COLUMNS)
            for prompt_id, seed in data.required_pairs:
                name = expected_file(prompt_id, seed)
                if name in files:  # two ids that differ only in unsafe characters
                    name = name.removesuffix(".png") + f"_{len(files)}.png"
                files.add(name)
                writer.writerow([prompt_id, seed, name])
    return out


def _write_rankings_template(data: BenchmarkData, path: Path) -> None:
    """``rankings.csv`` with every (prompt, slot, candidate) of the retrieval config and an empty rank."""
    if "retrieval" not in data.tables:
        raise BenchmarkDataError(f"{data.name} (this build) has no retrieval config to rank")
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RANKING_COLUMNS)
        for row in data.tables["retrieval"]:
            for ref_id in row["candidate_ref_ids"]:
                writer.writerow([row["prompt_id"], row["slot"], "", ref_id])


# --- validation ----------------------------------------------------------------------------------


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


def validate_submission(
    path: Path,
    data: BenchmarkData,
    *,
    scratch: Path | None = None,
    max_zip_bytes: int | None = None,
    max_zip_members: int | None = None,
    max_compression_ratio: float | None = None,
) -> Submission:
    """Check the submission at ``path`` (folder or ``.zip``) against ``data``; raise if anything is wrong.

    Raises :class:`SubmissionError` listing every problem. ``scratch`` is where the temporary folder
    of a zip or parquet submission is made (default: the system's temp folder); it is removed again on
    failure, and on success belongs to the returned :class:`Submission` (close it when done). The zip
    limits (``max_*``) default to their environment variables, else to ``MAX_ZIP_BYTES`` (8 GiB
    unpacked), ``MAX_ZIP_MEMBERS`` and ``MAX_COMPRESSION_RATIO`` (see :class:`ZipLimits`). Example::

        with validate_submission(Path("my-submission.zip"), data) as submission:
            for entry in submission.entries:
                image = entry.load()  # 8-bit RGB, upright
    """
    path = Path(path)
    if not path.exists():
        raise SubmissionError([Problem(None, None, str(path), "does not exist")])
    if not path.is_dir() and not (path.is_file() and zipfile.is_zipfile(path)):
        raise SubmissionError([Problem(None, None, str(path), "is neither a folder nor a .zip archive")])
    workdir = _Scratch(scratch)
    limits = ZipLimits.from_env(max_zip_bytes, max_zip_members, max_compression_ratio)
    try:
        folder, label = path, str(path)
        if not path.is_dir():
            extracted = workdir.folder("archive")
            _extract_zip(path, extracted, limits, max_listing_rows(len(data.required_pairs)))
            folder, label = _zip_root(extracted), path.name
        return _validate_folder(folder, label, data, workdir, limits)
    except BaseException:
        workdir.remove()
        raise


def max_listing_rows(pairs: int) -> int:
    """The most rows a listing of ``pairs`` required entries may hold (see ``LISTING_ROWS_FACTOR``)."""
    return LISTING_ROWS_FACTOR * pairs + MAX_PROBLEMS


def _validate_folder(folder: Path, label: str, data: BenchmarkData, workdir: _Scratch, limits: ZipLimits) -> Submission:
    problems = _Problems()
    metadata = _read_metadata(folder, data, problems)
    if metadata.get("task") == "retrieval":
        rankings = _read_rankings(folder / RANKINGS_NAME, data, problems)
        if problems:
            raise SubmissionError(problems)
        return Submission(benchmark=data.name, metadata=metadata, entries=(), root=folder, rankings=rankings)

    manifest = folder / MANIFEST_NAME
    parquets = sorted(p for p in folder.rglob("*.parquet") if p.is_file())
    for parquet in [p for p in parquets if not p.resolve().is_relative_to(folder.resolve())]:
        parquets.remove(parquet)  # a symlink to a file elsewhere: the submission is what is inside it
        name = parquet.relative_to(folder).as_posix()
        problems.append(Problem(None, None, name, "links outside the submission folder"))
    rows: list[_Row] | None = None  # None: no usable listing, so missing pairs are not worth listing
    if manifest.is_file() and parquets:
        names = ", ".join(p.relative_to(folder).as_posix() for p in parquets[:3])
        problems.append(Problem(None, None, MANIFEST_NAME, f"both a manifest and parquet files ({names}); keep one"))
    elif manifest.is_file():
        rows = _read_manifest(manifest, folder, problems, max_listing_rows(len(data.required_pairs)))
    elif parquets:
        rows = _read_parquets(parquets, folder, workdir, problems, max_listing_rows(len(data.required_pairs)), limits)
    else:
        problems.append(Problem(None, None, label, f"no {MANIFEST_NAME} and no *.parquet files"))

    hashes: dict[_Row, str] = {}
    chosen: list[_Row] = []
    if rows is not None:
        chosen = _match_pairs(rows, data, problems, MANIFEST_NAME if manifest.is_file() else "the parquet files")
        hashes = _check_images(chosen, problems)
    if problems:
        raise SubmissionError(problems)

    entries = tuple(Entry(row.prompt_id, row.seed, row.source, hashes[row], row.path) for row in chosen)
    return Submission(benchmark=data.name, metadata=metadata, entries=entries, root=folder, workdir=workdir.path)


def check_resume_folder(folder: Path, data: BenchmarkData) -> list[tuple[str, int, str]]:
    """The ``(prompt_id, seed, file)`` rows, in file order, of a submission folder still being filled in
    (what ``idbench generate`` and ``idbench run`` continue), held to a submission's rules first.

    ``submission.json`` and ``manifest.csv`` are checked as :func:`validate_submission` checks them
    (sizes, JSON depth, fields, the header, seeds, file names, every required pair listed once and
    nothing else) except that the model name may still be empty (the run fills it in); a file must
    also name a file inside the folder, not the folder or a sub-folder. The images are not looked at:
    the run writes the missing ones, and validation checks them all. Raises :class:`SubmissionError`.
    """
    folder = Path(folder)
    problems = _Problems()
    _read_metadata(folder, data, problems, require_model=False)
    manifest = folder / MANIFEST_NAME
    rows = None
    if not manifest.is_file():
        problems.append(Problem(None, None, MANIFEST_NAME, "missing"))
    else:
        rows = _read_manifest(manifest, folder, problems, max_listing_rows(len(data.required_pairs)))
    if rows is not None:
        for row in rows:
            if row.path is None:
                problems.append(row.problem(row.error or "no file"))
            elif row.path == folder.resolve() or row.path.is_dir() or PurePosixPath(row.source).name in ("", ".", ".."):
                problems.append(row.problem("names a folder, not an image file"))
        _match_pairs(rows, data, problems, MANIFEST_NAME)
    if problems:
        raise SubmissionError(problems)
    return [(row.prompt_id, row.seed, row.source) for row in rows or ()]


def _read_metadata(folder: Path, data: BenchmarkData, problems: list[Problem], *, require_model: bool = True) -> dict:
    def problem(message: str) -> None:
        problems.append(Problem(None, None, METADATA_NAME, message))

    path = folder / METADATA_NAME
    if not path.is_file():
        problem(f"missing; it holds the model name and generation settings ({', '.join(METADATA_FIELDS)})")
        return {}
    if path.stat().st_size > MAX_METADATA_BYTES:
        problem(f"{path.stat().st_size} bytes, over the {MAX_METADATA_BYTES}-byte limit")
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        depth = json_depth(text)
        if depth > MAX_JSON_DEPTH:
            problem(f"nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH}")
            return {}
        metadata = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        problem(f"not valid JSON ({err})")
        return {}
    except RecursionError:  # cannot happen below MAX_JSON_DEPTH; the last guard
        problem("nested too deep to be read")
        return {}
    if not isinstance(metadata, dict):
        problem(f"expected a JSON object, found {type(metadata).__name__}")
        return {}

    for key in sorted(metadata.keys() - METADATA_FIELDS.keys()):
        problem(f"unknown field {key!r}; the fields are {', '.join(METADATA_FIELDS)}")
    for key, (kind, description) in METADATA_FIELDS.items():
        if key not in metadata:
            if key in REQUIRED_METADATA:
                problem(f"missing field {key!r} ({description})")
        elif not isinstance(metadata[key], kind):
            expected = "a JSON object" if kind is dict else "a string"
            problem(f"field {key!r} should be {expected}, found {metadata[key]!r}")
    if require_model and isinstance(metadata.get("model"), str) and not metadata["model"].strip():
        problem("field 'model' is empty; fill in the model's name")
    benchmark = metadata.get("benchmark")
    if isinstance(benchmark, str) and benchmark != data.name:
        problem(f"field 'benchmark' is {benchmark!r}, but the data is {data.name!r}")
    task = metadata.get("task")
    if isinstance(task, str) and task not in data.spec.tasks:
        problem(f"field 'task' is {task!r}; {data.name} offers {', '.join(data.spec.tasks)}")
    problems.extend(Problem(None, None, METADATA_NAME, message) for message in metadata_text_problems(metadata))
    return metadata


def metadata_text_problems(metadata: Mapping[str, Any]) -> list[str]:
    """What is wrong with the free-text fields of ``metadata`` (lengths, the link's scheme); [] if fine.

    Shared by the validator and by the leaderboard, which lets a submitter override the model name,
    family and link: the same limits hold wherever the text comes from.
    """
    out = []
    for key, limit in MAX_TEXT_CHARS.items():
        value = metadata.get(key)
        if isinstance(value, str) and len(value) > limit:
            out.append(f"field {key!r} is {len(value)} characters long, over the limit of {limit}")
    link = metadata.get("link")
    # The leaderboard shows the link: only web links, never javascript: or file: URLs.
    if isinstance(link, str) and link and not re.fullmatch(r"https?://[^\s<>\"']+", link):
        problem = f"field 'link' should be an http(s) URL without spaces or quotes, or empty; found {link!r}"
        out.append(problem)
    # Names that could impersonate (control, bidi, zero-width or mixed-script characters) and links with
    # userinfo: the same rules as the leaderboard's queue (idbench.names), one line per field.
    for key in ("model", "family", "link"):
        value = metadata.get(key)
        if isinstance(value, str) and value and not any(p.startswith(f"field {key!r}") for p in out):
            out += name_problems(key, value)
    return out


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


def _read_manifest(manifest: Path, folder: Path, problems: _Problems, max_rows: int) -> list[_Row] | None:
    def problem(message: str, prompt_id: str | None = None, file: str = MANIFEST_NAME) -> None:
        problems.append(Problem(prompt_id, None, file, message))

    parsed = _csv_rows(
        manifest, MANIFEST_COLUMNS, lambda message, where=MANIFEST_NAME: problem(message, file=where), max_rows
    )
    if parsed is None:
        return None
    rows = []
    for where, values in parsed:
        prompt_id, seed, file = values["prompt_id"], values["seed"], values["file"]
        if not prompt_id or not file:
            problem(f"empty {'prompt_id' if not prompt_id else 'file'} ({where})", prompt_id or None, file or where)
        elif not _SEED.fullmatch(seed):
            problem(f"seed {_shown(seed)!r} is not a non-negative integer ({where})", prompt_id, _shown(file))
        elif reason := _name_length_problem(file):
            problem(f"{reason} ({where})", prompt_id, _shown(file))
        else:
            image = _image_path(folder, file)
            error = None if image else "the file must be a relative path inside the submission folder"
            rows.append(_Row(prompt_id, int(seed), file, where, image, error))
    return rows


def _read_rankings(path: Path, data: BenchmarkData, problems: list[Problem]) -> dict[tuple[str, str], tuple[str, ...]]:
    """A retrieval submission's ``rankings.csv``: (prompt_id, slot) -> ref ids by rank; every problem
    (unknown prompt or slot, a ref id that is not one of the slot's candidates or comes twice, ranks
    that are not 1, 2, ..., a slot without a ranking) is added to ``problems``, naming its row."""

    def problem(message: str, prompt_id: str | None = None, where: str = RANKINGS_NAME) -> None:
        problems.append(Problem(prompt_id, None, where, message))

    if "retrieval" not in data.tables:
        problem(f"{data.name} has no retrieval config; this build cannot score a ranking")
        return {}
    slots = {(r["prompt_id"], r["slot"]): r for r in data.tables["retrieval"]}
    if not path.is_file():
        problem(f"missing; a retrieval submission ranks each slot's candidates in it ({','.join(RANKING_COLUMNS)})")
        return {}
    candidates = sum(len(row["candidate_ref_ids"]) for row in slots.values())
    parsed = _csv_rows(
        path,
        RANKING_COLUMNS,
        lambda message, where=RANKINGS_NAME: problem(message, where=where),
        max_listing_rows(candidates),
    )
    if parsed is None:
        return {}
    prompts = {prompt_id for prompt_id, _ in slots}
    ref_ids = set(data.reference_table[data.spec.reference_id])  # the column alone: no image decoded
    ranked: dict[tuple[str, str], dict[int, str]] = {}
    seen: dict[tuple[str, str, str], str] = {}  # (prompt, slot, ref id) -> the row that ranked it
    for where, values in parsed:
        prompt_id, slot, rank, ref_id = (values[c] for c in RANKING_COLUMNS)
        key = (prompt_id, slot)
        if prompt_id not in prompts:
            problem(f"unknown prompt_id; {data.name} has no such prompt", prompt_id, where)
        elif key not in slots:
            known = ", ".join(s for p, s in slots if p == prompt_id)
            problem(f"unknown slot {slot!r} (this prompt's slots: {known})", prompt_id, where)
        elif not _SEED.fullmatch(rank) or int(rank) < 1:
            problem(f"slot {slot!r}: rank {rank!r} is not a positive integer", prompt_id, where)
        elif ref_id not in slots[key]["candidate_ref_ids"]:
            known = "unknown" if ref_id not in ref_ids else "not a candidate of this slot"
            candidates = ", ".join(slots[key]["candidate_ref_ids"])
            problem(f"slot {slot!r}: ref_id {ref_id!r} is {known} (candidates: {candidates})", prompt_id, where)
        elif (prompt_id, slot, ref_id) in seen:
            problem(
                f"slot {slot!r}: ref_id {ref_id!r} is ranked twice (first in {seen[(prompt_id, slot, ref_id)]})",
                prompt_id,
                where,
            )
        elif int(rank) in ranked.get(key, {}):
            problem(f"slot {slot!r}: rank {rank} is given twice", prompt_id, where)
        else:
            seen[(prompt_id, slot, ref_id)] = where
            ranked.setdefault(key, {})[int(rank)] = ref_id
    out = {}
    for key in slots:
        ranks = ranked.get(key)
        if not ranks:
            problem(f"slot {key[1]!r}: missing, no ranking of its candidates", key[0])
        elif sorted(ranks) != list(range(1, len(ranks) + 1)):
            problem(f"slot {key[1]!r}: ranks {sorted(ranks)} are not 1 to {len(ranks)} without gaps", key[0])
        else:
            out[key] = tuple(ranks[r] for r in sorted(ranks))
    return out


def _image_path(folder: Path, relative: str) -> Path | None:
    """The file a manifest row names, or None when it is not a path inside ``folder``."""
    candidate = PurePosixPath(relative)
    if candidate.is_absolute() or re.match(r"[A-Za-z]:", relative) or ".." in candidate.parts or "\\" in relative:
        return None
    path = (folder / candidate).resolve()  # a symlink inside the folder may point outside it
    return path if path.is_relative_to(folder.resolve()) else None


def _read_parquets(
    parquets: list[Path], folder: Path, workdir: _Scratch, problems: _Problems, max_rows: int, limits: ZipLimits
) -> list[_Row] | None:
    """Rows of every parquet file, their images copied out one file each (read once, in file order).

    Every file's metadata is checked first (columns, row groups, rows, image bytes: see
    :func:`_parquet_problem`), and the rows of all files together against ``max_rows`` and their
    image bytes against the unpacked-bytes limit, before a single image is spooled. Returns None when
    a file as a whole is unusable: its rows would all be reported missing.
    """
    readers: list[tuple[str, pq.ParquetFile]] = []
    rows_in_all = images_in_all = 0
    for parquet in parquets:
        name = parquet.relative_to(folder).as_posix()
        try:
            reader = pq.ParquetFile(parquet, buffer_size=PARQUET_BUFFER_BYTES)
            problem = _parquet_problem(reader) or _page_problem(parquet, reader)
        except (pa.ArrowException, OSError) as err:
            problem = f"not a readable parquet file ({err})"
        if problem:
            problems.append(Problem(None, None, name, problem))
            continue
        readers.append((name, reader))
        rows_in_all += reader.metadata.num_rows
        images_in_all += _image_bytes(reader)
    if len(readers) < len(parquets):
        return None
    listing = "the parquet files"
    if rows_in_all > max_rows:
        problems.append(
            Problem(
                None, None, listing, f"{rows_in_all} rows, more than this benchmark could need (at most {max_rows})"
            )
        )
        return None
    if images_in_all > limits.max_bytes:
        message = (
            f"hold {images_in_all} bytes of images, over the {limits.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})"
        )
        problems.append(Problem(None, None, listing, message))
        return None
    rows: list[_Row] = []
    spooled = _Spooled(limits.max_bytes)
    for number, (name, reader) in enumerate(readers):
        out = workdir.folder(f"parquet-{number:04d}")
        try:
            rows.extend(_spool_parquet(reader, name, out, problems, spooled))
        except (pa.ArrowException, OSError) as err:
            problems.append(Problem(None, None, name, f"not a readable parquet file ({err})"))
            return None
    return rows


def _image_bytes(reader: pq.ParquetFile) -> int:
    """The uncompressed bytes of the image column (its leaves: a struct's bytes and path) in the metadata."""
    metadata = reader.metadata
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.path_in_schema.split(".")[0] == "image":
                total += chunk.total_uncompressed_size
    return total


def _parquet_problem(reader: pq.ParquetFile) -> str | None:
    """What is wrong with a parquet file's columns or layout, if anything: read from its metadata only.

    Row groups over ``MAX_ROW_GROUP_BYTES`` are refused, and so is a row group whose image bytes
    average more than ``MAX_IMAGE_BYTES`` a row (then at least one image is over the limit).
    """
    schema = reader.schema_arrow
    missing = [c for c in PARQUET_COLUMNS if c not in schema.names]
    if missing:
        expected, found = ", ".join(PARQUET_COLUMNS), ", ".join(schema.names)
        return f"missing column(s) {', '.join(missing)}; expected {expected} (found {found})"
    kinds = {name: schema.field(name).type for name in PARQUET_COLUMNS}
    if not (pa.types.is_string(kinds["prompt_id"]) or pa.types.is_large_string(kinds["prompt_id"])):
        return f"column prompt_id should hold strings, found {kinds['prompt_id']}"
    if not pa.types.is_integer(kinds["seed"]):
        return f"column seed should hold integers, found {kinds['seed']}"
    image = kinds["image"]
    if pa.types.is_struct(image):
        image = image.field("bytes").type if image.get_field_index("bytes") >= 0 else None
    if image is None or not (pa.types.is_binary(image) or pa.types.is_large_binary(image)):
        return f"column image should be a datasets Image struct {{bytes, path}} or binary, found {kinds['image']}"
    # A row group is the smallest unit parquet reads; bound it so that memory stays bounded.
    metadata = reader.metadata
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        size = row_group.total_byte_size
        if size > MAX_ROW_GROUP_BYTES:
            return (
                f"row group {group} holds {size} bytes, over the {MAX_ROW_GROUP_BYTES}-byte limit; "
                "write smaller row groups (datasets' to_parquet does)"
            )
        images = sum(
            row_group.column(c).total_uncompressed_size
            for c in range(row_group.num_columns)
            if row_group.column(c).path_in_schema.split(".")[0] == "image"
        )
        if row_group.num_rows and images / row_group.num_rows > MAX_IMAGE_BYTES:
            average = images // row_group.num_rows
            return f"row group {group}: its images average {average} bytes, over the {MAX_IMAGE_BYTES}-byte limit per image"
    return None


def _page_problem(path: Path, reader: pq.ParquetFile) -> str | None:
    """What the page headers of the columns read (``PARQUET_COLUMNS``) show to be over a limit, or None.

    Every page of those columns is looked at (:mod:`idbench.evaluate_pkg.parquet_pages`: headers only,
    a few KB read each), before any is decoded: a page of one image over ``MAX_IMAGE_BYTES`` names
    its row, and any page over ``MAX_PAGE_BYTES`` is refused as too large to decode. The metadata's
    sizes are totals (an image of 480 MB among 224 small ones averages 2 MB a row); the headers state
    what decoding each page allocates.
    """
    metadata = reader.metadata
    first_row = 0
    with path.open("rb") as stream:
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                column = row_group.column(index)
                name = column.path_in_schema
                if name.split(".")[0] not in PARQUET_COLUMNS:
                    continue  # never read
                try:
                    for page in column_pages(stream, *chunk_range(column)):
                        size = page.uncompressed_bytes
                        if (
                            name.split(".")[0] == "image"
                            and page.is_data
                            and page.values == 1
                            and size > MAX_IMAGE_BYTES + PAGE_OVERHEAD_BYTES
                        ):
                            row = first_row + page.first_value
                            return f"row {row}: an image of about {size} bytes, over the {MAX_IMAGE_BYTES}-byte limit (read from its page header; not decoded)"
                        if size > MAX_PAGE_BYTES:
                            what = "dictionary page" if not page.is_data else f"page of {page.values} values"
                            return (
                                f"row group {group}, column {name}: a {what} holding {size} bytes, over the {MAX_PAGE_BYTES}-byte "
                                "limit per page (read from its header; not decoded); write one image a page, as datasets' "
                                "to_parquet does, or smaller row groups"
                            )
                except PageHeaderError as err:
                    return f"row group {group}, column {name}: unreadable page header ({err})"
            first_row += row_group.num_rows
    return None


class _Spooled:
    """Counts the image bytes spooled out of parquet files against the unpacked-bytes limit.

    The metadata's uncompressed sizes are checked first, but a dictionary-encoded column can decode
    to more than they say; this count holds the limit on the bytes actually written.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.total = 0

    def add(self, size: int, source: str) -> None:
        self.total += size
        if self.total > self.max_bytes:
            message = f"images add up to more than the {self.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})"
            raise SubmissionError([Problem(None, None, source, message)])


def _spool_parquet(reader: pq.ParquetFile, name: str, out: Path, problems: _Problems, spooled: _Spooled) -> list[_Row]:
    """The rows of one parquet file, each image copied out to a file of its own under ``out``.

    Rows are read one at a time (a batch of one row), so memory holds one image, not a row group of
    them; an image over ``MAX_IMAGE_BYTES`` is refused before it is written.
    """
    rows = []
    batches = reader.iter_batches(batch_size=1, columns=list(PARQUET_COLUMNS), use_threads=False)
    for number, batch in enumerate(batches):
        images = batch.column("image")
        if pa.types.is_struct(images.type):
            images = images.field("bytes")
        prompt_id, seed, image = batch.column("prompt_id")[0].as_py(), batch.column("seed")[0].as_py(), images[0]
        source = f"{name} row {number}"
        if prompt_id is None or seed is None or seed < 0:
            message = "prompt_id is missing" if prompt_id is None else f"seed {seed} is not a non-negative integer"
            problems.append(Problem(prompt_id, None, source, message))
            continue
        data = image.as_buffer() if image.is_valid else None  # the value in Arrow's memory, not a copy
        if data is None:
            error = "no image bytes (an image given only as a path); embed the bytes"
            rows.append(_Row(prompt_id, seed, source, source, None, error))
        elif data.size > MAX_IMAGE_BYTES:  # measured before any copy is made or anything decodes it
            error = f"{data.size} bytes, over the {MAX_IMAGE_BYTES}-byte limit"
            rows.append(_Row(prompt_id, seed, source, source, None, error))
        else:
            spooled.add(data.size, source)
            path = out / f"{number:08d}.img"
            path.write_bytes(data)
            rows.append(_Row(prompt_id, seed, source, source, path))
        del data, image, images, batch  # the next batch is decoded without this one's value still held
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


class _PixelBudget:
    """Pixels the decode threads may hold at once (``MAX_PIXELS_IN_FLIGHT``); a thread waits for its share.

    A share larger than the whole budget takes the whole budget (that image is decoded alone)."""

    def __init__(self, total: int):
        self.total = total
        self.free = total
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, pixels: int) -> Iterator[None]:
        share = min(max(pixels, 0), self.total)
        with self._changed:
            self._changed.wait_for(lambda: self.free >= share)
            self.free -= share
        try:
            yield
        finally:
            with self._changed:
                self.free += share
                self._changed.notify_all()


def _check_images(rows: list[_Row], problems: _Problems) -> dict[_Row, str]:
    """Decode every image fully, as scoring will (a truncated file fails here), under the pixel budget in
    flight; the content hash of each good one, a problem for each bad one."""
    budget = _PixelBudget(MAX_PIXELS_IN_FLIGHT)

    def check(row: _Row) -> str | Problem:
        try:
            data = _row_bytes(row)
            size = header_size(data)
            with budget.hold(size[0] * size[1] if size else 0):
                working_image(data, where=row.source, submitted=True)
        except _RowProblem as err:
            return row.problem(str(err))
        except ImageError as err:
            return row.problem(err.reason)
        return content_hash(data)

    hashes = {}
    with ThreadPoolExecutor(max_workers=DECODE_WORKERS) as pool:
        for row, result in zip(rows, pool.map(check, rows)):
            if isinstance(result, Problem):
                problems.append(result)
            else:
                hashes[row] = result
    return hashes


class _RowProblem(Exception):
    """A row's image cannot be read at all (as opposed to read but not decoded: ImageError)."""


def _row_bytes(row: _Row) -> bytes:
    if row.path is None:
        raise _RowProblem(row.error or "no image")
    if not row.path.is_file():
        raise _RowProblem("the file does not exist in the submission folder")
    size = row.path.stat().st_size
    if size > MAX_IMAGE_BYTES:  # checked before reading, so a huge file is never read into memory
        raise _RowProblem(f"{size} bytes, over the {MAX_IMAGE_BYTES}-byte limit")
    try:
        return row.path.read_bytes()
    except OSError as err:
        raise _RowProblem(f"cannot be read ({err})") from None


# --- zip -----------------------------------------------------------------------------------------


def _extract_zip(archive: Path, into: Path, limits: ZipLimits, max_rows: int) -> None:
    """Extract the submission in ``archive`` into the empty folder ``into``, refusing whatever could hurt.

    Only submission.json, manifest.csv and the files the manifest names (without a manifest: the
    parquet files) are extracted; every other member, nested archive, unsafe path or named non-image
    is refused by name before any of them is written. Sizes are checked as declared first, then on the
    bytes streamed out, so a lying archive is stopped at the limit and its partial file deleted. A
    manifest of more than ``max_rows`` rows names nothing (its row bound is reported by the validation
    that follows), so no image is extracted for a listing that will be refused.
    """

    def refuse(file: str, message: str) -> NoReturn:
        raise SubmissionError([Problem(None, None, file, message)])

    try:
        archive_file = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        refuse(archive.name, f"not a readable zip archive ({err})")
    with archive_file:
        members = archive_file.infolist()
        if len(members) > limits.max_members:
            refuse(archive.name, f"{len(members)} members, over the limit of {limits.max_members}")
        problems, names = _Problems(), set()
        for member in members:
            reason = _unsafe_member(member)
            if reason is None and member.filename.rstrip("/") in names:
                reason = "appears twice in the archive"
            names.add(member.filename.rstrip("/"))
            if reason:
                problems.append(Problem(None, None, f"{archive.name}:{member.filename}", reason))
        if problems:
            raise SubmissionError(problems)

        files = [m for m in members if not m.is_dir() and not _ZIP_JUNK.search(m.filename)]
        prefix = _zip_prefix([m.filename for m in files])
        texts = [m for m in files if m.filename in (prefix + METADATA_NAME, prefix + MANIFEST_NAME)]
        written = _Written(archive, into.resolve(), limits)
        for member in texts:  # the manifest first: it says what else to extract
            written.extract(archive_file, member)
        has_manifest = any(m.filename == prefix + MANIFEST_NAME for m in texts)
        manifest = into / PurePosixPath(prefix + MANIFEST_NAME)
        named = _named_in_manifest(manifest, prefix, min(max_rows, limits.max_members)) if has_manifest else None
        wanted, problems = [], _Problems()
        for member in files:
            if member in texts:
                continue
            suffix = PurePosixPath(member.filename).suffix.lower()
            label = f"{archive.name}:{member.filename}"
            if has_manifest and named is None:
                continue  # not extracted; the manifest's own problem is what the submitter must fix first
            if suffix in ARCHIVE_SUFFIXES:
                problems.append(Problem(None, None, label, "a nested archive; put the files themselves in the zip"))
            elif not has_manifest and suffix == ".parquet":
                wanted.append(member)
            elif not has_manifest:
                problems.append(
                    Problem(
                        None,
                        None,
                        label,
                        f"not part of the submission (without a {MANIFEST_NAME}, only *.parquet files and {METADATA_NAME})",
                    )
                )
            elif member.filename not in named:
                problems.append(
                    Problem(
                        None,
                        None,
                        label,
                        f"not named in {MANIFEST_NAME}; only the files it lists, {MANIFEST_NAME} and {METADATA_NAME} are accepted",
                    )
                )
            elif suffix not in IMAGE_SUFFIXES:
                problems.append(
                    Problem(None, None, label, f"not an image file (accepted: {', '.join(IMAGE_SUFFIXES)})")
                )
            else:
                wanted.append(member)
        problems += written.declared_problems(wanted)
        if problems:
            raise SubmissionError(problems)
        for member in wanted:
            written.extract(archive_file, member)


class _Written:
    """Extracts members one by one, counting the bytes actually written against the limits."""

    def __init__(self, archive: Path, root: Path, limits: ZipLimits):
        self.archive, self.root, self.limits = archive, root, limits
        self.total = 0
        self.archive_size = archive.stat().st_size

    def _ratio_problem(self, unpacked: int, compressed: int) -> str | None:
        # The compressed size a member can really have is at most the archive's size, whatever it declares.
        compressed = max(1, min(compressed, self.archive_size))
        if unpacked > RATIO_FLOOR_BYTES and unpacked / compressed > self.limits.max_ratio:
            return f"compression ratio over {self.limits.max_ratio:g}:1 (a zip bomb?); the limit is ${COMPRESSION_RATIO_ENV}"
        return None

    def declared_problems(self, members: list[zipfile.ZipInfo]) -> list[Problem]:
        """What the declared sizes already show to be over the limits (checked again while writing)."""
        problems = []
        for member in members:
            reason = self._ratio_problem(member.file_size, member.compress_size)
            if reason:
                problems.append(
                    Problem(
                        None,
                        None,
                        f"{self.archive.name}:{member.filename}",
                        f"{reason} (declares {member.file_size} bytes)",
                    )
                )
        declared = self.total + sum(m.file_size for m in members)
        if declared > self.limits.max_bytes:
            message = (
                f"unpacks to {declared} bytes, over the {self.limits.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})"
            )
            problems.append(Problem(None, None, self.archive.name, message))
        return problems

    def extract(self, archive_file: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
        label = f"{self.archive.name}:{member.filename}"
        target = (self.root / PurePosixPath(member.filename)).resolve()
        if not target.is_relative_to(self.root):  # cannot happen after _unsafe_member; the last guard
            raise SubmissionError([Problem(None, None, label, "would be written outside the extraction folder")])
        problem = None
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with archive_file.open(member) as source, target.open("xb") as sink:
                size = 0
                while chunk := source.read(1024 * 1024):
                    size += len(chunk)
                    self.total += len(chunk)
                    if self.total > self.limits.max_bytes:
                        problem = Problem(
                            None,
                            None,
                            self.archive.name,
                            f"unpacks to more than the {self.limits.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})",
                        )
                    elif size > member.file_size:
                        problem = Problem(
                            None, None, label, f"unpacks to more than the {member.file_size} bytes it declares"
                        )
                    elif reason := self._ratio_problem(size, member.compress_size):
                        problem = Problem(None, None, label, reason)
                    if problem:
                        break
                    sink.write(chunk)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as err:
            problem = Problem(None, None, label, f"cannot be extracted ({err})")
        if problem:
            target.unlink(missing_ok=True)  # nothing of a refused member stays on disk
            raise SubmissionError([problem])


def _zip_prefix(names: list[str]) -> str:
    """The folder inside the archive that holds the submission: "" (the top) or "<one folder>/"."""
    if any(name in (METADATA_NAME, MANIFEST_NAME) for name in names):
        return ""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1 and all("/" in name for name in names):
        return tops.pop() + "/"
    return ""


def _named_in_manifest(manifest: Path, prefix: str, max_names: int) -> frozenset[str] | None:
    """Archive member names the extracted manifest lists (``prefix`` + its ``file`` column).

    None for a manifest whose file column cannot be read, or that has more rows than ``max_names``
    (the listing's row bound, at most the archive's member limit): it names nothing, only it and
    submission.json are extracted, and the validation that follows reports what is wrong with it.
    """
    try:
        with manifest.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = [h.strip() for h in next(reader, [])]
            column = header.index("file")
            rows = [
                fields[column].strip()
                for fields in itertools.islice(reader, max_names + 1)
                if len(fields) == len(header)
            ]
    except (UnicodeDecodeError, ValueError, csv.Error, OSError):
        return None
    if len(rows) > max_names:
        return None
    return frozenset(prefix + PurePosixPath(os.path.normpath(file)).as_posix() for file in rows if file)


def _unsafe_member(member: zipfile.ZipInfo) -> str | None:
    name = member.filename
    kind = stat.S_IFMT(member.external_attr >> 16)
    if not name or name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "absolute path; members must be relative paths"
    if reason := _name_length_problem(name):
        return reason
    if "\\" in name:
        return "backslash in the path; zip members use '/' as the separator"
    if ".." in PurePosixPath(name).parts:
        return "path contains '..' and would escape the extraction folder"
    if kind == stat.S_IFLNK:
        return "symbolic link; only regular files and folders are accepted"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "not a regular file or folder"
    if member.flag_bits & 0x1:
        return "encrypted; zip the submission without a password"
    return None


def _zip_root(workdir: Path) -> Path:
    """The folder of an extracted zip that holds the submission: the top, or its one sub-folder."""
    if (workdir / METADATA_NAME).exists() or (workdir / MANIFEST_NAME).exists():
        return workdir
    # "Compress folder" tools put everything in one folder (macOS adds __MACOSX/ beside it).
    children = [c for c in workdir.iterdir() if c.name != "__MACOSX"]
    if len(children) == 1 and children[0].is_dir():
        return children[0]
    return workdir
