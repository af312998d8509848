"""One base class for user errors, and main() turns any of them into one line for every command."""

from __future__ import annotations

import importlib

import pytest

from idbench import cli
from idbench.cli import main
from idbench.errors import IdbenchError

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

# Every user-error class, with the built-in base it had before IdbenchError (callers catch those).
USER_ERRORS = [
    ("idbench.atomic", "OutputExistsError", FileExistsError),
    ("idbench.builders.card_check", "CardError", Exception),
    ("idbench.builders.publish", "EvalYamlRejected", Exception),
    ("idbench.builders.publish", "PublishError", Exception),
    ("idbench.builders.sources", "SourceError", ValueError),
    ("idbench.cli", "ScoringErrorForCli", ValueError),
    ("idbench.benchmarks.charis.review", "ReviewError", ValueError),
    ("idbench.ekb.model", "EKBError", ValueError),
    ("idbench.benchmarks.charis.alignment", "AlignmentError", ValueError),
    ("idbench.evaluate_pkg.data", "BenchmarkDataError", ValueError),
    ("idbench.evaluate_pkg.hub_submission", "HubSubmissionError", ValueError),
    ("idbench.evaluate_pkg.images", "ImageError", ValueError),
    ("idbench.evaluate_pkg.models.base", "ModelNotAvailableError", RuntimeError),
    ("idbench.evaluate_pkg.models.registry", "UnknownModelError", LookupError),
    ("idbench.evaluate_pkg.runner", "ScoringError", ValueError),
    ("idbench.evaluate_pkg.submission", "SubmissionError", ValueError),
    ("idbench.leaderboard.hub", "HubExportError", ValueError),
    ("idbench.leaderboard.store", "RateLimitError", ValueError),
    ("idbench.leaderboard.store", "UnknownIdError", KeyError),
]


@pytest.mark.parametrize(("module", "name", "builtin"), USER_ERRORS, ids=[n for _, n, _ in USER_ERRORS])
def test_every_user_error_is_an_idbench_error_and_keeps_its_builtin_base(module, name, builtin):
    error = getattr(importlib.import_module(module), name)
    assert issubclass(error, IdbenchError) and issubclass(error, builtin)


def test_the_old_import_path_of_output_exists_error_still_works():
    from idbench.atomic import OutputExistsError
    from idbench.builders.write import OutputExistsError as reexported

    assert reexported is OutputExistsError


def _run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def test_any_command_turns_an_idbench_error_into_one_line(monkeypatch, capsys):
    def fails(args):
        raise IdbenchError("models.yaml: no such profile 'huge'")

    monkeypatch.setattr(cli.queue, "cmd_jobs", fails)
    assert _run(capsys, ["jobs"]) == (2, "idbench jobs: error: models.yaml: no such profile 'huge'\n")


def test_an_error_with_problems_lists_them_one_a_line(monkeypatch, capsys):
    error = IdbenchError("01: missing image 01_s0.png\n02: unknown prompt id")
    error.problems = ["01: missing image 01_s0.png", "02: unknown prompt id"]

    def fails(args):
        raise error

    monkeypatch.setattr(cli.queue, "cmd_jobs", fails)
    code, err = _run(capsys, ["jobs"])
    assert code == 2
    assert err.splitlines() == [
        "idbench jobs: error: 2 problem(s), nothing was written:",
        "  01: missing image 01_s0.png",
        "  02: unknown prompt id",
    ]


def test_a_bug_keeps_its_traceback(monkeypatch):
    def fails(args):
        raise ZeroDivisionError("a bug, not the user's input")

    monkeypatch.setattr(cli.queue, "cmd_jobs", fails)
    with pytest.raises(ZeroDivisionError):
        main(["jobs"])


# --- build --reviewed-prompts / --curate: these ended in tracebacks before --------------------------


def test_build_with_a_missing_review_file_is_one_line(tmp_path, capsys):
    code, err = _run(
        capsys, ["build", "charis", "--out", str(tmp_path / "out"), "--reviewed-prompts", str(tmp_path / "review.csv")]
    )
    assert code == 2 and err == f"idbench build: error: {tmp_path / 'review.csv'}: no such review file\n"
    assert not (tmp_path / "out").exists()


def test_build_with_a_review_without_its_baseline_is_one_line(tmp_path, capsys):
    review = tmp_path / "review.csv"
    review.write_text("prompt_id,status\nc-1,approved\n")
    code, err = _run(capsys, ["build", "charis", "--out", str(tmp_path / "out"), "--reviewed-prompts", str(review)])
    assert code == 2 and err.startswith("idbench build: error: ") and "baseline" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "thresholds.json: "),
        ('{"min_sharpness": 3}', "unknown key"),
        ('{"min_side": "x"}', "min_side"),
        ("[1]", "JSON object"),
    ],
)
def test_build_with_bad_quality_thresholds_is_one_line(tmp_path, capsys, text, expected):
    thresholds = tmp_path / "thresholds.json"
    thresholds.write_text(text)
    argv = [
        "build",
        "cogcanvas",
        "--out",
        str(tmp_path / "out"),
        "--curate",
        "--profile",
        "tiny",
        "--quality-thresholds",
        str(thresholds),
    ]
    code, err = _run(capsys, argv)
    assert code == 2 and err.startswith("idbench build: error: ") and "thresholds.json" in err and expected in err
    assert not (tmp_path / "out").exists()


# Asks the curation stage's model loader for a model that is not in the cache (the refusal under test).
@pytest.mark.slow
def test_build_whose_curation_stage_lacks_its_model_is_one_line(tmp_path, capsys, monkeypatch):
    # The paper profile's encoders are not in an empty Hugging Face cache: the first model stage stops.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    code, err = _run(capsys, ["build", "charis", "--out", str(tmp_path / "out"), "--curate"])
    assert (
        code == 2 and err.startswith("idbench build: error: ") and "is not available" in err and "--profile tiny" in err
    )
    assert not (tmp_path / "out").exists()


# --- folder variables that cannot be a folder (issue 40, item 7 b-d) ----------------------------------


@pytest.fixture(scope="module")
def collapse_submission(tmp_path_factory):
    """The identity-collapse sample and one 64 px baseline, for `idbench score`."""
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.data import load_benchmark_data

    root = tmp_path_factory.mktemp("collapse")
    build("identity-collapse", out=root / "data")
    make_baseline("collage", load_benchmark_data(root / "data"), root / "collage", size=64)
    return root


def _one_line(err: str, command: str) -> str:
    """The error line of ``command`` (progress lines on stderr aside): exactly one, no traceback."""
    lines = [line for line in err.splitlines() if line.startswith(f"idbench {command}")]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def test_models_list_with_a_5000_character_models_folder_is_one_short_line(monkeypatch, capsys):
    monkeypatch.setenv("IDBENCH_MODELS", "/tmp/" + "a" * 5000)
    code, err = _run(capsys, ["models", "list"])
    line = _one_line(err, "models")
    assert code == 2 and err.count("\n") == 1
    assert line.startswith("idbench models: error: IDBENCH_MODELS='/tmp/aaa") and "(5005 characters)" in line
    assert "at most 1024" in line and len(line) < 250


@pytest.mark.slow
def test_score_with_the_cache_variable_pointing_at_a_file_is_one_line(
    monkeypatch, capsys, tmp_path, collapse_submission
):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    monkeypatch.setenv("IDBENCH_CACHE", str(afile))
    argv = ["score", str(collapse_submission / "collage"), "--data", str(collapse_submission / "data")]
    code, err = _run(capsys, [*argv, "--out", str(tmp_path / "out"), "--profile", "tiny"])
    line = _one_line(err, "score")
    assert code == 2 and line == f"idbench score: error: IDBENCH_CACHE={str(afile)!r}: it is a file, not a folder"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("variable", "argv"),
    [("IDBENCH_HOME", ["jobs"]), ("IDBENCH_HOME", ["env"]), ("IDBENCH_MODELS", ["models", "list"])],
)
def test_an_empty_folder_variable_is_refused_not_taken_for_the_default(monkeypatch, capsys, variable, argv):
    monkeypatch.setenv(variable, "")
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if argv == ["env"]:  # the bug-report printout shows it, as it shows any value it cannot read
        assert code == 0 and f"INVALID ({variable} is set but empty" in captured.out
        return
    line = _one_line(captured.err, argv[0])
    assert code == 2 and captured.err.count("\n") == 1
    assert line.endswith(
        f"{variable} is set but empty: give a folder, or unset it for the default ~/"
        + (".idbench" if variable == "IDBENCH_HOME" else ".cache/idbench/models")
    )
