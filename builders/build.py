"""``idbench build``: source folder -> validated, deduplicated, sampled, written benchmark.

Each benchmark's recipe (named by its spec, ``BenchmarkSpec.recipe``; see :mod:`idbench.builders.recipe`)
turns a validated :class:`~idbench.builders.sources.Source` into tables (config name -> rows matching the
config's Features) plus the breakdown counts of the build report. Validation, dedup and writing are
shared. The model stages of ``--curate`` come in as a :class:`~idbench.builders.recipe.Curator`
built by the caller (the CLI builds :class:`idbench.curation.pipeline.Curation`): builders never import
curation, which sits above them.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import idbench
from idbench.builders.card import render_card, render_license
from idbench.builders.dedup import DEFAULT_MAX_DISTANCE
from idbench.builders.recipe import Curator
from idbench.builders.registry import get_benchmark
from idbench.builders.sources import read_source
from idbench.builders.spec import BenchmarkSpec
from idbench.builders.write import OutputExistsError, write_benchmark

# The shipped samples are package data (idbench.samples), found the same way in a checkout and a wheel.
SAMPLES_DIR = Path(str(resources.files("idbench.samples")))


def sample_source(benchmark: str) -> Path:
    """The shipped sample manifest of a benchmark (the default source)."""
    return SAMPLES_DIR / f"{benchmark}.csv"


def is_sample_source(source: Path | None) -> bool:
    """Whether a build reads the shipped samples: no --source, or a --source inside the samples' folder.

    ``build_info.json`` records it as ``sample_build``; the card then says it is a plumbing copy, and
    ``score --hub-eval-results`` refuses results scored on it.
    """
    if source is None:
        return True
    return Path(source).resolve().is_relative_to(SAMPLES_DIR.resolve())


def build(
    benchmark: str,
    out: Path,
    source: Path | None = None,
    seed: int = 0,
    n_prompts: int | None = None,
    overwrite: bool = False,
    max_distance: int = DEFAULT_MAX_DISTANCE,
    curator: Curator | None = None,
) -> dict:
    """Build ``benchmark`` from ``source`` (default: the shipped samples) into ``out``; returns build_info.

    ``curator`` runs the model stages (e.g. ``idbench.curation.pipeline.Curation(CurateOptions(...))``:
    embedding dedup, quality filter, and with a judge the MLLM stages); their audit goes to
    ``out/curation/`` and ``build_info``.
    """
    spec: BenchmarkSpec = get_benchmark(benchmark)
    recipe = spec.load("recipe")
    sample_build = is_sample_source(source)
    source_data = read_source(
        spec, sample_source(spec.name) if source is None else Path(source), spec.unique_source_column
    )
    if curator is not None and Path(out).exists() and not overwrite:  # refuse before the (slow) model stages
        raise OutputExistsError(f"{out} already exists; pass --overwrite to replace it")
    result, dropped = recipe(source_data, seed, n_prompts, max_distance, curator)
    info = {
        "benchmark": spec.name,
        "idbench_version": idbench.__version__,
        "seed": seed,
        "sample_build": sample_build,
        "options": {"prompts": n_prompts, "dedup_max_distance": max_distance},
        "source": {
            "manifest": source_data.manifest.name,
            "sha256": source_data.sha256,
            "rows": len(source_data.images),
        },
        "cells": result.cells,
        "dropped_duplicates": dropped,
        "curation": curator.log.stages if curator is not None else "not run (build without --curate)",
        **result.info,
    }
    extra = curator.log.write if curator is not None else None
    return write_benchmark(
        Path(out),
        spec,
        result.tables,
        info,
        render_card,
        overwrite=overwrite,
        extra=extra,
        render_license=render_license,
    )


def format_report(info: dict) -> str:
    """The build report printed by the CLI: rows per config, then each breakdown table."""
    lines = [f"{info['benchmark']} (seed {info['seed']}{', sample build' if info['sample_build'] else ''})"]
    for name, config in info["configs"].items():
        lines.append(f"  {name}: {config['rows']} rows in {len(config['shards'])} shard(s)")
    for title, counts in info["cells"].items():
        lines.append(f"  {title}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    for d in info["dropped_duplicates"]:
        lines.append(f"  dropped {d['id']}: duplicate of {d['duplicate_of']} (pHash distance {d['distance']})")
    curation = info.get("curation")
    if isinstance(curation, dict):
        lines.append("  curation (audit files in curation/):")
        for stage, summary in curation.items():
            text = summary if isinstance(summary, str) else json.dumps(summary, default=str)
            lines.append(f"    {stage}: {text[:300]}")
    return "\n".join(lines)
