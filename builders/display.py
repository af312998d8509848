"""Display conventions: how a metric's raw value is presented (report.md, leaderboard tables and CSV
headers, the terminal summary, the dataset card). Nothing here touches stored values: results.parquet
and aggregates.json keep the raw ones.

Each benchmark's metric names its convention (``MetricSpec.display``) and, where it maps to a paper's
table, the source (``MetricSpec.display_source``); docs/display-conventions.md has the evidence (paper,
table, figures, arithmetic). Where the paper's convention cannot be identified the label says so
rather than claiming it.

>>> show(0.24, "clipscore"), show(-0.1, "clipscore"), show(4.5, "x10"), show(0.5, "percent")
(60.0, 0.0, 45.0, 50.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Display:
    name: str
    formula: str  # what is shown, in words a reader can recompute
    suffix: str  # appended to a column header, so a downloaded CSV says its unit
    decimals: int
    apply: Callable[[float], float]


DISPLAYS: dict[str, Display] = {
    d.name: d
    for d in (
        Display("raw", "raw value", "", 4, lambda v: v),
        Display("x100", "raw x 100", " (x100)", 2, lambda v: 100.0 * v),
        Display("percent", "a share in [0, 1] shown in percent", " (%)", 2, lambda v: 100.0 * v),
        Display("x10", "raw x 10", " (x10)", 2, lambda v: 10.0 * v),
        # Hessel et al. (2021)'s CLIPScore, w = 2.5, clamped at 0, times 100. Applied to a mean (the
        # aggregates hold means), it equals the mean of per-sample CLIPScores whenever no cosine is
        # negative, which for a prompt and its generation CLIP practically never gives.
        Display(
            "clipscore", "CLIPScore scale, 2.5 x max(cos, 0) x 100", " (CLIPScore)", 2, lambda v: 250.0 * max(v, 0.0)
        ),
    )
}

NOT_STATED = "our scale; the paper's convention is not stated"


def check(display: str) -> None:
    if display not in DISPLAYS:
        raise ValueError(f"display {display!r} is not one of {', '.join(DISPLAYS)}")


def show(value: float | None, display: str) -> float:
    """The displayed number (unrounded); NaN for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return DISPLAYS[display].apply(float(value))


def show_text(value: float | None, display: str) -> str:
    """The displayed number as text, rounded as the convention says; "n/a" when missing."""
    shown = show(value, display)
    return "n/a" if math.isnan(shown) else f"{shown:.{DISPLAYS[display].decimals}f}"


def label(display: str, source: str) -> str:
    """What a reader is told about a displayed metric: the formula and where it comes from.

    A raw value needs no convention; a scaled one without a source says the scale is ours.
    """
    formula = DISPLAYS[display].formula
    if source:
        return f"{formula} ({source})"
    return formula if display == "raw" else f"{formula} ({NOT_STATED})"
