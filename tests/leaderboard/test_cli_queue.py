"""The leaderboard's command line: submit, worker --once, jobs, rescore --all, against $IDBENCH_HOME."""

from __future__ import annotations

import json
import re

import pytest

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


@pytest.mark.slow
def test_submit_work_list_and_rescore(tmp_path, monkeypatch, capsys, warm_home):
    monkeypatch.setenv("IDBENCH_HOME", str(warm_home))
    data_dir = tmp_path / "home" / "benchmarks" / "identity-collapse"  # the default --data location
    build("identity-collapse", out=data_dir)
    make_baseline("collage", load_benchmark_data(data_dir), tmp_path / "collage", size=128)
    broken = tmp_path / "broken"
    make_baseline("clone", load_benchmark_data(data_dir), broken, size=128)
    (broken / "images" / "05_s1.png").write_bytes(b"not an image")

    assert (
        main(["submit", str(tmp_path / "collage"), "--benchmark", "identity-collapse", "--model-name", "collage-test"])
        == 0
    )
    out = capsys.readouterr().out
    # No paper model can be downloaded here: the printed next step is the one that works offline.
    assert "queued: submission 1, job 1" in out and "worker --once --profile tiny" in out and "plumbing" in out
    assert (
        main(["submit", str(tmp_path / "collage"), "--benchmark", "identity-collapse", "--model-name", "collage-test"])
        == 0
    )
    assert "already submitted" in capsys.readouterr().out
    # a malformed submission: one message naming the id and file, nothing queued
    assert main(["submit", str(broken), "--benchmark", "identity-collapse"]) == 2
    err = capsys.readouterr().err
    assert "05" in err and "05_s1.png" in err

    assert main(["worker", "--once", "--profile", "tiny"]) == 0
    captured = capsys.readouterr()
    assert "worker finished 1 job(s)" in captured.out
    # stderr is no terminal: one line when the job starts, one when it ends, its stage lines between
    lines = captured.err.splitlines()
    assert lines[0] == "job 1 (collage-test): scoring, attempt 1" and re.fullmatch(
        r"job 1: FINISHED in [\d.]+ s", lines[-1]
    )
    assert all(line.startswith("job 1: ") for line in lines[1:]) and "\r" not in captured.err, captured.err
    assert any(re.fullmatch(r"job 1: clip features: done in [\d.]+ s, .*", line) for line in lines), captured.err
    assert main(["jobs", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["state"] == "FINISHED" and job["model"] == "collage-test"

    assert main(["rescore", "--all"]) == 0
    assert "queued 1 rescoring job(s)" in capsys.readouterr().out
    assert main(["worker", "--once", "--profile", "tiny"]) == 0
    capsys.readouterr()
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert out.count("FINISHED") == 2 and "collage-test" in out


@pytest.mark.slow
def test_hub_commands_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    data_dir = tmp_path / "data"
    build("identity-collapse", out=data_dir)
    # publish --eval-yaml --dry-run: the task declarations join the upload list, no network
    assert main(["publish", str(data_dir), "--repo-id", "org/identity-collapse", "--dry-run", "--eval-yaml"]) == 0
    assert "  eval.yaml" in capsys.readouterr().out
    # a tiny-profile score must never become a model's published Eval Result
    make_baseline("collage", load_benchmark_data(data_dir), tmp_path / "collage", size=128)
    code = main(
        [
            "score",
            str(tmp_path / "collage"),
            "--data",
            str(data_dir),
            "--out",
            str(tmp_path / "out"),
            "--profile",
            "tiny",
            "--metrics",
            "clip_t",
            "--hub-eval-results",
            str(tmp_path / "model-repo"),
            "--dataset-id",
            "org/identity-collapse",
        ]
    )
    assert code == 2
    assert "plumbing" in capsys.readouterr().err.lower()
    assert not (tmp_path / "model-repo" / ".eval_results").exists()
    # sync --dry-run on an empty store plans nothing and reaches no network
    assert main(["sync", "--requests-repo", "org/requests", "--results-repo", "org/results", "--dry-run"]) == 0
    assert "would push 0 file(s)" in capsys.readouterr().out


def test_rescore_and_withdraw_choose_a_backend_and_nothing_else(tmp_path, monkeypatch, capsys):
    """The admin commands go through the queue interface: the local store by id, a Hub request by path."""
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    assert main(["rescore", "--submission", "7"]) == 2
    assert "no submission with id 7" in capsys.readouterr().err
    assert main(["rescore", "--request", "charis/m/0123456789ab.json"]) == 2
    assert "needs --hub ORG/REQUESTS and --request PATH" in capsys.readouterr().err
    assert main(["withdraw", "abc", "--reason", "r"]) == 2
    assert "is not a number" in capsys.readouterr().err


def test_submit_names_the_paper_worker_where_every_paper_model_is_here(monkeypatch):
    from idbench.cli import queue as queue_cli
    from idbench.evaluate_pkg.models import registry

    monkeypatch.setattr(registry, "check_available", lambda card, models_dir=None: None)
    hint = queue_cli._worker_hint()
    assert "worker --once`" in hint and "tiny" not in hint
