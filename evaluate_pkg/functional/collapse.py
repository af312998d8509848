"""Subject Collapse Rate (paper 002) and its instance-level variant; the two are named apart.

- :func:`subject_collapse_rate` is the paper's measure: whole-image DINOv2 embedding of the
  generation against each of the N reference embeddings; a subject "collapsed" when its similarity
  is below tau. A scene embedding is compared with single-subject references, so it is a proxy.
- :func:`instance_collapse_rate` compares per-subject crops of the generation (detector + mask),
  Hungarian-matched to the references; a reference with no crop collapsed by definition.

Both are per image, in [0, 1], lower is better. Aggregate by averaging images (as the paper's
tables do per subject count N); pooling subjects over images of different N weighs large N more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrays import as_matrix
from .matching import hungarian_match
from .similarity import cosine_matrix

#: The thresholds paper 002 reports.
SCR_TAUS: tuple[float, ...] = (0.4, 0.5, 0.6)


def subject_collapse_rate(sims_per_ref: Any, tau: float) -> float:
    """SCR@tau for one image: the fraction of its N references whose similarity is below ``tau``.

    ``sims_per_ref`` is ``(N,)``, e.g. ``dino_sim(...).per_reference``. Strictly below: a similarity
    equal to tau is not collapsed. NaN similarities make the rate NaN (it cannot be decided).

    >>> subject_collapse_rate([0.7, 0.45, 0.2, 0.5], tau=0.5)
    0.5
    """
    sims = np.asarray(sims_per_ref, dtype=np.float64).reshape(-1)
    if sims.size == 0:
        raise ValueError("subject_collapse_rate: no reference similarities (N = 0)")
    if np.isnan(sims).any():
        return float("nan")
    return float(np.mean(sims < tau))


def instance_collapse_rate(crop_embs: Any, ref_embs: Any, tau: float) -> float:
    """Instance-level collapse rate for one image: references whose matched crop is below ``tau``.

    ``crop_embs`` ``(m, d)``: one embedding per subject crop found in the generation (m may be 0 or
    differ from n). ``ref_embs`` ``(n, d)``. Crops are matched one-to-one to references by Hungarian
    assignment on cosine; a reference left without a crop counts as collapsed whatever tau is.

    >>> instance_collapse_rate([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], tau=0.5)  # one subject missing
    0.5
    """
    refs = as_matrix(ref_embs, "ref_embs")
    if refs.shape[0] == 0:
        raise ValueError("instance_collapse_rate: no reference embeddings (n = 0)")
    crops = as_matrix(crop_embs, "crop_embs", refs.shape[1])
    match = hungarian_match(cosine_matrix(refs, crops))
    collapsed = ~match.matched | (match.similarity < tau)
    return float(np.mean(collapsed))
