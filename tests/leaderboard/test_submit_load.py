"""The Submit page under load (issue 40, item 3): the admission line, the budget read from image headers,
the validation deadline in a child process, and refused uploads counted by the rate limit."""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import re
import threading
import time
import zipfile
from pathlib import Path

import pytest
from PIL import Image, ImageFile
from streamlit.testing.v1 import AppTest

from idbench.evaluate_pkg.submission import Problem, SubmissionError
from idbench.leaderboard import admission
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.queue import RateLimit, jobs_table
from idbench.leaderboard.store import RateLimitError, Store
from idbench.names import rate_identity

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

TIMEOUT = 60


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("1", (width, height)).save(buffer, "PNG")  # 1-bit, all black: a few KB whatever the size
    return buffer.getvalue()


def _zip(images: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("submission.json", '{"benchmark": "identity-collapse", "model": "m"}')
        archive.writestr("manifest.csv", "prompt_id,seed,file\n" + "".join(f"01,0,{n}\n" for n in images))
        for name, data in images.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def slow_queue(request) -> None:
    """Stands in for backend.queue_request in the child: a validation that never ends by itself."""
    time.sleep(60)


# --- the line --------------------------------------------------------------------------------------


def test_the_line_is_first_come_first_served_one_place_per_client():
    line = admission.Admission(slots=1, max_waiting=2)
    first, second, third = line.enter("a"), line.enter("b"), line.enter("c")
    assert [line.ahead(t) for t in (first, second, third)] == [0, 1, 2]
    with pytest.raises(admission.Busy, match="already being checked or waiting"):
        line.enter("b")  # the same client again, while its first upload waits
    with pytest.raises(admission.Busy, match="2 uploads are already waiting"):
        line.enter("d")
    line.leave(first)
    assert [line.ahead(t) for t in (second, third)] == [0, 1]
    line.leave(third)  # a waiting upload that gives up keeps no place
    assert len(line) == 1 and line.ahead(second) == 0
    line.leave(second)
    line.leave(second)  # twice is harmless
    assert len(line) == 0


def test_a_turn_is_given_back_on_error_and_a_waiter_sees_its_place():
    line = admission.Admission(slots=1)
    with pytest.raises(RuntimeError), line.turn("a"):
        raise RuntimeError("validation blew up")
    assert len(line) == 0  # released: the client may submit again
    holder = line.enter("a")
    places, admitted = [], threading.Event()

    def wait() -> None:
        with line.turn("b", report=places.append):
            admitted.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    while not places:
        time.sleep(0.01)
    assert places == [1] and not admitted.is_set()
    line.leave(holder)
    waiter.join(5)
    assert admitted.is_set() and places == [1] and len(line) == 0


# --- the budget up front ---------------------------------------------------------------------------


def test_the_pixel_budget_refuses_by_header_sizes_without_decoding(tmp_path, monkeypatch):
    archive = tmp_path / "big.zip"
    archive.write_bytes(_zip({f"images/{i}.png": _png(4000, 3000) for i in range(3)}))

    def no_decoding(self, *args, **kwargs):
        raise AssertionError("a pixel was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    assert admission.footprint(archive) == admission.Footprint(36_000_000, admission.footprint(archive).bytes, 3)
    message = admission.budget_problem(archive, max_pixels=30_000_000)
    assert message == (
        "its 3 images hold 36,000,000 pixels (from their headers), over this server's limit of 30,000,000 "
        "per submission; submit smaller images"
    )
    assert admission.budget_problem(archive, max_pixels=36_000_000) is None
    assert "bytes unpacked, over this server's limit of 10 " in admission.budget_problem(archive, 10**9, max_bytes=10)
    folder = tmp_path / "folder"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "a.png").write_bytes(_png(100, 50))
    (folder / "images" / "b.png").write_bytes(b"not an image")  # counts 0 pixels: validation says why
    assert admission.footprint(folder).pixels == 5000 and admission.footprint(folder).images == 2
    (tmp_path / "broken.zip").write_bytes(b"not a zip")
    assert admission.budget_problem(tmp_path / "broken.zip", max_pixels=1) is None  # left to validation


# --- the deadline ----------------------------------------------------------------------------------


def test_the_deadline_stops_a_slow_validation_and_answers_come_back():
    assert admission.run_with_deadline(pow, 2, 10, deadline=30) == 1024  # also starts the fork server
    started = time.monotonic()
    with pytest.raises(admission.DeadlineExceeded, match="longer than this server's limit of 1 s, so it was stopped"):
        admission.run_with_deadline(time.sleep, 60, deadline=1)
    assert time.monotonic() - started < 5  # 1 s and the start of a child from the fork server
    assert not multiprocessing.active_children()  # the child was killed and reaped
    with pytest.raises(admission.ValidationCrashed, match=r"exit code 3"):
        admission.run_with_deadline(os._exit, 3, deadline=30)
    with pytest.raises(ValueError, match="invalid literal"):
        admission.run_with_deadline(int, "x", deadline=30)
    error = pickle.loads(pickle.dumps(SubmissionError([Problem("01", 0, "a.png", "bad")], more=2)))
    assert error.total == 3 and str(error).startswith("prompt_id '01' seed 0, file a.png: bad")


# --- refused uploads count -------------------------------------------------------------------------


def test_refused_uploads_count_against_the_rate_limit(tmp_path):
    store = Store(tmp_path)
    limit = RateLimit(2, 3600)
    admission.check_rate(store, limit, None, "10.0.0.1")
    admission.record_refusal(store, None, "10.0.0.1", "3 problem(s)")
    admission.record_refusal(store, "alice", "10.0.0.1", "too big")  # another name, the same client
    with pytest.raises(RateLimitError, match=r"this client made 0 submission\(s\) and 2 refused upload\(s\)"):
        admission.check_rate(store, limit, "bob", "10.0.0.1")
    admission.check_rate(store, limit, None, "10.0.0.2")  # another client has its own allowance
    assert store.count_recent_refusals(rate_identity(None, "10.0.0.1"), time.time() + 1) == 0  # the window moves


# --- through the page ------------------------------------------------------------------------------


def _submit(at: AppTest, archive: bytes) -> list[str]:
    at.switch_page("views/submit.py").run()
    at.file_uploader(key="submit-file").upload("mine.zip", archive, "application/zip")
    at.button(key="submit-button").click().run()
    assert not at.exception
    return [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.browser
def test_the_page_refuses_an_upload_over_the_pixel_budget_and_counts_it(home, monkeypatch):
    monkeypatch.setenv("IDBENCH_SUBMIT_MAX_PIXELS", "1000")
    monkeypatch.setenv("IDBENCH_SUBMIT_RATE_LIMIT", "2/3600")
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    archive = _zip({"images/a.png": _png(100, 20)})
    for _ in range(2):
        assert _submit(at, archive) == [
            "The submission was not queued: its 1 images hold 2,000 pixels (from their headers), over this "
            "server's limit of 1,000 per submission; submit smaller images"
        ]
    [message] = _submit(at, archive)  # two refused uploads: the limit of 2 is reached
    assert "0 submission(s) and 2 refused upload(s) in the last 1 h; the limit is 2" in message
    assert not at.success and jobs_table(Store(home)) == []


@pytest.mark.browser
def test_the_page_stops_a_validation_at_its_deadline_in_one_line(home, monkeypatch):
    from idbench.leaderboard.app import backend

    monkeypatch.setenv("IDBENCH_SUBMIT_DEADLINE_S", "1")
    monkeypatch.setattr(backend, "queue_request", slow_queue)  # what the child runs, found by name there
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    started = time.monotonic()
    errors = _submit(at, _zip({"images/a.png": _png(10, 10)}))
    assert time.monotonic() - started < 20  # the first start of the fork server included
    assert errors == [
        "The submission was not queued: checking it took longer than this server's limit of 1 s, so it was "
        "stopped; submit fewer or smaller images"
    ]
    assert jobs_table(Store(home)) == []
    with Store(home).transaction(immediate=False) as db:
        assert db.execute("SELECT COUNT(*) FROM refused_uploads").fetchone()[0] == 1
