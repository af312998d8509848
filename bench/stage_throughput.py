"""Stage throughput: score the sample builds with a profile, time each scoring stage, project to paper size.

For each benchmark of ``--benchmarks`` (default: CogCanvas, CHARIS, Identity Collapse), the shipped sample is
built (``--prompts N`` builds N prompts instead; Identity Collapse's grid of 75 is fixed), a model-free
``background`` baseline is drawn at ``--size`` px (1024: the papers' generation size) as the submission, and it
is scored once with ``--profile`` (default ``paper-random``: the papers' architectures at their real sizes,
random weights made here on first use) on ``--device``, in one process (models load once for every
benchmark). Every stage the scorer reports (``<role> features``, ``detections``, ``masks``, ``copy check``)
is timed with its item count, and so are the steps (loading models).

The projection to the paper's size scales each stage by its own items: a stage over the generations by
(paper generations / sample generations), one over the references by (paper references / sample
references), one over both by the ratio of their sums; steps (model loading) are counted once. Paper sizes:
CogCanvas 1,361 prompts x 1 seed and 1,952 references; CHARIS 1,078 prompts x 1 seed and 154 subjects;
Identity Collapse 75 prompts x 3 seeds (its references: the sample's, the paper states no pool size). The
copy check's foreign search grows faster than linearly with the reference pool (README: 3.3 min at CogCanvas's
paper size), so its projection is a lower bound. Judged metrics need a judge and are not run here; with
paper-random, the face metrics are not run either (ArcFace cannot be made offline): their time is missing
from the projection, and the output says so.

Prints a table per benchmark and writes JSON after each one (``--json``; default ``$OUT/stage_throughput.json``
when ``$OUT`` is set, else ``idbench-output/stage_throughput-<profile>-<device>.json``). Random weights:
these are speeds, never scores.

Run: .venv/bin/python bench/stage_throughput.py [--profile paper-random] [--device cuda]
     [--benchmarks cogcanvas,charis,identity-collapse] [--prompts N] [--metrics a,b] [--size 1024]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idbench.progress import LogLines, Step  # noqa: E402

#: (generations, references) of each benchmark at the paper's size (README's benchmark table).
PAPER_SIZE = {
    "cogcanvas": (1361 * 1, 1952),
    "charis": (1078 * 1, 154),
    "identity-collapse": (75 * 3, None),  # references: the sample's (no pool size is published)
}


class Recorder(LogLines):
    """Log lines as usual, plus a record of every stage (items, seconds) and step (seconds)."""

    def __init__(self) -> None:
        super().__init__(interval=30.0, min_gap=10.0)
        self.stages: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []

    def _start(self, stage: str, total: int, unit: str, shared: bool):
        inner = super()._start(stage, total, unit, shared)
        record = {"stage": stage, "total": total, "unit": unit}
        recorder = self

        class Tick:
            def __call__(self, n: int = 1) -> None:
                inner(n)
                if inner.closed and "seconds" not in record:
                    self.close()

            def close(self, quiet: bool = False) -> None:
                if "seconds" in record:
                    return
                inner.close(quiet)
                record.update(done=inner.done, seconds=recorder.clock() - inner.started)
                recorder.stages.append(record)

        return Tick()

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[Step]:
        started = self.clock()
        with super().step(what) as step:
            yield step
        self.steps.append({"step": what, "seconds": self.clock() - started})


def projected(stage: dict[str, Any], sample: tuple[int, int], paper: tuple[int, int | None]) -> tuple[float, str]:
    """(projected seconds at the paper's size, what the stage's items were taken to be)."""
    gens, refs = sample
    paper_gens, paper_refs = paper[0], paper[1] if paper[1] is not None else refs
    total = stage["total"]
    if total == gens:
        ratio, kind = paper_gens / gens, "generations"
    elif total == refs:
        ratio, kind = paper_refs / refs, "references"
    else:
        ratio, kind = (paper_gens + paper_refs) / (gens + refs), "mixed"
    return stage["seconds"] * ratio, kind


def run_benchmark(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    started = time.perf_counter()
    prompts = None if name == "identity-collapse" else args.prompts
    build(name, out=work / name / "data", n_prompts=prompts, overwrite=True)
    data = load_benchmark_data(work / name / "data", cache_dir=str(work / "hf"))
    submission = make_baseline(args.baseline, data, work / name / "submission", size=args.size, overwrite=True)
    prepared = time.perf_counter() - started
    sample = (len(data.required_pairs), len(data.references))
    recorder = Recorder()
    options = ScoreOptions(
        profile=args.profile,
        device=args.device,
        models_dir=str(args.models_dir) if args.models_dir else None,
        batch_size=args.batch_size,
        metrics=tuple(args.metrics.split(",")) if args.metrics else None,
    )
    start = time.perf_counter()
    # Models load once per process (context's model cache): the next benchmark reuses them.
    summary = score_submission(submission, data, None, options, cache_dir=work / name / "cache", progress=recorder)
    scored = time.perf_counter() - start
    paper = PAPER_SIZE.get(name, sample)
    stages = []
    for stage in recorder.stages:
        seconds_paper, kind = projected(stage, sample, paper)
        stages.append(
            {
                **stage,
                "per_s": stage["done"] / stage["seconds"] if stage["seconds"] > 0 and stage["done"] else None,
                "items_are": kind,
                "paper_seconds": seconds_paper,
            }
        )
    steps = [s for s in recorder.steps if not s["step"].startswith("scoring on")]
    staged = sum(s["seconds"] for s in stages)
    fixed = sum(s["seconds"] for s in steps)
    paper_total = (
        sum(s["paper_seconds"] for s in stages)
        + fixed
        + max(0.0, scored - staged - fixed) * ((paper[0] + (paper[1] or sample[1])) / sum(sample))
    )
    return {
        "benchmark": name,
        "sample": {"generations": sample[0], "references": sample[1], "prompts": len(data.prompt_rows)},
        "paper": {"generations": paper[0], "references": paper[1] if paper[1] is not None else sample[1]},
        "prepare_seconds": prepared,
        "score_seconds": scored,
        "stages": stages,
        "steps": steps,
        "other_seconds": max(0.0, scored - staged - fixed),
        "paper_seconds": paper_total,
        "not_run": summary["not_run"],
        "plumbing": summary["plumbing"],
    }


def table(result: dict[str, Any]) -> str:
    sample, paper = result["sample"], result["paper"]
    lines = [
        f"{result['benchmark']}: sample {sample['generations']} generations + {sample['references']} references "
        f"scored in {result['score_seconds']:.1f} s; paper size {paper['generations']} + {paper['references']}",
        f"  {'stage':22s} {'items':>6s} {'seconds':>8s} {'per s':>8s}  {'of':12s} {'paper s':>9s}",
    ]
    for stage in result["stages"]:
        rate = f"{stage['per_s']:8.2f}" if stage["per_s"] else f"{'-':>8s}"
        lines.append(
            f"  {stage['stage']:22s} {stage['done']:6d} {stage['seconds']:8.2f} {rate}  {stage['items_are']:12s} "
            f"{stage['paper_seconds']:9.1f}"
        )
    for step in result["steps"]:
        lines.append(f"  {step['step'][:60]:60s} {step['seconds']:8.2f} s (once)")
    lines.append(f"  {'other (validation, metrics, copy floors)':60s} {result['other_seconds']:8.2f} s (scaled)")
    minutes = result["paper_seconds"] / 60
    lines.append(f"  projected at paper size: {result['paper_seconds']:.0f} s ({minutes:.1f} min)")
    if result["not_run"]:
        lines.append(f"  not run (not in the projection): {', '.join(result['not_run'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="paper-random")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--benchmarks", default="cogcanvas,charis,identity-collapse")
    parser.add_argument("--prompts", type=int, help="build this many prompts (default: the whole sample)")
    parser.add_argument("--metrics", help="comma-separated metrics, for every benchmark (default: each suite)")
    parser.add_argument("--baseline", default="background", help="the model-free submission (default %(default)s)")
    parser.add_argument("--size", type=int, default=1024, help="the submission's image side (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--models-dir", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import torch

    from idbench.evaluate_pkg.models.registry import profile_is_plumbing

    out = args.json or (
        Path(os.environ["OUT"]) / "stage_throughput.json"
        if os.environ.get("OUT")
        else Path("idbench-output") / f"stage_throughput-{args.profile}-{args.device.replace(':', '')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    from model_throughput import cpu_name  # bench/, this script's folder

    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else cpu_name()
    figures: dict[str, Any] = {
        "profile": args.profile,
        "plumbing": profile_is_plumbing(args.profile),
        "device": args.device,
        "device_name": device_name,
        "cpu_threads": torch.get_num_threads(),
        "prompts": args.prompts,
        "metrics": args.metrics,
        "size": args.size,
        "benchmarks": [],
    }
    print(
        f"stage throughput: profile {args.profile}"
        + (" (PLUMBING CHECK: random weights; speeds only)" if figures["plumbing"] else "")
        + f" on {args.device} ({device_name}), {figures['cpu_threads']} CPU threads, {args.size} px submissions",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="idbench-stages-") as tmp:
        for name in args.benchmarks.split(","):
            result = run_benchmark(name, args, Path(tmp))
            figures["benchmarks"].append(result)
            print("\n" + table(result) + "\n", flush=True)
            out.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    total = sum(r["paper_seconds"] for r in figures["benchmarks"])
    figures["paper_seconds_total"] = total
    out.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    print(
        f"projected full-benchmark scoring time, {', '.join(r['benchmark'] for r in figures['benchmarks'])}: "
        f"{total:.0f} s ({total / 60:.1f} min) on {device_name} (one submission each; judged and not-run metrics "
        "excluded)"
    )
    print(f"figures in {out}")
    return figures


if __name__ == "__main__":
    main()
