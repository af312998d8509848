"""The CHARIS recipe: pHash dedup, (curation), EKB-template prompts (or curated ones), human ratings."""

from __future__ import annotations

import csv
from pathlib import Path

from idbench.benchmarks.charis import spec as charis
from idbench.benchmarks.charis.sampling import sample_charis_prompts
from idbench.builders.recipe import Curator, Recipe, dedupe, name_of, reference_row
from idbench.builders.sources import Source, SourceError
from idbench.builders.write import count_by
from idbench.ekb import load_ekb

RATINGS_FILE = "human_ratings.csv"
RATINGS_COLUMNS = tuple(charis.HUMAN_RATINGS)


def recipe(
    source: Source, seed: int, n_prompts: int | None, max_distance: int, curator: Curator | None = None
) -> tuple[Recipe, list[dict]]:
    images, dropped = dedupe(list(source.images), "subject_id", max_distance)
    if curator is not None:
        images = curator.curate_images(images, lambda i: i.values["subject_id"], name_of)
    subjects = [reference_row(i, charis.SUBJECTS) for i in images]
    try:
        prompts = sample_charis_prompts(subjects, load_ekb(), seed, n_prompts)
    except ValueError as err:
        raise SourceError(f"{source.manifest}: {err}") from None
    if curator is not None:
        from idbench.benchmarks.charis.curation import curate_charis_prompts  # the judge stack, only when curating

        prompts = curate_charis_prompts(subjects, prompts, curator)
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
                raise SourceError(
                    f"{where}: category {row['category']!r}, expected one of {', '.join(charis.CATEGORIES)}"
                )
            if row["prompt_id"] not in prompt_ids:
                raise SourceError(f"{where}: prompt_id {row['prompt_id']!r} is not a prompt of this build (same seed?)")
            key = (row["model"], row["prompt_id"], row["annotator"])
            if key in seen:
                raise SourceError(f"{where}: duplicate rating for model/prompt/annotator {key}")
            seen.add(key)
            rows.append(row)
    return rows
