"""A holistic identity judge, DreamBench++ style: one question per pair, a 0-4 rating, score = rating / 4.

It is the baseline the CHARIS evaluator (:mod:`idbench.benchmarks.charis.judge`) is compared against: the
paper's point is that such a single, coarse question misses fine identity changes, so keeping it runnable
on the same pairs, through the same judge and the same failure handling, makes that claim checkable.

One request per pair, all pairs in one ``judge.ask`` batch. A failed or schema-breaking answer gives no
rating (``None``) and counts as a judge failure; it is never read as a rating. The CHARIS metric
``holistic_score`` scores it 0, the lowest rating (intent to treat, suite 0.4: a judge failing on the
hard pairs cannot lift it), and counts it in ``holistic_score.failure_rate``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from idbench.benchmarks.charis.judge import AnswerError, answer_object
from idbench.evaluate_pkg.judge.types import Judge, JudgeAnswer, JudgeRequest

HOLISTIC_TASK = "holistic.identity"
MAX_RATING = 4

# Our own rubric, best first. It names what may differ (what the prompt asked for) so the judge does not
# mark down a requested change, and ties each step to a concrete kind of difference.
RUBRIC: dict[int, str] = {
    4: "The same subject: every identity-defining detail (face or head, eyes, colours, markings, shape, "
    "proportions, distinctive items) matches; what differs is only what the prompt asked for (pose, "
    "expression, viewpoint, occlusion, lighting, setting, rendering style).",
    3: "Clearly the same subject, with one or two small deviations in minor details (a shade of a garment, "
    "a missing small accessory, a slightly different hairstyle).",
    2: "Recognisably based on the subject, but some identity-defining features differ (hair or coat "
    "colour, markings, face shape, body proportions).",
    1: "Only a loose resemblance: the same kind of subject, but most of its defining features differ.",
    0: "A different subject or another kind of thing (another person, species or object), or no subject.",
}

SYSTEM_PROMPT = (
    "You judge whether a generated image preserves the identity of the subject of a reference image. "
    "You look only at the subject, not the scene, and answer with JSON that matches the given schema, "
    "with no other text."
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # Reasoning first: the rating is written after the judge has put the differences into words.
        "reasoning": {"type": "string"},
        "rating": {"type": "integer", "enum": list(range(MAX_RATING + 1))},
    },
    "required": ["reasoning", "rating"],
    "additionalProperties": False,
}


class ImagePair(Protocol):
    """What the holistic judge needs of a pair; :class:`idbench.benchmarks.charis.judge.CharisPair` has it."""

    prompt_id: str
    seed: int
    reference: bytes
    generation: bytes
    prompt: str


def holistic_request(pair: ImagePair) -> JudgeRequest:
    """The single question for a pair: images in order reference, generation."""
    asked = f'It was generated from this prompt: "{pair.prompt}"' if pair.prompt else "It was generated from a prompt."
    lines = [
        "Image 1 is the reference: it shows a subject as it really is. Image 2 was generated to show the "
        f"same subject. {asked}",
        "Does image 2 preserve the identity of the subject of image 1? Changes the prompt asked for are "
        "expected and do not count against identity; differences in the subject itself do.",
        "Rate it on this scale:",
        *(f"- {rating}: {text}" for rating, text in RUBRIC.items()),
        "Answer with reasoning (the differences you see in the subject, in a few sentences) and rating.",
    ]
    return JudgeRequest(
        task=HOLISTIC_TASK,
        prompt="\n".join(lines),
        schema=SCHEMA,
        images=(pair.reference, pair.generation),
        system=SYSTEM_PROMPT,
    )


@dataclass(frozen=True)
class HolisticRating:
    rating: int
    reasoning: str

    @property
    def score(self) -> float:
        return self.rating / MAX_RATING


def parse_holistic(answer: JudgeAnswer) -> HolisticRating:
    """Check an answer against :data:`SCHEMA` and read it; :class:`AnswerError` if it breaks it."""
    value = answer_object(answer)
    if set(value) != {"reasoning", "rating"}:
        raise AnswerError(f"expected exactly the keys reasoning and rating, got {sorted(value)}")
    rating, reasoning = value["rating"], value["reasoning"]
    # bool is an int in Python; true is not a rating.
    if isinstance(rating, bool) or not isinstance(rating, int) or not 0 <= rating <= MAX_RATING:
        raise AnswerError(f"rating: expected an integer from 0 to {MAX_RATING}, got {rating!r}")
    if not isinstance(reasoning, str):
        raise AnswerError(f"reasoning: expected a string, got {reasoning!r}")
    return HolisticRating(rating, reasoning)


@dataclass(frozen=True)
class HolisticVerdict:
    """The holistic judgement of one (prompt, seed): a rating and score, or a failure and its reason."""

    prompt_id: str
    seed: int
    rating: int | None
    score: float | None
    reasoning: str
    failure: str | None
    requests: int = 1


def evaluate_holistic(judge: Judge, pairs: Sequence[ImagePair]) -> list[HolisticVerdict]:
    """One verdict per pair, in order, from one ``judge.ask`` batch."""
    pairs = list(pairs)
    if not pairs:
        return []
    requests = [holistic_request(pair) for pair in pairs]
    answers = list(judge.ask(requests))
    if len(answers) != len(requests):
        raise RuntimeError(f"judge {judge.model!r} gave {len(answers)} answers to {len(requests)} requests")
    verdicts = []
    for pair, answer in zip(pairs, answers):
        try:
            parsed = parse_holistic(answer)
        except AnswerError as err:
            verdicts.append(HolisticVerdict(pair.prompt_id, pair.seed, None, None, "", f"{HOLISTIC_TASK}: {err}"))
            continue
        verdicts.append(HolisticVerdict(pair.prompt_id, pair.seed, parsed.rating, parsed.score, parsed.reasoning, None))
    return verdicts


def summarize_holistic(verdicts: Sequence[HolisticVerdict]) -> dict[str, Any]:
    """Rating counts, mean score over the rated pairs (None if none) and the judge-failure rate."""
    rated = [v for v in verdicts if v.rating is not None]
    counts = Counter(v.rating for v in rated)
    return {
        "pairs": len(verdicts),
        "judged": len(rated),
        "failures": len(verdicts) - len(rated),
        "failure_rate": (len(verdicts) - len(rated)) / len(verdicts) if verdicts else 0.0,
        "ratings": {r: counts.get(r, 0) for r in range(MAX_RATING, -1, -1)},
        "mean_score": sum(v.score for v in rated if v.score is not None) / len(rated) if rated else None,
    }
