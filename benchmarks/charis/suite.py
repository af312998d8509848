"""CHARIS (paper 000): the EKB-driven judge's category score, its ranked variants, prompt adherence, a
holistic judge, and the embedding baselines.

``charis_score`` (the paper's) and the judged variants need the VLM judge
(:mod:`idbench.benchmarks.charis.judge`, :mod:`idbench.benchmarks.charis.adherence`,
:mod:`idbench.benchmarks.charis.holistic`); without one they are reported as not run. A pair the
judge could not settle has a NaN ``charis_score`` (and ``<metric>.failure_rate`` 1 for that image),
never a made-up value; a pair with too little in view has a NaN ``charis_score`` and
``charis_score.insufficient_evidence`` 1. ``charis_score`` is the paper's and is shown beside its
intent-to-treat twin ``charis_score_itt``, never ranked. Every other judged metric follows intent to
treat (docs/charis-judge.md): hide-prompts are NaN for every model and counted in
``charis_score.hidden_by_prompt`` (``charis_score_itt``, ``charis_overall``); on the others a missing
category, adherence answer or holistic rating scores 0 and is counted in ``<metric>.failure_rate``
(and ``charis_score_itt.not_confirmed``), and ``prompt_adherence`` is 0 where the subject was not
confirmed in view (``prompt_adherence.subject_not_shown``), so neither hiding the subject nor making
the judge fail lifts a score.
"""

from __future__ import annotations

import random

import numpy as np

from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot
from idbench.evaluate_pkg.context import JUDGE_CHUNK, Context, Result
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.suites.text_alignment import DIAGNOSTICS as TEXT_DIAGNOSTICS
from idbench.evaluate_pkg.suites.text_alignment import METRICS as TEXT_METRICS
from idbench.evaluate_pkg.suites.text_alignment import text_alignment

NOT_RUN: dict[str, str] = {}
# A judged pair whose generation shows no core feature (a back view) has a NaN charis_score; this
# counts it per image, beside the judge-failure rate (besides <judged metric>.failure_rate).
INSUFFICIENT_METRIC = "charis_score.insufficient_evidence"
# The prompt itself asks for the subject to be out of view (transformations.yaml: hides_subject): the
# same prompts for every model, left out of the ranked variants and counted.
HIDDEN_METRIC = "charis_score.hidden_by_prompt"
# A ranked identity value of 0 that is no mismatch category: insufficient evidence on a prompt that
# did not hide the subject, or a judge failure.
NOT_CONFIRMED_METRIC = "charis_score_itt.not_confirmed"
# prompt_adherence scored 0 because the subject was not confirmed in view (insufficient evidence or an
# identity-judge failure) on a prompt that did not hide it: the asked changes are changes of the subject.
SUBJECT_NOT_SHOWN_METRIC = "prompt_adherence.subject_not_shown"
DIAGNOSTICS: dict[str, str] = {
    INSUFFICIENT_METRIC: "1 where no core feature is visible in both images, so charis_score is NaN (never exact)",
    HIDDEN_METRIC: "1 where the prompt asks for the subject to be hidden (a back view, a distant small figure): "
    "charis_score_itt and charis_overall are NaN there for every model",
    NOT_CONFIRMED_METRIC: "1 where charis_score_itt is 0 without a category (insufficient evidence on a prompt that "
    "did not hide the subject, or a judge failure); NaN on hide-prompts",
    SUBJECT_NOT_SHOWN_METRIC: "1 where prompt_adherence is 0 because the identity judge did not confirm the subject "
    "in view (insufficient evidence, or a judge failure) on a prompt that did not hide it; 0 on hide-prompts",
    **TEXT_DIAGNOSTICS,
}
NAN = float("nan")
# prompt_adherence needs the identity verdict too: it is gated on the subject being in view.
IDENTITY_METRICS = frozenset({"charis_score", "charis_score_itt", "charis_overall", "prompt_adherence"})
ADHERENCE_METRICS = frozenset({"prompt_adherence", "charis_overall"})
HOLISTIC_METRICS = frozenset({"holistic_score"})
JUDGED_METRICS = IDENTITY_METRICS | ADHERENCE_METRICS | HOLISTIC_METRICS


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    results = _judged(ctx, metrics) if metrics & JUDGED_METRICS else []
    return results + _embeddings(ctx, metrics)


def _judged(ctx: Context, metrics: set[str]) -> list[Result]:
    """The judged scores of every image, with their failure rates, evidence and run notes."""
    from idbench.benchmarks.charis.adherence import (
        evaluate_adherence,
        hiding_phrases,
        summarize_adherence,
    )
    from idbench.benchmarks.charis.holistic import evaluate_holistic, summarize_holistic
    from idbench.benchmarks.charis.judge import evaluate_pairs, pair_from_rows, summarize
    from idbench.ekb import load_ekb

    ekb = load_ekb()
    prompts, subjects = ctx.data.prompt_rows, ctx.data.references
    references = ctx.data.reference_bytes
    verdicts, adherence, ratings, hidden = [], [], [], {}
    for chunk in ctx.generation_bytes(JUDGE_CHUNK):
        pairs = [
            pair_from_rows(
                prompts[p],
                seed,
                references[prompts[p]["subject_id"]],
                image,
                subject_name=subjects[prompts[p]["subject_id"]]["name"],
            )
            for (p, seed), image in chunk.items()
        ]
        hidden.update({pair.prompt_id: hiding_phrases(pair.phrases, ekb) for pair in pairs})
        if metrics & IDENTITY_METRICS:
            verdicts += evaluate_pairs(ctx.judge, pairs, ekb)
        if metrics & ADHERENCE_METRICS:
            adherence += evaluate_adherence(ctx.judge, pairs, ekb)
        if metrics & HOLISTIC_METRICS:
            ratings += evaluate_holistic(ctx.judge, pairs)
    results: list[Result] = []
    if metrics & IDENTITY_METRICS:
        for v in verdicts:
            if "charis_score" in metrics:
                results.append(Result(v.prompt_id, v.seed, "charis_score", NAN if v.score is None else float(v.score)))
                results.append(Result(v.prompt_id, v.seed, "charis_score.failure_rate", float(v.judge_failure)))
                results.append(Result(v.prompt_id, v.seed, INSUFFICIENT_METRIC, float(v.insufficient_evidence)))
            record = {"category": v.category, "failure": v.failure, "requests": v.requests, **v.evidence}
            ctx.evidence.append((v.prompt_id, v.seed, "charis_score", record))
        ctx.notes["charis_judge"] = summarize(verdicts, ekb)
    if metrics & ADHERENCE_METRICS:
        for a in adherence:
            ctx.evidence.append(
                (a.prompt_id, a.seed, "prompt_adherence", {"score": a.score, "failure": a.failure, **a.evidence})
            )
        ctx.notes["charis_adherence"] = summarize_adherence(adherence)
    if metrics & {"charis_score_itt", "charis_overall", "prompt_adherence"}:
        results += _ranked(metrics, verdicts, adherence, hidden)
        ctx.notes["charis_hidden_by_prompt"] = {
            "prompts": sum(bool(h) for h in hidden.values()),
            "of": len(hidden),
            "phrases": sorted({phrase for h in hidden.values() for phrase in h.values()}),
        }
    if metrics & HOLISTIC_METRICS:
        for r in ratings:  # intent to treat: a judge failure scores 0, the lowest rating, and is counted
            results.append(Result(r.prompt_id, r.seed, "holistic_score", 0.0 if r.score is None else float(r.score)))
            results.append(Result(r.prompt_id, r.seed, "holistic_score.failure_rate", float(r.failure is not None)))
            ctx.evidence.append(
                (
                    r.prompt_id,
                    r.seed,
                    "holistic_score",
                    {"rating": r.rating, "reasoning": r.reasoning, "failure": r.failure},
                )
            )
        ctx.notes["holistic_judge"] = summarize_holistic(ratings)
    return results


def _ranked(metrics: set[str], verdicts, adherence, hidden: dict[str, dict[str, str]]) -> list[Result]:
    """charis_score_itt, prompt_adherence and charis_overall per image (intent to treat), with their counts."""
    from idbench.benchmarks.charis.adherence import adherence_gated, identity_itt, overall_score, subject_not_shown

    by_pair = {(a.prompt_id, a.seed): a for a in adherence}
    results = []
    for v in verdicts:
        hides = bool(hidden[v.prompt_id])
        identity = identity_itt(v, hides)
        results.append(Result(v.prompt_id, v.seed, HIDDEN_METRIC, float(hides)))
        if "charis_score_itt" in metrics:
            results.append(Result(v.prompt_id, v.seed, "charis_score_itt", identity))
            results.append(Result(v.prompt_id, v.seed, "charis_score_itt.failure_rate", float(v.judge_failure)))
            results.append(Result(v.prompt_id, v.seed, NOT_CONFIRMED_METRIC, NAN if hides else float(v.score is None)))
        a = by_pair.get((v.prompt_id, v.seed))
        if "prompt_adherence" in metrics:
            # Intent to treat, gated on the subject: a judge failure (either request) or a subject not
            # confirmed in view on a prompt that did not hide it scores 0, and is counted.
            results.append(Result(v.prompt_id, v.seed, "prompt_adherence", adherence_gated(a, v, hides)))
            results.append(
                Result(v.prompt_id, v.seed, "prompt_adherence.failure_rate", float(v.judge_failure or a.judge_failure))
            )
            results.append(Result(v.prompt_id, v.seed, SUBJECT_NOT_SHOWN_METRIC, float(subject_not_shown(v, hides))))
        if "charis_overall" in metrics:
            overall = overall_score(identity, adherence_gated(a, v, hides))
            results.append(Result(v.prompt_id, v.seed, "charis_overall", overall))
            results.append(
                Result(v.prompt_id, v.seed, "charis_overall.failure_rate", float(v.judge_failure or a.judge_failure))
            )
    return results


def _embeddings(ctx: Context, metrics: set[str]) -> list[Result]:
    prompts, results = ctx.data.prompt_rows, []
    generations = ctx.generation_keys()
    subject_ids = sorted({p["subject_id"] for p in prompts.values()})
    if metrics & TEXT_METRICS:  # CLIP-T on the CHARIS prompts, with its long-prompt handling
        image = ctx.image_features("clip", ctx.generation_loaders())
        results.extend(
            text_alignment(ctx, metrics, {pair: image[key]["embedding"] for pair, key in generations.items()})
        )
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
