"""The Streamlit app through ``streamlit.testing.v1.AppTest``, over a filled temporary store.

The store holds three identity-collapse baselines scored with the tiny profile; submission 1's result
is marked as a real run, so by default the table shows one row and the plumbing switch shows three.
"""

from __future__ import annotations

import io
import re
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from builders.benchmarks import get_benchmark
from leaderboard import query
from leaderboard.app import APP_PATH
from leaderboard.app.render import plain
from leaderboard.queue import jobs_table, submit
from leaderboard.store import Store

from filled_store import fill_store

BENCHMARK = "identity-collapse"
TIMEOUT = 60  # seconds per script run; the first import of matplotlib and the store can be slow


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """``$IDBENCH_HOME`` with the built benchmark and three scored baselines (the root holds the baselines)."""
    return fill_store(tmp_path_factory.mktemp("app"))


@pytest.fixture
def app(filled, monkeypatch) -> AppTest:
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    return at.run()


def _table(at: AppTest) -> pd.DataFrame:
    [frame] = at.dataframe
    return frame.value


def test_benchmark_page_renders_the_ranked_table(app):
    assert not app.exception and not app.error
    assert app.title[0].value == "Identity Collapse"
    table = _table(app)
    assert list(table["model"]) == ["baseline-collage"] and table.loc[0, "marks"] == "incomplete suite"
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


def test_csv_download_equals_the_shown_table(filled, monkeypatch):
    # The download's bytes go to the media file storage at render time; record what was stored.
    stored: list[tuple[bytes, str]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        stored.append((path_or_data, mimetype))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
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
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted((filled.parent / "collage").rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(filled.parent / "collage").as_posix())
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.switch_page("views/submit.py").run()
    at.file_uploader(key="submit-file").upload("collage.zip", archive.getvalue(), "application/zip")
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
    app.switch_page("views/about.py").run()
    assert [h.value for h in app.header] == ["CHARIS", "CogCanvas", "Identity Collapse"]
    assert len(app.code) == 3
