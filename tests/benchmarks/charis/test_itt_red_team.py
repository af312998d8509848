"""Issue 28, item 4: the red team's cases through the real scorer and the leaderboard's ranking.

A scripted scene-truth judge (it is told what each generated picture shows) scores four CHARIS runs
on a 40-prompt build where 30 % of the prompts are hard:

- ``honest``: the prompt followed with the subject kept on the easy prompts; on the hard ones the
  model shows the failure: another subject (identity mismatch), one prompted change realised out of
  the prompt's axes, a holistic rating of 1 of 4;
- ``blur``: as honest on the easy prompts; on the hard ones the subject blurred away (no identity
  feature in view: insufficient evidence; nothing realised; rated 0, no subject);
- ``blank``: as honest on the easy prompts; a blank canvas on the hard ones;
- ``failing judge``: the honest pictures, with a judge that times out on exactly the hard prompts.

Every shown judged column but the paper's ``charis_score`` is intent to treat, so none of the three
scores above the honest run there; ``charis_score`` (left-out failures: 1.000 for the blur and the
failing judge) is shown beside ``charis_score_itt`` and never ranked. The failing judge's run (30 %
failures) is listed, not ranked, with the reason on its row. Expected values are worked out here from
the scripted answers and the prompt rows, never read back from the code under test.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageFilter

from idbench.builders.build import build
from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.baselines import image_path
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge.types import JudgeAnswer, JudgeRequest
from idbench.evaluate_pkg.runner import score_submission
from idbench.leaderboard import query

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sanity"))
from judges import adherence_answer, charis_answer, follow_prompt, is_adherence, prompt_of

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

CHARIS = get_benchmark("charis")
# Every judged column of the CHARIS suite (all are shown: leaderboard, report.md, the CLI's summary).
JUDGED = tuple(m.name for m in CHARIS.metric_suite if m.judged)
# The template phrases that ask for the subject to be hidden (transformations.yaml: hides_subject).
HIDING = {"seen from behind", "seen from far away as a small figure in the frame"}
CASES = ("honest", "blur", "blank", "failing judge")


def pixel_key(data: bytes) -> str:
    """What a picture shows, as decoded pixels (a re-encoding of the same picture keeps its key)."""
    array = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return hashlib.sha256(array.tobytes() + str(array.shape).encode()).hexdigest()


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


class SceneTruthJudge:
    """Answers from what each generated picture is (``truth``: pixel key -> kind); a picture it was not
    told about (the judge's own controls) is read from its pixels: uniform is blank, the reference's
    own pixels or their mirror a copy, anything else another subject. Requests about a submitted
    picture of a prompt of ``fail`` get an error answer, as a judge that timed out after its retries
    on exactly the hard items (its controls are answered)."""

    def __init__(self, name: str, truth: dict[str, str], fail: frozenset[str] = frozenset()):
        self.model = f"scripted-{name}"
        self.truth, self.fail = truth, fail

    def kind(self, reference: bytes, generation: bytes) -> str:
        known = self.truth.get(pixel_key(generation))
        if known:
            return known
        gen = np.asarray(Image.open(io.BytesIO(generation)).convert("RGB"))
        ref = np.asarray(Image.open(io.BytesIO(reference)).convert("RGB"))
        if gen.min() == gen.max():
            return "blank"
        same = gen.shape == ref.shape and (np.array_equal(gen, ref) or np.array_equal(gen, ref[:, ::-1]))
        return "copy" if same else "wrong"

    def answer(self, request: JudgeRequest) -> object:
        kind = self.kind(*request.images)
        if "rating" in request.schema.get("properties", {}):  # the holistic judge: 0-4
            return {"reasoning": "scripted", "rating": {"follows": 4, "copy": 4, "wrong": 1}.get(kind, 0)}
        if is_adherence(request):
            axes = list(request.schema["properties"]["transformations"]["properties"])
            realised = {"follows": set(axes), "wrong": set(axes[:1])}.get(kind, set())
            return adherence_answer(request, lambda axis: axis in realised)
        if kind == "blank":
            return charis_answer(request, visible=False, changed=False, generated_type="other")
        if kind == "blur":  # the subject blurred away: no decisive or core feature in view
            return charis_answer(request, visible=True, changed=False, hide_levels=frozenset({"decisive", "core"}))
        return charis_answer(request, visible=True, changed=kind == "wrong", realised=kind == "follows")

    def ask(self, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
        out = []
        for request in requests:
            if self.fail and pixel_key(request.images[-1]) in self.truth and prompt_of(request) in self.fail:
                out.append(JudgeAnswer(error="scripted timeout after 5 attempts", attempts=5))
            else:
                out.append(JudgeAnswer(value=self.answer(request), raw="{}"))
        return out


def write_submission(data, out: Path, model: str, hard: set[str], on_hard: str, truth: dict[str, str]) -> Path:
    """The model's pictures: follow_prompt's figure of the subject on the easy prompts; on the hard ones
    another subject's figure (``wrong``), that figure blurred away (``blur``) or a blank canvas."""
    (out / "images").mkdir(parents=True)
    subjects = sorted({row["subject_id"] for row in data.prompt_rows.values()})
    rows = []
    for index, (prompt_id, seed) in enumerate(data.required_pairs):
        subject = data.prompt_rows[prompt_id]["subject_id"]
        kind = on_hard if prompt_id in hard else "follows"
        if kind == "blank":
            picture = png(Image.new("RGB", (64, 64), (128, 128, 128)))
        else:
            other = subjects[(subjects.index(subject) + 1) % len(subjects)]
            picture = follow_prompt(data.reference_bytes[other if kind == "wrong" else subject], index)
            if kind == "blur":
                picture = png(Image.open(io.BytesIO(picture)).convert("RGB").filter(ImageFilter.GaussianBlur(40)))
            elif kind == "wrong":  # a black corner pixel: never the same picture as another prompt's own figure
                marked = Image.open(io.BytesIO(picture)).convert("RGB")
                marked.putpixel((0, 0), (0, 0, 0))
                picture = png(marked)
        truth[pixel_key(picture)] = kind
        file = image_path(prompt_id, seed)
        (out / file).write_bytes(picture)
        rows.append((prompt_id, seed, file))
    with (out / "manifest.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([("prompt_id", "seed", "file"), *rows])
    (out / "submission.json").write_text(json.dumps({"benchmark": "charis", "model": model}))
    return out


def score_cases(root: Path, data, metrics: Sequence[str] = JUDGED) -> dict[str, dict]:
    """The four red-team runs' summaries (``aggregates.json`` as a dict), by case."""
    prompts = sorted(data.prompt_rows)
    hard = {p for i, p in enumerate(prompts) if i % 10 in (0, 3, 6)}  # 30 % of the prompts
    truth: dict[str, str] = {}
    folders = {
        "honest": write_submission(data, root / "honest", "honest", hard, "wrong", truth),
        "blur": write_submission(data, root / "blur", "blur", hard, "blur", truth),
        "blank": write_submission(data, root / "blank", "blank", hard, "blank", truth),
    }
    hard_texts = frozenset(data.prompt_rows[p]["prompt"] for p in hard)
    judges = {case: SceneTruthJudge("scene-truth", truth) for case in ("honest", "blur", "blank")}
    # The same judge (one judge key, so the runs rank together), timing out on the hard items.
    judges["failing judge"] = SceneTruthJudge("scene-truth", truth, fail=hard_texts)
    summaries = {}
    for case in CASES:
        options = ScoreOptions(profile="tiny", metrics=tuple(metrics), judge=judges[case])
        folder = folders["honest" if case == "failing judge" else case]
        summaries[case] = score_submission(
            folder,
            data,
            root / "scores" / case.replace(" ", "-"),
            options,
            cache_dir=root / "cache",
            progress=False,
            models=Models(options),
        )
    return {"summaries": summaries, "hard": hard, "root": root, "truth": truth}


@pytest.fixture(scope="module")
def red_team(tmp_path_factory):
    root = tmp_path_factory.mktemp("red-team")
    build("charis", out=root / "data", n_prompts=40)
    data = load_benchmark_data(root / "data", cache_dir=str(root / "hf"))
    return data, score_cases(root, data)


def _means(red_team) -> dict[str, dict[str, float]]:
    _, scored = red_team
    return {
        case: {m: s["mean"] for m, s in summary["aggregates"]["overall"].items()}
        for case, summary in scored["summaries"].items()
    }


def test_the_red_team_table_by_hand(red_team):
    data, scored = red_team
    hard, prompts = scored["hard"], sorted(data.prompt_rows)
    hide = {p for p, row in data.prompt_rows.items() if any(t["phrase"] in HIDING for t in row["transformations"])}
    n, easy = len(prompts), [p for p in prompts if p not in hard]
    assert len(hard) == 12 and n == 40 and hide, "the sample build: 12 hard prompts of 40, some hide-prompts"
    shown = [p for p in prompts if p not in hide]  # charis_score_itt and charis_overall: NaN on hide-prompts
    axes = {p: len({t["axis"] for t in data.prompt_rows[p]["transformations"]}) for p in prompts}
    honest_hard_adherence = sum(1 / axes[p] for p in hard)  # one prompted change realised of each prompt's axes
    itt = sum(p not in hard for p in shown) / len(shown)  # the hard prompts score 0 in every case
    expected = {
        # The paper's score: the blur's insufficient evidence and the failing judge's timeouts left out.
        "charis_score": {"honest": len(easy) / n, "blur": 1.0, "blank": len(easy) / n, "failing judge": 1.0},
        "charis_score_itt": dict.fromkeys(CASES, itt),
        "charis_overall": dict.fromkeys(CASES, itt),
        "prompt_adherence": {
            "honest": (len(easy) + honest_hard_adherence) / n,
            **dict.fromkeys(CASES[1:], len(easy) / n),
        },
        "holistic_score": {"honest": (len(easy) + 0.25 * len(hard)) / n, **dict.fromkeys(CASES[1:], len(easy) / n)},
    }
    # The ranked copy-floored twins: no image here is a copy of its own reference, so the same values.
    expected["charis_score_itt_floored"] = expected["charis_score_itt"]
    expected["charis_overall_floored"] = expected["charis_overall"]
    means = _means(red_team)
    assert set(expected) == set(JUDGED)
    for metric, by_case in expected.items():
        for case, value in by_case.items():
            assert means[case][metric] == pytest.approx(value), (metric, case)
    # Failures and missing evidence are still counted and shown beside the scores.
    for metric in (m for m in JUDGED if CHARIS.metric(m).floor is None):  # a twin's failures are its metric's
        assert means["failing judge"][f"{metric}.failure_rate"] == pytest.approx(len(hard) / n), metric
        assert means["honest"][f"{metric}.failure_rate"] == 0.0
    assert means["blur"]["charis_score.insufficient_evidence"] == pytest.approx(len(hard) / n)
    assert means["blur"]["charis_score_itt.not_confirmed"] == pytest.approx(sum(p in hard for p in shown) / len(shown))
    assert means["failing judge"]["charis_score_itt.not_confirmed"] == pytest.approx(
        sum(p in hard for p in shown) / len(shown)
    )


def test_no_case_scores_above_the_honest_run_on_a_ranked_judged_column(red_team):
    means = _means(red_team)
    specs = query.metric_specs(CHARIS)
    for metric in JUDGED:
        if specs[metric].floored_twin:  # ranked through its copy-floored twin, checked in this loop
            continue
        if not specs[metric].rankable:  # the paper's charis_score: beside its twin, never ranked
            assert metric == "charis_score" and specs[metric].itt_twin == "charis_score_itt"
            assert means["blur"][metric] > means["honest"][metric]  # why it is not ranked
            continue
        for case in CASES[1:]:
            assert means[case][metric] <= means["honest"][metric] + 1e-12, (metric, case)
    # Where the honest run earned something on the hard prompts, it is strictly ahead.
    for metric in ("prompt_adherence", "holistic_score"):
        assert all(means[case][metric] < means["honest"][metric] - 0.01 for case in CASES[1:]), metric


def _leaderboard_rows(red_team) -> pd.DataFrame:
    _, scored = red_team
    rows = []
    for number, (case, summary) in enumerate(scored["summaries"].items(), start=1):
        rows.append(
            {
                "submission_id": number,
                "model_name": case,
                "submitter": None,
                "profile": summary["profile"],
                "plumbing": False,
                "not_run": summary["not_run"],
                "aggregates": summary["aggregates"],
                "suite_version": summary["suite_version"],
                "judge": summary["judge"],
                "copies": {"marked": False, "share": 0.0},
            }
        )
    return pd.DataFrame(rows)


def test_the_failing_judges_run_is_listed_with_its_reason_and_not_ranked_by_default(red_team):
    _, scored = red_team
    record = scored["summaries"]["failing judge"]["judge"]
    assert record["calibrated"] is True  # its controls are fine: only the hard prompts time out
    assert record["incomplete"] == {m: pytest.approx(0.3) for m in JUDGED}
    assert all(not scored["summaries"][case]["judge"]["incomplete"] for case in CASES[:3])
    rows = _leaderboard_rows(red_team)
    table = query.ranked_table(rows, CHARIS)
    assert query.default_metric(rows, CHARIS) == "charis_overall_floored"  # no image is a copy: charis_overall
    ranked, apart = table[table["rank"].notna()], table[table["rank"].isna()].set_index("model")
    assert set(ranked["model"]) == {"honest", "blur", "blank"}
    assert ranked["rank"].tolist() == [1, 1, 1]  # charis_overall: the hard prompts score 0 in every case
    assert list(apart.index) == ["failing judge"]
    why = ", ".join(f"30 % of {m}" for m in sorted(JUDGED))
    assert apart.loc["failing judge", query.NOT_RANKED] == f"judge failed on {why} (over 5 %)"
    assert "incomplete: charis_overall (judge failed 30 %)" in apart.loc["failing judge", "marks"]
    # Ranked on prompt_adherence, the honest run leads alone; asked for, the failing judge's run is
    # ranked too, and last there (its failures score 0).
    by_adherence = query.ranked_table(rows, CHARIS, metric="prompt_adherence", include_judge_failures=True)
    assert by_adherence["model"].iloc[0] == "honest" and by_adherence["rank"].notna().all()
    assert by_adherence.set_index("model")["rank"]["honest"] == 1
    assert (by_adherence.set_index("model")["rank"].drop("honest") == 2).all()


class FooledByBlurJudge(SceneTruthJudge):
    """The scene-truth judge, except that it says every asked change was made on a blurred-away subject
    (issue 39: prompt_adherence read 1.000 for the blur against 0.695 honest)."""

    def answer(self, request: JudgeRequest) -> object:
        if is_adherence(request) and self.kind(*request.images) == "blur":
            return adherence_answer(request, lambda axis: True)
        return super().answer(request)


def test_a_blurred_away_subject_gains_no_adherence_from_a_judge_that_says_yes(red_team, tmp_path):
    data, scored = red_team
    hard, prompts, root = scored["hard"], sorted(data.prompt_rows), scored["root"]
    hide = {p for p, row in data.prompt_rows.items() if any(t["phrase"] in HIDING for t in row["transformations"])}
    # The blurred pictures of the red team, judged by a judge that says yes to every change asked of them;
    # the honest run as scored above (the fooled judge answers its pictures as the scene-truth judge did).
    judge = FooledByBlurJudge("fooled-by-blur", scored["truth"])
    options = ScoreOptions(profile="tiny", metrics=("prompt_adherence", "charis_overall"), judge=judge)
    blur = score_submission(
        root / "blur",
        data,
        tmp_path / "blur",
        options,
        cache_dir=tmp_path / "cache",
        progress=False,
        models=Models(options),
    )
    means = {
        "honest": _means(red_team)["honest"],
        "blur": {m: s["mean"] for m, s in blur["aggregates"]["overall"].items()},
    }
    rows = {
        case: (lambda f: f[f["metric"] == "prompt_adherence"].set_index("prompt_id")["value"])(
            pd.read_parquet(folder / "results.parquet")
        )
        for case, folder in (("honest", root / "scores" / "honest"), ("blur", tmp_path / "blur"))
    }
    n, axes = len(prompts), {p: len(data.prompt_rows[p]["axes"]) for p in prompts}
    easy = [p for p in prompts if p not in hard]
    # By hand: the honest run realises one asked change on each hard prompt; the blur earns the fooled
    # judge's yes only where the prompt itself hides the subject (the same for every model), 0 elsewhere.
    assert means["honest"]["prompt_adherence"] == pytest.approx((len(easy) + sum(1 / axes[p] for p in hard)) / n)
    assert means["blur"]["prompt_adherence"] == pytest.approx((len(easy) + len(hard & hide)) / n)
    assert means["blur"]["prompt_adherence"] < means["honest"]["prompt_adherence"] < 1.0  # ungated, the blur read 1.000
    assert means["blur"]["prompt_adherence.subject_not_shown"] == pytest.approx(len(hard - hide) / n)
    assert means["honest"]["prompt_adherence.subject_not_shown"] == 0.0
    assert means["blur"]["prompt_adherence.failure_rate"] == 0.0  # not a judge failure: the subject is missing
    assert means["blur"]["charis_overall"] <= means["honest"]["charis_overall"] + 1e-12
    # Pair by pair, on every prompt that does not ask for the subject hidden, the blur gains nothing.
    for p in prompts:
        if p not in hide:
            assert rows["blur"][p] <= rows["honest"][p] + 1e-12, p
