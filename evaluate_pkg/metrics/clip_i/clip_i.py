"""CLIP-I as an ``evaluate`` metric: cosine of CLIP image embeddings of generation and reference."""

from __future__ import annotations

import datasets
import evaluate

from idbench.evaluate_pkg.functional import clip_i
from idbench.evaluate_pkg.metrics._shared import CITATION_CLIP, floats

_DESCRIPTION = """\
CLIP-I: cosine similarity between the CLIP image embeddings of a generation and of a reference image.
One row per (generation, reference) pair; raw cosine, mean over pairs. Embed both images with the
model's own processor: resize, crop and interpolation change the values. Paper 002 finds CLIP-I stays
high under identity bleeding, hence DINO-Sim as the primary identity measure.
"""

_KWARGS_DESCRIPTION = """\
Args:
    generated_embeddings: per pair, the CLIP image embedding of the generation (width d).
    reference_embeddings: per pair, the CLIP image embedding of the reference (width d).
Returns:
    clip_i: mean raw cosine over pairs.
    clip_i_per_sample: raw cosine per pair, in input order.
"""


class ClipI(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_CLIP,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "generated_embeddings": datasets.List(datasets.Value("float32")),
                    "reference_embeddings": datasets.List(datasets.Value("float32")),
                }
            ),
        )

    def _compute(self, generated_embeddings, reference_embeddings) -> dict:
        per_sample = clip_i(generated_embeddings, reference_embeddings)
        return {"clip_i": float(per_sample.mean()), "clip_i_per_sample": floats(per_sample)}
