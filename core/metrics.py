"""The metric math as ``evaluate`` modules, by name, wherever idbench is installed.

``evaluate.load`` takes a folder; :func:`path` gives the installed folder of one of ours, so this works
from any directory (a wheel install has no repository to point into)::

    import evaluate
    import idbench.metrics

    clip_t = evaluate.load(str(idbench.metrics.path("clip_t")))   # or: idbench.metrics.load("clip_t")
    clip_t.compute(image_embeddings=[[1.0, 0.0]], text_embeddings=[[1.0, 1.0]])   # clip_t ~ 0.7071

``NAMES`` lists the modules; an unknown name raises :class:`UnknownMetricError` (a ``KeyError``)
whose message lists them. The modules take precomputed features, never images (see
:mod:`idbench.evaluate_pkg.metrics`).
"""

from __future__ import annotations

from idbench.evaluate_pkg.metrics import METRIC_NAMES as NAMES
from idbench.evaluate_pkg.metrics import UnknownMetricError, load
from idbench.evaluate_pkg.metrics import metric_path as path

__all__ = ["NAMES", "UnknownMetricError", "load", "path"]
