"""Percentile bootstrap confidence interval of a mean, for per-sample metric values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Bootstrap means drawn per chunk, so that memory stays near this many indices whatever n is.
_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class BootstrapCI:
    mean: float  #: mean of the non-NaN values
    low: float  #: lower percentile bound
    high: float  #: upper percentile bound
    confidence: float
    n: int  #: values used (NaN excluded)
    n_nan: int  #: NaN values left out (e.g. images where BG-Sim is undefined)
    n_resamples: int


def bootstrap_ci(values: Any, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> BootstrapCI:
    """Percentile bootstrap CI of the mean of ``values``, ignoring (and counting) NaN.

    Resamples the non-NaN values with replacement ``n_resamples`` times with a seeded generator, so
    the interval is reproducible. With no usable value every number is NaN; with one, low = high.

    >>> ci = bootstrap_ci([0.2, 0.4, float("nan"), 0.6], n_resamples=200)
    >>> round(ci.mean, 3), ci.n, ci.n_nan, ci.low <= ci.mean <= ci.high
    (0.4, 3, 1, True)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"bootstrap_ci: confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    nan = np.isnan(arr)
    data = arr[~nan]
    n, n_nan = int(data.size), int(nan.sum())
    if n == 0:
        return BootstrapCI(float("nan"), float("nan"), float("nan"), confidence, 0, n_nan, n_resamples)
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.concatenate(
        [
            data[rng.integers(0, n, size=(min(chunk, n_resamples - start), n))].mean(axis=1)
            for start in range(0, n_resamples, chunk)
        ]
    )
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return BootstrapCI(float(data.mean()), float(low), float(high), confidence, n, n_nan, n_resamples)
