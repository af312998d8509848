"""The suite contract, for every registered benchmark with shipped samples: one tiny-profile scoring
run computes each metric of the spec's metric_suite or reports it not run with a reason, and
produces nothing outside the suite (see ``check_suite_contract`` in tests/helpers.py).

The judge is a stand-in that refuses every request, so the judged metrics run too (each image then
scores NaN with failure rate 1); without a judge they must be reported not run, with the reason.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import check_suite_contract

from idbench.builders.build import build, sample_source
from idbench.builders.registry import BENCHMARKS
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.judge import JudgeAnswer
from idbench.evaluate_pkg.runner import score_submission
from idbench.evaluate_pkg.suites import suite_for

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SHIPPED = [name for name in BENCHMARKS if sample_source(name).is_file()]
# Small builds (Identity Collapse: one prompt per cell of its grid).
PROMPTS = {"charis": 2, "cogcanvas": 2, "identity-collapse": 15}


class RefusingJudge:
    model = "refusing-judge"

    def ask(self, requests):
        return [JudgeAnswer(error="scripted refusal", attempts=1) for _ in requests]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    out = {}
    for name in SHIPPED:
        build(name, out=root / name / "data", n_prompts=PROMPTS.get(name))
        data = load_benchmark_data(root / name / "data")
        make_baseline("collage", data, root / name / "collage", size=64)
        out[name] = (root / name, data)
    return out


def test_every_shipped_benchmark_is_checked():
    assert {"charis", "cogcanvas", "identity-collapse"} <= set(SHIPPED)


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("judge", [RefusingJudge(), None], ids=["judge", "no-judge"])
def test_every_metric_is_computed_or_not_run_with_a_reason(built, name, judge, tmp_path):
    root, data = built[name]
    options = ScoreOptions(profile="tiny", judge=judge)
    summary = score_submission(
        root / "collage", data, tmp_path / "out", options, cache_dir=root / "cache", progress=False
    )
    produced = set(pd.read_parquet(tmp_path / "out" / "results.parquet")["metric"])
    check_suite_contract(data.spec, summary, produced, suite_for(name))
    judged = {m.name for m in data.spec.metric_suite if m.judged}
    if judge is None:
        assert judged <= set(summary["not_run"])
    else:
        assert judged <= produced
