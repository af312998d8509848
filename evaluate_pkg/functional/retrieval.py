"""Reference retrieval (CogCanvas auxiliary task): Precision@k and Recall@k of a ranked list, and what a
ranker that orders the candidates at random scores on average (the chance level to read them against)."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence


def precision_recall_at_k(
    ranked_ids: Sequence[Hashable], relevant_ids: Collection[Hashable], k: int
) -> tuple[float, float]:
    """``(P@k, R@k)`` for one query.

    P@k = |top-k ∩ relevant| / k (the denominator stays k when fewer than k items are ranked, so
    P@k's ceiling is min(|relevant|, k) / k: 1/3 at k = 3 with one relevant id);
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
    ranked_ids: Sequence[Hashable], relevant_ids: Collection[Hashable], ks: Sequence[int]
) -> dict[str, float]:
    """P@k and R@k for several k at once, keyed ``"p@1"``, ``"r@1"``, ``"p@3"``, ...

    >>> retrieval_precision_recall(["a", "b"], ["a"], ks=(1,))
    {'p@1': 1.0, 'r@1': 1.0}
    """
    out: dict[str, float] = {}
    for k in ks:
        out[f"p@{k}"], out[f"r@{k}"] = precision_recall_at_k(ranked_ids, relevant_ids, k)
    return out


def random_expected_precision_recall(n_candidates: int, n_relevant: int, ks: Sequence[int]) -> dict[str, float]:
    """The expected P@k and R@k of a uniformly random ordering of ``n_candidates`` candidates of which
    ``n_relevant`` are relevant, keyed as :func:`retrieval_precision_recall` keys its values.

    The top k of a random ordering is a uniform draw of min(k, c) candidates without replacement, so
    the hits are hypergeometric with mean E[hits@k] = r * min(k, c) / c. Hence
    E[R@k] = min(k, c) / c (NaN when nothing is relevant, as R@k itself) and
    E[P@k] = r * min(k, c) / (c * k). A slot with one candidate has E[R@k] = 1: it cannot be missed.

    >>> random_expected_precision_recall(4, 1, ks=(1, 3))
    {'p@1': 0.25, 'r@1': 0.25, 'p@3': 0.25, 'r@3': 0.75}
    """
    c, r = int(n_candidates), int(n_relevant)
    if c < 1 or not 0 <= r <= c:
        raise ValueError(
            f"random_expected_precision_recall: need 1 <= candidates and 0 <= relevant <= candidates, got {c}, {r}"
        )
    out: dict[str, float] = {}
    for k in ks:
        if k < 1:
            raise ValueError(f"random_expected_precision_recall: k must be >= 1, got {k}")
        drawn = min(k, c)
        out[f"p@{k}"] = r * drawn / (c * k)
        out[f"r@{k}"] = drawn / c if r else float("nan")
    return out
