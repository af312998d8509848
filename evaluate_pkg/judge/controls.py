"""Control questions whose answers are known, asked of the judge in every judged scoring run.

A lenient judge (one that answers "nothing changed" or "yes" to everything) gives plausible scores,
so its scores alone cannot tell it from a truthful one. Every run that computes a judged metric
therefore also asks the same judge, through the same code path as the submission's images, a small
fixed set of **controls**: pictures made from the benchmark's own references whose answer is known.
Their outcome is the judge card (:mod:`idbench.evaluate_pkg.judge.card`). Controls never enter
``results.parquet``: the model's rows stay the model's. Their answers are cached like any other
(same question, same key), so a judge pays for its controls once.

Which references: the first :data:`K` subjects by id (CHARIS; each with its first prompt by id) and
:data:`K` prompts of CogCanvas (the first by id of each group size, then the next by id:
:func:`control_prompts`). Deterministic, so every run with the same build asks
the same controls.

CHARIS pair controls (image 1 the subject's reference, image 2 the control picture; the pair carries
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

CogCanvas Attr-VQA controls (through :func:`idbench.evaluate_pkg.judge.vqa.score_images`): only the
**position** questions have an answer the picture settles. They name persons by what they do with
their items ("the person holding the coffee cup"), and the collage pastes each item in its person's
column, so the left-to-right order is fixed by construction; whether a pasted item is "held" or
"looked at" (binding), or whether pasted persons "talk to each other" (interaction), is a judgement,
not a known answer, so those questions are not controls.

- ``collage`` (``baselines.collage``, persons with their own items): every position question as built
  (facts "yes", their reversed negatives "no");
- ``mirrored`` (the collage mirrored): every position fact "no", every negative "yes";
- ``blank`` (``baselines.blank``): every question of the prompt "no" (nothing is shown).

``crossed`` and ``impostor`` add no known answer here: the questions name persons by place and item,
never by identity, so both pictures answer them exactly as the collage does.

Registry: a judged path is a :class:`Check` (``name``: the metric it calibrates; ``metrics``: the
judged metrics that make a run ask it; ``evaluate``: judge -> pairs -> one :class:`Verdict` per pair;
``expect``: control kind -> :class:`Expectation`; a kind without one is not asked of that path).
:func:`register_pair_check` adds one for the CHARIS pair controls, e.g. a prompt-adherence request
whose ``copy`` expectation is "the prompted transformations are not visible".
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from PIL import Image, ImageDraw, ImageOps

from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

#: How many subjects (CHARIS) or prompts (CogCanvas) the controls are built from.
K = 4
#: How many control requests are asked a second time (``JudgeRequest.repeat = 1``) to check determinism.
REPEATS = 4
#: The share of each side of the reference that the occlusion control's grey block covers (centred).
OCCLUDED_SIDE = 0.8
GREY = (128, 128, 128)
CONTROL_SIZE = 512  # the CogCanvas control pictures' side, the baselines' default size


# --- what a path answered, and what it should have -----------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What a judged path made of one control: ``answer`` (a short label: a category, "rating 3",
    "yes"), None when the judge failed; ``says_yes`` whether it affirms ("same subject", "yes")."""

    answer: str | None
    says_yes: bool | None = None
    detail: str | None = None

    @property
    def failed(self) -> bool:
        return self.answer is None


@dataclass(frozen=True)
class Expectation:
    """The known answer of a control for one path: ``accept(verdict)`` and the same in words."""

    words: str
    accept: Callable[[Verdict], bool]
    yes: bool | None = None  # the affirmative answer expected (for the expected yes-rate), None if mixed


def one_of(*answers: str, yes: bool | None = None) -> Expectation:
    return Expectation(" or ".join(answers), lambda v: v.answer in answers, yes)


@dataclass(frozen=True)
class Check:
    """One judged path asked about the pair controls (see the module docstring)."""

    name: str
    metrics: frozenset[str]
    evaluate: Callable[[Judge, list[Any]], list[Verdict]]
    expect: Mapping[str, Expectation]


# --- CHARIS pair controls --------------------------------------------------------------------------


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def mirrored(image: Image.Image) -> Image.Image:
    return ImageOps.mirror(image.convert("RGB"))


def blank_like(image: Image.Image) -> Image.Image:
    return Image.new("RGB", image.size, GREY)


def occluded(image: Image.Image, side: float = OCCLUDED_SIDE) -> Image.Image:
    """``image`` with a grey block over its centre, ``side`` of its width and of its height."""
    out = image.convert("RGB").copy()
    width, height = out.size
    w, h = round(width * side), round(height * side)
    x, y = (width - w) // 2, (height - h) // 2
    ImageDraw.Draw(out).rectangle((x, y, x + w - 1, y + h - 1), fill=GREY)
    return out


#: kind -> the control picture, from (data, subject id); the reference is ``data.references[sid]``.
PAIR_CONTROLS: dict[str, Callable[[Any, str], bytes]] = {
    "copy": lambda data, sid: data.reference_bytes[sid],
    "mirror": lambda data, sid: _png(mirrored(data.references[sid]["image"])),
    "other_identity": lambda data, sid: data.reference_bytes[other_identity(data, sid)],
    "blank": lambda data, sid: _png(blank_like(data.references[sid]["image"])),
    "occlusion": lambda data, sid: _png(occluded(data.references[sid]["image"])),
}


def other_identity(data: Any, subject_id: str) -> str:
    """Another subject of the same type (and style where possible), chosen by a generator fixed by the
    subject id: the rule of the CHARIS ``impostor`` baseline."""
    from idbench.evaluate_pkg.suites.charis import _impostor

    return _impostor(data, subject_id, random.Random(f"idbench-judge-control:{subject_id}"))


@dataclass(frozen=True)
class PairControl:
    kind: str
    subject_id: str
    pair: Any  # a CharisPair


def charis_pair_controls(data: Any, k: int = K) -> list[PairControl]:
    """The CHARIS controls: for each of the first ``k`` subjects by id (with its first prompt by id),
    one pair per kind of :data:`PAIR_CONTROLS`, subject by subject."""
    from idbench.evaluate_pkg.judge.charis import pair_from_rows

    first_prompt: dict[str, dict] = {}
    for prompt_id in sorted(data.prompt_rows):
        row = data.prompt_rows[prompt_id]
        first_prompt.setdefault(row["subject_id"], row)
    out = []
    for sid in sorted(first_prompt)[:k]:
        for kind, make in PAIR_CONTROLS.items():
            pair = pair_from_rows(first_prompt[sid], 0, data.reference_bytes[sid], make(data, sid),
                                  subject_name=data.references[sid]["name"])
            out.append(PairControl(kind, sid, pair))
    return out


def _charis_verdicts(judge: Judge, pairs: list[Any]) -> list[Verdict]:
    from idbench.evaluate_pkg.judge.charis import INSUFFICIENT, evaluate_pairs

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
    from idbench.evaluate_pkg.judge.holistic import evaluate_holistic

    return [Verdict(None, None, v.failure) if v.rating is None else Verdict(f"rating {v.rating}", v.rating >= 3)
            for v in evaluate_holistic(judge, pairs)]


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


register_pair_check(Check(
    "charis_score", frozenset({"charis_score"}), _charis_verdicts,
    {
        "copy": one_of("exact", "near_exact", yes=True),
        "mirror": one_of("exact", "near_exact", yes=True),
        "other_identity": one_of("partial", "mismatch", yes=False),
        "blank": one_of("mismatch", yes=False),
        "occlusion": one_of("insufficient_evidence", "mismatch", yes=False),
    },
))
register_pair_check(Check(
    "holistic_score", frozenset({"holistic_score"}), _holistic_verdicts,
    {
        "copy": _ratings(3, 4, True),
        "mirror": _ratings(3, 4, True),
        "other_identity": _ratings(0, 2, False),
        "blank": _ratings(0, 1, False),
    },
))


# --- CogCanvas Attr-VQA controls -------------------------------------------------------------------

VQA_CHECK = "attr_vqa"
#: The judged metrics whose questions the VQA controls calibrate (the grounded binding asks another prompt).
VQA_CHECK_METRICS = frozenset({"attr_vqa", "attr_vqa_itt", "igc", "attr_vqa_paired", "igc_paired", "attr_vqa.binding"})


def _flip(answer: str) -> str:
    return "no" if answer == "yes" else "yes"


def control_prompts(data: Any, k: int = K) -> list[str]:
    """The first prompt by id of each group size (smallest first), then the next prompts by id, ``k`` in
    all: a fixed choice that asks about rows of 2 to 5 persons rather than ``k`` pairs."""
    ids = sorted(data.prompt_rows)
    first: dict[int, str] = {}
    for prompt_id in ids:
        first.setdefault(int(data.prompt_rows[prompt_id]["n_persons"]), prompt_id)
    chosen = [first[n] for n in sorted(first)][:k]
    chosen += [p for p in ids if p not in chosen][: k - len(chosen)]
    return sorted(chosen)


def vqa_controls(data: Any, k: int = K, size: int = CONTROL_SIZE) -> list[tuple[str, Any]]:
    """(kind, VQAItem) for each prompt of :func:`control_prompts`: ``collage``, ``mirrored``, ``blank``.

    The items' questions carry the control's known answer as their expected answer and no ``negates``
    (the pairing does not apply to a control's answers); their prompt id is the prompt's own, their
    seed the kind's place in that list.
    """
    from idbench.evaluate_pkg import baselines
    from idbench.evaluate_pkg.judge.vqa import VQAItem, VQAQuestion

    out = []
    for prompt_id in control_prompts(data, k):
        row = data.prompt_rows[prompt_id]
        questions = [VQAQuestion.from_record(q, f"prompt {prompt_id}") for q in row.get("questions") or ()]
        position = [replace(q, negates="") for q in questions if q.kind == "position"]
        collage = baselines.collage(data, row, size)
        pictures = {
            "collage": (collage, position),
            "mirrored": (ImageOps.mirror(collage), [replace(q, answer=_flip(q.answer)) for q in position]),
            "blank": (baselines.blank(data, row, size), [replace(q, answer="no", negates="") for q in questions]),
        }
        # The seed tells the pictures of one prompt apart (one item per (prompt, seed) for the scorer).
        for seed, (kind, (picture, asked)) in enumerate(pictures.items()):
            if asked:
                out.append((kind, VQAItem(prompt_id, seed, _png(picture), tuple(asked), int(row["n_persons"]))))
    return out


# --- running them ------------------------------------------------------------------------------------


class Recorder:
    """A judge that passes every batch to ``judge`` and keeps each (request, answer), in order."""

    def __init__(self, judge: Judge):
        self.judge = judge
        self.model = judge.model
        self.asked: list[tuple[JudgeRequest, JudgeAnswer]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        answers = list(self.judge.ask(requests))
        self.asked.extend(zip(requests, answers))
        return answers


@dataclass
class Outcome:
    """One control's outcome: for a pair control one pair, for a VQA control one question."""

    check: str
    kind: str
    subject: str  # subject id (CHARIS) or prompt id (CogCanvas)
    expected: str
    given: str | None
    correct: bool
    says_yes: bool | None
    expected_yes: bool | None
    detail: str | None = None

    @property
    def failed(self) -> bool:
        return self.given is None


@dataclass
class ControlRun:
    outcomes: list[Outcome] = field(default_factory=list)
    repeats: list[tuple[JudgeAnswer, JudgeAnswer]] = field(default_factory=list)
    answers: int = 0
    cached: int = 0


def checks_for(benchmark: str, metrics: set[str]) -> list[str]:
    """The checks a run of ``metrics`` on ``benchmark`` asks (none: the run has no judge card)."""
    if benchmark == "charis":
        return [name for name, check in PAIR_CHECKS.items() if check.metrics & metrics]
    if benchmark == "cogcanvas" and metrics & VQA_CHECK_METRICS:
        return [VQA_CHECK]
    return []


def run_controls(data: Any, judge: Judge, metrics: set[str], k: int = K, repeats: int = REPEATS) -> ControlRun:
    """Ask ``judge`` the controls of the checks ``metrics`` need, then repeat the first ``repeats``
    control requests (``repeat=1``) and pair each with its first answer."""
    recorder = Recorder(judge)
    run = ControlRun()
    names = checks_for(data.name, metrics)
    if not names:
        return run
    if data.name == "charis":
        controls = charis_pair_controls(data, k)
        for name in names:
            check = PAIR_CHECKS[name]
            asked = [c for c in controls if c.kind in check.expect]
            for control, verdict in zip(asked, check.evaluate(recorder, [c.pair for c in asked])):
                expectation = check.expect[control.kind]
                run.outcomes.append(Outcome(
                    name, control.kind, control.subject_id, expectation.words, verdict.answer,
                    not verdict.failed and expectation.accept(verdict), verdict.says_yes, expectation.yes, verdict.detail,
                ))
    else:
        from idbench.evaluate_pkg.judge.vqa import score_images

        controls = vqa_controls(data, k)
        result = score_images(recorder, [item for _, item in controls])
        # Outcomes come item by item, in item order, each item's questions in order.
        flat = [(kind, item.prompt_id) for kind, item in controls for _ in item.questions]
        assert len(flat) == len(result.outcomes)
        for (kind, prompt_id), o in zip(flat, result.outcomes):
            run.outcomes.append(Outcome(
                VQA_CHECK, kind, prompt_id, o.expected, o.given, o.status == "correct",
                None if o.given is None else o.given == "yes", o.expected == "yes", o.detail,
            ))
    run.answers = len(recorder.asked)
    run.cached = sum(answer.cached for _, answer in recorder.asked)
    first = recorder.asked[:repeats]
    if first:
        again = list(judge.ask([replace(request, repeat=1) for request, _ in first]))
        run.repeats = [(answer, second) for (_, answer), second in zip(first, again)]
        run.answers += len(again)
        run.cached += sum(a.cached for a in again)
    return run


def same_answer(first: JudgeAnswer, second: JudgeAnswer) -> bool | None:
    """Whether two answers to one question agree (None when either failed: nothing to compare)."""
    if not (first.ok and second.ok):
        return None
    return json.dumps(first.value, sort_keys=True) == json.dumps(second.value, sort_keys=True)
