"""The copy check's figures: where a flagged reference was found, drawn on both pictures (issue 39, item 6).

The geometry is checked against maps built here by hand (a known scale and shift between a reference and
a generation of known sizes); the drawing against the pixels of the figure.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from idbench.evaluate_pkg.copies import KEYPOINT_GEN_SIDE, KEYPOINT_REF_SIDE
from idbench.evaluate_pkg.copy_figures import (
    OUTLINE,
    PANEL_HEIGHT,
    copy_figure,
    copy_outlines,
    transformation_text,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

REF_SIZE, GEN_SIZE = (400, 300), (1024, 768)
SCALE, SHIFT = 1.5, (200.0, 100.0)  # generation px = SCALE x reference px + SHIFT
REGION = (100.0, 50.0, 300.0, 250.0)  # of the reference, px


def _record(mirrored: bool) -> dict:
    """The keypoint stage's evidence for REGION of the reference (of its mirror image when ``mirrored``)
    shown at SCALE and SHIFT in the generation, its map between the keypoint sizes as copies.py stores it."""
    ref_k = KEYPOINT_REF_SIDE / max(REF_SIZE)
    gen_k = KEYPOINT_GEN_SIDE / max(GEN_SIZE)
    a = gen_k * SCALE / ref_k
    matrix = [a, 0.0, gen_k * SHIFT[0], 0.0, a, gen_k * SHIFT[1], 0.0, 0.0, 1.0]
    x0, y0, x1, y1 = REGION
    if mirrored:  # the region of the mirror image that the generation shows
        x0, x1 = REF_SIZE[0] - x1, REF_SIZE[0] - x0
    gx0, gy0 = SCALE * x0 + SHIFT[0], SCALE * y0 + SHIFT[1]
    gx1, gy1 = SCALE * x1 + SHIFT[0], SCALE * y1 + SHIFT[1]
    box = [gx0 / GEN_SIZE[0], gy0 / GEN_SIZE[1], gx1 / GEN_SIZE[0], gy1 / GEN_SIZE[1]]
    return {
        "region_box": box,
        "matrix": matrix,
        "map": "affine",
        "mirrored_reference": mirrored,
        "keypoint_inliers": 40,
        "warp_correlation": 0.93,
        "subject_share": 0.5,
        "by": ["keypoints"],
    }


@pytest.mark.parametrize("mirrored", [False, True])
def test_the_region_found_goes_back_onto_the_reference_through_the_map(mirrored):
    on_reference, on_generation, how = copy_outlines(_record(mirrored), REF_SIZE, GEN_SIZE)
    assert how == "region"
    x0, y0, x1, y1 = REGION
    expected = {(x0, y0), (x1, y0), (x1, y1), (x0, y1)}
    got = {(round(x, 3), round(y, 3)) for x, y in on_reference}
    assert got == expected
    xs, ys = [x for x, _ in on_generation], [y for _, y in on_generation]
    assert min(xs) == pytest.approx(SCALE * (REF_SIZE[0] - x1 if mirrored else x0) + SHIFT[0])
    assert max(ys) == pytest.approx(SCALE * y1 + SHIFT[1])


def test_the_caption_says_the_size_the_turn_and_the_mirror():
    text = transformation_text(_record(True))
    # the reference's 400 px side became 600 px of the generation's 1,024
    assert "the reference at 59 % of the generation's size" in text
    assert "not turned" in text and "mirrored" in text and "40 matches" in text and "50 % of the subject" in text
    turned = _record(False)
    a = turned["matrix"][0]
    c, s = np.cos(np.radians(30)), np.sin(np.radians(30))
    turned["matrix"] = [a * c, -a * s, 0.0, a * s, a * c, 0.0, 0.0, 0.0, 1.0]
    assert "turned 30 deg clockwise" in transformation_text(turned)  # image axes: y points down


def test_the_pixel_stage_outlines_the_window_it_found():
    pasted = {"box": [0.25, 0.5, 0.75, 1.0], "by": ["pixels"], "ncc": 0.97, "phash_distance": 2}
    on_reference, on_generation, how = copy_outlines(pasted, REF_SIZE, GEN_SIZE)
    assert how == "reference in generation" and on_reference is None
    assert on_generation[0] == (256.0, 384.0) and on_generation[2] == (768.0, 768.0)
    crop = dict(pasted, crop_of_reference=True)
    on_reference, on_generation, how = copy_outlines(crop, REF_SIZE, GEN_SIZE)
    assert how == "generation in reference" and on_generation is None and on_reference[0] == (100.0, 150.0)
    assert "correlation 0.97" in transformation_text(pasted) and "pHash distance 2" in transformation_text(pasted)
    foreign = {"not_in_prompt": True, "keypoint_inliers": 12, "warp_correlation": 0.9, "by": ["keypoints"]}
    assert copy_outlines(foreign, REF_SIZE, GEN_SIZE) == (None, None, "")


def test_the_figure_outlines_the_region_on_both_pictures():
    reference = Image.new("RGB", REF_SIZE, (40, 40, 40))
    generation = Image.new("RGB", GEN_SIZE, (200, 200, 200))
    figure = copy_figure(reference, generation, _record(False), "01 seed 0: ref")
    assert figure.height > PANEL_HEIGHT
    pixels = np.asarray(figure)
    red = np.all(pixels == OUTLINE, axis=2)
    left_width = round(REF_SIZE[0] * PANEL_HEIGHT / REF_SIZE[1])
    scale = PANEL_HEIGHT / REF_SIZE[1]
    ys, xs = np.nonzero(red[:, :left_width])
    # the outline on the reference: REGION at the panel's scale, give or take the line's width
    assert abs(xs.min() - REGION[0] * scale) <= 3 and abs(xs.max() - REGION[2] * scale) <= 3
    assert abs(ys.min() - REGION[1] * scale) <= 3 and abs(ys.max() - REGION[3] * scale) <= 3
    gen_scale = PANEL_HEIGHT / GEN_SIZE[1]
    ys, xs = np.nonzero(red[:, left_width + 8 :])
    assert abs(xs.min() - (SCALE * REGION[0] + SHIFT[0]) * gen_scale) <= 3
    assert abs(ys.max() - (SCALE * REGION[3] + SHIFT[1]) * gen_scale) <= 3


@pytest.mark.slow
def test_a_scored_run_lists_its_flags_and_draws_the_first(tmp_path, shared_features):
    """A CHARIS collage (each reference pasted on a canvas, here at 128 px: nearly every image flagged):
    each flagged image listed in the report and in copies/index.json, a bounded number drawn."""
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.copy_figures import MAX_FIGURES
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    build("charis", out=tmp_path / "data", n_prompts=10)
    data = load_benchmark_data(tmp_path / "data", cache_dir=str(tmp_path / "hf"))
    make_baseline("collage", data, tmp_path / "collage", size=128)
    out = tmp_path / "out"
    summary = score_submission(
        tmp_path / "collage",
        data,
        out,
        ScoreOptions(profile="tiny", metrics=("clip_i",)),
        cache_dir=shared_features,
        progress=False,
    )
    flagged = summary["copies"]["flagged"]
    listed = json.loads((out / "copies" / "index.json").read_text())
    assert flagged >= summary["images"] - 2 and len({(e["prompt_id"], e["seed"]) for e in listed}) == flagged
    drawn = [e for e in listed if e["figure"]]
    assert len(drawn) == min(MAX_FIGURES, len(listed)) and all((out / e["figure"]).is_file() for e in drawn)
    report = (out / "report.md").read_text()
    assert "### Flagged images" in report and f"[figure]({drawn[0]['figure']})" in report
    with Image.open(out / drawn[0]["figure"]) as figure:
        assert figure.height > PANEL_HEIGHT


def test_the_model_page_reads_only_figures_of_the_results_own_folder(tmp_path):
    from idbench.leaderboard.samples import COPY_INDEX, copy_figures

    assert copy_figures(tmp_path) == []  # scored before the figures, or nothing flagged
    (tmp_path / "copies").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "copies" / "a.png")
    (tmp_path / "elsewhere.png").write_bytes((tmp_path / "copies" / "a.png").read_bytes())
    (tmp_path / "copies" / "link.png").symlink_to(tmp_path / "elsewhere.png")
    pair = {"prompt_id": "01", "seed": 0, "reference": "r", "transformation": "t"}
    entries = [
        dict(pair, figure="copies/a.png"),
        dict(pair, figure="copies/../elsewhere.png"),  # out of the folder: listed, not shown
        dict(pair, figure="copies/link.png"),  # a link leaving the folder
        dict(pair, figure="/etc/passwd"),
        dict(pair, figure=None),
    ]
    (tmp_path / COPY_INDEX).write_text(json.dumps(entries))
    shown = [entry["figure"] for entry in copy_figures(tmp_path)]
    assert shown == [(tmp_path / "copies" / "a.png").resolve(), None, None, None, None]
    for bad in ('{"not": "a list"}', "[" * 100_000, '[{"prompt_id": 3}]', "not json"):
        (tmp_path / COPY_INDEX).write_text(bad)
        with pytest.raises(ValueError, match="copies/index.json"):
            copy_figures(tmp_path)
