"""A folder with a manifest: the format ``idbench template`` writes.

::

    submission.json     the metadata (:mod:`.metadata`)
    manifest.csv        header prompt_id,seed,file (in any order); one row per (prompt_id, seed)
    images/...          the images, anywhere inside the folder

Each row names its image by a path relative to the folder, in any layout (``images/01_s0.png``,
``a/b/c.jpg``): the pairing of images with prompts is what the submitter writes, never an order of file
names. ``prompt_id`` is kept as text (the collapse benchmark's ids such as ``01`` keep their zero) and
``seed`` must be a non-negative integer. A path that is absolute, holds ``..`` or a backslash, or
resolves outside the folder (a symlink) is refused, and so is a name longer than the file-name limits
of :mod:`.problems`. The images are read where they are; nothing is copied.

:func:`check_resume_folder` holds a folder that ``idbench generate`` is still filling to the same rules,
without looking at the images.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from idbench.evaluate_pkg.data import BenchmarkData

from .metadata import _read_metadata
from .problems import Problem, SubmissionError, _name_length_problem, _Problems, _shown
from .shared import _SEED, _csv_rows, _match_pairs, _Row, max_listing_rows

MANIFEST_NAME = "manifest.csv"
MANIFEST_COLUMNS = ("prompt_id", "seed", "file")


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


def _image_path(folder: Path, relative: str) -> Path | None:
    """The file a manifest row names, or None when it is not a path inside ``folder``."""
    candidate = PurePosixPath(relative)
    if candidate.is_absolute() or re.match(r"[A-Za-z]:", relative) or ".." in candidate.parts or "\\" in relative:
        return None
    path = (folder / candidate).resolve()  # a symlink inside the folder may point outside it
    return path if path.is_relative_to(folder.resolve()) else None
