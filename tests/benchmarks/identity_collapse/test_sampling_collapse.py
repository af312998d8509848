"""The Identity Collapse grid against the paper's structure (paper 002)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from idbench.benchmarks.identity_collapse.sampling import sample_collapse_prompts

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def pool(n: int) -> list[dict]:
    # names that are never substrings of one another, so the prompt text can be searched for them
    return [{"subject_id": f"S{k:03d}", "name": f"the subject-{k:03d}"} for k in range(1, n + 1)]


def name_of(subject_id: str) -> str:
    return f"the subject-{subject_id[1:]}"


@pytest.mark.parametrize("n_subjects", [10, 12, 40, 300])
def test_grid_matches_the_paper(n_subjects):
    prompts = sample_collapse_prompts(pool(n_subjects), seed=0)
    assert [p["prompt_id"] for p in prompts] == [f"{k:02d}" for k in range(1, 76)]
    # ids 01-15 hold 2 subjects, 16-30 hold 4, ...; inside each level 5 neutral, 5 occlusion, 5 interaction
    expected = [
        (level, scene)
        for level in (2, 4, 6, 8, 10)
        for scene in ("neutral", "occlusion", "interaction")
        for _ in range(5)
    ]
    assert [(p["n_subjects"], p["scene"]) for p in prompts] == expected
    for p in prompts:
        assert p["seeds"] == [0, 1, 2]
        assert len(p["subject_ids"]) == p["n_subjects"] == len(set(p["subject_ids"]))
        assert p["prompt"].count("the subject-") == p["n_subjects"]


def test_subjects_are_used_evenly():
    subjects = pool(12)
    prompts = sample_collapse_prompts(subjects, seed=3)
    usage = Counter(sid for p in prompts for sid in p["subject_ids"])
    assert sum(usage.values()) == 15 * (2 + 4 + 6 + 8 + 10)
    assert set(usage) == {s["subject_id"] for s in subjects}
    assert max(usage.values()) - min(usage.values()) <= 1


def test_scene_wording():
    prompts = sample_collapse_prompts(pool(10), seed=1)
    for p in prompts:
        text = p["prompt"]
        # every subject named once, in the stored mention order
        positions = [text.index(name_of(s)) for s in p["subject_ids"]]
        assert positions == sorted(positions)
        if p["scene"] == "neutral":
            assert "side by side" in text and "overlap" in text
        elif p["scene"] == "occlusion":
            assert text.count("partly hidden behind") == p["n_subjects"] // 2
        else:
            contact = ("hugging", "leaning against", "cheek to cheek", "cuddled up against", "holding on to")
            assert sum(text.count(c) for c in contact) == p["n_subjects"] // 2


def test_deterministic_and_order_independent():
    subjects = pool(15)
    first = sample_collapse_prompts(subjects, seed=7)
    assert sample_collapse_prompts(list(reversed(subjects)), seed=7) == first
    assert sample_collapse_prompts(subjects, seed=8) != first


def test_too_few_subjects():
    with pytest.raises(ValueError, match="at least 10 distinct subjects, the source has 9"):
        sample_collapse_prompts(pool(9), seed=0)


def test_names_never_collide_in_a_prompt():
    # brute force over several seeds: no subject appears twice in one prompt
    for seed in range(5):
        for p in sample_collapse_prompts(pool(11), seed=seed):
            assert all(a != b for a, b in itertools.combinations(p["subject_ids"], 2))


@pytest.mark.parametrize("per_cell", [1, 2, 4])
def test_a_smaller_grid_keeps_every_cell_with_its_first_prompts(per_cell):
    small = sample_collapse_prompts(pool(12), seed=0, per_cell=per_cell)
    assert [p["prompt_id"] for p in small] == [f"{k:02d}" for k in range(1, 15 * per_cell + 1)]
    cells = Counter((p["n_subjects"], p["scene"]) for p in small)
    assert set(cells) == {(n, s) for n in (2, 4, 6, 8, 10) for s in ("neutral", "occlusion", "interaction")}
    assert set(cells.values()) == {per_cell}
    # The k-th prompt of a cell is set where the whole grid's k-th is: the cell's first settings.
    settings = ("sunlit park", "city sidewalk", "living room", "sandy beach", "snowy field")
    for k, p in enumerate(small):
        assert settings[k % per_cell] in p["prompt"]
    usage = Counter(sid for p in small for sid in p["subject_ids"])
    assert max(usage.values()) - min(usage.values()) <= 1
