"""Aggregates of a scoring run: intervals resample prompts, overall and per breakdown cell (hand-made results)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from idbench.builders.benchmarks import get_benchmark
from idbench.evaluate_pkg.report import aggregate, ci_legend, interval_text

SEEDS = (0, 1, 2)


def results_frame(values: dict[str, list[float]], metric: str = "dino_sim") -> pd.DataFrame:
    """Image-level rows (prompt, seed) of one metric, plus a per-subject row that must be ignored."""
    rows = [
        {"prompt_id": p, "seed": s, "metric": metric, "subject": "", "value": v}
        for p, seeds in values.items()
        for s, v in zip(SEEDS, seeds)
    ]
    rows.append({"prompt_id": next(iter(values)), "seed": 0, "metric": metric, "subject": "s1", "value": 100.0})
    return pd.DataFrame(rows)


def prompts_frame(sizes: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame([{"prompt_id": p, "n_subjects": n, "scene": "neutral"} for p, n in sizes.items()])


def test_aggregates_resample_prompts_and_record_how():
    spec = get_benchmark("identity-collapse")
    rng = np.random.default_rng(7)
    means = rng.normal(0.5, 0.2, size=30)
    ids = [f"p{i:02d}" for i in range(30)]
    values = {p: [m, m, m] for p, m in zip(ids, means)}  # three seeds that are copies
    values["p29"] = [means[-1], math.nan, means[-1]]  # one missing value
    sizes = {p: 2 for p in ids[:29]} | {"p29": 4}  # n_subjects = 4 holds a single prompt
    agg = aggregate(results_frame(values), prompts_frame(sizes), spec)

    overall = agg["overall"]["dino_sim"]
    assert (overall["n"], overall["n_nan"], overall["n_prompts"]) == (89, 1, 30)
    assert overall["mean"] == pytest.approx(np.nanmean([v for seeds in values.values() for v in seeds]))
    # the interval of the 30 prompt means (scipy, independent draws): Monte-Carlo tolerance of 1000 resamples
    ref = scipy_stats.bootstrap((means,), np.mean, method="percentile", n_resamples=20_000, rng=np.random.default_rng(0))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert overall["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.12 * width)
    assert overall["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.12 * width)

    cells = agg["breakdowns"]["n_subjects"]
    assert cells["2"]["dino_sim"]["n_prompts"] == 29 and cells["2"]["dino_sim"]["ci_low"] < cells["2"]["dino_sim"]["ci_high"]
    single = cells["4"]["dino_sim"]
    assert single["mean"] == pytest.approx(means[-1]) and single["n_prompts"] == 1 and single["n_nan"] == 1
    assert single["ci_low"] is None and single["ci_high"] is None  # no interval, not a zero-width one
    assert interval_text(single, "raw") == "n/a (1 prompt)"

    assert agg["ci"]["unit"] == "prompt" and agg["ci"]["n_boot"] == 1000
    assert agg["ci"]["method"] == "percentile bootstrap over prompts"
    assert "percentile bootstrap over prompts (1000 resamples" in ci_legend(agg)


def test_a_cell_of_missing_values_stays_missing():
    spec = get_benchmark("identity-collapse")
    values = {"p0": [math.nan] * 3, "p1": [0.2, 0.4, 0.6], "p2": [0.1, 0.1, 0.1]}
    agg = aggregate(results_frame(values, "bg_sim"), prompts_frame({"p0": 6, "p1": 2, "p2": 2}), spec)
    empty = agg["breakdowns"]["n_subjects"]["6"]["bg_sim"]
    assert empty["mean"] is None and empty["ci_low"] is None and (empty["n"], empty["n_nan"], empty["n_prompts"]) == (0, 3, 0)
    overall = agg["overall"]["bg_sim"]
    assert overall["mean"] == pytest.approx(1.5 / 6) and (overall["n_nan"], overall["n_prompts"]) == (3, 2)
