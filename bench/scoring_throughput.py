"""Scoring throughput: the feature store against the per-metric, image-by-image way of the anchors.

Both ways compute the same embedding metrics of Identity Collapse (CLIP-T, whole-image DINOv2
similarity, SCR at 0.4 / 0.5 / 0.6) on the same synthetic submission (one distinct image per prompt
and seed; the N references of each prompt shared across prompts) with the same encoders:

- per metric: every metric on its own, image by image (batch 1), encoding the generation and every
  reference of its prompt again for each metric, as the anchor scripts do;
- store: each unique image decoded once and encoded once per encoder, in batches, then matrix math.

It checks that both give the same numbers, then prints both times, the ratio, images per second, and
the store's time at 1x, 2x and 4x the images (cost should grow linearly with unique images).

Run: .venv/bin/python bench/scoring_throughput.py [--profile tiny|paper-random|paper] [--device cpu|cuda]
`tiny` is the CPU measurement of the README; `paper-random` is the registry's profile of that name (the
papers' model sizes, CLIP ViT-L/14 and DINOv2-base here, with random weights made here), for timing a GPU
without downloads (on an H200:
`--profile paper-random --device cuda --scales 1,4,16`); `paper` needs the real weights in the caches.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idbench.benchmarks.identity_collapse.spec import SCR_THRESHOLDS
from idbench.builders.build import build
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.features import FeatureStore
from idbench.evaluate_pkg.images import normalize_image
from idbench.evaluate_pkg.models.registry import load_model, resolve_profile


def synthetic_generations(data, copies: int, size: int = 256) -> list[tuple[str, int, bytes]]:
    """One distinct picture per (prompt, seed, copy): the prompt's references side by side plus noise."""
    out = []
    rng = np.random.default_rng(0)
    for copy in range(copies):
        for prompt_id, seed in data.required_pairs:
            refs = [data.references[s]["image"].convert("RGB") for s in data.prompt_rows[prompt_id]["subject_ids"]]
            canvas = Image.new("RGB", (size, size), (128, 128, 128))
            width = size // len(refs)
            for k, ref in enumerate(refs):
                canvas.paste(ref.resize((width, size // 2)), (k * width, size // 4))
            noisy = np.asarray(canvas, dtype=np.int16) + rng.integers(-6, 7, size=(size, size, 3))
            buffer = io.BytesIO()
            Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, format="PNG", compress_level=1)
            out.append((prompt_id, seed + 1000 * copy, buffer.getvalue()))
    return out


def per_metric_way(data, generations, clip, dino) -> dict[str, list[float]]:
    """Each metric on its own, image by image, references re-encoded every time (the slow obvious way)."""
    prompts = data.prompt_rows
    ref_bytes = data.reference_bytes

    def embed(encoder, blob, field):
        batch = encoder.collate([encoder.preprocess(normalize_image(blob, where="bench"))])
        with torch.inference_mode():
            return encoder.encode_batch(batch)[0][field]

    scores: dict[str, list[float]] = {"clip_t": [], "dino_sim": [], **{f"scr@{t}": [] for t in SCR_THRESHOLDS}}
    for prompt_id, _, blob in generations:  # CLIP-T
        with torch.inference_mode():
            text = clip.encode_texts([prompts[prompt_id]["prompt"]])[0]
        scores["clip_t"].append(float(F.clip_t(embed(clip, blob, "embedding"), text)[0]))
    for metric in ["dino_sim", *(f"scr@{t}" for t in SCR_THRESHOLDS)]:  # DINO-Sim, then each SCR on its own
        for prompt_id, _, blob in generations:
            refs = np.stack([embed(dino, ref_bytes[s], "cls") for s in prompts[prompt_id]["subject_ids"]])
            sim = F.dino_sim(embed(dino, blob, "cls"), refs)
            value = sim.mean if metric == "dino_sim" else F.subject_collapse_rate(sim.per_reference, float(metric[4:]))
            scores[metric].append(float(value))
    return scores


def store_way(data, generations, clip, dino, cache: Path, batch_size: int, num_workers: int) -> dict[str, list[float]]:
    """Unique images through the feature store once per encoder, then the metrics as matrix math."""
    prompts = data.prompt_rows
    store = FeatureStore(cache)
    gen_keys = [hashlib.sha256(blob).hexdigest() for _, _, blob in generations]
    gen_loaders = {k: (lambda b=blob: b) for k, (_, _, blob) in zip(gen_keys, generations)}
    ref_ids = sorted({s for p in prompts.values() for s in p["subject_ids"]})
    ref_bytes = data.reference_bytes
    ref_keys = {s: hashlib.sha256(ref_bytes[s]).hexdigest() for s in ref_ids}
    ref_loaders = {ref_keys[s]: (lambda s=s: ref_bytes[s]) for s in ref_ids}

    gen_clip = store.encode_images(clip, gen_loaders, batch_size=batch_size, num_workers=num_workers)
    texts = store.encode_texts(clip, [p["prompt"] for p in prompts.values()])
    cls = store.encode_images(dino, {**gen_loaders, **ref_loaders}, batch_size=batch_size, num_workers=num_workers)

    scores: dict[str, list[float]] = {"clip_t": [], "dino_sim": [], **{f"scr@{t}": [] for t in SCR_THRESHOLDS}}
    image_emb = np.stack([gen_clip[k]["embedding"] for k in gen_keys])
    text_emb = np.stack([texts[prompts[p]["prompt"]] for p, _, _ in generations])
    scores["clip_t"] = F.clip_t(image_emb, text_emb).tolist()
    for (prompt_id, _, _), key in zip(generations, gen_keys):
        sim = F.dino_sim(
            cls[key]["cls"], np.stack([cls[ref_keys[s]]["cls"] for s in prompts[prompt_id]["subject_ids"]])
        )
        scores["dino_sim"].append(sim.mean)
        for tau in SCR_THRESHOLDS:
            scores[f"scr@{tau}"].append(F.subject_collapse_rate(sim.per_reference, tau))
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="tiny", choices=("tiny", "paper-random", "paper"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--scales", default="1,2,4", help="multiples of the 225 base images for the store")
    parser.add_argument("--skip-per-metric", action="store_true", help="time the store only")
    args = parser.parse_args()
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory(prefix="idbench-bench-") as tmp:
        tmp = Path(tmp)
        build("identity-collapse", out=tmp / "data")
        data = load_benchmark_data(tmp / "data", cache_dir=str(tmp / "hf"))
        # paper-random: the registry's full-size random CLIP and DINOv2, made here on first use (~2 GB)
        names = {role: card.name for role, card in resolve_profile(args.profile).items()}
        clip = load_model(names["clip"], device=args.device, models_dir=tmp / "models")
        dino = load_model(names["dinov2"], device=args.device, models_dir=tmp / "models")
        base = synthetic_generations(data, 1)
        print(
            f"profile {args.profile} on {args.device}; {len(base)} generated images, "
            f"{len(data.references)} shared references; metrics clip_t, dino_sim, scr@0.4/0.5/0.6"
        )

        if not args.skip_per_metric:
            start = time.perf_counter()
            slow = per_metric_way(data, base, clip, dino)
            t_slow = time.perf_counter() - start
            start = time.perf_counter()
            fast = store_way(data, base, clip, dino, tmp / "cache-1", args.batch_size, args.num_workers)
            t_fast = time.perf_counter() - start
            worst = max(float(np.max(np.abs(np.array(slow[m]) - np.array(fast[m])))) for m in slow)
            print(f"per metric, image by image: {t_slow:8.2f} s  ({len(base) / t_slow:7.1f} images/s)")
            print(f"feature store:              {t_fast:8.2f} s  ({len(base) / t_fast:7.1f} images/s)")
            print(f"ratio: {t_slow / t_fast:.1f}x   (largest difference between the two ways: {worst:.2e})")

        for scale in (int(s) for s in args.scales.split(",")):
            images = synthetic_generations(data, scale)
            start = time.perf_counter()
            store_way(data, images, clip, dino, tmp / f"cache-x{scale}", args.batch_size, args.num_workers)
            elapsed = time.perf_counter() - start
            print(f"store at {scale}x ({len(images)} images): {elapsed:7.2f} s, {len(images) / elapsed:7.1f} images/s")


if __name__ == "__main__":
    main()
