"""CHARIS prompt adherence, intent to treat and the combined ranking score (issue 17, items 1 and 3).

The paper's ``charis_score`` measures identity only, so a model that returns its input (the ``copy``
baseline) is rated ``exact`` and ranks first, and a pair with no core feature in view is left out of
the mean, so hiding the subject raises it. This module adds what a ranking needs besides:

- **Adherence** (:func:`evaluate_adherence`): one more judge request per pair (task
  ``charis.adherence``, through the same :class:`Judge` protocol and so cached like every answer):
  for each transformation the prompt asked for (``pair.axes``, with its phrase), an observation, then
  whether image 2 shows it relative to image 1. The verdict's score is the share of the prompted axes
  the judge sees realised, None (a judge failure) when the answer is missing or breaks its schema;
  the metric ``prompt_adherence`` is :func:`adherence_gated` of it, intent to treat: a failure scores 0
  and is counted in ``prompt_adherence.failure_rate`` (suite 0.4; until then it was left out, and a
  judge failing on the hard items read 1.000), and so does a pair whose subject the identity judge
  did not confirm in view on a prompt that did not hide it (suite 0.5, counted in
  ``prompt_adherence.subject_not_shown``: a blurred-away subject with "the changes were made" read
  1.000 against 0.695 honest).
- **Intent to treat** (:func:`hiding_phrases`, :func:`identity_itt`): a prompt that itself asks for
  the subject to be out of view (``transformations.yaml: hides_subject``: a back view, a distant small
  figure) is left out for every model alike; on every other prompt a missing category counts against
  the model: insufficient evidence (the model did not show a subject the prompt did not hide) and a
  judge failure (after the client's bounded retries) both score 0, "not confirmed".
- **Overall** (:func:`overall_score`): per pair ``sqrt(identity_itt x adherence_itt)``, the geometric
  mean, as OmniContext combines its criteria: either factor at 0 gives 0, so neither can be traded
  for the other (copying the reference keeps identity 1 but adherence 0; ignoring the reference
  follows the prompt but loses identity). NaN on hide-prompts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from idbench.benchmarks.charis.judge import (
    AnswerError,
    CharisPair,
    PairVerdict,
    _ask,
    _bool,
    _exact_keys,
    _object,
    answer_object,
    check_pair,
)
from idbench.ekb import EKB, load_ekb
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

ADHERENCE_TASK = "charis.adherence"

ADHERENCE_SYSTEM_PROMPT = (
    "You check whether a generated image carries out the changes a text prompt asked for. Image 1 is the "
    "reference the generation started from; image 2 is the generation. You report what image 2 actually "
    "shows, compared with image 1, never what the prompt says it should show, and you answer with JSON "
    "that matches the given schema, with no other text."
)


# --- which prompts hide the subject (pure) -----------------------------------------------------------


def hiding_phrases(phrases: Mapping[str, str], ekb: EKB) -> dict[str, str]:
    """axis -> phrase, for the phrases of a prompt that ask for the subject to be out of view.

    ``phrases`` is a prompt's axis -> phrase (``prompts.transformations``); an axis unknown to the EKB
    hides nothing. The cues are data (``transformations.yaml: hides_subject``, the reasons beside
    them), so an old build, which has the phrases but no column saying this, reads the same.
    """
    return {
        axis: phrase
        for axis, phrase in phrases.items()
        if axis in ekb.transformations and ekb.transformations[axis].hides_subject_in(phrase)
    }


def prompt_hides_subject(prompt_row: Mapping[str, Any], ekb: EKB | None = None) -> bool:
    """Whether a ``prompts`` row asks for its subject to be hidden (from its ``transformations``)."""
    ekb = ekb if ekb is not None else load_ekb()
    phrases = {str(p["axis"]): str(p["phrase"]) for p in prompt_row.get("transformations") or ()}
    return bool(hiding_phrases(phrases, ekb))


# --- the adherence request ---------------------------------------------------------------------------


def adherence_schema(axes: Sequence[str]) -> dict[str, Any]:
    """``{"transformations": {axis: {"observation": str, "realised": bool}}}``, strict; observation first."""
    finding = _object({"observation": {"type": "string"}, "realised": {"type": "boolean"}})
    return _object({"transformations": _object({axis: finding for axis in axes})})


def adherence_request(pair: CharisPair, ekb: EKB) -> JudgeRequest:
    """One request: for each prompted axis (with its phrase and the EKB's meaning), is it realised?"""
    lines = []
    if pair.prompt:
        lines.append(f'Image 2 was generated from image 1 and this prompt: "{pair.prompt}"')
    else:
        lines.append("Image 2 was generated from image 1 and a prompt that asked for the changes below.")
    lines += ["", "The prompt asked for these changes:"]
    for axis in pair.axes:
        phrase = pair.phrases.get(axis)
        asked = f': "{phrase}"' if phrase else ""
        lines.append(f"- {axis}{asked} ({ekb.transformations[axis].meaning.strip()})")
    lines += [
        "",
        "For each change answer:",
        "- observation: in a few words, what image 2 shows in this respect, compared with image 1.",
        "- realised: true when image 2 shows what was asked. Compare with image 1: where image 2 looks like "
        "image 1 in this respect, the change was not made (unless image 1 already showed exactly what was "
        "asked); a different change from the one asked is not realised either.",
    ]
    return JudgeRequest(
        task=ADHERENCE_TASK,
        prompt="\n".join(lines),
        schema=adherence_schema(pair.axes),
        images=(pair.reference, pair.generation),
        system=ADHERENCE_SYSTEM_PROMPT,
    )


def parse_adherence(answer: JudgeAnswer, pair: CharisPair) -> dict[str, tuple[str, bool]]:
    """axis -> (observation, realised); :class:`AnswerError` when the answer breaks its schema."""
    value = answer_object(answer)
    _exact_keys(value, ("transformations",), "answer")
    found = value["transformations"]
    if not isinstance(found, Mapping):
        raise AnswerError(f"transformations: expected an object, got {found!r}")
    _exact_keys(found, pair.axes, "transformations")
    out = {}
    for axis in pair.axes:
        entry, where = found[axis], f"transformations.{axis}"
        if not isinstance(entry, Mapping):
            raise AnswerError(f"{where}: expected an object, got {entry!r}")
        _exact_keys(entry, ("observation", "realised"), where)
        if not isinstance(entry["observation"], str):
            raise AnswerError(f"{where}.observation: expected a string, got {entry['observation']!r}")
        out[axis] = (entry["observation"], _bool(entry["realised"], f"{where}.realised"))
    return out


@dataclass(frozen=True)
class AdherenceVerdict:
    """Which prompted transformations the judge sees realised, and their share; or why there is none."""

    prompt_id: str
    seed: int
    score: float | None  # realised / prompted; None on a judge failure
    evidence: dict[str, Any]
    failure: str | None

    @property
    def judge_failure(self) -> bool:
        return self.failure is not None


def evaluate_adherence(judge: Judge, pairs: Sequence[CharisPair], ekb: EKB | None = None) -> list[AdherenceVerdict]:
    """One ``judge.ask`` wave, one request per pair; one verdict per pair, in order.

    Bad pairs (unknown type, style or axis, empty images, no prompted axis) raise ``ValueError`` before
    anything is asked.
    """
    ekb = ekb if ekb is not None else load_ekb()
    pairs = list(pairs)
    for pair in pairs:
        check_pair(pair, ekb)
        if not pair.axes:
            raise ValueError(
                f"pair ({pair.prompt_id!r}, seed {pair.seed}): the prompt asks for no transformation to adhere to"
            )
    answers = _ask(judge, [adherence_request(pair, ekb) for pair in pairs])
    verdicts = []
    for pair, answer in zip(pairs, answers):
        base = {"prompted": list(pair.axes), "phrases": {a: pair.phrases.get(a, "") for a in pair.axes}}
        try:
            found = parse_adherence(answer, pair)
        except AnswerError as err:
            verdicts.append(
                AdherenceVerdict(
                    pair.prompt_id, pair.seed, None, {**base, "error": str(err)}, f"{ADHERENCE_TASK}: {err}"
                )
            )
            continue
        realised = [axis for axis in pair.axes if found[axis][1]]
        evidence = {
            **base,
            "realised": realised,
            "not_realised": [axis for axis in pair.axes if axis not in realised],
            "observations": {axis: found[axis][0] for axis in pair.axes},
        }
        verdicts.append(AdherenceVerdict(pair.prompt_id, pair.seed, len(realised) / len(pair.axes), evidence, None))
    return verdicts


def summarize_adherence(verdicts: Sequence[AdherenceVerdict]) -> dict[str, Any]:
    """Pairs, failures, the mean share over the answered pairs, and how often each axis was realised."""
    answered = [v for v in verdicts if v.score is not None]
    per_axis: dict[str, list[int]] = {}
    for v in answered:
        for axis in v.evidence["prompted"]:
            per_axis.setdefault(axis, []).append(int(axis in v.evidence["realised"]))
    return {
        "pairs": len(verdicts),
        "failures": len(verdicts) - len(answered),
        "failure_rate": (len(verdicts) - len(answered)) / len(verdicts) if verdicts else 0.0,
        "mean_score": sum(v.score for v in answered) / len(answered) if answered else None,
        "realised_by_axis": {axis: sum(flags) / len(flags) for axis, flags in per_axis.items()},
    }


# --- intent to treat and the overall score (pure) ----------------------------------------------------

NOT_CONFIRMED = 0.0  # what a missing category or adherence answer scores in the ranked variants


def identity_itt(verdict: PairVerdict, hidden_by_prompt: bool) -> float:
    """The ranked identity score of a pair: NaN on a hide-prompt (for every model), else the category
    score, with insufficient evidence (the model did not show the subject) and a judge failure scored
    ``NOT_CONFIRMED`` (0, the score of ``mismatch``)."""
    if hidden_by_prompt:
        return math.nan
    return NOT_CONFIRMED if verdict.score is None else float(verdict.score)


def adherence_itt(verdict: AdherenceVerdict) -> float:
    """The adherence share, or ``NOT_CONFIRMED`` (0) when the judge gave no usable answer."""
    return NOT_CONFIRMED if verdict.score is None else float(verdict.score)


def subject_not_shown(identity: PairVerdict, hidden_by_prompt: bool) -> bool:
    """Whether the identity judge did not confirm the subject in view on a prompt that did not hide it:
    insufficient evidence (no core feature of the subject visible) or a judge failure. The prompt's
    changes are asked of the subject, so adherence there is not confirmed either. A hide-prompt asks
    for the subject out of view for every model alike: never gated."""
    return not hidden_by_prompt and identity.score is None


def adherence_gated(verdict: AdherenceVerdict, identity: PairVerdict, hidden_by_prompt: bool) -> float:
    """``prompt_adherence`` (suite 0.5): the adherence share, intent to treat, gated on the subject
    being there: ``NOT_CONFIRMED`` (0, adherence's worst value) when the judge gave no usable adherence
    answer or when :func:`subject_not_shown`. Without the gate, blurring the subject away while the
    judge says the asked changes were made read 1.000 against 0.695 honest (issue 39)."""
    return NOT_CONFIRMED if subject_not_shown(identity, hidden_by_prompt) else adherence_itt(verdict)


def overall_score(identity: float, adherence: float) -> float:
    """``sqrt(identity x adherence)``: the geometric mean of the two ranked factors, each in [0, 1].

    NaN stays NaN (a hide-prompt). 0 in either factor gives 0, so a copy of the reference (identity 1,
    adherence 0) scores no more than a blank canvas.
    """
    if math.isnan(identity) or math.isnan(adherence):
        return math.nan
    return math.sqrt(identity * adherence)
