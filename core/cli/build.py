"""``idbench build``: one benchmark dataset from a source folder, optionally with the curation stages."""

from __future__ import annotations

import argparse
from pathlib import Path

from idbench.cli._options import add_judge_arguments, add_profile_argument, benchmark_name, judge_config


def add_build(commands) -> None:
    build = commands.add_parser(
        "build",
        help="build one benchmark dataset (parquet shards + dataset card) from a source folder",
        description="Validate a source manifest, drop exact and near-duplicate images (pHash), sample the "
        "prompts deterministically from --seed, and write parquet shards with embedded images and a "
        "README.md dataset card into --out. The output appears only when complete.",
    )
    build.add_argument(
        "benchmark",
        type=benchmark_name,
        metavar="BENCHMARK",
        help="a registered benchmark (identity-collapse, charis, cogcanvas, or one installed through the idbench.benchmarks entry point)",
    )
    build.add_argument(
        "--source",
        type=Path,
        help="a manifest CSV, or a folder holding manifest.csv or <benchmark>.csv (default: the shipped samples)",
    )
    build.add_argument("--out", type=Path, required=True, help="output folder for the dataset")
    build.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    build.add_argument(
        "--prompts",
        type=int,
        help="number of prompts (charis: default 7 per subject; cogcanvas: default 1,361 scaled by identities/100; "
        "identity-collapse is a fixed grid of 75)",
    )
    build.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    curate = build.add_argument_group(
        "curation",
        "model stages between the source and the sampler (see docs/curation.md); audit files go to OUT/curation/",
    )
    curate.add_argument(
        "--curate", action="store_true", help="embedding dedup and quality filter; with a judge also the MLLM stages"
    )
    add_profile_argument(curate, "encoders of the image stages (tiny: a plumbing check)")
    curate.add_argument("--device", default="cpu")
    curate.add_argument("--dedup-threshold", type=float, help="DINOv2 cosine at which two images are near duplicates")
    curate.add_argument(
        "--reviewed-prompts", type=Path, help="charis: take the prompts of this reviewed export (review.csv)"
    )
    curate.add_argument(
        "--quality-thresholds",
        type=Path,
        metavar="JSON",
        help="a JSON object of quality thresholds (min_side, min_blur, min_aesthetic, ...; null turns a check off); "
        "default: the samples' own for a build of the shipped samples, else the papers' (512 px and up)",
    )
    add_judge_arguments(
        build,
        "the MLLM of the curation stages (metadata, prompt writing and checking); without one they are skipped, and the report says so",
    )
    build.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    from idbench.builders.build import build, format_report

    options = dict(out=args.out, source=args.source, seed=args.seed, n_prompts=args.prompts, overwrite=args.overwrite)
    removed = None
    if args.curate or args.reviewed_prompts:
        from idbench.curation.pipeline import build_curated

        info, removed = build_curated(args.benchmark, _curate_options(args), **options)
    else:
        info = build(args.benchmark, **options)
    print(format_report(info))
    print(f"written to {args.out}")
    if removed is not None:
        print(f"removed {removed} (the curation audit of an earlier failed build)")
    return 0


def _curate_options(args: argparse.Namespace):
    # The CLI composes building with curation: builders take the model stages as a Curator and never
    # import idbench.curation (a higher layer).
    import transformers

    from idbench.curation.pipeline import CurateOptions, quality_thresholds_for

    transformers.utils.logging.disable_progress_bar()  # loading the encoders would drown the report
    thresholds, why = quality_thresholds_for(args.quality_thresholds, shipped_samples=args.source is None)
    return CurateOptions(
        profile=args.profile,
        device=args.device,
        judge=judge_config(args),
        dedup_threshold=args.dedup_threshold,
        reviewed_prompts=args.reviewed_prompts,
        image_stages=args.curate,
        quality=thresholds,
        quality_from=why,
    )
