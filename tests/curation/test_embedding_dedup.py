"""Embedding near-duplicate detection: the exact and indexed searches, clustering, keep rule, report, errors.

The search and clustering logic is tested on constructed vectors (where the right answer is known
exactly); the image plumbing (feature store, tiny DINOv2) on planted copies of sample images.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

import idbench.curation.embedding_dedup as dedup
from idbench.curation.embedding_dedup import find_near_duplicates, image_features, similar_pairs, unit_matrix

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def planted_pool(n_base: int, dim: int, groups: int, seed: int) -> dict[str, np.ndarray]:
    """Random vectors plus ``groups`` planted near-duplicate groups of 2-4 members (cosine ~0.93-0.99)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_base, dim))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    vectors = {f"v{k:04d}": base[k] for k in range(n_base)}
    for original in rng.choice(n_base, size=groups, replace=False):
        for c in range(int(rng.integers(1, 4))):
            cosine = rng.uniform(0.93, 0.99)
            sigma = math.sqrt((1 / cosine**2 - 1) / dim)
            vectors[f"v{original:04d}-copy{c}"] = base[original] + rng.normal(size=dim) * sigma
    return vectors


def partition(report) -> set[frozenset[str]]:
    return {frozenset(cluster.ids) for cluster in report.clusters}


# --- the searches -------------------------------------------------------------------------------------


def test_exact_search_equals_a_naive_double_loop(monkeypatch):
    monkeypatch.setattr(dedup, "EXACT_BLOCK", 7)  # several blocks, the last one partial
    vectors = planted_pool(n_base=60, dim=16, groups=10, seed=1)
    _, unit = unit_matrix(vectors)
    threshold = 0.6  # low enough that random 16-d vectors also give pairs
    i, j, cosine = similar_pairs(unit, threshold, index="exact")
    naive = {}
    for a in range(len(unit)):
        for b in range(a + 1, len(unit)):
            value = float(sum(x * y for x, y in zip(unit[a], unit[b])))
            if value >= threshold:
                naive[(a, b)] = value
    assert len(naive) > 20
    assert list(zip(i.tolist(), j.tolist())) == sorted(naive)
    assert np.allclose(cosine, [naive[pair] for pair in sorted(naive)], atol=1e-12)


def test_index_search_gives_the_same_clusters_as_brute_force():
    pytest.importorskip("faiss")
    vectors = planted_pool(n_base=700, dim=64, groups=60, seed=2)
    exact = find_near_duplicates(vectors, 0.9, index="exact")
    indexed = find_near_duplicates(vectors, 0.9, index="ivf")
    assert indexed.settings["index"] == "ivf" and indexed.settings["nlist"] == dedup.ivf_nlist(len(vectors))
    assert len(exact.clusters) == 60
    assert partition(indexed) == partition(exact)
    assert indexed.kept == exact.kept
    assert indexed.removed == exact.removed
    assert find_near_duplicates(vectors, 0.9, index="ivf").to_dict() == indexed.to_dict()  # seeded cells


def test_index_search_finds_what_a_faiss_ivf_flat_index_finds(monkeypatch):
    """The cell-grouped search is IndexIVFFlat's search: the same pairs, and the same misses."""
    faiss = pytest.importorskip("faiss")
    vectors = planted_pool(n_base=700, dim=64, groups=60, seed=2)
    _, unit = unit_matrix(vectors)
    cells = []
    original = dedup.ivf_cells

    def recording(*args):
        cells.append(original(*args))
        return cells[-1]

    monkeypatch.setattr(dedup, "ivf_cells", recording)
    nprobe = 2  # few cells, so that some pairs are missed (isotropic 64-d vectors are a hard case)
    i, j, _ = similar_pairs(unit, 0.9, index="ivf", nprobe=nprobe)
    ((centroids, _),) = cells

    search = unit.astype(np.float32)
    quantizer = faiss.IndexFlatIP(search.shape[1])
    quantizer.add(centroids)
    ivf = faiss.IndexIVFFlat(quantizer, search.shape[1], len(centroids), faiss.METRIC_INNER_PRODUCT)
    assert ivf.is_trained
    ivf.add(search)
    ivf.nprobe = nprobe
    limits, _, labels = ivf.range_search(search, 0.9 - dedup.CANDIDATE_SLACK)
    queries = np.repeat(np.arange(len(search)), np.diff(limits.astype(np.int64)))
    faiss_pairs = {
        (min(a, b), max(a, b))
        for a, b in zip(queries.tolist(), labels.tolist())
        if a != b and float(unit[a] @ unit[b]) >= 0.9
    }
    ours = set(zip(i.tolist(), j.tolist()))
    exact_i, exact_j, _ = similar_pairs(unit, 0.9, index="exact")
    assert ours == faiss_pairs
    assert len(ours) < len(exact_i)  # nprobe=2 misses some: the test compares misses as well as hits


def test_auto_takes_the_index_only_for_large_pools(monkeypatch):
    pytest.importorskip("faiss")
    vectors = planted_pool(n_base=100, dim=8, groups=5, seed=3)
    assert find_near_duplicates(vectors, 0.95).settings["index"] == "exact"
    monkeypatch.setattr(dedup, "INDEX_MIN_POOL", 50)
    assert find_near_duplicates(vectors, 0.95).settings["index"] == "ivf"
    assert find_near_duplicates(vectors, 0.95, index="exact").settings["index"] == "exact"
    monkeypatch.setattr(dedup, "faiss_available", lambda: False)
    assert find_near_duplicates(vectors, 0.95).settings["index"] == "exact"
    with pytest.raises(ModuleNotFoundError, match="faiss"):
        find_near_duplicates(vectors, 0.95, index="ivf")


def test_borderline_pairs_are_decided_by_the_same_arithmetic_in_both_searches():
    """A pair a hair above the threshold is found by both searches, one a hair below by neither.

    In float32 both round to 0.9, so a search deciding in float32 would get one of them wrong.
    """
    pytest.importorskip("faiss")
    rng = np.random.default_rng(4)
    vectors = {f"r{k}": v for k, v in enumerate(rng.normal(size=(200, 32)))}
    e0, e1, e2 = np.eye(32)[:3]
    for name, cosine, axis in (("above", 0.9 + 1e-9, e1), ("below", 0.9 - 1e-9, e2)):
        vectors[f"{name}_a"] = e0 if name == "above" else -e0
        sign = 1.0 if name == "above" else -1.0
        vectors[f"{name}_b"] = sign * cosine * e0 + math.sqrt(1 - cosine**2) * axis
    for index in ("exact", "ivf"):
        clusters = partition(find_near_duplicates(vectors, 0.9, index=index, nprobe=50))
        assert frozenset(("above_a", "above_b")) in clusters
        assert not any("below_a" in cluster for cluster in clusters)


# --- clusters and the keep rule -----------------------------------------------------------------------


def on_circle(*degrees: float) -> list[np.ndarray]:
    return [np.array([math.cos(math.radians(d)), math.sin(math.radians(d)), 0.0]) for d in degrees]


STEP = math.degrees(math.acos(0.95))  # consecutive links at cosine 0.95; two steps apart: 2*0.95^2-1 = 0.805


def test_keep_rule_quality_then_resolution_then_id():
    a, b, c = on_circle(0, 1, 2)
    vectors = {"x": a, "y": b, "z": c, "far": np.array([0.0, 0.0, 1.0])}
    by_id = find_near_duplicates(vectors, 0.99)
    assert by_id.clusters[0].kept == ("x",)
    by_pixels = find_near_duplicates(vectors, 0.99, resolution={"x": (10, 10), "y": (30, 20), "z": 600, "far": 1})
    assert by_pixels.clusters[0].kept == ("y",)  # 600 pixels each; y's id is smaller than z's
    by_quality = find_near_duplicates(
        vectors,
        0.99,
        quality={"x": 1.0, "y": 1.0, "z": 5.0, "far": 0.0},
        resolution={"x": 9, "y": 600, "z": 1, "far": 1},
    )
    assert by_quality.clusters[0].kept == ("z",)
    assert by_quality.clusters[0].ids == ("z", "y", "x")  # the keep rule's order
    assert by_quality.kept == ("z", "far")  # input order
    assert [(r.id, r.kept_id) for r in by_quality.removed] == [("x", "z"), ("y", "z")]


def test_input_order_does_not_change_the_result():
    vectors = planted_pool(n_base=80, dim=16, groups=8, seed=5)
    shuffled = dict(reversed(list(vectors.items())))
    first, second = find_near_duplicates(vectors, 0.9), find_near_duplicates(shuffled, 0.9)
    assert first.removed == second.removed and first.clusters == second.clusters
    assert set(first.kept) == set(second.kept)


def test_chain_guard_never_removes_an_image_without_a_direct_twin():
    a, b, c = on_circle(0, STEP, 2 * STEP)
    vectors = {"a": a, "b": b, "c": c}
    # a is best: b goes (0.95 with a); c is only 0.805 from a, so it stays as a second keeper.
    guarded = find_near_duplicates(vectors, 0.9, quality={"a": 3.0, "b": 2.0, "c": 1.0})
    (cluster,) = guarded.clusters
    assert cluster.ids == ("a", "b", "c") and cluster.kept == ("a", "c")
    assert [(r.id, r.kept_id) for r in guarded.removed] == [("b", "a")]
    assert guarded.removed[0].similarity == pytest.approx(0.95)
    assert set(guarded.kept) == {"a", "c"}
    # b is best: it is within 0.95 of both ends, so both go.
    middle = find_near_duplicates(vectors, 0.9, quality={"a": 1.0, "b": 3.0, "c": 2.0})
    assert middle.clusters[0].kept == ("b",)
    assert {(r.id, r.kept_id) for r in middle.removed} == {("a", "b"), ("c", "b")}
    # Plain single linkage removes c too; the report shows the weak direct similarity and the link.
    chained = find_near_duplicates(vectors, 0.9, quality={"a": 3.0, "b": 2.0, "c": 1.0}, chain_guard=False)
    entry = {r.id: r for r in chained.removed}["c"]
    assert entry.kept_id == "a"
    assert entry.similarity == pytest.approx(2 * 0.95**2 - 1)
    assert entry.linkage_similarity == pytest.approx(0.95)
    assert chained.to_dict()["removed"][1]["chained"] is True


def test_linkage_similarity_is_the_best_paths_weakest_link():
    # a-b 0.99, b-c 0.95, a-c 0.896: from c to a the best path goes through b, its weakest link 0.95.
    a, b, c = on_circle(0, math.degrees(math.acos(0.99)), math.degrees(math.acos(0.99)) + STEP)
    report = find_near_duplicates({"a": a, "b": b, "c": c}, 0.9, quality={"a": 2, "b": 1, "c": 0}, chain_guard=False)
    rows = {r.id: r for r in report.removed}
    direct = float(a @ c)
    assert direct < 0.9
    assert rows["b"].linkage_similarity == pytest.approx(0.99)
    assert rows["c"].similarity == pytest.approx(direct)
    assert rows["c"].linkage_similarity == pytest.approx(0.95)


def test_report_serialises_to_json_and_csv(tmp_path):
    vectors = planted_pool(n_base=30, dim=8, groups=4, seed=6)
    quality = {k: float(len(k)) for k in vectors}
    report = find_near_duplicates(vectors, 0.9, quality=quality, resolution={k: (100, 100) for k in vectors})
    assert report.removed
    data = json.loads(report.write_json(tmp_path / "audit" / "dedup.json").read_text())
    assert data["counts"] == {
        "images": len(vectors),
        "kept": len(report.kept),
        "removed": len(report.removed),
        "clusters": len(report.clusters),
    }
    assert data["threshold"] == 0.9 and data["settings"]["index"] == "exact"
    first = data["removed"][0]
    assert set(first) >= {
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
    }
    rows = list(csv.DictReader(io.StringIO(report.write_csv(tmp_path / "audit" / "dedup.csv").read_text())))
    assert [(r["id"], r["kept_id"]) for r in rows] == [(r.id, r.kept_id) for r in report.removed]
    assert all(float(r["similarity"]) >= 0.9 for r in rows)
    assert sorted(p.name for p in (tmp_path / "audit").iterdir()) == ["dedup.csv", "dedup.json"]  # no temp files


def test_empty_and_single_pools():
    empty = find_near_duplicates({}, 0.9)
    assert empty.kept == () and empty.removed == () and empty.clusters == ()
    single = find_near_duplicates({"only": [1.0, 2.0]}, 0.9)
    assert single.kept == ("only",) and not single.removed


# --- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        ({"a": [1.0, 0.0], "b": [1.0, 0.0, 0.0]}, r"vector 'b': dimension 3, expected 2 \(the dimension of 'a'\)"),
        ({"a": [1.0, 0.0], "b": [float("nan"), 0.0]}, r"vector 'b': 1 non-finite value"),
        ({"a": [1.0, 0.0], "b": [float("inf"), 1.0]}, r"vector 'b': 1 non-finite value"),
        ({"a": [0.0, 0.0]}, r"vector 'a': zero"),
        ({"a": [[1.0, 0.0]]}, r"vector 'a': expected a 1-D vector, got shape \(1, 2\)"),
        ({"a": ["x", "y"]}, r"vector 'a': not a numeric array"),
    ],
)
def test_bad_vectors_name_the_offending_id(vectors, message):
    with pytest.raises(ValueError, match=message):
        find_near_duplicates(vectors, 0.9)


def test_bad_arguments_are_refused_with_what_is_wrong():
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
    for threshold in (1.5, float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            find_near_duplicates(vectors, threshold)
    with pytest.raises(ValueError, match="index must be"):
        find_near_duplicates(vectors, 0.9, index="hnsw")
    with pytest.raises(ValueError, match="quality: no value for 1 id.*'b'"):
        find_near_duplicates(vectors, 0.9, quality={"a": 1.0})
    with pytest.raises(ValueError, match="quality of 'b': not finite"):
        find_near_duplicates(vectors, 0.9, quality={"a": 1.0, "b": float("nan")})
    with pytest.raises(ValueError, match="resolution of 'a'"):
        find_near_duplicates(vectors, 0.9, resolution={"a": (0, 10), "b": 5})
    with pytest.raises(ValueError, match="resolution: no value for 'b'"):
        find_near_duplicates(vectors, 0.9, resolution={"a": 5})


# --- images: planted copies through the feature store and a tiny DINOv2 --------------------------------


PHOTOS = (
    "subjects/animal/photo/gc_dog.jpg",
    "subjects/animal/photo/chelsea_cat.jpg",
    "subjects/human/photo/grace_hopper.jpg",
    "backgrounds/landmark/gc_eiffel_tower.jpg",
    "objects/photo/coffee_cup.jpg",
    "subjects/animal/vector/fluent_flat_dog_face.jpg",
)


def encode(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def planted_copies() -> dict[str, bytes]:
    """Each sample photo, a half-size copy, a JPEG q=30 re-encoding and a horizontal flip."""
    images = {}
    for relative in PHOTOS:
        name = Path(relative).stem
        data = (SAMPLES / relative).read_bytes()
        picture = Image.open(io.BytesIO(data)).convert("RGB")
        images[name] = data
        half = picture.resize((picture.width // 2, picture.height // 2), Image.Resampling.LANCZOS)
        images[f"{name}~half"] = encode(half)
        images[f"{name}~jpeg"] = encode(picture, "JPEG", quality=30)
        images[f"{name}~flip"] = encode(ImageOps.mirror(picture))
    return images


@pytest.fixture(scope="module")
def tiny_models():
    from idbench.evaluate_pkg.context import Models, ScoreOptions

    return Models(ScoreOptions(profile="tiny"))


@pytest.mark.slow
def test_planted_copies_are_found_and_the_right_member_kept(tmp_path, tiny_models):
    images = planted_copies()
    vectors = image_features(images, "dinov2", models=tiny_models, cache_dir=tmp_path)
    assert set(vectors) == set(images)
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in vectors.values())
    picture = {image_id: image_id.split("~")[0] for image_id in images}
    ids = list(vectors)
    sims = np.stack([vectors[i] for i in ids]) @ np.stack([vectors[i] for i in ids]).T
    same = np.array([[picture[a] == picture[b] for b in ids] for a in ids])
    off_diagonal = ~np.eye(len(ids), dtype=bool)
    # Random tiny weights put every image close to every other (cosines >= 0.99), so a threshold that
    # means anything for DINOv2-base means nothing here. What the plumbing must still show: each copy
    # is nearer to its own picture than to any other picture, with a gap to put a threshold in.
    lowest_same, highest_other = sims[same & off_diagonal].min(), sims[~same].max()
    assert lowest_same > highest_other, (lowest_same, highest_other)
    threshold = float(lowest_same + highest_other) / 2

    sizes = {i: Image.open(io.BytesIO(b)).size for i, b in images.items()}
    # gc_dog: the half-size copy has the best quality score, which outranks resolution.
    quality = {i: (6.0 if i == "gc_dog~half" else 5.0) for i in images}
    quality["chelsea_cat~jpeg"] = 4.0
    source = dedup.feature_source(tiny_models, "dinov2")
    assert source["name"] == "dinov2-base-tiny" and source["plumbing"] is True
    report = find_near_duplicates(vectors, threshold, quality=quality, resolution=sizes, features=source)
    assert report.to_dict()["settings"]["features"]["plumbing"] is True
    assert partition(report) == {frozenset(i for i in images if picture[i] == name) for name in set(picture.values())}
    kept = {cluster.ids[0].split("~")[0]: cluster.kept for cluster in report.clusters}
    assert kept["gc_dog"] == ("gc_dog~half",)
    # Elsewhere original, JPEG and flip tie on quality and pixels (the half copy has fewer): the
    # smallest id wins, which is the original's.
    for name in set(picture.values()) - {"gc_dog"}:
        assert kept[name] == (name,)
    assert len(report.removed) == 3 * len(PHOTOS)
    assert all(r.similarity >= threshold for r in report.removed)


@pytest.mark.slow
def test_image_features_are_cached_and_shared_by_identical_bytes(tmp_path, tiny_models):
    sample = (SAMPLES / PHOTOS[0]).read_bytes()
    images = {"one": sample, "same-bytes": sample, "other": (SAMPLES / PHOTOS[1]).read_bytes()}
    first = image_features(images, "dinov2", models=tiny_models, cache_dir=tmp_path)
    assert np.array_equal(first["one"], first["same-bytes"])
    assert len(list(tmp_path.rglob("*.npz"))) == 2  # identical bytes are encoded and stored once

    class Refuses:
        """The tiny DINOv2's identity with an encoder that must not run: the rerun reads the cache."""

        def __init__(self, encoder):
            self.key, self.feature_version = encoder.key, encoder.feature_version
            self.preprocess, self.collate = encoder.preprocess, encoder.collate

        def encode_batch(self, batch):
            raise AssertionError("a cached image was encoded again")

    class CachedOnly:
        def __getitem__(self, role):
            return Refuses(tiny_models[role])

    again = image_features(images, "dinov2", models=CachedOnly(), cache_dir=tmp_path)
    assert all(np.array_equal(first[k], again[k]) for k in images)
