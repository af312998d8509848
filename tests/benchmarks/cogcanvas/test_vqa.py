"""Attr-VQA / IGC (benchmarks/cogcanvas/vqa.py) against a scripted in-process judge; every number by hand."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jsonschema
import pytest

from idbench.benchmarks.cogcanvas import vqa
from idbench.benchmarks.cogcanvas.graphs import derive_questions, edge, interaction_graph, position_graph
from idbench.evaluate_pkg.context import Result
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

IMAGE_1 = b"\x89PNG fake image one"
IMAGE_2 = b"\x89PNG fake image two"


class ScriptedJudge:
    """A judge that answers from a script: (request) -> JudgeAnswer; records every ask() call."""

    model = "scripted-judge"

    def __init__(self, script: Callable[[JudgeRequest], JudgeAnswer]):
        self.script = script
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        return [self.script(r) for r in requests]


def asked_ids(request: JudgeRequest) -> list[str]:
    return list(request.schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"])


def answer(pairs: dict[str, str] | list[tuple[str, str]]) -> JudgeAnswer:
    items = pairs.items() if isinstance(pairs, dict) else pairs
    return JudgeAnswer(value={"answers": [{"question_id": q, "answer": a} for q, a in items]}, raw="{}")


def q(qid: str, kind: str, expected: str, negates: str = "") -> vqa.VQAQuestion:
    return vqa.VQAQuestion(qid, kind, f"Question {qid}?", expected, negates)


# Two persons (p1) and three persons (p2); each fact ("yes") is followed by the negative ("no") that
# names it, except p1's interaction fact, which has none (a two-person prompt has no free pair).
P1 = vqa.VQAItem(
    "p1",
    0,
    IMAGE_1,
    (
        q("p1-q01", "binding", "yes"),
        q("p1-q02", "binding", "no", "p1-q01"),
        q("p1-q03", "binding", "yes"),
        q("p1-q04", "binding", "no", "p1-q03"),
        q("p1-q05", "interaction", "yes"),
        q("p1-q06", "position", "yes"),
        q("p1-q07", "position", "no", "p1-q06"),
    ),
    n_persons=2,
)
P2 = vqa.VQAItem(
    "p2",
    0,
    IMAGE_2,
    (
        q("p2-q01", "binding", "yes"),
        q("p2-q02", "binding", "no", "p2-q01"),
        q("p2-q03", "interaction", "yes"),
        q("p2-q04", "interaction", "no", "p2-q03"),
        q("p2-q05", "position", "yes"),
        q("p2-q06", "position", "no", "p2-q05"),
    ),
    n_persons=3,
)

# What the judge says. p1: q01 right, q02 wrong, q03 right, q04 missing, q05 right, q06 "Yes " (right,
# case and space forgiven), q07 "maybe" (invalid). p2: the whole request fails except in
# test_failed_request; in the main script p2 answers q01 right, q02 right, q03 wrong, q04 right,
# q05 wrong, q06 answered twice with yes and no (conflict).
P1_SAYS = [
    ("p1-q01", "yes"),
    ("p1-q02", "yes"),
    ("p1-q03", "yes"),
    ("p1-q05", "yes"),
    ("p1-q06", "Yes "),
    ("p1-q07", "maybe"),
]
P2_SAYS = [
    ("p2-q01", "yes"),
    ("p2-q02", "no"),
    ("p2-q03", "no"),
    ("p2-q04", "no"),
    ("p2-q05", "no"),
    ("p2-q06", "yes"),
    ("p2-q06", "no"),
]


def by_image(request: JudgeRequest) -> JudgeAnswer:
    said = P1_SAYS if request.images == (IMAGE_1,) else P2_SAYS
    wanted = set(asked_ids(request))
    return answer([(qid, a) for qid, a in said if qid in wanted])


def values(results: list[Result]) -> dict[tuple[str, str], float]:
    return {(r.prompt_id, r.metric): r.value for r in results}


def test_one_request_per_image_in_one_ask_call():
    judge = ScriptedJudge(by_image)
    run = vqa.score_images(judge, [P1, P2])
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 2
    first = judge.calls[0][0]
    assert first.task == vqa.TASK and first.images == (IMAGE_1,)
    assert asked_ids(first) == [x.question_id for x in P1.questions]
    assert len(run.answers) == 2 and run.judge_model == "scripted-judge"


def test_per_question_mode_asks_each_question_alone_still_in_one_call():
    judge = ScriptedJudge(by_image)
    run = vqa.score_images(judge, [P1, P2], per_question=True)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == len(P1.questions) + len(P2.questions)
    assert all(len(asked_ids(r)) == 1 for r in judge.calls[0])
    # Same answers, same scores as one request per image.
    assert values(run.results) == values(vqa.score_images(ScriptedJudge(by_image), [P1, P2]).results)
    assert run.summary()["requests_per_image"] == "one per question"


def test_outcomes_per_question():
    run = vqa.score_images(ScriptedJudge(by_image), [P1, P2])
    got = {o.question_id: (o.status, o.failure) for o in run.outcomes}
    assert got == {
        "p1-q01": ("correct", None),
        "p1-q02": ("incorrect", None),
        "p1-q03": ("correct", None),
        "p1-q04": ("failed", vqa.FAIL_MISSING),
        "p1-q05": ("correct", None),
        "p1-q06": ("correct", None),
        "p1-q07": ("failed", vqa.FAIL_INVALID),
        "p2-q01": ("correct", None),
        "p2-q02": ("correct", None),
        "p2-q03": ("incorrect", None),
        "p2-q04": ("correct", None),
        "p2-q05": ("incorrect", None),
        "p2-q06": ("failed", vqa.FAIL_CONFLICT),
    }


def test_per_sample_accuracies_by_hand():
    run = vqa.score_images(ScriptedJudge(by_image), [P1, P2])
    got = values(run.results)
    # p1's facts (the "yes" questions): q01, q03, q05 confirmed, q06 confirmed ("Yes ") -> 4 of 4.
    assert got[("p1", "attr_vqa")] == pytest.approx(1.0)
    assert got[("p1", "igc")] == pytest.approx(1.0)  # q05, q06
    assert got[("p1", "attr_vqa.binding")] == pytest.approx(1.0)
    assert got[("p1", "attr_vqa.interaction")] == pytest.approx(1.0)
    assert got[("p1", "attr_vqa.position")] == pytest.approx(1.0)
    assert got[("p1", "attr_vqa.failure_rate")] == pytest.approx(2 / 7)  # q04 missing, q07 invalid
    # No fact of p1 failed, so the intent-to-treat twins read the same.
    assert (
        got[("p1", "attr_vqa_itt")]
        == got[("p1", "igc_itt")]
        == got[("p1", "attr_vqa.binding_itt")]
        == pytest.approx(1.0)
    )
    # Paired (intent to treat, suite 0.6): q01 with q02 (q02 wrongly "yes") -> wrong; q03 with q04
    # (missing) -> failed, not confirmed; q05 has no negative -> left out; q06 with q07 (invalid) ->
    # failed. 0 of 3 asked; IGC's only pair failed: 0 of 1 (it was left out, NaN, until 0.5).
    assert got[("p1", "attr_vqa_paired")] == pytest.approx(0.0)
    assert got[("p1", "igc_paired")] == pytest.approx(0.0)
    assert got[("p1", "attr_vqa_paired.failure_rate")] == pytest.approx(2 / 6)  # q01-q04, q06, q07
    assert got[("p1", "igc_paired.failure_rate")] == pytest.approx(1 / 2)  # q06, q07
    assert got[("p1", "attr_vqa.negative_yes_rate")] == pytest.approx(1.0)  # q02, the only answered negative
    # p2's facts: q01 confirmed, q03 and q05 denied -> 1 of 3; IGC 0 of 2.
    assert got[("p2", "attr_vqa")] == pytest.approx(1 / 3)
    assert got[("p2", "igc")] == pytest.approx(0.0)
    assert got[("p2", "attr_vqa.binding")] == pytest.approx(1.0)
    assert got[("p2", "attr_vqa.interaction")] == pytest.approx(0.0)
    assert got[("p2", "attr_vqa.position")] == pytest.approx(0.0)
    assert got[("p2", "attr_vqa.failure_rate")] == pytest.approx(1 / 6)  # q06 conflicting
    # No fact of p2 failed (q06 is a negative): the twins read the same.
    assert got[("p2", "attr_vqa_itt")] == pytest.approx(1 / 3) and got[("p2", "igc_itt")] == pytest.approx(0.0)
    assert got[("p2", "attr_vqa.binding_itt")] == pytest.approx(1.0)
    # Paired: q01/q02 right; q03/q04 wrong (fact denied); q05/q06 failed, not confirmed -> 1 of 3 (1 of 2
    # answered, the reading until suite 0.5); IGC 0 of 2.
    assert got[("p2", "attr_vqa_paired")] == pytest.approx(1 / 3)
    assert got[("p2", "igc_paired")] == pytest.approx(0.0)
    assert got[("p2", "attr_vqa.negative_yes_rate")] == pytest.approx(0.0)  # q02 and q04 said "no"
    assert {r.seed for r in run.results} == {0} and {r.subject for r in run.results} == {""}
    # 5 fact metrics, 3 intent-to-treat twins, 2 paired metrics with their failure rates, the failure
    # rate and the yes-rate.
    assert len(run.results) == 2 * 14


def test_pooled_summary_by_hand():
    summary = vqa.score_images(ScriptedJudge(by_image), [P1, P2]).summary(questions_version=3)
    assert summary["questions_version"] == 3 and summary["judge_model"] == "scripted-judge"
    assert summary["questions"] == 13 and summary["images"] == 2 and summary["requests"] == 2
    assert summary["facts"] == 7 and summary["unpaired_facts"] == 1  # p1-q05
    # Facts pooled over both images: p1 4 of 4, p2 1 of 3.
    assert summary["metrics"]["attr_vqa"] == {
        "asked": 7,
        "answered": 7,
        "correct": 5,
        "incorrect": 2,
        "failed": 0,
        "accuracy": pytest.approx(5 / 7),
        "failure_rate": pytest.approx(0.0),
    }
    # No fact failed, so the intent-to-treat accuracy is the same 5 of 7.
    assert summary["metrics"]["attr_vqa_itt"]["accuracy"] == pytest.approx(5 / 7)
    # IGC facts pooled: p1 q05, q06 confirmed; p2 q03, q05 denied -> 2 of 4.
    assert summary["metrics"]["igc"]["accuracy"] == pytest.approx(2 / 4)
    # Paired pooled: p1 1 wrong, 2 failed; p2 1 right, 1 wrong, 1 failed: 1 of 6 asked (intent to treat).
    assert summary["metrics"]["attr_vqa_paired"] == {
        "asked": 6,
        "answered": 3,
        "correct": 1,
        "incorrect": 2,
        "failed": 3,
        "accuracy": pytest.approx(1 / 6),
        "failure_rate": pytest.approx(3 / 6),
    }
    assert summary["negative_yes_rate"] == pytest.approx(1 / 3)  # p1 q02 yes; p2 q02, q04 no
    # by_kind counts every question, facts and negatives: binding p1 q01 ok, q02 wrong, q03 ok; p2 q01, q02 ok.
    assert summary["by_kind"]["binding"]["accuracy"] == pytest.approx(4 / 5)
    assert summary["by_n_persons"]["2"]["attr_vqa"]["accuracy"] == pytest.approx(1.0)
    assert summary["by_n_persons"]["3"]["igc"]["accuracy"] == pytest.approx(0.0)
    assert summary["failures"] == {
        "count": 3,
        "rate": pytest.approx(3 / 13),
        "by_reason": {vqa.FAIL_CONFLICT: 1, vqa.FAIL_INVALID: 1, vqa.FAIL_MISSING: 1},
    }


def test_a_failed_request_is_a_failure_never_a_wrong_answer():
    def script(request: JudgeRequest) -> JudgeAnswer:
        if request.images == (IMAGE_2,):
            return JudgeAnswer(error="could not parse the reply as JSON", raw="Sure! yes yes no", attempts=3)
        return by_image(request)

    run = vqa.score_images(ScriptedJudge(script), [P1, P2])
    got = values(run.results)
    # p2 has no usable answer: the paper's accuracies are undefined (NaN), not 0, and all its questions
    # failed; the intent-to-treat ones (the twins and the paired variants) score it 0, not confirmed.
    for metric in [*vqa.METRIC_KINDS, vqa.NEGATIVE_YES_RATE]:
        assert math.isnan(got[("p2", metric)])
    for metric in [*vqa.ITT_METRIC_KINDS, *vqa.PAIRED_METRIC_KINDS]:
        assert got[("p2", metric)] == 0.0, metric
    assert got[("p2", "attr_vqa.failure_rate")] == 1.0
    assert got[("p1", "attr_vqa")] == pytest.approx(1.0)  # p1 unaffected
    summary = run.summary()
    assert summary["failed_requests"] == 1
    assert summary["failures"]["by_reason"][vqa.FAIL_JUDGE] == 6
    # The paper's pooled accuracy is over answered facts only: p1's 4 of 4; p2's 3 facts failed. Its
    # twin counts them: 4 of 7.
    assert summary["metrics"]["attr_vqa"]["accuracy"] == pytest.approx(1.0)
    assert summary["metrics"]["attr_vqa_itt"]["accuracy"] == pytest.approx(4 / 7)
    assert summary["metrics"]["attr_vqa"]["failure_rate"] == pytest.approx(3 / 7)
    assert all(o.detail and "could not parse" in o.detail for o in run.outcomes if o.prompt_id == "p2")


@pytest.mark.parametrize(
    "value",
    [None, "yes", [], {"answer": []}, {"answers": "yes"}],
)
def test_a_malformed_value_fails_every_question(value):
    parsed = vqa.parse_answers(JudgeAnswer(value=value), ["a", "b"])
    assert {k: (p.given, p.failure) for k, p in parsed.items()} == {
        "a": (None, vqa.FAIL_MALFORMED),
        "b": (None, vqa.FAIL_MALFORMED),
    }


def test_parse_ignores_unasked_ids_and_tolerates_repeats_that_agree():
    value = {
        "answers": [
            {"question_id": "a", "answer": "YES"},
            {"question_id": "a", "answer": "yes"},
            {"question_id": "zzz", "answer": "no"},  # not asked
            "not an object",
            {"question_id": "b", "answer": True},  # not a word
        ]
    }
    parsed = vqa.parse_answers(JudgeAnswer(value=value), ["a", "b", "c"])
    assert parsed["a"] == vqa.ParsedAnswer("yes")
    assert parsed["b"].failure == vqa.FAIL_INVALID
    assert parsed["c"].failure == vqa.FAIL_MISSING


def test_schema_demands_exactly_the_asked_ids():
    schema = vqa.answer_schema(["p1-q01", "p1-q02"])
    jsonschema.validate(
        {"answers": [{"question_id": "p1-q02", "answer": "no"}, {"question_id": "p1-q01", "answer": "yes"}]}, schema
    )
    for bad in (
        {"answers": [{"question_id": "p1-q01", "answer": "yes"}]},  # one id missing
        {"answers": [{"question_id": "p1-q01", "answer": "yes"}, {"question_id": "p1-q03", "answer": "no"}]},  # unasked
        {"answers": [{"question_id": "p1-q01", "answer": "maybe"}, {"question_id": "p1-q02", "answer": "no"}]},
        {
            "answers": [
                {"question_id": "p1-q01", "answer": "yes", "why": "."},
                {"question_id": "p1-q02", "answer": "no"},
            ]
        },
        {"answers": [], "note": "extra"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    # A schema cannot forbid the same id twice in place of another; the parser catches it: missing.
    twice = {"answers": [{"question_id": "p1-q01", "answer": "yes"}, {"question_id": "p1-q01", "answer": "yes"}]}
    jsonschema.validate(twice, schema)
    parsed = vqa.parse_answers(JudgeAnswer(value=twice), ["p1-q01", "p1-q02"])
    assert parsed["p1-q01"].given == "yes" and parsed["p1-q02"].failure == vqa.FAIL_MISSING


def test_a_missing_id_is_a_failure_of_that_question_only():
    def script(request: JudgeRequest) -> JudgeAnswer:  # answers everything right but drops one id
        truth = {x.question_id: x.answer for x in P2.questions}
        return answer({qid: truth[qid] for qid in asked_ids(request) if qid != "p2-q03"})

    run = vqa.score_images(ScriptedJudge(script), [P2])
    got = values(run.results)
    assert got[("p2", "attr_vqa")] == 1.0 and got[("p2", "attr_vqa.failure_rate")] == pytest.approx(1 / 6)
    # Its only interaction fact (q03) failed: undefined, not 0 (the negative q04 alone confirms nothing).
    assert math.isnan(got[("p2", "attr_vqa.interaction")])
    assert [o.question_id for o in run.outcomes if o.status == "failed"] == ["p2-q03"]


def test_requests_never_leak_the_expected_answers():
    (plan,) = vqa.build_requests([P1])
    for x in P1.questions:
        assert f"- {x.question_id}: {x.question}" in plan.request.prompt
    assert plan.request.system == vqa.SYSTEM and plan.question_ids == tuple(x.question_id for x in P1.questions)
    # The ids and texts are the only per-question content: nothing says which answer is expected.
    lines = [line for line in plan.request.prompt.splitlines() if line.startswith("- ")]
    assert lines == [f"- {x.question_id}: {x.question}" for x in P1.questions]


def test_items_from_built_prompt_rows():
    # A prompt row as the builder writes it (questions from hand-made graphs).
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "chair", "interaction": "look_at"},
    ]
    graph = interaction_graph(persons, [edge("A", "hugs", "B")])
    questions = derive_questions("cc-1", graph, position_graph(["A", "B"]), {"cup": "the cup", "chair": "the chair"})
    prompts = {"cc-1": {"prompt_id": "cc-1", "n_persons": 2, "questions": questions}}
    (item,) = vqa.vqa_items(prompts, {("cc-1", 0): IMAGE_1})
    assert (
        item.n_persons == 2 and [x.kind for x in item.questions] == ["binding"] * 4 + ["interaction"] + ["position"] * 2
    )

    # Each "no" names the fact it negates; the two-person interaction fact has no negative.
    assert [x.negates for x in item.questions] == ["", "cc-1-q01", "", "cc-1-q03", "", "", "cc-1-q06"]

    def judge(says):  # a judge answering every question with says(question)
        by_id = {x.question_id: x for x in item.questions}
        return ScriptedJudge(lambda r: answer({qid: says(by_id[qid]) for qid in asked_ids(r)}))

    always_yes = values(vqa.score_images(judge(lambda x: "yes"), [item]).results)
    always_no = values(vqa.score_images(judge(lambda x: "no"), [item]).results)
    truth = values(vqa.score_images(judge(lambda x: x.answer), [item]).results)
    # The paper's Attr-VQA: always-yes confirms every fact, always-no (what a blank image gets) none.
    assert always_yes[("cc-1", "attr_vqa")] == 1.0 and always_no[("cc-1", "attr_vqa")] == 0.0
    # The paired variant credits neither bias; the truth scores 1 on both.
    for metric in ("attr_vqa_paired", "igc_paired"):
        assert (
            always_yes[("cc-1", metric)] == 0.0
            and always_no[("cc-1", metric)] == 0.0
            and truth[("cc-1", metric)] == 1.0
        )
    assert truth[("cc-1", "attr_vqa")] == 1.0
    assert (
        always_yes[("cc-1", "attr_vqa.negative_yes_rate")] == 1.0
        and truth[("cc-1", "attr_vqa.negative_yes_rate")] == 0.0
    )


def test_questions_without_negates_are_paired_by_order():
    """A dataset built before questions version 3 has no ``negates``: each "no" follows its fact."""
    persons = [
        {"slot": "A", "item_entity_id": "cup", "interaction": "hold"},
        {"slot": "B", "item_entity_id": "hat", "interaction": "wear"},
        {"slot": "C", "item_entity_id": "chair", "interaction": "look_at"},
    ]
    graph = interaction_graph(persons, [edge("A", "hugs", "B")])
    questions = derive_questions(
        "cc-2", graph, position_graph(["A", "B", "C"]), {"cup": "the cup", "hat": "the hat", "chair": "the chair"}
    )
    old_rows = [{k: v for k, v in x.items() if k != "negates"} for x in questions]
    (new_item,) = vqa.vqa_items({"cc-2": {"n_persons": 3, "questions": questions}}, {("cc-2", 0): IMAGE_1})
    (old_item,) = vqa.vqa_items({"cc-2": {"n_persons": 3, "questions": old_rows}}, {("cc-2", 0): IMAGE_1})
    assert [x.negates for x in old_item.questions] == [x["negates"] for x in questions]
    assert old_item == new_item


def test_a_negative_must_name_a_fact_of_its_prompt():
    rows = [
        {"question_id": "x1", "kind": "binding", "question": "?", "answer": "yes"},
        {"question_id": "x2", "kind": "binding", "question": "?", "answer": "no", "negates": "x9"},
    ]
    with pytest.raises(vqa.VQAInputError, match="x2: negates 'x9'"):
        vqa.vqa_items({"p": {"n_persons": 2, "questions": rows}}, {("p", 0): IMAGE_1})


@pytest.mark.parametrize(
    ("prompts", "images", "message"),
    [
        ({}, {("nope", 0): IMAGE_1}, "no such prompt"),
        ({"p": {"n_persons": 2, "questions": []}}, {("p", 0): IMAGE_1}, "no questions"),
        (
            {
                "p": {
                    "n_persons": 2,
                    "questions": [{"question_id": "x", "kind": "colour", "question": "?", "answer": "yes"}],
                }
            },
            {("p", 0): IMAGE_1},
            "kind 'colour'",
        ),
        (
            {
                "p": {
                    "n_persons": 2,
                    "questions": [{"question_id": "x", "kind": "binding", "question": "?", "answer": "Y"}],
                }
            },
            {("p", 0): IMAGE_1},
            "not yes/no",
        ),
        (
            {
                "p": {
                    "n_persons": 2,
                    "questions": [{"question_id": "x", "kind": "binding", "question": "?", "answer": "yes"}] * 2,
                }
            },
            {("p", 0): IMAGE_1},
            "repeated: x",
        ),
    ],
)
def test_bad_items_are_named(prompts, images, message):
    with pytest.raises(vqa.VQAInputError, match=message):
        vqa.vqa_items(prompts, images)


def test_the_same_image_twice_is_refused():
    with pytest.raises(vqa.VQAInputError, match="p1 seed 0: the same image is listed twice"):
        vqa.build_requests([P1, P1])


def test_a_judge_returning_too_few_answers_is_an_error():
    class Short(ScriptedJudge):
        def ask(self, requests):
            return super().ask(requests)[:-1]

    with pytest.raises(ValueError, match="1 answers for 2 requests"):
        vqa.score_images(Short(by_image), [P1, P2])


def test_no_items_asks_nothing():
    judge = ScriptedJudge(by_image)
    run = vqa.score_images(judge, [])
    assert judge.calls == [] and run.results == [] and run.summary()["questions"] == 0
