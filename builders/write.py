"""Writing a built benchmark: parquet shards with embedded images, the card, build_info.json.

Everything is written through :func:`idbench.atomic.atomic_directory`: into a staging sibling of the
output folder, moved into place only when complete, so an interrupted or failed build leaves no
half-written dataset, and an existing output is replaced only when the caller asked for it (and only
after the new one is complete).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import datasets

from idbench.atomic import OutputExistsError, atomic_directory
from idbench.builders.spec import BenchmarkSpec, ConfigSpec

__all__ = [
    "MAX_SHARD_BYTES",
    "SPLIT",
    "OutputExistsError",  # OutputExistsError lives in idbench.atomic; re-exported
    "count_by",
    "shard_path",
    "split_into_shards",
    "write_benchmark",
    "write_config",
]

SPLIT = "test"
# Shards are cut by the bytes of their embedded images (the Hub's own uploads aim at ~500 MB).
MAX_SHARD_BYTES = 500 * 1024 * 1024


def shard_path(config: str, index: int, count: int) -> str:
    return f"{config}/{SPLIT}-{index:05d}-of-{count:05d}.parquet"


def _row_bytes(row: Mapping, config: ConfigSpec) -> int:
    return sum(len(row[c]["bytes"]) for c in config.image_columns if row.get(c))


def split_into_shards(rows: list[dict], config: ConfigSpec, max_bytes: int = MAX_SHARD_BYTES) -> list[list[dict]]:
    """Consecutive runs of rows whose image bytes stay under ``max_bytes`` (at least one row each)."""
    shards: list[list[dict]] = [[]]
    size = 0
    for row in rows:
        row_size = _row_bytes(row, config)
        if shards[-1] and size + row_size > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(row)
        size += row_size
    return shards


def write_config(
    folder: Path, config: ConfigSpec, rows: list[dict], max_shard_bytes: int = MAX_SHARD_BYTES
) -> list[str]:
    """Write one config's rows as parquet shards under ``folder``; returns the shard paths (relative)."""
    shards = split_into_shards(rows, config, max_shard_bytes)
    paths = []
    for index, shard_rows in enumerate(shards):
        relative = shard_path(config.name, index, len(shards))
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        # Rows carry images as {"bytes", "path"}, so the parquet holds the image bytes themselves
        # (a bare path would be stored as a path and break on any other machine).
        dataset = datasets.Dataset.from_list(shard_rows, features=config.features)
        dataset.to_parquet(str(target))
        paths.append(relative)
    return paths


def write_benchmark(
    out: Path,
    spec: BenchmarkSpec,
    tables: Mapping[str, list[dict]],
    build_info: dict,
    render_card: Callable[[BenchmarkSpec, dict], str],
    overwrite: bool = False,
    max_shard_bytes: int = MAX_SHARD_BYTES,
    extra: Callable[[Path], None] | None = None,
    render_license: Callable[[BenchmarkSpec, Mapping[str, list[dict]], dict], str] | None = None,
) -> dict:
    """Write ``tables`` (config name -> rows) atomically into ``out``; returns the completed build_info.

    ``extra`` writes more files into the staging folder (the curation audit), so they appear with
    the rest or not at all. ``render_license`` writes ``LICENSE`` (the per-image license table the
    card links) from the tables.
    """
    with atomic_directory(out, overwrite=overwrite) as staging:
        info = dict(build_info)
        info["configs"] = {}
        for name, rows in tables.items():
            shards = write_config(staging, spec.config(name), rows, max_shard_bytes)
            info["configs"][name] = {"rows": len(rows), "shards": shards}
        (staging / "build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        (staging / "README.md").write_text(render_card(spec, info))
        if render_license is not None:
            (staging / "LICENSE").write_text(render_license(spec, tables, info), encoding="utf-8")
        if extra is not None:
            extra(staging)
    return info


def count_by(rows: Iterable[Mapping], *columns: str) -> dict[str, int]:
    """Row counts per value (or value tuple, joined with ' x ') of ``columns``, keys sorted."""
    counts: dict[str, int] = {}
    for row in rows:
        key = " x ".join(str(row[c]) for c in columns)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: _natural_key(kv[0])))


def _natural_key(text: str):
    return [
        (0, int(part), "") if part.isascii() and part.isdigit() else (1, 0, part)
        for part in text.replace(" x ", "\0").split("\0")
    ]
