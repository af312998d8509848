"""ID-Sim as an ``evaluate`` metric: Hungarian-matched face embedding cosine per reference identity."""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

from idbench.evaluate_pkg.functional import id_sim_with_faceless
from idbench.evaluate_pkg.metrics._shared import (
    CITATION_ARCFACE,
    CITATION_COGCANVAS,
    CITATION_HUNGARIAN,
    floats,
    mean_of_defined,
)

_DESCRIPTION = """\
ID-Sim (CogCanvas): cosine similarity between face recognition embeddings (ArcFace, on faces aligned
with 5-point landmarks) of each reference identity and the generated face matched to it by Hungarian
assignment; a reference without a matched face scores 0. A reference that shows no detectable face
itself (an empty embedding) is missing evidence: NaN, left out of the matching and counted. Per image
the mean over the identities with a face; the metric is the mean over images where that is defined
(the CogCanvas suite computes exactly this). Also reports detected vs expected face counts: surplus faces are
ignored by the score, so read the counts alongside it. Raw cosines (paper tables show x100).
"""

_KWARGS_DESCRIPTION = """\
Args:
    reference_face_embeddings: per image, one face embedding per reference identity (n >= 1 lists, width d;
        an empty list for a reference in which no face was found).
    generated_face_embeddings: per image, the embeddings of all k faces detected in the generation (k may be 0).
Returns:
    id_sim: mean over images of the per-image ID-Sim.
    id_sim_per_sample: per image, the mean over its reference identities.
    id_sim_per_reference: per image, the matched cosine per reference identity (0 where unmatched,
        NaN where the reference has no face).
    references_without_face: per image, how many references had no face (missing evidence, not scored).
    detected_faces / expected_faces: per image, k and n.
    face_count_accuracy: fraction of images where k == n.
"""


class IdSim(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_COGCANVAS + CITATION_ARCFACE + CITATION_HUNGARIAN,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "reference_face_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                    "generated_face_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                }
            ),
        )

    def _compute(self, reference_face_embeddings, generated_face_embeddings) -> dict:
        results = [
            id_sim_with_faceless([ref if len(ref) else None for ref in refs], gens)
            for refs, gens in zip(reference_face_embeddings, generated_face_embeddings)
        ]
        per_sample = np.array([r.mean for r in results])
        return {
            "id_sim": mean_of_defined(per_sample)[0],
            "id_sim_per_sample": floats(per_sample),
            "id_sim_per_reference": [floats(r.per_reference) for r in results],
            "detected_faces": [r.detected for r in results],
            "expected_faces": [r.expected for r in results],
            "references_without_face": [r.without_face for r in results],
            "face_count_accuracy": float(np.mean([r.count_correct for r in results])),
        }
