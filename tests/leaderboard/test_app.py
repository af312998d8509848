"""The Streamlit app through ``streamlit.testing.v1.AppTest``, over a filled temporary store.

The store holds three identity-collapse baselines scored with the tiny profile (the whole suite);
submission 1's result is marked as a real run, so by default the table shows one row and the plumbing
switch shows three.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from idbench.builders.benchmarks import get_benchmark
from idbench.leaderboard import query
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.app.render import plain
from idbench.leaderboard.queue import jobs_table
from idbench.leaderboard.store import Store

from filled_store import fill_store, zip_folder

BENCHMARK = "identity-collapse"
TIMEOUT = 60  # seconds per script run; the first import of matplotlib and the store can be slow


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """``$IDBENCH_HOME`` with the built benchmark and three scored baselines (the root holds the baselines)."""
    return fill_store(tmp_path_factory.mktemp("app"))


PAGE = "views/benchmark.py"  # every benchmark's page; AppTest opens the first registered: identity-collapse


@pytest.fixture
def app(filled, monkeypatch) -> AppTest:
    """The app on the identity-collapse page."""
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    return at.switch_page(PAGE).run()


@pytest.fixture
def home_copy(filled, tmp_path, monkeypatch) -> Path:
    """A copy of the filled home as ``$IDBENCH_HOME``, for tests that change the store."""
    home = shutil.copytree(filled, tmp_path / "home")
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    return home


def _table(at: AppTest) -> pd.DataFrame:
    [frame] = at.dataframe
    return frame.value


def test_the_overview_is_the_default_page(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert not at.exception and at.title[0].value == "idbench leaderboard"
    assert [h.value for h in at.subheader] == ["Identity Collapse", "CHARIS", "CogCanvas"]
    [top] = at.dataframe  # only the stress test has a ranked row in this store
    assert top.value["model"].tolist() == ["baseline-collage"] and top.value["family"].tolist() == ["Collages"]
    assert "dino_sim" in top.value.columns  # the ranking metric, in its display convention (raw here)
    assert any("0 scored submission(s)" in t.value for t in at.text)


def test_benchmark_page_renders_the_ranked_table(app):
    assert not app.exception and not app.error
    assert app.title[0].value == "Identity Collapse"
    table = _table(app)
    assert list(table["model"]) == ["baseline-collage"] and table.loc[0, "marks"] == ""
    assert app.selectbox(key=f"{BENCHMARK}-metric").value == "dino_sim"  # the spec's ranking metric
    assert app.download_button(key=f"{BENCHMARK}-csv").label == "Download CSV"
    assert any("number of subjects" in h.value for h in app.subheader)


def test_group_size_filter_changes_the_table(app, filled):
    before = _table(app)
    app.selectbox(key=f"{BENCHMARK}-filter-n_subjects").select("4").run()
    after = _table(app)
    assert before.loc[0, "dino_sim"] != after.loc[0, "dino_sim"]
    spec = get_benchmark(BENCHMARK)
    expected = query.display_table(
        query.ranked_table(Store(filled).current_results(BENCHMARK), spec, filters={"n_subjects": "4"}), spec
    )
    assert after["dino_sim"].tolist() == expected["dino_sim"].tolist()


def test_plumbing_checkbox_shows_and_hides_rows(app):
    assert len(_table(app)) == 1
    app.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    shown = _table(app)
    assert len(shown) == 3 and (shown["marks"].str.contains("plumbing")).sum() == 2
    app.checkbox(key=f"{BENCHMARK}-plumbing").uncheck().run()
    assert len(_table(app)) == 1


def test_family_filter_keeps_one_family(app):
    app.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    assert len(_table(app)) == 3
    assert app.selectbox(key=f"{BENCHMARK}-family").options == ["all", "Collages"]
    app.selectbox(key=f"{BENCHMARK}-family").select("Collages").run()
    assert _table(app)["model"].tolist() == ["baseline-collage"]


def test_incomplete_rows_are_hidden_until_asked_for(home_copy):
    # Drop one generation metric from submission 1's aggregates: its suite is now incomplete.
    import json
    import sqlite3

    with sqlite3.connect(home_copy / "leaderboard.sqlite3") as db:
        (aggregates,) = db.execute("SELECT aggregates_json FROM results WHERE submission_id = 1").fetchone()
        aggregates = json.loads(aggregates)
        del aggregates["overall"]["clip_t"]
        db.execute("UPDATE results SET aggregates_json = ? WHERE submission_id = 1", (json.dumps(aggregates),))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    assert _table(at).empty and any("1 incomplete-suite row(s)" in i.value for i in at.info)
    at.checkbox(key=f"{BENCHMARK}-incomplete").check().run()
    assert _table(at).loc[0, "marks"] == "incomplete suite"


def test_csv_download_equals_the_shown_table(filled, monkeypatch):
    # The download's bytes go to the media file storage at render time; record what was stored.
    stored: list[tuple[bytes, str]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        stored.append((path_or_data, mimetype))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    at.checkbox(key=f"{BENCHMARK}-plumbing").check()
    at.selectbox(key=f"{BENCHMARK}-filter-scene").select("occlusion")
    stored.clear()
    at.run()
    csvs = [data for data, mimetype in stored if mimetype == "text/csv"]
    assert len(csvs) == 1
    shown = _table(at)
    assert len(shown) == 3
    assert csvs[0].decode("utf-8") == shown.to_csv(index=False)
    assert pd.read_csv(io.BytesIO(csvs[0]))["model"].tolist() == shown["model"].tolist()


def test_submit_page_rejects_a_malformed_zip_and_queues_nothing(app, filled):
    jobs_before = jobs_table(Store(filled))
    app.switch_page("views/submit.py").run()
    assert app.title[0].value == "Submit"
    app.file_uploader(key="submit-file").upload("broken.zip", b"this is not a zip archive", "application/zip")
    app.text_input(key="submit-model").input("<b>bold</b>")
    app.button(key="submit-button").click().run()
    assert not app.exception and not app.success
    # Alerts render Markdown, so the page escapes what it shows; undo that to read the words.
    messages = [re.sub(r"\\(.)", r"\1", e.value) for e in app.error]
    assert messages and "not queued" in messages[0]
    assert any("broken.zip" in m for m in messages[1:])  # the problem names the uploaded file, not a temp path
    assert jobs_table(Store(filled)) == jobs_before


def test_alert_text_is_escaped_markdown():
    assert plain("![x](http://a.b/c.png) <b>") == r"\!\[x\]\(http\://a\.b/c\.png\) \<b\>"
    assert re.sub(r"\\(.)", r"\1", plain(r"a\b $x$ *y*")) == r"a\b $x$ *y*"


def test_submit_page_queues_a_valid_zip(filled, tmp_path, monkeypatch):
    home = tmp_path / "home"
    shutil.copytree(filled / "benchmarks", home / "benchmarks")
    archive = zip_folder(filled.parent / "collage")
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.switch_page("views/submit.py").run()
    at.file_uploader(key="submit-file").upload("collage.zip", archive, "application/zip")
    at.text_input(key="submit-model").input("my model")
    at.button(key="submit-button").click().run()
    assert not at.exception and not at.error
    assert "job 1" in at.success[0].value
    [job] = jobs_table(Store(home))
    assert job["state"] == "PENDING" and job["model"] == "my model"


def test_status_model_and_about_pages(app):
    app.switch_page("views/status.py").run()
    jobs = _table(app)
    assert list(jobs["state"]) == ["FINISHED"] * 3 and "reason" in jobs.columns
    app.switch_page("views/model.py").run()
    assert not app.exception and app.title[0].value == "Model"
    assert any(h.value == "By n_subjects x scene" for h in app.subheader)
    # Best and worst samples by the ranking metric: each line names its prompt, seed and value.
    assert any(h.value == "Best and worst samples" for h in app.subheader)
    lines = [t.value for t in app.text if " seed " in t.value and "dino_sim = " in t.value]
    assert len(lines) == 6
    app.switch_page("views/about.py").run()
    assert [h.value for h in app.header] == ["Identity Collapse", "CHARIS", "CogCanvas"]  # page order, as the navigation
    assert len(app.code) == 3


def _submit(at: AppTest, **fields) -> AppTest:
    at.switch_page("views/submit.py").run()
    for key, value in fields.items():
        if key == "file":
            at.file_uploader(key="submit-file").upload(*value)
        else:
            at.text_input(key=f"submit-{key}").input(value)
    return at.button(key="submit-button").click().run()


def test_submit_page_rate_limits_each_submitter(home_copy, filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_SUBMIT_RATE_LIMIT", "1/3600")
    baseline = zip_folder(filled.parent / "clone")
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    _submit(at, file=("a.zip", baseline, "application/zip"), model="first", submitter="carol", family="Clones")
    assert at.success and not at.error
    _submit(at, model="second")  # the same upload under another name: a new submission, over carol's limit
    messages = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
    assert any("carol" in m and "the limit is 1" in m for m in messages)
    jobs = [j for j in jobs_table(Store(home_copy)) if j["submitter"] == "carol"]
    assert [j["model"] for j in jobs] == ["first"]
    assert Store(home_copy).submission(jobs[0]["submission"])["metadata"]["family"] == "Clones"


def test_submit_page_refuses_a_bad_link_and_queues_nothing(home_copy, filled):
    before = jobs_table(Store(home_copy))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    _submit(at, file=("a.zip", zip_folder(filled.parent / "clone"), "application/zip"), model="x", link="javascript:alert(1)")
    assert any("http" in e.value for e in at.error) and not at.success
    assert jobs_table(Store(home_copy)) == before


def test_submit_page_takes_a_hub_dataset_repo(home_copy, filled, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    from conftest import place_dataset_in_hub_cache

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    place_dataset_in_hub_cache(cache, "alice/clone-gens", filled.parent / "clone")
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    _submit(at, repo="alice/clone-gens", model="clone from the hub")
    assert not at.error and "Queued" in at.success[0].value
    assert jobs_table(Store(home_copy))[-1]["model"] == "clone from the hub"
    _submit(at, repo="alice/not-there")
    assert any("not in the local Hugging Face cache" in re.sub(r"\\(.)", r"\1", e.value) for e in at.error)


def test_admin_actions_need_the_token(home_copy, monkeypatch):
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page("views/status.py").run()
    assert any("Admin actions are off" in t.value for t in at.text)  # no token configured: no buttons at all
    assert not [b for b in at.button if b.key == "admin-withdraw"]

    monkeypatch.setenv("IDBENCH_ADMIN_TOKEN", "s3cret-token")
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page("views/status.py").run()
    at.selectbox(key="admin-submission").select(1)
    at.text_input(key="admin-reason").input("test withdrawal")
    at.text_input(key="admin-token").input("wrong")
    at.button(key="admin-withdraw").click().run()
    assert any("Wrong admin token" in e.value for e in at.error)
    assert Store(home_copy).submission(1)["withdrawn_at"] is None
    at.text_input(key="admin-token").input("s3cret-token")
    at.button(key="admin-withdraw").click().run()
    assert not at.error and "Withdrew submission 1" in at.success[0].value
    assert Store(home_copy).submission(1)["withdrawn_reason"] == "test withdrawal"
    # Off the rankings, files kept.
    assert 1 not in set(Store(home_copy).current_results(BENCHMARK)["submission_id"])
    at.selectbox(key="admin-submission").select(2)
    at.button(key="admin-rescore").click().run()
    assert "Queued job" in at.success[0].value
