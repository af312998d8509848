"""Reference retrieval Precision@k / Recall@k (CogCanvas auxiliary task) as an ``evaluate`` metric."""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import evaluate

from idbench.evaluate_pkg.functional import retrieval_precision_recall
from idbench.evaluate_pkg.metrics._shared import CITATION_COGCANVAS, floats, mean_of_defined

# The cut-offs the CogCanvas paper reports (section 3.5); any others may be passed as ks.
PAPER_KS = (1, 3, 5)

_DESCRIPTION = """\
Reference retrieval (CogCanvas auxiliary task): for each identity slot, a ranked list of candidate
reference ids is compared with the annotated relevant ids. P@k = |top-k ∩ relevant| / k and
R@k = |top-k ∩ relevant| / |relevant|, for k in {1, 3, 5}, averaged over slots. A slot with no
relevant id has an undefined R@k: it is left out of the R@k means and counted.
"""

_KWARGS_DESCRIPTION = """\
Args:
    ranked_ids: per slot, candidate reference ids, best first (list of strings).
    relevant_ids: per slot, the ids that count as correct (list of strings).
    ks (optional, compute keyword): cut-offs; default (1, 3, 5).
Returns:
    p@k, r@k: means over slots, for each k.
    p@k_per_sample, r@k_per_sample: per slot.
    slots_without_relevant: slots left out of the R@k means.
"""


class Retrieval(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        ids = datasets.List(datasets.Value("string"))
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=CITATION_COGCANVAS,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"ranked_ids": ids, "relevant_ids": ids}),
        )

    def _compute(self, ranked_ids, relevant_ids, ks: Sequence[int] = PAPER_KS) -> dict:
        rows = [retrieval_precision_recall(ranked, relevant, ks) for ranked, relevant in zip(ranked_ids, relevant_ids)]
        out: dict = {}
        for key in rows[0] if rows else ():
            values = [row[key] for row in rows]
            out[key], _ = mean_of_defined(values)
            out[f"{key}_per_sample"] = floats(values)
        out["slots_without_relevant"] = sum(1 for relevant in relevant_ids if not relevant)
        return out
