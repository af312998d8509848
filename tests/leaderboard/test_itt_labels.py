"""The papers' judged columns that leave judge failures out (``MetricSpec.itt_twin``) are labelled as such
where the pages show them, and no fallback ranks one (issue 39, item 7). Pure functions, no app."""

from __future__ import annotations

import pandas as pd
import pytest

from idbench.builders.registry import BENCHMARKS, get_benchmark
from idbench.leaderboard import query

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

# Every paper column that leaves judge failures out, by benchmark: what the pages must label.
PAPER_COLUMNS = [
    (name, m.name, m.itt_twin, m.tasks) for name in BENCHMARKS for m in get_benchmark(name).metric_suite if m.itt_twin
]


def _row(submission: int, overall: dict[str, float], task: str | None = None) -> dict:
    stats = lambda mean: {"mean": mean, "ci_low": mean, "ci_high": mean, "n": 10, "n_nan": 0}  # noqa: E731
    row = {
        "submission_id": submission,
        "model_name": f"model {submission}",
        "submitter": None,
        "profile": "full",
        "plumbing": False,
        "not_run": {},
        "aggregates": {"overall": {m: stats(v) for m, v in overall.items()}, "breakdowns": {}},
        "judge": {"model": "j", "revision": "r", "url": "http://judge", "calibrated": True, "incomplete": {}},
        "copies": {"marked": False, "share": 0.0},
    }
    if task is not None:
        row["task"] = task
    return row


def test_the_paper_columns_that_leave_failures_out_are_the_known_ones():
    assert {(b, m) for b, m, _, _ in PAPER_COLUMNS} >= {
        ("charis", "charis_score"),
        ("cogcanvas", "attr_vqa"),
        ("cogcanvas", "igc"),
    }


@pytest.mark.parametrize(("benchmark", "metric", "twin", "tasks"), PAPER_COLUMNS)
def test_each_paper_column_is_labelled_in_the_legend_and_on_its_header(benchmark, metric, twin, tasks):
    spec = get_benchmark(benchmark)
    note = query.twin_note(spec, metric)
    assert note == f"the paper's: leaves judge failures out; not ranked, see {twin}"
    assert query.twin_note(spec, twin) == ""  # the twin is ranked as it is
    for raw in (False, True):
        column = query.display_name(spec, metric, raw)
        assert query.display_legend(spec, raw)[column].endswith(note)
        assert query.column_help(spec, raw)[column] == note
        assert query.display_name(spec, twin, raw) not in query.column_help(spec, raw)


@pytest.mark.parametrize(("benchmark", "metric", "twin", "tasks"), PAPER_COLUMNS)
def test_no_fallback_ranks_a_paper_column_when_nothing_else_was_computed(benchmark, metric, twin, tasks):
    spec = get_benchmark(benchmark)
    specs = query.metric_specs(spec)
    for task in tasks:
        rows = pd.DataFrame([_row(1, {metric: 0.9}, task), _row(2, {metric: 0.4}, task)])
        assert query.rankable_metrics(rows, spec) == []
        chosen = query.default_metric(rows, spec)
        assert specs[chosen].rankable and not specs[chosen].itt_twin and task in specs[chosen].tasks
        table = query.ranked_table(rows, spec)
        assert table["rank"].isna().all()  # no row has the fallback metric: none is ranked, none first
        assert set(table[query.NOT_RANKED]) == {f"no {chosen} computed"}
        assert table[metric].tolist() == [0.9, 0.4]  # the paper's column is still shown


def test_every_default_is_rankable_whatever_subset_was_computed():
    for name in BENCHMARKS:
        spec = get_benchmark(name)
        specs = query.metric_specs(spec)
        for m in spec.metric_suite:
            for task in m.tasks:
                rows = pd.DataFrame([_row(1, {m.name: 0.5}, task)])
                assert not specs[query.default_metric(rows, spec)].itt_twin, (name, m.name, task)
