"""Reading scored runs: ``idbench alignment`` (metrics against human ratings) and ``idbench compare``."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_alignment(commands) -> None:
    alignment = commands.add_parser(
        "alignment",
        help="correlate metrics with human ratings (the CHARIS study's Tables 1-3)",
        description="Pearson r between each metric and the mean human rating per model, per type x style and "
        "across models, the human-human agreement, and mean scores per model, with bootstrap CIs; "
        "written as CSV, Markdown and a plot. See docs/alignment.md.",
    )
    alignment.add_argument(
        "--ratings", type=Path, required=True, help="human_ratings.csv, or a built CHARIS folder with that config"
    )
    alignment.add_argument(
        "--prompts", type=Path, help="a built CHARIS folder or a prompt_id,type,style CSV (default: --ratings)"
    )
    alignment.add_argument(
        "--results",
        type=Path,
        nargs="+",
        required=True,
        help="results.parquet files or `idbench score` folders, one per model",
    )
    alignment.add_argument("--out", type=Path, required=True)
    alignment.add_argument(
        "--metrics",
        nargs="+",
        help="metrics to correlate (default: the paper's charis_score, clip_i, dino_sim where present)",
    )
    alignment.add_argument("--n-boot", type=int, default=1000)
    alignment.add_argument("--seed", type=int, default=0)
    alignment.add_argument("--overwrite", action="store_true")
    alignment.set_defaults(func=cmd_alignment)


def cmd_alignment(args: argparse.Namespace) -> int:
    from idbench.benchmarks.charis.alignment import read_prompts, read_ratings, read_scores, run_study

    prompts = args.prompts or args.ratings
    result = run_study(
        read_ratings(args.ratings),
        read_scores(args.results),
        read_prompts(prompts),
        args.out,
        metrics=args.metrics,
        n_boot=args.n_boot,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    print(result.table1.to_string(index=False))
    for note in result.notes:
        print(f"note: {note}")
    print(f"tables, plot and report in {args.out}")
    return 0


def add_compare(commands) -> None:
    compare_parser = commands.add_parser(
        "compare",
        help="paired comparison of two scored runs (B - A per metric, with CI and Holm-corrected p-values)",
        description="B - A on the (prompt, seed) pairs both `idbench score` folders hold, per metric overall and per "
        "breakdown cell, with a percentile interval and a two-sided p-value from the benchmark's resampling design "
        "(the same draws for both runs), Holm-corrected across the metrics of each table. Refuses runs of different "
        "benchmarks, builds, suites, profiles, tasks or judges. See docs/statistics.md.",
    )
    compare_parser.add_argument(
        "a", type=Path, metavar="RESULTS_A", help="results folder of `idbench score` (aggregates.json, results.parquet)"
    )
    compare_parser.add_argument("b", type=Path, metavar="RESULTS_B")
    compare_parser.add_argument(
        "--alpha", type=float, default=0.05, help="level of the verdicts, on the Holm-corrected p (default 0.05)"
    )
    compare_parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    compare_parser.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.compare import compare, format_comparison

    result = compare(args.a, args.b, alpha=args.alpha)
    print(format_comparison(result))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
        print(f"written to {args.json}")
    return 0
