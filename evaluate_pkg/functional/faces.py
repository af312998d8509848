"""ID-Sim: face identity similarity, Hungarian-matched between reference and generated faces.

The embeddings come from a face recognition model (ArcFace in the papers) run on faces aligned with
their 5-point landmarks (insightface ``norm_crop``); unaligned crops give meaningless cosines, and
that alignment happens upstream, in the encoder.
"""

from __future__ import annotations

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
