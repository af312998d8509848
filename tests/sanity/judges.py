"""Scripted judges for the sanity battery: each answers every request by a fixed rule, never by looking.

They read what a request asks from its JSON schema (the question ids of Attr-VQA, the attributes and
features of CHARIS), so they answer any prompt of any build. ``model`` and ``ask`` are the Judge
protocol (idbench.evaluate_pkg.judge.types); the runner takes such an object as ``ScoreOptions.judge``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest


def _question_ids(schema: Mapping[str, Any]) -> list[str]:
    return list(schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"])


class RuleJudge:
    """Answers Attr-VQA questions with ``vqa(question_id)`` ("yes"/"no") and CHARIS requests with
    ``charis(request)`` (the answer's JSON value)."""

    def __init__(self, name: str, vqa: Callable[[str], str], charis: Callable[[JudgeRequest], Any] | None = None):
        # ``charis`` answers every CHARIS request: stage 1, stage 2 and the adherence request
        # (charis.adherence, told apart by its schema's "transformations" key).
        self.model = f"scripted-{name}"
        self.vqa, self.charis = vqa, charis

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        out = []
        for request in requests:
            if "answers" in request.schema.get("properties", {}):
                value = {"answers": [{"question_id": q, "answer": self.vqa(q)} for q in _question_ids(request.schema)]}
            else:
                value = self.charis(request)
            out.append(JudgeAnswer(value=value, raw="{}"))
        return out


# --- CHARIS answers ----------------------------------------------------------------------------------


def _reference_cell(request: JudgeRequest) -> tuple[str, str]:
    """The reference's (type, style), which every CHARIS prompt states in its first line."""
    import re

    found = re.search(r'is of type "([a-z_]+)" in "([a-z_0-9]+)" style', request.prompt)
    assert found, "a CHARIS prompt names the reference's type and style"
    return found.group(1), found.group(2)


def prompt_of(request: JudgeRequest) -> str:
    """The generation prompt a CHARIS request quotes (stages 1, 2 and adherence all quote it)."""
    import re

    found = re.search(r'generated from (?:image 1 and )?this prompt: "(.*)"', request.prompt)
    assert found, "a CHARIS request quotes the generation prompt"
    return found.group(1)


def adherence_answer(request: JudgeRequest, realised: bool | Callable[[str], bool]) -> Any:
    """An answer to the charis.adherence request: each prompted axis realised or not, by rule."""
    axes = request.schema["properties"]["transformations"]["properties"]
    rule = realised if callable(realised) else (lambda axis: realised)
    return {"transformations": {axis: {"observation": "scripted", "realised": bool(rule(axis))} for axis in axes}}


def is_adherence(request: JudgeRequest) -> bool:
    return "transformations" in request.schema.get("properties", {})


def charis_answer(
    request: JudgeRequest,
    *,
    visible: bool,
    changed: bool,
    hide_levels: frozenset[str] = frozenset(),
    realised: bool = False,
    generated_type: str | None = None,
) -> Any:
    """A CHARIS answer with every boolean set by rule; the generated type and style are the reference's
    unless ``generated_type`` is given (only the yes/no questions vary otherwise).

    ``visible``: every attribute and feature is visible in both images; ``changed``: every feature
    changed, with no transformation to explain it; ``hide_levels``: features of these importance
    levels are out of view in the generation (a back view hides the face); ``realised``: the
    adherence request's answer for every prompted transformation.
    """
    from idbench.ekb import load_ekb

    props = request.schema["properties"]
    if is_adherence(request):
        return adherence_answer(request, realised)
    if "attributes" in props:  # stage 1
        type_, style = _reference_cell(request)
        names = props["attributes"]["properties"]
        return {
            "generated_type": generated_type or type_,
            "generated_style": style,
            "attributes": {name: {"in_reference": visible, "in_generated": visible} for name in names},
        }
    ekb = load_ekb()
    return {
        "features": {
            name: {
                "observation": "scripted",
                "in_reference": visible,
                "in_generated": visible and ekb.level_of(name) not in hide_levels,
                "changed": changed,
                "transformations": [],
                "harmful_changes": [],
            }
            for name in props["features"]["properties"]
        }
    }


def judges(truth: Mapping[str, str]) -> dict[str, RuleJudge]:
    """The battery's judges; ``truth`` maps every Attr-VQA question id to its ground-truth answer.

    - always-yes: "yes" to every question; CHARIS: everything visible, everything changed, every
      prompted transformation realised.
    - always-no: "no" to every question; CHARIS: nothing visible in either image, nothing realised.
    - truth: the ground-truth answer of the graph; CHARIS: everything visible, nothing changed,
      nothing realised (true of an exact copy of the reference).
    - back-view (CHARIS only): the decisive and core features out of view, the rest unchanged, every
      transformation realised.
    """
    return {
        "always-yes": RuleJudge(
            "always-yes", lambda q: "yes", lambda r: charis_answer(r, visible=True, changed=True, realised=True)
        ),
        "always-no": RuleJudge("always-no", lambda q: "no", lambda r: charis_answer(r, visible=False, changed=False)),
        "truth": RuleJudge("truth", lambda q: truth[q], lambda r: charis_answer(r, visible=True, changed=False)),
        "back-view": RuleJudge(
            "back-view",
            lambda q: "no",
            lambda r: charis_answer(
                r, visible=True, changed=False, hide_levels=frozenset({"decisive", "core"}), realised=True
            ),
        ),
    }


# --- a truthful CHARIS judge that knows what each picture is -----------------------------------------


def _pixels(data: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def follow_prompt(reference: bytes, index: int) -> bytes:
    """A "follows the prompt, keeps identity" picture, as PNG: a new picture of the subject, not a copy of
    its reference. The baselines' flat figure in the reference's colours (evaluate_pkg/baselines.py,
    ``figure``), in a pose and scale fixed by ``index``, on a grey canvas: no pixel of the reference is
    in it, so the copy check does not flag it. Stands in for a model that applies the requested
    changes; the scripted judges below say what a judge would of such a picture. ``index`` picks one of
    three poses."""
    import io
    import random

    from PIL import Image

    from idbench.evaluate_pkg.baselines import figure

    image = Image.open(io.BytesIO(reference)).convert("RGB")
    canvas = Image.new("RGB", (256, 256), (128, 128, 128))
    box = (48, 32, 208, 240)
    drawn = figure(image, box, random.Random(index % 3))  # three poses, as the judge below tries
    canvas.paste(drawn.convert("RGB"), box[:2], drawn)
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


class PixelJudge:
    """A truthful stand-in judge for CHARIS: it compares image 2 with image 1 pixel by pixel.

    - image 2 uniform (a blank canvas): no subject (type ``other``), nothing realised;
    - image 2 the reference's own pixels (a copy): identity exact, no transformation realised;
    - image 2 one of :func:`follow_prompt`'s pictures of the reference: identity exact, every prompted
      transformation realised;
    - anything else (another subject): every feature visible and changed, nothing realised.

    ``fail``: a predicate on the prompt text; requests of those prompts get an error answer (a judge
    that gives up on hard images).
    """

    def __init__(self, name: str = "pixel-truth", fail: Callable[[str], bool] | None = None):
        self.model = f"scripted-{name}"
        self.fail = fail

    def kind(self, request: JudgeRequest) -> str:
        import numpy as np

        reference, generation = request.images
        gen = _pixels(generation)
        if gen.min() == gen.max():
            return "blank"
        ref = _pixels(reference)
        if gen.shape == ref.shape and np.array_equal(gen, ref):
            return "copy"
        for index in range(3):
            moved = _pixels(follow_prompt(reference, index))
            if moved.shape == gen.shape and np.array_equal(moved, gen):
                return "follows"
        return "other"

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        out = []
        for request in requests:
            if self.fail is not None and self.fail(prompt_of(request)):
                out.append(JudgeAnswer(error="scripted failure after 5 attempts", attempts=5))
                continue
            kind = self.kind(request)
            if kind == "blank":
                value = charis_answer(request, visible=False, changed=False, generated_type="other")
            else:
                value = charis_answer(request, visible=True, changed=kind == "other", realised=kind == "follows")
            out.append(JudgeAnswer(value=value, raw="{}"))
        return out
