"""Generation throughput: `idbench generate`'s run against the obvious one-image-at-a-time loop.

Two measurements on the same machine, each checking that both ways write the same images (bytes):

1. **Pipeline calls** (CogCanvas' text-to-image track, a Stable Diffusion pipeline of random weights built
   here, `idbench.generation.tiny`): the naive loop calls the pipeline once per image; the harness hands
   the adapter `--batch-size` prompts per call (one seeded CPU generator per image).
2. **References and the harness's own cost** (Identity Collapse, the reference task, 3 seeds per prompt): the
   naive loop asks for a prompt's references for every (prompt, seed) row and saves plainly; the harness
   prepares them once per prompt and writes every image atomically (temporary file, fsync, rename) with its
   record. The adapter is a cheap stand-in that uses the references' pixels, so this measures the harness,
   not a model. (`BenchmarkData` already keeps decoded references, so preparing them per row costs little:
   this row shows the price of the atomic writes, not a speed-up.)

Run: .venv/bin/python bench/generation_throughput.py [--size tiny|paper] [--device cpu|cuda] [--batch-size 8]
`tiny` (the default) is the CPU figure of the README. On a GPU, a paper-sized pipeline with random weights
(Stable Diffusion 1.x's shapes, about a billion parameters; nothing downloaded):
    .venv/bin/python bench/generation_throughput.py --size paper --device cuda --resolution 512 --steps 20 --limit 64 --batch-size 16
Random weights: the images are noise, the timings are real.
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
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idbench.builders.build import build
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.generation.adapters import DiffusersTextToImage
from idbench.generation.requests import prompt_references
from idbench.generation.run import generate_submission
from idbench.generation.tiny import random_stable_diffusion


def png_digest(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def folder_digests(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.png"))
    }


def largest_pixel_difference(a: Path, b: Path) -> int:
    """The largest absolute difference of any pixel value between the same-named images of two folders."""
    worst = 0
    for path in sorted(a.rglob("*.png")):
        left = np.asarray(Image.open(path).convert("RGB"), np.int16)
        right = np.asarray(Image.open(b / path.relative_to(a)).convert("RGB"), np.int16)
        worst = max(worst, int(np.abs(left - right).max()))
    return worst


def template_rows(data, task: str, limit: int | None) -> list[tuple[str, int, str]]:
    """The (prompt_id, seed, file) rows the template writes, in order (the naive loop fills the same files)."""
    from idbench.evaluate_pkg.submission import write_template
    from idbench.generation.requests import manifest_rows

    with tempfile.TemporaryDirectory() as folder:
        write_template(data, Path(folder) / "t", task=task)
        return manifest_rows(Path(folder) / "t" / "manifest.csv")[:limit]


def naive_pipeline_loop(pipeline, data, rows, resolution: int, steps: int, out: Path) -> float:
    """One pipeline call per image, each image saved as PNG: what a first script does."""
    import torch

    prompts = data.prompt_rows
    started = time.perf_counter()
    for prompt_id, seed, file in rows:
        image = pipeline(
            prompt=prompts[prompt_id]["prompt"],
            height=resolution,
            width=resolution,
            num_inference_steps=steps,
            generator=torch.Generator("cpu").manual_seed(seed),
        ).images[0]
        path = out / file
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path, format="PNG")
    return time.perf_counter() - started


def reference_colours(request) -> Image.Image:
    """The stand-in adapter of measurement 2: the references' mean colours as stripes over the seed's tint."""
    rng = np.random.default_rng(request.seed)
    canvas = np.empty((request.resolution, request.resolution, 3), np.uint8)
    canvas[:] = rng.integers(0, 256, 3)
    for k, image in enumerate(request.images):
        canvas[:, 4 * k : 4 * k + 4] = (
            np.asarray(image.convert("RGB"), np.float32).reshape(-1, 3).mean(axis=0).astype(np.uint8)
        )
    return Image.fromarray(canvas)


def naive_reference_loop(data, rows, resolution: int, out: Path) -> float:
    """Every row decodes its prompt's references again, then draws and saves."""
    from idbench.generation.requests import GenerationRequest

    prompts = data.prompt_rows
    started = time.perf_counter()
    for prompt_id, seed, file in rows:
        prompt = prompts[prompt_id]
        request = GenerationRequest(
            data.name, prompt_id, seed, file, prompt["prompt"], prompt_references(data, prompt), resolution
        )
        path = out / file
        path.parent.mkdir(parents=True, exist_ok=True)
        reference_colours(request).save(path, format="PNG")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("tiny", "paper"), default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--resolution", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--limit", type=int, default=64, help="rows of measurement 1 (default 64)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="idbench-genbench-") as scratch:
        root = Path(scratch)
        build("cogcanvas", out=root / "cogcanvas")
        build("identity-collapse", out=root / "collapse")
        cogcanvas, collapse = load_benchmark_data(root / "cogcanvas"), load_benchmark_data(root / "collapse")

        import diffusers

        pipeline = diffusers.StableDiffusionPipeline.from_pretrained(
            random_stable_diffusion(root / "sd", args.size)
        ).to(args.device)
        pipeline.set_progress_bar_config(disable=True)
        adapter = DiffusersTextToImage.from_pipeline(pipeline, steps=args.steps, device=args.device)
        rows = template_rows(cogcanvas, "text-to-image", args.limit)
        # Warm-up outside both timings (first-call allocations, kernels).
        naive_pipeline_loop(pipeline, cogcanvas, rows[:2], args.resolution, args.steps, root / "warm")
        naive_seconds = naive_pipeline_loop(
            pipeline, cogcanvas, rows, args.resolution, args.steps, root / "naive1" / "images-root"
        )
        started = time.perf_counter()  # the whole call: template, requests, images, record
        generate_submission(
            cogcanvas,
            adapter,
            root / "harness1",
            resolution=args.resolution,
            task="text-to-image",
            limit=args.limit,
            batch_size=args.batch_size,
            progress=False,
            say=lambda _: None,
        )
        harness_seconds = time.perf_counter() - started
        same = folder_digests(root / "naive1" / "images-root") == folder_digests(root / "harness1")
        worst = largest_pixel_difference(root / "naive1" / "images-root", root / "harness1")
        n = len(rows)
        print(
            f"1. pipeline calls: {n} text-to-image images, {args.size} SD pipeline, {args.resolution} px, {args.steps} steps, {args.device}"
        )
        print(f"   naive, one call per image: {naive_seconds:.2f} s ({n / naive_seconds:.1f} images/s)")
        print(
            f"   idbench generate, batch {args.batch_size}: {harness_seconds:.2f} s ({n / harness_seconds:.1f} images/s): "
            f"{naive_seconds / harness_seconds:.2f}x; same bytes: {same} (largest pixel difference {worst} of 255)"
        )

        rows = template_rows(collapse, "reference", None)
        prompts = len({row[0] for row in rows})
        naive_seconds = naive_reference_loop(collapse, rows, args.resolution, root / "naive2")
        started = time.perf_counter()
        generate_submission(
            collapse,
            reference_colours,
            root / "harness2",
            resolution=args.resolution,
            progress=False,
            say=lambda _: None,
        )
        harness_seconds = time.perf_counter() - started
        same = folder_digests(root / "naive2") == folder_digests(root / "harness2")
        print(
            f"2. references and the harness's own cost: {len(rows)} Identity Collapse images of {prompts} prompts, a stand-in adapter"
        )
        print(
            f"   naive, references asked per image, plain saves: {naive_seconds:.2f} s ({len(rows) / naive_seconds:.1f} images/s)"
        )
        print(
            f"   idbench generate, once per prompt, atomic writes: {harness_seconds:.2f} s ({len(rows) / harness_seconds:.1f} images/s): "
            f"{naive_seconds / harness_seconds:.2f}x; same bytes: {same}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
