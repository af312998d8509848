"""Copies and pastes of the references: a generation that returns a reference, or pastes one, is flagged.

Every identity score rewards looking like the reference, so the reference itself (the ``copy``
baseline) or the references cut out and pasted (``collage``, ``crowd``) top them without generating
anything. No metric can tell such a picture from a faithful one, so each generation is searched for
the prompt's own reference images (subjects and bound items, never the background, which the prompt
asks to keep) and flagged, per image, when one is found:

1. **Locate.** The reference is searched in the generation (and the generation in the reference, so a
   crop or zoom of the reference is found too), plain and mirrored, at every scale that fits, by
   normalised cross-correlation of grey levels (OpenCV's ``TM_CCOEFF_NORMED``) at a working size of
   ``WORK_SIDE`` px: coarse scales first, then a finer pass around the best one.
2. **Confirm.** The best window is cut from the full-size image and its 64-bit perceptual hash
   (``imagehash.phash``) compared with the reference's. A paste is a window with correlation of at
   least ``NCC_MIN`` *and* a hash distance of at most ``PHASH_MAX_DISTANCE`` bits: the correlation
   finds where, the hash confirms that the content, not only its layout of light and dark, is the same.
3. **Any pose.** Correlation at one orientation misses a reference turned by 90 degrees (0 of 203
   CHARIS images flagged) or stretched (53 %). SIFT keypoints of the reference (and of its mirror
   image) are matched to the generation's, an affine map or a homography is fitted to the matches
   (any rotation, flip, stretch, crop, scale, keystone or small paste is one), and the *matched region*
   of the reference (the part the consistent keypoints span, or whose fine detail agrees, within its
   subject) is warped onto the generation and correlated there, in grey levels and in fine detail.
   A large part of the subject that agrees is a copy; a smaller part (a face) must also fit to the
   pixel, which a re-photograph does not (:attr:`PoseMatch.copied`; thresholds calibrated on
   bench/copy_calibration.py, docs/copies.md). The keypoints say where, the pixels confirm.
4. **A crowd.** On a multi-subject benchmark a picture of every subject of the pool (0 of 225
   Identity Collapse crowds flagged before) dilutes the search for the prompt's own. Every subject and item reference of the pool that the prompt does not name is searched too,
   by keypoints, and one found flags the image (``copy.foreign`` counts them). A pool index
   (``copy_index``: one faiss search of the generation's SIFT descriptors among the whole pool's)
   shortlists the few references worth the full match, so the cost is linear in the generations, not
   generations x pool (CogCanvas: ~1,950 references).
5. **Embedding** (reported, and a criterion of its own only with real weights): the cosine of the whole
   generation's DINOv2 CLS embedding to each reference's, when the run computed those features anyway.
   A cosine of at least ``EMBEDDING_MIN_COSINE`` also flags a copy; with a plumbing profile's random
   weights a cosine means nothing, so the criterion is then recorded as not applied.

Per image the scorer stores ``copy.flag`` (1: at least one reference found), ``copy.pasted`` (how
many of the prompt's references were found) and, on multi-subject benchmarks, ``copy.foreign`` (how
many references of the pool the prompt does not name); ``summary["copies"]`` holds the share of flagged images and
the criteria, and a run with more than ``MARK_ABOVE_SHARE`` of its images flagged is *marked*: the
leaderboard shows it apart, not ranked by default. Results are cached per (generation, reference) in
the feature store (the foreign search per generation), so a rescore searches nothing again.

Cost is bounded up front: the generation is searched at ``WORK_SIDE`` px whatever its size, each
of its prompt's references at most ``4 x (16 + FINE_EVALUATIONS)`` times (two directions, plain and
mirrored); the keypoint stage prepares each image once (at most ``MAX_KEYPOINTS`` keypoints of a
reference, ``MAX_GEN_KEYPOINTS`` of a generation, at
``KEYPOINT_GEN_SIDE`` / ``KEYPOINT_REF_SIDE`` px) and matches each (generation, reference) pair once:
at most ``MAX_KEYPOINTS x MAX_GEN_KEYPOINTS`` descriptor distances and one RANSAC fit of bounded
iterations.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps

# The subject of a reference on a plain background: in images.py, which the baselines use too.
from idbench.evaluate_pkg.images import BACKGROUND_TOLERANCE, subject_mask  # noqa: F401 (part of this API)

FLAG_METRIC = "copy.flag"
PASTED_METRIC = "copy.pasted"
FOREIGN_METRIC = "copy.foreign"
DIAGNOSTICS = {
    FLAG_METRIC: "1 when the generation is, or contains, one of the prompt's reference images (a copy or a paste, "
    "in any pose) or a reference of the pool that the prompt does not name",
    PASTED_METRIC: "how many of the prompt's reference images were found in the generation",
    FOREIGN_METRIC: "how many references of the pool that the prompt does not name were found in the generation "
    "(multi-subject benchmarks: a picture padded with faces)",
}
EVIDENCE_METRIC = "copies"

WORK_SIDE = 256  # px: the longest side of the searched image, whatever its size
MIN_TEMPLATE_SIDE = 24  # px at the working size: a smaller paste (under ~10 % of the side) is not searched
COARSE_RATIO = 1.15  # between coarse scales: a paste's scale is at most ~7 % from one of them
FINE_EVALUATIONS = 5  # correlations of the fine pass (see refine): an eighth of a coarse step's precision
REVERSE_MIN_FRACTION = 0.5  # a crop of the reference is searched down to half its side
NCC_MIN = 0.85  # measured: pastes 0.88-1.00 on the samples, other photographs <= 0.76
# A drawing's subject alone (a cut-out): its flat colours correlate less (0.83-0.95 for cut-outs), and the
# fine band inside it confirms the copy.
MASKED_NCC_MIN = 0.75
# See _masked_detail: the calibration's cut-outs 0.93-0.99, other renderings and re-photographs <= 0.875.
MASKED_DETAIL_MIN = 0.9
ECC_CRITERIA = (3, 100, 1e-5)  # cv2.TERM_CRITERIA_COUNT | EPS: at most 100 steps, to 1e-5 of correlation
# The ECC fit's Gaussian (px): 9 converged from the search's window on 58 of 64 sample cut-outs, 5 on 50
# (the window may sit 1-2 px and 1 % of scale off: a wider blur widens the fit's basin).
ECC_BLUR = 9
# Scales (around the window's centre) from which the cut-out's alignment starts: see _masked_detail.
ALIGN_SCALES = (0.92, 0.94, 0.96, 0.98, 1.0, 1.02, 1.04, 1.06, 1.08)
PHASH_MAX_DISTANCE = 10  # of 64 bits: pastes 0-10 on the samples; re-drawn characters and re-photographs reach 12 (bench/copy_calibration.py)
EMBEDDING_MIN_COSINE = 0.95
MARK_ABOVE_SHARE = 0.05  # a run with more than 5 % of its images flagged is marked
COARSE_GATE = 0.6  # measured: pastes 0.67-1.00 in the coarse pass (a 5-image collage lowest); 58 % of other pairs reach it, 90 % reach 0.5
# A drawing's subject searched alone: thin strokes (a pair of sunglasses) lose most of their correlation
# a coarse step off the paste's scale (0.3-0.6 coarse, 0.8-0.9 refined), so more of them are refined; the
# fine band decides those (_masked_detail).
MASKED_COARSE_GATE = 0.4
MIN_STD = 2.0  # grey-level std below which a window is flat: a blank canvas matches nothing
VERSION = 9  # of the search and its thresholds: part of the cache key (9: a cut-out aligned from 9 scales)
# The keypoint stage (find_in_any_pose): SIFT keypoints matched with Lowe's ratio test, an affine map
# fitted by RANSAC, then the reference warped by it and correlated with the generation where it lands.
KEYPOINT_REF_SIDE = 384  # px: the reference's longest side for its keypoints (a face of a full figure keeps some)
KEYPOINT_GEN_SIDE = 512  # px: the generation's (a paste at 5 % of the area keeps keypoints)
MAX_KEYPOINTS = 800  # per reference: bounds the matching cost (with the generation's, 800 x 1,500 distances a pair)
MAX_GEN_KEYPOINTS = 1500  # per generation: a textured background must not take every keypoint from a small paste
RATIO_TEST = 0.8  # Lowe's ratio: a match counts when clearly nearer than the second-nearest descriptor
RANSAC_PX = 3.0  # px at KEYPOINT_GEN_SIDE: a match further from the map is not consistent with it
HOMOGRAPHY_MIN_MATCHES = 8  # a homography (8 degrees of freedom) is tried only on this many matches
MAX_PERSPECTIVE = 2.5  # a homography may change the scale at most this much across the reference
MAX_ANISOTROPY = 3.0  # an affine map stretching one axis more than 3x the other is not a pose of the picture
# The thresholds below were set on bench/copy_calibration.py's set (the calibration table in docs/copies.md):
# copies in 7 kinds of pose and paste on one side, different photographs of one subject and re-drawn
# characters on the other.
MIN_INLIERS = 6  # matches consistent with one map
WARP_CORR_MIN = 0.95  # verified correlation (grey and fine detail) of a smaller region: pasted faces 0.985-0.999, re-photographs <= 0.93 (bench/copy_calibration.py)
LARGE_CORR_MIN = 0.75  # the same, of a region of at least LARGE_SHARE of the subject
REGION_MARGIN = 0.03  # of the reference's side: the keypoints' hull grown by this much
LARGE_SHARE = 0.3  # of the subject: a region this large is a copy whatever its fit
MIN_SHARE = 0.02  # of the subject: a smaller region (a print, a detail) is never a copy
TIGHT_RESIDUAL_PX = 0.45  # median inlier error (px at KEYPOINT_GEN_SIDE): a smaller region must fit this well
AGREE_WINDOW = 15  # px at KEYPOINT_GEN_SIDE: the window of the local agreement of fine detail
AGREE_MIN = 0.8  # local correlation of the fine band at which a pixel agrees
TEXTURE_VARIANCE = 4.0  # of the fine band (grey levels squared): below it a pixel is flat, counted nowhere
MAP_MODELS = ("", "affine", "homography")  # the keypoint stage's maps, stored by position
MIN_COVER = 400  # px of the generation (at KEYPOINT_GEN_SIDE) the warped reference must cover


@dataclass(frozen=True)
class Found:
    """The best window of one (generation, reference) search and whether it is a copy."""

    ncc: float
    phash_distance: int
    box: tuple[float, float, float, float]  # the window in the searched image, fractions of its size
    direction: str  # "reference in generation" or "generation in reference" (a crop of the reference)
    mirrored: bool
    # A drawing's subject searched alone (its plain background masked out): a cut-out on a new background.
    # Its window holds another background, so the hash cannot confirm it; the fine band inside the
    # subject does (``detail``: its correlation, -1 when not measured).
    masked: bool = False
    detail: float = -1.0

    @property
    def copied(self) -> bool:
        if self.masked:
            return self.ncc >= MASKED_NCC_MIN and self.detail >= MASKED_DETAIL_MIN
        return self.ncc >= NCC_MIN and self.phash_distance <= PHASH_MAX_DISTANCE

    def as_dict(self) -> dict[str, Any]:
        return {
            "ncc": round(self.ncc, 4),
            "phash_distance": self.phash_distance,
            "box": [round(v, 4) for v in self.box],
            "direction": self.direction,
            "mirrored": self.mirrored,
            "masked": self.masked,
            "detail": round(self.detail, 4),
            "copied": self.copied,
        }


def _grey(image: Image.Image, side: int) -> np.ndarray:
    """The image in grey levels (float32), its longest side ``side`` px."""
    grey = image.convert("L")
    scale = side / max(grey.size)
    size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
    return np.asarray(grey.resize(size, Image.Resampling.BILINEAR), dtype=np.float32)


def _best_at(
    haystack: np.ndarray,
    needle: np.ndarray,
    scale: float,
    min_side: int = MIN_TEMPLATE_SIDE,
    tables: tuple[np.ndarray, np.ndarray] | None = None,
    mask: np.ndarray | None = None,
) -> tuple[float, tuple[int, int, int, int]] | None:
    """Best correlation of ``needle`` resized by ``scale`` inside ``haystack``, and its window (x, y, w, h).
    ``tables``: ``_integral_tables(haystack)``, when the caller searches the same haystack at many scales.
    ``mask`` (``needle``'s shape, 0/1): only the needle's pixels under it are correlated."""
    import cv2

    h, w = round(needle.shape[0] * scale), round(needle.shape[1] * scale)
    if min(h, w) < min_side or h > haystack.shape[0] or w > haystack.shape[1]:
        return None
    template = cv2.resize(needle, (w, h), interpolation=cv2.INTER_AREA)
    small_mask = None if mask is None else cv2.resize(mask, (w, h), interpolation=cv2.INTER_NEAREST)
    inside = template if small_mask is None else template[small_mask > 0]
    if inside.size < 50 or float(inside.std()) < MIN_STD:
        return None
    scores = cv2.matchTemplate(haystack, template, cv2.TM_CCOEFF_NORMED, mask=small_mask)
    # A flat window has no defined correlation (OpenCV returns noise or inf there): it matches nothing.
    np.nan_to_num(scores, copy=False, nan=-1.0, posinf=-1.0, neginf=-1.0)
    local_std = _window_std(tables or _integral_tables(haystack), h, w)
    scores[local_std < MIN_STD] = -1.0
    y, x = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return float(np.clip(scores[y, x], -1.0, 1.0)), (int(x), int(y), w, h)


def _integral_tables(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The summed-area tables of ``image`` and of its squares (float64), for :func:`_window_std`."""
    import cv2

    total, squares = cv2.integral2(image.astype(np.float64))[:2]
    return total, squares


def _window_std(tables: tuple[np.ndarray, np.ndarray], h: int, w: int) -> np.ndarray:
    """Grey-level std of every h x w window of the image whose ``_integral_tables`` these are (the shape
    ``matchTemplate`` returns)."""
    total, squares = tables

    def window_sum(table: np.ndarray) -> np.ndarray:
        return table[h:, w:] - table[:-h, w:] - table[h:, :-w] + table[:-h, :-w]

    n = float(h * w)
    mean = window_sum(total) / n
    return np.sqrt(np.maximum(window_sum(squares) / n - mean**2, 0.0))


def _scales(largest: float, smallest: float, ratio: float) -> list[float]:
    """Scales from ``largest`` down to ``smallest``, ``ratio`` apart (at most 64 of them)."""
    out, scale = [], largest
    while scale >= smallest and len(out) < 64:
        out.append(scale)
        scale /= ratio
    return out


def coarse_locate(
    haystack: np.ndarray, needle: np.ndarray, min_fraction: float = 0.0, mask: np.ndarray | None = None
) -> tuple[float, float, float, tuple[int, int, int, int]] | None:
    """The coarse pass: the best correlation of ``needle`` in ``haystack`` over scales ``COARSE_RATIO``
    apart, at half the working size (a quarter of the work), from the largest fitting scale down to where
    the needle's short side is ``MIN_TEMPLATE_SIDE`` px at full working size (or ``min_fraction`` of the
    largest). Returns ``(correlation, scale, largest fitting scale, window)``, the window (x, y, w, h) in
    ``haystack``'s pixels; None when nothing fits.
    """
    fit = min(haystack.shape[0] / needle.shape[0], haystack.shape[1] / needle.shape[1])
    smallest = max(MIN_TEMPLATE_SIDE / min(needle.shape), fit * min_fraction)
    half_hay, half_needle = _half(haystack), _half(needle)
    half_mask = None if mask is None else _half(mask)
    tables = _integral_tables(half_hay)
    best = None
    for scale in _scales(fit, smallest, COARSE_RATIO):
        found = _best_at(half_hay, half_needle, scale, MIN_TEMPLATE_SIDE // 2, tables, half_mask)
        if found and (best is None or found[0] > best[0]):
            best = (found[0], scale, found[1])
    if best is None:
        return None
    sy, sx = haystack.shape[0] / half_hay.shape[0], haystack.shape[1] / half_hay.shape[1]
    x, y, w, h = best[2]
    return best[0], best[1], fit, (round(x * sx), round(y * sy), round(w * sx), round(h * sy))


def refine(
    haystack: np.ndarray, needle: np.ndarray, scale: float, fit: float, mask: np.ndarray | None = None
) -> tuple[float, tuple[int, int, int, int]] | None:
    """The fine pass, at the full working size, around the coarse pass's ``scale``: the scales half a
    coarse step either side and the scale itself, then a quarter step either side of the best of them
    (``FINE_EVALUATIONS`` correlations in all). Correlation against scale has one peak within a coarse
    step of a paste's true scale, so this lands within an eighth of a step (about 1.8 %) of it, as a grid
    of 9 scales over the step would, with 5 correlations instead of 9. Returns the best correlation and
    its window (x, y, w, h in ``haystack``'s pixels), None when no scale fits."""
    step = np.log(COARSE_RATIO)
    tried: dict[float, tuple[float, tuple[int, int, int, int]] | None] = {}
    tables = _integral_tables(haystack)

    def at(offset: float):
        if offset not in tried:
            s = min(scale * float(np.exp(offset * step)), fit)
            tried[offset] = _best_at(haystack, needle, s, tables=tables, mask=mask)
        return tried[offset]

    def best_of(offsets) -> float | None:
        scored = [(found[0], o) for o in offsets if (found := at(o))]
        return max(scored)[1] if scored else None

    centre = best_of((-0.5, 0.0, 0.5))
    if centre is None:
        return None
    final = best_of((centre - 0.25, centre, centre + 0.25))
    return tried[final]


def locate(
    haystack: np.ndarray, needle: np.ndarray, min_fraction: float = 0.0
) -> tuple[float, tuple[int, int, int, int]] | None:
    """The best correlation of ``needle`` anywhere in ``haystack`` at any scale that fits, with its window
    (x, y, w, h in ``haystack``'s pixels): the coarse pass, then the fine pass around its best scale."""
    coarse = coarse_locate(haystack, needle, min_fraction)
    return None if coarse is None else refine(haystack, needle, coarse[1], coarse[2])


def _half(image: np.ndarray) -> np.ndarray:
    import cv2

    return cv2.resize(image, (max(1, image.shape[1] // 2), max(1, image.shape[0] // 2)), interpolation=cv2.INTER_AREA)


def _phash(image: Image.Image):
    import imagehash

    return imagehash.phash(image.convert("RGB"))


def find_reference(generation: Image.Image, reference: Image.Image) -> Found:
    """Search ``reference`` in ``generation`` (and the generation in the reference), plain and mirrored.

    The coarse pass runs on all four (direction, orientation) searches; those whose coarse correlation
    reaches ``COARSE_GATE`` are refined (a paste lies within 7 % of a coarse scale and correlates well above
    the gate there; two different pictures stay below it, and refining them would only cost time). The
    result is the best window, with the hash distance of its content to the other image.

    A drawing (a subject on a plain background, :func:`subject_mask`) is searched in the generation by its
    subject's pixels alone, so that it is found cut out onto another background, and such a window is
    confirmed by the fine band inside the subject (:func:`_masked_detail`) instead of the hash.
    """
    gen, ref = _grey(generation, WORK_SIDE), _grey(reference, WORK_SIDE)
    rgb = np.asarray(reference.convert("RGB").resize((ref.shape[1], ref.shape[0]), Image.Resampling.BILINEAR))
    subject = subject_mask(rgb)
    drawing = not bool(subject.all())
    candidates = []
    for mirrored in (False, True):
        needle_ref = ref[:, ::-1].copy() if mirrored else ref
        needle_mask = (subject[:, ::-1] if mirrored else subject).astype(np.uint8) if drawing else None
        # The generation inside the reference is a crop or zoom of it: only crops keeping at least
        # REVERSE_MIN_FRACTION of the reference's side are searched (smaller ones are new pictures).
        for direction, haystack, needle, smallest, mask in (
            ("reference in generation", gen, needle_ref, 0.0, needle_mask),
            ("generation in reference", needle_ref, gen, REVERSE_MIN_FRACTION, None),
        ):
            coarse = coarse_locate(haystack, needle, smallest, mask)
            if coarse is not None:
                candidates.append((coarse, direction, mirrored, haystack, needle, mask))
    if not candidates:
        return Found(-1.0, 64, (0.0, 0.0, 0.0, 0.0), "reference in generation", False)
    refined = []
    for (ncc, scale, fit, _), direction, mirrored, haystack, needle, mask in candidates:
        gate = COARSE_GATE if mask is None else MASKED_COARSE_GATE
        if ncc >= gate and (found := refine(haystack, needle, scale, fit, mask)):
            refined.append((found[0], direction, mirrored, found[1], mask is not None))
    if refined:
        best = max(refined, key=lambda r: r[0])
    else:  # nothing worth refining: the best coarse window stands
        (ncc, _, _, window), direction, mirrored, _, _, mask = max(candidates, key=lambda c: c[0][0])
        best = (ncc, direction, mirrored, window, mask is not None)
    ncc, direction, mirrored, (x, y, w, h), masked = best
    searched_shape = gen.shape if direction == "reference in generation" else ref.shape
    box = (x / searched_shape[1], y / searched_shape[0], (x + w) / searched_shape[1], (y + h) / searched_shape[0])
    ref_full = ImageOps.mirror(reference) if mirrored else reference
    searched, other = (generation, ref_full) if direction == "reference in generation" else (ref_full, generation)
    window = searched.crop(
        (
            round(box[0] * searched.width),
            round(box[1] * searched.height),
            round(box[2] * searched.width),
            round(box[3] * searched.height),
        )
    )
    distance = int(_phash(window) - _phash(other))
    detail = -1.0
    if masked and ncc >= MASKED_NCC_MIN:  # only a window that could be a copy is worth aligning
        detail = _masked_detail(window, other, subject[:, ::-1] if mirrored else subject)
    return Found(ncc, distance, box, direction, mirrored, masked, detail)


def _masked_detail(window: Image.Image, reference: Image.Image, subject: np.ndarray) -> float:
    """The fine band's correlation of a window and a reference inside the reference's subject, both at
    the window's size (at most ``WORK_SIDE`` px), after the reference is aligned onto the window to a
    fraction of a pixel (ECC fits, Evangelidis & Psarakis 2008, on the subject's pixels: a translation
    from each of ``ALIGN_SCALES``, then affine refinements of the best and of the window as placed): a
    cut-out puts the drawing's finest detail back at the same places (0.93-0.99 on the calibration's
    cut-outs), another rendering of one design does not (the flat and 3D suns <= 0.875, re-photographs of
    a bowl of berries <= 0.85: bench/copy_calibration.py, version 9). The subject is eroded by the band's reach so that
    its outline, where the backgrounds differ, is not compared; -1 when the fit fails or too little is left."""
    import cv2

    side = min(WORK_SIDE, max(window.size))
    scale = side / max(window.size)
    size = (max(1, round(window.width * scale)), max(1, round(window.height * scale)))
    target = np.asarray(window.convert("L").resize(size, Image.Resampling.BILINEAR), dtype=np.float32)
    source = np.asarray(reference.convert("L").resize(size, Image.Resampling.BILINEAR), dtype=np.float32)
    inside = cv2.resize(subject.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
    if int(inside.sum()) < MIN_COVER:
        return -1.0

    def fine_band(matrix: np.ndarray) -> float:
        flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
        aligned = cv2.warpAffine(source, matrix, size, flags=flags)
        cover = cv2.warpAffine(inside, matrix, size, flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP)
        cover = cv2.erode(cover, np.ones((9, 9), np.uint8)) > 0  # the band's reach (2.5 px sigma)
        if int(cover.sum()) < MIN_COVER // 4:
            return -1.0
        return _pearson(_detail(aligned)[cover], _detail(target)[cover])

    # The window's scale can be off by more than the search's step on a flat vector (a grey shoe: 4 %,
    # fine band 0.74 at the window, 0.99 at the true scale), and an affine ECC fit from there walks away
    # (scale 0.84, 23 px) rather than closing the gap. So a translation-only fit is started from each of
    # ``ALIGN_SCALES`` around the window's centre, an affine fit refines the best of them (and, as before,
    # the window as placed), and the best-aligned fine band counts.
    centre = np.float32([size[0] / 2, size[1] / 2])
    translations = []  # (ECC's correlation, matrix)
    for factor in ALIGN_SCALES:
        start = np.float32([[factor, 0, (1 - factor) * centre[0]], [0, factor, (1 - factor) * centre[1]]])
        try:  # the reference (masked to its subject) is the moving image, the window the fixed one
            translations.append(
                cv2.findTransformECC(target, source, start, cv2.MOTION_TRANSLATION, ECC_CRITERIA, inside, ECC_BLUR)
            )
        except cv2.error:  # the fit did not converge from here
            continue
    alignments = [matrix for _, matrix in translations]
    starts = [np.eye(2, 3, dtype=np.float32)]  # the affine fit from the window as placed, as before
    if translations:
        starts.append(max(translations, key=lambda fitted: fitted[0])[1])
    for start in starts:
        try:
            alignments.append(
                cv2.findTransformECC(target, source, start.copy(), cv2.MOTION_AFFINE, ECC_CRITERIA, inside, ECC_BLUR)[1]
            )
        except cv2.error:
            continue
    return max((fine_band(matrix) for matrix in alignments), default=-1.0)


@dataclass(frozen=True)
class Keypoints:
    """An image prepared for the keypoint stage: grey levels at a working size, SIFT keypoints, descriptors,
    and (references only) the subject's mask."""

    grey: np.ndarray  # float32
    points: np.ndarray  # (n, 2) float32, x and y in ``grey``'s pixels
    descriptors: np.ndarray | None  # (n, 128) float32, None without keypoints
    subject: np.ndarray | None = None  # bool, ``grey``'s shape: the subject (see subject_mask); None: all of it


def keypoints(image: Image.Image, side: int, limit: int = MAX_KEYPOINTS, *, with_subject: bool = False) -> Keypoints:
    """SIFT keypoints of ``image`` at a longest side of ``side`` px (the ``limit`` strongest), and the
    subject's mask at that size when asked (references)."""
    import cv2

    grey = _grey(image, side)
    found, descriptors = cv2.SIFT_create(nfeatures=limit, contrastThreshold=0.02).detectAndCompute(
        grey.astype(np.uint8), None
    )
    points = np.float32([k.pt for k in found]).reshape(-1, 2)
    subject = None
    if with_subject:
        rgb = image.convert("RGB").resize((grey.shape[1], grey.shape[0]), Image.Resampling.BILINEAR)
        subject = subject_mask(np.asarray(rgb))
    return Keypoints(grey, points, descriptors if found else None, subject)


@dataclass(frozen=True)
class PoseMatch:
    """The keypoint stage's answer for one (generation, reference).

    ``inliers``: matches consistent with one map (affine, or a homography where it fits clearly more).
    ``correlation``: the *verified* correlation, the lower of the grey-level and the fine-detail
    correlation of the reference warped by the map with the generation, inside the matched region; -1
    when there is no usable map or the region fails the geometry (see :func:`_verify_region`).
    The other fields are evidence: the region's share of the reference's subject, the inliers' median
    reprojection error (px at ``KEYPOINT_GEN_SIDE``), the model, its 3x3 matrix (reference pixels at
    ``KEYPOINT_REF_SIDE`` to generation pixels at ``KEYPOINT_GEN_SIDE``) and the region's box in the
    generation (fractions of its size)."""

    inliers: int
    correlation: float
    mirrored: bool
    share: float = 0.0
    residual: float = -1.0
    model: str = ""
    matrix: tuple[float, ...] = ()
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    drawing: bool = False  # the reference is a subject on a plain background (a drawing, a render, a cut-out)

    @property
    def copied(self) -> bool:
        """A copy is a large part of the subject whose pixels agree, or a smaller part (a face, an item)
        fitted to the pixel whose pixels agree closely; a re-photograph shares at most a small region (a
        print, a detail), fitted loosely (parallax, focus), and never agrees over a large one."""
        if self.inliers < MIN_INLIERS:
            return False
        if self.share >= LARGE_SHARE:
            return self.correlation >= LARGE_CORR_MIN
        if self.drawing:  # a smaller part of a drawing is a shared motif (eyes, a logo, a part of an emoji kit)
            return False
        return self.share >= MIN_SHARE and 0 <= self.residual <= TIGHT_RESIDUAL_PX and self.correlation >= WARP_CORR_MIN


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 50 or float(a.std()) < MIN_STD or float(b.std()) < MIN_STD:  # flat: a blank matches nothing
        return -1.0
    return float(np.corrcoef(a, b)[0, 1])


def _detail(grey: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The fine band of a picture (difference of Gaussians, 0.8 and 2.5 px, times ``scale``): what a
    re-photograph, with its own light, focus and parallax, does not put back at the same sub-pixel places,
    and a copy does. ``scale`` is the map's magnification when above 1: a reference enlarged onto the
    generation has no finer band than that, so both are compared on the band both hold."""
    import cv2

    return cv2.GaussianBlur(grey, (0, 0), 0.8 * scale) - cv2.GaussianBlur(grey, (0, 0), 2.5 * scale)


def _plausible_homography(matrix: np.ndarray, shape: tuple[int, int]) -> bool:
    """A homography that keeps the reference's frame a convex quadrilateral in front of the camera, its
    scale changing at most ``MAX_PERSPECTIVE`` times across it: a photograph of a flat print, not a fold."""
    import cv2

    h, w = shape
    corners = np.float32([[0, 0], [w, 0], [w, h], [0, h]]).reshape(-1, 1, 2)
    out = cv2.perspectiveTransform(corners, matrix).reshape(-1, 2)
    edges = [out[(i + 1) % 4] - out[i] for i in range(4)]
    turns = [float(a[0] * b[1] - a[1] * b[0]) for a, b in zip(edges, edges[1:] + edges[:1], strict=True)]
    if not (all(t > 0 for t in turns) or all(t < 0 for t in turns)):
        return False
    depth = matrix[2, 0] * corners[:, 0, 0] + matrix[2, 1] * corners[:, 0, 1] + matrix[2, 2]
    return bool(np.all(depth > 0) and depth.max() / depth.min() <= MAX_PERSPECTIVE)


def _fit_map(source: np.ndarray, target: np.ndarray, shape: tuple[int, int]):
    """The map from the reference's matched keypoints to the generation's: an affine map by RANSAC, or a
    homography (MAGSAC) when it explains clearly more matches (a keystone or perspective view). Returns
    (model, 3x3 matrix, inlier mask) or None."""
    import cv2

    best = None
    affine, mask = cv2.estimateAffine2D(
        source,
        target,
        method=cv2.RANSAC,
        ransacReprojThreshold=RANSAC_PX,
        maxIters=2000,
        confidence=0.99,
        refineIters=10,
    )
    if affine is not None:
        singular = np.linalg.svd(affine[:, :2], compute_uv=False)
        # A map that collapses or shears the picture is no pose of it.
        if singular.min() > 1e-3 and singular.max() / singular.min() <= MAX_ANISOTROPY:
            best = ("affine", np.vstack([affine, [0.0, 0.0, 1.0]]), mask.ravel().astype(bool))
    if len(source) >= HOMOGRAPHY_MIN_MATCHES:
        homography, mask = cv2.findHomography(
            source, target, cv2.USAC_MAGSAC, RANSAC_PX, maxIters=2000, confidence=0.99
        )
        if homography is not None and mask is not None and _plausible_homography(homography, shape):
            count = int(mask.sum())
            if best is None or count >= max(1.2 * best[2].sum(), best[2].sum() + 3):
                best = ("homography", homography, mask.ravel().astype(bool))
    return best


def _verify_region(reference: Keypoints, generation: Keypoints, matrix: np.ndarray, inliers: np.ndarray):
    """The pixels' word on a map: the region the consistent keypoints span in the reference (their convex
    hull, grown by ``REGION_MARGIN`` of the side, within the subject) is warped onto the generation and
    compared there, in grey levels and in the fine band (:func:`_detail`). Only the matched region counts:
    a pasted face or a cut-out subject is not vetoed by the rest of the reference's rectangle.

    Returns (verified correlation, share of the subject, generation box); the correlation is -1 when the
    region lands on fewer than ``MIN_COVER`` px."""
    import cv2

    height, width = reference.grey.shape
    hull = np.zeros((height, width), np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(inliers.astype(np.float32)).astype(np.int32), 1)
    margin = max(3, round(REGION_MARGIN * max(height, width)))
    subject = reference.subject if reference.subject is not None else np.ones((height, width), bool)
    # The share counts the hull grown by the margin (keypoints sit inside the edges of what they span);
    # the pixels are compared inside the hull itself: grown, it would reach past the edge of a pasted face
    # crop into the new background and veto the copy it frames.
    grown = cv2.dilate(hull, np.ones((2 * margin + 1, 2 * margin + 1), np.uint8)).astype(bool) & subject
    share = float(grown.sum() / max(1, int(subject.sum())))
    region = hull.astype(bool) & subject
    gh, gw = generation.grey.shape
    magnification = _magnification(matrix, (height, width))
    source = reference.grey
    if magnification < 1.0:  # shrunk: blurred first, as a resized picture is, so its fine band does not alias
        source = cv2.GaussianBlur(source, (0, 0), 0.5 * float(np.sqrt(1.0 / magnification**2 - 1.0)) + 1e-3)
    warped = cv2.warpPerspective(source, matrix, (gw, gh), flags=cv2.INTER_LINEAR, borderValue=0)
    cover = cv2.warpPerspective(region.astype(np.uint8), matrix, (gw, gh), flags=cv2.INTER_NEAREST, borderValue=0) > 0
    if int(cover.sum()) < MIN_COVER:
        return -1.0, share, (0.0, 0.0, 0.0, 0.0)
    ys, xs = np.nonzero(cover)
    box = (xs.min() / gw, ys.min() / gh, (xs.max() + 1) / gw, (ys.max() + 1) / gh)
    grey = _pearson(warped[cover], generation.grey[cover])
    inner = cv2.erode(cover.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0  # the warp's edge is no detail
    scale = max(1.0, magnification)
    detail = (
        _pearson(_detail(warped, scale)[inner], _detail(generation.grey, scale)[inner]) if inner.sum() >= 50 else -1.0
    )
    share = max(share, _agreeing_share(reference, generation, matrix, warped, scale))
    return min(grey, detail), share, tuple(round(float(v), 4) for v in box)


def _magnification(matrix: np.ndarray, shape: tuple[int, int]) -> float:
    """How much the map enlarges the reference at its centre (the square root of the local area ratio)."""
    import cv2

    height, width = shape
    centre = np.float32([[[width / 2, height / 2]]])
    here = cv2.perspectiveTransform(centre, matrix)
    (a, b), (c, d) = (
        (cv2.perspectiveTransform(centre + np.float32([[[1, 0]]]), matrix) - here).ravel(),
        (cv2.perspectiveTransform(centre + np.float32([[[0, 1]]]), matrix) - here).ravel(),
    )
    return float(np.sqrt(abs(a * d - b * c)))


def _agreeing_share(
    reference: Keypoints, generation: Keypoints, matrix: np.ndarray, warped: np.ndarray, scale: float
) -> float:
    """The share of the subject's textured pixels (those of it that land in the generation) whose fine
    detail agrees with the generation's under the map: local correlation of the fine band (windows of
    ``AGREE_WINDOW`` px) of at least ``AGREE_MIN``. The keypoints' hull understates a whole copy whose
    keypoints bunch together; this counts every pixel that matches. A re-photograph agrees only where it
    happens to line up to the pixel (a print, a patch), so it does not grow there."""
    import cv2

    gh, gw = generation.grey.shape
    subject = reference.subject if reference.subject is not None else np.ones(reference.grey.shape, bool)
    landed = cv2.warpPerspective(subject.astype(np.uint8), matrix, (gw, gh), flags=cv2.INTER_NEAREST) > 0
    landed = cv2.erode(landed.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    a, b = _detail(warped, scale), _detail(generation.grey, scale)
    size = (AGREE_WINDOW, AGREE_WINDOW)
    mean_a, mean_b = cv2.blur(a, size), cv2.blur(b, size)
    var_a = cv2.blur(a * a, size) - mean_a**2
    var_b = cv2.blur(b * b, size) - mean_b**2
    local = (cv2.blur(a * b, size) - mean_a * mean_b) / np.sqrt(np.maximum(var_a * var_b, 1e-6))
    textured = landed & (var_a > TEXTURE_VARIANCE)
    if int(textured.sum()) < MIN_COVER:
        return 0.0
    return float((textured & (local >= AGREE_MIN) & (var_b > TEXTURE_VARIANCE / 4)).sum() / textured.sum())


def ratio_matches(query: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowe's ratio-tested nearest neighbours: the indices ``(q, t)`` of each query descriptor and its
    nearest train descriptor, where that one is nearer than ``RATIO_TEST`` times the second nearest.

    The same matches as OpenCV's brute-force ``knnMatch(k=2)``, in about half its time, from one matrix
    product: SIFT descriptors are whole numbers 0-255, so every squared distance (at most 128 x 255^2,
    under 2^24) is exact in float32 whatever the order of summation, and the square roots and the
    comparison are OpenCV's (float32 distances, compared in double). A tie for the nearest fails the
    test whichever index wins it, so tie-breaking cannot change the matches."""
    if len(train) < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    query = np.asarray(query, dtype=np.float32)
    train = np.asarray(train, dtype=np.float32)
    squared = (query * query).sum(axis=1)[:, None] + (train * train).sum(axis=1)[None, :]
    squared -= 2.0 * (query @ train.T)
    np.maximum(squared, 0.0, out=squared)
    # The nearest, then the nearest of the rest: two passes over the rows, ~2.5x faster than np.partition
    # (bench/copy_scaling.py's pairs); a tie leaves the second equal to the first, as partition would.
    rows = np.arange(len(query))
    nearest = squared.argmin(axis=1)
    first = np.sqrt(squared[rows, nearest]).astype(np.float64)
    squared[rows, nearest] = np.inf
    second = np.sqrt(squared.min(axis=1)).astype(np.float64)
    keep = np.flatnonzero(first < RATIO_TEST * second)
    return keep, nearest[keep]


def _pose_match(reference: Keypoints, generation: Keypoints, mirrored: bool) -> PoseMatch:
    import cv2

    nothing = PoseMatch(0, -1.0, mirrored)
    if (
        reference.descriptors is None
        or generation.descriptors is None
        or min(len(reference.points), len(generation.points)) < 3
    ):
        return nothing
    query, train = ratio_matches(reference.descriptors, generation.descriptors)
    if len(query) < MIN_INLIERS:
        return PoseMatch(len(query), -1.0, mirrored)
    source = reference.points[query]
    target = generation.points[train]
    fitted = _fit_map(source, target, reference.grey.shape)
    if fitted is None:
        return nothing
    model, matrix, mask = fitted
    inliers = int(mask.sum())
    projected = cv2.perspectiveTransform(source[mask].reshape(-1, 1, 2), matrix).reshape(-1, 2)
    residual = float(np.median(np.linalg.norm(projected - target[mask], axis=1))) if inliers else -1.0
    correlation, share, box = (
        (-1.0, 0.0, (0.0,) * 4) if inliers < 3 else _verify_region(reference, generation, matrix, source[mask])
    )
    matrix_out = tuple(round(float(v), 5) for v in (matrix / matrix[2, 2]).ravel())
    drawing = reference.subject is not None and not bool(reference.subject.all())
    return PoseMatch(
        inliers, correlation, mirrored, round(share, 4), round(residual, 3), model, matrix_out, box, drawing
    )


def find_in_any_pose(generation: Keypoints, reference: Keypoints, mirrored_reference: Keypoints) -> PoseMatch:
    """The keypoint stage: the reference (and its mirror image, as SIFT descriptors are not mirror
    invariant), or any large enough part of it, rotated by any angle, flipped, stretched, seen in
    perspective, cropped, scaled or pasted small, found by a map from matched keypoints and confirmed by the
    pixels of the matched region (:func:`_verify_region`). The plain orientation when it is a copy (the
    mirror is then not matched: it could only add a second copy of the same picture); otherwise the
    better of the two, a copy first."""
    plain = _pose_match(reference, generation, False)
    if plain.copied:
        return plain
    mirror = _pose_match(mirrored_reference, generation, True)
    return max((plain, mirror), key=lambda m: (m.copied, m.correlation, m.inliers))


def generation_keypoints(image: Image.Image) -> Keypoints:
    """A generation's keypoints, at ``KEYPOINT_GEN_SIDE`` (at most ``MAX_GEN_KEYPOINTS``)."""
    return keypoints(image, KEYPOINT_GEN_SIDE, MAX_GEN_KEYPOINTS)


def reference_keypoints(image: Image.Image) -> tuple[Keypoints, Keypoints]:
    """A reference's keypoints and subject mask, plain and mirrored, at ``KEYPOINT_REF_SIDE``."""
    return (
        keypoints(image, KEYPOINT_REF_SIDE, with_subject=True),
        keypoints(ImageOps.mirror(image), KEYPOINT_REF_SIDE, with_subject=True),
    )


def _generation(loader, key: str) -> Image.Image:
    """A generation at the scorer's working size (images.working_image), named as the scorer names it:
    the search's boxes are fractions of the image, so the reduction changes no flag, only the memory."""
    from idbench.evaluate_pkg.images import load_working_image

    return load_working_image(loader, key)


# --- the run-level wrapper ------------------------------------------------------------------------


def prompt_references(data, prompt: dict) -> list[str]:
    """The reference ids a prompt's generation must not copy: its subjects and their bound items, in
    layout order, once each (never the background, which the prompt asks to keep)."""
    from idbench.evaluate_pkg.baselines import prompt_slots

    ids: list[str] = []
    for slot in prompt_slots(data, prompt):
        for ref_id in (slot.ref_id, slot.item_ref_id):
            if ref_id and ref_id not in ids:
                ids.append(ref_id)
    return ids


def summarize(
    flags: Sequence[float], embedding_applied: bool, why_not: str, *, foreign: Sequence[float] = (), pool: int = 0
) -> dict[str, Any]:
    """``summary["copies"]``: the flagged share, whether it marks the run, and the criteria used."""
    flagged = int(sum(flags))
    share = flagged / len(flags) if flags else 0.0
    return {
        "images": len(flags),
        "flagged": flagged,
        "share": share,
        "with_foreign_references": int(sum(foreign)),
        "mark_above_share": MARK_ABOVE_SHARE,
        "marked": share > MARK_ABOVE_SHARE,
        "criteria": {
            "pixels": {
                "method": "multi-scale normalised cross-correlation (OpenCV TM_CCOEFF_NORMED), plain and mirrored, "
                "both directions, confirmed by the 64-bit perceptual hash of the window",
                "ncc_min": NCC_MIN,
                "phash_max_distance": PHASH_MAX_DISTANCE,
                "work_side": WORK_SIDE,
                "min_template_side": MIN_TEMPLATE_SIDE,
            },
            "keypoints": {
                "method": "SIFT keypoints, Lowe ratio test, RANSAC affine map (any rotation, flip, stretch, "
                "crop, scale), confirmed by the correlation of the warped reference with the generation",
                "min_inliers": MIN_INLIERS,
                "warp_correlation_min": WARP_CORR_MIN,
                "ratio_test": RATIO_TEST,
                "reference_side": KEYPOINT_REF_SIDE,
                "generation_side": KEYPOINT_GEN_SIDE,
                "max_keypoints": [MAX_KEYPOINTS, MAX_GEN_KEYPOINTS],
                "max_anisotropy": MAX_ANISOTROPY,
            },
            "embedding": {
                "role": "dinov2",
                "feature": "cls",
                "min_cosine": EMBEDDING_MIN_COSINE,
                "applied": embedding_applied,
                **({} if embedding_applied else {"why_not": why_not}),
            },
            "references": "the prompt's subjects and bound items (not its background); on multi-subject benchmarks "
            f"also the pool's other references ({pool}), by keypoints: a crowd of them counts against the image",
            "pool_index": _pool_index_criteria(),
            "version": VERSION,
        },
    }


def _pool_index_criteria() -> dict[str, Any]:
    """How the pool's other references are shortlisted before the keypoint stage (``copy_index``)."""
    from idbench.evaluate_pkg import copy_index as X

    return {
        "method": "SIFT descriptors of every pool reference (plain and mirrored) in one faiss index; each "
        "generation keypoint votes for its nearest references (ratio test against another reference); the "
        "most voted and every one with enough votes are verified by the keypoint stage",
        "top_k": X.TOP_K,
        "max_candidates": X.MAX_CANDIDATES,
        "ratio": X.RATIO,
        "exhaustive_up_to": X.EXHAUSTIVE_UP_TO,
        "version": X.INDEX_VERSION,
    }


def foreign_pool(data) -> list[str]:
    """The references a generation must not show unless its prompt names them: every subject and item
    reference of the benchmark's prompts, when its prompts hold several subjects (a picture padded with
    the pool's other faces, a crowd, would otherwise pass); none for a single-subject benchmark, where
    no prompt asks for another subject beside its own."""
    from idbench.evaluate_pkg.baselines import prompt_slots

    if max((len(prompt_slots(data, p)) for p in data.prompt_rows.values()), default=0) < 2:
        return []
    return sorted({r for p in data.prompt_rows.values() for r in prompt_references(data, p)})


class _PreparedReferences:
    """References' keypoints (compact, both orientations) kept between the runs of one process, by the
    reference's content hash: a leaderboard worker or a test session scores many submissions against
    the same references, and preparing them took a tenth of the copy check (SIFT twice, at 384 px).
    Least recently used first out, bounded by bytes (a reference takes ~0.25 MB)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, tuple[tuple[Keypoints, Keypoints], int]] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, content_hash: str) -> tuple[Keypoints, Keypoints] | None:
        with self.lock:
            entry = self.entries.get(content_hash)
            if entry is None:
                return None
            self.entries.move_to_end(content_hash)
            return entry[0]

    def put(self, content_hash: str, points: tuple[Keypoints, Keypoints]) -> None:
        size = sum(a.nbytes for k in points for a in (k.grey, k.points, k.descriptors, k.subject) if a is not None)
        with self.lock:
            if content_hash in self.entries or size > self.max_bytes:
                return
            self.entries[content_hash] = (points, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self.entries.popitem(last=False)
                self.bytes -= dropped


PREPARED_REFERENCES_BYTES = 128 * 1024 * 1024  # ~500 references
_PREPARED = _PreparedReferences(PREPARED_REFERENCES_BYTES)


class _RunSearch:
    """The copy searches of one scoring run, and the cache items they fill.

    Each generation is searched for its prompt's own references by both stages (pixels, keypoints) and,
    on multi-subject benchmarks, for the other references of the pool (:func:`foreign_pool`): the pool
    index (``copy_index``) shortlists the few the generation may show, and the keypoint stage verifies
    only those. One cache item per (generation, own reference), and one per generation's foreign search,
    keyed by the pool's digest (which holds ``copy_index.INDEX_VERSION``) and the prompt's own references.
    """

    def __init__(self, ctx):
        from idbench.evaluate_pkg import copy_index
        from idbench.evaluate_pkg.images import content_hash

        self.data = data = ctx.data
        self.generations = ctx.generation_keys()
        self.gen_loaders = ctx.generation_loaders()
        self.refs_of = {p: prompt_references(data, data.prompt_rows[p]) for p in {p for p, _ in self.generations}}
        self.pool = pool = foreign_pool(data)
        self.foreign_of = {p: [r for r in pool if r not in set(own)] for p, own in self.refs_of.items()}
        own_ids = {r for ids in self.refs_of.values() for r in ids}
        self.ref_hash = {r: content_hash(data.reference_bytes[r]) for r in own_ids | set(pool)}
        # The pool index holds each picture once (two reference ids may hold the same bytes), in hash order.
        self.pool_hashes = sorted({self.ref_hash[r] for r in pool})
        self.position = {h: k for k, h in enumerate(self.pool_hashes)}
        self.ids_of_hash: dict[str, list[str]] = {}
        for r in pool:
            self.ids_of_hash.setdefault(self.ref_hash[r], []).append(r)
        self.digest = copy_index.pool_digest(self.pool_hashes)
        self.items: dict[str, tuple] = {}
        for (p, _), key in self.generations.items():
            for r in self.refs_of[p]:
                self.items[self.own_key(key, r)] = (key, r, "own")
            if pool:
                self.items[self.foreign_key(key, p)] = (key, "", "foreign", p)
        # Each reference prepared once per run, held as bytes (copy_index.compact: a quarter of the memory).
        self.ref_points: dict[str, tuple[Keypoints, Keypoints]] = {}
        self.index: list[copy_index.PoolIndex] = []  # built when a generation first needs it (a rescore never does)

    def own_key(self, key: str, ref_id: str) -> str:
        from idbench.evaluate_pkg.features import condition_hash

        return condition_hash(key, self.ref_hash[ref_id], "own")

    def foreign_key(self, key: str, prompt_id: str) -> str:
        from idbench.evaluate_pkg.features import condition_hash

        own = sorted({self.ref_hash[r] for r in self.refs_of[prompt_id]})
        return condition_hash(key, self.digest, *own, "foreign")

    def prepare(self, ref_ids: list[str]) -> None:
        from idbench.evaluate_pkg import copy_index

        missing = [r for r in dict.fromkeys(ref_ids) if r not in self.ref_points]
        kept = {r: points for r in missing if (points := _PREPARED.get(self.ref_hash[r])) is not None}
        self.ref_points.update(kept)
        missing = [r for r in missing if r not in kept]
        images = [self.data.references[r]["image"] for r in missing]  # decoded here, not in the threads
        prepared = copy_index.parallel_map(
            lambda image: tuple(copy_index.compact(k) for k in reference_keypoints(image)), images
        )
        for r, points in zip(missing, prepared, strict=True):
            self.ref_points[r] = points
            _PREPARED.put(self.ref_hash[r], points)

    def points_of(self, ref_id: str) -> tuple[Keypoints, Keypoints]:
        from idbench.evaluate_pkg import copy_index

        plain, mirrored = self.ref_points[ref_id]
        return copy_index.expand(plain), copy_index.expand(mirrored)

    def pool_index(self):
        from idbench.evaluate_pkg import copy_index

        if not self.index:
            firsts = [self.ids_of_hash[h][0] for h in self.pool_hashes]
            self.prepare(firsts)
            self.index.append(copy_index.build_index([self.ref_points[r] for r in firsts]))
        return self.index[0]

    def own_record(self, image: Image.Image, gen_points: Keypoints, ref_id: str) -> dict[str, np.ndarray]:
        pose = find_in_any_pose(gen_points, *self.points_of(ref_id))
        # The pixel search only where the keypoints found nothing: there it would add nothing but time.
        found = None if pose.copied else find_reference(image, self.data.references[ref_id]["image"])
        return {
            "inliers": np.int64(pose.inliers),
            "warp_correlation": np.float32(pose.correlation),
            "pose_mirrored": np.bool_(pose.mirrored),
            # Evidence a reader can check: the matched region's share of the subject and its box in the
            # generation, how well the map fits, and the map itself (reference px -> generation px).
            "pose_share": np.float32(pose.share),
            "pose_drawing": np.bool_(pose.drawing),
            "pose_residual": np.float32(pose.residual),
            "pose_model": np.int64(MAP_MODELS.index(pose.model)),
            "pose_matrix": np.asarray(pose.matrix or (0.0,) * 9, dtype=np.float64),
            "pose_box": np.asarray(pose.box, dtype=np.float32),
            "ncc": np.float32(found.ncc if found else -1.0),
            "phash_distance": np.int64(found.phash_distance if found else 64),
            "box": np.asarray(found.box if found else (0.0,) * 4, dtype=np.float32),
            "mirrored": np.bool_(found is not None and found.mirrored),
            "reverse": np.bool_(found is not None and found.direction != "reference in generation"),
            "masked": np.bool_(found is not None and found.masked),
            "pixel_detail": np.float32(found.detail if found else -1.0),
        }

    def foreign_record(self, gen_points: Keypoints, prompt_id: str) -> dict[str, np.ndarray]:
        """The pool's references (but the prompt's own) shortlisted for the generation and verified."""
        from idbench.evaluate_pkg import copy_index

        own = {self.position[self.ref_hash[r]] for r in self.refs_of[prompt_id] if self.ref_hash[r] in self.position}
        found = copy_index.search_pool(
            self.pool_index(),
            gen_points,
            lambda k: self.points_of(self.ids_of_hash[self.pool_hashes[k]][0]),
            own,
            verify=find_in_any_pose,
        )
        return {
            "references": np.asarray([self.pool_hashes[c.position] for c in found], dtype=str),
            "votes": np.asarray([c.votes for c in found], dtype=np.int64),
            "inliers": np.asarray([c.pose.inliers for c in found], dtype=np.int64),
            "warp_correlation": np.asarray([c.pose.correlation for c in found], dtype=np.float32),
            "pose_mirrored": np.asarray([c.pose.mirrored for c in found], dtype=bool),
            "pose_share": np.asarray([c.pose.share for c in found], dtype=np.float32),
            "pose_residual": np.asarray([c.pose.residual for c in found], dtype=np.float32),
            "pose_drawing": np.asarray([c.pose.drawing for c in found], dtype=bool),
        }

    def search_generation(self, payloads: list[tuple]) -> list[dict[str, np.ndarray]]:
        """Every missing search of one generation: it is decoded, and its keypoints found, once."""
        gen_key = payloads[0][0]
        image = _generation(self.gen_loaders[gen_key], gen_key)
        gen_points = generation_keypoints(image)
        return [
            self.own_record(image, gen_points, ref_id) if kind == "own" else self.foreign_record(gen_points, rest[0])
            for _, ref_id, kind, *rest in payloads
        ]

    def compute(self, payloads: list[tuple]) -> list[dict[str, np.ndarray]]:
        """The searches of whole generations (``payloads`` in generation order), a generation a thread."""
        from idbench.evaluate_pkg import copy_index

        self.prepare([ref_id for _, ref_id, kind, *_ in payloads if kind == "own"])
        if any(kind == "foreign" for _, _, kind, *_ in payloads):
            self.pool_index()
        groups = [list(group) for _, group in itertools.groupby(payloads, key=lambda payload: payload[0])]
        return [record for records in copy_index.parallel_map(self.search_generation, groups) for record in records]

    def run(self, ctx) -> dict[str, dict[str, np.ndarray]]:
        """Every search, from the feature store where it holds them (under this module's ``VERSION``)."""
        from idbench.evaluate_pkg import copy_index
        from idbench.evaluate_pkg.context import end_stage

        tick = ctx.progress("copy check", len(self.items))
        batch, threads = max(1, ctx.options.batch_size), copy_index.workers()
        items = self.items

        def by_generation(keys: list[str]):
            # The store hands the missing searches over in hash order; they are put in generation order and
            # cut between generations, so each generation is decoded and its keypoints found once (in hash
            # order, 20 CogCanvas generations took 385 keypoint searches), and a batch holds at least one
            # generation a thread.
            ordered = sorted(keys, key=lambda k: items[k])
            chunk: list[str] = []
            for k, key in enumerate(ordered):
                chunk.append(key)
                generation_ends = k + 1 == len(ordered) or items[ordered[k + 1]][0] != items[key][0]
                done = len({items[c][0] for c in chunk})
                if generation_ends and len(chunk) >= batch and done >= threads or k + 1 == len(ordered):
                    yield chunk, self.compute([items[c] for c in chunk])
                    chunk = []

        searched = ctx.store.cached_batches("copy-search", VERSION, items, by_generation, tick)
        end_stage(tick)
        return searched


def _own_decision(hit: dict[str, np.ndarray], cosine: float | None, by_embedding: bool) -> dict[str, Any] | None:
    """The evidence that a generation copies one of its prompt's references (``hit``: its cached search),
    or None: found by the pixel search, the keypoint stage or (``by_embedding``) the embedding cosine."""
    ncc, distance = float(hit["ncc"]), int(hit["phash_distance"])
    pose = PoseMatch(
        int(hit["inliers"]),
        float(hit["warp_correlation"]),
        bool(hit["pose_mirrored"]),
        share=float(hit["pose_share"]),
        residual=float(hit["pose_residual"]),
        drawing=bool(hit["pose_drawing"]),
    )
    masked, detail = bool(hit["masked"]), float(hit["pixel_detail"])
    by_pixels = Found(ncc, distance, (0.0,) * 4, "", False, masked, detail).copied
    stages = [n for n, yes in (("pixels", by_pixels), ("keypoints", pose.copied), ("embedding", by_embedding)) if yes]
    if not stages:
        return None
    return {
        "ncc": round(ncc, 4),
        "phash_distance": distance,
        "box": [round(float(v), 4) for v in hit["box"]],
        "mirrored": bool(hit["mirrored"]),
        "crop_of_reference": bool(hit["reverse"]),
        "subject_alone": masked,
        "keypoint_inliers": pose.inliers,
        "warp_correlation": round(pose.correlation, 4),
        **(_pose_evidence(hit) if pose.copied else {}),
        "embedding_cosine": None if cosine is None else round(cosine, 4),
        "by": stages,
    }


def _foreign_decisions(hit: dict[str, np.ndarray], ids_of_hash: dict[str, list[str]], others: set[str]) -> dict:
    """The pool references (ids in ``others``: not the prompt's own) that a generation's foreign search
    (``hit``) verified as copied, in pool order, each with its evidence."""
    poses = {
        ref_id: PoseMatch(
            int(inliers), float(correlation), bool(mirrored), float(share), residual=float(error), drawing=bool(plain)
        )
        for found_hash, inliers, correlation, mirrored, share, error, plain in zip(
            hit["references"],
            hit["inliers"],
            hit["warp_correlation"],
            hit["pose_mirrored"],
            hit["pose_share"],
            hit["pose_residual"],
            hit["pose_drawing"],
            strict=True,
        )
        for ref_id in ids_of_hash[str(found_hash)]
        if ref_id in others
    }
    return {
        ref_id: {
            "not_in_prompt": True,
            "keypoint_inliers": poses[ref_id].inliers,
            "warp_correlation": round(poses[ref_id].correlation, 4),
            "by": ["keypoints"],
        }
        for ref_id in sorted(r for r, pose in poses.items() if pose.copied)
    }


def detect_copies(ctx) -> tuple[list, dict[str, Any]]:
    """Per-image ``copy.flag`` / ``copy.pasted`` / ``copy.foreign`` results, and ``summary["copies"]``.

    The searches (:class:`_RunSearch`) are cached in the feature store and spread over a thread pool
    (OpenCV and faiss release the GIL); the results do not depend on it. Evidence (what was found where)
    goes to ``ctx.evidence`` for flagged images.
    """
    from idbench.evaluate_pkg.context import Result
    from idbench.evaluate_pkg.models.registry import profile_is_plumbing

    search = _RunSearch(ctx)
    searched = search.run(ctx)
    embedding = _embedding_cosines(ctx, search.generations, search.refs_of)
    plumbing = profile_is_plumbing(ctx.options.profile)
    applied = embedding is not None and not plumbing
    why_not = (
        "random weights (plumbing profile): a cosine means nothing"
        if plumbing and embedding is not None
        else "the run computed no DINOv2 features of whole generations"
    )
    results, flags, foreign_flags = [], [], []
    for (prompt_id, seed), key in search.generations.items():
        record = {}
        for ref_id in search.refs_of[prompt_id]:
            cosine = None if embedding is None else embedding.get((key, ref_id))
            by_embedding = applied and cosine is not None and cosine >= EMBEDDING_MIN_COSINE
            if evidence := _own_decision(searched[search.own_key(key, ref_id)], cosine, by_embedding):
                record[ref_id] = evidence
        pasted = len(record)
        foreign = {}
        if search.pool:
            hit = searched[search.foreign_key(key, prompt_id)]
            foreign = _foreign_decisions(hit, search.ids_of_hash, set(search.foreign_of[prompt_id]))
            record.update(foreign)
        flag = float(bool(record))
        flags.append(flag)
        foreign_flags.append(float(bool(foreign)))
        results.append(Result(prompt_id, seed, FLAG_METRIC, flag))
        results.append(Result(prompt_id, seed, PASTED_METRIC, float(pasted)))
        if search.pool:
            results.append(Result(prompt_id, seed, FOREIGN_METRIC, float(len(foreign))))
        if record:
            ctx.evidence.append((prompt_id, seed, EVIDENCE_METRIC, {"found": record}))
    return results, summarize(flags, applied, why_not, foreign=foreign_flags, pool=len(search.pool))


def _pose_evidence(hit: dict[str, np.ndarray]) -> dict[str, Any]:
    """What the keypoint stage found, for the model page and report: the matched region's box in the
    generation (fractions), its share of the reference's subject, the map's model and matrix (reference
    pixels at ``KEYPOINT_REF_SIDE`` to generation pixels at ``KEYPOINT_GEN_SIDE``) and its fit."""
    return {
        "region_box": [round(float(v), 4) for v in hit["pose_box"]],
        "subject_share": round(float(hit["pose_share"]), 4),
        "map": MAP_MODELS[int(hit["pose_model"])],
        "matrix": [round(float(v), 5) for v in hit["pose_matrix"]],
        "median_error_px": round(float(hit["pose_residual"]), 3),
        "mirrored_reference": bool(hit["pose_mirrored"]),
    }


def _embedding_cosines(ctx, generations, refs_of) -> dict[tuple[str, str], float] | None:
    """(generation hash, reference id) -> DINOv2 CLS cosine, when the run loaded DINOv2 (else None).

    Reads the feature store (cached by the suite's own DINO-Sim): no model is loaded for this.
    """
    if "dinov2" not in getattr(ctx.models, "_loaded", {}):
        return None
    ref_ids = sorted({r for ids in refs_of.values() for r in ids})
    gens = ctx.image_features("dinov2", ctx.generation_loaders())
    refs = ctx.image_features("dinov2", ctx.reference_loaders(ref_ids))
    out = {}
    for (prompt_id, _), key in generations.items():
        g = np.asarray(gens[key]["cls"], dtype=np.float64)
        for ref_id in refs_of[prompt_id]:
            r = np.asarray(refs[ctx.reference_key(ref_id)]["cls"], dtype=np.float64)
            out[(key, ref_id)] = float(g @ r / (np.linalg.norm(g) * np.linalg.norm(r) or 1.0))
    return out
