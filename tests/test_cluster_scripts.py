"""The Slurm recipe (scripts/cluster, docs/cluster.md), run with stand-ins for `sbatch` and `idbench` on PATH:
the pipeline submits two job arrays and the merge, each waiting for the step before; each script runs an
idbench command that the CLI's parser accepts, with the shard left to Slurm's variables. (What those
commands do under a job array is tested in tests/scoring/test_shards_merge.py and
tests/generation/test_run_processes.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from idbench.cli import make_parser

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "cluster"
ENV = {
    "BENCHMARK": "cogcanvas",
    "DATA": "built/cogcanvas",
    "SUB": "subs/mine",
    "OUT": "scores/mine",
    "CACHE": "/shared/features",
    "MODEL": "diffusers-image-list",
    "MODEL_ID": "org/model",
    "REVISION": "0" * 40,
    "SHARDS": "3",
}


def stand_ins(folder: Path) -> dict[str, str]:
    """`sbatch` prints job ids 101, 102, ... and logs its arguments; `idbench` logs its arguments."""
    folder.mkdir()
    (folder / "sbatch").write_text(
        "#!/usr/bin/env bash\n"
        'n=$(($(wc -l < "$LOG_DIR/sbatch.log" 2>/dev/null || echo 0) + 101))\n'
        'printf "%s\\n" "$*" >> "$LOG_DIR/sbatch.log"\n'
        'echo "$n"\n'
    )
    (folder / "idbench").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "with open(os.path.join(os.environ['LOG_DIR'], 'idbench.log'), 'a') as log:\n"
        "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    for name in ("sbatch", "idbench"):
        (folder / name).chmod(0o755)
    return {**os.environ, **ENV, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "LOG_DIR": str(folder)}


def test_the_pipeline_chains_two_arrays_and_the_merge(tmp_path):
    env = stand_ins(tmp_path / "bin")
    done = subprocess.run(
        ["bash", str(SCRIPTS / "slurm_pipeline.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    generate, score, merge = (tmp_path / "bin" / "sbatch.log").read_text().splitlines()
    assert "--array=0-2" in generate and generate.endswith("generate.sbatch")
    assert "--array=0-2" in score and "--dependency=afterok:101" in score and score.endswith("score.sbatch")
    assert "--array" not in merge and "--dependency=afterok:102" in merge and merge.endswith("merge.sbatch")
    assert "generate 101" in done.stdout and "merge 103" in done.stdout
    missing = subprocess.run(
        ["bash", str(SCRIPTS / "slurm_pipeline.sh")],
        cwd=tmp_path,
        env={k: v for k, v in env.items() if k != "CACHE"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode != 0 and "CACHE" in missing.stderr  # a variable left out: said, nothing submitted


def test_each_job_runs_an_idbench_command_the_cli_accepts(tmp_path):
    env = stand_ins(tmp_path / "bin")
    env.update({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "GENERATE_ARGS": "--resolution 512"})
    for script in ("generate.sbatch", "score.sbatch", "merge.sbatch"):
        done = subprocess.run(["bash", str(SCRIPTS / script)], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{script}: {done.stderr}"
    commands = [json.loads(line) for line in (tmp_path / "bin" / "idbench.log").read_text().splitlines()]
    parser = make_parser()
    for argv in commands:
        args = parser.parse_args(argv)
        assert getattr(args, "shard", None) is None  # each array task's shard comes from Slurm's variables
    generate, score, merge = (parser.parse_args(argv) for argv in commands)
    assert (generate.command, generate.model_id, generate.revision, generate.resolution) == (
        "generate",
        "org/model",
        "0" * 40,
        512,
    )
    assert (score.command, str(score.cache_dir), score.device) == ("score", "/shared/features", "cuda")
    assert (merge.command, str(merge.out)) == ("merge", "scores/mine")
