"""The leaderboard app in a real browser: ``streamlit run`` as a subprocess, driven by Playwright in Chromium.

The store is filled as in ``test_app.py`` (three identity-collapse baselines scored with the tiny
profile; submission 1 marked as a real run, so the default table shows one row). The tests navigate
between the benchmark pages, change the group-size filter, and submit a valid and a malformed zip.
Screenshots go to ``tests/artifacts/`` (gitignored) for a human to look at.

Chromium and Playwright are required, not optional: CI installs them (``.ci/run`` installs Debian's
``chromium``; ``playwright`` is in the ``dev`` extra). Playwright's own browser download is not used:
Debian's ``/usr/bin/chromium`` is launched instead (override with ``IDBENCH_CHROMIUM``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from idbench.builders.benchmarks import get_benchmark
from idbench.leaderboard import query
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.queue import jobs_table
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.leaderboard.store import Store
from idbench.leaderboard.worker import run_worker

from filled_store import fill_store, zip_folder

BENCHMARK = "identity-collapse"
CHROMIUM = Path(os.environ.get("IDBENCH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
STARTUP_TIMEOUT = 90  # seconds for the server to answer /_stcore/health
WAIT_MS = 60_000  # per wait on the page: the first render imports matplotlib and reads the store
INSTALL_HINT = (
    "The browser tests need Playwright and Chromium (CI installs both). Install them with:\n"
    "  .venv/bin/pip install -e '.[dev]'        # playwright>=1.40\n"
    "  apt-get install -y --no-install-recommends chromium   # Debian's browser at /usr/bin/chromium\n"
    "(Playwright's own `playwright install` download is not needed; set IDBENCH_CHROMIUM to use another binary.)"
)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sync_api():
    """Playwright's sync API module; FAIL (not skip) with how to install what is missing."""
    try:
        from playwright import sync_api
    except ImportError as error:
        pytest.fail(f"playwright is not installed ({error}).\n{INSTALL_HINT}", pytrace=False)
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"Chromium is not installed at {CHROMIUM}.\n{INSTALL_HINT}", pytrace=False)
    sync_api.expect.set_options(timeout=WAIT_MS)  # Streamlit renders asynchronously: wait, but not forever
    return sync_api


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    """``$IDBENCH_HOME`` with the built benchmark and three scored baselines (the root holds the baselines)."""
    return fill_store(tmp_path_factory.mktemp("browser"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(sync_api, filled, tmp_path_factory):
    """Base URL of ``streamlit run APP_PATH`` over the filled store; the process is always stopped."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("streamlit") / "server.log"
    env = {**os.environ, "IDBENCH_HOME": str(filled), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [
        sys.executable, "-m", "streamlit", "run", str(APP_PATH),
        "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                if process.poll() is not None:
                    pytest.fail(f"streamlit exited with {process.returncode}:\n{log_path.read_text(errors='replace')}")
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not answer in {STARTUP_TIMEOUT}s:\n{log_path.read_text(errors='replace')}")
                time.sleep(0.2)  # polling the health endpoint, not waiting on the page
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


@pytest.fixture(scope="module")
def browser(sync_api, server):
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


# --- helpers -------------------------------------------------------------------------------------


def _screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser-{name}.png"), full_page=True)


def _idle(page, expect) -> None:
    """Wait until the app is not running a script (the status widget shows while it reruns)."""
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=WAIT_MS)


def _title(page, text: str, expect) -> None:
    expect(page.get_by_role("heading", name=text, level=1)).to_be_visible()


def _rows(page) -> list[list[str]]:
    """The ranked table's body rows as cell texts.

    The data grid draws on a canvas; its accessible (visually hidden) table holds the same cells, and
    it is filled a moment after the grid appears: wait for a body row to be attached first.
    """
    rows = page.get_by_test_id("stDataFrame").locator("table tbody tr")
    rows.first.wait_for(state="attached", timeout=WAIT_MS)
    return [[cell.strip() for cell in row.locator("td").all_text_contents()] for row in rows.all()]


def _header(page) -> list[str]:
    header = page.get_by_test_id("stDataFrame").locator("table thead tr").first
    header.wait_for(state="attached", timeout=WAIT_MS)
    return [cell.strip() for cell in header.locator("th").all_text_contents()]


def _upload(page, expect, name: str, payload: bytes) -> None:
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": name, "mimeType": "application/zip", "buffer": payload}]
    )
    # The uploader lists the file (with a remove button) once it is uploaded to the server.
    expect(page.get_by_role("button", name=f"Remove {name}", exact=True)).to_be_visible()
    _idle(page, expect)


def _type(page, expect, label: str, text: str) -> None:
    """Fill a text input and commit it (Enter), then wait for the rerun to finish."""
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")
    expect(box).to_have_value(text)
    _idle(page, expect)


# --- tests ---------------------------------------------------------------------------------------


def test_navigation_between_benchmark_pages(page, server, sync_api):
    expect = sync_api.expect
    page.goto(server)  # the default page is the overview, with each benchmark's leaders
    _title(page, "idbench leaderboard", expect)
    expect(page.get_by_test_id("stDataFrame")).to_be_visible()
    assert _rows(page)[0][1] == "baseline-collage"
    _screenshot(page, "overview")

    nav = page.get_by_test_id("stSidebarNav")
    for link, path in (("Identity Collapse", "/identity_collapse"), ("CogCanvas", "/cogcanvas"), ("CHARIS", "/charis"), ("Overview", "/")):
        nav.get_by_role("link", name=link, exact=True).click()
        _title(page, "idbench leaderboard" if link == "Overview" else link, expect)
        expect(page).to_have_url(re.compile(re.escape(server + path) + "$"))
        if link in ("Identity Collapse", "Overview"):
            expect(page.get_by_test_id("stDataFrame")).to_be_visible()
        else:  # nothing scored for these in this store
            expect(page.get_by_text("No scored submissions yet.")).to_be_visible()
            _screenshot(page, link.lower())
    # Each page also opens by its own URL, with no "Page not found" dialog.
    pages = (("/", "idbench leaderboard"), ("/identity_collapse", "Identity Collapse"), ("/cogcanvas", "CogCanvas"),
             ("/charis", "CHARIS"), ("/submit", "Submit"), ("/model", "Model"))  # fmt: skip
    for path, title in pages:
        page.goto(server + path)
        _title(page, title, expect)
        _idle(page, expect)
        expect(page.get_by_role("dialog")).to_have_count(0)
    assert not page.get_by_test_id("stException").count()
    # The model page ends with the best and worst samples: generated image beside its references.
    page.goto(server + "/model")
    expect(page.get_by_role("heading", name="Best and worst samples")).to_be_visible()
    expect(page.get_by_test_id("stImage").first).to_be_visible()
    _idle(page, expect)
    assert page.get_by_test_id("stImage").count() >= 6 * 3  # 6 samples, each with its generation and >= 2 references
    page.get_by_role("heading", name="Best and worst samples").scroll_into_view_if_needed()
    _screenshot(page, "model-samples")


def test_group_size_filter_changes_the_table(page, server, filled, sync_api):
    expect = sync_api.expect
    page.goto(server + "/identity_collapse")
    _title(page, "Identity Collapse", expect)
    expect(page.get_by_test_id("stDataFrame")).to_be_visible()
    _idle(page, expect)
    header, before = _header(page), _rows(page)
    assert len(before) == 1 and before[0][1] == "baseline-collage"
    column = header.index("dino_sim")

    page.get_by_role("combobox", name="n_subjects").click()
    page.get_by_role("option", name="4", exact=True).click()
    expect(page.get_by_role("combobox", name="n_subjects")).to_have_value("4")
    cell = page.get_by_test_id("stDataFrame").locator("table tbody tr").first.locator("td").nth(column)
    expect(cell).not_to_have_text(before[0][column])
    _idle(page, expect)
    after = _rows(page)
    _screenshot(page, "identity-collapse-n_subjects-4")

    spec = get_benchmark(BENCHMARK)
    expected = query.display_table(
        query.ranked_table(Store(filled).current_results(BENCHMARK), spec, filters={"n_subjects": "4"}), spec
    )
    assert [row[1] for row in after] == expected["model"].tolist()
    assert float(after[0][column]) == pytest.approx(expected.loc[0, "dino_sim"], abs=5e-5)
    assert float(after[0][column]) != pytest.approx(float(before[0][column]), abs=5e-5)
    assert not page.get_by_test_id("stException").count()


def test_submit_page_rejects_a_malformed_zip(page, server, filled, sync_api):
    expect = sync_api.expect
    jobs_before = jobs_table(Store(filled))
    page.goto(server + "/submit")
    _title(page, "Submit", expect)
    _upload(page, expect, "broken.zip", b"this is not a zip archive")
    page.get_by_role("button", name="Submit", exact=True).click()
    alerts = page.get_by_test_id("stAlertContentError")
    expect(alerts.first).to_contain_text("The submission was not queued")
    expect(alerts.filter(has_text="broken.zip").first).to_be_visible()  # names the upload, not a temp path
    _idle(page, expect)
    _screenshot(page, "submit-malformed")
    assert not page.get_by_test_id("stAlertContentSuccess").count()
    assert jobs_table(Store(filled)) == jobs_before


def test_submit_page_queues_a_valid_zip(page, server, filled, sync_api):
    expect = sync_api.expect
    jobs_before = jobs_table(Store(filled))
    page.goto(server + "/submit")
    _title(page, "Submit", expect)
    # The collage baseline again, under a new model name: a new submission, not a duplicate.
    _upload(page, expect, "collage.zip", zip_folder(filled.parent / "collage"))
    _type(page, expect, "Model name (empty: the one in submission.json)", "browser model")
    page.get_by_role("button", name="Submit", exact=True).click()
    success = page.get_by_test_id("stAlertContentSuccess")
    expect(success).to_contain_text(re.compile(r"Queued: submission \d+, job \d+"))
    _screenshot(page, "submit-queued")
    job_id = int(re.search(r"job (\d+)", success.inner_text()).group(1))
    jobs = jobs_table(Store(filled))
    assert len(jobs) == len(jobs_before) + 1
    [job] = [j for j in jobs if j["job"] == job_id]
    assert job["state"] == "PENDING" and job["model"] == "browser model"
    assert not page.get_by_test_id("stAlertContentError").count()

    # A worker scores it (tiny weights: a plumbing check); it then appears ranked once plumbing rows are shown.
    assert run_worker(Store(filled), once=True, options=ScoreOptions(profile="tiny")) == 1
    page.goto(server + "/identity_collapse")
    _title(page, "Identity Collapse", expect)
    page.get_by_text("show plumbing-check rows").click()
    expect(page.get_by_test_id("stDataFrame").locator("table tbody tr")).to_have_count(4)
    _idle(page, expect)
    models = [row[1] for row in _rows(page)]
    assert "browser model" in models
    _screenshot(page, "identity-collapse-after-submit")
    shown = [row for row in _rows(page) if row[1] == "browser model"][0]
    assert "plumbing" in " ".join(shown)
