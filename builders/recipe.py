"""What build recipes share: a validated source -> the benchmark's tables. Each benchmark has its own
recipe, in its folder (``idbench.benchmarks.<name>.recipe``).

A recipe is a function ``(source, seed, n_prompts, max_distance, curator) -> (Recipe, dropped)`` that
a benchmark's spec names in ``BenchmarkSpec.recipe`` (``"idbench.benchmarks.charis.recipe:recipe"``).
``dropped`` lists the pHash duplicates it removed. ``curator`` is None for a plain build, or an object
with the :class:`Curator` protocol: the shared model stages of ``--curate`` (:mod:`idbench.curation`,
a higher layer, handed in by whoever composes the build) and the judge and options that a benchmark's
own curation stages (in its folder) use.
Validation, dedup and writing are shared (:mod:`idbench.builders.build`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import datasets

from idbench.builders.dedup import find_duplicates
from idbench.builders.sources import SourceImage


@dataclass
class Recipe:
    """What a benchmark's recipe returns: the tables, the report's breakdown counts, extra build info."""

    tables: dict[str, list[dict]]
    cells: dict[str, dict[str, int]] = field(default_factory=dict)
    # Recorded at the top level of build_info.json, e.g. the version of the question generator.
    info: dict[str, object] = field(default_factory=dict)


class CurationLog(Protocol):
    """What the curation stages did: a JSON-ready summary per stage, and its audit files."""

    stages: dict[str, Any]

    def write(self, folder: Path) -> None:
        """Write the audit files into ``folder`` (the build's staging folder)."""


class Curator(Protocol):
    """The model stages a recipe may call (``idbench.curation.pipeline.Curation`` implements it)."""

    log: CurationLog

    @property
    def fills_metadata(self) -> bool:
        """Whether a judge will fill metadata a manifest left empty (so empty values are allowed)."""

    def curate_images(
        self, images: Sequence[Any], id_of: Callable[[Any], str], text_of: Callable[[Any], str]
    ) -> list[Any]: ...

    @property
    def judge(self) -> Any:
        """The multimodal judge a benchmark's own stages ask (None: those stages are skipped and logged)."""

    @property
    def options(self) -> Any:
        """The build's curation options (``idbench.curation.pipeline.CurateOptions``)."""


def image_record(image: SourceImage) -> dict:
    # The original file bytes are embedded untouched, so decoded pixels equal the source's exactly.
    return {"bytes": image.data, "path": image.values["file"]}


def reference_row(image: SourceImage, features: datasets.Features) -> dict:
    """One row of a reference table: the manifest's values for the config's columns, plus the image."""
    row = {column: image.values[column] for column in features if column != "image"}
    row["image"] = image_record(image)
    row["attribution"] = row["attribution"] or ""  # optional in manifests, always a string in datasets
    return row


def dedupe(images: list[SourceImage], id_column: str, max_distance: int) -> tuple[list[SourceImage], list[dict]]:
    duplicates = find_duplicates([(i.values[id_column], i.data) for i in images], max_distance)
    dropped_ids = {d.id for d in duplicates}
    kept = [i for i in images if i.values[id_column] not in dropped_ids]
    return kept, [{"id": d.id, "duplicate_of": d.duplicate_of, "distance": d.distance} for d in duplicates]


def name_of(image: SourceImage) -> str:
    return image.values.get("name") or ""
