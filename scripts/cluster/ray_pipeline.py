#!/usr/bin/env python
"""Generate, score and merge one model on one benchmark as Ray tasks (docs/cluster.md, "Ray").

Each shard is one Ray task that runs ``idbench generate|score ... --shard K/N`` as a subprocess, on
whichever node Ray places it with the GPUs it asks for. A task whose node is lost, or whose command fails,
is run again (``--retries``) and resumes from what its shard already wrote: generated images stay, cached
features and judge answers are read back. The steps wait for each other: scoring starts once every
generation shard has succeeded, the merge once every scoring shard has. A shard that still fails after its
retries stops the pipeline with one line naming it; run the script again to resume (a scoring shard
whose record, OUT/shards/K-of-N.json, is there has finished and is not run again).

    python scripts/cluster/ray_pipeline.py --address auto --shards 16 --gpus-per-shard 1 \\
        --benchmark cogcanvas --data /shared/built/cogcanvas --sub /shared/subs/mine \\
        --out /shared/scores/mine --cache-dir /shared/idbench-features \\
        --generate-args "--model diffusers-image-list --model-id <hub id> --revision <commit>"

Without ``--generate-args`` the submission is taken as made, and only scoring and the merge run. Every
path must be on a file system that all nodes see, and ``idbench`` must be installed on every node (with
Ray: ``pip install 'idbench[ray]'``). ``--address local`` starts a Ray instance on this machine (the
tests do that).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def shard_commands(args: argparse.Namespace) -> list[tuple[str, list[list[str]]]]:
    """The pipeline's steps, in order: (name, the command of each of its tasks)."""
    shards = [f"{k}/{args.shards}" for k in range(args.shards)]
    steps = []
    if args.generate_args is not None:
        generate = ["generate", args.benchmark, "--data", args.data, "--out", args.sub, "--device", args.device]
        steps.append(("generate", [[*generate, *shlex.split(args.generate_args), "--shard", s] for s in shards]))
    score = ["score", args.sub, "--data", args.data, "--out", args.out, "--cache-dir", args.cache_dir]
    score += ["--device", args.device, *shlex.split(args.score_args or "")]
    unfinished = [
        k for k in range(args.shards) if not (Path(args.out) / "shards" / f"{k}-of-{args.shards}.json").exists()
    ]
    steps.append(("score", [[*score, "--shard", shards[k]] for k in unfinished]))
    steps.append(("merge", [["merge", args.out]]))
    return steps


def run_idbench(argv: list[str]) -> str:
    """One task: ``idbench ARGV`` on this node; its output's tail, or an error carrying its stderr's tail."""
    executable = shutil.which("idbench")
    if executable is None:
        raise RuntimeError("idbench is not installed on this node (pip install 'idbench[ray]')")
    done = subprocess.run([executable, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"idbench {shlex.join(argv)} exited {done.returncode}: {tail}")
    return done.stdout[-2000:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--address", default="auto", help="the Ray cluster (auto: the one this node is in; local: start one)"
    )
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--gpus-per-shard", type=float, default=1.0)
    parser.add_argument("--cpus-per-shard", type=float, default=4.0)
    parser.add_argument("--retries", type=int, default=3, help="runs of a failed or lost task after the first")
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--sub", required=True, help="the submission folder (generated into, then scored)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cache-dir", required=True, help="feature and answer cache: shared or node-local")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--generate-args", help="idbench generate's model flags; leave out to score an existing folder")
    parser.add_argument("--score-args", help="more idbench score flags (--profile, --metrics, --judge-url ...)")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")

    try:
        import ray
    except ImportError:
        print("ray_pipeline: Ray is not installed (pip install 'idbench[ray]')", file=sys.stderr)
        return 2
    ray.init(address=None if args.address == "local" else args.address)
    options = {"max_retries": args.retries, "retry_exceptions": True}
    shard_task = ray.remote(num_gpus=args.gpus_per_shard, num_cpus=args.cpus_per_shard, **options)(run_idbench)
    merge_task = ray.remote(num_cpus=args.cpus_per_shard, **options)(run_idbench)  # nothing computed: no GPU
    for step, commands in shard_commands(args):
        task = merge_task if step == "merge" else shard_task
        refs = [task.remote(command) for command in commands]
        try:
            ray.get(refs)
        except Exception as error:
            cause = getattr(error, "cause", None) or error  # a RayTaskError carries the task's own error
            print(f"ray_pipeline: {step} failed after {args.retries} retries: {cause}", file=sys.stderr)
            return 1
        print(f"ray_pipeline: {step}: {len(commands)} task(s) done")
    print(f"ray_pipeline: results in {Path(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
