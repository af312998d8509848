"""Results files read back (``idbench compare``, the app's model pages) are held to bounds before any
value is decoded (issue 29, item 4): a few MB of parquet can hold tens of millions of rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from idbench.evaluate_pkg import results_bounds
from idbench.evaluate_pkg.results_bounds import results_file_problem

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def _write(path, rows: int, text: str = "x") -> None:
    """``rows`` distinct (prompt, seed) rows of one metric; ``note`` repeats ``text`` (plainly encoded,
    so its uncompressed size is rows x len(text), while zstd makes the file small)."""
    table = pa.table(
        {
            "prompt_id": [f"{i:06d}" for i in range(rows)],
            "seed": [0] * rows,
            "metric": ["clip_t"] * rows,
            "subject": [""] * rows,
            "value": [0.5] * rows,
            "note": [text] * rows,
        }
    )
    pq.write_table(table, path, use_dictionary=False, compression="zstd")


def test_a_file_within_the_bounds_passes(tmp_path):
    _write(tmp_path / "r.parquet", 100)
    assert results_file_problem(tmp_path / "r.parquet") is None


def test_rows_over_the_bound_are_refused_from_the_footer(tmp_path, monkeypatch):
    monkeypatch.setattr(results_bounds, "MAX_RESULT_ROWS", 99)
    _write(tmp_path / "r.parquet", 100)
    why = results_file_problem(tmp_path / "r.parquet")
    assert why is not None and str(tmp_path / "r.parquet") in why and "100 rows" in why and "99" in why


def test_only_the_columns_read_count_against_the_size_bound(tmp_path, monkeypatch):
    # 2,000 rows of a 2 kB text: about 4 MB uncompressed in "note", which compresses to almost nothing.
    _write(tmp_path / "r.parquet", 2000, "y" * 2000)
    monkeypatch.setattr(results_bounds, "MAX_RESULT_BYTES", 1024 * 1024)
    assert "uncompressed" in results_file_problem(tmp_path / "r.parquet")
    assert results_file_problem(tmp_path / "r.parquet", ["prompt_id", "seed", "metric", "value"]) is None
    assert (tmp_path / "r.parquet").stat().st_size < 200_000  # what makes the bound needed: the file is small


def test_compare_refuses_an_oversized_results_file_in_one_line(tmp_path, monkeypatch, capsys):
    from idbench.cli import main

    summary = {
        "benchmark": "identity-collapse",
        "build": {"prompts_sha256": "x"},
        "suite_version": "0.2",
        "profile": "tiny",
        "task": "reference",
        "judge": None,
        "submission": {"model": "m"},
        "aggregates": {
            "resampling": {"factors": ["prompt"], "method": "percentile bootstrap over prompts", "prompt_units": {}}
        },
    }
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "aggregates.json").write_text(json.dumps(summary))
        _write(tmp_path / name / "results.parquet", 50 if name == "a" else 500)
    monkeypatch.setattr(results_bounds, "MAX_RESULT_ROWS", 100)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "500 rows" in err and str(tmp_path / "b") in err


@pytest.mark.parametrize("size", [0, 10])
def test_an_unreadable_footer_raises_as_pyarrow_does(tmp_path, size):
    (tmp_path / "r.parquet").write_bytes(b"x" * size)
    with pytest.raises((OSError, ValueError)):
        results_file_problem(tmp_path / "r.parquet")
