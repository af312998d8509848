"""CHARIS prompts: each asks one subject for 5 or 6 of the 7 EKB transformations at once.

The paper's benchmark has 1,078 prompts over 154 subjects (7 each), balanced over the 4 types x 3
styles, with 5.4 transformation axes per prompt on average. This sampler reproduces that design from
a pool of subjects:

- prompts are split over the type x style cells as evenly as possible, and within a cell over its
  subjects as evenly as possible;
- exactly ``round(0.4 * n)`` prompts ask for 6 axes and the rest for 5 (mean 5.4), spread over cells
  and subjects the same way;
- the axes left out are drawn from consecutive shuffles of all 7 axes, so each axis is left out as
  often as any other, give or take one;
- the text is written from the phrases of the EKB (``transformations.yaml``), drawn per subject and
  axis from a shuffled deck, so a subject sees a phrase again only after all others were used.

Prompts read "<Name> <pose>, <expression>, <viewpoint>, <occlusion>, <lighting>, <background>,
<style>." (axes in EKB order), or "A picture of <name>, ..." when the pose axis is left out.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from idbench.benchmarks.charis.spec import AXES_PER_PROMPT, PROMPTS_PER_SUBJECT, SIX_AXIS_SHARE
from idbench.ekb import EKB

SUBJECT_KEYS = ("subject_id", "name", "type", "style")
PROMPT_ID_PREFIX = "charis-"


def sample_charis_prompts(subjects: Sequence[Mapping], ekb: EKB, seed: int, n_prompts: int | None = None) -> list[dict]:
    """The CHARIS prompts for ``subjects`` (dicts with subject_id, name, type and style).

    ``n_prompts`` defaults to 7 per subject. Every (type, style) cell of the EKB must hold at least one
    subject. The result is the same for the same subjects (in any order), EKB and seed.

    >>> prompts = sample_charis_prompts(subjects, load_ekb(), seed=0)  # doctest: +SKIP
    >>> prompts[0]["prompt"]  # doctest: +SKIP
    'The tabby cat leaps mid-air with both front legs stretched forward, ..., rendered as pixel art.'
    """
    cells = _subjects_by_cell(subjects, ekb)
    n = PROMPTS_PER_SUBJECT * len(subjects) if n_prompts is None else n_prompts
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n_prompts must be a whole number >= 0, got {n_prompts!r}")
    axes = tuple(ekb.transformations)
    few, many = min(AXES_PER_PROMPT), max(AXES_PER_PROMPT)
    if many > len(axes):
        raise ValueError(f"prompts of {many} axes need at least {many} transformations; the EKB has {len(axes)}")
    rng = random.Random(seed)

    # 1. One entry per prompt: (subject, axis count), cell by cell and subject by subject.
    n_many = round(SIX_AXIS_SHARE * n)
    cell_sizes = _split_evenly(n, [1] * len(cells), rng)
    # The 6-axis prompts are spread in proportion to the prompts each cell (then subject) has, so that
    # the mean number of axes is about the same in every breakdown.
    cell_many = _split_evenly(n_many, cell_sizes, rng)
    plan: list[tuple[Mapping, int]] = []
    for members, size, size_many in zip(cells.values(), cell_sizes, cell_many):
        subject_sizes = _split_evenly(size, [1] * len(members), rng)
        subject_many = _split_evenly(size_many, subject_sizes, rng)
        for subject, count, count_many in zip(members, subject_sizes, subject_many):
            wide = set(rng.sample(range(count), count_many))  # which of its prompts get 6 axes
            plan.extend((subject, many if slot in wide else few) for slot in range(count))

    # 2. Axes to leave out, then phrases, then the text.
    omissions = _OmissionStream(axes, rng)
    decks: dict[tuple[str, str], _Deck] = {}
    width = len(str(n))
    prompts = []
    for index, (subject, n_axes) in enumerate(plan, start=1):
        left_out = omissions.take(len(axes) - n_axes)
        # Pose first, whatever the EKB order: its phrase is the verb that follows the subject's name.
        kept = sorted((a for a in axes if a not in left_out), key=lambda a: (a != "pose", axes.index(a)))
        parts = []
        for axis in kept:
            key = (subject["subject_id"], axis)
            if key not in decks:
                decks[key] = _Deck(ekb.transformations[axis].phrases_for(subject["type"], subject["style"]), rng)
            parts.append({"axis": axis, "phrase": decks[key].draw()})
        prompts.append(
            {
                "prompt_id": f"{PROMPT_ID_PREFIX}{index:0{width}d}",
                "subject_id": subject["subject_id"],
                "type": subject["type"],
                "style": subject["style"],
                "prompt": write_prompt(subject["name"], parts),
                "axes": [part["axis"] for part in parts],
                "transformations": parts,
            }
        )
    return prompts


def write_prompt(name: str, parts: Sequence[Mapping[str, str]]) -> str:
    """The prompt text: the subject's name, then the phrases in order, joined by commas.

    >>> write_prompt("the snowman", [{"axis": "pose", "phrase": "spins on the spot"},
    ...                              {"axis": "lighting", "phrase": "lit by flickering candlelight"}])
    'The snowman spins on the spot, lit by flickering candlelight.'
    >>> write_prompt("the snowman", [{"axis": "lighting", "phrase": "lit by flickering candlelight"}])
    'A picture of the snowman, lit by flickering candlelight.'
    """
    phrases = [part["phrase"] for part in parts]
    if parts and parts[0]["axis"] == "pose":
        head = f"{name[:1].upper()}{name[1:]} {phrases.pop(0)}"
    else:
        head = f"A picture of {name}"
    return ", ".join([head, *phrases]) + "."


def _subjects_by_cell(subjects: Sequence[Mapping], ekb: EKB) -> dict[tuple[str, str], list[Mapping]]:
    """The subjects of each (type, style) cell, in EKB cell order and subject_id order; all cells filled."""
    cells: dict[tuple[str, str], list[Mapping]] = {(t, s): [] for t in ekb.types for s in ekb.styles}
    seen: set[str] = set()
    for position, subject in enumerate(subjects):
        for key in SUBJECT_KEYS:
            value = subject.get(key)
            if not isinstance(value, str) or not value.strip():
                label = subject.get("subject_id") or f"number {position}"
                raise ValueError(f"subject {label}: {key!r} must be non-empty text, got {value!r}")
        subject_id = subject["subject_id"]
        if subject_id in seen:
            raise ValueError(f"subject {subject_id}: the subject_id appears more than once")
        seen.add(subject_id)
        if subject["type"] not in ekb.types:
            raise ValueError(
                f"subject {subject_id}: unknown type {subject['type']!r}; types are: {', '.join(ekb.types)}"
            )
        if subject["style"] not in ekb.styles:
            raise ValueError(
                f"subject {subject_id}: unknown style {subject['style']!r}; styles are: {', '.join(ekb.styles)}"
            )
        cells[(subject["type"], subject["style"])].append(subject)
    empty = [f"{t}/{s}" for (t, s), members in cells.items() if not members]
    if empty:
        raise ValueError(
            f"CHARIS balances prompts over all {len(cells)} type x style cells, but these have no subject: "
            f"{', '.join(empty)}"
        )
    for members in cells.values():
        members.sort(key=lambda s: s["subject_id"])  # so that the input order does not matter
    return cells


def _split_evenly(total: int, weights: Sequence[int], rng: random.Random) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder, ties broken at random).

    With equal weights the parts differ by at most one. No part exceeds its weight when
    ``total <= sum(weights)``, since a part is rounded up only when its exact share has a fraction.
    """
    whole = sum(weights)
    if whole == 0:
        return [0] * len(weights)
    parts = [total * w // whole for w in weights]
    fractions = [total * w % whole for w in weights]  # integers, so ties are exact
    order = sorted(range(len(weights)), key=lambda i: (-fractions[i], rng.random()))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


class _OmissionStream:
    """The axes prompts leave out, taken in turn from consecutive shuffles of all axes.

    Any run of takes uses whole shuffles plus part of one, so each axis is left out as often as any
    other, give or take one.
    """

    def __init__(self, axes: Sequence[str], rng: random.Random):
        self._axes = list(axes)
        self._rng = rng
        self._block: list[str] = []

    def take(self, count: int) -> list[str]:
        taken: list[str] = []
        while len(taken) < count:
            if not self._block:
                self._block = self._rng.sample(self._axes, len(self._axes))
                # A new shuffle must not hand this prompt an axis it already leaves out: put those at
                # the far end (taken last). The block stays a shuffle of all axes, so balance holds.
                self._block.sort(key=lambda axis: axis not in taken)
            taken.append(self._block.pop())
        return taken


class _Deck:
    """Phrases for one subject and axis, dealt in shuffled rounds, so none repeats before all are used."""

    def __init__(self, phrases: Sequence[str], rng: random.Random):
        if not phrases:
            raise ValueError("no phrases to draw from")
        self._phrases = list(phrases)
        self._rng = rng
        self._cards: list[str] = []
        self._last: str | None = None

    def draw(self) -> str:
        if not self._cards:
            self._cards = self._rng.sample(self._phrases, len(self._phrases))
            # Do not deal the phrase that ended the previous round first in the next one.
            if len(self._cards) > 1 and self._cards[-1] == self._last:
                self._cards[0], self._cards[-1] = self._cards[-1], self._cards[0]
        self._last = self._cards.pop()
        return self._last
