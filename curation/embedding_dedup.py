"""Near-duplicate detection on image embeddings (DINOv2 CLS by default), with an auditable report.

The perceptual hash of :mod:`idbench.builders.dedup` catches re-encoded and resized copies; it misses crops,
flips, recolours and re-renders of one picture, which a self-supervised embedding still places close
together. CogCanvas dedups its crawled references "using DINOv2 feature similarity"; this module is
that step:

1. :func:`image_features`: one L2-normalised vector per image, through the scorer's feature store, so
   every image is encoded once per model and a rerun reads the cache.
2. :func:`find_near_duplicates`: every pair with cosine >= ``threshold``, found without comparing every
   pair once the pool is large; pairs joined into clusters; one member of each cluster kept by a fixed
   rule; an :class:`EmbeddingDedupReport` that names every removed image, its kept twin and the
   similarity between them, as JSON or CSV for the maintainer who audits it.

Pair search
-----------
``index="exact"`` compares every pair with blocked matrix products (float32, a block of rows at a
time against the rows after it, so memory stays at ``block x n``). ``index="ivf"`` is an inverted-file
index on inner product, the search of a faiss ``IndexIVFFlat``: faiss' seeded k-means splits the pool
into ``nlist`` cells, each vector is stored in its nearest cell, and each vector is compared only with
the vectors stored in its ``nprobe`` nearest cells (about ``nprobe / nlist`` of the pool). ``"auto"``
takes the index when faiss is installed and the pool has at least :data:`INDEX_MIN_POOL` vectors
(below that the exact search takes under a second, see ``bench/embedding_dedup.py``), else the exact
search.

faiss trains the cells and finds each vector's nearest cells; the comparisons within the cells are
grouped by cell and done here as matrix products: all the vectors that probe a cell against that
cell's vectors at once. ``IndexIVFFlat.range_search`` does the same comparisons query by query,
streaming every probed cell from memory once per query; that is memory-bound (at 20,000 vectors of
768 floats and nprobe 16: ~40 GB read, against ~1 GB grouped by cell). On the bench's pool, training
and searching took 0.66 s grouped against 1.64 s with ``IndexIVFFlat`` (2.6 s against 6.6 s at
50,000), on 2 CPU cores. The candidates are the same: ``tests/curation/test_embedding_dedup.py``
checks them against an ``IndexIVFFlat`` built on the same cells.

Why an inverted file and not HNSW: (a) *range search*: cells answer "every vector with inner product
above r" directly, so a group of 50 copies is found whole; an HNSW graph answers k nearest neighbours,
and a fixed ``k`` silently truncates large duplicate groups (a k that adapts per query is possible but
adds a loop for no gain here); (b) *reproducibility*: the k-means is seeded, whereas a multi-threaded
HNSW build inserts in a scheduling-dependent order, so two runs could find different candidate pairs
and write different reports; (c) no graph to build or hold, and the vectors are compared exactly (no
quantisation): the only approximation is which cells are visited.

Recall: a near duplicate at cosine >= 0.9 is among its twin's very nearest neighbours, so it is missed
only when the two sit on opposite sides of a cell border *and* the twin's cell is not among the
query's ``nprobe`` nearest centroids; every pair is searched from both ends, so both searches must
miss it. ``nlist = 4 sqrt(n)`` cells (capped at n / 39 so that cells stay populated) and
``nprobe = 16``: on the bench's 20,000 vectors with category structure (as real features have) every
planted pair was found, at nprobe 2 already; on a pool with no structure at all (isotropic random
vectors, the worst case for cells) nprobe 8 found 6,211 of 6,219 pairs, 16 found 6,218 and 32 all,
and the clusters equalled the exact ones in all three (a missed pair's images were still joined
through the other copies of their group). A missed pair can leave a duplicate in the pool or change
which member of a group is kept; it cannot make a removal unjustified (with the chain guard every
removed image has a kept twin at >= threshold, whatever was missed). ``index="exact"`` is there when
completeness matters more than time. Candidates are fetched with a small slack below the threshold
and every candidate pair's cosine is recomputed in float64 from the normalised vectors, so the exact
and the indexed search decide ``>= threshold`` by the same arithmetic and can only differ by pairs
the index did not visit.

Clusters and the chain problem
------------------------------
Pairs are joined by union-find into connected components (single linkage). Single linkage chains:
A~B and B~C put A and C together even when cos(A, C) is well below the threshold (a slow pan over a
scene, a series of re-colourings). The angle between two vectors obeys the triangle inequality, so a
chain of L links each >= t keeps the ends within ``L * arccos(t)``: at t = 0.9, two links guarantee
only cos >= 0.62. That is too loose to delete an image on, so by default (``chain_guard=True``) a
component is resolved around its best members: the best-ranked member is kept and every member whose
*direct* cosine with it is >= threshold is removed as its duplicate; among the members left, the best
is kept too, and so on. Hence every removed image has a direct similarity >= threshold with its kept
twin (what an auditor checks by looking at the two), and no two kept images of a component are above
the threshold. ``chain_guard=False`` gives plain single linkage (one keeper per component); the report
then also flags removals whose direct similarity is below the threshold.

Which member is kept: the highest ``quality`` score (e.g. the LAION aesthetic score from
:mod:`idbench.curation.quality`), then the largest ``resolution`` (width x height), then the smallest id, so the
result never depends on input order.

Similarities in the report: ``similarity`` is the direct cosine of the removed image and its kept
twin; ``linkage_similarity`` is the single-linkage similarity of the two in the graph of found pairs
(the best path's weakest link, read off a maximum spanning forest), which is >= threshold by
construction. With the chain guard, ``similarity >= threshold`` holds too.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from idbench.evaluate_pkg.context import Models

#: Pools at least this large use the index under ``index="auto"`` (when faiss is installed). Below
#: it the exact search takes under a second (0.6 s at 10,000 x 768 on 2 cores; the index breaks even
#: near 5,000) and misses nothing, so a fraction of a second is not worth any approximation.
INDEX_MIN_POOL = 10_000
#: Cells of the IVF index visited per query (see the module docstring for the recall argument).
DEFAULT_NPROBE = 16
#: IVF cells per sqrt(pool size): more cells scan less of the pool per query but cost more to train.
CELLS_PER_SQRT_N = 4
#: Vectors per IVF cell at least (faiss' floor for a meaningful k-means): nlist is capped at n / 39,
#: so that a small pool forced onto the index does not get near-empty cells.
MIN_POINTS_PER_CELL = 39
#: k-means trains on at most this many points per cell (a seeded sample) for this many iterations:
#: cells only need to be roughly balanced, recall comes from probing several of them, and training
#: is the index's largest fixed cost (nlist^2 x points per cell x iterations). In the bench (20,000
#: vectors, 512 cells) 16 points and 5 iterations trained in 0.5 s with a largest list of 213 vectors;
#: 10 iterations took 1.3 s (largest list 214), 39 points 1.2 s (223).
TRAIN_POINTS_PER_CELL = 16
TRAIN_ITERATIONS = 5
#: The index fetches candidates this far below the threshold (float32 scores), and the float64
#: re-check decides; so the exact and the indexed search agree on borderline pairs.
CANDIDATE_SLACK = 1e-3
#: Rows of the pool compared at once by the exact search (a block x n float32 matrix: 40 MB at n=20k).
EXACT_BLOCK = 512
#: The k-means seed: the same pool always gets the same cells, so reruns write the same report.
KMEANS_SEED = 1234
#: A starting point for DINOv2-base CLS features, not a value calibrated here (no real weights in the
#: test environment): DINOv2 is trained to be invariant to flips, crops and colour jitter, so resized,
#: re-encoded and flipped copies are expected to stay well above it, and two different photographs of
#: one product below it. The report lists every similarity, so a maintainer can tune it on a real pool.
DEFAULT_THRESHOLD = 0.9

IndexKind = Literal["auto", "exact", "ivf"]


# --- features ---------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """The scorer's feature cache (``$IDBENCH_CACHE``): curation and scoring share encoded images."""
    from idbench.evaluate_pkg.runner import default_cache_dir as scorer_cache

    return scorer_cache()


def load_models(profile: str = "paper", *, device: str = "cpu", models: Models | None = None) -> Models:
    """``models`` if given (a caller sharing loaded models), else the profile's models, loaded on use."""
    if models is not None:
        return models
    from idbench.evaluate_pkg.context import Models, ScoreOptions

    return Models(ScoreOptions(profile=profile, device=device))


def image_features(
    images: Mapping[str, bytes],
    role: str = "dinov2",
    profile: str = "paper",
    *,
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    models: Models | None = None,
    batch_size: int = 32,
    num_workers: int = 0,
) -> dict[str, np.ndarray]:
    """id -> L2-normalised float32 feature of each image, by the profile's encoder for ``role``.

    ``role`` is a role of the scoring profiles: ``"dinov2"`` (the CLS token) for dedup, ``"clip"`` (the
    projected image embedding) for the quality filter. Images go through the feature store keyed by
    content hash, so identical bytes under two ids are encoded once, and a rerun (or the scorer, later)
    reads the cache in ``cache_dir`` (default ``$IDBENCH_CACHE``). Pass ``models`` to share models
    already loaded (they carry their own device).

    Example::

        vectors = image_features({"cup_1": Path("cup_1.jpg").read_bytes(), ...}, profile="tiny")
        report = find_near_duplicates(vectors, threshold=0.9)
    """
    from idbench.evaluate_pkg.features import FeatureStore
    from idbench.evaluate_pkg.images import content_hash

    models = load_models(profile, device=device, models=models)
    hashes = {image_id: content_hash(data) for image_id, data in images.items()}
    loaders = {}
    for image_id, data in images.items():
        loaders.setdefault(hashes[image_id], lambda data=data: data)
    store = FeatureStore(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    features = store.encode_images(models[role], loaders, batch_size=batch_size, num_workers=num_workers)
    out = {}
    for image_id, key in hashes.items():
        found = features[key]
        name = "cls" if "cls" in found else "embedding"
        vector = np.asarray(found[name], dtype=np.float64).reshape(-1)
        norm = float(np.linalg.norm(vector))
        if not math.isfinite(norm) or norm == 0.0:
            raise ValueError(f"image {image_id!r}: the {role} feature is zero or not finite, it has no direction")
        out[image_id] = (vector / norm).astype(np.float32)
    return out


def feature_source(models: Models, role: str = "dinov2") -> dict[str, Any]:
    """What made the vectors, for the report: the role's model (name, Hub id, revision, weights key)
    and whether its weights are random tiny ones (then the dedup decisions check plumbing only).

    Call it after :func:`image_features` has loaded the model; pass it as ``find_near_duplicates(...,
    features=...)``.
    """
    from idbench.evaluate_pkg.models.registry import is_plumbing

    models[role]  # loaded on first use; a no-op when image_features already loaded it
    identity = models.used([role])[role]
    return {"role": role, **identity, "plumbing": is_plumbing(identity["name"])}


# --- the report -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemovedDuplicate:
    """One image dropped as a near duplicate of ``kept_id``."""

    id: str
    kept_id: str
    similarity: float  # direct cosine of the two (>= threshold with the chain guard)
    linkage_similarity: float  # single-linkage similarity in the graph of found pairs (>= threshold)
    cluster: int  # index into EmbeddingDedupReport.clusters


@dataclass(frozen=True)
class DuplicateCluster:
    """A connected group of images linked by pairs >= threshold (single linkage)."""

    index: int
    ids: tuple[str, ...]  # best-ranked first (the keep rule's order)
    kept: tuple[str, ...]  # one id, or more when the chain guard split a chained group


@dataclass(frozen=True)
class EmbeddingDedupReport:
    """What :func:`find_near_duplicates` decided, for an auditing maintainer.

    ``clusters`` holds only groups of two or more; ``kept`` is every id kept (singletons included) in
    input order; ``removed`` one entry per dropped id. ``settings`` records how it was computed.
    """

    threshold: float
    settings: dict[str, Any]
    clusters: tuple[DuplicateCluster, ...]
    kept: tuple[str, ...]
    removed: tuple[RemovedDuplicate, ...]
    quality: dict[str, float] = field(default_factory=dict)
    resolution: dict[str, int] = field(default_factory=dict)

    @property
    def removed_ids(self) -> set[str]:
        return {entry.id for entry in self.removed}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: settings, counts, clusters, removed (with the keep rule's inputs)."""
        return {
            "threshold": self.threshold,
            "settings": self.settings,
            "counts": {
                "images": len(self.kept) + len(self.removed),
                "kept": len(self.kept),
                "removed": len(self.removed),
                "clusters": len(self.clusters),
            },
            "clusters": [{"index": c.index, "ids": list(c.ids), "kept": list(c.kept)} for c in self.clusters],
            "removed": [self._removed_row(entry) for entry in self.removed],
            "kept": list(self.kept),
        }

    def _removed_row(self, entry: RemovedDuplicate) -> dict[str, Any]:
        row = asdict(entry)
        row["chained"] = entry.similarity < self.threshold
        for side, image_id in (("removed", entry.id), ("kept", entry.kept_id)):
            row[f"quality_{side}"] = self.quality.get(image_id)
            row[f"resolution_{side}"] = self.resolution.get(image_id)
        return row

    def write_json(self, path: str | os.PathLike) -> Path:
        return write_text_atomic(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    def csv_text(self) -> str:
        """One row per removed image: who, kept twin, both similarities, the keep rule's inputs."""
        columns = [
            "id",
            "kept_id",
            "similarity",
            "linkage_similarity",
            "chained",
            "cluster",
            "quality_removed",
            "quality_kept",
            "resolution_removed",
            "resolution_kept",
        ]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for entry in self.removed:
            row = self._removed_row(entry)
            writer.writerow({name: "" if row[name] is None else row[name] for name in columns})
        return buffer.getvalue()

    def write_csv(self, path: str | os.PathLike) -> Path:
        return write_text_atomic(path, self.csv_text())


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename: never a half-written report."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


# --- input checks -----------------------------------------------------------------------------------


def unit_matrix(vectors: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
    """(ids, float64 (n, d) matrix of unit rows); a clear error naming the id for any bad vector."""
    ids = list(vectors)
    if not ids:
        return [], np.zeros((0, 0))
    rows = []
    dim = None
    for image_id in ids:
        if not isinstance(image_id, str):
            raise TypeError(f"vector ids must be strings, got {image_id!r} ({type(image_id).__name__})")
        try:
            vector = np.asarray(vectors[image_id], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"vector {image_id!r}: not a numeric array ({err})") from None
        if vector.ndim != 1:
            raise ValueError(f"vector {image_id!r}: expected a 1-D vector, got shape {vector.shape}")
        if dim is None:
            dim = vector.shape[0]
            if dim == 0:
                raise ValueError(f"vector {image_id!r}: empty vector (dimension 0)")
        elif vector.shape[0] != dim:
            raise ValueError(
                f"vector {image_id!r}: dimension {vector.shape[0]}, expected {dim} (the dimension of {ids[0]!r})"
            )
        rows.append(vector)
    matrix = np.stack(rows)
    finite = np.isfinite(matrix)
    for k in np.flatnonzero(~finite.all(axis=1))[:1]:
        bad = int(np.count_nonzero(~finite[k]))
        raise ValueError(f"vector {ids[k]!r}: {bad} non-finite value(s) (NaN or inf)")
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    for k in np.flatnonzero((norms == 0) | ~np.isfinite(norms))[:1]:
        raise ValueError(f"vector {ids[k]!r}: zero (or overflowing) norm, its cosine is undefined")
    return ids, matrix / norms[:, None]


def _scores(name: str, values: Mapping[str, Any] | None, ids: Sequence[str]) -> dict[str, float]:
    if values is None:
        return {}
    out = {}
    missing = [image_id for image_id in ids if image_id not in values]
    if missing:
        raise ValueError(f"{name}: no value for {len(missing)} id(s), first {missing[0]!r}")
    for image_id in ids:
        value = values[image_id]
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} of {image_id!r}: not a number ({value!r})") from None
        if not math.isfinite(number):
            raise ValueError(f"{name} of {image_id!r}: not finite ({value!r})")
        out[image_id] = number
    return out


def _pixels(values: Mapping[str, Any] | None, ids: Sequence[str]) -> dict[str, int]:
    """Resolution as pixel counts; each value is ``(width, height)`` or a pixel count."""
    if values is None:
        return {}
    flat = {}
    for image_id in ids:
        value = values.get(image_id)
        if value is None:
            raise ValueError(f"resolution: no value for {image_id!r}")
        if isinstance(value, (tuple, list)) and len(value) == 2:
            width, height = value
            flat[image_id] = _positive_int(width, image_id) * _positive_int(height, image_id)
        else:
            flat[image_id] = _positive_int(value, image_id)
    return flat


def _positive_int(value: Any, image_id: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"resolution of {image_id!r}: expected (width, height) or a pixel count > 0, got {value!r}")
    return int(value)


# --- pair search ------------------------------------------------------------------------------------


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def ivf_nlist(n: int) -> int:
    """Cells of the IVF index for ``n`` vectors: 4 sqrt(n), with >= MIN_POINTS_PER_CELL points per cell."""
    return max(1, min(round(CELLS_PER_SQRT_N * math.sqrt(n)), n // MIN_POINTS_PER_CELL))


def choose_index(n: int, index: IndexKind = "auto") -> Literal["exact", "ivf"]:
    """The search ``index="auto"`` resolves to for ``n`` vectors (or the one asked for, checked)."""
    if index == "exact":
        return "exact"
    if index == "ivf":
        if not faiss_available():
            raise ModuleNotFoundError("index='ivf' needs faiss: pip install 'idbench[curation]' (faiss-cpu)")
        return "ivf"
    if index != "auto":
        raise ValueError(f"index must be 'auto', 'exact' or 'ivf', got {index!r}")
    return "ivf" if n >= INDEX_MIN_POOL and faiss_available() else "exact"


def similar_pairs(
    unit: np.ndarray,
    threshold: float,
    *,
    index: Literal["exact", "ivf"] = "exact",
    nprobe: int = DEFAULT_NPROBE,
    nlist: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` of rows of ``unit`` (unit vectors, float64) with cosine >= ``threshold``.

    Returns ``(i, j, cosine)`` arrays sorted by (i, j); cosines are float64, recomputed exactly for
    every candidate whichever search found it. ``index="ivf"`` may miss pairs (see the module docstring);
    ``"exact"`` misses none.
    """
    n = unit.shape[0]
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    search = unit.astype(np.float32)
    parts_i, parts_j = [], []
    if index == "exact":
        chunks = _exact_candidates(search, threshold)
    else:
        chunks = _ivf_candidates(search, threshold, nprobe, nlist)
    for i, j in chunks:
        low, high = np.minimum(i, j), np.maximum(i, j)
        keep = low != high
        parts_i.append(low[keep])
        parts_j.append(high[keep])
    i = np.concatenate(parts_i) if parts_i else np.zeros(0, dtype=np.int64)
    j = np.concatenate(parts_j) if parts_j else np.zeros(0, dtype=np.int64)
    keys = np.unique(i.astype(np.int64) * n + j)  # each pair once, however many searches found it
    i, j = keys // n, keys % n
    cosine = np.einsum("ij,ij->i", unit[i], unit[j])
    keep = cosine >= threshold
    return i[keep], j[keep], cosine[keep]


def _exact_candidates(search: np.ndarray, threshold: float) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of rows against the rows from the block on: each unordered pair is computed once."""
    n = search.shape[0]
    for start in range(0, n, EXACT_BLOCK):
        stop = min(n, start + EXACT_BLOCK)
        scores = search[start:stop] @ search[start:].T
        rows, cols = np.nonzero(scores >= threshold - CANDIDATE_SLACK)
        i, j = rows + start, cols + start
        upper = j > i
        yield i[upper], j[upper]


def ivf_cells(search: np.ndarray, nlist: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
    """The IVF partition of ``search`` (unit rows, float32): ``(centroids, probes)``.

    ``centroids`` (nlist, d): faiss' seeded spherical k-means (unit centroids, so the nearest cell by
    L2 and by inner product is the same cell). ``probes`` (n, nprobe): each vector's ``nprobe`` cells of
    highest inner product, nearest first; ``probes[:, 0]`` is the cell the vector is stored in. These
    are what a faiss ``IndexIVFFlat`` on inner product trains, stores and probes.
    """
    import faiss

    n, dim = search.shape
    kmeans = faiss.Kmeans(
        dim,
        nlist,
        niter=TRAIN_ITERATIONS,
        seed=KMEANS_SEED,
        spherical=True,
        max_points_per_centroid=TRAIN_POINTS_PER_CELL,
        min_points_per_centroid=1,  # nlist is already capped; no warning for a small forced pool
        verbose=False,
    )
    kmeans.train(search)
    quantizer = faiss.IndexFlatIP(dim)
    quantizer.add(kmeans.centroids)
    _, probes = quantizer.search(search, nprobe)
    return kmeans.centroids, probes.astype(np.int64)


def _ivf_candidates(
    search: np.ndarray, threshold: float, nprobe: int, nlist: int | None
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every vector against the vectors stored in its ``nprobe`` nearest cells, one cell at a time.

    This is the search of a faiss ``IndexIVFFlat`` range search, grouped by cell instead of by query:
    all the queries that probe a cell are compared with that cell's vectors in one matrix product, so
    each cell is read once per cell rather than once per query (see the module docstring).
    """
    n = search.shape[0]
    cells = ivf_nlist(n) if nlist is None else int(nlist)
    if not 1 <= cells <= n:
        raise ValueError(f"nlist must be between 1 and the pool size {n}, got {nlist}")
    probe = max(1, min(int(nprobe), cells))
    _, probes = ivf_cells(search, cells, probe)
    stored = probes[:, 0]
    member_order = np.argsort(stored, kind="stable")
    member_bounds = np.searchsorted(stored[member_order], np.arange(cells + 1))
    probed = probes.ravel()
    query_of = np.repeat(np.arange(n, dtype=np.int64), probe)
    query_order = np.argsort(probed, kind="stable")
    query_bounds = np.searchsorted(probed[query_order], np.arange(cells + 1))
    for cell in range(cells):
        members = member_order[member_bounds[cell] : member_bounds[cell + 1]]
        if not members.size:
            continue
        queries = query_of[query_order[query_bounds[cell] : query_bounds[cell + 1]]]
        stored_vectors = search[members]
        # Rows per product: the exact search's memory bound (EXACT_BLOCK x n) even for a giant cell.
        rows = max(EXACT_BLOCK, EXACT_BLOCK * n // members.size)
        for start in range(0, queries.size, rows):
            chunk = queries[start : start + rows]
            hit_rows, hit_cols = np.nonzero(search[chunk] @ stored_vectors.T >= threshold - CANDIDATE_SLACK)
            yield chunk[hit_rows], members[hit_cols]


# --- clustering -------------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True


Forest = dict[int, list[tuple[int, float]]]  # node -> (neighbour, cosine) edges of a spanning forest


def _spanning_forest(n: int, i: np.ndarray, j: np.ndarray, cosine: np.ndarray) -> tuple[_UnionFind, Forest]:
    """Kruskal on the found pairs, strongest first: components and a maximum spanning forest.

    The forest keeps, for every two connected images, the path whose weakest link is the strongest
    (the single-linkage similarity), so the report can give it without keeping every pair.
    """
    order = np.lexsort((j, i, -cosine))  # strongest first; ties by (i, j) so the forest is reproducible
    sets = _UnionFind(n)
    tree: Forest = {}
    for a, b, weight in zip(i[order].tolist(), j[order].tolist(), cosine[order].tolist()):
        if sets.union(a, b):
            tree.setdefault(a, []).append((b, weight))
            tree.setdefault(b, []).append((a, weight))
    return sets, tree


def _bottlenecks(tree: Forest, source: int) -> dict[int, float]:
    """For every node of ``source``'s tree: the weakest link on the tree path from ``source``."""
    best = {source: math.inf}
    stack = [source]
    while stack:
        node = stack.pop()
        for neighbour, weight in tree.get(node, ()):
            if neighbour not in best:
                best[neighbour] = min(best[node], weight)
                stack.append(neighbour)
    return best


def find_near_duplicates(
    vectors: Mapping[str, Any],
    threshold: float,
    *,
    index: IndexKind = "auto",
    nprobe: int = DEFAULT_NPROBE,
    nlist: int | None = None,
    quality: Mapping[str, float] | None = None,
    resolution: Mapping[str, Any] | None = None,
    chain_guard: bool = True,
    features: Mapping[str, Any] | None = None,
) -> EmbeddingDedupReport:
    """Near-duplicate clusters among ``vectors`` (id -> feature) and which member of each to keep.

    ``threshold``: cosine at or above which two images are duplicates (features are normalised
    here). ``index``: ``"auto"`` (faiss IVF for pools of at least :data:`INDEX_MIN_POOL` when faiss is
    installed, else exact), ``"exact"`` or ``"ivf"``; ``nprobe`` / ``nlist`` tune the IVF index.
    ``quality`` (id -> score, higher is better) and ``resolution`` (id -> ``(width, height)`` or pixel
    count) choose the member kept: highest quality, then most pixels, then smallest id. When given,
    each must have a value for every id. ``chain_guard``: see the module docstring. ``features``:
    what made the vectors (:func:`feature_source`), recorded in the report's settings.

    >>> report = find_near_duplicates({"a": [1.0, 0.0], "b": [0.99, 0.1], "c": [0.0, 1.0]}, 0.95,
    ...                               resolution={"a": (10, 10), "b": (20, 20), "c": (10, 10)})
    >>> [(r.id, r.kept_id) for r in report.removed], report.kept
    ([('a', 'b')], ('b', 'c'))
    """
    threshold = float(threshold)
    if not (math.isfinite(threshold) and -1.0 <= threshold <= 1.0):
        raise ValueError(f"threshold must be a cosine in [-1, 1], got {threshold!r}")
    ids, unit = unit_matrix(vectors)
    scores = _scores("quality", quality, ids)
    pixels = _pixels(resolution, ids)
    n = len(ids)
    chosen = choose_index(n, index)
    i, j, cosine = similar_pairs(unit, threshold, index=chosen, nprobe=nprobe, nlist=nlist)
    sets, tree = _spanning_forest(n, i, j, cosine)

    def rank(k: int) -> tuple[float, int, str]:
        return (-scores.get(ids[k], 0.0), -pixels.get(ids[k], 0), ids[k])

    members: dict[int, list[int]] = {}
    for k in range(n):
        members.setdefault(sets.find(k), []).append(k)
    ranked = (sorted(group, key=rank) for group in members.values() if len(group) > 1)
    groups = sorted(ranked, key=lambda group: ids[group[0]])  # clusters numbered by their keeper's id

    clusters: list[DuplicateCluster] = []
    removed: list[RemovedDuplicate] = []
    dropped: set[int] = set()
    for number, group in enumerate(groups):
        keepers, twins = _resolve(group, unit, threshold, chain_guard)
        for keeper in keepers:
            links = _bottlenecks(tree, keeper)
            for member, similarity in twins[keeper]:
                dropped.add(member)
                removed.append(
                    RemovedDuplicate(
                        id=ids[member],
                        kept_id=ids[keeper],
                        similarity=similarity,
                        linkage_similarity=float(links[member]),
                        cluster=number,
                    )
                )
        clusters.append(DuplicateCluster(number, tuple(ids[k] for k in group), tuple(ids[k] for k in keepers)))

    settings = {
        "index": chosen,
        "requested_index": index,
        "chain_guard": chain_guard,
        "pairs_found": int(len(i)),
        "dimension": int(unit.shape[1]) if n else 0,
        "keep_rule": "highest quality, then most pixels, then smallest id",
    }
    if features is not None:
        settings["features"] = dict(features)
    if chosen == "ivf":
        cells = ivf_nlist(n) if nlist is None else int(nlist)
        settings.update({"nlist": cells, "nprobe": max(1, min(int(nprobe), cells))})
    return EmbeddingDedupReport(
        threshold=threshold,
        settings=settings,
        clusters=tuple(clusters),
        kept=tuple(ids[k] for k in range(n) if k not in dropped),
        removed=tuple(sorted(removed, key=lambda r: (r.cluster, r.kept_id, r.id))),
        quality=scores,
        resolution=pixels,
    )


def _resolve(
    group: list[int], unit: np.ndarray, threshold: float, chain_guard: bool
) -> tuple[list[int], dict[int, list[tuple[int, float]]]]:
    """Keepers of a component (best-ranked first) and the (member, direct cosine) each one replaces.

    The cosines are the ones the chain guard decided on, so the report shows exactly those values.
    """
    keepers: list[int] = []
    twins: dict[int, list[tuple[int, float]]] = {}
    remaining = np.array(group)
    while remaining.size:
        keeper = int(remaining[0])
        keepers.append(keeper)
        rest = remaining[1:]
        cosines = unit[rest] @ unit[keeper]
        close = cosines >= threshold if chain_guard else np.ones(rest.size, dtype=bool)
        twins[keeper] = list(zip(rest[close].tolist(), cosines[close].tolist()))
        remaining = rest[~close]
    return keepers, twins
