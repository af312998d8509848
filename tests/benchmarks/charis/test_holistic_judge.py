"""The holistic (DreamBench++-style) baseline judge over a scripted judge: one request, rating / 4."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from idbench.benchmarks.charis.holistic import (
    HOLISTIC_TASK,
    RUBRIC,
    SCHEMA,
    evaluate_holistic,
    holistic_request,
    summarize_holistic,
)
from idbench.benchmarks.charis.judge import CharisPair
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def make_pair(name: str) -> CharisPair:
    return CharisPair(
        prompt_id=name,
        seed=1,
        type="human",
        style="cartoon",
        axes=("pose",),
        reference=f"ref:{name}".encode(),
        generation=f"gen:{name}".encode(),
        prompt=f"[{name}] A woman jumps.",
    )


class ScriptedJudge:
    """Answers each pair (named in brackets in the prompt) with a scripted value, or an error."""

    model = "scripted"

    def __init__(self, answers: Mapping[str, Any]):
        self.answers = answers
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        out = []
        for request in requests:
            assert request.task == HOLISTIC_TASK
            name = re.search(r"\[([^\]]+)\]", request.prompt).group(1)
            assert request.images == (f"ref:{name}".encode(), f"gen:{name}".encode())
            answer = self.answers[name]
            if "error" in answer:
                out.append(JudgeAnswer(error=answer["error"]))
            else:
                out.append(JudgeAnswer(value=answer, raw=json.dumps(answer)))
        return out


def test_ratings_become_scores_and_failures_stay_unscored():
    judge = ScriptedJudge(
        {
            "four": {"reasoning": "same face and hair", "rating": 4},
            "three": {"reasoning": "earring missing", "rating": 3},
            "zero": {"reasoning": "another person", "rating": 0},
            "timeout": {"error": "timed out"},
            "too high": {"reasoning": "", "rating": 5},
            "fraction": {"reasoning": "", "rating": 2.5},
            "bool": {"reasoning": "", "rating": True},
            "extra key": {"reasoning": "", "rating": 2, "confidence": 0.9},
            "text": {"reasoning": "", "rating": "3"},
        }
    )
    names = list(judge.answers)
    verdicts = evaluate_holistic(judge, [make_pair(n) for n in names])
    assert len(judge.calls) == 1 and len(judge.calls[0]) == len(names)  # one batch
    by_name = {v.prompt_id: v for v in verdicts}
    assert [by_name[n].score for n in ("four", "three", "zero")] == [1.0, 0.75, 0.0]  # 4/4, 3/4, 0/4
    assert by_name["three"].reasoning == "earring missing"
    for name in names[3:]:
        assert by_name[name].rating is None and by_name[name].score is None
        assert by_name[name].failure.startswith(HOLISTIC_TASK)

    summary = summarize_holistic(verdicts)
    assert summary["mean_score"] == pytest.approx((1 + 0.75 + 0) / 3)  # failures left out, not counted as 0
    assert summary["failure_rate"] == pytest.approx(6 / 9)
    assert summary["ratings"] == {4: 1, 3: 1, 2: 0, 1: 0, 0: 1}


def test_the_request_carries_the_rubric_and_a_strict_schema():
    request = holistic_request(make_pair("p"))
    for rating, text in RUBRIC.items():
        assert f"- {rating}: {text}" in request.prompt
    assert '"[p] A woman jumps."' in request.prompt
    assert SCHEMA["required"] == list(SCHEMA["properties"]) and SCHEMA["additionalProperties"] is False
    assert list(SCHEMA["properties"]) == ["reasoning", "rating"]  # reasoning before the rating
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate({"reasoning": "ok", "rating": 2}, SCHEMA)


def test_no_pairs_asks_nothing():
    judge = ScriptedJudge({})
    assert evaluate_holistic(judge, []) == []
    assert judge.calls == []
    assert summarize_holistic([])["mean_score"] is None
