"""Scoring is bounded in memory: every model gets the working image, and a submission's content fails
the submission (ImageError naming the image), never the worker.

Each hostile or large image is made here. Sizes are bounded by construction (no timing asserts): what
is checked is the shape every model receives, the coordinates it reports, and that the reduced image
agrees with an independent reference (Pillow's own Lanczos resize of the fully decoded image).
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from idbench.evaluate_pkg.context import Context, ScoreOptions, crop_bytes, image_size
from idbench.evaluate_pkg.features import FeatureStore, image_feature_version
from idbench.evaluate_pkg.images import (
    MAX_ASPECT_RATIO,
    ORIGINAL_SIZE_KEY,
    WORKING_RULE,
    WORKING_SIDE,
    ImageError,
    ImageSource,
    normalize_image,
    working_image,
    working_size,
)
from idbench.evaluate_pkg.models.detection import Detection

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(image: Image.Image, quality: int = 95) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def pattern(width: int, height: int) -> Image.Image:
    """A smooth two-axis colour gradient with a few large discs: resampling it is well defined."""
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :]
    y = np.linspace(0, 1, height, dtype=np.float32)[:, None]
    red = np.broadcast_to(x * 255, (height, width))
    green = np.broadcast_to(y * 255, (height, width))
    blue = ((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.09) * 200.0
    return Image.fromarray(np.stack([red, green, blue], axis=-1).round().astype(np.uint8), mode="RGB")


def reference_reduction(data: bytes) -> np.ndarray:
    """The independent reference: the whole image decoded, then Pillow's plain Lanczos to the working size."""
    full = normalize_image(data, where="reference")
    return np.asarray(full.resize(working_size(*full.size), Image.Resampling.LANCZOS), dtype=np.float64)


def key_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the working image ---------------------------------------------------------------------------------


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Decoding and reducing 6000-pixel images.
@pytest.mark.slow
def test_a_6000_pixel_png_is_reduced_to_the_working_size_and_matches_pillows_own_resize():
    data = png(pattern(6000, 6000))
    image = working_image(data, where="big")
    assert image.size == (WORKING_SIDE, WORKING_SIDE) and image.mode == "RGB"
    assert image.info[ORIGINAL_SIZE_KEY] == (6000, 6000)
    difference = np.abs(np.asarray(image, dtype=np.float64) - reference_reduction(data))
    assert difference.mean() < 0.5 and difference.max() <= 16


def test_a_large_jpeg_is_decoded_at_a_reduced_scale_and_still_matches():
    data = jpeg(pattern(6000, 4000))
    image = working_image(data, where="big jpeg")
    assert image.size == (WORKING_SIDE, 1024)
    difference = np.abs(np.asarray(image, dtype=np.float64) - reference_reduction(data))
    assert difference.mean() < 2.0


def test_an_image_within_the_working_size_is_exactly_what_normalize_image_gives():
    data = png(pattern(1200, 800))
    assert np.array_equal(
        np.asarray(working_image(data, where="small")), np.asarray(normalize_image(data, where="small"))
    )


@pytest.mark.parametrize("kind", ["16-bit grey", "palette", "palette with transparency", "rgba", "grey"])
def test_other_modes_reduce_like_their_fully_decoded_rgb(kind):
    width, height = 4000, 2000
    base = pattern(width, height)
    if kind == "16-bit grey":
        ramp = np.linspace(0, 65535, width, dtype=np.float64)[None, :].repeat(height, axis=0)
        source = Image.fromarray(ramp.round().astype(np.uint16))
    elif kind == "palette":
        source = base.quantize(64)
    elif kind == "palette with transparency":
        source = base.quantize(64)
        source.info["transparency"] = 0
    elif kind == "rgba":
        source = base.convert("RGBA")
        source.putalpha(Image.linear_gradient("L").resize((width, height)))
    else:
        source = base.convert("L")
    data = png(source)
    image = working_image(data, where=kind)
    assert image.size == working_size(width, height) and image.mode == "RGB"
    difference = np.abs(np.asarray(image, dtype=np.float64) - reference_reduction(data))
    # A palette image is dithered: the reference resizes the dithered RGB, the working image the
    # expanded palette: the same pixels, so the same averages up to rounding and Lanczos ringing.
    assert difference.mean() < 1.5


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Decoding and reducing 6000-pixel images.
@pytest.mark.slow
def test_exif_orientation_is_applied_after_the_reduction():
    source = pattern(6000, 3000)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to view
    buffer = io.BytesIO()
    source.save(buffer, format="PNG", exif=exif)
    data = buffer.getvalue()
    image = working_image(data, where="rotated")
    assert image.size == (768, WORKING_SIDE) and image.info[ORIGINAL_SIZE_KEY] == (3000, 6000)
    assert image_size(data) == (3000, 6000)
    difference = np.abs(np.asarray(image, dtype=np.float64) - reference_reduction(data))
    assert difference.mean() < 0.5


# --- hostile content fails as ImageError, naming the image -------------------------------------------------


def corrupt_png() -> bytes:
    """A PNG whose header (IHDR, 512x512 RGB) is valid and whose pixel data is not a zlib stream."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    header = struct.pack(">IIBBBBB", 512, 512, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"\x00garbage" * 64) + chunk(b"IEND", b"")


def test_a_40_million_by_1_png_is_refused_on_its_header():
    data = png(Image.new("L", (40_000_000, 1)))
    assert len(data) < 100_000  # small on disk, huge in shape
    with pytest.raises(ImageError) as caught:
        working_image(data, where="prompt_id 'p1' seed 0", submitted=True)
    assert caught.value.where == "prompt_id 'p1' seed 0"
    assert f"{MAX_ASPECT_RATIO:g}:1" in caught.value.reason or "side over" in caught.value.reason


def test_a_corrupt_png_with_a_valid_header_is_an_image_error():
    data = corrupt_png()
    with Image.open(io.BytesIO(data)) as opened:
        assert opened.size == (512, 512)  # the header reads fine
    with pytest.raises(ImageError) as caught:
        working_image(data, where="prompt_id 'p2' seed 1", submitted=True)
    assert caught.value.where == "prompt_id 'p2' seed 1" and "not a readable image" in caught.value.reason


class ShapeRecorder:
    """A stand-in encoder that records the array shape it is given and returns the mean colour."""

    key = "shape-recorder@test"
    feature_version = 1

    def __init__(self):
        self.shapes: list[tuple[int, ...]] = []

    def preprocess(self, image):
        return np.asarray(image)

    def collate(self, items):
        return list(items)

    def encode_batch(self, batch):
        self.shapes.extend(item.shape for item in batch)
        return [{"mean": item.reshape(-1, 3).mean(axis=0)} for item in batch]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_corrupt_submitted_image_fails_as_image_error_through_the_feature_store(tmp_path, num_workers):
    good, bad = png(pattern(64, 64)), corrupt_png()
    loaders = {
        key_of(good): ImageSource(lambda: good, where="prompt_id 'ok' seed 0", submitted=True),
        key_of(bad): ImageSource(lambda: bad, where="prompt_id 'bad' seed 3, file images/bad.png", submitted=True),
    }
    with pytest.raises(ImageError) as caught:  # not DataLoader's RuntimeError from a worker
        FeatureStore(tmp_path).encode_images(ShapeRecorder(), loaders, batch_size=2, num_workers=num_workers)
    assert type(caught.value) is ImageError
    assert caught.value.where == "prompt_id 'bad' seed 3, file images/bad.png"
    assert "Traceback" not in str(caught.value)


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Decoding and reducing 6000-pixel images.
@pytest.mark.slow
def test_every_encoder_receives_at_most_the_working_size(tmp_path):
    blobs = [png(pattern(6000, 6000)), jpeg(pattern(8000, 1000)), png(pattern(300, 200))]
    recorder = ShapeRecorder()
    FeatureStore(tmp_path).encode_images(recorder, {key_of(b): (lambda b=b: b) for b in blobs}, batch_size=2)
    assert sorted(recorder.shapes) == sorted([(WORKING_SIDE, WORKING_SIDE, 3), (192, WORKING_SIDE, 3), (200, 300, 3)])


def test_cached_image_features_are_keyed_by_the_working_rule(tmp_path):
    data = png(pattern(64, 64))
    FeatureStore(tmp_path).encode_images(ShapeRecorder(), {key_of(data): lambda: data})
    folders = {p.parent.parent.name for p in tmp_path.rglob("*.npz")}
    assert folders == {f"v{image_feature_version(1)}"} and WORKING_RULE in image_feature_version(1)


# --- coordinates: boxes in the submitted image's pixels, whatever the working size -------------------


def white_box_image(size=(6000, 4000), box=(1200, 800, 2400, 2000)) -> bytes:
    image = Image.new("RGB", size, (0, 0, 0))
    image.paste((255, 255, 255), box)
    return png(image)


def bright_box(image: Image.Image) -> tuple[float, float, float, float]:
    """Where the white rectangle is, in ``image``'s own pixels: what a perfect detector would say."""
    bright = np.asarray(image.convert("L")) > 127
    ys, xs = np.nonzero(bright)
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


class BoxFinder:
    """A detector and a face encoder that "find" the white rectangle, recording their input sizes."""

    key = "box-finder@test"
    feature_version = 1
    pixel_coordinate_features = ("boxes", "landmarks")

    def __init__(self):
        self.sizes: list[tuple[int, int]] = []

    def detect(self, images, queries):
        self.sizes.extend(image.size for image in images)
        return [[Detection(label=q[0], box=bright_box(image), score=0.9)] for image, q in zip(images, queries)]

    def segment(self, images, boxes):
        self.sizes.extend(image.size for image in images)
        masks = []
        for image, image_boxes in zip(images, boxes):
            mask = np.zeros((len(image_boxes), image.height, image.width), dtype=bool)
            for i, (x0, y0, x1, y1) in enumerate(np.round(image_boxes).astype(int)):
                mask[i, y0:y1, x0:x1] = True
            masks.append(mask)
        return masks

    def preprocess(self, image):
        return image

    def collate(self, items):
        return list(items)

    def encode_batch(self, batch):
        self.sizes.extend(image.size for image in batch)
        out = []
        for image in batch:
            x0, y0, x1, y1 = bright_box(image)
            out.append(
                {
                    "boxes": np.array([[x0, y0, x1, y1]], np.float32),
                    "landmarks": np.array(
                        [[[x0, y0], [x1, y1], [x0, y1], [x1, y0], [(x0 + x1) / 2, (y0 + y1) / 2]]], np.float32
                    ),
                    "embeddings": np.ones((1, 4), np.float32),
                }
            )
        return out


def fake_context(tmp_path, finder: BoxFinder) -> Context:
    return Context(
        data=None,
        submission=None,
        store=FeatureStore(tmp_path),
        models={"detector": finder, "segmenter": finder},
        options=ScoreOptions(batch_size=4),
    )


def test_detector_boxes_are_in_the_submitted_images_pixels_and_crops_follow_them(tmp_path):
    data = white_box_image()
    finder = BoxFinder()
    found = fake_context(tmp_path, finder).detections({key_of(data): lambda: data}, {key_of(data): ["a box"]})
    assert finder.sizes == [(WORKING_SIDE, 1024)]
    box = found[key_of(data)]["boxes"][0]
    scale = 6000 / WORKING_SIDE
    assert np.allclose(box, (1200, 800, 2400, 2000), atol=2 * scale)

    crop = Image.open(io.BytesIO(crop_bytes(data, box, pad=0.0)))
    assert max(crop.size) <= WORKING_SIDE
    assert np.asarray(crop.convert("L"), dtype=np.float64).mean() > 200  # the crop is the white box
    # the suites decode a generation once and cut all its crops from the working image: the same bytes
    assert crop_bytes(working_image(data, where="crop"), box, pad=0.0) == crop_bytes(data, box, pad=0.0)


def test_masks_are_at_the_working_size_and_cover_the_box(tmp_path):
    data = white_box_image()
    finder = BoxFinder()
    masks = fake_context(tmp_path, finder).foreground_masks(
        {key_of(data): lambda: data}, {key_of(data): np.array([[1200, 800, 2400, 2000]], np.float32)}
    )
    mask = masks[key_of(data)]
    assert mask.shape == (1024, WORKING_SIDE)
    assert abs(mask.mean() - (1200 * 1200) / (6000 * 4000)) < 0.002


def test_face_boxes_and_landmarks_are_scaled_back_to_the_submitted_pixels(tmp_path):
    data = white_box_image()
    finder = BoxFinder()
    faces = FeatureStore(tmp_path).encode_images(finder, {key_of(data): lambda: data})[key_of(data)]
    assert finder.sizes == [(WORKING_SIDE, 1024)]
    tolerance = 2 * 6000 / WORKING_SIDE
    assert np.allclose(faces["boxes"][0], (1200, 800, 2400, 2000), atol=tolerance)
    assert np.allclose(faces["landmarks"][0, 4], (1800, 1400), atol=tolerance)
    assert np.array_equal(faces["embeddings"], np.ones((1, 4), np.float32))


# --- the tiny profile: a 6000 px image scores like its 1024 px downscale ------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("role", ["clip", "dinov2"])
def test_a_6000_pixel_image_encodes_like_its_1024_pixel_downscale(tmp_path, role):
    from idbench.evaluate_pkg.models.registry import load_model, resolve_profile

    encoder = load_model(resolve_profile("tiny")[role].name, device="cpu")
    big_image = pattern(6000, 6000)
    big = png(big_image)
    small = png(big_image.resize((1024, 1024), Image.Resampling.LANCZOS))
    other = png(pattern(1024, 1024).transpose(Image.Transpose.ROTATE_90))
    features = FeatureStore(tmp_path).encode_images(encoder, {key_of(b): (lambda b=b: b) for b in (big, small, other)})

    def vector(data):
        value = features[key_of(data)]
        array = value["embedding"] if "embedding" in value else value["cls"]
        return array.reshape(-1).astype(np.float64)

    def cosine(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    same = cosine(vector(big), vector(small))
    assert same > 0.995
    assert same > cosine(vector(big), vector(other))
