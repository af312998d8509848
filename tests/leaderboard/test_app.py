"""The Streamlit app through ``streamlit.testing.v1.AppTest``, over a filled temporary store.

The store holds three identity-collapse baselines scored with the tiny profile (the whole suite);
submission 1's result is marked as a real run, so by default the table shows one row and the plumbing
switch shows three. Model names in the ranked tables are links to the model page
(``./model?...&model=<name>``): ``_names`` reads the names back from them.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
import streamlit as st
from filled_store import PROMPTS, add_cogcanvas, fill_store, zip_folder
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import board
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.queue import jobs_table
from idbench.leaderboard.store import Store

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

BENCHMARK = "identity-collapse"
TIMEOUT = 60  # seconds per script run; the first import of matplotlib and the store can be slow


@pytest.fixture(scope="module")
def filled(tmp_path_factory, shared_features) -> Path:
    """``$IDBENCH_HOME`` with the built benchmark and three scored baselines (the root holds the baselines)."""
    return fill_store(tmp_path_factory.mktemp("app"), features=shared_features)


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
    home = shutil.copytree(filled, tmp_path / "home", symlinks=True)  # the link to the shared features, not them
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    return home


def _table(at: AppTest) -> pd.DataFrame:
    [frame] = at.dataframe
    return frame.value


def _names(table: pd.DataFrame) -> list[str]:
    """The model names of a ranked table, read from the model-page links the grid shows them through."""
    return [parse_qs(urlsplit(url).query)["model"][0] for url in table["model"]]


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)  # alerts and captions render Markdown, so the app escapes them


def _aggregates(home: Path, submission: int) -> dict:
    """A result's aggregates as stored (read with sqlite3, not through the store or the app)."""
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        (text,) = db.execute(
            "SELECT aggregates_json FROM results WHERE submission_id = ? AND current", (submission,)
        ).fetchone()
    return json.loads(text)


def _all_plumbing(home: Path) -> None:
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        db.execute("UPDATE results SET plumbing = 1")


@pytest.mark.browser
@pytest.mark.slow
def test_the_overview_is_the_default_page(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert not at.exception and at.title[0].value == "idbench leaderboard"
    assert [h.value for h in at.subheader] == ["Identity Collapse", "CHARIS", "CogCanvas", "Latest submissions"]
    top, latest = at.dataframe  # only the stress test has a ranked row in this store
    assert _names(top.value) == ["baseline-collage"] and top.value["family"].tolist() == ["Collages"]
    assert "dino_sim_floored" in top.value.columns  # the ranking metric, in its display convention (raw here)
    assert any("0 scored submission(s)" in t.value for t in at.text)
    assert not at.warning  # the ranked row is a real run: no plumbing banner
    # The latest submissions, newest first, with benchmark, task and state.
    assert latest.value["model"].tolist() == ["baseline-swap", "baseline-clone", "baseline-collage"]
    assert set(latest.value["benchmark"]) == {BENCHMARK} and set(latest.value["task"]) == {"reference"}
    assert set(latest.value["state"]) == {"FINISHED"} and latest.value["submitted"].str.match(r"\d{4}-\d\d-\d\dT").all()


@pytest.mark.browser
@pytest.mark.slow
def test_benchmark_page_renders_the_ranked_table(app):
    assert not app.exception and not app.error
    assert app.title[0].value == "Identity Collapse"
    table = _table(app)
    assert _names(table) == ["baseline-collage"] and table.loc[0, "marks"] == ""
    assert not app.warning  # no plumbing row among those shown
    # The spec's ranking metric: dino_sim with a copied image scored -1 (the paper's dino_sim is a column beside it).
    assert app.selectbox(key=f"{BENCHMARK}-metric").value == "dino_sim_floored"
    assert app.download_button(key=f"{BENCHMARK}-csv").label == "Download CSV"
    assert any("number of subjects" in h.value for h in app.subheader)


@pytest.mark.browser
@pytest.mark.slow
def test_group_size_filter_changes_the_table(app, filled):
    before = _table(app)
    app.selectbox(key=f"{BENCHMARK}-filter-n_subjects").select("4").run()
    after = _table(app)
    assert before.loc[0, "dino_sim"] != after.loc[0, "dino_sim"]
    cell = _aggregates(filled, 1)["breakdowns"]["n_subjects"]["4"]["dino_sim"]  # the collage's, as stored
    assert after.loc[0, "dino_sim"] == f"{cell['mean']:.4f} [{cell['ci_low']:.4f}, {cell['ci_high']:.4f}]"
    assert app.query_params["n_subjects"] == "4"  # the address bar links to this view


@pytest.mark.browser
@pytest.mark.slow
def test_plumbing_checkbox_shows_and_hides_rows(app):
    assert len(_table(app)) == 1
    app.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    shown = _table(app)
    assert len(shown) == 3 and (shown["marks"].str.contains("plumbing")).sum() == 2
    assert "plumbing check: random weights, not model scores" in app.warning[0].value.lower()
    assert app.query_params["plumbing"] == "1"
    app.checkbox(key=f"{BENCHMARK}-plumbing").uncheck().run()
    assert len(_table(app)) == 1 and "plumbing" not in app.query_params


@pytest.mark.browser
@pytest.mark.slow
def test_family_filter_keeps_one_family(app):
    app.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    assert len(_table(app)) == 3
    assert app.selectbox(key=f"{BENCHMARK}-family").options == ["all", "Collages"]
    app.selectbox(key=f"{BENCHMARK}-family").select("Collages").run()
    assert _names(_table(app)) == ["baseline-collage"]


@pytest.mark.browser
@pytest.mark.slow
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
    # The only real run is incomplete: rather than an empty table, it is shown, marked.
    assert at.checkbox(key=f"{BENCHMARK}-incomplete").value is True
    assert _table(at).loc[0, "marks"] == "incomplete suite"
    at.checkbox(key=f"{BENCHMARK}-incomplete").uncheck().run()
    assert _table(at).empty and any("1 incomplete-suite row(s)" in i.value for i in at.info)
    # Once a complete real run exists, incomplete ones are hidden by default.
    with sqlite3.connect(home_copy / "leaderboard.sqlite3") as db:
        db.execute("UPDATE results SET plumbing = 0 WHERE submission_id = 2")
    st.cache_data.clear()  # an edit in place, which the store's version (new results, withdrawals) does not see
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    assert at.checkbox(key=f"{BENCHMARK}-incomplete").value is False and _names(_table(at)) == ["baseline-clone"]


@pytest.mark.browser
@pytest.mark.slow
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
    csv = pd.read_csv(io.BytesIO(csvs[0]))
    assert csv["model"].tolist() == _names(shown) and csv["rank"].tolist() == shown["rank"].tolist()
    # The full numbers, each bound in a numeric column of its own, in the displayed units (SCR in percent).
    for column in (
        "dino_sim",
        "dino_sim ci_low",
        "dino_sim ci_high",
        "scr@0.5 (%)",
        "scr@0.5 (%) ci_low",
        "scr@0.5 (%) ci_high",
    ):
        assert pd.api.types.is_float_dtype(csv[column]), column
    assert "dino_sim ci_low" not in shown.columns and "scr@0.5 (%) ci_high" not in shown.columns  # compact on screen
    for _, row in csv.iterrows():
        cell = _aggregates(filled, int(row["submission"]))["breakdowns"]["scene"]["occlusion"]
        assert row["dino_sim ci_low"] == pytest.approx(cell["dino_sim"]["ci_low"], abs=5e-5)
        assert row["scr@0.5 (%) ci_high"] == pytest.approx(100 * cell["scr@0.5"]["ci_high"], abs=5e-3)
    assert any("CSV" in c.value and "ci_low" in c.value for c in at.caption)  # the legend says what the CSV holds


@pytest.mark.browser
@pytest.mark.slow
def test_submit_page_rejects_a_malformed_zip_and_queues_nothing(home_copy):
    # A copy of the store: the refused upload is recorded there (it counts against the rate limit).
    jobs_before = jobs_table(Store(home_copy))
    app = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    app.switch_page("views/submit.py").run()
    assert app.title[0].value == "Submit"
    app.file_uploader(key="submit-file").upload("broken.zip", b"this is not a zip archive", "application/zip")
    app.text_input(key="submit-model").input("<b>bold</b>")
    app.button(key="submit-button").click().run()
    assert not app.exception and not app.success
    # Alerts render Markdown, so the page escapes what it shows; undo that to read the words.
    # One box: the count on its first line, then the problems (each naming the uploaded file, not a temp path).
    [message] = [re.sub(r"\\(.)", r"\1", e.value) for e in app.error]
    first, *problems = message.split("  \n")
    assert "not queued" in first and problems and all("broken.zip" in m for m in problems)
    assert jobs_table(Store(home_copy)) == jobs_before


def test_alert_text_is_escaped_markdown():
    assert plain("![x](http://a.b/c.png) <b>") == r"\!\[x\]\(http\://a\.b/c\.png\) \<b\>"
    assert re.sub(r"\\(.)", r"\1", plain(r"a\b $x$ *y*")) == r"a\b $x$ *y*"


@pytest.mark.browser
@pytest.mark.slow
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


@pytest.mark.browser
@pytest.mark.slow
def test_status_model_and_about_pages(app):
    app.switch_page("views/status.py").run()
    jobs = _table(app)
    assert list(jobs["state"]) == ["FINISHED"] * 3 and "reason" in jobs.columns
    app.switch_page("views/model.py").run()
    assert not app.exception and app.title[0].value == "Model"
    assert any(h.value == "By n_subjects x scene" for h in app.subheader)
    # Best and worst samples by the ranking metric: each line names its prompt, seed and value.
    assert any(h.value == "Best and worst samples" for h in app.subheader)
    lines = [t.value for t in app.text if " seed " in t.value and "dino_sim_floored = " in t.value]
    assert len(lines) == 6
    app.switch_page("views/about.py").run()
    assert [h.value for h in app.header] == [
        "Identity Collapse",
        "CHARIS",
        "CogCanvas",
    ]  # page order, as the navigation
    assert len(app.code) == 3


@pytest.mark.browser
@pytest.mark.slow
def test_results_files_over_their_bounds_are_not_read(app, filled, monkeypatch):
    """A results file of more rows than a result can have (one edited in place on a results repo): the
    model page says its samples are not shown, the board shows no rank intervals, nothing raises."""
    import streamlit as st

    from idbench.evaluate_pkg import results_bounds

    monkeypatch.setattr(results_bounds, "MAX_RESULT_ROWS", 10)
    st.cache_data.clear()  # values read under the real bound by earlier tests are cached in this process
    try:
        app.switch_page("views/model.py").run()
        assert not app.exception and app.title[0].value == "Model"
        warnings = [_unescape(w.value) for w in app.warning]
        assert any(
            "too large to read here" in w and "rows, over the 10 a results file may have" in w for w in warnings
        ), warnings
        assert not [t.value for t in app.text if " seed " in t.value and "dino_sim_floored = " in t.value]
        assert not any("/results/" in w for w in warnings)  # the server's paths are not shown
        # The board's intervals are computed when the results change, not by the page: computed under
        # this bound, every board says its results' values are not available, and shows no interval.
        results = Store(filled).current_results(BENCHMARK)
        boards = board.compute_boards(results, get_benchmark(BENCHMARK), "reference", None)
        overall = [b for key, b in boards.items() if key.cell == board.OVERALL and b["ranked"]]
        assert overall and all("have no per-sample values here" in b["note"] and not b["rows"] for b in overall)
    finally:
        st.cache_data.clear()  # and nothing read under the lowered bound is left for the next tests


def _submit(at: AppTest, **fields) -> AppTest:
    at.switch_page("views/submit.py").run()
    for key, value in fields.items():
        if key == "file":
            at.file_uploader(key="submit-file").upload(*value)
        else:
            at.text_input(key=f"submit-{key}").input(value)
    return at.button(key="submit-button").click().run()


@pytest.mark.browser
@pytest.mark.slow
def test_submit_page_rate_limits_each_submitter(home_copy, filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_SUBMIT_RATE_LIMIT", "1/3600")
    baseline = zip_folder(filled.parent / "clone")
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    _submit(at, file=("a.zip", baseline, "application/zip"), model="first", submitter="carol", family="Clones")
    assert at.success and not at.error
    _submit(at, model="second")  # the same upload under another name: a new submission, over carol's limit
    messages = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
    assert any("this client" in m and "the limit is 1" in m for m in messages), messages
    # Another submitter name from the same client is no new allowance (the limit counts by the client).
    _submit(at, model="third", submitter="dave")
    messages = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
    assert any("this client" in m and "the limit is 1" in m for m in messages), messages
    assert not [j for j in jobs_table(Store(home_copy)) if j["submitter"] == "dave"]
    jobs = [j for j in jobs_table(Store(home_copy)) if j["submitter"] == "carol"]
    assert [j["model"] for j in jobs] == ["first"]
    assert Store(home_copy).submission(jobs[0]["submission"])["metadata"]["family"] == "Clones"


@pytest.mark.browser
@pytest.mark.slow
def test_submit_page_refuses_a_bad_link_and_queues_nothing(home_copy, filled):
    before = jobs_table(Store(home_copy))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    _submit(
        at,
        file=("a.zip", zip_folder(filled.parent / "clone"), "application/zip"),
        model="x",
        link="javascript:alert(1)",
    )
    assert any("http" in e.value for e in at.error) and not at.success
    assert jobs_table(Store(home_copy)) == before


@pytest.mark.browser
@pytest.mark.slow
def test_submit_page_takes_a_hub_dataset_repo(home_copy, filled, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants
    from helpers import place_dataset_in_hub_cache

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


@pytest.mark.browser
@pytest.mark.slow
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


# --- the views of issue 12 (item 4) ----------------------------------------------------------------

BANNER = "plumbing check: random weights, not model scores"


@pytest.mark.browser
@pytest.mark.slow
def test_a_store_of_plumbing_checks_alone_shows_them_under_the_banner(home_copy):
    _all_plumbing(home_copy)  # as after the README's demo: every row from the tiny profile
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert not at.exception
    [banner] = at.warning  # the overview: the leaders shown, under the banner, each row marked
    assert BANNER in banner.value.lower()
    top = at.dataframe[0].value
    assert len(top) == 3 and top["marks"].str.contains("plumbing").all()
    at.switch_page(PAGE).run()
    assert at.checkbox(key=f"{BENCHMARK}-plumbing").value is True  # no real row: shown by default
    table = _table(at)
    assert sorted(_names(table)) == ["baseline-clone", "baseline-collage", "baseline-swap"]
    assert table["marks"].str.contains("plumbing").all() and BANNER in at.warning[0].value.lower()
    assert not at.info  # no "hidden: N plumbing-check rows" note
    assert "plumbing" not in at.query_params  # the default is not written into the link


@pytest.mark.browser
@pytest.mark.slow
def test_a_method_edited_in_a_results_file_is_shown_as_text(home_copy):
    """A result edited in place (a results repo's writer): Markdown in its resampling method reaches the
    captions as escaped text, one line, cut to a bound; nothing renders as an image or a link."""
    hostile = "![x](https://evil.example/x.png) **bold** [link](https://evil.example)\n# heading " + "y" * 400
    with sqlite3.connect(home_copy / "leaderboard.sqlite3") as db:
        for submission, text in db.execute(
            "SELECT submission_id, aggregates_json FROM results WHERE current"
        ).fetchall():
            aggregates = json.loads(text)
            aggregates.setdefault("resampling", {})["method"] = hostile
            aggregates.setdefault("ci", {})["method"] = hostile
            db.execute(
                "UPDATE results SET aggregates_json = ? WHERE submission_id = ? AND current",
                (json.dumps(aggregates), submission),
            )
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    at.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    assert not at.exception
    shown = [c.value for c in at.caption if "evil" in c.value]
    assert shown, [c.value for c in at.caption]
    for caption in shown:
        assert "![x](" not in caption and "](https" not in caption and "**bold**" not in caption and "\n" not in caption
        assert "\\!\\[x\\]\\(https" in caption  # escaped: a reader sees the characters
        assert "y" * 200 not in caption  # cut to a bound


@pytest.mark.browser
@pytest.mark.slow
def test_model_search_is_a_case_insensitive_substring(app):
    app.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    full = _table(app)
    app.text_input(key=f"{BENCHMARK}-search").input("CLO").run()
    found = _table(app)
    assert _names(found) == ["baseline-clone"]
    # The rank stays the one in the whole ranking.
    assert found.loc[0, "rank"] == full.loc[_names(full).index("baseline-clone"), "rank"]
    assert app.query_params["search"] == "CLO"
    app.text_input(key=f"{BENCHMARK}-search").input("no such model").run()
    assert _table(app).empty and any("No model name contains" in i.value for i in app.info)


@pytest.mark.browser
@pytest.mark.slow
def test_a_deep_link_sets_the_filters_and_an_invalid_value_is_ignored(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    for name, value in {
        "n_subjects": "4",
        "search": "swap",
        "plumbing": "1",
        "metric": "scr@0.5_floored",
        "scene": "underwater",
    }.items():
        at.query_params[name] = value
    at.switch_page(PAGE).run()
    assert not at.exception and not at.error
    assert at.selectbox(key=f"{BENCHMARK}-filter-n_subjects").value == "4"
    assert at.selectbox(key=f"{BENCHMARK}-metric").value == "scr@0.5_floored"
    assert at.selectbox(key=f"{BENCHMARK}-filter-scene").value == "all"  # not a scene of this benchmark
    assert any("scene=underwater" in _unescape(c.value) for c in at.caption)
    table = _table(at)
    assert _names(table) == ["baseline-swap"]
    cell = _aggregates(filled, 3)["breakdowns"]["n_subjects"]["4"]["scr@0.5_floored"]
    assert (
        table.loc[0, "scr@0.5_floored (%)"]
        == f"{100 * cell['mean']:.2f} [{100 * cell['ci_low']:.2f}, {100 * cell['ci_high']:.2f}]"
    )
    assert (
        "scene" not in at.query_params and at.query_params["metric"] == "scr@0.5_floored"
    )  # the ignored value leaves the link


@pytest.mark.browser
@pytest.mark.slow
def test_compact_intervals_and_the_column_picker(app, filled):
    table = _table(app)
    overall = _aggregates(filled, 1)["overall"]
    for column, metric, scale, decimals in (("dino_sim", "dino_sim", 1, 4), ("scr@0.4 (%)", "scr@0.4", 100, 2)):
        s = overall[metric]
        hand = f"{scale * s['mean']:.{decimals}f} [{scale * s['ci_low']:.{decimals}f}, {scale * s['ci_high']:.{decimals}f}]"
        assert table.loc[0, column] == hand
    assert not [c for c in table.columns if "ci_low" in c or "ci_high" in c]
    picker = app.multiselect(key=f"{BENCHMARK}-columns")
    assert "clip_t" in picker.value and "scr@0.5" in picker.value  # every metric by default
    picker.set_value(["clip_t"]).run()
    columns = list(_table(app).columns)
    assert "dino_sim_floored" in columns and "clip_t" in columns  # the metric ranked by stays
    assert not [c for c in columns if c.startswith("scr")]
    assert app.query_params["columns"] == "clip_t"


@pytest.mark.browser
@pytest.mark.slow
def test_model_names_link_to_the_model_page_and_to_their_own_link(home_copy):
    with sqlite3.connect(home_copy / "leaderboard.sqlite3") as db:
        for submission, link in ((1, "https://example.org/collage"), (2, "javascript:alert(1)")):
            db.execute(
                "UPDATE submissions SET metadata_json = json_set(metadata_json, '$.link', ?) WHERE id = ?",
                (link, submission),
            )
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    at.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    [frame] = at.dataframe
    config = json.loads(frame.proto.columns)
    assert config["model"]["type_config"]["type"] == "link" and config["link"]["type_config"]["type"] == "link"
    # The display regex shows the name: the model name is the link's last parameter.
    pattern = re.compile(config["model"]["type_config"]["display_text"])
    table = frame.value
    by_name = dict(zip(_names(table), table["link"]))
    assert by_name["baseline-collage"] == "https://example.org/collage"
    assert pd.isna(by_name["baseline-clone"]) and pd.isna(
        by_name["baseline-swap"]
    )  # not http(s), or none: no link at all
    for url, submission in zip(table["model"], table["submission"]):
        assert url.startswith("./model?") and parse_qs(urlsplit(url).query)["submission"] == [str(submission)]
        assert pattern.search(url).group(1) == parse_qs(urlsplit(url).query)["model"][0]


@pytest.mark.browser
@pytest.mark.slow
def test_a_model_link_opens_its_model_page_with_the_metadata_table(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "submission": "2", "model": "baseline-clone"})
    at.switch_page("views/model.py").run()
    assert not at.exception
    assert at.selectbox(key="model-submission").value == 2
    # The scores first (issue 43: the page opened with 29 "not run" lines above them), then the metadata.
    overall, metadata = at.dataframe[0].value, at.dataframe[1].value
    assert list(overall.columns[:3]) == ["rank", "rank interval", "tier"]
    assert list(metadata.columns) == ["field", "value"]
    fields = dict(zip(metadata["field"], metadata["value"]))
    assert fields["model"] == "baseline-clone" and fields["profile"] == "tiny" and fields["task"] == "reference"
    assert {"family", "submitter", "link", "benchmark version", "suite version", "idbench version"} <= set(fields)
    assert BANNER in at.warning[0].value.lower()  # a plumbing check, said at the top
    # JSON only inside expanders (metadata, models; judge evidence has its own).
    in_expanders = sum(len(expander.get("json")) for expander in at.expander)
    assert len(at.json) == in_expanders >= 2
    assert at.query_params["submission"] == "2"

    # By name alone: that model's result; an unknown name is ignored with a note.
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "model": "baseline-swap"})
    assert at.switch_page("views/model.py").run().selectbox(key="model-submission").value == 3
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": "no-such-benchmark", "submission": "x1"})
    at.switch_page("views/model.py").run()
    assert not at.exception and at.selectbox(key="model-benchmark").value == BENCHMARK
    notes = " ".join(_unescape(c.value) for c in at.caption)
    assert "benchmark=no-such-benchmark" in notes and "submission=x1" in notes


@pytest.mark.browser
@pytest.mark.slow
def test_the_model_page_draws_where_the_copy_check_found_each_reference(filled, monkeypatch):
    """The collage (submission 1) pastes every reference: its model page lists the flagged images and shows
    the figures the scorer drew (evaluate_pkg/copy_figures.py), each captioned with what was found."""
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "submission": "1"})
    at.switch_page("views/model.py").run()
    assert not at.exception
    [figures] = [e for e in at.expander if e.label.startswith("where each flagged image shows its reference")]
    drawn = re.search(r"\((\d+) of (\d+) drawn\)", figures.label)
    assert drawn and 1 <= int(drawn.group(1)) <= int(drawn.group(2))
    assert len(figures.children) == int(drawn.group(1))  # one st.image per figure


@pytest.mark.browser
@pytest.mark.slow
def test_the_model_page_shows_the_generation_record_as_plain_text(home_copy):
    record = {
        "adapter": "diffusers-image-list",
        "model_id": "black-forest-labs/FLUX.2-klein",
        "revision": "a" * 40,
        "pipeline_class": "Flux2KleinPipeline",
        "dtype": "bfloat16",
        "steps": 4,
        "guidance": 1.0,
        "resolution": 1024,
        "seed_rule": "**bold** <b>x</b> " + "z" * 400,
        "seconds_per_image": 1.25,
        "libraries": {"diffusers": "0.42.1", "torch": "2.14.1"},
    }
    with sqlite3.connect(Store(home_copy).path) as db:
        db.execute(
            "UPDATE submissions SET metadata_json = json_set(metadata_json, '$.generation', json(?)) WHERE id = 2",
            (json.dumps(record),),
        )
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "submission": "2"})
    at.switch_page("views/model.py").run()
    assert not at.exception
    subheaders = [h.value for h in at.subheader]
    assert "Generation" in subheaders, subheaders
    tables = [frame.value for frame in at.dataframe if list(frame.value.columns) == ["field", "value"]]
    [table] = [t for t in tables if "adapter" in set(t["field"])]
    fields = dict(zip(table["field"], table["value"]))
    assert fields["adapter"] == "diffusers-image-list" and fields["revision"] == "a" * 40 and fields["steps"] == "4"
    assert fields["libraries"] == "diffusers 0.42.1, torch 2.14.1"
    # The submitter's text stays text (a table cell, not Markdown), cut to a bounded length.
    assert fields["seed_rule"].startswith("**bold** <b>x</b>") and len(fields["seed_rule"]) == 300
    # A submission made outside `idbench generate` says so in one line.
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "submission": "3"})
    at.switch_page("views/model.py").run()
    assert any(t.value.startswith("Generation: not recorded") for t in at.text)


@pytest.mark.browser
@pytest.mark.slow
def test_the_submit_fields_are_one_form(app):
    app.switch_page("views/submit.py").run()
    button = app.button(key="submit-button")
    assert button.proto.is_form_submitter and button.proto.form_id == "submit-form"
    for key in ("submit-repo", "submit-model", "submit-family", "submit-link", "submit-submitter"):
        assert app.text_input(key=key).proto.form_id == "submit-form"
    assert app.file_uploader(key="submit-file").proto.form_id == "submit-form"


@pytest.mark.browser
def test_the_text_to_image_track_is_listed_where_it_has_results(tmp_path, monkeypatch, shared_features):
    home = tmp_path / "home"
    add_cogcanvas(tmp_path, home, features=shared_features)  # one reference-based CogCanvas row (a plumbing check)
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert not any("text-to-image" in t.value for t in at.text)  # no text-to-image result: no line for the track
    assert any(t.value.startswith("reference-based track: top of 1") for t in at.text)
    # The same result filed under the text-to-image task (a stand-in: the sample has no T2I submission).
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        db.execute("UPDATE submissions SET task = 'text-to-image'")
    st.cache_data.clear()  # an edit in place, which the store's version does not see
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert any(t.value.startswith("text-to-image (no references) track: top of 1") for t in at.text)
    assert any(t.value.startswith("reference-based track: 0 scored") for t in at.text)
    [latest] = [d.value for d in at.dataframe if "state" in d.value.columns]
    assert latest["task"].tolist() == ["text-to-image"] and latest["benchmark"].tolist() == ["cogcanvas"]
    # A link to the track opens it on the model page.
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": "cogcanvas", "track": "text-to-image"})
    at.switch_page("views/model.py").run()
    assert not at.exception and at.radio(key="model-track").value == "text-to-image"
    [metadata] = [frame.value for frame in at.dataframe if list(frame.value.columns) == ["field", "value"]]
    assert dict(zip(metadata["field"], metadata["value"]))["task"] == "text-to-image"


def _cogcanvas_page():
    # AppTest.from_function runs this function's source as the script: the CogCanvas page alone.
    from idbench.leaderboard.app.screens.benchmark import benchmark_page

    benchmark_page("cogcanvas")


@pytest.fixture(scope="module")
def cogcanvas_home(tmp_path_factory, shared_features) -> Path:
    """A home with one CogCanvas result (the collage baseline, tiny profile, DINO and CLIP-T)."""
    root = tmp_path_factory.mktemp("cogcanvas-app")
    add_cogcanvas(root, root / "home", features=shared_features)
    return root / "home"


@pytest.mark.browser
def test_cogcanvas_ranks_within_n_2_by_default_and_offers_the_pooled_mean(cogcanvas_home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(cogcanvas_home))
    at = AppTest.from_function(_cogcanvas_page, default_timeout=TIMEOUT).run()
    assert not at.exception and at.title[0].value == "CogCanvas"
    stored = _aggregates(cogcanvas_home, 1)
    show = lambda s: f"{s['mean']:.4f} [{s['ci_low']:.4f}, {s['ci_high']:.4f}]"  # noqa: E731 a cosine, shown raw

    selector = at.selectbox(key="cogcanvas-filter-n_persons")
    assert selector.value == "2" and selector.options[0] == "N = 2" and selector.options[-1] == "all N (pooled)"
    assert _table(at).loc[0, "dino_sim"] == show(stored["breakdowns"]["n_persons"]["2"]["dino_sim"])
    assert any(c.value.startswith("Ranked within N = 2") for c in at.caption)
    assert at.query_params.get("n_persons") is None  # the default: a short link

    selector.select("all").run()  # the pooled choice (shown as "all N (pooled)")
    assert _table(at).loc[0, "dino_sim"] == show(stored["overall"]["dino_sim"])
    [note] = [c.value for c in at.caption if c.value.startswith("Ranked over all N (pooled)")]
    assert "share of the prompts" in note and "N = 2:" in note  # the pooled mean's weights, said
    assert at.query_params["n_persons"] in ("all", ["all"])  # a link to the pooled ranking

    # Deep links keep working: ?n_persons=3 opens N = 3, ?n_persons=all the pooled mean.
    for value, cell in (("3", stored["breakdowns"]["n_persons"]["3"]), ("all", stored["overall"])):
        at = AppTest.from_function(_cogcanvas_page, default_timeout=TIMEOUT)
        at.query_params["n_persons"] = value
        at.run()
        assert at.selectbox(key="cogcanvas-filter-n_persons").value == value
        assert _table(at).loc[0, "dino_sim"] == show(cell["dino_sim"])


@pytest.mark.browser
def test_the_overview_says_which_n_the_leaders_are_for(cogcanvas_home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(cogcanvas_home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    assert any(
        t.value.startswith("reference-based track: top of 1 ranked submission(s), by dino_sim, N = 2:") for t in at.text
    )
    stored = _aggregates(cogcanvas_home, 1)["breakdowns"]["n_persons"]["2"]["dino_sim"]
    [top] = [d.value for d in at.dataframe if "dino_sim" in d.value.columns]
    assert top.loc[0, "dino_sim"] == f"{stored['mean']:.4f} [{stored['ci_low']:.4f}, {stored['ci_high']:.4f}]"


@pytest.mark.browser
def test_the_model_page_shows_the_subject_breakdowns(cogcanvas_home, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(cogcanvas_home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    at.query_params.update({"benchmark": "cogcanvas", "submission": "1"})
    at.run()
    at.switch_page("views/model.py").run()
    assert not at.exception
    headers = [h.value for h in at.subheader]
    assert {"By n_persons", "By item_size", "By interaction_strength", "By scene_type"} <= set(headers)
    stored = _aggregates(cogcanvas_home, 1)["subject_breakdowns"]["item_size"]
    [sizes] = [d.value for d in at.dataframe if "item_size" in d.value.columns]
    assert list(sizes["item_size"]) == list(stored)
    assert list(sizes["prompts"]) == [stats["dino_sim"]["n_prompts"] for stats in stored.values()]


@pytest.mark.browser
@pytest.mark.slow
def test_rank_intervals_and_tiers_in_the_table_the_csv_and_the_model_page(filled, monkeypatch):
    stored: list[tuple[bytes, str]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        stored.append((path_or_data, mimetype))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    at.checkbox(key=f"{BENCHMARK}-plumbing").check()
    stored.clear()
    at.run()
    shown = _table(at)
    assert shown.columns[:4].tolist() == ["rank", "rank interval", "tier", "model"]
    for rank, interval, tier in zip(shown["rank"], shown["rank interval"], shown["tier"]):
        low, _, high = interval.partition("-")
        assert int(low) <= rank <= int(high or low) and 1 <= tier <= rank
    assert shown.loc[0, "tier"] == 1 and shown["tier"].is_monotonic_increasing
    # The ranks resample the benchmark's own design, the one its aggregates' intervals used.
    method = _aggregates(filled, 1)["resampling"]["method"]
    assert method != "percentile bootstrap over prompts"
    assert any(f"resamples ({method}) of the {PROMPTS} prompt(s)" in _unescape(c.value) for c in at.caption)
    [csv] = [pd.read_csv(io.BytesIO(data)) for data, mimetype in stored if mimetype == "text/csv"]
    assert csv["rank interval"].astype(str).tolist() == shown["rank interval"].tolist()
    assert csv["tier"].tolist() == shown["tier"].tolist()
    ranks = dict(zip(_names(shown), shown["rank"]))
    # The model page's Overall row: the model's place in that ranking, not 1 of a one-row table.
    for submission, name in ((2, "baseline-clone"), (3, "baseline-swap")):
        page = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
        page.query_params.update({"benchmark": BENCHMARK, "submission": str(submission)})
        page.switch_page("views/model.py").run()
        [overall] = [frame.value for frame in page.dataframe if "rank interval" in frame.value.columns]
        assert overall["rank"].tolist() == [ranks[name]]
        assert overall["rank interval"].tolist() == [shown["rank interval"].iloc[_names(shown).index(name)]]


def _charts(at: AppTest) -> list[tuple[dict, pd.DataFrame]]:
    """Each Vega-Lite chart of the page: its spec and the data it draws (decoded from the element's Arrow bytes)."""
    from streamlit import dataframe_util

    out = []
    for chart in at.get("vega_lite_chart"):
        [dataset] = chart.proto.datasets
        out.append((json.loads(chart.proto.spec), dataframe_util.convert_arrow_bytes_to_pandas_df(dataset.data.data)))
    return out


@pytest.mark.browser
@pytest.mark.slow
def test_charts_draw_the_stored_values_in_the_app_units(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run().switch_page(PAGE).run()
    at.checkbox(key=f"{BENCHMARK}-plumbing").check().run()
    assert not at.exception and not at.get("imgs")  # no static images: every chart is Vega-Lite
    charts = _charts(at)
    [degradation] = [data for _, data in charts if "N" in data.columns]
    names = {1: "baseline-collage", 2: "baseline-clone", 3: "baseline-swap"}
    for submission, name in names.items():
        cells = _aggregates(filled, submission)["breakdowns"]["n_subjects"]
        got = degradation[degradation["model"] == name].set_index("N")
        for size, stats in cells.items():
            s = stats["dino_sim_floored"]  # the ranked metric's
            assert got.loc[int(size), ["value", "low", "high"]].tolist() == pytest.approx(
                [s["mean"], s["ci_low"], s["ci_high"]]
            )
            assert got.loc[int(size), "n"] == s["n_prompts"]
    # Every collapse rate of these baselines is 0: one line says so instead of a chart of zeros.
    assert all(_aggregates(filled, s)["overall"]["scr@0.5"]["mean"] == 0 for s in names)
    assert any("Subject Collapse Rate: every model shown has 0" in t.value for t in at.text)
    assert not [data for _, data in charts if "metric" in data.columns and data["metric"].str.startswith("scr@").all()]
    [(spec, profile)] = [(spec, data) for spec, data in charts if "facet" in spec]
    # One panel per metric that tells the models apart, named as the table's columns are; the all-zero
    # collapse rates get one line instead of empty panels (named in their units: SCR in percent here).
    # (scr@0.5_floored is not all zero: a copied image scores 1 there.)
    assert set(profile["metric"]) <= set(_table(at).columns) and not any(
        m.startswith("scr") and "_floored" not in m for m in profile["metric"]
    )
    assert any(
        t.value.startswith("Not drawn, every model shown has the same value: ") and "scr@0.5 (%) = 0" in t.value
        for t in at.text
    )
    dino = profile[profile["metric"] == "dino_sim"].set_index("model")
    for submission, name in names.items():
        s = _aggregates(filled, submission)["overall"]["dino_sim"]
        assert dino.loc[name, ["value", "low", "high", "n"]].tolist() == pytest.approx(
            [s["mean"], s["ci_low"], s["ci_high"], s["n_prompts"]]
        )
    # The one unit switch: raw values everywhere, table and charts.
    at.sidebar.radio(key="idbench-units").set_value("raw values").run()
    assert "scr@0.5" in _table(at).columns and "scr@0.5 (%)" not in _table(at).columns
    [(_, profile)] = [(spec, data) for spec, data in _charts(at) if "facet" in spec]
    assert "dino_sim" in set(profile["metric"]) and set(profile["metric"]) <= set(_table(at).columns)
    assert any("scr@0.5 = 0;" in t.value for t in at.text)


@pytest.mark.browser
@pytest.mark.slow
def test_the_model_page_compares_with_another_result(filled, monkeypatch):
    monkeypatch.setenv("IDBENCH_HOME", str(filled))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": BENCHMARK, "submission": "1", "compare": "3"})  # collage vs swap, by link
    at.switch_page("views/model.py").run()
    assert not at.exception
    [overall] = [f.value for f in at.dataframe if "B - A" in f.value.columns and "cell" not in f.value.columns]
    # Brute force from the stored per-sample values: each metric's whole-image values of both results
    # on the (prompt, seed) pairs both hold, means and their difference, in the page's display units.
    import sqlite3

    from idbench.builders.display import DISPLAYS, show
    from idbench.builders.registry import get_benchmark

    with sqlite3.connect(filled / "leaderboard.sqlite3") as db:
        paths = dict(db.execute("SELECT submission_id, results_path FROM results WHERE current"))
    frames = [pd.read_parquet(Path(paths[s]) / "results.parquet") for s in (1, 3)]
    a, b = (f[f["subject"] == ""].set_index(["prompt_id", "seed", "metric"])["value"] for f in frames)
    both = pd.concat({"a": a, "b": b}, axis=1).dropna()
    specs = {m.name: m for m in get_benchmark(BENCHMARK).metric_suite}
    checked = 0
    for _, shown in overall.iterrows():
        metric = shown["metric"].split(" ")[0]
        pairs = both.xs(metric, level="metric")
        display = DISPLAYS[specs[metric].display]
        assert shown["A"] == pytest.approx(show(pairs["a"].mean(), display.name), abs=10**-display.decimals)
        assert shown["B"] == pytest.approx(show(pairs["b"].mean(), display.name), abs=10**-display.decimals)
        factor = display.apply(1.0) - display.apply(0.0)
        assert shown["B - A"] == pytest.approx(factor * (pairs["b"] - pairs["a"]).mean(), abs=10**-display.decimals)
        assert shown["images"] == len(pairs) and shown["verdict"] in {"tied", "A better", "B better"}
        assert 0 < shown["p"] <= shown["p_holm"] <= 1
        checked += 1
    assert checked == len(specs)
    assert any("p_holm: Holm" in c.value for c in at.caption)
    assert at.selectbox(key="model-compare-1").value == 3

    # A link naming no other current result (itself; a digit int() cannot read; 40 digits) opens the
    # page without a comparison and without an error.
    for value in ("1", "\u00b2", "9" * 40):
        page = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
        page.query_params.update({"benchmark": BENCHMARK, "submission": "1", "compare": value})
        page.switch_page("views/model.py").run()
        assert not page.exception and not [f for f in page.dataframe if "B - A" in f.value.columns]
