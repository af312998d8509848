"""The leaderboard's queue, local or on the Hub: ``idbench submit``, ``jobs``, ``withdraw`` and ``rescore``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from idbench.cli._options import HubArgumentError, benchmark_name


def open_queue_for(args: argparse.Namespace, *, results_needed: bool = False):
    """The job queue the command works on: the Hub deployment's repos with ``--hub``, else the local store."""
    from idbench.leaderboard.queue import open_queue

    hub, results = getattr(args, "hub", None), getattr(args, "results", None)
    if not (hub or results):
        if getattr(args, "data", None):
            raise HubArgumentError("--data is an option of the Hub worker (with --hub and --results)")
        return open_queue()
    if not hub or (results_needed and not results):
        raise HubArgumentError(
            f"idbench {args.command} on the Hub needs both --hub ORG/REQUESTS and --results ORG/RESULTS"
        )
    return open_queue(hub, results, hub_data_dirs(getattr(args, "data", None) or []))


def hub_data_dirs(entries: list[str]) -> dict[str, Path]:
    """``--data BENCH=DIR`` entries over the defaults ``$IDBENCH_HOME/benchmarks/<benchmark>``."""
    from idbench.leaderboard.queue import default_data_dirs

    folders = default_data_dirs()
    for entry in entries:
        name, sep, folder = entry.partition("=")
        if not sep or not folder:
            raise HubArgumentError(
                f"--data {entry!r}: expected BENCHMARK=DIR, e.g. identity-collapse=data/identity-collapse"
            )
        try:
            folders[benchmark_name(name)] = Path(folder)
        except argparse.ArgumentTypeError as err:
            raise HubArgumentError(f"--data {entry!r}: {err}") from None
    return folders


def add_submit(commands) -> None:
    submit = commands.add_parser(
        "submit",
        help="validate a submission and queue it on the local leaderboard ($IDBENCH_HOME, default ~/.idbench)",
        description="Validates with the scorer's validator before anything is stored, keeps the files under "
        "a content-addressed path and creates a PENDING job. The same files for the same model are "
        "recognised and not queued again.",
    )
    submit.add_argument(
        "submission",
        help="a manifest folder, a parquet folder, a .zip, or a Hub dataset repo as hf://datasets/OWNER/NAME[@REVISION]",
    )
    submit.add_argument("--benchmark", required=True, type=benchmark_name, metavar="BENCHMARK")
    submit.add_argument(
        "--data", type=Path, help="built benchmark folder (default: $IDBENCH_HOME/benchmarks/<benchmark>)"
    )
    submit.add_argument("--model-name", help="overrides the model name of submission.json")
    submit.add_argument("--submitter", help="who submits (shown on the leaderboard)")
    submit.add_argument(
        "--family", help="overrides the model family of submission.json (the leaderboard filters by it)"
    )
    submit.add_argument(
        "--link", help="overrides the link of submission.json (an http(s) URL to the paper, code or weights)"
    )
    submit.add_argument(
        "--hub",
        metavar="ORG/REQUESTS",
        help="add it to this Hub requests repo instead of the local store (maintainers)",
    )
    submit.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.leaderboard.queue import benchmark_data_dir, submit_to

    data_dir = benchmark_data_dir(args.benchmark, args.data)
    load_benchmark_data(data_dir, benchmark=args.benchmark)
    result = submit_to(
        args.submission,
        data_dir,
        hub=args.hub,
        model_name=args.model_name,
        submitter=args.submitter,
        family=args.family,
        link=args.link,
    )
    if args.hub:
        verb = "already requested" if result.duplicate else "requested"
        print(f"{verb}: {args.hub}: {result.path} ({'not committed again' if result.duplicate else 'PENDING'})")
    elif result.duplicate:
        print(f"already submitted: submission {result.submission_id} (job {result.job_id}); not queued again")
    else:
        print(f"queued: submission {result.submission_id}, job {result.job_id} (PENDING); {_worker_hint()}")
    return 0


def _worker_hint() -> str:
    """The worker command that will score the queue on this machine: the paper models' when they are all
    here, else the tiny profile's (the only one that runs offline), said to be a plumbing check."""
    from idbench.evaluate_pkg.models.base import ModelNotAvailableError
    from idbench.evaluate_pkg.models.registry import DEFAULT_PROFILE, check_available, resolve_profile
    from idbench.invocation import command

    missing = []
    for card in resolve_profile(DEFAULT_PROFILE).values():
        try:
            check_available(card)
        except ModelNotAvailableError:
            missing.append(card.name)
    if not missing:
        return f"score it: `{command('worker --once')}`"
    return (
        f"score it here: `{command('worker --once --profile tiny')}` (a plumbing check: random weights, never "
        f"ranked); {len(missing)} paper model(s) are missing here ({', '.join(missing)}; "
        f"`{command('models list')}` says how to get them), and `{command('worker --once')}` needs them all"
    )


def add_withdraw(commands) -> None:
    withdraw = commands.add_parser(
        "withdraw",
        help="take a submission off the leaderboard (an admin action); its files, jobs and results are kept",
    )
    withdraw.add_argument(
        "submission", metavar="SUBMISSION", help="the local submission id; with --hub, the request's path or hash12"
    )
    withdraw.add_argument("--reason", required=True, help="shown on the status page")
    withdraw.add_argument(
        "--hub", metavar="ORG/REQUESTS", help="withdraw a request of this Hub requests repo (needs --results)"
    )
    withdraw.add_argument(
        "--results", metavar="ORG/RESULTS", help="the Hub results repo whose result files of it are deleted"
    )
    withdraw.set_defaults(func=cmd_withdraw)


def cmd_withdraw(args: argparse.Namespace) -> int:
    print(open_queue_for(args, results_needed=True).withdraw(args.submission, args.reason))
    return 0


def add_jobs(commands) -> None:
    jobs = commands.add_parser("jobs", help="list submissions with their job states and failure reasons")
    jobs.add_argument("--json", action="store_true")
    jobs.add_argument("--hub", metavar="ORG/REQUESTS", help="list the requests of this Hub requests repo instead")
    jobs.set_defaults(func=cmd_jobs)


def cmd_jobs(args: argparse.Namespace) -> int:
    import json

    from idbench.names import terminal_safe

    rows, skipped = open_queue_for(args).list_jobs()
    for problem in skipped:  # a malformed record is named, the others still listed
        print(f"idbench jobs: skipped {terminal_safe(problem)}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print(f"no requests in {args.hub}" if args.hub else "no submissions yet")
    for row in rows:
        # Names, paths and reasons are a submitter's text: escaped, so no escape sequence or bidi control acts.
        reason = f"  {terminal_safe(row['reason'])}" if row.get("reason") else ""
        if args.hub:
            print(
                f"{row['state']:<9} attempts {row['attempts']}  {terminal_safe(row['path'])}  {terminal_safe(row['model'])}{reason}"
            )
        else:
            print(
                f"job {row['job']:>4}  {row['state']:<9} {row['benchmark']:<18} {terminal_safe(row['model'])}{reason}"
            )
    return 0


def add_rescore(commands) -> None:
    rescore = commands.add_parser(
        "rescore", help="queue every scored submission again (after a metric-suite change); old results are kept"
    )
    which = rescore.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every submission with results")
    which.add_argument("--submission", type=int, metavar="ID", help="one submission")
    which.add_argument("--request", metavar="PATH", help="with --hub: a PARKED or FAILED request (its path or hash12)")
    rescore.add_argument(
        "--benchmark", type=benchmark_name, metavar="BENCHMARK", help="with --all: only this benchmark"
    )
    rescore.add_argument("--hub", metavar="ORG/REQUESTS", help="with --request: the Hub requests repo")
    rescore.set_defaults(func=cmd_rescore)


def cmd_rescore(args: argparse.Namespace) -> int:
    if args.all:
        from idbench.leaderboard.queue import rescore_all
        from idbench.leaderboard.store import Store

        if args.hub:
            raise HubArgumentError(
                "rescore --all queues the local store's submissions again; a Hub request is requeued with --request"
            )
        jobs = rescore_all(Store(), benchmark=args.benchmark)
        print(f"queued {len(jobs)} rescoring job(s); earlier results stay, marked not current")
        return 0
    if args.request and not args.hub:
        raise HubArgumentError("requeueing a Hub request needs --hub ORG/REQUESTS and --request PATH")
    if args.hub and not args.request:
        raise HubArgumentError("on the Hub, rescore takes --request PATH (a PARKED or FAILED request)")
    print(open_queue_for(args).rescore(args.request or str(args.submission)))
    return 0
