"""What long commands say while they work (idbench.progress): a fake clock and a StringIO, no sleeps."""

from __future__ import annotations

import io
import re

import pytest

from idbench.progress import INTERVAL, Bars, LogLines, Quiet, progress_for

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return 99


@pytest.fixture
def terminal_width(monkeypatch):
    """The width the fake terminal reports (os.get_terminal_size of its descriptor)."""
    import os

    width = [80]
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((width[0], 24)))
    return width


def _lines(stream: io.StringIO) -> list[str]:
    text = stream.getvalue()
    assert text == "" or text.endswith("\n")  # whole lines only, never half of one
    return text.splitlines()


def test_a_stage_says_when_it_starts_and_ends_with_its_count_seconds_and_rate():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    tick = reporter("dinov2 features", 40)
    for _ in range(4):
        clock.now += 0.5
        tick(10)
    assert _lines(stream) == ["dinov2 features: 40 img ...", "dinov2 features: done in 2.0 s, 40 img (20.0 img/s)"]
    tick(5)  # a tick after the end says nothing more
    reporter.close()
    assert len(_lines(stream)) == 2


def test_a_stage_ended_below_its_total_says_how_many_came_from_the_cache():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    tick = reporter("detections", 75)
    clock.now += 3.0
    tick(15)
    tick.close()  # the other 60 were read from the feature cache, and never ticked
    assert (
        _lines(stream)[-1]
        == "detections: done in 3.0 s, 15 of 75 img computed, 60 read from the feature cache (5.0 img/s)"
    )
    shared = reporter("masks", 10, shared=True)
    shared.close()  # under accelerate, another process may have computed the rest
    assert _lines(stream)[-1] == "masks: done in 0.0 s, 0 of 10 img computed, 10 cached or computed by other processes"


def test_ten_thousand_ticks_in_a_simulated_minute_make_a_bounded_number_of_lines():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    tick = reporter("copy check", 10_000)
    for _ in range(10_000):
        clock.now += 60 / 10_000
        tick(1)
    lines = _lines(stream)
    inner = lines[1:-1]
    # at most one line per INTERVAL seconds plus one per tenth of the items (start and end besides)
    assert 3 <= len(inner) <= 60 / INTERVAL + 9, lines
    assert lines[0] == "copy check: 10000 img ..." and lines[-1].startswith("copy check: done in 60 s, 10000 img")
    first = re.fullmatch(
        r"copy check: (\d+)/10000 img \((\d+) %\), ([\d.]+) s, ([\d.]+) img/s, about ([\d.]+) s left", inner[0]
    )
    assert first is not None, inner[0]
    done, percent, elapsed, rate, left = (float(g) for g in first.groups())
    assert percent == done // 100 and rate == pytest.approx(done / elapsed, rel=0.05)
    assert elapsed + left == pytest.approx(60, rel=0.05)  # steady progress: the estimate is the whole minute


def test_a_slow_stage_says_it_is_alive_every_interval_even_without_a_new_tenth():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    tick = reporter("dinov2 features", 1000)
    for _ in range(5):  # 5 images in 50 s: under a tenth, still a line every ten seconds
        clock.now += 10.0
        tick(1)
    assert len(_lines(stream)) == 1 + 5


def test_a_fast_stage_prints_its_start_and_end_lines_only():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    tick = reporter("clip features", 100)
    for _ in range(100):  # every tenth passes within a second
        clock.now += 0.01
        tick(1)
    assert len(_lines(stream)) == 2


def test_steps_and_the_next_stage_close_what_was_open_and_an_error_adds_no_line():
    clock, stream = FakeClock(), io.StringIO()
    reporter = LogLines(stream, clock=clock)
    with reporter.step("loading models (clip)") as step:
        clock.now += 2.5
        step.note = "1 model"
    with reporter.scope("job 3: "):
        reporter("clip features", 10)(4)  # ends below its total: closed when the next stage starts
        clock.now += 1.0
        reporter("detections", 10)
    assert _lines(stream) == [
        "loading models (clip) ...",
        "loading models (clip): done in 2.5 s (1 model)",
        "job 3: clip features: 10 img ...",
        "job 3: clip features: done in 1.0 s, 4 of 10 img computed, 6 read from the feature cache (4.0 img/s)",
        "job 3: detections: 10 img ...",
    ]
    with pytest.raises(KeyboardInterrupt), reporter.step("scoring"):
        reporter.close(quiet=True)  # as score_submission does when interrupted: Ctrl-C's line stands alone
        raise KeyboardInterrupt
    assert _lines(stream)[-1] == "scoring ..."
    assert reporter("empty stage", 0)(3) is None and _lines(stream)[-1] == "scoring ..."  # nothing to do: no line


def test_the_reporter_is_chosen_by_the_stream(terminal_width):
    terminal = FakeTerminal()
    bars = progress_for(True, stream=terminal)
    assert isinstance(bars, Bars)
    assert isinstance(progress_for(True, stream=io.StringIO()), LogLines)
    assert isinstance(progress_for(False, stream=terminal), Quiet)
    assert progress_for(bars) is bars  # a worker hands its own reporter to the scorer
    terminal_width[0] = 0  # a pseudo-terminal of no width shows no bar at all: lines instead
    assert isinstance(progress_for(True, stream=terminal), LogLines)


def test_on_a_terminal_a_stage_is_a_tqdm_bar_and_lines_go_above_it(terminal_width):
    from tqdm import tqdm

    terminal = FakeTerminal()
    reporter = progress_for(True, stream=terminal)
    tick = reporter("dinov2 features", 4)
    bar = tick.bar
    assert (
        isinstance(bar, tqdm) and bar.total == 4 and bar.desc.startswith("dinov2 features") and bar in tqdm._instances
    )
    tick(2)
    assert bar.n == 2
    reporter.line("job 1: FINISHED in 2.0 s")
    tick(2)  # the stage's last items close the bar (cleared: leave=False)
    assert bar not in tqdm._instances
    assert "job 1: FINISHED in 2.0 s\n" in terminal.getvalue()


def test_quiet_says_nothing(capsys):
    reporter = Quiet()
    with reporter.step("anything"):
        reporter("stage", 3)(3)
    reporter.line("a line")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.slow
def test_a_scoring_run_turns_the_libraries_bars_off_and_back(monkeypatch):
    import datasets
    import pytest
    import transformers

    from idbench.evaluate_pkg import runner

    bars = transformers.utils.logging
    seen = []

    def load(_):  # the scorer's first step: what the libraries' bars are set to while it runs
        seen.append((datasets.are_progress_bars_disabled(), bars.is_progress_bar_enabled()))
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "load_benchmark_data", load)
    before = (datasets.are_progress_bars_disabled(), bars.is_progress_bar_enabled())
    datasets.enable_progress_bars()
    bars.enable_progress_bar()
    with pytest.raises(RuntimeError):
        runner.score_submission("nowhere", "nowhere-data", None)
    assert seen == [(True, False)]  # off while scoring
    assert not datasets.are_progress_bars_disabled() and bars.is_progress_bar_enabled()  # as the caller had them
    datasets.disable_progress_bars()
    with pytest.raises(RuntimeError):
        runner.score_submission("nowhere", "nowhere-data", None)
    assert datasets.are_progress_bars_disabled()  # a caller's "off" stays off
    # Back as this test found them (other tests in this process may rely on them).
    datasets.disable_progress_bars() if before[0] else datasets.enable_progress_bars()
    bars.enable_progress_bar() if before[1] else bars.disable_progress_bar()
