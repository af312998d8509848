"""Attr-VQA and Interaction Graph Consistency (CogCanvas, paper 001): yes/no questions asked of an MLLM.

Every CogCanvas prompt carries yes/no questions written at build time from its interaction and
position graphs (:mod:`idbench.benchmarks.cogcanvas.graphs`), each with its expected answer and a ``kind``:

- ``binding``: is the person at a given place doing the stated thing with the stated object or fashion
  item (and a "no" about another person's item);
- ``interaction``: are two given persons doing the stated person-person interaction (and a "no" about a
  pair that does not interact);
- ``position``: is one person to the left (right) of another.

The paper probes two aspects: *attribute binding* (the binding questions) and *interaction
consistency*, which it defines as realising both the interaction graph and the position graph. Its
Attr-VQA is the accuracy over the **ground-truth statements** (the "yes" facts of the graphs and
bindings), the mean over questions, entities and prompts: an image that shows none of them (a blank
one) scores 0. Here (one table per family, :data:`METRIC_KINDS` and :data:`PAIRED_METRIC_KINDS`):

- ``attr_vqa``: the share of an image's facts (every "yes" question: binding, interaction,
  position) the judge confirms; ``igc``: the same over the interaction and position facts (the
  paper's Interaction Graph Consistency);
- ``attr_vqa.binding`` / ``attr_vqa.interaction`` / ``attr_vqa.position``: per kind, so any other
  reading can be recomputed (the T2I auxiliary task's "Attr-VQA restricted to binding" is
  ``attr_vqa.binding``);
- ``attr_vqa_itt``, ``igc_itt``, ``attr_vqa.binding_itt`` (beyond the paper, named apart; the ranked
  ones): the same facts as ``attr_vqa``, ``igc``, ``attr_vqa.binding``, but a fact whose answer failed
  counts as **not confirmed** (intent to treat), so a judge that fails more often on one model's
  images cannot raise that model's score. The paper's three are shown beside them, never ranked
  (:data:`ITT_METRIC_KINDS`);
- ``attr_vqa_paired`` / ``igc_paired`` (beyond the paper, named apart; intent to treat since suite
  0.6): a fact counts only when the judge says yes to it **and** no to its paired negative (the "no"
  question that ``negates`` it), so a judge that always says yes scores 0, as does one that always
  says no; a fact whose answer or whose negative's failed is not confirmed. Facts without a negative
  (a two-person prompt's interaction) are left out of the paired variants and counted
  (``unpaired_facts`` in the summary);
- ``attr_vqa.negative_yes_rate``: the share of the negatives the judge answered "yes": its yes-bias,
  shown beside the scores (an always-yes judge has 1, a judge answering from the true graph 0);
- ``<metric>.failure_rate``: the share of the questions a metric needs that the judge gave no usable
  answer to.

The paper's metrics (``attr_vqa``, ``igc``, ``attr_vqa.<kind>``) are ``correct / answered``: a question
whose answer failed (the request failed, the id is missing from the answer, answered twice with
different answers, or not answered yes/no) is left out and counted as a judge failure, and an image
with no answered fact of a group gets NaN (undefined, and counted as such by the aggregates). The
intent-to-treat ones (the ``_itt`` twins and the paired variants) are ``correct / asked``: a failed
fact is not confirmed, so an image whose every answer failed scores 0. A per-sample value is the
accuracy over that image's facts; the aggregate engine's mean over samples is then the paper's "mean
accuracy across questions and prompts".

By default one request per generated image carries all of its questions; its JSON schema demands an
``answers`` list with exactly the asked ids (``per_question=True`` asks one question per request
instead: more calls, no interference between questions). Everything here but :func:`score_images` is
pure; :func:`score_images` makes a single ``judge.ask`` call for the whole batch, so the client can
run it concurrently and serve repeats from its cache.

Example::

    items = vqa_items(data.prompt_rows, {pair: image_bytes for pair in pairs})
    run = score_images(judge, items)
    run.results            # list[Result]: attr_vqa, attr_vqa_itt, igc, igc_itt, attr_vqa.<kind>, attr_vqa.failure_rate
    run.summary()          # pooled accuracies, failures by reason, per kind / group size
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idbench.benchmarks.cogcanvas.spec import QUESTION_KINDS
from idbench.evaluate_pkg.context import Result
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

TASK = "cogcanvas.vqa"
ANSWERS = ("yes", "no")

#: metric name -> the question kinds whose facts ("yes" questions) its accuracy is taken over. The
#: paper's Attr-VQA is over every fact; its interaction consistency checks the interaction and the
#: position graphs.
METRIC_KINDS: dict[str, tuple[str, ...]] = {
    "attr_vqa": QUESTION_KINDS,
    "igc": ("interaction", "position"),
    **{f"attr_vqa.{kind}": (kind,) for kind in QUESTION_KINDS},
}
#: The yes-bias-robust variants: a fact counts when confirmed and its negative denied.
PAIRED_METRIC_KINDS: dict[str, tuple[str, ...]] = {
    "attr_vqa_paired": QUESTION_KINDS,
    "igc_paired": ("interaction", "position"),
}
#: The intent-to-treat twins of the paper's metrics: accuracy over every fact asked, a failed answer
#: counted as not confirmed (the paired variants are intent to treat as they are).
ITT_METRIC_KINDS: dict[str, tuple[str, ...]] = {
    "attr_vqa_itt": QUESTION_KINDS,
    "igc_itt": ("interaction", "position"),
    "attr_vqa.binding_itt": ("binding",),
}
FAILURE_RATE = "attr_vqa.failure_rate"
NEGATIVE_YES_RATE = "attr_vqa.negative_yes_rate"
FACT = "yes"  # the expected answer of a ground-truth statement

# Why a question has no usable answer (the keys of the failure summary).
FAIL_JUDGE = "judge_error"  # the request failed: the client's error (transport, parse, schema)
FAIL_MALFORMED = "malformed"  # the value is not {"answers": [...]}
FAIL_MISSING = "missing"  # the answer does not mention the question's id
FAIL_INVALID = "invalid_answer"  # the id is there, the answer is not yes or no
FAIL_CONFLICT = "conflicting"  # the id is answered twice, differently

SYSTEM = (
    "You check a generated image against yes/no questions. Judge only from what the image shows. "
    'Answer each question "yes" or "no"; when the image does not clearly show what a question asks, '
    'answer "no". Reply with JSON matching the given schema, with no other text.'
)


class VQAInputError(ValueError):
    """The items handed to the scorer are unusable (duplicate sample, bad question record)."""


@dataclass(frozen=True)
class VQAQuestion:
    """One yes/no question of a prompt, as built into the dataset (``prompts.questions``)."""

    question_id: str
    kind: str
    question: str
    answer: str  # the expected answer, "yes" | "no"
    negates: str = ""  # a "no" question: the id of the fact ("yes" question) it is the negative of

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str) -> VQAQuestion:
        try:
            question = cls(
                str(record["question_id"]),
                str(record["kind"]),
                str(record["question"]),
                str(record["answer"]),
                str(record.get("negates") or ""),
            )
        except KeyError as err:
            raise VQAInputError(f"{where}: question record lacks {err.args[0]!r}: {dict(record)}") from None
        if question.kind not in QUESTION_KINDS:
            raise VQAInputError(
                f"{where}, {question.question_id}: kind {question.kind!r}, expected one of {QUESTION_KINDS}"
            )
        if question.answer not in ANSWERS:
            raise VQAInputError(f"{where}, {question.question_id}: expected answer {question.answer!r}, not yes/no")
        return question


@dataclass(frozen=True)
class VQAItem:
    """One generated image with the questions of its prompt."""

    prompt_id: str
    seed: int
    image: bytes
    questions: tuple[VQAQuestion, ...]
    n_persons: int

    @property
    def where(self) -> str:
        return f"prompt {self.prompt_id} seed {self.seed}"


@dataclass(frozen=True)
class PlannedRequest:
    """A request to the judge and what it asks: which item, which of its questions."""

    item: int  # index into the items
    question_ids: tuple[str, ...]
    request: JudgeRequest


@dataclass(frozen=True)
class QuestionOutcome:
    """What became of one question for one image."""

    prompt_id: str
    seed: int
    n_persons: int
    question_id: str
    kind: str
    expected: str
    given: str | None  # "yes" | "no", None when failed
    failure: str | None = None  # one of the FAIL_* codes
    detail: str | None = None  # the failure in words, for the logs
    negates: str = ""  # a negative's fact id ("" for a fact)

    @property
    def status(self) -> str:
        """``"correct"``, ``"incorrect"`` or ``"failed"``."""
        if self.given is None:
            return "failed"
        return "correct" if self.given == self.expected else "incorrect"


@dataclass(frozen=True)
class Tally:
    """Counts of question outcomes, and the accuracy and failure rate they give."""

    correct: int = 0
    incorrect: int = 0
    failed: int = 0

    @property
    def answered(self) -> int:
        return self.correct + self.incorrect

    @property
    def asked(self) -> int:
        return self.answered + self.failed

    @property
    def accuracy(self) -> float:
        """correct / answered; NaN when nothing was answered (undefined, not 0)."""
        return self.correct / self.answered if self.answered else math.nan

    @property
    def accuracy_itt(self) -> float:
        """correct / asked: a failed question counted as not correct; NaN when nothing was asked."""
        return self.correct / self.asked if self.asked else math.nan

    @property
    def failure_rate(self) -> float:
        return self.failed / self.asked if self.asked else math.nan

    def as_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "answered": self.answered,
            "correct": self.correct,
            "incorrect": self.incorrect,
            "failed": self.failed,
            "accuracy": _json_float(self.accuracy),
            "failure_rate": _json_float(self.failure_rate),
        }


# --- items ------------------------------------------------------------------------------------------


def vqa_items(prompts: Mapping[str, Mapping[str, Any]], images: Mapping[tuple[str, int], bytes]) -> list[VQAItem]:
    """Items for every generated image: ``prompts`` is prompt_id -> prompt row (with ``questions`` and
    ``n_persons``, e.g. ``BenchmarkData.prompt_rows``), ``images`` is (prompt_id, seed) -> image bytes.

    Items come in the order of ``images``. Raises :class:`VQAInputError` for an image of an unknown
    prompt, a prompt without questions, or a malformed question.
    """
    items = []
    for (prompt_id, seed), image in images.items():
        if prompt_id not in prompts:
            raise VQAInputError(f"image for prompt {prompt_id!r} (seed {seed}): no such prompt in the benchmark")
        row = prompts[prompt_id]
        where = f"prompt {prompt_id}"
        questions = _pair_by_order(tuple(VQAQuestion.from_record(q, where) for q in row.get("questions") or ()))
        items.append(VQAItem(prompt_id, int(seed), image, questions, int(row["n_persons"])))
    check_items(items)
    return items


def _pair_by_order(questions: tuple[VQAQuestion, ...]) -> tuple[VQAQuestion, ...]:
    """Questions of a dataset built before questions version 3 carry no ``negates``: there, each "no"
    question directly follows the fact it negates (:func:`idbench.benchmarks.cogcanvas.graphs.derive_questions`
    has always written them so), which gives the pairing. Questions that name their fact are kept.
    """
    if any(q.negates for q in questions):
        return questions
    paired, fact = [], ""
    for q in questions:
        if q.answer == FACT:
            fact = q.question_id
            paired.append(q)
        else:
            paired.append(VQAQuestion(q.question_id, q.kind, q.question, q.answer, fact))
    return tuple(paired)


def check_items(items: Sequence[VQAItem]) -> None:
    """One (prompt_id, seed) per item, at least one question each, question ids unique per item."""
    seen: set[tuple[str, int]] = set()
    for item in items:
        if (item.prompt_id, item.seed) in seen:
            raise VQAInputError(f"{item.where}: the same image is listed twice")
        seen.add((item.prompt_id, item.seed))
        if not item.questions:
            raise VQAInputError(f"{item.where}: the prompt has no questions (built with an old idbench?)")
        ids = Counter(q.question_id for q in item.questions)
        repeated = sorted(i for i, n in ids.items() if n > 1)
        if repeated:
            raise VQAInputError(f"{item.where}: question ids repeated: {', '.join(repeated)}")
        facts = {q.question_id for q in item.questions if q.answer == FACT}
        for q in item.questions:
            if q.negates and (q.answer == FACT or q.negates not in facts):
                raise VQAInputError(
                    f"{item.where}, {q.question_id}: negates {q.negates!r}, which is not a 'yes' question of the prompt"
                )


# --- requests ---------------------------------------------------------------------------------------


def answer_schema(question_ids: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of an answer to ``question_ids``: ``{"answers": [{question_id, answer}]}``.

    Ids are limited to the asked ones and the list to exactly as many entries, so a constrained
    decoder cannot skip or invent one; uniqueness is checked by :func:`parse_answers`, since a JSON
    schema cannot say "each id once" for a list of objects.
    """
    entry = {
        "type": "object",
        "properties": {
            "question_id": {"type": "string", "enum": list(question_ids)},
            "answer": {"type": "string", "enum": list(ANSWERS)},
        },
        "required": ["question_id", "answer"],
        "additionalProperties": False,
    }
    answers = {"type": "array", "items": entry, "minItems": len(question_ids), "maxItems": len(question_ids)}
    return {
        "type": "object",
        "properties": {"answers": answers},
        "required": ["answers"],
        "additionalProperties": False,
    }


def question_prompt(questions: Sequence[VQAQuestion]) -> str:
    """The request text: the questions, one per line after their ids. Never the expected answers."""
    lines = ["Questions about the image:"]
    lines += [f"- {q.question_id}: {q.question}" for q in questions]
    lines += [
        "",
        'Answer every question: {"answers": [{"question_id": "<id>", "answer": "yes" or "no"}, ...]}, '
        "one entry per id above.",
    ]
    return "\n".join(lines)


def request_for(image: bytes, questions: Sequence[VQAQuestion]) -> JudgeRequest:
    """One request asking ``questions`` about ``image``."""
    if not questions:
        raise ValueError("a VQA request needs at least one question")
    return JudgeRequest(
        task=TASK,
        prompt=question_prompt(questions),
        schema=answer_schema([q.question_id for q in questions]),
        images=(image,),
        system=SYSTEM,
    )


def build_requests(items: Sequence[VQAItem], *, per_question: bool = False) -> list[PlannedRequest]:
    """The requests for ``items``: one per image with all its questions, or one per question."""
    check_items(items)
    planned = []
    for index, item in enumerate(items):
        groups = [(q,) for q in item.questions] if per_question else [item.questions]
        for group in groups:
            planned.append(PlannedRequest(index, tuple(q.question_id for q in group), request_for(item.image, group)))
    return planned


# --- parsing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedAnswer:
    """The judge's answer to one question: ``given`` ("yes"/"no") or why there is none."""

    given: str | None
    failure: str | None = None
    detail: str | None = None


def parse_answers(answer: JudgeAnswer, question_ids: Sequence[str]) -> dict[str, ParsedAnswer]:
    """Read a judge answer for ``question_ids``; every asked id gets a :class:`ParsedAnswer`.

    Lenient only where nothing can be misread: case and surrounding space of "yes"/"no". Entries with
    ids that were not asked are ignored; an asked id that is missing, answered differently twice, or
    answered with anything but yes/no fails on its own, without spoiling the other questions.
    """
    if not answer.ok:
        return {qid: ParsedAnswer(None, FAIL_JUDGE, f"the request failed: {answer.error}") for qid in question_ids}
    value = answer.value
    entries = value.get("answers") if isinstance(value, Mapping) else None
    if not isinstance(entries, list):
        detail = f"expected an object with an 'answers' list, got {_preview(value)}"
        return {qid: ParsedAnswer(None, FAIL_MALFORMED, detail) for qid in question_ids}

    asked = set(question_ids)
    given: dict[str, list[Any]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("question_id") in asked:
            given.setdefault(entry["question_id"], []).append(entry.get("answer"))

    parsed = {}
    for qid in question_ids:
        raw = given.get(qid)
        if not raw:
            parsed[qid] = ParsedAnswer(None, FAIL_MISSING, f"no answer for {qid}")
            continue
        words = [w.strip().lower() if isinstance(w, str) else w for w in raw]
        bad = [w for w in words if w not in ANSWERS]
        if bad:
            shown = _preview(raw[words.index(bad[0])])
            parsed[qid] = ParsedAnswer(None, FAIL_INVALID, f"{qid} answered {shown}, not yes/no")
        elif len(set(words)) > 1:
            parsed[qid] = ParsedAnswer(None, FAIL_CONFLICT, f"{qid} answered both yes and no")
        else:
            parsed[qid] = ParsedAnswer(words[0])
    return parsed


def outcomes_from_answers(
    items: Sequence[VQAItem], planned: Sequence[PlannedRequest], answers: Sequence[JudgeAnswer]
) -> list[QuestionOutcome]:
    """One outcome per question of every item, in item then question order."""
    if len(answers) != len(planned):
        raise ValueError(f"the judge returned {len(answers)} answers for {len(planned)} requests")
    parsed: dict[tuple[int, str], ParsedAnswer] = {}
    for plan, answer in zip(planned, answers):
        for qid, reading in parse_answers(answer, plan.question_ids).items():
            parsed[(plan.item, qid)] = reading
    outcomes = []
    for index, item in enumerate(items):
        for q in item.questions:
            reading = parsed.get((index, q.question_id), ParsedAnswer(None, FAIL_MISSING, "never asked"))
            outcomes.append(
                QuestionOutcome(
                    item.prompt_id,
                    item.seed,
                    item.n_persons,
                    q.question_id,
                    q.kind,
                    q.answer,
                    reading.given,
                    reading.failure,
                    reading.detail,
                    q.negates,
                )
            )
    return outcomes


# --- scoring (pure) ---------------------------------------------------------------------------------


def tally(outcomes: Iterable[QuestionOutcome], kinds: Iterable[str] | None = None) -> Tally:
    """Counts over ``outcomes`` (only those of ``kinds``, when given): every question, facts and negatives."""
    wanted = None if kinds is None else set(kinds)
    counts = Counter(o.status for o in outcomes if wanted is None or o.kind in wanted)
    return Tally(counts["correct"], counts["incorrect"], counts["failed"])


def fact_tally(outcomes: Iterable[QuestionOutcome], kinds: Iterable[str] | None = None) -> Tally:
    """Counts over the facts ("yes" questions) only: the paper's Attr-VQA. A fact is correct when confirmed."""
    return tally((o for o in outcomes if o.expected == FACT), kinds)


def paired_tally(outcomes: Iterable[QuestionOutcome], kinds: Iterable[str] | None = None) -> Tally:
    """Counts over the facts that have a negative: correct when the fact is confirmed and its negative
    denied, failed when either answer failed. Facts without a negative are not counted (see
    :func:`unpaired_facts`). Outcomes must be those of one image (ids are per prompt).
    """
    wanted = None if kinds is None else set(kinds)
    outcomes = [o for o in outcomes if wanted is None or o.kind in wanted]
    negatives: dict[str, list[QuestionOutcome]] = {}
    for o in outcomes:
        if o.expected != FACT and o.negates:
            negatives.setdefault(o.negates, []).append(o)
    correct = incorrect = failed = 0
    for fact in (o for o in outcomes if o.expected == FACT and o.question_id in negatives):
        pair = [fact, *negatives[fact.question_id]]
        if any(o.given is None for o in pair):
            failed += 1
        elif all(o.status == "correct" for o in pair):
            correct += 1
        else:
            incorrect += 1
    return Tally(correct, incorrect, failed)


def unpaired_facts(outcomes: Iterable[QuestionOutcome]) -> int:
    """How many facts no negative refers to (left out of the paired variants)."""
    outcomes = list(outcomes)
    negated = {(o.prompt_id, o.seed, o.negates) for o in outcomes if o.expected != FACT and o.negates}
    return sum(o.expected == FACT and (o.prompt_id, o.seed, o.question_id) not in negated for o in outcomes)


def negative_yes_rate(outcomes: Iterable[QuestionOutcome]) -> float:
    """The share of answered negatives ("no" questions) the judge answered "yes": its yes-bias; NaN if none."""
    answered = [o.given for o in outcomes if o.expected != FACT and o.given is not None]
    return answered.count("yes") / len(answered) if answered else math.nan


def tally_by(
    outcomes: Iterable[QuestionOutcome], key: Callable[[QuestionOutcome], Hashable], kinds: Iterable[str] | None = None
) -> dict[Hashable, Tally]:
    """Counts per group, e.g. ``key=lambda o: o.n_persons`` or ``lambda o: o.prompt_id``; keys sorted."""
    return {k: tally(group, kinds) for k, group in _groups(outcomes, key).items()}


def _questions_of(metric: str, outcomes: Sequence[QuestionOutcome]) -> list[QuestionOutcome]:
    """The questions a metric reads: the facts of its kinds, plus their negatives for a paired metric."""
    if metric in PAIRED_METRIC_KINDS:
        mine = [o for o in outcomes if o.kind in PAIRED_METRIC_KINDS[metric]]
        negated = {o.negates for o in mine if o.expected != FACT and o.negates}
        return [o for o in mine if o.expected != FACT and o.negates or o.question_id in negated]
    return [o for o in outcomes if o.kind in METRIC_KINDS[metric] and o.expected == FACT]


def sample_results(outcomes: Sequence[QuestionOutcome]) -> list[Result]:
    """Per-sample results, shaped like the scoring engine's: per (prompt_id, seed) one row per metric of
    :data:`METRIC_KINDS` (NaN when none of its facts was answered), :data:`ITT_METRIC_KINDS` and
    :data:`PAIRED_METRIC_KINDS` (0 when none was), the failure rate over every question and over each
    paired metric's questions, and the yes-rate on the negatives.

    A metric with no fact of its kinds in the prompt at all (a paired IGC of a two-person prompt has
    only the position facts; the built questions always hold binding and position ones) is left out
    for that sample rather than set to NaN.
    """
    by_sample: dict[tuple[str, int], list[QuestionOutcome]] = {}
    for outcome in outcomes:
        by_sample.setdefault((outcome.prompt_id, outcome.seed), []).append(outcome)
    results = []
    for (prompt_id, seed), group in by_sample.items():
        for metric, kinds in METRIC_KINDS.items():
            counts = fact_tally(group, kinds)
            if counts.asked:
                results.append(Result(prompt_id, seed, metric, float(counts.accuracy)))
        for metric, kinds in ITT_METRIC_KINDS.items():
            counts = fact_tally(group, kinds)
            if counts.asked:
                results.append(Result(prompt_id, seed, metric, float(counts.accuracy_itt)))
        for metric, kinds in PAIRED_METRIC_KINDS.items():  # intent to treat: a failed pair is not confirmed
            counts = paired_tally(group, kinds)
            if counts.asked:
                results.append(Result(prompt_id, seed, metric, float(counts.accuracy_itt)))
                rate = tally(_questions_of(metric, group)).failure_rate
                results.append(Result(prompt_id, seed, f"{metric}.failure_rate", float(rate)))
        results.append(Result(prompt_id, seed, FAILURE_RATE, float(tally(group).failure_rate)))
        results.append(Result(prompt_id, seed, NEGATIVE_YES_RATE, float(negative_yes_rate(group))))
    return results


def _metric_tallies(outcomes: Sequence[QuestionOutcome]) -> dict[str, dict[str, Any]]:
    """Pooled counts of every metric over ``outcomes`` (paired ones image by image, then summed)."""
    tallies = {metric: fact_tally(outcomes, kinds).as_dict() for metric, kinds in METRIC_KINDS.items()}
    for metric, kinds in ITT_METRIC_KINDS.items():  # the same counts; its accuracy is correct / asked
        counts = fact_tally(outcomes, kinds)
        tallies[metric] = {**counts.as_dict(), "accuracy": _json_float(counts.accuracy_itt)}
    for metric, kinds in PAIRED_METRIC_KINDS.items():  # intent to treat: correct / asked
        per_image = [
            paired_tally(group, kinds) for group in _groups(outcomes, lambda o: (o.prompt_id, o.seed)).values()
        ]
        counts = Tally(*(sum(getattr(t, f) for t in per_image) for f in ("correct", "incorrect", "failed")))
        tallies[metric] = {**counts.as_dict(), "accuracy": _json_float(counts.accuracy_itt)}
    return tallies


def summarize(outcomes: Sequence[QuestionOutcome]) -> dict[str, Any]:
    """Pooled counts and accuracies (over all facts of all images, not a mean of per-image values),
    per metric, per kind (every question), per group size, plus judge failures by reason, the
    yes-rate on the negatives and how many facts have no negative.
    """
    failures = Counter(o.failure for o in outcomes if o.failure)
    return {
        "questions": len(outcomes),
        "facts": sum(o.expected == FACT for o in outcomes),
        "unpaired_facts": unpaired_facts(outcomes),
        "images": len({(o.prompt_id, o.seed) for o in outcomes}),
        "metrics": _metric_tallies(outcomes),
        "negative_yes_rate": _json_float(negative_yes_rate(outcomes)),
        "by_kind": {str(k): t.as_dict() for k, t in tally_by(outcomes, lambda o: o.kind).items()},
        "by_n_persons": {
            str(n): _metric_tallies(group) for n, group in _groups(outcomes, lambda o: o.n_persons).items()
        },
        "failures": {
            "count": sum(failures.values()),
            "rate": _json_float(tally(outcomes).failure_rate),
            "by_reason": dict(sorted(failures.items())),
        },
    }


# --- the orchestrator -------------------------------------------------------------------------------


@dataclass
class VQARun:
    """Everything one :func:`score_images` call produced."""

    judge_model: str
    per_question: bool
    outcomes: list[QuestionOutcome]
    answers: list[JudgeAnswer] = field(repr=False)
    results: list[Result] = field(default_factory=list)

    def summary(self, questions_version: int | None = None) -> dict[str, Any]:
        """Pooled scores and failures, the judge and how it was asked (for ``aggregates.json`` notes).

        ``questions_version`` is the built dataset's (``build_info["questions_version"]``): scores over
        different question versions are not comparable, so the summary records it.
        """
        usage = Counter()
        for answer in self.answers:
            usage.update({k: int(v) for k, v in answer.usage.items()})
        return {
            "judge_model": self.judge_model,
            "task": TASK,
            "questions_version": questions_version,
            "requests": len(self.answers),
            "requests_per_image": "one per question" if self.per_question else "one per image",
            "cached": sum(a.cached for a in self.answers),
            "failed_requests": sum(not a.ok for a in self.answers),
            "usage": dict(sorted(usage.items())),
            **summarize(self.outcomes),
        }


def score_images(judge: Judge, items: Sequence[VQAItem], *, per_question: bool = False) -> VQARun:
    """Ask the judge every question of every item in one ``judge.ask`` call and score the answers."""
    planned = build_requests(items, per_question=per_question)
    answers = list(judge.ask([p.request for p in planned])) if planned else []
    outcomes = outcomes_from_answers(items, planned, answers)
    return VQARun(judge.model, per_question, outcomes, answers, sample_results(outcomes))


# --- helpers ----------------------------------------------------------------------------------------


def _groups(
    outcomes: Iterable[QuestionOutcome], key: Callable[[QuestionOutcome], Hashable]
) -> dict[Hashable, list[QuestionOutcome]]:
    """Outcomes grouped by ``key``, keys sorted (numbers before text)."""
    groups: dict[Hashable, list[QuestionOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(key(outcome), []).append(outcome)
    return {k: groups[k] for k in sorted(groups, key=_sort_key)}


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _preview(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sort_key(key: Hashable) -> tuple[int, Any]:
    return (0, key) if isinstance(key, (int, float)) else (1, str(key))
