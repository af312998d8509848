"""Instance-level collapse rate as an ``evaluate`` metric: Hungarian-matched subject crops vs references."""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import evaluate
import numpy as np

from idbench.evaluate_pkg.functional import SCR_TAUS, instance_collapse_rate
from idbench.evaluate_pkg.metrics._shared import (
    CITATION_DINOV2,
    CITATION_HUNGARIAN,
    CITATION_IDENTITY_COLLAPSE,
    collapse_taus,
    floats,
)

_DESCRIPTION = """\
Instance collapse rate ICR@tau: the crop-level variant of paper 002's Subject Collapse Rate. Per
generated image, the subject crops found in it (detector + masks, each embedded with DINOv2) are
matched one-to-one to the N references by Hungarian assignment on cosine; a reference collapsed when
its matched crop's similarity is below tau or when no crop is left for it. Mean over images; lower is
better. Named apart from `subject_collapse_rate` (the paper's whole-image proxy): the two are not
interchangeable. Thresholds as there: config name for one tau, `taus` keyword for several.
"""

_KWARGS_DESCRIPTION = """\
Args:
    crop_embeddings: per image, the embeddings of the m subject crops found (m lists of width d; m may be 0).
    reference_embeddings: per image, the N >= 1 reference embeddings (N lists of width d).
    taus (optional, compute keyword): thresholds to report; default 0.4, 0.5, 0.6.
Returns:
    instance_scr@<tau>: mean over images of the instance collapse rate at tau.
    instance_scr@<tau>_per_sample: the rate per image.
"""


class InstanceCollapseRate(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_IDENTITY_COLLAPSE + CITATION_DINOV2 + CITATION_HUNGARIAN,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "crop_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                    "reference_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                }
            ),
        )

    def _compute(self, crop_embeddings, reference_embeddings, taus: Sequence[float] | None = None) -> dict:
        out: dict = {}
        for tau in collapse_taus("instance_collapse_rate", self.config_name, taus, SCR_TAUS):
            per_sample = np.array(
                [instance_collapse_rate(crops, refs, tau) for crops, refs in zip(crop_embeddings, reference_embeddings)]
            )
            out[f"instance_scr@{tau:g}"] = float(per_sample.mean())
            out[f"instance_scr@{tau:g}_per_sample"] = floats(per_sample)
        return out
