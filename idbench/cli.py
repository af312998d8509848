"""The ``idbench`` command line: one subcommand per job; the work happens in the packages it calls."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCHMARK_NAMES = ("charis", "cogcanvas", "identity-collapse")
DEFAULT_DEMO_OUT = Path("idbench-output")


def _cmd_build(args: argparse.Namespace) -> int:
    from builders.build import build, format_report

    info = build(
        args.benchmark,
        out=args.out,
        source=args.source,
        seed=args.seed,
        n_prompts=args.prompts,
        overwrite=args.overwrite,
    )
    print(format_report(info))
    print(f"written to {args.out}")
    return 0


def _cmd_publish(args: argparse.Namespace) -> int:
    from builders.publish import publish

    files = publish(args.folder, args.repo_id, private=args.private, dry_run=args.dry_run)
    verb = "would upload" if args.dry_run else "uploaded"
    print(f"{verb} {len(files)} file(s) to dataset repo {args.repo_id}:")
    for name in files:
        print(f"  {name}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from idbench.demo import run_demo

    run_demo(args.out)
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="idbench",
        description="Benchmarks for identity preservation in reference-guided and multi-subject image generation.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="the main job on the shipped samples: build the three benchmarks and read them back",
        description="Build CHARIS, CogCanvas and Identity Collapse from the shipped samples into OUT/datasets "
        "(replacing an earlier demo build), then load every config back with datasets.load_dataset.",
    )
    demo.add_argument("--out", type=Path, default=DEFAULT_DEMO_OUT, help="output folder (default: %(default)s)")
    demo.set_defaults(func=_cmd_demo)

    build = commands.add_parser(
        "build",
        help="build one benchmark dataset (parquet shards + dataset card) from a source folder",
        description="Validate a source manifest, drop exact and near-duplicate images (pHash), sample the "
        "prompts deterministically from --seed, and write parquet shards with embedded images and a "
        "README.md dataset card into --out. The output appears only when complete.",
    )
    build.add_argument("benchmark", choices=BENCHMARK_NAMES)
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
    build.set_defaults(func=_cmd_build)

    publish = commands.add_parser(
        "publish",
        help="upload a built dataset folder to the Hugging Face Hub",
        description="Create the dataset repo (if needed) and upload the card, build_info.json and every shard "
        "in one commit. The token comes from `hf auth login` or HF_TOKEN, never from a flag.",
    )
    publish.add_argument("folder", type=Path, help="a folder written by `idbench build`")
    publish.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repo")
    publish.add_argument("--private", action="store_true", help="create the repo as private")
    publish.add_argument("--dry-run", action="store_true", help="list what would be uploaded; no network")
    publish.set_defaults(func=_cmd_publish)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    import datasets

    # The builder writes a handful of small tables; per-table progress bars would drown the report.
    datasets.disable_progress_bars()
    from builders.publish import PublishError
    from builders.sources import SourceError
    from builders.write import OutputExistsError

    try:
        return args.func(args)
    except (SourceError, OutputExistsError, PublishError) as err:
        # Input problems are the user's to fix: one clear line, no traceback.
        print(f"idbench {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
