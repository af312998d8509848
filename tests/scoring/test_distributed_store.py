"""The feature store under `accelerate launch` with 2 CPU processes (gloo) equals a single process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# `accelerate launch` and `idbench score` in subprocesses
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    sys.path[:0] = [{root!r}, {tests!r}, {scoring!r}]
    from accelerate import Accelerator
    from idbench.evaluate_pkg.features import FeatureStore
    from helpers import noise_jpeg
    from test_features import MeanColourEncoder

    accelerator = Accelerator(cpu=True)
    blobs = [noise_jpeg(seed) for seed in range(9)]
    images = {{hashlib.sha256(b).hexdigest(): (lambda b=b: b) for b in blobs}}
    encoder = MeanColourEncoder()
    store = FeatureStore(sys.argv[1], accelerator=accelerator)
    features = store.encode_images(encoder, images, batch_size=2)
    out = {{key: features[key]["embedding"].tolist() for key in sorted(features)}}
    with open(sys.argv[2] + f".rank{{accelerator.process_index}}.json", "w") as handle:
        json.dump({{"features": out, "encoded_here": encoder.images_seen,
                   "world": accelerator.num_processes, "backend": str(accelerator.distributed_type)}}, handle)
    # leave the process group cleanly: gloo threads alive at interpreter exit abort the process
    accelerator.wait_for_everyone()
    accelerator.end_training()
    """
)


def free_port() -> int:
    """A port nobody listens on now: a fixed one can still be in TIME_WAIT from an earlier run."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(command: list[str], env: dict) -> None:
    """Run a launcher command; on failure show what the processes printed."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def run(tmp_path: Path, processes: int) -> list[dict]:
    script = tmp_path / "score_store.py"
    script.write_text(SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), scoring=str(ROOT / "tests" / "scoring")))
    cache, out = tmp_path / f"cache{processes}", tmp_path / f"out{processes}"
    if processes == 1:
        command = [sys.executable, str(script), str(cache), str(out)]
    else:
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(free_port()),
            str(script),
            str(cache),
            str(out),
        ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    launch(command, env)
    return [json.loads(Path(f"{out}.rank{rank}.json").read_text()) for rank in range(processes)]


def test_two_processes_share_the_work_and_agree(tmp_path):
    (single,) = run(tmp_path, 1)
    ranks = run(tmp_path, 2)
    assert all(r["world"] == 2 and "MULTI_CPU" in r["backend"] for r in ranks)
    # the unique images were split between the processes, none encoded twice
    assert sorted(r["encoded_here"] for r in ranks) == [4, 5]
    # every process ends with all features, equal to the single-process run
    for r in ranks:
        assert r["features"].keys() == single["features"].keys()
        for key, value in single["features"].items():
            assert r["features"][key] == value


def test_idbench_score_under_accelerate_equals_one_process(tmp_path):
    """The whole `idbench score` command launched on 2 CPU processes writes the same results."""
    import pandas as pd

    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.data import load_benchmark_data

    build("identity-collapse", out=tmp_path / "data")
    make_baseline("impostor", load_benchmark_data(tmp_path / "data"), tmp_path / "sub", size=128)
    arguments = [
        "score",
        str(tmp_path / "sub"),
        "--data",
        str(tmp_path / "data"),
        "--profile",
        "tiny",
        "--metrics",
        "clip_t,dino_sim,scr@0.5,scr_instance@0.5",
        "--batch-size",
        "8",
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    single = [
        sys.executable,
        "-m",
        "idbench.cli",
        *arguments,
        "--out",
        str(tmp_path / "one"),
        "--cache-dir",
        str(tmp_path / "cache-one"),
    ]
    launched = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        "-m",
        "idbench.cli",
        *arguments,
        "--out",
        str(tmp_path / "two"),
        "--cache-dir",
        str(tmp_path / "cache-two"),
    ]
    for command in (single, launched):
        launch(command, env)
    one = pd.read_parquet(tmp_path / "one" / "results.parquet")
    two = pd.read_parquet(tmp_path / "two" / "results.parquet")
    pd.testing.assert_frame_equal(one, two)
    summary = json.loads((tmp_path / "two" / "aggregates.json").read_text())
    assert sum(summary["features"]["computed"].values()) > 0
