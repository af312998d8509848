"""DINO-Sim as an ``evaluate`` metric: mean cosine of a generation to each of its N references."""

from __future__ import annotations

import datasets
import evaluate

from idbench.evaluate_pkg.functional import dino_sim
from idbench.evaluate_pkg.metrics._shared import CITATION_DINOV2, CITATION_IDENTITY_COLLAPSE, floats

_DESCRIPTION = """\
DINO-Sim: cosine similarity between the DINOv2 (CLS) embedding of a generation and the embedding of
each of its N reference images, averaged over the N references (paper 002 uses the whole generated
image; CogCanvas uses cropped object/fashion regions, one reference per crop). Raw cosines; the
metric is the mean over samples of the per-sample means.
"""

_KWARGS_DESCRIPTION = """\
Args:
    generated_embeddings: per sample, the DINOv2 embedding of the generation (or crop), width d.
    reference_embeddings: per sample, the N >= 1 reference embeddings (N lists of width d); N may vary.
Returns:
    dino_sim: mean over samples of each sample's mean over its references.
    dino_sim_per_sample: each sample's mean over its references.
    dino_sim_per_reference: per sample, the cosine to each reference, in reference order.
"""


class DinoSim(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_DINOV2 + CITATION_IDENTITY_COLLAPSE,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "generated_embeddings": datasets.List(datasets.Value("float32")),
                    "reference_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                }
            ),
        )

    def _compute(self, generated_embeddings, reference_embeddings) -> dict:
        results = [dino_sim(gen, refs) for gen, refs in zip(generated_embeddings, reference_embeddings)]
        per_sample = [r.mean for r in results]
        return {
            "dino_sim": float(sum(per_sample) / len(per_sample)),
            "dino_sim_per_sample": floats(per_sample),
            "dino_sim_per_reference": [floats(r.per_reference) for r in results],
        }
