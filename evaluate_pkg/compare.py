"""Paired comparison of two scored runs: ``idbench compare RESULTS_A RESULTS_B``, ``idbench.compare(a, b)``.

Two runs of one benchmark build share its prompts and seeds, so their per-sample values pair up by
(prompt_id, seed). The comparison is made on the pairs both runs hold, per metric of the suite,
overall and per breakdown cell: B - A, with a percentile interval and a two-sided p-value from the
benchmark's own resampling design (``aggregates["resampling"]``), the same draws applied to both runs
(``functional.bootstrap.paired_difference``). What the runs share (a hard subject, a hard prompt)
cancels in the difference, which is why a paired test finds gaps that two separate intervals hide.

Multiple comparisons: within each table (overall; each breakdown cell) the p-values of its metrics
are one family, Holm-corrected (``p_holm``); a verdict reads ``p_holm`` at ``alpha``. Whoever reads several
tables at once needs ``p_all``: Holm over every metric of every table. A tie whose uncorrected interval
excludes 0 is starred and explained.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from idbench.errors import IdbenchError
from idbench.evaluate_pkg import results
from idbench.evaluate_pkg.functional.bootstrap import holm, paired_difference
from idbench.names import terminal_safe
from idbench.settings import redact_url

#: Resamples of a comparison, and its seed: as the aggregates' intervals (report.CI_RESAMPLES, CI_SEED).
COMPARE_RESAMPLES, COMPARE_SEED = 2000, 0
CORRECTION = "Holm across the metrics of each table (overall; each breakdown cell)"
CORRECTION_ALL = (
    "Holm across every metric of every table at once: the one to read when scanning several tables, "
    "where a table's own correction would let some difference look real by chance"
)
# Why a percentile interval that excludes 0 can stand beside a "tied" verdict.
INTERVAL_VS_TEST = (
    "the interval is uncorrected and read from the resampled differences' percentiles, while the verdict reads "
    "a Holm-corrected p from the resampled distribution centred under the null: near the boundary, or "
    "with several metrics in a table, the two can disagree, and the verdict is the one that holds its error rate"
)
P_VALUE = (
    "two-sided, share of resampled differences at least as far from the observed one as it is from 0 "
    "(bootstrap distribution centred under the null), +1 corrected"
)


OVERALL = "overall"  # the table name of the rows over every (prompt, seed) pair; the others are breakdown cells


class CompareError(IdbenchError, ValueError):
    """Two runs that cannot be compared, or a folder that is not a scored run."""


@dataclass(frozen=True)
class Run:
    folder: Path | None
    summary: dict[str, Any]
    results: pd.DataFrame


#: The columns of the per-sample values a comparison reads.
RESULT_COLUMNS = ("prompt_id", "seed", "metric", "subject", "value")
MAX_AGGREGATES_BYTES = results.MAX_AGGREGATES_BYTES


def load_run(folder: str | Path) -> Run:
    """A results folder of ``idbench score``: its summary and per-sample values, both checked.

    Anything a comparison cannot read (a missing or unreadable file, a wrong type, a missing column, an
    unknown benchmark or metric, an infinite value) is one :class:`CompareError` naming the folder, the
    file and the field. NaN values are kept: among the per-sample values NaN is a metric undefined for a
    sample (no face found), left out of the pairs as the scorer leaves it out of the means.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CompareError(
            f"{folder}: {'no such folder' if not folder.exists() else 'not a folder'}; "
            f"give a results folder of `idbench score` ({results.AGGREGATES_FILE}, {results.SAMPLES_FILE})"
        )
    aggregates, parquet = folder / results.AGGREGATES_FILE, folder / results.SAMPLES_FILE
    for path in (aggregates, parquet):
        if not path.is_file():
            raise CompareError(f"{folder}: not a results folder of `idbench score` (no {path.name})")
    summary = _read_summary(aggregates)
    return Run(folder, summary, _read_results(parquet))


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        summary = results.read_aggregates_file(path, MAX_AGGREGATES_BYTES)
    except results.ResultFileError as err:
        raise CompareError(str(err)) from None
    _check_summary(path, summary)
    return summary


def _check_summary(path: Path, summary: Any) -> None:
    """The fields of aggregates.json a comparison reads, with their types; a wrong one names ``path`` and the field."""
    from idbench.builders.registry import BENCHMARKS

    def bad(field: str, what: str) -> CompareError:
        return CompareError(f"{path}: field {field} {what}")

    if not isinstance(summary, dict):
        raise CompareError(
            f"{path}: not a JSON object (a {type(summary).__name__}); not an aggregates.json of `idbench score`"
        )
    benchmark = summary.get("benchmark")
    if not isinstance(benchmark, str):
        raise bad(
            "benchmark", "is missing" if benchmark is None else f"is a {type(benchmark).__name__}, not a benchmark name"
        )
    if benchmark not in BENCHMARKS:
        raise bad("benchmark", f"names an unknown benchmark {benchmark[:80]!r}; known: {', '.join(sorted(BENCHMARKS))}")
    for key, kind in (("submission", dict), ("aggregates", dict)):
        if summary.get(key) is not None and not isinstance(summary[key], kind):
            raise bad(key, f"is a {type(summary[key]).__name__}, not an object")
    model = (summary.get("submission") or {}).get("model")
    if model is not None and not isinstance(model, str):
        raise bad("submission.model", f"is a {type(model).__name__}, not a name")
    if "plumbing" in summary and not isinstance(summary["plumbing"], (bool, type(None))):
        raise bad("plumbing", f"is a {type(summary['plumbing']).__name__}, not true or false")
    aggregates = summary.get("aggregates") or {}
    resampling = aggregates.get("resampling")
    if resampling:
        if not isinstance(resampling, dict):
            raise bad("aggregates.resampling", f"is a {type(resampling).__name__}, not an object")
        factors = resampling.get("factors")
        if not isinstance(factors, list) or not factors or not all(isinstance(f, str) and f for f in factors):
            raise bad(
                "aggregates.resampling.factors",
                f"is {json.dumps(factors, default=str)[:80]}, not a list of factor names",
            )
        if not isinstance(resampling.get("method"), str):
            raise bad("aggregates.resampling.method", "is not a text")
        units = resampling.get("prompt_units") or {}
        if not isinstance(units, dict) or not all(
            isinstance(u, dict)
            and all(isinstance(v, list) and all(isinstance(i, (str, int)) for i in v) for v in u.values())
            for u in units.values()
        ):
            raise bad("aggregates.resampling.prompt_units", "is not an object of prompt id -> {factor: [units]}")
    cells = aggregates.get("breakdown_prompts")
    if cells:
        if not isinstance(cells, dict) or not all(
            isinstance(labels, dict)
            and all(isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in labels.values())
            for labels in cells.values()
        ):
            raise bad("aggregates.breakdown_prompts", "is not an object of axes -> {cell: [prompt ids]}")


def _read_results(path: Path) -> pd.DataFrame:
    try:
        frame = results.read_parquet_file(path, RESULT_COLUMNS)
    except results.ResultFileError as err:
        raise CompareError(str(err)) from None
    if frame is None:  # gone since load_run looked
        raise CompareError(f"{path.parent}: not a results folder of `idbench score` (no {path.name})")
    _check_results(path, frame)
    return frame


MAX_METRIC_NAME = 120  # characters; the longest of the suites' names and diagnostics is under 60
# The largest magnitude a value may have: far above any metric (cosines, percentages, scores), far below
# where the sums of 4 million of them, weighted by a resample, could overflow a float64.
MAX_ABS_VALUE = 1e15


def _check_results(path: Path, frame: pd.DataFrame) -> None:
    """Column types, plain metric names, finite values and one row per key; a wrong one names ``path`` and the field."""
    import numpy as np
    from pandas.api import types

    for column in ("prompt_id", "metric", "subject"):
        values = frame[column]
        if (
            not (types.is_string_dtype(values) or types.is_object_dtype(values))
            or not values.map(lambda v: isinstance(v, str)).all()
        ):
            where = values[~values.map(lambda v: isinstance(v, str))]
            first = f"; row {where.index[0]} holds {where.iloc[0]!r}" if len(where) else ""
            raise CompareError(f"{path}: column {column} must hold text ({values.dtype}{first})")
    if not types.is_integer_dtype(frame["seed"]) or types.is_bool_dtype(frame["seed"]):
        raise CompareError(f"{path}: column seed must hold integers ({frame['seed'].dtype})")
    value = frame["value"]
    if not (types.is_float_dtype(value) or types.is_integer_dtype(value)) or types.is_bool_dtype(value):
        raise CompareError(f"{path}: column value must hold numbers ({value.dtype})")
    infinite = np.isinf(value.to_numpy(dtype=float))
    if infinite.any():
        row = frame[infinite].iloc[0]
        raise CompareError(
            f"{path}: column value holds {int(infinite.sum())} infinite value(s), e.g. {row['value']} for metric "
            f"{row['metric']!r} of prompt {row['prompt_id']!r}, seed {row['seed']}; a comparison needs finite values"
        )
    # A finite value can still overflow: the sums behind a mean and its resamples of 1e308 are infinite, and
    # an infinite difference was "A better" at p < 0.001 (issue 40, item 7f). No metric comes near the bound.
    huge = np.abs(value.to_numpy(dtype=float)) > MAX_ABS_VALUE
    if huge.any():
        row = frame[huge].iloc[0]
        raise CompareError(
            f"{path}: column value holds {int(huge.sum())} value(s) beyond +-{MAX_ABS_VALUE:g}, e.g. {row['value']:g} "
            f"for metric {row['metric']!r} of prompt {row['prompt_id']!r}, seed {row['seed']}; no metric's value is "
            "that large, and sums of such values overflow"
        )
    # Rows of diagnostics (clip_t.truncated, copy.flag, who.extra, ...) sit beside the suite's metrics and
    # are not compared; a metric name is held to plain, short text, as it reaches the verdict's lines.
    odd = sorted(m for m in set(frame["metric"]) if len(m) > MAX_METRIC_NAME or not m.isprintable() or not m.strip())
    if odd:
        raise CompareError(
            f"{path}: column metric holds {len(odd)} name(s) that are not a metric's, e.g. {odd[0][:80]!r} "
            f"(empty, over {MAX_METRIC_NAME} characters, or with control characters)"
        )
    twice = frame.duplicated(["prompt_id", "seed", "metric", "subject"])
    if twice.any():
        row = frame[twice].iloc[0]
        raise CompareError(
            f"{path}: metric {row['metric']!r} of prompt {row['prompt_id']!r}, seed {row['seed']}, "
            f"subject {row['subject']!r} has more than one row"
        )


def _judge_key(summary: dict[str, Any]) -> Any:
    judge = summary.get("judge")
    if not judge:
        return None
    if judge.get("key"):
        return judge["key"]
    # Scored before judge keys: model, endpoint and settings. A refusal prints this, and a summary from before
    # URLs were redacted may hold a key in the endpoint's path: it is redacted here too.
    fallback = {k: judge.get(k) for k in ("model", "base_url", "settings")}
    if isinstance(fallback["base_url"], str):
        fallback["base_url"] = redact_url(fallback["base_url"])
    return fallback


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
        return {
            "benchmark": self.benchmark,
            "a": self.model_a,
            "b": self.model_b,
            "method": self.method,
            "p_value": P_VALUE,
            "correction": CORRECTION,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "notes": self.notes,
            "plumbing": self.plumbing,
            "rows": self.rows,
        }

    def frame(self) -> pd.DataFrame:
        """Every row (each metric overall and per breakdown cell) as a DataFrame: the full table."""
        return pd.DataFrame(self.rows)

    def _overall(self) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["table"] == OVERALL]

    def __repr__(self) -> str:
        # A notebook prints this: one line, not the hundreds of rows (``frame()`` holds them).
        verdicts = [row["verdict"] for row in self._overall()]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("B better", "A better", "tied"))
        cells = len({row["table"] for row in self.rows}) - (1 if verdicts else 0)
        return (
            f"<idbench Comparison {self.benchmark}: A = {terminal_safe(self.model_a)}, B = {terminal_safe(self.model_b)}; "
            f"{len(verdicts)} metrics overall: {counts} (Holm, alpha {self.alpha:g}); "
            f"{len(self.rows)} rows with {cells} breakdown cells in .frame()"
            + ("; PLUMBING CHECK: random weights" if self.plumbing else "")
            + ">"
        )

    def _repr_html_(self) -> str:
        """The overall rows as an HTML table (Jupyter shows this), in the display units, B - A with its interval."""
        from html import escape

        head = "".join(f"<th>{h}</th>" for h in ("metric", "A", "B", "B - A", "CI", "p (Holm)", "verdict"))

        def cells(row: dict[str, Any]) -> tuple[str, ...]:
            factor, suffix = shown_as(self.benchmark, row["metric"])
            return (
                row["metric"] + suffix,
                _num(row["a"], factor),
                _num(row["b"], factor),
                _num(row["diff"], factor),
                f"[{_num(row['ci_low'], factor)}, {_num(row['ci_high'], factor)}]",
                _p(row["p_holm"]),
                row["verdict"],
            )

        body = "".join(
            "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in cells(row)) + "</tr>"
            for row in self._overall()
        )
        title = escape(
            f"{self.benchmark}: A = {self.model_a}, B = {self.model_b}; each metric in its display units, "
            f"{self.confidence:.0%} CI ({self.method})" + (" [PLUMBING CHECK: random weights]" if self.plumbing else "")
        )
        return (
            f"<p>{title}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            "<p>Every breakdown cell: <code>.frame()</code></p>"
        )


def _design(summary: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, dict[str, list[str]]], str, list[str]]:
    record = summary.get("aggregates", {}).get("resampling")
    if not record:
        return (
            ("prompt",),
            {},
            "percentile bootstrap over prompts",
            [
                "the runs' aggregates.json record no resampling design (scored before it was recorded): prompts resampled"
            ],
        )
    return tuple(record["factors"]), record.get("prompt_units") or {}, record["method"], []


def _verdict(diff: float, p_holm: float, alpha: float, higher_is_better: bool) -> str:
    if p_holm is None or math.isnan(p_holm) or p_holm >= alpha:
        return "tied"
    return "B better" if (diff > 0) == higher_is_better else "A better"


def compare_runs(
    a: Run,
    b: Run,
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = COMPARE_RESAMPLES,
    seed: int = COMPARE_SEED,
) -> Comparison:
    """B - A per metric of the suite, overall and per breakdown cell, on the shared (prompt, seed) pairs."""
    why = refusal(a.summary, b.summary)
    if why:
        raise CompareError(why)
    from idbench.builders.registry import get_benchmark

    spec = get_benchmark(a.summary["benchmark"])
    factors, units, method, notes = _design(a.summary)
    suite = {m.name: m for m in spec.metric_suite}
    image = lambda frame: frame[(frame["subject"] == "") & frame["metric"].isin(suite)]  # noqa: E731
    keys = ["prompt_id", "seed", "metric"]
    paired = image(a.results)[keys + ["value"]].merge(
        image(b.results)[keys + ["value"]], on=keys, suffixes=("_a", "_b")
    )
    cells = _cells(a.summary, b.summary, spec)
    rows: list[dict[str, Any]] = []
    for table, members in [(OVERALL, None), *cells]:
        block = paired if members is None else paired[paired["prompt_id"].isin(members)]
        table_rows = []
        for metric in [m for m in suite if m in set(block["metric"])]:
            group = block[block["metric"] == metric]
            d = paired_difference(
                group["value_a"].to_numpy(),
                group["value_b"].to_numpy(),
                group["prompt_id"].to_numpy(),
                units,
                factors,
                n_resamples,
                confidence,
                seed,
            )
            if d.n == 0:
                continue
            if any(math.isinf(x) for x in (d.mean_a, d.mean_b, d.diff, d.low, d.high)):
                # Defence in depth behind MAX_ABS_VALUE (a Run built in code skips the file checks).
                raise CompareError(
                    f"metric {metric!r} ({table}): the means or their difference overflow to infinity "
                    f"(A {d.mean_a:g}, B {d.mean_b:g}); a comparison needs values whose sums stay finite"
                )
            table_rows.append(
                {
                    "table": table,
                    "metric": metric,
                    "a": d.mean_a,
                    "b": d.mean_b,
                    "diff": d.diff,
                    "ci_low": d.low,
                    "ci_high": d.high,
                    "p": d.p_value,
                    "n": d.n,
                    "n_prompts": d.n_clusters,
                    "higher_is_better": suite[metric].higher_is_better,
                }
            )
        for row, adjusted in zip(table_rows, holm([r["p"] for r in table_rows])):
            row["p_holm"] = adjusted
            row["verdict"] = _verdict(row["diff"], adjusted, alpha, row["higher_is_better"])
        rows += table_rows
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_all"] = adjusted
    shared = paired[["prompt_id", "seed"]].drop_duplicates().shape[0]
    only = {
        name: run.results[run.results["subject"] == ""][["prompt_id", "seed"]].drop_duplicates().shape[0] - shared
        for name, run in (("A", a), ("B", b))
    }
    if any(only.values()):
        notes.append(
            f"compared on the {shared} (prompt, seed) pairs both runs hold; A has {only['A']} more, B {only['B']} more"
        )
    clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]
    return Comparison(
        spec.name,
        a.summary.get("submission", {}).get("model", "A"),
        b.summary.get("submission", {}).get("model", "B"),
        method,
        alpha,
        confidence,
        n_resamples,
        clean,
        notes,
        bool(a.summary.get("plumbing")),
    )


def _natural(label: str) -> list[tuple[int, int, str]]:
    """Sort key of a breakdown label such as "10 x occlusion": numbers by value, words by text."""
    return [(0, int(part), "") if part.isascii() and part.isdigit() else (1, 0, part) for part in label.split(" x ")]


def _cells(a: dict[str, Any], b: dict[str, Any], spec) -> list[tuple[str, set[str]]]:
    """(label, prompt ids) of every breakdown cell both runs list (``aggregates["breakdown_prompts"]``)."""
    left = a.get("aggregates", {}).get("breakdown_prompts") or {}
    right = b.get("aggregates", {}).get("breakdown_prompts") or {}
    out = []
    for axes, cells in left.items():
        for label, prompts in sorted(cells.items(), key=lambda item: _natural(item[0])):
            if label in right.get(axes, {}):
                out.append((f"{axes} = {label}", set(prompts) & set(right[axes][label])))
    return out


def _num(value: Any, factor: float = 1.0) -> str:
    if value is None:
        return "n/a"
    text = f"{factor * value:.4f}" if factor == 1.0 else f"{factor * value:.2f}"
    # A difference that rounds to zero is zero: "-0.00" would claim a sign the digits do not show.
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


# The linear display conventions (idbench.builders.display): a difference and its interval scale with
# the values, so a comparison is shown in the units every other output uses. A non-linear one (the
# CLIPScore clamp) would not carry a difference over; such a metric stays raw, unsuffixed.
_LINEAR = {"raw": 1.0, "x100": 100.0, "percent": 100.0, "x10": 10.0}


def shown_as(benchmark: str, metric: str) -> tuple[float, str]:
    """(factor, column suffix) ``metric`` is shown with on ``benchmark`` (1 and "" when raw or unknown)."""
    from idbench.builders.display import DISPLAYS
    from idbench.builders.registry import get_benchmark

    try:
        display = get_benchmark(benchmark).metric(metric).display
    except (KeyError, LookupError, ValueError):
        return 1.0, ""
    return (_LINEAR[display], DISPLAYS[display].suffix) if display in _LINEAR else (1.0, "")


def _p(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}" if value >= 0.001 else "<0.001"


def format_comparison(c: Comparison) -> str:
    """The table on stdout: metric (with its unit), A, B, diff, CI, p, p_holm, verdict, each metric in its
    display convention (the --json file keeps raw values). Text read from the runs' files (model names,
    the resampling method, breakdown labels) is printed with its control and format characters escaped (``\\x1b``), so
    a name cannot drive the terminal."""
    lines = [
        f"{c.benchmark}: A = {terminal_safe(c.model_a)}, B = {terminal_safe(c.model_b)}; B - A on shared "
        "(prompt, seed) pairs, each metric in its display units (raw for cosines)"
        + ("  [PLUMBING CHECK: random weights]" if c.plumbing else ""),
        f"{c.confidence:.0%} CI and p from {terminal_safe(c.method)} ({c.n_resamples} paired resamples); p: {P_VALUE}",
        f"p_holm: {CORRECTION}; verdict at alpha {c.alpha}",
        f"p_all: {CORRECTION_ALL}",
    ]
    lines += [f"note: {n}" for n in c.notes]
    header = (
        f"{'metric':24s} {'A':>9s} {'B':>9s} {'diff':>9s}  {'CI':21s} {'p':>6s} {'p_holm':>6s} {'p_all':>6s}  verdict"
    )
    disagree = False
    table = None
    for row in c.rows:
        if row["table"] != table:
            table = row["table"]
            lines += ["", f"[{terminal_safe(table)}]", header]
        factor, suffix = shown_as(c.benchmark, row["metric"])
        ci = f"[{_num(row['ci_low'], factor)}, {_num(row['ci_high'], factor)}]"
        name = row["metric"] + suffix
        excludes_zero = row["ci_low"] is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)
        mark = " *" if row["verdict"] == "tied" and excludes_zero else ""
        disagree = disagree or bool(mark)
        lines.append(
            f"{name:24s} {_num(row['a'], factor):>9s} {_num(row['b'], factor):>9s} {_num(row['diff'], factor):>9s}  "
            f"{ci:21s} {_p(row['p']):>6s} {_p(row['p_holm']):>6s} {_p(row.get('p_all')):>6s}  {row['verdict']}{mark}"
        )
    if not c.rows:
        lines.append("no metric of the suite holds values in both runs")
    if disagree:
        lines += ["", f"* the CI excludes 0 but the verdict is tied: {INTERVAL_VS_TEST}"]
    return "\n".join(lines)


def compare(a: str | Path | Run, b: str | Path | Run, alpha: float = 0.05, **options: Any) -> Comparison:
    """``idbench.compare``: two results folders (or loaded runs) -> their :class:`Comparison`."""
    run_a = a if isinstance(a, Run) else load_run(a)
    run_b = b if isinstance(b, Run) else load_run(b)
    return compare_runs(run_a, run_b, alpha=alpha, **options)
