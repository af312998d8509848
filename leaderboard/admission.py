"""Admission of uploads to the app's Submit page: bounded work per upload, one turn at a time, in order.

The page validates uploads one at a time (``SLOTS``), each in a child process, so that one upload
cannot close the page for everyone (issue 40):

- **Budget up front** (:func:`budget_problem`): before an upload waits for its turn, the pixels of its
  images (width x height, read from their headers, nothing decoded) and their bytes are summed; over
  ``$IDBENCH_SUBMIT_MAX_PIXELS`` or ``MAX_SUBMISSION_BYTES`` it is refused in one line giving both figures.
- **One turn at a time, first come first served** (:class:`Admission`): the others wait in order and see
  their place; a client (``screens.submit._client``: the signed-in user, else the address) has at most one
  upload waiting or running, and at most ``MAX_WAITING`` wait at once.
- **A deadline** (:func:`run_with_deadline`): the validation (and the queueing it ends with) runs in a
  child process that is killed after ``$IDBENCH_SUBMIT_DEADLINE_S`` (60 s), so a slow upload keeps no
  one else out longer than that. The child writes the store itself: the files into a staging folder
  renamed into place, the rows in one transaction, so a kill leaves no half-written row (a staging
  folder left behind is swept by ``idbench worker``). Its temporary files go under the caller's folder.
- **Refused uploads count** (:func:`check_rate`, :func:`record_refusal`): an upload refused for its own
  content (invalid, over the budget, past the deadline, crashed) is recorded in the store
  (``refused_uploads``), and the rate limit counts those with the submissions, so repeated refused
  uploads hit the limit like accepted ones.

Child processes start from a fork server (``multiprocessing``'s ``forkserver``: the app's server is
threaded, and a plain fork of a threaded process can deadlock), which imports the queue's modules once;
a child then starts in tens of milliseconds instead of the seconds a fresh interpreter needs.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.spawn
import resource
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idbench import settings
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.images import header_size
from idbench.evaluate_pkg.submission import IMAGE_SUFFIXES
from idbench.leaderboard.queue import RateLimit
from idbench.leaderboard.store import RateLimitError, Store
from idbench.names import rate_identity

logger = logging.getLogger(__name__)

SLOTS = 1  # validations running at once (each holds up to MAX_PIXELS_IN_FLIGHT of decoded pixels)
MAX_WAITING = 8  # uploads waiting for a turn; with the deadline, no one waits more than about 8 minutes
MAX_SUBMISSION_BYTES = 1024**3  # the images' bytes (unpacked), summed over one upload
HEADER_BYTES = 256 * 1024  # read of each image to find its size (a JPEG's size may follow its EXIF)
MAX_HEADERS = 20_000  # images whose headers are read; the rest count by their bytes only
START_TIMEOUT_S = 120.0  # for the child to start (the fork server's first start imports the queue's modules)
POLL_S = 0.5  # how often a waiting upload's place is shown again
# What the fork server imports once, so that each child starts without importing them again.
PRELOAD = ("idbench.leaderboard.app.backend",)
# True: run_with_deadline calls the function here, with no deadline (tests that replace the queue's
# functions in this process, which a child would not see; debugging). Never set in a deployment.
IN_PROCESS = False


class Busy(IdbenchError):
    """No turn for this upload now (this client already has one in flight, or too many wait); nothing ran."""


class Refused(IdbenchError):
    """The upload itself was refused before or while it was checked (over the budget, past the deadline,
    crashed its check); the message is one line. Counted by the rate limit."""


class DeadlineExceeded(Refused):
    """The validation ran past its deadline and was stopped; nothing was queued."""


class ValidationCrashed(Refused):
    """The validation's process ended without an answer (killed for memory, a crash); nothing was queued."""


# --- the budget up front ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Footprint:
    """What an upload's images add up to, from their headers: ``pixels`` (sum of width x height of the
    images whose header was read), ``bytes`` (every image's bytes, unpacked) and ``images`` (how many)."""

    pixels: int
    bytes: int
    images: int


def footprint(path: Path) -> Footprint:
    """The :class:`Footprint` of a submission zip or folder; no pixel is decoded.

    Images are the files with an image suffix (the only ones a zip may hold, ``IMAGE_SUFFIXES``); of each
    the first ``HEADER_BYTES`` are read, at most ``MAX_HEADERS`` of them. Images inside parquet files are
    not counted here (parquet is read row by row by validation, under the deadline and the pixel budget in
    flight); a file whose header no allowed format reads counts 0 pixels (validation says why).
    """
    pixels = size = images = 0
    path = Path(path)
    if path.is_dir():
        files = [p for p in sorted(path.rglob("*")) if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]
        for file in files:
            images += 1
            size += file.lstat().st_size
            if images <= MAX_HEADERS:
                with file.open("rb") as handle:
                    pixels += _pixels(handle.read(HEADER_BYTES))
        return Footprint(pixels, size, images)
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            if member.is_dir() or Path(member.filename).suffix.lower() not in IMAGE_SUFFIXES:
                continue
            images += 1
            size += member.file_size
            if images <= MAX_HEADERS:
                with archive.open(member) as handle:
                    pixels += _pixels(handle.read(HEADER_BYTES))
    return Footprint(pixels, size, images)


def _pixels(head: bytes) -> int:
    found = header_size(head)
    return found[0] * found[1] if found else 0


def budget_problem(path: Path, max_pixels: int | None = None, max_bytes: int = MAX_SUBMISSION_BYTES) -> str | None:
    """One line refusing the upload at ``path`` for its size (figures and limits), or None when it fits.

    ``max_pixels`` defaults to ``$IDBENCH_SUBMIT_MAX_PIXELS``. An unreadable zip is left to validation.
    """
    max_pixels = settings.submit_max_pixels() if max_pixels is None else max_pixels
    try:
        found = footprint(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, NotImplementedError):
        return None  # not a zip this can read: validation refuses it in its own words
    if found.pixels > max_pixels:
        return (
            f"its {found.images} images hold {found.pixels:,} pixels (from their "
            f"headers), over this server's limit of {max_pixels:,} per submission; submit smaller images"
        )
    if found.bytes > max_bytes:
        return (
            f"its {found.images} images are {found.bytes:,} bytes unpacked, over "
            f"this server's limit of {max_bytes:,} per submission"
        )
    return None


# --- turns ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Ticket:
    """One upload's place in the :class:`Admission` line."""

    client: str
    since: float = field(default_factory=time.monotonic)


class Admission:
    """A first-come, first-served line for ``slots`` turns at once; one place per client.

    Example::

        line = Admission()
        with line.turn(client, report=lambda ahead: print(ahead, "ahead")):
            validate(...)  # at most `slots` of these run at once, in arrival order
    """

    def __init__(self, slots: int = SLOTS, max_waiting: int = MAX_WAITING):
        self.slots = slots
        self.max_waiting = max_waiting
        self._line: list[Ticket] = []  # arrival order; the first `slots` hold the turns
        self._changed = threading.Condition()

    def enter(self, client: str | None) -> Ticket:
        """A place at the end of the line; :class:`Busy` when ``client`` already has one or the line is full."""
        key = client or ""
        with self._changed:
            if any(ticket.client == key for ticket in self._line):
                raise Busy(
                    "an upload from you is already being checked or waiting; wait for its answer, then submit again"
                )
            if len(self._line) >= self.slots + self.max_waiting:
                raise Busy(
                    f"{len(self._line) - self.slots} uploads are already waiting "
                    "to be checked; try again in a few minutes"
                )
            ticket = Ticket(key)
            self._line.append(ticket)
            return ticket

    def ahead(self, ticket: Ticket) -> int:
        """How many uploads must finish before ``ticket``'s turn (0: it has its turn)."""
        with self._changed:
            return self._ahead(ticket)

    def wait(self, ticket: Ticket, report: Callable[[int], None] | None = None, poll_s: float = POLL_S) -> None:
        """Until ``ticket`` has its turn; ``report(ahead)`` first and each time its place changes (called
        without the line's lock held: it may draw on a page)."""
        shown = None
        while True:
            with self._changed:
                ahead = self._ahead(ticket)
                if ahead and ahead == shown:  # nothing new to show: sleep until someone leaves
                    self._changed.wait(poll_s)
                    ahead = self._ahead(ticket)
            if ahead == 0:
                return
            if ahead != shown and report is not None:
                report(ahead)
            shown = ahead

    def _ahead(self, ticket: Ticket) -> int:
        return max(0, self._line.index(ticket) - self.slots + 1)

    def leave(self, ticket: Ticket) -> None:
        """Give up the place or the turn (idempotent)."""
        with self._changed:
            if ticket in self._line:
                self._line.remove(ticket)
                self._changed.notify_all()

    @contextlib.contextmanager
    def turn(self, client: str | None, report: Callable[[int], None] | None = None) -> Iterator[Ticket]:
        """Enter, wait for the turn (``report`` as in :meth:`wait`), hold it for the block, leave on any exit."""
        ticket = self.enter(client)
        try:
            self.wait(ticket, report)
            yield ticket
        finally:
            self.leave(ticket)

    def __len__(self) -> int:
        with self._changed:
            return len(self._line)


# --- the deadline ----------------------------------------------------------------------------------

_context_lock = threading.Lock()
_context: Any = None


CHILD_NAME = "idbench-validation"


def _preparation_data(name: str) -> dict:
    """``multiprocessing.spawn.get_preparation_data``, without the main module for our children.

    A child started by the fork server (or spawn) first runs the parent's ``__main__`` again, as
    ``__mp_main__``; in the app that is the page script Streamlit runs as ``__main__``, which must not run
    outside a session. Our children run functions of importable modules only, so they skip it.
    """
    data = _original_preparation_data(name)
    if name == CHILD_NAME:
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


_original_preparation_data = multiprocessing.spawn.get_preparation_data


def _mp_context() -> Any:
    """The fork server (POSIX), else spawn; the fork server preloads ``PRELOAD`` once."""
    global _context
    with _context_lock:
        if _context is None:
            multiprocessing.spawn.get_preparation_data = _preparation_data
            if "forkserver" in multiprocessing.get_all_start_methods():
                _context = multiprocessing.get_context("forkserver")
                _context.set_forkserver_preload(list(PRELOAD))
            else:
                _context = multiprocessing.get_context("spawn")
        return _context


def deadline_s() -> float:
    """``$IDBENCH_SUBMIT_DEADLINE_S``, at most an hour."""
    return min(settings.submit_deadline_s(), 3600.0)


def run_with_deadline(
    function: Callable[..., Any],
    *args: Any,
    deadline: float,
    scratch: Path | None = None,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` in a child process, killed ``deadline`` seconds after it starts.

    Returns what it returns, raises what it raises (both are pickled back: module-level functions and
    picklable values only). :class:`DeadlineExceeded` when it runs past the deadline, and
    :class:`ValidationCrashed` when its process ends without an answer; in both cases the child is gone
    when this returns. The child runs with this process's environment as it is now, and its temporary
    files go under ``scratch`` (default: the system's), which the caller removes.
    """
    if IN_PROCESS:
        return function(*args, **kwargs)
    context = _mp_context()
    receiver, sender = context.Pipe(duplex=False)
    environment = settings.environment_copy()
    if scratch is not None:
        environment["TMPDIR"] = str(scratch)
    process = context.Process(
        target=_child, args=(sender, function, args, kwargs, environment), daemon=True, name=CHILD_NAME
    )
    process.start()
    sender.close()
    started = time.monotonic()
    try:
        if not receiver.poll(START_TIMEOUT_S):
            raise ValidationCrashed("its check could not be started; try again later")
        receiver.recv()  # "started": the deadline counts from here
        if not receiver.poll(deadline):
            raise DeadlineExceeded(
                f"checking it took longer than this server's limit of {deadline:g} s, "
                "so it was stopped; submit fewer or smaller images"
            )
        outcome, value, peak_kib = receiver.recv()
    except EOFError:
        process.join(5)
        raise ValidationCrashed(
            f"its check ended without an answer (exit code {process.exitcode}; "
            "out of memory?); submit fewer or smaller images"
        ) from None
    finally:
        if process.is_alive():
            process.kill()
        process.join(5)
        receiver.close()
    logger.info("validation child: %.1f s, peak RSS %.0f MB, %s", time.monotonic() - started, peak_kib / 1024, outcome)
    if outcome == "raised":
        raise value
    return value


def _child(sender: Any, function: Callable[..., Any], args: tuple, kwargs: dict, environment: dict) -> None:
    settings.adopt_environment(environment)
    tempfile.tempdir = environment.get("TMPDIR")  # the fork server may have cached another already
    sender.send(("started",))
    try:
        outcome, value = "returned", function(*args, **kwargs)
    except Exception as error:  # sent back and raised there
        outcome, value = "raised", error
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        sender.send((outcome, value, peak))
    except Exception as error:  # an unpicklable value or error: its words still go back
        sender.send(("raised", RuntimeError(f"{type(value).__name__}: {value} ({error})"), peak))
    sender.close()


# --- refused uploads and the rate limit ------------------------------------------------------------


def check_rate(store: Store, limit: RateLimit, submitter: str | None, client: str | None) -> None:
    """:class:`RateLimitError` when the submissions and refused uploads of this client (else submitter,
    :func:`~idbench.names.rate_identity`) in the window reach ``limit``: one count for both."""
    count, window = limit.max_submissions, limit.window_s
    since = time.time() - window
    identity = rate_identity(submitter, client)
    accepted = store.count_recent_submissions(submitter, since, client=client)
    refused = store.count_recent_refusals(identity, since)
    if accepted + refused >= count:
        if identity.startswith("client:"):
            who = "this client"
        else:
            who = f"submitter {submitter!r}" if submitter else "anonymous submitters"
        raise RateLimitError(
            f"{who} made {accepted} submission(s) and {refused} refused upload(s) in the last {window / 3600:g} h; "
            f"the limit is {count}, refused uploads included"
        )


def record_refusal(store: Store, submitter: str | None, client: str | None, reason: str) -> None:
    """Record that an upload of this client (else submitter) was refused, for :func:`check_rate`."""
    store.record_refusal(rate_identity(submitter, client), reason)
