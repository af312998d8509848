"""ID-Sim: face identity similarity, Hungarian-matched between reference and generated faces.

The embeddings come from a face recognition model (ArcFace in the papers) run on faces aligned with
their 5-point landmarks (insightface ``norm_crop``); unaligned crops give meaningless cosines, and
that alignment happens upstream, in the encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._arrays import as_matrix
from .matching import hungarian_match
from .similarity import cosine_matrix


@dataclass(frozen=True)
class IdSim:
    """ID-Sim of one generated image against its n reference identities."""

    per_reference: np.ndarray  #: (n,) matched cosine per reference identity; 0 where no face matched
    mean: float  #: mean of ``per_reference``: the image's ID-Sim (averaged over all persons)
    gen_index: np.ndarray  #: (n,) the generated face matched to each reference, -1 if none
    detected: int  #: k, faces found in the generation
    expected: int  #: n, reference identities the prompt asks for
    #: references whose own image shows no detectable face: NaN in ``per_reference``, outside ``mean``
    without_face: int = 0

    @property
    def count_correct(self) -> bool:
        """Whether the detector found exactly as many faces as the prompt has persons."""
        return self.detected == self.expected


def id_sim(ref_face_embs: Any, gen_face_embs: Any) -> IdSim:
    """ID-Sim for one image: per reference identity, the cosine to its Hungarian-matched generated face.

    ``ref_face_embs`` ``(n, d)``, one face embedding per reference identity (n >= 1);
    ``gen_face_embs`` ``(k, d)``, every face detected in the generation (k may be 0, or more than n).
    A reference with no matched face scores 0, so a missing person pulls the mean down; surplus faces
    are ignored (but reported through ``detected``). Matched cosines are raw and may be negative.

    >>> r = id_sim([[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.8]])  # one face for two persons
    >>> r.per_reference.tolist(), r.mean, r.detected, r.expected
    ([0.0, 0.8], 0.4, 1, 2)
    """
    refs = as_matrix(ref_face_embs, "ref_face_embs")
    if refs.shape[0] == 0:
        raise ValueError("id_sim: no reference faces (n = 0)")
    gens = as_matrix(gen_face_embs, "gen_face_embs", refs.shape[1])
    match = hungarian_match(cosine_matrix(refs, gens))
    return IdSim(
        per_reference=match.similarity,
        mean=float(match.similarity.mean()),
        gen_index=match.gen_index,
        detected=int(gens.shape[0]),
        expected=int(refs.shape[0]),
    )


def id_sim_with_faceless(ref_face_embs: Sequence[Any | None], gen_face_embs: Any) -> IdSim:
    """ID-Sim for one image when some references may show no detectable face (given as None).

    A face-less reference is missing evidence, not a miss of the generator: its per-reference value is
    NaN (kept, in order, never 0) and it takes no part in the matching; ``mean`` is over the references
    that have a face (NaN when none has), and ``without_face`` counts the others so that the smaller
    denominator is visible. A reference *with* a face that no generated face matches still scores 0,
    as the paper averages over all persons: that is the generation's fault.

    >>> r = id_sim_with_faceless([[1.0, 0.0], None, [0.0, 1.0]], [[0.6, 0.8]])
    >>> r.per_reference.tolist(), r.mean, r.without_face, r.expected
    ([0.0, nan, 0.8], 0.4, 1, 3)
    """
    usable = [i for i, e in enumerate(ref_face_embs) if e is not None]
    n = len(ref_face_embs)
    per_reference = np.full(n, np.nan)
    gen_index = np.full(n, -1, dtype=np.int64)
    if not usable:
        gens = np.asarray(gen_face_embs, dtype=np.float64)
        return IdSim(per_reference, float("nan"), gen_index, int(len(gens)), n, without_face=n)
    found = id_sim(np.stack([np.asarray(ref_face_embs[i], dtype=np.float64) for i in usable]), gen_face_embs)
    per_reference[usable] = found.per_reference
    gen_index[usable] = found.gen_index
    return IdSim(per_reference, found.mean, gen_index, found.detected, n, without_face=n - len(usable))
