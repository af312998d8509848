"""Issue 17.6 on the leaderboard side: the judge and the copy check of every result, kept and ranked.

The ranking rule (``query.rank_rows`` through ``query.ranked_table``) is checked on hand-made rows whose
expected order is written out by hand; the store's migration on a database made with the previous
schema (built here by running only the first migrations); the Hub mirror on hand-made records.
Summaries with the contract's ``judge`` / ``copies`` keys are built by hand (the producers live on
other branches).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import hub_mirror, judges, query
from idbench.leaderboard import store as store_module
from idbench.leaderboard.hub import result_record as hub_result_record
from idbench.leaderboard.hubrepo import FileAdd, LocalRepoStandIn
from idbench.leaderboard.store import Store

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

CHARIS = get_benchmark("charis")
SMALL = {"model": "Qwen/Qwen2.5-VL-3B-Instruct", "settings": {"temperature": 0.0, "max_tokens": 512, "concurrency": 4}}
LARGE = {"model": "Qwen/Qwen2.5-VL-72B-Instruct", "settings": {"temperature": 0.0, "max_tokens": 512}}


def _stats(mean: float, n: int = 10, n_nan: int = 0) -> dict:
    return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n": n, "n_nan": n_nan}


def _row(
    submission: int, charis: float, dino: float, judge: dict | None = None, copies: dict | None = None, n_nan: int = 0
) -> dict:
    """A complete CHARIS result row (every reference metric), as Store.current_results gives it."""
    overall = {m.name: _stats(0.5) for m in CHARIS.task_metrics("reference")}
    overall |= {"charis_score": _stats(charis, 10 - n_nan, n_nan), "dino_sim": _stats(dino)}
    return {
        "submission_id": submission,
        "model_name": f"m{submission}",
        "submitter": None,
        "profile": "paper",
        "plumbing": False,
        "not_run": {},
        "metadata": {},
        "aggregates": {"overall": overall, "breakdowns": {}},
        "judge": judge,
        "judge_key": judges.judge_key(judge),
        "copies": copies,
    }


def _copies(share: float, marked: bool) -> dict:
    return {
        "images": 50,
        "flagged": round(50 * share),
        "share": share,
        "mark_above_share": 0.2,
        "marked": marked,
        "criteria": {},
    }


def _card(calibrated: bool, reason: str | None = None) -> dict:
    return {
        "controls": {
            "exact_copy": {
                "n": 4,
                "correct": 4 if calibrated else 1,
                "accuracy": 1.0 if calibrated else 0.25,
                "failed": 0,
            }
        },
        "accuracy": 1.0 if calibrated else 0.25,
        "yes_rate": 0.5,
        "failure_rate": 0.0,
        "repeat": {"n": 4, "agreement": 1.0},
        "floor": 0.8,
        "calibrated": calibrated,
        "reason": reason,
    }


def _ranked(table: pd.DataFrame) -> list[int]:
    return table[table["rank"].notna()]["submission"].tolist()


def _apart(table: pd.DataFrame) -> dict[int, str]:
    rows = table[table["rank"].isna()]
    return dict(zip(rows["submission"], rows["not ranked"]))


# --- the ranking rule ----------------------------------------------------------------------------


def test_two_judges_rows_are_never_ranked_together_on_a_judged_metric():
    rows = pd.DataFrame(
        [
            _row(1, 0.60, 0.5, SMALL),
            _row(2, 0.90, 0.6, LARGE),
            _row(3, 0.70, 0.7, SMALL),
            _row(4, 0.80, 0.4, SMALL),
        ]
    )
    choices = query.judge_choices(rows, CHARIS)
    assert [(label, n) for _, label, n in choices] == [
        ("Qwen/Qwen2.5-VL-3B-Instruct (temperature 0.0, max_tokens 512)", 3),  # most rows first
        ("Qwen/Qwen2.5-VL-72B-Instruct (temperature 0.0, max_tokens 512)", 1),
    ]
    table = query.ranked_table(rows, CHARIS, metric="charis_score")  # default: the judge with most rows
    assert _ranked(table) == [4, 3, 1] and table["rank"].tolist()[:3] == [1, 2, 3]
    assert _apart(table) == {
        2: "judged by another judge: Qwen/Qwen2.5-VL-72B-Instruct (temperature 0.0, max_tokens 512)"
    }
    other = query.ranked_table(rows, CHARIS, metric="charis_score", judge=choices[1][0])
    assert _ranked(other) == [2] and set(_apart(other)) == {1, 3, 4}
    # On an unjudged metric all rank; the judged column holds only the chosen judge's values.
    by_dino = query.ranked_table(rows, CHARIS, metric="dino_sim")
    assert _ranked(by_dino) == [3, 2, 1, 4]
    values = dict(zip(by_dino["submission"], by_dino["charis_score"]))
    assert pd.isna(values[2]) and values[3] == 0.70
    assert dict(zip(by_dino["submission"], by_dino["judge"]))[2].startswith("Qwen/Qwen2.5-VL-72B")


def test_the_fallback_key_separates_decoding_settings_and_prefers_the_recorded_key():
    assert (
        judges.judge_key(SMALL) == "Qwen/Qwen2.5-VL-3B-Instruct temperature=0.0 max_tokens=512"
    )  # concurrency is not part of it
    warmer = SMALL | {"settings": {"temperature": 0.7, "max_tokens": 512}}
    assert judges.judge_key(warmer) != judges.judge_key(SMALL)
    assert judges.judge_key(SMALL | {"key": "qwen-3b@rev1|t=0"}) == "qwen-3b@rev1|t=0"
    assert judges.judge_key(None) is None and judges.judge_record({"stats": {}}) is None
    assert "stats" not in judges.judge_record(SMALL | {"stats": {"calls": 12}})


def test_an_uncalibrated_judges_row_is_shown_with_the_reason_but_not_ranked_by_default():
    lenient = SMALL | {"card": _card(False, "exact_copy accuracy 0.25 below the floor 0.8"), "calibrated": False}
    truthful = SMALL | {"card": _card(True), "calibrated": True}
    rows = pd.DataFrame([_row(1, 0.99, 0.5, lenient), _row(2, 0.60, 0.6, truthful)])
    table = query.ranked_table(rows, CHARIS, metric="charis_score")
    assert _ranked(table) == [2]
    assert _apart(table) == {1: "uncalibrated judge: exact_copy accuracy 0.25 below the floor 0.8"}
    assert "uncalibrated judge" in table.set_index("submission").loc[1, "marks"]
    assert _ranked(query.ranked_table(rows, CHARIS, metric="charis_score", include_uncalibrated=True)) == [1, 2]
    assert _ranked(query.ranked_table(rows, CHARIS, metric="dino_sim")) == [2, 1]  # an encoder metric needs no judge


def test_a_copy_marked_row_is_never_first_by_default_while_shown():
    rows = pd.DataFrame(
        [
            _row(1, 1.00, 1.00, SMALL, _copies(0.62, True)),
            _row(2, 0.70, 0.6, SMALL, _copies(0.0, False)),
            _row(3, 0.50, 0.5, SMALL),
        ]
    )
    for metric in ("charis_score", "dino_sim", "clip_i"):
        table = query.ranked_table(rows, CHARIS, metric=metric)
        assert 1 not in _ranked(table) and _apart(table) == {1: "copies references: 62 % of images"}
        assert table["submission"].tolist()[-1] == 1  # shown, below the ranked rows
    table = query.ranked_table(rows, CHARIS, metric="dino_sim")
    copies = dict(zip(table["submission"], table["copies"]))
    assert copies == {
        1: "copies references: 62 % of images",
        2: "copies 0 % of images (below the mark)",
        3: "not checked",
    }
    assert "copies references: 62 % of images" in table.set_index("submission").loc[1, "marks"]
    assert _ranked(query.ranked_table(rows, CHARIS, metric="dino_sim", include_copies=True)) == [1, 2, 3]


def test_older_rows_without_the_fields_still_rank():
    rows = [_row(1, 0.6, 0.5), _row(2, 0.8, 0.4)]
    for row in rows:
        del row["judge"], row["judge_key"], row["copies"]
    table = query.ranked_table(pd.DataFrame(rows), CHARIS, metric="charis_score")
    assert _ranked(table) == [2, 1] and set(table["judge"]) == {query.UNRECORDED_JUDGE}
    assert set(table["copies"]) == {"not checked"} and set(table["marks"]) == {""}
    # ... but never with a recorded judge's rows on a judged metric.
    mixed = pd.DataFrame([*rows, _row(3, 0.9, 0.3, SMALL)])
    assert _ranked(query.ranked_table(mixed, CHARIS, metric="charis_score")) == [2, 1]
    assert _ranked(query.ranked_table(mixed, CHARIS, metric="dino_sim")) == [1, 2, 3]


def test_coverage_and_incomplete_marks_beside_judged_scores():
    judge = SMALL | {"incomplete": {"charis_score": 0.3}}
    table = query.ranked_table(pd.DataFrame([_row(1, 0.6, 0.5, judge, n_nan=4)]), CHARIS, metric="charis_score")
    assert table.loc[0, "charis_score coverage"] == 6 / 10  # n / (n + n_nan), by hand
    assert "dino_sim coverage" not in table.columns  # an encoder metric has no judge
    assert table.loc[0, "marks"] == "incomplete: charis_score (judge failed 30 %)"
    assert query.display_table(table, CHARIS).loc[0, "charis_score coverage (%)"] == 60.0


# --- the store ---------------------------------------------------------------------------------------


def _summary(judge: dict | None, copies: dict | None) -> dict:
    return {
        "benchmark": "charis",
        "suite_version": "s",
        "profile": "paper",
        "plumbing": False,
        "idbench_version": "0",
        "models": {},
        "aggregates": {"overall": {"dino_sim": _stats(0.5)}},
        "not_run": {},
        "judge": judge,
        "copies": copies,
    }


def _finished(store: Store, digest: str, summary: dict) -> int:
    from idbench.leaderboard.queue import claim, finish

    store.add_submission(
        benchmark="charis",
        benchmark_version="v",
        data_dir=Path("/d"),
        model_name=digest,
        metadata={},
        content_hash=digest,
        stored_path=Path("/s"),
    )
    job = claim(store, "w", 60)
    return finish(store, job, summary, Path("/r"))


def test_the_store_keeps_the_judge_without_its_statistics_and_the_copy_check(tmp_path):
    store = Store(tmp_path)
    _finished(store, "a" * 64, _summary(SMALL | {"stats": {"calls": 9}, "calibrated": True}, _copies(0.62, True)))
    _finished(store, "b" * 64, _summary(None, None))
    with sqlite3.connect(store.path) as db:
        stored = db.execute("SELECT judge_json, judge_key, copies_json FROM results ORDER BY id").fetchall()
        indexes = {row[1] for row in db.execute("PRAGMA index_list(results)")}
    assert json.loads(stored[0][0]) == SMALL | {"calibrated": True, "key": judges.judge_key(SMALL)}
    assert stored[0][1] == judges.judge_key(SMALL) and json.loads(stored[0][2])["share"] == 0.62
    assert stored[1] == (None, None, None) and "results_by_judge" in indexes
    rows = store.current_results("charis").set_index("model_name")
    assert rows.loc["a" * 64, "copies"]["marked"] is True and rows.loc["b" * 64, "judge"] is None


def test_the_migration_from_the_previous_schema_keeps_every_row(tmp_path, monkeypatch):
    previous = len(store_module.MIGRATIONS) - 1
    monkeypatch.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:previous])
    old = Store(tmp_path)
    for digest in ("a" * 64, "b" * 64, "c" * 64):
        old.add_submission(
            benchmark="charis",
            benchmark_version="v",
            data_dir=Path("/d"),
            model_name=digest[:3],
            metadata={},
            content_hash=digest,
            stored_path=Path("/s"),
        )
    with sqlite3.connect(old.path) as db:
        for sid in (1, 2, 3):
            db.execute(
                "INSERT INTO results (submission_id, job_id, benchmark, benchmark_version, suite_version, profile, plumbing,"
                " models_json, idbench_version, aggregates_json, not_run_json, results_path, created_at, current)"
                " VALUES (?, ?, 'charis', 'v', 's', 'paper', 0, '{}', '0', ?, '{}', '/r', 0, 1)",
                (sid, sid, json.dumps({"overall": {"dino_sim": _stats(0.1 * sid)}})),
            )
    assert old.schema_version() == previous
    monkeypatch.undo()
    new = Store(tmp_path)
    assert new.schema_version() == previous + 1
    rows = new.current_results("charis")
    assert sorted(rows["model_name"]) == ["aaa", "bbb", "ccc"]
    assert rows["judge"].isna().all() and rows["judge_key"].isna().all() and rows["copies"].isna().all()
    assert _ranked(query.ranked_table(rows, CHARIS, metric="dino_sim")) == [3, 2, 1]


# --- the Hub records ---------------------------------------------------------------------------------


def _hub_record(model: str, digest: str, **extra) -> dict:
    return hub_result_record(
        _summary(SMALL | {"stats": {"calls": 3}}, _copies(0.1, False)) | extra,
        model=model,
        benchmark="charis",
        benchmark_version="v1",
        content_hash=digest,
        scored_at="2026-01-02T03:04:05+00:00",
        samples=None,
    )


def test_hub_records_carry_the_judge_and_copies_and_hostile_ones_are_refused_by_name(tmp_path):
    requests = LocalRepoStandIn(tmp_path / "hub" / "requests", "org/requests")
    results = LocalRepoStandIn(tmp_path / "hub" / "results", "org/results")
    good = _hub_record("good", "a" * 64)
    assert "stats" not in good["judge"] and good["copies"]["share"] == 0.1
    old = {k: v for k, v in _hub_record("old", "b" * 64).items() if k not in ("judge", "copies")}
    huge = _hub_record(
        "huge", "c" * 64, judge=SMALL | {"card": {"controls": {f"k{i}": {"n": i} for i in range(20000)}}}
    )
    malformed = _hub_record("bad", "d" * 64, copies={"images": "many", "flagged": 1, "marked": True})
    files = [(r["model"], r) for r in (good, old, huge, malformed)]
    results.commit(
        [
            FileAdd(f"charis/{m}/{r['content_hash'][:12]}/aggregates.json", data=json.dumps(r).encode())
            for m, r in files
        ],
        "r",
        None,
    )
    request = {
        "model": None,
        "benchmark": "charis",
        "benchmark_version": "v1",
        "state": "FINISHED",
        "submitted_at": "2026-01-01T00:00:00+00:00",
    }
    requests.commit(  # a result is shown only beside its request record (hub_mirror.prove)
        [
            FileAdd(
                f"charis/{m}/{r['content_hash'][:12]}.json",
                data=json.dumps(request | {"model": m, "content_hash": r["content_hash"]}).encode(),
            )
            for m, r in files
        ],
        "q",
        None,
    )
    info = hub_mirror.mirror(requests, results, tmp_path / "mirror")
    rows = Store(info.store_home).current_results("charis").set_index("model_name")
    assert sorted(rows.index) == ["good", "old"]
    assert rows.loc["good", "judge_key"] == judges.judge_key(SMALL) and rows.loc["good", "copies"]["marked"] is False
    assert rows.loc["old", "judge"] is None and rows.loc["old", "copies"] is None
    assert len(info.skipped) == 2
    [huge_line] = [line for line in info.skipped if "/huge/" in line]
    [bad_line] = [line for line in info.skipped if "/bad/" in line]
    assert huge_line.startswith("org/results: charis/huge/") and "larger than" in huge_line
    assert "field 'copies.images' is not a count" in bad_line
