"""The dataset card: ``README.md`` of a built benchmark folder.

The card is the single description of a published dataset. Its YAML front matter is what the Hub and
``datasets.load_dataset`` read (configs and their ``data_files``, license, task and size categories),
so it is built as a Python dict and written with ``yaml.safe_dump``: it is valid YAML whatever a
description contains. The Markdown body comes from one Jinja2 template, ``cards/card.md.j2``, shared
by every benchmark; the template the spec names (``BenchmarkSpec.card_template``, e.g.
``benchmarks/charis/charis.md.j2``) extends it with the prose that only that benchmark has (what the paper built,
what the fields mean, how scores are computed).

Everything here is a pure function of the :class:`BenchmarkSpec` and the builder's ``build_info``:
no dates, no paths of the machine that built it, so building twice gives the same bytes.

Example::

    from idbench.builders.registry import get_benchmark
    text = render_card(get_benchmark("identity-collapse"), build_info)
    (out / "README.md").write_text(text, encoding="utf-8")
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import datasets
import jinja2
import yaml

from idbench import cards
from idbench.builders.spec import BenchmarkSpec, ConfigSpec, MetricSpec
from idbench.builders.write import SPLIT

# The templates ship as package data of `idbench.cards`, so they are found in a wheel install too.
CARDS_DIR = Path(str(resources.files(cards)))
BASE_TEMPLATE = "card.md.j2"
DEFAULT_CONFIG = "prompts"  # what `load_dataset(repo)` opens when no config is named
LICENSE_FILE = "LICENSE"  # the per-image license table, next to the card; the front matter's license_link
LANGUAGES = ("en",)  # prompts, questions and metadata are English
SHARD_GLOB = "{config}/" + SPLIT + "-*.parquet"

# The Hub's size buckets, by exclusive upper bound. A count equal to a bound belongs to the next
# bucket (1,000 rows is "1K<n<10K"), as in the Hub's own dataset-tagging convention.
_SIZE_BUCKETS: tuple[tuple[int, str], ...] = (
    (10**3, "n<1K"),
    (10**4, "1K<n<10K"),
    (10**5, "10K<n<100K"),
    (10**6, "100K<n<1M"),
    (10**7, "1M<n<10M"),
    (10**8, "10M<n<100M"),
    (10**9, "100M<n<1B"),
    (10**10, "1B<n<10B"),
    (10**11, "10B<n<100B"),
    (10**12, "100B<n<1T"),
)


def size_category(n_rows: int) -> str:
    """The Hub's ``size_categories`` bucket for a dataset of ``n_rows`` rows.

    >>> size_category(999), size_category(1000), size_category(10_000)
    ('n<1K', '1K<n<10K', '10K<n<100K')
    """
    if n_rows < 0:
        raise ValueError(f"a row count cannot be negative: {n_rows}")
    for bound, label in _SIZE_BUCKETS:
        if n_rows < bound:
            return label
    return "n>1T"


def describe_feature(feature: Any) -> str:
    """A compact, readable type for a ``datasets`` feature, for the card's field tables.

    Lists read ``list<T>``, structs ``struct{a, b: int32}`` (a field without a type is a string, which
    keeps the common edge lists short: ``list<struct{source, relation, target}>``).
    """
    if isinstance(feature, datasets.Value):
        return str(feature.dtype)
    if isinstance(feature, datasets.ClassLabel):
        return f"class_label{{{', '.join(feature.names)}}}" if feature.names else "class_label"
    # `datasets.Sequence(x)` builds a `List`; `List` is a subclass of `Sequence`, so one test covers both.
    if isinstance(feature, datasets.Sequence):
        inner = f"list<{describe_feature(feature.feature)}>"
        length = getattr(feature, "length", -1)
        return f"{inner}[{length}]" if length is not None and length >= 0 else inner
    if isinstance(feature, datasets.LargeList):
        return f"large_list<{describe_feature(feature.feature)}>"
    if isinstance(feature, list) and len(feature) == 1:  # the legacy `[Value(...)]` spelling of a list
        return f"list<{describe_feature(feature[0])}>"
    if isinstance(feature, Mapping):
        return "struct{" + ", ".join(_struct_field(name, sub) for name, sub in feature.items()) + "}"
    array_dims = {datasets.Array2D: 2, datasets.Array3D: 3, datasets.Array4D: 4, datasets.Array5D: 5}
    for array_type, dims in array_dims.items():
        if isinstance(feature, array_type):
            shape = "x".join("?" if d is None else str(d) for d in feature.shape)
            return f"array{dims}d<{feature.dtype}>[{shape}]"
    # Image, Audio, Video, Pdf, Json, ...: the feature's own name says what a reader needs.
    return type(feature).__name__.lower()


def _struct_field(name: str, feature: Any) -> str:
    if isinstance(feature, datasets.Value) and feature.dtype == "string":
        return name
    return f"{name}: {describe_feature(feature)}"


# ----------------------------------------------------------------------------------------------
# What the template receives. Plain frozen records: the template only reads, never computes.


@dataclass(frozen=True)
class FieldView:
    name: str
    type: str


@dataclass(frozen=True)
class ConfigView:
    name: str
    description: str
    rows: int
    shards: tuple[str, ...]
    data_files: str  # the glob the front matter declares
    fields: tuple[FieldView, ...]
    image_columns: tuple[str, ...]
    primary_key: tuple[str, ...]
    is_default: bool
    has_license_columns: bool


@dataclass(frozen=True)
class TableView:
    """A counts table: a title, a header row and body rows, all strings."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class MetricView:
    name: str
    description: str
    higher_is_better: bool
    display: str
    display_note: str
    judged: bool


def render_card(spec: BenchmarkSpec, build_info: dict) -> str:
    """The ``README.md`` of a built dataset: YAML front matter, then the Markdown body.

    ``build_info`` is the builder's provenance record (the same dict it writes to
    ``build_info.json``). Only the configs it lists under ``"configs"`` are described and declared,
    so an optional config that was not built does not appear. Raises ``ValueError`` when
    ``build_info`` names another benchmark, lists no config, or lists a config the spec lacks.
    """
    configs = _config_views(spec, build_info)
    metrics = [_metric_view(m) for m in spec.metric_suite]
    context = {
        "front_matter": front_matter_yaml(spec, build_info),
        "spec": spec,
        "configs": configs,
        "config_by_name": {c.name: c for c in configs},
        "default_config": next((c for c in configs if c.is_default), None),
        "image_configs": [c for c in configs if c.image_columns],
        "license_configs": [c for c in configs if c.has_license_columns],
        "cells": _cell_tables(build_info.get("cells") or {}),
        "metrics": metrics,
        "sample_build": bool(build_info.get("sample_build", False)),
        "seed": build_info.get("seed"),
        "idbench_version": build_info.get("idbench_version"),
        "questions_version": build_info.get("questions_version"),
        "retrieval_version": build_info.get("retrieval_version"),
        "source": build_info.get("source") or {},
        "options": sorted((build_info.get("options") or {}).items()),
        # None when the build did not say (nothing is claimed), [] when it dropped none
        "dropped": None if build_info.get("dropped_duplicates") is None else list(build_info["dropped_duplicates"]),
        "n_prompts": next((c.rows for c in configs if c.name == DEFAULT_CONFIG), None),
        "seeds": list(spec.seeds),
        "license_file": LICENSE_FILE,
        # Headline metrics the Hub's Eval Results get as 1 - value (it ranks every task higher-first).
        "flipped_metrics": [m.name for m in spec.metric_suite if not m.higher_is_better and m.name in spec.ranking],
    }
    return _template_for(spec).render(**context)


def render_license(spec: BenchmarkSpec, tables: Mapping[str, list[Mapping[str, Any]]], build_info: dict) -> str:
    """The ``LICENSE`` file of a built dataset: the license and attribution of every image, one row each.

    The card's front matter says ``license: other`` and links this file (the Hub asks for the license
    text in a LICENSE file then). Rows come from the configs that carry ``license`` and ``attribution``
    columns, in the table's order, identified by the config's primary key. Deterministic.
    """
    lines = [
        f"# {spec.title}: licenses of the images",
        "",
        "There is no single license for this dataset: every image keeps the license it came with, listed",
        "below with whom to credit. Anyone who redistributes or shows an image must follow its license,",
        "including its attribution terms. The same columns (`license`, `attribution`) are in the rows of",
        "the dataset itself.",
    ]
    if build_info.get("sample_build"):
        lines += [
            "",
            "This is a sample build: its images are the samples shipped in idbench's `samples/` folder, whose",
            "`LICENSES.md` names for every file the package it was taken from. Files under MIT need their",
            "package's copyright notice, which that file quotes.",
        ]
    for name in spec.configs:
        config = spec.configs[name]
        rows = tables.get(name)
        if rows is None or not {"license", "attribution"} <= set(config.features):
            continue
        key = " + ".join(config.primary_key)
        has_source = "source" in config.features
        counts: dict[str, int] = {}
        for row in rows:
            counts[str(row.get("license") or "")] = counts.get(str(row.get("license") or ""), 0) + 1
        lines += ["", f"## `{name}` ({len(rows)} image{'s' if len(rows) != 1 else ''})", ""]
        lines += [f"- {_md_cell(lic) or '(none given)'}: {n}" for lic, n in sorted(counts.items())]
        lines += [
            "",
            f"| {key} | license | attribution |" + (" source |" if has_source else ""),
            "| --- | --- | --- |" + (" --- |" if has_source else ""),
        ]
        for row in rows:
            ident = " + ".join(_md_cell(row.get(k, "")) for k in config.primary_key)
            cells = [ident, _md_cell(row.get("license") or ""), _md_cell(row.get("attribution") or "")]
            if has_source:
                cells.append(_md_cell(row.get("source") or ""))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def card_metadata(spec: BenchmarkSpec, build_info: dict) -> dict[str, Any]:
    """The card's YAML front matter as a dict, keys in the order they are written."""
    configs = _config_views(spec, build_info)
    largest = max(c.rows for c in configs)
    yaml_configs = []
    for config in configs:
        entry: dict[str, Any] = {
            "config_name": config.name,
            "data_files": [{"split": SPLIT, "path": config.data_files}],
        }
        if config.is_default:
            entry["default"] = True
        yaml_configs.append(entry)
    return {
        "pretty_name": spec.title,
        # Rows come from many sources under different licenses; each row names its own.
        "license": "other",
        "license_name": "mixed-per-image",
        "license_link": LICENSE_FILE,  # the per-image table (render_license), shipped next to the card
        "language": list(LANGUAGES),
        "task_categories": list(spec.task_categories),
        "tags": list(spec.tags),
        "size_categories": [size_category(largest)],
        "configs": yaml_configs,
    }


def front_matter_yaml(spec: BenchmarkSpec, build_info: dict) -> str:
    """The front matter as YAML text (without the ``---`` fences), ending with a newline."""
    return yaml.safe_dump(
        card_metadata(spec, build_info),
        sort_keys=False,  # keep the Hub's customary order: name and license first, configs last
        allow_unicode=True,
        default_flow_style=False,
        width=10_000,  # never fold a long description over lines
    )


# ----------------------------------------------------------------------------------------------


def _config_views(spec: BenchmarkSpec, build_info: dict) -> list[ConfigView]:
    benchmark = build_info.get("benchmark")
    if benchmark is not None and benchmark != spec.name:
        raise ValueError(f"build_info is for benchmark {benchmark!r}, not {spec.name!r}")
    built = build_info.get("configs") or {}
    if not built:
        raise ValueError(f"build_info for {spec.name} lists no built config under 'configs'")
    unknown = [name for name in built if name not in spec.configs]
    if unknown:
        raise ValueError(
            f"build_info lists configs {', '.join(map(repr, unknown))} that {spec.name} does not define; "
            f"it defines: {', '.join(spec.configs)}"
        )
    # The spec's order, not build_info's, so the card reads the same however the builder ordered it.
    return [_config_view(spec.configs[name], built[name]) for name in spec.configs if name in built]


def _config_view(config: ConfigSpec, built: Mapping[str, Any]) -> ConfigView:
    try:
        rows = int(built["rows"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"build_info['configs'][{config.name!r}] has no integer 'rows'") from None
    columns = set(config.features)
    return ConfigView(
        name=config.name,
        description=config.description,
        rows=rows,
        shards=tuple(built.get("shards") or ()),
        data_files=SHARD_GLOB.format(config=config.name),
        fields=tuple(FieldView(name, describe_feature(f)) for name, f in config.features.items()),
        image_columns=config.image_columns,
        primary_key=config.primary_key,
        is_default=config.name == DEFAULT_CONFIG,
        has_license_columns={"license", "attribution"} <= columns,
    )


def _cell_tables(cells: Mapping[str, Any]) -> list[TableView]:
    """One table per breakdown in ``build_info["cells"]``.

    A flat ``{value: count}`` gives a two-column table; a nested ``{row: {column: count}}`` (a
    two-axis breakdown such as subject level x scene) gives a grid with a blank for absent cells.
    Keys keep the builder's order, which is deterministic for a given build.
    """
    tables = []
    for title, counts in cells.items():
        if not isinstance(counts, Mapping):
            raise ValueError(f"build_info['cells'][{title!r}] must map values to counts, got {counts!r}")
        if counts and all(isinstance(v, Mapping) for v in counts.values()):
            columns: list[str] = []
            for inner in counts.values():
                columns.extend(str(k) for k in inner if str(k) not in columns)
            body = tuple(
                (str(row), *(str(inner.get(c, inner.get(_maybe_int(c), ""))) for c in columns))
                for row, inner in counts.items()
            )
            tables.append(TableView(str(title), (_value_name(title), *columns), body))
        else:
            body = tuple((str(value), str(count)) for value, count in counts.items())
            tables.append(TableView(str(title), (_value_name(title), "count"), body))
    return tables


def _value_name(title: str) -> str:
    """The breakdown's column(s) from a cells title: "prompts by n_persons" -> "n_persons"."""
    return str(title).split(" by ", 1)[-1]


def _maybe_int(key: str) -> Any:
    try:
        return int(key)
    except ValueError:
        return key


def _metric_view(metric: MetricSpec) -> MetricView:
    return MetricView(
        name=metric.name,
        description=metric.description,
        higher_is_better=metric.higher_is_better,
        display=metric.display,
        display_note=metric.display_label,
        judged=metric.judged,
    )


def _md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: a '|' would end the cell, a newline the row."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _environment(extra_dir: Path | None = None) -> jinja2.Environment:
    # A benchmark's own template may live in another package (extra_dir); the shared card.md.j2 it
    # extends is always found in idbench.cards.
    folders = ([str(extra_dir)] if extra_dir is not None else []) + [str(CARDS_DIR)]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folders),
        undefined=jinja2.StrictUndefined,  # a misspelt variable fails the build, not the reader
        autoescape=False,  # Markdown, not HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["cell"] = _md_cell
    env.filters["thousands"] = lambda n: f"{n:,}"
    # Jinja's own `tojson` escapes <, > and & for HTML; the card wants the plain JSON spelling.
    env.filters["json"] = lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False)
    return env


def _template_for(spec: BenchmarkSpec) -> jinja2.Template:
    """The spec's ``card_template``: a file of idbench.cards, or ``"package:file"`` shipped with another
    package (a third-party benchmark); the shared template when it names none."""
    name = spec.card_template or BASE_TEMPLATE
    package, _, file = name.rpartition(":")
    if package:
        from idbench.builders.spec import SpecError

        try:
            folder = Path(str(resources.files(package)))
        except (ImportError, TypeError) as err:
            raise SpecError(f"benchmark {spec.name}, card_template: cannot find package {package!r} ({err})") from None
        return _environment(folder).get_template(file)
    return _environment().get_template(name)
