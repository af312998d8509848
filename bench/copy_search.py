"""The copy check's search: coarse-to-fine and gated vs the obvious exhaustive search.

The obvious way correlates the reference with the generation at every scale a quarter of a coarse step
apart (the fine pass's precision) at the full working size, in all four (direction, orientation)
searches. The shipped way (``find_reference``) runs the coarse scales at half size and refines, around
the best coarse scale, only the searches that reach ``COARSE_GATE``, with ``FINE_EVALUATIONS``
correlations each. Both must flag the same pairs; the script checks it.

Run: .venv/bin/python bench/copy_search.py [N]   (N sample photographs, default 10: N*(N-1)/2 pairs of
different pictures, plus N copies, mirrors and 3-image collages that must be flagged)
"""

from __future__ import annotations

import glob
import itertools
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idbench.evaluate_pkg import copies as C  # noqa: E402


def exhaustive(generation: Image.Image, reference: Image.Image) -> bool:
    """Every scale at fine spacing, full working size, all four searches; the same confirmation."""
    gen, ref = C._grey(generation, C.WORK_SIDE), C._grey(reference, C.WORK_SIDE)
    ratio = C.COARSE_RATIO**0.25  # the fine pass's last spacing
    best = None
    for mirrored in (False, True):
        needle_ref = ref[:, ::-1].copy() if mirrored else ref
        for direction, hay, needle, smallest in (
            (0, gen, needle_ref, 0.0),
            (1, needle_ref, gen, C.REVERSE_MIN_FRACTION),
        ):
            fit = min(hay.shape[0] / needle.shape[0], hay.shape[1] / needle.shape[1])
            low = max(C.MIN_TEMPLATE_SIDE / min(needle.shape), fit * smallest)
            for scale in C._scales(fit, low, ratio):
                found = C._best_at(hay, needle, scale)
                if found and (best is None or found[0] > best[0]):
                    best = (found[0], direction, mirrored, found[1])
    if best is None:
        return False
    ncc, direction, mirrored, (x, y, w, h) = best
    shape = gen.shape if direction == 0 else ref.shape
    ref_full = ImageOps.mirror(reference) if mirrored else reference
    searched, other = (generation, ref_full) if direction == 0 else (ref_full, generation)
    sx, sy = searched.width / shape[1], searched.height / shape[0]
    window = searched.crop((round(x * sx), round(y * sy), round((x + w) * sx), round((y + h) * sy)))
    return ncc >= C.NCC_MIN and int(C._phash(window) - C._phash(other)) <= C.PHASH_MAX_DISTANCE


def collage(images: list[Image.Image], size: int = 768) -> Image.Image:
    canvas = Image.new("RGB", (size, size), (128, 128, 128))
    for k, image in enumerate(images):
        small = image.copy()
        small.thumbnail((size // len(images) - 8, size // 2))
        canvas.paste(small, (k * (size // len(images)), size // 4))
    return canvas


def main(n: int) -> None:
    files = sorted(glob.glob(str(ROOT / "samples" / "**" / "*.jpg"), recursive=True))
    photos = [Image.open(f).convert("RGB") for f in files[:: max(1, len(files) // n)][:n]]
    negatives = list(itertools.combinations(photos, 2))
    positives = [
        (g, r)
        for k, r in enumerate(photos)
        for g in (r, ImageOps.mirror(r), collage([photos[k - 1], r, photos[(k + 1) % n]]))
    ]
    pairs = [(g, r, True) for g, r in positives] + [(g, r, False) for g, r in negatives]
    C._phash(photos[0])  # imports outside the timing
    timings = {}
    for name, search in (
        ("exhaustive", exhaustive),
        ("coarse-to-fine, gated", lambda g, r: C.find_reference(g, r).copied),
    ):
        start = time.perf_counter()
        flags = [search(g, r) for g, r, _ in pairs]
        timings[name] = time.perf_counter() - start
        wrong = sum(f != truth for f, (_, _, truth) in zip(flags, pairs))
        print(f"{name:>22}: {1000 * timings[name] / len(pairs):7.1f} ms/pair, {wrong} of {len(pairs)} pairs wrong")
    print(
        f"speed-up: {timings['exhaustive'] / timings['coarse-to-fine, gated']:.1f}x "
        f"({len(positives)} copies/pastes, {len(negatives)} pairs of different photographs)"
    )
    assert np.isfinite(list(timings.values())).all()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
