"""CogCanvas prompt synthesis and verification (benchmarks/cogcanvas/prompt_synthesis.py).

The scripted writer reads the slots and item names out of the request's rules line, so it writes a
text that passes the mention check unless told otherwise; the scripted verifier decides from the
prompt text. One test drives the real OpenAIJudge through the local scripted server.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "judge"))
from openai_server import ScriptedServer, answer, image_urls, user_text

from idbench.benchmarks.cogcanvas import prompt_synthesis as ps
from idbench.benchmarks.cogcanvas.sampling import sample_cogcanvas
from idbench.benchmarks.cogcanvas.spec import PROMPTS
from idbench.evaluate_pkg.judge import JudgeConfig, OpenAIJudge
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

ALL_PASS = {
    "interaction_plausible": True,
    "layout_feasible": True,
    "scene_compatible": True,
    "faithful": True,
    "reasons": [],
}


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (30, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


def make_tuple(prompt_id: str, background: str = "the Dragon Bridge", interaction: str = "hold") -> ps.PromptTuple:
    return ps.PromptTuple(
        prompt_id=prompt_id,
        persons=(
            ps.PersonSlot("A", "the woman in the red coat", "the espresso cup", interaction, "object", "small"),
            ps.PersonSlot("B", "the man with the grey beard", "the straw hat", "wear", "fashion", "small"),
        ),
        layout=("B", "A"),
        background=background,
        scene_type="landmark",
        landmark="Dragon Bridge",
        person_edges=(("B", "talks_to", "A"),),
        record={"prompt_id": prompt_id, "prompt": f"template text of {prompt_id}", "n_persons": 2},
    )


def is_writer(request: JudgeRequest) -> bool:
    return request.task == ps.WRITER_TASK


def written_text(request: JudgeRequest) -> str:
    """A text naming every slot and item the rules line asks for, marked when it is a rewrite."""
    rules = request.prompt.split("Rules:")[1]
    slots = re.findall(r'"(person [A-E])"', rules.split("; name the items")[0])
    items = re.findall(r'"([^"]+)"', rules.split("name the items exactly as")[1].split("; state")[0])
    background = re.search(r"Background: (.*?) \(", request.prompt).group(1)
    version = "rewritten" if "Your previous version" in request.prompt else "first"
    return f"At {background}, {' and '.join(slots)} stand with {' and '.join(items)} ({version})."


def prompt_under_review(request: JudgeRequest) -> str:
    return request.prompt.split('Prompt written from it:\n"')[1].split('"\n\nAnswer:')[0]


def verdict(**failed: str) -> JudgeAnswer:
    """A verifier answer failing the named checks with the given reasons."""
    value = {**ALL_PASS, **{name: False for name in failed}, "reasons": list(failed.values())}
    return JudgeAnswer(value=value, attempts=1)


class ScriptedJudge:
    model = "scripted"

    def __init__(
        self, verify: Callable[[JudgeRequest], JudgeAnswer], write: Callable[[JudgeRequest], JudgeAnswer] | None = None
    ):
        self.verify = verify
        self.write = write or (lambda r: JudgeAnswer(value={"prompt": written_text(r)}, attempts=1))
        self.calls: list[list[JudgeRequest]] = []

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        self.calls.append(list(requests))
        return [self.write(r) if is_writer(r) else self.verify(r) for r in requests]

    def tasks(self) -> list[tuple[str, int]]:
        return [(call[0].task.rsplit(".", 1)[1], len(call)) for call in self.calls]


# --- the loop --------------------------------------------------------------------------------------------


def test_the_verifier_rejects_the_first_version_and_accepts_the_rewrite():
    def verify(request):
        if "(first)" in prompt_under_review(request):
            return verdict(faithful="the order from left to right is not stated")
        return JudgeAnswer(value=ALL_PASS, attempts=1)

    judge = ScriptedJudge(verify)
    report = ps.synthesize_prompts(judge, [make_tuple("p1"), make_tuple("p2", "the Fansipan summit")], max_attempts=3)
    assert [o.status for o in report.outcomes] == ["accepted", "accepted"]
    first = report.outcomes[0]
    assert first.attempts == 2 and first.prompt.endswith("(rewritten).") and first.reasons == ()
    assert [a.action for a in first.history] == ["write", "rewrite"]
    assert first.history[0].verdict["faithful"] is False and first.history[0].next == "rewrite"
    assert first.checks == {
        "interaction_plausible": True,
        "layout_feasible": True,
        "scene_compatible": True,
        "faithful": True,
    }
    # The rewrite request quotes the rejected text and the verifier's reason.
    rewrite = judge.calls[2][0]
    assert "Your previous version was" in rewrite.prompt and "(first)" in rewrite.prompt
    assert "the order from left to right is not stated" in rewrite.prompt
    # Two waves of (writers, verifiers), each one ask across both prompts.
    assert judge.tasks() == [("write", 2), ("verify", 2), ("write", 2), ("verify", 2)]
    assert (report.ask_calls, report.writer_requests, report.verifier_requests) == (4, 4, 4)
    assert report.prompt_rows() == [
        {"prompt_id": "p1", "prompt": first.prompt, "n_persons": 2},
        {"prompt_id": "p2", "prompt": report.outcomes[1].prompt, "n_persons": 2},
    ]


def test_a_verifier_that_always_rejects_gives_up_after_the_bound_with_the_reasons():
    judge = ScriptedJudge(
        lambda r: verdict(scene_compatible="people cannot stand on the bay's water", interaction_plausible="x")
    )
    report = ps.synthesize_prompts(judge, [make_tuple("p1")], max_attempts=3)
    (outcome,) = report.outcomes
    assert outcome.status == "gave_up" and outcome.prompt is None and outcome.attempts == 3
    assert outcome.reasons == ("people cannot stand on the bay's water", "x")
    assert [a.next for a in outcome.history] == ["rewrite", "rewrite", None]
    assert len(judge.calls) == 6 == report.ask_calls
    assert outcome.checks["scene_compatible"] is False
    audit = report.as_dict()
    assert audit["gave_up"] == 1 and audit["failed_checks"] == {"interaction_plausible": 3, "scene_compatible": 3}
    assert audit["rows"][0]["reasons"] == ["people cannot stand on the bay's water", "x"]
    assert report.prompt_rows() == [{"prompt_id": "p1", "prompt": "template text of p1", "n_persons": 2}]
    assert report.prompt_rows(on_give_up="drop") == []


def test_a_tuple_level_failure_uses_the_resample_callback():
    def verify(request):
        if "wears the espresso cup" in request.prompt:
            return verdict(interaction_plausible="a person cannot wear an espresso cup")
        return JudgeAnswer(value=ALL_PASS, attempts=1)

    calls = []

    def resample(t: ps.PromptTuple, reasons: Sequence[str]) -> ps.PromptTuple:
        calls.append((t.prompt_id, tuple(reasons)))
        a, b = t.persons
        return replace(t, persons=(replace(a, interaction="hold"), b), record={**t.record, "resampled": True})

    judge = ScriptedJudge(verify)
    report = ps.synthesize_prompts(judge, [make_tuple("p1", interaction="wear")], resample=resample)
    (outcome,) = report.outcomes
    assert calls == [("p1", ("a person cannot wear an espresso cup",))]
    assert outcome.accepted and outcome.resamples == 1 and outcome.attempts == 2
    assert outcome.tuple.persons[0].interaction == "hold"
    assert [a.next for a in outcome.history] == ["resample", None]
    # The re-sampled tuple is written afresh, not as a rewrite of the old text.
    second_write = judge.calls[2][0]
    assert "holds the espresso cup" in second_write.prompt and "Your previous version" not in second_write.prompt
    assert report.prompt_rows()[0]["resampled"] is True


def test_resample_may_decline_and_is_not_called_on_the_last_attempt():
    calls = []

    def resample(t, reasons):
        calls.append(t.prompt_id)
        return None  # keep the tuple: rewrite instead

    judge = ScriptedJudge(lambda r: verdict(layout_feasible="five people do not fit on the bridge"))
    report = ps.synthesize_prompts(judge, [make_tuple("p1")], resample=resample, max_attempts=2)
    assert calls == ["p1"]  # after attempt 1 only; a replacement after the last attempt would be wasted
    assert report.outcomes[0].history[0].next == "rewrite" and report.outcomes[0].status == "gave_up"

    with pytest.raises(ValueError, match="in place of 'p1'"):
        ps.synthesize_prompts(
            ScriptedJudge(lambda r: verdict(layout_feasible="no")),
            [make_tuple("p1")],
            resample=lambda t, r: replace(t, prompt_id="p9"),
        )


def test_waves_batch_every_active_prompt_into_one_ask():
    """p1 passes at once, p2 after one rewrite, p3 never: the batches shrink as prompts finish."""

    def verify(request):
        text = prompt_under_review(request)
        if "p3 scene" in text or ("p2 scene" in text and "(first)" in text):
            return verdict(faithful="no")
        return JudgeAnswer(value=ALL_PASS, attempts=1)

    judge = ScriptedJudge(verify)
    tuples = [make_tuple(f"p{i}", background=f"the p{i} scene") for i in (1, 2, 3)]
    report = ps.synthesize_prompts(judge, tuples, max_attempts=3)
    assert judge.tasks() == [("write", 3), ("verify", 3), ("write", 2), ("verify", 2), ("write", 1), ("verify", 1)]
    assert [o.attempts for o in report.outcomes] == [1, 2, 3]
    assert [o.status for o in report.outcomes] == ["accepted", "accepted", "gave_up"]
    assert report.as_dict()["attempts_to_accept"] == {1: 1, 2: 1}
    assert (report.writer_requests, report.verifier_requests) == (6, 6)


def test_the_mention_check_rewrites_without_a_verifier_request():
    def write(request):
        if "Your previous version" in request.prompt:
            return JudgeAnswer(value={"prompt": written_text(request)}, attempts=1)
        return JudgeAnswer(
            value={"prompt": "Person B chats with person A, who holds a cup, at the bridge."}, attempts=1
        )

    judge = ScriptedJudge(lambda r: JudgeAnswer(value=ALL_PASS, attempts=1), write)
    report = ps.synthesize_prompts(judge, [make_tuple("p1")])
    assert judge.tasks() == [("write", 1), ("write", 1), ("verify", 1)]  # wave 1 had nothing to verify
    (outcome,) = report.outcomes
    assert outcome.accepted and outcome.attempts == 2
    assert outcome.history[0].mention_problems == (
        'the item of person A is not named as "the espresso cup"',
        'the item of person B is not named as "the straw hat"',
    )
    assert 'not named as "the straw hat"' in judge.calls[1][0].prompt


def test_mention_problems():
    t = make_tuple("p1")
    good = "Person B, in the Straw   Hat, talks to person A, who holds the espresso cup."
    assert ps.mention_problems(t, good) == []
    # "a person" is not person A; upper-case letters only name slots.
    bad = "A person holds the espresso cup beside person b in the straw hat, and person C waves."
    assert ps.mention_problems(t, bad) == [
        'person A is not named as "person A"',
        'person B is not named as "person B"',
        "mentions person C, who is not in the scene",
    ]


def test_failed_requests_writer_again_verifier_same_text():
    state = {"verify": 0, "write": 0}

    def write(request):
        state["write"] += 1
        if state["write"] == 1:
            return JudgeAnswer(error="HTTP 503: overloaded", attempts=5)
        return JudgeAnswer(value={"prompt": written_text(request)}, attempts=1)

    def verify(request):
        state["verify"] += 1
        if state["verify"] == 1:
            return JudgeAnswer(raw="yes", error="invalid JSON: not a JSON object", attempts=5)
        return JudgeAnswer(value=ALL_PASS, attempts=1)

    judge = ScriptedJudge(verify, write)
    report = ps.synthesize_prompts(judge, [make_tuple("p1")], max_attempts=3)
    (outcome,) = report.outcomes
    assert judge.tasks() == [("write", 1), ("write", 1), ("verify", 1), ("verify", 1)]
    assert [a.action for a in outcome.history] == ["write", "write", "reverify"]
    assert outcome.history[0].error == "writer: HTTP 503: overloaded"
    assert outcome.history[1].error.startswith("verifier: invalid JSON") and outcome.history[1].next == "reverify"
    assert outcome.accepted and outcome.attempts == 3


def test_bad_input():
    judge = ScriptedJudge(lambda r: JudgeAnswer(value=ALL_PASS))
    with pytest.raises(ValueError, match="appear more than once: p1"):
        ps.synthesize_prompts(judge, [make_tuple("p1"), make_tuple("p1")])
    with pytest.raises(ValueError, match="not an ordering"):
        ps.synthesize_prompts(judge, [replace(make_tuple("p1"), layout=("A", "C"))])
    with pytest.raises(ValueError, match="max_attempts"):
        ps.synthesize_prompts(judge, [make_tuple("p1")], max_attempts=0)
    assert judge.calls == []
    assert ps.synthesize_prompts(judge, []).outcomes == ()


# --- with the sampler and the real client ------------------------------------------------------------------------


def sampled() -> tuple[list[dict], dict[str, dict]]:
    def ref(ref_id, kind, name, **extra):
        return {
            "ref_id": ref_id,
            "entity_id": ref_id,
            "kind": kind,
            "name": name,
            "description": name,
            "size_category": None,
            "interactions": None,
            "scene_type": None,
            "landmark": None,
            "image": None,
            **extra,
        }

    refs = [
        ref("p-ann", "person", "the woman with the short grey hair"),
        ref("p-bo", "person", "the young man in the green hoodie"),
        ref("p-cy", "person", "the girl with the red scarf"),
        ref("o-cup", "object", "the espresso cup", size_category="small", interactions=["hold", "carry"]),
        ref("o-chair", "object", "the wooden chair", size_category="medium", interactions=["sit_on", "lean_on"]),
        ref("f-hat", "fashion", "the straw hat", size_category="small", interactions=["wear", "hold"]),
        ref(
            "b-bridge",
            "background",
            "the Dragon Bridge",
            scene_type="landmark",
            landmark="Dragon Bridge",
            image={"bytes": png(), "path": "bridge.png"},
        ),
    ]
    prompts, _ = sample_cogcanvas(refs, seed=3, n_prompts=2)
    return prompts, {r["ref_id"]: r for r in refs}


def test_tuples_from_sampled_records_and_rows_written_back():
    prompts, refs = sampled()
    tuples = [ps.tuple_from_record(p, refs) for p in prompts]
    for t, p in zip(tuples, prompts):
        assert [s.slot for s in t.persons] == [q["slot"] for q in p["persons"]]
        assert t.layout == tuple(p["layout"]) and t.background == "the Dragon Bridge"
        assert t.background_image == refs["b-bridge"]["image"]["bytes"]
        assert len(t.person_edges) == sum(
            e["relation"] not in {q["interaction"] for q in p["persons"]} for e in p["interaction_graph"]
        )
        assert "Background: the Dragon Bridge (landmark)." in ps.describe_tuple(t)
    report = ps.synthesize_prompts(ScriptedJudge(lambda r: JudgeAnswer(value=ALL_PASS)), tuples)
    rows = report.prompt_rows()
    assert [set(r) for r in rows] == [set(PROMPTS)] * 2
    for row, original, outcome in zip(rows, prompts, report.outcomes):
        assert row == {**original, "prompt": outcome.prompt}
    with pytest.raises(ValueError, match="'nope' is not among the references"):
        ps.tuple_from_record({**prompts[0], "background_ref_id": "nope"}, refs)


def test_real_client_against_the_scripted_server():
    def script(body):
        kind = body["response_format"]["json_schema"]["name"]
        text = user_text(body)
        if kind == "curation_cogcanvas_write":
            request = JudgeRequest(task=ps.WRITER_TASK, prompt=text, schema={})
            return answer({"prompt": written_text(request)})
        request = JudgeRequest(task=ps.VERIFIER_TASK, prompt=text, schema={})
        if "(first)" in prompt_under_review(request):
            return answer({**ALL_PASS, "faithful": False, "reasons": ["the hat is not on person B"]})
        return answer(ALL_PASS)

    prompts, refs = sampled()
    tuples = [ps.tuple_from_record(p, refs) for p in prompts]
    config = JudgeConfig(base_url="http://unused", model="synth-test", backoff_s=0.01, timeout_s=5.0)
    with ScriptedServer(script) as server:
        judge = OpenAIJudge(replace(config, base_url=server.base_url))
        report = ps.synthesize_prompts(judge, tuples, max_attempts=2)
        assert [o.status for o in report.outcomes] == ["accepted", "accepted"]
        assert all(o.attempts == 2 and "(rewritten)" in o.prompt for o in report.outcomes)
        assert len(server.requests) == 8 == report.writer_requests + report.verifier_requests
        verifier_bodies = [
            r.body
            for r in server.requests
            if r.body["response_format"]["json_schema"]["name"] == "curation_cogcanvas_verify"
        ]
        assert all(len(image_urls(b)) == 1 for b in verifier_bodies)  # the background picture is shown
        assert verifier_bodies[0]["response_format"]["json_schema"]["schema"] == ps.VERIFIER_SCHEMA
