"""Shard scaling: one `idbench score` process against 2 and 4 shard processes run side by side, and the merge.

The CogCanvas sample's collage baseline (every prompt, 512 px: dlib's HOG finds the faces) is scored with
the tiny profile and the real dlib face model on ID-Sim, DINO-Sim, CLIP-T and BG-Sim (and the copy check,
which every run does), each variant with a fresh feature cache:

- one process: ``idbench score`` (the slow obvious way: everything in one job);
- N shards: ``idbench score --shard k/N`` as N processes started together, then ``idbench merge``.

For each it prints the wall time of the scoring step (the slowest shard), the merge's time, and the
speed-up against one process; and it checks that the merged aggregates equal the single process's. On
a machine with fewer cores than shards the shards share the cores: the figure then shows the cost of
splitting (each shard loads the models and reads the references), not a speed-up.

Run: .venv/bin/python bench/shard_scaling.py [--shards 1,2,4] [--size 512] [--metrics id_sim,dino_sim,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.results import read_aggregates


def idbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "idbench", *args]


def score_args(root: Path, out: Path, cache: Path, metrics: str) -> list[str]:
    return [
        "score",
        str(root / "sub"),
        "--data",
        str(root / "data"),
        "--out",
        str(out),
        "--profile",
        "tiny",
        "--metrics",
        metrics,
        "--cache-dir",
        str(cache),
    ]


def run_together(commands: list[list[str]], env: dict) -> float:
    """Start every command at once; the seconds until the last one ends (each must exit 0)."""
    started = time.perf_counter()
    children = [
        subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in commands
    ]
    for child in children:
        _, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(child.args)} failed:\n{err[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", default="1,2,4")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--metrics", default="id_sim,dino_sim,clip_t,bg_sim")
    options = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="idbench-shards-") as folder:
        root = Path(folder)
        build("cogcanvas", out=root / "data")
        data = load_benchmark_data(root / "data")
        make_baseline("collage", data, root / "sub", size=options.size)
        print(
            f"CogCanvas sample: {len(data.required_pairs)} images at {options.size} px, tiny profile, {options.metrics}"
        )
        print(f"machine: {os.cpu_count()} cores, one thread per process\n")
        single = run_together([idbench(*score_args(root, root / "one", root / "cache-one", options.metrics))], env)
        reference = read_aggregates(root / "one")["aggregates"]
        print(f"{'shards':>6} {'scoring s':>10} {'merge s':>8} {'total s':>8} {'vs one process':>15}")
        print(f"{'1 (no)':>6} {single:10.1f} {'-':>8} {single:8.1f} {'1.00x':>15}")
        for count in (int(n) for n in options.shards.split(",")):
            out, cache = root / f"out-{count}", root / f"cache-{count}"
            base = score_args(root, out, cache, options.metrics)
            scoring = run_together([idbench(*base, "--shard", f"{k}/{count}") for k in range(count)], env)
            merging = run_together([idbench("merge", str(out))], env)
            merged = read_aggregates(out)["aggregates"]
            assert merged == reference, f"{count} shards: the merged aggregates differ from one process's"
            total = scoring + merging
            print(f"{count:>6} {scoring:10.1f} {merging:8.1f} {total:8.1f} {single / total:14.2f}x")
        print("\nmerged aggregates equal to one process's in every case")


if __name__ == "__main__":
    main()
