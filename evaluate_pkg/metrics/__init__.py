"""Thin ``evaluate`` modules over :mod:`idbench.evaluate_pkg.functional`, one folder per metric.

Each folder ``<name>/`` holds ``<name>.py`` (``evaluate`` requires the script to carry the folder's
name) defining one ``evaluate.Metric`` whose ``_compute`` calls the functional twin and returns the
mean plus the per-sample values. The modules take precomputed features (embeddings, patch tokens,
masks), never images: the scorer encodes each image once in its feature store.

They load offline from their folder, wherever idbench is installed (the public names are in
:mod:`idbench.metrics`)::

    import evaluate
    import idbench.metrics
    clip_t = evaluate.load(str(idbench.metrics.path("clip_t")))   # or: idbench.metrics.load("clip_t")
    clip_t.add_batch(image_embeddings=img, text_embeddings=txt)
    clip_t.compute()

``evaluate`` copies the script into its modules cache and imports it from there, so the scripts
import this package absolutely (``idbench`` must be installed: ``pip install .``, a wheel, or ``-e``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from idbench.errors import IdbenchError

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

# The folders are package data next to this file (pyproject.toml declares metrics/*/*.py), so this
# holds in an editable checkout and in an installed wheel alike; evaluate.load needs a real folder.
_HERE = Path(__file__).resolve().parent


class UnknownMetricError(KeyError, IdbenchError):
    """A metric module asked for by a name that does not exist; the message lists the names that do.
    A KeyError (a lookup by name) and a user error (the CLI prints it in one line)."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a repr
        return str(self.args[0])


def metric_path(name: str) -> Path:
    """The folder of metric ``name``, to hand to ``evaluate.load``; unknown names list what exists."""
    if name not in METRIC_NAMES:
        raise UnknownMetricError(f"no metric module {name!r}; available: {', '.join(METRIC_NAMES)}")
    return _HERE / name


def load(name: str, **kwargs: Any) -> Any:
    """``evaluate.load`` of one of our metric modules by name (works offline); kwargs go to ``evaluate.load``."""
    import evaluate  # deferred: importing this package must not need evaluate

    return evaluate.load(str(metric_path(name)), **kwargs)
