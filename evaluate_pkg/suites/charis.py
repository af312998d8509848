"""CHARIS (paper 000): the embedding baselines CLIP-I and DINOv2 here; the VLM judge is its own stage."""

from __future__ import annotations

import numpy as np

from evaluate_pkg import functional as F
from evaluate_pkg.context import Context, Result

METRICS: dict[str, tuple[str, ...]] = {
    "clip_i": ("clip",),
    "dino_sim": ("dinov2",),
}
NOT_RUN: dict[str, str] = {
    "charis_score": "needs the hierarchical VLM judge (EKB-driven), which the scoring engine does not run yet",
}


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    prompts, results = ctx.data.prompt_rows, []
    generations = ctx.generation_keys()
    subject_ids = sorted({p["subject_id"] for p in prompts.values()})
    for metric, role, field in (("clip_i", "clip", "embedding"), ("dino_sim", "dinov2", "cls")):
        if metric not in metrics:
            continue
        refs = ctx.image_features(role, ctx.reference_loaders(subject_ids))
        gens = ctx.image_features(role, ctx.generation_loaders())
        pairs = list(generations)
        values = F.cosine(
            np.stack([gens[generations[pair]][field] for pair in pairs]),
            np.stack([refs[ctx.reference_key(prompts[prompt_id]["subject_id"])][field] for prompt_id, _ in pairs]),
        )
        results.extend(Result(prompt_id, seed, metric, float(v)) for (prompt_id, seed), v in zip(pairs, values))
    return results
