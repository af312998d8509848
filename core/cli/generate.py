"""``idbench generate``: a submission made by a model adapter, resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

from idbench.cli._options import add_generation_arguments, benchmark_name, generator_options


def add_generate(commands) -> None:
    generate = commands.add_parser(
        "generate",
        help="generate a submission with a model adapter: every (prompt_id, seed) of the template, resumable",
        description="Hand every (prompt_id, seed) row of the benchmark's template to a model adapter (the prompt, the "
        "reference images in a documented order with their roles, the seed, the resolution) and write each image "
        "where the manifest says, plus submission.json with the generation record. A rerun generates only the "
        "missing images. See docs/generation.md.",
    )
    generate.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    generate.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    generate.add_argument(
        "--out", type=Path, required=True, help="the submission folder (created, or continued on a rerun)"
    )
    add_generation_arguments(generate)
    generate.add_argument("--limit", type=int, metavar="N", help="only the first N rows of the manifest (a trial run)")
    generate.add_argument(
        "--shard",
        metavar="K/N",
        help="generate only shard K (from 0) of N, for a job array writing into one --out (default: from "
        "SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX with IDBENCH_SHARD_COUNT; docs/cluster.md)",
    )
    generate.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.generation.adapters import GeneratorOptions, check_device, load_generator
    from idbench.generation.run import generate_submission, process_group_if_launched
    from idbench.shards import resolve_shard

    shard = resolve_shard(args.shard)  # a bad --shard or scheduler variable: one line, before any model loads
    data = load_benchmark_data(args.data, benchmark=args.benchmark)
    check_device(args.device)
    processes = process_group_if_launched(args.device)
    device = str(processes.device) if processes is not None else args.device
    adapter = load_generator(args.model, GeneratorOptions(device=device, **generator_options(args)))
    task = args.task or DEFAULT_TASK
    report = generate_submission(
        data,
        adapter,
        args.out,
        adapter_name=args.model,
        model_name=args.name,
        resolution=args.resolution,
        task=task,
        limit=args.limit,
        batch_size=args.batch_size,
        processes=processes,
        shard=shard,
    )
    if processes is not None:
        # Leave the process group together and cleanly (gloo threads alive at exit abort the process).
        processes.wait_for_everyone()
        processes.destroy_process_group()
        if not processes.is_main_process:
            return 0  # the main process reports the run
    _report(args, data, task, report, shard)
    return 0


def _report(args: argparse.Namespace, data, task: str, report, shard=None) -> None:
    per_image = f", {report.seconds_per_image:.2f} s per image" if report.seconds_per_image is not None else ""
    whose = f" (shard {shard} from {shard.source})" if shard is not None else ""
    print(
        f"generated {report.generated} images for {data.name} ({task}) into {args.out}{whose}; skipped "
        f"{report.skipped} already there{per_image}; {report.total} of {len(data.required_pairs)} rows considered"
    )
    if shard is not None and shard.count > 1:
        print(
            f"note: the other {shard.count - 1} shard(s) generate the other rows; once all have finished: "
            f"idbench validate {args.out} --data {args.data}"
        )
    elif report.total < len(data.required_pairs):
        print(
            f"note: --limit left {len(data.required_pairs) - report.total} rows out; validate needs them all (rerun without --limit)"
        )
    else:
        print(f"next: idbench validate {args.out} --data {args.data}")
