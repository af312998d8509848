"""``idbench demo``: the main job on the shipped samples."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DEMO_OUT = Path("idbench-output")


def add_demo(commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="the main job on the shipped samples: build, make baselines, score them, rank them",
        description="Build CHARIS, CogCanvas and Identity Collapse from the shipped samples into OUT/datasets "
        "(replacing an earlier demo build; smaller than the samples allow, to keep it to minutes: CHARIS 29 "
        "prompts, CogCanvas 20, Identity Collapse 15 x 3 seeds) and load every config back with "
        "datasets.load_dataset; draw five model-free baselines per benchmark (CogCanvas seven, two of them faces "
        "of drawn people from outside the benchmark) into OUT/baselines, submit them to the local leaderboard "
        "($IDBENCH_HOME), let one worker score them with the tiny profile (a plumbing check: random weights) "
        "and print a ranked table per benchmark. A rerun scores nothing again.",
    )
    demo.add_argument("--out", type=Path, default=DEFAULT_DEMO_OUT, help="output folder (default: %(default)s)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from idbench.demo import run_demo

    run_demo(args.out)
    return 0
