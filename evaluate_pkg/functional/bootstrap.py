"""Cluster (prompt-level) bootstrap: the one place where idbench resamples for a confidence interval.

Why clusters. A benchmark generates several images (seeds) per prompt. Seeds of one prompt share the
prompt, its subjects and its references, so their scores are correlated; the prompts are the
independent units. Resampling single images as if they were independent makes an interval too narrow
by up to sqrt(seeds per prompt) (exactly that when the seeds are copies). So every interval here
draws *prompts* with replacement, each drawn prompt bringing all its images.

The draws are :func:`cluster_draws` (how often each cluster was drawn), shared by the aggregates
of ``idbench score`` (:func:`bootstrap_ci`, read as they are by the leaderboard) and by the human
alignment study (``evaluate_pkg/alignment.py``, whose correlations reuse one set of draws across all
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
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"bootstrap_ci: confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = list(clusters)
    if len(labels) != arr.size:
        raise ValueError(f"bootstrap_ci: {arr.size} values but {len(labels)} cluster labels")
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
