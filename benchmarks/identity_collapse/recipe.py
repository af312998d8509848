"""The Identity Collapse recipe: ids in manifest order, pHash dedup, (curation), the prompt grid (all of it,
or the first k prompts of each of its 15 cells: a smaller build with every subject level in every scene)."""

from __future__ import annotations

from idbench.benchmarks.identity_collapse import spec as identity_collapse
from idbench.benchmarks.identity_collapse.sampling import sample_collapse_prompts
from idbench.builders.recipe import Curator, Recipe, dedupe, name_of, reference_row
from idbench.builders.sources import Source, SourceError, SourceImage, check_distinct_names
from idbench.builders.write import count_by


def recipe(
    source: Source, seed: int, n_prompts: int | None, max_distance: int, curator: Curator | None = None
) -> tuple[Recipe, list[dict]]:
    cells = len(identity_collapse.SUBJECT_LEVELS) * len(identity_collapse.SCENES)
    full = cells * identity_collapse.PROMPTS_PER_CELL
    if n_prompts is not None and (isinstance(n_prompts, bool) or n_prompts not in range(cells, full + 1, cells)):
        raise SourceError(
            f"identity-collapse's grid has {cells} cells (5 subject levels x 3 scenes) of "
            f"{identity_collapse.PROMPTS_PER_CELL} prompts: --prompts must be a multiple of {cells} up to {full} "
            f"(the first prompts of every cell), got {n_prompts!r}"
        )
    per_cell = identity_collapse.PROMPTS_PER_CELL if n_prompts is None else n_prompts // cells
    # Ids follow manifest order and are assigned before dedup, so dropping a duplicate never renames others.
    images = [
        SourceImage(i.row, {**i.values, "subject_id": f"S{n:03d}"}, i.path, i.data, i.width, i.height)
        for n, i in enumerate(source.images, start=1)
    ]
    images, dropped = dedupe(images, "subject_id", max_distance)
    if curator is not None:
        images = curator.curate_images(images, lambda i: i.values["subject_id"], name_of)
    subjects = [reference_row(i, identity_collapse.SUBJECTS) for i in images]
    # Checked on the source already; again on what the sampler gets, in case curation changed a name.
    check_distinct_names(
        identity_collapse.SPEC.distinct_names, [(i.row, s) for i, s in zip(images, subjects)], source.manifest
    )
    try:
        prompts = sample_collapse_prompts(subjects, seed, per_cell)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    cells = {
        "subjects by kind": count_by(subjects, "kind"),
        "prompts by n_subjects x scene": count_by(prompts, "n_subjects", "scene"),
    }
    return Recipe({"subjects": subjects, "prompts": prompts}, cells), dropped
