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
   image) are matched to the generation's, an affine map is fitted to the matches by RANSAC (any
   rotation, flip, stretch, crop, scale or small paste is one), and the reference warped by it is
   correlated with the generation where it lands: at least ``MIN_INLIERS`` consistent matches and a
   correlation of ``WARP_CORR_MIN`` flag a copy. The keypoints say where, the pixels confirm.
4. **A crowd.** On a multi-subject benchmark a picture of every subject of the pool (0 of 225
   Identity Collapse crowds flagged before) dilutes the search for the prompt's own. Every subject and item reference of the pool that the prompt does not name is searched too,
   by keypoints (cheap once each reference is prepared), and one found flags the image
   (``copy.foreign`` counts them).
5. **Embedding** (reported, and a criterion of its own only with real weights): the cosine of the whole
   generation's DINOv2 CLS embedding to each reference's, when the run computed those features anyway.
   A cosine of at least ``EMBEDDING_MIN_COSINE`` also flags a copy; with a plumbing profile's random
   weights a cosine means nothing, so the criterion is then recorded as not applied.

Per image the scorer stores ``copy.flag`` (1: at least one reference found), ``copy.pasted`` (how
many of the prompt's references were found) and, on multi-subject benchmarks, ``copy.foreign`` (how
many references of the pool the prompt does not name); ``summary["copies"]`` holds the share of flagged images and
the criteria, and a run with more than ``MARK_ABOVE_SHARE`` of its images flagged is *marked*: the
leaderboard shows it apart, not ranked by default. Results are cached per (generation, reference) in
the feature store, so a rescore searches nothing again.

Cost is bounded up front: the generation is searched at ``WORK_SIDE`` px whatever its size, each
of its prompt's references at most ``4 x (16 + FINE_EVALUATIONS)`` times (two directions, plain and
mirrored); the keypoint stage prepares each image once (at most ``MAX_KEYPOINTS`` keypoints of a
reference, ``MAX_GEN_KEYPOINTS`` of a generation, at
``KEYPOINT_GEN_SIDE`` / ``KEYPOINT_REF_SIDE`` px) and matches each (generation, reference) pair once:
at most ``MAX_KEYPOINTS x MAX_GEN_KEYPOINTS`` descriptor distances and one RANSAC fit of bounded
iterations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps

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
PHASH_MAX_DISTANCE = 12  # of 64 bits: pastes 0-12 on the samples, other photographs 14-32
EMBEDDING_MIN_COSINE = 0.95
MARK_ABOVE_SHARE = 0.05  # a run with more than 5 % of its images flagged is marked
COARSE_GATE = 0.5  # measured on the samples: pastes 0.67-1.00 in the coarse pass (a 5-image collage lowest)
MIN_STD = 2.0  # grey-level std below which a window is flat: a blank canvas matches nothing
VERSION = 5  # of the search and its thresholds: part of the cache key (5: keypoint stage, foreign references)
# The keypoint stage (find_in_any_pose): SIFT keypoints matched with Lowe's ratio test, an affine map
# fitted by RANSAC, then the reference warped by it and correlated with the generation where it lands.
KEYPOINT_REF_SIDE = 256  # px: the reference's longest side for its keypoints
KEYPOINT_GEN_SIDE = 512  # px: the generation's (twice the reference's: a paste at 5 % of the area keeps keypoints)
MAX_KEYPOINTS = 500  # per reference: bounds the matching cost (with the generation's, 500 x 1,500 distances a pair)
MAX_GEN_KEYPOINTS = 1500  # per generation: a textured background must not take every keypoint from a small paste
RATIO_TEST = 0.8  # Lowe's ratio: a match counts when clearly nearer than the second-nearest descriptor
MIN_INLIERS = 5  # matches consistent with one affine map
WARP_CORR_MIN = 0.7  # measured on the samples: copies in any pose 0.75-1.00; different pictures <= 0.66,
# except one emoji drawn in another style of the same set (the same outline: 0.71-0.94, flagged)
MAX_ANISOTROPY = 3.0  # an affine map stretching one axis more than 3x the other is not a pose of the picture
MIN_COVER = 400  # px of the generation (at KEYPOINT_GEN_SIDE) the warped reference must cover


@dataclass(frozen=True)
class Found:
    """The best window of one (generation, reference) search and whether it is a copy."""

    ncc: float
    phash_distance: int
    box: tuple[float, float, float, float]  # the window in the searched image, fractions of its size
    direction: str  # "reference in generation" or "generation in reference" (a crop of the reference)
    mirrored: bool

    @property
    def copied(self) -> bool:
        return self.ncc >= NCC_MIN and self.phash_distance <= PHASH_MAX_DISTANCE

    def as_dict(self) -> dict[str, Any]:
        return {
            "ncc": round(self.ncc, 4),
            "phash_distance": self.phash_distance,
            "box": [round(v, 4) for v in self.box],
            "direction": self.direction,
            "mirrored": self.mirrored,
            "copied": self.copied,
        }


def _grey(image: Image.Image, side: int) -> np.ndarray:
    """The image in grey levels (float32), its longest side ``side`` px."""
    grey = image.convert("L")
    scale = side / max(grey.size)
    size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
    return np.asarray(grey.resize(size, Image.Resampling.BILINEAR), dtype=np.float32)


def _best_at(
    haystack: np.ndarray, needle: np.ndarray, scale: float, min_side: int = MIN_TEMPLATE_SIDE
) -> tuple[float, tuple[int, int, int, int]] | None:
    """Best correlation of ``needle`` resized by ``scale`` inside ``haystack``, and its window (x, y, w, h)."""
    import cv2

    h, w = round(needle.shape[0] * scale), round(needle.shape[1] * scale)
    if min(h, w) < min_side or h > haystack.shape[0] or w > haystack.shape[1]:
        return None
    template = cv2.resize(needle, (w, h), interpolation=cv2.INTER_AREA)
    if float(template.std()) < MIN_STD:
        return None
    scores = cv2.matchTemplate(haystack, template, cv2.TM_CCOEFF_NORMED)
    # A flat window has no defined correlation (OpenCV returns noise or inf there): it matches nothing.
    scores = np.nan_to_num(scores, nan=-1.0, posinf=-1.0, neginf=-1.0)
    local_std = _window_std(haystack, h, w)
    scores[local_std < MIN_STD] = -1.0
    y, x = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return float(np.clip(scores[y, x], -1.0, 1.0)), (int(x), int(y), w, h)


def _window_std(image: np.ndarray, h: int, w: int) -> np.ndarray:
    """Grey-level std of every h x w window (the shape ``matchTemplate`` returns), by integral images."""
    import cv2

    total, squares = cv2.integral2(image.astype(np.float64))[:2]

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
    haystack: np.ndarray, needle: np.ndarray, min_fraction: float = 0.0
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
    best = None
    for scale in _scales(fit, smallest, COARSE_RATIO):
        found = _best_at(half_hay, half_needle, scale, min_side=MIN_TEMPLATE_SIDE // 2)
        if found and (best is None or found[0] > best[0]):
            best = (found[0], scale, found[1])
    if best is None:
        return None
    sy, sx = haystack.shape[0] / half_hay.shape[0], haystack.shape[1] / half_hay.shape[1]
    x, y, w, h = best[2]
    return best[0], best[1], fit, (round(x * sx), round(y * sy), round(w * sx), round(h * sy))


def refine(
    haystack: np.ndarray, needle: np.ndarray, scale: float, fit: float
) -> tuple[float, tuple[int, int, int, int]] | None:
    """The fine pass, at the full working size, around the coarse pass's ``scale``: the scales half a
    coarse step either side and the scale itself, then a quarter step either side of the best of them
    (``FINE_EVALUATIONS`` correlations in all). Correlation against scale has one peak within a coarse
    step of a paste's true scale, so this lands within an eighth of a step (about 1.8 %) of it, as a grid
    of 9 scales over the step would, with 5 correlations instead of 9. Returns the best correlation and
    its window (x, y, w, h in ``haystack``'s pixels), None when no scale fits."""
    step = np.log(COARSE_RATIO)
    tried: dict[float, tuple[float, tuple[int, int, int, int]] | None] = {}

    def at(offset: float):
        if offset not in tried:
            s = min(scale * float(np.exp(offset * step)), fit)
            tried[offset] = _best_at(haystack, needle, s)
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
    """
    gen, ref = _grey(generation, WORK_SIDE), _grey(reference, WORK_SIDE)
    candidates = []
    for mirrored in (False, True):
        needle_ref = ref[:, ::-1].copy() if mirrored else ref
        # The generation inside the reference is a crop or zoom of it: only crops keeping at least
        # REVERSE_MIN_FRACTION of the reference's side are searched (smaller ones are new pictures).
        for direction, haystack, needle, smallest in (
            ("reference in generation", gen, needle_ref, 0.0),
            ("generation in reference", needle_ref, gen, REVERSE_MIN_FRACTION),
        ):
            coarse = coarse_locate(haystack, needle, smallest)
            if coarse is not None:
                candidates.append((coarse, direction, mirrored, haystack, needle))
    if not candidates:
        return Found(-1.0, 64, (0.0, 0.0, 0.0, 0.0), "reference in generation", False)
    refined = []
    for (ncc, scale, fit, _), direction, mirrored, haystack, needle in candidates:
        if ncc >= COARSE_GATE and (found := refine(haystack, needle, scale, fit)):
            refined.append((found[0], direction, mirrored, found[1]))
    if refined:
        best = max(refined, key=lambda r: r[0])
    else:  # nothing worth refining: the best coarse window stands
        (ncc, _, _, window), direction, mirrored, _, _ = max(candidates, key=lambda c: c[0][0])
        best = (ncc, direction, mirrored, window)
    ncc, direction, mirrored, (x, y, w, h) = best
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
    return Found(ncc, distance, box, direction, mirrored)


@dataclass(frozen=True)
class Keypoints:
    """An image prepared for the keypoint stage: grey levels at a working size, SIFT keypoints, descriptors."""

    grey: np.ndarray  # float32
    points: np.ndarray  # (n, 2) float32, x and y in ``grey``'s pixels
    descriptors: np.ndarray | None  # (n, 128) float32, None without keypoints


def keypoints(image: Image.Image, side: int, limit: int = MAX_KEYPOINTS) -> Keypoints:
    """SIFT keypoints of ``image`` at a longest side of ``side`` px (the ``limit`` strongest)."""
    import cv2

    grey = _grey(image, side)
    found, descriptors = cv2.SIFT_create(nfeatures=limit, contrastThreshold=0.02).detectAndCompute(
        grey.astype(np.uint8), None
    )
    points = np.float32([k.pt for k in found]).reshape(-1, 2)
    return Keypoints(grey, points, descriptors if found else None)


@dataclass(frozen=True)
class PoseMatch:
    """The keypoint stage's answer for one (generation, reference): matches consistent with one affine
    map, and the correlation of the reference warped by it with the generation (-1: no usable map)."""

    inliers: int
    correlation: float
    mirrored: bool

    @property
    def copied(self) -> bool:
        return self.inliers >= MIN_INLIERS and self.correlation >= WARP_CORR_MIN


def _pose_match(reference: Keypoints, generation: Keypoints) -> tuple[int, float]:
    import cv2

    if (
        reference.descriptors is None
        or generation.descriptors is None
        or min(len(reference.points), len(generation.points)) < 3
    ):
        return 0, -1.0
    pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(reference.descriptors, generation.descriptors, k=2)
    good = [p[0] for p in pairs if len(p) == 2 and p[0].distance < RATIO_TEST * p[1].distance]
    if len(good) < MIN_INLIERS:
        return len(good), -1.0
    source = reference.points[[m.queryIdx for m in good]]
    target = generation.points[[m.trainIdx for m in good]]
    affine, mask = cv2.estimateAffine2D(
        source, target, method=cv2.RANSAC, ransacReprojThreshold=4.0, maxIters=2000, confidence=0.99, refineIters=10
    )
    if affine is None:
        return 0, -1.0
    inliers = int(mask.sum())
    # Confirm: the keypoints say where, the pixels say whether. A map that collapses or shears the
    # picture is no pose of it.
    singular = np.linalg.svd(affine[:, :2], compute_uv=False)
    if singular.min() < 1e-3 or singular.max() / singular.min() > MAX_ANISOTROPY:
        return inliers, -1.0
    height, width = generation.grey.shape
    warped = cv2.warpAffine(reference.grey, affine, (width, height), flags=cv2.INTER_LINEAR, borderValue=0)
    cover = (
        cv2.warpAffine(np.ones_like(reference.grey), affine, (width, height), flags=cv2.INTER_NEAREST, borderValue=0)
        > 0.5
    )
    if int(cover.sum()) < MIN_COVER:
        return inliers, -1.0
    a, b = warped[cover], generation.grey[cover]
    if float(a.std()) < MIN_STD or float(b.std()) < MIN_STD:  # flat where it lands: a blank matches nothing
        return inliers, -1.0
    return inliers, float(np.corrcoef(a, b)[0, 1])


def find_in_any_pose(generation: Keypoints, reference: Keypoints, mirrored_reference: Keypoints) -> PoseMatch:
    """The keypoint stage: the reference (and its mirror image, as SIFT descriptors are not mirror
    invariant) rotated by any angle, flipped, stretched, cropped, scaled or pasted small, found by an
    affine map from matched keypoints and confirmed by the warped reference's correlation with the
    generation. The best of the two orientations."""
    plain = _pose_match(reference, generation)
    mirror = _pose_match(mirrored_reference, generation)
    (inliers, correlation), is_mirror = max(((plain, False), (mirror, True)), key=lambda c: (c[0][1], c[0][0]))
    return PoseMatch(inliers, correlation, is_mirror)


def generation_keypoints(image: Image.Image) -> Keypoints:
    """A generation's keypoints, at ``KEYPOINT_GEN_SIDE`` (at most ``MAX_GEN_KEYPOINTS``)."""
    return keypoints(image, KEYPOINT_GEN_SIDE, MAX_GEN_KEYPOINTS)


def reference_keypoints(image: Image.Image) -> tuple[Keypoints, Keypoints]:
    """A reference's keypoints, plain and mirrored, at ``KEYPOINT_REF_SIDE``."""
    return keypoints(image, KEYPOINT_REF_SIDE), keypoints(ImageOps.mirror(image), KEYPOINT_REF_SIDE)


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
            "version": VERSION,
        },
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


def detect_copies(ctx) -> tuple[list, dict[str, Any]]:
    """Per-image ``copy.flag`` / ``copy.pasted`` / ``copy.foreign`` results, and ``summary["copies"]``.

    Each generation is searched for its prompt's own references by both stages (pixels, keypoints) and,
    on multi-subject benchmarks, for every other reference of the pool by the keypoint stage
    (:func:`foreign_pool`). Each (generation, reference) search is cached in the feature store under
    this module's version. Evidence (what was found where) goes to ``ctx.evidence`` for flagged images.
    """
    from idbench.evaluate_pkg.context import Result, end_stage
    from idbench.evaluate_pkg.features import condition_hash
    from idbench.evaluate_pkg.images import content_hash
    from idbench.evaluate_pkg.models.registry import profile_is_plumbing

    data, prompts = ctx.data, ctx.data.prompt_rows
    generations = ctx.generation_keys()
    gen_loaders = ctx.generation_loaders()
    refs_of = {p: prompt_references(data, prompts[p]) for p in {p for p, _ in generations}}
    pool = foreign_pool(data)
    foreign_of = {p: [r for r in pool if r not in set(own)] for p, own in refs_of.items()}
    blobs = data.reference_bytes
    ref_hash = {r: content_hash(blobs[r]) for r in {r for ids in refs_of.values() for r in ids} | set(pool)}

    def pair_key(key: str, ref_id: str, kind: str) -> str:
        return condition_hash(key, ref_hash[ref_id], kind)

    items = {}
    for (p, _), key in generations.items():
        for r in refs_of[p]:
            items[pair_key(key, r, "own")] = (key, r, "own")
        for r in foreign_of[p]:
            items[pair_key(key, r, "foreign")] = (key, r, "foreign")
    ref_points: dict[str, tuple[Keypoints, Keypoints]] = {}  # each reference prepared once per run
    # The generation in hand, kept across batches; the missing pairs are put in generation order
    # first (the store hands them over in hash order), so each generation is decoded and its keypoints
    # found once. In hash order, 20 CogCanvas generations took 385 keypoint searches (0.03-0.14 s each).
    opened: dict[str, tuple[Image.Image, Keypoints]] = {}

    def compute(keys: list[str], payloads: list[tuple[str, str, str]]) -> list[dict[str, np.ndarray]]:
        out = []
        for gen_key, ref_id, kind in payloads:
            if gen_key not in opened:
                image = _generation(gen_loaders[gen_key], gen_key)
                opened.clear()
                opened[gen_key] = (image, generation_keypoints(image))
            image, gen_points = opened[gen_key]
            reference = data.references[ref_id]["image"]
            if ref_id not in ref_points:
                ref_points[ref_id] = reference_keypoints(reference)
            pose = find_in_any_pose(gen_points, *ref_points[ref_id])
            record = {
                "inliers": np.int64(pose.inliers),
                "warp_correlation": np.float32(pose.correlation),
                "pose_mirrored": np.bool_(pose.mirrored),
            }
            if kind == "own" and pose.copied:  # found: the costlier correlation search adds nothing
                record.update(
                    {
                        "ncc": np.float32(-1.0),
                        "phash_distance": np.int64(64),
                        "box": np.zeros(4, dtype=np.float32),
                        "mirrored": np.bool_(False),
                        "reverse": np.bool_(False),
                    }
                )
            elif kind == "own":
                found = find_reference(image, reference)
                record.update(
                    {
                        "ncc": np.float32(found.ncc),
                        "phash_distance": np.int64(found.phash_distance),
                        "box": np.asarray(found.box, dtype=np.float32),
                        "mirrored": np.bool_(found.mirrored),
                        "reverse": np.bool_(found.direction != "reference in generation"),
                    }
                )
            out.append(record)
        return out

    tick = ctx.progress("copy check", len(items))
    batch = max(1, ctx.options.batch_size)

    def by_generation(keys: list[str]):
        ordered = sorted(keys, key=lambda k: items[k])
        for start in range(0, len(ordered), batch):
            chunk = ordered[start : start + batch]
            yield chunk, compute(chunk, [items[k] for k in chunk])

    searched = ctx.store.cached_batches("copy-search", VERSION, items, by_generation, tick)
    end_stage(tick)

    embedding = _embedding_cosines(ctx, generations, refs_of)
    plumbing = profile_is_plumbing(ctx.options.profile)
    applied = embedding is not None and not plumbing
    why_not = (
        "random weights (plumbing profile): a cosine means nothing"
        if plumbing and embedding is not None
        else "the run computed no DINOv2 features of whole generations"
    )

    results, flags, foreign_flags = [], [], []
    for (prompt_id, seed), key in generations.items():
        found_refs, foreign, record = [], [], {}
        for ref_id in refs_of[prompt_id]:
            hit = searched[pair_key(key, ref_id, "own")]
            ncc, distance = float(hit["ncc"]), int(hit["phash_distance"])
            pose = PoseMatch(int(hit["inliers"]), float(hit["warp_correlation"]), bool(hit["pose_mirrored"]))
            cosine = None if embedding is None else embedding.get((key, ref_id))
            by_pixels = ncc >= NCC_MIN and distance <= PHASH_MAX_DISTANCE
            by_embedding = applied and cosine is not None and cosine >= EMBEDDING_MIN_COSINE
            if by_pixels or pose.copied or by_embedding:
                found_refs.append(ref_id)
                record[ref_id] = {
                    "ncc": round(ncc, 4),
                    "phash_distance": distance,
                    "box": [round(float(v), 4) for v in hit["box"]],
                    "mirrored": bool(hit["mirrored"]),
                    "crop_of_reference": bool(hit["reverse"]),
                    "keypoint_inliers": pose.inliers,
                    "warp_correlation": round(pose.correlation, 4),
                    "embedding_cosine": None if cosine is None else round(cosine, 4),
                    "by": [
                        n
                        for n, yes in (("pixels", by_pixels), ("keypoints", pose.copied), ("embedding", by_embedding))
                        if yes
                    ],
                }
        for ref_id in foreign_of[prompt_id]:
            hit = searched[pair_key(key, ref_id, "foreign")]
            pose = PoseMatch(int(hit["inliers"]), float(hit["warp_correlation"]), bool(hit["pose_mirrored"]))
            if pose.copied:
                foreign.append(ref_id)
                record[ref_id] = {
                    "not_in_prompt": True,
                    "keypoint_inliers": pose.inliers,
                    "warp_correlation": round(pose.correlation, 4),
                    "by": ["keypoints"],
                }
        flag = float(bool(found_refs or foreign))
        flags.append(flag)
        foreign_flags.append(float(bool(foreign)))
        results.append(Result(prompt_id, seed, FLAG_METRIC, flag))
        results.append(Result(prompt_id, seed, PASTED_METRIC, float(len(found_refs))))
        if pool:
            results.append(Result(prompt_id, seed, FOREIGN_METRIC, float(len(foreign))))
        if found_refs or foreign:
            ctx.evidence.append((prompt_id, seed, EVIDENCE_METRIC, {"found": record}))
    return results, summarize(flags, applied, why_not, foreign=foreign_flags, pool=len(pool))


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
