"""``idbench worker``: claim queued jobs and score them, from the local store or a Hub deployment."""

from __future__ import annotations

import argparse

from idbench.cli._options import add_judge_arguments, add_profile_argument, judge_config
from idbench.cli.queue import open_queue_for


def add_worker(commands) -> None:
    worker = commands.add_parser(
        "worker",
        help="claim queued jobs and score them (several workers may run at once)",
        description="Checks first that this machine has what the queued jobs need (the profile's models, the "
        "judge settings, the benchmark data) and, if not, exits with the reason without claiming anything. "
        "Then claims jobs atomically with a lease and scores them: FINISHED, or FAILED when the submission is "
        "at fault. A fault of the worker (model, GPU memory, the judge unreachable or failing, disk) puts the job "
        "back in the queue and stops the worker; a job with 3 such attempts is PARKED (not the submitter's fault; "
        "requeue it with `idbench rescore --submission ID`), as is a job past --job-time-limit. A job whose worker "
        "died is claimed again when its lease expires. The same loop serves the local store and, with --hub and "
        "--results, a Hub deployment's repos.",
    )
    worker.add_argument("--once", action="store_true", help="drain the queue, then exit (cron, CI)")
    add_profile_argument(worker)
    worker.add_argument("--device", default="cpu")
    worker.add_argument("--batch-size", type=int, default=32)
    worker.add_argument("--lease-seconds", type=float, default=600)
    worker.add_argument(
        "--job-time-limit",
        type=float,
        default=6 * 3600.0,
        metavar="SECONDS",
        help="a job running longer is stopped and PARKED (default: 6 hours)",
    )
    worker.add_argument(
        "--dry-run", action="store_true", help="list what would be claimed and check this worker; change nothing"
    )
    hub = worker.add_argument_group(
        "Hub queue",
        "claim requests from a Hub requests repo and push results to a Hub results repo instead of the "
        "local store (IDBENCH_HUB_STAND_IN=DIR: a local stand-in for both, for trials)",
    )
    hub.add_argument("--hub", metavar="ORG/REQUESTS", help="the requests dataset repo")
    hub.add_argument("--results", metavar="ORG/RESULTS", help="the results dataset repo")
    hub.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="BENCHMARK=DIR",
        help="a built benchmark folder (repeatable; default: $IDBENCH_HOME/benchmarks/<benchmark>)",
    )
    add_judge_arguments(worker)
    worker.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.leaderboard.worker import run_worker

    options = ScoreOptions(
        profile=args.profile, device=args.device, batch_size=args.batch_size, judge=judge_config(args)
    )
    queue = open_queue_for(args, results_needed=True)
    done = run_worker(
        queue,
        once=args.once,
        lease_seconds=args.lease_seconds,
        options=options,
        dry_run=args.dry_run,
        job_seconds=args.job_time_limit,
    )
    if args.dry_run:
        print(f"dry run: {done} {queue.unit}(s) would be claimed; nothing was changed")
    else:
        print(f"worker finished {done} {queue.unit}(s)")
    return 0
