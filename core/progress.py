"""What a long command says while it works: tqdm bars on a terminal, bounded whole lines elsewhere.

A scoring run is a sequence of *stages* (``"dino features"``, ``"detections"``, ``"copy check"``), each
with a known number of items, and of *steps* around them (building a benchmark, loading models, one
leaderboard job). :func:`progress_for` picks the reporter:

- stderr is a terminal: :class:`Bars`, one tqdm bar per stage (cleared when the stage ends), step
  lines written above the bars;
- anything else (CI, ``nohup``, a pipe): :class:`LogLines`, whole lines only: one when a stage starts,
  one when it ends (counts, seconds, rate), and inside a stage at most one line per ``interval`` seconds
  plus one per 10 % of the items (never two within ``min_gap`` seconds), so a log's size is bounded by
  the run's duration, not by its number of images;
- ``enabled=False``: :class:`Quiet`, nothing.

A reporter is the scorer's progress factory (``Context.progress``): ``reporter(stage, total)`` returns
a tick, called with the number of items just done; ``tick.close()`` ends the stage (items read from
the feature cache never tick, so a stage can end below its total). Every line is written in one call
and ends with a newline, so a Ctrl-C never leaves half a line before the interrupted command's line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

# Inside a stage: a line at least every INTERVAL seconds, and one per tenth of the items, but never two
# within MIN_GAP seconds (a fast stage prints its start and end lines only).
INTERVAL = 10.0
MIN_GAP = 5.0


def seconds(value: float) -> str:
    """A duration as a log line shows it: ``0.4 s``, ``12 s``, ``838 s``."""
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def _rate(count: int, elapsed: float, unit: str) -> str:
    return f"{count / elapsed:.1f} {unit}/s" if elapsed > 0 and count else f"- {unit}/s"


def on_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal a bar can be drawn on: a pseudo-terminal of no width (``script``
    run from a pipe, some CI runners) draws tqdm bars as nothing at all, so it gets log lines."""
    try:
        if stream is None or not stream.isatty():
            return False
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, ValueError, OSError):  # a closed or stand-in stream
        return False


class Step:
    """What a step says when it ends: ``note`` (e.g. ``"40 prompts"``) is added to its done line."""

    def __init__(self) -> None:
        self.note = ""


class Progress:
    """The common part: lines with a prefix, steps, the open stage. Subclasses draw the stages."""

    def __init__(
        self, stream: TextIO | Callable[[], TextIO] | None = None, clock: Callable[[], float] = time.monotonic
    ):
        # A callable (the default reads sys.stderr at each write) follows a stream replaced later (pytest's capsys).
        self._stream = stream if stream is not None else (lambda: sys.stderr)
        self.clock = clock
        self.prefix = ""
        self._open: list = []

    @property
    def stream(self) -> TextIO:
        return self._stream() if callable(self._stream) else self._stream

    def line(self, text: str) -> None:
        """One whole line, written in one call."""
        self.stream.write(f"{self.prefix}{text}\n")
        with contextlib.suppress(AttributeError, ValueError, OSError):
            self.stream.flush()

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[Step]:
        """``what ...`` now, ``what: done in 3.2 s (note)`` when the block ends; nothing more on an error
        (the command's own error or interrupted line follows)."""
        self.line(f"{what} ...")
        started, step = self.clock(), Step()
        yield step
        note = f" ({step.note})" if step.note else ""
        self.line(f"{what}: done in {seconds(self.clock() - started)}{note}")

    @contextlib.contextmanager
    def scope(self, prefix: str) -> Iterator[Progress]:
        """Lines written inside the block start with ``prefix`` (e.g. ``"job 3: "``)."""
        before, self.prefix = self.prefix, self.prefix + prefix
        try:
            yield self
        finally:
            self.prefix = before

    def __call__(self, stage: str, total: int, unit: str = "img", shared: bool = False) -> Callable[[int], None]:
        """The tick of a new stage of ``total`` items (the Context's factory). ``shared``: other
        processes compute part of the items, so those this process does not tick are not all cached."""
        self.close()  # stages run one after the other: one left open (ended below its total) ends here
        if total <= 0:
            return _nothing
        stage_tick = self._start(stage, total, unit, shared)
        self._open.append(stage_tick)
        return stage_tick

    def _start(self, stage: str, total: int, unit: str, shared: bool):
        return _nothing

    def close(self, quiet: bool = False) -> None:
        """End the open stage (``quiet``: without its done line, as after an error or Ctrl-C)."""
        while self._open:
            self._open.pop().close(quiet=quiet)


def _nothing(n: int = 1) -> None:
    return None


_nothing.close = lambda quiet=False: None  # type: ignore[attr-defined]


class Quiet(Progress):
    """Says nothing (``progress=False``: tests, a caller with its own reporting)."""

    def line(self, text: str) -> None:
        return None


class LogLines(Progress):
    """Stages as whole log lines, rate-limited (see the module's docstring)."""

    def __init__(self, stream=None, clock=time.monotonic, interval: float = INTERVAL, min_gap: float = MIN_GAP):
        super().__init__(stream, clock)
        self.interval, self.min_gap = interval, min_gap

    def _start(self, stage: str, total: int, unit: str, shared: bool):
        return _LogStage(self, stage, total, unit, shared)


class _LogStage:
    def __init__(self, owner: LogLines, stage: str, total: int, unit: str, shared: bool):
        self.owner, self.stage, self.total, self.unit, self.shared = owner, stage, total, unit, shared
        self.done, self.closed = 0, False
        self.started = self.last_line = owner.clock()
        self.last_tenth = 0
        owner.line(f"{stage}: {total} {unit} ...")

    def __call__(self, n: int = 1) -> None:
        if self.closed:
            return
        self.done = min(self.total, self.done + n)
        if self.done >= self.total:
            self.owner._open = [s for s in self.owner._open if s is not self]
            self.close()
            return
        now = self.owner.clock()
        tenth = self.done * 10 // self.total
        since = now - self.last_line
        if since >= self.owner.interval or (tenth > self.last_tenth and since >= self.owner.min_gap):
            elapsed = now - self.started
            left = (self.total - self.done) * elapsed / self.done if self.done else None
            eta = f", about {seconds(left)} left" if left is not None else ""
            self.owner.line(
                f"{self.stage}: {self.done}/{self.total} {self.unit} ({100 * self.done // self.total} %), "
                f"{seconds(elapsed)}, {_rate(self.done, elapsed, self.unit)}{eta}"
            )
            self.last_line, self.last_tenth = now, tenth

    def close(self, quiet: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        if quiet:
            return
        elapsed = self.owner.clock() - self.started
        counts = f"{self.total} {self.unit}"
        if self.done < self.total:
            where = "cached or computed by other processes" if self.shared else "read from the feature cache"
            counts = f"{self.done} of {self.total} {self.unit} computed, {self.total - self.done} {where}"
        rate = f" ({_rate(self.done, elapsed, self.unit)})" if self.done else ""
        self.owner.line(f"{self.stage}: done in {seconds(elapsed)}, {counts}{rate}")


class Bars(Progress):
    """One tqdm bar per stage on a terminal, cleared when the stage ends; lines go above the bars."""

    def line(self, text: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(f"{self.prefix}{text}", file=self.stream)

    def _start(self, stage: str, total: int, unit: str, shared: bool):
        from tqdm.auto import tqdm

        return _BarStage(tqdm(total=total, desc=f"{self.prefix}{stage}", unit=unit, leave=False, file=self.stream))


class _BarStage:
    def __init__(self, bar) -> None:
        self.bar = bar

    def __call__(self, n: int = 1) -> None:
        self.bar.update(n)  # a closed bar ignores updates
        if self.bar.n >= self.bar.total:
            self.bar.close()

    def close(self, quiet: bool = False) -> None:
        self.bar.close()


def progress_for(enabled: bool | Progress = True, stream: TextIO | None = None) -> Progress:
    """The reporter for this run: ``enabled`` may be one already made (a worker hands its own to the scorer)."""
    if isinstance(enabled, Progress):
        return enabled
    if not enabled:
        return Quiet(stream)
    if on_terminal(stream if stream is not None else sys.stderr):
        return Bars(stream)
    return LogLines(stream)


@contextlib.contextmanager
def library_bars_off() -> Iterator[None]:
    """The datasets and transformers libraries' own progress bars (loading weights, writing parquet,
    generating a split) off for the block and as they were after it: a scoring run reports its stages
    itself, and a caller's notebook keeps its settings."""
    import datasets
    import transformers

    bars = transformers.utils.logging
    datasets_off, transformers_on = datasets.are_progress_bars_disabled(), bars.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    bars.disable_progress_bar()
    try:
        yield
    finally:
        if not datasets_off:
            datasets.enable_progress_bars()
        if transformers_on:
            bars.enable_progress_bar()
