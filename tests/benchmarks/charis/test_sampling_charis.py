"""The CHARIS prompt sampler: balance, axis counts, phrase use, determinism and errors."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest
from datasets import Dataset

from idbench.benchmarks.charis.sampling import sample_charis_prompts
from idbench.benchmarks.charis.spec import PROMPTS
from idbench.ekb import load_ekb

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

TYPES = ["human", "animal", "anthropomorphic", "animated_object"]
STYLES = ["photorealistic", "cartoon", "vector"]
AXES = ["pose", "expression", "viewpoint", "occlusion", "lighting", "background", "style"]
CELLS = [(t, s) for t in TYPES for s in STYLES]
NAMES = {
    "human": ["the red-haired woman", "the old fisherman", "the young boy"],
    "animal": ["the tabby cat", "the brown horse", "the spotted dog"],
    "anthropomorphic": ["the penguin in a suit", "the sailor monkey", "the reading squirrel"],
    "animated_object": ["the smiling sun character", "the snowman", "the jack-o'-lantern"],
}
# Independent of the EKB's style keywords: words that would name each style.
STYLE_WORDS = {
    "photorealistic": ("photo", "realistic"),
    "cartoon": ("cartoon", "comic", "anime"),
    "vector": ("vector", "flat", "icon", "emoji", "clip art"),
}


def make_pool(per_cell: list[int]) -> list[dict]:
    """Subjects spread over the 12 cells, ``per_cell[i]`` of them in ``CELLS[i]``."""
    pool = []
    for (t, s), count in zip(CELLS, per_cell):
        for k in range(count):
            pool.append(
                {"subject_id": f"{t}-{s}-{k:02d}", "name": NAMES[t][k % 3], "type": t, "style": s, "image": None}
            )
    return pool


LARGE = make_pool([13] * 10 + [12] * 2)  # 154 subjects, as in the paper
SMALL = make_pool([1] * 12)


@pytest.fixture(scope="module")
def ekb():
    return load_ekb()


@pytest.fixture(scope="module")
def large(ekb):
    return sample_charis_prompts(LARGE, ekb, seed=7)


def check_prompts(prompts: list[dict], pool: list[dict], ekb, n: int) -> None:
    """Everything that must hold for any pool and size."""
    by_id = {s["subject_id"]: s for s in pool}
    assert len(prompts) == n
    width = len(str(n))
    assert [p["prompt_id"] for p in prompts] == [f"charis-{i:0{width}d}" for i in range(1, n + 1)]

    # balance over the 12 cells, then over the subjects of each cell
    per_cell = Counter((p["type"], p["style"]) for p in prompts)
    cell_counts = [per_cell.get(cell, 0) for cell in CELLS]
    assert max(cell_counts) - min(cell_counts) <= 1
    per_subject = Counter(p["subject_id"] for p in prompts)
    for t, s in CELLS:
        members = [sid for sid, sub in by_id.items() if (sub["type"], sub["style"]) == (t, s)]
        counts = [per_subject.get(sid, 0) for sid in members]
        assert max(counts) - min(counts) <= 1, (t, s)

    # 5 or 6 axes; exactly round(0.4 n) with 6
    sizes = [len(p["axes"]) for p in prompts]
    assert set(sizes) <= {5, 6}
    assert sizes.count(6) == round(0.4 * n)
    omitted = Counter(axis for p in prompts for axis in AXES if axis not in p["axes"])
    assert max(omitted[a] for a in AXES) - min(omitted[a] for a in AXES) <= 1

    for p in prompts:
        subject = by_id[p["subject_id"]]
        assert set(p) == set(PROMPTS)
        assert (p["type"], p["style"]) == (subject["type"], subject["style"])
        assert len(set(p["axes"])) == len(p["axes"])
        assert p["axes"] == [a for a in AXES if a in p["axes"]]  # EKB order
        assert [t["axis"] for t in p["transformations"]] == p["axes"]
        text = p["prompt"]
        # each phrase comes from the EKB for this subject and appears verbatim, in order
        position = 0
        for t in p["transformations"]:
            assert t["phrase"] in ekb.transformations[t["axis"]].phrases_for(p["type"], p["style"])
            found = text.find(t["phrase"], position)
            assert found >= position, (t, text)
            position = found + len(t["phrase"])
        assert text.endswith(".") and position == len(text) - 1
        name = subject["name"]
        if p["axes"][0] == "pose":
            assert text.startswith(name[0].upper() + name[1:] + " " + p["transformations"][0]["phrase"] + ",")
        else:
            assert text.startswith(f"A picture of {name}, ")
        for t in p["transformations"]:
            if t["axis"] == "style":
                assert not any(word in t["phrase"].lower() for word in STYLE_WORDS[p["style"]]), t


def test_large_pool_full_size(large, ekb):
    assert len(LARGE) == 154
    check_prompts(large, LARGE, ekb, 1078)  # default n = 7 per subject
    assert sum(len(p["axes"]) for p in large) / len(large) == pytest.approx(5.4, abs=0.01)
    # Cells are balanced first (89 or 90 prompts each), so a cell of 12 subjects gives each 7-8 and a
    # cell of 13 gives 6-7: 154 subjects do not divide into 12 equal cells.
    assert set(Counter(p["subject_id"] for p in large).values()) <= {6, 7, 8}


def test_six_axis_prompts_spread_over_cells(large):
    by_cell = defaultdict(list)
    for p in large:
        by_cell[(p["type"], p["style"])].append(len(p["axes"]))
    for cell, sizes in by_cell.items():
        assert abs(sizes.count(6) - 0.4 * len(sizes)) <= 1, cell


def test_no_phrase_repeats_for_a_subject(large):
    used = defaultdict(list)
    for p in large:
        for t in p["transformations"]:
            used[(p["subject_id"], t["axis"])].append(t["phrase"])
    for key, phrases in used.items():
        assert len(set(phrases)) == len(phrases), key


def test_prompts_vary(large):
    assert len({p["prompt"] for p in large}) == len(large)
    for axis in AXES:
        assert len({t["phrase"] for p in large for t in p["transformations"] if t["axis"] == axis}) >= 10


def test_records_fit_the_published_schema(large):
    dataset = Dataset.from_list(large, features=PROMPTS)
    assert dataset.num_rows == 1078
    assert dataset[0]["transformations"] == large[0]["transformations"]


def test_deterministic(large, ekb):
    assert sample_charis_prompts(LARGE, ekb, seed=7) == large
    shuffled = list(LARGE)
    random.Random(1).shuffle(shuffled)
    assert sample_charis_prompts(shuffled, ekb, seed=7) == large
    other = sample_charis_prompts(LARGE, ekb, seed=8)
    assert other != large
    assert [p["prompt"] for p in other] != [p["prompt"] for p in large]


def test_small_pool_default_size(ekb):
    prompts = sample_charis_prompts(SMALL, ekb, seed=0)
    check_prompts(prompts, SMALL, ekb, 84)
    assert set(Counter(p["subject_id"] for p in prompts).values()) == {7}


def test_small_pool_full_size(ekb):
    """One subject per cell and ~90 prompts each: phrases must come round evenly, not at random."""
    prompts = sample_charis_prompts(SMALL, ekb, seed=3, n_prompts=1078)
    check_prompts(prompts, SMALL, ekb, 1078)
    used = defaultdict(list)
    for p in prompts:
        for t in p["transformations"]:
            used[(p["subject_id"], p["type"], p["style"], t["axis"])].append(t["phrase"])
    for (_, t, s, axis), phrases in used.items():
        candidates = ekb.transformations[axis].phrases_for(t, s)
        counts = Counter(phrases)
        assert set(counts) == set(candidates)
        assert max(counts.values()) - min(counts.values()) <= 1, (t, s, axis)
        assert all(a != b for a, b in zip(phrases, phrases[1:])), (t, s, axis)  # never twice in a row


@pytest.mark.parametrize("n", [0, 1, 5, 11, 13, 25, 100])
def test_other_sizes(ekb, n):
    prompts = sample_charis_prompts(SMALL, ekb, seed=n, n_prompts=n)
    check_prompts(prompts, SMALL, ekb, n)


def test_empty_cells_are_named(ekb):
    removed = {("animal", "vector"), ("animated_object", "photorealistic")}
    pool = [s for s in LARGE if (s["type"], s["style"]) not in removed]
    with pytest.raises(ValueError) as error:
        sample_charis_prompts(pool, ekb, seed=0)
    message = str(error.value)
    assert "animal/vector" in message and "animated_object/photorealistic" in message
    assert "human/cartoon" not in message
    with pytest.raises(ValueError, match="human/photorealistic"):
        sample_charis_prompts([], ekb, seed=0)


def test_bad_subjects(ekb):
    with pytest.raises(ValueError, match="human-cartoon-00.*'robot'"):
        sample_charis_prompts([dict(SMALL[1], type="robot"), *SMALL], ekb, seed=0)
    with pytest.raises(ValueError, match="human-cartoon-00.*'pastel'"):
        sample_charis_prompts([dict(SMALL[1], style="pastel"), *SMALL[2:], SMALL[0]], ekb, seed=0)
    with pytest.raises(ValueError, match="more than once"):
        sample_charis_prompts([*SMALL, SMALL[0]], ekb, seed=0)
    with pytest.raises(ValueError, match="'name'"):
        sample_charis_prompts([dict(SMALL[0], name=""), *SMALL[1:]], ekb, seed=0)
    with pytest.raises(ValueError, match="n_prompts"):
        sample_charis_prompts(SMALL, ekb, seed=0, n_prompts=-1)
