"""LAION aesthetic predictor v2 as an ``evaluate`` metric, over CLIP ViT-L/14 image embeddings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import datasets
import evaluate

from idbench.evaluate_pkg.functional import aesthetic_score
from idbench.evaluate_pkg.metrics._shared import CITATION_CLIP, CITATION_LAION_AESTHETIC, floats

_DESCRIPTION = """\
Aesth.: the LAION aesthetic predictor v2 (MLP 768->1024->128->64->16->1, no activations) applied to
the L2-normalised CLIP ViT-L/14 image embedding of each generation; a rating on the 1-10 scale, mean
over images. The head's weights are passed to compute as a state dict of arrays
(`layers.{0,2,4,6,7}.{weight,bias}`). Not comparable with the aesthetic predictor v2.5 (SigLIP).
"""

_KWARGS_DESCRIPTION = """\
Args:
    image_embeddings: per image, its CLIP ViT-L/14 projected image embedding (768 floats, raw).
    head_weights (compute keyword, required): the v2 head's state dict (numpy arrays or CPU tensors).
Returns:
    aesthetic: mean predicted rating.
    aesthetic_per_sample: rating per image.
"""


class Aesthetic(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_LAION_AESTHETIC + CITATION_CLIP,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"image_embeddings": datasets.List(datasets.Value("float32"))}),
        )

    def _compute(self, image_embeddings, head_weights: Mapping[str, Any] | None = None) -> dict:
        if head_weights is None:
            raise ValueError(
                "aesthetic: compute(head_weights=...) is required: the LAION aesthetic predictor v2 state dict "
                "(keys layers.{0,2,4,6,7}.{weight,bias}), e.g. from the encoder registry's aesthetic-v2 loader"
            )
        per_sample = aesthetic_score(head_weights, image_embeddings)
        return {"aesthetic": float(per_sample.mean()), "aesthetic_per_sample": floats(per_sample)}
