"""Standings computed once and stored (leaderboard/board.py): what a reader gets, and when it gets nothing.

The stores here are made by hand: each result is a results.parquet of known values and the aggregates
of those values, recorded through the queue's own ``claim``/``finish`` (no scoring). Model 3 is model 1
plus 0.3 on every prompt and model 2 is a copy of model 1, so by hand: model 3 is first alone (interval
"1", tier 1); models 1 and 2 share rank 2, cannot be told apart (interval "2", tier 2).
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg import results as result_files
from idbench.leaderboard import board, query
from idbench.leaderboard.queue import claim, finish
from idbench.leaderboard.queue.local import StoreQueue
from idbench.leaderboard.store import Store

# Fast tier: no model, no server; the bootstrap runs on 12 prompts and 3 models.
pytestmark: list = []

SPEC = get_benchmark("identity-collapse")
METRIC = "dino_sim_floored"
PROMPTS = [f"p{i:02d}" for i in range(12)]
SIZES = {p: ("2" if i < 6 else "4") for i, p in enumerate(PROMPTS)}  # n_subjects of each prompt


def _values(model: int) -> np.ndarray:
    base = np.random.default_rng(7).uniform(0.2, 0.6, len(PROMPTS))
    return base + (0.3 if model == 3 else 0.0)


def _stats(values: np.ndarray) -> dict:
    mean = float(np.mean(values))
    return {"mean": mean, "ci_low": mean - 0.05, "ci_high": mean + 0.05, "n": len(values), "n_nan": 0}


def _record(store: Store, root: Path, model: int, values: np.ndarray | None = None) -> int:
    """Submit and finish one result of ``model`` (its values by prompt, seed 0); its submission id."""
    values = _values(model) if values is None else values
    out = root / f"result-{model}-{len(store.list_jobs())}"
    out.mkdir(parents=True)
    frame = pd.DataFrame({"prompt_id": PROMPTS, "seed": 0, "metric": METRIC, "value": values, "subject": ""})
    result_files.write_samples(out, frame)
    sizes = {size: {METRIC: _stats(values[[SIZES[p] == size for p in PROMPTS]])} for size in ("2", "4")}
    submission, _, _ = store.add_submission(
        benchmark=SPEC.name,
        benchmark_version="v",
        data_dir=root / "not-here",
        model_name=f"model-{model}",
        metadata={},
        content_hash=f"{model}-{len(store.list_jobs())}".ljust(64, "0"),
        stored_path=root / "not-here",
    )
    summary = {
        "benchmark": SPEC.name,
        "suite_version": "s",
        "profile": "paper",
        "plumbing": False,
        "idbench_version": "0",
        "models": {},
        "aggregates": {"overall": {METRIC: _stats(values)}, "breakdowns": {"n_subjects": sizes}},
        "not_run": {},
    }
    finish(store, claim(store, "w", 60), summary, out)
    return submission


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store(tmp_path / "home")
    for model in (1, 2, 3):
        _record(store, tmp_path, model)
    return store


def _shown(standings: board.Standings) -> dict[str, tuple]:
    return {
        row["model"]: (int(row["rank"]), row[query.RANK_INTERVAL], int(row[query.TIER]))
        for _, row in standings.ranked.iterrows()
    }


def test_the_stored_board_holds_the_intervals_worked_out_by_hand(store):
    assert board.refresh(store, SPEC.name) > 0
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert _shown(shown) == {"model-3": (1, "1", 1), "model-1": (2, "2", 2), "model-2": (2, "2", 2)}
    assert "hold jointly for the whole board at 95%" in shown.caption and "12 prompt(s)" in shown.caption


def test_the_stored_intervals_are_those_the_page_computed_before(store):
    # The page used to resample on each view: per-sample values -> shared prompt means -> rank_uncertainty.
    # The stored board must give the same numbers.
    board.refresh(store, SPEC.name)
    results = store.current_results(SPEC.name)
    values = {
        int(row.submission_id): query.sample_values(pd.read_parquet(Path(row.results_path) / "results.parquet"), METRIC)
        for row in results.itertuples()
    }
    factors, units, _ = query.resampling_design(results["aggregates"])
    before = query.rank_uncertainty(query.shared_prompt_means(values), True, factors=factors, units=units)
    now = board.standings(store, SPEC.name, metric=METRIC, filters={}).ranked.set_index("submission")
    for submission, row in before.iterrows():
        assert now.at[submission, query.RANK_INTERVAL] == row[query.RANK_INTERVAL]
        assert now.at[submission, query.TIER] == row[query.TIER]


def test_reading_the_board_resamples_nothing(store, monkeypatch):
    board.refresh(store, SPEC.name)

    def refuse(*args, **kwargs):
        raise AssertionError("a reader resampled")

    monkeypatch.setattr("idbench.evaluate_pkg.functional.ranks.board_claims", refuse)
    monkeypatch.setattr("idbench.leaderboard.rank_intervals.rank_uncertainty", refuse)
    monkeypatch.setattr("idbench.leaderboard.board.rank_uncertainty", refuse)
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert _shown(shown)["model-3"] == (1, "1", 1)


def test_a_result_recorded_since_the_refresh_gets_no_stale_intervals(store, tmp_path):
    board.refresh(store, SPEC.name)
    _record(store, tmp_path, 4, _values(1) + 0.6)  # a new best model, finished without a refresh
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert shown.ranked["model"].tolist()[0] == "model-4"
    assert (shown.ranked[query.RANK_INTERVAL] == "").all() and shown.ranked[query.TIER].isna().all()
    assert shown.caption == board.NOT_COMPUTED
    board.refresh(store, SPEC.name)
    assert _shown(board.standings(store, SPEC.name, metric=METRIC, filters={}))["model-4"] == (1, "1", 1)


def test_a_view_that_ranks_other_rows_says_so_instead_of_borrowing_intervals(store):
    board.refresh(store, SPEC.name)
    results = store.current_results(SPEC.name)
    ranked = query.split_ranking(query.ranked_table(results, SPEC, metric=METRIC, include_incomplete=True)).ranked
    some = ranked[ranked["model"] != "model-2"]  # as if a family filter had left model 2 out
    out, caption = board.with_intervals(store, some, results, SPEC, "reference", METRIC, {})
    assert caption == board.OTHER_VIEW and (out[query.RANK_INTERVAL] == "").all()


def test_refreshing_on_results_that_changed_meanwhile_writes_nothing(store, tmp_path):
    version = query.store_version(store)
    _record(store, tmp_path, 4)
    assert not store.replace_standings(SPEC.name, "reference", json.dumps(version), {}, expected_version=version)
    assert store.replace_standings(SPEC.name, "reference", "[]", {}, expected_version=query.store_version(store))


def test_a_withdrawal_refreshes_the_board(store):
    queue = StoreQueue(store)
    board.refresh(store, SPEC.name)
    third = int(store.current_results(SPEC.name).set_index("model_name").at["model-3", "submission_id"])
    queue.withdraw(str(third), "test")
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert set(_shown(shown)) == {"model-1", "model-2"}  # computed on the two left, not left stale
    assert {v[1] for v in _shown(shown).values()} == {"1"}


def test_a_cell_board_resamples_only_the_cells_prompts():
    # 4 models on 12 prompts: model 2 beats model 1 by 0.3 on the N = 2 prompts only, loses by 0.3 on N = 4.
    base = np.random.default_rng(3).uniform(0.2, 0.6, len(PROMPTS))
    shift = np.array([0.3 if SIZES[p] == "2" else -0.3 for p in PROMPTS])
    rows = []
    for model, values in ((1, base), (2, base + shift)):
        frame = pd.DataFrame({"prompt_id": PROMPTS, "seed": 0, "metric": METRIC, "value": values, "subject": ""})
        rows.append((model, frame))
    prompt_rows = {p: {"prompt_id": p, "n_subjects": SIZES[p], "scene": "neutral"} for p in PROMPTS}
    by_cell = {}
    for size in ("2", "4"):
        cell = board.cell_prompts(prompt_rows, SPEC, {"n_subjects": size, "scene": None})
        assert sorted(cell) == sorted(p for p in PROMPTS if SIZES[p] == size)
        means = query.shared_prompt_means({m: query.sample_values(f, METRIC) for m, f in rows}, cell)
        by_cell[size] = query.rank_uncertainty(means, True)[query.RANK_INTERVAL].to_dict()
    assert by_cell == {"2": {1: "2", 2: "1"}, "4": {1: "1", 2: "2"}}


def test_a_mirror_without_the_built_benchmark_says_why_a_cell_has_no_intervals(store):
    board.refresh(store, SPEC.name)  # the store's data_dir does not exist, as on a Hub mirror
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={"n_subjects": "2", "scene": None})
    assert "not available here" in shown.caption and (shown.ranked[query.RANK_INTERVAL] == "").all()
    overall = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert _shown(overall)["model-3"] == (1, "1", 1)


def test_an_unreadable_stored_board_is_not_shown_and_is_logged(store, caplog):
    board.refresh(store, SPEC.name)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE standings SET board_json = '{not json'")
    with caplog.at_level(logging.WARNING):
        shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert shown.caption == board.NOT_COMPUTED and "unreadable" in caplog.text


def test_a_result_without_its_values_leaves_the_whole_board_without_intervals(store):
    first = store.current_results(SPEC.name).iloc[0]
    (Path(first["results_path"]) / "results.parquet").unlink()
    board.refresh(store, SPEC.name)
    shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert "1 ranked result(s) have no per-sample values here" in shown.caption
    assert (shown.ranked[query.RANK_INTERVAL] == "").all()


def test_the_standings_command_prints_the_board(store, capsys, monkeypatch):
    from idbench.cli import main

    monkeypatch.setenv("IDBENCH_HOME", str(store.home))
    assert main(["standings", SPEC.name, "--metric", METRIC, "--refresh"]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["1", "1", "1", "model-3"] == next(line[:4] for line in lines if "model-3" in line)
    assert "hold jointly" in out


def test_the_standings_command_refuses_a_metric_or_cell_it_cannot_rank_in_one_line(store, capsys, monkeypatch):
    from idbench.cli import main

    monkeypatch.setenv("IDBENCH_HOME", str(store.home))
    assert main(["standings", SPEC.name, "--metric", "no_such_metric"]) == 2
    assert main(["standings", SPEC.name, "--cell", "colour=red"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "ranks on dino_sim_floored, not 'no_such_metric'" in lines[0]
    assert "colour=red" in lines[1]


def test_no_page_of_the_app_resamples():
    """The app's modules read the stored boards; none computes one (the queue and the mirror do)."""
    app = Path(board.__file__).parent / "app"
    resampling = (
        "rank_uncertainty",
        "board_claims",
        "shared_prompt_means",
        "refresh",
        "refresh_quietly",
        "compute_boards",
    )
    found = [
        f"{path.relative_to(app)}: {name}"
        for path in sorted(app.rglob("*.py"))
        for name in resampling
        if re.search(rf"(?<![\w.])(board\.|query\.)?{name}\(", path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.e2e
def test_the_board_imports_without_streamlit():
    import subprocess
    import sys

    code = "import sys, idbench.leaderboard.board; assert 'streamlit' not in sys.modules, 'streamlit imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_python_api_returns_the_same_board(store):
    import idbench

    board.refresh(store, SPEC.name)
    shown = idbench.standings(SPEC.name, metric=METRIC, filters={}, home=store.home)
    assert _shown(shown) == _shown(board.standings(store, SPEC.name, metric=METRIC, filters={}))


@pytest.mark.parametrize(
    "forged",
    [
        '{"ranked": [[1, 1]], "rows": {}, "note": ""}',  # a ranked row without its interval
        '{"ranked": [["x", "y"]], "rows": {}, "note": ""}',  # pairs that are not ids
        '{"ranked": [1, 2, 3], "rows": {}, "note": ""}',
        '{"ranked": [[1, 1]], "rows": {"1": [1, 1, 1, 7, 1]}, "note": ""}',  # an interval that is not text
    ],
)
def test_a_forged_board_is_logged_and_not_shown(store, caplog, forged):
    board.refresh(store, SPEC.name)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE standings SET board_json = ?", (forged,))
    with caplog.at_level(logging.WARNING):
        shown = board.standings(store, SPEC.name, metric=METRIC, filters={})
    assert shown.caption == board.NOT_COMPUTED and "malformed, not shown" in caplog.text
    assert (shown.ranked[query.RANK_INTERVAL] == "").all()
