"""``idbench template`` and ``idbench validate``: a submission's skeleton, and its check."""

from __future__ import annotations

import argparse
from pathlib import Path

from idbench.cli._options import benchmark_name


def add_template(commands) -> None:
    template = commands.add_parser(
        "template",
        help="write an empty submission: manifest.csv of every (prompt_id, seed) and submission.json",
        description="Write the submission skeleton for a built benchmark: manifest.csv names the file expected "
        "for every required (prompt_id, seed); submission.json holds the model's metadata.",
    )
    template.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    template.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    template.add_argument("--out", type=Path, required=True, help="the submission folder to create")
    template.add_argument("--overwrite", action="store_true")
    template.add_argument(
        "--task",
        metavar="TASK",
        help="what the submission will hold: reference (default), text-to-image or retrieval, as the benchmark offers",
    )
    template.set_defaults(func=cmd_template)


def cmd_template(args: argparse.Namespace) -> int:
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.submission import write_template

    data = load_benchmark_data(args.data, benchmark=args.benchmark)
    task = args.task or DEFAULT_TASK
    write_template(data, args.out, overwrite=args.overwrite, task=task)
    if task == "retrieval":
        print(
            f"wrote a {data.name} retrieval template to {args.out}: rankings.csv lists every slot's candidates; "
            f"give each a rank (1 = best; drop the rows you do not rank) and fill in submission.json"
        )
    else:
        print(
            f"wrote a {data.name} {task} submission template to {args.out}: {len(data.required_pairs)} (prompt_id, seed) "
            f"rows in manifest.csv; put each image at the file its row names and fill in submission.json"
        )
    return 0


def add_validate(commands) -> None:
    validate = commands.add_parser(
        "validate",
        help="check a submission (folder, parquet folder or zip) against a built benchmark",
        description="Every required (prompt_id, seed) exactly once, no unknown ids, every image decodable and "
        "within limits. All problems are listed, each with its id and file.",
    )
    validate.add_argument("submission", type=Path)
    validate.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    validate.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.submission import validate_submission

    data = load_benchmark_data(args.data)
    with validate_submission(args.submission, data) as submission:
        print(f"valid: {len(submission.entries)} images for {data.name}, model {submission.metadata.get('model')!r}")
    return 0
