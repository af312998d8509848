"""``idbench build``: source folder -> validated, deduplicated, sampled, written benchmark.

One recipe per benchmark turns a validated :class:`~idbench.builders.sources.Source` into tables (config name ->
rows matching the config's Features) plus the breakdown counts of the build report. Validation,
dedup and writing are shared.
"""

from __future__ import annotations

import csv
import json
from importlib import resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import datasets

import idbench
from idbench.builders.benchmarks import charis, cogcanvas, get_benchmark, identity_collapse
from idbench.builders.card import render_card
from idbench.builders.graphs import QUESTIONS_VERSION
from idbench.builders.sampling.charis import sample_charis_prompts
from idbench.builders.sampling.cogcanvas import prompt_resampler, sample_cogcanvas
from idbench.builders.sampling.collapse import sample_collapse_prompts
from idbench.builders.sources import Source, SourceError, SourceImage, read_source
from idbench.builders.spec import BenchmarkSpec
from idbench.builders.write import count_by, write_benchmark
from idbench.curation.dedup import DEFAULT_MAX_DISTANCE, find_duplicates
from idbench.curation.pipeline import CurateOptions, Curation, curate_charis_prompts, curate_cogcanvas_prompts
from idbench.curation.pipeline import curate_cogcanvas_references, curate_images
from idbench.ekb import load_ekb

# The shipped samples are package data (idbench.samples), found the same way in a checkout and a wheel.
SAMPLES_DIR = Path(str(resources.files("idbench.samples")))


@dataclass
class Recipe:
    """What a benchmark's recipe returns: the tables, the report's breakdown counts, extra build info."""

    tables: dict[str, list[dict]]
    cells: dict[str, dict[str, int]] = field(default_factory=dict)
    # Recorded at the top level of build_info.json, e.g. the version of the question generator.
    info: dict[str, object] = field(default_factory=dict)


def sample_source(benchmark: str) -> Path:
    """The shipped sample manifest of a benchmark (the default source)."""
    return SAMPLES_DIR / f"{benchmark}.csv"


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


# --- identity-collapse ---------------------------------------------------------------------------


def _name(image: SourceImage) -> str:
    return image.values.get("name") or ""


def _collapse(source: Source, seed: int, n_prompts: int | None, max_distance: int, run: Curation | None = None) -> tuple[Recipe, list[dict]]:
    if n_prompts is not None:
        raise SourceError(
            "identity-collapse has a fixed grid of 75 prompts (5 subject levels x 3 scenes x 5); drop --prompts"
        )
    # Ids follow manifest order and are assigned before dedup, so dropping a duplicate never renames others.
    images = [
        SourceImage(i.row, {**i.values, "subject_id": f"S{n:03d}"}, i.path, i.data, i.width, i.height)
        for n, i in enumerate(source.images, start=1)
    ]
    images, dropped = dedupe(images, "subject_id", max_distance)
    if run is not None:
        images = curate_images(images, lambda i: i.values["subject_id"], _name, run)
    subjects = [reference_row(i, identity_collapse.SUBJECTS) for i in images]
    try:
        prompts = sample_collapse_prompts(subjects, seed)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    cells = {
        "subjects by kind": count_by(subjects, "kind"),
        "prompts by n_subjects x scene": count_by(prompts, "n_subjects", "scene"),
    }
    return Recipe({"subjects": subjects, "prompts": prompts}, cells), dropped


# --- charis --------------------------------------------------------------------------------------

RATINGS_FILE = "human_ratings.csv"
RATINGS_COLUMNS = tuple(charis.HUMAN_RATINGS)


def _charis(source: Source, seed: int, n_prompts: int | None, max_distance: int, run: Curation | None = None) -> tuple[Recipe, list[dict]]:
    images, dropped = dedupe(list(source.images), "subject_id", max_distance)
    if run is not None:
        images = curate_images(images, lambda i: i.values["subject_id"], _name, run)
    subjects = [reference_row(i, charis.SUBJECTS) for i in images]
    try:
        prompts = sample_charis_prompts(subjects, load_ekb(), seed, n_prompts)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    if run is not None:
        prompts = curate_charis_prompts(subjects, prompts, run)
    tables = {"subjects": subjects, "prompts": prompts}
    ratings = read_human_ratings(source.root / RATINGS_FILE, {p["prompt_id"] for p in prompts})
    if ratings is not None:
        tables["human_ratings"] = ratings
    cells = {
        "subjects by type x style": count_by(subjects, "type", "style"),
        "prompts by type x style": count_by(prompts, "type", "style"),
        "prompts by number of axes": count_by([{"n": len(p["axes"])} for p in prompts], "n"),
        "prompts asking for each axis": count_by([{"axis": a} for p in prompts for a in p["axes"]], "axis"),
    }
    return Recipe(tables, cells), dropped


def read_human_ratings(path: Path, prompt_ids: set[str]) -> list[dict] | None:
    """The optional ratings file of a CHARIS source (None when absent)."""
    if not path.exists():
        return None
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or sorted(reader.fieldnames) != sorted(RATINGS_COLUMNS):
            raise SourceError(f"{path}: expected the columns {', '.join(RATINGS_COLUMNS)}, found {reader.fieldnames}")
        rows, seen = [], set()
        for number, row in enumerate(reader, start=1):
            where = f"{path}, row {number}"
            if None in row or any(v is None for v in row.values()):
                raise SourceError(f"{where}: wrong number of fields")
            row = {k: v.strip() for k, v in row.items()}
            if row["category"] not in charis.CATEGORIES:
                raise SourceError(f"{where}: category {row['category']!r}, expected one of {', '.join(charis.CATEGORIES)}")
            if row["prompt_id"] not in prompt_ids:
                raise SourceError(f"{where}: prompt_id {row['prompt_id']!r} is not a prompt of this build (same seed?)")
            key = (row["model"], row["prompt_id"], row["annotator"])
            if key in seen:
                raise SourceError(f"{where}: duplicate rating for model/prompt/annotator {key}")
            seen.add(key)
            rows.append(row)
    return rows


# --- cogcanvas -----------------------------------------------------------------------------------

_PERSON_FIELDS = ("age_group", "gender", "ethnicity")
_ITEM_FIELDS = ("size_category", "interactions")
_BACKGROUND_FIELDS = ("scene_type",)
_KIND_FIELDS = {
    "person": _PERSON_FIELDS,
    "object": _ITEM_FIELDS,
    "fashion": _ITEM_FIELDS,
    "background": _BACKGROUND_FIELDS + ("landmark",),
}


_REQUIRED = {"person": _PERSON_FIELDS, "object": _ITEM_FIELDS, "fashion": _ITEM_FIELDS, "background": _BACKGROUND_FIELDS}


def check_cogcanvas_row(image: SourceImage, manifest: Path, require: bool = True) -> None:
    """Per-kind metadata: required where it applies (unless a judge will fill it), empty where it does not."""
    values, where = image.values, f"{manifest}, row {image.row}"
    kind = values["kind"]
    for column in _REQUIRED[kind] if require else ():
        if not values[column]:
            raise SourceError(f"{where}: a {kind} row needs {column!r}")
    for other_kind, columns in _KIND_FIELDS.items():
        for column in columns:
            if column not in _KIND_FIELDS[kind] and values[column]:
                raise SourceError(f"{where}: column {column!r} applies to {other_kind} rows, not to a {kind} row")


def _cogcanvas(source: Source, seed: int, n_prompts: int | None, max_distance: int, run: Curation | None = None) -> tuple[Recipe, list[dict]]:
    # With a judge, empty metadata is allowed here: the MLLM fills it, and it is checked again after.
    fills = run is not None and run.options.judge is not None
    entity_kind: dict[str, tuple[str, int]] = {}
    for image in source.images:
        check_cogcanvas_row(image, source.manifest, require=not fills)
        entity, kind = image.values["entity_id"], image.values["kind"]
        first = entity_kind.setdefault(entity, (kind, image.row))
        if first[0] != kind:
            raise SourceError(
                f"{source.manifest}, row {image.row}: entity {entity!r} is a {kind} here but a {first[0]} in row {first[1]}"
            )
    images, dropped = dedupe(list(source.images), "ref_id", max_distance)
    if run is not None:
        images = curate_images(images, lambda i: i.values["ref_id"], lambda i: f"{_name(i)}: {i.values.get('description') or ''}", run)
    references = [reference_row(i, cogcanvas.REFERENCES) for i in images]
    if run is not None:
        references = curate_cogcanvas_references(references, run)
        if fills:
            rows = {i.values["ref_id"]: i.row for i in images}
            for r in references:
                missing = [c for c in _REQUIRED[r["kind"]] if not r[c]]
                if missing:
                    raise SourceError(
                        f"{source.manifest}, row {rows[r['ref_id']]}: {r['ref_id']} still lacks {', '.join(missing)} after "
                        "metadata extraction (see curation/metadata.json); fill it in the manifest"
                    )
    pool = [{**r, "file": i.values["file"]} for r, i in zip(references, images)]
    try:
        prompts, retrieval = sample_cogcanvas(pool, seed, n_prompts)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    if run is not None:
        prompts, retrieval = curate_cogcanvas_prompts(prompts, retrieval, references, prompt_resampler(pool, seed), run)
    persons = [{"size": p["item_size"], "strength": p["interaction_strength"]} for q in prompts for p in q["persons"]]
    cells = {
        "references by kind": count_by(references, "kind"),
        "entities by kind": count_by({(r["entity_id"], r["kind"]): r for r in references}.values(), "kind"),
        "prompts by n_persons": count_by(prompts, "n_persons"),
        "bindings by item size x interaction strength": count_by(persons, "size", "strength"),
        "questions by kind": count_by([q for p in prompts for q in p["questions"]], "kind"),
    }
    tables = {"references": references, "prompts": prompts, "retrieval": retrieval}
    return Recipe(tables, cells, info={"questions_version": QUESTIONS_VERSION}), dropped


# --- shared --------------------------------------------------------------------------------------

RECIPES: dict[str, tuple[str | None, Callable]] = {
    # benchmark -> (id column that must be unique in the manifest, recipe)
    identity_collapse.NAME: (None, _collapse),
    charis.NAME: ("subject_id", _charis),
    cogcanvas.NAME: ("ref_id", _cogcanvas),
}


def build(
    benchmark: str,
    out: Path,
    source: Path | None = None,
    seed: int = 0,
    n_prompts: int | None = None,
    overwrite: bool = False,
    max_distance: int = DEFAULT_MAX_DISTANCE,
    curate: CurateOptions | Curation | None = None,
) -> dict:
    """Build ``benchmark`` from ``source`` (default: the shipped samples) into ``out``; returns build_info.

    ``curate`` runs the model stages of :mod:`idbench.curation.pipeline` (embedding dedup, quality filter,
    and with a judge the MLLM stages); their audit goes to ``out/curation/`` and ``build_info``.
    """
    spec: BenchmarkSpec = get_benchmark(benchmark)
    unique, recipe = RECIPES[spec.name]
    sample_build = source is None
    source_data = read_source(spec, sample_source(spec.name) if sample_build else Path(source), unique)
    if curate is not None and Path(out).exists() and not overwrite:  # refuse before the (slow) model stages
        from idbench.builders.write import OutputExistsError

        raise OutputExistsError(f"{out} already exists; pass --overwrite to replace it")
    run = curate if isinstance(curate, Curation) or curate is None else Curation(curate)  # the CLI passes a Curation
    result, dropped = recipe(source_data, seed, n_prompts, max_distance, run)
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
        "curation": run.log.stages if run is not None else "not run (build without --curate)",
        **result.info,
    }
    extra = run.log.write if run is not None else None
    return write_benchmark(Path(out), spec, result.tables, info, render_card, overwrite=overwrite, extra=extra)


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
