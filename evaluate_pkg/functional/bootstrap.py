"""Cluster (prompt-level) bootstrap: the one place where idbench resamples for a confidence interval.

Why clusters. A benchmark generates several images (seeds) per prompt. Seeds of one prompt share the
prompt, its subjects and its references, so their scores are correlated; the prompts are the
independent units. Resampling single images as if they were independent makes an interval too narrow
by up to sqrt(seeds per prompt) (exactly that when the seeds are copies). So every interval here
draws *prompts* with replacement, each drawn prompt bringing all its images.

The draws are :func:`cluster_draws` (how often each cluster was drawn), shared by the aggregates
of ``idbench score`` (:func:`bootstrap_ci`, read as they are by the leaderboard) and by the human
alignment study (``benchmarks/charis/alignment.py``, whose correlations reuse one set of draws across all
its columns). Intervals are percentile intervals (:func:`percentile_interval`).

Estimator of :func:`bootstrap_ci`: the mean of all known values (NaN excluded and counted), i.e. the
ratio ``sum of values / number of values`` over the drawn prompts. When every prompt has the same
number of known values this is the mean of the prompt means, and its cluster bootstrap is the
ordinary bootstrap of the prompt means. With unequal numbers (a NaN in some seeds) a prompt weighs by
its known values, and the resampled ratio keeps that weighting. ``scipy.stats.bootstrap`` gives the
same interval on the prompt means in the equal case (the tests check it), but it cannot hand its draws
to the alignment study, so the draws live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: What the aggregates call this interval (``aggregates.json`` and report.md quote it).
CI_METHOD = "percentile bootstrap over prompts"

#: Draw-count entries made per chunk, so that memory stays near this many numbers whatever k is.
_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class BootstrapCI:
    mean: float  #: mean of the non-NaN values
    low: float  #: lower percentile bound; NaN with fewer than 2 clusters
    high: float  #: upper percentile bound; NaN with fewer than 2 clusters
    confidence: float
    n: int  #: values used (NaN excluded)
    n_nan: int  #: NaN values left out (e.g. images where BG-Sim is undefined)
    n_clusters: int  #: clusters (prompts) with at least one known value: the resampled units
    n_resamples: int


def _draw_chunks(n_clusters: int, n_resamples: int, seed: int):
    """The rows of :func:`cluster_draws` in chunks of at most ``_CHUNK_ELEMENTS`` entries, from one
    generator (the same stream as drawing every row at once), so memory stays bounded."""
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_ELEMENTS // max(1, n_clusters))
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        # Each row draws n_clusters cluster indices uniformly with replacement; counting them per row
        # (one bincount over row-offset indices) gives the draw counts.
        drawn = rng.integers(0, n_clusters, size=(size, n_clusters)) if n_clusters else np.zeros((size, 0), np.int64)
        offsets = (np.arange(size) * n_clusters)[:, None]
        yield np.bincount((drawn + offsets).ravel(), minlength=size * n_clusters).reshape(size, n_clusters)


def cluster_draws(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_clusters) draw counts: each row draws ``n_clusters`` clusters with replacement.

    A resample with replacement is a weighting of the clusters by how often each was drawn (a count
    vector summing to ``n_clusters``), so statistics are computed as weighted sums without
    materialising resampled data. Seeded: the same arguments give the same draws.
    """
    return np.concatenate(list(_draw_chunks(n_clusters, n_resamples, seed)))


def cluster_codes(clusters: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Cluster index of each item and the cluster labels, sorted, so the draws of a cluster do not
    depend on the order of the rows."""
    uniques, codes = np.unique(np.asarray(list(clusters), dtype=object), return_inverse=True)
    return codes.reshape(-1), uniques


def cluster_bootstrap_weights(clusters: Sequence[Any], n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_items) draw counts per item: clusters drawn with replacement (:func:`cluster_draws`),
    each drawn cluster bringing all its items."""
    codes, uniques = cluster_codes(clusters)
    return cluster_draws(len(uniques), n_resamples, seed)[:, codes].astype(np.float64)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of the finite bootstrap replicates (a replicate where the statistic is
    undefined is left out); NaN bounds when none is finite."""
    replicates = np.asarray(replicates, dtype=np.float64)
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    alpha = 1.0 - confidence
    low, high = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _checked_values(
    caller: str, values, labels, label_kind: str, confidence: float, n_resamples: int
) -> tuple[np.ndarray, list]:
    """The arguments every interval here shares, checked: the values as a flat float array and one
    label per value. Errors name the public function they came through."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"{caller}: confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"{caller}: n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = list(labels)
    if len(labels) != arr.size:
        raise ValueError(f"{caller}: {arr.size} values but {len(labels)} {label_kind} labels")
    return arr, labels


def bootstrap_ci(
    values: Any, clusters: Sequence[Any], n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> BootstrapCI:
    """Mean of ``values`` with a percentile cluster-bootstrap CI: ``clusters`` (one label per value,
    e.g. the prompt id) are the independent units, drawn with replacement with all their values.

    NaN values are excluded and counted (``n_nan``); a cluster whose every value is NaN holds no
    evidence and is not drawn. With no known value every number is NaN; with one cluster the mean
    stands but the bounds are NaN (nothing to resample between), never a zero-width interval.
    For values that really are independent, give each its own cluster (``range(len(values))``).

    >>> ci = bootstrap_ci([0.2, 0.2, 0.4, float("nan"), 0.6, 0.6], ["a", "a", "b", "b", "c", "c"], n_resamples=200)
    >>> round(ci.mean, 3), ci.n, ci.n_nan, ci.n_clusters, ci.low <= ci.mean <= ci.high
    (0.4, 5, 1, 3, True)
    """
    arr, labels = _checked_values("bootstrap_ci", values, clusters, "cluster", confidence, n_resamples)
    known = ~np.isnan(arr)
    n, n_nan = int(known.sum()), int((~known).sum())
    nan = float("nan")
    if n == 0:
        return BootstrapCI(nan, nan, nan, confidence, 0, n_nan, 0, n_resamples)
    codes, uniques = cluster_codes([c for c, k in zip(labels, known) if k])
    k = len(uniques)
    sums = np.bincount(codes, weights=arr[known], minlength=k)
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    mean = float(arr[known].mean())
    if k < 2:
        return BootstrapCI(mean, nan, nan, confidence, n, n_nan, k, n_resamples)
    # Every drawn cluster holds >= 1 value, so no resample has an empty denominator.
    replicates = np.concatenate([(d @ sums) / (d @ counts) for d in _draw_chunks(k, n_resamples, seed)])
    low, high = percentile_interval(replicates, confidence)
    return BootstrapCI(mean, low, high, confidence, n, n_nan, k, n_resamples)


# --- Resampling designs: which units a benchmark's prompts share ------------------------------------
#
# The prompt is not always the independent unit. CHARIS writes ~7 prompts per subject, so the prompts
# of one subject share its reference image and its difficulty; Identity Collapse and CogCanvas reuse
# their references (subjects, identities, items, backgrounds) across many prompts, each prompt holding
# several of them. An interval that resamples prompts alone then misses the variance of those shared
# units and comes out too narrow (docs/statistics.md: 67 % coverage of a nominal 95 % interval).
#
# A design is a list of *factors*; each observation (a prompt, with all its seeds) belongs to some
# levels of each factor (a CHARIS prompt: one subject; an Identity Collapse prompt: 2 to 10 subjects,
# and itself, the one level of the factor "prompt" it belongs to). A resample gives every level l of
# every factor an independent draw count W_l (the factor's levels drawn with replacement, as many as
# there are: mean 1, variance ~1), and an observation weighs
#
#     w = 1 + sum over factors, sum over the observation's levels l of (W_l - 1)
#
# and the resampled mean is the first-order (linearised) weighted mean
#
#     T* = T + sum_obs (w - 1) * (sum of its values - T * number of its values) / (number of all values)
#
# - One factor, one level per observation: w is the cluster's draw count, and T* is exactly the
#   cluster bootstrap of those units whenever the units hold equal numbers of values (the sum of the
#   counts is fixed, so the ratio is linear): prompts, or subjects with their prompts nested (the
#   two-stage bootstrap that resamples only the top level).
# - Several crossed factors: the multi-way ("pigeonhole") bootstrap of Owen (2007), in its first-order
#   form: Owen's weight is the product of the factors' counts, whose expansion is 1 + sum (W - 1) plus
#   interaction terms; the sum keeps the terms that carry each factor's variance.
# - Several levels of one factor (a prompt with four subjects): each level's deviation counts in full.
#   A subject's effect enters a prompt's score diluted by the prompt's other subjects, and the full
#   deviation gives it, to first order, exactly its share of the mean's variance (averaging the four
#   counts would dilute it twice: intervals too narrow; their product would multiply the variance by
#   2**levels and zero out most prompts).
# - An observation with no level of a factor (a CogCanvas prompt without an item) does not depend on
#   it: no term.
#
# Weights can be negative, which is why the mean is linearised rather than a ratio of weighted sums
# (a ratio's denominator could cross 0); a linearised mean can then leave the range of the data, so
# each replicate is held to the range of the observation means (weighted_mean_replicates).
# Known bias: each factor's term also carries the variance of the other factors (and of the residual)
# present in its levels, so the variance is overestimated by roughly the sum of those overlapping
# terms: conservative, as Owen notes for the pigeonhole bootstrap.


@dataclass(frozen=True)
class DesignFactor:
    """One factor of a resampling design: its name and the levels of every observation (labels)."""

    name: str
    levels: tuple[tuple[Any, ...], ...]  #: per observation, the labels of its levels (may be empty)


def _membership(levels: Sequence[Sequence[Any]]) -> tuple[Any, int]:
    """(sparse 0/1 n_obs x n_levels membership matrix, n_levels). Labels are sorted so that the draws
    of a level do not depend on the order of the observations; a level listed twice counts once."""
    from scipy import sparse

    labels = sorted({label for row in levels for label in row}, key=lambda v: (type(v).__name__, v))
    index = {label: i for i, label in enumerate(labels)}
    pairs = sorted({(obs, index[label]) for obs, row in enumerate(levels) for label in row})
    rows = [p[0] for p in pairs]
    cols = [p[1] for p in pairs]
    matrix = sparse.csr_matrix((np.ones(len(pairs)), (rows, cols)), shape=(len(levels), len(labels)), dtype=np.float64)
    return matrix, len(labels)


def _factor_seed(seed: int, position: int) -> Any:
    """The generator seed of the design's ``position``-th factor: the plain seed for the first (so a
    one-factor design draws exactly as :func:`cluster_draws`), independent streams for the others."""
    return seed if position == 0 else np.random.SeedSequence([seed, position])


def _level_count_chunks(factors: Sequence[DesignFactor], n_resamples: int, seed: int):
    """Blocks of rows of every factor's level draw counts: per block, a list of (membership, counts)
    with ``counts`` (rows, levels of the factor) (``None`` for a factor without levels). Each factor
    draws from its own seeded stream; memory stays bounded like :func:`cluster_draws`."""
    if not factors:
        raise ValueError("a resampling design needs at least one factor")
    n_obs = len(factors[0].levels)
    if any(len(f.levels) != n_obs for f in factors):
        raise ValueError("every factor of a design must give the levels of every observation")
    members = [_membership(f.levels) for f in factors]
    rngs = [np.random.default_rng(_factor_seed(seed, i)) for i in range(len(factors))]
    widest = max([n_obs] + [k for _, k in members])
    rows = max(1, _CHUNK_ELEMENTS // max(1, widest))
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        block = []
        for (matrix, k), rng in zip(members, rngs):
            if not k:
                block.append((matrix, None))
                continue
            # As cluster_draws: k level indices drawn with replacement per row, counted per row.
            drawn = rng.integers(0, k, size=(size, k))
            offsets = (np.arange(size) * k)[:, None]
            counts = np.bincount((drawn + offsets).ravel(), minlength=size * k).reshape(size, k).astype(np.float64)
            block.append((matrix, counts))
        yield size, block


def design_weight_chunks(factors: Sequence[DesignFactor], n_resamples: int, seed: int):
    """Blocks of rows of the (n_resamples, n_obs) observation weights ``w`` of a design (see above),
    memory bounded like :func:`cluster_draws`; each factor draws from its own seeded stream."""
    n_obs = len(factors[0].levels) if factors else 0
    for size, block in _level_count_chunks(factors, n_resamples, seed):
        weights = np.ones((size, n_obs))
        for matrix, counts in block:
            if counts is not None:
                weights += np.asarray(matrix @ (counts - 1.0).T).T  # (size, n_obs): summed deviations of its levels
        yield weights


def design_level_draws(factors: Sequence[DesignFactor], n_resamples: int, seed: int) -> list[tuple[Any, np.ndarray]]:
    """Per factor, (sparse n_obs x levels membership, (n_resamples, levels) draw counts): the draws
    behind :func:`design_weights` (the same seed gives the same draws), kept per level for statistics
    that need more than the observation weights (a studentised statistic recomputes its spread in
    every draw: ``functional/ranks.py``). Factors without levels are left out."""
    blocks = list(_level_count_chunks(factors, n_resamples, seed))
    out = []
    for position in range(len(factors)):
        matrix = blocks[0][1][position][0] if blocks else None
        if blocks and blocks[0][1][position][1] is not None:
            out.append((matrix, np.concatenate([block[position][1] for _, block in blocks])))
    return out


def design_weights(factors: Sequence[DesignFactor], n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_obs) observation weights of a design, all rows at once (see the notes above)."""
    return np.concatenate(list(design_weight_chunks(factors, n_resamples, seed)))


def weighted_mean_replicates(sums: np.ndarray, counts: np.ndarray, weight_chunks) -> np.ndarray:
    """The resampled mean of each row of weights: the first-order weighted mean
    ``T + (w - 1) @ (sums - T * counts) / counts.sum()`` with ``T = sums.sum() / counts.sum()``,
    kept within the range of the observations' own means (see the note on bounds below).
    ``sums`` may be (n_obs, n_columns), one column per statistic sharing the counts and the draws
    (e.g. many simulated datasets): the result is then (n_resamples, n_columns)."""
    total = counts.sum()
    estimate = sums.sum(axis=0) / total
    centred = (sums - np.multiply.outer(counts, estimate) if np.ndim(sums) == 2 else sums - estimate * counts) / total
    out = [estimate + (w - 1.0) @ centred for w in weight_chunks]
    replicates = np.concatenate(out) if out else np.zeros(0)
    # Bounds. With negative weights (crossed factors, several levels per observation) the first-order
    # mean can leave the range of the observations, a value no resample of them can take (an identity
    # score above 1, a negative count). Every resample with non-negative weights lies between the
    # smallest and the largest observation mean, so each replicate is held to that range. Quantiles
    # commute with the clamp, so the interval is the first-order interval cut to the range of the data.
    held = counts > 0
    if replicates.size and held.any():
        means = (sums[held] / counts[held, None]) if np.ndim(sums) == 2 else sums[held] / counts[held]
        replicates = np.clip(replicates, means.min(axis=0), means.max(axis=0))
    return replicates


def design_factors(
    units: dict[Any, dict[str, Sequence[Any]]], observations: Sequence[Any], factor_names: Sequence[str]
) -> list[DesignFactor]:
    """The design's factors over ``observations`` (prompt ids), from ``units`` (prompt id -> factor
    name -> its levels). The factor ``"prompt"`` is the observation itself and needs no entry. A prompt
    missing from ``units`` has no level of the other factors."""
    factors = []
    for name in factor_names:
        if name == "prompt":
            levels = tuple((obs,) for obs in observations)
        else:
            levels = tuple(tuple(units.get(obs, {}).get(name) or ()) for obs in observations)
        factors.append(DesignFactor(name, levels))
    return factors


def _level_counts(factors: Sequence[DesignFactor]) -> dict[str, int]:
    return {f.name: len({label for row in f.levels for label in row}) for f in factors}


@dataclass(frozen=True)
class DesignCI(BootstrapCI):
    #: levels per factor among the observations with a value (n_clusters: those observations)
    n_levels: dict[str, int] | None = None


def design_ci(
    values: Any,
    observations: Sequence[Any],
    units: dict[Any, dict[str, Sequence[Any]]],
    factor_names: Sequence[str],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> DesignCI:
    """Mean of ``values`` with a percentile interval from the resampling design ``factor_names``
    (e.g. ``("prompt",)``: prompts; ``("subject",)``: subjects with their prompts nested;
    ``("prompt", "subject")``: prompts crossed with reused subjects), ``observations`` the prompt id of
    each value and ``units`` each prompt's levels of the other factors.

    NaN values are left out and counted, as in :func:`bootstrap_ci`; a prompt whose values are all NaN
    is not in the design, nor a level that only such prompts hold. The bounds are NaN when no factor
    has two levels (nothing to resample between). ``n_clusters`` counts the prompts with a value.

    >>> units = {"p1": {"subject": ["s1"]}, "p2": {"subject": ["s1"]}, "p3": {"subject": ["s2"]}}
    >>> ci = design_ci([0.2, 0.4, 0.6], ["p1", "p2", "p3"], units, ("subject",), n_resamples=200)
    >>> round(ci.mean, 3), ci.n_clusters, ci.n_levels
    (0.4, 3, {'subject': 2})
    """
    arr, labels_in = _checked_values("design_ci", values, observations, "observation", confidence, n_resamples)
    known = ~np.isnan(arr)
    n, n_nan = int(known.sum()), int((~known).sum())
    nan = float("nan")
    if n == 0:
        return DesignCI(nan, nan, nan, confidence, 0, n_nan, 0, n_resamples, {})
    codes, labels = cluster_codes([c for c, k in zip(labels_in, known) if k])
    sums = np.bincount(codes, weights=arr[known], minlength=len(labels))
    counts = np.bincount(codes, minlength=len(labels)).astype(np.float64)
    factors = design_factors(units, list(labels), factor_names)
    n_levels = _level_counts(factors)
    mean = float(arr[known].mean())
    if max(n_levels.values()) < 2:
        return DesignCI(mean, nan, nan, confidence, n, n_nan, len(labels), n_resamples, n_levels)
    replicates = weighted_mean_replicates(sums, counts, design_weight_chunks(factors, n_resamples, seed))
    low, high = percentile_interval(replicates, confidence)
    return DesignCI(mean, low, high, confidence, n, n_nan, len(labels), n_resamples, n_levels)


@dataclass(frozen=True)
class PairedDifference:
    mean_a: float  #: A's mean on the shared pairs
    mean_b: float  #: B's mean on the shared pairs
    diff: float  #: mean_b - mean_a
    low: float
    high: float
    p_value: float  #: two-sided, from the bootstrap distribution of the difference centred on 0
    n: int  #: shared (prompt, seed) pairs with both values known
    n_clusters: int  #: prompts among them
    n_resamples: int


def paired_difference(
    values_a: Any,
    values_b: Any,
    observations: Sequence[Any],
    units: dict[Any, dict[str, Sequence[Any]]],
    factor_names: Sequence[str],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedDifference:
    """B - A on paired values (one pair per (prompt, seed); ``observations`` their prompt ids), with a
    percentile interval and a two-sided p-value from one set of design draws applied to both runs.

    Each resample's statistic is the difference of the two resampled means under the same weights, so
    what the runs share (a hard subject, a hard prompt) cancels. The p-value is the share of resampled
    differences at least as far from the observed difference as it is from 0: the bootstrap
    distribution shifted to be centred under the null "no difference" (Hall & Wilson 1991), with the
    +1 correction ``(1 + hits) / (1 + resamples)`` so it is never 0. A pair with a NaN on either side
    is left out.
    """
    a = np.asarray(values_a, dtype=np.float64).reshape(-1)
    b = np.asarray(values_b, dtype=np.float64).reshape(-1)
    labels_in = np.asarray(list(observations), dtype=object)
    if not a.size == b.size == labels_in.size:
        raise ValueError(f"paired_difference: {a.size} A values, {b.size} B values, {labels_in.size} labels")
    both = ~(np.isnan(a) | np.isnan(b))
    nan = float("nan")
    if not both.any():
        return PairedDifference(nan, nan, nan, nan, nan, nan, 0, 0, n_resamples)
    codes, labels = cluster_codes(list(labels_in[both]))
    k = len(labels)
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    sums_a = np.bincount(codes, weights=a[both], minlength=k)
    sums_b = np.bincount(codes, weights=b[both], minlength=k)
    mean_a, mean_b = float(sums_a.sum() / counts.sum()), float(sums_b.sum() / counts.sum())
    diff = mean_b - mean_a
    factors = design_factors(units, list(labels), factor_names)
    if max(_level_counts(factors).values()) < 2:
        return PairedDifference(mean_a, mean_b, diff, nan, nan, nan, int(both.sum()), k, n_resamples)
    replicates = weighted_mean_replicates(sums_b - sums_a, counts, design_weight_chunks(factors, n_resamples, seed))
    low, high = percentile_interval(replicates, confidence)
    # Round-off: a difference that is 0 everywhere must give p = 1, not a spread of 1e-17 hits.
    tolerance = 1e-12 * max(1.0, float(np.abs(sums_b - sums_a).max()))
    hits = int(np.sum(np.abs(replicates - diff) >= abs(diff) - tolerance))
    p_value = (1 + hits) / (1 + replicates.size)
    return PairedDifference(mean_a, mean_b, diff, low, high, float(min(1.0, p_value)), int(both.sum()), k, n_resamples)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, made monotone, capped at 1); a NaN p-value stays
    NaN and is not counted in the family."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    m = known.size
    running = 0.0
    for rank, i in enumerate(known[np.argsort(p[known], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()
