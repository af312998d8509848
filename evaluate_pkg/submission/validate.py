"""Validation: a submission on disk in, a :class:`Submission` out, or one :class:`~.problems.SubmissionError`.

:func:`validate_submission` takes a folder or a ``.zip`` (:mod:`.archive` extracts it first), reads its
``submission.json`` (:mod:`.metadata`), then its listing: ``rankings.csv`` for the retrieval task
(:mod:`.rankings`), else a manifest (:mod:`.folder`) or parquet files (:mod:`.parquet`), never both.
The rows are paired with the required pairs and every image is decoded (:mod:`.decode`).

A :class:`Submission` holds no decoded images and no image bytes: one file and its content hash per
:class:`Entry`, so memory stays bounded whatever the submission's size. A manifest folder's images are
read where they are; a zip's extraction and a parquet file's images live in a temporary folder that
the Submission owns. Close it (or use it as a context manager) to remove that folder; it is also
removed when the object is garbage collected or the process exits, and at once when validation fails.
Entries are picklable (hand them to DataLoader workers); a Submission is not.
"""

from __future__ import annotations

import shutil
import weakref
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from PIL import Image

from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.images import content_hash, normalize_image

from .archive import ZipLimits, _extract_zip, _zip_root
from .decode import _check_images
from .folder import MANIFEST_NAME, _read_manifest
from .metadata import _read_metadata
from .parquet import _read_parquets
from .problems import Problem, SubmissionError, _Problems
from .rankings import RANKINGS_NAME, _read_rankings
from .shared import _match_pairs, _Row, _Scratch, max_listing_rows


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
