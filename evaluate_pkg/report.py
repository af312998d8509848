"""Aggregates, breakdowns and the human-readable report of a scoring run.

Per-sample results hold raw values only. Here they become means with percentile-bootstrap confidence
intervals, overall and per breakdown cell of the benchmark description (group size, scene type,
subject type x style). Display conventions (x100, percent) are applied in the Markdown report only,
from each metric's ``display`` in the benchmark description, and the report says which were applied.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from idbench.builders.spec import BenchmarkSpec
from idbench.evaluate_pkg.functional import bootstrap_ci

DISPLAY_NOTES = {
    "raw": "raw value",
    "x100": "x100 (the raw cosine times 100, the CogCanvas paper's convention)",
    "percent": "percent of images",
}


def _ci(values: np.ndarray, seed: int = 0) -> dict[str, Any]:
    ci = bootstrap_ci(values, n_resamples=1000, confidence=0.95, seed=seed)
    as_float = lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)  # noqa: E731
    return {"mean": as_float(ci.mean), "ci_low": as_float(ci.low), "ci_high": as_float(ci.high), "n": ci.n, "n_nan": ci.n_nan}


def image_level(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (prompt, seed, metric): the whole-image values (per-subject rows set aside)."""
    return results[results["subject"] == ""]


def aggregate(results: pd.DataFrame, prompts: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, Any]:
    """Means and 95 % bootstrap CIs per metric, overall and per breakdown cell."""
    images = image_level(results)
    overall = {metric: _ci(group["value"].to_numpy()) for metric, group in images.groupby("metric", sort=True)}
    breakdowns: dict[str, dict[str, dict[str, Any]]] = {}
    joined = images.merge(prompts, on="prompt_id", how="left")
    for axes in spec.breakdowns:
        name = " x ".join(axes)
        cells: dict[str, dict[str, Any]] = {}
        for cell, group in joined.groupby(list(axes), sort=True):
            label = " x ".join(str(v) for v in (cell if isinstance(cell, tuple) else (cell,)))
            cells[label] = {metric: _ci(g["value"].to_numpy()) for metric, g in group.groupby("metric", sort=True)}
        breakdowns[name] = cells
    return {"overall": overall, "breakdowns": breakdowns}


def display_value(value: float | None, display: str) -> str:
    if value is None:
        return "n/a"
    if display in ("x100", "percent"):
        return f"{100 * value:.2f}"
    return f"{value:.4f}"


def ranking_metric(spec: BenchmarkSpec, computed: set[str]) -> str | None:
    """The benchmark's preferred ranking metric among those a run computed."""
    return next((m for m in spec.ranking if m in computed), None)


def format_summary(summary: dict[str, Any]) -> str:
    """A few lines for the terminal: every metric's mean and CI as displayed, plus what was not run."""
    from idbench.builders.benchmarks import get_benchmark

    spec = get_benchmark(summary["benchmark"])
    displays = {m.name: m.display for m in spec.metric_suite}
    head = f"{spec.title} / {summary['submission'].get('model', '?')} / profile {summary['profile']}"
    lines = [head + ("  [PLUMBING CHECK: random weights]" if summary["plumbing"] else "")]
    for metric, stats in summary["aggregates"]["overall"].items():
        display = displays.get(metric, "raw")
        lines.append(
            f"  {metric:22s} {display_value(stats['mean'], display):>9s}  "
            f"[{display_value(stats['ci_low'], display)}, {display_value(stats['ci_high'], display)}]  n={stats['n']}"
        )
    lines += [f"  {metric:22s} not run: {why}" for metric, why in summary["not_run"].items()]
    return "\n".join(lines)


def write_report(folder: Path, summary: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """README-style Markdown plus PNG plots; returns the files written (relative names)."""
    displays = {m.name: m.display for m in spec.metric_suite}
    higher = {m.name: m.higher_is_better for m in spec.metric_suite}
    lines = [f"# {spec.title}: {summary['submission'].get('model', '?')}", ""]
    if summary["plumbing"]:
        lines += [
            "> **Plumbing check.** Scored with the `tiny` profile: same architectures, random weights "
            "(the dlib face model excepted). These numbers test the pipeline, not the model.",
            "",
        ]
    lines += [f"Profile `{summary['profile']}`, metric suite {summary['suite_version']}, "
              f"{summary['images']} generated images.", "", "| metric | value | 95 % CI | n | better | shown as |",
              "| --- | --- | --- | --- | --- | --- |"]
    for metric, stats in summary["aggregates"]["overall"].items():
        display = displays.get(metric, "raw")
        ci = f"{display_value(stats['ci_low'], display)} - {display_value(stats['ci_high'], display)}"
        better = {True: "higher", False: "lower"}.get(higher.get(metric), "")
        nan = f" ({stats['n_nan']} undefined)" if stats["n_nan"] else ""
        lines.append(f"| `{metric}` | {display_value(stats['mean'], display)} | {ci} | {stats['n']}{nan} | {better} | {DISPLAY_NOTES.get(display, display)} |")
    if summary["not_run"]:
        lines += ["", "Not run:", ""] + [f"- `{m}`: {why}" for m, why in summary["not_run"].items()]
    for axes, cells in summary["aggregates"]["breakdowns"].items():
        metrics = sorted({m for stats in cells.values() for m in stats})
        lines += ["", f"## By {axes}", "", "| " + axes + " | " + " | ".join(f"`{m}`" for m in metrics) + " |",
                  "| --- |" + " --- |" * len(metrics)]
        for cell, stats in cells.items():
            values = [display_value(stats[m]["mean"], displays.get(m, "raw")) if m in stats else "" for m in metrics]
            lines.append(f"| {cell} | " + " | ".join(values) + " |")
    lines += ["", "## Models", ""] + [
        f"- {role}: `{m['name']}` ({m['hub_id'] or 'local'}@{m['revision'] or '-'}; weights key `{m['key']}`)"
        for role, m in summary["models"].items()
    ]
    if summary.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {k}: {v}" for k, v in summary["notes"].items()]
    plots = _plots(folder, summary, spec)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    return ["report.md", *plots]


def _plots(folder: Path, summary: dict[str, Any], spec: BenchmarkSpec) -> list[str]:
    """Metric vs group size (line per metric) and type x style heat maps, as PNG files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    tag = " (plumbing check)" if summary["plumbing"] else ""
    suite = {m.name for m in spec.metric_suite}  # counts such as faces_detected stay in the tables
    for axes, cells in summary["aggregates"]["breakdowns"].items():
        if axes in ("n_subjects", "n_persons"):
            metrics = sorted({m for stats in cells.values() for m in stats if m in suite})
            sizes = sorted(cells, key=int)
            fig, ax = plt.subplots(figsize=(6, 4))
            for metric in metrics:
                means = [cells[s].get(metric, {}).get("mean") for s in sizes]
                ax.plot([int(s) for s in sizes], [np.nan if v is None else v for v in means], marker="o", label=metric)
            ax.set_xticks([int(s) for s in sizes])
            ax.set_xlabel(axes)
            ax.set_ylabel("raw value")
            ax.set_title(f"{spec.title}: metrics vs {axes}{tag}")
            ax.legend(fontsize=7)
            fig.tight_layout()
            name = f"by_{axes}.png"
            fig.savefig(folder / name, dpi=100)
            plt.close(fig)
            written.append(name)
        if axes == "type x style":
            types = sorted({c.split(" x ")[0] for c in cells})
            styles = sorted({c.split(" x ")[1] for c in cells})
            for metric in sorted({m for stats in cells.values() for m in stats if m in suite}):
                grid = np.full((len(types), len(styles)), np.nan)
                for c, stats in cells.items():
                    t, s = c.split(" x ")
                    value = stats.get(metric, {}).get("mean")
                    grid[types.index(t), styles.index(s)] = np.nan if value is None else value
                fig, ax = plt.subplots(figsize=(5, 4))
                image = ax.imshow(grid, cmap="viridis")
                ax.set_xticks(range(len(styles)), styles)
                ax.set_yticks(range(len(types)), types)
                for i in range(len(types)):
                    for j in range(len(styles)):
                        if not np.isnan(grid[i, j]):
                            ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", color="w", fontsize=8)
                fig.colorbar(image)
                ax.set_title(f"{metric} by type x style{tag}")
                fig.tight_layout()
                name = f"heatmap_{metric}.png"
                fig.savefig(folder / name, dpi=100)
                plt.close(fig)
                written.append(name)
    return written
