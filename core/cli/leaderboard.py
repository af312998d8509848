"""The local leaderboard's front: ``idbench serve`` (the Streamlit app) and ``idbench sync`` (to the Hub)."""

from __future__ import annotations

import argparse
import sys


def add_serve(commands) -> None:
    serve_parser = commands.add_parser(
        "serve",
        help="open the Streamlit leaderboard over the local store ($IDBENCH_HOME)",
        description="One page per benchmark (ranked table, filters, CSV, plots), a model page, a submit page, "
        "the queue's status and an about page. Plumbing-check rows are hidden unless asked for.",
    )
    serve_parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to listen on (default: Streamlit's own setting: STREAMLIT_SERVER_PORT, "
        ".streamlit/config.toml, else 8501)",
    )
    serve_parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default: %(default)s, this machine only; 0.0.0.0 opens it to the network)",
    )
    serve_parser.add_argument("--browser", action="store_true", help="also open a browser window")
    serve_parser.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from idbench.leaderboard.app import serve

    return serve(port=args.port, headless=not args.browser, address=args.address)


def add_sync(commands) -> None:
    sync_parser = commands.add_parser(
        "sync",
        help="push the local leaderboard's requests and results to Hugging Face dataset repos",
        description="One commit per repo, as the Hugging Face leaderboard template does; plumbing-check "
        "results and submitters' names are never pushed. The token comes from `hf auth login` or HF_TOKEN.",
    )
    sync_parser.add_argument("--requests-repo", required=True, help="ORG/NAME dataset repo for submission records")
    sync_parser.add_argument("--results-repo", required=True, help="ORG/NAME dataset repo for results")
    sync_parser.add_argument("--dry-run", action="store_true", help="list what would be pushed; no network")
    sync_parser.set_defaults(func=cmd_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    from idbench.leaderboard.hub import sync
    from idbench.leaderboard.store import Store

    operations = sync(Store(), args.requests_repo, args.results_repo, dry_run=args.dry_run, echo=lambda _: None)
    verb = "would push" if args.dry_run else "pushed"
    print(f"{verb} {len(operations)} file(s):")
    for operation in operations:
        print(f"  {operation}")
    return 0


def add_standings(commands) -> None:
    from idbench.cli._options import benchmark_name

    standings = commands.add_parser(
        "standings",
        help="print a benchmark's board from the local store: ranks, rank intervals, tiers, rows set apart",
        description="The board as its page opens (plumbing checks and incomplete suites shown only when nothing "
        "else is ranked), with the rank intervals and tiers computed when the results last changed (a job "
        "finished, a withdrawal, a Hub mirror sync); --refresh computes them again first.",
    )
    standings.add_argument("benchmark", type=benchmark_name)
    standings.add_argument("--task", default=None, help="the track (default: the benchmark's reference-based one)")
    standings.add_argument("--metric", default=None, help="rank on this metric (default: the page's)")
    standings.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="AXIS=VALUE",
        help="rank within a breakdown cell, e.g. --cell n_subjects=4 --cell scene=occlusion (default: the page's)",
    )
    standings.add_argument("--refresh", action="store_true", help="compute every board of the benchmark again first")
    standings.add_argument("--csv", action="store_true", help="print the table as CSV (values raw)")
    standings.set_defaults(func=cmd_standings)


def cmd_standings(args: argparse.Namespace) -> int:
    from idbench.builders.registry import get_benchmark
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.errors import IdbenchError
    from idbench.leaderboard import board, query
    from idbench.leaderboard.store import Store
    from idbench.names import terminal_safe

    store, spec = Store(), get_benchmark(args.benchmark)
    task = args.task or DEFAULT_TASK
    if task not in query.tracks(spec):
        raise IdbenchError(f"{spec.name} has no track {task!r}; its tracks: {', '.join(query.tracks(spec))}")
    rankable = query.rankable_metrics(store.current_results(spec.name, task), spec)
    if args.metric is not None and args.metric not in rankable:
        raise IdbenchError(f"{spec.name} ranks on {', '.join(rankable) or 'no metric yet'}, not {args.metric!r}")
    cells = dict(part.split("=", 1) for part in args.cell if "=" in part)
    if len(cells) != len(args.cell) or not set(cells) <= set(query.filter_axes(spec)):
        raise IdbenchError(
            f"--cell takes AXIS=VALUE with an axis of {spec.name} ({', '.join(query.filter_axes(spec))}), got {args.cell}"
        )
    if args.refresh:
        print(f"computed {board.refresh(store, spec.name)} board(s) of {spec.name}", file=sys.stderr)
    filters = (dict.fromkeys(query.filter_axes(spec)) | cells) if cells else None
    try:
        shown = board.standings(store, spec.name, task, args.metric, filters)
    except ValueError as error:  # a combination of axes no breakdown of the benchmark has
        raise IdbenchError(str(error)) from None
    if shown.ranked.empty and shown.unranked.empty:
        print(f"{spec.name}: no scored submission in {store.home}")
        return 0
    table = shown.table
    for column in ("model", "submitter", "family", "not ranked"):  # a submitter's text: nothing acts on a terminal
        if column in table.columns:
            table[column] = table[column].map(terminal_safe)
    if args.csv:
        print(table.to_csv(index=False), end="")
        return 0
    metric = shown.metric
    columns = [
        "rank",
        query.RANK_INTERVAL,
        query.TIER,
        "model",
        metric,
        f"{metric} ci_low",
        f"{metric} ci_high",
        "not ranked",
    ]
    text = query.display_table(table[[c for c in columns if c in table.columns]], spec).to_string(index=False)
    scope = query.ranking_scope(spec, shown.filters)
    print(f"{spec.title}: ranked by {shown.metric}" + (f", {scope}" if scope else "") + f" ({store.home})")
    print(text)
    if shown.caption:
        print(shown.caption)
    return 0
