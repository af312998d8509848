"""Scripted judges for the judge-card tests: a truthful one that looks at the pixels, lenient ones that do not.

The truthful judge decides what a picture shows by comparing it with pictures this file renders
itself from the benchmark (the reference, its mirror image, a uniform grey, the reference with its
centre greyed out, the collage and its mirror image), never by reading the code under test's control
list. Everything else it is shown (a submission's pictures) it answers as the benchmark's ground
truth says (Attr-VQA) or as "another subject" (CHARIS).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from idbench.evaluate_pkg import baselines
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def question_ids(schema: Mapping[str, Any]) -> list[str]:
    return list(schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"])


def reference_cell(prompt: str) -> tuple[str, str]:
    found = re.search(r'is of type "([a-z_]+)" in "([a-z_0-9]+)" style', prompt)
    assert found
    return found.group(1), found.group(2)


def look(reference: np.ndarray, generation: np.ndarray) -> str:
    """What the generation is, next to the reference: same, mirror, blank, occluded or other."""
    if generation.std() < 1:
        return "blank"
    if generation.shape == reference.shape:
        if np.array_equal(generation, reference):
            return "same"
        if np.array_equal(generation, reference[:, ::-1]):
            return "mirror"
        h, w = generation.shape[:2]
        centre = generation[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4]
        if (centre == 128).all() and np.array_equal(generation[:2], reference[:2]):
            return "occluded"
    return "other"


def charis_value(request: JudgeRequest, seen: str) -> Any:
    props = request.schema["properties"]
    if "rating" in props:
        return {"reasoning": seen, "rating": {"same": 4, "mirror": 4, "other": 1, "blank": 0, "occluded": 1}[seen]}
    type_, style = reference_cell(request.prompt)
    if "attributes" in props:
        names = props["attributes"]["properties"]
        return {
            "generated_type": "other" if seen == "blank" else type_,
            "generated_style": "other" if seen == "blank" else style,
            "attributes": {n: {"in_reference": True, "in_generated": seen not in ("blank", "occluded")} for n in names},
        }
    changed = seen == "other"
    return {
        "features": {
            n: {
                "observation": seen,
                "in_reference": True,
                "in_generated": True,
                "changed": changed,
                "transformations": [],
                "harmful_changes": ["shape"] if changed else [],
            }
            for n in props["features"]["properties"]
        }
    }


class TruthfulJudge:
    """Answers from what the pictures show (see the module docstring)."""

    def __init__(self, data: Any = None, model: str = "scripted-truthful"):
        self.model, self.data = model, data
        self.truth: dict[str, str] = {}
        self.kind: dict[str, str] = {}
        if data is not None and data.name == "cogcanvas":
            for row in data.prompt_rows.values():
                for q in row["questions"]:
                    self.truth[q["question_id"]], self.kind[q["question_id"]] = q["answer"], q["kind"]
        self._collages: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _vqa(self, request: JudgeRequest) -> dict:
        ids = question_ids(request.schema)
        image = pixels(request.images[0])
        prompt_id = ids[0].rsplit("-q", 1)[0]
        seen = "other"
        if image.std() < 1:
            seen = "blank"
        elif image.shape[:2] == (512, 512):
            if prompt_id not in self._collages:
                picture = baselines.collage(self.data, self.data.prompt_rows[prompt_id], 512)
                self._collages[prompt_id] = (
                    pixels(baselines._png(picture)),
                    pixels(baselines._png(ImageOps.mirror(picture))),
                )
            collage, mirror = self._collages[prompt_id]
            seen = (
                "collage" if np.array_equal(image, collage) else "mirror" if np.array_equal(image, mirror) else "other"
            )

        def say(q: str) -> str:
            if seen == "blank":
                return "no"
            if seen == "mirror" and self.kind[q] == "position":
                return "no" if self.truth[q] == "yes" else "yes"
            return self.truth[q]

        return {"answers": [{"question_id": q, "answer": say(q)} for q in ids]}

    def answer(self, request: JudgeRequest) -> JudgeAnswer:
        if "answers" in request.schema.get("properties", {}):
            return JudgeAnswer(value=self._vqa(request), raw="{}")
        seen = look(pixels(request.images[0]), pixels(request.images[1]))
        return JudgeAnswer(value=charis_value(request, seen), raw="{}")

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        return [self.answer(r) for r in requests]


class LenientJudge:
    """Never looks: "yes" to every question; CHARIS: everything visible, nothing changed; rating 4."""

    def __init__(self, model: str = "scripted-lenient"):
        self.model = model

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        out = []
        for request in requests:
            props = request.schema["properties"]
            if "answers" in props:
                value = {"answers": [{"question_id": q, "answer": "yes"} for q in question_ids(request.schema)]}
            else:
                seen = "same"
                value = charis_value(request, seen)
            out.append(JudgeAnswer(value=value, raw="{}"))
        return out


class CountingJudge:
    """Passes every batch on to ``judge`` and counts the requests."""

    def __init__(self, judge: Any):
        self.judge, self.model, self.requests = judge, judge.model, 0

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.requests += len(requests)
        return self.judge.ask(requests)
