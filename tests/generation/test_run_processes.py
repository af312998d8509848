"""The generation run across processes: kill -9 and a rerun, and `accelerate launch` with two CPU processes
(gloo) writing exactly the one-process images, each once (docs/generation.md, "Seeds, files, resume")."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from idbench.builders.build import build
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.generation.run import estimate_line, generate_submission, remove_stale_temporaries

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

HERE = Path(__file__).parent
LIMIT = 8


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gen-processes") / "cogcanvas"
    build("cogcanvas", out=folder)
    return folder


def child_env() -> dict:
    return {
        **os.environ,
        "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }


def generate_command(data_dir: Path, out: Path, model: str) -> list[str]:
    return [
        "-m",
        "idbench",
        "generate",
        "cogcanvas",
        "--data",
        str(data_dir),
        "--model",
        model,
        "--out",
        str(out),
        "--resolution",
        "32",
        "--limit",
        str(LIMIT),
    ]


def images(out: Path) -> dict[str, str]:
    """file name -> sha256 of every image in the submission (temporaries excluded)."""
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.png"))
    }


@pytest.mark.e2e
def test_kill_9_mid_run_then_a_rerun_generates_only_the_missing_images(data_dir, tmp_path):
    out = tmp_path / "sub"
    child = subprocess.Popen(
        [sys.executable, *generate_command(data_dir, out, "standin_adapters:StopsAfterThree")],
        env=child_env(),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in child.stderr:  # blocks until the adapter says it stopped
            if "STOPPED-AFTER-3" in line:
                break
        else:
            pytest.fail(f"the child ended first (exit {child.wait()})")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert len(images(out)) == 3
    # A killed write leaves a temporary beside its image; the rerun removes it and never counts it as an image.
    rows = (out / "manifest.csv").read_text().splitlines()[1:]
    missing_file = next(r.split(",")[2] for r in rows if not (out / r.split(",")[2]).exists())
    stale = (out / missing_file).parent / f".{Path(missing_file).name}.abc123.tmp"
    stale.write_bytes(b"half a png")

    rerun = subprocess.run(
        [sys.executable, *generate_command(data_dir, out, "standin_adapters:tinted")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"generated {LIMIT - 3} images" in rerun.stdout and "skipped 3 already there" in rerun.stdout
    assert not stale.exists()
    resumed = images(out)
    assert len(resumed) == LIMIT

    # The same images as one uninterrupted run: the kill changed nothing that was kept.
    fresh = tmp_path / "fresh"
    whole = subprocess.run(
        [sys.executable, *generate_command(data_dir, fresh, "standin_adapters:tinted")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert whole.returncode == 0, whole.stderr[-2000:]
    assert images(fresh) == resumed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.e2e
def test_two_processes_under_accelerate_write_the_one_process_images_once(data_dir, tmp_path):
    pytest.importorskip("accelerate")
    one, two = tmp_path / "one", tmp_path / "two"
    single = subprocess.run(
        [sys.executable, *generate_command(data_dir, one, "standin_adapters:tinted")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    launch = [
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
        *generate_command(data_dir, two, "standin_adapters:tinted"),
    ]
    done = subprocess.run(launch, env=child_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert images(two) == images(one) and len(images(one)) == LIMIT
    # One report, from the main process, counting every image of both shares.
    assert done.stdout.count("generated ") == 1 and f"generated {LIMIT} images" in done.stdout
    record = json.loads((two / "submission.json").read_text())["generation"]
    assert record["processes"] == 2 and record["adapter"] == "standin_adapters:tinted"
    assert not list(two.rglob("*.tmp"))


def test_the_estimate_after_the_first_images(data_dir, tmp_path):
    lines: list[str] = []

    def adapter(request):
        return __import__("standin_adapters").tinted(request)

    sys.path.insert(0, str(HERE))
    try:
        report = generate_submission(
            load_benchmark_data(data_dir),
            adapter,
            tmp_path / "s",
            resolution=32,
            limit=LIMIT,
            progress=False,
            say=lines.append,
        )
    finally:
        sys.path.remove(str(HERE))
    assert report.generated == LIMIT and len(lines) == 1
    assert lines[0].startswith("generate: 3 images in ") and lines[0].endswith(f"for the {LIMIT - 3} left")
    # The arithmetic, by hand: 3 images in 30 s -> 10 s each -> 50 s for 5 more.
    assert estimate_line(3, 30.0, 5) == "generate: 3 images in 30.0 s (10.00 s per image); about 50 s for the 5 left"
    assert estimate_line(3, 30.0, 600).endswith("about 100 min for the 600 left")


def test_only_the_runs_own_temporaries_are_removed(tmp_path):
    (tmp_path / "images").mkdir()
    own = tmp_path / "images" / ".p1_s0.png.x7_k2.tmp"
    other = tmp_path / "images" / ".notes.txt.tmp"
    kept = tmp_path / "images" / "p1_s0.png.tmp"
    for path in (own, other, kept):
        path.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path, ["images/p1_s0.png"]) == 1
    assert not own.exists() and other.exists() and kept.exists()


def shard_command(data_dir: Path, out: Path, model: str, shard: str) -> list[str]:
    """``idbench generate`` of shard ``shard`` (K/N) over the whole manifest, as one job of an array runs it."""
    command = generate_command(data_dir, out, model)
    return [*command[: command.index("--limit")], "--shard", shard]


@pytest.mark.e2e
def test_three_shards_as_three_processes_fill_one_submission_and_a_killed_one_resumes(data_dir, tmp_path, capsys):
    from idbench.cli import main
    from idbench.shards import Shard, unit_key

    data = load_benchmark_data(data_dir)
    out = tmp_path / "sub"
    # Started together, all three race to create the folder. Shard 1 stops after three images and is killed.
    killed = subprocess.Popen(
        [sys.executable, *shard_command(data_dir, out, "standin_adapters:StopsAfterThree", "1/3")],
        env=child_env(),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    others = {
        k: subprocess.Popen(
            [sys.executable, *shard_command(data_dir, out, "standin_adapters:tinted", f"{k}/3")],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (0, 2)
    }
    try:
        for line in killed.stderr:
            if "STOPPED-AFTER-3" in line:
                break
        else:
            pytest.fail(f"shard 1 ended first (exit {killed.wait()})")
        os.kill(killed.pid, signal.SIGKILL)
    finally:
        killed.wait(timeout=60)
    owned = {k: [p for p in data.required_pairs if Shard(k, 3).owns(unit_key(*p))] for k in range(3)}
    for k, child in others.items():
        stdout, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr[-2000:]
        assert f"generated {len(owned[k])} images" in stdout and "(shard " in stdout and f"{k}/3 from --shard" in stdout
    # Shard 1's rows are missing: the folder does not validate yet, and says which.
    assert len(images(out)) == len(owned[0]) + len(owned[2]) + 3
    assert main(["validate", str(out), "--data", str(data_dir)]) == 2
    capsys.readouterr()
    rerun = subprocess.run(
        [sys.executable, *shard_command(data_dir, out, "standin_adapters:tinted", "1/3")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"generated {len(owned[1]) - 3} images" in rerun.stdout and "skipped 3 already there" in rerun.stdout
    assert main(["validate", str(out), "--data", str(data_dir)]) == 0
    # The images of one process, each written once (no temporaries left), and the record says three shards.
    sys.path.insert(0, str(HERE))
    try:
        one = generate_submission(
            data, __import__("standin_adapters").tinted, tmp_path / "one", resolution=32, progress=False
        )
    finally:
        sys.path.remove(str(HERE))
    assert images(out) == images(one.out) and len(images(out)) == len(data.required_pairs)
    assert not list(out.rglob("*.tmp"))
    assert json.loads((out / "submission.json").read_text())["generation"]["shards"] == 3


def test_a_bad_shard_is_one_line_before_any_work(data_dir, tmp_path, capsys, monkeypatch):
    from idbench.cli import main

    command = shard_command(data_dir, tmp_path / "sub", "standin_adapters:tinted", "3/3")[2:]
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "shard 3 of 3" in err and not (tmp_path / "sub").exists()
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")  # a Kubernetes indexed Job without the count
    assert main(command[: command.index("--shard")]) == 2
    assert "IDBENCH_SHARD_COUNT" in capsys.readouterr().err
