"""The two-stage quality filter: planted blurred, tiny, uniform, stretched and broken images; stage-2 plumbing."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFilter

from idbench.curation.quality import (
    NOT_CHECKED,
    QualityThresholds,
    cheap_checks,
    filter_images,
    measure_image,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PHOTOS = (
    "subjects/animal/photo/gc_dog.jpg",
    "subjects/animal/photo/gc_horse.jpg",
    "subjects/animal/photo/chelsea_cat.jpg",
    "subjects/human/photo/astronaut_eileen_collins.jpg",
    "backgrounds/landmark/gc_colosseum.jpg",
)
# The shipped samples are downscaled to at most 512 px (some to 183 px): a floor that keeps them all.
SAMPLE_FLOOR = QualityThresholds(min_side=180, min_aesthetic=None, min_relevance=None)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def sharp_texture(size: tuple[int, int], seed: int = 0) -> Image.Image:
    """Blocky random texture: hard edges everywhere, as sharp as an image gets."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(size[1] // 8 + 1, size[0] // 8 + 1, 3), dtype=np.uint8)
    return (
        Image.fromarray(blocks)
        .resize((blocks.shape[1] * 8, blocks.shape[0] * 8), Image.Resampling.NEAREST)
        .crop((0, 0, *size))
    )


def sample(relative: str) -> bytes:
    return (SAMPLES / relative).read_bytes()


# --- stage 1 ----------------------------------------------------------------------------------------


def test_every_shipped_sample_passes_the_pixel_checks_at_its_own_floor():
    images = {str(p.relative_to(SAMPLES)): p.read_bytes() for p in sorted(SAMPLES.rglob("*.jpg"))}
    assert len(images) >= 60
    failures = {k: v for k, v in cheap_checks(images, SAMPLE_FLOOR).items() if v}
    assert failures == {}


def test_planted_bad_images_are_removed_for_the_right_reason():
    t = QualityThresholds(min_aesthetic=None, min_relevance=None)
    photo = Image.open(io.BytesIO(sample(PHOTOS[0]))).convert("RGB")
    big = photo.resize((1024, 768), Image.Resampling.LANCZOS)
    rng = np.random.default_rng(0)
    flat = np.full((600, 800, 3), 180.0) + rng.normal(0, 1.5, size=(600, 800, 3))  # a near-blank page
    images = {
        "sharp": png(sharp_texture((800, 600))),
        "sharp_photo": png(big),
        "blurred": png(big.filter(ImageFilter.GaussianBlur(6))),
        "blurred_texture": png(sharp_texture((800, 600)).filter(ImageFilter.GaussianBlur(8))),
        "tiny": png(sharp_texture((120, 90))),
        "uniform": png(Image.fromarray(np.clip(flat, 0, 255).astype(np.uint8))),
        "banner": png(sharp_texture((1800, 600))),
        "broken": b"\x89PNG\r\n\x1a\n this is not an image",
    }
    checks = {k: [r.check for r in v] for k, v in cheap_checks(images, t).items()}
    assert checks["sharp"] == [] and checks["sharp_photo"] == []
    assert checks["blurred"] == ["blur"] and checks["blurred_texture"] == ["blur"]
    assert checks["tiny"] == ["min_side"]
    assert checks["uniform"][-1] == "uniform" and set(checks["uniform"]) <= {"blur", "uniform"}
    assert checks["banner"] == ["max_aspect_ratio"]
    assert checks["broken"] == ["unreadable"]


def test_blurred_and_shrunken_copies_of_sample_photos_are_caught():
    images = {}
    for relative in PHOTOS:
        picture = Image.open(io.BytesIO(sample(relative))).convert("RGB")
        name = Path(relative).stem
        images[name] = sample(relative)
        images[f"{name}~blur"] = png(picture.filter(ImageFilter.GaussianBlur(min(picture.size) / 512 * 4)))
        images[f"{name}~small"] = png(picture.resize((picture.width // 4, picture.height // 4)))
    reasons = cheap_checks(images, SAMPLE_FLOOR)
    for relative in PHOTOS:
        name = Path(relative).stem
        assert reasons[name] == []
        assert [r.check for r in reasons[f"{name}~blur"]] == ["blur"]
        assert "min_side" in [r.check for r in reasons[f"{name}~small"]]


def test_each_reason_carries_the_measured_value_and_the_threshold():
    t = QualityThresholds(min_side=300, min_blur=50.0, min_aesthetic=None, min_relevance=None)
    blurred = png(sharp_texture((200, 150)).filter(ImageFilter.GaussianBlur(6)))
    reasons = {r.check: r for r in cheap_checks({"x": blurred}, t)["x"]}
    assert reasons["min_side"].value == 150 and reasons["min_side"].threshold == 300
    assert reasons["min_side"].stage == 1 and "150 px < 300 px" in reasons["min_side"].message
    assert reasons["blur"].value < 50.0 and reasons["blur"].threshold == 50.0


def test_blur_measure_does_not_depend_on_the_file_resolution():
    large = sharp_texture((2048, 1536)).filter(ImageFilter.GaussianBlur(2))
    values = [
        measure_image(png(large.resize((w, w * 3 // 4), Image.Resampling.LANCZOS)), where="x").blur
        for w in (2048, 1024, 512)
    ]
    assert max(values) / min(values) < 1.25, values
    native = np.asarray(large.convert("L"), dtype=float)  # what a per-pixel measure at full size sees
    lap = native[:-2, 1:-1] + native[2:, 1:-1] + native[1:-1, :-2] + native[1:-1, 2:] - 4 * native[1:-1, 1:-1]
    assert lap.var() < min(values) / 4  # at native size the same picture would look far blurrier


def test_thresholds_from_a_config_mapping_and_their_errors():
    t = QualityThresholds.from_mapping({"min_side": 1024, "min_aesthetic": 5.0, "relevance_margin": 0.0})
    assert (t.min_side, t.min_aesthetic, t.relevance_margin, t.min_blur) == (1024, 5.0, 0.0, 50.0)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['min_sharpness'\]"):
        QualityThresholds.from_mapping({"min_sharpness": 3})
    with pytest.raises(ValueError, match="min_blur: expected a finite number"):
        QualityThresholds(min_blur=float("nan"))
    with pytest.raises(ValueError, match="max_aspect_ratio"):
        QualityThresholds(max_aspect_ratio=0.5)
    with pytest.raises(ValueError, match="min_side"):
        QualityThresholds(min_side="big")  # type: ignore[arg-type]


# --- stage 2 (tiny random models: the plumbing, not the models' judgement) -----------------------------


class NoModels:
    """Stands in for Models where no model may be loaded."""

    options = None

    def __getitem__(self, role):
        raise AssertionError(f"model {role!r} loaded although no stage-2 check was asked for")


@pytest.fixture(scope="module")
def tiny_models():
    from idbench.evaluate_pkg.context import Models, ScoreOptions

    return Models(ScoreOptions(profile="tiny"))


def stage2_pool() -> tuple[dict[str, bytes], dict[str, str]]:
    images, texts = {}, {}
    for relative in PHOTOS:
        name = Path(relative).stem
        images[name] = sample(relative)
        texts[name] = f"a photo of {name.replace('_', ' ')}"
    picture = Image.open(io.BytesIO(sample(PHOTOS[0]))).convert("RGB")
    images["blurred_dog"] = png(picture.filter(ImageFilter.GaussianBlur(8)))
    texts["blurred_dog"] = texts["gc_dog"]
    return images, texts


def direct_stage2(models, images: dict[str, bytes], texts: dict[str, str]) -> tuple[dict, dict, dict]:
    """Aesthetic score, own-text cosine and margin, computed without the filter's code paths."""
    import torch

    from idbench.evaluate_pkg.functional.aesthetic import aesthetic_score
    from idbench.evaluate_pkg.images import normalize_image

    clip = models["clip"]
    ids = list(images)
    batch = clip.collate([clip.preprocess(normalize_image(images[i], where=i)) for i in ids])
    with torch.inference_mode():
        embeddings = np.stack([f["embedding"] for f in clip.encode_batch(batch)]).astype(np.float64)
    scores = aesthetic_score(models["aesthetic"].weights, embeddings)
    distinct = sorted(set(texts.values()))
    text_vectors = clip.encode_texts(distinct).astype(np.float64)
    text_vectors /= np.linalg.norm(text_vectors, axis=1, keepdims=True)
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    cosines = unit @ text_vectors.T
    own = {i: cosines[k, distinct.index(texts[i])] for k, i in enumerate(ids)}
    margin = {i: own[i] - np.delete(cosines[k], distinct.index(texts[i])).max() for k, i in enumerate(ids)}
    return dict(zip(ids, scores.tolist())), own, margin


@pytest.mark.slow
def test_stage_two_values_equal_a_direct_computation(tmp_path, tiny_models):
    images, texts = stage2_pool()
    loose = QualityThresholds(min_side=180, min_aesthetic=-100.0, min_relevance=-1.0, relevance_margin=-2.0)
    report = filter_images(images, texts, loose, models=tiny_models, cache_dir=tmp_path)
    assert report.profile == "tiny" and report.plumbing is True
    assert any("plumbing" in note for note in report.notes)
    assert report.models["clip"]["name"] == "clip-vit-l-14-tiny"
    assert report.images["blurred_dog"].removed_at == 1
    assert report.images["blurred_dog"].aesthetic is None  # stage 2 only sees what passed stage 1
    survivors = {i: images[i] for i in images if i != "blurred_dog"}
    aesthetic, own, margin = direct_stage2(tiny_models, survivors, texts)
    for image_id in survivors:
        entry = report.images[image_id]
        assert entry.kept
        assert entry.aesthetic == pytest.approx(aesthetic[image_id], abs=1e-4)
        assert entry.relevance == pytest.approx(own[image_id], abs=1e-4)
        assert entry.relevance_margin == pytest.approx(margin[image_id], abs=1e-4)
    assert report.aesthetic == {i: report.images[i].aesthetic for i in survivors}
    assert report.sizes["gc_dog"] == Image.open(io.BytesIO(images["gc_dog"])).size


@pytest.mark.slow
def test_stage_two_thresholds_remove_what_falls_below_them(tmp_path, tiny_models):
    images, texts = stage2_pool()
    probe = filter_images(
        images,
        texts,
        QualityThresholds(min_side=180, min_aesthetic=-100.0, min_relevance=-1.0),
        models=tiny_models,
        cache_dir=tmp_path,
    )
    scored = {i: e for i, e in probe.images.items() if e.aesthetic is not None}
    # Tiny random weights give meaningless values, so the thresholds are placed among the measured ones.
    aesthetic_cut = float(np.median([e.aesthetic for e in scored.values()]))
    relevance_cut = float(np.median([e.relevance for e in scored.values()]))
    t = QualityThresholds(min_side=180, min_aesthetic=aesthetic_cut, min_relevance=relevance_cut, relevance_margin=0.0)
    report = filter_images(images, texts, t, models=tiny_models, cache_dir=tmp_path)
    for image_id, entry in scored.items():
        expected = set()
        if entry.aesthetic < aesthetic_cut:
            expected.add("aesthetic")
        if entry.relevance < relevance_cut:
            expected.add("relevance")
        if entry.relevance_margin < 0.0:
            expected.add("relevance_margin")
        found = {r.check: r for r in report.images[image_id].reasons}
        assert set(found) == expected, image_id
        for reason in found.values():
            assert reason.stage == 2 and reason.value < reason.threshold
        assert report.images[image_id].kept == (not expected)
    assert report.removed(2)
    assert set(report.removed(1)) == {"blurred_dog"}
    aesthetic_only = QualityThresholds(min_side=180, min_aesthetic=aesthetic_cut, min_relevance=None)
    only_aesthetic = filter_images(images, texts, aesthetic_only, models=tiny_models, cache_dir=tmp_path)
    assert set(only_aesthetic.kept) == {i for i, e in scored.items() if e.aesthetic >= aesthetic_cut} != set()


@pytest.mark.slow
def test_model_checks_not_applied_are_reported_but_remove_nothing(tmp_path, tiny_models):
    """apply_model_checks=False (the pipeline's rule for tiny weights): stage 2 is measured, only pixels decide."""
    images, texts = stage2_pool()
    probe = filter_images(
        images,
        texts,
        QualityThresholds(min_side=180, min_aesthetic=-100.0, min_relevance=-1.0),
        models=tiny_models,
        cache_dir=tmp_path,
    )
    scored = {i: e for i, e in probe.images.items() if e.aesthetic is not None}
    cut = float(np.median([e.aesthetic for e in scored.values()]))
    t = QualityThresholds(min_side=180, min_aesthetic=cut, min_relevance=None)
    report = filter_images(images, texts, t, models=tiny_models, cache_dir=tmp_path, apply_model_checks=False)
    assert report.model_checks_applied is False
    assert set(report.kept) == set(scored) and report.removed() == ("blurred_dog",)  # the pixel check still applies
    flagged = {i for i, e in report.images.items() if e.not_applied}
    assert flagged == {i for i, e in scored.items() if e.aesthetic < cut} != set()
    for image_id in flagged:
        [reason] = report.images[image_id].not_applied
        assert reason.check == "aesthetic" and reason.label == f"min_aesthetic={cut}"
        assert report.images[image_id].aesthetic == pytest.approx(scored[image_id].aesthetic)
    data = report.to_dict()
    assert data["counts"]["failed_stage_2_not_applied"] == len(flagged) and data["counts"]["removed_stage_2"] == 0
    assert any("not applied" in note for note in report.notes)
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(report.csv_text()))}
    assert all(rows[i]["not_applied"].startswith("aesthetic score") for i in flagged)


@pytest.mark.slow
def test_relevance_needs_texts_and_says_when_it_was_not_checked(tmp_path, tiny_models):
    images, texts = stage2_pool()
    report = filter_images(
        images, None, QualityThresholds(min_side=180, min_aesthetic=None), models=NoModels(), cache_dir=tmp_path
    )
    assert "relevance not checked: no entity texts were given" in report.notes
    assert report.profile is None and report.models == {}
    with pytest.raises(ValueError, match="no entity text for 1 image.*'gc_horse'"):
        filter_images(
            images,
            {k: v for k, v in texts.items() if k != "gc_horse"},
            QualityThresholds(min_side=180, min_aesthetic=None),
            models=tiny_models,
            cache_dir=tmp_path,
        )


def test_only_the_pixel_checks_run_when_no_model_threshold_is_set(tmp_path):
    images, texts = stage2_pool()
    report = filter_images(images, texts, SAMPLE_FLOOR, models=NoModels(), cache_dir=tmp_path)
    assert report.removed() == ("blurred_dog",)
    assert all(e.aesthetic is None and e.relevance is None for e in report.images.values())


def test_report_lists_every_image_with_values_and_reasons(tmp_path):
    images = {"ok": png(sharp_texture((800, 600))), "tiny": png(sharp_texture((64, 64))), "broken": b"nope"}
    report = filter_images(images, None, QualityThresholds(min_aesthetic=None, min_relevance=None), models=NoModels())
    assert report.kept == ("ok",) and report.removed(1) == ("tiny", "broken")
    data = json.loads(report.write_json(tmp_path / "q.json").read_text())
    assert data["counts"] == {
        "images": 3,
        "kept": 1,
        "removed_stage_1": 2,
        "removed_stage_2": 0,
        "failed_stage_2_not_applied": 0,
    }
    assert data["not_checked"] == NOT_CHECKED and "single_subject" in NOT_CHECKED and "watermark" in NOT_CHECKED
    by_id = {row["id"]: row for row in data["images"]}
    assert by_id["tiny"]["reasons"][0] == {
        "stage": 1,
        "check": "min_side",
        "value": 64,
        "threshold": 512,
        "message": "shorter side 64 px < 512 px (64x64)",
    }
    assert by_id["broken"]["reasons"][0]["check"] == "unreadable" and "width" not in by_id["broken"]
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(report.write_csv(tmp_path / "q.csv").read_text()))}
    assert rows["ok"]["kept"] == "True" and rows["ok"]["checks_failed"] == ""
    # 64 px is measured upscaled to 256 px, which blurs it: a second reason, after the floor's.
    assert rows["tiny"]["removed_at"] == "1" and rows["tiny"]["checks_failed"].split(";")[0] == "min_side"
    assert float(rows["ok"]["blur"]) > 50 and rows["broken"]["width"] == ""
