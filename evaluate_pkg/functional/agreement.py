"""Agreement statistics between two sets of ratings or scores, with percentile bootstrap intervals.

These answer "how well does a metric agree with people, and people with each other" for any benchmark
that has human ratings: Pearson r, Spearman rho and Kendall tau-b between two numeric columns, and,
where both sides are ordered categories, Cohen's kappa with quadratic weights and Krippendorff's alpha
at the ordinal level. Each estimate comes with an interval from bootstrap weights, a (draws, items)
matrix of draw counts such as :func:`~idbench.evaluate_pkg.functional.bootstrap.cluster_bootstrap_weights`
gives, so every statistic of a study can use the same draws.

Pearson r is computed here, for all draws at once (a draw is a weighting of the items). The other
statistics call maintained libraries, imported only when first used: scipy (Spearman, Kendall),
torchmetrics (the weighted kappa, so torch loads then and only then) and krippendorff (alpha); a
draw's items are repeated by their counts and the library runs once per draw, except for rank
statistics over draws of equal size, which scipy takes as one matrix. Every statistic is NaN, with
a reason in :attr:`Correlation.note` where a caller asks for one, below :data:`MIN_POINTS` points or
where a side is constant.

benchmarks/charis/alignment.py (the CHARIS human alignment study) is the first user; docs/alignment.md
gives the choices and their reasons.

>>> pearson([1, 2, 3, 4], [2, 4, 6, 9]) > 0.99
True
>>> kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1])
-1.0
>>> import math; math.isnan(spearman([1, 2], [2, 1]))  # two points: undefined
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bootstrap import percentile_interval

MIN_POINTS = 3  # Pearson r of fewer points is undefined (two points always give +-1)

# The statistics by name (the names tables and options use), with their readable labels.
PEARSON = "pearson"
SPEARMAN = "spearman"
KENDALL = "kendall_tau_b"
KAPPA = "kappa_quadratic"
ALPHA = "alpha_ordinal"
STATISTICS = (PEARSON, SPEARMAN, KENDALL, KAPPA, ALPHA)
STATISTIC_LABELS = {
    PEARSON: "Pearson r",
    SPEARMAN: "Spearman rho",
    KENDALL: "Kendall tau-b",
    KAPPA: "Cohen's kappa, quadratic weights",
    ALPHA: "Krippendorff's alpha, ordinal",
}
RANK_STATISTICS = (SPEARMAN, KENDALL)
CATEGORICAL_STATISTICS = (KAPPA, ALPHA)


@dataclass(frozen=True)
class Correlation:
    """An agreement statistic (Pearson r, or another of :data:`STATISTICS`) with its bootstrap CI;
    ``note`` says why a NaN is NaN."""

    r: float
    low: float
    high: float
    n: int  # points compared: items, units, or models for an across-model correlation
    note: str = ""


# --- Pearson r -------------------------------------------------------------------------------------


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r; NaN with fewer than 3 points or a constant side (where r is undefined)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < MIN_POINTS:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum() / denominator) if denominator > 0 else math.nan


def _weighted_pearson_rows(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Row-wise weighted Pearson r of (x, y) under each row of ``weights`` (B, n); NaN where undefined.

    A bootstrap resample with replacement is a weighting by draw counts, so this gives every resample's
    r without materialising the resampled vectors.
    """
    x, y = np.nan_to_num(x), np.nan_to_num(y)
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (weights * x).sum(axis=1) / total
        my = (weights * y).sum(axis=1) / total
        dx, dy = x[None, :] - mx[:, None], y[None, :] - my[:, None]
        cov = (weights * dx * dy).sum(axis=1)
        vx, vy = (weights * dx * dx).sum(axis=1), (weights * dy * dy).sum(axis=1)
        r = cov / np.sqrt(vx * vy)
    support = (weights > 0).sum(axis=1)
    tiny = 1e-12 * np.maximum(1.0, total)
    return np.where((support >= MIN_POINTS) & (vx > tiny) & (vy > tiny), r, np.nan)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (B, k) matrices; NaN for rows with a NaN or a constant side."""
    with np.errstate(invalid="ignore", divide="ignore"):
        dx, dy = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
        vx, vy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1)
        r = (dx * dy).sum(axis=1) / np.sqrt(vx * vy)
    return np.where((vx > 1e-24) & (vy > 1e-24), r, np.nan)


def item_correlation(x: np.ndarray, y: np.ndarray, weights: np.ndarray, confidence: float, what: str) -> Correlation:
    """r over the items where both x and y are known, with its CI from the bootstrap ``weights``."""
    mask = np.isfinite(x) & np.isfinite(y)
    n = int(mask.sum())
    if n < MIN_POINTS:
        return Correlation(math.nan, math.nan, math.nan, n, f"{what}: {n} item(s), r needs {MIN_POINTS}")
    r = pearson(x[mask], y[mask])
    if math.isnan(r):
        return Correlation(math.nan, math.nan, math.nan, n, f"{what}: constant over the {n} items")
    low, high = percentile_interval(_weighted_pearson_rows(x, y, weights * mask[None, :]), confidence)
    return Correlation(r, low, high, n)


def system_correlation(
    x: np.ndarray,
    y: np.ndarray,
    models: np.ndarray,
    weights: np.ndarray,
    confidence: float,
    what: str,
    statistic: str = "pearson",
) -> Correlation:
    """A correlation across models between per-model means of x and of y (each over the model's items
    where both are known), with its CI from the bootstrap ``weights``. ``statistic`` is Pearson (the
    paper's), Spearman or Kendall tau-b; the resampled means are weighted means, so only the
    statistic itself runs per resample."""
    mask = np.isfinite(x) & np.isfinite(y)
    codes, uniques = _factorize(np.asarray(models, dtype=object)[mask])
    k = len(uniques)
    if k < MIN_POINTS:
        return Correlation(math.nan, math.nan, math.nan, k, f"{what}: {k} model(s), r across models needs {MIN_POINTS}")
    onehot = np.zeros((mask.sum(), k))
    onehot[np.arange(mask.sum()), codes] = 1.0
    xm, ym, w = x[mask], y[mask], weights[:, mask]
    counts = onehot.sum(axis=0)
    function = pearson if statistic == PEARSON else RANK_FUNCTIONS[statistic]
    r = function((xm @ onehot) / counts, (ym @ onehot) / counts)
    if math.isnan(r):
        return Correlation(math.nan, math.nan, math.nan, k, f"{what}: per-model means constant")
    with np.errstate(invalid="ignore", divide="ignore"):
        totals = w @ onehot
        x_means, y_means = (w * xm) @ onehot / totals, (w * ym) @ onehot / totals
    if statistic == PEARSON:
        boot = _pearson_rows(x_means, y_means)
    else:  # every resample has one mean per model: equal-length rows, ranked all at once
        boot = _rank_rows(statistic, np.nan_to_num(x_means), np.nan_to_num(y_means))
    boot[(totals == 0).any(axis=1)] = np.nan  # a model none of whose prompts was drawn
    low, high = percentile_interval(boot, confidence)
    return Correlation(r, low, high, k)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's code 0..k-1 and the k distinct values, numbered in order of first appearance (the
    order ``pandas.factorize`` gives, so the per-group sums below run in the same order)."""
    uniques, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    code_of = np.empty(len(order), dtype=np.int64)
    code_of[order] = np.arange(len(order))
    return code_of[inverse.reshape(-1)], uniques[order]


# --- rank correlations and categorical agreement (the libraries compute, this code resamples) ---


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rho (scipy.stats.spearmanr); NaN with fewer than 3 points or a constant side."""
    from scipy.stats import spearmanr  # lazily, as the other statistics' libraries

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < MIN_POINTS:
        return math.nan
    with warnings.catch_warnings():  # a constant side: scipy warns and returns NaN, which is our answer
        warnings.simplefilter("ignore")
        return float(spearmanr(x, y).statistic)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall tau-b (scipy.stats.kendalltau, variant "b": corrected for ties, which the four
    categories make common); NaN with fewer than 3 points or a constant side."""
    from scipy.stats import kendalltau

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < MIN_POINTS:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(kendalltau(x, y, variant="b").statistic)


RANK_FUNCTIONS = {SPEARMAN: spearman, KENDALL: kendall_tau_b}


def category_labels(values: Any, scores: Mapping[str, float]) -> np.ndarray:
    """Each value's category as an ordinal label 0..k-1 (categories ordered by score, mismatch 0),
    NaN where the value is not a category's score (a mean over disagreeing seeds or annotators, NaN)."""
    levels = np.array(sorted(set(float(v) for v in scores.values())))
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    hit = np.isclose(values[:, None], levels[None, :], rtol=0.0, atol=1e-9)
    return np.where(hit.any(axis=1), hit.argmax(axis=1), np.nan)


def weighted_kappa(labels: np.ndarray, n_levels: int) -> float:
    """Cohen's kappa with quadratic weights between the two rows of a (2, units) label matrix
    (torchmetrics' multiclass_cohen_kappa); NaN below 3 units or where undefined (one category only).

    Quadratic weights charge a disagreement by its squared distance on the ordered scale, so the
    statistic reads like an interval-scale agreement (it matches the concordance correlation of the
    equally spaced category scores) and is the usual choice for ordinal ratings."""
    if labels.shape[1] < MIN_POINTS:
        return math.nan
    import torch  # lazily: a few seconds to import, and needed only here
    from torchmetrics.functional.classification import multiclass_cohen_kappa

    rows = torch.as_tensor(labels.astype(np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(multiclass_cohen_kappa(rows[0], rows[1], num_classes=n_levels, weights="quadratic"))
    return value if math.isfinite(value) else math.nan


def ordinal_alpha(labels: np.ndarray, n_levels: int) -> float:
    """Krippendorff's alpha at the ordinal level of a (coders, units) label matrix, NaN for a missing
    rating (the krippendorff package); NaN below 3 units or where undefined (one category only)."""
    if labels.shape[1] < MIN_POINTS:
        return math.nan
    import krippendorff  # lazily: the study's own dependency, not the scoring path's

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        try:
            value = float(
                krippendorff.alpha(
                    reliability_data=labels, level_of_measurement="ordinal", value_domain=list(range(n_levels))
                )
            )
        except (ValueError, ZeroDivisionError):  # no pairable values, e.g. every unit rated once
            return math.nan
    return value if math.isfinite(value) else math.nan


CATEGORICAL_FUNCTIONS = {KAPPA: weighted_kappa, ALPHA: ordinal_alpha}


def _per_resample(statistic: Any, unit_item: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``statistic(unit indices)`` for every bootstrap resample: an item drawn c times brings its units
    c times. For statistics without a weighted form (ranks, kappa, alpha) the library runs once per
    resample; a resample with fewer than 3 distinct items is left undefined."""
    counts = weights[:, unit_item].astype(np.int64)
    units = np.arange(len(unit_item))
    out = np.full(len(weights), np.nan)
    for b, row in enumerate(counts):
        picked = np.repeat(units, row)
        if np.unique(unit_item[picked]).size >= MIN_POINTS:
            out[b] = statistic(picked)
    return out


def rank_correlation(
    statistic: str, x: np.ndarray, y: np.ndarray, weights: np.ndarray, confidence: float, what: str
) -> Correlation:
    """Spearman or Kendall tau-b over the items where both x and y are known, with its CI from the
    bootstrap ``weights`` (the same draws as Pearson's)."""
    function = RANK_FUNCTIONS[statistic]
    mask = np.isfinite(x) & np.isfinite(y)
    n = int(mask.sum())
    if n < MIN_POINTS:
        return Correlation(math.nan, math.nan, math.nan, n, f"{what}: {n} item(s), needs {MIN_POINTS}")
    xs, ys = x[mask], y[mask]
    value = function(xs, ys)
    if math.isnan(value):
        return Correlation(math.nan, math.nan, math.nan, n, f"{what}: constant over the {n} items")
    low, high = percentile_interval(_rank_replicates(statistic, xs, ys, weights[:, mask]), confidence)
    return Correlation(value, low, high, n)


def _rank_replicates(statistic: str, x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman or Kendall tau-b of every resample of the items (x, y) under ``weights`` (B, n).

    Where every resample holds the same number of items (one item per prompt, or every prompt with
    all its models) the resamples stack into (B, m) matrices and scipy handles them at once:
    ``rankdata`` row-wise then Pearson of the ranks (which is Spearman's rho, as ``spearmanr``
    computes it), ``kendalltau`` along axis 1. Otherwise scipy runs once per resample."""
    counts = weights.astype(np.int64)
    sizes = counts.sum(axis=1)
    if len(sizes) == 0 or not (sizes == sizes[0]).all():
        function = RANK_FUNCTIONS[statistic]
        return _per_resample(lambda picked: function(x[picked], y[picked]), np.arange(len(x)), weights)
    units = np.arange(len(x))
    picked = np.stack([np.repeat(units, row) for row in counts])
    return np.where((counts > 0).sum(axis=1) >= MIN_POINTS, _rank_rows(statistic, x[picked], y[picked]), np.nan)


def _rank_rows(statistic: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Spearman (scipy's ``rankdata`` per row, then Pearson of the ranks, as ``spearmanr``
    does) or Kendall tau-b (``kendalltau`` along axis 1) of two (B, m) matrices; NaN where a row is
    constant."""
    from scipy.stats import kendalltau, rankdata

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # constant resamples: NaN, which percentile_interval skips
        if statistic == SPEARMAN:
            return _pearson_rows(rankdata(x, axis=1), rankdata(y, axis=1))
        return np.asarray(kendalltau(x, y, variant="b", axis=1).statistic, dtype=np.float64)


def categorical_agreement(
    statistic: str,
    labels: np.ndarray,
    unit_item: np.ndarray,
    weights: np.ndarray,
    confidence: float,
    what: str,
    n_levels: int,
) -> Correlation:
    """Weighted kappa or ordinal alpha of a (coders, units) label matrix whose unit j belongs to item
    ``unit_item[j]``, with its CI from the bootstrap ``weights`` over items; ``n`` counts units."""
    function = CATEGORICAL_FUNCTIONS[statistic]
    n = labels.shape[1]
    if n < MIN_POINTS:
        return Correlation(
            math.nan, math.nan, math.nan, n, f"{what}: {n} unit(s) on the categories, needs {MIN_POINTS}"
        )
    value = function(labels, n_levels)
    if math.isnan(value):
        return Correlation(
            math.nan, math.nan, math.nan, n, f"{what}: undefined (one category only?) over the {n} units"
        )
    boot = _per_resample(lambda picked: function(labels[:, picked], n_levels), unit_item, weights)
    low, high = percentile_interval(boot, confidence)
    return Correlation(value, low, high, n)


__all__ = [
    "ALPHA",
    "CATEGORICAL_FUNCTIONS",
    "CATEGORICAL_STATISTICS",
    "KAPPA",
    "KENDALL",
    "MIN_POINTS",
    "PEARSON",
    "RANK_FUNCTIONS",
    "RANK_STATISTICS",
    "SPEARMAN",
    "STATISTICS",
    "STATISTIC_LABELS",
    "Correlation",
    "categorical_agreement",
    "category_labels",
    "item_correlation",
    "kendall_tau_b",
    "ordinal_alpha",
    "pearson",
    "rank_correlation",
    "spearman",
    "system_correlation",
    "weighted_kappa",
]
