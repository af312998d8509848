"""The local leaderboard's front: ``idbench serve`` (the Streamlit app) and ``idbench sync`` (to the Hub)."""

from __future__ import annotations

import argparse


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
