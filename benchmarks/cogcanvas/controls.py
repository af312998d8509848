"""The judge's control questions on CogCanvas: Attr-VQA questions whose answer the picture settles.

Attr-VQA controls (through :func:`idbench.benchmarks.cogcanvas.vqa.score_images`): only the
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

Which prompts: :data:`~idbench.evaluate_pkg.judge.controls.K` of them, the first by id of each group size,
then the next by id (:func:`control_prompts`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PIL import ImageOps

from idbench.benchmarks.cogcanvas.vqa import VQAItem, VQAQuestion, score_images
from idbench.evaluate_pkg import baselines
from idbench.evaluate_pkg.judge.controls import CONTROL_SIZE, K, Outcome, png_bytes
from idbench.evaluate_pkg.judge.types import Judge

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
                out.append((kind, VQAItem(prompt_id, seed, png_bytes(picture), tuple(asked), int(row["n_persons"]))))
    return out


class CogCanvasControls:
    """The VQA controls, asked when the run computes a metric their questions calibrate."""

    def checks(self, metrics: set[str]) -> list[str]:
        return [VQA_CHECK] if metrics & VQA_CHECK_METRICS else []

    def outcomes(self, data: Any, judge: Judge, checks: list[str], k: int = K) -> list[Outcome]:
        controls = vqa_controls(data, k)
        result = score_images(judge, [item for _, item in controls])
        # Outcomes come item by item, in item order, each item's questions in order.
        flat = [(kind, item.prompt_id) for kind, item in controls for _ in item.questions]
        assert len(flat) == len(result.outcomes)
        return [
            Outcome(
                VQA_CHECK,
                kind,
                prompt_id,
                o.expected,
                o.given,
                o.status == "correct",
                None if o.given is None else o.given == "yes",
                o.expected == "yes",
                o.detail,
            )
            for (kind, prompt_id), o in zip(flat, result.outcomes)
        ]


CONTROLS = CogCanvasControls()
