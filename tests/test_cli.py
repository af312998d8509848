"""The idbench command line: help, the build report, one-line errors with exit code 2."""

from __future__ import annotations

import pytest

from idbench.cli import main
from conftest import make_collapse_source


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


def test_demo_builds_and_reads_back_all_three(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("charis", "cogcanvas", "identity-collapse"):
        assert (tmp_path / "datasets" / name / "README.md").is_file()
        assert f"load_dataset('{tmp_path / 'datasets' / name}', 'prompts')" in out
