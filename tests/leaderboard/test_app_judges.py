"""The app's judge selector, judge captions, copy and uncalibrated-judge marks, and the model page's
judge card and copy check, over a home of hand-made CHARIS results (no scoring: seconds).

Rows (submission: model, judge, what it shows):
1 copy: the 3B judge, copies marked (62 % of images), the best numbers;  2 follows: 3B, 0.80;
3 other: 3B, 0.70;  4 large: the 72B judge, 0.90;  5 lenient: 3B but its judge failed its controls, 0.95;
6 older: scored before results kept a judge or a copy check, 0.60.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from idbench.builders.registry import get_benchmark
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.queue import claim, finish
from idbench.leaderboard.store import Store

# Every test here drives Streamlit or Chromium.
pytestmark = [pytest.mark.browser]

CHARIS = get_benchmark("charis")
TIMEOUT = 60
SMALL = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "settings": {"temperature": 0.0, "max_tokens": 512}}
LARGE = {"model": "Qwen/Qwen2.5-VL-72B-Instruct", "settings": {"temperature": 0.0, "max_tokens": 512}}
SMALL_LABEL = "Qwen/Qwen2.5-VL-3B-Instruct (temperature 0.0, max_tokens 512)"


def _card(calibrated: bool, reason: str | None = None) -> dict:
    controls = {
        "exact_copy": {"n": 4, "correct": 4 if calibrated else 1, "accuracy": 1.0 if calibrated else 0.25, "failed": 0},
        "blank": {"n": 4, "correct": 4, "accuracy": 1.0, "failed": 0},
    }
    return {
        "controls": controls,
        "accuracy": 1.0 if calibrated else 0.625,
        "yes_rate": 0.5,
        "failure_rate": 0.0,
        "repeat": {"n": 4, "agreement": 1.0},
        "floor": 0.8,
        "calibrated": calibrated,
        "reason": reason,
    }


def _copies(share: float, marked: bool) -> dict:
    return {
        "images": 50,
        "flagged": round(50 * share),
        "share": share,
        "mark_above_share": 0.2,
        "marked": marked,
        "criteria": {"phash_bits": 8},
    }


ROWS = [
    ("copy", 1.00, SMALL | {"card": _card(True), "calibrated": True}, _copies(0.62, True)),
    ("follows", 0.80, SMALL | {"card": _card(True), "calibrated": True}, _copies(0.0, False)),
    ("other", 0.70, SMALL | {"card": _card(True), "calibrated": True}, _copies(0.02, False)),
    ("large", 0.90, LARGE | {"card": _card(True), "calibrated": True}, _copies(0.0, False)),
    (
        "lenient",
        0.95,
        SMALL | {"card": _card(False, "exact_copy accuracy 0.25 below the floor 0.8"), "calibrated": False},
        None,
    ),
    ("older", 0.60, None, None),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return _fill(tmp_path_factory.mktemp("judges-app") / "home", ROWS)


def _fill(root: Path, rows) -> Path:
    """A store at ``root`` holding one scored CHARIS result per (model, number, judge, copies) of ``rows``."""
    store = Store(root)
    for model, charis, judge, copies in rows:
        overall = {
            m.name: {"mean": 0.5, "ci_low": 0.45, "ci_high": 0.55, "n": 10, "n_nan": 0}
            for m in CHARIS.task_metrics("reference")
        }
        # The default ranking (charis_overall_floored: charis_overall, no image flagged), charis_overall and the
        # paper's score get the row's number, 2 of 10 pairs NaN; dino_sim and its copy-floored twin too.
        for name in ("charis_overall", "charis_overall_floored", "charis_score"):
            overall[name] = {"mean": charis, "ci_low": charis - 0.05, "ci_high": charis + 0.05, "n": 8, "n_nan": 2}
        for name in ("dino_sim", "dino_sim_floored"):
            overall[name] = {"mean": charis, "ci_low": charis - 0.05, "ci_high": charis + 0.05, "n": 10, "n_nan": 0}
        store.add_submission(
            benchmark="charis",
            benchmark_version="v",
            data_dir=root / "none",
            model_name=model,
            metadata={},
            content_hash=model.ljust(64, "0"),
            stored_path=root / "none",
        )
        summary = {
            "benchmark": "charis",
            "suite_version": "s",
            "profile": "paper",
            "plumbing": False,
            "idbench_version": "0",
            "models": {},
            "aggregates": {"overall": overall, "breakdowns": {}},
            "not_run": {},
        }
        if judge is not None:
            summary["judge"] = judge
        if copies is not None:
            summary["copies"] = copies
        finish(store, claim(store, "w", 60), summary, root / "none")
    return root


def _charis_page():
    from idbench.leaderboard.app.screens.benchmark import benchmark_page

    benchmark_page("charis")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _models(frame) -> list[str]:
    return [re.search(r"model=([^&]*)$", url).group(1) for url in frame["model"]]


def test_a_judged_ranking_is_among_one_judge_and_copies_stand_apart(home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_function(_charis_page, default_timeout=TIMEOUT).run()
    assert not at.exception and at.selectbox(key="charis-metric").value == "charis_overall_floored"
    selector = at.selectbox(key="charis-judge")
    assert (
        selector.options[0].startswith(SMALL_LABEL) and "(4 row(s))" in selector.options[0]
    )  # the most used judge first
    ranked, apart = at.dataframe
    assert _models(ranked.value) == ["follows", "other"]  # not the copy, not the lenient judge, not the 72B row
    assert _models(apart.value) == ["copy", "lenient", "large", "older"]
    captions = " ".join(_unescape(c.value) for c in at.caption)
    assert f"charis_overall_floored: ranked among rows judged by {SMALL_LABEL}" in captions
    text = " ".join(t.value for t in at.text)
    assert "copy (submission 1): copies references: 62 % of images" in text
    assert "lenient (submission 5): uncalibrated judge: exact_copy accuracy 0.25 below the floor 0.8" in text
    assert "large (submission 4): judged by another judge: Qwen/Qwen2.5-VL-72B-Instruct" in text
    assert "charis_overall_floored coverage (%)" in ranked.value.columns and set(
        ranked.value["charis_overall_floored coverage (%)"]
    ) == {80.0}

    # The other judge: its row alone is ranked on the judged metric, and the URL says so.
    at.selectbox(key="charis-judge").select_index(1).run()
    assert _models(at.dataframe[0].value) == ["large"] and at.query_params["judge"]
    # The switches rank the rows shown apart.
    at.checkbox(key="charis-copies").check().run()
    at.checkbox(key="charis-uncalibrated").check().run()
    at.selectbox(key="charis-judge").select_index(0).run()
    assert _models(at.dataframe[0].value) == ["copy", "lenient", "follows", "other"]


# A judge that failed on 31 % of charis_overall's pairs (judge.card: incomplete above 5 %).
INCOMPLETE = [
    ("follows", 0.80, SMALL | {"card": _card(True), "calibrated": True, "incomplete": {}}, _copies(0.0, False)),
    (
        "failing-judge",
        0.99,
        SMALL | {"card": _card(True), "calibrated": True, "incomplete": {"charis_overall": 0.31}},
        _copies(0.0, False),
    ),
]


def test_a_run_whose_judge_failed_on_over_5_percent_is_listed_apart_until_the_switch_ranks_it(tmp_path, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(_fill(tmp_path / "home", INCOMPLETE)))
    at = AppTest.from_function(_charis_page, default_timeout=TIMEOUT).run()
    assert not at.exception and at.selectbox(key="charis-metric").value == "charis_overall_floored"
    ranked, apart = at.dataframe
    assert _models(ranked.value) == ["follows"] and _models(apart.value) == ["failing-judge"]
    text = " ".join(t.value for t in at.text)
    assert "failing-judge (submission 2): judge failed on 31 % of charis_overall (over 5 %)" in text
    switch = at.checkbox(key="charis-judge_failures")
    assert switch.value is False and switch.label == "rank rows whose judge failed on over 5 %"
    switch.check().run()
    assert len(at.dataframe) == 1 and _models(at.dataframe[0].value) == ["failing-judge", "follows"]
    assert at.query_params["judge_failures"] == "1"
    # An unjudged ranking never set it apart (its embedding columns are complete).
    at.checkbox(key="charis-judge_failures").uncheck().run()
    at.selectbox(key="charis-metric").select("dino_sim_floored").run()
    assert _models(at.dataframe[0].value) == ["failing-judge", "follows"]


def test_on_an_unjudged_metric_the_copy_is_still_not_first(home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_function(_charis_page, default_timeout=TIMEOUT).run()
    at.selectbox(key="charis-metric").select("dino_sim_floored").run()
    ranked, apart = at.dataframe
    assert _models(ranked.value)[0] == "lenient" and "copy" not in _models(ranked.value)
    assert _models(apart.value) == ["copy"]


def _model_page(at_home, monkeypatch, submission: int) -> AppTest:
    monkeypatch.setenv("IDBENCH_HOME", str(at_home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": "charis", "submission": str(submission)})
    return at.switch_page("views/model.py").run()


def test_the_model_page_shows_the_judge_card_and_the_copy_check(home, monkeypatch):
    at = _model_page(home, monkeypatch, 1)
    assert not at.exception
    assert "copies references: 62 % of images" in at.warning[0].value
    text = "\n".join(t.value for t in at.text)
    assert f"Judge: {SMALL_LABEL}" in text and "determinism: 100.0 % agreement over 4 repeated pairs" in text
    assert "31 of 50 images flagged" in text and "MARKED" in text
    card = next(d.value for d in at.dataframe if "control kind" in d.value.columns)
    assert card["control kind"].tolist() == ["blank", "exact_copy"] and card["accuracy"].tolist() == [
        1.0,
        1.0,
    ]  # as stored: sorted keys

    at = _model_page(home, monkeypatch, 5)
    text = "\n".join(t.value for t in at.text)
    assert "UNCALIBRATED: exact_copy accuracy 0.25 below the floor 0.8" in text
    assert "Uncalibrated judge" in at.warning[0].value


def test_an_older_result_says_not_recorded_in_one_line_each(home, monkeypatch):
    at = _model_page(home, monkeypatch, 6)
    assert not at.exception
    text = [t.value for t in at.text]
    assert "Judge: not recorded (scored before results kept their judge)." in text
    assert any(t.startswith("Copy detection: not recorded") for t in text)
