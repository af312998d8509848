"""The glue between the ranked table and the rank statistics of ``evaluate_pkg/functional/ranks.py``.

A rank is itself an estimate, so the board shows, per ranked model, an interval of ranks and a tier of
models it cannot be told apart from. The statistics (the joint pairwise claims, rank sets, tiers) live in
the functional package; this module feeds them and reads their answer back: the resampling design the
results recorded, one value per generated image from a ``results.parquet``, the per-prompt means of the
images every model shares, the call itself with the board's fixed draws, level and seed, and the columns
(``rank interval``, ``tier``) it adds to a ranked table, plus who shares the lead and which prompts a
breakdown cell holds. It is kept apart from :mod:`.ranking` because it is the only view code that
resamples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from idbench.builders.spec import BenchmarkSpec
from idbench.leaderboard.ranking import shared_ranks

# A rank is a statistic too: with 40 prompts two models 0.01 apart swap places in many resamples. The
# ranked table carries, per ranked model, the interval of its rank over bootstrap resamples and its tier
# (the models that cannot be told apart from the tier's leader), from the per-prompt means of the
# per-sample results. The resamples follow the benchmark's own design, as its intervals do (CHARIS:
# subjects with their prompts; Identity Collapse, CogCanvas: prompts crossed with their reused
# references; aggregates["resampling"] records it). Every model is resampled with the same draws (a drawn
# unit brings its value for every model), so the comparison is paired, on the (prompt_id, seed) pairs
# all of them share.

RANK_INTERVAL, TIER = "rank interval", "tier"
RANK_DRAWS = 1000  # bootstrap resamples behind each rank interval and tier
RANK_LEVEL = 0.95  # joint: the chance that no claim of the board (a rank set, a tier boundary) is false
RANK_SEED = 0  # fixed: the same store shows the same intervals on every render
PROMPTS_ONLY = "percentile bootstrap over prompts"  # the design of results scored before designs were recorded


def resampling_design(
    aggregates: Iterable[Mapping[str, Any]],
) -> tuple[tuple[str, ...], dict[str, dict[str, list[str]]], str]:
    """(factors, each prompt's units, method) of the resampling design the results' ``aggregates.json``
    record (``aggregates["resampling"]``): the first result that records one gives the factors and the
    method; the prompt units are merged over every result with the same factors (builds of one benchmark
    share prompt ids). Prompts alone when none records a design (older results)."""
    factors, method, units = None, PROMPTS_ONLY, {}
    for record in aggregates:
        design = (record or {}).get("resampling") if isinstance(record, Mapping) else None
        if not isinstance(design, Mapping) or not design.get("factors"):
            continue
        names = tuple(str(f) for f in design["factors"])
        if factors is None:
            factors, method = names, str(design.get("method") or method)
        if names == factors:
            for prompt, levels in (design.get("prompt_units") or {}).items():
                units.setdefault(str(prompt), {k: [str(v) for v in vals] for k, vals in (levels or {}).items()})
    return factors or ("prompt",), units, method


def sample_values(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``prompt_id, seed, value``: one value per generated image of ``metric`` from a ``results.parquet``
    frame, as the aggregates use it: the whole-image rows (subject ""), or, for a metric that has only
    per-subject rows, their mean per image. NaN values dropped."""
    rows = frame[(frame["metric"] == metric) & frame["value"].notna()]
    if "subject" in rows and (rows["subject"] == "").any():
        rows = rows[rows["subject"] == ""]
    return rows.groupby(["prompt_id", "seed"], as_index=False, sort=True)["value"].mean()


def shared_prompt_means(
    values: Mapping[int, pd.DataFrame | pd.Series], prompts: Iterable[str] | None = None
) -> pd.DataFrame:
    """Prompts x submissions: each submission's mean per prompt over the (prompt_id, seed) pairs that
    every submission of ``values`` (submission -> :func:`sample_values`, or its ``value`` column already
    indexed by ``prompt_id, seed``) has a value for, so the models are compared on the same images.
    ``prompts`` keeps only those prompts (a breakdown cell's)."""
    if not values:
        return pd.DataFrame()
    indexed = {
        int(s): frame if isinstance(frame, pd.Series) else frame.set_index(["prompt_id", "seed"])["value"]
        for s, frame in values.items()
    }
    wide = pd.concat(indexed, axis=1).dropna()
    if prompts is not None:
        wide = wide[wide.index.get_level_values("prompt_id").isin(set(prompts))]
    return wide.groupby(level="prompt_id", sort=True).mean()


def rank_uncertainty(
    means: pd.DataFrame,
    higher_is_better: bool,
    *,
    n_draws: int = RANK_DRAWS,
    level: float = RANK_LEVEL,
    seed: int = RANK_SEED,
    factors: tuple[str, ...] = ("prompt",),
    units: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Rank intervals and tiers from per-prompt means (prompts x submissions, :func:`shared_prompt_means`),
    claimed jointly for the whole board (``functional/ranks.py``).

    The pairwise claims "model j is better than model k" come from the step-down max-T procedure
    (Romano & Wolf 2005) over every pair, with bootstrap-t draws of the resampling design ``factors``
    (``units``: each prompt's levels of the factors other than ``"prompt"``; :func:`resampling_design`
    reads both from the results), the same draws for every model: the chance of any false claim on the
    board is at most ``1 - level``, however many models it holds.

    - ``rank``: the rank of the full-sample means (:func:`shared_ranks`);
    - ``rank_low`` / ``rank_high``: 1 + the models shown better, and K - the models shown worse or
      identical to it (simultaneous rank sets, Mogstad et al. 2024); ``rank interval`` writes them ``"1-3"`` (``"2"``
      when both are equal);
    - ``tier``: models sorted by mean (ties in submission order); the first leads tier 1; each next
      model joins the current tier unless it is shown worse than that tier's leader, and then leads
      the next tier. Equal models are therefore always in one tier.

    Index: the submissions, in the columns' order. With one prompt there is nothing to resample: every
    model's interval is the whole board and every model is in tier 1 (one prompt tells no model
    apart); so too when no factor of the design has two levels among the prompts.
    """
    from idbench.evaluate_pkg.functional.bootstrap import design_factors
    from idbench.evaluate_pkg.functional.ranks import board_claims, rank_sets, tiers

    columns = ["rank", "rank_low", "rank_high", RANK_INTERVAL, TIER]
    submissions = [int(s) for s in means.columns]
    if not submissions:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="submission"))
    values = means.to_numpy(dtype=np.float64) * (1.0 if higher_is_better else -1.0)  # prompts x models, higher better
    point = values.mean(axis=0)
    ranks = np.array(shared_ranks(point, higher_is_better=True))
    prompts = [str(p) for p in means.index]
    design = design_factors({str(k): dict(v) for k, v in (units or {}).items()}, prompts, factors)
    claims = board_claims(values, design, n_draws, seed, level)
    low, high = rank_sets(claims.better, claims.equal)
    tier = tiers(point, claims.better, order=np.asarray(submissions))
    texts = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in zip(low, high)]
    out = pd.DataFrame(
        {"rank": ranks, "rank_low": low.astype(int), "rank_high": high.astype(int), RANK_INTERVAL: texts, TIER: tier},
        index=submissions,
    )
    out.index.name = "submission"
    return out


def with_rank_uncertainty(table: pd.DataFrame, uncertainty: pd.DataFrame | None = None) -> pd.DataFrame:
    """The ranked table with ``rank interval`` and ``tier`` after ``rank`` (from :func:`rank_uncertainty`,
    by submission); rows it has no entry for (not ranked, no per-sample values; all rows when None)
    hold "" and <NA>."""
    out = table.copy()
    if uncertainty is None:
        uncertainty = pd.DataFrame(columns=[RANK_INTERVAL, TIER])
    found = out["submission"].astype(int).map(lambda s: s in uncertainty.index)
    intervals = [uncertainty.at[int(s), RANK_INTERVAL] if ok else "" for s, ok in zip(out["submission"], found)]
    tiers = [int(uncertainty.at[int(s), TIER]) if ok else pd.NA for s, ok in zip(out["submission"], found)]
    at = out.columns.get_loc("rank") + 1 if "rank" in out.columns else 0
    out.insert(at, RANK_INTERVAL, intervals)
    out.insert(at + 1, TIER, pd.array(tiers, dtype="Int64"))
    return out


def leaders_tied(table: pd.DataFrame) -> list[str]:
    """The models sharing the lead of a ranked table: every row of tier 1 when the table has tiers
    (they cannot be told apart from the leader), else every row of rank 1; [] when one model leads alone."""
    if table.empty:
        return []
    if TIER in table.columns and table[TIER].notna().any():
        first = table[table[TIER] == 1]
    else:
        first = table[table["rank"] == 1]
    return [str(m) for m in first["model"]] if len(first) > 1 else []


def cell_prompts(
    prompt_rows: Mapping[str, Mapping[str, Any]], spec: BenchmarkSpec, filters: Mapping[str, Any] | None
) -> list[str] | None:
    """The prompt ids of the breakdown cell ``filters`` select (None: no cell, every prompt), from the
    built benchmark's prompt rows (their breakdown columns, compared as the stored labels are, as text)."""
    chosen = {axis: str(value) for axis, value in (filters or {}).items() if value is not None}
    if not chosen:
        return None
    return [
        pid for pid, row in prompt_rows.items() if all(str(row.get(axis)) == value for axis, value in chosen.items())
    ]
