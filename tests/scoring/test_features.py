"""The feature store: each unique input computed once, cached, resumable after a crash."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from helpers import noise_jpeg

from idbench.evaluate_pkg.features import FeatureStore, condition_hash, text_hash

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


class MeanColourEncoder:
    """A stand-in model whose features are easy to compute independently: the mean RGB of the image."""

    key = "mean-colour@test"
    feature_version = 1

    def __init__(self, fail_after_batches: int | None = None):
        self.batches_seen = 0
        self.images_seen = 0
        self.fail_after_batches = fail_after_batches

    def preprocess(self, image):
        return torch.from_numpy(np.asarray(image, dtype=np.float32)).mean(dim=(0, 1))

    def collate(self, items):
        return torch.stack(items)

    def encode_batch(self, batch):
        if self.fail_after_batches is not None and self.batches_seen >= self.fail_after_batches:
            raise RuntimeError("simulated crash")
        self.batches_seen += 1
        self.images_seen += len(batch)
        return [{"embedding": row.numpy()} for row in batch]


def image_set(n: int) -> dict[str, callable]:
    blobs = [noise_jpeg(seed) for seed in range(n)]
    return {hashlib.sha256(b).hexdigest(): (lambda b=b: b) for b in blobs}


def expected_mean(data: bytes) -> np.ndarray:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64).mean(axis=(0, 1))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_features_equal_a_direct_computation(tmp_path, num_workers):
    images = image_set(7)
    store = FeatureStore(tmp_path)
    features = store.encode_images(MeanColourEncoder(), images, batch_size=3, num_workers=num_workers)
    assert set(features) == set(images)
    for key, load in images.items():
        assert np.allclose(features[key]["embedding"], expected_mean(load()), atol=1e-3)


def test_second_run_computes_nothing(tmp_path):
    images = image_set(5)
    first = MeanColourEncoder()
    FeatureStore(tmp_path).encode_images(first, images, batch_size=2)
    assert first.images_seen == 5
    second = MeanColourEncoder()
    store = FeatureStore(tmp_path)
    again = store.encode_images(second, images, batch_size=2)
    assert second.images_seen == 0
    assert store.stats.cached == {"mean-colour@test": 5} and store.stats.computed == {"mean-colour@test": 0}
    assert set(again) == set(images)


def test_resume_after_a_crash_recomputes_only_what_is_missing(tmp_path):
    images = image_set(10)
    crashing = MeanColourEncoder(fail_after_batches=2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        FeatureStore(tmp_path).encode_images(crashing, images, batch_size=3)
    assert crashing.images_seen == 6  # two full batches were saved before the crash
    resumed = MeanColourEncoder()
    features = FeatureStore(tmp_path).encode_images(resumed, images, batch_size=3)
    assert resumed.images_seen == 4
    uninterrupted = FeatureStore(tmp_path / "clean").encode_images(MeanColourEncoder(), images, batch_size=3)
    for key in images:
        assert np.array_equal(features[key]["embedding"], uninterrupted[key]["embedding"])
    # no temporary files were left behind
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_duplicate_images_are_encoded_once(tmp_path):
    data = noise_jpeg(1)
    key = hashlib.sha256(data).hexdigest()
    encoder = MeanColourEncoder()
    # the same content hash requested through two prompts is one entry of the mapping
    requests = {key: (lambda: data)}
    requests.update({key: (lambda: data)})
    FeatureStore(tmp_path).encode_images(encoder, requests)
    assert encoder.images_seen == 1


def test_version_and_model_key_separate_cache_entries(tmp_path):
    images = image_set(2)
    store = FeatureStore(tmp_path)
    store.encode_images(MeanColourEncoder(), images)
    bumped = MeanColourEncoder()
    bumped.feature_version = 2
    store.encode_images(bumped, images)
    assert bumped.images_seen == 2


def test_texts_are_cached_by_content(tmp_path):
    class TextCounter:
        key = "len@test"
        feature_version = 1
        calls = 0

        def encode_texts(self, texts):
            TextCounter.calls += len(texts)
            return np.array([[len(t), t.count(" ")] for t in texts], dtype=np.float32)

    store = FeatureStore(tmp_path)
    out = store.encode_texts(TextCounter(), ["a cat", "two dogs here", "a cat"])
    assert TextCounter.calls == 2
    assert out["two dogs here"].tolist() == [13.0, 2.0]
    store.encode_texts(TextCounter(), ["a cat"])
    assert TextCounter.calls == 2


def test_keys():
    assert text_hash("x") == hashlib.sha256(b"x").hexdigest()
    assert condition_hash("ab", "c") != condition_hash("a", "bc")
