"""A copied image earns nothing (issue 39): every ranked column is a copy-floored twin, where an image
the copy check flagged scores the metric's floor; the metric itself keeps its value under its own name.

Hand-made per-image values and flags, no model: the pure functions of evaluate_pkg/floors.py, then the
scorer's aggregation path (runner.results_frame -> report.aggregate, the bootstrap included).
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.builders.spec import FLOORED_SUFFIX, MetricSpec, SpecError, copy_floored
from idbench.evaluate_pkg.context import Result
from idbench.evaluate_pkg.copies import FLAG_METRIC
from idbench.evaluate_pkg.copies import summarize as copies_summary
from idbench.evaluate_pkg.floors import flagged_images, floor_record, floored_results
from idbench.evaluate_pkg.functional.bootstrap import design_ci
from idbench.evaluate_pkg.report import CI_CONFIDENCE, CI_RESAMPLES, CI_SEED, aggregate, copies_lines, resampling_of
from idbench.evaluate_pkg.runner import results_frame

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

COLLAPSE = get_benchmark("identity-collapse")
N_IMAGES, COPIED = 50, ("p07", "p31")  # 2 of 50 images: 4 %, under the 5 % that marks a run
RANKED_RAW = {"dino_sim": 0.30, "scr@0.5": 0.60, "clip_t": 0.27}  # an honest image's values
COPY_RAW = {"dino_sim": 1.00, "scr@0.5": 0.00, "clip_t": 0.33}  # a copy's: better on every ranked metric


def _run(copies: tuple[str, ...] = ()) -> list[Result]:
    """Identity Collapse rows of one seed per prompt: the ranked metrics (whole image, and dino_sim per
    subject too), copy.flag; the images of ``copies`` are copies of their references."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(N_IMAGES):
        prompt = f"p{i:02d}"
        copied = prompt in copies
        for metric, value in (COPY_RAW if copied else RANKED_RAW).items():
            value = value if copied else value + float(rng.normal(0, 0.05))
            rows.append(Result(prompt, 0, metric, value))
            if metric == "dino_sim":
                rows += [Result(prompt, 0, metric, value, subject) for subject in ("S001", "S002")]
        rows.append(Result(prompt, 0, FLAG_METRIC, float(copied)))
    return rows


def _means(rows: list[Result], spec=COLLAPSE) -> dict[str, float]:
    frame = pd.DataFrame([r.__dict__ for r in rows])
    frame = frame[frame["subject"] == ""]
    return frame.groupby("metric")["value"].mean().to_dict()


def _scored(rows: list[Result], spec=COLLAPSE) -> list[Result]:
    return rows + floored_results(spec, rows)


def test_copying_four_percent_scores_below_the_same_run_without_the_copies():
    honest, copying = _scored(_run()), _scored(_run(COPIED))
    assert copies_summary([r.value for r in copying if r.metric == FLAG_METRIC], False, "")["marked"] is False
    before, after = _means(honest), _means(copying)
    for ranked in COLLAPSE.ranking:
        raw = ranked.removesuffix(FLOORED_SUFFIX)
        better = COLLAPSE.metric(ranked).higher_is_better
        sign = 1 if better else -1
        # The copies lift the metric itself (what the paper reports, and what a submitter would win on)...
        assert sign * (after[raw] - before[raw]) > 0
        # ...but never the ranked column: there they score the floor, below every honest image.
        assert sign * (after[ranked] - before[ranked]) < 0, ranked


def test_an_unflagged_run_ranks_on_its_own_values_and_the_metrics_are_unchanged():
    rows = _run()
    twins = floored_results(COLLAPSE, rows)
    by_metric = {(r.prompt_id, r.seed, r.metric, r.subject): r.value for r in rows}
    assert {r.metric for r in twins} == set(COLLAPSE.ranking)
    for r in twins:
        assert r.value == by_metric[(r.prompt_id, r.seed, r.metric.removesuffix(FLOORED_SUFFIX), r.subject)]
    # The paper's metrics keep their rows, flagged or not: the twins are added beside them.
    copying = _run(COPIED)
    assert _scored(copying)[: len(copying)] == copying


def test_a_flagged_image_scores_the_floor_in_every_ranked_column_and_per_subject():
    rows = _run(COPIED)
    assert flagged_images(rows) == {(p, 0) for p in COPIED}
    for r in floored_results(COLLAPSE, rows):
        if r.prompt_id in COPIED:
            assert r.value == COLLAPSE.metric(r.metric).floor
    subjects = [r for r in floored_results(COLLAPSE, rows) if r.subject and r.prompt_id in COPIED]
    assert len(subjects) == 4 and {r.value for r in subjects} == {-1.0}
    # A value the metric left undefined on a flagged image is floored too: the copy is never left out.
    nan_row = [Result("p07", 0, "dino_sim", math.nan), Result("p07", 0, FLAG_METRIC, 1.0)]
    assert [r.value for r in floored_results(COLLAPSE, nan_row)] == [-1.0]
    # Only the twins asked for (a run of chosen metrics).
    assert {r.metric for r in floored_results(COLLAPSE, rows, ["clip_t_floored"])} == {"clip_t_floored"}


def test_the_aggregates_and_their_intervals_resample_the_floored_values():
    """Through the scorer's aggregation path (runner.results_frame, report.aggregate): the twin's mean
    and interval are those of the floored per-image values, resampled by the benchmark's design."""
    copying = _scored(_run(COPIED))
    data = SimpleNamespace(name=COLLAPSE.name, spec=COLLAPSE)
    frame = results_frame(data, {"model": "m"}, copying, "paper")
    prompts = pd.DataFrame(
        [
            {"prompt_id": f"p{i:02d}", "n_subjects": 2 + 2 * (i % 5), "scene": "neutral", "subject_ids": [f"S{i % 9}"]}
            for i in range(N_IMAGES)
        ]
    )
    overall = aggregate(frame, prompts, COLLAPSE)["overall"]
    honest = aggregate(results_frame(data, {}, _scored(_run()), "paper"), prompts, COLLAPSE)["overall"]
    assert overall["dino_sim"]["mean"] > honest["dino_sim"]["mean"]  # the paper's value, copies counted as they are
    twin = [r for r in copying if r.metric == "dino_sim_floored" and not r.subject]
    design = resampling_of(COLLAPSE, prompts)
    assert design.factor_names == ("prompt", "subject")  # prompts crossed with subjects, as scored
    expected = design_ci(
        [r.value for r in twin],
        [r.prompt_id for r in twin],
        design.units(prompts.to_dict("records")),
        design.factor_names,
        CI_RESAMPLES,
        CI_CONFIDENCE,
        CI_SEED,
    )
    stats = overall["dino_sim_floored"]
    assert (stats["mean"], stats["ci_low"], stats["ci_high"]) == pytest.approx(
        (expected.mean, expected.low, expected.high)
    )
    assert stats["ci_low"] < overall["dino_sim"]["ci_low"]
    assert overall["dino_sim_floored"]["mean"] < honest["dino_sim_floored"]["mean"] < overall["dino_sim"]["mean"]
    assert overall["scr@0.5_floored"]["mean"] > honest["scr@0.5_floored"]["mean"]  # lower is better
    # The unflagged run's twin is its metric, interval and all.
    assert honest["dino_sim_floored"] == honest["dino_sim"]


def test_the_report_and_aggregates_say_how_many_images_scored_the_floor():
    rows = _run(COPIED)
    floored = floored_results(COLLAPSE, rows)
    record = floor_record(COLLAPSE, rows, floored)
    assert record["images"] == 2
    assert record["columns"]["dino_sim_floored"] == {"of": "dino_sim", "floor": -1.0}
    assert record["columns"]["scr@0.5_floored"] == {"of": "scr@0.5", "floor": 1.0}
    copies = {**copies_summary([r.value for r in rows if r.metric == FLAG_METRIC], False, ""), "floored": record}
    text = "\n".join(copies_lines({"copies": copies}))
    assert "2 of 50 images (4.0 %)" in text and "2 images scored the floor because they were flagged" in text
    assert "| `scr@0.5_floored` | 1 | `scr@0.5` |" in text and "Not marked: at most 5 % of the images" in text
    assert copies_lines({"copies": None}) == []


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_ranked_image_column_is_a_copy_floored_twin_at_its_metrics_worst_value(name):
    spec = get_benchmark(name)
    raw_of = {twin.name: metric for metric, twin in spec.floored_twins.items()}
    order = [m.name for m in spec.metric_suite]
    for ranked in spec.ranking:
        twin = spec.metric(ranked)
        if twin.tasks == ("retrieval",):  # a ranking of references: no image to copy
            continue
        raw = spec.metric(raw_of[ranked])
        assert not raw.rankable and order.index(ranked) == order.index(raw.name) + 1
        # The bound of the metric's range: -1 (a raw cosine) or 0 (a share, a score clamped at 0) when
        # higher is better, 1 (every reference collapsed) when lower is.
        assert twin.floor in ((-1.0, 0.0) if raw.higher_is_better else (1.0,))
        assert (twin.display, twin.roles, twin.missing_evidence) == (raw.display, raw.roles, raw.missing_evidence)
    # No existing name changed meaning: every twin is new, and no metric was redefined for it.
    assert all(t.name.endswith(FLOORED_SUFFIX) and not t.defined_in for t in spec.floored_twins.values())


def test_a_cosine_floors_at_minus_one_and_a_clamped_score_or_share_at_zero():
    cog = get_benchmark("cogcanvas")
    floors = {twin.name: twin.floor for twin in cog.floored_twins.values()}
    assert floors["id_sim_floored"] == floors["dino_sim_floored"] == floors["clip_t_floored"] == -1.0
    assert floors["id_arranged_floored"] == floors["id_sim_strict_floored"] == floors["count_accuracy_floored"] == 0.0
    charis = get_benchmark("charis")
    assert charis.metric("charis_overall_floored").floor == 0.0 and charis.metric("clip_i_floored").floor == -1.0
    assert COLLAPSE.suite_version == "0.3" and charis.suite_version == "0.5" and cog.suite_version == "0.7"


def test_a_spec_may_not_rank_the_metric_beside_its_twin_nor_name_a_twin_it_lacks():
    with pytest.raises(SpecError, match="dino_sim"):
        dataclasses.replace(COLLAPSE, ranking=("dino_sim",))
    lone = dataclasses.replace(COLLAPSE.metric("clip_t_whole"), floored_twin="clip_t_whole_floored")
    with pytest.raises(SpecError, match="clip_t_whole_floored"):
        dataclasses.replace(COLLAPSE, metric_suite=(*COLLAPSE.metric_suite, dataclasses.replace(lone, name="x")))
    raw, twin = copy_floored(MetricSpec("m", "a metric", higher_is_better=False), floor=1.0)
    assert raw.floored_twin == "m_floored" and twin.floor == 1.0 and not twin.higher_is_better
    with pytest.raises(SpecError, match="is not ranked and shown like"):
        dataclasses.replace(COLLAPSE, metric_suite=(raw, dataclasses.replace(twin, higher_is_better=True)))
    with pytest.raises(ValueError, match="finite"):
        MetricSpec("m", "a metric", floor=math.inf)
