"""idbench score end to end on the sample benchmarks with the tiny profile (plumbing) and real dlib faces."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.runner import ScoringError, score_submission
from idbench.evaluate_pkg.submission import SubmissionError

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

TINY = ScoreOptions(profile="tiny")


PROMPTS = 30  # of Identity Collapse's 75


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    root = tmp_path_factory.mktemp("collapse")
    # The first 2 prompts of each of the grid's 15 cells (every group size in every scene), x 3 seeds:
    # 90 images, where the whole grid's 225 made these the suite's slowest tests.
    build("identity-collapse", out=root / "data", n_prompts=PROMPTS)
    data = load_benchmark_data(root / "data")
    make_baseline("collage", data, root / "collage", size=256)
    return root, data


@pytest.mark.slow
def test_outputs_and_their_contract(collapse, tmp_path, shared_features):
    root, data = collapse
    summary = score_submission(
        root / "collage", data, tmp_path / "out", TINY, cache_dir=shared_features, progress=False
    )
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    # one whole-image row per (prompt, seed) and metric, raw values, the run's identity on every row
    whole = results[results["subject"] == ""]
    assert set(whole["metric"]) >= {"clip_t", "dino_sim", "scr@0.4", "scr@0.5", "scr@0.6", "scr_instance@0.5"}
    assert whole.groupby("metric").size().eq(3 * PROMPTS).all()
    assert (
        (results["profile"] == "tiny").all()
        and results["plumbing"].all()
        and (results["suite_version"] == data.spec.suite_version).all()
    )
    counts = {"subjects_detected", "copy.pasted"}  # counts, not similarities
    similarities = results[~results["metric"].isin(counts)]["value"]
    assert similarities.between(-1 - 1e-6, 1 + 1e-6).all()  # cosines and rates, never x100
    # per-subject DINO rows: one per reference of each image
    per_subject = results[(results["metric"] == "dino_sim") & (results["subject"] != "")]
    assert len(per_subject) == sum(p["n_subjects"] * 3 for p in data.prompt_rows.values())
    # the aggregate is the mean of the per-sample values, computed independently here
    aggregates = json.loads((tmp_path / "out" / "aggregates.json").read_text())
    assert aggregates["plumbing"] is True and aggregates["profile"] == "tiny"
    for metric in ("clip_t", "dino_sim", "scr@0.5"):
        expected = whole[whole["metric"] == metric]["value"].mean()
        assert aggregates["aggregates"]["overall"][metric]["mean"] == pytest.approx(expected)
        ci = aggregates["aggregates"]["overall"][metric]
        assert ci["ci_low"] <= ci["mean"] <= ci["ci_high"]
        assert ci["n_prompts"] == whole[whole["metric"] == metric]["prompt_id"].nunique() == PROMPTS
    assert aggregates["aggregates"]["ci"]["unit"] == "prompt"  # seeds of a prompt are resampled together
    # breakdown by n_subjects equals a pandas groupby of the raw rows
    prompts = pd.DataFrame(list(data.prompt_rows.values()))[["prompt_id", "n_subjects"]]
    by_n = whole[whole["metric"] == "dino_sim"].merge(prompts, on="prompt_id").groupby("n_subjects")["value"].mean()
    for n, value in by_n.items():
        assert aggregates["aggregates"]["breakdowns"]["n_subjects"][str(n)]["dino_sim"]["mean"] == pytest.approx(value)
    # every model used is named with its weights key
    assert {"clip", "dinov2", "detector"} <= set(aggregates["models"])
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Plumbing check" in report and (tmp_path / "out" / "by_n_subjects.png").is_file()
    assert summary["aggregates"] == aggregates["aggregates"]


@pytest.mark.slow
def test_second_run_reads_every_feature_from_the_cache(collapse, tmp_path):
    root, data = collapse
    first = score_submission(root / "collage", data, None, TINY, cache_dir=tmp_path, progress=False)
    second = score_submission(root / "collage", data, None, TINY, cache_dir=tmp_path, progress=False)
    assert sum(second["features"]["computed"].values()) == 0
    assert sum(first["features"]["computed"].values()) > 0
    assert second["aggregates"] == first["aggregates"]


@pytest.mark.slow
def test_crash_then_resume_recomputes_nothing_done(collapse, tmp_path, monkeypatch):
    """Kill the scorer after k batches, rerun: cached features are not recomputed, results equal.

    ``features.cached`` counts distinct features read from an earlier run's cache: the copy check reads
    the DINOv2 features the suite computed a moment before, and that re-read is not counted as cached.
    """
    root, data = collapse
    from idbench.evaluate_pkg import features as features_module

    # the same batches as the runs below: an encoder's last bits depend on a batch's other inputs
    batched = ScoreOptions(profile="tiny", batch_size=8)
    clean = score_submission(root / "collage", data, None, batched, cache_dir=tmp_path / "clean", progress=False)

    original = features_module.FeatureStore.save
    saved = {"n": 0}

    def crashing_save(self, *args, **kwargs):
        # Two whole batches of the first model's 30 distinct pictures: the resumed run batches the rest
        # as the clean run did (after a kill mid-batch the rest is batched otherwise, and the encoders'
        # last bits, so the aggregates' last digits, differ).
        if saved["n"] == 16:
            raise KeyboardInterrupt("simulated kill")
        saved["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(features_module.FeatureStore, "save", crashing_save)
    with pytest.raises(KeyboardInterrupt):
        score_submission(
            root / "collage",
            data,
            tmp_path / "out",
            ScoreOptions(profile="tiny", batch_size=8),
            cache_dir=tmp_path / "cache",
            progress=False,
        )
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(features_module.FeatureStore, "save", original)
    computed_before_crash = saved["n"]
    resumed = score_submission(
        root / "collage",
        data,
        None,
        ScoreOptions(profile="tiny", batch_size=8),
        cache_dir=tmp_path / "cache",
        progress=False,
    )
    assert sum(resumed["features"]["cached"].values()) == computed_before_crash
    assert resumed["aggregates"] == clean["aggregates"]


@pytest.mark.slow
def test_a_crash_while_replacing_results_leaves_the_previous_results_readable(
    collapse, tmp_path, monkeypatch, shared_features
):
    """Rescoring into an existing folder with overwrite: the old results are never deleted first."""
    root, data = collapse
    from idbench import atomic

    out, options = tmp_path / "out", ScoreOptions(profile="tiny", metrics=("clip_t",))
    score_submission(root / "collage", data, out, options, cache_dir=shared_features, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real_rename = atomic.os.rename
    moves = []

    def crash_on_the_swap(src, dst):
        moves.append((src, dst))
        # The new results moving in (the old ones were moved aside just before); putting the old back works.
        if str(dst) == str(out) and not str(src).endswith(".old"):
            raise OSError("simulated crash between staging and swap")
        real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", crash_on_the_swap)
    with pytest.raises(OSError, match="simulated crash"):
        score_submission(
            root / "collage", data, out, options, cache_dir=shared_features, progress=False, overwrite=True
        )
    assert len(moves) >= 2 and str(moves[0][0]) == str(out)  # the old folder had been moved aside
    monkeypatch.setattr(atomic.os, "rename", real_rename)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert set(pd.read_parquet(out / "results.parquet")["metric"]) == {
        "clip_t",
        "clip_t.truncated",
        "copy.flag",
        "copy.pasted",
        "copy.foreign",
    }  # the first run's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder or backup left


@pytest.mark.slow
def test_an_error_while_writing_results_leaves_the_previous_results_and_no_staging(
    collapse, tmp_path, monkeypatch, shared_features
):
    root, data = collapse
    from idbench.evaluate_pkg import runner

    out, options = tmp_path / "out", ScoreOptions(profile="tiny", metrics=("clip_t",))
    score_submission(root / "collage", data, out, options, cache_dir=shared_features, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def failing_report(*args, **kwargs):
        raise RuntimeError("report failed")

    monkeypatch.setattr(runner, "write_report", failing_report)
    with pytest.raises(RuntimeError, match="report failed"):
        score_submission(
            root / "collage", data, out, options, cache_dir=shared_features, progress=False, overwrite=True
        )
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.slow
def test_invalid_submission_scores_nothing(collapse, tmp_path, capsys):
    root, data = collapse
    broken = tmp_path / "broken"
    shutil.copytree(root / "collage", broken)
    (broken / "images" / "01_s0.png").unlink()
    with pytest.raises(SubmissionError):
        score_submission(broken, data, tmp_path / "out", TINY, cache_dir=tmp_path / "cache", progress=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    code = main(
        ["score", str(broken), "--data", str(root / "data"), "--out", str(tmp_path / "out"), "--profile", "tiny"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "01" in err and "01_s0.png" in err and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_unknown_metric_is_refused(collapse, tmp_path):
    root, data = collapse
    with pytest.raises(ScoringError, match="unknown metric.*id_sim.*known: clip_t"):
        score_submission(
            root / "collage", data, None, ScoreOptions(profile="tiny", metrics=("id_sim",)), progress=False
        )


@pytest.mark.slow
def test_cli_score_prints_a_summary(collapse, tmp_path, capsys, shared_features):
    root, _ = collapse
    code = main(
        [
            "score",
            str(root / "collage"),
            "--data",
            str(root / "data"),
            "--out",
            str(tmp_path / "out"),
            "--profile",
            "tiny",
            "--metrics",
            "clip_t,dino_sim",
            "--cache-dir",
            str(shared_features),
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "PLUMBING CHECK" in out and "clip_t" in out and "dino_sim" in out and "scr@0.5" not in out
    # stderr is no terminal here: what the run did goes there as whole log lines (no bars, no \r),
    # each stage's start and end with its count and seconds (idbench.progress)
    err = captured.err
    assert "\r" not in err and err.endswith("\n")
    lines = err.splitlines()
    assert lines[0] == "scoring on identity-collapse (tiny profile) ..."
    assert re.fullmatch(r".+: 90 images \(reference task\); metrics: clip_t, dino_sim", lines[1]), lines[1]
    assert re.fullmatch(r"scoring on identity-collapse \(tiny profile\): done in [\d.]+ s \(90 images\)", lines[-1])
    for stage in ("clip features", "dinov2 features", "copy check"):
        assert any(re.fullmatch(rf"{stage}: \d+ img \.\.\.", line) for line in lines), (stage, err)
        assert any(re.fullmatch(rf"{stage}: done in [\d.]+ s, \d+ .*", line) for line in lines), (stage, err)
    starts = [line for line in lines if line.endswith(" img ...")]
    assert len(starts) == len([line for line in lines if re.match(r"[a-z0-9 ]+ (features|check): done in", line)])


@pytest.fixture(scope="module")
def cogcanvas_scores(tmp_path_factory):
    """ID-Sim of every baseline, with the real dlib face model."""
    root = tmp_path_factory.mktemp("cogcanvas")
    build("cogcanvas", out=root / "data", n_prompts=16)  # 7/4/3/2 prompts of 2/3/4/5 persons: enough, and quick
    data = load_benchmark_data(root / "data")
    # Nobody in the picture: dlib's CNN fallback may run on every image (~2.4 s each), and 4 prompts show it.
    build("cogcanvas", out=root / "few", n_prompts=4)
    few = load_benchmark_data(root / "few")
    scores, rows = {}, {}
    runs = {"collage": data, "swap": data, "clone": data, "impostor": data, "background": few}
    for name, on in runs.items():
        # 1024 px: faces large enough that HOG finds most of them wherever a column puts them
        make_baseline(name, on, root / name, size=1024)
        scores[name] = score_submission(
            root / name,
            on,
            root / f"{name}-scores",
            ScoreOptions(profile="tiny", metrics=("id_sim",)),
            cache_dir=root / "cache",
            progress=False,
        )
        rows[name] = pd.read_parquet(root / f"{name}-scores" / "results.parquet")
    return data, scores, rows


def _mean(summary, metric):
    return summary["aggregates"]["overall"][metric]["mean"]


def per_person(rows: pd.DataFrame) -> pd.Series:
    """ID-Sim of each (prompt, person slot): the matched cosine, 0 when no face matched that person."""
    persons = rows[(rows["metric"] == "id_sim") & (rows["subject"] != "")]
    return persons.set_index(["prompt_id", "subject"])["value"]


@pytest.mark.slow
def test_id_sim_orders_the_baselines_as_a_sound_metric_must(cogcanvas_scores):
    _, s, rows = cogcanvas_scores
    person = {name: per_person(rows[name]) for name in ("collage", "swap", "clone", "impostor")}
    # swap only moves people to other columns: each person's face, wherever it is found, matches its
    # reference as well as in the collage, because Hungarian matching is blind to position. Not to
    # the last digit: HOG's sliding window meets a face at another pixel offset in another column.
    found_in_both = (person["collage"] > 0) & (person["swap"] > 0)
    assert found_in_both.mean() > 0.75
    assert np.abs(person["collage"][found_in_both] - person["swap"][found_in_both]).max() < 0.02
    # Where every baseline's face was found (dlib's HOG misses some 19th-century portraits, and which
    # ones depends on the column), the order is collage = swap > clone > impostor: clone keeps one
    # true identity of N, impostor none.
    everywhere = np.logical_and.reduce([v > 0 for v in person.values()])
    assert everywhere.sum() >= 10
    mean = {name: v[everywhere].mean() for name, v in person.items()}
    assert mean["collage"] == pytest.approx(mean["swap"], abs=0.01)
    assert min(mean["collage"], mean["swap"]) > mean["clone"] > mean["impostor"]
    # over all images, with misses scoring 0, the collage still beats clone and impostor
    assert _mean(s["collage"], "id_sim") > _mean(s["clone"], "id_sim") > _mean(s["impostor"], "id_sim")
    # nobody in the picture: no face found, every reference unmatched, ID-Sim 0
    assert _mean(s["background"], "faces_detected") == 0
    assert _mean(s["background"], "id_sim") == 0
    # dlib records per image whether its CNN searched: a share, on every baseline (1024 px collages
    # where HOG finds a face never reach the CNN, so their share is 0)
    assert 0 <= _mean(s["background"], "faces.slow_search_skipped") <= 1
    assert _mean(s["collage"], "faces.slow_search_skipped") <= _mean(s["background"], "faces.slow_search_skipped")


@pytest.mark.slow
def test_face_counts_are_reported_against_the_expected(cogcanvas_scores):
    data, s, _ = cogcanvas_scores
    expected = np.mean([p["n_persons"] for p in data.prompt_rows.values()])
    assert _mean(s["collage"], "faces_expected") == pytest.approx(expected)
    assert 0 < _mean(s["collage"], "faces_detected") <= expected + 1


@pytest.mark.slow
def test_missing_paper_models_stop_the_run_before_any_work(collapse, tmp_path, monkeypatch):
    from idbench.evaluate_pkg.models.base import ModelNotAvailableError

    root, data = collapse
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    with pytest.raises(ModelNotAvailableError) as error:
        score_submission(
            root / "collage",
            data,
            tmp_path / "out",
            ScoreOptions(profile="paper"),
            cache_dir=tmp_path / "cache",
            progress=False,
        )
    message = str(error.value)
    # every missing model of the suite at once, each with the command that gets it
    for hub_id in ("openai/clip-vit-large-patch14", "facebook/dinov2-base", "IDEA-Research/grounding-dino-tiny"):
        assert f"hf download {hub_id}" in message
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_the_summary_leads_with_the_headline_and_the_verdict():
    """A run's terminal summary: the ranking metric first, then whether it is ranked and why not; the judge's
    "not run" metrics on one line; metrics of another task not listed; an n/a with its reason."""
    from idbench.evaluate_pkg.report import format_summary, verdict

    stats = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10, "n_nan": 0, "n_prompts": 10}
    summary = {
        "benchmark": "identity-collapse",
        "submission": {"model": "m"},
        "profile": "tiny",
        "plumbing": False,
        "task": "reference",
        "aggregates": {
            "overall": {
                "clip_t": stats,
                "dino_sim_floored": stats,
                "copy.flag": stats,
                "dino_sim": {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "n_nan": 10, "n_prompts": 0},
            }
        },
        "not_run": {"a": "needs a VLM judge", "b": "needs a VLM judge"},
        "copies": {"marked": True, "share": 0.5, "mark_above_share": 0.05, "flagged": 5, "images": 10},
    }
    lines = format_summary(summary).splitlines()
    assert lines[1].split()[0] == "dino_sim_floored" and "headline" in lines[1]
    assert lines[2].startswith("  verdict: not ranked by default: copies references on 50 %")
    assert "  not run: a, b: needs a VLM judge" in lines
    assert any(line.split()[0] == "dino_sim" and "n/a: no image gave it a value" in line for line in lines)
    summary["copies"] = {"marked": False, "share": 0.0}
    assert verdict(summary) == "ranked (by dino_sim_floored)"
    summary["plumbing"] = True
    assert verdict(summary).startswith("not ranked by default: a plumbing check")


def test_the_verdict_on_a_judged_headline_follows_the_leaderboards_rule():
    """CHARIS ranks on a judged metric: a judge that failed its controls, or failed on more than 5 % of its
    questions, keeps the run off the default ranking, on the leaderboard (ranking.rank_rows) and so in the
    verdict; a failure rate at 5 % or an unjudged headline does not."""
    from idbench.builders.registry import get_benchmark
    from idbench.evaluate_pkg.report import verdict
    from idbench.leaderboard import query
    from idbench.leaderboard.ranking import _not_ranked_reason

    spec = get_benchmark("charis")
    key = spec.ranking[0]
    stats = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10, "n_nan": 0}
    summary = {"benchmark": "charis", "plumbing": False, "aggregates": {"overall": {key: stats}}, "copies": None}
    judge = {"model": "q", "calibrated": True, "reason": None, "incomplete": {}}
    assert verdict(summary | {"judge": judge}) == f"ranked (by {key})"
    failing = verdict(summary | {"judge": judge | {"calibrated": False, "reason": "exact_copy accuracy 0.25"}})
    assert failing.startswith("not ranked by default: its judge failed its controls: exact_copy accuracy 0.25")
    incomplete = verdict(summary | {"judge": judge | {"incomplete": {key: 0.08}}})
    assert incomplete == f"not ranked by default: the judge failed on 8% of {key}'s questions (over 5%)"
    # The leaderboard's rule on the same facts: both set apart.
    for record, ranked in (
        (judge, True),
        (judge | {"calibrated": False}, False),
        (judge | {"incomplete": {key: 0.08}}, False),
    ):
        row = {"judge": record, "copies": None, "aggregates": summary["aggregates"]}
        facts = query.row_facts(row, spec)
        reason = _not_ranked_reason(
            facts, True, facts.judge_key, include_uncalibrated=False, include_copies=False, include_judge_failures=False
        )
        assert (reason == "") == ranked
