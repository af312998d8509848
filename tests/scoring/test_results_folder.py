"""The result folder has one owner, evaluate_pkg/results.py (issue 42, item 1): its names, its writers and
its bounded readers. What it writes is what the scorer wrote before, byte for byte; what cannot be read
is one line naming the file; and no other module spells the folder's file names."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from idbench.atomic import OutputExistsError
from idbench.evaluate_pkg import results, results_bounds
from idbench.evaluate_pkg.compare import CompareError, load_run
from idbench.leaderboard import samples

# Fast tier: no model, no server; the one test that starts Python is marked e2e.
pytestmark: list = []

ROOT = Path(__file__).resolve().parents[2]


def _samples() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": ["p0", "p0", "p1", "p1", "p1"],
            "seed": [0, 0, 1, 1, 1],
            "metric": ["dino_sim", "clip_t", "dino_sim", "dino_sim", "clip_t"],
            "subject": ["", "", "s0", "s1", ""],
            "value": [0.5, 0.25, float("nan"), 0.75, 0.125],
        }
    )


def _summary() -> dict:
    return {
        "benchmark": "identity-collapse",
        "submission": {"model": "m"},
        "aggregates": {"overall": {"dino_sim": {"mean": 0.625, "n": 3}}},
        "plumbing": True,
        "notes": {},
    }


def _evidence() -> pd.DataFrame:
    return pd.DataFrame({"prompt_id": ["p1"], "seed": [1], "metric": ["copies"], "evidence": ['{"flagged": true}']})


def _one_line_naming(error: BaseException, file: Path) -> str:
    text = str(error)
    assert "\n" not in text and text.startswith(str(file)), text
    return text


def test_written_then_read_gives_back_the_frames_and_the_summary(tmp_path):
    out = tmp_path / "run"
    with results.staged(out) as staging:
        results.write_data(staging, _samples(), _summary(), _evidence())
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [results.SAMPLES_FILE, results.EVIDENCE_FILE, results.AGGREGATES_FILE]
    )
    pd.testing.assert_frame_equal(results.read_samples(out), _samples())
    pd.testing.assert_frame_equal(results.read_evidence(out), _evidence())
    assert results.read_aggregates(out) == _summary()
    # The columns, the optional ones present and one metric's rows, as the pages ask for them.
    picked = results.read_samples(out, ("prompt_id", "value"), optional=("subject", "absent"), metric="clip_t")
    assert picked.columns.tolist() == ["prompt_id", "value", "subject"]
    assert picked["value"].tolist() == [0.25, 0.125]


def test_the_files_are_byte_for_byte_what_the_scorer_wrote_before(tmp_path):
    """The writers only moved: the parquet files are pandas' to_parquet without the index, the summary
    json.dumps(indent=2, sort_keys=True, default=str) plus a newline."""
    results.write_data(tmp_path, _samples(), {**_summary(), "when": Path("x")}, _evidence())
    _samples().to_parquet(tmp_path / "expected.parquet", index=False)
    assert (tmp_path / results.SAMPLES_FILE).read_bytes() == (tmp_path / "expected.parquet").read_bytes()
    expected = json.dumps({**_summary(), "when": Path("x")}, indent=2, sort_keys=True, default=str) + "\n"
    assert (tmp_path / results.AGGREGATES_FILE).read_text() == expected
    assert results.read_aggregates(tmp_path)["when"] == "x"


def test_a_folder_is_replaced_whole_and_keeps_what_it_carries(tmp_path):
    out = tmp_path / "run"
    with results.staged(out) as staging:
        results.write_data(staging, _samples(), _summary())
        (staging / "shards").mkdir()
        (staging / "shards" / "1-of-2.json").write_text("{}")
    with pytest.raises(OutputExistsError):
        with results.staged(out):
            pass
    with pytest.raises(RuntimeError), results.staged(out, overwrite=True) as staging:
        results.write_data(staging, _samples().head(1), _summary())
        raise RuntimeError("crash while writing")
    assert len(results.read_samples(out)) == len(_samples())  # the old folder is still whole
    with results.staged(out, overwrite=True, carry="shards") as staging:
        results.write_data(staging, _samples().head(1), _summary())
        results.write_copy_index(staging, [{"prompt_id": "p1"}])
    assert len(results.read_samples(out)) == 1
    assert (out / "shards" / "1-of-2.json").read_text() == "{}"
    assert json.loads((out / results.COPY_INDEX_FILE).read_text()) == [{"prompt_id": "p1"}]
    assert not (out / results.EVIDENCE_FILE).exists() and results.read_evidence(out) is None


def test_an_absent_file_is_none_for_the_parquet_readers(tmp_path):
    assert results.read_samples(tmp_path) is None
    assert results.read_evidence(tmp_path) is None
    assert samples.sample_scores(tmp_path, "dino_sim").empty
    with pytest.raises(results.ResultFileError) as raised:
        results.read_aggregates(tmp_path)
    _one_line_naming(raised.value, tmp_path / results.AGGREGATES_FILE)


def test_a_truncated_parquet_is_one_line_naming_the_file(tmp_path):
    results.write_samples(tmp_path, _samples())
    file = tmp_path / results.SAMPLES_FILE
    file.write_bytes(file.read_bytes()[:-40])
    with pytest.raises(results.ResultFileError) as raised:
        results.read_samples(tmp_path, ("prompt_id", "value"))
    assert "unreadable as parquet" in _one_line_naming(raised.value, file)
    with pytest.raises(results.ResultFileError):  # the model page's reader: the same check, the same line
        samples.sample_scores(tmp_path, "dino_sim")


def test_a_missing_column_is_one_line_naming_the_file_and_the_column(tmp_path):
    results.write_samples(tmp_path, _samples().drop(columns=["subject"]))
    with pytest.raises(results.ResultFileError) as raised:
        results.read_samples(tmp_path, ("prompt_id", "subject", "value"))
    assert "no column subject" in _one_line_naming(raised.value, tmp_path / results.SAMPLES_FILE)


def test_an_oversize_parquet_is_one_line_naming_the_file_for_every_reader(tmp_path, monkeypatch):
    results.write_data(tmp_path, _samples(), _summary(), _evidence())
    monkeypatch.setattr(results_bounds, "MAX_RESULT_ROWS", 4)
    file = tmp_path / results.SAMPLES_FILE
    with pytest.raises(results.ResultsTooLarge) as raised:
        results.read_samples(tmp_path, ("prompt_id", "value"))
    assert "5 rows, over the 4" in _one_line_naming(raised.value, file)
    with pytest.raises(results.ResultsTooLarge) as raised:
        samples.sample_scores(tmp_path, "dino_sim")
    _one_line_naming(raised.value, file)
    monkeypatch.setattr(results_bounds, "MAX_RESULT_ROWS", 0)
    with pytest.raises(results.ResultsTooLarge) as raised:
        samples.evidence(tmp_path, "p1", 1)
    _one_line_naming(raised.value, tmp_path / results.EVIDENCE_FILE)


def test_a_truncated_or_oversize_summary_is_one_line_naming_the_file(tmp_path):
    results.write_aggregates(tmp_path, _summary())
    file = tmp_path / results.AGGREGATES_FILE
    with pytest.raises(results.ResultFileError) as raised:
        results.read_aggregates(tmp_path, max_bytes=10)
    assert f"more than the 10 an {results.AGGREGATES_FILE} may have" in _one_line_naming(raised.value, file)
    file.write_text(file.read_text()[:-30])
    with pytest.raises(results.ResultFileError) as raised:
        results.read_aggregates(tmp_path)
    assert "unreadable" in _one_line_naming(raised.value, file)


def test_compare_says_the_readers_line_as_its_own(tmp_path):
    results.write_data(tmp_path, _samples(), _summary())
    file = tmp_path / results.AGGREGATES_FILE
    file.write_text(file.read_text()[:-30])
    with pytest.raises(CompareError) as raised:
        load_run(tmp_path)
    assert "unreadable" in _one_line_naming(raised.value, file)


# --- nobody else spells the names ----------------------------------------------------------------

NAMES = (
    results.SAMPLES_FILE,
    results.AGGREGATES_FILE,
    results.EVIDENCE_FILE,
    results.REPORT_FILE,
    results.COPY_INDEX_FILE,
)
# CHARIS's alignment study writes a folder of its own (tables, plot, study.json) with its own report.md.
OTHER_FOLDERS = {("benchmarks/charis/alignment.py", results.REPORT_FILE)}


def _spelled(source: str) -> list[tuple[int, str]]:
    """String constants in ``source`` that are one of the names, or a path ending in one (an f-string's
    ``"/aggregates.json"`` part included). Text that mentions a name among other words (a docstring, a
    message) is not a spelling: nothing opens a file by it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for name in NAMES:
                if node.value == name or node.value.endswith("/" + name):
                    found.append((node.lineno, name))
    return found


def _sources() -> list[Path]:
    """The package's modules (the folders pyproject.toml maps to idbench.*) and the bench scripts."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    folders = sorted({ROOT / folder for folder in mapping.values()} | {ROOT / "bench"})
    return [path for folder in folders for path in sorted(folder.rglob("*.py")) if "tests" not in path.parts]


def test_no_module_but_results_spells_the_folders_file_names():
    owner = ROOT / "evaluate_pkg" / "results.py"
    found = []
    for path in _sources():
        if path == owner:
            continue
        where = path.relative_to(ROOT).as_posix()
        found += [
            f"{where}:{line}: {name!r}"
            for line, name in _spelled(path.read_text(encoding="utf-8"))
            if (where, name) not in OTHER_FOLDERS
        ]
    assert found == [], "import the names from idbench.evaluate_pkg.results"


def test_the_spelling_scan_sees_a_name_and_a_path_but_not_prose():
    code = 'a = "results.parquet"\nb = f"{folder}/aggregates.json"\n"""Writes report.md and results.parquet."""\n'
    assert _spelled(code) == [(1, "results.parquet"), (2, "aggregates.json")]


@pytest.mark.e2e
def test_the_results_module_imports_no_torch():
    """The leaderboard (a Space without torch) reads result folders through this module."""
    code = (
        "import sys\n"
        "import idbench.evaluate_pkg.results, idbench.leaderboard.samples, idbench.leaderboard.hub_mirror\n"
        "print(sorted(m for m in ('torch', 'torchvision', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
