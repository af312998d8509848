"""The copy check in both directions, on a licensed calibration set: what it must flag, what it must not.

Must flag (each transformation applied to every calibration reference: the DreamBooth photographs in
``bench/data/copy-calibration/photos`` and the shipped samples; the generation saved as JPEG at quality 90):
a keystone (perspective) warp of 15 % and 30 %, a quarter turn, a paste at 5 % of a 1,024 px background,
a subject cut from its plain background onto a photograph (references on a plain background), and the
face (dlib's box x 1.0 and x 1.3, where dlib finds one) pasted in one slot of a three-slot layout.
Also the pairs of the set that are one photograph shifted or flipped (cat 02/03, dog5 02/03: the set's
own notes say so).

Must not flag: every ordered pair of different photographs of one subject (668), the re-drawn cartoon
character (red_cartoon, 12 pairs) and every ordered pair of different shipped samples.

Each pair is decided as the scorer decides it: the keypoint stage, then the pixel stage when the keypoint
stage found nothing (the table counts the flags the pixel stage alone gave). ``--copies FILE`` runs another version of evaluate_pkg/copies.py (for a before/after
table: ``git show REV:evaluate_pkg/copies.py > /tmp/old.py``).

Run: .venv/bin/python bench/copy_calibration.py [--copies FILE] [--out rows.json]
"""

from __future__ import annotations

import argparse
import collections
import glob
import importlib.util
import io
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION = ROOT / "bench" / "data" / "copy-calibration" / "photos"
# One photograph shifted or flipped within the set (its references_and_licenses.txt): copies.
SAME_PHOTOGRAPH = {("cat", "02", "03"), ("dog5", "02", "03")}


def load_copies(path: str | None):
    if not path:
        from idbench.evaluate_pkg import copies

        return copies
    spec = importlib.util.spec_from_file_location("copies_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def jpeg(image: Image.Image, quality: int = 90) -> Image.Image:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


class Maker:
    """The transformations, each drawn with one seeded generator (the same pictures every run)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        files = sorted(glob.glob(str(ROOT / "samples" / "backgrounds" / "*" / "*.jpg")))
        self.backgrounds = [Image.open(f).convert("RGB") for f in files]
        self.detector = None

    def background(self, size=(1024, 1024)) -> Image.Image:
        return ImageOps.fit(self.backgrounds[int(self.rng.integers(len(self.backgrounds)))], size)

    def keystone(self, reference: Image.Image, amount: float) -> Image.Image:
        import cv2

        w, h = reference.size
        inset = amount * w / 2
        source = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
        target = np.float32([[inset, 0], [w - inset, 0], [w, h], [0, h]])
        matrix = cv2.getPerspectiveTransform(source, target)
        out = np.asarray(self.background((w, h))).copy()
        warped = cv2.warpPerspective(np.asarray(reference), matrix, (w, h))
        inside = cv2.warpPerspective(np.ones((h, w), np.uint8), matrix, (w, h)) > 0
        out[inside] = warped[inside]
        return Image.fromarray(out)

    def paste(self, reference: Image.Image, share: float, mask: np.ndarray | None = None) -> Image.Image:
        canvas = self.background()
        scale = np.sqrt(share * canvas.width * canvas.height / (reference.width * reference.height))
        size = (max(8, round(reference.width * scale)), max(8, round(reference.height * scale)))
        small = reference.resize(size, Image.Resampling.LANCZOS)
        alpha = None if mask is None else Image.fromarray(mask.astype(np.uint8) * 255).resize(size)
        x = int(self.rng.integers(0, max(1, canvas.width - size[0])))
        y = int(self.rng.integers(0, max(1, canvas.height - size[1])))
        canvas.paste(small, (x, y), alpha)
        return canvas

    def cutout(self, reference: Image.Image, copies) -> Image.Image | None:
        mask = copies.subject_mask(np.asarray(reference)) if hasattr(copies, "subject_mask") else None
        if mask is None:
            from idbench.evaluate_pkg.copies import subject_mask

            mask = subject_mask(np.asarray(reference))
        return None if mask.all() else self.paste(reference, 0.25, mask)

    def face(self, reference: Image.Image, factor: float) -> Image.Image | None:
        import dlib

        self.detector = self.detector or dlib.get_frontal_face_detector()
        found = self.detector(np.asarray(reference), 1)
        if not found:
            return None
        box = max(found, key=lambda d: d.width() * d.height())
        cx, cy = (box.left() + box.right()) / 2, (box.top() + box.bottom()) / 2
        w, h = box.width() * factor, box.height() * factor
        crop = reference.crop(
            (
                max(0, round(cx - w / 2)),
                max(0, round(cy - h / 2)),
                min(reference.width, round(cx + w / 2)),
                min(reference.height, round(cy + h / 2)),
            )
        )
        canvas = self.background((1024, 768))
        height = int(768 * self.rng.uniform(0.15, 0.3))
        small = crop.resize((max(8, round(crop.width * height / crop.height)), height), Image.Resampling.LANCZOS)
        slot = int(self.rng.integers(3))
        canvas.paste(small, (slot * 341 + (341 - small.width) // 2, 192))
        return canvas


def references() -> dict[str, Image.Image]:
    out = {}
    for f in sorted(glob.glob(str(CALIBRATION / "*" / "*.jpg"))):
        out[f"photos/{Path(f).parent.name}/{Path(f).stem}"] = Image.open(f).convert("RGB")
    samples = ROOT / "samples"
    for pattern in ("subjects/**/*.jpg", "faces/*.jpg", "objects/**/*.jpg"):
        for f in sorted(glob.glob(str(samples / pattern), recursive=True)):
            out["samples/" + str(Path(f).relative_to(samples))] = Image.open(f).convert("RGB")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", help="another copies.py to measure (default: the installed one)")
    parser.add_argument("--out", help="write every pair's outcome here (JSON)")
    args = parser.parse_args()
    copies = load_copies(args.copies)
    maker = Maker()
    refs = references()
    start = time.process_time()
    ref_points = {k: copies.reference_keypoints(v) for k, v in refs.items()}
    gen_points = {k: copies.generation_keypoints(v) for k, v in refs.items()}

    stage_of: dict[int, str] = {}  # id of a row's outcome -> the stage that flagged it

    def flagged(generation: Image.Image, ref_key: str, points=None) -> bool:
        points = points or copies.generation_keypoints(generation)
        pose = copies.find_in_any_pose(points, *ref_points[ref_key])
        # What the keypoint stage saw, kept for the rows: it decides where the pixel stage is worth running.
        seen = {
            "inliers": pose.inliers,
            "warp_correlation": round(pose.correlation, 4),
            "share": pose.share,
            "residual": pose.residual,
            "drawing": pose.drawing,
            "reference_keypoints": len(ref_points[ref_key][0].points),
            "generation_keypoints": len(points.points),
        }
        if pose.copied:
            stage_of[len(stage_of)] = ("keypoints", seen)
            return True
        found = copies.find_reference(generation, refs[ref_key])
        seen.update(
            ncc=round(found.ncc, 4), phash_distance=found.phash_distance, masked=found.masked, detail=found.detail
        )
        stage_of[len(stage_of)] = ("pixels" if found.copied else "", seen)
        return found.copied

    transforms = {
        "keystone 15 %": lambda r: maker.keystone(r, 0.15),
        "keystone 30 %": lambda r: maker.keystone(r, 0.30),
        "quarter turn": lambda r: r.transpose(Image.Transpose.ROTATE_90),
        "paste at 5 % of the area": lambda r: maker.paste(r, 0.05),
        "subject cut onto a photograph": lambda r: maker.cutout(r, copies),
        "face box x 1.0 in a layout": lambda r: maker.face(r, 1.0),
        "face box x 1.3 in a layout": lambda r: maker.face(r, 1.3),
    }
    rows = []
    for key, reference in refs.items():
        for name, make in transforms.items():
            generation = make(reference)
            if generation is not None:
                rows.append({"kind": name, "copy": True, "reference": key, "flagged": flagged(jpeg(generation), key)})
    subjects = collections.defaultdict(list)
    for key in refs:
        if key.startswith("photos/"):
            subjects[key.split("/")[1]].append(key)
    for subject, keys in subjects.items():
        for a, b in itertools.permutations(keys, 2):
            pair = (subject, *sorted((a.split("/")[2], b.split("/")[2])))
            kind = (
                "one photograph shifted or flipped"
                if pair in SAME_PHOTOGRAPH
                else "re-drawn character"
                if subject == "red_cartoon"
                else "another photograph of the subject"
            )
            rows.append(
                {
                    "kind": kind,
                    "copy": kind.startswith("one"),
                    "reference": a,
                    "generation": b,
                    "flagged": flagged(refs[b], a, gen_points[b]),
                }
            )
    sample_keys = [k for k in refs if k.startswith("samples/")]
    for a, b in itertools.permutations(sample_keys, 2):
        rows.append(
            {
                "kind": "another sample picture",
                "copy": False,
                "reference": a,
                "generation": b,
                "flagged": flagged(refs[b], a, gen_points[b]),
            }
        )
    seconds = time.process_time() - start
    for k, row in enumerate(rows):  # flagged() ran once per row, in the rows' order
        row["stage"], row["keypoint_stage"] = stage_of[k]
    table = collections.defaultdict(list)
    for row in rows:
        table[(row["copy"], row["kind"])].append(row["flagged"])
    by_pixels = collections.Counter((row["copy"], row["kind"]) for row in rows if row["stage"] == "pixels")
    print("| must | kind | pairs | flagged | flagged by the pixel stage alone |")
    print("|---|---|---|---|---|")
    for (copy, kind), hits in sorted(table.items(), key=lambda item: (not item[0][0], item[0][1])):
        alone = by_pixels[(copy, kind)]
        print(f"| {'flag' if copy else 'not flag'} | {kind} | {len(hits)} | {100 * np.mean(hits):.1f} % | {alone} |")
    print(f"{len(rows)} pairs, {seconds:.0f} CPU s")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
