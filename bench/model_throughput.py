"""Model throughput: images per second of each model (per role) of a profile, on the shipped sample images.

For each role of ``--profile`` (default ``paper-random``: the papers' architectures at their real sizes with
random weights, made here on first use from the configurations shipped with idbench, ~3 GB), the model is
loaded once, warmed up on ``--warmup`` images (not timed), then timed on ``--images`` of the shipped sample
images (samples/MANIFEST.csv, in its order, cycled when more are asked for than it holds) with the calls
scoring makes:

- clip, dinov2, dinov3, face: the encoder's own ``preprocess`` (CPU, one image at a time; scoring runs it in
  DataLoader workers) and ``encode_batch`` on batches of ``--batch-size``, timed apart: "model" is the
  device's rate, "end to end" adds the preprocessing done in this one process;
- clip texts: ``encode_texts`` of the CogCanvas sample's reference descriptions (prompts per second);
- aesthetic: the LAION head on CLIP image embeddings (numpy, CPU);
- detector: ``detect`` with two text queries per image ("a person", "an object"), processor included;
- segmenter: ``segment`` with three boxes per image, processor included.

A role whose model cannot be made (paper-random's ArcFace: ``registry.NOT_MADE``) is a "not run" row with
the reason; one that fails to load is a "not run" row with its error. Random weights: these are speeds, never
scores. Random detectors find boxes everywhere; the segmenter is given a fixed three boxes instead.

Prints a table and writes JSON (``--json``; default ``$OUT/model_throughput.json`` when ``$OUT`` is set,
else ``idbench-output/model_throughput-<profile>-<device>.json``). The sample images are small (most under
600 px); the encoders resize to their own input (CLIP and DINO 224, Grounding DINO's shortest edge 800 for
paper-random, SAM 2 1024), so the model rates hold for 1024 px generations, preprocessing aside.

Run: .venv/bin/python bench/model_throughput.py --profile paper-random [--images 36] [--device cuda]
     [--threads N] [--batch-size 8] [--roles clip,dinov2] [--models-dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import platform
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idbench.evaluate_pkg.models import registry  # noqa: E402

QUERIES = ["a person", "an object"]  # two text queries per image for the detector
BOXES_PER_IMAGE = 3  # fixed boxes per image for the segmenter


def sample_images(count: int) -> list[tuple[str, Any]]:
    """``count`` shipped sample images (name, RGB PIL image), in MANIFEST.csv's order, cycled if needed."""
    from PIL import Image

    root = resources.files("idbench.samples")
    with root.joinpath("MANIFEST.csv").open(encoding="utf-8", newline="") as handle:
        files = [row["file"] for row in csv.DictReader(handle)]
    images = []
    for index in range(count):
        name = files[index % len(files)]
        with root.joinpath(name).open("rb") as handle:
            images.append((name, Image.open(handle).convert("RGB")))
    return images


def sample_texts() -> list[str]:
    """The CogCanvas sample's reference descriptions: CLIP text inputs of a realistic length."""
    with resources.files("idbench.samples").joinpath("cogcanvas.csv").open(encoding="utf-8", newline="") as handle:
        return [row["description"] for row in csv.DictReader(handle) if row["description"]]


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _batches(items: list, size: int) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def time_encoder(encoder: Any, images: list, warmup: list, batch_size: int, device: str) -> dict[str, float]:
    """preprocess + encode_batch, timed apart (seconds)."""
    for batch in _batches(warmup, batch_size):
        encoder.encode_batch(encoder.collate([encoder.preprocess(image) for image in batch]))
    _sync(device)
    start = time.perf_counter()
    items = [encoder.preprocess(image) for image in images]
    preprocess = time.perf_counter() - start
    start = time.perf_counter()
    for batch in _batches(items, batch_size):
        encoder.encode_batch(encoder.collate(batch))
    _sync(device)
    return {"preprocess_s": preprocess, "model_s": time.perf_counter() - start}


def time_call(call: Any, images: list, warmup: list, batch_size: int, device: str) -> dict[str, float]:
    """A model that preprocesses inside its own call (detector, segmenter): end to end only."""
    if warmup:
        call(warmup, batch_size)
    _sync(device)
    start = time.perf_counter()
    call(images, batch_size)
    _sync(device)
    return {"preprocess_s": 0.0, "model_s": time.perf_counter() - start}


def measure_role(role: str, card: Any, images: list, warmup: list, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"role": role, "model": card.name, "plumbing": registry.is_plumbing(card)}
    if card.name in registry.NOT_MADE:
        return {**row, "not_run": registry.NOT_MADE[card.name]}
    try:
        row["parameters"] = registry.parameter_count(card) if card.name in registry.RANDOM_SIZES else None
        start = time.perf_counter()
        model = registry.load_model(card.name, device=args.device, models_dir=args.models_dir)
        row["load_s"] = time.perf_counter() - start  # includes making the weights on first use
    except Exception as error:  # a missing paper model, an unusable pack: a row that says so, not a crash
        return {**row, "not_run": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    unit, count = "img", len(images)
    if role == "aesthetic":
        embeddings = np.random.default_rng(0).standard_normal((len(images), 768)).astype(np.float32)
        start = time.perf_counter()
        model.score(embeddings)
        timing = {"preprocess_s": 0.0, "model_s": time.perf_counter() - start}
    elif role == "detector":
        timing = time_call(
            lambda batch, size: model.detect(batch, [QUERIES] * len(batch), batch_size=size),
            images,
            warmup,
            args.batch_size,
            args.device,
        )
    elif role == "segmenter":

        def boxes(image: Any) -> np.ndarray:
            width, height = image.size
            return np.array(
                [
                    [0.1 * width, 0.1 * height, 0.5 * width, 0.9 * height],
                    [0.5 * width, 0.2 * height, 0.9 * width, 0.8 * height],
                    [0.3 * width, 0.3 * height, 0.7 * width, 0.7 * height],
                ],
                dtype=np.float32,
            )[:BOXES_PER_IMAGE]

        timing = time_call(
            lambda batch, size: model.segment(batch, [boxes(image) for image in batch], batch_size=size),
            images,
            warmup,
            args.batch_size,
            args.device,
        )
    else:
        timing = time_encoder(model, images, warmup, args.batch_size, args.device)
    row.update(timing, unit=unit, count=count)
    rows = [row]
    if role == "clip":
        texts = sample_texts()
        model.encode_texts(texts[:4])  # warm-up
        _sync(args.device)
        start = time.perf_counter()
        model.encode_texts(texts)
        _sync(args.device)
        seconds = time.perf_counter() - start
        rows.append(
            {
                **{k: row[k] for k in ("model", "plumbing", "parameters")},
                "role": "clip (texts)",
                "unit": "prompt",
                "count": len(texts),
                "preprocess_s": 0.0,
                "model_s": seconds,
            }
        )
    return rows if len(rows) > 1 else row


def _rates(row: dict[str, Any]) -> dict[str, Any]:
    if "not_run" in row:
        return row
    model_s, total_s = row["model_s"], row["model_s"] + row["preprocess_s"]
    return {
        **row,
        "per_s_model": row["count"] / model_s if model_s > 0 else None,
        "per_s_end_to_end": row["count"] / total_s if total_s > 0 else None,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'role':14s} {'model':34s} {'params':>8s} {'n':>4s} {'model s':>8s} {'per s':>8s} {'e2e per s':>9s}"
    lines = [head, "-" * len(head)]
    for row in rows:
        params = f"{row['parameters'] / 1e6:.1f}M" if row.get("parameters") else "-"
        if "not_run" in row:
            lines.append(f"{row['role']:14s} {row['model']:34s} {params:>8s}  not run: {row['not_run']}")
            continue
        lines.append(
            f"{row['role']:14s} {row['model']:34s} {params:>8s} {row['count']:4d} {row['model_s']:8.2f} "
            f"{row['per_s_model']:8.2f} {row['per_s_end_to_end']:9.2f}  {row['unit']}/s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="paper-random", choices=tuple(registry.PROFILES))
    parser.add_argument("--images", type=int, default=36, help="timed images per role (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed images per role first (default %(default)s)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--roles", help="comma-separated roles (default: every role of the profile)")
    parser.add_argument("--models-dir", type=Path, help="where random models are made (default: idbench's)")
    parser.add_argument("--json", type=Path, help="where the figures go (default: see the module docstring)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    cards = registry.resolve_profile(args.profile)
    roles = args.roles.split(",") if args.roles else list(cards)
    unknown = sorted(set(roles) - set(cards))
    if unknown:
        parser.error(f"unknown roles {unknown}; roles: {', '.join(cards)}")
    images = [image for _, image in sample_images(args.images)]
    warmup = [image for _, image in sample_images(args.warmup)]
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_name()
    header = (
        f"profile {args.profile}{' (PLUMBING CHECK: random weights; speeds only)' if registry.profile_is_plumbing(args.profile) else ''}"
        f" on {args.device} ({device_name}); torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
        f"batch {args.batch_size}; {args.images} sample images timed per role after {args.warmup} warm-up"
    )
    print(header, flush=True)
    rows: list[dict[str, Any]] = []
    figures = {
        "profile": args.profile,
        "plumbing": registry.profile_is_plumbing(args.profile),
        "device": args.device,
        "device_name": device_name,
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "batch_size": args.batch_size,
        "images": args.images,
        "warmup": args.warmup,
        "rows": rows,
    }
    out = args.json
    if out is None:
        out = (
            Path(os.environ["OUT"]) / "model_throughput.json"
            if os.environ.get("OUT")
            else Path("idbench-output") / f"model_throughput-{args.profile}-{args.device.replace(':', '')}.json"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    for role in roles:
        measured = measure_role(role, cards[role], images, warmup, args)
        gc.collect()  # the role's model goes before the next one loads
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        for row in measured if isinstance(measured, list) else [measured]:
            rows.append(_rates(row))
            print(table([rows[-1]]).splitlines()[-1], flush=True)
        # after each role: a run cut short by a timeout keeps what it measured
        out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print()
    print(table(rows))
    print(f"\nfigures in {out}")
    return figures


if __name__ == "__main__":
    main()
