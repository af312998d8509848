"""Display conventions (idbench.builders.display) on hand-made numbers, and the labels that say where
each convention comes from. The expected figures are worked out by hand (see docs/display-conventions.md)."""

from __future__ import annotations

import math

import pytest

from idbench.builders.display import NOT_STATED, label, show, show_text
from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.builders.spec import MetricSpec
from idbench.evaluate_pkg.report import display_value

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.mark.parametrize(
    ("value", "display", "shown"),
    [
        (0.2286, "clipscore", 57.15),  # CogCanvas Table 2's lowest CLIP-T, from a cosine of 0.2286
        (0.24892, "clipscore", 62.23),  # and its highest
        (-0.05, "clipscore", 0.0),  # CLIPScore clamps at 0
        (3.654, "x10", 36.54),  # Table 2's lowest Aesth. from a LAION score of 3.654
        (0.4233, "x100", 42.33),
        (0.489, "percent", 48.9),
        (0.2615, "raw", 0.2615),
    ],
)
def test_display_numbers_by_hand(value, display, shown):
    assert show(value, display) == pytest.approx(shown, abs=1e-9)
    assert display_value(value, display) == f"{shown:.{4 if display == 'raw' else 2}f}"


def test_missing_values_stay_missing():
    assert math.isnan(show(None, "clipscore")) and math.isnan(show(float("nan"), "x10"))
    assert show_text(None, "x100") == "n/a"


def test_labels_name_the_source_or_say_the_scale_is_ours():
    assert label("x100", "") == f"raw x 100 ({NOT_STATED})"
    assert label("raw", "") == "raw value"  # a raw value claims no convention
    assert label("clipscore", "CogCanvas Table 2") == "CLIPScore scale, 2.5 x max(cos, 0) x 100 (CogCanvas Table 2)"


def test_the_specs_use_the_conventions_the_papers_support():
    cog, collapse = get_benchmark("cogcanvas"), get_benchmark("identity-collapse")
    assert cog.metric("aesthetic").display == "x10" and cog.metric("aesthetic").display_source
    assert collapse.metric("clip_t").display == "raw"  # paper 002 reports raw cosines (0.26-0.31)
    assert collapse.metric("clip_t").display_source and collapse.metric("dino_sim").display_source
    for name in ("id_sim", "dino_sim", "bg_sim", "clip_t"):  # cosines: raw, as on the other benchmarks
        assert cog.metric(name).display == "raw" and cog.metric(name).display_label == "raw value"


def test_one_scale_per_metric_across_the_benchmarks():
    """A metric name means one quantity, so it is shown on one scale everywhere: a reader comparing
    dino_sim across benchmarks (or the demo's tables) never meets 0.88 beside 83.53 for the same cosine."""
    scales: dict[str, set[str]] = {}
    for name in BENCHMARKS:
        for metric in get_benchmark(name).metric_suite:
            scales.setdefault(metric.name, set()).add(metric.display)
    shared = [m for m in scales if sum(m in {x.name for x in get_benchmark(b).metric_suite} for b in BENCHMARKS) > 1]
    assert {"dino_sim", "clip_t", "clip_t_whole"} <= set(shared)
    assert {m: scales[m] for m in shared if len(scales[m]) > 1} == {}


def test_an_unknown_display_is_refused_and_old_values_still_work():
    with pytest.raises(ValueError, match="display 'x1000' is not one of raw, x100, percent, x10, clipscore"):
        MetricSpec("m", "a metric", display="x1000")
    assert MetricSpec("m", "a metric", display="x100").display_label.startswith("raw x 100")
    assert MetricSpec("m", "a metric", display="percent").missing_evidence == ""
