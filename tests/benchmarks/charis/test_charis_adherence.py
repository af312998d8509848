"""CHARIS prompt adherence, intent to treat and charis_overall (issue 17 items 1 and 3).

Unit checks of the request, its parsing and the pure scoring functions, then scripted judges through
the real path (runner.score_submission on a build of the shipped samples): hiding failures does not
pay, copying the reference does not win, a judge that fails on hard images lifts nobody, and the
hide-prompts are the same for every model. Expected values are worked out here from the scripted
answers, never read back from the code under test.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from idbench.benchmarks.charis.adherence import (
    ADHERENCE_TASK,
    adherence_request,
    evaluate_adherence,
    hiding_phrases,
    identity_itt,
    overall_score,
    prompt_hides_subject,
)
from idbench.benchmarks.charis.judge import CharisPair, PairVerdict
from idbench.builders.build import build
from idbench.ekb import load_ekb
from idbench.evaluate_pkg.baselines import image_path, make_baseline
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge.types import JudgeAnswer
from idbench.evaluate_pkg.runner import score_submission

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sanity"))
from judges import PixelJudge, RuleJudge, charis_answer, follow_prompt, is_adherence, prompt_of

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

RANKED = ("charis_score", "charis_score_itt", "prompt_adherence", "charis_overall")
# The template phrases that ask for the subject to be hidden, as decided in transformations.yaml.
HIDING = {"seen from behind", "seen from far away as a small figure in the frame"}


@pytest.fixture(scope="module")
def ekb():
    return load_ekb()


def _pair(axes=("pose", "viewpoint", "lighting", "background", "style"), **phrases) -> CharisPair:
    return CharisPair(
        prompt_id="p1",
        seed=0,
        type="animal",
        style="photorealistic",
        axes=tuple(axes),
        reference=b"ref",
        generation=b"gen",
        prompt="The cat leaps, seen from behind.",
        phrases=phrases,
    )


class Fixed:
    model = "fixed"

    def __init__(self, *answers):
        self.answers = list(answers)

    def ask(self, requests):
        return [self.answers.pop(0) for _ in requests]


# --- the request and its parsing ------------------------------------------------------------------


def test_the_adherence_request_asks_each_prompted_axis_with_its_phrase_in_a_strict_schema(ekb):
    pair = _pair(pose="leaps mid-air", viewpoint="seen from behind")
    request = adherence_request(pair, ekb)
    assert request.task == ADHERENCE_TASK == "charis.adherence"
    assert request.images == (b"ref", b"gen")  # reference first, as every CHARIS request
    assert '- pose: "leaps mid-air"' in request.prompt and '- viewpoint: "seen from behind"' in request.prompt
    inner = request.schema["properties"]["transformations"]
    assert list(inner["properties"]) == list(pair.axes) and inner["required"] == list(pair.axes)
    assert inner["additionalProperties"] is False and request.schema["additionalProperties"] is False
    finding = inner["properties"]["pose"]
    assert list(finding["properties"]) == ["observation", "realised"]  # describe before labelling
    assert finding["additionalProperties"] is False


def _answer(realised: dict[str, bool]) -> JudgeAnswer:
    return JudgeAnswer(value={"transformations": {a: {"observation": "x", "realised": r} for a, r in realised.items()}})


def test_adherence_is_the_share_of_prompted_axes_realised_and_a_broken_answer_is_a_failure(ekb):
    pair = _pair()
    three_of_five = {"pose": True, "viewpoint": False, "lighting": True, "background": True, "style": False}
    missing_axis = {k: v for k, v in three_of_five.items() if k != "style"}
    string_bool = {**three_of_five, "pose": "yes"}
    verdicts = evaluate_adherence(
        Fixed(_answer(three_of_five), _answer(missing_axis), _answer(string_bool), JudgeAnswer(error="timed out")),
        [pair] * 4,
        ekb,
    )
    assert verdicts[0].score == pytest.approx(3 / 5) and verdicts[0].failure is None
    assert verdicts[0].evidence["not_realised"] == ["viewpoint", "style"]
    for broken in verdicts[1:]:
        assert broken.score is None and broken.judge_failure
    assert "style" in verdicts[1].failure and "realised" in verdicts[2].failure and "timed out" in verdicts[3].failure


# --- which prompts hide the subject ---------------------------------------------------------------


def test_of_the_template_phrases_exactly_the_back_view_and_the_distant_figure_hide_the_subject(ekb):
    found = {
        (axis, phrase)
        for axis, t in ekb.transformations.items()
        for phrases in t.phrases.values()
        for phrase in phrases
        if hiding_phrases({axis: phrase}, ekb)
    }
    assert found == {("viewpoint", p) for p in HIDING}
    # The cue is read on its own axis only: an occlusion phrase "from behind a tree trunk" hides nothing.
    assert hiding_phrases({"occlusion": "peeking out from behind a tree trunk"}, ekb) == {}
    assert hiding_phrases({"pose": "seen from behind"}, ekb) == {}


def test_free_text_phrases_of_curated_prompts_are_read_by_the_same_cues(ekb):
    assert hiding_phrases({"viewpoint": "viewed from the back, walking off"}, ekb)
    assert hiding_phrases({"occlusion": "almost entirely hidden behind a door"}, ekb)
    assert not hiding_phrases({"occlusion": "half hidden behind a stack of cardboard boxes"}, ekb)
    row = {
        "transformations": [{"axis": "pose", "phrase": "sits"}, {"axis": "viewpoint", "phrase": "Seen  FROM BEHIND"}]
    }
    assert prompt_hides_subject(row, ekb) and not prompt_hides_subject(
        {"transformations": row["transformations"][:1]}, ekb
    )


# --- the pure scoring functions -------------------------------------------------------------------


def _verdict(score, kind=None) -> PairVerdict:
    evidence = {"failure_kind": kind} if kind else {}
    return PairVerdict("p", 0, None if score is None else "exact", score, evidence, kind and "why", 1)


def test_intent_to_treat_scores_a_missing_category_zero_and_a_hide_prompt_nan():
    assert identity_itt(_verdict(2 / 3), hidden_by_prompt=False) == pytest.approx(2 / 3)
    assert identity_itt(_verdict(None, "insufficient_evidence"), hidden_by_prompt=False) == 0.0
    assert identity_itt(_verdict(None, "judge"), hidden_by_prompt=False) == 0.0
    assert math.isnan(identity_itt(_verdict(1.0), hidden_by_prompt=True))
    assert overall_score(1.0, 0.0) == 0.0 and overall_score(0.0, 1.0) == 0.0
    assert overall_score(1 / 3, 0.75) == pytest.approx(0.5)  # sqrt(0.25)
    assert math.isnan(overall_score(math.nan, 1.0))


# --- through the runner on the sample build --------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("adherence")
    build("charis", out=root / "data", n_prompts=40)
    data = load_benchmark_data(root / "data", cache_dir=str(root / "hf"))
    for name in ("copy", "impostor", "blank"):
        make_baseline(name, data, root / name, size=64)
    write_follows(data, root / "follows")
    return root, data


def write_follows(data, out: Path, keep=None) -> Path:
    """A submission of follow_prompt pictures (a new figure in the reference's colours, no copy); where
    ``keep(prompt_id)`` is False, a blank canvas instead."""
    from PIL import Image

    (out / "images").mkdir(parents=True)
    blank = out / "blank.png"
    Image.new("RGB", (64, 64), (128, 128, 128)).save(blank)
    rows = []
    for index, (prompt_id, seed) in enumerate(data.required_pairs):
        file = image_path(prompt_id, seed)
        if keep is None or keep(prompt_id):
            subject = data.prompt_rows[prompt_id]["subject_id"]
            (out / file).write_bytes(follow_prompt(data.reference_bytes[subject], index))
        else:
            (out / file).write_bytes(blank.read_bytes())
        rows.append((prompt_id, seed, file))
    blank.unlink()
    with (out / "manifest.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([("prompt_id", "seed", "file"), *rows])
    (out / "submission.json").write_text(json.dumps({"benchmark": "charis", "model": f"follows-{out.name}"}))
    return out


_RUNS: list[str] = []


def _score(root: Path, data, submission: str, judge, metrics=RANKED) -> tuple[dict, pd.DataFrame]:
    _RUNS.append(submission)
    out = root / "scores" / f"{len(_RUNS)}-{submission}-{judge.model}"
    options = ScoreOptions(profile="tiny", metrics=metrics, judge=judge)
    summary = score_submission(
        root / submission, data, out, options, cache_dir=root / "cache", progress=False, models=Models(options)
    )
    rows = pd.read_parquet(out / "results.parquet")
    return summary["aggregates"]["overall"], rows


def _per_image(rows: pd.DataFrame, metric: str) -> pd.Series:
    return rows[rows["metric"] == metric].set_index("prompt_id")["value"].sort_index()


def _hide_prompts(data) -> set[str]:
    """Independently of the code: prompts whose phrases are one of the two hiding template phrases."""
    return {p for p, row in data.prompt_rows.items() if any(t["phrase"] in HIDING for t in row["transformations"])}


@pytest.mark.slow
def test_a_model_that_hides_its_failures_scores_no_better_on_the_ranked_variants(built):
    root, data = built
    hide = _hide_prompts(data)
    others = sorted(set(data.prompt_rows) - hide)
    failed = {
        data.prompt_rows[p]["prompt"] for p in others[: len(others) * 3 // 10]
    }  # 30 % of the scoreable pairs fail

    def judge(name: str, hidden: bool) -> RuleJudge:
        def answer(request):
            if is_adherence(request):
                return charis_answer(request, visible=True, changed=False, realised=True)
            if prompt_of(request) not in failed:
                return charis_answer(request, visible=True, changed=False)
            if hidden:  # the failure is a back view: no core feature in view
                return charis_answer(request, visible=True, changed=False, hide_levels=frozenset({"decisive", "core"}))
            return charis_answer(request, visible=True, changed=True)  # the failure is seen: mismatch

        return RuleJudge(name, lambda q: "no", answer)

    shows, _ = _score(root, data, "copy", judge("shows", hidden=False))
    hides, _ = _score(root, data, "copy", judge("hides", hidden=True))
    n, k = len(others), len(failed)
    # The paper's score (failures left out) rewards hiding: 1.0 against (n_all - k) / n_all.
    assert hides["charis_score"]["mean"] == pytest.approx(1.0)
    assert shows["charis_score"]["mean"] == pytest.approx((len(data.prompt_rows) - k) / len(data.prompt_rows))
    # The ranked ones do not: both (n - k) / n over the prompts that do not hide the subject.
    for metric in ("charis_score_itt", "charis_overall"):
        assert hides[metric]["mean"] == pytest.approx((n - k) / n) == pytest.approx(shows[metric]["mean"])
    assert hides["charis_score_itt.not_confirmed"]["mean"] == pytest.approx(k / n)
    assert shows["charis_score_itt.not_confirmed"]["mean"] == 0.0


@pytest.mark.slow
def test_the_copy_baseline_is_not_first_on_charis_overall_and_a_prompt_following_set_is(built):
    root, data = built
    means = {name: _score(root, data, name, PixelJudge())[0] for name in ("copy", "impostor", "blank", "follows")}
    overall = {name: m["charis_overall"]["mean"] for name, m in means.items()}
    assert overall["follows"] == pytest.approx(1.0)  # identity exact x every transformation realised
    assert overall["copy"] == overall["impostor"] == overall["blank"] == 0.0
    assert max(overall, key=overall.get) == "follows"
    # The paper's identity score alone ranks the copy level with the prompt-following set.
    assert means["copy"]["charis_score"]["mean"] == pytest.approx(1.0) == means["follows"]["charis_score"]["mean"]
    assert means["copy"]["prompt_adherence"]["mean"] == 0.0 and means["follows"]["prompt_adherence"]["mean"] == 1.0
    # The prompt-following stand-in is a new picture, not a copy: the copy check flags the copy only.
    assert means["copy"]["copy.flag"]["mean"] == 1.0 and means["follows"]["copy.flag"]["mean"] == 0.0


@pytest.mark.slow
def test_a_judge_that_fails_on_hard_images_does_not_lift_a_model(built):
    root, data = built
    prompts = sorted(data.prompt_rows)
    hard = set(prompts[::3])  # the model draws a blank canvas there
    write_follows(data, root / "mixed", keep=lambda p: p not in hard)
    hard_texts = {data.prompt_rows[p]["prompt"] for p in hard}
    truthful, _ = _score(root, data, "mixed", PixelJudge("truthful"))
    failing, _ = _score(root, data, "mixed", PixelJudge("fails-on-hard", fail=lambda text: text in hard_texts))
    # Left out, the failures lift the paper's score to 1; the ranked variants count them as 0.
    assert failing["charis_score"]["mean"] == pytest.approx(1.0)
    assert truthful["charis_score"]["mean"] == pytest.approx(1 - len(hard) / len(prompts))  # blank: mismatch
    for metric in ("charis_score_itt", "charis_overall"):
        assert failing[metric]["mean"] <= truthful[metric]["mean"] + 1e-12
    assert failing["charis_overall"]["mean"] == pytest.approx(truthful["charis_overall"]["mean"])
    assert failing["charis_overall.failure_rate"]["mean"] == pytest.approx(len(hard) / len(prompts))
    # Adherence too (intent to treat since suite 0.4; left out, the failures lifted it to 1.000): the
    # failures score 0, as the blank deserves, and are counted.
    assert failing["prompt_adherence"]["mean"] == pytest.approx(1 - len(hard) / len(prompts))
    assert failing["prompt_adherence"]["mean"] <= truthful["prompt_adherence"]["mean"] + 1e-12
    assert failing["prompt_adherence.failure_rate"]["mean"] == pytest.approx(len(hard) / len(prompts))


@pytest.mark.slow
def test_the_hide_prompts_are_the_same_for_every_model_left_out_and_counted(built):
    root, data = built
    hide = _hide_prompts(data)
    assert hide, "the sample build has prompts that ask for a back view or a distant figure"
    seen = []
    for name in ("copy", "blank", "follows"):
        overall, rows = _score(root, data, name, PixelJudge())
        flags = _per_image(rows, "charis_score.hidden_by_prompt")
        assert set(flags[flags == 1].index) == hide
        for metric in ("charis_score_itt", "charis_overall"):
            values = _per_image(rows, metric)
            assert set(values[np.isnan(values)].index) == hide  # NaN there, and only there
        assert overall["charis_score.hidden_by_prompt"]["mean"] == pytest.approx(len(hide) / len(data.prompt_rows))
        # The paper's score and adherence are still computed on them.
        assert not np.isnan(_per_image(rows, "prompt_adherence")).any()
        seen.append(frozenset(flags[flags == 1].index))
    assert len(set(seen)) == 1
