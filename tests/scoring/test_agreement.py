"""evaluate_pkg.functional.agreement against independent references.

Pearson, Spearman and Kendall tau-b against scipy.stats (pearsonr, spearmanr, kendalltau); the
quadratic weighted kappa against a small table worked by hand, a pairwise form of its definition
written out here, and scikit-learn's cohen_kappa_score where it is installed; Krippendorff's ordinal
alpha against a brute-force computation from its definition (coincidence matrix, ordinal distances),
since the module itself calls the krippendorff package. The bootstrap intervals against the same
statistics recomputed on each resampled vector.
"""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from idbench.evaluate_pkg.functional import agreement
from idbench.evaluate_pkg.functional.agreement import (
    categorical_agreement,
    category_labels,
    item_correlation,
    kendall_tau_b,
    ordinal_alpha,
    pearson,
    rank_correlation,
    spearman,
    system_correlation,
    weighted_kappa,
)
from idbench.evaluate_pkg.functional.bootstrap import cluster_bootstrap_weights, percentile_interval

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def test_docstring_examples_hold():
    result = doctest.testmod(agreement, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def same(value: float, expected: float) -> bool:
    """Equal within rounding, or both undefined."""
    return (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected, abs=1e-12)


# --- independent references --------------------------------------------------------------------------


def kappa_by_pairs(a, b) -> float:
    """Quadratic weighted kappa in its pairwise form: 1 - mean disagreement of the paired ratings over the
    mean disagreement of every rating of A with every rating of B (what chance pairing would give)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    observed = np.mean((a - b) ** 2)
    chance = np.mean([(x - y) ** 2 for x in a for y in b])
    return 1.0 - observed / chance


def alpha_by_definition(data, n_levels: int) -> float:
    """Krippendorff's alpha, ordinal level, from its definition: the coincidence matrix of all pairable
    values (each unit's ordered pairs of ratings by different coders, weighted 1/(m_u - 1)), the ordinal
    distance of two categories (the count of values from one to the other, half of each end, squared),
    then 1 - (n - 1) * sum o_ck d_ck / sum n_c n_k d_ck."""
    data = np.asarray(data, dtype=float)
    o = np.zeros((n_levels, n_levels))
    for unit in data.T:
        values = [int(v) for v in unit if not np.isnan(v)]
        m = len(values)
        if m < 2:
            continue
        for i, j in itertools.permutations(range(m), 2):
            o[values[i], values[j]] += 1.0 / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d = np.zeros((n_levels, n_levels))
    for c in range(n_levels):
        for k in range(n_levels):
            low, high = min(c, k), max(c, k)
            d[c, k] = (n_c[low : high + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2
    return 1.0 - (n - 1) * (o * d).sum() / (np.outer(n_c, n_c) * d).sum()


# --- the point estimates -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = 4 + 3 * seed
    x = rng.normal(size=n)
    y = 0.5 * x + rng.normal(size=n)
    ties = rng.integers(0, 4, size=n).astype(float)  # four categories: ties are common
    assert pearson(x, y) == pytest.approx(pearsonr(x, y).statistic, abs=1e-12)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic, abs=1e-12)
    if np.unique(ties).size > 1:
        assert spearman(ties, y) == pytest.approx(spearmanr(ties, y).statistic, abs=1e-12)
        assert kendall_tau_b(ties, y) == pytest.approx(kendalltau(ties, y, variant="b").statistic, abs=1e-12)


def test_a_reversed_order_and_perfect_agreement():
    assert spearman([1, 2, 3, 4], [9, 7, 5, 1]) == pytest.approx(-1.0)
    assert kendall_tau_b([1, 2, 3, 4], [9, 7, 5, 1]) == pytest.approx(-1.0)
    same_labels = np.array([[0, 1, 2, 3, 3, 1], [0, 1, 2, 3, 3, 1]], dtype=float)
    assert weighted_kappa(same_labels, 4) == pytest.approx(1.0)
    assert ordinal_alpha(same_labels, 4) == pytest.approx(1.0)


@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_undefined_cases_are_nan():
    for function in (pearson, spearman, kendall_tau_b):
        assert math.isnan(function([1, 2], [2, 1]))  # below three points (two always give +-1)
        assert math.isnan(function([1, 2, 3, 4], [5, 5, 5, 5]))  # a constant side
    assert math.isnan(weighted_kappa(np.ones((2, 5)), 4))  # one category only: undefined, not 1
    assert math.isnan(ordinal_alpha(np.ones((2, 5)), 4))
    assert math.isnan(weighted_kappa(np.array([[0, 1], [0, 1]], dtype=float), 4))  # two units
    assert math.isnan(ordinal_alpha(np.array([[0, np.nan, 2], [np.nan, 1, np.nan]]), 4))  # nothing pairable


def test_quadratic_kappa_of_a_small_table_by_hand():
    # Rater A: 0 0 1 2 3 3, rater B: 0 1 1 2 2 3 (labels of mismatch .. exact). Weights (i-j)^2 / 9.
    # Observed: two disagreements of one step, sum w*O = 2/9. Marginals A (2,1,1,2), B (1,2,2,1):
    # sum (i-j)^2 a_i b_j = 38 + 7 + 7 + 38 = 90, so sum w*E = 90 / 9 / 6 = 5/3. kappa = 1 - (2/9)/(5/3) = 13/15.
    labels = np.array([[0, 0, 1, 2, 3, 3], [0, 1, 1, 2, 2, 3]], dtype=float)
    assert weighted_kappa(labels, 4) == pytest.approx(13 / 15)
    assert kappa_by_pairs(*labels) == pytest.approx(13 / 15)


@pytest.mark.parametrize("seed", range(6))
def test_weighted_kappa_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    n = 5 + 4 * seed
    a = rng.integers(0, 4, size=n)
    b = np.clip(a + rng.integers(-1, 2, size=n), 0, 3)  # raters that mostly agree
    # torchmetrics computes in float32, hence the tolerance
    assert weighted_kappa(np.vstack([a, b]).astype(float), 4) == pytest.approx(kappa_by_pairs(a, b), abs=1e-6)


def test_weighted_kappa_matches_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is no dependency; checked where installed")
    rng = np.random.default_rng(11)
    for n in (6, 20, 50):
        a = rng.integers(0, 4, size=n)
        b = np.clip(a + rng.integers(-2, 2, size=n), 0, 3)
        expected = metrics.cohen_kappa_score(a, b, weights="quadratic")
        assert weighted_kappa(np.vstack([a, b]).astype(float), 4) == pytest.approx(expected, abs=1e-6)


def test_ordinal_alpha_of_a_small_table_by_hand():
    # Two coders, three units: (0, 0), (1, 1), (0, 1). Coincidences o00 = 2, o11 = 2, o01 = o10 = 1;
    # n_0 = n_1 = 3, n = 6. Ordinal distance of 0 and 1: (3 + 3 - (3 + 3) / 2)^2 = 9.
    # alpha = 1 - (n - 1) * (o01 + o10) * 9 / (2 * n_0 * n_1 * 9) = 1 - 5 * 2 / 18 = 4/9.
    labels = np.array([[0, 1, 0], [0, 1, 1]], dtype=float)
    assert ordinal_alpha(labels, 4) == pytest.approx(4 / 9)
    assert alpha_by_definition(labels, 4) == pytest.approx(4 / 9)


@pytest.mark.parametrize("seed", range(6))
def test_ordinal_alpha_matches_its_definition(seed):
    rng = np.random.default_rng(100 + seed)
    coders, units = 2 + seed % 3, 6 + 3 * seed
    truth = rng.integers(0, 4, size=units)
    data = np.clip(truth[None, :] + rng.integers(-1, 2, size=(coders, units)), 0, 3).astype(float)
    if seed >= 2:  # missing ratings: alpha takes any number of coders per unit
        data[rng.random(size=data.shape) < 0.25] = np.nan
    assert ordinal_alpha(data, 4) == pytest.approx(alpha_by_definition(data, 4), abs=1e-12)


def test_category_labels_order_the_categories_by_score():
    scores = {"exact": 1.0, "near_exact": 2 / 3, "partial": 1 / 3, "mismatch": 0.0}
    got = category_labels([1.0, 0.0, 2 / 3, 0.5, np.nan, 1 / 3], scores)
    np.testing.assert_array_equal(got, [3, 0, 2, np.nan, np.nan, 1])


# --- the bootstrap intervals -----------------------------------------------------------------------------


def test_weighted_r_equals_r_of_the_resampled_vectors():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=8), rng.normal(size=8)
    weights = cluster_bootstrap_weights(list(range(8)), n_resamples=20, seed=1)
    got = agreement._weighted_pearson_rows(x, y, weights)
    for row, r in zip(weights, got):
        picked = np.repeat(np.arange(8), row.astype(int))
        if len(set(picked)) >= 3:
            assert r == pytest.approx(pearsonr(x[picked], y[picked]).statistic)


@pytest.mark.filterwarnings("ignore:An input array is constant")  # scipy's NaN for a constant resample
@pytest.mark.parametrize("statistic", ["spearman", "kendall_tau_b"])
@pytest.mark.parametrize("items_per_prompt", [[1] * 9, [1, 2, 1, 3, 1, 1]])  # equal-size resamples, then not
def test_rank_replicates_equal_scipy_on_each_resampled_vector(statistic, items_per_prompt):
    rng = np.random.default_rng(4)
    prompts = [f"p{k}" for k, size in enumerate(items_per_prompt) for _ in range(size)]
    x, y = rng.integers(0, 4, len(prompts)).astype(float), rng.normal(size=len(prompts)).round(1)
    weights = cluster_bootstrap_weights(prompts, n_resamples=40, seed=9)
    got = agreement._rank_replicates(statistic, x, y, weights)
    reference = spearmanr if statistic == "spearman" else (lambda a, b: kendalltau(a, b, variant="b"))
    for row, value in zip(weights, got):
        picked = np.repeat(np.arange(len(x)), row.astype(int))
        if len(set(picked)) < 3:
            assert math.isnan(value)
            continue
        expected = reference(x[picked], y[picked]).statistic
        assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)


def replicates_by_loop(x, y, weights, function) -> np.ndarray:
    """``function`` of every resample, the resampled vectors materialised (items with both values known)."""
    out = []
    for row in weights:
        picked = np.repeat(np.arange(len(x)), row.astype(int))
        picked = picked[np.isfinite(x[picked]) & np.isfinite(y[picked])]
        out.append(function(x[picked], y[picked]) if np.unique(picked).size >= 3 else math.nan)
    return np.array(out)


@pytest.mark.filterwarnings("ignore:An input array is constant")
def test_item_and_rank_intervals_are_percentiles_of_the_resampled_statistics():
    rng = np.random.default_rng(3)
    prompts = [f"p{k // 2}" for k in range(16)]
    x, y = rng.normal(size=16), rng.normal(size=16)
    x[5] = np.nan  # an item without a value takes no part
    weights = cluster_bootstrap_weights(prompts, n_resamples=60, seed=2)
    mask = np.isfinite(x)
    cell = item_correlation(x, y, weights, 0.9, "x-y")
    assert cell.r == pytest.approx(pearsonr(x[mask], y[mask]).statistic) and cell.n == 15 and cell.note == ""
    low, high = percentile_interval(replicates_by_loop(x, y, weights, lambda a, b: pearsonr(a, b).statistic), 0.9)
    assert (cell.low, cell.high) == pytest.approx((low, high))
    references = {"spearman": spearmanr, "kendall_tau_b": lambda a, b: kendalltau(a, b, variant="b")}
    for statistic, reference in references.items():
        cell = rank_correlation(statistic, x, y, weights, 0.9, "x-y")
        assert cell.r == pytest.approx(reference(x[mask], y[mask]).statistic) and cell.n == 15
        expected = replicates_by_loop(x, y, weights, lambda a, b, f=reference: f(a, b).statistic)
        assert (cell.low, cell.high) == pytest.approx(percentile_interval(expected, 0.9))


@pytest.mark.parametrize("statistic", ["pearson", "spearman", "kendall_tau_b"])
def test_system_correlation_is_over_the_per_model_means(statistic):
    rng = np.random.default_rng(8)
    models = np.array([f"m{k % 5}" for k in range(25)], dtype=object)[::-1]  # models in no sorted order
    prompts = [f"p{k // 5}" for k in range(25)]
    x, y = rng.normal(size=25), rng.normal(size=25)
    weights = cluster_bootstrap_weights(prompts, n_resamples=40, seed=4)
    reference = {
        "pearson": lambda a, b: pearsonr(a, b).statistic,
        "spearman": lambda a, b: spearmanr(a, b).statistic,
        "kendall_tau_b": lambda a, b: kendalltau(a, b, variant="b").statistic,
    }[statistic]
    frame = pd.DataFrame({"model": models, "x": x, "y": y})
    means = frame.groupby("model")[["x", "y"]].mean()
    cell = system_correlation(x, y, models, weights, 0.9, "x-y", statistic)
    assert cell.r == pytest.approx(reference(means["x"], means["y"])) and cell.n == 5
    boot = []
    for row in weights:
        drawn = (
            frame.assign(w=row)
            .groupby("model")
            .apply(
                lambda g: pd.Series(
                    {
                        "x": np.average(g["x"], weights=g["w"]) if g["w"].sum() else np.nan,
                        "y": np.average(g["y"], weights=g["w"]) if g["w"].sum() else np.nan,
                    }
                ),
                include_groups=False,
            )
        )
        boot.append(math.nan if drawn.isna().any().any() else reference(drawn["x"], drawn["y"]))
    assert (cell.low, cell.high) == pytest.approx(percentile_interval(np.array(boot), 0.9))


def test_fewer_than_three_models_or_items_are_nan_with_a_reason():
    weights = np.ones((5, 4))
    cell = system_correlation(np.arange(4.0), np.arange(4.0), np.array(["a", "a", "b", "b"]), weights, 0.9, "g")
    assert math.isnan(cell.r) and cell.n == 2 and "2 model(s), r across models needs 3" in cell.note
    cell = item_correlation(np.array([1.0, 2.0, np.nan, 4.0]), np.array([1.0, np.nan, 3.0, 2.0]), weights, 0.9, "g")
    assert math.isnan(cell.r) and cell.n == 2 and cell.note == "g: 2 item(s), r needs 3"
    cell = rank_correlation("spearman", np.ones(4), np.arange(4.0), weights, 0.9, "g")
    assert math.isnan(cell.r) and cell.note == "g: constant over the 4 items"


def test_the_group_codes_follow_first_appearance_as_pandas_does():
    values = np.array(["uno", "dsd", "uno", "anystory", "dsd", "omnigen"], dtype=object)
    codes, uniques = agreement._factorize(values)
    expected_codes, expected_uniques = pd.factorize(pd.Series(values, dtype="object"))
    np.testing.assert_array_equal(codes, expected_codes)
    assert list(uniques) == list(expected_uniques)


@pytest.mark.parametrize("statistic", ["kappa_quadratic", "alpha_ordinal"])
def test_categorical_intervals_resample_items_with_all_their_units(statistic):
    rng = np.random.default_rng(5)
    unit_item = np.repeat(np.arange(8), 2)  # two units (rating pairs) per item
    truth = rng.integers(0, 4, size=16)
    labels = np.vstack([truth, np.clip(truth + rng.integers(-1, 2, size=16), 0, 3)]).astype(float)
    weights = cluster_bootstrap_weights([f"p{k // 2}" for k in range(8)], n_resamples=40, seed=6)
    if statistic == "kappa_quadratic":
        reference, tolerance = (lambda data: kappa_by_pairs(*data)), 1e-6  # torchmetrics runs in float32
    else:
        reference, tolerance = (lambda data: alpha_by_definition(data, 4)), 1e-9
    cell = categorical_agreement(statistic, labels, unit_item, weights, 0.9, "a-b", 4)
    assert cell.r == pytest.approx(reference(labels), abs=tolerance) and cell.n == 16
    boot = []
    for row in weights:
        picked = np.repeat(np.arange(16), row[unit_item].astype(int))
        boot.append(reference(labels[:, picked]) if np.unique(unit_item[picked]).size >= 3 else math.nan)
    assert (cell.low, cell.high) == pytest.approx(percentile_interval(np.array(boot), 0.9), abs=tolerance)
