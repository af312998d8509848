"""The pool index (evaluate_pkg/copy_index.py): its shortlist must hold every reference that the
exhaustive per-pair keypoint search flags, so the foreign search finds what it found before, at a
cost that no longer grows with the pool.

Hand-made pictures only (no model, no sample file): a pool of distinct procedural pictures, large
enough for the HNSW index (over ``EXACT_BELOW`` descriptors), with one picture stored twice; canvases
pasting a few of them plain, mirrored, turned and small.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageOps
from procedural import procedural

from idbench.evaluate_pkg import copy_index
from idbench.evaluate_pkg.copies import find_in_any_pose

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

POOL = 120  # distinct pictures: ~58,000 descriptors, an HNSW index (with the twin below, 121)
TWIN = 7  # the picture stored a second time (re-encoded), at position POOL


def _reencoded(image: Image.Image) -> Image.Image:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def canvas(parts: list[tuple[Image.Image, tuple[int, int], float]], seed: int, size: int = 512) -> Image.Image:
    """A background picture (not in the pool) with each part pasted at ``(x, y)``, at ``share`` of the area."""
    out = procedural(10_000 + seed, size)
    for picture, corner, share in parts:
        side = round((share * size * size) ** 0.5)
        out.paste(picture.resize((side, side)), corner)
    return out


@pytest.fixture(scope="module")
def pool():
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import reference_keypoints

    pictures = [procedural(seed) for seed in range(POOL)]
    pictures.append(_reencoded(pictures[TWIN]))
    prepared = copy_index.parallel_map(reference_keypoints, pictures)
    index = copy_index.build_index(prepared)
    assert not index.exact and index.descriptors > copy_index.EXACT_BELOW
    return pictures, prepared, index


def _exhaustive(generation, prepared) -> set[int]:
    """What the foreign search did before the index: every reference matched in full."""
    from idbench.evaluate_pkg.copies import find_in_any_pose

    return {k for k, points in enumerate(prepared) if find_in_any_pose(generation, *points).copied}


def _pastes(pictures):
    return {
        "plain, mirrored, turned 90 (10 % of the area each)": (
            [
                (pictures[5], (10, 10), 0.10),
                (ImageOps.mirror(pictures[77]), (300, 40), 0.10),
                (pictures[101].rotate(90), (100, 300), 0.12),
            ],
            {5, 77, 101},
        ),
        "small (5 % of the area), one stored twice": (
            [
                (pictures[42], (200, 200), 0.05),
                (pictures[43].rotate(90), (20, 380), 0.05),
                (ImageOps.mirror(pictures[TWIN]), (380, 30), 0.05),
            ],
            {42, 43, TWIN, POOL},
        ),
    }


@pytest.mark.parametrize("case", [0, 1])
def test_the_shortlist_holds_every_reference_the_exhaustive_search_flags(pool, case):
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import generation_keypoints

    pictures, prepared, index = pool
    parts, pasted = list(_pastes(pictures).values())[case]
    generation = generation_keypoints(canvas(parts, case))
    flagged = _exhaustive(generation, prepared)
    assert pasted <= flagged  # the pastes are there to be found (a picture stored twice is found twice)
    shortlisted = {position for position, _ in copy_index.shortlist(index, generation)}
    assert flagged <= shortlisted
    assert len(shortlisted) <= copy_index.TOP_K + len(flagged)
    found = copy_index.search_pool(index, generation, lambda k: prepared[k], verify=find_in_any_pose)
    assert {c.position for c in found if c.pose.copied} == flagged


def test_pictures_with_no_pool_reference_flag_nothing(pool):
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import generation_keypoints

    _, prepared, index = pool
    rng = np.random.default_rng(0)
    pictures = {
        "blank": Image.new("RGB", (512, 512), (128, 128, 128)),
        "noise": Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)),
        "another picture": procedural(99_999, 512),
    }
    for name, picture in pictures.items():
        found = copy_index.search_pool(
            index, generation_keypoints(picture), lambda k: prepared[k], verify=find_in_any_pose
        )
        assert not [c.position for c in found if c.pose.copied], name
        assert len(found) <= copy_index.TOP_K, name
    assert copy_index.shortlist(index, generation_keypoints(pictures["blank"])) == []


def test_the_prompts_own_references_are_left_out(pool):
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import generation_keypoints

    pictures, _, index = pool
    parts, _ = list(_pastes(pictures).values())[0]
    generation = generation_keypoints(canvas(parts, 0))
    shortlisted = [position for position, _ in copy_index.shortlist(index, generation, exclude={77})]
    assert 77 not in shortlisted and {5, 101} <= set(shortlisted)


def test_the_index_and_its_answers_are_deterministic(pool):
    """Built twice (the graph on one thread), searched serially and from a thread pool: the same votes."""
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import generation_keypoints

    pictures, prepared, _ = pool
    subset = prepared[:60]  # ~29,000 descriptors: still a graph, half the build
    first, second = copy_index.build_index(subset), copy_index.build_index(subset)
    assert not first.exact
    generations = [generation_keypoints(canvas([(pictures[k], (40, 60), 0.08)], k)) for k in (3, 30, 59)]
    serial = [copy_index.votes(first, g).tolist() for g in generations]
    threaded = copy_index.parallel_map(lambda g: copy_index.votes(second, g).tolist(), generations, threads=3)
    assert serial == threaded
    assert [int(np.argmax(v)) for v in serial] == [3, 30, 59]


def test_compact_keypoints_give_back_the_same_keypoints(pool):
    from idbench.evaluate_pkg import copy_index

    _, prepared, _ = pool
    plain = prepared[0][0]
    small = copy_index.compact(plain)
    assert small.grey.dtype == np.uint8 and small.descriptors.dtype == np.uint8
    back = copy_index.expand(small)
    assert np.array_equal(back.grey, plain.grey) and np.array_equal(back.descriptors, plain.descriptors)
    assert back.grey.dtype == plain.grey.dtype == np.float32


def test_the_pool_digest_changes_with_the_pool():
    from idbench.evaluate_pkg.copy_index import pool_digest

    assert pool_digest(["a", "b"]) == pool_digest(["a", "b"])
    assert pool_digest(["a", "b"]) != pool_digest(["a", "b", "c"]) != pool_digest(["ab"])


def test_a_small_pool_is_matched_in_full(pool):
    """Up to EXHAUSTIVE_UP_TO references (the Identity Collapse sample's 13) there is no index: every
    reference but the prompt's own is verified, as before."""
    from idbench.evaluate_pkg import copy_index
    from idbench.evaluate_pkg.copies import generation_keypoints

    pictures, prepared, _ = pool
    small = copy_index.build_index(prepared[:13])
    assert small.index is None
    generation = generation_keypoints(canvas([(pictures[4], (40, 60), 0.08)], 4))
    assert [k for k, _ in copy_index.shortlist(small, generation, exclude={2})] == [0, 1, *range(3, 13)]
    found = copy_index.search_pool(small, generation, lambda k: prepared[k], exclude={2}, verify=find_in_any_pose)
    assert {c.position for c in found if c.pose.copied} == {4}


def test_the_shortlist_takes_every_reference_with_as_many_votes_as_the_keypoint_stage_needs():
    from idbench.evaluate_pkg.copies import MIN_INLIERS

    assert copy_index.MIN_VOTES == MIN_INLIERS
