"""`idbench run`: from nothing (no --data: the shipped sample is built) to a scored, queued submission in one
command, resumable; and `idbench.generate` from Python with any callable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import idbench
from idbench.cli import main
from idbench.evaluate_pkg.data import load_benchmark_data

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

HERE = Path(__file__).parent


@pytest.fixture()
def standin_on_path():
    sys.path.insert(0, str(HERE))
    yield __import__("standin_adapters")
    sys.path.remove(str(HERE))


@pytest.mark.e2e
@pytest.mark.slow
def test_run_builds_generates_validates_scores_and_submits(tmp_path, monkeypatch, capsys, standin_on_path):
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "run"
    argv = [
        "run",
        "cogcanvas",
        "--model",
        "standin_adapters:tinted",
        "--out",
        str(out),
        "--resolution",
        "32",
        "--profile",
        "tiny",
        "--metrics",
        "clip_t",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--submit",
    ]
    assert main(argv) == 0
    said = capsys.readouterr().out
    for step in ("[1/4] build", "[2/4] generate", "[3/4] validate", "[4/4] score", "recorded: submission 1, job 1"):
        assert step in said
    assert "worker" not in said  # no worker (and no paper models) needed
    sys.path.insert(0, str(HERE.parent))
    from next_steps import walk

    assert walk(said, tmp_path) == [["serve"]]  # "See it: `idbench serve`", and it starts on this store
    data = load_benchmark_data(out / "data")
    summary = json.loads((out / "results" / "aggregates.json").read_text())
    # Every required image was drawn and scored; the tiny profile is labelled a plumbing check.
    assert summary["images"] == len(data.required_pairs) and summary["plumbing"] is True
    assert summary["aggregates"]["overall"]["clip_t"]["n"] > 0
    record = json.loads((out / "submission" / "submission.json").read_text())["generation"]
    assert record["adapter"] == "standin_adapters:tinted" and record["resolution"] == 32
    # The leaderboard holds the run's scores, recorded from the run's feature cache: the store's own
    # cache (what a worker would have filled by scoring again) was never made.
    from idbench.leaderboard.store import Store

    stored = Store(tmp_path / "home").current_results("cogcanvas")
    assert list(stored["submission_id"]) == [1] and (stored["profile"] == "tiny").all()
    assert stored["aggregates"][0]["overall"] == summary["aggregates"]["overall"]
    assert not (tmp_path / "home" / "features").exists()

    # A rerun draws nothing, rescores from the cache, and recognises the queued submission.
    assert main(argv) == 0
    again = capsys.readouterr().out
    assert f"generated 0, skipped {len(data.required_pairs)} already there" in again
    assert "already submitted" in again


def test_generate_from_python_with_a_callable_or_a_name(tmp_path, standin_on_path):
    from idbench.builders.build import build

    build("charis", out=tmp_path / "charis")
    report = idbench.generate(
        tmp_path / "charis", standin_on_path.tinted, tmp_path / "a", resolution=32, limit=4, progress=False
    )
    assert (report.generated, report.skipped, report.total) == (4, 0, 4)
    by_name = idbench.generate(
        tmp_path / "charis", "standin_adapters:tinted", tmp_path / "b", resolution=32, limit=4, progress=False
    )
    assert by_name.generated == 4
    images_a = sorted(p.read_bytes() for p in (tmp_path / "a").rglob("*.png"))
    assert images_a == sorted(p.read_bytes() for p in (tmp_path / "b").rglob("*.png"))
    with pytest.raises(idbench.IdbenchError, match="already made"):
        idbench.generate(tmp_path / "charis", standin_on_path.tinted, tmp_path / "c", steps=4)
    # In shards: two calls fill one folder, each row once, the same pictures as one call.
    halves = [
        idbench.generate(
            tmp_path / "charis", standin_on_path.tinted, tmp_path / "d", resolution=32, shard=f"{k}/2", progress=False
        )
        for k in range(2)
    ]
    whole = idbench.generate(tmp_path / "charis", standin_on_path.tinted, tmp_path / "e", resolution=32, progress=False)
    assert halves[0].generated + halves[1].generated == whole.generated and min(h.generated for h in halves) > 0
    assert sorted(p.read_bytes() for p in (tmp_path / "d").rglob("*.png")) == sorted(
        p.read_bytes() for p in (tmp_path / "e").rglob("*.png")
    )


@pytest.mark.slow
def test_the_run_command_is_idbench_run(tmp_path, monkeypatch, capsys):
    """`idbench run` hands its flags to idbench.api.run (what a notebook calls) and prints its stage lines."""
    import idbench.api

    seen = {}

    def recorded_run(benchmark, model, out, **options):
        seen.update(options, benchmark=benchmark, model=model, out=out)
        options["echo"]("[2/4] generate: recorded")
        return idbench.api.RunResult(out / "data", out / "submission", out / "results", None, {})

    monkeypatch.setattr(idbench.api, "run", recorded_run)
    argv = [
        "run",
        "charis",
        "--model",
        "m",
        "--out",
        str(tmp_path),
        "--metrics",
        "clip_t,dino_sim",
        "--steps",
        "3",
        "--profile",
        "tiny",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == "[2/4] generate: recorded\n"
    assert (seen["benchmark"], seen["model"], seen["out"], seen["data"]) == ("charis", "m", tmp_path, None)
    assert seen["metrics"] == ["clip_t", "dino_sim"] and seen["steps"] == 3 and seen["profile"] == "tiny"
    assert seen["device"] == "cpu" and seen["resolution"] == 1024 and seen["submit"] is False
    assert "run" in idbench.__all__ and "RunResult" in idbench.__all__
