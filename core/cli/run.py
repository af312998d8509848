"""``idbench run``: generate -> validate -> score (-> submit) in one command (:func:`idbench.api.run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from idbench.cli._options import (
    add_generation_arguments,
    add_judge_arguments,
    add_profile_argument,
    benchmark_name,
    generator_options,
    judge_config,
    metric_names,
)


def add_run(commands) -> None:
    run = commands.add_parser(
        "run",
        help="generate, validate and score a submission in one command (optionally queue it on the local leaderboard)",
        description="idbench generate, then validate, then score, into OUT/submission and OUT/results. Without --data "
        "the shipped sample of the benchmark is built into OUT/data (a sample build: its numbers are not the "
        "benchmark's). A rerun continues: only missing images are generated, and the scores are recomputed "
        "from the feature cache. See docs/generation.md.",
    )
    run.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    run.add_argument(
        "--data", type=Path, help="the built benchmark folder (default: build the shipped sample into OUT/data)"
    )
    run.add_argument("--out", type=Path, required=True, help="the run folder: OUT/submission, OUT/results")
    add_generation_arguments(run)
    add_profile_argument(run, "scoring models: paper (default), tiny or paper-random (random weights, plumbing checks)")
    run.add_argument("--metrics", help="comma-separated subset of the suite (default: all)")
    run.add_argument(
        "--cache-dir", type=Path, help="feature cache (default: $IDBENCH_CACHE/features, ~/.cache/idbench/features)"
    )
    run.add_argument(
        "--models-dir", type=Path, help="models cache (default: $IDBENCH_MODELS or ~/.cache/idbench/models)"
    )
    run.add_argument(
        "--submit",
        action="store_true",
        help="then submit it to the local leaderboard ($IDBENCH_HOME) and record these scores there",
    )
    run.add_argument("--submitter", help="who submits (with --submit)")
    add_judge_arguments(run)
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    """The researcher's one command (docs/generation.md, "idbench run")."""
    from idbench.api import run
    from idbench.generation.adapters import check_device
    from idbench.invocation import command

    check_device(args.device)
    judge = judge_config(args)  # a half-given judge is refused before any image is drawn
    done = run(
        args.benchmark,
        args.model,
        args.out,
        data=args.data,
        model_name=args.name,
        task=args.task,
        resolution=args.resolution,
        batch_size=args.batch_size,
        profile=args.profile,
        metrics=metric_names(args.metrics),
        judge=judge,
        device=args.device,
        models_dir=args.models_dir,
        cache_dir=args.cache_dir,
        submit=args.submit,
        submitter=args.submitter,
        echo=print,
        **generator_options(args),
    )
    if done.queued is None:
        return 0
    where = f"submission {done.queued.submission_id}, job {done.queued.job_id} on the local leaderboard"
    if done.queued.duplicate:
        print(f"already submitted: {where}; not queued again. See it: `{command('serve')}`")
    elif done.recorded == "FINISHED":
        print(f"recorded: {where}, scored with profile {args.profile}. See it: `{command('serve')}`")
    else:  # the job's reason says why (`idbench jobs`); the run's own results are in OUT/results
        print(f"not recorded: {where} ended {done.recorded}; its reason: `{command('jobs')}`", file=sys.stderr)
        return 1
    return 0
