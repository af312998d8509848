"""Paper scale: a synthetic benchmark of the paper's shape at a fraction of its size, every stage timed.

``python bench/paper_scale.py --benchmark NAME --scale F --out DIR`` writes a source folder of the paper's
design at fraction F of its size, then runs each stage of the pipeline in a child process of its own and
writes ``DIR/scale.json``::

    {"benchmark", "scale", "prompts", "references", "images", "design": {...},
     "stages": {NAME: {"seconds", "cpu_seconds", "peak_rss_mb", ...}}}

The design (paper sizes: /work/shared/papers, benchmarks/<name>/README.md):

- CogCanvas: 1,952 reference images of 100 identities, 80 objects, 35 fashion items and 29 backgrounds;
  1,361 prompts of 2-5 persons. At F: round(F x each) entities (at least 5 persons, 4 objects, 2 fashion
  items, 2 backgrounds, so every group size can be drawn), round(F x 1,952) images spread evenly over
  them, ``--prompts round(F x 1,361)``.
- CHARIS: 154 subjects over 4 types x 3 styles, 7 prompts each (1,078). At F: max(12, round(F x 154))
  subjects (every type x style cell needs one), ``--prompts round(F x 1,078)``.
- Identity Collapse: a fixed grid of 75 prompts x 3 seeds (the builder refuses ``--prompts``) over a pool
  of subjects whose size the paper does not state. The grid has 450 subject slots (15 prompts at each of
  2, 4, 6, 8, 10 subjects), so F sets the pool at max(10, round(F x 450)) subjects; the images stay 225
  at every scale and only the references grow.

Every reference image is a shipped sample picture of the row's kind (samples/, re-used in turn; the
metadata of that sample row is copied) cropped, recoloured and pasted at a random place and size on a
procedural canvas (gradient and blocks, its own seed), so pHash dedup keeps it and the detectors and the
face model see the real picture's content. Names get a number ("... number 17") so no two entities share
one. Then, each in a child process (``os.wait4`` gives its CPU seconds, children included, and its peak
RSS):

- ``source``: writing the synthetic source (this script's own cost, not the product's);
- ``build``: ``idbench build NAME --source ... --prompts N``;
- ``generate``: ``idbench generate`` with the trivial adapter :func:`collage` (the prompt's references
  pasted side by side on a tint drawn from the prompt and seed, ``--resolution``, default 512);
- ``validate``: ``idbench validate``;
- ``score``: ``score_submission`` with the ``tiny`` profile (+ the real dlib face model) and the suite's
  default metrics, through the progress recorder of bench/stage_throughput.py, which also gives
  ``copy_check`` (the scorer's ``copy check`` stage: wall and the child's process CPU seconds, no RSS of
  its own: it is inside ``score``) and every other scorer stage under ``score.stages``;
- ``shards``: ``idbench score --shard 0/2`` and ``1/2`` started together (run_together of
  bench/shard_scaling.py), each with its own cache folder; the RSS is the larger shard's;
- ``merge``: ``idbench merge``;
- ``leaderboard_fill``: 50 result folders synthesised from the scored one (each metric's per-sample
  values shifted by a per-model quality and jittered), each aggregated by the real
  ``report.aggregate`` and stored as a finished job of a fresh ``Store`` (what the worker does when a
  result arrives, as bench/leaderboard_render.py does);
- ``standings``: in a fresh process, ``board.refresh`` (every board of the benchmark: each rankable
  metric, overall and per breakdown cell, with its rank intervals and tiers; what a finished job
  costs), then what a page view does: ``board.standings`` (the ranked table with the stored intervals)
  and ``display_table``.

``--stages a,b`` runs a subset (their inputs must be there, from an earlier run into the same ``--out``).
``bench/fit_exponents.py`` fits each stage's growth exponent over several scale.json files.

Run: .venv/bin/python bench/paper_scale.py --benchmark cogcanvas --scale 0.05 --out /tmp/ps-cog-0.05
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for _path in (str(ROOT), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

SAMPLES = ROOT / "samples"
STAGES = (
    "source",
    "build",
    "generate",
    "validate",
    "score",
    "shards",
    "merge",
    "leaderboard_fill",
    "standings",
)
#: The paper's design (papers 000-002; benchmarks/<name>/README.md).
COGCANVAS_ENTITIES = {"person": 100, "object": 80, "fashion": 35, "background": 29}
COGCANVAS_MINIMUM = {"person": 5, "object": 4, "fashion": 2, "background": 2}
COGCANVAS_REFERENCES, COGCANVAS_PROMPTS = 1952, 1361
CHARIS_SUBJECTS, CHARIS_PROMPTS, CHARIS_CELLS = 154, 1078, 12
COLLAPSE_SLOTS, COLLAPSE_MINIMUM, COLLAPSE_IMAGES = 450, 10, 75 * 3
SUBMISSIONS = 50
CANVAS = 512


# --- the design -------------------------------------------------------------------------------------


def design(benchmark: str, scale: float, prompts: int | None = None) -> dict[str, Any]:
    """What a build at ``scale`` holds: entities / subjects per kind, reference images, prompts, images."""
    if benchmark == "cogcanvas":
        entities = {k: max(COGCANVAS_MINIMUM[k], round(scale * n)) for k, n in COGCANVAS_ENTITIES.items()}
        refs = max(sum(entities.values()), round(scale * COGCANVAS_REFERENCES))
        n = prompts if prompts is not None else max(1, round(scale * COGCANVAS_PROMPTS))
        return {"entities": entities, "references": refs, "prompts": n, "images": n}
    if benchmark == "charis":
        subjects = max(CHARIS_CELLS, round(scale * CHARIS_SUBJECTS))
        n = prompts if prompts is not None else max(1, round(scale * CHARIS_PROMPTS))
        return {"entities": {"subject": subjects}, "references": subjects, "prompts": n, "images": n}
    if benchmark == "identity-collapse":
        if prompts is not None:
            raise SystemExit("identity-collapse has a fixed grid of 75 prompts: drop --prompts")
        subjects = max(COLLAPSE_MINIMUM, round(scale * COLLAPSE_SLOTS))
        return {"entities": {"subject": subjects}, "references": subjects, "prompts": 75, "images": COLLAPSE_IMAGES}
    raise SystemExit(f"unknown benchmark {benchmark!r}: cogcanvas, charis or identity-collapse")


def sample_rows(benchmark: str) -> list[dict[str, str]]:
    with (SAMPLES / f"{benchmark}.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def synthetic_image(picture: Path, seed: int, side: int = CANVAS):
    """The sample ``picture`` cropped, recoloured and pasted on a procedural canvas of its own seed."""
    import numpy as np
    from PIL import Image, ImageEnhance

    rng = np.random.default_rng(seed)
    low, high = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    ramp = np.linspace(0.0, 1.0, side)
    ramp = ramp[:, None, None] if rng.random() < 0.5 else ramp[None, :, None]
    canvas = (low + (high - low) * ramp) * np.ones((side, side, 1))
    for _ in range(int(rng.integers(4, 10))):  # blocks, so pHash differs from every other canvas
        x, y = rng.integers(0, side, 2)
        w, h = rng.integers(side // 16, side // 3, 2)
        canvas[y : y + h, x : x + w] = rng.integers(0, 256, 3)
    base = Image.fromarray(canvas.astype(np.uint8))
    with Image.open(picture) as opened:
        subject = opened.convert("RGB")
    w, h = subject.size
    keep = rng.uniform(0.8, 1.0)
    cw, ch = int(w * keep), int(h * keep)
    left, top = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    subject = subject.crop((left, top, left + cw, top + ch))
    subject = ImageEnhance.Color(subject).enhance(rng.uniform(0.7, 1.3))
    subject = ImageEnhance.Brightness(subject).enhance(rng.uniform(0.85, 1.15))
    if rng.random() < 0.5:
        subject = subject.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    fit = rng.uniform(0.55, 0.85) * side / max(subject.size)
    subject = subject.resize((max(1, int(subject.width * fit)), max(1, int(subject.height * fit))))
    x = int(rng.integers(0, side - subject.width + 1))
    y = int(rng.integers(0, side - subject.height + 1))
    base.paste(subject, (x, y))
    return base


def write_source(benchmark: str, plan: dict[str, Any], folder: Path, seed: int = 0) -> Path:
    """The synthetic source folder (images + ``<benchmark>.csv``) of ``plan``; returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "images").mkdir(exist_ok=True)
    rows = sample_rows(benchmark)
    columns = list(rows[0])
    out: list[dict[str, str]] = []
    rng = random.Random(seed)

    def add(template: dict[str, str], values: dict[str, str], index: int) -> None:
        file = f"images/{index:05d}.jpg"
        synthetic_image(SAMPLES / template["file"], seed * 1_000_003 + index).save(folder / file, quality=90)
        out.append({**template, **values, "file": file})

    if benchmark == "cogcanvas":
        by_kind: dict[str, list[dict[str, str]]] = {}
        for row in rows:
            by_kind.setdefault(row["kind"], []).append(row)
        entities = [(kind, k) for kind, n in plan["entities"].items() for k in range(n)]
        per_entity = [plan["references"] // len(entities)] * len(entities)
        for k in range(plan["references"] - sum(per_entity)):
            per_entity[k] += 1
        index = 0
        for (kind, k), images in zip(entities, per_entity):
            template = by_kind[kind][k % len(by_kind[kind])]
            entity = f"{kind}-{k:04d}"
            name = f"{template['name']} number {k + 1}"
            for j in range(images):
                add(template, {"entity_id": entity, "ref_id": f"{entity}-{j}", "name": name}, index)
                index += 1
    elif benchmark == "charis":
        cells: dict[tuple[str, str], list[dict[str, str]]] = {}
        for row in rows:
            cells.setdefault((row["type"], row["style"]), []).append(row)
        # Every type x style cell first, then the cells in turn, so the pool stays balanced.
        order = [cells[c][k % len(cells[c])] for k in range(plan["references"]) for c in sorted(cells)]
        for k, template in enumerate(order[: plan["references"]]):
            values = {"subject_id": f"subject-{k:04d}", "name": f"{template['name']} number {k + 1}"}
            add(template, values, k)
    else:
        pool = rows[:]
        rng.shuffle(pool)
        for k in range(plan["references"]):
            template = pool[k % len(pool)]
            add(template, {"name": f"{template['name']} number {k + 1}"}, k)
    manifest = folder / f"{benchmark}.csv"
    with manifest.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(out)
    return manifest


# --- the trivial adapter ----------------------------------------------------------------------------


def collage(request):
    """The prompt's references side by side on a tint of the (prompt, seed) (``idbench generate --model paper_scale:collage``)."""
    import numpy as np
    from PIL import Image

    side = request.resolution
    # The tint is drawn from (prompt, seed): two prompts of one subject never give the same picture (the
    # scorer encodes each distinct image once, so equal pictures would make scoring look cheaper than it is).
    rng = np.random.default_rng(zlib.crc32(f"{request.prompt_id}/{request.seed}".encode()))
    canvas = Image.new("RGB", (side, side), tuple(int(v) for v in rng.integers(0, 256, 3)))
    images = request.images
    if images:
        cell = side // len(images)
        for k, image in enumerate(images):
            thumb = image.convert("RGB")
            thumb.thumbnail((cell, side))
            canvas.paste(thumb, (k * cell, (side - thumb.height) // 2))
    return canvas


# --- the stages (each runs in a child process) ------------------------------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "idbench", *args]


def child_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}


def stage_command(stage: str, args: argparse.Namespace) -> list[str]:
    """The child's command line: the CLI where the product has a command, else this script's ``--child``."""
    out = args.out
    name = args.benchmark
    if stage == "build":
        command = cli("build", name, "--source", str(out / "source"), "--out", str(out / "data"), "--overwrite")
        if name != "identity-collapse":
            command += ["--prompts", str(args.plan["prompts"])]
        return command
    if stage == "generate":
        if (out / "submission").exists():
            shutil.rmtree(out / "submission")
        return cli(
            "generate",
            name,
            "--data",
            str(out / "data"),
            "--out",
            str(out / "submission"),
            "--model",
            "paper_scale:collage",
            "--resolution",
            str(args.resolution),
        )
    if stage == "validate":
        return cli("validate", str(out / "submission"), "--data", str(out / "data"))
    if stage == "merge":
        return cli("merge", str(out / "sharded"))
    return [sys.executable, str(Path(__file__).resolve()), "--child", stage, *args.argv]


def run_stage(stage: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``stage`` in a child; its wall seconds, CPU seconds (user + sys, its children included), peak RSS."""
    command = stage_command(stage, args)
    log = args.out / "logs" / f"{stage}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log.open("w") as handle:
        child = subprocess.Popen(command, env=child_env(), stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"stage {stage} failed (exit {child.returncode}): {' '.join(command)}\n{tail}")
    record = {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
    }
    extra = args.out / "logs" / f"{stage}.json"
    if extra.exists():
        record.update(json.loads(extra.read_text()))
    print(
        f"  {stage:18s} {record['seconds']:9.2f} s  {record['cpu_seconds']:9.2f} CPU s  {record['peak_rss_mb']:8.1f} MB"
    )
    return record


def child_source(args: argparse.Namespace) -> dict[str, Any]:
    if (args.out / "source").exists():
        shutil.rmtree(args.out / "source")
    write_source(args.benchmark, args.plan, args.out / "source", seed=args.seed)
    return {}


def score_options():
    from idbench.evaluate_pkg.context import ScoreOptions

    return ScoreOptions(profile="tiny", device="cpu")


def child_score(args: argparse.Namespace) -> dict[str, Any]:
    from stage_throughput import Recorder

    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    class CpuRecorder(Recorder):
        """Recorder that also notes the process CPU seconds of each stage (threads included)."""

        def _start(self, stage: str, total: int, unit: str, shared: bool):
            tick, cpu = super()._start(stage, total, unit, shared), time.process_time()
            stages = self.stages

            def mark() -> None:
                for record in stages:
                    if record["stage"] == stage and "seconds" in record and "cpu_seconds" not in record:
                        record["cpu_seconds"] = time.process_time() - cpu

            class CpuTick:
                def __call__(self, n: int = 1) -> None:
                    tick(n)
                    mark()

                def close(self, quiet: bool = False) -> None:
                    tick.close(quiet)
                    mark()

            return CpuTick()

    data = load_benchmark_data(args.out / "data", cache_dir=str(args.out / "hf"))
    recorder = CpuRecorder()
    for folder in ("results", "cache"):
        if (args.out / folder).exists():
            shutil.rmtree(args.out / folder)
    summary = score_submission(
        args.out / "submission",
        data,
        args.out / "results",
        score_options(),
        cache_dir=args.out / "cache",
        progress=recorder,
    )
    copy = [s for s in recorder.stages if s["stage"] == "copy check"]
    extra: dict[str, Any] = {
        "stages": [
            {k: v for k, v in s.items() if k in ("stage", "done", "unit", "seconds", "cpu_seconds")}
            for s in recorder.stages
        ],
        "steps": recorder.steps,
        "not_run": summary.get("not_run"),
    }
    if copy:
        extra["copy_check"] = {
            "seconds": round(sum(s["seconds"] for s in copy), 3),
            "cpu_seconds": round(sum(s.get("cpu_seconds", 0.0) for s in copy), 3),
            "peak_rss_mb": None,
            "items": sum(s["done"] for s in copy),
        }
    return extra


def child_shards(args: argparse.Namespace) -> dict[str, Any]:
    from shard_scaling import run_together

    out = args.out / "sharded"
    if out.exists():
        shutil.rmtree(out)
    commands = []
    for k in (0, 1):  # --shard K/N counts from 0
        command = ["score", str(args.out / "submission"), "--data", str(args.out / "data"), "--out", str(out)]
        command += ["--profile", "tiny", "--cache-dir", str(args.out / f"shard-cache-{k}"), "--shard", f"{k}/2"]
        if (args.out / f"shard-cache-{k}").exists():
            shutil.rmtree(args.out / f"shard-cache-{k}")
        commands.append(cli(*command))
    env = {**child_env(), "OMP_NUM_THREADS": "1"}
    return {"wall_of_slowest": round(run_together(commands, env), 3), "note": "peak_rss_mb is the larger shard's"}


def perturbed(frame, rng, quality: float):
    """One synthetic model's per-sample results: each metric shifted by ``quality`` standard deviations, jittered."""
    import numpy as np

    frame = frame.copy()
    values = frame["value"].astype(float)
    sd = values.groupby(frame["metric"]).transform("std").fillna(0.0).replace(0.0, 0.05)
    frame["value"] = values + sd * (quality + rng.normal(0.0, 0.5, len(frame)))
    frame.loc[~np.isfinite(values), "value"] = values[~np.isfinite(values)]
    return frame


def child_leaderboard_fill(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.report import aggregate
    from idbench.evaluate_pkg.results import read_aggregates, read_samples, write_samples
    from idbench.evaluate_pkg.runner import prompts_frame, references_frame
    from idbench.leaderboard.queue import claim, finish
    from idbench.leaderboard.store import Store

    home = args.out / "board"
    if home.exists():
        shutil.rmtree(home)
    data = load_benchmark_data(args.out / "data", cache_dir=str(args.out / "hf"))
    scored = read_samples(args.out / "results")
    summary = read_aggregates(args.out / "results")
    prompts, references = prompts_frame(data), references_frame(data)
    store = Store(home)
    rng = np.random.default_rng(0)
    for i in range(SUBMISSIONS):
        frame = perturbed(scored, rng, quality=rng.normal(0.0, 1.0))
        folder = home / "results-store" / f"model-{i:03d}"
        folder.mkdir(parents=True)
        write_samples(folder, frame)
        # Marked as real rows (as bench/leaderboard_render.py does), so the page ranks all 50, not only a tiny note.
        aggregates = aggregate(frame, prompts, data.spec, references)
        record = {**summary, "profile": "full", "plumbing": False, "aggregates": aggregates}
        store.add_submission(
            benchmark=data.name,
            benchmark_version="bench",
            data_dir=args.out / "data",
            model_name=f"model-{i:03d}",
            metadata={},
            content_hash=f"bench-{i}",
            stored_path=folder,
            submitter=f"team-{i % 7}",
        )
        job = claim(store, "bench", lease_seconds=600)
        finish(store, job, record, folder)  # the result folder, as the worker records it
    return {"submissions": SUBMISSIONS}


def child_standings(args: argparse.Namespace) -> dict[str, Any]:
    from idbench.builders.registry import get_benchmark
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.leaderboard import board, query
    from idbench.leaderboard.store import Store

    spec = get_benchmark(args.benchmark)
    store = Store(args.out / "board")
    prompt_rows = load_benchmark_data(args.out / "data", cache_dir=str(args.out / "hf")).prompt_rows
    started = time.perf_counter()
    boards = board.refresh(store, spec.name, prompt_rows=prompt_rows)  # once per finished job
    refreshed = time.perf_counter()
    shown = board.standings(store, spec.name, filters={})  # what a page view does
    table = query.display_table(shown.table, spec)
    assert (shown.ranked[query.RANK_INTERVAL] != "").all(), shown.caption
    return {
        "metric": shown.metric,
        "rows": len(table),
        "ranked": len(shown.ranked),
        "boards": boards,
        "refresh_seconds": round(refreshed - started, 3),
        "page_seconds": round(time.perf_counter() - refreshed, 3),
    }


CHILDREN = {
    "source": child_source,
    "score": child_score,
    "shards": child_shards,
    "leaderboard_fill": child_leaderboard_fill,
    "standings": child_standings,
}


# --- the driver -------------------------------------------------------------------------------------


def counts(out: Path) -> dict[str, int]:
    """Prompts, references and required images of the build in ``out/data`` (after dedup)."""
    from idbench.evaluate_pkg.data import load_benchmark_data

    data = load_benchmark_data(out / "data", cache_dir=str(out / "hf"))
    return {
        "prompts": len(data.prompt_rows),
        "references": len(data.reference_table),
        "images": len(data.required_pairs),
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True, choices=("cogcanvas", "charis", "identity-collapse"))
    parser.add_argument("--scale", type=float, required=True, help="fraction of the paper's size (1.0: the paper's)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prompts", type=int, help="override the number of prompts (tests; not identity-collapse)")
    parser.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of: " + ", ".join(STAGES))
    parser.add_argument("--resolution", type=int, default=512, help="side of the generated images (default 512)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    if "--child" in raw:
        at = raw.index("--child")
        raw = raw[:at] + raw[at + 2 :]
    args.argv = raw
    args.out = args.out.resolve()
    args.plan = design(args.benchmark, args.scale, args.prompts)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    if args.child:
        extra = CHILDREN[args.child](args) or {}
        (args.out / "logs").mkdir(parents=True, exist_ok=True)
        (args.out / "logs" / f"{args.child}.json").write_text(json.dumps(extra, indent=1, default=str))
        return extra
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise SystemExit(f"unknown stages {unknown}; known: {', '.join(STAGES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "scale.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    result.update({"benchmark": args.benchmark, "scale": args.scale, "design": args.plan})
    result.setdefault("stages", {})
    result["machine"] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0], "profile": "tiny"}
    print(f"{args.benchmark} at scale {args.scale}: {args.plan}", flush=True)
    for stage in [s for s in STAGES if s in stages]:
        (args.out / "logs" / f"{stage}.json").unlink(missing_ok=True)
        record = run_stage(stage, args)
        if stage == "score" and "copy_check" in record:
            result["stages"]["copy_check"] = record.pop("copy_check")
        result["stages"][stage] = record
        if stage == "build":
            result.update(counts(args.out))
        path.write_text(json.dumps(result, indent=1) + "\n")
    if "prompts" not in result and (args.out / "data").exists():
        result.update(counts(args.out))
    result["machine"]["load_after"] = os.getloadavg()[0]
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
