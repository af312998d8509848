"""Judged columns and the ranking: a metric that leaves its failures out is shown beside its
intent-to-treat twin and never ranked; a run whose judge failed on more than 5 % is shown, not ranked.

Hand-made result rows (no scoring): the numbers are the red team's (a blurred subject and a judge that
fails on the hard items read 1.000 on the paper's charis_score, 0.695 for the honest model).
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from idbench.builders.benchmarks import BENCHMARKS, get_benchmark
from idbench.builders.spec import SpecError
from idbench.leaderboard import query

CHARIS = get_benchmark("charis")
JUDGE = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "revision": "r", "url": "http://judge", "calibrated": True}


def _row(submission: int, model: str, overall: dict[str, float], incomplete: dict[str, float] | None = None) -> dict:
    stats = lambda mean: {"mean": mean, "ci_low": mean, "ci_high": mean, "n": 10, "n_nan": 0}  # noqa: E731
    return {
        "submission_id": submission, "model_name": model, "submitter": None, "profile": "full", "plumbing": False,
        "not_run": {}, "aggregates": {"overall": {m: stats(v) for m, v in overall.items()}, "breakdowns": {}},
        "judge": {**JUDGE, "incomplete": incomplete or {}}, "copies": {"marked": False, "share": 0.0},
    }


def _values(charis_score, itt, adherence, adherence_itt, overall):
    return {"charis_score": charis_score, "charis_score_itt": itt, "prompt_adherence": adherence,
            "prompt_adherence_itt": adherence_itt, "charis_overall": overall, "dino_sim": 0.5}


ROWS = pd.DataFrame([
    _row(1, "honest", _values(0.695, 0.682, 0.70, 0.70, 0.682)),
    _row(2, "blurred subject", _values(1.000, 0.682, 0.70, 0.70, 0.682)),
    _row(3, "failing judge", _values(1.000, 0.682, 1.00, 0.69, 0.682), incomplete={"charis_overall": 0.31}),
])


def test_every_benchmark_names_a_twin_for_each_judged_metric_that_leaves_failures_out():
    for name in BENCHMARKS:
        spec = get_benchmark(name)
        specs = query.metric_specs(spec)
        for metric in spec.metric_suite:
            if metric.itt_twin:
                assert specs[metric.itt_twin].rankable and specs[metric.itt_twin].judged == metric.judged
                # The twin stands right beside it in the suite's (and so the table's) column order.
                order = [m.name for m in spec.metric_suite]
                assert order.index(metric.itt_twin) == order.index(metric.name) + 1
        assert all(specs[m].rankable for m in spec.ranking)
    twins = {m.name: m.itt_twin for m in CHARIS.metric_suite if m.itt_twin}
    assert twins == {"charis_score": "charis_score_itt", "prompt_adherence": "prompt_adherence_itt",
                     "holistic_score": "holistic_score_itt"}
    assert get_benchmark("cogcanvas").metric_suite[[m.name for m in get_benchmark("cogcanvas").metric_suite].index("attr_vqa")].itt_twin == "attr_vqa_itt"


def test_a_spec_may_not_rank_on_a_metric_shown_beside_its_twin():
    with pytest.raises(SpecError, match="charis_score"):
        dataclasses.replace(CHARIS, ranking=("charis_score",))


def test_the_page_offers_no_ranking_on_a_metric_that_hiding_or_failing_lifts():
    rankable = query.rankable_metrics(ROWS, CHARIS)
    assert "charis_score" not in rankable and "prompt_adherence" not in rankable
    assert {"charis_score_itt", "prompt_adherence_itt", "charis_overall"} <= set(rankable)
    assert query.default_metric(ROWS, CHARIS) == "charis_overall"
    only_paper = pd.DataFrame([_row(1, "old", {"charis_score": 0.9, "dino_sim": 0.4})])
    assert query.default_metric(only_paper, CHARIS) == "dino_sim"  # never the paper's score alone


def test_hidden_subjects_and_judge_failures_lift_no_ranked_column():
    table = query.ranked_table(ROWS, CHARIS)
    ranked = table[table["rank"].notna()]
    # The failing judge's run is shown apart, with the reason on its row.
    assert ranked["model"].tolist() == ["honest", "blurred subject"]
    apart = table[table["rank"].isna()].set_index("model")
    assert apart.loc["failing judge", query.NOT_RANKED] == "judge failed on 31 % of charis_overall (over 5 %)"
    # On every rankable judged column the blur and the failing judge score no higher than the honest run.
    for metric in query.rankable_metrics(ROWS, CHARIS):
        values = table.set_index("model")[metric]
        assert values["blurred subject"] <= values["honest"] + 1e-12 and values["failing judge"] <= values["honest"] + 1e-12, metric
    # Asked for, the incomplete run is ranked again; an unjudged ranking never set it apart.
    assert table.shape[0] == 3
    again = query.ranked_table(ROWS, CHARIS, include_judge_failures=True)
    assert again["rank"].notna().all()
    by_embedding = query.ranked_table(ROWS, CHARIS, metric="dino_sim")
    assert by_embedding["rank"].notna().all()
