"""Turning what callers hand in (lists, numpy, CPU torch tensors) into float64 numpy arrays.

Private: the public functions call these so that every metric accepts the same inputs and fails with
the same kind of message.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_vector(x: Any, name: str) -> np.ndarray:
    """A 1-d float64 array; raises ``ValueError`` naming ``name`` when ``x`` is not 1-d."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d vector, got shape {arr.shape}")
    return arr


def as_matrix(x: Any, name: str, dim: int | None = None) -> np.ndarray:
    """A 2-d float64 array of row vectors.

    A 1-d input is one row. An empty input (``[]``, shape ``(0,)``) is ``(0, dim)``: a face detector
    that found nothing hands in an empty list, and its width is then the width of the other side.
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, dim if dim is not None else (arr.shape[-1] if arr.ndim == 2 else 0)))
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected (n, d) row vectors, got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{name}: expected vectors of width {dim}, got shape {arr.shape}")
    return arr
