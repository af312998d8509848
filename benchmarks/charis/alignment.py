"""The human alignment study of CHARIS (paper 000, Tables 1-3): how well each metric agrees with people.

Inputs:

- **ratings**: one row per (model, prompt_id, annotator) with a ``category`` (exact, near_exact,
  partial, mismatch), e.g. the CHARIS dataset's optional ``human_ratings`` config. Categories become
  numbers through the EKB (``ekb/data/categories.yaml``), the one place that mapping is written.
- **scores**: per-sample metric values (model, prompt_id, seed, metric, value), e.g. the
  ``results.parquet`` files of ``idbench score`` runs on the same prompts, one run per model.
- **prompts**: prompt_id -> (type, style), from the CHARIS ``prompts`` config.

An *item* is one (model, prompt): its human score is the mean of its annotators' numbers, its metric
value the mean over seeds. The study computes, with percentile bootstrap CIs that resample prompts
(all models' items of a drawn prompt go together; seeded, so reruns agree):

- **Table 1** (per model): per model, Pearson r over that model's items between each metric and the
  human score (the paper's G-H, C-H, D-H columns) and the human-human agreement H-H; plus a
  *system-level* row: r across models between per-model mean metric and per-model mean human score
  (undefined below 3 models).
- **Table 2** (per type x style): the same item-level r's and H-H, over the items of each cell, all
  models pooled.
- **Table 3** (per model): the mean human score and the mean of each metric over the rated items.

**Same items.** Within a table, every column of a row is computed over the same items: those where
the human score and every metric are defined (:func:`same_items`). An item the judge could not
categorise (``charis_score`` NaN) leaves the human and embedding columns of its row too; ``items``
and ``dropped`` count them per row and ``note`` says why.

**Further statistics** beside the paper's Pearson r (:data:`STATISTICS`), all on the same bootstrap
draws: Spearman rho and Kendall tau-b (scipy) for every pair; where both sides are on the four
categories (H-H, and the CHARIS judge's category against each annotator's) Cohen's kappa with
quadratic weights (torchmetrics) and Krippendorff's alpha at the ordinal level (krippendorff).
Pearson keeps its columns (``<pair> r/low/high/n``); the others are ``<pair> <statistic>`` with
``low``/``high``/``n`` after it. docs/alignment.md gives the choices and their reasons.

**H-H**, our reading of the paper: it had two annotators per model and reports their Pearson
correlation. Per item we sort the annotators by id and split them into two halves (even and odd
positions); H-H is Pearson r between the halves' mean ratings over the items of the group. With two
annotators per item this is exactly the correlation of one annotator with the other; with more it is a
split-half correlation (no Spearman-Brown correction). Items with a single rating take no part in
H-H. A metric is compared with the mean of *all* annotators, as the paper's h-bar (the mean of the two
normalised ratings), so G-H targets a less noisy score than H-H does.

Everything but :func:`run_study` and the readers is a pure function over DataFrames.

Example::

    ratings = read_ratings("built/charis")                   # or a human_ratings.csv
    scores = read_scores(["scores/uno", "scores/dsd", "scores/omnigen"])
    prompts = read_prompts("built/charis")
    run_study(ratings, scores, prompts, Path("alignment"))
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from idbench.atomic import atomic_directory
from idbench.errors import IdbenchError

# The agreement statistics and their bootstrap intervals are generic (any benchmark with human ratings).
from idbench.evaluate_pkg.functional.agreement import (
    CATEGORICAL_STATISTICS,
    KAPPA,
    MIN_POINTS,
    PEARSON,
    STATISTIC_LABELS,
    STATISTICS,
    Correlation,
    categorical_agreement,
    category_labels,
    item_correlation,
    rank_correlation,
    system_correlation,
)

# The project's one cluster bootstrap (prompts drawn with replacement, each with all its items): the
# aggregates of `idbench score` draw from it too, so both kinds of interval resample the same unit.
from idbench.evaluate_pkg.functional.bootstrap import cluster_bootstrap_weights
from idbench.evaluate_pkg.results import SAMPLES_FILE, read_parquet_file

RATING_COLUMNS = ("model", "prompt_id", "annotator", "category")
SCORE_COLUMNS = ("model", "prompt_id", "seed", "metric", "value")
PROMPT_COLUMNS = ("prompt_id", "type", "style")
HUMAN = "human"  # the mean human score's column in the item table and in Table 3
HH = "H-H"  # the human-human pair's name in Tables 1 and 2
SYSTEM = "system (per-model means)"  # Table 1's across-model row
PAPER_METRICS = ("charis_score", "clip_i", "dino_sim")  # Tables 1-3's G, C and D columns

TABLE_FILES = {"table1": "table1_per_model", "table2": "table2_type_style", "table3": "table3_mean_scores"}
PLOT_FILE = "table1_per_model.png"


class AlignmentError(IdbenchError, ValueError):
    """Input the study cannot use, named: the file, row, model or prompt, and what is wrong."""


@dataclass
class StudyResult:
    """The three tables (wide, as written to CSV), the item table they come from, and notes."""

    table1: pd.DataFrame
    table2: pd.DataFrame
    table3: pd.DataFrame
    items: pd.DataFrame
    metrics: list[str]
    notes: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


# --- the category -> number mapping ------------------------------------------------------------------


def category_scores(ekb: Any = None) -> dict[str, float]:
    """Category -> normalised score, from the EKB (exact 1, near_exact 2/3, partial 1/3, mismatch 0)."""
    if ekb is None:
        from idbench.ekb import load_ekb

        ekb = load_ekb()
    return {name: float(category.score) for name, category in ekb.categories.items()}


# --- input checks and item tables (pure) -------------------------------------------------------------


def _where(frame: pd.DataFrame, name: str) -> str:
    return str(frame.attrs.get("source", name))


def _require_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise AlignmentError(
            f"{_where(frame, name)}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}, "
            f"found {', '.join(map(str, frame.columns))}"
        )


def rating_values(ratings: pd.DataFrame, scores: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The ratings with a numeric ``rating`` column; one clear error per kind of bad row.

    Rows are numbered from 1 in the order given (the data rows of a CSV file). Raises
    :class:`AlignmentError` for a missing column, an empty field, an unknown category, or the same
    (model, prompt_id, annotator) twice.
    """
    _require_columns(ratings, RATING_COLUMNS, "ratings")
    scores = category_scores() if scores is None else dict(scores)
    where = _where(ratings, "ratings")
    frame = ratings.loc[:, list(RATING_COLUMNS)].copy()
    for column in RATING_COLUMNS:
        frame[column] = frame[column].map(lambda v: v.strip() if isinstance(v, str) else v)
    for number, row in enumerate(frame.itertuples(index=False), start=1):
        empty = [c for c in RATING_COLUMNS if not isinstance(getattr(row, c), str) or not getattr(row, c)]
        if empty:
            raise AlignmentError(f"{where}, row {number}: empty or non-text {', '.join(empty)}")
        if row.category not in scores:
            raise AlignmentError(
                f"{where}, row {number}: category {row.category!r} (model {row.model}, prompt {row.prompt_id}) "
                f"is not one of {', '.join(scores)}"
            )
    duplicated = frame.duplicated(["model", "prompt_id", "annotator"], keep="first")
    if duplicated.any():
        number = int(np.flatnonzero(duplicated.to_numpy())[0]) + 1
        row = frame.iloc[number - 1]
        raise AlignmentError(
            f"{where}, row {number}: a second rating by {row.annotator} of model {row.model}, prompt {row.prompt_id}"
        )
    frame["rating"] = frame["category"].map(scores).astype("float64")
    return frame


def human_items(rated: pd.DataFrame) -> pd.DataFrame:
    """Per (model, prompt_id): the mean rating (``human``), the two split halves, the annotator count
    and the ratings themselves.

    Annotators of an item are sorted by id; ``half_a`` is the mean of those at even positions,
    ``half_b`` of those at odd positions (NaN with a single annotator); ``ratings`` is the tuple of
    all of them in that order (for Krippendorff's alpha, which takes every annotator).
    """
    rows = []
    for (model, prompt_id), group in rated.sort_values("annotator").groupby(["model", "prompt_id"], sort=True):
        values = group["rating"].to_numpy(dtype=np.float64)
        rows.append(
            {
                "model": model,
                "prompt_id": prompt_id,
                HUMAN: float(values.mean()),
                "half_a": float(values[0::2].mean()),
                "half_b": float(values[1::2].mean()) if len(values) > 1 else math.nan,
                "n_annotators": len(values),
                "ratings": tuple(float(v) for v in values),
            }
        )
    return pd.DataFrame(rows, columns=["model", "prompt_id", HUMAN, "half_a", "half_b", "n_annotators", "ratings"])


def metric_items(scores: pd.DataFrame, metrics: Sequence[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Per (model, prompt_id): each metric's mean over seeds (NaN values skipped), one column per metric.

    Only whole-image rows are used (``subject`` empty, when the column exists). Returns the table and
    the metrics in it: ``metrics`` if given (each must occur), else those of ``PAPER_METRICS`` present,
    else the CHARIS suite's metrics present, in the suite's order, else every metric present. The same (model, prompt, seed, metric) twice (a
    model scored in two runs) is an error naming it.
    """
    _require_columns(scores, SCORE_COLUMNS, "scores")
    frame = scores
    if "subject" in frame.columns:
        frame = frame[frame["subject"].fillna("") == ""]
    frame = frame.loc[:, list(SCORE_COLUMNS)]
    key = ["model", "prompt_id", "seed", "metric"]
    duplicated = frame.duplicated(key)
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise AlignmentError(
            f"{_where(scores, 'scores')}: {row.metric} of model {row.model}, prompt {row.prompt_id}, seed {row.seed} "
            "appears twice (the same model scored in two runs?)"
        )
    present = list(dict.fromkeys(frame["metric"]))
    if metrics is None:
        # The paper's columns (G, C, D) by default: under the same-items rule every further metric
        # could only take items away from them (charis_score_itt is NaN on every hide-prompt, say).
        chosen = [m for m in PAPER_METRICS if m in present]
        if not chosen:
            from idbench.benchmarks.charis.spec import SPEC

            chosen = [m.name for m in SPEC.metric_suite if m.name in present] or sorted(present)
    else:
        unknown = [m for m in metrics if m not in present]
        if unknown:
            held = ", ".join(sorted(present))
            raise AlignmentError(f"no scores for metric(s) {', '.join(unknown)}; the scores hold {held}")
        chosen = list(metrics)
    frame = frame[frame["metric"].isin(chosen)]
    wide = frame.groupby(["model", "prompt_id", "metric"], sort=True)["value"].mean().unstack("metric")
    wide = wide.reindex(columns=chosen).reset_index()
    wide.columns.name = None
    return wide, chosen


def _prompt_frame(prompts: pd.DataFrame | Mapping[str, tuple[str, str]]) -> pd.DataFrame:
    if isinstance(prompts, Mapping):
        return pd.DataFrame([(p, t, s) for p, (t, s) in prompts.items()], columns=list(PROMPT_COLUMNS))
    _require_columns(prompts, PROMPT_COLUMNS, "prompts")
    return prompts.loc[:, list(PROMPT_COLUMNS)].drop_duplicates()


def study_items(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    prompts: pd.DataFrame | Mapping[str, tuple[str, str]],
    metrics: Sequence[str] | None = None,
    category_map: Mapping[str, float] | None = None,
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The item table (model, prompt_id, type, style, human, half_a, half_b, n_annotators, ratings,
    metrics...), the metrics, and notes on what was left out.

    Raises :class:`AlignmentError` for a rated model with no scores at all or none for its rated
    prompts, and for rated prompts without a type and style. Scores of models nobody rated are ignored
    (noted); a rated item lacking a metric stays in the item table but the tables leave it out of
    every column of its rows, so that all columns compare the same items (noted here, counted per row).
    """
    human = human_items(rating_values(ratings, category_map))
    values, chosen = metric_items(scores, metrics)
    notes = []
    scored_models = set(values["model"])
    missing = sorted(set(human["model"]) - scored_models)
    if missing:
        held = ", ".join(sorted(scored_models)) or "none"
        raise AlignmentError(
            f"no scores for rated model(s) {', '.join(missing)}; the scores hold {held} "
            "(model names must match the ratings' exactly)"
        )
    unrated = sorted(scored_models - set(human["model"]))
    if unrated:
        notes.append(f"scores of models without ratings ignored: {', '.join(unrated)}")
    items = human.merge(values, on=["model", "prompt_id"], how="left")
    for model, group in items.groupby("model", sort=True):
        if group[chosen].isna().all(axis=None):
            raise AlignmentError(
                f"model {model}: none of its {len(group)} rated prompts has a score (e.g. {group['prompt_id'].iloc[0]}); "
                "were the ratings and the scores made on the same prompts?"
            )
        for metric in chosen:
            lacking = int(group[metric].isna().sum())
            if lacking:
                notes.append(
                    f"model {model}: {lacking} of {len(group)} rated prompts have no {metric} score; "
                    "left out of every column (all columns compare the same items)"
                )
    cells = _prompt_frame(prompts)
    repeated = cells["prompt_id"][cells["prompt_id"].duplicated()]
    if len(repeated):
        raise AlignmentError(f"prompts: prompt {repeated.iloc[0]} has two (type, style) cells")
    items = items.merge(cells, on="prompt_id", how="left")
    unknown = sorted(items.loc[items["type"].isna(), "prompt_id"].unique())
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise AlignmentError(f"rated prompt(s) {shown} are not among the prompts (another build or seed?)")
    columns = ["model", "prompt_id", "type", "style", HUMAN, "half_a", "half_b", "n_annotators", "ratings", *chosen]
    return items.loc[:, columns].reset_index(drop=True), chosen, notes


# --- which metrics are on the categories ------------------------------------------------------------

# Metrics whose per-sample value is the score of one of the four categories (the judge's category),
# so kappa and alpha can set them against the annotators' categories. charis_score_itt's 0 for "not
# confirmed" is scored as a mismatch, so it is on the categories too; holistic_score has five levels.
CATEGORICAL_METRICS = ("charis_score", "charis_score_itt")


def categorical_units(
    group: pd.DataFrame, name: str, statistic: str, scores: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """The (coders, units) label matrix and each unit's item position for one pair of a row.

    - H-H, kappa: one unit per item with exactly two annotators (first vs second by id); kappa is a
      two-rater statistic, and with more annotators the halves are means, not categories.
    - H-H, alpha: one unit per item with two or more ratings, every annotator a coder (alpha takes
      any number of coders and missing ratings).
    - a categorical metric vs humans, both: one unit per (item, annotator), the metric's category
      against that annotator's, for items whose metric value is a category score (a judge with one
      seed, or seeds that agree) - the judge set against each person, as H-H sets person against person.
    """
    if name == HH and statistic == KAPPA:
        two = np.flatnonzero(group["n_annotators"].to_numpy() == 2)
        labels = np.vstack(
            [
                category_labels(group["half_a"].to_numpy(float)[two], scores),
                category_labels(group["half_b"].to_numpy(float)[two], scores),
            ]
        )
        return labels, two
    ratings = group["ratings"].tolist()
    if name == HH:
        several = np.array([k for k, r in enumerate(ratings) if len(r) >= 2], dtype=np.int64)
        width = max((len(ratings[k]) for k in several), default=2)
        labels = np.full((width, len(several)), np.nan)
        for column, k in enumerate(several):
            labels[: len(ratings[k]), column] = category_labels(ratings[k], scores)
        return labels, several
    judged = category_labels(group[name].to_numpy(float), scores)
    pairs = [
        (k, judged[k], person)
        for k in range(len(group))
        if not np.isnan(judged[k])
        for person in category_labels(ratings[k], scores)
    ]
    unit_item = np.array([k for k, _, _ in pairs], dtype=np.int64)
    labels = np.array([[j for _, j, _ in pairs], [p for _, _, p in pairs]], dtype=np.float64).reshape(2, len(pairs))
    return labels, unit_item


# --- the tables (pure) -------------------------------------------------------------------------------


def _pairs(metrics: Sequence[str]) -> list[tuple[str, str, str]]:
    """(name, x column, y column) of every correlation a row holds: H-H, then each metric vs human."""
    return [(HH, "half_a", "half_b"), *[(m, m, HUMAN) for m in metrics]]


def _categorical_pairs(metrics: Sequence[str]) -> list[str]:
    """The pairs kappa and alpha apply to: both sides on the four categories."""
    return [HH, *[m for m in metrics if m in CATEGORICAL_METRICS]]


def _check_statistics(statistics: Sequence[str]) -> list[str]:
    unknown = [s for s in statistics if s not in STATISTICS]
    if unknown:
        raise AlignmentError(f"unknown statistic(s) {', '.join(unknown)}; known: {', '.join(STATISTICS)}")
    # Pearson is the paper's column and always there; the others follow in a fixed order.
    return [s for s in STATISTICS if s == PEARSON or s in statistics]


def _cell_columns(statistic: str, name: str) -> tuple[str, str, str, str]:
    """The (value, low, high, n) columns of one cell: Pearson keeps the names the tables always had."""
    if statistic == PEARSON:
        return f"{name} r", f"{name} low", f"{name} high", f"{name} n"
    return f"{name} {statistic}", f"{name} {statistic} low", f"{name} {statistic} high", f"{name} {statistic} n"


def _cell_keys(metrics: Sequence[str], statistics: Sequence[str]) -> list[tuple[str, str]]:
    keys = [(s, name) for s in statistics if s not in CATEGORICAL_STATISTICS for name, _, _ in _pairs(metrics)]
    return keys + [(s, name) for s in statistics if s in CATEGORICAL_STATISTICS for name in _categorical_pairs(metrics)]


def same_items(items: pd.DataFrame, metrics: Sequence[str]) -> np.ndarray:
    """The items every compared column is defined on (the human score and every metric): the tables
    compute all columns of a row over these, so the columns compare the same items."""
    return items[[HUMAN, *metrics]].notna().all(axis=1).to_numpy()


def _dropped(group: pd.DataFrame, metrics: Sequence[str]) -> tuple[pd.DataFrame, int, str]:
    """The group's items kept by :func:`same_items`, how many were dropped and why (a note)."""
    keep = same_items(group, metrics)
    dropped = int((~keep).sum())
    if not dropped:
        return group, 0, ""
    lacking = [f"{int(group[c].isna().sum())} without {c}" for c in [HUMAN, *metrics] if group[c].isna().any()]
    note = f"{dropped} of {len(group)} item(s) left out of every column ({', '.join(lacking)})"
    return group[keep], dropped, note


def _row(
    labels: Mapping[str, Any], cells: Mapping[tuple[str, str], Correlation], kept: int, dropped: int, note: str
) -> dict[str, Any]:
    row = dict(labels)
    for (statistic, name), cell in cells.items():
        row.update(dict(zip(_cell_columns(statistic, name), (cell.r, cell.low, cell.high, cell.n))))
    row.update({"items": kept, "dropped": dropped})
    notes = [note] if note else []
    row["note"] = "; ".join(dict.fromkeys(notes + [c.note for c in cells.values() if c.note]))
    return row


def _columns(labels: Sequence[str], metrics: Sequence[str], statistics: Sequence[str] = (PEARSON,)) -> list[str]:
    cells = [c for statistic, name in _cell_keys(metrics, statistics) for c in _cell_columns(statistic, name)]
    return [*labels, *cells, "items", "dropped", "note"]


def _item_cells(
    group: pd.DataFrame,
    metrics: Sequence[str],
    weights: np.ndarray,
    confidence: float,
    statistics: Sequence[str],
    scores: Mapping[str, float],
) -> dict[tuple[str, str], Correlation]:
    """Every cell of an item-level row, all statistics drawing on the same bootstrap ``weights``."""
    cells: dict[tuple[str, str], Correlation] = {}
    columns = {name: (a, b) for name, a, b in _pairs(metrics)}
    n_levels = len(set(scores.values()))
    for statistic, name in _cell_keys(metrics, statistics):
        what = name if statistic == PEARSON else f"{name} {statistic}"
        if statistic in CATEGORICAL_STATISTICS:
            labels, unit_item = categorical_units(group, name, statistic, scores)
            cell = categorical_agreement(statistic, labels, unit_item, weights, confidence, what, n_levels)
            off = 0 if name == HH else int(np.isnan(category_labels(group[name].to_numpy(float), scores)).sum())
            if off:  # a mean over seeds that disagree is no category: kappa and alpha cannot take it
                extra = f"{name} kappa, alpha: {off} of {len(group)} item(s) not on the categories, left out"
                cell = Correlation(cell.r, cell.low, cell.high, cell.n, "; ".join(filter(None, [cell.note, extra])))
            cells[(statistic, name)] = cell
            continue
        a, b = columns[name]
        x, y = group[a].to_numpy(float), group[b].to_numpy(float)
        if statistic == PEARSON:
            cells[(statistic, name)] = item_correlation(x, y, weights, confidence, what)
        else:
            cells[(statistic, name)] = rank_correlation(statistic, x, y, weights, confidence, what)
    return cells


def table1(
    items: pd.DataFrame,
    metrics: Sequence[str],
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    *,
    statistics: Sequence[str] = STATISTICS,
    category_map: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Per model: item-level agreement of H-H and of each metric vs human; then the system-level row.

    Each row uses the same items in every column (:func:`same_items`); ``items`` and ``dropped``
    count them. Kappa and alpha are undefined in the system-level row (per-model means are no
    categories)."""
    statistics = _check_statistics(statistics)
    scores = category_scores() if category_map is None else dict(category_map)
    rows = []
    for model, group in items.groupby("model", sort=True):
        group, dropped, note = _dropped(group, metrics)
        weights = cluster_bootstrap_weights(group["prompt_id"], n_boot, seed)
        cells = _item_cells(group, metrics, weights, confidence, statistics, scores)
        rows.append(_row({"model": model, "level": "items"}, cells, len(group), dropped, note))
    kept, dropped, note = _dropped(items, metrics)
    weights = cluster_bootstrap_weights(kept["prompt_id"], n_boot, seed)
    models = kept["model"].to_numpy(object)
    columns = {name: (a, b) for name, a, b in _pairs(metrics)}
    cells = {}
    for statistic, name in _cell_keys(metrics, statistics):
        if statistic in CATEGORICAL_STATISTICS:
            cells[(statistic, name)] = Correlation(
                math.nan, math.nan, math.nan, 0, "kappa, alpha: per-model means are no categories"
            )
            continue
        a, b = columns[name]
        what = name if statistic == PEARSON else f"{name} {statistic}"
        cells[(statistic, name)] = system_correlation(
            kept[a].to_numpy(float), kept[b].to_numpy(float), models, weights, confidence, what, statistic
        )
    rows.append(_row({"model": SYSTEM, "level": "models"}, cells, len(kept), dropped, note))
    return pd.DataFrame(rows, columns=_columns(["model", "level"], metrics, statistics))


def table2(
    items: pd.DataFrame,
    metrics: Sequence[str],
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    order: tuple[Sequence[str], Sequence[str]] | None = None,
    *,
    statistics: Sequence[str] = STATISTICS,
    category_map: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Per (type, style) cell, all models pooled: item-level agreement of H-H and of each metric vs
    human, over the same items in every column.

    Cells come in ``order`` (types, styles), by default the EKB's; cells of other names after them.
    """
    statistics = _check_statistics(statistics)
    scores = category_scores() if category_map is None else dict(category_map)
    types, styles = order if order is not None else _ekb_order()
    rank = lambda value, known: (known.index(value), "") if value in known else (len(known), value)  # noqa: E731
    keys = sorted(
        set(zip(items["type"], items["style"])), key=lambda c: (rank(c[0], list(types)), rank(c[1], list(styles)))
    )
    rows = []
    for type_, style in keys:
        group = items[(items["type"] == type_) & (items["style"] == style)]
        group, dropped, note = _dropped(group, metrics)
        weights = cluster_bootstrap_weights(group["prompt_id"], n_boot, seed)
        cells = _item_cells(group, metrics, weights, confidence, statistics, scores)
        rows.append(_row({"type": type_, "style": style}, cells, len(group), dropped, note))
    return pd.DataFrame(rows, columns=_columns(["type", "style"], metrics, statistics))


def table3(items: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Per model: the mean human score and each metric's mean, all over the same items (those where
    every column is defined, :func:`same_items`); ``dropped`` counts the rated items left out.

    Metric values are the raw per-sample values (a cosine stays a cosine); ``charis_score`` is already
    on the EKB's 0-1 scale, as the human score is.
    """
    rows = []
    for model, group in items.groupby("model", sort=True):
        kept, dropped, _ = _dropped(group, metrics)
        row: dict[str, Any] = {"model": model, "items": len(kept), "dropped": dropped}
        row.update({c: float(kept[c].mean()) if len(kept) else math.nan for c in [HUMAN, *metrics]})
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "items", "dropped", HUMAN, *metrics])


def _ekb_order() -> tuple[list[str], list[str]]:
    from idbench.benchmarks.charis.spec import STYLES, TYPES

    return list(TYPES), list(STYLES)


def compute_study(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    prompts: pd.DataFrame | Mapping[str, tuple[str, str]],
    *,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    category_map: Mapping[str, float] | None = None,
    statistics: Sequence[str] = STATISTICS,
) -> StudyResult:
    """All three tables from the inputs; nothing is written. ``statistics``: which agreement statistics
    besides Pearson (always there) the tables carry (:data:`STATISTICS`)."""
    statistics = _check_statistics(statistics)
    if n_boot < 1:
        raise AlignmentError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise AlignmentError(f"confidence must be in (0, 1), got {confidence}")
    items, chosen, notes = study_items(ratings, scores, prompts, metrics, category_map)
    n_models = items["model"].nunique()
    if n_models < MIN_POINTS:
        notes.append(f"{n_models} rated model(s): the system-level row needs {MIN_POINTS} and is left undefined")
    if "plumbing" in scores.columns and scores["plumbing"].astype(bool).any():
        notes.append("some scores come from the `tiny` profile (random weights): a plumbing check, not a finding")
    used_map = category_scores() if category_map is None else dict(category_map)
    dropped = int((~same_items(items, chosen)).sum())
    if dropped:
        notes.append(
            f"{dropped} of {len(items)} rated item(s) lack the human score or a metric and are left out of every "
            "column of their rows, so that each row's columns compare the same items (counted in `dropped`)"
        )
    return StudyResult(
        table1=table1(items, chosen, n_boot, confidence, seed, statistics=statistics, category_map=used_map),
        table2=table2(items, chosen, n_boot, confidence, seed, statistics=statistics, category_map=used_map),
        table3=table3(items, chosen),
        items=items,
        metrics=chosen,
        notes=notes,
        options={
            "n_boot": n_boot,
            "confidence": confidence,
            "seed": seed,
            "category_scores": used_map,
            "statistics": statistics,
        },
    )


# --- presentation ------------------------------------------------------------------------------------


def _fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _cell(row: Mapping[str, Any], name: str, statistic: str = PEARSON, with_n: bool = False) -> str:
    value_column, low_column, high_column, n_column = _cell_columns(statistic, name)
    r = row[value_column]
    if isinstance(r, float) and math.isnan(r):
        return "n/a"
    low, high = row[low_column], row[high_column]
    interval = "" if math.isnan(low) else f" [{_fmt(low, 2)}, {_fmt(high, 2)}]"
    units = f" (n={int(row[n_column])})" if with_n else ""
    return f"{_fmt(r)}{interval}{units}"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    escape = lambda text: str(text).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(map(escape, header)) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(map(escape, row)) + " |" for row in rows]
    return lines


def correlation_markdown(
    table: pd.DataFrame, labels: Sequence[str], metrics: Sequence[str], statistic: str = PEARSON
) -> list[str]:
    """A Table 1 / Table 2 in the paper's layout for one statistic: label columns, n, H-H, one
    "<metric>-H" column per metric the statistic applies to. Pearson's table (the paper's) carries the
    notes; kappa and alpha cells give their unit count (rating pairs, not items)."""
    categorical = statistic in CATEGORICAL_STATISTICS
    names = _categorical_pairs(metrics) if categorical else [name for name, _, _ in _pairs(metrics)]
    header = [*labels, "n", *[HH if n == HH else f"{n}-H" for n in names]]
    header += ["notes"] if statistic == PEARSON else []
    rows = []
    for row in table.to_dict("records"):
        n = max(int(row[_cell_columns(PEARSON, name)[3]]) for name, _, _ in _pairs(metrics))
        line = [*(str(row[c]) for c in labels), str(n), *[_cell(row, name, statistic, categorical) for name in names]]
        rows.append(line + ([row["note"]] if statistic == PEARSON else []))
    return _md_table(header, rows)


def means_markdown(table: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """Table 3 in the paper's layout: model, items used, items dropped, mean human score, mean of each metric."""
    header = ["model", "items", "dropped", "human (h-bar)", *metrics]
    rows = [
        [str(r["model"]), str(r["items"]), str(r["dropped"]), _fmt(r[HUMAN]), *[_fmt(r[m]) for m in metrics]]
        for r in table.to_dict("records")
    ]
    return _md_table(header, rows)


_LEGEND = (
    "Each cell: the statistic with a {confidence:.0%} percentile bootstrap CI over prompts ({n_boot} resamples, "
    "seed {seed}; every statistic of a row uses the same draws). "
    "H-H: agreement between the two halves of each item's annotators (two annotators: one vs the other). "
    "<metric>-H: the metric vs the mean human score. n: items correlated (models in the system-level row); "
    "every column of a row is computed over the same items (those where the human score and every metric "
    "are defined; the rest are counted in the CSV's `dropped` and in the notes)."
)
_CATEGORICAL_LEGEND = (
    "Only where both sides are on the four categories: H-H, and the judge's category vs each annotator's "
    "(one unit per item and annotator, so n counts rating pairs). Kappa: items with exactly two annotators, "
    "first vs second. Alpha: every annotator of an item."
)


def _statistic_sections(result: StudyResult, table: pd.DataFrame, labels: Sequence[str]) -> list[str]:
    """Pearson's table (the paper's), then one table per further statistic."""
    statistics = result.options.get("statistics", [PEARSON])
    lines = correlation_markdown(table, labels, result.metrics)
    for statistic in statistics:
        if statistic == PEARSON:
            continue
        lines += ["", f"### {STATISTIC_LABELS[statistic]}", ""]
        if statistic in CATEGORICAL_STATISTICS:
            lines += [_CATEGORICAL_LEGEND, ""]
        lines += correlation_markdown(table, labels, result.metrics, statistic)
    return lines


def markdown_tables(result: StudyResult) -> dict[str, str]:
    """The Markdown text of each table (file stem -> text)."""
    legend = _LEGEND.format(**result.options)
    m = result.metrics
    return {
        TABLE_FILES["table1"]: "\n".join(
            [
                "## Table 1: correlation with human ratings, per model",
                "",
                legend,
                "",
                "### Pearson r (the paper's)",
                "",
                *_statistic_sections(result, result.table1, ["model"]),
            ]
        )
        + "\n",
        TABLE_FILES["table2"]: "\n".join(
            [
                "## Table 2: correlation with human ratings, per subject type x style (models pooled)",
                "",
                legend,
                "",
                "### Pearson r (the paper's)",
                "",
                *_statistic_sections(result, result.table2, ["type", "style"]),
            ]
        )
        + "\n",
        TABLE_FILES["table3"]: "\n".join(
            [
                "## Table 3: mean scores per model",
                "",
                "Human: mean of the annotators' normalised ratings (EKB scores: "
                + ", ".join(f"{k} {v:.3g}" for k, v in result.options["category_scores"].items())
                + "); metrics: mean raw per-sample value; all columns over the same rated items (those where every "
                "column is defined; `dropped` counts the others).",
                "",
                *means_markdown(result.table3, m),
            ]
        )
        + "\n",
    }


def plot_table1(result: StudyResult, path: Path) -> None:
    """Grouped bars of Table 1 (H-H and each metric per model, then the system-level row), CI whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = result.table1
    names = [HH, *result.metrics]
    x = np.arange(len(table))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(table)), 4.0))
    for k, name in enumerate(names):
        r = table[f"{name} r"].to_numpy(float)
        low, high = table[f"{name} low"].to_numpy(float), table[f"{name} high"].to_numpy(float)
        errors = np.vstack([np.clip(r - low, 0, None), np.clip(high - r, 0, None)])
        errors = np.nan_to_num(errors)
        label = name if name == HH else f"{name}-H"
        offsets = x + (k - (len(names) - 1) / 2) * width
        ax.bar(offsets, np.nan_to_num(r), width, yerr=errors, capsize=2, label=label)
        for position in offsets[np.isnan(r)]:  # undefined, not zero: say so on the plot
            ax.text(position, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [str(m) for m in table["model"]], rotation=20, ha="right")
    ax.set_ylabel("Pearson r with human ratings")
    ax.set_ylim(-1.05, 1.05)
    ax.set_title("Agreement with human ratings per model (Table 1)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_study(result: StudyResult, out: Path, overwrite: bool = False) -> list[str]:
    """Write the tables (CSV + Markdown), the plot, ``report.md`` and ``study.json`` into ``out``.

    Written into a temporary sibling folder and moved into place when complete; an existing ``out``
    is refused unless ``overwrite``, and then replaced only once the new one is whole.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise AlignmentError(f"{out} already exists; pass overwrite=True (--overwrite) to replace it")
    with atomic_directory(out, overwrite=overwrite) as staging:
        written = []
        for key, stem in TABLE_FILES.items():
            getattr(result, key).to_csv(staging / f"{stem}.csv", index=False, float_format="%.6g")
            written.append(f"{stem}.csv")
        markdown = markdown_tables(result)
        for stem, text in markdown.items():
            (staging / f"{stem}.md").write_text(text)
            written.append(f"{stem}.md")
        plot_table1(result, staging / PLOT_FILE)
        report = ["# Human alignment study", ""]
        if result.notes:
            report += ["Notes:", "", *[f"- {note}" for note in result.notes], ""]
        for stem in TABLE_FILES.values():
            report += [markdown[stem], ""]
        report += [f"![Table 1]({PLOT_FILE})", ""]
        (staging / "report.md").write_text("\n".join(report))
        info = {
            "metrics": result.metrics,
            "models": sorted(result.items["model"].unique()),
            "items": len(result.items),
            "prompts": int(result.items["prompt_id"].nunique()),
            "items_with_two_or_more_ratings": int((result.items["n_annotators"] >= 2).sum()),
            "items_in_every_column": int(same_items(result.items, result.metrics).sum()),
            "options": result.options,
            "notes": result.notes,
        }
        (staging / "study.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        written += [PLOT_FILE, "report.md", "study.json"]
    return written


def run_study(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    prompts: pd.DataFrame | Mapping[str, tuple[str, str]],
    out: Path,
    *,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    overwrite: bool = False,
    statistics: Sequence[str] = STATISTICS,
) -> StudyResult:
    """Compute the study and write it to ``out`` (see :func:`write_study`); returns the tables."""
    if Path(out).exists() and not overwrite:  # refuse before any work
        raise AlignmentError(f"{out} already exists; pass overwrite=True (--overwrite) to replace it")
    result = compute_study(
        ratings,
        scores,
        prompts,
        metrics=metrics,
        n_boot=n_boot,
        confidence=confidence,
        seed=seed,
        statistics=statistics,
    )
    write_study(result, Path(out), overwrite=overwrite)
    return result


# --- readers (thin) ----------------------------------------------------------------------------------


def _built_config(folder: Path, config: str, columns: Sequence[str]) -> pd.DataFrame | None:
    """A config of a built dataset folder as a DataFrame, from the shards its build_info lists."""
    info_path = folder / "build_info.json"
    if not info_path.is_file():
        raise AlignmentError(f"{folder}: not a built dataset (no build_info.json) and not a CSV file")
    info = json.loads(info_path.read_text())
    if info.get("benchmark") != "charis":
        raise AlignmentError(f"{folder}: a {info.get('benchmark')} build; the study needs a CHARIS build")
    config_info = info.get("configs", {}).get(config)
    if config_info is None:
        return None
    frames = [pd.read_parquet(folder / shard, columns=list(columns)) for shard in config_info["shards"]]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns))
    frame.attrs["source"] = f"{folder} ({config} config)"
    return frame


def read_ratings(path: str | Path) -> pd.DataFrame:
    """Ratings from a CSV file (model, prompt_id, annotator, category) or a built CHARIS folder."""
    path = Path(path)
    if path.is_dir():
        frame = _built_config(path, "human_ratings", RATING_COLUMNS)
        if frame is None:
            raise AlignmentError(f"{path}: the build has no human_ratings config (its source had no human_ratings.csv)")
        return frame
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise AlignmentError(f"{path}: unreadable ratings file ({err})") from None
    frame.attrs["source"] = str(path)
    return frame


def read_prompts(path: str | Path) -> pd.DataFrame:
    """prompt_id, type, style from a built CHARIS folder's prompts config, or a CSV with those columns."""
    path = Path(path)
    if path.is_dir():
        frame = _built_config(path, "prompts", PROMPT_COLUMNS)
        if frame is None:
            raise AlignmentError(f"{path}: the build has no prompts config")
        return frame
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.attrs["source"] = str(path)
    _require_columns(frame, PROMPT_COLUMNS, "prompts")
    return frame


def read_scores(paths: Sequence[str | Path]) -> pd.DataFrame:
    """The per-sample results of several ``idbench score`` runs (``results.parquet`` files or their
    folders), concatenated. All must be CHARIS results."""
    frames = []
    for raw in paths:
        path = Path(raw)
        file = path / SAMPLES_FILE if path.is_dir() else path
        if not file.is_file():
            raise AlignmentError(
                f"{raw}: no {SAMPLES_FILE} (expected the output folder of `idbench score` or the file)"
            )
        frame = read_parquet_file(file)
        frame.attrs["source"] = str(file)
        _require_columns(frame, SCORE_COLUMNS, "scores")
        if "benchmark" in frame.columns:
            other = sorted(set(frame["benchmark"]) - {"charis"})
            if other:
                raise AlignmentError(f"{file}: results of {', '.join(other)}; the study needs CHARIS results")
        frames.append(frame)
    if not frames:
        raise AlignmentError("no score files given")
    scores = pd.concat(frames, ignore_index=True)
    scores.attrs["source"] = ", ".join(str(p) for p in paths)
    return scores


__all__ = [
    "AlignmentError",
    "StudyResult",
    "category_scores",
    "CATEGORICAL_METRICS",
    "categorical_units",
    "compute_study",
    "human_items",
    "metric_items",
    "rating_values",
    "read_prompts",
    "read_ratings",
    "read_scores",
    "run_study",
    "same_items",
    "study_items",
    "table1",
    "table2",
    "table3",
    "write_study",
]
