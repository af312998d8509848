"""Identity Collapse (paper 002): CLIP-T, whole-image DINOv2 similarity, SCR@tau, instance-level SCR."""

from __future__ import annotations

import numpy as np

from idbench.benchmarks.identity_collapse.spec import SCR_THRESHOLDS
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot
from idbench.evaluate_pkg.context import Context, Result, crop_bytes
from idbench.evaluate_pkg.images import content_hash, load_working_image
from idbench.evaluate_pkg.models.detection import SUBJECT_NMS_IOU, nms_per_label
from idbench.evaluate_pkg.suites.text_alignment import DIAGNOSTICS as TEXT_DIAGNOSTICS
from idbench.evaluate_pkg.suites.text_alignment import METRICS as TEXT_METRICS
from idbench.evaluate_pkg.suites.text_alignment import text_alignment

# Detector queries per subject kind, for the instance-level variant.
KIND_QUERIES = {"human": "a person", "animal": "an animal"}

NOT_RUN: dict[str, str] = {}
# Per-image counts stored next to the metrics (not metrics of the suite: never ranked).
DIAGNOSTICS: dict[str, str] = {
    "subjects_detected": "detector boxes kept (after NMS per query) for the instance-level SCR",
    **TEXT_DIAGNOSTICS,
}


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    data, results = ctx.data, []
    generations = ctx.generation_keys()
    gen_loaders = ctx.generation_loaders()
    prompts = data.prompt_rows

    if metrics & TEXT_METRICS:
        image = ctx.image_features("clip", gen_loaders)
        results.extend(
            text_alignment(ctx, metrics, {pair: image[key]["embedding"] for pair, key in generations.items()})
        )

    dino_metrics = {m for m in metrics if m == "dino_sim" or m.startswith("scr")}
    if not dino_metrics:
        return results
    subject_ids = sorted({s for p in prompts.values() for s in p["subject_ids"]})
    refs = ctx.image_features("dinov2", ctx.reference_loaders(subject_ids))
    gens = ctx.image_features("dinov2", gen_loaders)
    ref_cls = {s: refs[ctx.reference_key(s)]["cls"] for s in subject_ids}

    for (prompt_id, seed), key in generations.items():
        ids = prompts[prompt_id]["subject_ids"]
        sim = F.dino_sim(gens[key]["cls"], np.stack([ref_cls[s] for s in ids]))
        if "dino_sim" in metrics:
            results.append(Result(prompt_id, seed, "dino_sim", sim.mean))
            results.extend(Result(prompt_id, seed, "dino_sim", float(v), s) for s, v in zip(ids, sim.per_reference))
        for tau in SCR_THRESHOLDS:
            if f"scr@{tau}" in metrics:
                results.append(Result(prompt_id, seed, f"scr@{tau}", F.subject_collapse_rate(sim.per_reference, tau)))

    if any(m.startswith("scr_instance") for m in metrics):
        results.extend(_instance_level(ctx, metrics, generations, gen_loaders, ref_cls))
    return results


def _instance_level(ctx, metrics, generations, gen_loaders, ref_cls) -> list[Result]:
    """Crops of every detected subject, Hungarian-matched to the prompt's references on DINOv2 CLS.

    The boxes of each query go through NMS at ``SUBJECT_NMS_IOU`` (one subject, one crop); each crop is
    padded to a square before DINOv2's resize-256 / centre-crop-224, so a tall subject keeps its head.
    """
    prompts, subjects = ctx.data.prompt_rows, ctx.data.references
    queries = {}
    for (prompt_id, _), key in generations.items():
        kinds = sorted({subjects[s]["kind"] for s in prompts[prompt_id]["subject_ids"]})
        queries[key] = [KIND_QUERIES[k] for k in kinds]
    detections = ctx.detections(gen_loaders, queries)
    crops: dict[str, list[str]] = {}  # generation hash -> crop hashes
    crop_loaders = {}
    cap = {key: 2 * len(prompts[p]["subject_ids"]) for (p, _), key in generations.items()}
    keep = ctx.models["dinov2"].square_keep()
    for key, found in detections.items():
        crops[key] = []
        # NMS within each query first, so one subject boxed twice cannot supply two crops (two matches);
        # then the most confident 2N boxes: enough for every subject plus spurious ones for the matching
        # to reject, without letting a noisy detector flood the store with crops.
        kept = nms_per_label(found["boxes"], found["scores"], found["labels"], SUBJECT_NMS_IOU)
        best = kept[np.argsort(-found["scores"][kept], kind="stable")][: cap[key]]
        image = load_working_image(gen_loaders[key], key) if len(best) else None  # decoded once for all its crops
        for box in found["boxes"][best]:
            blob = crop_bytes(image, box, keep)  # padded to a square: the centre crop keeps the subject
            crop_key = content_hash(blob)
            crop_loaders[crop_key] = lambda blob=blob: blob
            crops[key].append(crop_key)
    crop_features = ctx.image_features("dinov2", crop_loaders) if crop_loaders else {}
    results = []
    for (prompt_id, seed), key in generations.items():
        ids = prompts[prompt_id]["subject_ids"]
        refs = np.stack([ref_cls[s] for s in ids])
        found = np.stack([crop_features[c]["cls"] for c in crops[key]]) if crops[key] else np.zeros((0, refs.shape[1]))
        for tau in SCR_THRESHOLDS:
            if f"scr_instance@{tau}" in metrics:
                results.append(
                    Result(prompt_id, seed, f"scr_instance@{tau}", F.instance_collapse_rate(found, refs, tau))
                )
        results.append(Result(prompt_id, seed, "subjects_detected", float(len(crops[key]))))
    return results


# Baselines: the prompt's subjects in the order it mentions them, on a grey canvas; impostors from the
# whole pool (Layout's default).
BASELINES = Layout(slots=lambda data, prompt: [Slot(s, s) for s in prompt["subject_ids"]])
