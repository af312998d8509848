"""The copy check: hand-made pictures whose content is known (a reference pasted, mirrored, zoomed,
or absent), and a scoring run of the copy, collage and noise baselines on the CHARIS samples."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from idbench.evaluate_pkg.copies import MARK_ABOVE_SHARE, find_reference, summarize

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    files = sorted(glob.glob(str(SAMPLES / "subjects" / "**" / "*.jpg"), recursive=True))[:4]
    return [Image.open(f).convert("RGB") for f in files]


def _collage(images, size=1024):
    canvas = Image.new("RGB", (size, size), (128, 128, 128))
    for k, image in enumerate(images):
        small = image.copy()
        small.thumbnail((size // len(images) - 8, size // 2))
        canvas.paste(small, (k * (size // len(images)), size // 4))
    return canvas


def test_copies_and_pastes_are_found(photos):
    ref = photos[0]
    assert find_reference(ref, ref).copied
    assert find_reference(ref.resize((ref.width // 2, ref.height // 2)), ref).copied  # resized
    mirrored = find_reference(ImageOps.mirror(ref), ref)
    assert mirrored.copied and mirrored.mirrored
    crop = ref.crop((round(ref.width * 0.2), round(ref.height * 0.2), round(ref.width * 0.8), round(ref.height * 0.8)))
    zoom = crop.resize((crop.width * 2, crop.height * 2))  # a stretched copy (aspect changed) is not searched for
    assert find_reference(zoom, ref).copied
    assert find_reference(ImageEnhance.Color(ref).enhance(0.2), ref).copied  # a colour change keeps the pixels' layout
    pasted = find_reference(_collage(photos[:3]), photos[1])
    assert pasted.copied and pasted.direction == "reference in generation"
    # the window found is the second column of three
    assert 1 / 3 - 0.05 <= pasted.box[0] <= 2 / 3


def test_what_is_not_a_copy(photos):
    ref = photos[0]
    assert not find_reference(Image.new("RGB", (512, 512), (128, 128, 128)), ref).copied  # blank: flat, matches nothing
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (512, 512, 3), dtype=np.uint8))
    assert not find_reference(noise, ref).copied
    for other in photos[1:]:
        assert not find_reference(other, ref).copied  # another photograph
    assert not find_reference(_collage(photos[1:]), ref).copied  # pastes of other images only


def test_the_run_is_marked_above_the_documented_share():
    assert summarize([1.0] + [0.0] * 19, False, "x")["marked"] is (1 / 20 > MARK_ABOVE_SHARE)
    assert summarize([1.0] * 2 + [0.0] * 18, False, "x")["marked"]
    assert not summarize([0.0] * 20, False, "x")["marked"]
    assert summarize([], False, "x")["share"] == 0.0


def test_scoring_flags_copy_and_collage_not_noise(tmp_path):
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    build("charis", out=tmp_path / "data", n_prompts=8)
    data = load_benchmark_data(tmp_path / "data", cache_dir=str(tmp_path / "hf"))
    shares = {}
    for name in ("collage", "noise", "blank"):
        make_baseline(name, data, tmp_path / name, size=256)
        summary = score_submission(tmp_path / name, data, tmp_path / f"out-{name}", ScoreOptions(profile="tiny", metrics=("dino_sim",)),
                                   cache_dir=tmp_path / "cache", progress=False)
        shares[name] = summary["copies"]["share"]
        assert summary["aggregates"]["overall"]["copy.flag"]["mean"] == pytest.approx(shares[name])
        assert summary["copies"]["criteria"]["embedding"]["applied"] is False  # random weights: not applied, said why
    assert shares["collage"] == 1.0 and shares["noise"] == 0.0 and shares["blank"] == 0.0


def test_degenerate_pictures_are_searched_at_bounded_cost_and_match_nothing(photos):
    """A sliver, a one-pixel image and a huge flat canvas: the search works at the working size
    whatever the input, finds no window that fits or none with content, and never flags them."""
    from idbench.evaluate_pkg.copies import WORK_SIDE, _grey

    ref = photos[0]
    sliver = Image.new("RGB", (4000, 3), (200, 10, 10))
    dot = Image.new("RGB", (1, 1), (0, 0, 0))
    huge_flat = Image.new("RGB", (6000, 6000), (90, 90, 90))
    assert max(_grey(huge_flat, WORK_SIDE).shape) == WORK_SIDE  # searched at 256 px, not 6000
    for picture in (sliver, dot, huge_flat):
        for generation, reference in ((picture, ref), (ref, picture)):
            found = find_reference(generation, reference)
            assert not found.copied and -1.0 <= found.ncc <= 1.0
