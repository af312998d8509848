"""Graphs and yes/no questions of CogCanvas prompts (benchmarks/cogcanvas/graphs.py), checked on hand-made examples."""

from __future__ import annotations

import json

import pytest

from idbench.benchmarks.cogcanvas.graphs import (
    QUESTIONS_VERSION,
    derive_questions,
    edge,
    interaction_graph,
    layout_from_position_graph,
    neighbour_pairs,
    position_graph,
    position_phrase,
)
from idbench.benchmarks.cogcanvas.spec import ITEM_INTERACTIONS, PERSON_INTERACTIONS
from idbench.builders.build import build

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

# Three persons standing B, A, C from left to right; B and A hold hands.
PERSONS = [
    {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
    {"slot": "B", "item_entity_id": "dress", "interaction": "wear"},
    {"slot": "C", "item_entity_id": "chair", "interaction": "stand_beside"},
]
LAYOUT = ["B", "A", "C"]
ITEM_NAMES = {"cup": "the coffee cup", "dress": "the red dress", "chair": "the wooden chair"}
HANDS = edge("B", "holds_hands_with", "A")


def test_relation_vocabularies_are_disjoint():
    # derive_questions tells person->item from person<->person edges by the relation alone.
    assert not set(ITEM_INTERACTIONS) & set(PERSON_INTERACTIONS)


def test_position_graph_links_layout_neighbours_left_to_right():
    assert position_graph(LAYOUT) == [
        {"source": "B", "relation": "left_of", "target": "A"},
        {"source": "A", "relation": "left_of", "target": "C"},
    ]
    assert neighbour_pairs(["A", "B"]) == [("A", "B")]
    with pytest.raises(ValueError, match="repeats"):
        position_graph(["A", "A"])


def test_layout_round_trips_through_the_position_graph():
    for layout in (["A", "B"], ["C", "A", "B"], ["E", "D", "C", "B", "A"], ["B", "D", "A", "C"]):
        assert layout_from_position_graph(position_graph(layout)) == layout


@pytest.mark.parametrize(
    "graph",
    [
        [],  # empty
        [edge("A", "left_of", "B"), edge("C", "left_of", "D")],  # two chains
        [edge("A", "left_of", "B"), edge("A", "left_of", "C")],  # a fork
        [edge("A", "left_of", "B"), edge("B", "left_of", "A")],  # a cycle
        [edge("A", "right_of", "B")],  # unknown relation
    ],
)
def test_layout_from_a_broken_position_graph_is_an_error(graph):
    with pytest.raises(ValueError):
        layout_from_position_graph(graph)


def test_interaction_graph_holds_item_edges_then_person_edges():
    assert interaction_graph(PERSONS, [HANDS]) == [
        {"source": "A", "relation": "hold", "target": "cup"},
        {"source": "B", "relation": "wear", "target": "dress"},
        {"source": "C", "relation": "stand_beside", "target": "chair"},
        {"source": "B", "relation": "holds_hands_with", "target": "A"},
    ]


def test_interaction_graph_rejects_unknown_relations_and_slots():
    with pytest.raises(ValueError, match="unknown item interaction"):
        interaction_graph([{"slot": "A", "item_entity_id": "cup", "interaction": "juggle"}], [])
    with pytest.raises(ValueError, match="unknown person interaction"):
        interaction_graph(PERSONS, [edge("A", "waltzes_with", "B")])
    with pytest.raises(ValueError, match="slot"):
        interaction_graph(PERSONS, [edge("A", "hugs", "E")])


def test_position_phrases_name_places_in_a_row():
    assert [position_phrase(i, 2) for i in range(2)] == ["the person on the far left", "the person on the far right"]
    assert [position_phrase(i, 5) for i in range(5)] == [
        "the person on the far left",
        "the second person from the left",
        "the third person from the left",
        "the fourth person from the left",
        "the person on the far right",
    ]
    with pytest.raises(ValueError):
        position_phrase(3, 3)


def test_questions_of_a_three_person_prompt():
    graph = interaction_graph(PERSONS, [HANDS])
    questions = derive_questions("cogcanvas-0007", graph, position_graph(LAYOUT), ITEM_NAMES)
    expected = [
        # B stands on the far left and wears the dress; its "no" asks about A's cup (close, nearest).
        ("binding", "Is the person on the far left wearing the red dress?", "yes", ("B", "wear", "dress")),
        ("binding", "Is the person on the far left holding the coffee cup?", "no", ("B", "hold", "cup")),
        ("binding", "Is the second person from the left holding the coffee cup?", "yes", ("A", "hold", "cup")),
        ("binding", "Is the second person from the left wearing the red dress?", "no", ("A", "wear", "dress")),
        (
            "binding",
            "Is the person on the far right standing beside the wooden chair?",
            "yes",
            ("C", "stand_beside", "chair"),
        ),
        # B's dress and A's cup are both close-contact; A is C's neighbour.
        ("binding", "Is the person on the far right holding the coffee cup?", "no", ("C", "hold", "cup")),
        (
            "interaction",
            "Are the person on the far left and the second person from the left holding hands?",
            "yes",
            ("B", "holds_hands_with", "A"),
        ),
        # Pairs without an interaction that share a person with B-A: A-C (neighbours) before B-C.
        (
            "interaction",
            "Are the second person from the left and the person on the far right holding hands?",
            "no",
            ("A", "holds_hands_with", "C"),
        ),
        # Layout B..C: "B" sorts before "C", so the first pair says "left", the second "right".
        (
            "position",
            "Is the person wearing the red dress to the left of the person holding the coffee cup?",
            "yes",
            ("B", "left_of", "A"),
        ),
        (
            "position",
            "Is the person holding the coffee cup to the left of the person wearing the red dress?",
            "no",
            ("A", "left_of", "B"),
        ),
        (
            "position",
            "Is the person standing beside the wooden chair to the right of the person holding the coffee cup?",
            "yes",
            ("C", "right_of", "A"),
        ),
        (
            "position",
            "Is the person holding the coffee cup to the right of the person standing beside the wooden chair?",
            "no",
            ("A", "right_of", "C"),
        ),
    ]
    # Every "no" is the negative of the "yes" just before it (q02 of q01, q04 of q03, ...).
    negates = ["", "q01", "", "q03", "", "q05", "", "q07", "", "q09", "", "q11"]
    assert len(questions) == len(expected)
    for k, (question, (kind, text, answer, (source, relation, target))) in enumerate(zip(questions, expected), 1):
        assert question == {
            "question_id": f"cogcanvas-0007-q{k:02d}",
            "kind": kind,
            "question": text,
            "answer": answer,
            "negates": f"cogcanvas-0007-{negates[k - 1]}" if negates[k - 1] else "",
            "source": source,
            "relation": relation,
            "target": target,
        }


def test_negative_binding_prefers_close_contact_items():
    # Two persons: the only other item is asked about, whatever its strength.
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "chair", "interaction": "look_at"},
    ]
    questions = derive_questions("p", interaction_graph(persons, []), position_graph(["A", "B"]), ITEM_NAMES)
    negatives = [
        (q["source"], q["relation"], q["target"]) for q in questions if q["answer"] == "no" and q["kind"] == "binding"
    ]
    assert negatives == [("A", "look_at", "chair"), ("B", "hold", "cup")]


def test_questions_need_an_item_for_every_person():
    graph = interaction_graph(PERSONS[:2], [])
    with pytest.raises(ValueError, match="no item"):
        derive_questions("p", graph, position_graph(LAYOUT), ITEM_NAMES)


# --- additions for question version 2: interaction "no" questions, "right of" phrasing, versioning ---


def _asked(questions, kind):
    return [
        (q["answer"], q["source"], q["relation"], q["target"], q["question"]) for q in questions if q["kind"] == kind
    ]


def test_two_persons_have_no_pair_left_for_an_interaction_no():
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "chair", "interaction": "look_at"},
    ]
    graph = interaction_graph(persons, [edge("A", "hugs", "B")])
    questions = derive_questions("p", graph, position_graph(["A", "B"]), ITEM_NAMES)
    assert _asked(questions, "interaction") == [
        ("yes", "A", "hugs", "B", "Are the person on the far left and the person on the far right hugging each other?"),
    ]
    # One pair, A left of B: "A" sorts before "B", so it is phrased with "left".
    assert _asked(questions, "position") == [
        (
            "yes",
            "A",
            "left_of",
            "B",
            "Is the person holding the coffee cup to the left of the person looking at the wooden chair?",
        ),
        (
            "no",
            "B",
            "left_of",
            "A",
            "Is the person looking at the wooden chair to the left of the person holding the coffee cup?",
        ),
    ]


def test_a_reversed_two_person_row_is_phrased_with_right():
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "chair", "interaction": "look_at"},
    ]
    # B stands left of A; "B" sorts after "A", so the single pair says "right".
    questions = derive_questions(
        "p", interaction_graph(persons, [edge("B", "faces", "A")]), position_graph(["B", "A"]), ITEM_NAMES
    )
    assert _asked(questions, "position") == [
        (
            "yes",
            "A",
            "right_of",
            "B",
            "Is the person holding the coffee cup to the right of the person looking at the wooden chair?",
        ),
        (
            "no",
            "B",
            "right_of",
            "A",
            "Is the person looking at the wooden chair to the right of the person holding the coffee cup?",
        ),
    ]


def test_interaction_negatives_use_each_free_pair_once_and_stop_when_none_is_left():
    # Four persons A B C D from left to right; A-B hug, B-C talk, C-D shake hands.
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "dress", "interaction": "wear"},
        {"slot": "C", "item_entity_id": "chair", "interaction": "stand_beside"},
        {"slot": "D", "item_entity_id": "hat", "interaction": "wear"},
    ]
    names = {**ITEM_NAMES, "hat": "the straw hat"}
    person_edges = [edge("A", "hugs", "B"), edge("B", "talks_to", "C"), edge("C", "shakes_hands_with", "D")]
    questions = derive_questions("p", interaction_graph(persons, person_edges), position_graph(list("ABCD")), names)
    got = [
        (answer, source, relation, target) for answer, source, relation, target, _ in _asked(questions, "interaction")
    ]
    # Free pairs: A-C, A-D, B-D. A-B's no: A-C (distance 2, leftmost); B-C's no: B-D (A-C is used);
    # C-D's no: A-D, the last free pair sharing a person with it.
    assert got == [
        ("yes", "A", "hugs", "B"),
        ("no", "A", "hugs", "C"),
        ("yes", "B", "talks_to", "C"),
        ("no", "B", "talks_to", "D"),
        ("yes", "C", "shakes_hands_with", "D"),
        ("no", "A", "shakes_hands_with", "D"),
    ]
    # Pairs alternate left, right, left ("A" sorts before "D").
    relations = [relation for answer, _, relation, _, _ in _asked(questions, "position") if answer == "yes"]
    assert relations == ["left_of", "right_of", "left_of"]
    # Every "no" interaction names a pair that does not interact in the graph.
    linked = {frozenset((e["source"], e["target"])) for e in person_edges}
    assert all(frozenset((source, target)) not in linked for answer, source, _, target in got if answer == "no")


def test_questions_version_is_recorded_in_build_info_and_card(tmp_path):
    info = build("cogcanvas", out=tmp_path / "out", n_prompts=4)
    assert info["questions_version"] == QUESTIONS_VERSION >= 2
    assert json.loads((tmp_path / "out" / "build_info.json").read_text())["questions_version"] == QUESTIONS_VERSION
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"version {QUESTIONS_VERSION} of idbench's question generator" in card
