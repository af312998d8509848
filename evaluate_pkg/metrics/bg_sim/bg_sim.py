"""BG-Sim as an ``evaluate`` metric: cosine of background-pooled patch features."""

from __future__ import annotations

import datasets
import evaluate

from idbench.evaluate_pkg.functional import PATCH_THRESHOLD, bg_sim
from idbench.evaluate_pkg.metrics._shared import CITATION_COGCANVAS, CITATION_DINOV3, floats, mean_of_defined

_DESCRIPTION = """\
BG-Sim (CogCanvas): background fidelity. Foreground = the union of all subject masks (e.g. SAM 2 from
detector boxes, or SAM 3 text prompts as in the paper), in both the generation and the reference
background. The DINOv3 patch tokens whose patch is more than half background are averaged, and the
two pooled vectors are compared by cosine. Pooling tokens over the background mask, rather than
blacking pixels out, keeps the holes from becoming content. An image with no background patch has
an undefined BG-Sim: its per-sample value is NaN, it is left out of the mean and counted in
`bg_sim_undefined`.
"""

_KWARGS_DESCRIPTION = """\
Args:
    generated_tokens: per image, the generation's patch tokens on their grid (h lists of w lists of d
        floats; CLS and register tokens removed).
    generated_foreground_masks: per image, its foreground mask (H lists of W bools, any resolution, the
        same field of view as the tokens).
    reference_tokens: per image, the reference background's patch tokens (h' x w' x d).
    reference_foreground_masks: per image, the reference's foreground mask (all False if it has none).
    threshold (optional, compute keyword): a patch counts as background when more than this fraction
        of its area is background; default 0.5.
Returns:
    bg_sim: mean over images where BG-Sim is defined.
    bg_sim_per_sample: per image (NaN where undefined).
    bg_sim_undefined: number of images without background patches.
"""


class BgSim(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        tokens = datasets.List(datasets.List(datasets.List(datasets.Value("float32"))))
        mask = datasets.List(datasets.List(datasets.Value("bool")))
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_COGCANVAS + CITATION_DINOV3,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "generated_tokens": tokens,
                    "generated_foreground_masks": mask,
                    "reference_tokens": tokens,
                    "reference_foreground_masks": mask,
                }
            ),
        )

    def _compute(
        self,
        generated_tokens,
        generated_foreground_masks,
        reference_tokens,
        reference_foreground_masks,
        threshold: float = PATCH_THRESHOLD,
    ) -> dict:
        per_sample = [
            bg_sim(gen_tok, gen_mask, ref_tok, ref_mask, threshold=threshold)
            for gen_tok, gen_mask, ref_tok, ref_mask in zip(
                generated_tokens, generated_foreground_masks, reference_tokens, reference_foreground_masks
            )
        ]
        mean, undefined = mean_of_defined(per_sample)
        return {"bg_sim": mean, "bg_sim_per_sample": floats(per_sample), "bg_sim_undefined": undefined}
