"""``idbench baseline``: a submission made without a generative model (or a retrieval ranking)."""

from __future__ import annotations

import argparse
from pathlib import Path

from idbench.cli._options import add_profile_argument, benchmark_name
from idbench.evaluate_pkg.baseline_names import BASELINES, RANKERS


def add_baseline(commands) -> None:
    baseline = commands.add_parser(
        "baseline",
        help="make a baseline submission without a generative model (collage, swap, impostor, clone, background, blank, "
        "noise, copy, crossed, crowd, mannequin; CogCanvas retrieval rankings: retrieval-clip, retrieval-metadata)",
    )
    # From the import-free list of names: parsing the command line imports no image stack.
    baseline.add_argument("name", choices=BASELINES + RANKERS)
    baseline.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    baseline.add_argument("--data", type=Path, required=True)
    baseline.add_argument("--out", type=Path, required=True)
    baseline.add_argument("--size", type=int, default=512)
    baseline.add_argument("--seed", type=int, default=0)
    baseline.add_argument("--overwrite", action="store_true")
    # retrieval-clip only: the CLIP encoder of a profile, as `idbench score` loads it
    add_profile_argument(
        baseline,
        "retrieval-clip: paper (CLIP ViT-L/14, default), tiny or paper-random (random weights, plumbing checks)",
    )
    baseline.add_argument("--device", default="cpu", help="retrieval-clip: torch device (default: %(default)s)")
    baseline.add_argument("--batch-size", type=int, default=32)
    baseline.add_argument(
        "--cache-dir", type=Path, help="retrieval-clip: feature cache (default: $IDBENCH_CACHE/features)"
    )
    baseline.add_argument("--models-dir", type=Path, help="retrieval-clip: models cache (default: $IDBENCH_MODELS)")
    baseline.set_defaults(func=cmd_baseline)


def cmd_baseline(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.data import load_benchmark_data

    data = load_benchmark_data(args.data, benchmark=args.benchmark)
    if args.name in RANKERS:
        return _ranking(args, data)
    make_baseline(args.name, data, args.out, size=args.size, seed=args.seed, overwrite=args.overwrite)
    print(f"wrote the {args.name} baseline for {data.name} to {args.out} ({len(data.required_pairs)} images)")
    return 0


def _ranking(args: argparse.Namespace, data) -> int:
    from idbench.benchmarks.cogcanvas.retrieval import make_retrieval_baseline, retrieval_rows
    from idbench.evaluate_pkg.context import ScoreOptions

    options = ScoreOptions(
        profile=args.profile,
        device=args.device,
        batch_size=args.batch_size,
        models_dir=str(args.models_dir) if args.models_dir else None,
    )
    make_retrieval_baseline(
        args.name, data, args.out, options=options, cache_dir=args.cache_dir, overwrite=args.overwrite
    )
    print(
        f"wrote the {args.name} ranking for {data.name} to {args.out} ({len(retrieval_rows(data))} slots, rankings.csv)"
    )
    return 0
