"""Thin ``evaluate`` modules over :mod:`idbench.evaluate_pkg.functional`, one folder per metric.

Each folder ``<name>/`` holds ``<name>.py`` (``evaluate`` requires the script to carry the folder's
name) defining one ``evaluate.Metric`` whose ``_compute`` calls the functional twin and returns the
mean plus the per-sample values. The modules take precomputed features (embeddings, patch tokens,
masks), never images: the scorer encodes each image once in its feature store.

They load offline from their folder::

    import evaluate
    clip_t = evaluate.load(str(metric_path("clip_t")))   # or: load("clip_t")
    clip_t.add_batch(image_embeddings=img, text_embeddings=txt)
    clip_t.compute()

``evaluate`` copies the script into its modules cache and imports it from there, so the scripts
import this package absolutely (``evaluate_pkg`` must be installed, as ``pip install -e .`` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Every metric module shipped here (folder name == script name == ``evaluate.load`` name).
METRIC_NAMES: tuple[str, ...] = (
    "aesthetic",
    "bg_sim",
    "clip_i",
    "clip_t",
    "count_accuracy",
    "dino_sim",
    "id_sim",
    "instance_collapse_rate",
    "retrieval",
    "subject_collapse_rate",
)

_HERE = Path(__file__).resolve().parent


def metric_path(name: str) -> Path:
    """The folder of metric ``name``, to hand to ``evaluate.load``; unknown names list what exists."""
    if name not in METRIC_NAMES:
        raise KeyError(f"no metric module {name!r}; available: {', '.join(METRIC_NAMES)}")
    return _HERE / name


def load(name: str, **kwargs: Any) -> Any:
    """``evaluate.load`` of one of our metric modules by name (works offline); kwargs go to ``evaluate.load``."""
    import evaluate  # deferred: importing this package must not need evaluate

    return evaluate.load(str(metric_path(name)), **kwargs)
