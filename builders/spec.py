"""The shape of a benchmark description.

Every benchmark is described once, in ``builders/benchmarks/<name>.py``, by a :class:`BenchmarkSpec`.
Builders, the scorer and the leaderboard all read that object instead of repeating what it says:
which configs exist and their ``datasets.Features``, which columns of the source manifest the builder
accepts, which prompt columns results are broken down by, which metrics make up the suite and how each
is displayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import datasets


@dataclass(frozen=True)
class ConfigSpec:
    """One Hugging Face config of a benchmark dataset (one table, one ``test`` split)."""

    name: str
    features: datasets.Features
    description: str
    primary_key: tuple[str, ...]
    # Optional configs are built only when the source folder provides their data.
    optional: bool = False

    @property
    def image_columns(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.features.items() if isinstance(v, datasets.Image))


@dataclass(frozen=True)
class SourceColumn:
    """One column of a source manifest (a CSV file; one row per reference image)."""

    name: str
    description: str
    required: bool = True  # an empty value is an error
    choices: tuple[str, ...] | None = None  # allowed values, when the column is categorical
    is_list: bool = False  # a ';'-separated list in the CSV
    pattern: str | None = None  # a regular expression the value must match in full


@dataclass(frozen=True)
class MetricSpec:
    """A metric of the suite: what later issues compute and how the leaderboard shows it.

    Raw values are always stored (a cosine stays a cosine); ``display`` says how to present them.
    """

    name: str
    description: str
    higher_is_better: bool = True
    display: str = "raw"  # "raw" | "x100" | "percent"
    judged: bool = False  # needs a vision-language judge rather than an encoder
    # What a submission must hold for it: "generation" (the images) or "retrieval" (a ranking of
    # references, an auxiliary task). A leaderboard row is complete when every generation metric ran.
    task: str = "generation"

    def __post_init__(self) -> None:
        if self.display not in ("raw", "x100", "percent"):
            raise ValueError(f"metric {self.name}: display {self.display!r} is not raw, x100 or percent")
        if self.task not in ("generation", "retrieval"):
            raise ValueError(f"metric {self.name}: task {self.task!r} is not generation or retrieval")


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str  # the dataset / CLI name, e.g. "identity-collapse"
    title: str
    summary: str
    paper: str  # title of the paper that defines it
    citation: str  # BibTeX
    configs: dict[str, ConfigSpec]
    source_columns: tuple[SourceColumn, ...]
    breakdowns: tuple[tuple[str, ...], ...]  # prompt columns (or column tuples) results group by
    metric_suite: tuple[MetricSpec, ...]
    seeds: tuple[int, ...]  # seeds per prompt a submission must contain
    # metrics that rank models by default, best first; the first one a run computed is used
    ranking: tuple[str, ...] = ()
    task_categories: tuple[str, ...] = ("text-to-image",)
    tags: tuple[str, ...] = field(default=("identity-preservation", "subject-driven-generation", "benchmark"))
    limitations: tuple[str, ...] = ()

    def config(self, name: str) -> ConfigSpec:
        try:
            return self.configs[name]
        except KeyError:
            raise KeyError(f"{self.name} has no config {name!r}; it has: {', '.join(self.configs)}") from None

    def source_column(self, name: str) -> SourceColumn:
        for column in self.source_columns:
            if column.name == name:
                return column
        raise KeyError(name)
