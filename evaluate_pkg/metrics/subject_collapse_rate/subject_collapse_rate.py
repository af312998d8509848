"""Subject Collapse Rate (paper 002) as an ``evaluate`` metric, at tau in {0.4, 0.5, 0.6} by default."""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import evaluate
import numpy as np

from idbench.evaluate_pkg.functional import SCR_TAUS, dino_sim, subject_collapse_rate
from idbench.evaluate_pkg.metrics._shared import CITATION_DINOV2, CITATION_IDENTITY_COLLAPSE, collapse_taus, floats

_DESCRIPTION = """\
Subject Collapse Rate SCR@tau (paper 002, whole-image proxy): per generated image, the fraction of its
N references whose cosine similarity to the generation's whole-image DINOv2 embedding is below tau;
the metric is the mean over images. Lower is better; 1.0 means every subject lost its identity.
This is the paper's whole-image measure; the crop-level variant is the separate
`instance_collapse_rate` module. Thresholds: the config name (`evaluate.load(path, "0.5")`) selects
one tau, the `taus` keyword of compute selects several; by default 0.4, 0.5 and 0.6.
"""

_KWARGS_DESCRIPTION = """\
Args:
    generated_embeddings: per image, the whole-image DINOv2 embedding of the generation (width d).
    reference_embeddings: per image, the N >= 1 reference embeddings (N lists of width d).
    taus (optional, compute keyword): thresholds to report; overrides the config name.
Returns:
    scr@<tau>: mean over images of SCR@tau, for each tau (e.g. "scr@0.4").
    scr@<tau>_per_sample: SCR@tau per image.
"""


class SubjectCollapseRate(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_IDENTITY_COLLAPSE + CITATION_DINOV2,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "generated_embeddings": datasets.List(datasets.Value("float32")),
                    "reference_embeddings": datasets.List(datasets.List(datasets.Value("float32"))),
                }
            ),
        )

    def _compute(self, generated_embeddings, reference_embeddings, taus: Sequence[float] | None = None) -> dict:
        sims = [dino_sim(gen, refs).per_reference for gen, refs in zip(generated_embeddings, reference_embeddings)]
        out: dict = {}
        for tau in collapse_taus("subject_collapse_rate", self.config_name, taus, SCR_TAUS):
            per_sample = np.array([subject_collapse_rate(s, tau) for s in sims])
            out[f"scr@{tau:g}"] = float(per_sample.mean())
            out[f"scr@{tau:g}_per_sample"] = floats(per_sample)
        return out
