"""CogCanvas's two auxiliary tasks end to end: reference retrieval (a ranking submission) and
text-to-image (images without references), scored by ``idbench score`` and kept on their own tracks.

Expected values are worked out here from the rankings and the built rows (P@k = hits in the top k / k,
R@k = hits / |relevant|; slots with one candidate left out; a random ranker's mean over every ordering
of the candidates), not read back from the code under test.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from helpers import check_suite_contract

from idbench.benchmarks.cogcanvas.retrieval import score_rankings
from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge import JudgeAnswer
from idbench.evaluate_pkg.runner import NO_JUDGE, score_submission
from idbench.evaluate_pkg.submission import SubmissionError, validate_submission
from idbench.evaluate_pkg.suites import suite_for
from idbench.leaderboard import query
from idbench.leaderboard.queue import submit
from idbench.leaderboard.store import Store
from idbench.leaderboard.worker import run_worker

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

RETRIEVAL_METRICS = {
    f"{group}_{m}@{k}"
    for group in ("retrieval", "retrieval_item", "retrieval_background")
    for m in "pr"
    for k in (1, 3, 5)
}
T2I_REASON = "text-to-image task: no references given"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    build("cogcanvas", out=root / "data", n_prompts=3)
    return root, load_benchmark_data(root / "data")


def _retrieval_rows(data) -> list[dict]:
    return list(data.tables["retrieval"])


def _write_ranking(folder: Path, rows: list[tuple], task: str = "retrieval") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submission.json").write_text(json.dumps({"benchmark": "cogcanvas", "model": "hand-made", "task": task}))
    with (folder / "rankings.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["prompt_id", "slot", "rank", "ref_id"])
        writer.writerows(rows)
    return folder


# --- retrieval -------------------------------------------------------------------------------------


# A hand-made retrieval table: person slots with several candidates, single-candidate slots, item and
# background slots, and one slot with a second relevant image (``relevant_ref_ids``). p3 has no slot
# with two candidates at all.
HAND_TABLE = [
    {
        "prompt_id": "p1",
        "slot": "A",
        "kind": "person",
        "candidate_ref_ids": ["a1", "a2", "a3"],
        "ground_truth_ref_id": "a2",
    },
    {"prompt_id": "p1", "slot": "B", "kind": "person", "candidate_ref_ids": ["b1"], "ground_truth_ref_id": "b1"},
    {
        "prompt_id": "p1",
        "slot": "A.item",
        "kind": "fashion",
        "candidate_ref_ids": ["i1", "i2"],
        "ground_truth_ref_id": "i2",
    },
    {"prompt_id": "p1", "slot": "B.item", "kind": "object", "candidate_ref_ids": ["j1"], "ground_truth_ref_id": "j1"},
    {
        "prompt_id": "p1",
        "slot": "background",
        "kind": "background",
        "candidate_ref_ids": ["g1"],
        "ground_truth_ref_id": "g1",
    },
    {
        "prompt_id": "p2",
        "slot": "A",
        "kind": "person",
        "candidate_ref_ids": ["d1", "d2", "d3", "d4"],
        "ground_truth_ref_id": "d4",
        "relevant_ref_ids": ["d1"],
    },
    {"prompt_id": "p2", "slot": "B", "kind": "person", "candidate_ref_ids": ["e1", "e2"], "ground_truth_ref_id": "e1"},
    {"prompt_id": "p2", "slot": "A.item", "kind": "object", "candidate_ref_ids": ["k1"], "ground_truth_ref_id": "k1"},
    {"prompt_id": "p2", "slot": "B.item", "kind": "object", "candidate_ref_ids": ["m1"], "ground_truth_ref_id": "m1"},
    {
        "prompt_id": "p2",
        "slot": "background",
        "kind": "background",
        "candidate_ref_ids": ["h1", "h2"],
        "ground_truth_ref_id": "h1",
    },
    {"prompt_id": "p3", "slot": "A", "kind": "person", "candidate_ref_ids": ["q1"], "ground_truth_ref_id": "q1"},
    {"prompt_id": "p3", "slot": "A.item", "kind": "fashion", "candidate_ref_ids": ["r1"], "ground_truth_ref_id": "r1"},
    {
        "prompt_id": "p3",
        "slot": "background",
        "kind": "background",
        "candidate_ref_ids": ["s1"],
        "ground_truth_ref_id": "s1",
    },
]
GROUP_OF = {
    "person": "retrieval",
    "fashion": "retrieval_item",
    "object": "retrieval_item",
    "background": "retrieval_background",
}


def _hand_data():
    return SimpleNamespace(name="cogcanvas", folder=Path("."), tables={"retrieval": HAND_TABLE})


def _relevant(row) -> set:
    return {row["ground_truth_ref_id"], *row.get("relevant_ref_ids", [])}


def _scores(data, rankings, **kwargs) -> dict:
    return {(r.prompt_id, r.subject, r.metric): r.value for r in score_rankings(data, rankings, **kwargs)}


def _by_hand(ranked, relevant, k) -> tuple[float, float]:
    """P@k and R@k written out here: hits among the first k, over k and over the relevant count."""
    hits = sum(1 for ref in ranked[:k] if ref in relevant)
    return hits / k, hits / len(relevant)


def _expected(rankings) -> dict:
    """Per prompt and group, the mean over the slots with two or more candidates (absent: none)."""
    out: dict = {}
    for row in HAND_TABLE:
        if len(row["candidate_ref_ids"]) < 2:
            continue
        group = GROUP_OF[row["kind"]]
        for k in (1, 3, 5):
            p, r = _by_hand(rankings[(row["prompt_id"], row["slot"])], _relevant(row), k)
            out.setdefault((row["prompt_id"], f"{group}_p@{k}"), []).append(p)
            out.setdefault((row["prompt_id"], f"{group}_r@{k}"), []).append(r)
    return {key: sum(v) / len(v) for key, v in out.items()}


def test_a_ranker_that_puts_the_relevant_images_first_scores_1_on_the_headline():
    rankings = {}
    for row in HAND_TABLE:
        relevant = _relevant(row)
        rankings[(row["prompt_id"], row["slot"])] = tuple(
            sorted(row["candidate_ref_ids"], key=lambda ref: (ref not in relevant, ref))
        )
    results = _scores(_hand_data(), rankings)
    for prompt in ("p1", "p2"):
        assert results[(prompt, "", "retrieval_p@1")] == 1.0
        assert results[(prompt, "", "retrieval_item_p@1" if prompt == "p1" else "retrieval_background_p@1")] == 1.0
    assert results[("p1", "", "retrieval_r@1")] == 1.0
    # p2: A has two relevant images (R@1 = 1/2, R@3 = 1, P@3 = 2/3), B one (R@1 = 1, P@3 = 1/3)
    assert results[("p2", "A", "retrieval_r@1")] == 0.5 and results[("p2", "A", "retrieval_p@3")] == pytest.approx(
        2 / 3
    )
    assert results[("p2", "", "retrieval_r@1")] == pytest.approx(0.75)
    assert results[("p2", "", "retrieval_p@3")] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert results[("p2", "", "retrieval_r@3")] == 1.0


def test_groups_are_scored_apart_and_single_candidate_slots_are_counted_not_scored():
    # Each slot's candidates in reverse id order, checked against the hits counted in this file.
    rankings = {(r["prompt_id"], r["slot"]): tuple(sorted(r["candidate_ref_ids"], reverse=True)) for r in HAND_TABLE}
    results = _scores(_hand_data(), rankings)
    want = _expected(rankings)
    for (prompt, metric), value in want.items():
        assert results[(prompt, "", metric)] == pytest.approx(value), (prompt, metric)
    # Worked out by hand as well: p1/A ranked a3, a2, a1 -> P@1 0, R@3 1; p1/A.item i2 first -> 1;
    # p2/A d4 first (relevant) -> P@1 1, R@1 1/2; p2/B e2 first -> 0; p2's headline P@1 (1 + 0) / 2.
    assert results[("p1", "", "retrieval_p@1")] == 0 and results[("p1", "", "retrieval_r@3")] == 1
    assert results[("p1", "", "retrieval_item_r@1")] == 1
    assert results[("p2", "", "retrieval_p@1")] == 0.5 and results[("p2", "", "retrieval_r@1")] == pytest.approx(0.25)
    # p2/background ranked h2, h1: the ground truth second -> R@1 0, R@3 1, P@3 1/3
    assert results[("p2", "", "retrieval_background_r@1")] == 0 and results[("p2", "", "retrieval_background_r@3")] == 1
    assert results[("p2", "", "retrieval_background_p@3")] == pytest.approx(1 / 3)
    # Single-candidate slots: no value of their own, counted per prompt and group.
    singles = {(r["prompt_id"], r["slot"]) for r in HAND_TABLE if len(r["candidate_ref_ids"]) == 1}
    assert not any((p, slot) == key[:2] for key in results for p, slot in singles)
    counts = {
        (p, g): sum(
            1 for r in HAND_TABLE if r["prompt_id"] == p and GROUP_OF[r["kind"]] == g and (p, r["slot"]) in singles
        )
        for p in ("p1", "p2", "p3")
        for g in set(GROUP_OF.values())
    }
    for (prompt, group), n in counts.items():
        assert results[(prompt, "", f"{group}.single_candidate_slots")] == n
    assert (
        results[("p1", "", "retrieval.single_candidate_slots")] == 1
        and results[("p1", "", "retrieval.scored_slots")] == 1
    )
    # p3 has nothing to rank: undefined everywhere, never a perfect 1.
    for group in ("retrieval", "retrieval_item", "retrieval_background"):
        for k in (1, 3, 5):
            assert math.isnan(results[("p3", "", f"{group}_p@{k}")]) and math.isnan(
                results[("p3", "", f"{group}_r@{k}.random")]
            )
    # p1's background and p2's items have one candidate only: NaN for that group, not 1.
    assert math.isnan(results[("p1", "", "retrieval_background_r@1")]) and math.isnan(
        results[("p2", "", "retrieval_item_r@1")]
    )


def test_the_random_expectation_beside_each_value_is_the_mean_over_all_orderings():
    results = _scores(_hand_data(), {(r["prompt_id"], r["slot"]): tuple(r["candidate_ref_ids"]) for r in HAND_TABLE})
    per_prompt: dict = {}
    for row in HAND_TABLE:
        candidates = row["candidate_ref_ids"]
        if len(candidates) < 2:
            continue
        group = GROUP_OF[row["kind"]]
        orders = list(itertools.permutations(candidates))
        for k in (1, 3, 5):
            p = sum(_by_hand(order, _relevant(row), k)[0] for order in orders) / len(orders)
            r = sum(_by_hand(order, _relevant(row), k)[1] for order in orders) / len(orders)
            assert results[(row["prompt_id"], row["slot"], f"{group}_p@{k}.random")] == pytest.approx(p)
            assert results[(row["prompt_id"], row["slot"], f"{group}_r@{k}.random")] == pytest.approx(r)
            per_prompt.setdefault((row["prompt_id"], f"{group}_p@{k}.random"), []).append(p)
            per_prompt.setdefault((row["prompt_id"], f"{group}_r@{k}.random"), []).append(r)
    for (prompt, metric), values in per_prompt.items():
        assert results[(prompt, "", metric)] == pytest.approx(sum(values) / len(values))
    # p2/A: 4 candidates, 2 relevant -> a random top 1 is relevant half the time
    assert results[("p2", "A", "retrieval_p@1.random")] == pytest.approx(0.5)


def test_a_metric_selection_keeps_its_random_value_and_its_groups_counts():
    rankings = {(r["prompt_id"], r["slot"]): tuple(r["candidate_ref_ids"]) for r in HAND_TABLE}
    kept = {r.metric for r in score_rankings(_hand_data(), rankings, metrics={"retrieval_p@1", "retrieval_item_r@5"})}
    assert kept == {
        "retrieval_p@1",
        "retrieval_p@1.random",
        "retrieval.single_candidate_slots",
        "retrieval.scored_slots",
        "retrieval_item_r@5",
        "retrieval_item_r@5.random",
        "retrieval_item.single_candidate_slots",
        "retrieval_item.scored_slots",
    }


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The whole sample build: its fashion items ship two images each, the one source of slots with
    two candidates (every person and background of the samples has one image)."""
    out = tmp_path_factory.mktemp("sample") / "data"
    build("cogcanvas", out=out)
    return load_benchmark_data(out)


@pytest.mark.slow
def test_a_ranking_submission_scores_end_to_end(sample, tmp_path):
    data = sample
    rows = _retrieval_rows(data)
    # The ground truth ranked last among the candidates: found at rank n = number of candidates.
    ranking = []
    for row in rows:
        order = [r for r in row["candidate_ref_ids"] if r != row["ground_truth_ref_id"]] + [row["ground_truth_ref_id"]]
        ranking += [(row["prompt_id"], row["slot"], rank, ref) for rank, ref in enumerate(order, start=1)]
    sub = _write_ranking(tmp_path / "sub", ranking)
    summary = score_submission(
        sub, data, tmp_path / "out", ScoreOptions(profile="paper"), cache_dir=tmp_path / "cache", progress=False
    )
    assert summary["task"] == "retrieval" and summary["images"] == 0
    overall = summary["aggregates"]["overall"]
    # By hand, per group: a slot with n >= 2 candidates is hit in the top k when n <= k; a prompt's value
    # is the mean over its such slots (none: undefined); overall the mean of the defined prompts.
    prompts = sorted({row["prompt_id"] for row in rows})
    for kind_group, kinds in (
        ("retrieval", {"person"}),
        ("retrieval_item", {"object", "fashion"}),
        ("retrieval_background", {"background"}),
    ):
        sizes = {
            p: [len(r["candidate_ref_ids"]) for r in rows if r["prompt_id"] == p and r["kind"] in kinds]
            for p in prompts
        }
        scored = {p: [n for n in ns if n >= 2] for p, ns in sizes.items()}
        defined = [p for p in prompts if scored[p]]
        single = sum(n == 1 for ns in sizes.values() for n in ns)
        assert overall[f"{kind_group}.single_candidate_slots"]["mean"] * len(prompts) == pytest.approx(single)
        for k in (1, 3, 5):
            stats = overall[f"{kind_group}_r@{k}"]
            assert stats["n_nan"] == len(prompts) - len(defined) and stats["n"] == len(defined)
            if not defined:
                assert stats["mean"] is None  # never a perfect score
                continue
            recall = [sum(n <= k for n in scored[p]) / len(scored[p]) for p in defined]
            chance = [sum(min(k, n) / n for n in scored[p]) / len(scored[p]) for p in defined]
            assert stats["mean"] == pytest.approx(sum(recall) / len(recall))
            assert overall[f"{kind_group}_p@{k}"]["mean"] == pytest.approx(sum(recall) / len(recall) / k)
            assert overall[f"{kind_group}_r@{k}.random"]["mean"] == pytest.approx(sum(chance) / len(chance))
    # The sample's persons all have one image: the headline is undefined on it, and says so.
    assert overall["retrieval_p@1"]["mean"] is None and overall["retrieval_item_p@1"]["mean"] is not None
    produced = set(pd.read_parquet(tmp_path / "out" / "results.parquet")["metric"])
    assert RETRIEVAL_METRICS <= produced and not produced - RETRIEVAL_METRICS - set(suite_for("cogcanvas").DIAGNOSTICS)
    check_suite_contract(data.spec, summary, produced, suite_for("cogcanvas"))
    assert "retrieval task" in summary["not_run"]["id_sim"]
    # The run note and the report carry the counts and the chance level beside the value.
    note = summary["notes"]["retrieval"]
    assert "identity (person) slots (`retrieval_p@k`, `retrieval_r@k`) 0 scored" in note
    report = (tmp_path / "out" / "report.md").read_text()
    line = next(line for line in report.splitlines() if line.startswith("| `retrieval_item_r@1` |"))
    assert f"(random {overall['retrieval_item_r@1.random']['mean'] * 100:.2f})" in line
    assert "| `retrieval.single_candidate_slots` |" in report and "left out" in report


def test_bad_rankings_name_every_row_and_id(built, tmp_path, capsys):
    _, data = built
    rows = _retrieval_rows(data)
    first, second = rows[0], rows[1]
    gt = first["ground_truth_ref_id"]
    other = next(r["ground_truth_ref_id"] for r in rows if r["ground_truth_ref_id"] not in second["candidate_ref_ids"])
    bad = [
        (first["prompt_id"], first["slot"], 1, gt),
        (first["prompt_id"], first["slot"], 2, gt),  # row 2: ranked twice
        (first["prompt_id"], "Z", 1, gt),  # row 3: unknown slot
        ("no-such-prompt", "A", 1, gt),  # row 4: unknown prompt
        (second["prompt_id"], second["slot"], 1, other),  # row 5: not a candidate of this slot
        (second["prompt_id"], second["slot"], 2, "ghost-ref"),  # row 6: unknown ref id
        (second["prompt_id"], second["slot"], "x", second["ground_truth_ref_id"]),  # row 7: bad rank
    ]
    sub = _write_ranking(tmp_path / "bad", bad)
    with pytest.raises(SubmissionError) as caught:
        validate_submission(sub, data)
    text = str(caught.value)
    assert "rankings.csv row 2" in text and "ranked twice" in text
    assert "rankings.csv row 3" in text and "unknown slot 'Z'" in text
    assert "rankings.csv row 4" in text and "prompt_id 'no-such-prompt'" in text
    assert "rankings.csv row 5" in text and f"{other!r} is not a candidate of this slot" in text
    assert "rankings.csv row 6" in text and "'ghost-ref' is unknown" in text
    assert "rankings.csv row 7" in text and "rank 'x' is not a positive integer" in text
    # Every slot of the build without a ranking is named too (only the first has one).
    missing = [line for line in text.splitlines() if "missing, no ranking" in line]
    assert len(missing) == len(rows) - 1
    # The CLI prints the same lines and no traceback.
    assert main(["validate", str(sub), "--data", str(data.folder)]) != 0
    err = capsys.readouterr().err
    assert "rankings.csv row 5" in err and "Traceback" not in err


@pytest.mark.slow
def test_clip_and_metadata_rankers_run_end_to_end(built, tmp_path, capsys):
    root, data = built
    rows = {(r["prompt_id"], r["slot"]): r for r in _retrieval_rows(data)}
    for name in ("retrieval-clip", "retrieval-metadata"):
        out = tmp_path / name
        args = [
            "baseline",
            name,
            "cogcanvas",
            "--data",
            str(data.folder),
            "--out",
            str(out),
            "--profile",
            "tiny",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        assert main(args) == 0
        ranking = pd.read_csv(out / "rankings.csv", dtype=str)
        for (prompt_id, slot), group in ranking.groupby(["prompt_id", "slot"]):
            # a permutation of the slot's candidates, ranks 1..n
            assert sorted(group["ref_id"]) == sorted(rows[(prompt_id, slot)]["candidate_ref_ids"])
            assert sorted(group["rank"].astype(int)) == list(range(1, len(group) + 1))
        metadata = json.loads((out / "submission.json").read_text())
        assert metadata["task"] == "retrieval" and metadata["model"] == f"baseline-{name}"
        summary = score_submission(out, data, tmp_path / f"{name}-scores", ScoreOptions(profile="tiny"), progress=False)
        overall = summary["aggregates"]["overall"]
        assert RETRIEVAL_METRICS <= set(overall) and {f"{m}.random" for m in RETRIEVAL_METRICS} <= set(overall)
    assert json.loads((tmp_path / "retrieval-clip" / "submission.json").read_text())["generation"]["profile"] == "tiny"
    capsys.readouterr()
    # On a benchmark without a retrieval config: one line, no traceback.
    build("identity-collapse", out=root / "collapse")
    assert (
        main(
            [
                "baseline",
                "retrieval-metadata",
                "identity-collapse",
                "--data",
                str(root / "collapse"),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err
    assert "no retrieval config" in err and "Traceback" not in err


# --- text-to-image -----------------------------------------------------------------------------------


class YesJudge:
    """Answers yes to every question it is asked, and records which."""

    model = "scripted-yes"

    def __init__(self):
        self.asked: list[str] = []
        self.asked_of: list[tuple[bytes, str]] = []  # (picture, question id): the controls' pictures too

    def ask(self, requests):
        out = []
        for request in requests:
            ids = request.schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"]
            self.asked += list(ids)
            self.asked_of += [(request.images[0], i) for i in ids]
            out.append(JudgeAnswer(value={"answers": [{"question_id": i, "answer": "yes"} for i in ids]}, raw="{}"))
        return out


def _t2i_submission(root: Path, data) -> Path:
    """The collage baseline's images declared as a text-to-image submission (stand-ins for generations)."""
    sub = root / "t2i"
    if not sub.exists():
        make_baseline("collage", data, sub, size=64)
        metadata = json.loads((sub / "submission.json").read_text())
        (sub / "submission.json").write_text(json.dumps({**metadata, "model": "t2i-model", "task": "text-to-image"}))
    return sub


@pytest.mark.slow
def test_a_text_to_image_submission_scores_count_and_binding_vqa(built, tmp_path):
    root, data = built
    sub = _t2i_submission(root, data)
    judge = YesJudge()
    options = ScoreOptions(profile="tiny", judge=judge)
    summary = score_submission(sub, data, tmp_path / "out", options, cache_dir=root / "cache", progress=False)
    produced = set(pd.read_parquet(tmp_path / "out" / "results.parquet")["metric"])
    assert summary["task"] == "text-to-image"
    # The copy check runs on every task: a text-to-image model that returns the benchmark's references is flagged too.
    assert produced == {
        "count_accuracy",
        "count_accuracy_floored",
        "persons_detected",
        "attr_vqa.binding",
        "attr_vqa.binding.failure_rate",
        "attr_vqa.binding_itt",
        "attr_vqa.binding_itt.failure_rate",
        "attr_vqa.binding_itt_floored",
        "copy.flag",
        "copy.pasted",
        "copy.foreign",
    }
    check_suite_contract(data.spec, summary, produced, suite_for("cogcanvas"))
    for metric in ("id_sim", "dino_sim", "bg_sim", "clip_t", "aesthetic", "attr_vqa", "igc"):
        assert summary["not_run"][metric].startswith(T2I_REASON)
    assert "ranking of references" in summary["not_run"]["retrieval_p@1"]
    # Of the submission's pictures the judge was asked the binding questions only, every one of them
    # (from the built prompts); the other questions it was asked are its controls' (their own pictures).
    binding = {q["question_id"] for p in data.prompt_rows.values() for q in p["questions"] if q["kind"] == "binding"}
    pictures = {f.read_bytes() for f in (sub / "images").iterdir()}
    assert sorted(q for picture, q in judge.asked_of if picture in pictures) == sorted(binding)
    assert any(picture not in pictures for picture, _ in judge.asked_of)  # the judge card's controls were asked
    # Always yes: every binding fact confirmed, nothing failed.
    for metric in ("attr_vqa.binding", "attr_vqa.binding_itt"):  # the paper's and its twin, the track's ranking
        assert summary["aggregates"]["overall"][metric]["mean"] == 1.0
        assert summary["aggregates"]["overall"][f"{metric}.failure_rate"]["mean"] == 0.0
    # Without a judge the binding Attr-VQA is not run, with the reason; count accuracy still is.
    bare = score_submission(sub, data, None, ScoreOptions(profile="tiny"), cache_dir=root / "cache", progress=False)
    assert bare["not_run"]["attr_vqa.binding"] == bare["not_run"]["attr_vqa.binding_itt"] == NO_JUDGE
    assert "count_accuracy" in bare["aggregates"]["overall"]


@pytest.mark.slow
def test_a_text_to_image_submission_ranks_on_its_own_track(built, tmp_path):
    root, data = built
    home = tmp_path / "home"
    store = Store(home)
    make_baseline("collage", data, tmp_path / "ref", size=64)
    submit(store, tmp_path / "ref", data.folder)
    submit(store, _t2i_submission(root, data), data.folder)
    # The same images as another task are another submission, not a duplicate.
    assert len(store.list_jobs()) == 2
    run_worker(store, once=True, options=ScoreOptions(profile="tiny", metrics=("count_accuracy",)))
    reference = store.current_results("cogcanvas")
    t2i = store.current_results("cogcanvas", "text-to-image")
    assert reference["model_name"].tolist() == ["baseline-collage"] and set(reference["task"]) == {"reference"}
    assert t2i["model_name"].tolist() == ["t2i-model"] and set(t2i["task"]) == {"text-to-image"}
    table = query.ranked_table(t2i, data.spec, include_plumbing=True)
    assert table["model"].tolist() == ["t2i-model"] and query.default_metric(t2i, data.spec) == "count_accuracy"
    assert "t2i-model" not in query.ranked_table(reference, data.spec, include_plumbing=True)["model"].tolist()
    assert query.tracks(data.spec) == ["reference", "text-to-image"]
    with pytest.raises(ValueError, match="several tasks"):
        query.ranked_table(pd.concat([reference, t2i]), data.spec, include_plumbing=True)
    # A ranking is scored alone, never queued.
    ranked = [
        (r["prompt_id"], r["slot"], i, ref)
        for r in _retrieval_rows(data)
        for i, ref in enumerate(r["candidate_ref_ids"], 1)
    ]
    with pytest.raises(SubmissionError, match="the leaderboard ranks generated images"):
        submit(store, _write_ranking(tmp_path / "rank", ranked), data.folder)


# --- templates per task ------------------------------------------------------------------------------


def test_retrieval_template_lists_every_candidate_and_validates_once_ranked(built, tmp_path, capsys):
    from idbench.cli import main
    from idbench.evaluate_pkg.submission import SubmissionError, validate_submission

    root, data = built
    out = tmp_path / "tpl"
    assert main(["template", "cogcanvas", "--data", str(root / "data"), "--out", str(out), "--task", "retrieval"]) == 0
    assert "rankings.csv" in capsys.readouterr().out
    assert json.loads((out / "submission.json").read_text())["task"] == "retrieval"
    assert not (out / "manifest.csv").exists() and not (out / "images").exists()
    with (out / "rankings.csv").open(newline="") as handle:
        written = list(csv.reader(handle))
    expected = [(r["prompt_id"], r["slot"], "", ref) for r in _retrieval_rows(data) for ref in r["candidate_ref_ids"]]
    assert written[0] == ["prompt_id", "slot", "rank", "ref_id"] and [tuple(w) for w in written[1:]] == expected
    with pytest.raises(SubmissionError, match="rank '' is not a positive integer"):  # unfilled: refused
        with validate_submission(out, data):
            pass
    # Filled in candidate order (rank = position within the slot), it validates.
    ranks: dict[tuple[str, str], int] = {}
    filled_rows = [written[0]]
    for prompt_id, slot, _, ref in written[1:]:
        ranks[(prompt_id, slot)] = ranks.get((prompt_id, slot), 0) + 1
        filled_rows.append([prompt_id, slot, str(ranks[(prompt_id, slot)]), ref])
    with (out / "rankings.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(filled_rows)
    (out / "submission.json").write_text(json.dumps({"benchmark": "cogcanvas", "model": "m", "task": "retrieval"}))
    with validate_submission(out, data) as submission:
        assert submission.task == "retrieval"


def test_text_to_image_template_and_a_task_the_benchmark_lacks(built, tmp_path, capsys):
    from idbench.cli import main

    root, data = built
    out = tmp_path / "t2i"
    assert (
        main(["template", "cogcanvas", "--data", str(root / "data"), "--out", str(out), "--task", "text-to-image"]) == 0
    )
    assert json.loads((out / "submission.json").read_text())["task"] == "text-to-image"
    with (out / "manifest.csv").open(newline="") as handle:
        pairs = [(r["prompt_id"], int(r["seed"])) for r in csv.DictReader(handle)]
    assert pairs == data.required_pairs
    capsys.readouterr()
    code = main(
        ["template", "cogcanvas", "--data", str(root / "data"), "--out", str(tmp_path / "x"), "--task", "video"]
    )
    err = capsys.readouterr().err
    assert (
        code == 2
        and "offers the tasks reference, text-to-image, retrieval, not 'video'" in err
        and "Traceback" not in err
    )
    assert not (tmp_path / "x").exists()
