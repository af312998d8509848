"""The best and worst samples of a scored submission, with the images a reader compares side by side.

A model page shows, for one metric, the prompts where the model did best and worst: each generated
image next to the reference images of its prompt, and the judge's evidence where a judged metric
kept some. Everything is read from what the worker left behind: the per-sample ``results.parquet``
(and ``judge_evidence.parquet`` when a judge ran) in the result folder, the stored submission's
``manifest.csv``, and the built benchmark's reference tables.

Example::

    scores = sample_scores(result_dir, "dino_sim")
    best, worst = extremes(scores, higher_is_better=True, k=4)
    for row in best.itertuples():
        image = generation_file(stored_path, row.prompt_id, row.seed)
        refs = reference_ids(data, row.prompt_id)
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd

from idbench.evaluate_pkg import results
from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.submission import MANIFEST_NAME

COLUMNS = ("prompt_id", "seed", "metric", "value")  # what sample_scores reads of the per-sample values


def sample_scores(result_dir: Path, metric: str) -> pd.DataFrame:
    """``prompt_id, seed, value`` for ``metric``: one row per generated image, NaN rows dropped.

    A per-subject metric (one value per reference in the image) is averaged over its subjects, so
    an image has one number to rank by. Empty when the result has no values for ``metric``. A file
    over its bounds raises :class:`~idbench.evaluate_pkg.results.ResultsTooLarge`; one that lacks a
    column or cannot be read, the :class:`~idbench.evaluate_pkg.results.ResultFileError` it derives from.
    """
    frame = results.read_samples(result_dir, COLUMNS)
    if frame is None:
        return pd.DataFrame(columns=["prompt_id", "seed", "value"])
    frame = frame[(frame["metric"] == metric) & frame["value"].notna()]
    means = frame.groupby(["prompt_id", "seed"], as_index=False, sort=True)["value"].mean()
    return means.reset_index(drop=True)


def extremes(scores: pd.DataFrame, higher_is_better: bool, k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``k`` best and ``k`` worst images, best first and worst first; ties broken by prompt and seed.

    With fewer than ``2k`` images the two lists share none: the worst list takes what the best left.
    """
    ordered = scores.sort_values(["prompt_id", "seed"], kind="stable")
    ordered = ordered.sort_values("value", ascending=not higher_is_better, kind="stable").reset_index(drop=True)
    best = ordered.head(k)
    rest = ordered.iloc[len(best) :]
    worst = rest.iloc[::-1].head(k)
    return best.reset_index(drop=True), worst.reset_index(drop=True)


def generation_file(stored_path: Path, prompt_id: str, seed: int) -> Path:
    """The stored image of ``(prompt_id, seed)``; KeyError names a pair the manifest lacks.

    The stored manifest was written by :func:`idbench.leaderboard.queue.submit` (after validation), and its
    file names are the images' content hashes inside the stored folder, so the path cannot escape it.
    """
    stored_path = Path(stored_path)
    with (stored_path / MANIFEST_NAME).open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["prompt_id"] == prompt_id and int(row["seed"]) == int(seed):
                return stored_path / row["file"]
    raise KeyError(f"{stored_path / MANIFEST_NAME}: no image for prompt {prompt_id!r} seed {seed}")


def reference_ids(data: BenchmarkData, prompt_id: str) -> list[str]:
    """The reference images a prompt's generation should preserve, in the prompt's order.

    CHARIS: its one subject; identity collapse: every subject; CogCanvas: each person, then each
    person's item, then the background.
    """
    prompt = data.prompt_rows[prompt_id]
    if "subject_ids" in prompt:
        return list(prompt["subject_ids"])
    if "subject_id" in prompt:
        return [prompt["subject_id"]]
    persons = prompt.get("persons") or []
    ids = [p["ref_id"] for p in persons] + [p["item_ref_id"] for p in persons if p.get("item_ref_id")]
    if prompt.get("background_ref_id"):
        ids.append(prompt["background_ref_id"])
    return ids


def _evidence_frame(result_dir: Path) -> pd.DataFrame | None:
    """The result's evidence table (prompt_id, seed, metric, evidence as a JSON string), None without one."""
    return results.read_evidence(result_dir)


def evidence(result_dir: Path, prompt_id: str, seed: int) -> dict[str, Any]:
    """``{name: evidence}`` kept for one image (a judge's answers, the copy check's finds; decoded JSON); empty when none."""
    frame = _evidence_frame(result_dir)
    if frame is None:
        return {}
    rows = frame[(frame["prompt_id"] == prompt_id) & (frame["seed"] == int(seed))]
    return {row.metric: json.loads(row.evidence) for row in rows.itertuples()}


def evidence_of(result_dir: Path, metric: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Every image's evidence under one name: ``{(prompt_id, seed): decoded JSON}``; empty when none."""
    frame = _evidence_frame(result_dir)
    if frame is None:
        return {}
    rows = frame[frame["metric"] == metric]
    return {(row.prompt_id, int(row.seed)): json.loads(row.evidence) for row in rows.itertuples()}


# --- who became whom (CogCanvas) -----------------------------------------------------------------
# The scorer keeps, per generated image, which generated face was matched to which reference person
# (``WhoBecameWhom.as_evidence`` in evaluate_pkg/functional/identity.py). The model page shows the worst
# of those images: each person's reference beside the face it was matched to, and the faces no person got.

# Its evidence name (``WHO`` of benchmarks/cogcanvas/suite.py, which imports torch: not imported here).
WHO_BECAME_WHOM = "who_became_whom"
# What makes an image bad at keeping identities: each of these counts is one person or face gone wrong.
WHO_ERRORS = ("swapped", "cloned", "missing", "extra")


def who_errors(record: dict[str, Any]) -> int:
    """Swaps + clones + misses + extras of one image's who-became-whom record."""
    counts = record.get("counts") or {}
    return int(sum(counts.get(name, 0) for name in WHO_ERRORS))


def worst_assignments(records: dict[tuple[str, int], dict[str, Any]], strict: pd.DataFrame, k: int) -> pd.DataFrame:
    """The ``k`` images whose identities went most wrong, worst first: most errors (:func:`who_errors`),
    then lowest ``id_sim_strict`` (``strict``: ``prompt_id, seed, value`` as :func:`sample_scores`
    gives; an image without a value comes after those with one), then prompt and seed.

    Columns ``prompt_id, seed, errors, id_sim_strict`` plus each count of :data:`WHO_ERRORS`.
    """
    columns = ["prompt_id", "seed", "errors", "id_sim_strict", *WHO_ERRORS]
    values = {
        (p, int(s)): float(v)
        for p, s, v in zip(strict.get("prompt_id", []), strict.get("seed", []), strict.get("value", []))
    }
    rows = [
        (
            prompt_id,
            seed,
            who_errors(record),
            values.get((prompt_id, seed), float("nan")),
            *(int((record.get("counts") or {}).get(name, 0)) for name in WHO_ERRORS),
        )
        for (prompt_id, seed), record in records.items()
    ]
    frame = pd.DataFrame(rows, columns=columns)
    if frame.empty:
        return frame
    frame = frame.sort_values(["prompt_id", "seed"], kind="stable")
    frame = frame.sort_values("id_sim_strict", ascending=True, na_position="last", kind="stable")
    frame = frame.sort_values("errors", ascending=False, kind="stable")
    return frame.head(k).reset_index(drop=True)


def _clone_partners(record: dict[str, Any], face: int) -> list[int]:
    """The other generated faces that show the same person as ``face`` (its clone group)."""
    groups = record.get("clone_group") or []
    if face < 0 or face >= len(groups) or groups[face] < 0:
        return []
    return [i for i, group in enumerate(groups) if group == groups[face] and i != face]


def verdict(identity: dict[str, Any], record: dict[str, Any]) -> str:
    """What became of one reference person: ``found`` (in its place), ``swapped`` (found, at another
    person's place), ``missing`` (its reference has a face, none recognisably its own here) or ``no
    reference face`` (nothing to look for); ``+ cloned`` when the face it was matched to is repeated
    by another generated face."""
    if not identity.get("has_reference"):
        base = "no reference face"
    elif not identity.get("found"):
        base = "missing"
    else:
        base = "found" if identity.get("in_place") else "swapped"
    return base + (" + cloned" if _clone_partners(record, int(identity.get("face", -1))) else "")


def identity_table(record: dict[str, Any], references: dict[str, str]) -> pd.DataFrame:
    """One row per reference person of the image, in the prompt's layout order: ``slot, reference,
    verdict, cosine, margin, face, box`` (``references``: slot -> reference id; ``face`` -1 and ``box``
    None when no generated face was matched to the person)."""
    rows = [
        (
            identity["slot"],
            references.get(identity["slot"], ""),
            verdict(identity, record),
            identity.get("cosine"),
            identity.get("margin"),
            int(identity.get("face", -1)),
            identity.get("box"),
        )
        for identity in record.get("identities") or []
    ]
    table = pd.DataFrame(rows, columns=["slot", "reference", "verdict", "cosine", "margin", "face", "box"])
    return table.astype({"cosine": float, "margin": float})


def unmatched_faces(record: dict[str, Any]) -> pd.DataFrame:
    """The generated faces no reference person was matched to: ``face, box, repeats`` (the slots of the
    persons whose matched face shows the same person, "" for a face of nobody in the prompt)."""
    matched = {int(i["face"]): i["slot"] for i in record.get("identities") or [] if int(i.get("face", -1)) >= 0}
    rows = []
    for face, box in enumerate(record.get("faces") or []):
        if face in matched:
            continue
        repeats = [matched[other] for other in _clone_partners(record, face) if other in matched]
        rows.append((face, box, ", ".join(repeats)))
    return pd.DataFrame(rows, columns=["face", "box", "repeats"])


def face_crop(image: Any, box: Any, pad: float = 0.3) -> Any:
    """The region of ``box`` (x0, y0, x1, y1 in the image's pixels) grown by ``pad`` of its size on each
    side, clipped to the image: a face with some hair and chin, as a reader recognises it."""
    x0, y0, x1, y1 = (float(v) for v in box)
    dx, dy = (x1 - x0) * pad, (y1 - y0) * pad
    width, height = image.size
    left, top = max(0, int(x0 - dx)), max(0, int(y0 - dy))
    right, bottom = min(width, int(round(x1 + dx))), min(height, int(round(y1 + dy)))
    return image.crop((left, top, max(right, left + 1), max(bottom, top + 1)))


COPY_INDEX = results.COPY_INDEX_FILE  # evaluate_pkg.copy_figures' figures, listed by the scorer
COPY_INDEX_MAX_BYTES = 2_000_000  # ~10,000 listed pairs: a larger file is not one the scorer wrote


def copy_figures(result_dir: Path) -> list[dict[str, Any]]:
    """The copy check's flagged (image, reference) pairs of a result, each with its figure's path (the
    reference beside the generation, the place found outlined) where one was drawn, else None.

    Read from ``copies/index.json``; [] when there is none (nothing flagged, or scored before the figures).
    A figure is only ever a file of the result's own ``copies`` folder: any other name in the index (a
    link out, ``..``) is listed without a figure. A file that is not the scorer's list raises ValueError.
    """
    path = Path(result_dir) / COPY_INDEX
    if not path.is_file():
        return []
    if path.stat().st_size > COPY_INDEX_MAX_BYTES:
        raise ValueError(f"{COPY_INDEX} is over {COPY_INDEX_MAX_BYTES:,} bytes")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(f"{COPY_INDEX} is nested too deeply") from None
    except ValueError as error:  # not UTF-8, not JSON
        raise ValueError(f"{COPY_INDEX} is not the scorer's JSON: {error}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{COPY_INDEX} is not a list of flagged pairs")
    folder = (Path(result_dir) / "copies").resolve()
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("prompt_id", "reference")):
            raise ValueError(f"{COPY_INDEX}: an entry is not a flagged pair: {str(entry)[:80]}")
        figure = entry.get("figure")
        shown = None
        if isinstance(figure, str) and figure.endswith(".png"):
            candidate = (Path(result_dir) / figure).resolve()
            if candidate.parent == folder and candidate.is_file():
                shown = candidate
        out.append(
            {
                "prompt_id": entry["prompt_id"],
                "seed": entry.get("seed"),
                "reference": entry["reference"],
                "transformation": str(entry.get("transformation", "")),
                "figure": shown,
            }
        )
    return out
