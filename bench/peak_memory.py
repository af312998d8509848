"""Peak memory of scoring one image, by its size: the working-size path against the old full decode.

For each image side (512, 2048, 4096, 6324, 8192) a synthetic photo-like PNG is written (8192 is
8192 x 4096: a square that large is over the 40 MP limit and refused on its header), then a fresh
child process runs the scoring path on it with the tiny profile's models, offline: CLIP, DINOv2 and
DINOv3 features (the aesthetic head reads CLIP's), dlib face detection and description (the tiny profile's face model, with real
weights), Grounding DINO detections, SAM 2 masks of those boxes, and a DINOv2 crop of the first box,
all through the feature store and ``Context`` as the suites call them. The child reports its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``), its RSS once the models are loaded, and the time of
the image's part. ``--path full`` replaces the working image by the old full decode
(``normalize_image``) everywhere, which is what scoring did before the working size existed.

Run: HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 .venv/bin/python bench/peak_memory.py [--sides 512,2048] [--format png|jpeg|rgba]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIDES = (512, 2048, 4096, 6324, 8192)
ROLES = ("clip", "dinov2", "dinov3", "face")  # the aesthetic head reads CLIP's embedding: no image of its own


def image_shape(side: int) -> tuple[int, int]:
    """(width, height) measured for ``side``: square up to the 40 MP limit, 2:1 above it."""
    return (side, side) if side * side <= 40_000_000 else (side, side // 2)


def make_image(side: int, folder: Path, fmt: str) -> Path:
    """A smooth gradient with blocks of noise: compresses like a photo (neither flat nor random)."""
    from PIL import Image

    width, height = image_shape(side)
    rng = np.random.default_rng(side)
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :]
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    noise = rng.integers(0, 40, size=(height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    noise = np.repeat(np.repeat(noise, 16, axis=0), 16, axis=1)[:height, :width]
    pixels = np.stack(
        [
            np.broadcast_to(x, (height, width)),
            np.broadcast_to(y, (height, width)),
            np.broadcast_to((x + y) / 2, (height, width)),
        ],
        axis=-1,
    )
    pixels = np.clip(pixels + noise, 0, 255).astype(np.uint8)
    if fmt == "rgba":  # a PNG with an alpha channel (a gradient): 4 bytes a pixel decoded, then composited
        alpha = np.broadcast_to(np.linspace(64, 255, width, dtype=np.float32)[None, :], (height, width))
        pixels = np.dstack([pixels, alpha.astype(np.uint8)])
    path = folder / f"side{side}.{'png' if fmt == 'rgba' else fmt}"
    Image.fromarray(pixels).save(path, format="JPEG" if fmt == "jpeg" else "PNG", quality=92)
    return path


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def child(image_path: Path, path_kind: str, work: Path) -> dict:
    """Score one image in this (fresh) process; what the parent prints."""
    from idbench.evaluate_pkg import context as context_module
    from idbench.evaluate_pkg import images as images_module
    from idbench.evaluate_pkg.context import Context, Models, ScoreOptions, crop_bytes
    from idbench.evaluate_pkg.features import FeatureStore

    if path_kind == "full":
        # The old path: every model gets the fully decoded image (boxes then are already full-size).
        def full(data, *, where, submitted=False, max_side=None):
            image = images_module.normalize_image(data, where=where, submitted=submitted)
            image.info[images_module.ORIGINAL_SIZE_KEY] = image.size
            return image

        images_module.working_image = full
        context_module.working_image = full

    options = ScoreOptions(profile="tiny", models_dir=str(work / "models"), batch_size=8)
    models = Models(options)
    models.preload(ROLES + ("detector", "segmenter"))
    loaded_mb = peak_rss_mb()

    data = image_path.read_bytes()
    key = hashlib.sha256(data).hexdigest()
    loaders = {key: images_module.ImageSource(lambda: data, where=image_path.name, submitted=True)}
    # A fresh feature cache per child: nothing of the image may come from an earlier run.
    store = FeatureStore(tempfile.mkdtemp(prefix="features-", dir=work))
    ctx = Context(data=None, submission=None, store=store, models=models, options=options)
    start = time.perf_counter()
    for role in ROLES:
        ctx.image_features(role, loaders)
    boxes = ctx.detections(loaders, {key: ["a person", "a hat"]})[key]["boxes"]
    ctx.foreground_masks(loaders, {key: boxes})
    if len(boxes):
        blob = crop_bytes(data, boxes[0], keep=models["dinov2"].square_keep())
        ctx.image_features("dinov2", {hashlib.sha256(blob).hexdigest(): lambda: blob})
    seconds = time.perf_counter() - start
    return {"loaded_mb": loaded_mb, "peak_mb": peak_rss_mb(), "seconds": seconds}


def decode_baseline(image_path: Path) -> dict:
    """The plainest full decode, for scale: Image.open().convert("RGB") and its numpy array."""
    from PIL import Image

    before = peak_rss_mb()
    start = time.perf_counter()
    with Image.open(image_path) as image:
        array = np.asarray(image.convert("RGB"))
    return {
        "loaded_mb": before,
        "peak_mb": peak_rss_mb(),
        "seconds": time.perf_counter() - start,
        "shape": list(array.shape),
    }


def make_image_elsewhere(side: int, folder: Path, fmt: str) -> Path:
    """make_image in a child process: Linux carries a parent's peak RSS into a child's ``ru_maxrss``
    across fork and exec, so the parent must never hold a large image itself."""
    return Path(run_child([str(side), str(folder), fmt], flag="--make")["path"])


def run_child(args: list[str], flag: str = "--child") -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    done = subprocess.run([sys.executable, __file__, flag, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sides", default=",".join(map(str, SIDES)))
    parser.add_argument("--format", choices=("png", "jpeg", "rgba"), default="png")
    parser.add_argument("--paths", default="working,full", help="which paths to measure: working, full, decode")
    parser.add_argument("--child", nargs=3, metavar=("IMAGE", "PATH", "WORK"), help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs=3, metavar=("SIDE", "FOLDER", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        side, folder, fmt = args.make
        print(json.dumps({"path": str(make_image(int(side), Path(folder), fmt))}))
        return
    if args.child:
        image, kind, work = args.child
        result = decode_baseline(Path(image)) if kind == "decode" else child(Path(image), kind, Path(work))
        print(json.dumps(result))
        return

    kinds = args.paths.split(",")
    with tempfile.TemporaryDirectory(prefix="idbench-peak-") as tmp:
        work = Path(tmp)
        # Make the tiny models once, outside the measured children.
        warm = run_child([str(make_image_elsewhere(512, work, args.format)), "working", str(work)])
        if "error" in warm:
            raise SystemExit(f"the tiny models could not be made or run: {warm['error']}")
        print("peak RSS in MB (in brackets: above the RSS with the models loaded), time of the image's part in s")
        print(
            f"{'image':>12} {'MP':>5} "
            + " ".join(f"{k + ' peak MB':>17} {k + ' s':>9}" for k in kinds)
            + "   peak ratio full/working"
        )
        for side in (int(s) for s in args.sides.split(",")):
            path = make_image_elsewhere(side, work, args.format)
            width, height = image_shape(side)
            row = {k: run_child([str(path), k, str(work)]) for k in kinds}
            cells = []
            for k in kinds:
                r = row[k]
                cells.append(
                    f"{'error':>16} {'':>9}"
                    if "error" in r
                    else f"{r['peak_mb']:10.0f} ({r['peak_mb'] - r['loaded_mb']:4.0f}) {r['seconds']:9.2f}"
                )
            ratio = ""
            if "working" in row and "full" in row and "peak_mb" in row["working"] and "peak_mb" in row["full"]:
                ratio = f"{row['full']['peak_mb'] / row['working']['peak_mb']:.2f}x"
            print(f"{width:>5}x{height:<6} {width * height / 1e6:5.1f} " + " ".join(cells) + f"   {ratio}", flush=True)
            for k in kinds:
                if "error" in row[k]:
                    print(f"    {k}: {row[k]['error']}")
        loaded = {k: row[k].get("loaded_mb") for k in kinds}
        print(f"RSS with the models loaded, before the image: {loaded}")


if __name__ == "__main__":
    main()
