"""The copy check: hand-made pictures whose content is known (a reference pasted, mirrored, zoomed,
or absent), and a scoring run of the copy, collage and noise baselines on the CHARIS samples."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from idbench.evaluate_pkg.copies import LARGE_SHARE, MARK_ABOVE_SHARE, find_reference, summarize

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

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


@pytest.mark.slow
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
        summary = score_submission(
            tmp_path / name,
            data,
            tmp_path / f"out-{name}",
            ScoreOptions(profile="tiny", metrics=("dino_sim",)),
            cache_dir=tmp_path / "cache",
            progress=False,
        )
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


# --- copies in any pose: the keypoint stage ----------------------------------------------------------


def _references() -> list[Image.Image]:
    """Every subject and object picture of the samples: photographs, renders, cartoons, flat vectors."""
    files = sorted(
        glob.glob(str(SAMPLES / "subjects" / "**" / "*.jpg"), recursive=True)
        + glob.glob(str(SAMPLES / "objects" / "**" / "*.jpg"), recursive=True)
    )
    return [Image.open(f).convert("RGB") for f in files]


def _backgrounds() -> list[Image.Image]:
    return [
        Image.open(f).convert("RGB")
        for f in sorted(glob.glob(str(SAMPLES / "backgrounds" / "**" / "*.jpg"), recursive=True))
    ]


def _pasted(reference: Image.Image, background: Image.Image, area: float, angle: float = 0.0) -> Image.Image:
    """``reference`` at ``area`` of a 1024 px canvas made of ``background``, turned by ``angle``."""
    canvas = background.resize((1024, 1024))
    small = reference.copy()
    side = round(1024 * area**0.5)
    small.thumbnail((side, side))
    if angle:
        small = small.rotate(angle, expand=True, fillcolor=(128, 128, 128))
    canvas.paste(small, (90, 300))
    return canvas


POSES = {
    "rotated 90": lambda r, b: r.rotate(90, expand=True),
    "rotated 180": lambda r, b: r.rotate(180),
    "rotated 270": lambda r, b: r.rotate(270, expand=True),
    "rotated 7": lambda r, b: r.rotate(7, expand=True, fillcolor=(128, 128, 128)),
    "rotated -15": lambda r, b: r.rotate(-15, expand=True, fillcolor=(255, 255, 255)),
    "flipped upside down": lambda r, b: ImageOps.flip(r),
    "mirrored": lambda r, b: ImageOps.mirror(r),
    "stretched 20 % wide": lambda r, b: r.resize((round(r.width * 1.2), r.height)),
    "stretched 25 % tall": lambda r, b: r.resize((r.width, round(r.height * 1.25))),
    "cropped to 70 %": lambda r, b: r.crop(
        (round(r.width * 0.15), round(r.height * 0.15), round(r.width * 0.85), round(r.height * 0.85))
    ),
    "scaled to 25 %": lambda r, b: r.resize((max(1, r.width // 4), max(1, r.height // 4))),
    "pasted at 5 % of the area": lambda r, b: _pasted(r, b, 0.05),
    "pasted at 20 %, turned 90": lambda r, b: _pasted(r, b, 0.20, 90),
}


@pytest.fixture(scope="module")
def prepared():
    from idbench.evaluate_pkg.copies import reference_keypoints

    references = _references()
    return references, [reference_keypoints(r) for r in references], _backgrounds()


def _flagged(generation: Image.Image, reference: Image.Image, points) -> bool:
    """Flagged by either stage, as the scorer flags it (the keypoint stage first: it is the cheaper)."""
    from idbench.evaluate_pkg.copies import find_in_any_pose, generation_keypoints

    return (
        find_in_any_pose(generation_keypoints(generation), *points).copied
        or find_reference(generation, reference).copied
    )


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# The copy search over rotated, scaled and pasted copies, and over pictures that copy nothing.
@pytest.mark.slow
@pytest.mark.parametrize("pose", list(POSES))
def test_a_copy_in_any_pose_is_flagged(prepared, pose):
    references, points, backgrounds = prepared
    hits = [
        _flagged(POSES[pose](r, backgrounds[k % len(backgrounds)]), r, p)
        for k, (r, p) in enumerate(zip(references, points))
    ]
    print(f"{pose}: {sum(hits)}/{len(hits)}")
    assert sum(hits) / len(hits) >= 0.95


def test_the_keypoint_stage_alone_finds_turned_copies_the_correlation_misses(prepared):
    from idbench.evaluate_pkg.copies import find_in_any_pose, generation_keypoints

    references, points, _ = prepared
    for reference, p in list(zip(references, points))[:6]:
        turned = reference.rotate(90, expand=True)
        assert not find_reference(turned, reference).copied  # what let a turned copy win before
        match = find_in_any_pose(generation_keypoints(turned), *p)
        assert match.copied and match.share >= LARGE_SHARE  # found as a whole, not as a detail


def _design(file: str) -> str:
    """The drawing a sample shows whatever its style: Fluent emoji come as a 3D render, a flat vector and
    a colour cartoon of one outline (``fluent3d_dog_face``, ``fluent_flat_dog_face``)."""
    stem = Path(file).stem
    for prefix in ("fluent3d_", "fluent_flat_", "fluent_color_"):
        stem = stem.removeprefix(prefix)
    return stem


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# The copy search over rotated, scaled and pasted copies, and over pictures that copy nothing.
@pytest.mark.slow
def test_pictures_that_copy_nothing_are_not_flagged(prepared):
    from idbench.evaluate_pkg.copies import find_in_any_pose, generation_keypoints

    references, points, backgrounds = prepared
    files = sorted(
        glob.glob(str(SAMPLES / "subjects" / "**" / "*.jpg"), recursive=True)
        + glob.glob(str(SAMPLES / "objects" / "**" / "*.jpg"), recursive=True)
    )
    rng = np.random.default_rng(0)
    others = [
        ("blank", Image.new("RGB", (512, 512), (128, 128, 128))),
        ("noise", Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8))),
    ] + [(f"background {k}", b) for k, b in enumerate(backgrounds)]
    prepared_others = [(name, generation_keypoints(o)) for name, o in others]
    prepared_refs = [generation_keypoints(r) for r in references]
    flagged, siblings = [], 0
    for k, p in enumerate(points):
        # Every other sample picture, except one of the same drawing in another style (the same outline
        # and layout: a copy of a sibling reference, which the scorer rightly counts as one).
        candidates = prepared_others + [
            (Path(files[j]).stem, g)
            for j, g in enumerate(prepared_refs)
            if j != k and _design(files[j]) != _design(files[k])
        ]
        siblings += sum(j != k and _design(files[j]) == _design(files[k]) for j in range(len(files)))
        flagged += [(Path(files[k]).stem, name) for name, g in candidates if find_in_any_pose(g, *p).copied]
    assert siblings > 0 and flagged == []


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# The copy search over rotated, scaled and pasted copies, and over pictures that copy nothing.
@pytest.mark.slow
def test_a_mannequin_is_not_a_copy(prepared, tmp_path):
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import mannequin
    from idbench.evaluate_pkg.copies import (
        find_in_any_pose,
        generation_keypoints,
        prompt_references,
        reference_keypoints,
    )
    from idbench.evaluate_pkg.data import load_benchmark_data

    build("identity-collapse", out=tmp_path / "data")
    data = load_benchmark_data(tmp_path / "data", cache_dir=str(tmp_path / "hf"))
    for prompt in list(data.prompt_rows.values())[::15]:
        picture = mannequin(data, prompt, 512)
        gen = generation_keypoints(picture)
        for ref_id in prompt_references(data, prompt):
            reference = data.references[ref_id]["image"]
            assert not find_in_any_pose(gen, *reference_keypoints(reference)).copied
            assert not find_reference(picture, reference).copied


@pytest.mark.slow
def test_a_crowd_of_the_pool_is_flagged_and_copies_nothing_else(tmp_path, monkeypatch):
    """CogCanvas, scored (as Identity Collapse, a benchmark of several subjects per prompt): a picture of the prompt's subjects padded with every other subject of
    the pool is flagged on every image (``copy.foreign`` counts the extra references); the mannequin
    (the prompt followed, no reference pixel) and the background are flagged on none."""
    from idbench.builders.build import build
    from idbench.evaluate_pkg import copies
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    build("cogcanvas", out=tmp_path / "data", n_prompts=6)
    data = load_benchmark_data(tmp_path / "data", cache_dir=str(tmp_path / "hf"))
    searched = []  # each generation's keypoints are found once, however the pairs are batched
    original = copies.generation_keypoints
    monkeypatch.setattr(
        copies, "generation_keypoints", lambda image: searched.append(image.tobytes()) or original(image)
    )
    # each reference is prepared once in this process, however many submissions are scored against it
    monkeypatch.setattr(copies, "_PREPARED", copies._PreparedReferences(copies.PREPARED_REFERENCES_BYTES))
    prepared, prepare = [], copies.reference_keypoints
    monkeypatch.setattr(copies, "reference_keypoints", lambda image: prepared.append(image.tobytes()) or prepare(image))
    for name, share in (("crowd", 1.0), ("mannequin", 0.0), ("background", 0.0)):
        make_baseline(name, data, tmp_path / name, size=512)
        searched.clear()
        summary = score_submission(
            tmp_path / name,
            data,
            tmp_path / f"out-{name}",
            ScoreOptions(profile="tiny", metrics=("dino_sim",), batch_size=3),
            cache_dir=tmp_path / "cache",
            progress=False,
        )
        assert len(searched) == len(set(searched)) > 0, name
        assert summary["copies"]["share"] == share, name
        foreign = summary["aggregates"]["overall"]["copy.foreign"]["mean"]
        assert (foreign > 1) if name == "crowd" else foreign == 0.0, (name, foreign)
    assert len(prepared) == len(set(prepared)) > 0


def test_prepared_references_are_kept_least_recently_used_first_out_within_their_bytes():
    from idbench.evaluate_pkg.copies import Keypoints, _PreparedReferences

    def points(side: int) -> tuple[Keypoints, Keypoints]:
        one = Keypoints(np.zeros((side, side), np.uint8), np.zeros((0, 2), np.float32), None, None)
        return one, one

    kept = _PreparedReferences(max_bytes=3 * 2 * 100)  # three references of 10 x 10 (two orientations)
    for name in "abc":
        kept.put(name, points(10))
    assert kept.get("a") is not None  # a is now the most recently used
    kept.put("d", points(10))  # b, the least recently used, goes
    assert kept.get("b") is None and all(kept.get(n) is not None for n in "acd")
    assert kept.bytes == 600
    kept.put("huge", points(100))  # larger than the whole bound: not kept, nothing dropped for it
    assert kept.get("huge") is None and kept.bytes == 600
