"""Where the app gets its store and benchmark data, and how it queues a submission: locally or from the Hub.

Two deployments run the same pages:

- **embedded** (the default): the SQLite store under ``$IDBENCH_HOME``; a submission is validated and
  queued there (:func:`idbench.leaderboard.queue.submit`) for ``idbench worker`` on the same machine.
- **Hub-backed** (a Hugging Face Space, docs/deploy.md), when ``IDBENCH_HUB_REQUESTS`` and
  ``IDBENCH_HUB_RESULTS`` name the two dataset repos: the pages read a read-only mirror of them
  (:mod:`idbench.leaderboard.hub_mirror`, refreshed every ``IDBENCH_HUB_REFRESH_S`` seconds, under
  ``$IDBENCH_HOME/hub-mirror``), and a submission becomes a request file in the requests repo
  (``queue.hub.submit_request``, one commit; it needs a write token, the Space's ``HF_TOKEN`` secret)
  for ``idbench worker --hub`` on any GPU machine. ``IDBENCH_HUB_STAND_IN`` swaps the Hub for the
  local stand-in (tests, offline trials).

Benchmark data (to validate uploads against): ``IDBENCH_BENCHMARK_REPOS`` (``name=org/repo@revision``,
comma-separated) downloads each published benchmark at that revision into the Hugging Face cache, so the
Space validates against the very files a worker scores with; else ``IDBENCH_DATA_DIR/<benchmark>``; else
``$IDBENCH_HOME/benchmarks/<benchmark>`` (where ``idbench submit`` looks).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from idbench import settings
from idbench.errors import IdbenchError
from idbench.leaderboard import hub_mirror
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.hubrepo import HubRepoError, RepoConflict, open_repo
from idbench.leaderboard.queue import RateLimit, submit
from idbench.leaderboard.store import Store, default_home, iso

REQUESTS_ENV, RESULTS_ENV = settings.HUB_REQUESTS, settings.HUB_RESULTS
DATA_ENV, BENCHMARK_REPOS_ENV = settings.DATA_DIR, settings.BENCHMARK_REPOS
MIRROR_FOLDER = "hub-mirror"  # under $IDBENCH_HOME


class QueueError(IdbenchError):
    """The submission is valid but cannot be queued here (no token, the Hub refused); nothing was queued."""


@dataclass(frozen=True)
class Queued:
    duplicate: bool  # True: already submitted; nothing new was queued
    message: str  # what the submit page says


def hub_repos() -> tuple[str, str] | None:
    """(requests repo, results repo) of a Hub-backed deployment, or None for the embedded store."""
    requests, results = settings.hub_repos_text()
    if bool(requests) != bool(results):
        _stop(
            f"Set both {REQUESTS_ENV} and {RESULTS_ENV} (one is set, the other is not), or neither for the embedded store."
        )
    return (requests, results) if requests else None


def _stop(message: str) -> None:
    st.error(plain(message))
    st.stop()


# One refresher per (repos, stand-in, home, interval) for the whole server process: every session and
# rerun reads the same mirror, and only one of them refreshes it at a time.
_refreshers: dict[tuple, hub_mirror.Refresher] = {}
_refreshers_lock = threading.Lock()


def refresher() -> hub_mirror.Refresher | None:
    """The process's mirror refresher of the configured repos, or None for the embedded store."""
    repos = hub_repos()
    if repos is None:
        return None
    try:
        interval = hub_mirror.refresh_interval()
    except ValueError as error:
        _stop(str(error))
    home = default_home() / MIRROR_FOLDER
    key = (*repos, str(settings.hub_stand_in()), str(home), interval)
    with _refreshers_lock:
        if key not in _refreshers:
            try:
                requests, results = open_repo(repos[0]), open_repo(repos[1])
            except HubRepoError as error:
                _stop(f"The leaderboard cannot open its Hub repos: {error}")
            _refreshers[key] = hub_mirror.Refresher(requests, results, home, interval)
        return _refreshers[key]


def store() -> Store:
    """The store the pages read: the Hub mirror in a Hub-backed deployment, else the one under ``$IDBENCH_HOME``."""
    mirror = refresher()
    if mirror is None:
        return Store()
    try:
        return Store(mirror.get().store_home)
    except RuntimeError as error:  # no mirror at all yet (the first refresh failed); the cause is logged
        _stop(
            f"The leaderboard cannot read its Hub repos {mirror.requests.repo_id} and {mirror.results.repo_id}: {error}"
        )


# --- benchmark data ---------------------------------------------------------------------------------


def benchmark_repos() -> dict[str, tuple[str, str | None]]:
    """``$IDBENCH_BENCHMARK_REPOS`` as {benchmark: (dataset repo, revision or None)}."""
    try:
        return settings.benchmark_repos()
    except settings.SettingError as error:  # every caller handles a QueueError: the submission cannot be queued
        raise QueueError(str(error)) from None


@st.cache_resource(show_spinner="Downloading the benchmark ...", max_entries=16)
def _benchmark_snapshot(repo: str, revision: str | None) -> str:
    # The Hugging Face cache, not a local_dir copy: a local_dir download adds metadata files to the
    # folder, which would change its content digest (the benchmark version a worker checks).
    from huggingface_hub import snapshot_download

    return snapshot_download(repo, repo_type="dataset", revision=revision)


def data_dir(benchmark: str) -> Path:
    """The built benchmark uploads of ``benchmark`` are validated against (see the module docstring)."""
    published = benchmark_repos().get(benchmark)
    if published is not None:
        return Path(_benchmark_snapshot(*published))
    return _local_benchmarks() / benchmark


def _local_benchmarks() -> Path:
    """``$IDBENCH_DATA_DIR``, else ``$IDBENCH_HOME/benchmarks``: the folder of local built benchmarks."""
    root = settings.data_dir()
    return root if root is not None else default_home() / "benchmarks"


# --- queueing -----------------------------------------------------------------------------------------


def _has_write_token() -> bool:
    if settings.hub_stand_in() is not None:  # the local stand-in needs no token
        return True
    from huggingface_hub import get_token

    return bool(get_token())


def _no_token_message(requests: str) -> str:
    return (
        f"Submissions are off: this server has no Hugging Face token to write to {requests}. "
        "The maintainer must add an HF_TOKEN secret (a token with write access to that repo) in the Space's settings."
    )


SPACE_ENV = (
    settings.SPACE
)  # set by the Hub in every Space's container (hub-docs, "Spaces Overview": helper environment variables)


def _on_a_space() -> bool:
    return settings.on_a_space()


def _space_without_repos_message() -> str:
    # A Space's disk is ephemeral: a job queued in an embedded store there would be lost at the next
    # restart, and no worker could reach it anyway.
    return (
        f"Submissions are off: this Space has no Hub repos to queue them in ({REQUESTS_ENV} and {RESULTS_ENV} "
        "are not set), and a submission kept on the Space's own disk would be lost at its next restart. "
        f"The maintainer must set the variables {REQUESTS_ENV} and {RESULTS_ENV} (the requests and results dataset "
        "repos, ORG/NAME) in the Space's settings (docs/deploy.md)."
    )


def submissions_off_reason() -> str | None:
    """Why this deployment cannot queue any submission (one sentence for the page), or None when it can."""
    repos = hub_repos()
    if repos is None:
        return _space_without_repos_message() if _on_a_space() else None
    if not _has_write_token():
        return _no_token_message(repos[0])
    try:
        benchmark_repos()
    except QueueError:  # every submission would fail on it: the setting itself is broken
        return (
            f"Submissions are off: the variable {BENCHMARK_REPOS_ENV} cannot be read (each comma-separated item "
            "must be NAME=ORG/REPO@REVISION). The maintainer must fix it in the Space's settings."
        )
    return None


def missing_benchmarks(benchmarks: Iterable[str]) -> list[str]:
    """The benchmarks of a Hub-backed deployment whose data uploads would be validated against cannot be
    found: not published in ``$IDBENCH_BENCHMARK_REPOS`` and no local folder (see :func:`data_dir`).

    A published benchmark counts as available without downloading it (that happens on the first
    submission); the embedded store has no such check (``idbench submit``'s own folder rules apply).
    """
    if hub_repos() is None:
        return []
    published = benchmark_repos()
    local = _local_benchmarks()
    return [name for name in benchmarks if name not in published and not (local / name).is_dir()]


def _missing_benchmarks_message(missing: list[str]) -> str:
    # Names the variables, never the folder looked in: public pages carry no server paths.
    return (
        f"No benchmark data for {', '.join(missing)} on this server: submissions to "
        f"{'it' if len(missing) == 1 else 'them'} are refused. The maintainer names each published benchmark "
        f"in the variable {BENCHMARK_REPOS_ENV} (NAME=ORG/REPO@REVISION, comma-separated) in the Space's settings."
    )


def submit_notice(benchmarks: Iterable[str] | None = None) -> bool:
    """On the submit page, up front and in one box: why this deployment cannot queue anything (an error;
    returns True, and the page offers no form), else which benchmarks it cannot take (a warning)."""
    reason = submissions_off_reason()
    if reason is not None:
        st.error(reason)  # the app's own sentences (names of variables and repos, nothing a submitter wrote)
        return True
    if benchmarks is None:
        from idbench.builders.registry import BENCHMARKS  # render's list of benchmarks, in page order

        benchmarks = list(BENCHMARKS)
    missing = missing_benchmarks(benchmarks)
    if missing:
        st.warning(_missing_benchmarks_message(missing))
    return False


def queue_submission(
    s: Store,
    path: Path,
    benchmark: str,
    *,
    model_name: str | None,
    submitter: str | None,
    family: str | None,
    link: str | None,
    rate_limit: RateLimit,
    client: str | None = None,
    deadline: float | None = None,
    scratch: Path | None = None,
) -> Queued:
    """Validate and queue one submission: a request file on the Hub, or a job in the embedded store.

    Raises what :func:`~idbench.leaderboard.queue.submit` raises for the submission's own problems
    (``SubmissionError``, ``RateLimitError``, ``BenchmarkDataError``) and :class:`QueueError` when the
    Hub cannot take it. ``client`` (idbench.names.request_client) keys the rate limit of anonymous
    submitters. With ``deadline`` (seconds) the validation and queueing run in a child process stopped
    at the deadline (:func:`idbench.leaderboard.admission.run_with_deadline`, which raises
    ``DeadlineExceeded`` or ``ValidationCrashed``), its temporary files under ``scratch``.
    """
    repos = hub_repos()
    if repos is not None and not _has_write_token():
        raise QueueError(_no_token_message(repos[0]))
    request = QueueRequest(
        store_home=s.home,
        requests_repo=None if repos is None else repos[0],
        path=Path(path),
        data_dir=data_dir(benchmark),  # here, not in the child: a first download is cached for the process
        model_name=model_name,
        submitter=submitter,
        family=family,
        link=link,
        rate_limit=rate_limit,
        client=client,
    )
    if deadline is None:
        queued = queue_request(request)
    else:
        from idbench.leaderboard.admission import run_with_deadline

        queued = run_with_deadline(queue_request, request, deadline=deadline, scratch=scratch)
    mirror = refresher()
    if mirror is not None:
        mirror.expire()  # the next rerun reads the new request, whatever the refresh interval
    return queued


@dataclass(frozen=True)
class QueueRequest:
    """Everything :func:`queue_request` needs, picklable (it may run in a child process)."""

    store_home: Path
    requests_repo: str | None  # the Hub's requests repo, or None for the embedded store at store_home
    path: Path
    data_dir: Path
    model_name: str | None
    submitter: str | None
    family: str | None
    link: str | None
    rate_limit: RateLimit
    client: str | None


def queue_request(request: QueueRequest) -> Queued:
    """Validate and queue ``request`` (see :func:`queue_submission`); no Streamlit call, so a child can run it."""
    if request.requests_repo is None:
        result = submit(
            Store(request.store_home),
            request.path,
            request.data_dir,
            model_name=request.model_name,
            submitter=request.submitter,
            family=request.family,
            link=request.link,
            rate_limit=request.rate_limit,
            client=request.client,
        )
        if result.duplicate:
            return Queued(
                True,
                f"Already submitted: submission {result.submission_id}, job {result.job_id}. Nothing new was queued.",
            )
        return Queued(False, f"Queued: submission {result.submission_id}, job {result.job_id}. See the Status page.")

    # The submitter's name is not published: the request record keeps only a digest of who submitted
    # (owner), which owns the model name and counts against the same rate limit as locally.
    from idbench.leaderboard.queue import hub as hub_queue  # the request-file side (claims, workers) lives there

    try:
        ref = hub_queue.submit_request(
            open_repo(request.requests_repo),
            request.path,
            request.data_dir,
            request.model_name,
            family=request.family,
            link=request.link,
            submitter=request.submitter,
            client=request.client,
            rate_limit=request.rate_limit,
        )
    except (HubRepoError, RepoConflict, OSError) as error:
        raise QueueError(
            f"the Hub did not take the request ({type(error).__name__}: {error}); try again later"
        ) from None
    if ref.duplicate:
        return Queued(
            True, f"Already submitted: request {ref.path} in {request.requests_repo}. Nothing new was queued."
        )
    return Queued(
        False, f"Queued: request {ref.path} in {request.requests_repo}. A worker will score it; see the Status page."
    )


# --- status --------------------------------------------------------------------------------------------


def mirror_status() -> None:
    """On the status page of a Hub-backed deployment: which revisions are shown, since when, what was skipped."""
    mirror = refresher()
    if mirror is None or mirror.info is None:
        return
    info = mirror.info
    st.text(
        f"Mirror of {info.requests_repo} at {(info.requests_revision or 'empty')[:12]} and {info.results_repo} at "
        f"{(info.results_revision or 'empty')[:12]}, built {iso(info.built_at)}; heads last checked "
        f"{iso(mirror.checked_at)}, every {mirror.interval:g} s."
    )
    if mirror.error:
        st.warning(f"The last refresh failed, so this may be out of date: {plain(mirror.error)}")
    if info.skipped:
        st.warning(f"{len(info.skipped)} file(s) in the Hub repos could not be read and are not shown:")
        st.text("\n".join(info.skipped))


def admin_note() -> str | None:
    """Why the app's admin actions are off in a Hub-backed deployment (they would edit the mirror), or None."""
    repos = hub_repos()
    if repos is None:
        return None
    return (
        f"Admin actions act on the Hub repos, not on this mirror: withdraw with "
        f"`idbench withdraw --hub {repos[0]} --results {repos[1]} ...` (docs/deploy.md)."
    )
