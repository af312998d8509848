"""The judge's control questions on CHARIS: pairs whose identity verdict is known.

Pair controls (image 1 the subject's reference, image 2 the control picture; the pair carries
the subject's first prompt, as a submission's pair would), with what each judged path must say:

=================  ==========================================  =====================  ===============
kind               picture                                     ``charis_score``       ``holistic_score``
=================  ==========================================  =====================  ===============
``copy``           the reference itself, its own bytes         exact or near_exact    rating >= 3
``mirror``         the reference mirrored left-right: a        exact or near_exact    rating >= 3
                   viewpoint change, which never harms
                   identity (ekb transformations)
``other_identity`` another subject's reference, of the same    partial or mismatch    rating <= 2
                   type (and style where possible):
                   ``suites.charis._impostor``; partial is
                   allowed since two cartoon cats may share
                   features, exact / near_exact never
``blank``          a uniform mid-grey picture of the           mismatch               rating <= 1
                   reference's size: no subject
``occlusion``      the reference with a mid-grey block over    insufficient evidence  not asked (the
                   its central 80 % x 80 % (where a subject    or mismatch, never     rubric has no
                   stands): most of it hidden                  exact / near_exact /   "cannot tell")
                                                               partial
=================  ==========================================  =====================  ===============

Registry: a judged path is a :class:`Check` (``name``: the metric it calibrates; ``metrics``: the
judged metrics that make a run ask it; ``evaluate``: judge -> pairs -> one :class:`Verdict` per pair;
``expect``: control kind -> :class:`Expectation`; a kind without one is not asked of that path).
:func:`register_pair_check` adds one, e.g. a prompt-adherence request
whose ``copy`` expectation is "the prompted transformations are not visible".
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idbench.evaluate_pkg.judge.controls import (
    Check,
    Expectation,
    K,
    Outcome,
    Verdict,
    blank_like,
    mirrored,
    occluded,
    one_of,
    pair_outcomes,
    png_bytes,
)
from idbench.evaluate_pkg.judge.types import Judge

#: kind -> the control picture, from (data, subject id); the reference is ``data.references[sid]``.
PAIR_CONTROLS: dict[str, Callable[[Any, str], bytes]] = {
    "copy": lambda data, sid: data.reference_bytes[sid],
    "mirror": lambda data, sid: png_bytes(mirrored(data.references[sid]["image"])),
    "other_identity": lambda data, sid: data.reference_bytes[other_identity(data, sid)],
    "blank": lambda data, sid: png_bytes(blank_like(data.references[sid]["image"])),
    "occlusion": lambda data, sid: png_bytes(occluded(data.references[sid]["image"])),
}


def other_identity(data: Any, subject_id: str) -> str:
    """Another subject of the same type (and style where possible), chosen by a generator fixed by the
    subject id: the rule of the CHARIS ``impostor`` baseline."""
    from idbench.benchmarks.charis.suite import _impostor

    return _impostor(data, subject_id, random.Random(f"idbench-judge-control:{subject_id}"))


@dataclass(frozen=True)
class PairControl:
    kind: str
    subject_id: str
    pair: Any  # a CharisPair


def charis_pair_controls(data: Any, k: int = K) -> list[PairControl]:
    """The CHARIS controls: for each of the first ``k`` subjects by id (with its first prompt by id),
    one pair per kind of :data:`PAIR_CONTROLS`, subject by subject."""
    from idbench.benchmarks.charis.judge import pair_from_rows

    first_prompt: dict[str, dict] = {}
    for prompt_id in sorted(data.prompt_rows):
        row = data.prompt_rows[prompt_id]
        first_prompt.setdefault(row["subject_id"], row)
    out = []
    for sid in sorted(first_prompt)[:k]:
        for kind, make in PAIR_CONTROLS.items():
            pair = pair_from_rows(
                first_prompt[sid],
                0,
                data.reference_bytes[sid],
                make(data, sid),
                subject_name=data.references[sid]["name"],
            )
            out.append(PairControl(kind, sid, pair))
    return out


def _charis_verdicts(judge: Judge, pairs: list[Any]) -> list[Verdict]:
    from idbench.benchmarks.charis.judge import INSUFFICIENT, evaluate_pairs

    out = []
    for v in evaluate_pairs(judge, pairs):
        if v.judge_failure:
            out.append(Verdict(None, None, v.failure))
        elif v.insufficient_evidence:
            out.append(Verdict(INSUFFICIENT, False))
        else:
            out.append(Verdict(v.category, v.category in ("exact", "near_exact")))
    return out


def _holistic_verdicts(judge: Judge, pairs: list[Any]) -> list[Verdict]:
    from idbench.benchmarks.charis.holistic import evaluate_holistic

    return [
        Verdict(None, None, v.failure) if v.rating is None else Verdict(f"rating {v.rating}", v.rating >= 3)
        for v in evaluate_holistic(judge, pairs)
    ]


def _ratings(lowest: int, highest: int, yes: bool) -> Expectation:
    wanted = {f"rating {r}" for r in range(lowest, highest + 1)}
    return Expectation(f"rating {lowest}-{highest}", lambda v: v.answer in wanted, yes)


PAIR_CHECKS: dict[str, Check] = {}


def register_pair_check(check: Check) -> None:
    """Add (or replace) a judged path asked about the CHARIS pair controls."""
    unknown = set(check.expect) - set(PAIR_CONTROLS)
    if unknown:
        raise ValueError(f"check {check.name}: no pair control of kind {', '.join(sorted(unknown))}")
    PAIR_CHECKS[check.name] = check


register_pair_check(
    Check(
        "charis_score",
        frozenset({"charis_score"}),
        _charis_verdicts,
        {
            "copy": one_of("exact", "near_exact", yes=True),
            "mirror": one_of("exact", "near_exact", yes=True),
            "other_identity": one_of("partial", "mismatch", yes=False),
            "blank": one_of("mismatch", yes=False),
            "occlusion": one_of("insufficient_evidence", "mismatch", yes=False),
        },
    )
)
register_pair_check(
    Check(
        "holistic_score",
        frozenset({"holistic_score"}),
        _holistic_verdicts,
        {
            "copy": _ratings(3, 4, True),
            "mirror": _ratings(3, 4, True),
            "other_identity": _ratings(0, 2, False),
            "blank": _ratings(0, 1, False),
        },
    )
)


class CharisControls:
    """The pair controls, asked of every registered check whose metrics the run computes."""

    def checks(self, metrics: set[str]) -> list[str]:
        return [name for name, check in PAIR_CHECKS.items() if check.metrics & metrics]

    def outcomes(self, data: Any, judge: Judge, checks: list[str], k: int = K) -> list[Outcome]:
        return pair_outcomes(judge, charis_pair_controls(data, k), PAIR_CHECKS, checks)


CONTROLS = CharisControls()
