"""The README's test counts are the suite's own: compared with what this session collected when it
collected the whole suite (the README's test command) or exactly the fast tier; any other selection says
nothing about them, and the test skips. Times are measured, not tested (they depend on the machine):
the README gives each once, with where it was measured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

README = Path(__file__).resolve().parents[1] / "README.md"
FAST_TIER = "not slow and not browser and not e2e"
TOLERANCE = 0.03  # the figures are rounded to a measurement; past 3 % of drift the README is wrong


def _figures() -> tuple[int, int]:
    found = re.search(r"fast tier: ([\d,]+) of ([\d,]+) tests", README.read_text(encoding="utf-8"))
    assert found, "README.md no longer says 'fast tier: N of M tests'"
    fast, total = (int(group.replace(",", "")) for group in found.groups())
    return fast, total


def test_the_readmes_test_counts_are_the_suites(request):
    config = request.config
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
    markexpr = config.option.markexpr
    if not whole or markexpr not in ("", FAST_TIER):
        pytest.skip("counts are compared on the whole suite or the fast tier only")
    fast, total = _figures()
    expected, what = (total, "the suite") if markexpr == "" else (fast, "the fast tier")
    collected = len(request.session.items)
    assert abs(collected - expected) <= TOLERANCE * expected, (
        f"README.md says {expected:,} tests for {what}; this run collected {collected:,}: update the README's figure"
    )
