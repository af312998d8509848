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


def charis_answer(request: JudgeRequest, *, visible: bool, changed: bool, hide_levels: frozenset[str] = frozenset()) -> Any:
    """A CHARIS answer with every boolean set by rule; the generated type and style are the reference's
    (the judge does not dispute what kind of subject it sees, so only the yes/no questions vary).

    ``visible``: every attribute and feature is visible in both images; ``changed``: every feature
    changed, with no transformation to explain it; ``hide_levels``: features of these importance
    levels are out of view in the generation (a back view hides the face).
    """
    from idbench.ekb import load_ekb

    props = request.schema["properties"]
    if "attributes" in props:  # stage 1
        type_, style = _reference_cell(request)
        names = props["attributes"]["properties"]
        return {
            "generated_type": type_,
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

    - always-yes: "yes" to every question; CHARIS: everything visible, everything changed.
    - always-no: "no" to every question; CHARIS: nothing visible in either image.
    - truth: the ground-truth answer of the graph; CHARIS: everything visible, nothing changed (true
      of an exact copy of the reference).
    - back-view (CHARIS only): the decisive and core features out of view, the rest unchanged.
    """
    return {
        "always-yes": RuleJudge("always-yes", lambda q: "yes", lambda r: charis_answer(r, visible=True, changed=True)),
        "always-no": RuleJudge("always-no", lambda q: "no", lambda r: charis_answer(r, visible=False, changed=False)),
        "truth": RuleJudge("truth", lambda q: truth[q], lambda r: charis_answer(r, visible=True, changed=False)),
        "back-view": RuleJudge(
            "back-view", lambda q: "no",
            lambda r: charis_answer(r, visible=True, changed=False, hide_levels=frozenset({"decisive", "core"})),
        ),
    }
