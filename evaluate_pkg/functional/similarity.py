"""Cosine similarity and the metrics that are nothing more than a cosine: CLIP-T, CLIP-I, DINO-Sim.

Everything here returns raw cosines in [-1, 1] (float64). Scaling by 100 and clamping at 0 are
display conventions; they live in :func:`clipscore_torchmetrics_convention` and
:func:`torchmetrics_clipscore_of_mean` and are applied only when presenting or comparing with
published numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._arrays import as_matrix, as_vector

#: Norms below this are treated as this, so a zero vector has cosine 0 with anything (as
#: ``torch.nn.functional.cosine_similarity`` does) instead of a division by zero.
EPS = 1e-8


def l2_normalize(x: Any, eps: float = EPS) -> np.ndarray:
    """Scale each row (the last axis) to unit L2 norm; norms below ``eps`` are taken as ``eps``.

    >>> l2_normalize([[3.0, 4.0]]).tolist()
    [[0.6, 0.8]]
    """
    arr = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return arr / np.maximum(norms, eps)


def cosine(a: Any, b: Any, eps: float = EPS) -> np.ndarray:
    """Row-wise cosine similarity of ``a`` and ``b`` (shapes ``(n, d)`` or ``(d,)``; they broadcast).

    Returns shape ``(n,)`` for matrices, a 0-d array for two vectors.

    >>> float(cosine([1.0, 0.0], [1.0, 1.0]))  # doctest: +ELLIPSIS
    0.7071...
    >>> cosine([[1.0, 0.0], [0.0, 1.0]], [[0.0, 2.0], [0.0, 3.0]]).tolist()
    [0.0, 1.0]
    """
    a_arr, b_arr = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a_arr.shape[-1] != b_arr.shape[-1]:
        raise ValueError(f"cosine: vector widths differ, {a_arr.shape} vs {b_arr.shape}")
    try:
        np.broadcast_shapes(a_arr.shape, b_arr.shape)
    except ValueError:
        raise ValueError(f"cosine: row counts differ, {a_arr.shape} vs {b_arr.shape}") from None
    return np.sum(l2_normalize(a_arr, eps) * l2_normalize(b_arr, eps), axis=-1)


def cosine_matrix(A: Any, B: Any, eps: float = EPS) -> np.ndarray:
    """All-pairs cosine similarity: ``out[i, j] = cosine(A[i], B[j])``, shape ``(n, m)``.

    Either side may be empty (``(0, d)`` or ``[]``), giving an empty matrix.

    >>> cosine_matrix([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]).tolist()
    [[1.0, 0.0, -1.0]]
    """
    a_arr = np.asarray(A, dtype=np.float64)
    b_arr = np.asarray(B, dtype=np.float64)
    dim = a_arr.shape[-1] if a_arr.size else (b_arr.shape[-1] if b_arr.size else None)
    a_mat, b_mat = as_matrix(a_arr, "A", dim), as_matrix(b_arr, "B", dim)
    return l2_normalize(a_mat, eps) @ l2_normalize(b_mat, eps).T


def clip_t(image_emb: Any, text_emb: Any) -> np.ndarray:
    """CLIP-T per sample: cosine of a generation's CLIP image embedding and its prompt's text embedding.

    Inputs are the *projected* embeddings (transformers 5: ``get_image_features(...).pooler_output``
    and ``get_text_features(...).pooler_output``), shape ``(n, d)``. CLIP reads at most 77 tokens: a
    longer prompt is truncated by the tokenizer before it gets here, and the score only sees its head.
    Raw cosine, typically 0.2-0.35 for ViT-L/14 (paper 002 reports 0.26-0.31).

    >>> clip_t([[1.0, 0.0]], [[1.0, 1.0]]).round(4).tolist()
    [0.7071]
    """
    return np.atleast_1d(cosine(image_emb, text_emb))


def clip_i(gen_emb: Any, ref_emb: Any) -> np.ndarray:
    """CLIP-I per pair: cosine of the CLIP image embeddings of a generation and a reference.

    Shapes ``(n, d)`` (row i of one against row i of the other) or one ``(d,)`` against ``(n, d)``.
    Embed both with the model's own processor: resize/crop/interpolation changes the values.

    >>> clip_i([[0.0, 1.0]], [[0.0, 2.0]]).tolist()
    [1.0]
    """
    return np.atleast_1d(cosine(gen_emb, ref_emb))


def clipscore_torchmetrics_convention(cos: Any) -> np.ndarray:
    """Display helper: ``100 * max(cos, 0)`` per sample, the CLIPScore formula torchmetrics documents.

    Apply it per sample and average afterwards. torchmetrics' ``CLIPScore.compute`` (1.9) instead
    clamps the *mean* (see :func:`torchmetrics_clipscore_of_mean`); the two agree when no sample is
    negative. Hessel et al.'s original CLIPScore uses a weight 2.5 instead of 100.

    >>> clipscore_torchmetrics_convention([0.25, -0.1]).tolist()
    [25.0, 0.0]
    """
    return 100.0 * np.maximum(np.asarray(cos, dtype=np.float64), 0.0)


def torchmetrics_clipscore_of_mean(cos: Any) -> float:
    """What torchmetrics 1.9 ``CLIPScore`` / ``clip_score`` reports for a batch: ``max(100 * mean(cos), 0)``.

    Only for reproducing numbers published with torchmetrics; our aggregates average per-sample
    values instead (clamping the mean hides negative samples).

    >>> torchmetrics_clipscore_of_mean([0.3, -0.1])
    10.0
    """
    return float(max(100.0 * float(np.mean(np.asarray(cos, dtype=np.float64))), 0.0))


@dataclass(frozen=True)
class DinoSim:
    """Whole-image DINO similarity of one generation to its N references."""

    mean: float  #: mean cosine over the N references (paper 002's per-image score)
    per_reference: np.ndarray  #: shape (N,), cosine to each reference, in reference order


def dino_sim(gen_emb: Any, ref_embs: Any) -> DinoSim:
    """DINO-Sim: cosine of one generation's embedding to each of its N references, and their mean.

    Paper 002 uses the DINOv2 CLS embedding of the *whole* generated image against each reference
    image; CogCanvas uses it on cropped object/fashion regions (N = 1 per crop). ``gen_emb`` is
    ``(d,)``, ``ref_embs`` is ``(N, d)`` with N >= 1.

    >>> r = dino_sim([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
    >>> r.mean, r.per_reference.tolist()
    (0.5, [1.0, 0.0])
    """
    gen = as_vector(gen_emb, "gen_emb")
    refs = as_matrix(ref_embs, "ref_embs", gen.shape[0])
    if refs.shape[0] == 0:
        raise ValueError("dino_sim: no reference embeddings (N = 0); a sample needs at least one")
    per_ref = cosine(refs, gen[None, :])
    return DinoSim(mean=float(per_ref.mean()), per_reference=per_ref)
