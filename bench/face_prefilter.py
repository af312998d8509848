"""When may dlib-face skip its slow CNN face search? The cheap candidate check, calibrated both ways.

``DlibFaceEncoder`` runs HOG first and, only when HOG finds nothing, dlib's CNN (``mmod``) on a copy scaled
to a 640 px long side: about 3 CPU seconds a picture here, 100 times HOG. Most pictures that reach the CNN
hold no face at all (backgrounds, objects, animals, noise, flat figures), and the CNN says so after those 3 s.
The candidate check runs HOG once more on that same 640 px copy, with no upsampling and a low threshold
(``cnn_candidate_threshold``): the CNN runs only where this loose HOG sees a face-like window.

Must keep (the check must fire): every picture where HOG at its normal setting finds nothing and the CNN
finds a face. They are made from every shipped sample with a face (photographs, 19th-century portraits,
cartoons, flat vector drawings, 3-D renders), each shrunk so that the face is 15-45 % of a 256 px or 512 px
picture, pasted on each background kind, also in grey, blurred, turned 15 degrees, darkened and saved as
JPEG at quality 35.
Should skip (the check's silence saves the CNN): the shipped pictures without a person, the DreamBooth
calibration photographs (animals and objects), noise and flat pictures.

The check misses a face only where it is silent and the CNN finds one: that count must be 0 at the chosen
threshold, with a margin (the lowest loose-HOG score among the faces kept is printed).

Run: .venv/bin/python bench/face_prefilter.py [--threshold -0.8] [--limit N]
"""

from __future__ import annotations

import argparse
import glob
import io
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter, ImageOps

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
PHOTOS = ROOT / "bench" / "data" / "copy-calibration" / "photos"


def rgb(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))


def variants(face: Image.Image, backgrounds: list[Image.Image]) -> list[tuple[str, Image.Image]]:
    """The face picture shrunk and pasted on each background, at two canvas sizes, and degraded."""
    out = []
    for canvas_side in (256, 512):
        for share in (0.15, 0.25, 0.45):
            for b, background in enumerate(backgrounds):
                canvas = ImageOps.fit(background, (canvas_side, canvas_side)).convert("RGB")
                small = face.copy()
                small.thumbnail((int(canvas_side * share * 1.6),) * 2)
                canvas.paste(small.convert("RGB"), (canvas_side // 3, canvas_side // 5))
                name = f"{canvas_side}px share{share} bg{b}"
                out.append((name, canvas))
                if b == 0 and share == 0.25:
                    buffer = io.BytesIO()
                    canvas.save(buffer, "JPEG", quality=35)
                    out += [
                        (name + " grey", ImageOps.grayscale(canvas).convert("RGB")),
                        (name + " blur", canvas.filter(ImageFilter.GaussianBlur(1.5))),
                        (name + " turned", canvas.rotate(15, resample=Image.Resampling.BILINEAR)),
                        (name + " dark", ImageEnhance.Brightness(canvas).enhance(0.5)),
                        (name + " jpeg35", Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")),
                    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threshold", type=float, default=None, help="default: the encoder's")
    parser.add_argument("--limit", type=int, default=0, help="at most this many pictures of each kind (0: all)")
    args = parser.parse_args()

    from idbench.evaluate_pkg.models.faces import DlibFaceEncoder, load_dlib_face
    from idbench.evaluate_pkg.models.registry import get_card

    encoder = load_dlib_face(get_card("dlib-face"))
    threshold = DlibFaceEncoder.cnn_candidate_threshold if args.threshold is None else args.threshold
    models = encoder._load()

    def full_search(picture: np.ndarray) -> tuple[str, int]:
        saved = encoder.cnn_candidate_threshold
        encoder.cnn_candidate_threshold = None  # the search without the check: the reference answer
        try:
            rects, _, detector = encoder.detect(picture)
        finally:
            encoder.cnn_candidate_threshold = saved
        return detector, len(rects)

    def candidate(picture: np.ndarray) -> tuple[bool, float | None, float]:
        small = encoder.cnn_copy(picture)[0]
        started = time.process_time()
        _, scores, _ = models["hog"].run(small, 0, threshold)
        return bool(len(scores)), (max(scores) if len(scores) else None), time.process_time() - started

    backgrounds = [Image.open(p) for p in sorted(glob.glob(str(SAMPLES / "backgrounds" / "*" / "*.jpg")))[::5]]
    faces = []
    for path in sorted(glob.glob(str(SAMPLES / "**" / "*.jpg"), recursive=True)):
        if full_search(rgb(Image.open(path)))[1]:
            faces.append(path)
    keep_rows = []
    for path in faces:
        for name, picture in variants(Image.open(path), backgrounds):
            keep_rows.append((f"{Path(path).name} {name}", rgb(picture)))
    skip_rows = [
        (Path(p).name, rgb(Image.open(p)))
        for p in sorted(glob.glob(str(SAMPLES / "**" / "*.jpg"), recursive=True))
        if p not in faces
    ]
    skip_rows += [
        (str(Path(p).relative_to(PHOTOS)), rgb(Image.open(p))) for p in sorted(glob.glob(str(PHOTOS / "*" / "*")))
    ]
    noise = np.random.default_rng(0)
    skip_rows += [(f"noise {s}", noise.integers(0, 256, (s, s, 3), dtype=np.uint8)) for s in (64, 256, 512)]
    skip_rows += [(f"flat {s}", np.full((s, s, 3), 127, np.uint8)) for s in (64, 256, 512)]
    if args.limit:
        keep_rows, skip_rows = (
            keep_rows[:: max(1, len(keep_rows) // args.limit)],
            skip_rows[:: max(1, len(skip_rows) // args.limit)],
        )

    kept, missed, lowest, cnn_seconds, check_seconds = 0, [], None, 0.0, 0.0
    for name, picture in keep_rows:
        hog_rects = models["hog"].run(picture, encoder.upsample, 0.0)[0]
        if len(hog_rects):
            continue  # HOG finds it: the CNN never runs
        started = time.process_time()
        detector, count = full_search(picture)
        cnn_seconds += time.process_time() - started
        if not count:
            continue  # nobody finds a face: nothing to keep
        fired, score, seconds = candidate(picture)
        check_seconds += seconds
        kept += 1
        if fired:
            lowest = score if lowest is None else min(lowest, score)
        else:
            missed.append(name)
    skipped, reached = 0, 0
    for _name, picture in skip_rows:
        if len(models["hog"].run(picture, encoder.upsample, 0.0)[0]):
            continue
        reached += 1
        fired, _, seconds = candidate(picture)
        check_seconds += seconds
        skipped += not fired
    print(f"threshold {threshold}: {len(faces)} sample pictures with a face, {len(keep_rows)} variants")
    print(f"must keep: {kept} pictures where only the CNN finds the face; the check missed {len(missed)}")
    for name in missed:
        print(f"  missed: {name}")
    print(f"  lowest loose-HOG score among those kept: {lowest}")
    print(
        f"should skip: {reached} face-less pictures reach the CNN; the check skips {skipped} ({skipped / max(reached, 1):.0%})"
    )
    per_cnn = cnn_seconds / max(kept, 1)
    per_check = check_seconds / max(kept + reached, 1)
    print(f"CPU seconds a picture: CNN {per_cnn:.2f}, check {per_check:.3f}")


if __name__ == "__main__":
    main()
