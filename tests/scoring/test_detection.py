"""Grounding DINO and SAM 2 loaders, their outputs against by-hand runs, crop/union helpers, tiny makers.

The paper code path is exercised for real: the tiny models are laid out as a Hugging Face cache in the
Hub's own layout (``models--<org>--<name>/blobs``, ``snapshots/<revision>/`` symlinks, ``refs/main``)
under the paper cards' pinned revisions, and the loaders read them with local files only while the Hub
is switched off. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelNotAvailableError
from idbench.evaluate_pkg.models.detection import (
    Detection,
    GroundingDinoDetector,
    Sam2Segmenter,
    crop,
    load_grounding_dino,
    load_sam2,
    make_tiny_grounding_dino,
    make_tiny_sam2,
    union_mask,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

GD_CARD = registry.get_card("grounding-dino-tiny")
SAM_CARD = registry.get_card("sam2.1-hiera-tiny")
TINY_GD_CARD = registry.get_card("grounding-dino-tiny-random")
TINY_SAM_CARD = registry.get_card("sam2.1-hiera-tiny-random")
LFS_FILES = {"model.safetensors"}  # stored by sha256 in blobs/, the others by their git blob sha1


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def install_in_hub_cache(cache: Path, repo_id: str, revision: str, folder: Path) -> Path:
    """Lay ``folder`` out as huggingface_hub does after ``hf download repo_id --revision revision``."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    for source in sorted(folder.iterdir()):
        data = source.read_bytes()
        etag = hashlib.sha256(data).hexdigest() if source.name in LFS_FILES else git_blob_sha1(data)
        (repo / "blobs" / etag).write_bytes(data)
        os.symlink(Path("..", "..", "blobs", etag), snapshot / source.name)
    return snapshot


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A models_dir holding both tiny models, made as the registry makes them: <root>/tiny/<name>/."""
    root = tmp_path_factory.mktemp("models")
    registry.make_tiny([TINY_GD_CARD.name, TINY_SAM_CARD.name], models_dir=root)
    return root


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, made) -> Path:
    """The tiny models under the paper cards' Hub ids and pinned revisions, in a Hub cache of their own."""
    cache = tmp_path_factory.mktemp("hf-hub-cache")
    install_in_hub_cache(cache, GD_CARD.hub_id, GD_CARD.revision, registry.tiny_path(TINY_GD_CARD, made))
    install_in_hub_cache(cache, SAM_CARD.hub_id, SAM_CARD.revision, registry.tiny_path(TINY_SAM_CARD, made))
    return cache


def use_hub_cache(patch: pytest.MonkeyPatch, cache: Path) -> None:
    """Point everything that reads the Hugging Face cache at ``cache``, and switch the Hub off.

    The registry resolves the cache from the environment when a model is loaded (``hub_cache_dir``).
    huggingface_hub itself reads HF_HUB_CACHE and HF_HUB_OFFLINE once, into ``huggingface_hub.constants``,
    at import, and transformers / huggingface_hub read those module attributes at call time
    (``constants.HF_HUB_CACHE`` in ``cached_files``, ``constants.HF_HUB_OFFLINE`` in ``is_offline_mode``):
    so both the variables and the attributes are patched.
    """
    from huggingface_hub import constants

    patch.setenv("HF_HUB_CACHE", str(cache))
    patch.setenv("HF_HUB_OFFLINE", "1")
    patch.setattr(constants, "HF_HUB_CACHE", str(cache))
    patch.setattr(constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(scope="module")
def detector(hub_cache) -> GroundingDinoDetector:
    with pytest.MonkeyPatch.context() as patch:
        use_hub_cache(patch, hub_cache)
        return load_grounding_dino(GD_CARD)


@pytest.fixture(scope="module")
def segmenter(hub_cache) -> Sam2Segmenter:
    with pytest.MonkeyPatch.context() as patch:
        use_hub_cache(patch, hub_cache)
        return load_sam2(SAM_CARD)


def noise_image(seed: int, size: tuple[int, int]) -> Image.Image:
    """Smooth random colour blobs of ``size`` (width, height)."""
    coarse = np.random.default_rng(seed).integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    return Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)


IMAGES = [noise_image(1, (256, 256)), noise_image(2, (320, 200)), noise_image(3, (180, 240))]
QUERIES = [["a person", "the red espresso cup"], ["a dog"], ["a woman", "a striped scarf", "a cat"]]


# --- loading ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_paper_cards_load_from_the_hub_cache_offline(detector, segmenter, made):
    assert detector.key == f"{GD_CARD.name}@{GD_CARD.revision}"
    assert segmenter.key == f"{SAM_CARD.name}@{SAM_CARD.revision}"
    assert detector.feature_version >= 1 and segmenter.feature_version >= 1
    assert detector.card is GD_CARD and segmenter.card is SAM_CARD
    assert detector.dtype == torch.float32 and segmenter.dtype == torch.float32  # the CPU default
    assert type(detector.processor.image_processor).__name__ == "GroundingDinoImageProcessorPil"
    # transformers' Grounding DINO cuts captions into phrases at bert-base-uncased's ids of [CLS], [SEP]
    # and "."; the tokenizer read from the cache must produce those very ids.
    ids = detector.processor.tokenizer("a person. a cup.")["input_ids"]
    assert (ids[0], ids[3], ids[6], ids[-1], len(ids)) == (101, 1012, 1012, 102, 8)
    # The weights read through the card are those of the tiny model installed in the cache.
    from transformers import GroundingDinoForObjectDetection

    written = GroundingDinoForObjectDetection.from_pretrained(registry.tiny_path(TINY_GD_CARD, made)).state_dict()
    state = detector.model.state_dict()
    assert state.keys() == written.keys() and all(torch.equal(state[k], v) for k, v in written.items())


@pytest.mark.slow
def test_sam2_video_checkpoint_loads_completely_into_sam2model(segmenter, hub_cache):
    """The Hub's SAM 2.1 repos hold sam2_video checkpoints: every weight of Sam2Model must come from it."""
    snapshot = hub_cache / "models--facebook--sam2.1-hiera-tiny" / "snapshots" / SAM_CARD.revision
    assert json.loads((snapshot / "config.json").read_text())["model_type"] == "sam2_video"
    from transformers import Sam2VideoModel

    video_state = Sam2VideoModel.from_pretrained(snapshot).state_dict()
    state = segmenter.model.state_dict()
    assert set(state) <= set(video_state)  # no Sam2Model weight is left at its random initialisation
    assert all(torch.equal(state[k], video_state[k]) for k in state)


@pytest.mark.slow
def test_tiny_cards_are_made_on_first_use_with_a_content_key(tmp_path):
    detector = load_grounding_dino(TINY_GD_CARD, models_dir=tmp_path)
    segmenter = load_sam2(TINY_SAM_CARD, models_dir=tmp_path)
    assert (tmp_path / "tiny" / TINY_GD_CARD.name / "model.safetensors").is_file()
    assert detector.key.startswith(f"{TINY_GD_CARD.name}@tiny-")
    assert segmenter.key.startswith(f"{TINY_SAM_CARD.name}@tiny-")
    # Made again elsewhere, the same bytes: the same key (feature caches stay valid across machines).
    assert load_grounding_dino(TINY_GD_CARD, models_dir=tmp_path / "other").key == detector.key


@pytest.mark.slow
@pytest.mark.parametrize("card, loader", [(GD_CARD, load_grounding_dino), (SAM_CARD, load_sam2)])
def test_missing_model_names_it_and_the_download_command(tmp_path, monkeypatch, made, card, loader):
    use_hub_cache(monkeypatch, tmp_path / "empty-cache")
    with pytest.raises(ModelNotAvailableError) as missing:
        loader(card)
    message = str(missing.value)
    assert card.name in message and f"hf download {card.hub_id}" in message and f"--revision {card.revision}" in message

    # A partial download (everything but the weights) is reported the same way.
    partial = tmp_path / "partial"
    partial.mkdir()
    tiny = registry.tiny_path(TINY_GD_CARD if loader is load_grounding_dino else TINY_SAM_CARD, made)
    for source in tiny.iterdir():
        if source.name != "model.safetensors":
            (partial / source.name).write_bytes(source.read_bytes())
    install_in_hub_cache(tmp_path / "partial-cache", card.hub_id, card.revision, partial)
    use_hub_cache(monkeypatch, tmp_path / "partial-cache")
    with pytest.raises(ModelNotAvailableError, match="model.safetensors") as partial_error:
        loader(card)
    assert f"hf download {card.hub_id}" in str(partial_error.value)


# --- Grounding DINO -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_detections_lie_in_the_image_and_answer_the_queries(detector):
    results = detector.detect(IMAGES, QUERIES, box_threshold=0.3, text_threshold=0.2)
    assert len(results) == len(IMAGES)
    assert sum(len(r) for r in results) > 0  # random weights still find (meaningless) boxes
    for image, queries, detections in zip(IMAGES, QUERIES, results):
        scores = [d.score for d in detections]
        assert scores == sorted(scores, reverse=True)
        for d in detections:
            assert isinstance(d, Detection) and d.label in queries
            x0, y0, x1, y1 = d.box
            assert 0 <= x0 <= x1 <= image.width and 0 <= y0 <= y1 <= image.height
            assert 0.3 < d.score <= 1


def phrase_positions(tokenizer, input_ids: list[int], queries: list[str]) -> list[list[int]]:
    """Where each query's own tokens sit in the caption, found by tokenizing the query alone."""
    positions, start = [], 0
    for query in queries:
        pieces = tokenizer(query.lower(), add_special_tokens=False)["input_ids"]
        for at in range(start, len(input_ids) - len(pieces) + 1):
            if input_ids[at : at + len(pieces)] == pieces:
                positions.append(list(range(at, at + len(pieces))))
                start = at + len(pieces)
                break
        else:
            raise AssertionError(f"{query!r} not found in the caption")
    return positions


@pytest.mark.slow
def test_detect_equals_a_by_hand_run_of_processor_model_and_post_processing(detector):
    box_threshold, text_threshold = 0.3, 0.2
    processor, model = detector.processor, detector.model
    captions = [". ".join(q.lower() for q in queries) + "." for queries in QUERIES]
    inputs = processor(images=IMAGES, text=captions, return_tensors="pt", padding=True)
    with torch.no_grad():
        outputs = model(**inputs)
    sizes = [(image.height, image.width) for image in IMAGES]
    processed = processor.post_process_grounded_object_detection(
        outputs, inputs["input_ids"], threshold=box_threshold, text_threshold=text_threshold, target_sizes=sizes
    )
    expected = []
    for i, queries in enumerate(QUERIES):
        ids = inputs["input_ids"][i].tolist()
        spans = phrase_positions(processor.tokenizer, ids, queries)
        probs = outputs.logits[i].sigmoid()
        probs = probs[probs.max(dim=-1).values > box_threshold]
        rows = []
        for token_probs, box, score in zip(probs, processed[i]["boxes"], processed[i]["scores"]):
            per_query = [token_probs[span].max().item() for span in spans]
            if max(per_query) > text_threshold:
                height, width = sizes[i]
                clipped = box.clamp(min=0).minimum(torch.tensor([width, height, width, height]))
                rows.append((queries[int(np.argmax(per_query))], clipped.tolist(), score.item()))
        expected.append(sorted(rows, key=lambda row: -row[2]))

    got = detector.detect(IMAGES, QUERIES, box_threshold=box_threshold, text_threshold=text_threshold)
    assert sum(len(rows) for rows in expected) > 0
    for mine, theirs in zip(got, expected):
        assert [d.label for d in mine] == [row[0] for row in theirs]
        np.testing.assert_allclose([d.box for d in mine], [row[1] for row in theirs], atol=1e-4)
        np.testing.assert_allclose([d.score for d in mine], [row[2] for row in theirs], atol=1e-6)


@pytest.mark.slow
def test_thresholds_and_empty_queries(detector):
    loose = detector.detect(IMAGES[:2], QUERIES[:2], box_threshold=0.2, text_threshold=0.2)
    strict = detector.detect(IMAGES[:2], QUERIES[:2], box_threshold=0.9, text_threshold=0.2)
    for few, many in zip(strict, loose):
        assert set(few) <= set(many)
    assert detector.detect(IMAGES[:1], QUERIES[:1], box_threshold=1.0) == [[]]
    # An image with no queries gets no detections and does not disturb the others.
    mixed = detector.detect([IMAGES[0], IMAGES[1]], [[], QUERIES[1]], box_threshold=0.2, text_threshold=0.2)
    alone = detector.detect([IMAGES[1]], [QUERIES[1]], box_threshold=0.2, text_threshold=0.2)
    assert mixed[0] == [] and len(mixed[1]) == len(alone[0])


@pytest.mark.slow
def test_bad_queries_are_refused(detector):
    with pytest.raises(ValueError, match="'.' or '?'"):
        detector.detect(IMAGES[:1], [["a 3.5 inch phone"]])
    with pytest.raises(ValueError, match="empty query"):
        detector.detect(IMAGES[:1], [["  "]])
    with pytest.raises(ValueError, match="2 images but 1"):
        detector.detect(IMAGES[:2], QUERIES[:1])
    with pytest.raises(TypeError, match="list of strings"):
        detector.detect(IMAGES[:1], ["a person"])
    # A trailing full stop is harmless and the label stays the caller's text.
    labels = {d.label for d in detector.detect(IMAGES[:1], [["a person."]], box_threshold=0.2, text_threshold=0.2)[0]}
    assert labels <= {"a person."}


# --- SAM 2 --------------------------------------------------------------------------------------------

BOXES = [
    np.array([[10, 20, 120, 200], [100, 50, 250, 250]], dtype=np.float32),
    np.zeros((0, 4), dtype=np.float32),
    np.array([[5.5, 10.25, 170, 230]]),
]


@pytest.mark.slow
def test_masks_have_the_image_size_one_per_box(segmenter):
    masks = segmenter.segment(IMAGES, BOXES)
    for image, boxes, mask in zip(IMAGES, BOXES, masks):
        assert mask.dtype == bool and mask.shape == (len(boxes), image.height, image.width)
    assert masks[0].any()  # not all empty, so the comparison below is not vacuous


@pytest.mark.slow
def test_masks_equal_a_by_hand_forward(segmenter):
    """By hand: the processor with images and boxes together, one full model forward, post_process_masks."""
    processor, model = segmenter.processor, segmenter.model
    batched = segmenter.segment(IMAGES, BOXES)
    for image, boxes, in_batch in zip(IMAGES, BOXES, batched):
        if not len(boxes):
            continue
        inputs = processor(images=[image], input_boxes=[boxes.tolist()], return_tensors="pt")
        with torch.no_grad():
            outputs = model(**inputs, multimask_output=False)
        expected = processor.post_process_masks(outputs.pred_masks, inputs["original_sizes"])[0][:, 0].numpy()
        assert np.array_equal(segmenter.segment([image], [boxes])[0], expected)
        # Batched, the image encoder sees several images at once: equal up to float noise at logit 0.
        assert (in_batch != expected).mean() < 1e-3


@pytest.mark.slow
def test_bad_boxes_are_refused(segmenter):
    with pytest.raises(ValueError, match=r"\(k, 4\)"):
        segmenter.segment(IMAGES[:1], [np.array([1.0, 2.0, 3.0])])
    with pytest.raises(ValueError, match="finite"):
        segmenter.segment(IMAGES[:1], [np.array([[0, 0, np.nan, 5]])])
    with pytest.raises(ValueError, match="3 images but 1"):
        segmenter.segment(IMAGES, BOXES[:1])


# --- helpers ------------------------------------------------------------------------------------------


def test_crop_equals_numpy_slicing():
    pixels = np.random.default_rng(0).integers(0, 256, size=(90, 120, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    # No padding, whole-pixel box: exactly the slice.
    assert np.array_equal(np.asarray(crop(image, (10, 20, 50, 70), pad=0.0)), pixels[20:70, 10:50])
    # Fractional box, 10% padding: floor/ceil outwards of the padded box.
    box, pad = (10.4, 20.6, 50.2, 70.1), 0.1
    dx, dy = pad * (box[2] - box[0]), pad * (box[3] - box[1])
    x0, y0 = math.floor(box[0] - dx), math.floor(box[1] - dy)
    x1, y1 = math.ceil(box[2] + dx), math.ceil(box[3] + dy)
    assert np.array_equal(np.asarray(crop(image, box, pad=pad)), pixels[y0:y1, x0:x1])
    # A box running off the image is clipped to it.
    assert np.array_equal(np.asarray(crop(image, (100, -5, 150, 30), pad=0.0)), pixels[0:30, 100:120])
    # A degenerate box still gives one pixel.
    assert crop(image, (30, 30, 30, 30), pad=0.0).size == (1, 1)
    with pytest.raises(ValueError):
        crop(image, (50, 10, 20, 40))


def test_union_mask_equals_logical_or():
    rng = np.random.default_rng(0)
    masks = rng.random((3, 40, 60)) > 0.7
    assert np.array_equal(union_mask(masks, (40, 60)), np.logical_or.reduce(masks, axis=0))
    assert np.array_equal(union_mask(list(masks), (40, 60)), masks[0] | masks[1] | masks[2])
    empty = union_mask(np.zeros((0, 40, 60), dtype=bool), (40, 60))
    assert empty.shape == (40, 60) and empty.dtype == bool and not empty.any()
    with pytest.raises(ValueError, match="shape"):
        union_mask(masks, (60, 40))


@pytest.mark.slow
def test_detector_boxes_feed_the_segmenter_and_crop(detector, segmenter):
    """The chain the region metrics use: detect -> segment those boxes -> union mask and crops."""
    image = IMAGES[0]
    detections = detector.detect([image], [QUERIES[0]], box_threshold=0.3, text_threshold=0.2)[0][:4]
    boxes = np.array([d.box for d in detections]).reshape(-1, 4)
    masks = segmenter.segment([image], [boxes])[0]
    assert masks.shape == (len(detections), image.height, image.width)
    assert union_mask(masks, (image.height, image.width)).shape == (image.height, image.width)
    for d in detections:
        assert crop(image, d.box).size[0] >= 1


# --- tiny makers --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("maker", [make_tiny_grounding_dino, make_tiny_sam2])
def test_tiny_makers_are_deterministic(tmp_path, maker):
    before = torch.random.get_rng_state()
    first, second, other = (maker(tmp_path / name, seed=seed) for name, seed in (("a", 7), ("b", 7), ("c", 8)))
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is left alone
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert (first / "model.safetensors").read_bytes() != (other / "model.safetensors").read_bytes()
