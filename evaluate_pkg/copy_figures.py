"""Pictures of what the copy check found, for a reader to check a flag by eye (docs/copies.md).

For each flagged (image, reference) the evidence that ``copies.detect_copies`` stores names where the
reference was found: the keypoint stage a region of the generation and the map from the reference to it,
the pixel stage a window of the searched image. :func:`copy_outlines` turns that record into an outline on
each picture (pure geometry, no image); :func:`copy_figure` draws both pictures side by side with the
outlines and a caption saying the transformation; :func:`write_copy_figures` writes a bounded number of
them next to a run's report. The model page shows the same files.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from idbench.evaluate_pkg.copies import KEYPOINT_GEN_SIDE, KEYPOINT_REF_SIDE
from idbench.evaluate_pkg.results import COPIES_FOLDER

FOLDER = COPIES_FOLDER  # in the result folder, listed in its copies/index.json
MAX_FIGURES = 24  # per run: a reader checks a few by eye; the evidence file lists every flag
PANEL_HEIGHT = 320  # px of each picture in a figure
CAPTION_LINE = 16  # px a line of the caption below the pictures
OUTLINE = (255, 0, 0)
FRAME = (255, 160, 0)  # a whole picture that was found inside the other

Polygon = list[tuple[float, float]]


def _rectangle(box: Iterable[float], width: float, height: float) -> Polygon:
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, x1, y0, y1 = x0 * width, x1 * width, y0 * height, y1 * height
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _frame(width: float, height: float) -> Polygon:
    return [(0.0, 0.0), (width, 0.0), (width, height), (0.0, height)]


def copy_outlines(
    record: dict[str, Any], reference_size: tuple[int, int], generation_size: tuple[int, int]
) -> tuple[Polygon | None, Polygon | None, str]:
    """(outline on the reference, outline on the generation, how) in each picture's own pixels.

    ``how`` is ``"region"`` (the keypoint stage's region: a box in the generation and the same region
    mapped back onto the reference through the inverse of the map), ``"reference in generation"`` (the
    whole reference found in a window of the generation), ``"generation in reference"`` (the generation is
    a crop of the reference) or ``""`` when the record holds no place (a reference of the pool found by its
    keypoints only: named, not located). An outline is None where that picture is shown whole.
    """
    ref_w, ref_h = reference_size
    gen_w, gen_h = generation_size
    if record.get("region_box") and len(record.get("matrix") or ()) == 9:
        on_generation = _rectangle(record["region_box"], gen_w, gen_h)
        # The map takes the reference's pixels at KEYPOINT_REF_SIDE (its mirror image when it matched
        # mirrored) to the generation's at KEYPOINT_GEN_SIDE; the region goes back through its inverse.
        matrix = np.asarray(record["matrix"], dtype=np.float64).reshape(3, 3)
        gen_scale = KEYPOINT_GEN_SIDE / max(gen_w, gen_h)
        ref_scale = KEYPOINT_REF_SIDE / max(ref_w, ref_h)
        try:
            inverse = np.linalg.inv(matrix)
        except np.linalg.LinAlgError:
            return None, on_generation, "region"
        corners = np.array([[x * gen_scale, y * gen_scale, 1.0] for x, y in on_generation]).T
        mapped = inverse @ corners
        if np.any(np.abs(mapped[2]) < 1e-9):
            return None, on_generation, "region"
        xs, ys = mapped[0] / mapped[2] / ref_scale, mapped[1] / mapped[2] / ref_scale
        if record.get("mirrored_reference"):
            xs = ref_w - xs
        return [(float(x), float(y)) for x, y in zip(xs, ys, strict=True)], on_generation, "region"
    if record.get("box") and any(record["box"]) and "pixels" in record.get("by", ()):
        if record.get("crop_of_reference"):
            return _rectangle(record["box"], ref_w, ref_h), None, "generation in reference"
        return None, _rectangle(record["box"], gen_w, gen_h), "reference in generation"
    return None, None, ""


def transformation_text(record: dict[str, Any]) -> str:
    """One line a reader can check against the picture: the stage, the map (scale, turn, mirror), the fit."""
    if record.get("region_box") and len(record.get("matrix") or ()) == 9:
        matrix = np.asarray(record["matrix"], dtype=np.float64).reshape(3, 3)
        linear = matrix[:2, :2] / (matrix[2, 2] or 1.0)
        # The map runs between the pictures at KEYPOINT_REF_SIDE and KEYPOINT_GEN_SIDE px: its scale
        # times their ratio is the reference's size in the generation (a homography's, at its origin).
        size = math.sqrt(abs(float(np.linalg.det(linear)))) * KEYPOINT_REF_SIDE / KEYPOINT_GEN_SIDE
        turn = math.degrees(math.atan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1]))
        model = record.get("map") or "affine"
        parts = [
            f"keypoints: {'perspective (homography)' if model == 'homography' else model} map",
            f"the reference at {100 * size:.0f} % of the generation's size",
            f"turned {abs(turn):.0f} deg {'clockwise' if turn >= 0 else 'anticlockwise'}"
            if round(abs(turn)) >= 1
            else "not turned",
        ]
        if record.get("mirrored_reference"):
            parts.append("mirrored")
        parts.append(f"{record.get('keypoint_inliers')} matches")
        parts.append(f"correlation {record.get('warp_correlation')}")
        if record.get("subject_share") is not None:
            parts.append(f"{100 * float(record['subject_share']):.0f} % of the subject")
        return ", ".join(parts)
    if "pixels" in record.get("by", ()):
        where = "a crop of the reference" if record.get("crop_of_reference") else "the reference pasted"
        mirrored = ", mirrored" if record.get("mirrored") else ""
        return (
            f"pixels: {where}{mirrored}, correlation {record.get('ncc')}, "
            f"pHash distance {record.get('phash_distance')} of 64 bits"
        )
    if "embedding" in record.get("by", ()):
        return f"embedding: DINOv2 cosine {record.get('embedding_cosine')}"
    return f"keypoints: {record.get('keypoint_inliers')} matches, correlation {record.get('warp_correlation')}"


def _panel(image: Image.Image, outline: Polygon | None, frame: bool) -> Image.Image:
    scale = PANEL_HEIGHT / image.height
    panel = image.convert("RGB").resize((max(1, round(image.width * scale)), PANEL_HEIGHT), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(panel)
    if outline is not None:
        draw.polygon([(x * scale, y * scale) for x, y in outline], outline=OUTLINE, width=3)
    elif frame:
        draw.rectangle((1, 1, panel.width - 2, panel.height - 2), outline=FRAME, width=3)
    return panel


def copy_figure(reference: Image.Image, generation: Image.Image, record: dict[str, Any], title: str) -> Image.Image:
    """The reference (left) and the generation (right) at one height, the place found outlined on each
    (red; a picture found whole inside the other is framed in orange), the title and the transformation
    written below."""
    on_reference, on_generation, how = copy_outlines(record, reference.size, generation.size)
    left = _panel(reference, on_reference, frame=how == "reference in generation")
    right = _panel(generation, on_generation, frame=how == "generation in reference")
    width = left.width + 8 + right.width
    # PIL's default font is ~6 px a character: the caption wrapped to the figure's width
    caption = [title, *textwrap.wrap(transformation_text(record), max(20, width // 6))]
    figure = Image.new("RGB", (width, PANEL_HEIGHT + CAPTION_LINE * len(caption) + 8), "white")
    figure.paste(left, (0, 0))
    figure.paste(right, (left.width + 8, 0))
    draw = ImageDraw.Draw(figure)
    for k, line in enumerate(caption):
        draw.text((4, PANEL_HEIGHT + 4 + CAPTION_LINE * k), line, fill="black")
    return figure


def figure_name(prompt_id: str, seed: int, ref_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{prompt_id}_s{seed}_{ref_id}")
    return f"{FOLDER}/{safe[:120]}.png"


def write_copy_figures(
    folder: Path,
    evidence: Iterable[tuple[str, int, str, dict]],
    generation: Callable[[str, int], bytes],
    reference: Callable[[str], bytes],
    limit: int = MAX_FIGURES,
) -> list[dict[str, Any]]:
    """Draw the first ``limit`` flagged (image, reference) pairs of ``evidence`` (copy-check rows only)
    into ``folder/copies/``; returns every flagged pair (prompt, seed, reference, how it was found, the
    figure's relative name or None past the limit), in the order of the evidence, for the report's table.
    A picture that no longer decodes is listed without a figure, never an error: the scores are written."""
    from idbench.evaluate_pkg.copies import EVIDENCE_METRIC

    listed: list[dict[str, Any]] = []
    drawn = 0
    for prompt_id, seed, metric, record in evidence:
        if metric != EVIDENCE_METRIC:
            continue
        for ref_id, found in sorted((record.get("found") or {}).items()):
            entry = {
                "prompt_id": prompt_id,
                "seed": int(seed),
                "reference": ref_id,
                "by": list(found.get("by", ())),
                "foreign": bool(found.get("not_in_prompt")),
                "transformation": transformation_text(found),
                "figure": None,
            }
            if drawn < limit:
                try:
                    with (
                        Image.open(io.BytesIO(reference(ref_id))) as ref_image,
                        Image.open(io.BytesIO(generation(prompt_id, int(seed)))) as gen_image,
                    ):
                        figure = copy_figure(ref_image, gen_image, found, f"{prompt_id} seed {seed}: {ref_id}")
                except (OSError, ValueError, KeyError):
                    figure = None
                if figure is not None:
                    name = figure_name(prompt_id, int(seed), ref_id)
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    figure.save(folder / name, format="PNG", compress_level=6)
                    entry["figure"] = name
                    drawn += 1
            listed.append(entry)
    return listed
