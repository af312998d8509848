"""CHARIS prompts proposed by a VLM from each reference image (paper 000, benchmark construction).

The paper had GPT-4o look at every reference, pick out its attributes and propose prompts that each
apply 5 or 6 of the 7 transformation axes at once; people then refined them (:mod:`idbench.benchmarks.charis.review`).
The builder's template route (:mod:`idbench.benchmarks.charis.sampling`) stays the offline default; this is the
model route.

Per subject, one request (the reference image, its type and style from the EKB, the seven axes with
their meaning and two example phrases each) asks for the number of prompts the subject still needs.
Each proposal declares the axes it applies as ``transformations``: a list of ``{axis, phrase}`` with
the axis from the EKB's enum and the phrase quoted from the prompt. The builder keeps exactly the axes
the VLM declared, after checking them (:func:`check_proposal`):

- 5 or 6 distinct axes, every one an EKB transformation;
- every phrase non-empty and found in the prompt (case and spacing aside), so the evaluator shows the
  judge the words that asked for each axis;
- a ``style`` phrase must ask for another style than the subject's own (the EKB's style keywords);
- the prompt is not empty and not a repeat of one already kept for the subject.

A proposal that fails is recorded with its reasons; the subject is asked again, in the next wave, for
the prompts it still lacks, with the failures quoted back (which also makes the request new, so a
temperature-0 cache cannot hand back the same rejected answer). At most ``max_attempts`` waves; a
subject still short after that is reported as incomplete. All subjects of a wave go in one
``judge.ask`` call.

Example::

    report = propose_charis_prompts(judge, subject_inputs(subject_rows), load_ekb(), per_subject=7)
    rows = report.prompt_rows()            # PROMPTS rows (prompt_id, subject_id, ..., axes, transformations)
    export_review(report.proposals, images, "review/")      # curation.review: people refine them
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from idbench.benchmarks.charis.sampling import PROMPT_ID_PREFIX
from idbench.benchmarks.charis.spec import AXES_PER_PROMPT, PROMPTS_PER_SUBJECT, SIX_AXIS_SHARE
from idbench.ekb import EKB
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

TASK = "curation.charis.propose"

# Proposal statuses; the review step moves proposals between them.
PROPOSED = "proposed"  # written by the VLM, not reviewed
APPROVED = "approved"  # reviewed and kept as written
HUMAN_REFINED = "human_refined"  # edited by a reviewer
REJECTED = "rejected"  # reviewed and left out of the benchmark
STATUSES = (PROPOSED, APPROVED, HUMAN_REFINED, REJECTED)

SYSTEM = (
    "You write challenging prompts for a benchmark of identity-preserving image generation: a model gets "
    "the reference image and a prompt, and must keep the subject recognisably the same while applying "
    "every change the prompt asks for. Reply with one JSON object matching the given schema."
)


def proposal_schema(ekb: EKB) -> dict[str, Any]:
    """The answer's schema: a list of proposals, each a prompt and the axes it applies (EKB enum)."""
    part = {
        "type": "object",
        "properties": {"axis": {"type": "string", "enum": list(ekb.transformations)}, "phrase": {"type": "string"}},
        "required": ["axis", "phrase"],
        "additionalProperties": False,
    }
    proposal = {
        "type": "object",
        "properties": {"prompt": {"type": "string"}, "transformations": {"type": "array", "items": part}},
        "required": ["prompt", "transformations"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"proposals": {"type": "array", "items": proposal}},
        "required": ["proposals"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class SubjectInput:
    """One CHARIS subject: its reference image and the labels the manifest gives it."""

    subject_id: str
    name: str
    type: str
    style: str
    image: bytes = field(repr=False)


def subject_inputs(rows: Iterable[Mapping[str, Any]]) -> list[SubjectInput]:
    """Inputs from SUBJECTS rows as the builder makes them (``image`` = ``{"bytes": ...}`` or bytes)."""
    out = []
    for row in rows:
        image = row["image"]
        data = image.get("bytes") if isinstance(image, Mapping) else image
        out.append(SubjectInput(str(row["subject_id"]), str(row["name"]), str(row["type"]), str(row["style"]), data))
    return out


@dataclass(frozen=True)
class CharisProposal:
    """One prompt for one subject. ``transformations`` are (axis, phrase) pairs in prompt order."""

    prompt_id: str
    subject_id: str
    type: str
    style: str
    prompt: str
    transformations: tuple[tuple[str, str], ...]
    status: str = PROPOSED

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(axis for axis, _ in self.transformations)

    def row(self) -> dict[str, Any]:
        """A row of the CHARIS ``prompts`` config (exactly its columns)."""
        return {
            "prompt_id": self.prompt_id,
            "subject_id": self.subject_id,
            "type": self.type,
            "style": self.style,
            "prompt": self.prompt,
            "axes": list(self.axes),
            "transformations": [{"axis": a, "phrase": p} for a, p in self.transformations],
        }


@dataclass(frozen=True)
class Rejected:
    """A proposal that failed the checks, kept for the audit."""

    attempt: int
    prompt: str
    axes: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class SubjectOutcome:
    """What the proposals of one subject came to."""

    subject_id: str
    wanted: int
    kept: int
    attempts: int  # waves in which the subject was asked
    rejected: tuple[Rejected, ...]
    errors: tuple[str, ...]  # failed requests (transport, malformed reply), one per wave that had one

    @property
    def complete(self) -> bool:
        return self.kept >= self.wanted


@dataclass(frozen=True)
class ProposalReport:
    """Every kept proposal (with prompt ids), every subject's outcome, and what was asked."""

    model: str
    proposals: tuple[CharisProposal, ...]
    subjects: tuple[SubjectOutcome, ...]
    max_attempts: int
    ask_calls: int
    requests: int

    @property
    def incomplete(self) -> list[SubjectOutcome]:
        return [s for s in self.subjects if not s.complete]

    def prompt_rows(self) -> list[dict[str, Any]]:
        """PROMPTS rows of the proposals not rejected by a reviewer."""
        return [p.row() for p in self.proposals if p.status != REJECTED]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready audit: totals, axes per prompt, how often each axis is used, every rejection."""
        kept = [p for p in self.proposals if p.status != REJECTED]
        return {
            "model": self.model,
            "subjects": len(self.subjects),
            "proposals": len(kept),
            "incomplete_subjects": [s.subject_id for s in self.incomplete],
            "prompts_by_number_of_axes": dict(sorted(Counter(len(p.axes) for p in kept).items())),
            "mean_axes": round(sum(len(p.axes) for p in kept) / len(kept), 3) if kept else None,
            "prompts_asking_for_each_axis": dict(Counter(a for p in kept for a in p.axes)),
            "ask_calls": self.ask_calls,
            "requests": self.requests,
            "rejected": [
                {
                    "subject_id": s.subject_id,
                    "attempt": r.attempt,
                    "prompt": r.prompt,
                    "axes": list(r.axes),
                    "reasons": list(r.reasons),
                }
                for s in self.subjects
                for r in s.rejected
            ],
            "errors": [{"subject_id": s.subject_id, "error": e} for s in self.subjects for e in s.errors],
        }


# --- the request ------------------------------------------------------------------------------------------


def _six_axis_count(n: int) -> int:
    """How many of ``n`` prompts to ask with 6 axes, for the paper's mean of 5.4."""
    return round(SIX_AXIS_SHARE * n)


def proposal_request(
    subject: SubjectInput, ekb: EKB, count: int, kept: Sequence[str] = (), rejected: Sequence[Rejected] = ()
) -> JudgeRequest:
    """Ask for ``count`` proposals for ``subject``; ``kept`` prompts are not to be repeated and
    ``rejected`` ones are quoted with what was wrong."""
    few, many = min(AXES_PER_PROMPT), max(AXES_PER_PROMPT)
    n_many = _six_axis_count(count)
    if 0 < n_many < count:
        mix = f"{n_many} of them with {many} axes, the others with {few}"
    else:
        mix = f"{'all' if count > 1 else 'this one'} with {many if n_many == count and count else few} axes"
    subject_type, style = ekb.types[subject.type], ekb.styles[subject.style]
    axes = []
    for name, t in ekb.transformations.items():
        examples = list(t.phrases_for(subject.type, subject.style))[:2]
        condition = f" Limit: {t.condition}" if t.condition else ""
        axes.append(f'- {name}: {t.meaning}{condition} For example: "' + '"; "'.join(examples) + '".')
    text = (
        f"The image is the reference of {subject.name}.\n"
        f"Subject type: {subject.type}: {subject_type.description}\n"
        f"Style of the reference: {subject.style}: {style.description}\n\n"
        f"The {len(axes)} transformation axes:\n" + "\n".join(axes) + "\n\n"
        f"Propose {count} prompt{'s' if count != 1 else ''} for this subject. Each prompt applies {few} or {many} "
        f"different axes at once ({mix}); vary which axes are left out. Write each as one sentence about "
        "the subject, e.g. starting with its name, "
        "with one phrase per applied axis. Ask only for changes that are physically plausible for this "
        "subject and that a careful model could render while keeping it recognisable; make them "
        "demanding (coordinated limb movements, extreme viewpoints, strong lighting). A style phrase must "
        f"ask for a style other than {subject.style}. In transformations, list each applied axis once "
        "with its phrase copied word for word from the prompt."
    )
    if kept:
        text += "\n\nAlready kept for this subject (do not repeat them):\n" + "\n".join(f'- "{p}"' for p in kept)
    if rejected:
        text += "\n\nThese earlier proposals were rejected; avoid their problems:\n" + "\n".join(
            f'- "{r.prompt}": {"; ".join(r.reasons)}' for r in rejected
        )
    return JudgeRequest(task=TASK, prompt=text, schema=proposal_schema(ekb), images=(subject.image,), system=SYSTEM)


# --- checking a proposal --------------------------------------------------------------------------------------


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def check_proposal(
    value: Any, subject: SubjectInput, ekb: EKB, kept: Sequence[str] = ()
) -> tuple[str, tuple[tuple[str, str], ...], list[str]]:
    """``(prompt, transformations in prompt order, problems)`` of one proposal; it is usable iff no problems.

    ``transformations`` holds only well-formed pairs of known axes, for the record; a proposal with any
    problem is not kept.
    """
    problems: list[str] = []
    if not isinstance(value, Mapping):
        return "", (), [f"expected a JSON object, found {type(value).__name__}"]
    prompt = value.get("prompt")
    prompt = " ".join(prompt.split()) if isinstance(prompt, str) else ""
    if not prompt:
        problems.append("the prompt is empty")
    parts = value.get("transformations")
    if not isinstance(parts, list):
        return prompt, (), problems + [f"transformations: expected a list, found {parts!r}"]
    pairs: list[tuple[str, str]] = []
    for index, part in enumerate(parts):
        axis = part.get("axis") if isinstance(part, Mapping) else None
        phrase = part.get("phrase") if isinstance(part, Mapping) else None
        if not isinstance(axis, str) or axis not in ekb.transformations:
            problems.append(f"transformations[{index}]: unknown axis {axis!r} (axes: {', '.join(ekb.transformations)})")
            continue
        phrase = " ".join(phrase.split()) if isinstance(phrase, str) else ""
        pairs.append((axis, phrase))
    axes = [a for a, _ in pairs]
    repeated = sorted(a for a, n in Counter(axes).items() if n > 1)
    if repeated:
        problems.append(f"axes listed more than once: {', '.join(repeated)}")
    distinct = len(set(axes))
    if distinct not in AXES_PER_PROMPT:
        allowed = " or ".join(map(str, AXES_PER_PROMPT))
        problems.append(f"applies {distinct} distinct known axes; a prompt must apply {allowed}")
    flat = _flat(prompt)
    for axis, phrase in pairs:
        if not phrase:
            problems.append(f"{axis}: the phrase is empty")
        elif _flat(phrase) not in flat:
            problems.append(f'{axis}: the phrase "{phrase}" is not in the prompt')
        if axis == "style" and phrase and ekb.styles[subject.style].is_named_in(phrase):
            problems.append(f'style: "{phrase}" asks for the subject\'s own style ({subject.style})')
    if prompt and flat in {_flat(k) for k in kept}:
        problems.append("repeats a prompt already kept for this subject")
    # Prompt order: the evaluator and the dataset list transformations as the prompt mentions them.
    position = {pair: flat.find(_flat(pair[1])) for pair in pairs}
    ordered = tuple(sorted(pairs, key=lambda pair: (position[pair] < 0, position[pair])))
    return prompt, ordered, problems


def _check_subjects(subjects: Sequence[SubjectInput], ekb: EKB) -> None:
    seen: set[str] = set()
    for s in subjects:
        where = f"subject {s.subject_id!r}"
        if s.subject_id in seen:
            raise ValueError(f"{where} appears twice")
        seen.add(s.subject_id)
        if s.type not in ekb.types:
            raise ValueError(f"{where}: unknown type {s.type!r}; types are: {', '.join(ekb.types)}")
        if s.style not in ekb.styles:
            raise ValueError(f"{where}: unknown style {s.style!r}; styles are: {', '.join(ekb.styles)}")
        if not isinstance(s.image, bytes) or not s.image:
            raise ValueError(f"{where}: the image must be non-empty bytes")
        if not s.name.strip():
            raise ValueError(f"{where}: the name is empty")


# --- the loop -----------------------------------------------------------------------------------------------


@dataclass
class _Subject:
    subject: SubjectInput
    wanted: int
    kept: list[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    attempts: int = 0

    @property
    def missing(self) -> int:
        return self.wanted - len(self.kept)


def propose_charis_prompts(
    judge: Judge,
    subjects: Sequence[SubjectInput],
    ekb: EKB,
    per_subject: int | Mapping[str, int] = PROMPTS_PER_SUBJECT,
    max_attempts: int = 3,
) -> ProposalReport:
    """Have the VLM propose ``per_subject`` prompts for every subject (a number, or subject_id -> number).

    Waves of one ``judge.ask`` each (one request per subject still short), at most ``max_attempts``.
    Prompt ids are ``charis-0001``.. over the kept proposals in subject input order, as the template
    sampler names them. Raises ``ValueError`` for bad input (duplicate ids, unknown type or style, empty
    image, a count below 0, a bound below 1).
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    _check_subjects(subjects, ekb)
    states = []
    for s in subjects:
        wanted = per_subject.get(s.subject_id, PROMPTS_PER_SUBJECT) if isinstance(per_subject, Mapping) else per_subject
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
            where = f"subject {s.subject_id!r}"
            raise ValueError(f"{where}: the number of prompts must be a whole number >= 0, got {wanted!r}")
        states.append(_Subject(s, wanted))

    ask_calls = requests = 0
    for wave in range(1, max_attempts + 1):
        short = [st for st in states if st.missing > 0]
        if not short:
            break
        batch = [proposal_request(st.subject, ekb, st.missing, [p for p, _ in st.kept], st.rejected) for st in short]
        answers = judge.ask(batch)
        if len(answers) != len(batch):
            raise RuntimeError(f"the judge returned {len(answers)} answers for {len(batch)} requests")
        ask_calls += 1
        requests += len(batch)
        for st, answer in zip(short, answers):
            st.attempts += 1
            _read(st, answer, ekb, wave)

    proposals: list[CharisProposal] = []
    for st in states:
        for prompt, transformations in st.kept:
            subject = st.subject
            proposals.append(
                CharisProposal("", subject.subject_id, subject.type, subject.style, prompt, transformations)
            )
    width = len(str(len(proposals)))
    proposals = [replace(p, prompt_id=f"{PROMPT_ID_PREFIX}{i:0{width}d}") for i, p in enumerate(proposals, start=1)]
    outcomes = tuple(
        SubjectOutcome(
            st.subject.subject_id, st.wanted, len(st.kept), st.attempts, tuple(st.rejected), tuple(st.errors)
        )
        for st in states
    )
    return ProposalReport(judge.model, tuple(proposals), outcomes, max_attempts, ask_calls, requests)


def _read(st: _Subject, answer: JudgeAnswer, ekb: EKB, wave: int) -> None:
    if not answer.ok:
        st.errors.append(f"attempt {wave}: judge: {answer.error}")
        return
    found = answer.value.get("proposals") if isinstance(answer.value, Mapping) else None
    if not isinstance(found, list):
        st.errors.append(f"attempt {wave}: the answer holds no list of proposals")
        return
    for value in found:
        if st.missing <= 0:
            break  # surplus proposals are ignored, not held against the subject
        prompt, transformations, problems = check_proposal(value, st.subject, ekb, [p for p, _ in st.kept])
        if problems:
            st.rejected.append(Rejected(wave, prompt, tuple(a for a, _ in transformations), tuple(problems)))
        else:
            st.kept.append((prompt, transformations))
