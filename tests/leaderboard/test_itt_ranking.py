"""Judged columns and the ranking: every shown judged column is intent to treat, or the paper's shown
beside its intent-to-treat twin and never ranked; a run whose judge failed on more than 5 % is listed
apart with the reason and not ranked by default; a metric redefined since a row's suite version is not
shown or ranked under its new name.

Hand-made result rows (no scoring): the numbers are those of the red-team runs scored in
tests/benchmarks/charis/test_itt_red_team.py (40 CHARIS prompts, 12 hard: the honest run shows its failures there,
the blur hides the subject, the blank draws nothing, the failing judge times out on them).
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.builders.spec import SpecError
from idbench.leaderboard import query

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

CHARIS = get_benchmark("charis")
JUDGE = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "revision": "r", "url": "http://judge", "calibrated": True}
ITT = (
    25 / 36
)  # charis_score_itt and charis_overall of every case: 25 easy prompts of the 36 that do not hide the subject
# A row of suite 0.5 and later holds the copy-floored twins (no image flagged here: the same values).
FLOORED_TWINS = {"charis_score_itt_floored": ITT, "charis_overall_floored": ITT, "dino_sim_floored": 0.5}
FAILED = {m: 0.3 for m in ("charis_score", "charis_score_itt", "prompt_adherence", "charis_overall", "holistic_score")}


def _row(
    submission: int,
    model: str,
    overall: dict[str, float],
    incomplete: dict[str, float] | None = None,
    suite_version: str | None = None,
) -> dict:
    stats = lambda mean: {"mean": mean, "ci_low": mean, "ci_high": mean, "n": 10, "n_nan": 0}  # noqa: E731
    row = {
        "submission_id": submission,
        "model_name": model,
        "submitter": None,
        "profile": "full",
        "plumbing": False,
        "not_run": {},
        "aggregates": {"overall": {m: stats(v) for m, v in overall.items()}, "breakdowns": {}},
        "judge": {**JUDGE, "incomplete": incomplete or {}},
        "copies": {"marked": False, "share": 0.0},
    }
    if suite_version is not None:
        row["suite_version"] = suite_version
    return row


def _values(charis_score, adherence, holistic):
    return {
        "charis_score": charis_score,
        "charis_score_itt": ITT,
        "prompt_adherence": adherence,
        "charis_overall": ITT,
        "holistic_score": holistic,
        "dino_sim": 0.5,
    }


ROWS = pd.DataFrame(
    [
        _row(1, "honest", _values(0.700, 0.756, 0.775)),
        _row(2, "blurred subject", _values(1.000, 0.700, 0.700)),
        _row(3, "blank on hard prompts", _values(0.700, 0.700, 0.700)),
        _row(4, "failing judge", _values(1.000, 0.700, 0.700), incomplete=FAILED),
    ]
)


def test_every_benchmark_names_a_twin_for_each_judged_metric_that_leaves_failures_out():
    for name in BENCHMARKS:
        spec = get_benchmark(name)
        specs = query.metric_specs(spec)
        for metric in spec.metric_suite:
            if metric.itt_twin:
                # The twin ranks, itself or through its copy-floored twin (a copy earns nothing there).
                twin = specs[metric.itt_twin]
                assert (twin.rankable or specs[twin.floored_twin].rankable) and twin.judged == metric.judged
                # The twin stands right beside it in the suite's (and so the table's) column order.
                order = [m.name for m in spec.metric_suite]
                assert order.index(metric.itt_twin) == order.index(metric.name) + 1
        assert all(specs[m].rankable for m in spec.ranking)
    # Only the papers' own judged metrics keep a definition that leaves failures out, each beside its
    # twin; every other judged metric is intent to treat under its own name.
    twins = {m.name: m.itt_twin for m in CHARIS.metric_suite if m.itt_twin}
    assert twins == {"charis_score": "charis_score_itt"}
    cog = get_benchmark("cogcanvas")
    assert {m.name: m.itt_twin for m in cog.metric_suite if m.itt_twin} == {
        "attr_vqa": "attr_vqa_itt",
        "igc": "igc_itt",
        "attr_vqa.binding": "attr_vqa.binding_itt",
    }
    assert "attr_vqa.binding_itt_floored" in cog.ranking and "attr_vqa.binding" not in cog.ranking
    # The project's judged metrics that were redefined say since when (old rows are not read as them).
    assert {m.name: m.defined_in for m in CHARIS.metric_suite if m.defined_in} == {
        "prompt_adherence": "0.5",  # 0.4: a judge failure scores 0; 0.5: gated on the subject being in view
        "holistic_score": "0.4",
    }
    assert CHARIS.suite_version == "0.5" and cog.suite_version == "0.7"
    assert {m.name for m in cog.metric_suite if m.defined_in == "0.6"} == {
        "attr_vqa_paired",
        "igc_paired",
        "binding_grounded_vqa",
        "binding_grounded_vqa_paired",
    }


def test_a_spec_may_not_rank_on_a_metric_shown_beside_its_twin():
    with pytest.raises(SpecError, match="charis_score"):
        dataclasses.replace(CHARIS, ranking=("charis_score",))


def test_the_page_offers_no_ranking_on_a_metric_that_hiding_or_failing_lifts():
    rankable = query.rankable_metrics(ROWS, CHARIS)
    assert "charis_score" not in rankable
    assert {"charis_score_itt", "prompt_adherence", "charis_overall", "holistic_score"} <= set(rankable)
    assert query.default_metric(ROWS, CHARIS) == "charis_overall"
    only_paper = pd.DataFrame([_row(1, "old", {"charis_score": 0.9, "dino_sim": 0.4})])
    assert query.default_metric(only_paper, CHARIS) == "dino_sim"  # never the paper's score alone


def test_hidden_subjects_and_judge_failures_lift_no_ranked_column():
    table = query.ranked_table(ROWS, CHARIS)
    ranked = table[table["rank"].notna()]
    # The failing judge's run is listed apart, with the reason on its row; the rest share rank 1 on
    # charis_overall (the hard prompts score 0 in every case).
    assert ranked["model"].tolist() == ["honest", "blurred subject", "blank on hard prompts"]
    assert ranked["rank"].tolist() == [1, 1, 1]
    apart = table[table["rank"].isna()].set_index("model")
    assert list(apart.index) == ["failing judge"]
    assert apart.loc["failing judge", query.NOT_RANKED] == (
        "judge failed on 30 % of charis_overall, 30 % of charis_score, 30 % of charis_score_itt, 30 % of holistic_score, "
        "30 % of prompt_adherence (over 5 %)"
    )
    assert "incomplete: charis_overall (judge failed 30 %)" in apart.loc["failing judge", "marks"]
    # On every rankable judged column the blur, the blank and the failing judge score no higher than
    # the honest run; only the paper's charis_score, never ranked, puts the blur and the failing judge first.
    values = table.set_index("model")
    for metric in query.rankable_metrics(ROWS, CHARIS):
        for case in ("blurred subject", "blank on hard prompts", "failing judge"):
            assert values.loc[case, metric] <= values.loc["honest", metric] + 1e-12, (metric, case)
    assert values.loc["blurred subject", "charis_score"] > values.loc["honest", "charis_score"]
    # Asked for, the incomplete run is ranked again; an unjudged ranking never set it apart.
    assert table.shape[0] == 4
    again = query.ranked_table(ROWS, CHARIS, include_judge_failures=True)
    assert again["rank"].notna().all()
    by_adherence = query.ranked_table(ROWS, CHARIS, metric="prompt_adherence", include_judge_failures=True).set_index(
        "model"
    )
    assert by_adherence["rank"].to_dict() == {
        "honest": 1,
        "blurred subject": 2,
        "blank on hard prompts": 2,
        "failing judge": 2,
    }
    by_embedding = query.ranked_table(ROWS, CHARIS, metric="dino_sim")
    assert by_embedding["rank"].notna().all()


def test_a_metric_redefined_since_a_rows_suite_is_not_shown_or_ranked_under_its_new_name():
    """A CHARIS 0.3 row holds the old prompt_adherence (judge failures left out: the failing judge's
    1.000); under suite 0.4 the name scores them 0, and under 0.5 a subject not in view scores 0 too. The old
    value is taken out, the row marked."""
    old = _row(5, "scored with 0.3", {**_values(1.000, 1.000, 1.000), "prompt_adherence_itt": 0.7}, suite_version="0.3")
    complete = {"clip_i": 0.8, "clip_t": 0.3, "clip_t_whole": 0.3, **FLOORED_TWINS, "clip_i_floored": 0.8}
    new = _row(6, "scored with 0.5", {**_values(0.700, 0.756, 0.775), **complete}, suite_version="0.5")
    rows = pd.DataFrame([old, new])
    assert query.stale_metrics(old, CHARIS) == ["prompt_adherence", "holistic_score"]
    # A 0.4 row's prompt_adherence let a blurred-away subject earn the changes asked of it (issue 39).
    assert query.stale_metrics(_row(7, "scored with 0.4", _values(0.7, 1.0, 0.7), suite_version="0.4"), CHARIS) == [
        "prompt_adherence"
    ]
    assert (
        query.stale_metrics(new, CHARIS) == [] and query.stale_metrics(ROWS.iloc[0], CHARIS) == []
    )  # no version: none
    now = query.as_defined_now(rows, CHARIS)
    assert (
        "prompt_adherence" not in now.iloc[0]["aggregates"]["overall"]
        and "charis_score" in now.iloc[0]["aggregates"]["overall"]
    )
    assert rows.iloc[0]["aggregates"]["overall"]["prompt_adherence"]["mean"] == 1.0  # the input is left as it was
    assert query.missing_metrics(now.iloc[0], CHARIS) == [
        "charis_score_itt_floored",
        "prompt_adherence",
        "charis_overall_floored",
        "holistic_score",
        "clip_i",
        "clip_i_floored",
        "dino_sim_floored",
        "clip_t",
        "clip_t_whole",
    ]
    table = query.ranked_table(rows, CHARIS, metric="prompt_adherence").set_index("model")
    assert (
        pd.isna(table.loc["scored with 0.3", "prompt_adherence"])
        and table.loc["scored with 0.5", "prompt_adherence"] == 0.756
    )
    assert table.loc["scored with 0.5", "rank"] == 1
    assert (
        "suite 0.3: prompt_adherence, holistic_score redefined since (score again)"
        in table.loc["scored with 0.3", "marks"]
    )
    # Hidden with the incomplete suites when the switch says so, like any row that lacks a metric.
    assert query.missing_metrics(new, CHARIS) == []
    assert query.ranked_table(rows, CHARIS, include_incomplete=False)["model"].tolist() == ["scored with 0.5"]
