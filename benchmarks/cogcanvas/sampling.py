"""The CogCanvas compositional sampler: a validated reference pool -> prompts and retrieval rows.

Each prompt (paper 001, section 3.3) holds N = 2..5 persons, each bound to one object or fashion item
through an interaction the item affords, one background, an explicit left-to-right layout, and
person-person interactions between layout neighbours. Its interaction and position graphs and the
yes/no questions derived from them come from :mod:`idbench.benchmarks.cogcanvas.graphs`; the text is written from
templates (no language model).

How the choices are made, and why:

- group sizes follow the paper's proportions (largest-remainder apportionment of ``n_prompts``), so
  1,361 prompts give exactly its 558 / 382 / 225 / 196;
- identities, reference images and backgrounds are used evenly: each draw takes the least used, ties
  broken at random, so no identity dominates the scores;
- items follow the paper's diversity control: per person a (size category, interaction strength) cell is
  drawn uniformly among the cells still available, then the least used item / interaction in it, so
  rare cells (a large item leaned on) are as frequent as common ones (a small item held);
- layouts cover the N! orderings of each group size evenly (the permutations are shuffled once and
  cycled through), so position questions are not biased towards one ordering;
- every neighbouring pair gets a person-person interaction with probability 1/2, at least one per
  prompt.

Everything is a pure function of (references, seed, n_prompts): the input is sorted by ``ref_id`` first
and all randomness comes from one ``random.Random(seed)``.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from idbench.benchmarks.cogcanvas.graphs import (
    Edge,
    derive_questions,
    edge,
    interaction_graph,
    neighbour_pairs,
    position_graph,
)
from idbench.benchmarks.cogcanvas.spec import (
    GROUP_SIZES,
    ITEM_INTERACTIONS,
    ITEM_KINDS,
    KINDS,
    PAPER_GROUP_COUNTS,
    PAPER_IDENTITIES,
    PAPER_PROMPTS,
    PERSON_INTERACTIONS,
    SIZE_CATEGORIES,
    SLOTS,
)

T = TypeVar("T")

PROMPT_ID_PREFIX = "cogcanvas-"
# Version of the retrieval config's rows (recorded in build_info.json as ``retrieval_version``):
# 1 queried with the ground-truth image's own description (a word-overlap ranker found it every time);
# 2 queries with the prompt's own words for the slot, what a generator sees.
RETRIEVAL_VERSION = 2
_COUNT_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


@dataclass(frozen=True)
class _Entity:
    """A person, item or background with all its reference images (sorted by ref_id)."""

    entity_id: str
    kind: str
    refs: tuple[Mapping[str, Any], ...]
    size: str | None = None  # items only
    interactions: tuple[str, ...] = ()  # items only, in ITEM_INTERACTIONS order

    @property
    def ref_ids(self) -> list[str]:
        return [ref["ref_id"] for ref in self.refs]


@dataclass(frozen=True)
class _Pool:
    persons: tuple[_Entity, ...]
    items: tuple[_Entity, ...]
    backgrounds: tuple[_Entity, ...]


@dataclass
class _Usage:
    """How often each entity, reference image and (item, interaction) pair has been used so far."""

    entities: Counter[str] = field(default_factory=Counter)
    refs: Counter[str] = field(default_factory=Counter)
    item_interactions: Counter[tuple[str, str]] = field(default_factory=Counter)


# --------------------------------------------------------------------------------------------------
# Counts


def default_prompt_count(n_identities: int) -> int:
    """The paper's 1,361 prompts scaled by the number of person identities relative to its 100.

    >>> default_prompt_count(100), default_prompt_count(6), default_prompt_count(250)
    (1361, 82, 1361)
    """
    if n_identities < 0:
        raise ValueError(f"n_identities must be >= 0; got {n_identities}")
    return min(PAPER_PROMPTS, round(PAPER_PROMPTS * n_identities / PAPER_IDENTITIES))


def group_counts(n_prompts: int) -> dict[int, int]:
    """Prompts per group size: largest-remainder apportionment of ``n_prompts`` by the paper's counts.

    Each size first gets the whole part of its exact share; the prompts left over go to the sizes with
    the largest fractional parts (the smaller size first on a tie).

    >>> group_counts(1361)
    {2: 558, 3: 382, 4: 225, 5: 196}
    >>> group_counts(82)
    {2: 34, 3: 23, 4: 13, 5: 12}
    """
    if n_prompts < 0:
        raise ValueError(f"n_prompts must be >= 0; got {n_prompts}")
    # Exact integer arithmetic: the share of size N is n_prompts * paper[N] / PAPER_PROMPTS.
    whole = {size: n_prompts * PAPER_GROUP_COUNTS[size] // PAPER_PROMPTS for size in GROUP_SIZES}
    remainder = {size: n_prompts * PAPER_GROUP_COUNTS[size] % PAPER_PROMPTS for size in GROUP_SIZES}
    left = n_prompts - sum(whole.values())
    for size in sorted(GROUP_SIZES, key=lambda s: (-remainder[s], s))[:left]:
        whole[size] += 1
    return whole


# --------------------------------------------------------------------------------------------------
# The pool


def _build_pool(rows: Sequence[Mapping[str, Any]]) -> _Pool:
    """Group reference rows (already sorted by ref_id) into entities, checking what the sampler needs."""
    by_entity: dict[str, list[Mapping[str, Any]]] = {}
    seen_refs: set[str] = set()
    for row in rows:
        ref_id, kind = row["ref_id"], row["kind"]
        if ref_id in seen_refs:
            raise ValueError(f"reference {ref_id!r} appears twice")
        seen_refs.add(ref_id)
        if kind not in KINDS:
            raise ValueError(f"reference {ref_id!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
        by_entity.setdefault(row["entity_id"], []).append(row)

    persons, items, backgrounds = [], [], []
    for entity_id in sorted(by_entity):
        refs = tuple(by_entity[entity_id])
        kinds = sorted({ref["kind"] for ref in refs})
        if len(kinds) > 1:
            raise ValueError(f"entity {entity_id!r} has references of several kinds: {', '.join(kinds)}")
        kind = kinds[0]
        if kind == "person":
            persons.append(_Entity(entity_id, kind, refs))
        elif kind == "background":
            backgrounds.append(_Entity(entity_id, kind, refs))
        else:
            items.append(_item_entity(entity_id, kind, refs))
    return _Pool(tuple(persons), tuple(items), tuple(backgrounds))


def _item_entity(entity_id: str, kind: str, refs: tuple[Mapping[str, Any], ...]) -> _Entity:
    """An object or fashion item; its size and afforded interactions must be given and agree across refs."""
    sizes = {ref["size_category"] for ref in refs}
    afforded = {frozenset(ref["interactions"] or ()) for ref in refs}
    if len(sizes) > 1 or len(afforded) > 1:
        raise ValueError(
            f"{kind} {entity_id!r}: its references disagree on size_category ({sorted(map(str, sizes))}) "
            f"or interactions ({sorted(sorted(a) for a in afforded)})"
        )
    size, interactions = sizes.pop(), afforded.pop()
    where = f"{kind} {entity_id!r} (reference {refs[0]['ref_id']!r})"
    if size not in SIZE_CATEGORIES:
        raise ValueError(f"{where}: size_category {size!r} is not one of {', '.join(SIZE_CATEGORIES)}")
    unknown = sorted(interactions - set(ITEM_INTERACTIONS))
    if unknown:
        raise ValueError(f"{where}: unknown interactions {unknown}; known: {', '.join(ITEM_INTERACTIONS)}")
    if not interactions:
        raise ValueError(f"{where}: affords no interactions, so no person can be bound to it")
    ordered = tuple(name for name in ITEM_INTERACTIONS if name in interactions)
    return _Entity(entity_id, kind, refs, size=size, interactions=ordered)


def _check_feasible(pool: _Pool, counts: Mapping[int, int]) -> None:
    """Raise one error listing everything the pool lacks for the requested group sizes."""
    largest = max((size for size, count in counts.items() if count > 0), default=0)
    problems = []
    if len(pool.persons) < largest:
        problems.append(f"at least {largest} distinct person identities (found {len(pool.persons)})")
    if len(pool.items) < largest:
        problems.append(f"at least {largest} distinct {'/'.join(ITEM_KINDS)} items (found {len(pool.items)})")
    if not pool.backgrounds:
        problems.append("at least 1 background (found 0)")
    if problems:
        wanted = ", ".join(f"{count} with {size} persons" for size, count in counts.items() if count)
        raise ValueError(
            f"cannot sample CogCanvas prompts ({wanted}): {largest}-person prompts need "
            + "; ".join(problems)
            + ". Add references or ask for fewer prompts (n_prompts)."
        )


# --------------------------------------------------------------------------------------------------
# Balanced choices


def _least_used(options: Sequence[T], k: int, usage: Callable[[T], Any], rng: random.Random) -> list[T]:
    """The ``k`` options with the lowest usage; ties are broken at random (shuffle, then a stable sort)."""
    shuffled = list(options)
    rng.shuffle(shuffled)
    return sorted(shuffled, key=usage)[:k]


def _pick_ref(entity: _Entity, usage: _Usage, rng: random.Random) -> Mapping[str, Any]:
    """The entity's least used reference image, and count it."""
    (ref,) = _least_used(entity.refs, 1, lambda r: usage.refs[r["ref_id"]], rng)
    usage.refs[ref["ref_id"]] += 1
    return ref


def _pick_entities(entities: Sequence[_Entity], k: int, usage: _Usage, rng: random.Random) -> list[_Entity]:
    """The ``k`` least used entities (distinct), and count them."""
    chosen = _least_used(entities, k, lambda e: usage.entities[e.entity_id], rng)
    for entity in chosen:
        usage.entities[entity.entity_id] += 1
    return chosen


def _pick_binding(items: Sequence[_Entity], taken: set[str], usage: _Usage, rng: random.Random) -> tuple[_Entity, str]:
    """One (item, interaction) for a person, by the paper's diversity control.

    A (size, strength) cell is drawn uniformly among the cells that still hold an item not yet taken in
    this prompt; within it the least used item wins, then its least used interaction of that strength.
    """
    cells: dict[tuple[str, str], list[tuple[_Entity, str]]] = {}
    for item in items:
        if item.entity_id in taken:
            continue
        for interaction in item.interactions:
            cell = (item.size, ITEM_INTERACTIONS[interaction].strength)
            cells.setdefault(cell, []).append((item, interaction))
    cell = rng.choice(sorted(cells))

    def used(option: tuple[_Entity, str]) -> tuple[int, int]:
        item, interaction = option
        return (usage.entities[item.entity_id], usage.item_interactions[(item.entity_id, interaction)])

    ((item, interaction),) = _least_used(cells[cell], 1, used, rng)
    usage.entities[item.entity_id] += 1
    usage.item_interactions[(item.entity_id, interaction)] += 1
    return item, interaction


def _pick_person_edges(layout: Sequence[str], rng: random.Random) -> list[Edge]:
    """Person-person interactions between neighbours: each pair with probability 1/2, at least one."""
    pairs = neighbour_pairs(layout)
    chosen = [pair for pair in pairs if rng.random() < 0.5]
    if not chosen:
        chosen = [rng.choice(pairs)]
    relations = list(PERSON_INTERACTIONS)
    return [edge(left, rng.choice(relations), right) for left, right in chosen]


def _layout_cycles(rng: random.Random) -> dict[int, list[tuple[str, ...]]]:
    """Per group size, all N! left-to-right orderings of its slots, shuffled once.

    Prompt k of size N takes ordering k mod N!, so the orderings are used evenly (counts differ by at
    most one) while their sequence is not the lexicographic one.
    """
    cycles = {}
    for size in GROUP_SIZES:
        orderings = list(itertools.permutations(SLOTS[:size]))
        rng.shuffle(orderings)
        cycles[size] = orderings
    return cycles


# --------------------------------------------------------------------------------------------------
# Text


def _place(background: Mapping[str, Any]) -> str:
    """How the prompt names the scene: "the Eiffel Tower in Paris"."""
    return background.get("name") or background.get("landmark")


def _location(background: Mapping[str, Any]) -> str:
    """Where the scene is: "At the Eiffel Tower", "In a cosy living room"."""
    preposition = "In" if background.get("scene_type") == "indoor" else "At"
    return f"{preposition} {_place(background)}"


def prompt_text(
    background: Mapping[str, Any],
    layout: Sequence[str],
    person_refs: Mapping[str, Mapping[str, Any]],
    item_refs: Mapping[str, Mapping[str, Any]],
    interactions: Mapping[str, str],
    person_edges: Sequence[Edge],
) -> str:
    """The prompt, written from a template.

    ``person_refs`` / ``item_refs`` / ``interactions`` are keyed by slot; ``person_edges`` are the
    person-person edges, left person first. Example output::

        At the Eiffel Tower, three people stand in a row. From left to right: person B (the man with the
        grey beard) holds the coffee cup; person A (the woman in the red coat) wears the red dress;
        person C (the young man) stands beside the wooden chair. Person B and person A hold hands.

    Persons are introduced by their reference's ``name``, short enough to keep a 5-person prompt
    readable (from three persons on a prompt passes CLIP's 77 tokens: ``clip_t`` reads it cut,
    ``clip_t_whole`` whole); the same phrases (person, item, place) are the retrieval queries
    (:func:`slot_queries`).
    """
    count = _COUNT_WORDS[len(layout)]
    placed = "; ".join(
        f"person {slot} ({person_refs[slot]['name']}) "
        f"{ITEM_INTERACTIONS[interactions[slot]].present} {item_refs[slot]['name']}"
        for slot in layout
    )
    sentences = [f"{_location(background)}, {count} people stand in a row.", f"From left to right: {placed}."]
    for pair in person_edges:
        present = PERSON_INTERACTIONS[pair["relation"]].present
        sentences.append(f"Person {pair['source']} and person {pair['target']} {present}.")
    return " ".join(sentences)


def slot_queries(
    background: Mapping[str, Any],
    person_refs: Mapping[str, Mapping[str, Any]],
    item_refs: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """The retrieval query of every slot: the words :func:`prompt_text` uses for it, and nothing else.

    ``"A"`` -> the person's phrase ("the woman in the orange spacesuit"), ``"A.item"`` -> the item's
    ("the red espresso cup"), ``"background"`` -> the place ("the Eiffel Tower in Paris"). This is what a
    generator sees, so a ranker has the generator's information, never the ground truth's own
    description (retrieval version 1 queried with that, and a word-overlap ranker found it every time).
    """
    queries = {"background": _place(background)}
    for slot in person_refs:
        queries[slot] = person_refs[slot]["name"]
        queries[f"{slot}.item"] = item_refs[slot]["name"]
    return queries


# --------------------------------------------------------------------------------------------------
# The sampler


def sample_cogcanvas(
    references: Sequence[Mapping[str, Any]], seed: int, n_prompts: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sample CogCanvas prompts and retrieval rows from validated reference manifest rows.

    ``references`` are manifest rows (``ref_id``, ``entity_id``, ``kind``, ``name``, ``description``,
    ``size_category``, ``interactions``, ``scene_type``, ``landmark``, ...); an entity may have several.
    ``n_prompts=None`` means :func:`default_prompt_count` of the number of person identities.

    Returns ``(prompts, retrieval)``: dicts with exactly the columns of ``PROMPTS`` and ``RETRIEVAL``
    in :mod:`idbench.benchmarks.cogcanvas.spec`. Prompts are ordered by group size; ids are
    ``cogcanvas-0001``.. zero-padded to the width of the prompt count. The same references (in any
    order) and seed give the same output.

    Raises ``ValueError`` when the pool cannot fill the requested group sizes (fewer distinct persons or
    items than the largest group, or no background), naming what is missing.
    """
    pool = _build_pool(sorted(references, key=lambda row: row["ref_id"]))
    n = default_prompt_count(len(pool.persons)) if n_prompts is None else n_prompts
    if n < 1:
        origin = f" (the default for {len(pool.persons)} person identities)" if n_prompts is None else ""
        raise ValueError(f"cannot sample CogCanvas prompts: n_prompts must be >= 1, got {n}{origin}")
    counts = group_counts(n)
    _check_feasible(pool, counts)

    rng = random.Random(seed)
    layouts = _layout_cycles(rng)
    usage = _Usage()
    width = len(str(n))
    prompts: list[dict[str, Any]] = []
    retrieval: list[dict[str, Any]] = []
    for size in GROUP_SIZES:
        for k in range(counts[size]):
            prompt_id = f"{PROMPT_ID_PREFIX}{len(prompts) + 1:0{width}d}"
            layout = layouts[size][k % len(layouts[size])]
            prompt, rows = _sample_prompt(prompt_id, size, layout, pool, usage, rng)
            prompts.append(prompt)
            retrieval.extend(rows)
    return prompts, retrieval


def prompt_resampler(
    references: Sequence[Mapping[str, Any]], seed: int
) -> Callable[[Mapping[str, Any], int], tuple[dict[str, Any], list[dict[str, Any]]]]:
    """A function that draws one prompt again: ``(record, attempt) -> (prompt, retrieval rows)``.

    The new draw keeps the prompt's id, group size and layout and picks persons, items, interactions,
    person-person edges and background afresh, with the questions and retrieval rows derived from it.
    The curation verifier uses it when a sampled tuple itself is implausible (no rewording fixes a
    person "wearing" a bench). It is deterministic in (seed, prompt id, attempt); the usage balance of
    the first pass is not extended to re-draws, which are few.
    """
    pool = _build_pool(sorted(references, key=lambda row: row["ref_id"]))

    def resample(record: Mapping[str, Any], attempt: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        rng = random.Random(f"{seed}:{record['prompt_id']}:{attempt}")  # str seeds hash deterministically
        return _sample_prompt(
            record["prompt_id"], int(record["n_persons"]), list(record["layout"]), pool, _Usage(), rng
        )

    return resample


def _sample_prompt(
    prompt_id: str,
    size: int,
    layout: Sequence[str],
    pool: _Pool,
    usage: _Usage,
    rng: random.Random,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One prompt and its retrieval rows; ``usage`` is updated with what it uses."""
    slots = SLOTS[:size]
    persons = dict(zip(slots, _pick_entities(pool.persons, size, usage, rng)))
    person_refs = {slot: _pick_ref(entity, usage, rng) for slot, entity in persons.items()}

    items: dict[str, _Entity] = {}
    interactions: dict[str, str] = {}
    for slot in slots:
        taken = {item.entity_id for item in items.values()}
        items[slot], interactions[slot] = _pick_binding(pool.items, taken, usage, rng)
    item_refs = {slot: _pick_ref(item, usage, rng) for slot, item in items.items()}

    (background,) = _pick_entities(pool.backgrounds, 1, usage, rng)
    background_ref = _pick_ref(background, usage, rng)
    person_edges = _pick_person_edges(layout, rng)

    person_records = [
        {
            "slot": slot,
            "entity_id": persons[slot].entity_id,
            "ref_id": person_refs[slot]["ref_id"],
            "item_entity_id": items[slot].entity_id,
            "item_ref_id": item_refs[slot]["ref_id"],
            "item_kind": items[slot].kind,
            "item_size": items[slot].size,
            "interaction": interactions[slot],
            "interaction_strength": ITEM_INTERACTIONS[interactions[slot]].strength,
        }
        for slot in slots
    ]
    graph = interaction_graph(person_records, person_edges)
    positions = position_graph(layout)
    item_names = {items[slot].entity_id: item_refs[slot]["name"] for slot in slots}
    prompt = {
        "prompt_id": prompt_id,
        "n_persons": size,
        "persons": person_records,
        "background_entity_id": background.entity_id,
        "background_ref_id": background_ref["ref_id"],
        "interaction_graph": graph,
        "position_graph": positions,
        "layout": list(layout),
        "prompt": prompt_text(background_ref, layout, person_refs, item_refs, interactions, person_edges),
        "questions": derive_questions(prompt_id, graph, positions, item_names),
    }

    queries = slot_queries(background_ref, person_refs, item_refs)

    def row(slot: str, entity: _Entity, ref: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "prompt_id": prompt_id,
            "slot": slot,
            "kind": entity.kind,
            "entity_id": entity.entity_id,
            "query": queries[slot],
            "ground_truth_ref_id": ref["ref_id"],
            "candidate_ref_ids": sorted(entity.ref_ids),
        }

    rows = []
    for slot in slots:
        rows.append(row(slot, persons[slot], person_refs[slot]))
        rows.append(row(f"{slot}.item", items[slot], item_refs[slot]))
    rows.append(row("background", background, background_ref))
    return prompt, rows
