"""People refine the VLM's CHARIS prompt proposals: export for review, re-import the edited file.

The paper's prompts were proposed by a VLM and then refined by experts, who made them physically
plausible, suitably hard and free of redundancy. :func:`export_review` writes the proposals where a
person can work on them with a spreadsheet or an editor; :func:`import_review` reads the edited file
back, checks every row and returns the proposals with the edits applied.

The export folder::

    review.csv        one row per prompt: prompt_id, subject_id, type, style, thumbnail, axes, prompt,
                      phrases, status (edit this one or the JSONL, not both)
    review.jsonl      the same rows as JSON lines (axes and transformations as lists)
    thumbnails/       <subject_id>.jpg, longest side 256 px, so a reviewer sees the subject
    baseline.jsonl    the proposals as exported; the import compares against it (do not edit)

What a reviewer may change: ``prompt``, ``axes`` (``;``-separated in the CSV), ``phrases`` (``axis:
phrase`` pairs separated by `` | ``; optional: a phrase left out is kept from the export when it still
appears in the prompt, else left empty) and ``status`` (``approved`` to confirm a prompt, ``rejected``
to leave it out). Rows left out of the file stay as exported. On import:

- a row whose prompt, axes or phrases differ from the export is marked ``human_refined`` (or stays
  ``rejected`` if the reviewer rejected it as well);
- a row with only its status changed takes that status; an unchanged row stays exactly as it was;
- every row is checked (known prompt_id, appearing once; subject, type and style unchanged; 5 or 6
  distinct known axes; a non-empty prompt; each given phrase found in the prompt; a known status).
  Any problem stops the import with one :class:`ReviewError` that names the file and each bad row
  (``review.csv, row 3 (charis-0003): axes: 'posture' is not an EKB axis``); nothing is half-applied.

Files are written to a temporary name and renamed, and an existing review is never overwritten unless
asked: a reviewer's edits are not lost to a second export.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from idbench.benchmarks.charis.prompts import APPROVED, HUMAN_REFINED, PROPOSED, REJECTED, STATUSES, CharisProposal
from idbench.benchmarks.charis.spec import AXES_PER_PROMPT
from idbench.ekb import EKB, load_ekb
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.images import ImageError, normalize_image

REVIEW_CSV = "review.csv"
REVIEW_JSONL = "review.jsonl"
BASELINE = "baseline.jsonl"
THUMBNAILS = "thumbnails"
THUMBNAIL_SIDE = 256
COLUMNS = ("prompt_id", "subject_id", "type", "style", "thumbnail", "axes", "prompt", "phrases", "status")
REQUIRED_COLUMNS = ("prompt_id", "axes", "prompt", "status")
AXIS_SEPARATOR = ";"
PHRASE_SEPARATOR = " | "
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class ReviewError(IdbenchError, ValueError):
    """An edited review (or its baseline) cannot be imported; the message names the file and every bad row."""


@dataclass(frozen=True)
class ReviewExport:
    """The files one export wrote."""

    folder: Path
    csv: Path
    jsonl: Path
    baseline: Path
    thumbnails: Mapping[str, Path]  # subject_id -> thumbnail


@dataclass(frozen=True)
class ReviewResult:
    """The proposals after the review, in the baseline's order, and what the review changed."""

    proposals: tuple[CharisProposal, ...]
    edited: tuple[str, ...]  # prompt ids now human_refined (or rejected after an edit)
    status_changed: tuple[str, ...]  # prompt ids with only their status changed
    unchanged: tuple[str, ...]
    missing: tuple[str, ...]  # prompt ids absent from the edited file: kept as exported
    cleared_phrases: tuple[tuple[str, str], ...]  # (prompt_id, axis) whose phrase no longer matched the prompt

    def prompt_rows(self) -> list[dict[str, Any]]:
        """PROMPTS rows of every proposal not rejected."""
        return [p.row() for p in self.proposals if p.status != REJECTED]

    def as_dict(self) -> dict[str, Any]:
        return {
            "proposals": len(self.proposals),
            "by_status": {s: sum(p.status == s for p in self.proposals) for s in STATUSES},
            "edited": list(self.edited),
            "status_changed": list(self.status_changed),
            "unchanged": len(self.unchanged),
            "missing": list(self.missing),
            "cleared_phrases": [{"prompt_id": p, "axis": a} for p, a in self.cleared_phrases],
        }


# --- export --------------------------------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and a rename (never a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def thumbnail(data: bytes, where: str, side: int = THUMBNAIL_SIDE) -> bytes:
    """A JPEG of the image with its longest side at most ``side`` (the project's one image loader)."""
    image = normalize_image(data, where=where)
    image.thumbnail((side, side))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def _phrases_cell(transformations: Iterable[tuple[str, str]]) -> str:
    return PHRASE_SEPARATOR.join(f"{axis}: {phrase}" for axis, phrase in transformations)


def _proposal_json(p: CharisProposal) -> dict[str, Any]:
    return {
        "prompt_id": p.prompt_id,
        "subject_id": p.subject_id,
        "type": p.type,
        "style": p.style,
        "prompt": p.prompt,
        "transformations": [{"axis": a, "phrase": t} for a, t in p.transformations],
        "status": p.status,
    }


def export_review(
    proposals: Sequence[CharisProposal], images: Mapping[str, bytes], folder: str | Path, overwrite: bool = False
) -> ReviewExport:
    """Write the review files for ``proposals`` into ``folder``; ``images`` maps subject_id -> image bytes.

    Raises ``FileExistsError`` when the folder already holds a review (unless ``overwrite``), and
    ``ValueError`` for duplicate prompt ids, a subject without an image, an unusable subject id or image.
    """
    folder = Path(folder)
    targets = [folder / REVIEW_CSV, folder / REVIEW_JSONL, folder / BASELINE]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not overwrite:
        raise FileExistsError(
            f"{folder} already holds a review ({', '.join(existing)}); edits there would be lost. "
            "Import it first, or export with overwrite=True"
        )
    seen: set[str] = set()
    for p in proposals:
        if p.prompt_id in seen:
            raise ValueError(f"prompt {p.prompt_id!r} appears twice")
        seen.add(p.prompt_id)

    thumbnails: dict[str, Path] = {}
    for subject_id in dict.fromkeys(p.subject_id for p in proposals):
        if not _SAFE_NAME.fullmatch(subject_id) or ".." in subject_id:
            raise ValueError(f"subject {subject_id!r}: not usable as a file name for its thumbnail")
        if subject_id not in images:
            raise ValueError(f"subject {subject_id!r}: no image given for its thumbnail")
        try:
            data = thumbnail(images[subject_id], where=f"subject {subject_id}")
        except ImageError as err:
            raise ValueError(str(err)) from None
        path = folder / THUMBNAILS / f"{subject_id}.jpg"
        _write_atomic(path, data)
        thumbnails[subject_id] = path

    def relative(subject_id: str) -> str:
        return f"{THUMBNAILS}/{subject_id}.jpg"

    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(COLUMNS)
    lines = []
    for p in proposals:
        writer.writerow(
            [
                p.prompt_id,
                p.subject_id,
                p.type,
                p.style,
                relative(p.subject_id),
                f"{AXIS_SEPARATOR} ".join(p.axes),
                p.prompt,
                _phrases_cell(p.transformations),
                p.status,
            ]
        )
        record = _proposal_json(p)
        lines.append(
            json.dumps(
                {
                    "prompt_id": p.prompt_id,
                    "subject_id": p.subject_id,
                    "type": p.type,
                    "style": p.style,
                    "thumbnail": relative(p.subject_id),
                    "axes": list(p.axes),
                    "prompt": p.prompt,
                    "transformations": record["transformations"],
                    "status": p.status,
                },
                ensure_ascii=False,
            )
        )
    baseline = "".join(json.dumps(_proposal_json(p), ensure_ascii=False) + "\n" for p in proposals)
    _write_atomic(folder / BASELINE, baseline.encode("utf-8"))
    _write_atomic(folder / REVIEW_JSONL, ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
    # utf-8-sig: spreadsheet programs read a BOM-less CSV in the system's legacy encoding.
    _write_atomic(folder / REVIEW_CSV, table.getvalue().encode("utf-8-sig"))
    return ReviewExport(folder, folder / REVIEW_CSV, folder / REVIEW_JSONL, folder / BASELINE, thumbnails)


# --- import ---------------------------------------------------------------------------------------------


def read_baseline(path: str | Path) -> list[CharisProposal]:
    """The proposals an export wrote to ``baseline.jsonl``; raises :class:`ReviewError` if it is damaged."""
    path = Path(path)
    if not path.is_file():
        raise ReviewError(f"{path}: no baseline (export_review writes it next to the review files)")
    proposals = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            proposals.append(
                CharisProposal(
                    prompt_id=str(record["prompt_id"]),
                    subject_id=str(record["subject_id"]),
                    type=str(record["type"]),
                    style=str(record["style"]),
                    prompt=str(record["prompt"]),
                    transformations=tuple((str(t["axis"]), str(t["phrase"])) for t in record["transformations"]),
                    status=str(record.get("status", PROPOSED)),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ReviewError(f"{path}, line {number}: not a proposal record ({err}); re-export the review") from None
    return proposals


def _read_rows(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """(label, raw row) pairs of the edited file, and its format."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            absent = [c for c in REQUIRED_COLUMNS if c not in columns]
            if absent:
                found = ", ".join(columns) or "none"
                raise ReviewError(f"{path}: missing column(s) {', '.join(absent)} (found: {found})")
            rows = []
            for number, row in enumerate(reader, start=1):
                if None in row:
                    raise ReviewError(f"{path}, row {number}: more fields than the header has")
                rows.append((f"row {number}", row))
        return rows, "csv"
    if suffix == ".jsonl":
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ReviewError(f"{path}, line {number}: not JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise ReviewError(f"{path}, line {number}: expected a JSON object")
            rows.append((f"line {number}", row))
        return rows, "jsonl"
    raise ReviewError(f"{path}: expected a .csv or .jsonl review file")


def _parse_axes(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(a).strip() for a in value if str(a).strip()]
    if isinstance(value, str):
        return [a.strip() for a in value.split(AXIS_SEPARATOR) if a.strip()]
    raise ValueError(f"expected a list of axes, found {value!r}")


def _parse_phrases(row: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """The phrases a row gives (None when it gives none: keep the export's)."""
    if isinstance(row.get("transformations"), list):
        pairs = []
        for part in row["transformations"]:
            if not isinstance(part, Mapping) or "axis" not in part or "phrase" not in part:
                raise ValueError(f"transformations: expected {{axis, phrase}} objects, found {part!r}")
            pairs.append((str(part["axis"]).strip(), " ".join(str(part["phrase"]).split())))
        return pairs
    cell = row.get("phrases")
    if cell is None or not str(cell).strip():
        return None
    pairs = []
    for piece in str(cell).split(PHRASE_SEPARATOR.strip()):
        if not piece.strip():
            continue
        axis, colon, phrase = piece.partition(":")
        if not colon:
            raise ValueError(f'phrases: "{piece.strip()}" is not "axis: phrase"')
        pairs.append((axis.strip(), " ".join(phrase.split())))
    return pairs


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def import_review(
    path: str | Path, baseline: Sequence[CharisProposal] | str | Path | None = None, ekb: EKB | None = None
) -> ReviewResult:
    """Read an edited ``review.csv`` / ``review.jsonl`` and apply it to the exported proposals.

    ``baseline``: the exported proposals, or the path of their ``baseline.jsonl`` (default: the one next
    to ``path``). Raises :class:`ReviewError` naming every bad row; on success nothing on disk changes
    (the caller writes what it builds from the result).
    """
    path = Path(path)
    if not path.is_file():  # before the baseline next to it: a mistyped path names itself
        raise ReviewError(f"{path}: no such review file")
    ekb = ekb or load_ekb()
    if baseline is None or isinstance(baseline, (str, Path)):
        baseline = read_baseline(Path(baseline) if baseline is not None else path.parent / BASELINE)
    base = {p.prompt_id: p for p in baseline}
    rows, _ = _read_rows(path)

    problems: list[str] = []
    updated: dict[str, CharisProposal] = {}
    edited, status_changed, unchanged, cleared = [], [], [], []
    first_seen: dict[str, str] = {}
    for label, row in rows:
        prompt_id = str(row.get("prompt_id") or "").strip()
        where = f"{path.name}, {label}" + (f" ({prompt_id})" if prompt_id else "")
        before = len(problems)

        def problem(text: str, where: str = where) -> None:  # this row's place, bound now
            problems.append(f"{where}: {text}")

        if prompt_id not in base:
            problem(
                f"prompt_id {prompt_id!r} is not one of the exported prompts" if prompt_id else "prompt_id is empty"
            )
            continue
        if prompt_id in first_seen:
            problem(f"prompt_id appears again (first at {first_seen[prompt_id]})")
            continue
        first_seen[prompt_id] = label
        old = base[prompt_id]
        old_phrases = dict(old.transformations)
        for column in ("subject_id", "type", "style"):
            value = row.get(column)
            if value not in (None, "") and str(value).strip() != getattr(old, column):
                problem(
                    f"{column} cannot change in a review ({getattr(old, column)!r} -> {str(value).strip()!r}); "
                    "fix the source manifest instead"
                )
        prompt = " ".join(str(row.get("prompt") or "").split())
        if not prompt:
            problem("the prompt is empty")
        try:
            axes = _parse_axes(row.get("axes"))
        except ValueError as err:
            problem(f"axes: {err}")
            continue
        unknown = [a for a in axes if a not in ekb.transformations]
        for axis in unknown:
            problem(f"axes: {axis!r} is not an EKB axis (axes: {', '.join(ekb.transformations)})")
        if len(set(axes)) != len(axes):
            problem(f"axes: listed more than once: {', '.join(sorted({a for a in axes if axes.count(a) > 1}))}")
        if not unknown and len(set(axes)) not in AXES_PER_PROMPT:
            problem(f"axes: {len(set(axes))} distinct axes; a prompt applies {' or '.join(map(str, AXES_PER_PROMPT))}")
        status = str(row.get("status") or "").strip() or old.status
        if status not in STATUSES:
            problem(f"status {status!r} is not one of {', '.join(STATUSES)}")
        try:
            given = _parse_phrases(row) or []
        except ValueError as err:
            problem(str(err))
            continue
        # Only phrases the reviewer actually changed must match the prompt; an exported phrase left
        # as it was is kept when the prompt still holds it and cleared otherwise (below).
        explicit = {axis: phrase for axis, phrase in given if phrase != old_phrases.get(axis)}
        for axis, phrase in explicit.items():
            if axis not in axes:
                problem(f"phrases: {axis!r} is not among the row's axes")
            elif phrase and _flat(phrase) not in _flat(prompt):
                problem(f'phrases: the {axis} phrase "{phrase}" is not in the prompt')
        if len(problems) > before:
            continue

        pairs, lost = [], []
        for axis in dict.fromkeys(axes):
            phrase = explicit.get(axis)
            if phrase is None:
                kept = old_phrases.get(axis, "")
                phrase = kept if kept and _flat(kept) in _flat(prompt) else ""
                if kept and not phrase:
                    lost.append(axis)
            pairs.append((axis, phrase))
        transformations = tuple(pairs)  # in the reviewer's order: an edited row's axes are theirs

        if prompt != old.prompt or set(axes) != set(old.axes) or explicit:
            new_status = REJECTED if status == REJECTED else HUMAN_REFINED
            updated[prompt_id] = replace(old, prompt=prompt, transformations=transformations, status=new_status)
            edited.append(prompt_id)
            cleared.extend((prompt_id, axis) for axis in lost)
        elif status != old.status:
            if status == HUMAN_REFINED:
                problem(
                    "status human_refined is set by the import for edited rows; this row is unchanged "
                    f"(use {APPROVED} or {REJECTED})"
                )
                continue
            updated[prompt_id] = replace(old, status=status)
            status_changed.append(prompt_id)
        else:
            unchanged.append(prompt_id)

    if problems:
        head = f"{path}: {len(problems)} problem(s); nothing was imported"
        raise ReviewError("\n".join([head, *problems]))
    missing = tuple(pid for pid in base if pid not in first_seen)
    proposals = tuple(updated.get(p.prompt_id, p) for p in baseline)
    return ReviewResult(proposals, tuple(edited), tuple(status_changed), tuple(unchanged), missing, tuple(cleared))
