"""Simultaneous claims about a board of models: which pairs differ, rank sets and tiers.

A leaderboard makes many claims at once: "A is better than B" for every pair it separates. Testing
each pair at 5 % (or each model against a leader that is itself the largest of K noisy means) makes
some false claim almost certain on a large board: with 20 models of equal quality a per-pair rule
splits them into tiers in nearly every run. The functions here make the claims jointly, so that the
chance of *any* false claim on the whole board is at most ``1 - level``:

- :func:`stepdown_pairwise` is the step-down max-T procedure of Romano & Wolf (2005, *Econometrica*
  73(4), "Stepwise multiple testing as formalized data snooping"), with the bootstrap-t distribution
  of the largest studentised pairwise difference as its critical value; it controls the family-wise
  error rate over all K (K - 1) / 2 pairs.
- :func:`rank_sets` turns its claims into simultaneous rank confidence sets, as Mogstad, Romano,
  Shaikh & Wilhelm (2024, *Review of Economic Studies* 91(1), "Inference for ranks with applications
  to mobility across neighbourhoods and academic achievement across countries") do: a model's best
  rank is 1 + the models shown better than it, its worst rank K - the models shown worse.
- :func:`tiers` groups the models in order of their means: a model starts a new tier only when it is
  shown worse than the current tier's leader, so every boundary between tiers is one of the joint claims.

The inputs are each model's mean, its shares over the units of the benchmark's own resampling design,
and one set of draws of those units for all models (paired), oriented so that higher is better.
Pure numpy; memory stays bounded by working through the pairs in chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .bootstrap import DesignFactor, design_level_draws

#: Pairwise differences held at once, so memory stays near this many numbers whatever K is.
_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class PairwiseClaims:
    """The outcome of :func:`stepdown_pairwise` over K models."""

    better: np.ndarray  #: (K, K) booleans: better[j, k] when model j is shown better than model k
    equal: np.ndarray  #: (K, K) booleans: identical results (equal on every unit, so in every draw)
    critical: float  #: the last critical value used (studentised scale); inf when no pair could differ
    steps: int  #: step-down rounds that rejected something


def _chunks(n_pairs: int, width: int):
    size = max(1, _CHUNK_ELEMENTS // max(1, width))
    for start in range(0, n_pairs, size):
        yield slice(start, min(n_pairs, start + size))


def _pair_statistics(point, contributions, draws, first, second):
    """For the pairs (first[i], second[i]): the difference d, its standard error, and per draw the
    centred resampled difference and its own standard error (draws x pairs each)."""
    d = point[first] - point[second]
    var = np.zeros(first.size)
    shift = np.zeros((draws[0].shape[0], first.size))
    var_star = np.zeros_like(shift)
    for levels, counts in zip(contributions, draws):
        n_levels = levels.shape[0]
        g = levels[:, first] - levels[:, second]  # levels x pairs: each level's share of the difference
        inflate = n_levels / (n_levels - 1)  # the usual small-sample factor of a cluster-robust variance
        var += inflate * ((g - g.mean(axis=0)) ** 2).sum(axis=0)
        drawn = counts @ g
        shift += drawn - g.sum(axis=0)
        # The draw's own spread of the levels it holds: sum W (g - mean)^2, the counts summing to n_levels.
        var_star += inflate * np.maximum(counts @ (g * g) - drawn * drawn / n_levels, 0.0)
    return d, np.sqrt(var), shift, np.sqrt(var_star)


def stepdown_pairwise(
    point: np.ndarray, contributions: list[np.ndarray], draws: list[np.ndarray], level: float = 0.95
) -> PairwiseClaims:
    """Which models are better than which, jointly at ``level`` over all pairs.

    ``point`` (K,): the models' means, higher better. The means are linear in the data, so each is its
    value plus a sum over the design's units: ``contributions`` holds, per factor of the resampling
    design, a (levels, K) array of each level's share of each model's mean (the level's sum of the
    centred values of its observations, over their number: ``bootstrap.design_level_draws`` and the
    first-order mean of ``bootstrap.weighted_mean_replicates``); ``draws`` the matching (draws, levels)
    draw counts. All models share the draws, so the comparison is paired.

    Each pair's difference d is studentised by a cluster-robust standard error (each factor's levels
    as clusters, with the n / (n - 1) factor), and every bootstrap draw is studentised by its own
    (bootstrap-t): a standard error from a few dozen units is itself uncertain, and a max over many
    pairs reaches into the tails where that matters. On the CHARIS shape (29 subjects) a critical value
    from draws divided by one fixed error let equal models split in 16 % of boards of 10 and 32 % of 50.

    The critical value is the ``level`` quantile of the largest ``|d* - d| / se*`` among the pairs not
    yet rejected; each pair with ``|d| / se`` beyond it is rejected, and the step repeats over the rest
    until nothing more is rejected (Romano & Wolf 2005, Algorithm 3.1).

    Degenerate pairs: two models whose difference has no spread (se = 0) are equal in every draw if
    d = 0 (identical results, never told apart) and differ with certainty otherwise (one is the other
    plus a constant on every unit: told apart without a test); neither enters the maximum.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"stepdown_pairwise: level must be in (0, 1), got {level}")
    point = np.asarray(point, dtype=np.float64).reshape(-1)
    k = point.size
    kept = [
        (np.asarray(c, dtype=np.float64), np.asarray(w, dtype=np.float64))
        for c, w in zip(contributions, draws)
        if np.shape(c)[0] >= 2
    ]
    better, equal = np.zeros((k, k), dtype=bool), np.zeros((k, k), dtype=bool)
    first, second = np.triu_indices(k, 1)
    if first.size == 0 or not kept or kept[0][1].shape[0] < 2:
        return PairwiseClaims(better, equal, float("inf"), 0)
    levels, counts = [c for c, _ in kept], [w for _, w in kept]
    n_draws = counts[0].shape[0]
    width = n_draws + sum(c.shape[0] for c in levels)
    scale = 1e-9 * (1.0 + float(np.abs(point).max()))  # float noise: a copy of a model ties with it
    d, se = np.empty(first.size), np.empty(first.size)
    for part in _chunks(first.size, width):
        d[part], se[part], _, _ = _pair_statistics(point, levels, counts, first[part], second[part])
    constant = se <= scale
    rejected = constant & (np.abs(d) > scale)
    tested = ~constant
    t_stat = np.where(tested, np.abs(d) / np.where(tested, se, 1.0), 0.0)
    critical, steps = float("inf"), 0
    while True:
        active = tested & ~rejected
        if not active.any():
            break
        largest = np.zeros(n_draws)
        for part in _chunks(first.size, 3 * width):
            cols = np.flatnonzero(active[part]) + part.start
            if not cols.size:
                continue
            _, _, shift, se_star = _pair_statistics(point, levels, counts, first[cols], second[cols])
            # A draw that holds one level only has no spread: its statistic is unbounded (conservative).
            z = np.where(
                se_star > scale,
                np.abs(shift) / np.maximum(se_star, scale),
                np.where(np.abs(shift) > scale, np.inf, 0.0),
            )
            np.maximum(largest, z.max(axis=1), out=largest)
        critical = float(np.quantile(largest, level, method="higher"))
        new = active & (t_stat > critical)
        if not new.any():
            break
        rejected |= new
        steps += 1
    winners = np.where(d > 0, first, second)
    losers = np.where(d > 0, second, first)
    better[winners[rejected], losers[rejected]] = True
    same = constant & ~rejected
    equal[first[same], second[same]] = equal[second[same], first[same]] = True
    return PairwiseClaims(better, equal, critical, steps)


def board_claims(
    values: np.ndarray, factors: Sequence[DesignFactor], n_draws: int = 1000, seed: int = 0, level: float = 0.95
) -> PairwiseClaims:
    """:func:`stepdown_pairwise` for ``values`` (observations x models, each observation one prompt's
    mean, higher better) under the resampling design ``factors`` (``bootstrap.design_factors``): each
    model's mean is the plain mean over the observations, and each level's share of it is the sum of
    its observations' centred values over their number (the first-order form the aggregates use)."""
    values = np.asarray(values, dtype=np.float64)
    point = values.mean(axis=0)
    centred = (values - point) / values.shape[0]
    drawn = design_level_draws(factors, n_draws, seed)
    contributions = [np.asarray(matrix.T @ centred) for matrix, _ in drawn]
    return stepdown_pairwise(point, contributions, [counts for _, counts in drawn], level)


def rank_sets(better: np.ndarray, equal: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(best rank, worst rank) of each model from the joint claims (:func:`stepdown_pairwise`): 1 + the
    models shown better than it, and K - the models shown worse or known equal (identical results
    share a rank, as the point ranking's ties do). Held jointly by every model at the claims' level
    (Mogstad et al. 2024); they always contain the point rank of a shared ranking."""
    better = np.asarray(better, dtype=bool)
    k = better.shape[0]
    same = np.zeros_like(better) if equal is None else np.asarray(equal, dtype=bool)
    return 1 + better.sum(axis=0), k - better.sum(axis=1) - same.sum(axis=1)


def tiers(point: np.ndarray, better: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Tier of each model: in order of ``point`` (highest first; ``order`` breaks ties, e.g. submission
    ids), the first model leads tier 1 and each next model joins the current tier unless it is shown
    worse than that tier's leader (``better[leader, model]``), when it leads the next tier. Models never
    told apart (identical results) are therefore always in one tier, and with no joint claim at all
    every model is in tier 1."""
    point = np.asarray(point, dtype=np.float64).reshape(-1)
    k = point.size
    keys = np.arange(k) if order is None else np.asarray(order)
    sequence = sorted(range(k), key=lambda m: (-point[m], keys[m]))
    out = np.zeros(k, dtype=int)
    if not k:
        return out
    tier, leader = 1, sequence[0]
    for model in sequence:
        if model != leader and better[leader, model]:
            tier, leader = tier + 1, model
        out[model] = tier
    return out
