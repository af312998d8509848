"""MLLM metadata extraction, merging into reference rows, and the demographic audit (benchmarks/cogcanvas/metadata.py).

A scripted in-process judge for most tests; the real OpenAIJudge against the local scripted server for
one (malformed replies, retries, cache). Every count of the audit is worked out by hand.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import jsonschema
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "judge"))
from openai_server import ScriptedServer, answer, malformed, user_text

from idbench.benchmarks.cogcanvas import metadata as md
from idbench.benchmarks.cogcanvas.spec import AGE_GROUPS, ITEM_INTERACTIONS, SCENE_TYPES, SIZE_CATEGORIES
from idbench.evaluate_pkg.judge import AnswerCache, JudgeConfig, OpenAIJudge
from idbench.evaluate_pkg.judge.client import strict_compatible
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def png(color: tuple[int, int, int], size: tuple[int, int] = (32, 24)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


class ScriptedJudge:
    """Answers from ``script(request)``; records every ask() call."""

    model = "scripted"

    def __init__(self, script: Callable[[JudgeRequest], JudgeAnswer]):
        self.script = script
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        return [self.script(r) for r in requests]


PERSON = {
    "age_group": "adult",
    "gender": "female",
    "ethnicity": "east_asian",
    "apparel": ["red jacket", " ", "red jacket"],
}
ITEM = {"size_category": "small", "interactions": ["carry", "hold", "hold"]}
BACKGROUND = {"scene_type": "landmark", "landmark": "Dragon Bridge"}

REFS = [
    md.RefInput("p1", "person", png((200, 10, 10)), name="the woman in red"),
    md.RefInput("p2", "person", png((10, 200, 10))),  # its answer is malformed
    md.RefInput("o1", "object", png((10, 10, 200)), name="the espresso cup"),
    md.RefInput("f1", "fashion", png((90, 90, 10)), name="the sneakers"),  # its answer names an unknown interaction
    md.RefInput("b1", "background", png((10, 90, 90)), name="the Dragon Bridge"),
    md.RefInput("b2", "background", png((90, 10, 90))),  # landmark scene without a landmark name
]


def by_image(request: JudgeRequest) -> JudgeAnswer:
    ref = next(r for r in REFS if r.image == request.images[0])
    values = {
        "p1": PERSON,
        "o1": ITEM,
        "f1": {"size_category": "small", "interactions": ["wear", "juggle"]},
        "b1": BACKGROUND,
        "b2": {"scene_type": "landmark", "landmark": "  "},
    }
    if ref.ref_id == "p2":
        return JudgeAnswer(raw='{"age_group": adult', error="invalid JSON: not a JSON object", attempts=5)
    return JudgeAnswer(value=values[ref.ref_id], attempts=1)


# --- schemas ---------------------------------------------------------------------------------------------


def test_schemas_use_the_builder_vocabularies_and_are_strict():
    identity = md.IDENTITY_SCHEMA["properties"]
    assert identity["age_group"]["enum"] == list(AGE_GROUPS)
    assert identity["gender"]["enum"] == ["female", "male", "unclear"]
    assert identity["ethnicity"]["enum"] == [
        "white",
        "black",
        "east_asian",
        "southeast_asian",
        "south_asian",
        "middle_eastern",
        "latino_hispanic",
        "unclear",
    ]
    item = md.ITEM_SCHEMA["properties"]
    assert item["size_category"]["enum"] == list(SIZE_CATEGORIES)
    assert item["interactions"]["items"]["enum"] == list(ITEM_INTERACTIONS)  # what the sampler binds with
    background = md.BACKGROUND_SCHEMA["properties"]
    assert background["scene_type"]["enum"] == list(SCENE_TYPES)
    assert background["landmark"]["type"] == ["string", "null"]
    for schema in md.SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert strict_compatible(schema)
    jsonschema.validate({"scene_type": "indoor", "landmark": None}, md.BACKGROUND_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"size_category": "huge", "interactions": ["hold"]}, md.ITEM_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"size_category": "small", "interactions": ["juggle"]}, md.ITEM_SCHEMA)


def test_requests_per_kind():
    requests = {r.ref_id: md.metadata_request(r) for r in REFS}
    assert requests["p1"].task == "curation.metadata.identity" and requests["p1"].schema is md.IDENTITY_SCHEMA
    assert requests["o1"].task == requests["f1"].task == "curation.metadata.item"
    assert requests["b1"].task == "curation.metadata.background"
    assert all(requests[r.ref_id].images == (r.image,) for r in REFS)
    # The curator's label helps name items and landmarks, but is kept out of the identity question.
    assert "the espresso cup" in requests["o1"].prompt and "the Dragon Bridge" in requests["b1"].prompt
    assert "the woman in red" not in requests["p1"].prompt
    for name in ITEM_INTERACTIONS:
        assert f"- {name}:" in requests["o1"].prompt
    with pytest.raises(ValueError, match="kind 'vehicle'"):
        md.metadata_request(md.RefInput("x", "vehicle", b"x"))


# --- extraction ------------------------------------------------------------------------------------------


def test_one_request_per_image_in_one_call_and_failures_keep_the_image():
    judge = ScriptedJudge(by_image)
    report = md.extract_metadata(judge, REFS)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == len(REFS)
    assert [e.ref_id for e in report.entries] == [r.ref_id for r in REFS]  # nothing dropped, input order

    assert report["p1"].ok and report["p1"].values == {
        "age_group": "adult",
        "gender": "female",
        "ethnicity": "east_asian",
        "apparel": ["red jacket"],
    }
    assert report["o1"].values == {"size_category": "small", "interactions": ["hold", "carry"]}  # builder order, once
    assert report["b1"].values == {"scene_type": "landmark", "landmark": "Dragon Bridge"}

    failed = {e.ref_id: e for e in report.failed}
    assert set(failed) == {"p2", "f1", "b2"}
    assert failed["p2"].error.startswith("judge: invalid JSON") and failed["p2"].attempts == 5
    assert "juggle" in failed["f1"].error
    assert "no landmark is named" in failed["b2"].error
    assert all(dict(e.values) == {} for e in failed.values())

    summary = report.as_dict()
    assert (summary["images"], summary["extracted"], summary["failed"], summary["requests"]) == (6, 3, 3, 6)
    rows = {r["ref_id"]: r for r in summary["rows"]}
    assert rows["p2"]["status"] == "failed" and rows["p2"]["age_group"] is None
    assert set(report.values) == {"p1", "o1", "b1"}


def test_parser_rules():
    assert md.parse_metadata("background", {"scene_type": "indoor", "landmark": ""}) == {
        "scene_type": "indoor",
        "landmark": None,
    }
    with pytest.raises(md.MetadataAnswerError, match="affords none"):
        md.parse_metadata("object", {"size_category": "large", "interactions": []})
    with pytest.raises(md.MetadataAnswerError, match="gender"):
        md.parse_metadata("person", {"age_group": "adult", "gender": "woman", "ethnicity": "white", "apparel": []})
    with pytest.raises(md.MetadataAnswerError, match="JSON object"):
        md.parse_metadata("person", ["adult"])


def test_bad_input_is_refused_before_asking():
    judge = ScriptedJudge(by_image)
    with pytest.raises(ValueError, match="'p1' appears twice"):
        md.extract_metadata(judge, [REFS[0], REFS[0]])
    with pytest.raises(ValueError, match="non-empty bytes"):
        md.extract_metadata(judge, [md.RefInput("e", "person", b"")])
    assert judge.calls == []
    assert md.extract_metadata(judge, []).entries == ()


def test_ref_inputs_from_builder_rows():
    rows = [{"ref_id": "p1", "kind": "person", "name": "x", "image": {"bytes": b"abc", "path": "a.jpg"}}]
    assert md.ref_inputs(rows) == [md.RefInput("p1", "person", b"abc", "x")]


def test_real_client_against_the_scripted_server_malformed_answer_and_cache(tmp_path):
    """OpenAIJudge retries the malformed reply, then reports it; the image stays, failed; a rerun asks
    only the failed one again (answers are cached, failures are not)."""

    def script(body):
        text = user_text(body)
        if "reference photo of one person" in text:
            return answer({"age_group": "senior", "gender": "male", "ethnicity": "white", "apparel": ["grey suit"]})
        if "background scene" in text:
            return answer({"scene_type": "cityscape", "landmark": None})
        return malformed()

    refs = [REFS[0], REFS[3], REFS[5]]  # person, fashion (malformed), background
    config = dict(model="meta-test", backoff_s=0.01, backoff_cap_s=0.02, max_retries=1, timeout_s=5.0)
    with ScriptedServer(script) as server:
        cache = AnswerCache(tmp_path / "answers")
        judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, **config), cache=cache)
        report = md.extract_metadata(judge, refs)
        assert len(server.requests) == 2 + 2  # two good answers, the malformed one tried twice
        assert [e.ref_id for e in report.entries] == ["p1", "f1", "b2"]
        assert report["p1"].values["age_group"] == "senior" and report["b2"].values == {
            "scene_type": "cityscape",
            "landmark": None,
        }
        assert not report["f1"].ok and "invalid JSON" in report["f1"].error and report["f1"].attempts == 2
        body = server.requests[0].body
        assert body["response_format"]["json_schema"]["schema"] in list(md.SCHEMAS.values())

        server.reset()
        again = OpenAIJudge(JudgeConfig(base_url=server.base_url, **config), cache=cache)
        rerun = md.extract_metadata(again, refs)
        assert len(server.requests) == 2  # only the failed image is asked again
        assert rerun["p1"].cached and rerun["b2"].cached and not rerun["f1"].ok


# --- merging -------------------------------------------------------------------------------------------------


def row(ref_id: str, kind: str, entity_id: str | None = None, **values) -> dict:
    base = {
        "ref_id": ref_id,
        "entity_id": entity_id or ref_id,
        "kind": kind,
        "age_group": None,
        "gender": None,
        "ethnicity": None,
        "size_category": None,
        "interactions": None,
        "scene_type": None,
        "landmark": None,
    }
    return {**base, **values}


def test_merge_fills_empty_cells_and_never_overwrites_curated_values():
    rows = [
        row("p1", "person", gender="female", ethnicity="White"),  # curated; extraction agrees up to case
        row("p2", "person", age_group="senior"),  # curated age disagrees with the extraction
        row("o1", "object"),
        row("b1", "background", scene_type="cityscape"),
        row("x1", "person"),  # never extracted
    ]
    extracted = {
        "p1": {"age_group": "adult", "gender": "female", "ethnicity": "white", "apparel": ["red jacket"]},
        "p2": {"age_group": "adult", "gender": "male", "ethnicity": "black", "apparel": []},
        "o1": {"size_category": "small", "interactions": ["hold", "carry"]},
        "b1": {"scene_type": "landmark", "landmark": "Dragon Bridge"},
    }
    before = [dict(r) for r in rows]
    merged = md.merge_metadata(rows, extracted)
    assert rows == before  # copied, not changed in place
    out = {r["ref_id"]: r for r in merged.rows}
    assert out["p1"] == {**rows[0], "age_group": "adult", "gender": "female", "ethnicity": "White"}
    assert "apparel" not in out["p1"]  # no such column in the references config
    assert out["p2"]["age_group"] == "senior" and out["p2"]["gender"] == "male"
    assert out["o1"]["interactions"] == ["hold", "carry"] and out["o1"]["size_category"] == "small"
    assert out["b1"]["scene_type"] == "cityscape" and out["b1"]["landmark"] == "Dragon Bridge"
    assert [(c.ref_id, c.field, c.curated, c.extracted, c.applied) for c in merged.conflicts] == [
        ("p2", "age_group", "senior", "adult", False),
        ("b1", "scene_type", "cityscape", "landmark", False),
    ]
    assert merged.missing == ["x1"]
    assert ("p1", "age_group", "adult") in merged.filled and ("p1", "gender", "female") not in merged.filled

    forced = md.merge_metadata(rows, extracted, overwrite=True)
    out = {r["ref_id"]: r for r in forced.rows}
    assert out["p2"]["age_group"] == "adult" and out["b1"]["scene_type"] == "landmark"
    assert all(c.applied for c in forced.conflicts) and len(forced.conflicts) == 2


def test_merge_takes_a_metadata_report_and_skips_failed_images():
    report = md.extract_metadata(ScriptedJudge(by_image), REFS)
    rows = [row(r.ref_id, r.kind) for r in REFS]
    merged = md.merge_metadata(rows, report)
    assert sorted(merged.missing) == ["b2", "f1", "p2"]
    out = {r["ref_id"]: r for r in merged.rows}
    assert out["p2"] == rows[1]  # the failed image is kept as it was
    assert out["p1"]["ethnicity"] == "east_asian"


def test_merge_makes_extracted_item_values_agree_across_an_entity():
    rows = [
        row("bag-1", "fashion", "bag"),
        row("bag-2", "fashion", "bag"),
        row("bag-3", "fashion", "bag"),
        row("cup-1", "object", "cup", size_category="small", interactions=["hold"]),
        row("cup-2", "object", "cup"),
    ]
    extracted = {
        "bag-1": {"size_category": "small", "interactions": ["hold", "wear", "carry"]},
        "bag-2": {"size_category": "medium", "interactions": ["hold", "carry"]},
        "bag-3": {"size_category": "medium", "interactions": ["carry", "hold", "look_at"]},
        "cup-2": {"size_category": "medium", "interactions": ["hold", "use"]},
    }
    merged = md.merge_metadata(rows, extracted)
    out = {r["ref_id"]: r for r in merged.rows}
    assert [out[f"bag-{i}"]["size_category"] for i in (1, 2, 3)] == ["medium"] * 3  # the majority
    assert [out[f"bag-{i}"]["interactions"] for i in (1, 2, 3)] == [["hold", "carry"]] * 3  # what all afford
    # The curated cup-1 stays; the extracted cup-2 follows the majority (a 1-1 tie goes to the larger size).
    assert out["cup-1"]["size_category"] == "small" and out["cup-1"]["interactions"] == ["hold"]
    assert out["cup-2"]["size_category"] == "medium" and out["cup-2"]["interactions"] == ["hold"]
    assert sorted(merged.reconciled) == ["bag", "cup"]


# --- the demographic audit -------------------------------------------------------------------------------------


def audit_rows() -> list[dict]:
    return [
        row("p1", "person", "p1", gender="female", age_group="adult", ethnicity="white"),
        row("p2", "person", "p2", gender="female", age_group="senior", ethnicity="white"),
        row("p3", "person", "p3", gender="male", age_group="adult", ethnicity="black"),
        row("p4a", "person", "p4", gender="male", age_group="young_adult", ethnicity="white"),
        row("p4b", "person", "p4", gender="male", age_group="young_adult", ethnicity="white"),
        row("p5a", "person", "p5", gender="female", age_group="adult", ethnicity="east_asian"),
        row("p5b", "person", "p5", gender="female", age_group="adult", ethnicity="south_asian"),
        row("p6", "person", "p6", gender="unclear", age_group="child", ethnicity="white"),
        row("o1", "object", "o1", size_category="small", interactions=["hold"]),
    ]


def cell(report: md.BalanceReport, axis: str, group: str) -> dict:
    rows = report.table[(report.table["axis"] == axis) & (report.table["group"] == group)]
    assert len(rows) == 1, (axis, group)
    return rows.iloc[0].to_dict()


def test_demographic_balance_by_hand():
    report = md.demographic_balance(audit_rows(), min_ratio=0.5)
    assert report.n_identities == 6  # p4 and p5 have two images each; the object does not count
    # gender: p6 is unclear -> unknown; known 5: female 3 (p1 p2 p5), male 2. Parity 1/2, flag below 1/4.
    assert cell(report, "gender", "female")["count"] == 3 and cell(report, "gender", "female")[
        "share"
    ] == pytest.approx(0.6)
    assert cell(report, "gender", "male")["share"] == pytest.approx(0.4)
    assert cell(report, "gender", "(unknown)")["count"] == 1
    # age: child 1, young_adult 1, adult 3, senior 1 of 6. Parity 1/4, flag below 1/8: none (1/6 > 1/8).
    assert [cell(report, "age_group", g)["count"] for g in AGE_GROUPS] == [1, 1, 3, 1]
    assert cell(report, "age_group", "adult")["share"] == pytest.approx(0.5)
    # ethnicity: p5's images disagree (east_asian, south_asian): the first seen wins on the tie.
    # white 4, black 1, east_asian 1 of 6. Seven groups: parity 1/7, flag below 1/14 (the four empty ones).
    assert cell(report, "ethnicity", "white")["count"] == 4
    assert (
        cell(report, "ethnicity", "east_asian")["count"] == 1 and cell(report, "ethnicity", "south_asian")["count"] == 0
    )
    assert cell(report, "ethnicity", "black")["parity"] == pytest.approx(1 / 7)
    assert report.inconsistent == {"p5": ["ethnicity"]}
    # gender x age: 5 known (p6 out); 2 x 4 groups, parity 1/8; female x adult = p1 + p5 = 2/5.
    assert cell(report, "gender x age_group", "female x adult")["share"] == pytest.approx(0.4)
    assert cell(report, "gender x age_group", "male x young_adult")["count"] == 1
    assert cell(report, "gender x age_group", "(unknown)")["count"] == 1
    flagged = set(report.flagged)
    assert flagged == {
        ("ethnicity", "southeast_asian"),
        ("ethnicity", "south_asian"),
        ("ethnicity", "middle_eastern"),
        ("ethnicity", "latino_hispanic"),
        *{
            ("gender x age_group", g)
            for g in ("female x child", "female x young_adult", "male x child", "male x senior")
        },
        # gender x ethnicity: 5 known, 14 groups; all but female x white (2), female x east_asian,
        # male x white, male x black are empty.
        *{
            ("gender x ethnicity", f"{g} x {e}")
            for g in ("female", "male")
            for e in (
                "white",
                "black",
                "east_asian",
                "southeast_asian",
                "south_asian",
                "middle_eastern",
                "latino_hispanic",
            )
            if (g, e) not in {("female", "white"), ("female", "east_asian"), ("male", "white"), ("male", "black")}
        },
        # age x ethnicity: 6 known, 28 groups; filled: adult x white, senior x white, adult x black,
        # young_adult x white, adult x east_asian, child x white.
        *{
            ("age_group x ethnicity", f"{a} x {e}")
            for a in AGE_GROUPS
            for e in (
                "white",
                "black",
                "east_asian",
                "southeast_asian",
                "south_asian",
                "middle_eastern",
                "latino_hispanic",
            )
            if (a, e)
            not in {
                ("adult", "white"),
                ("senior", "white"),
                ("adult", "black"),
                ("young_adult", "white"),
                ("adult", "east_asian"),
                ("child", "white"),
            }
        },
    }
    assert math.isnan(cell(report, "gender", "(unknown)")["share"])
    text = report.format()
    assert "female=3 (60%)" in text and "south_asian=0 (0%) LOW" in text
    assert report.as_dict()["identities"] == 6


def test_balance_threshold_and_own_labels():
    rows = [
        row(f"p{i}", "person", gender=g, age_group="adult", ethnicity=e)
        for i, (g, e) in enumerate([("female", "a"), ("female", "a"), ("female", "a"), ("male", "b")])
    ]
    report = md.demographic_balance(rows, min_ratio=0.8, groups={"ethnicity": ("a", "b")}, pairs=False)
    # male: 1/4 = 0.25 < 0.8 x 1/2 = 0.4 -> flagged; ethnicity b likewise.
    assert set(report.flagged) >= {("gender", "male"), ("ethnicity", "b")}
    assert ("gender", "female") not in report.flagged
    assert set(report.table["axis"]) == {"gender", "age_group", "ethnicity"}
    with pytest.raises(ValueError, match="min_ratio"):
        md.demographic_balance(rows, min_ratio=2)
