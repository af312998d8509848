"""CLIP-T for the suites that score prompt-image alignment (Identity Collapse, CogCanvas).

- ``clip_t``: the papers' CLIP-T, cosine(CLIP text embedding of the prompt, CLIP image embedding),
  the prompt truncated at CLIP's 77 tokens as every reference implementation does;
- ``clip_t.truncated``: per sample 1 when the prompt was cut there, else 0, so the aggregate mean is
  the share of samples whose CLIP-T did not see the whole prompt (CogCanvas prompts pass 77 tokens
  from three persons on, losing the rightmost persons and the interaction sentences);
- ``clip_t_whole`` (not in the papers, named apart): the mean over sentence chunks that each fit the
  context of cosine(chunk, image) (:mod:`idbench.evaluate_pkg.functional.text`), which reads the
  whole prompt; equal to ``clip_t`` for a prompt that fits.

Every chunk is a text like any other to the feature store, so it is encoded once and cached.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.context import Context, Result
from idbench.evaluate_pkg.functional.text import CLIP_CONTEXT, clip_t_whole, text_chunks

TRUNCATED = "clip_t.truncated"
METRICS = frozenset({"clip_t", "clip_t_whole"})
DIAGNOSTICS: dict[str, str] = {TRUNCATED: "1 when the prompt passed CLIP's 77 tokens and clip_t read it cut, else 0"}


def text_alignment(
    ctx: Context, metrics: set[str], image_embeddings: Mapping[tuple[str, int], np.ndarray]
) -> list[Result]:
    """``clip_t`` (+ its truncation flag) and ``clip_t_whole`` for every (prompt_id, seed) of ``image_embeddings``."""
    wanted = metrics & METRICS
    if not wanted:
        return []
    prompts = ctx.data.prompt_rows
    clip = ctx.models["clip"]
    texts = sorted({prompts[prompt_id]["prompt"] for prompt_id, _ in image_embeddings})
    counts = dict(zip(texts, clip.token_counts(texts)))
    pairs = list(image_embeddings)
    images = np.stack([image_embeddings[pair] for pair in pairs])
    chunks: dict[str, list[str]] = {}
    if "clip_t_whole" in wanted:

        def count_tokens(text: str) -> int:
            return counts[text] if text in counts else clip.token_counts([text])[0]

        chunks = {text: text_chunks(text, count_tokens) for text in texts}
    # One lookup for prompts and chunks together: a prompt that fits is its own only chunk.
    wanted_texts = set(texts) if "clip_t" in wanted else set()
    encoded = ctx.text_features("clip", sorted(wanted_texts | {c for cs in chunks.values() for c in cs}))
    results: list[Result] = []
    if "clip_t" in wanted:
        values = F.clip_t(images, np.stack([encoded[prompts[p]["prompt"]] for p, _ in pairs]))
        for (prompt_id, seed), value in zip(pairs, values):
            cut = counts[prompts[prompt_id]["prompt"]] > CLIP_CONTEXT
            results += [Result(prompt_id, seed, "clip_t", float(value)), Result(prompt_id, seed, TRUNCATED, float(cut))]
        ctx.notes["clip_t_prompts_truncated"] = sum(count > CLIP_CONTEXT for count in counts.values())
    if chunks:
        for (prompt_id, seed), image in zip(pairs, images):
            own = chunks[prompts[prompt_id]["prompt"]]
            results.append(
                Result(prompt_id, seed, "clip_t_whole", clip_t_whole(image, np.stack([encoded[c] for c in own])))
            )
        ctx.notes["clip_t_whole_chunks_per_prompt"] = {
            "mean": float(np.mean([len(c) for c in chunks.values()])),
            "max": max(len(c) for c in chunks.values()),
        }
    return results
