"""Paired comparison of two scored runs: ``idbench compare RESULTS_A RESULTS_B``, ``idbench.compare(a, b)``.

Two runs of one benchmark build share its prompts and seeds, so their per-sample values pair up by
(prompt_id, seed). The comparison is made on the pairs both runs hold, per metric of the suite,
overall and per breakdown cell: B - A, with a percentile interval and a two-sided p-value from the
benchmark's own resampling design (``aggregates["resampling"]``), the same draws applied to both runs
(``functional.bootstrap.paired_difference``). What the runs share (a hard subject, a hard prompt)
cancels in the difference, which is why a paired test finds gaps that two separate intervals hide.

Multiple comparisons: within each table (overall; each breakdown cell) the p-values of its metrics
are one family, Holm-corrected (``p_holm``); a verdict reads ``p_holm`` at ``alpha``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from idbench.errors import IdbenchError
from idbench.evaluate_pkg.functional.bootstrap import holm, paired_difference

#: Resamples of a comparison, and its seed: as the aggregates' intervals (report.CI_RESAMPLES, CI_SEED).
COMPARE_RESAMPLES, COMPARE_SEED = 2000, 0
CORRECTION = "Holm across the metrics of each table (overall; each breakdown cell)"
P_VALUE = ("two-sided, share of resampled differences at least as far from the observed one as it is from 0 "
           "(bootstrap distribution centred under the null), +1 corrected")


class CompareError(IdbenchError, ValueError):
    """Two runs that cannot be compared, or a folder that is not a scored run."""


@dataclass(frozen=True)
class Run:
    folder: Path | None
    summary: dict[str, Any]
    results: pd.DataFrame


def load_run(folder: str | Path) -> Run:
    """A results folder of ``idbench score``: aggregates.json and results.parquet."""
    folder = Path(folder)
    aggregates, parquet = folder / "aggregates.json", folder / "results.parquet"
    for path in (aggregates, parquet):
        if not path.is_file():
            raise CompareError(f"{folder}: not a results folder of `idbench score` (no {path.name})")
    try:
        summary = json.loads(aggregates.read_text())
    except json.JSONDecodeError as err:
        raise CompareError(f"{aggregates}: unreadable ({err})") from None
    return Run(folder, summary, pd.read_parquet(parquet))


def _judge_key(summary: dict[str, Any]) -> Any:
    judge = summary.get("judge")
    if not judge:
        return None
    return judge.get("key") or {k: judge.get(k) for k in ("model", "base_url", "settings")}


def refusal(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two runs' summaries cannot be compared (one line), or None."""
    checks = [
        ("benchmarks", a.get("benchmark"), b.get("benchmark")),
        ("benchmark builds", a.get("build"), b.get("build")),
        ("suites", a.get("suite_version"), b.get("suite_version")),
        ("profiles", a.get("profile"), b.get("profile")),
        ("tasks", a.get("task"), b.get("task")),
        ("judges", _judge_key(a), _judge_key(b)),
    ]
    for what, left, right in checks:
        if left != right:
            show = lambda v: json.dumps(v, sort_keys=True, default=str)[:80]  # noqa: E731
            return f"cannot compare runs of different {what}: A has {show(left)}, B has {show(right)}"
    return None


@dataclass(frozen=True)
class Comparison:
    benchmark: str
    model_a: str
    model_b: str
    method: str
    alpha: float
    confidence: float
    n_resamples: int
    rows: list[dict[str, Any]] = field(default_factory=list)  #: one per (table, metric)
    notes: list[str] = field(default_factory=list)
    plumbing: bool = False  #: scored with random weights (profile tiny): a plumbing check, not a result

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "a": self.model_a, "b": self.model_b, "method": self.method,
                "p_value": P_VALUE, "correction": CORRECTION, "alpha": self.alpha, "confidence": self.confidence,
                "n_resamples": self.n_resamples, "notes": self.notes, "plumbing": self.plumbing, "rows": self.rows}

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def _design(summary: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, dict[str, list[str]]], str, list[str]]:
    record = summary.get("aggregates", {}).get("resampling")
    if not record:
        return ("prompt",), {}, "percentile bootstrap over prompts", [
            "the runs' aggregates.json record no resampling design (scored before it was recorded): prompts resampled"]
    return tuple(record["factors"]), record.get("prompt_units") or {}, record["method"], []


def _verdict(diff: float, p_holm: float, alpha: float, higher_is_better: bool) -> str:
    if p_holm is None or math.isnan(p_holm) or p_holm >= alpha:
        return "tied"
    return "B better" if (diff > 0) == higher_is_better else "A better"


def compare_runs(a: Run, b: Run, alpha: float = 0.05, confidence: float = 0.95,
                 n_resamples: int = COMPARE_RESAMPLES, seed: int = COMPARE_SEED) -> Comparison:
    """B - A per metric of the suite, overall and per breakdown cell, on the shared (prompt, seed) pairs."""
    why = refusal(a.summary, b.summary)
    if why:
        raise CompareError(why)
    from idbench.builders.benchmarks import get_benchmark

    spec = get_benchmark(a.summary["benchmark"])
    factors, units, method, notes = _design(a.summary)
    suite = {m.name: m for m in spec.metric_suite}
    image = lambda frame: frame[(frame["subject"] == "") & frame["metric"].isin(suite)]  # noqa: E731
    keys = ["prompt_id", "seed", "metric"]
    paired = image(a.results)[keys + ["value"]].merge(image(b.results)[keys + ["value"]], on=keys, suffixes=("_a", "_b"))
    cells = _cells(a.summary, b.summary, spec)
    rows: list[dict[str, Any]] = []
    for table, members in [("overall", None), *cells]:
        block = paired if members is None else paired[paired["prompt_id"].isin(members)]
        table_rows = []
        for metric in [m for m in suite if m in set(block["metric"])]:
            group = block[block["metric"] == metric]
            d = paired_difference(group["value_a"].to_numpy(), group["value_b"].to_numpy(), group["prompt_id"].to_numpy(),
                                  units, factors, n_resamples, confidence, seed)
            if d.n == 0:
                continue
            table_rows.append({"table": table, "metric": metric, "a": d.mean_a, "b": d.mean_b, "diff": d.diff,
                               "ci_low": d.low, "ci_high": d.high, "p": d.p_value, "n": d.n, "n_prompts": d.n_clusters,
                               "higher_is_better": suite[metric].higher_is_better})
        for row, adjusted in zip(table_rows, holm([r["p"] for r in table_rows])):
            row["p_holm"] = adjusted
            row["verdict"] = _verdict(row["diff"], adjusted, alpha, row["higher_is_better"])
        rows += table_rows
    shared = paired[["prompt_id", "seed"]].drop_duplicates().shape[0]
    only = {name: run.results[run.results["subject"] == ""][["prompt_id", "seed"]].drop_duplicates().shape[0] - shared
            for name, run in (("A", a), ("B", b))}
    if any(only.values()):
        notes.append(f"compared on the {shared} (prompt, seed) pairs both runs hold; A has {only['A']} more, B {only['B']} more")
    clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]
    return Comparison(spec.name, a.summary.get("submission", {}).get("model", "A"), b.summary.get("submission", {}).get("model", "B"),
                      method, alpha, confidence, n_resamples, clean, notes, bool(a.summary.get("plumbing")))


def _cells(a: dict[str, Any], b: dict[str, Any], spec) -> list[tuple[str, set[str]]]:
    """(label, prompt ids) of every breakdown cell both runs list (``aggregates["breakdown_prompts"]``)."""
    left = a.get("aggregates", {}).get("breakdown_prompts") or {}
    right = b.get("aggregates", {}).get("breakdown_prompts") or {}
    out = []
    natural = lambda label: [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in label.split(" x ")]  # noqa: E731
    for axes, cells in left.items():
        for label, prompts in sorted(cells.items(), key=lambda item: natural(item[0])):
            if label in right.get(axes, {}):
                out.append((f"{axes} = {label}", set(prompts) & set(right[axes][label])))
    return out


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _p(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}" if value >= 0.001 else "<0.001"


def format_comparison(c: Comparison) -> str:
    """The table on stdout: metric, A, B, diff, CI, p, p_holm, verdict; raw values."""
    lines = [f"{c.benchmark}: A = {c.model_a}, B = {c.model_b}; B - A on shared (prompt, seed) pairs, raw values"
             + ("  [PLUMBING CHECK: random weights]" if c.plumbing else ""),
             f"{c.confidence:.0%} CI and p from {c.method} ({c.n_resamples} paired resamples); p: {P_VALUE}",
             f"p_holm: {CORRECTION}; verdict at alpha {c.alpha}"]
    lines += [f"note: {n}" for n in c.notes]
    header = f"{'metric':24s} {'A':>9s} {'B':>9s} {'diff':>9s}  {'CI':21s} {'p':>6s} {'p_holm':>6s}  verdict"
    table = None
    for row in c.rows:
        if row["table"] != table:
            table = row["table"]
            lines += ["", f"[{table}]", header]
        ci = f"[{_num(row['ci_low'])}, {_num(row['ci_high'])}]"
        lines.append(f"{row['metric']:24s} {_num(row['a']):>9s} {_num(row['b']):>9s} {_num(row['diff']):>9s}  {ci:21s} "
                     f"{_p(row['p']):>6s} {_p(row['p_holm']):>6s}  {row['verdict']}")
    if not c.rows:
        lines.append("no metric of the suite holds values in both runs")
    return "\n".join(lines)


def compare(a: str | Path | Run, b: str | Path | Run, alpha: float = 0.05, **options: Any) -> Comparison:
    """``idbench.compare``: two results folders (or loaded runs) -> their :class:`Comparison`."""
    run_a = a if isinstance(a, Run) else load_run(a)
    run_b = b if isinstance(b, Run) else load_run(b)
    return compare_runs(run_a, run_b, alpha=alpha, **options)
