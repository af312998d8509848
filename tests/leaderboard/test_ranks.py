"""Ranks with uncertainty: shared ranks, rank intervals and tiers on hand-made frames and rows.

The rank intervals are checked against distributions worked out by hand: with two prompts a bootstrap
draw takes prompt 1 twice (probability 1/4), each once (1/2) or prompt 2 twice (1/4), so every model's
rank distribution over the draws is known exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import query

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SPEC = get_benchmark("identity-collapse")


def _means(columns: dict[int, list[float]]) -> pd.DataFrame:
    """Prompts x submissions of per-prompt means, prompts p0, p1, ..."""
    n = len(next(iter(columns.values())))
    return pd.DataFrame(columns, index=pd.Index([f"p{i}" for i in range(n)], name="prompt_id"))


def test_equal_scores_share_a_rank():
    assert query.shared_ranks([0.9, 0.9, 0.5, float("nan")], higher_is_better=True) == [1, 1, 3, 4]
    assert query.shared_ranks([0.2, 0.1, 0.1], higher_is_better=False) == [3, 1, 1]
    # Means that differ only in float rounding are equal.
    assert query.shared_ranks([0.1 + 0.2, 0.3], higher_is_better=True) == [1, 1]


def test_two_identical_models_share_rank_one_and_a_tier():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.8, 30).tolist()
    out = query.rank_uncertainty(_means({1: base, 2: list(base)}), higher_is_better=True)
    assert out["rank"].tolist() == [1, 1] and out[query.TIER].tolist() == [1, 1]
    assert out[query.RANK_INTERVAL].tolist() == ["1", "1"]  # tied in every draw
    assert query.leaders_tied(pd.DataFrame({"model": ["a", "b"], "rank": [1, 1], query.TIER: [1, 1]})) == ["a", "b"]


def test_a_clearly_better_model_is_alone_in_tier_one():
    rng = np.random.default_rng(2)
    base = rng.uniform(0.2, 0.6, 30)
    out = query.rank_uncertainty(
        _means({1: base.tolist(), 2: base.tolist(), 3: (base + 0.3).tolist()}), higher_is_better=True
    )
    assert out.loc[3, "rank"] == 1 and out.loc[3, query.TIER] == 1 and out.loc[3, query.RANK_INTERVAL] == "1"
    assert out.loc[[1, 2], "rank"].tolist() == [2, 2] and out.loc[[1, 2], query.TIER].tolist() == [2, 2]
    table = pd.DataFrame({"model": ["c", "a", "b"], "rank": [1, 2, 2], query.TIER: [1, 2, 2]})
    assert query.leaders_tied(table) == []


def test_rank_interval_bounds_by_hand():
    # A: prompts (1.0, 0.0), mean 0.5; B: (0.6, 0.6), mean 0.6. B ranks first. B - A per prompt is
    # (-0.4, 0.6), d = 0.1; each prompt's share of it is (x - d) / 2 = (-0.25, 0.25); the
    # cluster-robust error is sqrt(2 / 1 x (0.25^2 + 0.25^2)) = 0.5, so |d| / se = 0.2.
    # Draws: each prompt once (1/2): shift 0, statistic 0; one prompt twice (1/2): shift +-0.5 with no
    # spread left, statistic unbounded.
    means = _means({1: [1.0, 0.0], 2: [0.6, 0.6]})
    wide = query.rank_uncertainty(means, higher_is_better=True, n_draws=4000)
    assert wide["rank"].tolist() == [2, 1]
    # 95 %: the critical value is unbounded, nothing is claimed: both could rank first, one tier.
    assert wide[query.RANK_INTERVAL].tolist() == ["1-2", "1-2"]
    assert wide[query.TIER].tolist() == [1, 1]
    # At 40 % the critical value is 0 < 0.2: B is shown better, A "2", B "1", and A leads tier 2.
    narrow = query.rank_uncertainty(means, higher_is_better=True, n_draws=4000, level=0.4)
    assert narrow[query.RANK_INTERVAL].tolist() == ["2", "1"] and narrow[query.TIER].tolist() == [2, 1]
    # Lower is better: the same values ranked the other way round.
    lower = query.rank_uncertainty(means, higher_is_better=False, n_draws=4000, level=0.4)
    assert lower["rank"].tolist() == [1, 2] and lower[query.RANK_INTERVAL].tolist() == ["1", "2"]


def test_pairing_separates_a_small_constant_gap_that_prompt_variance_hides():
    # Prompts vary far more than the gap (0.01), but every prompt shows it: paired draws always rank
    # model 2 first, while the two models' own intervals would overlap.
    rng = np.random.default_rng(3)
    base = rng.uniform(0.1, 0.9, 40)
    out = query.rank_uncertainty(_means({1: base.tolist(), 2: (base + 0.01).tolist()}), higher_is_better=True)
    assert out[query.RANK_INTERVAL].tolist() == ["2", "1"] and out[query.TIER].tolist() == [2, 1]


def test_shared_prompt_means_use_the_pairs_every_model_has():
    a = pd.DataFrame({"prompt_id": ["p0", "p0", "p1", "p2"], "seed": [0, 1, 0, 0], "value": [0.2, 0.4, 0.5, 0.9]})
    b = pd.DataFrame({"prompt_id": ["p0", "p1", "p2"], "seed": [0, 0, 0], "value": [0.1, 0.3, 0.7]})
    means = query.shared_prompt_means({1: a, 2: b})
    # (p0, seed 1) is only A's: left out, so A's p0 mean is its seed-0 value alone.
    assert means.loc["p0", 1] == 0.2 and means.loc["p0", 2] == 0.1 and list(means.index) == ["p0", "p1", "p2"]
    assert list(query.shared_prompt_means({1: a, 2: b}, prompts=["p2"]).index) == ["p2"]
    frame = pd.DataFrame(
        {
            "prompt_id": ["p0", "p0", "p0"],
            "seed": [0, 0, 0],
            "metric": ["id_sim"] * 3,
            "subject": ["", "s1", "s2"],
            "value": [0.5, 0.1, 0.9],
        }
    )
    assert query.sample_values(frame, "id_sim")["value"].tolist() == [0.5]  # whole-image row, as the aggregates
    only_subjects = frame[frame["subject"] != ""]
    assert query.sample_values(only_subjects, "id_sim")["value"].tolist() == [0.5]  # mean of 0.1 and 0.9


def test_cell_prompts_select_by_the_stored_labels():
    rows = {
        "p0": {"n_subjects": 2, "scene": "neutral"},
        "p1": {"n_subjects": 4, "scene": "neutral"},
        "p2": {"n_subjects": 4, "scene": "occlusion"},
    }
    assert query.cell_prompts(rows, SPEC, {"n_subjects": "4", "scene": None}) == ["p1", "p2"]
    assert query.cell_prompts(rows, SPEC, {"n_subjects": None}) is None


def test_ranked_table_gives_equal_scores_one_rank_whatever_the_submission_order():
    stats = lambda mean: {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n": 10, "n_nan": 0}  # noqa: E731
    rows = [
        {
            "submission_id": s,
            "model_name": f"m{s}",
            "submitter": None,
            "profile": "full",
            "plumbing": False,
            "not_run": {},
            "aggregates": {"overall": {m.name: stats(v) for m in SPEC.metric_suite}, "breakdowns": {}},
        }
        for s, v in ((1, 0.5), (2, 0.7), (3, 0.7))
    ]
    table = query.ranked_table(pd.DataFrame(rows), SPEC, metric="dino_sim")
    assert table["submission"].tolist() == [2, 3, 1] and table["rank"].tolist() == [1, 1, 3]
    shown = query.with_rank_uncertainty(
        table, query.rank_uncertainty(_means({2: [0.7, 0.7], 3: [0.7, 0.7], 1: [0.5, 0.5]}), True)
    )
    assert shown.columns[:3].tolist() == ["rank", query.RANK_INTERVAL, query.TIER]
    assert shown[query.TIER].tolist() == [1, 1, 2] and query.leaders_tied(shown) == ["m2", "m3"]


def test_nested_design_ranks_resample_subjects_with_their_prompts():
    # CHARIS-like: 12 subjects x 4 prompts; each model has its own subject effects (sd 0.1, the
    # model x subject interaction that does not cancel in a paired comparison), small prompt noise and
    # offsets 0, 0.05, 0.10. With equal prompts per subject, resampling subjects with their prompts is
    # the ordinary bootstrap of the subject means: the ranks must equal those of the subject-mean frame
    # resampled as independent units with the same seed (subject labels sort as that frame's index).
    rng = np.random.default_rng(1)
    subjects = [f"s{i:02d}" for i in range(12)]
    prompt_ids = [f"{s}-{k}" for s in subjects for k in range(4)]
    per_prompt = pd.DataFrame(
        {
            m: np.repeat(rng.normal(0.5, 0.1, 12), 4) + offset + rng.normal(0, 0.01, 48)
            for m, offset in ((1, 0.0), (2, 0.05), (3, 0.10))
        },
        index=pd.Index(prompt_ids, name="prompt_id"),
    )
    units = {p: {"subject": [p.split("-")[0]]} for p in prompt_ids}
    nested = query.rank_uncertainty(per_prompt, True, factors=("subject",), units=units, n_draws=500)
    per_subject = per_prompt.groupby(lambda p: p.split("-")[0]).mean()
    per_subject.index.name = "prompt_id"
    pd.testing.assert_frame_equal(nested, query.rank_uncertainty(per_subject, True, n_draws=500))
    # 12 subjects cannot tell these models apart; the 48 prompts taken as independent units (4 near
    # copies per subject) wrongly split them into tiers.
    assert nested[query.TIER].tolist() == [1, 1, 1] and nested[query.RANK_INTERVAL].tolist() == ["1-3"] * 3
    as_prompts = query.rank_uncertainty(per_prompt, True, n_draws=500)
    assert as_prompts.loc[3, query.TIER] == 1 and as_prompts[query.TIER].max() > 1


def test_a_design_with_one_level_tells_no_model_apart():
    # Three prompts of one subject are one unit: nothing is known about the ranks beyond the board.
    means = _means({1: [0.1, 0.2, 0.3], 2: [0.9, 0.9, 0.9]})
    units = {f"p{i}": {"subject": ["only"]} for i in range(3)}
    out = query.rank_uncertainty(means, True, factors=("subject",), units=units)
    assert out[query.TIER].tolist() == [1, 1] and out[query.RANK_INTERVAL].tolist() == ["1-2", "1-2"]


def test_resampling_design_is_read_from_the_results():
    record = {"resampling": {"factors": ["subject"], "method": "subjects", "prompt_units": {"a": {"subject": ["s1"]}}}}
    other = {"resampling": {"factors": ["subject"], "method": "subjects", "prompt_units": {"b": {"subject": ["s2"]}}}}
    assert query.resampling_design([record, other]) == (
        ("subject",),
        {"a": {"subject": ["s1"]}, "b": {"subject": ["s2"]}},
        "subjects",
    )
    assert query.resampling_design([{}, None]) == (("prompt",), {}, query.PROMPTS_ONLY)


def test_flat_metrics_are_named_not_drawn():
    profile = pd.DataFrame(
        {
            "model": ["a", "b", "a", "b", "a"],
            "metric": ["scr", "scr", "dino", "dino", "solo"],
            "value": [0.0, 0.0, 0.9, 0.8, 0.5],
        }
    )
    assert query.flat_metrics(profile) == {"scr": 0.0}  # one model alone is not "every model equal"


def test_an_unreadable_or_incomplete_results_file_counts_as_no_values(tmp_path):
    # A stored result's results.parquet that is garbage, or lacks a column the ranks need, gives no
    # values (the page then says the intervals are not shown), never a traceback.
    from idbench.leaderboard.app import data

    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "results.parquet").write_bytes(b"PAR1" + b"\x00" * 64)
    partial = tmp_path / "partial"
    partial.mkdir()
    pd.DataFrame({"prompt_id": ["p0"], "seed": [0], "value": [0.5]}).to_parquet(partial / "results.parquet")
    whole = tmp_path / "whole"
    whole.mkdir()
    pd.DataFrame(
        {"prompt_id": ["p0", "p0"], "seed": [0, 0], "metric": ["dino_sim", "clip_t"], "value": [0.5, 0.1]}
    ).to_parquet(whole / "results.parquet")
    required = ("prompt_id", "seed", "metric", "value")
    assert data.read_results(str(garbage), required) is None
    assert data.read_results(str(partial), required) is None
    assert data.read_results(str(tmp_path / "absent"), required) is None
    frame = data.read_results(str(whole), required, ("subject",), "dino_sim")
    assert frame.columns.tolist() == list(required) and frame["value"].tolist() == [0.5]
