"""The judge card (judge/controls.py, judge/card.py) through the real scoring path, and the judge key.

Judges are scripted (control_judges.py): a truthful one that looks at the pixels, a lenient one that
says "nothing changed" / "yes" to everything. Expected card values are counted here from what each
judge does with each control picture, not read back from the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from control_judges import CountingJudge, LenientJudge, TruthfulJudge, question_ids

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge.card import INCOMPLETE_ABOVE, judge_key
from idbench.evaluate_pkg.judge.types import JudgeAnswer
from idbench.evaluate_pkg.runner import judge_summary, score_submission

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

CHARIS_METRICS = ("charis_score", "holistic_score")
VQA_METRICS = ("attr_vqa", "attr_vqa_itt")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    for name in ("charis", "cogcanvas"):
        build(name, out=root / name)
        make_baseline("collage", load_benchmark_data(root / name), root / f"{name}-sub", size=64)
    return root


def _score(built: Path, benchmark: str, judge, out: Path | None, metrics, cache: Path | None = None) -> dict:
    """Scored with the session's feature cache (the default), or ``cache`` where the judge caches its
    answers (a JudgeConfig's, under ``cache/judge``): the scripted judges cache nothing."""
    options = ScoreOptions(profile="tiny", metrics=metrics, judge=judge)
    return score_submission(
        built / f"{benchmark}-sub", built / benchmark, out, options, cache_dir=cache, progress=False
    )


@pytest.mark.slow
def test_a_truthful_judge_passes_its_controls(built, tmp_path):
    for benchmark, metrics, kinds in (
        (
            "charis",
            CHARIS_METRICS,
            {f"charis_score.{k}" for k in ("copy", "mirror", "other_identity", "blank", "occlusion")}
            | {f"holistic_score.{k}" for k in ("copy", "mirror", "other_identity", "blank")},
        ),
        ("cogcanvas", VQA_METRICS, {"attr_vqa.collage", "attr_vqa.mirrored", "attr_vqa.blank"}),
    ):
        data = load_benchmark_data(built / benchmark)
        out = tmp_path / benchmark
        summary = _score(built, benchmark, TruthfulJudge(data), out, metrics)
        judge = summary["judge"]
        card = judge["card"]
        assert judge["calibrated"] is True and card["calibrated"] is True and card["reason"] is None
        assert set(card["controls"]) == kinds
        assert all(e["accuracy"] == 1.0 and e["failed"] == 0 and e["n"] > 0 for e in card["controls"].values())
        assert card["accuracy"] == 1.0 and card["failure_rate"] == 0.0
        assert card["yes_rate"] == card["expected_yes_rate"]  # it affirms exactly the true "yes" controls
        assert card["repeat"] == {"n": 4, "agreement": 1.0}
        assert judge["key"] == "scripted-truthful" and judge["incomplete"] == {}
        # CHARIS: 4 subjects x 5 pair kinds for charis_score and 4 for holistic_score.
        if benchmark == "charis":
            assert {e["n"] for e in card["controls"].values()} == {4}
        report = (out / "report.md").read_text()
        assert "## Judge card" in report and "**calibrated**" in report and "uncalibrated judge" not in report
        assert "coverage 100%" in report
        # The controls stay out of the model's rows: every row is a pair of the submission.
        results = pd.read_parquet(out / "results.parquet")
        assert set(zip(results["prompt_id"], results["seed"])) <= set(data.required_pairs)
        assert (results["metric"] == metrics[0]).sum() == len(data.required_pairs)
        saved = json.loads((out / "aggregates.json").read_text())
        assert saved["judge"]["card"]["accuracy"] == 1.0 and saved["judge"]["card"]["evidence"]


@pytest.mark.slow
def test_a_lenient_judge_fails_its_controls_and_its_run_is_marked(built, tmp_path):
    summary = _score(built, "charis", LenientJudge(), tmp_path / "charis", CHARIS_METRICS)
    card = summary["judge"]["card"]
    # "Nothing changed" is right for a copy and a mirror image only, wrong for the three other kinds.
    assert {k: e["accuracy"] for k, e in card["controls"].items()} == {
        "charis_score.copy": 1.0,
        "charis_score.mirror": 1.0,
        "charis_score.other_identity": 0.0,
        "charis_score.blank": 0.0,
        "charis_score.occlusion": 0.0,
        "holistic_score.copy": 1.0,
        "holistic_score.mirror": 1.0,
        "holistic_score.other_identity": 0.0,
        "holistic_score.blank": 0.0,
    }
    assert card["accuracy"] == pytest.approx(4 / 9) and card["yes_rate"] == 1.0
    assert summary["judge"]["calibrated"] is False and "below the floor" in summary["judge"]["reason"]
    report = (tmp_path / "charis" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| `charis_score` |"))
    assert "uncalibrated judge" in row

    summary = _score(built, "cogcanvas", LenientJudge(), tmp_path / "cogcanvas", VQA_METRICS)
    card = summary["judge"]["card"]
    # "yes" to everything: the facts of the collage and the negatives of its mirror image right, half of
    # each; every question about a blank picture wrong.
    assert {k: e["accuracy"] for k, e in card["controls"].items()} == {
        "attr_vqa.collage": 0.5,
        "attr_vqa.mirrored": 0.5,
        "attr_vqa.blank": 0.0,
    }
    assert card["yes_rate"] == 1.0 and summary["judge"]["calibrated"] is False
    report = (tmp_path / "cogcanvas" / "report.md").read_text()
    assert "uncalibrated judge" in next(line for line in report.splitlines() if line.startswith("| `attr_vqa` |"))


@pytest.mark.slow
def test_an_always_no_judge_is_uncalibrated_although_it_is_right_on_every_blank(built):
    class AlwaysNo:
        model = "scripted-always-no"

        def ask(self, requests):
            return [
                JudgeAnswer(value={"answers": [{"question_id": q, "answer": "no"} for q in question_ids(r.schema)]})
                for r in requests
            ]

    summary = _score(built, "cogcanvas", AlwaysNo(), None, ("attr_vqa",))
    card = summary["judge"]["card"]
    assert card["controls"]["attr_vqa.blank"]["accuracy"] == 1.0 and card["yes_rate"] == 0.0
    assert card["accuracy"] == pytest.approx((0.5 + 0.5 + 1.0) / 3) and card["calibrated"] is False


class FailsOnHard:
    """Truthful, except that on "hard" images (every other prompt) it fails instead of answering."""

    def __init__(self, data, fail: bool):
        self.truthful, self.fail = TruthfulJudge(data), fail
        self.model = "scripted-hard-" + ("fails" if fail else "says-no")

    def ask(self, requests):
        out = []
        for request in requests:
            ids = question_ids(request.schema)
            hard = ids[0].rsplit("-q", 1)[0] in self.hard
            if not hard:
                out.append(self.truthful.answer(request))
            elif self.fail:
                out.append(JudgeAnswer(error="answer does not match the schema (after 5 attempts)"))
            else:  # it does not see the facts on that image: "no"
                out.append(JudgeAnswer(value={"answers": [{"question_id": q, "answer": "no"} for q in ids]}))
        return out


@pytest.mark.slow
def test_a_judge_that_fails_on_hard_images_does_not_lift_a_model_on_attr_vqa_itt(built):
    data = load_benchmark_data(built / "cogcanvas")
    hard = set(sorted(data.prompt_rows)[1::2])
    scores = {}
    for fail in (False, True):
        judge = FailsOnHard(data, fail)
        judge.hard = hard
        summary = _score(built, "cogcanvas", judge, None, VQA_METRICS)
        overall = summary["aggregates"]["overall"]
        scores[fail] = (overall["attr_vqa"]["mean"], overall["attr_vqa_itt"]["mean"], summary["judge"]["incomplete"])
    # Counted by hand: easy images have every fact confirmed (1), hard ones none (0) or none answered.
    easy_share = 1 - len(hard) / len(data.prompt_rows)
    said_no, failed = scores[False], scores[True]
    assert said_no[0] == pytest.approx(easy_share) and said_no[1] == pytest.approx(easy_share)
    assert failed[0] == pytest.approx(1.0)  # failures left out: the paper's definition is lifted to 100 %
    assert failed[1] == pytest.approx(said_no[1])  # intent to treat: no lift at all
    assert said_no[2] == {} and set(failed[2]) == {"attr_vqa", "attr_vqa_itt"}
    assert all(rate > INCOMPLETE_ABOVE for rate in failed[2].values())


def test_the_judge_key_names_model_revision_and_settings_and_nothing_secret():
    from idbench.evaluate_pkg.judge import JudgeConfig, OpenAIJudge

    def key(**config):
        base = {"base_url": "https://judge.example.org:8443/v1", "model": "Qwen/Qwen2.5-VL-7B-Instruct"}
        return judge_key(judge_summary(OpenAIJudge(JudgeConfig(**{**base, **config}), api_key="sk-secret")))

    same = key()
    assert same == key() == key(concurrency=64, max_retries=9)  # throughput settings do not change answers
    assert same == (
        "Qwen/Qwen2.5-VL-7B-Instruct@judge.example.org;temperature=0.0;max_tokens=1024;"
        "max_image_side=768;structured=auto"
    )
    assert "sk-secret" not in same and "8443" not in same
    with pytest.raises(ValueError, match="a user part"):  # a key in the URL never gets as far as a judge
        key(base_url="https://user:hunter2@judge.example.org:8443/v1")
    others = {
        key(model="Qwen/Qwen2.5-VL-72B-Instruct"),
        key(temperature=0.7),
        key(max_image_side=448),
        key(revision="abc123"),
        key(structured="json_schema"),
        key(max_tokens=512),
    }
    assert len(others) == 6 and same not in others
    assert key(revision="abc123").startswith("Qwen/Qwen2.5-VL-7B-Instruct@abc123;")
    assert judge_key(judge_summary(LenientJudge())) == "scripted-lenient"
    assert judge_key(None) is None


@pytest.mark.slow
def test_controls_are_asked_once_the_second_run_sends_nothing(built, tmp_path, monkeypatch, seeded_cache):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from openai_server import ScriptedServer, answer

    from idbench.evaluate_pkg.judge import JudgeConfig

    def yes(body):
        schema = body["response_format"]["json_schema"]["schema"]
        ids = schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"]
        return answer({"answers": [{"question_id": i, "answer": "yes"} for i in ids]})

    with ScriptedServer(yes) as server:
        config = JudgeConfig(base_url=server.base_url, model="scripted-vlm", concurrency=8)
        cache = seeded_cache()  # the judge's answers of its own, the session's features
        first = _score(built, "cogcanvas", config, tmp_path / "one", ("attr_vqa",), cache)
        sent = len(server.requests)
        card = first["judge"]["card"]
        images = len(load_benchmark_data(built / "cogcanvas").required_pairs)
        # One request per submission image, one per control picture, and the repeats (new samples).
        assert sent == images + card["requests"]["answers"] and card["repeat"]["n"] == 4
        assert first["judge"]["stats"]["requests_sent"] == images  # the submission's own judging only
        again = _score(built, "cogcanvas", config, tmp_path / "two", ("attr_vqa",), cache)
        assert len(server.requests) == sent  # nothing new: controls and repeats came from the cache
        assert again["judge"]["card"]["requests"]["cached"] == card["requests"]["answers"]
        assert {k: v for k, v in again["judge"]["card"].items() if k != "requests"} == {
            k: v for k, v in card.items() if k != "requests"
        }


@pytest.mark.slow
def test_counting_wrapper_sees_each_control_request_once_per_run(built):
    data = load_benchmark_data(built / "charis")
    counting = CountingJudge(TruthfulJudge(data))
    summary = _score(built, "charis", counting, None, ("holistic_score",))
    # holistic: one request per submission pair, per control pair (4 subjects x 4 kinds), plus 4 repeats.
    assert counting.requests == len(data.required_pairs) + 16 + 4
    assert summary["judge"]["card"]["requests"] == {"answers": 20, "cached": 0}


def test_itt_accuracy_counts_failures_as_not_confirmed():
    from idbench.benchmarks.cogcanvas.vqa import QuestionOutcome, fact_tally, sample_results

    def o(qid, expected, given):
        return QuestionOutcome("p", 0, 2, qid, "position", expected, given, None if given else "judge_error")

    outcomes = [o("a", "yes", "yes"), o("b", "yes", None), o("c", "yes", "no"), o("d", "no", None)]
    counts = fact_tally(outcomes)
    assert (counts.correct, counts.incorrect, counts.failed) == (1, 1, 1)
    assert counts.accuracy == 0.5 and counts.accuracy_itt == pytest.approx(1 / 3)
    values = {r.metric: r.value for r in sample_results(outcomes)}
    assert values["attr_vqa"] == 0.5 and values["attr_vqa_itt"] == pytest.approx(1 / 3)
    nothing = fact_tally([o("b", "yes", None)])
    assert math.isnan(nothing.accuracy) and nothing.accuracy_itt == 0.0


def test_a_repeat_is_a_new_sample_and_a_bad_cached_value_is_asked_again(tmp_path):
    import sys
    from dataclasses import replace

    sys.path.insert(0, str(Path(__file__).parent))
    from openai_server import ScriptedServer, answer

    from idbench.evaluate_pkg.judge import AnswerCache, JudgeConfig, JudgeRequest, OpenAIJudge

    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    request = JudgeRequest(task="t", prompt="Is it?", schema=schema)
    with ScriptedServer(lambda body: answer({"ok": True})) as server:
        judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, model="m"), cache=AnswerCache(tmp_path / "answers"))
        first = judge.ask([request, replace(request, repeat=1)])
        assert len(server.requests) == 2 and not any(a.cached for a in first)  # not merged, not replayed
        assert all(r.body["messages"] == server.requests[0].body["messages"] for r in server.requests)  # same prompt
        assert all(a.cached for a in judge.ask([request, replace(request, repeat=1)])) and len(server.requests) == 2
        # A stored value that breaks the schema (a damaged file) is never served: the question is asked again.
        for entry in (tmp_path / "answers").glob("??/*.json"):
            stored = json.loads(entry.read_text())
            entry.write_text(json.dumps({**stored, "value": {"ok": "maybe"}}))
        again = judge.ask([request])
        assert len(server.requests) == 3 and again[0].ok and not again[0].cached and again[0].value == {"ok": True}
