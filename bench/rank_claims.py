"""False tiers and power of the leaderboard's rank claims, by simulation (no store, no model).

Boards of K models of identical true quality are simulated on each benchmark's resampling design
(CHARIS: 29 subjects x 7 prompts, subjects resampled with their prompts; Identity Collapse: 75 prompts
of 2-10 of 30 reused subjects; CogCanvas: 120 prompts of 1-3 of 40 identities with items from 25 on 15
backgrounds), with variance at every level and a model x unit interaction that a paired comparison
does not cancel. For each board it counts:

- "split": the board shows more than one tier (a false claim: every model is equally good);
- "disjoint": some pair of rank intervals does not overlap (another false claim);

under the rule the leaderboard used before (each model tested at 5 % against its tier's leader, rank
intervals from each model's own rank quantiles: ``per_pair_rule`` below, written out again here for
the comparison) and the joint rule of ``functional/ranks.py`` (step-down max-T, bootstrap-t).

Power: K = 10 models, one better than the nine others by a planted gap (in units of the standard
deviation of a pair's difference of means); it reports how often the better model is shown better
than at least one model, and alone in tier 1.

Usage: ``.venv/bin/python bench/rank_claims.py [--boards 400] [--ks 2,10,20,50]``. Seeded: a rerun
gives the same table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from idbench.evaluate_pkg.functional.bootstrap import design_factors, design_weights, weighted_mean_replicates
from idbench.evaluate_pkg.functional.ranks import board_claims, rank_sets, tiers


def charis_design(rng):
    subjects, per = 29, 7
    prompts = [f"p{i:03d}" for i in range(subjects * per)]
    subject = np.repeat(np.arange(subjects), per)
    units = {p: {"subject": [f"s{s}"]} for p, s in zip(prompts, subject)}

    def values(k, gap):
        shared = rng.normal(size=(subjects, 1))[subject]
        own = rng.normal(0, 0.5, size=(subjects, k))[subject]
        return shared + own + rng.normal(size=(len(prompts), k)) + gap

    return prompts, units, ("subject",), values


def collapse_design(rng):
    pool, sizes = 30, np.repeat([2, 4, 6, 8, 10], 15)
    members = [rng.choice(pool, s, replace=False) for s in sizes]
    prompts = [f"p{i:02d}" for i in range(len(sizes))]
    units = {p: {"subject": [f"s{m}" for m in ms]} for p, ms in zip(prompts, members)}

    def values(k, gap):
        shared = rng.normal(size=(pool, 1)) + rng.normal(0, 0.5, size=(pool, k))
        per_prompt = np.stack([shared[ms].mean(axis=0) for ms in members])
        return per_prompt + 0.5 * rng.normal(size=(len(prompts), 1)) + 0.5 * rng.normal(size=(len(prompts), k)) + gap

    return prompts, units, ("prompt", "subject"), values


def cogcanvas_design(rng):
    n = 120
    persons = [rng.choice(40, rng.integers(1, 4), replace=False) for _ in range(n)]
    items = [rng.choice(25, len(p), replace=True) for p in persons]
    backgrounds = rng.integers(0, 15, n)
    prompts = [f"p{i:03d}" for i in range(n)]
    units = {
        p: {"identity": [f"i{x}" for x in ps], "item": [f"t{x}" for x in its], "background": [f"b{b}"]}
        for p, ps, its, b in zip(prompts, persons, items, backgrounds)
    }

    def values(k, gap):
        a = rng.normal(size=(40, 1)) + rng.normal(0, 0.5, size=(40, k))
        t, b = rng.normal(size=(25, 1)), rng.normal(size=(15, 1))
        per_prompt = np.stack(
            [a[ps].mean(0) + t[its].mean(0) + b[bg] for ps, its, bg in zip(persons, items, backgrounds)]
        )
        return per_prompt + rng.normal(size=(n, k)) + gap

    return prompts, units, ("prompt", "identity", "item", "background"), values


DESIGNS = {"charis": charis_design, "identity-collapse": collapse_design, "cogcanvas": cogcanvas_design}


def per_pair_rule(values, weights, level=0.95):
    """The rule before: marginal rank quantiles; each model tested alone against its tier's leader."""
    replicates = weighted_mean_replicates(values, np.ones(values.shape[0]), [weights])
    point = values.mean(axis=0)
    beats = replicates[:, :, None] > replicates[:, None, :]
    draw_ranks = 1 + beats.sum(axis=1)
    alpha = (1 - level) / 2
    low = np.quantile(draw_ranks, alpha, axis=0, method="lower")
    high = np.quantile(draw_ranks, 1 - alpha, axis=0, method="higher")
    order = np.argsort(-point, kind="stable")
    tier, leader, out = 1, order[0], np.zeros(point.size, int)
    for m in order:
        if m != leader and np.quantile(replicates[:, leader] - replicates[:, m], alpha) > 0:
            tier, leader = tier + 1, m
        out[m] = tier
    return out, low, high


def disjoint(low, high) -> bool:
    return bool((np.asarray(high)[:, None] < np.asarray(low)[None, :]).any())


def false_claims(name: str, ks: list[int], boards: int, draws: int) -> None:
    rng = np.random.default_rng(20261204)
    prompts, units, factors, make = DESIGNS[name](rng)
    design = design_factors(units, prompts, factors)
    weights = design_weights(design, draws, 0)
    for k in ks:
        start = time.perf_counter()
        counts = np.zeros(4)
        for _ in range(boards):
            values = make(k, 0.0)
            old_tiers, old_low, old_high = per_pair_rule(values, weights)
            claims = board_claims(values, design, draws, 0)
            new_tiers = tiers(values.mean(axis=0), claims.better)
            new_low, new_high = rank_sets(claims.better, claims.equal)
            counts += [
                old_tiers.max() > 1,
                disjoint(old_low, old_high),
                new_tiers.max() > 1,
                disjoint(new_low, new_high),
            ]
        share = 100 * counts / boards
        print(
            f"| {name} | {k} | {share[0]:.1f} % | {share[1]:.1f} % | {share[2]:.1f} % | {share[3]:.1f} % |"
            f" {time.perf_counter() - start:.0f} s |",
            flush=True,
        )


def power(boards: int, draws: int, gaps: list[float]) -> None:
    rng = np.random.default_rng(7)
    prompts, units, factors, make = charis_design(rng)
    design = design_factors(units, prompts, factors)
    # The sd of a pair's difference of means on this design, measured on equal boards.
    sd = np.std([np.subtract(*make(2, 0.0).mean(axis=0)) for _ in range(2000)])
    for gap in gaps:
        found = alone = 0
        for _ in range(boards):
            offsets = np.zeros(10)
            offsets[0] = gap * sd
            values = make(10, offsets)
            claims = board_claims(values, design, draws, 0)
            found += claims.better[0].any()
            alone += claims.better[0, 1:].all()
        print(
            f"| {gap:.1f} | {gap * sd:.3f} | {100 * found / boards:.0f} % | {100 * alone / boards:.0f} % |", flush=True
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", type=int, default=400)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--ks", default="2,10,20,50")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--gaps", default="2,3,3.5,4,4.5,5,6")
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    print(
        "| design | K | tiers split, before | intervals disjoint, before | tiers split, now | intervals disjoint, now | time |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.designs.split(","):
        false_claims(name, ks, args.boards, args.draws)
    print("\nPower, CHARIS design, K = 10, one model better by the gap (sd of a pair's difference):")
    print("| gap (sd) | gap (raw) | shown better than some model | shown better than all nine |")
    print("|---|---|---|---|")
    power(max(100, args.boards // 2), args.draws, [float(g) for g in args.gaps.split(",")])


if __name__ == "__main__":
    main()
