"""The CHARIS evaluator (paper 000): an EKB-driven, hierarchical VLM judgement of one subject's identity.

For each (reference, generation) pair the judge is asked narrow questions whose answers are checked,
and the category is then computed here, by the ordered rules of ``ekb/data/rules.yaml``, rather than
asked of the judge: a VLM that names concrete changes is more reliable than one that weighs them.

Stages per pair (both images go with every request, reference first):

1. ``charis.subject`` (one request): the type and style of the generated subject, and which attributes
   of the reference's (type, style) cell are visible in each image. The attribute list comes from the
   reference's cell, which the dataset gives, so it does not depend on the type answer: asking both in
   one request saves a round trip without changing either question.
2. ``charis.features`` (one request per attribute visible in both images): for each of the attribute's
   features, whether it is visible in each image, whether it changed, which allowed transformations
   explain the change and which harmful changes (``rules.yaml: harmful_changes``) remain.

Requests per pair: ``1 + A``, ``A`` the number of the cell's attributes visible in both images; a pair
whose generated subject is of another type stops after stage 1 (it is a mismatch whatever else).

:func:`evaluate_pairs` runs the stages in waves over all pairs (every stage-1 request in one
``judge.ask`` batch, then every stage-2 request in one), so an async client can run each wave
concurrently. :func:`aggregate` is the pure rule step; it needs no judge.

A pair whose needed answers did not all arrive, or did not match their schema, gets no category: its
verdict says why, and :func:`summarize` counts it as a judge failure. A pair whose answers show no core
feature in both images (a back view hiding face and eyes) gets none either: it is insufficient
evidence, counted apart. Neither is ever scored as 0, or as exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idbench.ekb import EKB, load_ekb
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

SUBJECT_TASK = "charis.subject"
FEATURES_TASK = "charis.features"

# The answer for a generated subject that is none of the EKB's types or styles (or no subject at all).
OTHER = "other"

STATUSES = ("unchanged", "changed", "hidden")

# The importance level a category needs to have seen: every rule above the catch-all limits its share
# (rules.yaml), so a pair with none of its features visible in both images gets no category but the
# catch-all (see :func:`aggregate`). Every (type, style) cell of the EKB has core features.
EVIDENCE_LEVEL = "core"
# ``failure_kind`` of a pair that was judged but shows too little to categorise (not a judge failure).
INSUFFICIENT = "insufficient_evidence"

SYSTEM_PROMPT = (
    "You inspect the identity of a subject across two images. Image 1 is the reference: it shows the "
    "subject as it really is. Image 2 was generated from a text prompt that asked for this same subject "
    "under some changes. You look only at the subject, never at the rest of the scene, you report what "
    "you actually see rather than what the prompt asked for, and you answer with JSON that matches the "
    "given schema, with no other text."
)

# Shown in the visibility questions: "visible" means "in view", so that an accessory the subject does
# not wear is still compared (its absence is a fact to compare), while a part hidden by the scene is not.
_VISIBILITY_NOTE = (
    "Something counts as visible when the part of the subject it concerns is in view and clear enough "
    "to judge, even if it is empty (no glasses worn is a visible fact). It is not visible when that part "
    "is hidden behind something, turned away from the camera, or outside the frame."
)


class AnswerError(ValueError):
    """A judge answer that cannot be used: the client's error, or a value that breaks the schema."""


# --- input -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CharisPair:
    """One (reference, generation) pair of the CHARIS benchmark and what its prompt asked for.

    ``type`` and ``style`` are the reference subject's, from the dataset; ``axes`` the transformations
    the prompt declared, ``phrases`` the prompt's wording for each (axis -> phrase), shown to the judge
    so it knows what the generation was meant to change.
    """

    prompt_id: str
    seed: int
    type: str
    style: str
    axes: tuple[str, ...]
    reference: bytes
    generation: bytes
    prompt: str = ""
    phrases: Mapping[str, str] = field(default_factory=dict)
    subject_name: str = ""


def pair_from_rows(
    prompt_row: Mapping[str, Any], seed: int, reference: bytes, generation: bytes, subject_name: str = ""
) -> CharisPair:
    """A pair from a row of the ``prompts`` config (columns ``prompt_id``, ``type``, ``style``, ``axes``,
    ``transformations``, ``prompt``), the subject's reference image bytes (``subjects.image``, found
    through ``subject_id``), the generated image bytes and, optionally, ``subjects.name``."""
    phrases = {str(part["axis"]): str(part["phrase"]) for part in prompt_row.get("transformations") or ()}
    return CharisPair(
        prompt_id=str(prompt_row["prompt_id"]),
        seed=int(seed),
        type=str(prompt_row["type"]),
        style=str(prompt_row["style"]),
        axes=tuple(prompt_row["axes"]),
        reference=reference,
        generation=generation,
        prompt=str(prompt_row.get("prompt") or ""),
        phrases=phrases,
        subject_name=subject_name,
    )


def check_pair(pair: CharisPair, ekb: EKB) -> None:
    """Refuse a pair the EKB cannot judge, naming it: bad input is an error, not a judge failure."""
    where = f"pair ({pair.prompt_id!r}, seed {pair.seed})"
    if pair.type not in ekb.types:
        raise ValueError(f"{where}: unknown subject type {pair.type!r}; types are: {', '.join(ekb.types)}")
    if pair.style not in ekb.styles:
        raise ValueError(f"{where}: unknown style {pair.style!r}; styles are: {', '.join(ekb.styles)}")
    unknown = [a for a in pair.axes if a not in ekb.transformations]
    if unknown:
        raise ValueError(
            f"{where}: unknown transformation axis {', '.join(map(repr, unknown))}; "
            f"axes are: {', '.join(ekb.transformations)}"
        )
    if not pair.reference or not pair.generation:
        raise ValueError(f"{where}: the reference and the generated image must both be non-empty bytes")


# --- what the EKB allows -----------------------------------------------------------------------------


def allowed_transformations(axes: Iterable[str], ekb: EKB) -> tuple[str, ...]:
    """The transformations that may explain a feature's change, in EKB order.

    The prompted ones that do not harm identity, plus those the EKB accepts whenever they occur: a
    transformation without a ``condition`` (pose, lighting, ... : "never count against identity" in the
    principles). A conditional one (style) explains a change only when the prompt asked for it; an
    unrequested style change is, per ``transformations.yaml``, a change of the rendering features.
    """
    prompted = set(axes)
    return tuple(
        name
        for name, t in ekb.transformations.items()
        if not t.harms_identity and (name in prompted or not t.condition)
    )


def cell_features(pair_type: str, style: str, ekb: EKB) -> dict[str, tuple[str, ...]]:
    """attribute -> the names of the features asked about under it, for a (type, style) cell.

    A feature that two attributes of the cell share is asked about once, under the first.
    """
    out: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for attribute in ekb.attributes_for(pair_type, style):
        names = tuple(f.name for f in attribute.features if f.name not in seen)
        seen.update(names)
        out[attribute.name] = names
    return out


def _last_category(ekb: EKB) -> str:
    """The category of the last, catch-all rule (mismatch with the shipped rules)."""
    return ekb.rules.categorisation[-1].category


def category_score(category: str, ekb: EKB) -> float:
    """The normalised score of a category, from ``categories.yaml`` (exact 1 ... mismatch 0)."""
    return float(ekb.categories[category].score)


# --- JSON schemas ------------------------------------------------------------------------------------


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A strict object schema: every property required, nothing else allowed (OpenAI strict mode)."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _names(values: Sequence[str]) -> dict[str, Any]:
    """A list of distinct names from ``values`` (an empty list when ``values`` is empty)."""
    if not values:
        return {"type": "array", "maxItems": 0, "items": {"type": "string"}}
    return {"type": "array", "items": {"type": "string", "enum": list(values)}}


def subject_schema(attributes: Sequence[str], ekb: EKB) -> dict[str, Any]:
    """Schema of the stage-1 answer: generated type and style, and attribute visibility per image."""
    seen = _object({"in_reference": {"type": "boolean"}, "in_generated": {"type": "boolean"}})
    return _object(
        {
            "generated_type": {"type": "string", "enum": [*ekb.types, OTHER]},
            "generated_style": {"type": "string", "enum": [*ekb.styles, OTHER]},
            "attributes": _object({name: seen for name in attributes}),
        }
    )


def features_schema(features: Sequence[str], allowed: Sequence[str], ekb: EKB) -> dict[str, Any]:
    """Schema of a stage-2 answer. ``observation`` comes first so the judge describes before it labels."""
    finding = _object(
        {
            "observation": {"type": "string"},
            "in_reference": {"type": "boolean"},
            "in_generated": {"type": "boolean"},
            "changed": {"type": "boolean"},
            "transformations": _names(allowed),
            "harmful_changes": _names(tuple(ekb.rules.harmful_changes)),
        }
    )
    return _object({"features": _object({name: finding for name in features})})


# --- request builders --------------------------------------------------------------------------------


def _context(pair: CharisPair) -> list[str]:
    """The opening lines every CHARIS prompt shares: who the subject is and what was asked."""
    subject = f" ({pair.subject_name})" if pair.subject_name else ""
    lines = [
        f'Image 1 is the reference. Its subject{subject} is of type "{pair.type}" in "{pair.style}" style; '
        "this is known from the benchmark and need not be checked.",
    ]
    if pair.prompt:
        lines.append(f'Image 2 was generated from this prompt: "{pair.prompt}"')
    else:
        lines.append("Image 2 was generated from a prompt that asked for this subject.")
    return lines


def subject_request(pair: CharisPair, ekb: EKB) -> JudgeRequest:
    """Stage 1: the generated subject's type and style, and which attributes each image shows."""
    attributes = ekb.attributes_for(pair.type, pair.style)
    lines = _context(pair) + [
        "",
        "Step 1. Classify the main subject of image 2.",
        "Its type, one of:",
        *(f"- {t.name}: {t.description}" for t in ekb.types.values()),
        f"- {OTHER}: none of these, or no single main subject can be made out.",
        "Its style, one of:",
        *(f"- {s.name}: {s.description}" for s in ekb.styles.values()),
        f"- {OTHER}: a rendering that is none of these (a watercolour, a pencil sketch, pixel art, ...).",
        "",
        f'Step 2. These attributes identify a subject of type "{pair.type}" in "{pair.style}" style. '
        "For each, say whether it is visible in image 1 (in_reference) and in image 2 (in_generated). "
        + _VISIBILITY_NOTE,
        *(f"- {a.name}: {a.description}" for a in attributes),
        "",
        "Answer with generated_type, generated_style and attributes (one entry per attribute above).",
    ]
    return JudgeRequest(
        task=SUBJECT_TASK,
        prompt="\n".join(lines),
        schema=subject_schema([a.name for a in attributes], ekb),
        images=(pair.reference, pair.generation),
        system=SYSTEM_PROMPT,
    )


def attribute_request(pair: CharisPair, attribute: str, ekb: EKB) -> JudgeRequest:
    """Stage 2: every feature of one attribute, compared between the two images.

    The prompt carries the EKB principles, the transformations that may explain a change (marked as
    asked for by the prompt, with its phrase, or as always acceptable) and the harmful changes.
    """
    features = cell_features(pair.type, pair.style, ekb)[attribute]
    allowed = allowed_transformations(pair.axes, ekb)
    prompted = set(pair.axes)
    transformation_lines = []
    for name in allowed:
        t = ekb.transformations[name]
        if name in prompted:
            phrase = pair.phrases.get(name)
            origin = f'asked for by the prompt: "{phrase}"' if phrase else "asked for by the prompt"
        else:
            origin = "acceptable even when not asked for"
        condition = f" {t.condition.strip()}" if t.condition else ""
        transformation_lines.append(f"- {name} ({origin}): {t.meaning.strip()}{condition}")
    refused = [n for n in ekb.transformations if n not in allowed]
    description = ekb.attributes[attribute].description
    lines = _context(pair) + [
        "",
        f'Compare the attribute "{attribute}" of the subject ({description}) between image 1 and image 2, '
        "feature by feature:",
        *(f"- {name}: {ekb.features[name].description}" for name in features),
        "",
        "Principles:",
        *(f"- {p}" for p in ekb.rules.principles),
        "",
        "Transformations that may explain a difference (name only these):",
        *transformation_lines,
    ]
    if refused:
        lines.append(
            f"Not asked for by the prompt, and so no explanation here: {', '.join(refused)}. A difference "
            "of that kind is an intrinsic change."
        )
    lines += [
        "",
        "Harmful changes (intrinsic changes of the feature itself):",
        *(f"- {name}: {meaning}" for name, meaning in ekb.rules.harmful_changes.items()),
        "",
        "For each feature answer:",
        "- observation: in a few words, how the feature looks in image 1 and in image 2.",
        "- in_reference, in_generated: whether the feature is visible in that image. " + _VISIBILITY_NOTE,
        "- changed: whether the feature looks different in image 2, for whatever reason.",
        "- transformations: the transformations above that account for the difference (empty if it did "
        "not change or none does).",
        "- harmful_changes: the kinds of intrinsic change that remain once those transformations are "
        "accounted for (empty if they explain the whole difference, or if it did not change).",
    ]
    return JudgeRequest(
        task=FEATURES_TASK,
        prompt="\n".join(lines),
        schema=features_schema(features, allowed, ekb),
        images=(pair.reference, pair.generation),
        system=SYSTEM_PROMPT,
    )


# --- parsed answers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubjectFindings:
    """The stage-1 answer: what the generated subject is, and attribute -> (in reference, in generated)."""

    generated_type: str
    generated_style: str
    attributes: Mapping[str, tuple[bool, bool]]

    def visible_in_both(self) -> tuple[str, ...]:
        return tuple(name for name, (ref, gen) in self.attributes.items() if ref and gen)


@dataclass(frozen=True)
class FeatureFinding:
    """One feature's stage-2 answer, and what it means for identity."""

    attribute: str
    observation: str
    in_reference: bool
    in_generated: bool
    changed: bool
    transformations: tuple[str, ...]
    harmful_changes: tuple[str, ...]

    @property
    def status(self) -> str:
        """hidden (not visible in both: unknown, never "changed"), changed or unchanged.

        A named harmful change makes the feature changed even if ``changed`` says otherwise: the named
        kind is the more concrete claim.
        """
        if not (self.in_reference and self.in_generated):
            return "hidden"
        return "changed" if self.changed or self.harmful_changes else "unchanged"

    @property
    def harmful(self) -> bool:
        """A change counts against identity unless allowed transformations explain all of it.

        That is: a harmful change is named, or the judge saw a change it could explain by no allowed
        transformation (which the principles make intrinsic).
        """
        return self.status == "changed" and (bool(self.harmful_changes) or not self.transformations)


def answer_object(answer: JudgeAnswer) -> Mapping[str, Any]:
    """The answer's value as a JSON object, or :class:`AnswerError` with the reason there is none."""
    if not answer.ok:
        raise AnswerError(f"the judge gave no answer: {answer.error}")
    if not isinstance(answer.value, Mapping):
        raise AnswerError(f"expected a JSON object, got {type(answer.value).__name__}")
    return answer.value


def _exact_keys(value: Mapping[str, Any], expected: Sequence[str], where: str) -> None:
    missing = [k for k in expected if k not in value]
    extra = [k for k in value if k not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(map(repr, missing))}")
        if extra:
            parts.append(f"unexpected {', '.join(map(repr, extra))}")
        raise AnswerError(f"{where}: {'; '.join(parts)}")


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise AnswerError(f"{where}: expected true or false, got {value!r}")
    return value


def _choice(value: Any, choices: Sequence[str], where: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise AnswerError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _choices(value: Any, choices: Sequence[str], where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise AnswerError(f"{where}: expected a list, got {value!r}")
    return tuple(dict.fromkeys(_choice(v, choices, where) for v in value))  # a repeated name counts once


def parse_subject(answer: JudgeAnswer, pair: CharisPair, ekb: EKB) -> SubjectFindings:
    """Check a stage-1 answer against its schema and read it; :class:`AnswerError` if it breaks it."""
    value = answer_object(answer)
    _exact_keys(value, ("generated_type", "generated_style", "attributes"), "answer")
    generated_type = _choice(value["generated_type"], (*ekb.types, OTHER), "generated_type")
    generated_style = _choice(value["generated_style"], (*ekb.styles, OTHER), "generated_style")
    names = [a.name for a in ekb.attributes_for(pair.type, pair.style)]
    attributes = value["attributes"]
    if not isinstance(attributes, Mapping):
        raise AnswerError(f"attributes: expected an object, got {attributes!r}")
    _exact_keys(attributes, names, "attributes")
    seen = {}
    for name in names:
        entry = attributes[name]
        if not isinstance(entry, Mapping):
            raise AnswerError(f"attributes.{name}: expected an object, got {entry!r}")
        _exact_keys(entry, ("in_reference", "in_generated"), f"attributes.{name}")
        seen[name] = (
            _bool(entry["in_reference"], f"attributes.{name}.in_reference"),
            _bool(entry["in_generated"], f"attributes.{name}.in_generated"),
        )
    return SubjectFindings(generated_type, generated_style, seen)


_FINDING_KEYS = ("observation", "in_reference", "in_generated", "changed", "transformations", "harmful_changes")


def parse_features(answer: JudgeAnswer, pair: CharisPair, attribute: str, ekb: EKB) -> dict[str, FeatureFinding]:
    """Check a stage-2 answer against its schema and read it: feature -> finding."""
    value = answer_object(answer)
    _exact_keys(value, ("features",), "answer")
    features = value["features"]
    if not isinstance(features, Mapping):
        raise AnswerError(f"features: expected an object, got {features!r}")
    names = cell_features(pair.type, pair.style, ekb)[attribute]
    _exact_keys(features, names, "features")
    allowed = allowed_transformations(pair.axes, ekb)
    harmful = tuple(ekb.rules.harmful_changes)
    out = {}
    for name in names:
        entry, where = features[name], f"features.{name}"
        if not isinstance(entry, Mapping):
            raise AnswerError(f"{where}: expected an object, got {entry!r}")
        _exact_keys(entry, _FINDING_KEYS, where)
        if not isinstance(entry["observation"], str):
            raise AnswerError(f"{where}.observation: expected a string, got {entry['observation']!r}")
        out[name] = FeatureFinding(
            attribute=attribute,
            observation=entry["observation"],
            in_reference=_bool(entry["in_reference"], f"{where}.in_reference"),
            in_generated=_bool(entry["in_generated"], f"{where}.in_generated"),
            changed=_bool(entry["changed"], f"{where}.changed"),
            transformations=_choices(entry["transformations"], allowed, f"{where}.transformations"),
            harmful_changes=_choices(entry["harmful_changes"], harmful, f"{where}.harmful_changes"),
        )
    return out


# --- aggregation (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregate:
    """The rule step's result: a category (None when there is nothing to judge) and its evidence."""

    category: str | None
    score: float | None
    evidence: dict[str, Any]
    failure: str | None = None


def aggregate(
    pair: CharisPair, subject: SubjectFindings, findings: Mapping[str, FeatureFinding], ekb: EKB
) -> Aggregate:
    """The category of a pair from its parsed answers, through the EKB's ordered categorisation rules.

    Per importance level, the share of the features visible in both images that show a harmful change;
    hidden features are left out (unknown, not changed). A generated subject of another type is the
    decisive level fully changed (another kind of thing), whatever its features; its features are then
    not examined. ``findings`` must hold every feature of every attribute visible in both images.
    """
    type_changed = subject.generated_type != pair.type
    evidence = _subject_evidence(pair, subject, ekb)
    levels = list(ekb.rules.importance_levels)
    counts = {level: {"visible": 0, "harmful": 0} for level in levels}
    features: dict[str, Any] = {}
    if not type_changed:
        by_attribute = cell_features(pair.type, pair.style, ekb)
        examined = set(subject.visible_in_both())
        for attribute, names in by_attribute.items():
            for name in names:
                level = ekb.level_of(name)
                if attribute in examined:
                    if name not in findings:
                        raise ValueError(f"pair {pair.prompt_id!r}: no finding for feature {name!r} of {attribute!r}")
                    features[name] = _feature_evidence(findings[name], level)
                else:  # the attribute is out of view in one image: its features are unknown, not asked
                    features[name] = _hidden_evidence(attribute, level)
                if features[name]["status"] != "hidden":
                    counts[level]["visible"] += 1
                    counts[level]["harmful"] += int(features[name]["harmful"])
    evidence["features"] = features
    evidence["harmful_features"] = [name for name, f in features.items() if f["harmful"]]
    evidence["counts"] = counts
    if type_changed:
        # The levels run highest first, so levels[0] is the decisive one; Rules.categorise counts a
        # level left out as 0, so this share alone says "another kind of thing".
        shares = {levels[0]: 1.0}
    else:
        # A level with no feature visible in both images has no share (unknown), not a share of 0.
        shares = {lvl: c["harmful"] / c["visible"] for lvl, c in counts.items() if c["visible"]}
    evidence["shares"] = shares
    if not shares:
        evidence["rule"] = None
        return Aggregate(
            None, None, evidence, failure="insufficient evidence: no identity feature is visible in both images"
        )
    category = ekb.rules.categorise(shares)
    if not type_changed and not counts[EVIDENCE_LEVEL]["visible"] and category != _last_category(ekb):
        # Every category above the last limits the core share, so with no core feature in view none of
        # them can be granted: a back view hiding face and eyes would otherwise read "exact". A mismatch
        # stays, since a visible decisive change decides it whatever the core features would show.
        evidence["rule"] = None
        hidden = [n for n, f in features.items() if f["level"] == EVIDENCE_LEVEL]
        return Aggregate(
            None,
            None,
            evidence,
            failure=f"insufficient evidence: no {EVIDENCE_LEVEL} feature is visible in both images ({', '.join(hidden)})",
        )
    rule = next(r for r in ekb.rules.categorisation if r.category == category)
    evidence["rule"] = {"category": category, "description": " ".join(rule.description.split())}
    return Aggregate(category, category_score(category, ekb), evidence)


def _subject_evidence(pair: CharisPair, subject: SubjectFindings | None, ekb: EKB) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "reference": {"type": pair.type, "style": pair.style},
        "prompted_transformations": list(pair.axes),
        "allowed_transformations": list(allowed_transformations(pair.axes, ekb)),
    }
    if subject is None:
        return evidence
    evidence["generated"] = {"type": subject.generated_type, "style": subject.generated_style}
    evidence["type_changed"] = subject.generated_type != pair.type
    # An unrequested style change is judged through the rendering features; noted here for the reader.
    evidence["unprompted_style_change"] = subject.generated_style != pair.style and "style" not in pair.axes
    evidence["attributes"] = {
        name: {"in_reference": ref, "in_generated": gen} for name, (ref, gen) in subject.attributes.items()
    }
    return evidence


def _hidden_evidence(attribute: str, level: str) -> dict[str, Any]:
    return {
        "attribute": attribute,
        "level": level,
        "status": "hidden",
        "harmful": False,
        "transformations": [],
        "harmful_changes": [],
        "observation": "",
    }


def _feature_evidence(finding: FeatureFinding, level: str) -> dict[str, Any]:
    hidden = finding.status == "hidden"
    return {
        "attribute": finding.attribute,
        "level": level,
        "status": finding.status,
        "harmful": finding.harmful,
        "transformations": [] if hidden else list(finding.transformations),
        "harmful_changes": [] if hidden else list(finding.harmful_changes),
        "observation": finding.observation,
    }


# --- orchestration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairVerdict:
    """The CHARIS judgement of one (prompt, seed): a category and its score, or a failure and its reason.

    ``evidence`` is JSON-serialisable (see docs/charis-judge.md); ``requests`` counts the judge requests
    the pair needed.
    """

    prompt_id: str
    seed: int
    category: str | None
    score: float | None
    evidence: dict[str, Any]
    failure: str | None
    requests: int

    @property
    def insufficient_evidence(self) -> bool:
        """Judged, but too little of the subject is visible in both images for a category."""
        return self.evidence.get("failure_kind") == INSUFFICIENT

    @property
    def judge_failure(self) -> bool:
        """No category because an answer the pair needed is missing or invalid."""
        return self.failure is not None and not self.insufficient_evidence


def _ask(judge: Judge, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
    if not requests:
        return []
    answers = list(judge.ask(requests))
    if len(answers) != len(requests):
        raise RuntimeError(f"judge {judge.model!r} gave {len(answers)} answers to {len(requests)} requests")
    return answers


def evaluate_pairs(judge: Judge, pairs: Sequence[CharisPair], ekb: EKB | None = None) -> list[PairVerdict]:
    """Judge every pair; one verdict per pair, in order.

    Two waves of ``judge.ask``: all stage-1 requests, then all stage-2 requests of the pairs that need
    them. Bad pairs (unknown type, style or axis) raise ``ValueError`` before anything is asked.
    """
    ekb = ekb if ekb is not None else load_ekb()
    pairs = list(pairs)
    for pair in pairs:
        check_pair(pair, ekb)

    subject_answers = _ask(judge, [subject_request(pair, ekb) for pair in pairs])
    subjects: list[SubjectFindings | None] = []
    failures: list[list[dict[str, str]]] = [[] for _ in pairs]
    wave: list[tuple[int, str]] = []  # (pair index, attribute) of each stage-2 request
    for i, (pair, answer) in enumerate(zip(pairs, subject_answers)):
        try:
            subject = parse_subject(answer, pair, ekb)
        except AnswerError as err:
            failures[i].append({"task": SUBJECT_TASK, "error": str(err)})
            subjects.append(None)
            continue
        subjects.append(subject)
        if subject.generated_type == pair.type:
            wave.extend((i, attribute) for attribute in subject.visible_in_both())

    feature_answers = _ask(judge, [attribute_request(pairs[i], attribute, ekb) for i, attribute in wave])
    findings: list[dict[str, FeatureFinding]] = [{} for _ in pairs]
    requests = [1] * len(pairs)
    for (i, attribute), answer in zip(wave, feature_answers):
        requests[i] += 1
        try:
            findings[i].update(parse_features(answer, pairs[i], attribute, ekb))
        except AnswerError as err:
            failures[i].append({"task": FEATURES_TASK, "attribute": attribute, "error": str(err)})

    verdicts = []
    for i, pair in enumerate(pairs):
        subject = subjects[i]
        if failures[i]:
            evidence = _subject_evidence(pair, subject, ekb)
            # Keep what did arrive: the chain of evidence shows where the judgement broke off.
            evidence["features"] = {name: _feature_evidence(f, ekb.level_of(name)) for name, f in findings[i].items()}
            evidence["failed_requests"] = failures[i]
            evidence["failure_kind"] = "judge"
            reason = "; ".join(
                f"{f['task']}" + (f"[{f['attribute']}]" if "attribute" in f else "") + f": {f['error']}"
                for f in failures[i]
            )
            verdicts.append(PairVerdict(pair.prompt_id, pair.seed, None, None, evidence, reason, requests[i]))
            continue
        assert subject is not None
        result = aggregate(pair, subject, findings[i], ekb)
        if result.failure:
            result.evidence["failure_kind"] = INSUFFICIENT
        verdicts.append(
            PairVerdict(
                pair.prompt_id, pair.seed, result.category, result.score, result.evidence, result.failure, requests[i]
            )
        )
    return verdicts


def summarize(verdicts: Sequence[PairVerdict], ekb: EKB | None = None) -> dict[str, Any]:
    """Category counts, mean score over the judged pairs, the judge-failure rate and the
    insufficient-evidence rate.

    A pair without a category is either a judge failure (a missing or invalid answer: counted in
    ``failure_rate``) or insufficient evidence (the answers arrived, but no core feature, or none at
    all, is visible in both images: counted in ``insufficient_evidence_rate``); both rates are over all
    pairs and neither kind is scored. ``failures_by_kind`` splits every uncategorised pair by kind.
    ``mean_score`` is None when no pair was judged.
    """
    ekb = ekb if ekb is not None else load_ekb()
    judged = [v for v in verdicts if v.category is not None]
    failed = [v for v in verdicts if v.category is None]
    insufficient = [v for v in failed if v.insufficient_evidence]
    categories = Counter(v.category for v in judged)
    scores = [v.score for v in judged if v.score is not None]
    total_requests = sum(v.requests for v in verdicts)
    return {
        "pairs": len(verdicts),
        "judged": len(judged),
        "failures": len(failed) - len(insufficient),
        "failure_rate": (len(failed) - len(insufficient)) / len(verdicts) if verdicts else 0.0,
        "insufficient_evidence": len(insufficient),
        "insufficient_evidence_rate": len(insufficient) / len(verdicts) if verdicts else 0.0,
        "failures_by_kind": dict(Counter(v.evidence.get("failure_kind", "judge") for v in failed)),
        "categories": {name: categories.get(name, 0) for name in ekb.categories},
        "mean_score": sum(scores) / len(scores) if scores else None,
        "requests": total_requests,
        "requests_per_pair": total_requests / len(verdicts) if verdicts else 0.0,
    }
