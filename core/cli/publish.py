"""``idbench publish``: upload a built dataset folder to the Hugging Face Hub."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_publish(commands) -> None:
    publish = commands.add_parser(
        "publish",
        help="upload a built dataset folder to the Hugging Face Hub",
        description="Check the card's metadata and the shards, then create the dataset repo (if needed) and upload "
        "the card, LICENSE, build_info.json and every shard in one commit; eval.yaml (--eval-yaml) follows in a "
        "commit of its own, so a refusal of it leaves the dataset up. The token comes from `hf auth login` or "
        "HF_TOKEN, never from a flag.",
    )
    publish.add_argument("folder", type=Path, help="a folder written by `idbench build`")
    publish.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repo")
    publish.add_argument("--private", action="store_true", help="create the repo as private")
    publish.add_argument("--dry-run", action="store_true", help="list what would be uploaded; no network")
    publish.add_argument(
        "--eval-yaml",
        action="store_true",
        help="also declare the benchmark's tasks for the Hub's Eval Results (eval.yaml)",
    )
    publish.set_defaults(func=cmd_publish)


def cmd_publish(args: argparse.Namespace) -> int:
    from idbench.builders.publish import EvalYamlRejected, publish

    if args.eval_yaml:
        from idbench.leaderboard.hub import write_eval_yaml

        write_eval_yaml(args.folder)
    try:
        files = publish(args.folder, args.repo_id, private=args.private, dry_run=args.dry_run)
    except EvalYamlRejected as rejected:  # the dataset commit is up; say what is, then why eval.yaml is not
        _report(args, "uploaded", rejected.uploaded)
        raise
    _report(args, "would upload" if args.dry_run else "uploaded", files)
    return 0


def _report(args: argparse.Namespace, verb: str, files: list[str]) -> None:
    print(f"{verb} {len(files)} file(s) to dataset repo {args.repo_id}:")
    for name in files:
        print(f"  {name}")
