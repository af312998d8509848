"""A ``.zip`` of a submission folder (manifest, parquet or ranking), at the top of the archive or in one folder.

Only what the submission is made of is extracted, into a fresh temporary folder: ``submission.json``,
``manifest.csv`` and the files the manifest names, or without a manifest the ``*.parquet`` files. Every
other member is refused by name, and so are nested archives (``ARCHIVE_SUFFIXES``), named files that
are not images (``IMAGE_SUFFIXES``), absolute paths, ``..``, backslashes, symlinks, encrypted members
and names over the length limits; what archiving tools add (``__MACOSX/``, ``.DS_Store``) is skipped.

The limits (:class:`ZipLimits`: ``validate_submission``'s arguments, else the environment, else the
defaults) are ``IDBENCH_MAX_UNPACKED_BYTES`` (8 GiB unpacked in all), ``IDBENCH_MAX_COMPRESSION_RATIO``
(100:1 per member once it passes ``RATIO_FLOOR_BYTES``) and ``IDBENCH_MAX_ZIP_MEMBERS`` (100 000). They
are checked on the sizes the archive declares before anything is written, then again on the bytes
actually streamed out, since an archive can lie: a member refused halfway is deleted at once. A
manifest longer than the listing bound names nothing, so no image is extracted for it.
"""

from __future__ import annotations

import csv
import itertools
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from idbench import settings

from .folder import MANIFEST_NAME
from .metadata import METADATA_NAME
from .problems import Problem, SubmissionError, _name_length_problem, _Problems

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
        others = [m for m in files if m not in texts]
        wanted, problems = _wanted_members(archive.name, others, has_manifest, named)
        problems += written.declared_problems(wanted)
        if problems:
            raise SubmissionError(problems)
        for member in wanted:
            written.extract(archive_file, member)


def _wanted_members(
    archive_name: str, members: list[zipfile.ZipInfo], has_manifest: bool, named: frozenset[str] | None
) -> tuple[list[zipfile.ZipInfo], _Problems]:
    """The members to extract besides submission.json and the manifest, and a problem for each one refused.

    With a manifest, the image files it names (``named``); a manifest that names nothing (None: it
    cannot be read, or lists too many rows) has nothing extracted and nothing refused, since its own
    problem is what the submitter must fix first. Without a manifest, the parquet files.
    """
    if has_manifest and named is None:
        return [], _Problems()
    wanted, problems = [], _Problems()
    for member in members:
        suffix = PurePosixPath(member.filename).suffix.lower()
        label = f"{archive_name}:{member.filename}"
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
            problems.append(Problem(None, None, label, f"not an image file (accepted: {', '.join(IMAGE_SUFFIXES)})"))
        else:
            wanted.append(member)
    return wanted, problems


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
