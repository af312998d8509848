"""One-to-one assignment of generated instances (faces, crops) to reference subjects.

Matching by Hungarian assignment rather than by each reference's best match keeps one generated
face from being credited to several references (the "homogenisation" failure of multi-subject
generators would otherwise score well).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

#: The similarity an unmatched reference scores (ID-Sim convention: a missing person scores 0).
UNMATCHED_SIMILARITY = 0.0


@dataclass(frozen=True)
class Match:
    """Result of :func:`hungarian_match`, indexed by reference."""

    gen_index: np.ndarray  #: (n_ref,) int, the generated instance matched to each reference, -1 if none
    similarity: np.ndarray  #: (n_ref,) float, the matched similarity; UNMATCHED_SIMILARITY if none

    @property
    def matched(self) -> np.ndarray:
        """(n_ref,) bool, True where the reference got a generated instance."""
        return self.gen_index >= 0


def hungarian_match(sim: Any) -> Match:
    """Match references (rows) to generated instances (columns) maximising the total similarity.

    ``sim`` has shape ``(n_ref, n_gen)``; either may be 0 and they need not be equal. With fewer
    generated instances than references, ``n_ref - n_gen`` references stay unmatched (index -1,
    similarity 0); with more, the surplus generated instances are ignored. Raw similarities are kept:
    a matched negative cosine stays negative (so it scores below an unmatched reference's 0).

    >>> m = hungarian_match([[0.9, 0.8], [0.85, 0.1], [0.2, 0.3]])
    >>> m.gen_index.tolist(), m.similarity.tolist()
    ([1, 0, -1], [0.8, 0.85, 0.0])
    """
    sim_arr = np.asarray(sim, dtype=np.float64)
    if sim_arr.ndim != 2:
        raise ValueError(f"hungarian_match: expected a (n_ref, n_gen) matrix, got shape {sim_arr.shape}")
    if not np.all(np.isfinite(sim_arr)):
        raise ValueError("hungarian_match: the similarity matrix has NaN or infinite entries")
    n_ref = sim_arr.shape[0]
    gen_index = np.full(n_ref, -1, dtype=np.int64)
    similarity = np.full(n_ref, UNMATCHED_SIMILARITY, dtype=np.float64)
    if sim_arr.size:
        rows, cols = linear_sum_assignment(sim_arr, maximize=True)
        gen_index[rows] = cols
        similarity[rows] = sim_arr[rows, cols]
    return Match(gen_index=gen_index, similarity=similarity)
