"""The idbench command line: help, the build report, one-line errors with exit code 2."""

from __future__ import annotations

import pytest
from helpers import make_collapse_source

from idbench.cli import main

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def test_help_lists_every_job(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "build", "publish"):
        assert command in out


def test_build_prints_the_report(tmp_path, capsys):
    manifest = make_collapse_source(tmp_path / "src", 12)
    assert main(["build", "identity-collapse", "--source", str(manifest), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "subjects: 12 rows" in out and "prompts: 75 rows" in out
    assert "10 x interaction=5" in out
    assert (tmp_path / "out" / "README.md").is_file()


def test_bad_source_is_one_line_on_stderr(tmp_path, capsys):
    manifest = make_collapse_source(tmp_path / "src", 12)
    (tmp_path / "src" / "img" / "subject_005.jpg").unlink()
    code = main(["build", "identity-collapse", "--source", str(manifest), "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "row 6" in err and "subject_005.jpg" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_existing_output_needs_overwrite(tmp_path, capsys):
    manifest = make_collapse_source(tmp_path / "src", 12)
    args = ["build", "identity-collapse", "--source", str(manifest), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


@pytest.mark.e2e
@pytest.mark.slow
def test_demo_builds_scores_and_fills_the_leaderboard(tmp_path, capsys, monkeypatch, warm_home):
    # One of the five baselines keeps the test quick (each is ~2 min of scoring here; ranking several models
    # is the leaderboard tests' subject); the README's command runs all five.
    from idbench.demo import DEMO_PROMPTS, run_demo
    from idbench.leaderboard.store import Store

    monkeypatch.setenv("IDBENCH_HOME", str(warm_home))  # the session's features: what the battery scored is read
    run_demo(tmp_path, baselines=("collage",))
    out = capsys.readouterr().out
    store = Store()
    for name, title in (("charis", "CHARIS"), ("cogcanvas", "CogCanvas"), ("identity-collapse", "Identity Collapse")):
        assert (tmp_path / "datasets" / name / "README.md").is_file()
        # the demo's smaller builds (every cell of each design kept: core/demo.py)
        assert f"load_dataset('{tmp_path / 'datasets' / name}', 'prompts') -> {DEMO_PROMPTS[name]} rows" in out
        assert f"{title}: baselines ranked by" in out
        current = store.current_results(name)
        assert sorted(current["model_name"]) == ["baseline-collage"]
        assert current["plumbing"].all() and (current["profile"] == "tiny").all()
    assert out.count("PLUMBING CHECK") == 3
    # the collage pastes the references: shown with the mark, never ranked (the copy check)
    assert out.count("not ranked: copies references") == 3
    # the judged metrics not run: one line per reason, naming them all
    not_run = [line for line in out.splitlines() if line.strip().startswith("not run: ")]
    assert any("charis_score" in line for line in not_run) and any("attr_vqa" in line for line in not_run)
    assert not any("retrieval_p@1" in line for line in not_run)  # another task's metric: not listed
    # every next step it prints works where it is printed: `idbench jobs`, `idbench serve` (started, then stopped)
    from next_steps import walk

    assert [c[0] for c in walk(out, tmp_path)] == ["jobs", "serve"]
    capsys.readouterr()
    # a second run recognises the same submissions and scores nothing again
    run_demo(tmp_path, baselines=("collage",))
    assert "scored 0 queued submission(s)" in capsys.readouterr().out


def test_template_validate_and_baseline_commands(tmp_path, capsys):
    from idbench.builders.build import build

    build("identity-collapse", out=tmp_path / "data")
    data = str(tmp_path / "data")
    assert main(["template", "identity-collapse", "--data", data, "--out", str(tmp_path / "template")]) == 0
    assert "225 (prompt_id, seed) rows" in capsys.readouterr().out
    # the empty template is not a valid submission: every image is missing, and the message says so
    assert main(["validate", str(tmp_path / "template"), "--data", data]) == 2
    err = capsys.readouterr().err
    assert "nothing was written" in err and "01_s0.png" in err
    assert main(["template", "charis", "--data", data, "--out", str(tmp_path / "other")]) == 2
    assert "holds the identity-collapse benchmark, not charis" in capsys.readouterr().err
    assert (
        main(
            [
                "baseline",
                "clone",
                "identity-collapse",
                "--data",
                data,
                "--out",
                str(tmp_path / "clone"),
                "--size",
                "128",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "clone"), "--data", data]) == 0
    assert "valid: 225 images" in capsys.readouterr().out


def test_models_list_names_pinned_revisions(capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "openai/clip-vit-large-patch14@32bd64288804d66eefd0ccbe215aa642df71cc41" in out
    assert "dlib-face" in out and "tiny:" in out


# --- the main parser's options: --version, -v / --log-level; python -m idbench -----------------------


@pytest.mark.e2e
def test_python_dash_m_prints_the_version_from_the_package_metadata(tmp_path):
    import importlib.metadata
    import subprocess
    import sys

    # From a folder outside the repository: the installed package, not the working directory.
    done = subprocess.run([sys.executable, "-m", "idbench", "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"idbench {importlib.metadata.version('idbench')}"


@pytest.fixture
def fake_worker(monkeypatch, tmp_path):
    """`idbench worker --once` whose run_worker only logs, as the real one does per job."""
    import logging

    import idbench.leaderboard.worker as worker

    def run_worker(store, **kwargs):
        worker.log.info("job 1: FINISHED")
        logging.getLogger("urllib3.connectionpool").info("a library's chatter")
        return 1

    monkeypatch.setattr(worker, "run_worker", run_worker)
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    idbench_logger = logging.getLogger("idbench")
    level = idbench_logger.level
    yield
    idbench_logger.setLevel(level)  # main() sets it; other tests expect the default


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ([], False),
        (["-v"], True),
        (["--verbose"], True),
        (["--log-level", "info"], True),
        (["--log-level", "DEBUG"], True),
        (["--log-level", "ERROR"], False),
        (["-v", "--log-level", "ERROR"], False),
    ],
)
def test_verbosity_options_turn_on_idbench_logging(fake_worker, caplog, capsys, options, shown):
    assert main([*options, "worker", "--once"]) == 0
    assert "worker finished 1 job(s)" in capsys.readouterr().out
    assert ("job 1: FINISHED" in caplog.text) is shown
    assert "a library's chatter" not in caplog.text  # other libraries stay at WARNING


def test_an_unknown_log_level_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--log-level", "LOUD", "jobs"])
    assert exit_info.value.code == 2
    assert "--log-level" in capsys.readouterr().err


@pytest.mark.e2e
def test_verbose_log_lines_go_to_stderr(tmp_path):
    import subprocess
    import sys

    # A fresh interpreter, so logging.basicConfig really installs its stderr handler (pytest's own
    # handlers make it a no-op in this process). A stand-in command logs as the worker does.
    script = (
        "import logging, sys\n"
        "import idbench.cli as cli\n"
        "cli.build.cmd_build = lambda args: logging.getLogger('idbench.leaderboard.worker').info('job 1: FINISHED') or 0\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "-v", "build", "charis", "--out", "unused"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "INFO idbench.leaderboard.worker: job 1: FINISHED" in done.stderr
    assert "job 1: FINISHED" not in done.stdout


# --- score --hub-eval-results ---------------------------------------------------------------------------


@pytest.fixture
def recorded_scoring(monkeypatch, tmp_path):
    """`idbench score` with the scorer replaced by a hand-made summary; records whether it ran."""
    import json

    import idbench.evaluate_pkg.runner as runner

    calls = []

    def fake_score(submission, data, out, options, **kwargs):
        calls.append(options.profile)
        stats = {"mean": 0.30, "ci_low": 0.20, "ci_high": 0.40, "n": 45}
        return {
            "benchmark": "identity-collapse",
            "submission": {"model": "m"},
            "profile": options.profile,
            "plumbing": False,
            "sample_build": json.loads((data / "build_info.json").read_text())["sample_build"],
            "suite_version": "s",
            "idbench_version": "0",
            "not_run": {},
            # the ranked columns (the copy-floored twins: the Hub's headline tasks)
            "aggregates": {
                "overall": {"dino_sim_floored": dict(stats), "scr@0.5_floored": dict(stats)},
                "breakdowns": {},
            },
        }

    monkeypatch.setattr(runner, "score_submission", fake_score)

    def data(sample_build: bool):
        folder = tmp_path / ("sample" if sample_build else "real")
        folder.mkdir(exist_ok=True)
        (folder / "build_info.json").write_text(
            json.dumps({"benchmark": "identity-collapse", "sample_build": sample_build})
        )
        return folder

    return calls, data


def _score_args(tmp_path, data, *extra):
    return [
        "score",
        str(tmp_path / "sub"),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "out"),
        "--hub-eval-results",
        str(tmp_path / "model-repo"),
        "--dataset-id",
        "org/identity-collapse",
        *extra,
    ]


@pytest.mark.slow
def test_hub_eval_results_refuses_a_sample_build_before_scoring(recorded_scoring, tmp_path, capsys):
    calls, data = recorded_scoring
    assert main(_score_args(tmp_path, data(sample_build=True))) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "sample build" in err and "Traceback" not in err
    assert calls == []  # refused before any scoring
    assert not (tmp_path / "model-repo").exists()
    # and a plumbing profile as before, also before scoring
    assert main(_score_args(tmp_path, data(sample_build=False), "--profile", "tiny")) == 2
    assert "plumbing" in capsys.readouterr().err and calls == []


def test_hub_eval_results_records_revision_and_source(recorded_scoring, tmp_path, capsys):
    import yaml

    calls, data = recorded_scoring
    revision = "0123456789abcdef0123456789abcdef01234567"
    url = "https://huggingface.co/spaces/org/leaderboard"
    args = _score_args(
        tmp_path,
        data(sample_build=False),
        "--dataset-revision",
        revision,
        "--source-url",
        url,
        "--source-name",
        "idbench leaderboard",
    )
    assert main(args) == 0, capsys.readouterr().err
    assert calls == ["paper"]
    entries = yaml.safe_load((tmp_path / "model-repo" / ".eval_results" / "identity-collapse.yaml").read_text())
    assert {e["dataset"]["task_id"] for e in entries} == {"dino_sim_floored", "one_minus_scr_at_0.5_floored"}
    assert all(e["dataset"]["revision"] == revision for e in entries)
    assert all(e["source"] == {"url": url, "name": "idbench leaderboard"} for e in entries)
    assert next(e for e in entries if e["dataset"]["task_id"] == "one_minus_scr_at_0.5_floored")[
        "value"
    ] == pytest.approx(0.70)
    # a source name needs its url
    assert main(_score_args(tmp_path, data(sample_build=False), "--source-name", "x")) == 2
    assert "--source-url" in capsys.readouterr().err


def test_the_demo_tables_name_each_columns_unit():
    """The demo's ranked tables show values under their display conventions, so each header says which:
    a reader must not take 50.00 for a raw aesthetic score (the LAION predictor's scale is 1-10)."""
    import pandas as pd

    from idbench.builders.registry import get_benchmark
    from idbench.demo import board_text

    overall = {7: {"aesthetic": {"mean": 5.0}, "attr_vqa": {"mean": 0.25}}}
    rows = pd.DataFrame(
        {
            "rank": [1],
            "rank interval": ["1"],
            "tier": [1],
            "model": ["baseline-one"],
            "submission": [7],
            "not ranked": [""],
        }
    )
    header, row = board_text(get_benchmark("cogcanvas"), "aesthetic", rows, overall, {}).splitlines()[1:3]
    assert header.split() == ["rank", "interval", "tier", "baseline", "aesthetic", "(x10)", "attr_vqa", "(%)"]
    assert row.split() == ["1", "1", "1", "one", "50.00", "25.00"]


def test_the_demo_table_ranks_a_tie_as_a_tie(tmp_path):
    """Two baselines with the same mean share a rank, as on the leaderboard (the demo prints the store's
    board); a copying one is set apart."""
    from idbench.demo import ranked_table
    from idbench.leaderboard.queue import claim, finish
    from idbench.leaderboard.store import Store

    store = Store(tmp_path / "home")
    for name, value, marked in (("a", 5.0, False), ("b", 5.0, False), ("c", 4.0, False), ("d", 9.0, True)):
        store.add_submission(
            benchmark="cogcanvas",
            benchmark_version="v",
            data_dir=tmp_path,
            model_name=f"baseline-{name}",
            metadata={},
            content_hash=name.ljust(64, "0"),
            stored_path=tmp_path,
        )
        summary = {
            "benchmark": "cogcanvas",
            "suite_version": "s",
            "profile": "tiny",
            "plumbing": True,
            "idbench_version": "0",
            "models": {},
            "aggregates": {"overall": {"dino_sim_floored": {"mean": value}}, "breakdowns": {}},
            "not_run": {},
            "copies": {"marked": marked, "share": 1.0 if marked else 0.0},
        }
        finish(store, claim(store, "w", 60), summary, tmp_path / name)
    table = ranked_table(store, "cogcanvas", ("a", "b", "c", "d"))
    ranks = {line.split()[3]: line.split()[0] for line in table.splitlines()[2:6]}
    assert ranks == {"a": "1", "b": "1", "c": "3", "d": "-"}
    assert "not ranked: copies references: 100 % of images" in table


def test_the_demo_help_states_the_demo_builds_sizes():
    # The parser does not import the demo (it loads datasets and pandas), so its text states the sizes:
    # kept true here.
    from idbench.cli import make_parser
    from idbench.demo import DEMO_PROMPTS, demo_baselines

    commands = next(a for a in make_parser()._actions if getattr(a, "choices", None) and "demo" in a.choices)
    text = " ".join(commands.choices["demo"].description.split())
    charis, cogcanvas, collapse = (DEMO_PROMPTS[n] for n in ("charis", "cogcanvas", "identity-collapse"))
    assert f"CHARIS {charis} prompts, CogCanvas {cogcanvas}, Identity Collapse {collapse} x 3 seeds" in text
    assert "five model-free baselines per benchmark (CogCanvas seven" in text
    assert [len(demo_baselines(name)) for name in ("charis", "cogcanvas", "identity-collapse")] == [5, 7, 5]
