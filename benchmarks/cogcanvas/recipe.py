"""The CogCanvas recipe: per-kind metadata checks, pHash dedup, (curation), the sampled prompts and
retrieval rows, (MLLM-written prompts)."""

from __future__ import annotations

from pathlib import Path

from idbench.benchmarks.cogcanvas import spec as cogcanvas
from idbench.benchmarks.cogcanvas.graphs import QUESTIONS_VERSION
from idbench.benchmarks.cogcanvas.sampling import RETRIEVAL_VERSION, prompt_resampler, sample_cogcanvas
from idbench.builders.recipe import Curator, Recipe, dedupe, name_of, reference_row
from idbench.builders.sources import Source, SourceError, SourceImage, check_distinct_names
from idbench.builders.write import count_by

_PERSON_FIELDS = ("age_group", "gender", "ethnicity")
_ITEM_FIELDS = ("size_category", "interactions")
_BACKGROUND_FIELDS = ("scene_type",)
_KIND_FIELDS = {
    "person": _PERSON_FIELDS,
    "object": _ITEM_FIELDS,
    "fashion": _ITEM_FIELDS,
    "background": _BACKGROUND_FIELDS + ("landmark",),
}


_REQUIRED = {
    "person": _PERSON_FIELDS,
    "object": _ITEM_FIELDS,
    "fashion": _ITEM_FIELDS,
    "background": _BACKGROUND_FIELDS,
}


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


def recipe(
    source: Source, seed: int, n_prompts: int | None, max_distance: int, curator: Curator | None = None
) -> tuple[Recipe, list[dict]]:
    # With a judge, empty metadata is allowed here: the MLLM fills it, and it is checked again after.
    fills = curator is not None and curator.fills_metadata
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
    if curator is not None:
        images = curator.curate_images(
            images, lambda i: i.values["ref_id"], lambda i: f"{name_of(i)}: {i.values.get('description') or ''}"
        )
    references = [reference_row(i, cogcanvas.REFERENCES) for i in images]
    if curator is not None:
        from idbench.benchmarks.cogcanvas.curation import (
            curate_cogcanvas_references,
        )  # the judge stack, only when curating

        references = curate_cogcanvas_references(references, curator)
        if fills:
            rows = {i.values["ref_id"]: i.row for i in images}
            for r in references:
                missing = [c for c in _REQUIRED[r["kind"]] if not r[c]]
                if missing:
                    raise SourceError(
                        f"{source.manifest}, row {rows[r['ref_id']]}: {r['ref_id']} still lacks {', '.join(missing)} after "
                        "metadata extraction (see curation/metadata.json); fill it in the manifest"
                    )
    # Checked on the source already; again on what the sampler gets, in case curation changed a name.
    check_distinct_names(
        cogcanvas.SPEC.distinct_names, [(i.row, r) for i, r in zip(images, references)], source.manifest
    )
    pool = [{**r, "file": i.values["file"]} for r, i in zip(references, images)]
    try:
        prompts, retrieval = sample_cogcanvas(pool, seed, n_prompts)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    if curator is not None:
        from idbench.benchmarks.cogcanvas.curation import curate_cogcanvas_prompts

        prompts, retrieval = curate_cogcanvas_prompts(
            prompts, retrieval, references, prompt_resampler(pool, seed), curator
        )
    persons = [{"size": p["item_size"], "strength": p["interaction_strength"]} for q in prompts for p in q["persons"]]
    cells = {
        "references by kind": count_by(references, "kind"),
        "entities by kind": count_by({(r["entity_id"], r["kind"]): r for r in references}.values(), "kind"),
        "prompts by n_persons": count_by(prompts, "n_persons"),
        "bindings by item size x interaction strength": count_by(persons, "size", "strength"),
        "questions by kind": count_by([q for p in prompts for q in p["questions"]], "kind"),
    }
    tables = {"references": references, "prompts": prompts, "retrieval": retrieval}
    return Recipe(
        tables, cells, info={"questions_version": QUESTIONS_VERSION, "retrieval_version": RETRIEVAL_VERSION}
    ), dropped
