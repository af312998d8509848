"""One scoring suite per benchmark: which metrics it computes, from which models, over which inputs.

Each suite module has ``METRICS`` (metric name -> the model roles it needs, in the order the
benchmark's ``metric_suite`` lists them), ``NOT_RUN`` (metric -> why this engine does not compute it
yet: a judged metric, or a task that scores something other than generations) and
``score(ctx, metrics) -> list[Result]``, raw values only. Everything else (aggregation, display
conventions, reports) is generic.
"""

from __future__ import annotations

from types import ModuleType


def suite_for(benchmark: str) -> ModuleType:
    from idbench.evaluate_pkg.suites import charis, cogcanvas, collapse

    return {"charis": charis, "cogcanvas": cogcanvas, "identity-collapse": collapse}[benchmark]
