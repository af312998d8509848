"""CLIP-T as an ``evaluate`` metric: cosine of CLIP image and text embeddings, per sample and mean."""

from __future__ import annotations

import datasets
import evaluate

from idbench.evaluate_pkg.functional import clip_t
from idbench.evaluate_pkg.metrics._shared import CITATION_CLIP, CITATION_CLIPSCORE, floats

_DESCRIPTION = """\
CLIP-T: cosine similarity between the CLIP text embedding of the prompt and the CLIP image embedding
of the generation (projected embeddings, e.g. transformers 5 `get_*_features(...).pooler_output`).
Raw cosine in [-1, 1], mean over samples (each sample counts once; nothing is clamped). For the
x100-and-clamp CLIPScore display use `idbench.evaluate_pkg.functional.clipscore_torchmetrics_convention`
per sample. CLIP reads 77 tokens: longer prompts are truncated by the tokenizer upstream.
"""

_KWARGS_DESCRIPTION = """\
Args:
    image_embeddings: per sample, the CLIP image embedding (list of floats, width d) of the generation.
    text_embeddings: per sample, the CLIP text embedding (width d) of its prompt.
Returns:
    clip_t: mean raw cosine over samples.
    clip_t_per_sample: raw cosine per sample, in input order.
Example:
    >>> import evaluate, idbench.metrics
    >>> m = evaluate.load(str(idbench.metrics.path("clip_t")))  # this module's installed folder
    >>> m.compute(image_embeddings=[[1.0, 0.0]], text_embeddings=[[1.0, 1.0]])["clip_t"]  # ~0.7071
"""


class ClipT(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_CLIP + CITATION_CLIPSCORE,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "image_embeddings": datasets.List(datasets.Value("float32")),
                    "text_embeddings": datasets.List(datasets.Value("float32")),
                }
            ),
        )

    def _compute(self, image_embeddings, text_embeddings) -> dict:
        per_sample = clip_t(image_embeddings, text_embeddings)
        return {"clip_t": float(per_sample.mean()), "clip_t_per_sample": floats(per_sample)}
