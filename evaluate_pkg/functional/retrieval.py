"""Reference retrieval (CogCanvas auxiliary task): Precision@k and Recall@k of a ranked list."""

from __future__ import annotations

from typing import Collection, Hashable, Sequence

# The cut-offs CogCanvas reports, declared with its spec (the metric names come from them).
from idbench.builders.benchmarks.cogcanvas import RETRIEVAL_KS


def precision_recall_at_k(
    ranked_ids: Sequence[Hashable], relevant_ids: Collection[Hashable], k: int
) -> tuple[float, float]:
    """``(P@k, R@k)`` for one query.

    P@k = |top-k ∩ relevant| / k (the denominator stays k when fewer than k items are ranked);
    R@k = |top-k ∩ relevant| / |relevant|, NaN when nothing is relevant (undefined, not 0).
    A ranked id repeated in the top k counts once.

    >>> precision_recall_at_k(["a", "b", "c"], {"b", "z"}, k=3)  # doctest: +ELLIPSIS
    (0.333..., 0.5)
    """
    if k < 1:
        raise ValueError(f"precision_recall_at_k: k must be >= 1, got {k}")
    relevant = set(relevant_ids)
    hits = len(set(list(ranked_ids)[:k]) & relevant)
    recall = hits / len(relevant) if relevant else float("nan")
    return hits / k, recall


def retrieval_precision_recall(
    ranked_ids: Sequence[Hashable], relevant_ids: Collection[Hashable], ks: Sequence[int] = RETRIEVAL_KS
) -> dict[str, float]:
    """P@k and R@k for several k at once, keyed ``"p@1"``, ``"r@1"``, ``"p@3"``, ...

    >>> retrieval_precision_recall(["a", "b"], ["a"], ks=(1,))
    {'p@1': 1.0, 'r@1': 1.0}
    """
    out: dict[str, float] = {}
    for k in ks:
        out[f"p@{k}"], out[f"r@{k}"] = precision_recall_at_k(ranked_ids, relevant_ids, k)
    return out
