"""The submit page: a form that uploads a zip or names a Hugging Face dataset repo, checks it and
queues it (locally or as a request on the Hub, :mod:`idbench.leaderboard.app.backend`).

Checks run one at a time per server (:mod:`idbench.leaderboard.admission`), under a rate limit per
submitter and client; a refused submission is answered with its problems in one box, as plain text.
Where the deployment cannot queue anything, the page shows only why.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from idbench import settings
from idbench.builders.registry import BENCHMARKS
from idbench.evaluate_pkg.data import BenchmarkDataError
from idbench.evaluate_pkg.hub_submission import HubSubmissionError, fetch_submission
from idbench.evaluate_pkg.submission import MAX_TEXT_CHARS, SubmissionError
from idbench.leaderboard import admission
from idbench.leaderboard.app import backend
from idbench.leaderboard.app.data import store
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.app.widgets import benchmark_names
from idbench.leaderboard.queue import RateLimit
from idbench.leaderboard.store import RateLimitError, Store

MAX_UPLOAD_MB = 512  # per submission zip or Hub repo; Streamlit refuses larger uploads before our code sees them
# Submissions are validated one at a time, in arrival order, each in a child process stopped at
# $IDBENCH_SUBMIT_DEADLINE_S; one upload per client waits or runs; the others see their place
# (idbench.leaderboard.admission). One line for the whole server process: every session is a thread of it.
ADMISSION = admission.Admission()
MAX_SUBMITTER = 100
# New submissions per submitter through the app: COUNT/SECONDS. Named submitters count by their normalised
# name, anonymous ones per client (the logged-in Hub user, else the address): idbench.names.
RATE_LIMIT_ENV, DEFAULT_RATE_LIMIT = settings.RATE_LIMIT, settings.BY_NAME[settings.RATE_LIMIT].default


def page() -> None:
    """The page as the navigation runs it: the form, or, where this deployment cannot queue anything,
    only why (one box)."""
    if backend.submissions_off_reason() is None:
        submit_page()  # its notice warns of benchmarks this deployment cannot take, if any
    else:
        # No form at all: an upload that cannot be queued would only fail after the upload.
        st.title("Submit")
        backend.submit_notice()


def rate_limit() -> RateLimit:
    """The app's per-submitter limit from ``$IDBENCH_SUBMIT_RATE_LIMIT`` (COUNT/SECONDS)."""
    return RateLimit(*settings.submit_rate_limit())


def _client() -> str | None:
    """Who is submitting, as far as the server knows (idbench.names.request_client): the signed-in Hub
    user (``st.user``, when the app is configured for Streamlit's OIDC login), else the connection's
    peer, or the address the first of ``$IDBENCH_TRUSTED_PROXIES`` reverse proxies appended to
    X-Forwarded-For. The rate limit counts by it, whatever submitter name is typed (docs/deploy.md)."""
    from idbench.names import request_client, trusted_proxies

    user = None
    try:
        if getattr(st.user, "is_logged_in", False):
            user = st.user.get("preferred_username") or st.user.get("name")
    except Exception:
        user = None
    context = st.context
    try:
        proxies = trusted_proxies()
    except ValueError as error:  # a misconfigured server takes no submission rather than trusting a header
        raise backend.QueueError(str(error)) from None
    return request_client(dict(context.headers or {}), getattr(context, "ip_address", None), user, proxies=proxies)


def _waiting(ahead: int) -> str:
    """What a waiting submitter sees: their place in the line (admission.Admission)."""
    deadline = admission.deadline_s()
    return (
        f"Waiting for a turn: {ahead} upload(s) ahead of yours are checked first, one at a time, each for at most "
        f"{deadline:g} s. Keep this page open."
    )


@dataclass
class _Fields:
    """What the form was sent with (the text fields as typed)."""

    benchmark: str
    upload: Any
    repo: str
    model_name: str
    family: str
    link: str
    submitter: str


def submit_page() -> None:
    """Upload a zip or name a Hub dataset repo; validate through :func:`idbench.leaderboard.queue.submit`; job id or problems."""
    st.title("Submit")
    backend.submit_notice()
    fields = _form()
    if fields is None:
        return
    upload, repo = fields.upload, fields.repo
    if (upload is None) == (not repo.strip()):
        st.error("Choose a .zip file or give a dataset repo id (one of the two).")
        return
    if upload is not None and upload.size > MAX_UPLOAD_MB * 1024 * 1024:  # Streamlit enforces this too; belt and braces
        st.error(f"The file is larger than {MAX_UPLOAD_MB} MB.")
        return
    result = _queue(fields)
    if result is None:
        return
    if result.duplicate:
        st.info(result.message)
    else:
        st.success(result.message)


def _form() -> _Fields | None:
    """The form, one field a row; None until its button is pressed."""
    # A form: typing in a field does not rerun the page; the button sends every field at once.
    form = st.form("submit-form", enter_to_submit=False)
    benchmark = form.selectbox(
        "Benchmark", list(benchmark_names()), format_func=lambda n: BENCHMARKS[n].title, key="submit-benchmark"
    )
    upload = form.file_uploader(
        "Submission (.zip of manifest.csv, submission.json and images)",
        type=["zip"],
        max_upload_size=MAX_UPLOAD_MB,
        key="submit-file",
    )
    repo = form.text_input(
        "... or a Hugging Face dataset repo (owner/name or owner/name@revision)", max_chars=200, key="submit-repo"
    )
    model_name = form.text_input(
        "Model name (empty: the one in submission.json)", max_chars=MAX_TEXT_CHARS["model"], key="submit-model"
    )
    family = form.text_input(
        "Model family (empty: the one in submission.json)", max_chars=MAX_TEXT_CHARS["family"], key="submit-family"
    )
    link = form.text_input(
        "Link to the paper, code or weights (http(s))", max_chars=MAX_TEXT_CHARS["link"], key="submit-link"
    )
    submitter = form.text_input("Submitter (optional)", max_chars=MAX_SUBMITTER, key="submit-submitter")
    if not form.form_submit_button("Submit", key="submit-button"):
        return None
    return _Fields(benchmark, upload, repo, model_name, family, link, submitter)


def _queue(fields: _Fields):
    """Check the submission and queue it; the queue's answer, or None after showing why it was not queued."""
    benchmark, upload, repo = fields.benchmark, fields.upload, fields.repo
    model_name, family, link, submitter = fields.model_name, fields.family, fields.link, fields.submitter
    s = store()
    shown_name = upload.name if upload is not None else repo.strip()
    submitter = submitter.strip() or None
    with tempfile.TemporaryDirectory(prefix="idbench-upload-") as folder:
        try:
            client = _client()
            attempts = Store()  # refused uploads are kept here, also beside a Hub mirror
            admission.check_rate(attempts, rate_limit(), submitter, client)
            if upload is not None:
                path = Path(folder) / "submission.zip"
                with path.open("wb") as handle:
                    shutil.copyfileobj(upload, handle)
            else:
                path = fetch_submission(repo, Path(folder) / "submission", max_bytes=MAX_UPLOAD_MB * 1024 * 1024)
            too_big = admission.budget_problem(path)
            if too_big:
                raise admission.Refused(too_big)
            (scratch := Path(folder) / "scratch").mkdir()
            place = st.empty()
            with (
                st.spinner("Checking the submission (one at a time on this server)..."),
                ADMISSION.turn(client, report=lambda ahead: place.info(_waiting(ahead))),
            ):
                place.empty()
                result = backend.queue_submission(
                    s,
                    path,
                    benchmark,
                    model_name=model_name.strip() or None,
                    submitter=submitter,
                    family=family,
                    link=link,
                    rate_limit=rate_limit(),
                    client=client,
                    deadline=admission.deadline_s(),
                    scratch=scratch,
                )
        except SubmissionError as error:
            admission.record_refusal(attempts, submitter, client, f"{error.total} problem(s)")
            # One box however many problems: the count, then the listed ones (at most MAX_PROBLEMS,
            # then "... and N more", as SubmissionError words it) one a line, as plain text; the
            # temporary path means nothing to the submitter. "  \n" is Markdown's line break.
            lines = [f"The submission was not queued: {error.total} problem(s)."]
            lines += [plain(line.replace(str(path), shown_name)) for line in str(error).splitlines()]
            st.error("  \n".join(lines))
            return None
        except (admission.Refused, HubSubmissionError) as error:  # the upload's own fault: counted
            admission.record_refusal(attempts, submitter, client, str(error))
            st.error(plain(f"The submission was not queued: {error}"))
            return None
        except (admission.Busy, RateLimitError, backend.QueueError) as error:
            st.error(plain(f"The submission was not queued: {error}"))
            return None
        except BenchmarkDataError as error:
            st.error(plain(f"This server cannot score {benchmark} submissions: {error}"))
            return None
    return result
