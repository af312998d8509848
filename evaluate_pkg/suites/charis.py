"""CHARIS (paper 000): the EKB-driven judge's category score, a holistic judge, and the embedding baselines.

``charis_score`` and ``holistic_score`` need the VLM judge (:mod:`idbench.evaluate_pkg.judge.charis`,
:mod:`idbench.evaluate_pkg.judge.holistic`); without one they are reported as not run. A pair the judge could
not settle has a NaN score (and ``<metric>.failure_rate`` 1 for that image), never a made-up value; a
pair with too little in view has a NaN ``charis_score`` and ``charis_score.insufficient_evidence`` 1.
"""

from __future__ import annotations

import random

import numpy as np

from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.context import JUDGE_CHUNK, Context, Result

NOT_RUN: dict[str, str] = {}
# A judged pair whose generation shows no core feature (a back view) has a NaN charis_score; this
# counts it per image, beside the judge-failure rate (besides <judged metric>.failure_rate).
INSUFFICIENT_METRIC = "charis_score.insufficient_evidence"
DIAGNOSTICS: dict[str, str] = {
    INSUFFICIENT_METRIC: "1 where no core feature is visible in both images, so charis_score is NaN (never exact)",
}
NAN = float("nan")


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    results = _judged(ctx, metrics) if metrics & {"charis_score", "holistic_score"} else []
    return results + _embeddings(ctx, metrics)


def _judged(ctx: Context, metrics: set[str]) -> list[Result]:
    """The judged scores of every image, with their failure rates, evidence and run notes."""
    from idbench.evaluate_pkg.judge.charis import evaluate_pairs, pair_from_rows, summarize
    from idbench.evaluate_pkg.judge.holistic import evaluate_holistic, summarize_holistic

    prompts, subjects = ctx.data.prompt_rows, ctx.data.references
    references = ctx.data.reference_bytes
    verdicts, ratings = [], []
    for chunk in ctx.generation_bytes(JUDGE_CHUNK):
        pairs = [
            pair_from_rows(prompts[p], seed, references[prompts[p]["subject_id"]], image, subject_name=subjects[prompts[p]["subject_id"]]["name"])
            for (p, seed), image in chunk.items()
        ]
        if "charis_score" in metrics:
            verdicts += evaluate_pairs(ctx.judge, pairs)
        if "holistic_score" in metrics:
            ratings += evaluate_holistic(ctx.judge, pairs)
    results: list[Result] = []
    if "charis_score" in metrics:
        for v in verdicts:
            results.append(Result(v.prompt_id, v.seed, "charis_score", NAN if v.score is None else float(v.score)))
            results.append(Result(v.prompt_id, v.seed, "charis_score.failure_rate", float(v.judge_failure)))
            results.append(Result(v.prompt_id, v.seed, INSUFFICIENT_METRIC, float(v.insufficient_evidence)))
            record = {"category": v.category, "failure": v.failure, "requests": v.requests, **v.evidence}
            ctx.evidence.append((v.prompt_id, v.seed, "charis_score", record))
        ctx.notes["charis_judge"] = summarize(verdicts)
    if "holistic_score" in metrics:
        for r in ratings:
            results.append(Result(r.prompt_id, r.seed, "holistic_score", NAN if r.score is None else float(r.score)))
            results.append(Result(r.prompt_id, r.seed, "holistic_score.failure_rate", float(r.failure is not None)))
            ctx.evidence.append((r.prompt_id, r.seed, "holistic_score", {"rating": r.rating, "reasoning": r.reasoning, "failure": r.failure}))
        ctx.notes["holistic_judge"] = summarize_holistic(ratings)
    return results


def _embeddings(ctx: Context, metrics: set[str]) -> list[Result]:
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


# --- baselines -----------------------------------------------------------------------------------


def _name_overlap(a: str, b: str) -> int:
    return len(set(a.lower().split()) & set(b.lower().split()))


def _impostor(data: BenchmarkData, subject_id: str, rng: random.Random) -> str:
    """Another CHARIS subject: same type and style if any, else same type, else any.

    CHARIS has no character id, so the same character drawn in another style is a different subject
    id; within the chosen tier, candidates whose names share the fewest words with the subject's are
    kept (a cheap guard against picking that twin), then one is drawn.
    """
    me = data.references[subject_id]
    others = [row for sid, row in data.references.items() if sid != subject_id]
    if not others:
        raise BenchmarkDataError(f"no impostor for {subject_id!r}: the benchmark has no other subject")
    tiers = (
        [r for r in others if r["type"] == me["type"] and r["style"] == me["style"]],
        [r for r in others if r["type"] == me["type"]],
        others,
    )
    tier = next(t for t in tiers if t)
    least = min(_name_overlap(r["name"], me["name"]) for r in tier)
    candidates = sorted(r["subject_id"] for r in tier if _name_overlap(r["name"], me["name"]) == least)
    return rng.choice(candidates)


# One subject per prompt, on a grey canvas; impostors of the same type (and style) where possible.
BASELINES = Layout(
    slots=lambda data, prompt: [Slot(prompt["subject_id"], prompt["subject_id"])],
    impostors=lambda data, slots, rng: [Slot(sid, sid) for sid in (_impostor(data, s.ref_id, rng) for s in slots)],
)
