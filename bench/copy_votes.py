"""The pool index's shortlist on real photographs: how many votes does a pasted reference get?

``copy_index.shortlist`` verifies the ``TOP_K`` most voted references only when they have at least
``TOP_K_MIN_VOTES`` votes, and every reference with ``MIN_VOTES``. This script measures whether that
drops any reference the full keypoint match flags: it indexes DreamBooth photographs
(bench/data/copy-calibration/photos), pastes a random crop of one (30-100 % of its side, at 3-25 % of
the canvas, sometimes mirrored or turned) onto another, and prints, for each paste the exhaustive
keypoint stage flags, its votes and whether the shortlist holds it.

Run: .venv/bin/python bench/copy_votes.py [TRIALS] [REFERENCES]   (defaults 60 and 120)
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idbench.evaluate_pkg import copy_index  # noqa: E402
from idbench.evaluate_pkg.copies import find_in_any_pose, generation_keypoints, reference_keypoints  # noqa: E402


def paste(rng: random.Random, background: Image.Image, source: Image.Image) -> Image.Image:
    out = background.resize((512, 512))
    w, h = source.size
    fraction = rng.choice([0.3, 0.5, 0.7, 1.0])
    cw, ch = int(w * fraction), int(h * fraction)
    x0, y0 = rng.randrange(w - cw + 1), rng.randrange(h - ch + 1)
    crop = source.crop((x0, y0, x0 + cw, y0 + ch))
    side = int((rng.choice([0.03, 0.06, 0.12, 0.25]) * 512 * 512) ** 0.5)
    crop = crop.resize((side, max(8, int(side * ch / cw))))
    if rng.random() < 0.3:
        crop = ImageOps.mirror(crop)
    if rng.random() < 0.3:
        crop = crop.rotate(rng.choice([15, 90, -30]), expand=True)
    out.paste(crop, (rng.randrange(0, 512 - crop.size[0] + 1), rng.randrange(0, 512 - crop.size[1] + 1)))
    return out


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    files = sorted((ROOT / "bench/data/copy-calibration/photos").glob("*/*.jpg"))[:count]
    pictures = [Image.open(f).convert("RGB") for f in files]
    prepared = copy_index.parallel_map(reference_keypoints, pictures)
    index = copy_index.build_index(prepared)
    rng = random.Random(0)
    flagged_votes, missed = [], 0
    for _ in range(trials):
        background, source = rng.randrange(len(files)), rng.randrange(len(files))
        if files[background].parent == files[source].parent:
            continue
        generation = generation_keypoints(paste(rng, pictures[background], pictures[source]))
        if not find_in_any_pose(generation, *prepared[source]).copied:
            continue
        votes = int(copy_index.votes(index, generation)[source])
        held = source in {p for p, _ in copy_index.shortlist(index, generation, exclude=[background])}
        flagged_votes.append(votes)
        missed += not held
        print(f"{files[source].parent.name}/{files[source].name}: {votes} votes, shortlisted {held}")
    print(
        f"{len(flagged_votes)} pastes flagged by the full match; votes min {min(flagged_votes)}, "
        f"median {sorted(flagged_votes)[len(flagged_votes) // 2]}; not shortlisted: {missed} "
        f"(TOP_K_MIN_VOTES {copy_index.TOP_K_MIN_VOTES}, MIN_VOTES {copy_index.MIN_VOTES})"
    )


if __name__ == "__main__":
    main()
