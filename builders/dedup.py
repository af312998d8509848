"""Exact and near-duplicate detection by perceptual hash.

Builders call :func:`find_duplicates` on every source so that the same picture cannot enter a benchmark
twice (a duplicate reference inflates similarity metrics and leaks between slots). Exact duplicates are
found by SHA-256 of the file bytes; near duplicates (re-encoded, resized, lightly edited copies) by the
Hamming distance between 64-bit pHashes. Embedding-based dedup, which also catches crops and recolours,
belongs to the curation pipeline with models (``idbench.curation.embedding_dedup``).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import imagehash
import numpy as np
from PIL import Image

# pHash bits that may differ for two images to count as the same picture. Re-encoding or resizing a
# photo moves a few of the 64 bits; the closest two different pictures of the shipped samples (a flat
# and a 3D emoji of one handbag) are 12 apart. 6 leaves margin on both sides.
DEFAULT_MAX_DISTANCE = 6


@dataclass(frozen=True)
class Duplicate:
    id: str  # dropped
    duplicate_of: str  # kept (earlier in input order)
    distance: int  # 0 for byte-identical files


def phash(data: bytes) -> int:
    """64-bit perceptual hash of an encoded image, as an int."""
    with Image.open(io.BytesIO(data)) as image:
        bits = imagehash.phash(image.convert("RGB")).hash.flatten()
    return int("".join("1" if b else "0" for b in bits), 2)


def hamming_matrix(hashes: Sequence[int]) -> np.ndarray:
    """Pairwise Hamming distances between 64-bit hashes (n x n, uint8)."""
    values = np.array(hashes, dtype=np.uint64)
    return np.bitwise_count(values[:, None] ^ values[None, :])


def find_duplicates(items: Sequence[tuple[str, bytes]], max_distance: int = DEFAULT_MAX_DISTANCE) -> list[Duplicate]:
    """Duplicates among ``(id, encoded image)`` pairs; the first occurrence in input order is kept.

    Each dropped item names the closest kept one (byte-identical files first).

    >>> find_duplicates([("a", png_bytes), ("b", png_bytes)])  # doctest: +SKIP
    [Duplicate(id='b', duplicate_of='a', distance=0)]
    """
    if not items:
        return []
    ids = [i for i, _ in items]
    digests = [hashlib.sha256(data).digest() for _, data in items]
    distances = hamming_matrix([phash(data) for _, data in items])
    first_with_digest: dict[bytes, int] = {}
    kept = np.zeros(len(items), dtype=bool)
    dropped: list[Duplicate] = []
    for j in range(len(items)):
        if digests[j] in first_with_digest:
            dropped.append(Duplicate(ids[j], ids[first_with_digest[digests[j]]], 0))
            continue
        close = np.flatnonzero(kept & (distances[:, j] <= max_distance))
        if close.size:
            nearest = int(close[np.argmin(distances[close, j])])
            dropped.append(Duplicate(ids[j], ids[nearest], int(distances[nearest, j])))
            continue
        kept[j] = True
        first_with_digest[digests[j]] = j
    return dropped
