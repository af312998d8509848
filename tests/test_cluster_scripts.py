"""The Slurm recipe (scripts/cluster, docs/cluster.md), run with stand-ins for `sbatch` and `idbench` on PATH:
the pipeline submits two job arrays and the merge, each waiting for the step before; each script runs an
idbench command that the CLI's parser accepts, with the shard left to Slurm's variables. (What those
commands do under a job array is tested in tests/scoring/test_shards_merge.py and
tests/generation/test_run_processes.py.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from idbench.cli import make_parser

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

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


@pytest.mark.parametrize(
    "shards",
    ["PATH[$(touch X)]+2", "a[$(touch X)]", "$(touch X)", "0", "-1", "2+1", "08x", "1e3", " 3", "3 ", "1\n2", "99999"],
)
def test_shards_is_checked_as_text_before_any_arithmetic(tmp_path, shards):
    """Bash evaluates a variable's text inside $((...)): SHARDS='PATH[$(touch X)]+2' ran `touch X`
    (issue 40, item 7e). Now anything but a whole number 1-10000 is one line, and nothing is submitted."""
    env = {**stand_ins(tmp_path / "bin"), "SHARDS": shards}
    done = subprocess.run(
        ["bash", str(SCRIPTS / "slurm_pipeline.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert not (tmp_path / "X").exists()  # no command ran
    assert done.returncode == 2 and not (tmp_path / "bin" / "sbatch.log").exists()
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "slurm_pipeline.sh: SHARDS must be a whole number of shards from 1 to 10000; got "
    ), done.stderr


def test_shards_with_a_leading_zero_is_read_in_decimal(tmp_path):
    env = {**stand_ins(tmp_path / "bin"), "SHARDS": "08"}  # bash arithmetic would read 08 as bad octal
    done = subprocess.run(
        ["bash", str(SCRIPTS / "slurm_pipeline.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "--array=0-7" in (tmp_path / "bin" / "sbatch.log").read_text().splitlines()[0]


def test_no_cluster_script_does_arithmetic_on_a_variable_it_did_not_check():
    """Each $((...)) of the cluster scripts reads only a variable checked by the regex just before it."""
    import re

    for script in sorted(SCRIPTS.glob("*.s*")):
        code = "\n".join(line for line in script.read_text().splitlines() if not line.lstrip().startswith("#"))
        for expression in re.findall(r"\(\((.*?)\)\)", code):  # $((...)) and ((...))
            reads = re.findall(r"(?:10#\$|\$\{#|\$)?[A-Za-z_][A-Za-z0-9_]*", expression)
            assert set(reads) <= {"10#$SHARDS", "${#SHARDS"}, f"{script.name}: (({expression})) reads {reads}"
        if re.search(r"\(\(", code):
            assert "[[ $SHARDS =~ ^[0-9]+$ ]]" in code


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


# --- Ray: scripts/cluster/ray_pipeline.py, with a stand-in for Ray that keeps its contract --------------


class _StandInRay(types.ModuleType):
    """What the pipeline uses of Ray, run in this process: ``init``, ``remote(**options)`` (tasks run when
    ``get`` asks, each up to ``1 + max_retries`` times when ``retry_exceptions``), ``get`` (raising an
    error whose ``cause`` is the task's own, as Ray's RayTaskError does)."""

    class TaskError(Exception):
        def __init__(self, cause: BaseException):
            super().__init__(f"ray::task failed\nTraceback ...\n{cause}")
            self.cause = cause

    def __init__(self):
        super().__init__("ray")
        self.log: list[tuple] = []

    def init(self, address=None):
        self.log.append(("init", address))

    def remote(self, **options):
        def wrap(function):
            def submit(*args):
                self.log.append(("submit", options, args))
                return (function, args, options)

            return types.SimpleNamespace(remote=submit)

        return wrap

    def get(self, refs):
        results = []
        for function, args, options in refs:
            for _attempt in range(1 + (options["max_retries"] if options.get("retry_exceptions") else 0)):
                try:
                    results.append(function(*args))
                    break
                except Exception as error:
                    last = error
            else:
                raise self.TaskError(last)
        return results


def load_ray_pipeline():
    spec = importlib.util.spec_from_file_location("ray_pipeline", SCRIPTS / "ray_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flaky_idbench(folder: Path) -> None:
    """`idbench` logging its arguments; its first run for shard 1/3 fails (a lost node), later ones work."""
    folder.mkdir()
    (folder / "idbench").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "log = os.path.join(os.environ['LOG_DIR'], 'idbench.log')\n"
        "with open(log, 'a') as handle:\n"
        "    handle.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "failed = os.path.join(os.environ['LOG_DIR'], 'failed-once')\n"
        "if sys.argv[-1] == '1/3' and not os.path.exists(failed):\n"
        "    open(failed, 'w').close()\n"
        "    sys.exit('node lost')\n"
        "if 'no_such_metric' in sys.argv:\n"
        "    sys.exit('idbench score: error: unknown metric(s) no_such_metric')\n"
    )
    (folder / "idbench").chmod(0o755)


def test_the_ray_pipeline_runs_each_step_after_the_last_retries_and_resumes(tmp_path, monkeypatch, capsys):
    bin_folder = tmp_path / "bin"
    flaky_idbench(bin_folder)
    monkeypatch.setenv("PATH", f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LOG_DIR", str(bin_folder))
    ray = _StandInRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    pipeline = load_ray_pipeline()
    out = tmp_path / "scores"
    common = ["--shards", "3", "--benchmark", "cogcanvas", "--data", "built/cogcanvas", "--sub", "subs/mine"]
    common += ["--out", str(out), "--cache-dir", "/shared/features", "--score-args", "--profile tiny"]
    generate = ["--generate-args", f"--model diffusers-image-list --model-id org/model --revision {'0' * 40}"]

    assert pipeline.main(["--address", "auto", *common, *generate]) == 0
    commands = [json.loads(line) for line in (bin_folder / "idbench.log").read_text().splitlines()]
    parser = make_parser()
    parsed = [parser.parse_args(argv) for argv in commands]
    steps = [args.command for args in parsed]
    # generate 0..2 (1/3 twice: its first run failed and was retried), then score 0..2, then the merge
    assert steps == ["generate"] * 4 + ["score"] * 3 + ["merge"]
    assert [args.shard for args in parsed[:4]] == ["0/3", "1/3", "1/3", "2/3"]
    assert [args.shard for args in parsed[4:7]] == ["0/3", "1/3", "2/3"]
    assert parsed[0].model_id == "org/model" and parsed[4].profile == "tiny" and str(parsed[7].out) == str(out)
    assert ray.log[0] == ("init", "auto")
    shard_options = [entry[1] for entry in ray.log if entry[0] == "submit"]
    assert shard_options[0]["num_gpus"] == 1.0 and "num_gpus" not in shard_options[-1]  # the merge needs no GPU

    # Rerun with shard 0's record there: it has finished, so only 1 and 2 are scored again.
    (bin_folder / "idbench.log").unlink()
    (out / "shards").mkdir(parents=True)
    (out / "shards" / "0-of-3.json").write_text("{}")
    assert pipeline.main(["--address", "local", *common]) == 0
    rerun = [parser.parse_args(json.loads(line)) for line in (bin_folder / "idbench.log").read_text().splitlines()]
    assert [(args.command, getattr(args, "shard", None)) for args in rerun] == [
        ("score", "1/3"),
        ("score", "2/3"),
        ("merge", None),
    ]
    assert ray.log[-4] == ("init", None)  # local: Ray starts an instance of its own

    # A shard that keeps failing stops the pipeline with one line naming its command; no merge runs.
    capsys.readouterr()
    (out / "shards" / "0-of-3.json").unlink()
    failing = [*common[:-1], "--profile tiny --metrics no_such_metric"]
    assert pipeline.main(["--retries", "1", *failing]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "score failed after 1 retries" in err and "--shard 0/3 exited 1" in err
    assert "unknown metric(s) no_such_metric" in err
