"""Person-count accuracy (CogCanvas text-to-image auxiliary task) as an ``evaluate`` metric."""

from __future__ import annotations

import datasets
import evaluate

from idbench.evaluate_pkg.functional import count_correct
from idbench.evaluate_pkg.metrics._shared import CITATION_COGCANVAS

_DESCRIPTION = """\
Count accuracy: fraction of generations in which a person detector finds exactly the number of
persons the prompt asks for (CogCanvas text-to-image auxiliary task).
"""

_KWARGS_DESCRIPTION = """\
Args:
    detected: per image, the number of persons detected (int >= 0).
    expected: per image, the number of persons in the prompt (int >= 0).
Returns:
    count_accuracy: fraction of images with detected == expected.
    count_correct_per_sample: per image, whether detected == expected.
"""


class CountAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_COGCANVAS,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"detected": datasets.Value("int64"), "expected": datasets.Value("int64")}),
        )

    def _compute(self, detected, expected) -> dict:
        correct = count_correct(detected, expected)
        return {"count_accuracy": float(correct.mean()), "count_correct_per_sample": [bool(c) for c in correct]}
