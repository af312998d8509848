"""The CHARIS evaluator over a scripted, in-process judge: requests, waves, aggregation, failures.

Expected categories are worked out by hand below from ekb/data/features.yaml (importance) and
ekb/data/rules.yaml (levels and limits), not by calling the code under test.

The cell used is (animal, photorealistic); its attributes and features, with their levels
(decisive >= 1.0, core >= 0.7, secondary >= 0.4, cosmetic below):

  species-specific elements: species 1.0 D, breed traits .8 C, head shape .8 C, ear shape .75 C,
                             muzzle shape .75 C, tail shape .6 S
  animal eyes:               eye shape .9 C, eye colour .7 C, pupil shape .5 S
  markings and coloration:   coat colour .9 C, coat pattern .9 C, coat texture .55 S, distinctive marks .8 C
  animal body:               build .6 S, body proportions .7 C, body size .5 S
  animal accessories:        collar or harness .3 X, animal clothing .3 X, tags and attached items .2 X

  => decisive 1, core 10, secondary 5, cosmetic 3 (19 features, 5 attributes).

Limits (largest harmful share per level): exact all 0; near_exact D 0, C 0, S 0.25, X 1;
partial D 0, C 0.5; mismatch anything.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from idbench.benchmarks.charis.judge import (
    FEATURES_TASK,
    SUBJECT_TASK,
    CharisPair,
    attribute_request,
    check_pair,
    evaluate_pairs,
    pair_from_rows,
    subject_request,
    summarize,
)
from idbench.ekb import load_ekb
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

ROOT = Path(__file__).resolve().parents[3]

CELL_ATTRIBUTES = {
    "species-specific elements": ["species", "breed traits", "head shape", "ear shape", "muzzle shape", "tail shape"],
    "animal eyes": ["eye shape", "eye colour", "pupil shape"],
    "markings and coloration": ["coat colour", "coat pattern", "coat texture", "distinctive marks"],
    "animal body": ["build", "body proportions", "body size"],
    "animal accessories": ["collar or harness", "animal clothing", "tags and attached items"],
}
TYPES = ["human", "animal", "anthropomorphic", "animated_object"]
STYLES = ["photorealistic", "cartoon", "vector"]
AXES = ("pose", "expression", "viewpoint", "lighting", "background")  # style not prompted


@pytest.fixture(scope="module")
def ekb():
    return load_ekb()


def make_pair(name: str, axes: Sequence[str] = AXES, type: str = "animal", style: str = "photorealistic") -> CharisPair:
    # The scenario's name rides in the prompt text, where the scripted judge reads it.
    return CharisPair(
        prompt_id=name,
        seed=0,
        type=type,
        style=style,
        axes=tuple(axes),
        reference=f"ref:{name}".encode(),
        generation=f"gen:{name}".encode(),
        prompt=f"[{name}] The tabby cat leaps mid-air.",
        phrases={"pose": "leaps mid-air"},
    )


class ScriptedJudge:
    """Answers by reading the task, the scenario name in the prompt and, for stage 2, the attribute.

    A scenario is a dict: ``type``/``style`` (the generated subject's), ``attributes`` (name -> (in
    reference, in generated), default both), ``features`` (name -> fields to override), ``error``
    (task or attribute names answered with an error) and ``value`` (task or attribute -> a raw value).
    """

    model = "scripted"

    def __init__(self, scenarios: Mapping[str, Mapping[str, Any]]):
        self.scenarios = scenarios
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        return [self._answer(r) for r in requests]

    def _answer(self, request: JudgeRequest) -> JudgeAnswer:
        name = re.search(r"\[([^\]]+)\]", request.prompt).group(1)
        scenario = self.scenarios[name]
        assert request.images == (f"ref:{name}".encode(), f"gen:{name}".encode())  # reference first
        key = request.task
        if request.task == FEATURES_TASK:
            key = re.search(r'Compare the attribute "([^"]+)"', request.prompt).group(1)
        if key in scenario.get("error", ()):
            return JudgeAnswer(error="timed out after 3 attempts", attempts=3)
        if key in scenario.get("value", {}):
            return JudgeAnswer(value=scenario["value"][key], raw="...")
        if request.task == SUBJECT_TASK:
            seen = scenario.get("attributes", {})
            value = {
                "generated_type": scenario.get("type", "animal"),
                "generated_style": scenario.get("style", "photorealistic"),
                "attributes": {
                    a: dict(zip(("in_reference", "in_generated"), seen.get(a, (True, True))))
                    for a in request.schema["properties"]["attributes"]["properties"]
                },
            }
        else:
            asked = request.schema["properties"]["features"]["properties"]
            value = {"features": {f: feature_answer(scenario.get("features", {}).get(f, {})) for f in asked}}
        return JudgeAnswer(value=value, raw=json.dumps(value), attempts=1)


def feature_answer(overrides: Mapping[str, Any]) -> dict[str, Any]:
    base = {
        "observation": "looks the same",
        "in_reference": True,
        "in_generated": True,
        "changed": False,
        "transformations": [],
        "harmful_changes": [],
    }
    return {**base, **overrides}


def judge_one(ekb, scenario: Mapping[str, Any], axes: Sequence[str] = AXES):
    judge = ScriptedJudge({"s": scenario})
    [verdict] = evaluate_pairs(judge, [make_pair("s", axes)], ekb)
    return verdict


CHANGED = {"changed": True, "harmful_changes": ["proportion"], "observation": "stockier"}


# --- categories ---------------------------------------------------------------------------------------


def test_all_unchanged_is_exact(ekb):
    verdict = judge_one(ekb, {})
    # every share is 0/n -> the first rule (exact) holds
    assert (verdict.category, verdict.score, verdict.failure) == ("exact", 1.0, None)
    assert verdict.requests == 1 + 5  # stage 1, then one request per attribute (all 5 visible in both)
    assert verdict.evidence["shares"] == {"decisive": 0.0, "core": 0.0, "secondary": 0.0, "cosmetic": 0.0}


def test_one_of_four_secondary_is_near_exact_two_is_partial(ekb):
    # tail shape hidden in the generation -> secondary visible: pupil shape, coat texture, build, body size = 4
    tail_hidden = {"tail shape": {"in_generated": False}}
    one = judge_one(ekb, {"features": {**tail_hidden, "build": CHANGED}})
    # secondary 1/4 = 0.25 <= 0.25, core 0 -> near_exact, score 2/3
    assert one.category == "near_exact"
    assert one.score == pytest.approx(2 / 3)
    assert one.evidence["shares"]["secondary"] == 0.25
    assert one.evidence["counts"]["secondary"] == {"visible": 4, "harmful": 1}
    two = judge_one(ekb, {"features": {**tail_hidden, "build": CHANGED, "body size": CHANGED}})
    # secondary 2/4 = 0.5 > 0.25; core 0 <= 0.5 -> partial, score 1/3
    assert two.category == "partial"
    assert two.score == pytest.approx(1 / 3)


def test_a_change_the_prompted_transformation_explains_is_not_harmful(ekb):
    explained = {"changed": True, "transformations": ["pose"], "harmful_changes": [], "observation": "ears swept back"}
    verdict = judge_one(ekb, {"features": {"ear shape": explained}})
    # ear shape changed, but pose (prompted) explains all of it -> 0 harmful everywhere -> exact
    assert verdict.category == "exact"
    assert verdict.evidence["features"]["ear shape"]["status"] == "changed"
    assert verdict.evidence["features"]["ear shape"]["harmful"] is False
    # the same change with an intrinsic remainder counts: core 1/10 = 0.1 > 0 but <= 0.5 -> partial
    remainder = {**explained, "harmful_changes": ["shape"]}
    assert judge_one(ekb, {"features": {"ear shape": remainder}}).category == "partial"


def test_a_change_no_allowed_transformation_explains_is_harmful(ekb):
    # changed, nothing named to explain it and no kind named: by the principles it is intrinsic
    verdict = judge_one(ekb, {"features": {"coat colour": {"changed": True}}})
    # core 1/10 > 0, <= 0.5 -> partial
    assert verdict.category == "partial"
    assert verdict.evidence["harmful_features"] == ["coat colour"]


def test_a_prompted_style_explains_a_change_only_when_prompted(ekb):
    restyled = {"changed": True, "transformations": ["style"], "observation": "flat painted texture"}
    with_style = judge_one(ekb, {"features": {"coat texture": restyled}}, axes=(*AXES, "style"))
    assert with_style.category == "exact"  # explained by the prompted style
    # without a style axis, "style" is not in the answer's enum: a schema-invalid answer, no category
    without = judge_one(ekb, {"features": {"coat texture": restyled}})
    assert without.category is None and without.score is None
    assert "style" in without.failure


def test_hidden_features_do_not_count(ekb):
    # coat pattern is hidden in the generation; the judge still (wrongly) reports a pattern change
    hidden = {"in_generated": False, "changed": True, "harmful_changes": ["pattern"]}
    verdict = judge_one(ekb, {"features": {"coat pattern": hidden}})
    # core visible 9 (10 minus coat pattern), 0 changed -> exact
    assert verdict.category == "exact"
    assert verdict.evidence["features"]["coat pattern"]["status"] == "hidden"
    assert verdict.evidence["counts"]["core"] == {"visible": 9, "harmful": 0}


def test_a_decisive_change_is_a_mismatch(ekb):
    verdict = judge_one(ekb, {"features": {"species": {"changed": True, "harmful_changes": ["kind"]}}})
    # decisive 1/1 = 1 > 0 -> only the last rule holds -> mismatch, score 0
    assert (verdict.category, verdict.score) == ("mismatch", 0.0)
    assert verdict.evidence["rule"]["category"] == "mismatch"


def test_a_type_change_is_a_mismatch_and_skips_the_features(ekb):
    verdict = judge_one(ekb, {"type": "human"})
    assert (verdict.category, verdict.score) == ("mismatch", 0.0)
    assert verdict.requests == 1  # nothing else could lift a mismatch, so no feature is asked about
    assert verdict.evidence["type_changed"] is True
    assert verdict.evidence["generated"] == {"type": "human", "style": "photorealistic"}


def test_core_share_of_exactly_half_is_partial_above_is_mismatch(ekb):
    hidden = {"markings and coloration": (True, False), "animal body": (False, True)}
    # visible in both: species-specific elements, animal eyes, animal accessories -> 1 + 3 requests
    # core visible: breed traits, head shape, ear shape, muzzle shape, eye shape, eye colour = 6
    three = {f: CHANGED for f in ("breed traits", "head shape", "eye colour")}
    half = judge_one(ekb, {"attributes": hidden, "features": three})
    assert half.requests == 4
    assert half.evidence["counts"]["core"] == {"visible": 6, "harmful": 3}
    assert half.category == "partial"  # 3/6 = 0.5 <= 0.5
    four = {**three, "ear shape": CHANGED}
    assert judge_one(ekb, {"attributes": hidden, "features": four}).category == "mismatch"  # 4/6 > 0.5


def test_nothing_visible_in_both_gets_no_category(ekb):
    verdict = judge_one(ekb, {"attributes": {a: (True, False) for a in CELL_ATTRIBUTES}})
    assert verdict.category is None and verdict.score is None
    assert verdict.requests == 1
    assert verdict.evidence["failure_kind"] == "insufficient_evidence"
    assert verdict.insufficient_evidence and not verdict.judge_failure


CORE = [
    "breed traits",
    "head shape",
    "ear shape",
    "muzzle shape",
    "eye shape",
    "eye colour",
    "coat colour",
    "coat pattern",
    "distinctive marks",
    "body proportions",
]  # the cell's 10 core features (docstring)


def test_a_back_view_hiding_every_core_feature_is_insufficient_evidence_not_exact(ekb):
    # The judge sees every attribute, but answers "not visible in the generation" for each core feature
    # and "unchanged" for the rest: decisive 0/1, secondary 0/5, cosmetic 0/3, core 0 visible. Before,
    # core had no share and counted as 0, so the rules gave exact (score 1).
    back_view = {"features": {f: {"in_generated": False, "observation": "turned away"} for f in CORE}}
    verdict = judge_one(ekb, back_view)
    assert (verdict.category, verdict.score) == (None, None)
    assert verdict.insufficient_evidence and not verdict.judge_failure
    assert verdict.failure.startswith("insufficient evidence: no core feature")
    assert verdict.evidence["counts"]["core"] == {"visible": 0, "harmful": 0}
    # one core feature in view is enough evidence: core 0/1, nothing harmful -> exact
    one_seen = {"features": {f: {"in_generated": False} for f in CORE[1:]}}
    assert judge_one(ekb, one_seen).category == "exact"


def test_a_visible_decisive_change_is_a_mismatch_even_with_core_hidden(ekb):
    # decisive 1/1 harmful decides the last rule whatever the core features would show
    features = {f: {"in_generated": False} for f in CORE}
    features["species"] = {"changed": True, "harmful_changes": ["kind"]}
    verdict = judge_one(ekb, {"features": features})
    assert (verdict.category, verdict.score) == ("mismatch", 0.0)


class ConstantJudge:
    """Answers every boolean with ``answer``; names every allowed item of a list when "yes", none when "no".

    Type and style are not yes/no questions: it gives the reference's own (animal, photorealistic), so the
    verdict turns on the yes/no answers alone.
    """

    model = "constant"

    def __init__(self, answer: bool):
        self.answer = answer
        self.choices = {"generated_type": "animal", "generated_style": "photorealistic"}

    def ask(self, requests):
        return [JudgeAnswer(value=self._fill(r.schema), raw="...", attempts=1) for r in requests]

    def _fill(self, schema):
        if schema["type"] == "object":
            return {k: self.choices.get(k) or self._fill(v) for k, v in schema["properties"].items()}
        if schema["type"] == "boolean":
            return self.answer
        if schema["type"] == "array":
            return list(schema["items"].get("enum", [])) if self.answer and schema.get("maxItems") != 0 else []
        return "yes" if self.answer else "no"


def test_an_always_yes_judge_scores_mismatch_and_an_always_no_judge_insufficient_evidence(ekb):
    pair = make_pair("s")
    # Always yes: every feature visible in both and changed, with every harmful change named -> every
    # level's share is 1 -> mismatch, score 0 (a judge that sees change everywhere rates nothing intact).
    [yes] = evaluate_pairs(ConstantJudge(True), [pair], ekb)
    assert (yes.category, yes.score, yes.failure) == ("mismatch", 0.0, None)
    assert yes.evidence["shares"] == {"decisive": 1.0, "core": 1.0, "secondary": 1.0, "cosmetic": 1.0}
    # Always no: no attribute is visible in either image -> nothing to compare -> no category (NaN),
    # insufficient evidence, not a judge failure, and never exact.
    [no] = evaluate_pairs(ConstantJudge(False), [pair], ekb)
    assert (no.category, no.score) == (None, None)
    assert no.insufficient_evidence and not no.judge_failure
    summary = summarize([yes, no], ekb)
    assert summary["failure_rate"] == 0.0
    assert summary["insufficient_evidence_rate"] == 0.5
    assert summary["mean_score"] == 0.0  # the insufficient pair is left out, not counted as 0 or 1


# --- failures -------------------------------------------------------------------------------------------


def _valid_features(attribute: str) -> dict[str, Any]:
    return {"features": {f: feature_answer({}) for f in CELL_ATTRIBUTES[attribute]}}


def _broken(attribute: str, feature: str, **change) -> dict[str, Any]:
    value = _valid_features(attribute)
    value["features"][feature].update(change)
    return value


BROKEN = {
    "subject error": {"error": [SUBJECT_TASK]},
    "feature error": {"error": ["animal eyes"]},
    "unknown type": {
        "value": {
            SUBJECT_TASK: {
                "generated_type": "robot",
                "generated_style": "cartoon",
                "attributes": {a: {"in_reference": True, "in_generated": True} for a in CELL_ATTRIBUTES},
            }
        }
    },
    "missing attribute": {
        "value": {SUBJECT_TASK: {"generated_type": "animal", "generated_style": "cartoon", "attributes": {}}}
    },
    "missing key": {
        "value": {
            "animal eyes": {
                "features": {f: {"observation": "", "changed": False} for f in CELL_ATTRIBUTES["animal eyes"]}
            }
        }
    },
    "string bool": {"value": {"animal eyes": _broken("animal eyes", "eye shape", changed="yes")}},
    "unknown harm": {
        "value": {"animal eyes": _broken("animal eyes", "eye shape", changed=True, harmful_changes=["vibes"])}
    },
    "not an object": {"value": {"animal eyes": ["eye shape"]}},
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_failed_or_invalid_answer_gives_no_category(ekb, name):
    verdict = judge_one(ekb, BROKEN[name])
    assert verdict.category is None and verdict.score is None
    assert verdict.failure
    assert verdict.evidence["failure_kind"] == "judge"
    json.dumps(verdict.evidence)


def test_a_failed_feature_answer_keeps_the_evidence_that_arrived(ekb):
    verdict = judge_one(ekb, {"error": ["animal eyes"], "features": {"build": CHANGED}})
    assert verdict.failure.startswith(f"{FEATURES_TASK}[animal eyes]")
    assert verdict.evidence["failed_requests"][0]["attribute"] == "animal eyes"
    assert verdict.evidence["features"]["build"]["harmful"] is True
    assert verdict.requests == 6


def test_summarize_counts_categories_scores_and_failures(ekb):
    judge = ScriptedJudge({"a": {}, "b": {"features": {"collar or harness": CHANGED}}, "c": {"error": [SUBJECT_TASK]}})
    verdicts = evaluate_pairs(judge, [make_pair(n) for n in "abc"], ekb)
    assert [v.category for v in verdicts] == ["exact", "near_exact", None]  # b: cosmetic 1/3 <= 1 -> near_exact
    summary = summarize(verdicts, ekb)
    assert summary["categories"] == {"exact": 1, "near_exact": 1, "partial": 0, "mismatch": 0}
    assert summary["mean_score"] == pytest.approx((1 + 2 / 3) / 2)  # the failed pair is left out, not 0
    assert summary["failure_rate"] == pytest.approx(1 / 3)
    assert summary["failures_by_kind"] == {"judge": 1}
    assert summary["requests"] == 6 + 6 + 1


# --- requests and waves ---------------------------------------------------------------------------------


def test_requests_run_in_two_waves(ekb):
    judge = ScriptedJudge(
        {"a": {}, "b": {"attributes": {"animal body": (False, True)}}, "c": {"type": "animated_object"}}
    )
    verdicts = evaluate_pairs(judge, [make_pair(n) for n in "abc"], ekb)
    assert len(judge.calls) == 2
    assert [r.task for r in judge.calls[0]] == [SUBJECT_TASK] * 3
    # a: 5 attributes, b: 4 (animal body out of view in the reference), c: none (type changed)
    assert [r.task for r in judge.calls[1]] == [FEATURES_TASK] * (5 + 4)
    assert [v.requests for v in verdicts] == [6, 5, 1]


def test_no_second_wave_when_no_pair_needs_one(ekb):
    judge = ScriptedJudge({"a": {"type": "human"}})
    evaluate_pairs(judge, [make_pair("a")], ekb)
    assert len(judge.calls) == 1


def test_evidence_is_json_and_names_the_changed_features(ekb):
    explained = {"changed": True, "transformations": ["pose"]}
    verdict = judge_one(ekb, {"features": {"build": CHANGED, "ear shape": explained}})
    evidence = json.loads(json.dumps(verdict.evidence))
    assert evidence["harmful_features"] == ["build"]
    assert evidence["features"]["build"] == {
        "attribute": "animal body",
        "level": "secondary",
        "status": "changed",
        "harmful": True,
        "transformations": [],
        "harmful_changes": ["proportion"],
        "observation": "stockier",
    }
    assert evidence["features"]["ear shape"]["transformations"] == ["pose"]
    assert evidence["reference"] == {"type": "animal", "style": "photorealistic"}
    assert set(evidence["attributes"]) == set(CELL_ATTRIBUTES)
    assert evidence["rule"]["category"] == "near_exact"  # secondary 1/5 = 0.2 <= 0.25


def test_prompts_carry_principles_allowed_transformations_and_harmful_changes(ekb):
    pair = make_pair("p")
    request = attribute_request(pair, "animal eyes", ekb)
    for principle in ekb.rules.principles:
        assert principle in request.prompt
    assert 'pose (asked for by the prompt: "leaps mid-air")' in request.prompt
    assert "Not asked for by the prompt, and so no explanation here: style." in request.prompt
    for kind in ekb.rules.harmful_changes:
        assert f"- {kind}:" in request.prompt
    features = request.schema["properties"]["features"]["properties"]
    assert list(features) == CELL_ATTRIBUTES["animal eyes"]
    enum = features["eye shape"]["properties"]["transformations"]["items"]["enum"]
    assert enum == ["pose", "expression", "viewpoint", "occlusion", "lighting", "background"]
    styled = attribute_request(make_pair("p", (*AXES, "style")), "animal eyes", ekb)
    styled_features = styled.schema["properties"]["features"]["properties"]
    assert styled_features["eye shape"]["properties"]["transformations"]["items"]["enum"][-1] == "style"

    stage1 = subject_request(pair, ekb)
    assert stage1.schema["properties"]["generated_type"]["enum"] == [*TYPES, "other"]
    assert stage1.schema["properties"]["generated_style"]["enum"] == [*STYLES, "other"]
    assert list(stage1.schema["properties"]["attributes"]["properties"]) == list(CELL_ATTRIBUTES)


def _strict_objects(schema: Any) -> list[Mapping[str, Any]]:
    found = []
    if isinstance(schema, Mapping):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_strict_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_strict_objects(value))
    return found


def test_schemas_are_strict_and_the_scripted_answers_match_them(ekb):
    pair = make_pair("p")
    requests = [subject_request(pair, ekb)] + [attribute_request(pair, a, ekb) for a in CELL_ATTRIBUTES]
    for request in requests:
        for obj in _strict_objects(request.schema):
            assert obj["additionalProperties"] is False
            assert obj["required"] == list(obj["properties"])
    jsonschema = pytest.importorskip("jsonschema")
    judge = ScriptedJudge({"p": {"features": {"build": CHANGED}}})
    for request, answer in zip(requests, judge.ask(requests)):
        jsonschema.Draft202012Validator.check_schema(request.schema)
        jsonschema.validate(answer.value, request.schema)


# --- inputs ---------------------------------------------------------------------------------------------


def test_pair_from_a_prompts_row(ekb):
    row = {
        "prompt_id": "animal-photo-tabby-cat-03",
        "subject_id": "animal-photo-tabby-cat",
        "type": "animal",
        "style": "photorealistic",
        "prompt": "The tabby cat rolls onto its back, lit by candlelight.",
        "axes": ["pose", "lighting"],
        "transformations": [
            {"axis": "pose", "phrase": "rolls onto its back"},
            {"axis": "lighting", "phrase": "lit by candlelight"},
        ],
    }
    pair = pair_from_rows(row, 0, b"ref", b"gen", subject_name="the tabby cat")
    assert pair.axes == ("pose", "lighting")
    assert pair.phrases == {"pose": "rolls onto its back", "lighting": "lit by candlelight"}
    assert 'Its subject (the tabby cat) is of type "animal"' in subject_request(pair, ekb).prompt
    check_pair(pair, ekb)


@pytest.mark.parametrize("change", [{"type": "robot"}, {"style": "pastel"}, {"axes": ("zoom",)}, {"generation": b""}])
def test_bad_pairs_are_refused_before_asking(ekb, change):
    pair = make_pair("p")
    bad = CharisPair(**{**pair.__dict__, **change})
    judge = ScriptedJudge({})
    with pytest.raises(ValueError, match="'p'"):
        evaluate_pairs(judge, [pair, bad], ekb)
    assert judge.calls == []


def test_requests_per_pair_on_the_sample_subjects():
    # At most 1 + (attributes of the cell) requests per pair (all attributes visible in both images).
    # Cell sizes (attributes.yaml): human p/c/v 7/7/6, animal 5/6/6, anthropomorphic 6/7/7, object 5/6/5.
    # samples/charis.csv: human p 3, c 2, v 3; animal p 5, c 1, v 2; anthropomorphic p 1, c 3, v 2;
    # object p 2, c 3, v 2 = 29 subjects (7 prompts each, so the prompt average is the subject average).
    # Attributes: 21+14+18 + 25+6+12 + 6+21+14 + 10+18+10 = 175; 175 / 29 = 6.03; + 1 = 7.03 requests.
    cell = {
        ("human", "photorealistic"): 7,
        ("human", "cartoon"): 7,
        ("human", "vector"): 6,
        ("animal", "photorealistic"): 5,
        ("animal", "cartoon"): 6,
        ("animal", "vector"): 6,
        ("anthropomorphic", "photorealistic"): 6,
        ("anthropomorphic", "cartoon"): 7,
        ("anthropomorphic", "vector"): 7,
        ("animated_object", "photorealistic"): 5,
        ("animated_object", "cartoon"): 6,
        ("animated_object", "vector"): 5,
    }
    ekb = load_ekb()
    assert {k: len(v) for k, v in ekb.cells.items()} == cell
    with open(ROOT / "samples" / "charis.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 29
    pairs = [make_pair(r["subject_id"], type=r["type"], style=r["style"]) for r in rows]
    judge = ScriptedJudge({r["subject_id"]: {"type": r["type"], "style": r["style"]} for r in rows})
    verdicts = evaluate_pairs(judge, pairs, ekb)
    assert all(v.category == "exact" for v in verdicts)
    assert sum(v.requests for v in verdicts) == 29 + 175
    assert round(summarize(verdicts, ekb)["requests_per_pair"], 2) == 7.03
