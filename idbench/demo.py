"""The main job on embedded defaults: build the three sample benchmarks and read them back.

Later issues extend it with scoring and the leaderboard; for now it proves the round trip a user makes:
our builder writes a folder, ``datasets.load_dataset`` reads it with nothing of ours involved.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import datasets

from builders.benchmarks import BENCHMARKS
from builders.build import build, format_report


def load_built(folder: Path, config: str, cache_dir: str) -> datasets.Dataset:
    """Read one config of a built folder the way a user reads it from the Hub."""
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=cache_dir)


def run_demo(out: Path) -> None:
    root = Path(out) / "datasets"
    print(f"Building the three benchmarks from the shipped samples into {root}/ (sample builds, not paper scale)\n")
    with tempfile.TemporaryDirectory(prefix="idbench-demo-cache-") as cache_dir:
        for name in BENCHMARKS:
            folder = root / name
            info = build(name, out=folder, overwrite=True)
            print(format_report(info))
            for config in info["configs"]:
                # A fresh cache per run: datasets may otherwise serve a stale copy of a rebuilt folder.
                loaded = load_built(folder, config, cache_dir)
                print(f"  load_dataset({str(folder)!r}, {config!r}) -> {loaded.num_rows} rows, columns: "
                      f"{', '.join(loaded.column_names)}")
            prompts = load_built(folder, "prompts", cache_dir)
            print(f"  example prompt: {prompts[0]['prompt']}\n")
    print(f"Done. Each folder holds a README.md dataset card; publish one with "
          f"`idbench publish {root}/<name> --repo-id ORG/NAME --dry-run`.")
