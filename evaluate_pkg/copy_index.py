"""The pool index: which references of a large pool a generation may show, found in time that grows
sub-linearly with the pool, so the copy check's foreign search is linear in the generations.

On a multi-subject benchmark every generation is searched for every reference of the pool that its
prompt does not name (``copies.foreign_pool``). Matching a generation's keypoints against each of them
(``copies.find_in_any_pose``, about 9 ms a pair) is generations x pool work: at CogCanvas's size (1,361
prompts, ~1,950 references) about 2.65 million matchings, hours. But a reference shown in a generation
shares many distinctive SIFT descriptors with it, and the others share almost none, so one search of the
generation's descriptors among *all* the pool's descriptors tells which few references are worth the
full match:

0. **A small pool** (at most ``EXHAUSTIVE_UP_TO`` references, as the Identity Collapse sample's 13)
   is searched as before, every reference matched in full: a shortlist of ``TOP_K`` would save little.
1. **Index.** The SIFT descriptors of every pool reference, plain and mirrored (SIFT is not mirror
   invariant), go into one faiss index; two arrays remember the reference and orientation of each.
   Below ``EXACT_BELOW`` descriptors the index is exact (``IndexFlatL2``: a scan costs less than a
   graph walk there); from it on, an HNSW graph (``IndexHNSWSQ``, ``HNSW_M`` links, ``HNSW_EF_SEARCH``
   candidates a query), whose query cost grows with the logarithm of the pool. SIFT descriptors are
   whole numbers 0-255, so they are stored as bytes (``QT_8bit_direct``): a quarter of the memory, the
   same distances. The graph is built on one thread, so it is the same graph every run.
2. **Vote.** Each generation keypoint looks up its ``NEIGHBOURS`` nearest descriptors and votes for the
   nearest ``SHARED_VOTES`` references among them when each is clearly nearer than the next reference
   (Lowe's ratio test, ``RATIO``, with the rival taken from a *different* reference: a reference's own
   repeated or mirrored descriptors never cancel its vote, and two near-duplicate references, two
   photographs of one face or one picture stored twice, share a vote instead of cancelling each other's).
   A keypoint votes at most once per reference.
3. **Shortlist.** The ``TOP_K`` references with the most votes (at least ``TOP_K_MIN_VOTES``), and every reference with
   at least ``MIN_INLIERS`` votes (a paste has that many matches, or the full match would not flag it),
   at most ``MAX_CANDIDATES`` in all.
4. **Verify.** Only the shortlisted references are matched in full by ``find_in_any_pose``: the same
   stage, thresholds and flags as before, on a handful of references instead of the pool.

Recall (tests/scoring/test_copy_index.py): every reference the exhaustive per-pair search flags is on
the shortlist, for pastes plain, mirrored, turned and at 5 % of the area among 200 distinct references.
Cost (bench/copy_scaling.py, docs/copies.md): building the index is linear in the pool, once per run;
a generation's search grows by well under 1.5x from 100 to 2,000 references.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

# copies.Keypoints and copies.PoseMatch, by name only: this module sits below copies.py, which imports it.
Keypoints = Any
PoseMatch = Any

MIN_VOTES = 6  # votes that shortlist a reference whatever its rank: the keypoint stage's MIN_INLIERS (tested equal)
INDEX_VERSION = 2  # of the index, the vote and the shortlist: part of the foreign search's cache key
NEIGHBOURS = 16  # nearest pool descriptors looked up per generation keypoint
SHARED_VOTES = 2  # the nearest references that may share one keypoint's vote; the next one is the rival
RATIO = 0.8  # Lowe's ratio against the rival reference's distance (the keypoint stage's own ratio)
TOP_K = 8  # references shortlisted by rank when they have at least TOP_K_MIN_VOTES votes
# Half of MIN_VOTES: a reference with fewer votes is not worth a full match. Measured on 49 random pastes of
# DreamBooth photographs (crops of 30-100 %, 3-25 % of the area, mirrored or turned, among 120 references;
# bench/copy_votes.py): every pasted reference the full match flagged had 7 votes or more (median 55).
# Verifying the top 8 at one or two votes each cost ~60 % of the copy check's matchings on the samples.
TOP_K_MIN_VOTES = 3
MAX_CANDIDATES = 64  # shortlisted references at most per generation: bounds the verification's cost
EXHAUSTIVE_UP_TO = 16  # references: a pool this small is matched in full, with no index
# descriptors: below, an exact scan. Measured (1,500 queries, k = 16, one thread): the scan 0.035 / 0.058
# / 0.109 / 0.221 s at 3k / 6k / 12k / 25k descriptors, the graph 0.052 / 0.059 / 0.064 / 0.074 s.
EXACT_BELOW = 6_000
HNSW_M = 16  # graph links per descriptor
HNSW_EF_CONSTRUCTION = 32  # measured recall@1 0.99+ at efSearch 64 on SIFT of distinct pictures
HNSW_EF_SEARCH = 64  # fixed: the query cost does not grow with the pool


@dataclass(frozen=True)
class PoolIndex:
    """The descriptors of a pool of references, searchable at once.

    ``owner[i]`` is the position (in the order the references were given) of the reference whose
    descriptor ``i`` is, ``mirrored[i]`` whether it came from the reference's mirror image.
    """

    index: Any  # a faiss index over every descriptor (None: a small pool, matched in full)
    owner: np.ndarray  # (n,) int32
    mirrored: np.ndarray  # (n,) bool
    references: int  # how many references (some may have no descriptor)
    exact: bool  # IndexFlatL2 or no index (True), or HNSW (False)
    as_bytes: bool  # descriptors stored as bytes (``QT_8bit_direct``): queries are rounded to bytes too

    @property
    def descriptors(self) -> int:
        return len(self.owner)


@contextmanager
def _faiss_threads(count: int) -> Iterator[None]:
    """faiss's OpenMP threads set to ``count`` for the block, restored after: one thread to build the
    graph (a graph built by several threads depends on their timing) and in each search run from the
    thread pool (the pool spreads the generations over the cores; OpenMP inside would oversubscribe)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(count)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _stored_as_bytes(descriptors: np.ndarray) -> bool:
    """Whether every descriptor value is a whole number 0-255 (OpenCV's SIFT rounds them so), which
    ``QT_8bit_direct`` stores without loss."""
    return bool(np.all((descriptors >= 0) & (descriptors <= 255) & (descriptors == np.round(descriptors))))


def build_index(pool: Sequence[tuple[Keypoints, Keypoints]]) -> PoolIndex:
    """One index over the descriptors of every reference of ``pool`` (plain and mirrored keypoints, as
    ``copies.reference_keypoints`` returns them). Linear in the pool; deterministic."""
    import faiss

    if len(pool) <= EXHAUSTIVE_UP_TO:
        return PoolIndex(None, np.zeros(0, np.int32), np.zeros(0, bool), len(pool), True, False)
    blocks, owner, mirrored = [], [], []
    for position, orientations in enumerate(pool):
        for is_mirror, points in enumerate(orientations):
            if points.descriptors is None or not len(points.descriptors):
                continue
            blocks.append(np.asarray(points.descriptors, dtype=np.float32))
            owner.append(np.full(len(points.descriptors), position, dtype=np.int32))
            mirrored.append(np.full(len(points.descriptors), bool(is_mirror)))
    dim = 128
    vectors = np.ascontiguousarray(np.concatenate(blocks)) if blocks else np.zeros((0, dim), np.float32)
    exact = len(vectors) < EXACT_BELOW
    as_bytes = not exact and _stored_as_bytes(vectors)
    if exact:
        index = faiss.IndexFlatL2(dim)
    elif as_bytes:
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit_direct, HNSW_M)
    else:  # descriptors that are not bytes (another extractor): full floats
        index = faiss.IndexHNSWFlat(dim, HNSW_M)
    if not exact:
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
    with _faiss_threads(1):
        if not index.is_trained:
            index.train(vectors[: min(len(vectors), 1000)])  # 8bit_direct has nothing to learn
        if len(vectors):
            index.add(vectors)
    return PoolIndex(
        index,
        np.concatenate(owner) if owner else np.zeros(0, np.int32),
        np.concatenate(mirrored) if mirrored else np.zeros(0, bool),
        len(pool),
        exact,
        as_bytes,
    )


def votes(pool: PoolIndex, generation: Keypoints) -> np.ndarray:
    """Per reference of the pool, how many of the generation's keypoints vote for it (see the module's
    step 2): an ``(references,)`` int64 array."""
    counts = np.zeros(pool.references, dtype=np.int64)
    if pool.index is None or generation.descriptors is None or not len(generation.descriptors) or not pool.descriptors:
        return counts
    queries = np.ascontiguousarray(generation.descriptors, dtype=np.float32)
    if pool.as_bytes:  # faiss casts a query to bytes there without rounding (-1 would become 255)
        queries = np.clip(np.round(queries), 0, 255).astype(np.float32)
    with _faiss_threads(1):
        distances, found = pool.index.search(queries, min(NEIGHBOURS, pool.descriptors))
    valid = found >= 0
    refs = np.where(valid, pool.owner[np.maximum(found, 0)], -1)
    # The first appearance of each reference in a keypoint's neighbour list, and its rank among the
    # distinct references of that list (1 = the nearest reference).
    width = refs.shape[1]
    earlier = np.tril(np.ones((width, width), dtype=bool), k=-1)  # [j, i]: i comes before j
    seen_before = ((refs[:, :, None] == refs[:, None, :]) & earlier[None]).any(axis=2)
    first = valid & ~seen_before
    rank = np.cumsum(first, axis=1)
    # The rival: the first reference after the SHARED_VOTES nearest; none in the list (the nearest
    # references fill it) lets them all vote.
    rival_at = first & (rank == SHARED_VOTES + 1)
    rival = np.where(rival_at.any(axis=1), distances[np.arange(len(refs)), rival_at.argmax(axis=1)], np.inf)
    # faiss gives squared L2 distances: the ratio is squared with them.
    voting = first & (rank <= SHARED_VOTES) & (distances < (RATIO**2) * rival[:, None])
    np.add.at(counts, refs[voting], 1)
    return counts


def shortlist(pool: PoolIndex, generation: Keypoints, exclude: Iterable[int] = ()) -> list[tuple[int, int]]:
    """The references worth the full match, as ``(position, votes)``, most votes first (ties by
    position): the ``TOP_K`` most voted for (with at least ``TOP_K_MIN_VOTES``) and every one with at least
    ``MIN_INLIERS`` votes, at most ``MAX_CANDIDATES``; every reference of a small pool (votes 0); the
    positions in ``exclude`` (the prompt's own references, searched by their own stage) never."""
    excluded = set(exclude)
    if pool.index is None:  # a small pool: every reference
        return [(position, 0) for position in range(pool.references) if position not in excluded]
    counts = votes(pool, generation)
    counts[sorted(excluded)] = 0
    order = np.lexsort((np.arange(len(counts)), -counts))  # stable: most votes, then lowest position
    chosen = [
        (int(p), int(counts[p]))
        for rank, p in enumerate(order)
        if counts[p] >= MIN_VOTES or (rank < TOP_K and counts[p] >= TOP_K_MIN_VOTES)
    ]
    return chosen[:MAX_CANDIDATES]


@dataclass(frozen=True)
class Candidate:
    """A shortlisted reference and the keypoint stage's verdict on it."""

    position: int
    votes: int
    pose: PoseMatch


def search_pool(
    pool: PoolIndex,
    generation: Keypoints,
    prepared: Callable[[int], tuple[Keypoints, Keypoints]],
    exclude: Iterable[int] = (),
    *,
    verify: Callable[..., PoseMatch],
) -> list[Candidate]:
    """The foreign search of one generation: shortlist, then ``verify`` (the keypoint stage,
    ``copies.find_in_any_pose``: passed in, so this module sits below copies.py) on the shortlisted
    references only (``prepared(position)`` gives a reference's plain and mirrored keypoints)."""
    return [
        Candidate(position, count, verify(generation, *prepared(position)))
        for position, count in shortlist(pool, generation, exclude)
    ]


def pool_digest(reference_hashes: Iterable[str]) -> str:
    """One hash of a pool (its references' content hashes, in order) and the index's version: the
    foreign search's cache key holds it, so another pool, or another index, searches again."""
    digest = hashlib.sha256(f"copy-index-v{INDEX_VERSION}".encode())
    for ref_hash in reference_hashes:
        digest.update(ref_hash.encode() + b"\0")
    return digest.hexdigest()


# --- keeping a large pool's keypoints in memory -------------------------------------------------------


def _as_bytes(array: np.ndarray | None) -> np.ndarray | None:
    return array.astype(np.uint8) if array is not None and _stored_as_bytes(array) else array


def compact(points: Keypoints) -> Keypoints:
    """``points`` with its grey levels and descriptors held as bytes when they are whole numbers 0-255
    (they are: grey levels from an 8-bit image, SIFT's rounded descriptors): a reference's two
    orientations take ~0.25 MB instead of ~1 MB, which at 2,000 references is 0.5 GB instead of 2."""
    return replace(points, grey=_as_bytes(points.grey), descriptors=_as_bytes(points.descriptors))


def expand(points: Keypoints) -> Keypoints:
    """The float32 keypoints the keypoint stage takes back from :func:`compact`'s."""
    descriptors = None if points.descriptors is None else points.descriptors.astype(np.float32, copy=False)
    return replace(points, grey=points.grey.astype(np.float32, copy=False), descriptors=descriptors)


# --- spreading the work over the cores ----------------------------------------------------------------

T = TypeVar("T")
R = TypeVar("R")


def workers() -> int:
    """Threads for the copy check: the cores this process may use (its CPU affinity). OpenCV and faiss
    release the GIL, so threads run in parallel."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


def parallel_map(function: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """``[function(x) for x in items]`` over a thread pool, in ``items``' order (the results do not
    depend on the number of threads)."""
    threads = min(threads or workers(), len(items))
    if threads <= 1:
        return [function(x) for x in items]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(function, items))
