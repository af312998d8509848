"""Perceptual-hash dedup against brute force and known image edits."""

from __future__ import annotations

import io
import random

import numpy as np
from helpers import noise_jpeg
from PIL import Image

from idbench.builders.dedup import DEFAULT_MAX_DISTANCE, find_duplicates, hamming_matrix, phash

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def reencode(data: bytes, size: tuple[int, int], quality: int) -> bytes:
    with Image.open(io.BytesIO(data)) as image:
        buffer = io.BytesIO()
        image.resize(size, Image.Resampling.LANCZOS).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def test_hamming_matrix_matches_brute_force():
    rng = random.Random(0)
    hashes = [rng.getrandbits(64) for _ in range(40)] + [0, 2**64 - 1]
    matrix = hamming_matrix(hashes)
    for i, a in enumerate(hashes):
        for j, b in enumerate(hashes):
            assert matrix[i, j] == bin(a ^ b).count("1")


def test_phash_is_imagehash_phash():
    import imagehash

    data = noise_jpeg(3)
    with Image.open(io.BytesIO(data)) as image:
        expected = imagehash.phash(image.convert("RGB"))
    assert phash(data) == int(str(expected), 16)


def test_exact_and_near_duplicates_are_found_and_distinct_images_kept():
    original = noise_jpeg(1, size=(256, 192))
    items = [
        ("a", original),
        ("b", noise_jpeg(2, size=(256, 192))),
        ("a-copy", original),
        ("a-small", reencode(original, (128, 96), quality=70)),
        ("c", noise_jpeg(3, size=(256, 192))),
    ]
    duplicates = {d.id: d for d in find_duplicates(items)}
    assert set(duplicates) == {"a-copy", "a-small"}
    assert duplicates["a-copy"].duplicate_of == "a" and duplicates["a-copy"].distance == 0
    assert (
        duplicates["a-small"].duplicate_of == "a"
        and 0 < duplicates["a-small"].distance <= DEFAULT_MAX_DISTANCE
        or (duplicates["a-small"].distance == 0)
    )


def test_distinct_noise_images_are_far_apart():
    hashes = [phash(noise_jpeg(seed)) for seed in range(30)]
    matrix = hamming_matrix(hashes)
    off_diagonal = matrix[~np.eye(len(hashes), dtype=bool)]
    assert off_diagonal.min() > DEFAULT_MAX_DISTANCE
    assert find_duplicates([(str(k), noise_jpeg(k)) for k in range(30)]) == []


def test_empty_input():
    assert find_duplicates([]) == []
