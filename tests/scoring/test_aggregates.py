"""Aggregates of a scoring run: intervals resample prompts, overall and per breakdown cell (hand-made results)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.report import aggregate, ci_legend, interval_text

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

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
    ref = scipy_stats.bootstrap(
        (means,), np.mean, method="percentile", n_resamples=20_000, rng=np.random.default_rng(0)
    )
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert overall["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.12 * width)
    assert overall["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.12 * width)

    cells = agg["breakdowns"]["n_subjects"]
    assert (
        cells["2"]["dino_sim"]["n_prompts"] == 29
        and cells["2"]["dino_sim"]["ci_low"] < cells["2"]["dino_sim"]["ci_high"]
    )
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
    assert (
        empty["mean"] is None
        and empty["ci_low"] is None
        and (empty["n"], empty["n_nan"], empty["n_prompts"]) == (0, 3, 0)
    )
    overall = agg["overall"]["bg_sim"]
    assert overall["mean"] == pytest.approx(1.5 / 6) and (overall["n_nan"], overall["n_prompts"]) == (3, 2)


# --- subject breakdowns: cells by the references' metadata (CogCanvas) ------------------------------


def _person(slot: str, ref: str, item: str, strength: str) -> dict:
    return {"slot": slot, "ref_id": ref, "item_ref_id": item, "interaction_strength": strength}


def _cog_inputs():
    """Three prompts: p0 (A: woman r1, B: man r2), p1 (A: woman r3, B: r4 unannotated, C: man r2),
    p2 (A: r9, a reference id the table lacks). Items: i1 small, i2 large, i3 with no size."""
    prompts = pd.DataFrame(
        [
            {
                "prompt_id": "p0",
                "n_persons": 2,
                "background_ref_id": "bg1",
                "persons": [_person("A", "r1", "i1", "close"), _person("B", "r2", "i2", "loose")],
            },
            {
                "prompt_id": "p1",
                "n_persons": 3,
                "background_ref_id": "bg2",
                "persons": [
                    _person("A", "r3", "i2", "close"),
                    _person("B", "r4", "i3", "close"),
                    _person("C", "r2", "i1", "medium"),
                ],
            },
            {
                "prompt_id": "p2",
                "n_persons": 2,
                "background_ref_id": "bg-missing",
                "persons": [_person("A", "r9", "i1", "loose"), _person("B", "r1", "i1", "loose")],
            },
        ]
    )
    references = pd.DataFrame(
        [
            {
                "ref_id": "r1",
                "gender": "female",
                "age_group": "adult",
                "ethnicity": "",
                "size_category": None,
                "scene_type": None,
            },
            {
                "ref_id": "r2",
                "gender": "male",
                "age_group": "senior",
                "ethnicity": "x",
                "size_category": None,
                "scene_type": None,
            },
            {
                "ref_id": "r3",
                "gender": "female",
                "age_group": "adult",
                "ethnicity": "x",
                "size_category": None,
                "scene_type": None,
            },
            {
                "ref_id": "r4",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": None,
                "scene_type": None,
            },
            {
                "ref_id": "i1",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": "small",
                "scene_type": None,
            },
            {
                "ref_id": "i2",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": "large",
                "scene_type": None,
            },
            {
                "ref_id": "i3",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": "",
                "scene_type": None,
            },
            {
                "ref_id": "bg1",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": None,
                "scene_type": "landmark",
            },
            {
                "ref_id": "bg2",
                "gender": None,
                "age_group": None,
                "ethnicity": None,
                "size_category": None,
                "scene_type": "landmark",
            },
        ]
    )
    return prompts, references


def _row(prompt: str, seed: int, metric: str, subject: str, value: float) -> dict:
    return {"prompt_id": prompt, "seed": seed, "metric": metric, "subject": subject, "value": value}


def test_subject_breakdowns_group_person_item_and_image_rows_by_metadata():
    spec = get_benchmark("cogcanvas")
    prompts, references = _cog_inputs()
    slots = {"p0": "AB", "p1": "ABC", "p2": "AB"}
    rng = np.random.default_rng(3)
    rows = []
    for p, persons in slots.items():
        for seed in (0, 1):
            person_values = rng.uniform(0, 1, len(persons))
            rows.append(_row(p, seed, "id_sim", "", float(person_values.mean())))  # the whole image's mean
            rows += [_row(p, seed, "id_sim", slot, float(v)) for slot, v in zip(persons, person_values)]
            rows += [
                _row(p, seed, "dino_sim", slot + ".item", float(v))
                for slot, v in zip(persons, rng.uniform(0, 1, len(persons)))
            ]
            rows.append(_row(p, seed, "bg_sim", "", float(rng.uniform(0, 1))))
    results = pd.DataFrame(rows)
    agg = aggregate(results, prompts, spec, references)

    def values(metric: str, pairs: set[tuple[str, str]]) -> np.ndarray:
        keep = np.array([(p, s) in pairs for p, s in zip(results["prompt_id"], results["subject"])])
        chosen = results[(results["metric"] == metric).to_numpy() & keep]
        return chosen["value"].to_numpy()

    by_gender = agg["subject_breakdowns"]["gender"]
    # by hand: female = r1 (p0 A, p2 B) and r3 (p1 A); male = r2 (p0 B, p1 C); unknown = r4 (unannotated), r9 (not in the table)
    female = values("id_sim", {("p0", "A"), ("p2", "B"), ("p1", "A")})
    male = values("id_sim", {("p0", "B"), ("p1", "C")})
    unknown = values("id_sim", {("p1", "B"), ("p2", "A")})
    assert list(by_gender) == ["female", "male", "unknown"]  # "unknown" counted, last
    for cell, expected, n_prompts in (("female", female, 3), ("male", male, 2), ("unknown", unknown, 2)):
        stats = by_gender[cell]["id_sim"]
        assert stats["mean"] == pytest.approx(np.mean(expected))
        assert (stats["n"], stats["n_prompts"]) == (
            len(expected),
            n_prompts,
        )  # rows are subjects x seeds; prompts distinct
        assert set(by_gender[cell]) == {"id_sim"}  # whole-image and item rows are not person rows
    assert (
        agg["subject_breakdowns"]["ethnicity"]["unknown"]["id_sim"]["n"] == 2 * 4
    )  # "" and None and r9 alike: r1 twice, r4, r9

    sizes = agg["subject_breakdowns"]["item_size"]
    assert sizes["small"]["dino_sim"]["mean"] == pytest.approx(
        np.mean(values("dino_sim", {("p0", "A.item"), ("p1", "C.item"), ("p2", "A.item"), ("p2", "B.item")}))
    )
    single = sizes["unknown"]["dino_sim"]  # i3, only in p1: one prompt, no interval
    assert single["n_prompts"] == 1 and single["ci_low"] is None and single["ci_high"] is None
    assert set(sizes["large"]) == {"dino_sim"}

    strength = agg["subject_breakdowns"]["interaction_strength"]  # person and item rows alike, each metric apart
    assert strength["close"]["id_sim"]["mean"] == pytest.approx(
        np.mean(values("id_sim", {("p0", "A"), ("p1", "A"), ("p1", "B")}))
    )
    assert strength["close"]["dino_sim"]["mean"] == pytest.approx(
        np.mean(values("dino_sim", {("p0", "A.item"), ("p1", "A.item"), ("p1", "B.item")}))
    )

    scenes = agg["subject_breakdowns"]["scene_type"]  # prompt level: whole-image rows only
    assert list(scenes) == ["landmark", "unknown"]
    assert scenes["landmark"]["bg_sim"]["mean"] == pytest.approx(np.mean(values("bg_sim", {("p0", ""), ("p1", "")})))
    assert scenes["landmark"]["id_sim"]["n"] == 4 and scenes["unknown"]["bg_sim"]["n_prompts"] == 1
    # the existing breakdowns are as they were
    assert set(agg["breakdowns"]) == {"n_persons"} and agg["breakdowns"]["n_persons"]["2"]["bg_sim"]["n_prompts"] == 2


def test_a_subject_cell_resamples_prompts_with_all_their_subjects():
    """30 prompts of four women each, whose four values are copies: the rows are not independent, so
    the interval must be that of the 30 prompt means (scipy, paired ratio of sums), not of 240 rows."""
    spec = get_benchmark("cogcanvas")
    rng = np.random.default_rng(11)
    means = rng.normal(0.5, 0.2, size=30)
    ids = [f"p{i:02d}" for i in range(30)]
    prompts = pd.DataFrame(
        [
            {
                "prompt_id": p,
                "n_persons": 4,
                "background_ref_id": "bg",
                "persons": [_person(s, "w", "i", "close") for s in "ABCD"],
            }
            for p in ids
        ]
    )
    references = pd.DataFrame([{"ref_id": "w", "gender": "female"}])
    results = pd.DataFrame(
        [_row(p, seed, "id_sim", s, m) for p, m in zip(ids, means) for seed in (0, 1) for s in "ABCD"]
    )
    stats = aggregate(results, prompts, spec, references)["subject_breakdowns"]["gender"]["female"]["id_sim"]
    assert (stats["n"], stats["n_prompts"]) == (240, 30)
    ref = scipy_stats.bootstrap(
        (means,), np.mean, method="percentile", n_resamples=20_000, rng=np.random.default_rng(0)
    )
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert stats["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.12 * width)
    assert stats["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.12 * width)
    # axes whose metadata was not given (no scene_type column, no item sizes) are left out, not filled with "unknown"
    assert "scene_type" not in aggregate(results, prompts, spec, references)["subject_breakdowns"]


def test_subject_breakdowns_need_the_references():
    spec = get_benchmark("cogcanvas")
    prompts, _ = _cog_inputs()
    results = pd.DataFrame([_row("p0", 0, "id_sim", "A", 0.5)])
    agg = aggregate(results, prompts, spec)  # no reference table: only the axis read from the prompt's records
    assert set(agg["subject_breakdowns"]) == {"interaction_strength"}
    assert "subject_breakdowns" not in aggregate(
        results_frame({"p0": [0.1, 0.2, 0.3]}), prompts_frame({"p0": 2}), get_benchmark("identity-collapse")
    )
