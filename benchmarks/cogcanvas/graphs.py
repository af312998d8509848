"""Interaction and position graphs of a CogCanvas prompt, and the yes/no questions derived from them.

Graphs are typed edge lists, ``{"source": ..., "relation": ..., "target": ...}``. Their nodes are person
slots (``"A"``..``"E"``) and item entity ids:

- the *interaction graph* holds one person -> item edge per person (relation = an ``ITEM_INTERACTIONS``
  key such as ``"hold"``) and the person <-> person edges (relation = a ``PERSON_INTERACTIONS`` key,
  source = the left one of the two neighbours);
- the *position graph* holds one ``left_of`` edge per pair of layout neighbours (``A left_of B``: A
  stands directly to the left of B).

The persons stand in one row, so the graphs can say left and right but not in front or behind; no
question asks about depth.

The questions of Attr-VQA are written from these graphs alone (plus the names of the items), so a
scorer can always trace a question back to the edge it tests. Everything here is a pure function.

Example::

    >>> position_graph(["B", "A"])
    [{'source': 'B', 'relation': 'left_of', 'target': 'A'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from idbench.benchmarks.cogcanvas.spec import (
    ITEM_INTERACTIONS,
    PERSON_INTERACTIONS,
    POSITION_RELATIONS,
    QUESTION_KINDS,
    STRENGTHS,
)

LEFT_OF = POSITION_RELATIONS[0]
# Only in questions, never in a position graph: "Is X to the right of Y?" tests the edge (X right_of Y),
# which is the graph's (Y left_of X) read from the other side.
RIGHT_OF = "right_of"
BINDING, INTERACTION, POSITION = QUESTION_KINDS

# The version of the question generator, recorded in every built CogCanvas dataset (build_info.json and
# the card). Accuracies over different question sets are not comparable, so bump it whenever a change
# here alters which questions a prompt gets, their wording, their order or their ids.
#   1: per person a binding "yes" and a "no" about another person's item; a "yes" per person-person
#      interaction; per left_of edge a "yes" and the reversed "no", all phrased "to the left of".
#   2: a "no" interaction question per person-person interaction while a pair of persons without one
#      remains (same interaction, another pair sharing a person, so an always-"yes" judge no longer
#      scores 100 %); position questions alternate between "to the left of" and "to the right of".
#   3: every "no" question names the "yes" question it negates (``negates``), so a scorer can pair a
#      fact with its negative without relying on question order; questions and ids as in version 2.
QUESTIONS_VERSION = 3

# The kind of an interaction-graph edge (person -> item or person <-> person) is told by its relation
# alone, which works because ITEM_INTERACTIONS and PERSON_INTERACTIONS share no key (tests/benchmarks/cogcanvas/test_graphs.py).


class Edge(TypedDict):
    source: str
    relation: str
    target: str


class Question(TypedDict):
    question_id: str
    kind: str  # "binding" | "interaction" | "position"
    question: str
    answer: str  # "yes" | "no"
    # For a "no" question, the id of the "yes" question (the ground-truth fact) it is the negative of;
    # "" for a "yes" question.
    negates: str
    # The edge the question tests; for a "no" question, the edge that does NOT hold. Position questions
    # phrased "to the right of" carry a right_of edge (the position graph itself holds left_of only).
    source: str
    relation: str
    target: str


def edge(source: str, relation: str, target: str) -> Edge:
    return {"source": source, "relation": relation, "target": target}


def neighbour_pairs(layout: Sequence[str]) -> list[tuple[str, str]]:
    """The (left, right) pairs of persons standing next to each other, from left to right."""
    return [(layout[i], layout[i + 1]) for i in range(len(layout) - 1)]


def position_graph(layout: Sequence[str]) -> list[Edge]:
    """One ``left_of`` edge per pair of layout neighbours, from left to right."""
    if len(set(layout)) != len(layout):
        raise ValueError(f"layout repeats a person: {list(layout)}")
    return [edge(left, LEFT_OF, right) for left, right in neighbour_pairs(layout)]


def interaction_graph(persons: Sequence[Mapping[str, str]], person_edges: Sequence[Edge]) -> list[Edge]:
    """The person -> item edges (in slot order) followed by the person <-> person edges.

    ``persons`` are the ``persons`` records of a prompt (``slot``, ``item_entity_id``, ``interaction``);
    ``person_edges`` the person-person interactions, each ``edge(left_slot, relation, right_slot)``.
    """
    slots = {person["slot"] for person in persons}
    edges: list[Edge] = []
    for person in persons:
        if person["interaction"] not in ITEM_INTERACTIONS:
            raise ValueError(f"person {person['slot']}: unknown item interaction {person['interaction']!r}")
        edges.append(edge(person["slot"], person["interaction"], person["item_entity_id"]))
    for pair in person_edges:
        if pair["relation"] not in PERSON_INTERACTIONS:
            raise ValueError(f"unknown person interaction {pair['relation']!r}")
        if pair["source"] not in slots or pair["target"] not in slots:
            raise ValueError(f"person interaction {pair} names a slot not among {sorted(slots)}")
        edges.append(edge(pair["source"], pair["relation"], pair["target"]))
    return edges


def layout_from_position_graph(graph: Sequence[Edge]) -> list[str]:
    """The left-to-right order of persons that a position graph (a single chain) describes."""
    if not graph:
        raise ValueError("the position graph is empty; a prompt has at least two persons")
    right_of = {}
    for e in graph:
        if e["relation"] != LEFT_OF:
            raise ValueError(f"unexpected relation in the position graph: {e}")
        if e["source"] in right_of:
            raise ValueError(f"person {e['source']} is directly left of two persons")
        right_of[e["source"]] = e["target"]
    starts = set(right_of) - set(right_of.values())
    if len(starts) != 1:
        raise ValueError(f"the position graph is not a single left-to-right chain: {list(graph)}")
    layout = [starts.pop()]
    while layout[-1] in right_of:
        layout.append(right_of[layout[-1]])
        if len(layout) > len(graph) + 1:  # pragma: no cover - guarded by the checks above
            raise ValueError(f"the position graph has a cycle: {list(graph)}")
    if len(layout) != len(graph) + 1:
        raise ValueError(f"the position graph is not a single left-to-right chain: {list(graph)}")
    return layout


_ORDINALS = {2: "second", 3: "third", 4: "fourth"}


def position_phrase(index: int, n: int) -> str:
    """How a question names the person at ``index`` (0 = leftmost) of ``n`` persons in a row.

    >>> [position_phrase(i, 3) for i in range(3)]
    ['the person on the far left', 'the second person from the left', 'the person on the far right']
    """
    if not 0 <= index < n:
        raise ValueError(f"position {index} is outside a row of {n}")
    if index == 0:
        return "the person on the far left"
    if index == n - 1:
        return "the person on the far right"
    return f"the {_ORDINALS[index + 1]} person from the left"


def _item_bindings(graph: Sequence[Edge]) -> dict[str, Edge]:
    """slot -> its person -> item edge; a person bound to two items is an error."""
    bindings: dict[str, Edge] = {}
    for e in graph:
        if e["relation"] in ITEM_INTERACTIONS:
            if e["source"] in bindings:
                raise ValueError(f"person {e['source']} is bound to two items: {bindings[e['source']]}, {e}")
            bindings[e["source"]] = e
    return bindings


def _negative_binding_partner(index: int, layout: Sequence[str], bindings: Mapping[str, Edge]) -> str:
    """Whose item the "no" binding question of the person at ``index`` asks about.

    The strongest interaction comes first: "is X holding the cup" is a clear no when someone else holds
    it, while "is X standing beside the chair" may be true by accident in the image. Among equals the
    nearest neighbour, since binding leaks mostly between neighbours; then the leftmost.
    """
    others = [j for j in range(len(layout)) if j != index]

    def rank(j: int) -> tuple[int, int, int]:
        strength = ITEM_INTERACTIONS[bindings[layout[j]]["relation"]].strength
        return (STRENGTHS.index(strength), abs(j - index), j)

    return layout[min(others, key=rank)]


def _pairs_without_interaction(layout: Sequence[str], person_edges: Sequence[Edge]) -> list[tuple[str, str]]:
    """Every pair of persons (left one first) that no person <-> person edge links, left to right."""
    linked = {frozenset((e["source"], e["target"])) for e in person_edges}
    return [
        (layout[i], layout[j])
        for i in range(len(layout))
        for j in range(i + 1, len(layout))
        if frozenset((layout[i], layout[j])) not in linked
    ]


def _negative_interaction_pair(
    interaction: Edge, layout: Sequence[str], free_pairs: Sequence[tuple[str, str]]
) -> tuple[str, str] | None:
    """Which pair the "no" question of a person <-> person ``interaction`` asks about, if any.

    A pair without any interaction that shares one person with it: asking whether B hugs C when the
    prompt has B hug A tests that the interaction is bound to the right partner, the way a binding "no"
    tests the item. Among those the nearest pair (interactions leak mostly between neighbours), then the
    leftmost. None when no such pair is left (always so with two persons).
    """
    ends = {interaction["source"], interaction["target"]}
    candidates = [pair for pair in free_pairs if ends & set(pair)]
    if not candidates:
        return None

    def rank(pair: tuple[str, str]) -> tuple[int, int]:
        i, j = layout.index(pair[0]), layout.index(pair[1])
        return (abs(j - i), min(i, j))

    return min(candidates, key=rank)


def _phrased_right(k: int, layout: Sequence[str]) -> bool:
    """Whether the position questions of the ``k``-th neighbour pair say "right of" rather than "left of".

    Pairs alternate, so a judge that leans towards one word cannot score by it; which word comes first
    depends on whether the leftmost slot sorts after the rightmost, which the sampler's even cover of
    all orderings makes a coin flip at every group size (a 2-person prompt has a single pair).
    """
    return (k + (layout[0] > layout[-1])) % 2 == 1


def derive_questions(
    prompt_id: str,
    interaction_graph: Sequence[Edge],
    position_graph: Sequence[Edge],
    item_names: Mapping[str, str],
) -> list[Question]:
    """The yes/no questions of a prompt, written from its graphs.

    ``item_names`` maps each item entity id to how the prompt names it ("the coffee cup"). Questions name
    persons by where they stand ("the second person from the left") or, in position questions, by what
    they do with their item, never by slot, so that answering needs the image alone.

    - binding: per person -> item edge a "yes", and a "no" about another person's item, with that
      person's interaction;
    - interaction: per person <-> person edge a "yes", then a "no" asking the same interaction of a
      pair that has none (see :func:`_negative_interaction_pair`; none once such pairs run out, so a
      2-person prompt has only its "yes");
    - position: per ``left_of`` edge a "yes" and the reversed "no", phrased "to the left of" or "to the
      right of" (see :func:`_phrased_right`); a right-phrased question records a ``right_of`` edge.

    Every "no" question records in ``negates`` the id of the "yes" question it is the negative of (the
    yes-bias-robust Attr-VQA variant pairs them). Ids are ``f"{prompt_id}-q{k:02d}"`` with k counting
    from 1 in the order above. The rules here are
    version :data:`QUESTIONS_VERSION`.
    """
    layout = layout_from_position_graph(position_graph)
    bindings = _item_bindings(interaction_graph)
    missing = [slot for slot in layout if slot not in bindings]
    if missing:
        raise ValueError(f"{prompt_id}: persons {missing} have no item in the interaction graph")
    where = {slot: position_phrase(i, len(layout)) for i, slot in enumerate(layout)}

    def doing(slot: str) -> str:  # "holding the coffee cup"
        binding = bindings[slot]
        return f"{ITEM_INTERACTIONS[binding['relation']].progressive} {item_names[binding['target']]}"

    # (kind, text, answer, tested edge), numbered at the end. Each "no" draft directly follows the "yes"
    # draft it negates, which is how the ``negates`` ids are filled in below.
    drafts: list[tuple[str, str, str, Edge]] = []
    for index, slot in enumerate(layout):
        drafts.append((BINDING, f"Is {where[slot]} {doing(slot)}?", "yes", bindings[slot]))
        # A layout always holds two or more persons, so there is another person's item to ask about.
        other = bindings[_negative_binding_partner(index, layout, bindings)]
        text = f"Is {where[slot]} {doing(other['source'])}?"
        drafts.append((BINDING, text, "no", edge(slot, other["relation"], other["target"])))
    person_edges = [e for e in interaction_graph if e["relation"] in PERSON_INTERACTIONS]
    free_pairs = _pairs_without_interaction(layout, person_edges)
    for e in person_edges:
        progressive = PERSON_INTERACTIONS[e["relation"]].progressive
        text = f"Are {where[e['source']]} and {where[e['target']]} {progressive}?"
        drafts.append((INTERACTION, text, "yes", edge(e["source"], e["relation"], e["target"])))
        pair = _negative_interaction_pair(e, layout, free_pairs)
        if pair is not None:
            free_pairs.remove(pair)
            text = f"Are {where[pair[0]]} and {where[pair[1]]} {progressive}?"
            drafts.append((INTERACTION, text, "no", edge(pair[0], e["relation"], pair[1])))
    for k, e in enumerate(position_graph):
        left, right = e["source"], e["target"]
        if _phrased_right(k, layout):
            text = f"Is the person {doing(right)} to the right of the person {doing(left)}?"
            drafts.append((POSITION, text, "yes", edge(right, RIGHT_OF, left)))
            reversed_text = f"Is the person {doing(left)} to the right of the person {doing(right)}?"
            drafts.append((POSITION, reversed_text, "no", edge(left, RIGHT_OF, right)))
        else:
            text = f"Is the person {doing(left)} to the left of the person {doing(right)}?"
            drafts.append((POSITION, text, "yes", edge(left, LEFT_OF, right)))
            reversed_text = f"Is the person {doing(right)} to the left of the person {doing(left)}?"
            drafts.append((POSITION, reversed_text, "no", edge(right, LEFT_OF, left)))

    questions: list[Question] = []
    fact_id = ""
    for k, (kind, text, answer, tested) in enumerate(drafts, start=1):
        question_id = f"{prompt_id}-q{k:02d}"
        if answer == "yes":
            fact_id = question_id
        questions.append(
            {
                "question_id": question_id,
                "kind": kind,
                "question": text,
                "answer": answer,
                "negates": "" if answer == "yes" else fact_id,
                "source": tested["source"],
                "relation": tested["relation"],
                "target": tested["target"],
            }
        )
    return questions


def binding_phrases(
    interaction_graph: Sequence[Edge], position_graph: Sequence[Edge], item_names: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """slot -> (what the person does with its own item, what it would do with another person's item),
    e.g. ``("holding the red cup", "wearing the green dress")``: the yes and the no of a binding question
    asked about a person located in the image rather than at a position of the row.

    The other item is chosen as the built binding "no" question chooses it (strongest interaction,
    then the nearest neighbour, then the leftmost), so the two families of questions test the same
    confusion.
    """
    layout = layout_from_position_graph(position_graph)
    bindings = _item_bindings(interaction_graph)

    def doing(slot: str) -> str:
        binding = bindings[slot]
        return f"{ITEM_INTERACTIONS[binding['relation']].progressive} {item_names[binding['target']]}"

    return {slot: (doing(slot), doing(_negative_binding_partner(i, layout, bindings))) for i, slot in enumerate(layout)}
