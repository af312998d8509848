"""The binding questions asked about a located person (CogCanvas, beyond the paper).

The dataset's binding questions name a place in the row ("the person on the far left"), so a picture
whose persons hold each other's items in the right places passes them. Here the scorer first finds
each identity by its face (``functional/identity.py``), marks that person's box in red on the
generation, and asks the judge two yes/no questions about the marked person: whether it does the
prompt's thing with its *own* item ("yes" expected) and with another person's item ("no" expected).
One request per located person; answers are parsed by the Attr-VQA parser, so the same failures
(missing id, not yes/no, a failed request) are counted the same way.

A set-of-marks prompt (a drawn box naming the region a question is about) is how the field points a
VLM at one instance without cropping away the context the interaction needs.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import ImageDraw

from idbench.benchmarks.cogcanvas.vqa import SYSTEM as VQA_SYSTEM
from idbench.benchmarks.cogcanvas.vqa import VQAQuestion, answer_schema, parse_answers, question_prompt
from idbench.evaluate_pkg.images import normalize_image
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

TASK = "cogcanvas.grounded_binding"
MARK = (255, 0, 0)
MARK_WIDTH = 0.006  # of the image's longer side, at least 3 px: visible after the client's downscale
OWN, OTHER = "own", "other"  # the question ids of a request
SYSTEM = VQA_SYSTEM + " One person in the image is marked with a red box: every question is about that person."


def mark_person(data: bytes, box: Sequence[float]) -> bytes:
    """PNG bytes of the image with ``box`` (x0, y0, x1, y1) outlined in red."""
    image = normalize_image(data, where="grounded binding").copy()
    width = max(3, round(max(image.size) * MARK_WIDTH))
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, y0 = max(0.0, x0), max(0.0, y0)
    x1, y1 = min(image.width - 1.0, x1), min(image.height - 1.0, y1)
    ImageDraw.Draw(image).rectangle((x0, y0, x1, y1), outline=MARK, width=width)
    buffer = io.BytesIO()
    # Lossless at the fastest level: one marked picture per person of every image goes to the judge, and
    # the default level took 0.23 s a picture at 1024 px (35 of 216 s of the grounding tests' scoring).
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def binding_questions(own: str, other: str) -> tuple[VQAQuestion, VQAQuestion]:
    """The two questions about the marked person: ``own`` / ``other`` are what it does with its own
    item and with another person's (``builders.graphs.binding_phrases``)."""
    return (
        VQAQuestion(OWN, "binding", f"Is the person inside the red box {own}?", "yes"),
        VQAQuestion(OTHER, "binding", f"Is the person inside the red box {other}?", "no", negates=OWN),
    )


def binding_request(marked: bytes, own: str, other: str) -> JudgeRequest:
    questions = binding_questions(own, other)
    return JudgeRequest(
        task=TASK,
        prompt=question_prompt(questions),
        schema=answer_schema([q.question_id for q in questions]),
        images=(marked,),
        system=SYSTEM,
    )


@dataclass(frozen=True)
class BindingVerdict:
    own: str | None  # "yes" | "no", None when that answer failed
    other: str | None
    failure: str | None  # why either answer is unusable (one of vqa's FAIL_* codes), None when both are

    def as_dict(self) -> dict[str, Any]:
        return {"own": self.own, "other": self.other, "failure": self.failure}


def read_binding(answer: JudgeAnswer) -> BindingVerdict:
    """The two answers of one request; a failure of either makes the person's verdict a failure."""
    parsed = parse_answers(answer, (OWN, OTHER))
    own, other = parsed[OWN], parsed[OTHER]
    failure = own.failure or other.failure
    return BindingVerdict(own.given, other.given, failure)
