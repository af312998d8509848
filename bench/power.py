"""Power of the leaderboard's rank claims on each benchmark's own design, by simulation (issue 39, item 7).

``bench/rank_claims.py`` measures false tiers on stylised shapes and power on the CHARIS shape only.
This script takes each benchmark's *real* design: it builds the benchmark's shipped sample (``samples/``,
no model, no network), reads its prompt rows, and takes the resampling units exactly as the scorer does
(``BenchmarkSpec.resampling.units``: CHARIS subjects with their prompts nested; Identity Collapse
prompts crossed with subjects; CogCanvas prompts crossed with identities, items and backgrounds) and
the spec's seeds per prompt. On that design it simulates boards of K = 10 models:

- values: every level of every factor (and every prompt) has an effect shared by all models (sd 1)
  and a model-specific one (the part a paired comparison does not cancel); a prompt's value is its own
  effects plus the mean of its levels' effects per factor, plus image noise averaged over the spec's
  seeds. Three scenarios by default (``--variances``): model-specific sd 0.5 with noise sd 1 (both
  matter), 0.25 with noise sd 2 (image noise dominates, as for a noisy judge) and 1 with noise sd 0.2
  (the units dominate: a model is good with some subjects, bad with others);
- one model is ahead of nine equal ones by a gap given in standard deviations of a pair's difference
  of means (computed exactly from the design, not estimated), or no model is ahead (the null);
- the claims are the code's own: ``functional.ranks.board_claims`` (step-down max-T, bootstrap-t, the
  design's paired draws) and ``functional.ranks.tiers``.

It reports, per design and gap, how often the better model is shown better than at least one model,
than all nine (alone in tier 1), and under the null how often any claim is made (a false claim; the
procedure's level is 5 %). It also reports the standard error the claims use divided by the true sd
(above 1: a conservative estimator), and, with ``--scale``, the same design replicated with fresh
levels (2x the prompts, subjects, identities...), which shows what more units buy.

Usage: ``.venv/bin/python bench/power.py [--boards 200] [--draws 1000] [--gaps 0,2,3,4,5,6,8]
[--designs charis,identity-collapse,cogcanvas] [--scale 1,2,4]``. Seeded: a rerun gives the same table.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idbench.builders.build import build
from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.functional.bootstrap import design_factors, design_level_draws
from idbench.evaluate_pkg.functional.ranks import _pair_statistics, board_claims, tiers

K = 10
SHARED_SD = 1.0


@dataclass
class Design:
    name: str
    prompts: list[str]
    units: dict[str, dict[str, list[str]]]  # prompt -> factor -> level ids (the scorer's prompt_units)
    factors: tuple[str, ...]  # the bootstrap's factor names ("prompt" when prompts are crossed)
    unit_factors: tuple[str, ...]  # the spec's factors (the effects a prompt's levels carry)
    seeds: int

    def describe(self) -> str:
        counts = [f"{len(self.prompts)} prompts x {self.seeds} seed(s)"]
        for f in self.unit_factors:
            levels = {level for u in self.units.values() for level in u[f]}
            per = sum(len(u[f]) for u in self.units.values()) / len(self.prompts)
            counts.append(f"{len(levels)} {f} ({per:.1f} per prompt)")
        return ", ".join(counts)


def real_design(name: str, root: Path) -> Design:
    """The benchmark's sample build, as the scorer resamples it."""
    spec = get_benchmark(name)
    build(name, out=root / name)
    data = load_benchmark_data(root / name, cache_dir=str(root / "hf"))
    rows = [data.prompt_rows[p] for p in sorted(data.prompt_rows)]
    units = spec.resampling.units(rows)
    return Design(
        name,
        [row["prompt_id"] for row in rows],
        units,
        spec.resampling.factor_names,
        tuple(f.name for f in spec.resampling.factors),
        len(spec.seeds),
    )


def replicated(design: Design, times: int) -> Design:
    """``times`` copies of the design, each with its own prompts and levels (more units, same shape)."""
    if times == 1:
        return design
    prompts, units = [], {}
    for copy in range(times):
        for p in design.prompts:
            prompts.append(f"{p}#{copy}")
            units[f"{p}#{copy}"] = {f: [f"{level}#{copy}" for level in ls] for f, ls in design.units[p].items()}
    return Design(f"{design.name} x{times}", prompts, units, design.factors, design.unit_factors, design.seeds)


class Simulator:
    """Values (prompts x models) on a design; ``sd`` the exact sd of a pair's difference of means."""

    def __init__(self, design: Design, rng: np.random.Generator, model_sd: float, noise_sd: float):
        self.rng, self.n, self.seeds = rng, len(design.prompts), design.seeds
        self.model_sd, self.noise_sd = model_sd, noise_sd
        self.matrices = []  # per factor: prompts x levels, each row the mean over the prompt's levels
        for f in design.unit_factors:
            levels = sorted({level for u in design.units.values() for level in u[f]})
            index = {level: i for i, level in enumerate(levels)}
            m = np.zeros((self.n, len(levels)))
            for row, p in enumerate(design.prompts):
                for level in design.units[p][f]:
                    m[row, index[level]] += 1 / len(design.units[p][f])
            self.matrices.append(m)
        # var(mean_j - mean_k): twice the model-specific variance each mean carries.
        var = model_sd**2 / self.n + noise_sd**2 / (self.seeds * self.n)  # prompt effects and image noise
        var += sum(model_sd**2 * float(((m.sum(axis=0) / self.n) ** 2).sum()) for m in self.matrices)
        self.sd = float(np.sqrt(2 * var))

    def values(self, offsets: np.ndarray) -> np.ndarray:
        k, rng = offsets.size, self.rng
        out = rng.normal(0, SHARED_SD, (self.n, 1)) + rng.normal(0, self.model_sd, (self.n, k))
        out += rng.normal(0, self.noise_sd / np.sqrt(self.seeds), (self.n, k))
        for m in self.matrices:
            levels = m.shape[1]
            out += m @ (rng.normal(0, SHARED_SD, (levels, 1)) + rng.normal(0, self.model_sd, (levels, k)))
        return out + offsets


def se_ratio(design: Design, sim: Simulator, factors, boards: int) -> float:
    """Mean over null boards of the claims' standard error of a pair's difference over its true sd."""
    drawn = design_level_draws(factors, 1, 0)
    ratios = []
    for _ in range(boards):
        values = sim.values(np.zeros(2))
        point = values.mean(axis=0)
        centred = (values - point) / values.shape[0]
        contributions = [np.asarray(matrix.T @ centred) for matrix, _ in drawn]
        _, se, _, _ = _pair_statistics(point, contributions, [c for _, c in drawn], np.array([0]), np.array([1]))
        ratios.append(se[0] / sim.sd)
    return float(np.mean(ratios))


def run(
    design: Design, gaps: list[float], boards: int, draws: int, model_sd: float, noise_sd: float, seed: int = 20261205
) -> None:
    rng = np.random.default_rng(seed)
    factors = design_factors(design.units, design.prompts, design.factors)
    sim = Simulator(design, rng, model_sd, noise_sd)
    label = f"{design.name}, model sd {model_sd:g}, noise sd {noise_sd:g}"
    start = time.perf_counter()
    ratio = se_ratio(design, sim, factors, 200)
    for gap in gaps:
        found = alone = claimed = 0
        for _ in range(boards):
            offsets = np.zeros(K)
            offsets[0] = gap * sim.sd
            values = sim.values(offsets)
            claims = board_claims(values, factors, draws, 0)
            if gap == 0:
                claimed += bool(claims.better.any())
                continue
            found += bool(claims.better[0].any())
            ranks = tiers(values.mean(axis=0), claims.better)
            alone += bool(claims.better[0, 1:].all() and (ranks == 1).sum() == 1)
        if gap == 0:
            cells = f"false claim {100 * claimed / boards:.1f} % | | "
        else:
            cells = f"{100 * found / boards:.1f} % | {100 * alone / boards:.1f} % | "
        print(f"| {label} | {gap:g} | {gap * sim.sd:.4f} | {cells}{ratio:.2f} |", flush=True)
    print(f"<!-- {design.name}: {design.describe()}; {time.perf_counter() - start:.0f} s -->", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261205, help="the simulated boards' seed")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--gaps", default="0,2,3,4,5,6,8")
    parser.add_argument("--designs", default="charis,identity-collapse,cogcanvas")
    parser.add_argument("--scale", default="1", help="replicate each design this many times (comma-separated)")
    parser.add_argument(
        "--variances",
        default="0.5:1,0.25:2,1:0.2",
        help="model-specific sd per level : image noise sd, one scenario per comma (the shared sd is 1)",
    )
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    print(
        "| design | gap (sd of a difference) | gap (raw) | shown better than some model | alone in tier 1 "
        "| se used / true sd |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.designs.split(","):
            design = real_design(name, Path(tmp))
            print(f"<!-- {name}: {design.describe()} -->", flush=True)
            for scenario in args.variances.split(","):
                model_sd, noise_sd = (float(x) for x in scenario.split(":"))
                for times in (int(s) for s in args.scale.split(",")):
                    run(replicated(design, times), gaps, args.boards, args.draws, model_sd, noise_sd, args.seed)


if __name__ == "__main__":
    main()
