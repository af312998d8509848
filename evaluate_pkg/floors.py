"""A copied image earns nothing: the per-sample values of the copy-floored twins of the ranked metrics.

The copy check (:mod:`idbench.evaluate_pkg.copies`) stores ``copy.flag`` per image: 1 when the
generation is, or contains, a reference. A run with more than 5 % of its images flagged is marked and
shown apart; below that share a submitter could still copy a few images and win on them. So every
ranked metric has a copy-floored twin (``MetricSpec.floored_twin``, made by
:func:`idbench.builders.spec.copy_floored`): its rows are the metric's own, except that every row of a
flagged image, whole-image and per-subject alike, and a NaN one too, holds the twin's ``floor``, the
metric's worst possible value. The metric keeps its rows under its own name (the paper's value).

Because the floor is the worst value of the metric's range, copying can never raise a twin's mean:
replacing a value by the range's bound, or adding the bound where the metric had no value, moves the
mean of the known values towards the bound or leaves it. The twins' rows are ordinary results, so the
aggregates and every interval (``functional/bootstrap.py``) resample the floored values.

Read from the results the runner has gathered, never inside the copy check itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from idbench.builders.spec import BenchmarkSpec
from idbench.evaluate_pkg.context import Result
from idbench.evaluate_pkg.copies import FLAG_METRIC


def flagged_images(results: Iterable[Result]) -> set[tuple[str, int]]:
    """The (prompt_id, seed) of every image whose ``copy.flag`` is set."""
    return {
        (r.prompt_id, int(r.seed))
        for r in results
        if r.metric == FLAG_METRIC and not r.subject and not math.isnan(r.value) and r.value > 0
    }


def floored_results(spec: BenchmarkSpec, results: Sequence[Result], twins: Iterable[str] | None = None) -> list[Result]:
    """The rows of the copy-floored twins (those of ``twins``, every one of the spec when None): each row
    of the twin's metric, its value the twin's floor where the image was flagged. A metric with no rows
    (not run) gives its twin none."""
    wanted = None if twins is None else set(twins)
    floors = {
        metric: (twin.name, float(twin.floor))
        for metric, twin in spec.floored_twins.items()
        if twin.floor is not None and (wanted is None or twin.name in wanted)
    }
    flagged = flagged_images(results)
    out = []
    for r in results:
        if r.metric in floors:
            name, floor = floors[r.metric]
            value = floor if (r.prompt_id, int(r.seed)) in flagged else r.value
            out.append(Result(r.prompt_id, r.seed, name, value, r.subject))
    return out


def floor_record(spec: BenchmarkSpec, results: Sequence[Result], floored: Sequence[Result]) -> dict[str, Any]:
    """``summary["copies"]["floored"]``: how many flagged images scored the floor, and in which columns
    (twin -> the metric it floors and the floor)."""
    flagged = flagged_images(results)
    scored = {(r.prompt_id, int(r.seed)) for r in floored} & flagged
    names = {r.metric for r in floored}
    return {
        "images": len(scored),
        "columns": {
            twin.name: {"of": metric, "floor": twin.floor}
            for metric, twin in spec.floored_twins.items()
            if twin.name in names
        },
    }
