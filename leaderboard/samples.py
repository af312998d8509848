"""The best and worst samples of a scored submission, with the images a reader compares side by side.

A model page shows, for one metric, the prompts where the model did best and worst: each generated
image next to the reference images of its prompt, and the judge's evidence where a judged metric
kept some. Everything is read from what the worker left behind: the per-sample ``results.parquet``
(and ``judge_evidence.parquet`` when a judge ran) in the result folder, the stored submission's
``manifest.csv``, and the built benchmark's reference tables.

Example::

    scores = sample_scores(result_dir, "dino_sim")
    best, worst = extremes(scores, higher_is_better=True, k=4)
    for row in best.itertuples():
        image = generation_file(stored_path, row.prompt_id, row.seed)
        refs = reference_ids(data, row.prompt_id)
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd

from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.submission import MANIFEST_NAME

RESULTS_FILE = "results.parquet"


def sample_scores(result_dir: Path, metric: str) -> pd.DataFrame:
    """``prompt_id, seed, value`` for ``metric``: one row per generated image, NaN rows dropped.

    A per-subject metric (one value per reference in the image) is averaged over its subjects, so
    an image has one number to rank by. Empty when the result has no values for ``metric``.
    """
    path = Path(result_dir) / RESULTS_FILE
    if not path.is_file():
        return pd.DataFrame(columns=["prompt_id", "seed", "value"])
    frame = pd.read_parquet(path, columns=["prompt_id", "seed", "metric", "value"])
    frame = frame[(frame["metric"] == metric) & frame["value"].notna()]
    means = frame.groupby(["prompt_id", "seed"], as_index=False, sort=True)["value"].mean()
    return means.reset_index(drop=True)


def extremes(scores: pd.DataFrame, higher_is_better: bool, k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``k`` best and ``k`` worst images, best first and worst first; ties broken by prompt and seed.

    With fewer than ``2k`` images the two lists share none: the worst list takes what the best left.
    """
    ordered = scores.sort_values(["prompt_id", "seed"], kind="stable")
    ordered = ordered.sort_values("value", ascending=not higher_is_better, kind="stable").reset_index(drop=True)
    best = ordered.head(k)
    rest = ordered.iloc[len(best):]
    worst = rest.iloc[::-1].head(k)
    return best.reset_index(drop=True), worst.reset_index(drop=True)


def generation_file(stored_path: Path, prompt_id: str, seed: int) -> Path:
    """The stored image of ``(prompt_id, seed)``; KeyError names a pair the manifest lacks.

    The stored manifest was written by :func:`idbench.leaderboard.queue.submit` (after validation), and its
    file names are the images' content hashes inside the stored folder, so the path cannot escape it.
    """
    stored_path = Path(stored_path)
    with (stored_path / MANIFEST_NAME).open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["prompt_id"] == prompt_id and int(row["seed"]) == int(seed):
                return stored_path / row["file"]
    raise KeyError(f"{stored_path / MANIFEST_NAME}: no image for prompt {prompt_id!r} seed {seed}")


def reference_ids(data: BenchmarkData, prompt_id: str) -> list[str]:
    """The reference images a prompt's generation should preserve, in the prompt's order.

    CHARIS: its one subject; identity collapse: every subject; CogCanvas: each person, then each
    person's item, then the background.
    """
    prompt = data.prompt_rows[prompt_id]
    if "subject_ids" in prompt:
        return list(prompt["subject_ids"])
    if "subject_id" in prompt:
        return [prompt["subject_id"]]
    persons = prompt.get("persons") or []
    ids = [p["ref_id"] for p in persons] + [p["item_ref_id"] for p in persons if p.get("item_ref_id")]
    if prompt.get("background_ref_id"):
        ids.append(prompt["background_ref_id"])
    return ids


def evidence(result_dir: Path, prompt_id: str, seed: int) -> dict[str, Any]:
    """``{metric: evidence}`` a judge kept for one image (decoded JSON); empty when no judge ran."""
    # Imported here: the scorer's module pulls in torch, which the app (a Space reading the Hub mirror,
    # docs/deploy.md) need not install; only a model page with a judge's evidence reads it.
    from idbench.evaluate_pkg.runner import EVIDENCE_FILE  # prompt_id, seed, metric, evidence (a JSON string)

    path = Path(result_dir) / EVIDENCE_FILE
    if not path.is_file():
        return {}
    frame = pd.read_parquet(path)
    rows = frame[(frame["prompt_id"] == prompt_id) & (frame["seed"] == int(seed))]
    return {row.metric: json.loads(row.evidence) for row in rows.itertuples()}
