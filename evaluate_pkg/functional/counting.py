"""Count accuracy (CogCanvas text-to-image auxiliary task): did the generation hold N persons?"""

from __future__ import annotations

from typing import Any

import numpy as np


def count_correct(detected: Any, expected: Any) -> np.ndarray:
    """Per sample, whether the detected count equals the expected count (bool array).

    >>> count_correct([2, 3, 5], [2, 4, 5]).tolist()
    [True, False, True]
    """
    det, exp = np.asarray(detected), np.asarray(expected)
    if det.shape != exp.shape:
        raise ValueError(f"count_correct: detected counts have shape {det.shape}, expected counts {exp.shape}")
    if (det < 0).any() or (exp < 0).any():
        raise ValueError("count_correct: counts must be >= 0")
    return np.atleast_1d(det == exp)


def count_accuracy(detected: Any, expected: Any) -> float:
    """Fraction of samples whose detected person count equals the expected N.

    >>> count_accuracy([2, 3, 5], [2, 4, 5])  # doctest: +ELLIPSIS
    0.666...
    """
    return float(count_correct(detected, expected).mean())
