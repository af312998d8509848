"""The CogCanvas compositional sampler (benchmarks/cogcanvas/sampling.py).

Each property is checked by recomputing it independently from the output and the synthetic pool the
test made, not by calling the sampler's helpers.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import datasets
import pytest

from idbench.benchmarks.cogcanvas.sampling import default_prompt_count, group_counts, sample_cogcanvas
from idbench.benchmarks.cogcanvas.spec import (
    AGE_GROUPS,
    ITEM_INTERACTIONS,
    PERSON_INTERACTIONS,
    PROMPTS,
    RETRIEVAL,
    SIZE_CATEGORIES,
    SLOTS,
)

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

COUNT_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}
# How questions must name the person at each place of a row of N, written out by hand.
PLACES = {
    2: ["the person on the far left", "the person on the far right"],
    3: ["the person on the far left", "the second person from the left", "the person on the far right"],
    4: [
        "the person on the far left",
        "the second person from the left",
        "the third person from the left",
        "the person on the far right",
    ],
    5: [
        "the person on the far left",
        "the second person from the left",
        "the third person from the left",
        "the fourth person from the left",
        "the person on the far right",
    ],
}
# Interactions a fashion item may afford; objects may afford any but "wear".
FASHION_INTERACTIONS = ["wear", "hold", "carry", "look_at", "point_at"]
OBJECT_INTERACTIONS = [name for name in ITEM_INTERACTIONS if name != "wear"]


def _row(ref_id: str, entity_id: str, kind: str, name: str, description: str, **extra) -> dict:
    row = {
        "ref_id": ref_id,
        "entity_id": entity_id,
        "kind": kind,
        "file": f"{kind}/{ref_id}.jpg",
        "name": name,
        "description": description,
        "age_group": None,
        "gender": None,
        "ethnicity": None,
        "size_category": None,
        "interactions": None,
        "scene_type": None,
        "landmark": None,
        "source": "synthetic",
        "license": "CC0-1.0",
        "attribution": None,
    }
    row.update(extra)
    return row


def make_pool(n_persons: int, n_objects: int, n_fashion: int, n_backgrounds: int, seed: int = 7) -> list[dict]:
    """Manifest rows: persons with 1-3 refs, items of varied sizes and affordances, backgrounds."""
    rng = random.Random(seed)
    rows = []
    for i in range(n_persons):
        for j in range(rng.randint(1, 3)):
            rows.append(
                _row(
                    f"person-{i:03d}-{j}",
                    f"person-{i:03d}",
                    "person",
                    f"celebrity {i}",
                    f"celebrity {i} in look {j}, {rng.choice(['smiling', 'serious'])}.",
                    age_group=rng.choice(AGE_GROUPS),
                    gender=rng.choice(["female", "male"]),
                    ethnicity=rng.choice(["a", "b", "c"]),
                )
            )
    item_kinds = (("object", n_objects, OBJECT_INTERACTIONS), ("fashion", n_fashion, FASHION_INTERACTIONS))
    for kind, count, afforded in item_kinds:
        for i in range(count):
            interactions = rng.sample(afforded, rng.randint(1, 3))
            size = rng.choice(SIZE_CATEGORIES)
            for j in range(rng.randint(1, 2)):
                rows.append(
                    _row(
                        f"{kind}-{i:03d}-{j}",
                        f"{kind}-{i:03d}",
                        kind,
                        f"the {kind} number {i}",
                        f"{kind} {i}, view {j}",
                        size_category=size,
                        interactions=list(interactions),
                    )
                )
    for i in range(n_backgrounds):
        landmark = f"Landmark {i}" if i % 2 == 0 else None
        for j in range(rng.randint(1, 2)):
            rows.append(
                _row(
                    f"background-{i:02d}-{j}",
                    f"background-{i:02d}",
                    "background",
                    f"the scene number {i}",
                    f"scene {i}, shot {j}",
                    scene_type="landmark" if landmark else rng.choice(["landscape", "cityscape", "indoor"]),
                    landmark=landmark,
                )
            )
    return rows


def by_entity(rows: list[dict]) -> dict[str, list[dict]]:
    entities: dict[str, list[dict]] = {}
    for row in rows:
        entities.setdefault(row["entity_id"], []).append(row)
    return entities


# The paper-sized pool: 100 identities, 80 objects + 35 fashion items, 29 backgrounds.
LARGE = make_pool(100, 80, 35, 29)
LARGE_ENTITIES = by_entity(LARGE)
REF_ENTITY = {row["ref_id"]: row["entity_id"] for row in LARGE}
REFS = {row["ref_id"]: row for row in LARGE}


@pytest.fixture(scope="module")
def large():
    return sample_cogcanvas(LARGE, seed=0, n_prompts=1361)


def test_paper_size_has_the_paper_group_counts(large):
    prompts, _ = large
    assert len(prompts) == 1361
    assert Counter(p["n_persons"] for p in prompts) == {2: 558, 3: 382, 4: 225, 5: 196}
    # 100 identities is the paper's pool, so the default is the paper's count.
    assert default_prompt_count(100) == 1361
    assert default_prompt_count(400) == 1361
    assert len(sample_cogcanvas(LARGE, seed=0)[0]) == 1361


def test_output_has_exactly_the_feature_columns(large):
    prompts, retrieval = large
    for prompt in prompts:
        assert set(prompt) == set(PROMPTS)
        for person in prompt["persons"]:
            assert set(person) == set(PROMPTS["persons"].feature)
        for question in prompt["questions"]:
            assert set(question) == set(PROMPTS["questions"].feature)
        for e in prompt["interaction_graph"] + prompt["position_graph"]:
            assert set(e) == {"source", "relation", "target"}
    for row in retrieval:
        assert set(row) == set(RETRIEVAL)


def test_output_validates_against_the_features(large):
    prompts, retrieval = large
    table = datasets.Dataset.from_list(prompts, features=PROMPTS)
    assert table.num_rows == 1361
    assert table[0]["persons"][0]["slot"] == "A"
    assert datasets.Dataset.from_list(retrieval, features=RETRIEVAL).num_rows == len(retrieval)


def test_prompt_ids_are_unique_padded_and_ordered_by_group_size(large):
    prompts, _ = large
    assert [p["prompt_id"] for p in prompts] == [f"cogcanvas-{k:04d}" for k in range(1, 1362)]
    sizes = [p["n_persons"] for p in prompts]
    assert sizes == sorted(sizes)


def test_layouts_cover_every_ordering_evenly(large):
    prompts, _ = large
    for n in (2, 3, 4, 5):
        seen = Counter(tuple(p["layout"]) for p in prompts if p["n_persons"] == n)
        orderings = list(itertools.permutations(SLOTS[:n]))
        assert set(seen) <= set(orderings)
        counts = [seen[o] for o in orderings]  # zeros included
        assert max(counts) - min(counts) <= 1, n
        if n in (2, 3):
            assert min(counts) > 0


def test_persons_and_items_are_distinct_within_a_prompt(large):
    prompts, _ = large
    for prompt in prompts:
        n = prompt["n_persons"]
        persons = prompt["persons"]
        assert [p["slot"] for p in persons] == list(SLOTS[:n])
        assert len({p["entity_id"] for p in persons}) == n
        assert len({p["item_entity_id"] for p in persons}) == n
        assert sorted(prompt["layout"]) == list(SLOTS[:n])


def test_references_belong_to_their_entities_and_kinds(large):
    prompts, _ = large
    for prompt in prompts:
        for p in prompt["persons"]:
            assert REFS[p["ref_id"]]["entity_id"] == p["entity_id"]
            assert REFS[p["ref_id"]]["kind"] == "person"
            item = REFS[p["item_ref_id"]]
            assert item["entity_id"] == p["item_entity_id"]
            assert item["kind"] == p["item_kind"] in ("object", "fashion")
            assert item["size_category"] == p["item_size"]
        background = REFS[prompt["background_ref_id"]]
        assert background["entity_id"] == prompt["background_entity_id"]
        assert background["kind"] == "background"


def test_every_binding_is_afforded_by_its_item(large):
    prompts, _ = large
    for prompt in prompts:
        for p in prompt["persons"]:
            afforded = LARGE_ENTITIES[p["item_entity_id"]][0]["interactions"]
            assert p["interaction"] in afforded
            assert p["interaction_strength"] == ITEM_INTERACTIONS[p["interaction"]].strength


def test_position_graph_follows_the_layout(large):
    prompts, _ = large
    for prompt in prompts:
        layout = prompt["layout"]
        expected = [
            {"source": layout[i], "relation": "left_of", "target": layout[i + 1]} for i in range(len(layout) - 1)
        ]
        assert prompt["position_graph"] == expected


def test_interaction_graph_matches_bindings_and_neighbours(large):
    prompts, _ = large
    for prompt in prompts:
        bindings = {(p["slot"], p["interaction"], p["item_entity_id"]) for p in prompt["persons"]}
        item_edges = {
            (e["source"], e["relation"], e["target"])
            for e in prompt["interaction_graph"]
            if e["relation"] in ITEM_INTERACTIONS
        }
        assert item_edges == bindings
        person_edges = [e for e in prompt["interaction_graph"] if e["relation"] not in ITEM_INTERACTIONS]
        assert len(person_edges) + len(item_edges) == len(prompt["interaction_graph"])
        assert person_edges, prompt["prompt_id"]  # at least one person-person interaction
        layout = prompt["layout"]
        for e in person_edges:
            assert e["relation"] in PERSON_INTERACTIONS
            assert layout.index(e["target"]) - layout.index(e["source"]) == 1  # neighbours, left first
        assert len({(e["source"], e["target"]) for e in person_edges}) == len(person_edges)


def test_person_interactions_appear_about_half_the_time(large):
    prompts, _ = large
    # Over pairs in prompts of 3+ persons (where "at least one" rarely forces a pair), roughly 1/2.
    pairs = edges = 0
    for prompt in prompts:
        if prompt["n_persons"] >= 3:
            pairs += prompt["n_persons"] - 1
            edges += sum(e["relation"] in PERSON_INTERACTIONS for e in prompt["interaction_graph"])
    assert 0.45 < edges / pairs < 0.65


def test_questions_agree_with_layout_and_bindings(large):
    prompts, _ = large
    for prompt in prompts:
        pid, n, layout = prompt["prompt_id"], prompt["n_persons"], prompt["layout"]
        binding_of = {p["slot"]: (p["interaction"], p["item_entity_id"]) for p in prompt["persons"]}
        item_name = {p["item_entity_id"]: REFS[p["item_ref_id"]]["name"] for p in prompt["persons"]}
        person_edges = {
            (e["source"], e["relation"], e["target"])
            for e in prompt["interaction_graph"]
            if e["relation"] in PERSON_INTERACTIONS
        }
        questions = prompt["questions"]
        assert [q["question_id"] for q in questions] == [f"{pid}-q{k:02d}" for k in range(1, len(questions) + 1)]
        kinds = Counter((q["kind"], q["answer"]) for q in questions)
        # An interaction "no" per interaction while a pair without one (sharing a person) is left.
        free_pairs = n * (n - 1) // 2 - len(person_edges)
        interaction_no = kinds[("interaction", "no")]
        assert interaction_no <= min(len(person_edges), free_pairs)
        assert (interaction_no == 0) == (n == 2)
        assert kinds == Counter(
            {
                ("binding", "yes"): n,
                ("binding", "no"): n,
                ("position", "yes"): n - 1,
                ("position", "no"): n - 1,
                **({("interaction", "yes"): len(person_edges)} if person_edges else {}),
                **({("interaction", "no"): interaction_no} if interaction_no else {}),
            }
        )
        for q in questions:
            source, relation, target = q["source"], q["relation"], q["target"]
            if q["kind"] == "binding":
                truth = binding_of[source] == (relation, target)
                assert truth == (q["answer"] == "yes")
                # Names the person by place and the item by name, with the interaction's -ing form.
                place = PLACES[n][layout.index(source)]
                progressive = ITEM_INTERACTIONS[relation].progressive
                assert q["question"] == f"Is {place} {progressive} {item_name[target]}?"
                if q["answer"] == "no":  # about another person's item, with that person's interaction
                    owner = [s for s, b in binding_of.items() if b[1] == target]
                    assert owner and owner[0] != source and binding_of[owner[0]][0] == relation
            elif q["kind"] == "interaction":
                if q["answer"] == "yes":
                    assert (source, relation, target) in person_edges
                else:  # a pair, left one first, with no interaction at all, asked about a used relation
                    assert layout.index(source) < layout.index(target)
                    assert not {(a, b) for a, _, b in person_edges} & {(source, target), (target, source)}
                    assert relation in {r for _, r, _ in person_edges}
                assert PLACES[n][layout.index(source)] in q["question"]
                assert PLACES[n][layout.index(target)] in q["question"]
            else:
                assert q["kind"] == "position" and relation in ("left_of", "right_of")
                step = 1 if relation == "left_of" else -1  # source stands directly left (right) of target
                assert (layout.index(target) - layout.index(source) == step) == (q["answer"] == "yes")
                assert abs(layout.index(target) - layout.index(source)) == 1
                # Persons are named by what they do, so the text gives nothing away by slot or place.
                doing = {
                    slot: f"{ITEM_INTERACTIONS[interaction].progressive} {item_name[item]}"
                    for slot, (interaction, item) in binding_of.items()
                }
                side = "left" if relation == "left_of" else "right"
                assert q["question"] == f"Is the person {doing[source]} to the {side} of the person {doing[target]}?"


def test_prompt_text_grounds_every_slot_in_layout_order(large):
    prompts, _ = large
    for prompt in prompts:
        text, n, layout = prompt["prompt"], prompt["n_persons"], prompt["layout"]
        background = REFS[prompt["background_ref_id"]]
        assert background["name"] in text
        assert f"{COUNT_WORDS[n]} people" in text
        persons = {p["slot"]: p for p in prompt["persons"]}
        positions = []
        for slot in layout:
            p = persons[slot]
            name = REFS[p["ref_id"]]["name"]
            does = f"{ITEM_INTERACTIONS[p['interaction']].present} {REFS[p['item_ref_id']]['name']}"
            binding = f"person {slot} ({name}) {does}"
            assert binding in text
            positions.append(text.index(binding))
        assert positions == sorted(positions)  # written from left to right
        for e in prompt["interaction_graph"]:
            if e["relation"] in PERSON_INTERACTIONS:
                present = PERSON_INTERACTIONS[e["relation"]].present
                assert f"Person {e['source']} and person {e['target']} {present}." in text


def test_retrieval_rows_point_at_the_prompt_references(large):
    prompts, retrieval = large
    rows_by_prompt: dict[str, list[dict]] = {}
    for row in retrieval:
        rows_by_prompt.setdefault(row["prompt_id"], []).append(row)
    assert set(rows_by_prompt) == {p["prompt_id"] for p in prompts}
    for prompt in prompts:
        rows = {row["slot"]: row for row in rows_by_prompt[prompt["prompt_id"]]}
        assert len(rows) == len(rows_by_prompt[prompt["prompt_id"]]) == 2 * prompt["n_persons"] + 1
        expected = {"background": (prompt["background_entity_id"], prompt["background_ref_id"])}
        for p in prompt["persons"]:
            expected[p["slot"]] = (p["entity_id"], p["ref_id"])
            expected[f"{p['slot']}.item"] = (p["item_entity_id"], p["item_ref_id"])
        assert set(rows) == set(expected)
        for slot, (entity_id, ref_id) in expected.items():
            row = rows[slot]
            assert row["entity_id"] == entity_id
            assert row["ground_truth_ref_id"] == ref_id
            assert ref_id in row["candidate_ref_ids"]
            assert row["candidate_ref_ids"] == sorted(r["ref_id"] for r in LARGE_ENTITIES[entity_id])
            assert row["kind"] == REFS[ref_id]["kind"]
            # The query is the prompt's own words for the slot (what a generator sees): the reference's
            # name as the prompt writes it, never the ground-truth image's description.
            assert row["query"] == REFS[ref_id]["name"]
            assert row["query"] in prompt["prompt"]
            assert REFS[ref_id]["description"].rstrip(".") not in row["query"]


def test_identities_backgrounds_and_images_are_used_evenly(large):
    prompts, _ = large
    persons = Counter(p["entity_id"] for prompt in prompts for p in prompt["persons"])
    assert len(persons) == 100
    assert max(persons.values()) - min(persons.values()) <= 1
    backgrounds = Counter(prompt["background_entity_id"] for prompt in prompts)
    assert len(backgrounds) == 29
    assert max(backgrounds.values()) - min(backgrounds.values()) <= 1
    # Within each person and background, its reference images are used evenly too.
    used = Counter(p["ref_id"] for prompt in prompts for p in prompt["persons"])
    used.update(prompt["background_ref_id"] for prompt in prompts)
    for entity_id, refs in LARGE_ENTITIES.items():
        if refs[0]["kind"] in ("person", "background"):
            counts = [used[r["ref_id"]] for r in refs]
            assert max(counts) - min(counts) <= 1, entity_id


def test_every_size_strength_cell_of_the_pool_is_used_about_evenly(large):
    prompts, _ = large
    in_pool = {
        (refs[0]["size_category"], ITEM_INTERACTIONS[i].strength)
        for refs in LARGE_ENTITIES.values()
        if refs[0]["kind"] in ("object", "fashion")
        for i in refs[0]["interactions"]
    }
    used = Counter((p["item_size"], p["interaction_strength"]) for prompt in prompts for p in prompt["persons"])
    assert set(used) == in_pool
    # Cells are drawn uniformly, so each gets roughly 1/len(cells) of the bindings.
    share = sum(used.values()) / len(in_pool)
    assert all(0.75 * share < count < 1.25 * share for count in used.values()), used
    # And every item of the pool is bound somewhere.
    items = {p["item_entity_id"] for prompt in prompts for p in prompt["persons"]}
    assert items == {e for e, refs in LARGE_ENTITIES.items() if refs[0]["kind"] in ("object", "fashion")}


def test_same_input_and_seed_give_the_same_output_in_any_input_order(large):
    shuffled = list(LARGE)
    random.Random(3).shuffle(shuffled)
    assert sample_cogcanvas(shuffled, seed=0, n_prompts=1361) == large
    assert sample_cogcanvas(list(reversed(LARGE)), seed=0, n_prompts=1361) == large
    other, _ = sample_cogcanvas(LARGE, seed=1, n_prompts=1361)
    assert [p["prompt_id"] for p in other] == [p["prompt_id"] for p in large[0]]
    assert other != large[0]


# ---------------------------------------------------------------------------------------------------
# Small pools and errors


def test_small_pool_scales_the_default_count():
    rows = make_pool(6, 5, 3, 3)
    prompts, retrieval = sample_cogcanvas(rows, seed=0)
    assert default_prompt_count(6) == round(1361 * 6 / 100) == 82
    assert len(prompts) == 82
    # Largest remainder by hand: exact shares 33.62, 23.02, 13.56, 11.81 -> 33+23+13+11 = 80, and the
    # two left go to the largest fractions (N=5: .81, N=2: .62).
    sizes = Counter(p["n_persons"] for p in prompts)
    assert sizes == {2: 34, 3: 23, 4: 13, 5: 12}
    for n, paper in {2: 558, 3: 382, 4: 225, 5: 196}.items():
        assert abs(sizes[n] - 82 * paper / 1361) < 1
    assert prompts[0]["prompt_id"] == "cogcanvas-01" and prompts[-1]["prompt_id"] == "cogcanvas-82"
    assert len(retrieval) == sum(2 * n + 1 for n in (p["n_persons"] for p in prompts))
    datasets.Dataset.from_list(prompts, features=PROMPTS)
    datasets.Dataset.from_list(retrieval, features=RETRIEVAL)
    persons = Counter(p["entity_id"] for prompt in prompts for p in prompt["persons"])
    assert max(persons.values()) - min(persons.values()) <= 1


@pytest.mark.parametrize("n", [1, 2, 7, 10, 100, 1000, 1361, 2000])
def test_group_counts_apportion_any_total(n):
    counts = group_counts(n)
    assert sum(counts.values()) == n
    for size, paper in {2: 558, 3: 382, 4: 225, 5: 196}.items():
        assert math.floor(n * paper / 1361) <= counts[size] <= math.ceil(n * paper / 1361)


def test_explicit_prompt_count_is_honoured():
    prompts, _ = sample_cogcanvas(make_pool(6, 5, 3, 3), seed=4, n_prompts=10)
    assert [p["prompt_id"] for p in prompts] == [f"cogcanvas-{k:02d}" for k in range(1, 11)]
    assert Counter(p["n_persons"] for p in prompts) == group_counts(10)


def test_too_few_identities_is_an_error_that_says_what_is_missing():
    rows = make_pool(4, 10, 0, 2)
    with pytest.raises(ValueError, match=r"5 distinct person identities \(found 4\)"):
        sample_cogcanvas(rows, seed=0, n_prompts=100)
    # With few enough prompts that no 5-person group is needed, 4 identities do. Shares of 3 prompts:
    # 1.23, 0.84, 0.50, 0.43 -> 1 + 0 + 0 + 0, and the two left go to N=3 (.84) and N=4 (.50).
    assert group_counts(3) == {2: 1, 3: 1, 4: 1, 5: 0}
    assert len(sample_cogcanvas(rows, seed=0, n_prompts=3)[0]) == 3


def test_too_few_items_or_no_background_is_an_error():
    with pytest.raises(ValueError, match=r"5 distinct object/fashion items \(found 3\)"):
        sample_cogcanvas(make_pool(8, 2, 1, 2), seed=0, n_prompts=100)
    with pytest.raises(ValueError, match=r"at least 1 background \(found 0\)"):
        sample_cogcanvas(make_pool(8, 6, 0, 0), seed=0, n_prompts=100)
    with pytest.raises(ValueError, match="n_prompts"):
        sample_cogcanvas([], seed=0)


def test_items_the_sampler_cannot_bind_are_errors():
    rows = make_pool(6, 5, 0, 1)
    item = next(r for r in rows if r["kind"] == "object")
    broken = [dict(r, interactions=[]) if r["entity_id"] == item["entity_id"] else r for r in rows]
    with pytest.raises(ValueError, match=f"{item['entity_id']}.*affords no interactions"):
        sample_cogcanvas(broken, seed=0, n_prompts=5)
    other_size = "large" if item["size_category"] != "large" else "small"
    twin = dict(item, ref_id=item["ref_id"] + "-twin", size_category=other_size)
    with pytest.raises(ValueError, match="disagree"):
        sample_cogcanvas(rows + [twin], seed=0, n_prompts=5)
    with pytest.raises(ValueError, match="appears twice"):
        sample_cogcanvas(rows + [dict(item)], seed=0, n_prompts=5)


def test_position_questions_use_both_sides_at_every_group_size(large):
    # Added with question version 2: "left" and "right" phrasings both occur, for every N.
    prompts, _ = large
    sides = Counter(
        (prompt["n_persons"], q["relation"])
        for prompt in prompts
        for q in prompt["questions"]
        if q["kind"] == "position" and q["answer"] == "yes"
    )
    for n in sorted({p["n_persons"] for p in prompts}):
        left, right = sides[(n, "left_of")], sides[(n, "right_of")]
        assert left and right and 0.3 < left / (left + right) < 0.7, (n, left, right)
