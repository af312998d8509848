"""CogCanvas's reference retrieval task: score a ranking submission, and the two rankers beside it.

Each row of the built ``retrieval`` config is one slot of one prompt (``A``, ``A.item``,
``background``): the slot's ``query`` (the prompt's own words for it, what a generator sees), the
``candidate_ref_ids`` (every image of that entity) and the ``ground_truth_ref_id`` (the image the
prompt was built from). A retrieval submission (``"task": "retrieval"``, ``rankings.csv``;
:mod:`idbench.evaluate_pkg.submission`) ranks every slot's candidates.

Relevant ids: the ground truth, plus any ids of an optional ``relevant_ref_ids`` list in the row (the
built config has none today: one relevant image per slot, the paper's "annotated attribute-matched
image per slot"). A config that gains such a column is scored with the whole set, no code change.

Scores (paper 001, section 3.5): P@k = hits in the top k / k and R@k = hits / |relevant| per slot,
k in 1, 3, 5 (:func:`idbench.evaluate_pkg.functional.retrieval_precision_recall`); then per prompt the
mean over the slots of one group, each group under its own names (``RETRIEVAL_GROUPS`` of the spec):

- ``retrieval_p@k`` / ``retrieval_r@k``, the headline: the identity (person) slots, the paper's task;
- ``retrieval_item_p@k`` / ``..._r@k``: the object and fashion slots;
- ``retrieval_background_p@k`` / ``..._r@k``: the background slot.

A slot with a single candidate cannot be ranked wrong: it is left out of its group's values and
counted (``<group>.single_candidate_slots`` per prompt, beside ``<group>.scored_slots``, and a run
note). A prompt with no scored slot in a group gets NaN for that group (undefined, counted by the
aggregates as ``n_nan``), never 1. Beside every value ``<metric>.random`` holds what a uniformly random
ordering of the same candidates scores in expectation (exact,
:func:`idbench.evaluate_pkg.functional.random_expected_precision_recall`), per slot and per prompt.
The aggregates average the prompts with the prompt-level bootstrap like every other metric.

Baselines (``idbench baseline retrieval-clip|retrieval-metadata``):

- ``retrieval-clip``: CLIP text-image cosine between the query and each candidate image (the
  profile's ``clip`` encoder through the feature store: the paper profile's ViT-L/14 for real use,
  tiny random weights in tests, which makes it a plumbing check);
- ``retrieval-metadata``: no image at all, the count of query words found in each candidate's
  metadata (name, description, per-kind fields). Reported beside real rankers, it shows how much of
  the task metadata alone solves.

Both break ties by ref id, so a ranker that cannot tell the images apart scores as a fixed pick.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import idbench
from idbench.atomic import atomic_directory
from idbench.benchmarks.cogcanvas.spec import RANDOM_SUFFIX, RETRIEVAL_GROUP_WORDS, RETRIEVAL_GROUPS, RETRIEVAL_KS
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baseline_names import RANKERS as _RANKER_NAMES
from idbench.evaluate_pkg.context import Result
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.evaluate_pkg.images import content_hash
from idbench.evaluate_pkg.submission import METADATA_NAME, RANKING_COLUMNS, RANKINGS_NAME

Rankings = Mapping[tuple[str, str], tuple[str, ...]]

RANKERS = _RANKER_NAMES  # re-exported: callers import it from here
NOTES = {
    "retrieval-clip": "Not a trained retriever: each slot's candidates ranked by the CLIP cosine between the "
    "slot's query (the prompt's words for it) and the candidate image.",
    "retrieval-metadata": "Not a trained retriever and no image read: each slot's candidates ranked by how many "
    "query words their metadata (name, description, per-kind fields) contains; what metadata alone solves.",
}
# The reference columns the metadata ranker reads (no ids, provenance or licenses).
METADATA_COLUMNS = (
    "name",
    "description",
    "age_group",
    "gender",
    "ethnicity",
    "size_category",
    "interactions",
    "scene_type",
    "landmark",
)
# A result's seed: a ranking has none (the prompts are the resampled units all the same).
RANKING_SEED = 0
# Per-prompt slot counts stored beside each group's values, ``<group>.<count>`` (diagnostics, never ranked).
SLOT_COUNTS = {
    "single_candidate_slots": "slots with one candidate, left out (they cannot be ranked wrong)",
    "scored_slots": "slots with two or more candidates, the ones the values average",
}


def retrieval_rows(data: BenchmarkData) -> dict[tuple[str, str], dict]:
    """(prompt_id, slot) -> the retrieval config's row, in build order."""
    if "retrieval" not in data.tables:
        raise BenchmarkDataError(f"{data.folder}: {data.name} has no retrieval config; the retrieval task needs one")
    return {(row["prompt_id"], row["slot"]): row for row in data.tables["retrieval"]}


def relevant_ids(row: Mapping[str, Any]) -> set[str]:
    """The ids that count as correct for a slot: its ground truth and an optional ``relevant_ref_ids``."""
    return {row["ground_truth_ref_id"], *(row.get("relevant_ref_ids") or ())}


def slot_group(row: Mapping[str, Any]) -> str:
    """The metric-name prefix of the group a slot is scored in (``RETRIEVAL_GROUPS`` by its ``kind``)."""
    for group, kinds in RETRIEVAL_GROUPS.items():
        if row["kind"] in kinds:
            return group
    raise BenchmarkDataError(f"retrieval slot {row['prompt_id']}/{row['slot']}: unknown kind {row['kind']!r}")


def group_metrics(group: str, ks=RETRIEVAL_KS) -> list[str]:
    """The metric names of one slot group: ``<group>_p@k`` and ``<group>_r@k`` for each k."""
    return [f"{group}_{m}@{k}" for k in ks for m in "pr"]


# Every per-prompt side value the retrieval task stores (the CogCanvas suite declares them).
DIAGNOSTICS: dict[str, str] = {
    **{
        f"{group}.{count}": f"{RETRIEVAL_GROUP_WORDS[group]} {what}"
        for group in RETRIEVAL_GROUPS
        for count, what in SLOT_COUNTS.items()
    },
    **{
        f"{name}{RANDOM_SUFFIX}": f"a random ranker's expected {name} on the same slots"
        for group in RETRIEVAL_GROUPS
        for name in group_metrics(group)
    },
}


def _wanted(name: str, metrics: Collection[str] | None) -> bool:
    """Whether a result belongs to the requested metrics: a metric, its ``.random`` beside it, or a
    group's slot counts when any metric of that group is requested."""
    if metrics is None:
        return True
    owner, _, tail = name.partition(".")
    if owner in RETRIEVAL_GROUPS and tail in SLOT_COUNTS:
        return any(m in metrics for m in group_metrics(owner))
    return owner in metrics


def score_rankings(
    data: BenchmarkData, rankings: Rankings, ks=RETRIEVAL_KS, metrics: Collection[str] | None = None
) -> list[Result]:
    """Each slot group's P@k / R@k and their random-ranker expectation per scored slot (``subject`` =
    the slot) and per prompt (the mean over the group's scored slots, ``subject`` = "", what the
    aggregates average), with the group's slot counts per prompt; see the module doc.

    ``metrics``: keep only those metrics (with their diagnostics); ``None`` keeps everything.
    """
    results: list[Result] = []
    # prompt -> group -> metric -> per-slot values (each prompt has every group: persons, items, a background)
    by_prompt: dict[str, dict[str, dict[str, list[float]]]] = {}
    single: dict[str, dict[str, int]] = {}
    for (prompt_id, slot), row in retrieval_rows(data).items():
        group = slot_group(row)
        values = by_prompt.setdefault(prompt_id, {g: {} for g in RETRIEVAL_GROUPS})[group]
        counts = single.setdefault(prompt_id, dict.fromkeys(RETRIEVAL_GROUPS, 0))
        candidates = list(row["candidate_ref_ids"])
        if len(candidates) < 2:  # always found, whatever the ranker: says nothing about it
            counts[group] += 1
            continue
        relevant = relevant_ids(row) & set(candidates)
        scores = F.retrieval_precision_recall(rankings[(prompt_id, slot)], relevant, ks)
        chance = F.random_expected_precision_recall(len(candidates), len(relevant), ks)
        for key in scores:
            name = f"{group}_{key}"
            for metric, value in ((name, scores[key]), (name + RANDOM_SUFFIX, chance[key])):
                results.append(Result(prompt_id, RANKING_SEED, metric, float(value), slot))
                values.setdefault(metric, []).append(float(value))
    for prompt_id, groups in by_prompt.items():
        for group, values in groups.items():
            for name in group_metrics(group, ks):
                for metric in (name, name + RANDOM_SUFFIX):
                    # NaN when no slot of the group could be ranked wrong: undefined, not a perfect score
                    value = float(np.mean(values[metric])) if values.get(metric) else float("nan")
                    results.append(Result(prompt_id, RANKING_SEED, metric, value))
            scored = len(next(iter(values.values()), []))
            results.append(
                Result(prompt_id, RANKING_SEED, f"{group}.single_candidate_slots", float(single[prompt_id][group]))
            )
            results.append(Result(prompt_id, RANKING_SEED, f"{group}.scored_slots", float(scored)))
    return [r for r in results if _wanted(r.metric, metrics)]


def slot_count_note(data: BenchmarkData) -> str:
    """One sentence for the run's notes: per group, the slots scored and those left out with one candidate."""
    scored = dict.fromkeys(RETRIEVAL_GROUPS, 0)
    single = dict.fromkeys(RETRIEVAL_GROUPS, 0)
    for row in retrieval_rows(data).values():
        (scored if len(row["candidate_ref_ids"]) > 1 else single)[slot_group(row)] += 1
    parts = [
        f"{RETRIEVAL_GROUP_WORDS[group]} slots (`{group}_p@k`, `{group}_r@k`) {scored[group]} scored, "
        f"{single[group]} left out"
        for group in RETRIEVAL_GROUPS
    ]
    return (
        "a slot with a single candidate cannot be ranked wrong, so it is left out of every retrieval value "
        "and counted (a prompt with no slot left in a group is NaN there, not 1): "
        + "; ".join(parts)
        + ". `<metric>.random` is a random ranker's expected value on the same slots."
    )


# --- rankers -------------------------------------------------------------------------------------


def words(text: str) -> set[str]:
    """Lower-case alphanumeric words: what the metadata ranker compares."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _metadata_text(row: Mapping[str, Any]) -> str:
    values = []
    for column in METADATA_COLUMNS:
        value = row.get(column)
        values.extend(value if isinstance(value, list) else [value] if value else [])
    return " ".join(str(v) for v in values)


def _rank(candidates: list[str], score: Mapping[str, float]) -> tuple[str, ...]:
    """Best score first; ties by ref id, so the order never depends on anything but the scores."""
    return tuple(sorted(candidates, key=lambda ref: (-score[ref], ref)))


def metadata_rankings(data: BenchmarkData) -> dict[tuple[str, str], tuple[str, ...]]:
    """Rank each slot's candidates by how many query words their metadata holds (no image read)."""
    table = data.reference_table.remove_columns(
        [c for c in data.reference_table.column_names if c not in (data.spec.reference_id, *METADATA_COLUMNS)]
    )
    text = {row[data.spec.reference_id]: words(_metadata_text(row)) for row in table}
    out = {}
    for key, row in retrieval_rows(data).items():
        query = words(row["query"])
        out[key] = _rank(
            list(row["candidate_ref_ids"]), {ref: len(query & text[ref]) for ref in row["candidate_ref_ids"]}
        )
    return out


def clip_rankings(
    data: BenchmarkData, options: Any, cache_dir: Path
) -> tuple[dict[tuple[str, str], tuple[str, ...]], dict]:
    """Rank each slot's candidates by the CLIP cosine of query text and candidate image.

    ``options`` is a :class:`~idbench.evaluate_pkg.context.ScoreOptions` (profile, device, batch size,
    models folder). Images and texts go through the feature store (encoded once, cached on disk).
    Returns the rankings and the model used (name, Hub id, revision, weights key).
    """
    from idbench.evaluate_pkg.context import Models
    from idbench.evaluate_pkg.features import FeatureStore

    rows = retrieval_rows(data)
    models = Models(options)
    models.preload({"clip"})
    encoder = models["clip"]
    store = FeatureStore(Path(cache_dir))
    blobs = data.reference_bytes
    candidates = sorted({ref for row in rows.values() for ref in row["candidate_ref_ids"]})
    key_of = {ref: content_hash(blobs[ref]) for ref in candidates}
    images = store.encode_images(
        encoder,
        {key_of[ref]: (lambda ref=ref: blobs[ref]) for ref in candidates},
        batch_size=options.batch_size,
        num_workers=options.num_workers,
    )
    texts = store.encode_texts(encoder, [row["query"] for row in rows.values()])
    out = {}
    for key, row in rows.items():
        refs = list(row["candidate_ref_ids"])
        sims = F.cosine_matrix(texts[row["query"]][None, :], np.stack([images[key_of[r]]["embedding"] for r in refs]))[
            0
        ]
        out[key] = _rank(refs, dict(zip(refs, sims.tolist())))
    return out, models.used({"clip"})


def write_rankings(out: Path, metadata: dict, rankings: Rankings, overwrite: bool = False) -> Path:
    """A retrieval submission folder: ``submission.json`` and ``rankings.csv``, written atomically."""
    with atomic_directory(Path(out), overwrite=overwrite) as staging:
        with (staging / RANKINGS_NAME).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(RANKING_COLUMNS)
            for (prompt_id, slot), refs in rankings.items():
                writer.writerows((prompt_id, slot, rank, ref) for rank, ref in enumerate(refs, start=1))
        (staging / METADATA_NAME).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return Path(out)


def make_retrieval_baseline(
    name: str,
    data: BenchmarkData,
    out: Path,
    *,
    options: Any = None,
    cache_dir: Path | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the ``name`` ranker's retrieval submission for ``data`` into ``out`` (see the module doc)."""
    if name not in RANKERS:
        raise ValueError(f"unknown retrieval baseline {name!r}; choose one of {', '.join(RANKERS)}")
    generation: dict[str, Any] = {"baseline": name}
    if name == "retrieval-clip":
        from idbench.evaluate_pkg.context import ScoreOptions
        from idbench.evaluate_pkg.runner import default_cache_dir

        options = options or ScoreOptions()
        rankings, used = clip_rankings(data, options, Path(cache_dir or default_cache_dir()))
        generation.update(profile=options.profile, model=used.get("clip", {}))
    else:
        rankings = metadata_rankings(data)
    metadata = {
        "benchmark": data.name,
        "model": f"baseline-{name}",
        "task": "retrieval",
        "link": "",
        "license": "",
        "generation": generation,
        "notes": NOTES[name],
        "idbench_version": idbench.__version__,
    }
    return write_rankings(out, metadata, rankings, overwrite=overwrite)
