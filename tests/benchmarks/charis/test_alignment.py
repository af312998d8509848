"""The CHARIS human alignment study (benchmarks/charis/alignment.py) on a small hand-made ratings table.

Expected correlations are computed here independently: per-item and per-model means written out by
hand from the categories, then scipy.stats (pearsonr, spearmanr, kendalltau) and the krippendorff
package called directly, and a brute-force quadratic weighted kappa from its definition.
"""

from __future__ import annotations

import json
import math
import shutil

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from idbench.benchmarks.charis import alignment as al
from idbench.evaluate_pkg.functional import agreement

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

# The paper's normalised scores, written out here to check the EKB against them (the study reads the EKB).
PAPER = {"exact": 1.0, "near_exact": 2 / 3, "partial": 1 / 3, "mismatch": 0.0}

PROMPTS = {
    "p1": ("human", "cartoon"),
    "p2": ("human", "cartoon"),
    "p3": ("human", "cartoon"),
    "p4": ("animal", "vector"),
    "p5": ("animal", "vector"),
    "p6": ("animal", "vector"),
}
# model -> its two annotators, and per prompt (first annotator's category, second's).
RATED = {
    "anystory": (
        ("s1", "s2"),
        {
            "p1": ("exact", "exact"),
            "p2": ("near_exact", "exact"),
            "p3": ("partial", "near_exact"),
            "p4": ("mismatch", "partial"),
            "p5": ("exact", "near_exact"),
            "p6": ("partial", "partial"),
        },
    ),
    "dsd": (
        ("d1", "d2"),
        {
            "p1": ("near_exact", "near_exact"),
            "p2": ("partial", "mismatch"),
            "p3": ("mismatch", "mismatch"),
            "p4": ("partial", "near_exact"),
            "p5": ("exact", "exact"),
            "p6": ("mismatch", "partial"),
        },
    ),
    "omnigen": (
        ("o1", "o2"),
        {
            "p1": ("partial", "partial"),
            "p2": ("mismatch", "partial"),
            "p3": ("near_exact", "partial"),
            "p4": ("mismatch", "mismatch"),
            "p5": ("partial", "near_exact"),
            "p6": ("mismatch", "mismatch"),
        },
    ),
    "uno": (
        ("u1", "u2"),
        {
            "p1": ("exact", "near_exact"),
            "p2": ("exact", "exact"),
            "p3": ("near_exact", "near_exact"),
            "p4": ("partial", "exact"),
            "p5": ("near_exact", "near_exact"),
            "p6": ("exact", "partial"),
        },
    ),
}
# Per-sample metric values (seed 0); uno's clip_i also has a seed 1, which the study averages in.
CHARIS = {
    "anystory": [0.9, 0.7, 0.5, 0.2, 0.8, 0.4],
    "dsd": [0.6, 0.3, 0.1, 0.5, 0.9, 0.2],
    "omnigen": [0.4, 0.1, 0.5, 0.0, 0.6, 0.1],
    "uno": [0.8, 1.0, 0.7, 0.5, 0.6, 0.7],
}
CLIP = {
    "anystory": [0.81, 0.84, 0.80, 0.79, 0.85, 0.83],
    "dsd": [0.80, 0.78, 0.82, 0.81, 0.77, 0.80],
    "omnigen": [0.86, 0.82, 0.84, 0.83, 0.85, 0.81],
    "uno": [0.83, 0.80, 0.85, 0.84, 0.82, 0.86],
}
UNO_CLIP_SEED1 = [0.85, 0.82, 0.83, 0.86, 0.80, 0.84]
P = sorted(PROMPTS)


def ratings_frame(rated=RATED) -> pd.DataFrame:
    rows = []
    for model, (annotators, prompts) in rated.items():
        for prompt_id, categories in prompts.items():
            rows += [(model, prompt_id, a, c) for a, c in zip(annotators, categories)]
    return pd.DataFrame(rows, columns=list(al.RATING_COLUMNS))


def scores_frame(models=tuple(RATED)) -> pd.DataFrame:
    rows = []
    for model in models:
        for k, prompt_id in enumerate(P):
            rows.append((model, "charis", prompt_id, 0, "charis_score", "", CHARIS[model][k]))
            rows.append((model, "charis", prompt_id, 0, "clip_i", "", CLIP[model][k]))
            if model == "uno":
                rows.append((model, "charis", prompt_id, 1, "clip_i", "", UNO_CLIP_SEED1[k]))
    return pd.DataFrame(rows, columns=["model", "benchmark", "prompt_id", "seed", "metric", "subject", "value"])


# --- independent expectations (by hand, then scipy) ---------------------------------------------------


def human(model: str) -> list[float]:
    """Per prompt, the mean of the two annotators' paper scores."""
    return [(PAPER[a] + PAPER[b]) / 2 for a, b in (RATED[model][1][p] for p in P)]


def annotator(model: str, which: int) -> list[float]:
    return [PAPER[RATED[model][1][p][which]] for p in P]


def clip(model: str) -> list[float]:
    if model == "uno":
        return [(a + b) / 2 for a, b in zip(CLIP["uno"], UNO_CLIP_SEED1)]
    return CLIP[model]


def study(**kwargs) -> al.StudyResult:
    return al.compute_study(ratings_frame(), scores_frame(), PROMPTS, n_boot=kwargs.pop("n_boot", 300), **kwargs)


def row_of(table: pd.DataFrame, **labels) -> dict:
    mask = np.ones(len(table), dtype=bool)
    for column, value in labels.items():
        mask &= (table[column] == value).to_numpy()
    (row,) = table[mask].to_dict("records")
    return row


# --- tests -------------------------------------------------------------------------------------------


def test_the_ekb_holds_the_papers_category_scores():
    assert al.category_scores() == pytest.approx(PAPER)


def test_table1_per_model_matches_scipy():
    result = study()
    assert result.metrics == ["charis_score", "clip_i"]  # the CHARIS suite's order
    for model in RATED:
        row = row_of(result.table1, model=model)
        assert row["level"] == "items"
        assert row["charis_score r"] == pytest.approx(pearsonr(CHARIS[model], human(model)).statistic)
        assert row["clip_i r"] == pytest.approx(pearsonr(clip(model), human(model)).statistic)
        assert row["H-H r"] == pytest.approx(pearsonr(annotator(model, 0), annotator(model, 1)).statistic)
        assert row["charis_score n"] == row["clip_i n"] == row["H-H n"] == 6
        assert row["charis_score low"] <= row["charis_score high"]


def test_table1_system_level_row_matches_scipy_on_per_model_means():
    result = study()
    row = row_of(result.table1, model=al.SYSTEM)
    models = list(RATED)
    human_means = [np.mean(human(m)) for m in models]
    assert row["level"] == "models" and row["charis_score n"] == 4
    assert row["charis_score r"] == pytest.approx(pearsonr([np.mean(CHARIS[m]) for m in models], human_means).statistic)
    assert row["clip_i r"] == pytest.approx(pearsonr([np.mean(clip(m)) for m in models], human_means).statistic)
    hh = pearsonr([np.mean(annotator(m, 0)) for m in models], [np.mean(annotator(m, 1)) for m in models]).statistic
    assert row["H-H r"] == pytest.approx(hh)
    assert -1 <= row["charis_score low"] <= row["charis_score high"] <= 1


def test_table2_per_type_style_pools_the_models():
    result = study()
    assert list(zip(result.table2["type"], result.table2["style"])) == [("human", "cartoon"), ("animal", "vector")]
    for (type_, style), prompts in {("human", "cartoon"): [0, 1, 2], ("animal", "vector"): [3, 4, 5]}.items():
        row = row_of(result.table2, type=type_, style=style)
        h = [human(m)[k] for m in RATED for k in prompts]
        g = [CHARIS[m][k] for m in RATED for k in prompts]
        a = [annotator(m, 0)[k] for m in RATED for k in prompts]
        b = [annotator(m, 1)[k] for m in RATED for k in prompts]
        assert row["charis_score n"] == 12
        assert row["charis_score r"] == pytest.approx(pearsonr(g, h).statistic)
        assert row["H-H r"] == pytest.approx(pearsonr(a, b).statistic)


def test_table3_means_per_model():
    table = study().table3
    for model in RATED:
        row = row_of(table, model=model)
        assert row["items"] == 6
        assert row["human"] == pytest.approx(np.mean(human(model)))
        assert row["charis_score"] == pytest.approx(np.mean(CHARIS[model]))
        assert row["clip_i"] == pytest.approx(np.mean(clip(model)))
    # By hand for one model: anystory's twelve ratings (1+1, 2/3+1, 1/3+2/3, 0+1/3, 1+2/3, 1/3+1/3) sum to
    # 2 + 5/3 + 1 + 1/3 + 5/3 + 2/3 = 22/3; their mean is 22/36 = 11/18.
    assert row_of(table, model="anystory")["human"] == pytest.approx(11 / 18)


def test_hh_on_a_tiny_case_by_hand():
    # Three items rated by x and y: x = 1, 2/3, 0 and y = 1, 1/3, 1/3. Deviations from the means (5/9):
    # x 4/9, 1/9, -5/9; y 4/9, -2/9, -2/9. r = (16-2+10) / sqrt((16+1+25)(16+4+4)) = 24/sqrt(1008) = 2/sqrt(7).
    ratings = pd.DataFrame(
        [
            ("m", "i1", "x", "exact"),
            ("m", "i1", "y", "exact"),
            ("m", "i2", "x", "near_exact"),
            ("m", "i2", "y", "partial"),
            ("m", "i3", "x", "mismatch"),
            ("m", "i3", "y", "partial"),
        ],
        columns=list(al.RATING_COLUMNS),
    )
    items = al.human_items(al.rating_values(ratings))
    assert agreement.pearson(items["half_a"], items["half_b"]) == pytest.approx(2 / math.sqrt(7))
    assert items["human"].tolist() == pytest.approx([1.0, 0.5, 1 / 6])


def test_split_halves_with_three_annotators():
    # Sorted annotators a, b, c: half_a = mean(a, c), half_b = b; one annotator -> no half_b.
    ratings = pd.DataFrame(
        [
            ("m", "i1", "c", "mismatch"),
            ("m", "i1", "a", "exact"),
            ("m", "i1", "b", "partial"),
            ("m", "i2", "a", "exact"),
        ],
        columns=list(al.RATING_COLUMNS),
    )
    items = al.human_items(al.rating_values(ratings)).set_index("prompt_id")
    assert items.loc["i1", "half_a"] == pytest.approx(0.5) and items.loc["i1", "half_b"] == pytest.approx(1 / 3)
    assert items.loc["i1", "human"] == pytest.approx(4 / 9) and items.loc["i1", "n_annotators"] == 3
    assert math.isnan(items.loc["i2", "half_b"])


def test_bootstrap_weights_draw_whole_prompts():
    weights = al.cluster_bootstrap_weights(["p1", "p1", "p2", "p2", "p3", "p3"], n_resamples=50, seed=3)
    assert weights.shape == (50, 6)
    assert (weights.sum(axis=1) == 6).all()  # three prompts drawn, two items each
    assert (weights[:, 0] == weights[:, 1]).all() and (weights[:, 4] == weights[:, 5]).all()
    assert (al.cluster_bootstrap_weights(list("abc"), 50, 3) == al.cluster_bootstrap_weights(list("abc"), 50, 3)).all()


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Bootstrap intervals, computed twice to show they are seeded.
@pytest.mark.slow
def test_cis_are_seeded():
    first, again, other = study(seed=7), study(seed=7), study(seed=8)
    pd.testing.assert_frame_equal(first.table1, again.table1)
    assert not first.table1["charis_score low"].equals(other.table1["charis_score low"])


# --- the further statistics: scipy, krippendorff and a brute-force kappa as references ----------------

LABEL = {"mismatch": 0, "partial": 1, "near_exact": 2, "exact": 3}


def quadratic_kappa_by_definition(a, b, k=4) -> float:
    """1 - sum w*observed / sum w*expected, w = squared label distance: Cohen's weighted kappa written out."""
    a, b = np.asarray(a), np.asarray(b)
    observed = np.zeros((k, k))
    for i, j in zip(a, b):
        observed[i, j] += 1
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / len(a)
    w = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
    return 1 - (w * observed).sum() / (w * expected).sum()


def categorical_scores(model_values: dict) -> pd.DataFrame:
    """Scores whose charis_score is a category score per item (one seed), clip_i as before."""
    scores = scores_frame(tuple(model_values))
    for model, categories in model_values.items():
        for k, prompt_id in enumerate(P):
            at = (scores["model"] == model) & (scores["prompt_id"] == prompt_id) & (scores["metric"] == "charis_score")
            scores.loc[at, "value"] = PAPER[categories[k]]
    return scores


def test_rank_statistics_match_scipy():
    result = study()
    for model in RATED:
        row = row_of(result.table1, model=model)
        assert row["charis_score spearman"] == pytest.approx(spearmanr(CHARIS[model], human(model)).statistic)
        assert row["clip_i kendall_tau_b"] == pytest.approx(
            kendalltau(clip(model), human(model), variant="b").statistic
        )
        assert row["H-H spearman"] == pytest.approx(spearmanr(annotator(model, 0), annotator(model, 1)).statistic)
        assert row["charis_score spearman n"] == 6
    system = row_of(result.table1, model=al.SYSTEM)
    models = list(RATED)
    expected = spearmanr([np.mean(CHARIS[m]) for m in models], [np.mean(human(m)) for m in models]).statistic
    assert system["charis_score spearman"] == pytest.approx(expected)
    assert math.isnan(system["H-H kappa_quadratic"])  # per-model means are no categories
    cell = row_of(result.table2, type="human", style="cartoon")
    g = [CHARIS[m][k] for m in RATED for k in (0, 1, 2)]
    h = [human(m)[k] for m in RATED for k in (0, 1, 2)]
    assert cell["charis_score kendall_tau_b"] == pytest.approx(kendalltau(g, h, variant="b").statistic)


def test_the_kappa_reference_gives_the_hand_value():
    # The reference above on tests/scoring/test_agreement.py's small table, worked there by hand: 13/15.
    assert quadratic_kappa_by_definition([0, 0, 1, 2, 3, 3], [0, 1, 1, 2, 2, 3]) == pytest.approx(13 / 15)


def test_hh_kappa_and_alpha_match_references():
    result = study()
    for model in RATED:
        row = row_of(result.table1, model=model)
        first = [LABEL[RATED[model][1][p][0]] for p in P]
        second = [LABEL[RATED[model][1][p][1]] for p in P]
        assert row["H-H kappa_quadratic"] == pytest.approx(quadratic_kappa_by_definition(first, second))
        expected = krippendorff.alpha(
            reliability_data=[first, second], level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]
        )
        assert row["H-H alpha_ordinal"] == pytest.approx(expected)
        assert row["H-H kappa_quadratic n"] == row["H-H alpha_ordinal n"] == 6
        # The test's judge values (0.9, 0.7, ...) are mostly no category scores: only those that are
        # (omnigen's 0.0, uno's 1.0) make units, too few for kappa, and the rest are counted in the note.
        on_categories = sum(v in PAPER.values() for v in CHARIS[model])
        assert (
            math.isnan(row["charis_score kappa_quadratic"])
            and row["charis_score kappa_quadratic n"] == 2 * on_categories
        )
        assert f"charis_score kappa, alpha: {6 - on_categories} of 6 item(s) not on the categories" in row["note"]


def test_alpha_takes_every_annotator_and_kappa_only_items_with_two():
    ratings = pd.DataFrame(
        [
            ("m", p, a, c)
            for p, cats in {
                "p1": ("exact", "exact", "near_exact"),
                "p2": ("partial", "mismatch", "mismatch"),
                "p3": ("near_exact", "near_exact", "exact"),
                "p4": ("mismatch", "partial", "partial"),
            }.items()
            for a, c in zip(("a", "b", "c"), cats)
        ]
        + [
            ("m", "p5", "a", "exact"),
            ("m", "p5", "b", "near_exact"),
            ("m", "p6", "a", "mismatch"),
            ("m", "p6", "b", "mismatch"),
        ],
        columns=list(al.RATING_COLUMNS),
    )
    items = al.human_items(al.rating_values(ratings)).merge(
        pd.DataFrame({"prompt_id": P, "type": "human", "style": "cartoon"})
    )
    labels, unit_item = al.categorical_units(items, al.HH, agreement.ALPHA, PAPER)
    expected = [[3, 1, 2, 0, 3, 0], [3, 0, 2, 1, 2, 0], [2, 0, 3, 1, np.nan, np.nan]]
    np.testing.assert_array_equal(labels, np.array(expected, dtype=float))
    assert unit_item.tolist() == [0, 1, 2, 3, 4, 5]
    labels, unit_item = al.categorical_units(items, al.HH, agreement.KAPPA, PAPER)
    assert unit_item.tolist() == [4, 5] and labels.tolist() == [[3, 0], [2, 0]]


def test_judge_vs_humans_kappa_and_alpha_on_categories():
    judge = {
        "anystory": ("exact", "exact", "near_exact", "partial", "exact", "partial"),
        "dsd": ("near_exact", "partial", "mismatch", "partial", "exact", "mismatch"),
        "omnigen": ("partial", "mismatch", "partial", "mismatch", "near_exact", "mismatch"),
        "uno": ("exact", "exact", "near_exact", "near_exact", "near_exact", "near_exact"),
    }
    result = al.compute_study(ratings_frame(), categorical_scores(judge), PROMPTS, n_boot=100, seed=2)
    for model in RATED:
        row = row_of(result.table1, model=model)
        # One unit per (item, annotator): the judge's category against each person's.
        judged = [LABEL[judge[model][k]] for k, p in enumerate(P) for _ in (0, 1)]
        people = [LABEL[c] for p in P for c in RATED[model][1][p]]
        assert row["charis_score kappa_quadratic n"] == row["charis_score alpha_ordinal n"] == 12
        expected_kappa = quadratic_kappa_by_definition(judged, people)
        expected_alpha = krippendorff.alpha(
            reliability_data=[judged, people], level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]
        )
        assert row["charis_score kappa_quadratic"] == pytest.approx(expected_kappa)
        assert row["charis_score alpha_ordinal"] == pytest.approx(expected_alpha)


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Bootstrap intervals, computed twice to show they are seeded.
@pytest.mark.slow
def test_intervals_hold_the_estimate_and_are_seeded():
    judge = {m: ("exact", "near_exact", "partial", "mismatch", "exact", "partial") for m in RATED}
    first = al.compute_study(ratings_frame(), categorical_scores(judge), PROMPTS, n_boot=200, seed=5)
    again = al.compute_study(ratings_frame(), categorical_scores(judge), PROMPTS, n_boot=200, seed=5)
    other = al.compute_study(ratings_frame(), categorical_scores(judge), PROMPTS, n_boot=200, seed=6)
    for table in ("table1", "table2"):
        pd.testing.assert_frame_equal(getattr(first, table), getattr(again, table))
    row = row_of(first.table1, model="anystory")
    checked = 0
    for name in ("H-H", "charis_score", "clip_i"):
        for statistic in agreement.STATISTICS:
            columns = al._cell_columns(statistic, name)
            if columns[0] not in row or math.isnan(row[columns[0]]):
                continue
            value, low, high = row[columns[0]], row[columns[1]], row[columns[2]]
            assert low - 1e-12 <= value <= high + 1e-12, (name, statistic, low, value, high)
            checked += 1
    assert checked >= 10
    assert not first.table1["H-H spearman low"].equals(other.table1["H-H spearman low"])


def test_statistics_can_be_chosen_and_pearson_stays():
    result = al.compute_study(ratings_frame(), scores_frame(), PROMPTS, n_boot=20, statistics=["spearman"])
    assert "clip_i spearman" in result.table1.columns and "clip_i r" in result.table1.columns
    assert not [c for c in result.table1.columns if "kendall" in c or "kappa" in c or "alpha" in c]
    with pytest.raises(al.AlignmentError, match="unknown statistic"):
        al.compute_study(ratings_frame(), scores_frame(), PROMPTS, n_boot=20, statistics=["icc"])


def test_fewer_than_three_models_leave_the_system_row_undefined():
    rated = {m: RATED[m] for m in ("anystory", "uno")}
    result = al.compute_study(ratings_frame(rated), scores_frame(), PROMPTS, n_boot=50)
    row = row_of(result.table1, model=al.SYSTEM)
    assert math.isnan(row["charis_score r"]) and math.isnan(row["H-H r"]) and row["charis_score n"] == 2
    assert "2 model(s), r across models needs 3" in row["note"]
    assert any("system-level row needs 3" in note for note in result.notes)
    assert "scores of models without ratings ignored: dsd, omnigen" in result.notes
    # The per-model rows are unaffected.
    assert row_of(result.table1, model="uno")["charis_score r"] == pytest.approx(
        pearsonr(CHARIS["uno"], human("uno")).statistic
    )


def test_a_constant_side_is_nan_with_a_reason():
    scores = scores_frame()
    scores.loc[(scores["model"] == "dsd") & (scores["metric"] == "charis_score"), "value"] = 0.5
    row = row_of(al.compute_study(ratings_frame(), scores, PROMPTS, n_boot=50).table1, model="dsd")
    assert math.isnan(row["charis_score r"]) and "charis_score: constant over the 6 items" in row["note"]


def test_a_missing_score_leaves_the_item_out_of_every_column_of_its_rows():
    scores = scores_frame()
    scores = scores[
        ~((scores["model"] == "uno") & (scores["prompt_id"] == "p6") & (scores["metric"] == "charis_score"))
    ]
    result = al.compute_study(ratings_frame(), scores, PROMPTS, n_boot=50)
    row = row_of(result.table1, model="uno")
    assert row["charis_score n"] == row["clip_i n"] == row["H-H n"] == row["items"] == 5 and row["dropped"] == 1
    assert row["charis_score r"] == pytest.approx(pearsonr(CHARIS["uno"][:5], human("uno")[:5]).statistic)
    assert row["clip_i r"] == pytest.approx(pearsonr(clip("uno")[:5], human("uno")[:5]).statistic)
    assert row["clip_i spearman n"] == 5
    assert "1 of 6 item(s) left out of every column (1 without charis_score)" in row["note"]
    assert any(
        note.startswith("model uno: 1 of 6 rated prompts have no charis_score score; left out of every column")
        for note in result.notes
    )
    # Table 2's animal/vector cell loses the same item from every column; the system row too.
    cell = row_of(result.table2, type="animal", style="vector")
    assert cell["charis_score n"] == cell["clip_i n"] == cell["H-H n"] == 11 and cell["dropped"] == 1
    assert row_of(result.table1, model=al.SYSTEM)["dropped"] == 1
    t3 = row_of(result.table3, model="uno")
    assert t3["items"] == 5 and t3["dropped"] == 1
    assert t3["human"] == pytest.approx(np.mean(human("uno")[:5]))
    assert t3["clip_i"] == pytest.approx(np.mean(clip("uno")[:5]))


def test_table3_compares_the_same_items_when_the_judge_is_undefined():
    # The scripted case of issue 17: the judge could not categorise exactly the items people rated
    # mismatch. Over all rated items people give 0.5 and the judge 1.0; over the same items both give 1.
    rated = {"m": (("a", "b"), {p: (("exact",) * 2 if k < 3 else ("mismatch",) * 2) for k, p in enumerate(P)})}
    rows = []
    for k, prompt_id in enumerate(P):
        rows.append(("m", "charis", prompt_id, 0, "charis_score", "", 1.0 if k < 3 else math.nan))
        rows.append(("m", "charis", prompt_id, 0, "clip_i", "", 0.8 + 0.01 * k))
    scores = pd.DataFrame(rows, columns=["model", "benchmark", "prompt_id", "seed", "metric", "subject", "value"])
    result = al.compute_study(ratings_frame(rated), scores, PROMPTS, n_boot=20)
    row = row_of(result.table3, model="m")
    assert row["items"] == 3 and row["dropped"] == 3
    assert row["human"] == pytest.approx(1.0) and row["charis_score"] == pytest.approx(1.0)
    assert row["clip_i"] == pytest.approx(np.mean([0.80, 0.81, 0.82]))
    t1 = row_of(result.table1, model="m")
    assert t1["charis_score n"] == t1["clip_i n"] == t1["H-H n"] == t1["clip_i spearman n"] == 3
    assert "3 of 6 item(s) left out of every column (3 without charis_score)" in t1["note"]
    assert any("left out of every column of their rows" in note for note in result.notes)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.assign(category=r["category"].where(r.index != 4, "great")), r"ratings, row 5: category 'great'"),
        (
            lambda r: pd.concat([r, r.iloc[[2]]], ignore_index=True),
            r"row 49: a second rating by s1 of model anystory, prompt p2",
        ),
        (lambda r: r.drop(columns=["annotator"]), "missing column"),
        (
            lambda r: pd.concat([r, pd.DataFrame([("flux", "p1", "f1", "exact")], columns=list(al.RATING_COLUMNS))]),
            r"no scores for rated model\(s\) flux; the scores hold anystory, dsd, omnigen, uno",
        ),
        (
            lambda r: pd.concat([r, pd.DataFrame([("uno", "p9", "u1", "exact")], columns=list(al.RATING_COLUMNS))]),
            r"rated prompt\(s\) p9 are not among the prompts",
        ),
    ],
)
def test_bad_ratings_get_one_clear_error(change, message):
    with pytest.raises(al.AlignmentError, match=message):
        al.compute_study(change(ratings_frame()), scores_frame(), PROMPTS, n_boot=10)


def test_a_model_scored_on_other_prompts_is_an_error():
    scores = scores_frame()
    scores.loc[scores["model"] == "dsd", "prompt_id"] = scores.loc[scores["model"] == "dsd", "prompt_id"] + "-other"
    with pytest.raises(al.AlignmentError, match="model dsd: none of its 6 rated prompts has a score"):
        al.compute_study(ratings_frame(), scores, PROMPTS, n_boot=10)


def test_duplicate_scores_are_an_error():
    scores = pd.concat([scores_frame(), scores_frame(["dsd"])], ignore_index=True)
    with pytest.raises(al.AlignmentError, match="charis_score of model dsd, prompt p1, seed 0 appears twice"):
        al.compute_study(ratings_frame(), scores, PROMPTS, n_boot=10)


def test_unknown_metric_is_named():
    with pytest.raises(al.AlignmentError, match="no scores for metric\\(s\\) dino_sim"):
        al.compute_study(ratings_frame(), scores_frame(), PROMPTS, metrics=["dino_sim"], n_boot=10)


def test_written_tables_follow_the_papers_layout(tmp_path):
    out = tmp_path / "study"
    result = al.run_study(ratings_frame(), scores_frame(), PROMPTS, out, n_boot=100)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            "report.md",
            "study.json",
            "table1_per_model.csv",
            "table1_per_model.md",
            "table1_per_model.png",
            "table2_type_style.csv",
            "table2_type_style.md",
            "table3_mean_scores.csv",
            "table3_mean_scores.md",
        ]
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left

    t1 = (out / "table1_per_model.md").read_text().splitlines()
    header = next(line for line in t1 if line.startswith("| model"))
    assert header == "| model | n | H-H | charis_score-H | clip_i-H | notes |"
    r = row_of(result.table1, model="anystory")
    line = next(line for line in t1 if line.startswith("| anystory |"))
    assert line.startswith(
        f"| anystory | 6 | {r['H-H r']:.3f} [{r['H-H low']:.2f}, {r['H-H high']:.2f}] | {r['charis_score r']:.3f} ["
    )
    assert any(line.startswith(f"| {al.SYSTEM} | 4 |") for line in t1)

    t2 = (out / "table2_type_style.md").read_text()
    assert "| type | style | n | H-H | charis_score-H | clip_i-H | notes |" in t2
    assert "| human | cartoon | 12 |" in t2
    t3 = (out / "table3_mean_scores.md").read_text()
    assert "| model | items | dropped | human (h-bar) | charis_score | clip_i |" in t3
    assert f"| anystory | 6 | 0 | {11 / 18:.3f} | {np.mean(CHARIS['anystory']):.3f} |" in t3

    # Pearson (the paper's) first, then one table per further statistic, each without the notes column.
    sections = [line for line in t1 if line.startswith("### ")]
    assert sections == [
        "### Pearson r (the paper's)",
        "### Spearman rho",
        "### Kendall tau-b",
        "### Cohen's kappa, quadratic weights",
        "### Krippendorff's alpha, ordinal",
    ]
    headers = [line for line in t1 if line.startswith("| model")]
    assert headers[1] == "| model | n | H-H | charis_score-H | clip_i-H |"
    assert headers[3] == "| model | n | H-H | charis_score-H |"  # kappa: both sides on the categories only

    csv1 = pd.read_csv(out / "table1_per_model.csv")
    assert list(csv1.columns[:6]) == ["model", "level", "H-H r", "H-H low", "H-H high", "H-H n"]
    assert csv1.loc[csv1["model"] == "dsd", "charis_score r"].item() == pytest.approx(r_of("dsd"), abs=1e-5)
    assert {"H-H spearman", "clip_i kendall_tau_b low", "H-H kappa_quadratic n", "charis_score alpha_ordinal"} <= set(
        csv1.columns
    )
    assert "clip_i kappa_quadratic" not in csv1.columns  # a cosine is no category
    assert list(csv1.columns[-3:]) == ["items", "dropped", "note"]
    csv3 = pd.read_csv(out / "table3_mean_scores.csv")
    assert list(csv3.columns) == ["model", "items", "dropped", "human", "charis_score", "clip_i"]
    info = json.loads((out / "study.json").read_text())
    assert info["models"] == sorted(RATED) and info["options"]["n_boot"] == 100 and info["items"] == 24


def r_of(model: str) -> float:
    return pearsonr(CHARIS[model], human(model)).statistic


def test_an_existing_out_folder_is_kept_unless_asked(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(al.AlignmentError, match="already exists"):
        al.run_study(ratings_frame(), scores_frame(), PROMPTS, out, n_boot=10)
    assert (out / "keep.txt").read_text() == "mine"
    al.run_study(ratings_frame(), scores_frame(), PROMPTS, out, n_boot=10, overwrite=True)
    assert not (out / "keep.txt").exists() and (out / "report.md").is_file()


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(result, path):
        raise RuntimeError("disk full")

    monkeypatch.setattr(al, "plot_table1", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        al.run_study(ratings_frame(), scores_frame(), PROMPTS, tmp_path / "study", n_boot=10)
    assert list(tmp_path.iterdir()) == []


def test_readers_take_a_built_charis_folder_and_score_runs(tmp_path, fresh_cache):
    from helpers import SAMPLES, write_manifest

    from idbench.builders.build import build

    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    built = tmp_path / "built"
    build("charis", out=built, source=source / "charis.csv")  # prompts only, to learn the prompt ids
    prompts = al.read_prompts(built)
    assert list(prompts.columns) == ["prompt_id", "type", "style"] and len(prompts) > 10
    with pytest.raises(al.AlignmentError, match="no human_ratings config"):
        al.read_ratings(built)

    # Rate the first six prompts for three models and write one results.parquet per model.
    ids = prompts["prompt_id"].tolist()[:6]
    ratings = ratings_frame({m: RATED[m] for m in ("anystory", "dsd", "uno")})
    ratings["prompt_id"] = ratings["prompt_id"].map(dict(zip(P, ids)))
    write_manifest(source / "human_ratings.csv", list(al.RATING_COLUMNS), ratings.values.tolist())
    build("charis", out=built, source=source / "charis.csv", overwrite=True)
    runs = []
    for model in ("anystory", "dsd", "uno"):
        frame = scores_frame([model])
        frame["prompt_id"] = frame["prompt_id"].map(dict(zip(P, ids)))
        frame["plumbing"] = False
        (tmp_path / model).mkdir()
        frame.to_parquet(tmp_path / model / "results.parquet")
        runs.append(tmp_path / model)

    result = al.compute_study(al.read_ratings(built), al.read_scores(runs), al.read_prompts(built), n_boot=20)
    assert row_of(result.table1, model="dsd")["charis_score r"] == pytest.approx(r_of("dsd"))
    assert row_of(result.table1, model=al.SYSTEM)["charis_score n"] == 3

    with pytest.raises(al.AlignmentError, match="no results.parquet"):
        al.read_scores([tmp_path / "missing"])
    (tmp_path / "bad.csv").write_text("model,prompt_id,annotator,category\nuno,p1,u1,superb\n")
    with pytest.raises(al.AlignmentError, match=r"bad.csv, row 1: category 'superb'"):
        al.rating_values(al.read_ratings(tmp_path / "bad.csv"))

    # The same study through the CLI: --prompts defaults to the built folder given as --ratings.
    from idbench.cli import main

    out = tmp_path / "study"
    args = ["alignment", "--ratings", str(built), "--results", *map(str, runs), "--out", str(out), "--n-boot", "20"]
    assert main(args) == 0
    table1 = pd.read_csv(out / "table1_per_model.csv")
    assert table1.set_index("model").loc["dsd", "charis_score r"] == pytest.approx(r_of("dsd"))
    assert main(args) == 2  # the folder exists: refused, kept
