"""Control questions whose answers are known, asked of the judge in every judged scoring run.

A lenient judge (one that answers "nothing changed" or "yes" to everything) gives plausible scores,
so its scores alone cannot tell it from a truthful one. Every run that computes a judged metric
therefore also asks the same judge, through the same code path as the submission's images, a small
fixed set of **controls**: pictures made from the benchmark's own references whose answer is known.
Their outcome is the judge card (:mod:`idbench.evaluate_pkg.judge.card`). Controls never enter
``results.parquet``: the model's rows stay the model's. Their answers are cached like any other
(same question, same key), so a judge pays for its controls once.

Which controls a benchmark asks, and what each judged path must answer, belong to the benchmark: its
spec names an object with the :class:`BenchmarkControls` protocol (``BenchmarkSpec.controls``), and
:func:`run_controls` asks whatever it builds. The built-in ones: ``idbench.benchmarks.charis.controls``
(pair controls: copy, mirror, another identity, blank, occlusion) and
``idbench.benchmarks.cogcanvas.controls`` (Attr-VQA position questions on a collage, its mirror, a
blank). Deterministic, so every run with the same build asks the same controls.

A judged path is a :class:`Check` (``name``: the metric it calibrates; ``metrics``: the judged
metrics that make a run ask it; ``evaluate``: judge -> pairs -> one :class:`Verdict` per pair;
``expect``: control kind -> :class:`Expectation`; a kind without one is not asked of that path).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

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


# --- pictures the benchmarks build their controls from ---------------------------------------------


def png_bytes(image: Image.Image) -> bytes:
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


class BenchmarkControls(Protocol):
    """What a benchmark's spec names in ``BenchmarkSpec.controls``."""

    def checks(self, metrics: set[str]) -> list[str]:
        """The checks a run of ``metrics`` asks (none: the run has no judge card)."""

    def outcomes(self, data: Any, judge: Judge, checks: list[str], k: int) -> list[Outcome]:
        """Ask ``judge`` the controls of ``checks`` (built from ``k`` subjects or prompts of ``data``)."""


def controls_of(data: Any) -> BenchmarkControls | None:
    """The controls the benchmark of ``data`` declares, None when it declares none."""
    return data.spec.load("controls") if data.spec.controls else None


def checks_for(data: Any, metrics: set[str]) -> list[str]:
    """The checks a run of ``metrics`` on the benchmark of ``data`` asks (none: the run has no judge card)."""
    controls = controls_of(data)
    return controls.checks(metrics) if controls is not None else []


def pair_outcomes(
    judge: Judge, controls: Sequence[Any], checks: Mapping[str, Check], names: Sequence[str]
) -> list[Outcome]:
    """Ask each check of ``names`` about the pair controls its expectations cover (``control.kind``,
    ``control.subject_id``, ``control.pair``), and score each verdict against its expectation."""
    out = []
    for name in names:
        check = checks[name]
        asked = [c for c in controls if c.kind in check.expect]
        for control, verdict in zip(asked, check.evaluate(judge, [c.pair for c in asked])):
            expectation = check.expect[control.kind]
            out.append(
                Outcome(
                    name,
                    control.kind,
                    control.subject_id,
                    expectation.words,
                    verdict.answer,
                    not verdict.failed and expectation.accept(verdict),
                    verdict.says_yes,
                    expectation.yes,
                    verdict.detail,
                )
            )
    return out


def run_controls(data: Any, judge: Judge, metrics: set[str], k: int = K, repeats: int = REPEATS) -> ControlRun:
    """Ask ``judge`` the controls of the checks ``metrics`` need, then repeat the first ``repeats``
    control requests (``repeat=1``) and pair each with its first answer."""
    recorder = Recorder(judge)
    run = ControlRun()
    names = checks_for(data, metrics)
    if not names:
        return run
    run.outcomes = controls_of(data).outcomes(data, recorder, names, k)
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
