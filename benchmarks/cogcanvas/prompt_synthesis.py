"""CogCanvas prompts written by an MLLM from sampled tuples, then verified (paper 001, section 3.3).

The builder's sampler (:mod:`idbench.benchmarks.cogcanvas.sampling`) decides *what* a prompt holds: who stands
where, which item each person is bound to and through which interaction, which background, which
person-person interactions. Its template text is correct but stiff. The paper instead has an MLLM write
the prompt from the sampled tuple and a second MLLM call verify it: (i) interaction plausibility (does
the item afford the interaction?), (ii) layout feasibility (can N people stand in that scene without
unrealistic overlap?), (iii) scene compatibility (does the background admit the group activity?).
Prompts that fail are produced again until they pass. Here, per prompt:

1. **write**: a writer request (schema ``{prompt}``) from the tuple;
2. **mention check** (no model): the text must name every person slot as ``person A``.. and every bound
   item by its name, and no slot the tuple lacks. A text that fails is rewritten without spending a
   verifier request;
3. **verify**: a verifier request (schema: the three checks above, ``faithful`` (does the text state
   the tuple and nothing contradicting it) and ``reasons``);
4. on a failed check: if a tuple-level check failed (i-iii) and a ``resample`` callback is given, the
   callback may return a new tuple for the same prompt id (the builder re-samples; wording cannot make
   a bicycle wearable) and the prompt is written afresh; otherwise the text is rewritten with the
   reasons fed back to the writer. A verifier request that fails (transport, malformed reply) is
   asked again for the same text in the next wave.

Each prompt gets at most ``max_attempts`` attempts (an attempt is one wave in which it is written,
rewritten or re-verified). A prompt that never passes is given up with the reasons of its last attempt;
the builder then keeps the template text (or drops the prompt) and the outcome says so.

**Waves.** All prompts advance together: each wave makes at most one ``judge.ask`` for the writer
requests of every prompt that needs text, then at most one for the verifier requests of every prompt
whose text passed the mention check. An asynchronous client (``OpenAIJudge``) runs each batch
concurrently, so wall time grows with the number of waves, not of prompts. At most
``2 x max_attempts`` ask calls in all; ``2`` requests per prompt when everything passes at once.

Example::

    tuples = [tuple_from_record(p, refs_by_id) for p in prompts]     # prompts: the sampler's PROMPTS rows
    report = synthesize_prompts(judge, tuples, resample=None, max_attempts=3)
    rows = report.prompt_rows()                                      # PROMPTS rows with the written text
    audit = report.as_dict()                                         # per prompt: attempts, checks, reasons
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idbench.benchmarks.cogcanvas.spec import ITEM_INTERACTIONS, PERSON_INTERACTIONS, SLOTS
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

WRITER_TASK = "curation.cogcanvas.write"
VERIFIER_TASK = "curation.cogcanvas.verify"
# The paper's three checks, all about the tuple itself; "faithful" is about the text.
TUPLE_CHECKS = ("interaction_plausible", "layout_feasible", "scene_compatible")
CHECKS = (*TUPLE_CHECKS, "faithful")
MAX_WORDS = 70  # CLIP reads 77 tokens; CLIP-T is computed on this text

ACCEPTED = "accepted"
GAVE_UP = "gave_up"


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


WRITER_SCHEMA = _closed({"prompt": {"type": "string"}})
VERIFIER_SCHEMA = _closed(
    {**{name: {"type": "boolean"} for name in CHECKS}, "reasons": {"type": "array", "items": {"type": "string"}}}
)

WRITER_SYSTEM = (
    "You write text prompts for an image generator that receives one reference image per person and per "
    "item. Write natural, concrete English. Reply with one JSON object matching the given schema."
)
VERIFIER_SYSTEM = (
    "You review scene specifications and the text prompts written from them before they enter an "
    "image-generation benchmark. Be strict but fair: fail a check only for a concrete problem, and name "
    "it. Reply with one JSON object matching the given schema."
)
_COUNT_WORDS = {1: "one person", 2: "two people", 3: "three people", 4: "four people", 5: "five people"}


# --- the tuple ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PersonSlot:
    """One person of a tuple and what they are bound to."""

    slot: str  # "A".."E"
    person: str  # how the person is described (the reference's name)
    item: str  # the bound item's name, e.g. "the red handbag"
    interaction: str  # an ITEM_INTERACTIONS key
    item_kind: str = "object"  # object | fashion
    item_size: str = ""  # small | medium | large


@dataclass(frozen=True)
class PromptTuple:
    """What one CogCanvas prompt must say: the sampled (background, persons, items, interactions) tuple.

    ``person_edges`` are (source, relation, target) person-person interactions (PERSON_INTERACTIONS
    keys); ``layout`` the slots from left to right. ``record`` is the sampler's PROMPTS row the tuple came
    from (kept so that the accepted text can be put back into it); ``background_image`` (bytes), when
    given, is shown to the verifier so it can judge the scene from the picture.
    """

    prompt_id: str
    persons: tuple[PersonSlot, ...]
    layout: tuple[str, ...]
    background: str
    scene_type: str | None = None
    landmark: str | None = None
    person_edges: tuple[tuple[str, str, str], ...] = ()
    background_image: bytes | None = field(default=None, repr=False)
    record: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    def check(self) -> None:
        """Raise ``ValueError`` naming the prompt when the tuple is malformed (a caller's bug)."""
        where = f"tuple {self.prompt_id!r}"
        slots = [p.slot for p in self.persons]
        if not slots:
            raise ValueError(f"{where}: no persons")
        if len(set(slots)) != len(slots) or not set(slots) <= set(SLOTS):
            raise ValueError(f"{where}: slots {slots} must be distinct letters of {''.join(SLOTS)}")
        if sorted(self.layout) != sorted(slots):
            raise ValueError(f"{where}: layout {list(self.layout)} is not an ordering of the slots {slots}")
        for p in self.persons:
            if p.interaction not in ITEM_INTERACTIONS:
                raise ValueError(f"{where}, person {p.slot}: unknown interaction {p.interaction!r}")
            if not p.item.strip() or not p.person.strip():
                raise ValueError(f"{where}, person {p.slot}: empty person or item name")
        for source, relation, target in self.person_edges:
            if relation not in PERSON_INTERACTIONS or source not in slots or target not in slots:
                raise ValueError(f"{where}: bad person-person interaction ({source}, {relation}, {target})")


def tuple_from_record(
    record: Mapping[str, Any], references: Mapping[str, Mapping[str, Any]], with_background_image: bool = True
) -> PromptTuple:
    """The tuple of a PROMPTS row made by ``sample_cogcanvas``; ``references`` maps ref_id -> reference row
    (``name``, ``scene_type``, ``landmark``, ``image``)."""

    def ref(ref_id: str) -> Mapping[str, Any]:
        try:
            return references[ref_id]
        except KeyError:
            where = f"prompt {record['prompt_id']!r}"
            raise ValueError(f"{where}: reference {ref_id!r} is not among the references") from None

    persons = tuple(
        PersonSlot(
            slot=p["slot"],
            person=str(ref(p["ref_id"])["name"]),
            item=str(ref(p["item_ref_id"])["name"]),
            interaction=p["interaction"],
            item_kind=p.get("item_kind") or "object",
            item_size=p.get("item_size") or "",
        )
        for p in record["persons"]
    )
    background = ref(record["background_ref_id"])
    image = background.get("image")
    data = image.get("bytes") if isinstance(image, Mapping) else image
    edges = tuple(
        (e["source"], e["relation"], e["target"])
        for e in record.get("interaction_graph") or ()
        if e["relation"] in PERSON_INTERACTIONS
    )
    return PromptTuple(
        prompt_id=str(record["prompt_id"]),
        persons=persons,
        layout=tuple(record["layout"]),
        background=str(background["name"]),
        scene_type=background.get("scene_type"),
        landmark=background.get("landmark"),
        person_edges=edges,
        background_image=data if with_background_image and data else None,
        record=record,
    )


# --- the requests -------------------------------------------------------------------------------------------


def describe_tuple(t: PromptTuple) -> str:
    """The tuple as the writer and the verifier read it."""
    scene = t.scene_type or "scene"
    landmark = f", the landmark {t.landmark}" if t.landmark and t.landmark not in t.background else ""
    lines = [f"Background: {t.background} ({scene}{landmark})."]
    people = _COUNT_WORDS.get(len(t.persons), f"{len(t.persons)} people")
    lines.append(f"{people.capitalize()}, each with a reference image:")
    for p in t.persons:
        size = f"{p.item_size} " if p.item_size else ""
        lines.append(
            f"- person {p.slot}: {p.person}; {ITEM_INTERACTIONS[p.interaction].present} {p.item} "
            f"(a {size}{p.item_kind} item with its own reference image)"
        )
    lines.append("From left to right: " + ", ".join(f"person {s}" for s in t.layout) + ".")
    for source, relation, target in t.person_edges:
        lines.append(f"Person {source} and person {target} {PERSON_INTERACTIONS[relation].present}.")
    return "\n".join(lines)


def writer_request(t: PromptTuple, previous: str | None = None, reasons: Sequence[str] = ()) -> JudgeRequest:
    """Ask for the prompt of ``t``; with ``previous`` and ``reasons``, for a corrected version of it."""
    items = "; ".join(f'"{p.item}"' for p in t.persons)
    slots = ", ".join(f'"person {p.slot}"' for p in t.persons)
    text = (
        "Write the text prompt for one image from this scene specification.\n\n"
        f"{describe_tuple(t)}\n\n"
        f"Rules: refer to the people exactly as {slots}; name the items exactly as {items}; state each "
        "person's interaction with their item, the left-to-right order, every interaction between people "
        "and the background; add no other people and no other named objects; write one or two fluent "
        f"sentences of at most {MAX_WORDS} words."
    )
    if previous is not None:
        listed = "\n".join(f"- {r}" for r in reasons) or "- (no reason given)"
        text += (
            f'\n\nYour previous version was:\n"{previous}"\nIt was rejected because:\n{listed}\n'
            "Write a corrected version."
        )
    return JudgeRequest(task=WRITER_TASK, prompt=text, schema=WRITER_SCHEMA, system=WRITER_SYSTEM)


def verifier_request(t: PromptTuple, prompt: str) -> JudgeRequest:
    """Ask whether ``prompt`` and its tuple pass the paper's three checks, and whether the text is faithful."""
    n = len(t.persons)
    picture = "\nThe attached image is the background." if t.background_image else ""
    text = (
        f"Scene specification:\n{describe_tuple(t)}{picture}\n\n"
        f'Prompt written from it:\n"{prompt}"\n\n'
        "Answer:\n"
        "- interaction_plausible: is every person-item interaction one the item affords (a person can hold "
        "a cup or sit on a bench, but cannot wear a bicycle or sit on a handbag)?\n"
        f"- layout_feasible: can all {n} people be placed side by side in the stated order, with their items, "
        "in this background, without unrealistic overlap or impossible positions?\n"
        "- scene_compatible: does this background admit this group activity (people can stand there and "
        "do what the specification asks)?\n"
        "- faithful: does the prompt state the specification (each person with their item and interaction, "
        "the left-to-right order, the interactions between people, the background) and nothing that "
        "contradicts it?\n"
        "- reasons: for each failed check, one short reason naming the person, item or place at fault; an "
        "empty list when every check passes."
    )
    images = (t.background_image,) if t.background_image else ()
    return JudgeRequest(task=VERIFIER_TASK, prompt=text, schema=VERIFIER_SCHEMA, images=images, system=VERIFIER_SYSTEM)


# --- reading answers ------------------------------------------------------------------------------------------


def _strip_article(name: str) -> str:
    return re.sub(r"^(?:the|a|an)\s+", "", " ".join(name.split()), flags=re.IGNORECASE)


def mention_problems(t: PromptTuple, prompt: str) -> list[str]:
    """What the text fails to name (the deterministic check run before any verifier request).

    Every slot must appear as ``person A`` ("person" in any case, the letter upper-case, so the article
    "a" is not taken for a slot); every item by its name without its leading article, case- and
    space-insensitively; no ``person X`` for a slot the tuple lacks.
    """
    problems = []
    flat = " ".join(prompt.split())
    slots = {p.slot for p in t.persons}
    for p in t.persons:
        if not re.search(rf"(?i:\bperson)\s+{p.slot}\b", flat):
            problems.append(f'person {p.slot} is not named as "person {p.slot}"')
        if _strip_article(p.item).casefold() not in flat.casefold():
            problems.append(f'the item of person {p.slot} is not named as "{p.item}"')
    extra = sorted({m for m in re.findall(r"(?i:\bperson)\s+([A-Z])\b", flat)} - slots)
    for slot in extra:
        problems.append(f"mentions person {slot}, who is not in the scene")
    return problems


def parse_written(value: Any) -> str:
    """The prompt text of a writer answer; raises ``ValueError`` when there is none."""
    text = value.get("prompt") if isinstance(value, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the writer's answer holds no prompt text")
    return " ".join(text.split())


def parse_verdict(value: Any) -> dict[str, Any]:
    """The checks and reasons of a verifier answer; a failed check without a reason gets a generic one."""
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, found {type(value).__name__}")
    verdict: dict[str, Any] = {}
    for name in CHECKS:
        if not isinstance(value.get(name), bool):
            raise ValueError(f"{name}: expected true or false, found {value.get(name)!r}")
        verdict[name] = value[name]
    reasons = value.get("reasons")
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise ValueError(f"reasons: expected a list of strings, found {reasons!r}")
    reasons = [" ".join(r.split()) for r in reasons if r.strip()]
    if not reasons and not all(verdict[name] for name in CHECKS):
        reasons = [f"{name} failed (no reason given)" for name in CHECKS if not verdict[name]]
    verdict["reasons"] = reasons
    return verdict


# --- outcomes --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One wave of one prompt: what was done, what came out, why it did not pass.

    ``action`` is ``write`` (from the tuple), ``rewrite`` (with the previous reasons) or ``reverify``
    (the same text, after a failed verifier request). ``next`` is what the failure led to: ``rewrite``,
    ``resample`` or ``reverify`` (None when accepted or when it was the last attempt).
    """

    attempt: int
    action: str
    prompt: str | None = None
    mention_problems: tuple[str, ...] = ()
    verdict: Mapping[str, Any] | None = None
    error: str | None = None
    next: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "action": self.action,
            "prompt": self.prompt,
            "mention_problems": list(self.mention_problems),
            "verdict": dict(self.verdict) if self.verdict is not None else None,
            "error": self.error,
            "next": self.next,
        }


@dataclass(frozen=True)
class SynthesisOutcome:
    """What became of one prompt. ``prompt`` is the accepted text (None when given up); ``tuple`` the final
    tuple (a re-sampled one after a resample); ``reasons`` why the last attempt failed (empty if accepted)."""

    prompt_id: str
    status: str  # "accepted" | "gave_up"
    prompt: str | None
    attempts: int
    resamples: int
    tuple: PromptTuple
    reasons: tuple[str, ...]
    history: tuple[Attempt, ...]

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    @property
    def checks(self) -> dict[str, bool] | None:
        """The last verdict's checks (None when the last text was never verified)."""
        for attempt in reversed(self.history):
            if attempt.verdict is not None:
                return {name: bool(attempt.verdict[name]) for name in CHECKS}
        return None

    def row(self) -> dict[str, Any]:
        """The JSON-ready record stored in the synthesis audit."""
        return {
            "prompt_id": self.prompt_id,
            "status": self.status,
            "prompt": self.prompt,
            "attempts": self.attempts,
            "resamples": self.resamples,
            "checks": self.checks,
            "reasons": list(self.reasons),
            "history": [a.as_dict() for a in self.history],
        }


@dataclass(frozen=True)
class SynthesisReport:
    """Every prompt's outcome (input order), and what was asked of the judge."""

    model: str
    outcomes: tuple[SynthesisOutcome, ...]
    max_attempts: int
    ask_calls: int
    writer_requests: int
    verifier_requests: int

    @property
    def accepted(self) -> list[SynthesisOutcome]:
        return [o for o in self.outcomes if o.accepted]

    @property
    def given_up(self) -> list[SynthesisOutcome]:
        return [o for o in self.outcomes if not o.accepted]

    def prompt_rows(self, on_give_up: str = "template") -> list[dict[str, Any]]:
        """PROMPTS rows: each outcome's final tuple ``record`` with ``prompt`` set to the accepted text.

        A given-up prompt keeps its template text (``on_give_up="template"``) or is left out
        (``"drop"``). Needs every tuple to carry its ``record`` (``tuple_from_record`` sets it; a resample
        callback must too).
        """
        if on_give_up not in ("template", "drop"):
            raise ValueError(f"on_give_up must be 'template' or 'drop', got {on_give_up!r}")
        rows = []
        for o in self.outcomes:
            if o.tuple.record is None:
                raise ValueError(f"prompt {o.prompt_id!r}: its tuple carries no PROMPTS record to write back into")
            if o.accepted:
                rows.append({**o.tuple.record, "prompt": o.prompt})
            elif on_give_up == "template":
                rows.append(dict(o.tuple.record))
        return rows

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready audit: totals, attempts histogram, failed checks, every prompt's record."""
        failed_checks: Counter[str] = Counter()
        for o in self.outcomes:
            for a in o.history:
                if a.verdict is not None:
                    failed_checks.update(name for name in CHECKS if not a.verdict[name])
        return {
            "model": self.model,
            "prompts": len(self.outcomes),
            "accepted": len(self.accepted),
            "gave_up": len(self.given_up),
            "max_attempts": self.max_attempts,
            "attempts_to_accept": dict(sorted(Counter(o.attempts for o in self.accepted).items())),
            "resamples": sum(o.resamples for o in self.outcomes),
            "failed_checks": dict(failed_checks),
            "mention_failures": sum(1 for o in self.outcomes for a in o.history if a.mention_problems),
            "ask_calls": self.ask_calls,
            "writer_requests": self.writer_requests,
            "verifier_requests": self.verifier_requests,
            "rows": [o.row() for o in self.outcomes],
        }


# --- the loop --------------------------------------------------------------------------------------------------

Resample = Callable[[PromptTuple, Sequence[str]], "PromptTuple | None"]


@dataclass
class _State:
    tuple: PromptTuple
    need: str = "write"  # write | rewrite | reverify
    text: str | None = None
    feedback: list[str] = field(default_factory=list)  # the reasons a rewrite is asked to fix
    reasons: list[str] = field(default_factory=list)  # why the latest attempt failed (reported)
    resamples: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False


def synthesize_prompts(
    judge: Judge,
    tuples: Sequence[PromptTuple],
    resample: Resample | None = None,
    max_attempts: int = 3,
) -> SynthesisReport:
    """Write and verify a prompt for every tuple, in waves; see the module docstring for the loop.

    ``resample(tuple, reasons)`` is called when a tuple-level check fails and another attempt is left;
    it returns a replacement tuple with the same ``prompt_id`` (written afresh), or None to rewrite the
    text instead. Raises ``ValueError`` for malformed tuples, duplicate prompt ids, a bound below 1 or a
    replacement with another prompt id.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    ids = [t.prompt_id for t in tuples]
    duplicates = sorted(k for k, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValueError(f"prompt ids appear more than once: {', '.join(duplicates)}")
    for t in tuples:
        t.check()

    states = [_State(t) for t in tuples]
    ask_calls = writer_requests = verifier_requests = 0
    for wave in range(1, max_attempts + 1):
        active = [s for s in states if not s.done]
        if not active:
            break
        last_wave = wave == max_attempts
        for s in active:
            s.history.append({"attempt": wave, "action": s.need})

        writing = [s for s in active if s.need in ("write", "rewrite")]
        if writing:
            requests = [
                writer_request(s.tuple, s.text, s.feedback) if s.need == "rewrite" else writer_request(s.tuple)
                for s in writing
            ]
            answers = _ask(judge, requests)
            ask_calls += 1
            writer_requests += len(requests)
            for s, answer in zip(writing, answers):
                _read_written(s, answer)

        verifying = [s for s in active if s.need in ("verify", "reverify")]
        if verifying:
            answers = _ask(judge, [verifier_request(s.tuple, s.text or "") for s in verifying])
            ask_calls += 1
            verifier_requests += len(verifying)
            for s, answer in zip(verifying, answers):
                _read_verdict(s, answer, resample if not last_wave else None)
        for s in active:
            if not s.done and last_wave:
                s.history[-1]["next"] = None

    outcomes = tuple(_outcome(s) for s in states)
    return SynthesisReport(judge.model, outcomes, max_attempts, ask_calls, writer_requests, verifier_requests)


def _ask(judge: Judge, requests: list[JudgeRequest]) -> list[JudgeAnswer]:
    answers = judge.ask(requests)
    if len(answers) != len(requests):
        raise RuntimeError(f"the judge returned {len(answers)} answers for {len(requests)} requests")
    return answers


def _read_written(s: _State, answer: JudgeAnswer) -> None:
    record = s.history[-1]
    try:
        if not answer.ok:
            raise ValueError(f"writer: {answer.error}")
        text = parse_written(answer.value)
    except ValueError as err:
        # Nothing new was written: next wave asks the same way, with the same feedback.
        record.update(error=str(err), next=s.need)
        s.reasons = [str(err)]
        return
    record["prompt"] = s.text = text
    problems = mention_problems(s.tuple, text)
    if problems:
        record.update(mention_problems=problems, next="rewrite")
        s.need, s.reasons, s.feedback = "rewrite", problems, problems
        return
    s.need = "verify"


def _read_verdict(s: _State, answer: JudgeAnswer, resample: Resample | None) -> None:
    record = s.history[-1]
    record.setdefault("prompt", s.text)
    try:
        if not answer.ok:
            raise ValueError(f"verifier: {answer.error}")
        verdict = parse_verdict(answer.value)
    except ValueError as err:
        # The text was never judged: ask again about the same text rather than rewriting it.
        record.update(error=str(err), next="reverify")
        s.need, s.reasons = "reverify", [str(err)]
        return
    record["verdict"] = verdict
    if all(verdict[name] for name in CHECKS):
        s.done, s.reasons, s.feedback = True, [], []
        return
    s.reasons = s.feedback = list(verdict["reasons"])
    if resample is not None and not all(verdict[name] for name in TUPLE_CHECKS):
        replacement = resample(s.tuple, tuple(s.reasons))
        if replacement is not None:
            if replacement.prompt_id != s.tuple.prompt_id:
                raise ValueError(
                    f"resample returned a tuple for prompt {replacement.prompt_id!r} in place of {s.tuple.prompt_id!r}"
                )
            replacement.check()
            s.tuple, s.text, s.need, s.feedback = replacement, None, "write", []
            s.resamples += 1
            record["next"] = "resample"
            return
    s.need = "rewrite"
    record["next"] = "rewrite"


def _outcome(s: _State) -> SynthesisOutcome:
    history = tuple(
        Attempt(
            attempt=h["attempt"],
            action=h["action"],
            prompt=h.get("prompt"),
            mention_problems=tuple(h.get("mention_problems", ())),
            verdict=h.get("verdict"),
            error=h.get("error"),
            next=h.get("next"),
        )
        for h in s.history
    )
    return SynthesisOutcome(
        prompt_id=s.tuple.prompt_id,
        status=ACCEPTED if s.done else GAVE_UP,
        prompt=s.text if s.done else None,
        attempts=len(s.history),
        resamples=s.resamples,
        tuple=s.tuple,
        reasons=tuple(s.reasons),
        history=history,
    )
