"""How the leaderboard shows values: units, column names, legends, the displayed table and its links.

The ranking, breakdown and rank-interval modules keep raw values (a cosine stays a cosine); this one turns
them into what a reader sees and downloads, and the chart frames take their units from it. It owns the app's unit switch (each metric's display convention or raw values), a
metric's column name with its unit and the legend and header notes beside it, the displayed ranked table
(values through their convention, shares in percent, an optional compact "mean [low, high]" column, the
columns in reading order), the paired-comparison tables of the model page, the model page's deep links
and a submitter's checked link, and the plain-text tables of a result's metadata, its generation record
and the newest jobs. Nothing here decides a rank.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pandas as pd

from idbench.builders.display import DISPLAYS, show, show_text
from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.leaderboard.result_rows import (
    CHANCE,
    CI_HIGH,
    CI_LOW,
    COPIES,
    COVERAGE,
    FAILURES,
    JUDGE,
    MISSING,
    NOT_RANKED,
    SHARES,
    as_number,
    family_of,
    metric_specs,
    task_of,
)

# --- units, column names and the notes beside them ------------------------------------------------


def twin_note(spec: BenchmarkSpec, metric: str) -> str:
    """The short label of a paper's column that leaves judge failures out (``MetricSpec.itt_twin``), as
    the pages show it beside the column; empty for any other metric."""
    twin = metric_specs(spec)[metric].itt_twin if metric in metric_specs(spec) else ""
    return f"the paper's: leaves judge failures out; not ranked, see {twin}" if twin else ""


# The app's one unit switch (a sidebar choice every table, chart and model page follows): each metric in
# its display convention (docs/display-conventions.md), or every metric as its raw stored value.
UNITS_DISPLAY, UNITS_RAW = "display conventions", "raw values"
UNITS = (UNITS_DISPLAY, UNITS_RAW)


def units_help() -> str:
    """The Units switch's tooltip, built from the conventions the registered benchmarks' metrics use, so it
    never names one no metric has (x100 and CLIPScore once did)."""
    from idbench.builders.display import DISPLAYS
    from idbench.builders.registry import BENCHMARKS, get_benchmark

    used = sorted({m.display for name in BENCHMARKS for m in get_benchmark(name).metric_suite} - {"raw"})
    shown = "; ".join(f"{DISPLAYS[d].suffix.strip(' ()')}: {DISPLAYS[d].formula}" for d in used)
    return (
        f"Display conventions: each metric in the unit its column names ({shown}; the others as stored). "
        "Raw values: every number as stored in results.parquet and aggregates.json."
    )


def display_of(spec: BenchmarkSpec, metric: str, raw: bool = False) -> str:
    """The display convention ``metric`` is shown in: its own, or ``"raw"`` under the raw-values switch."""
    return "raw" if raw else metric_specs(spec)[metric].display


def in_units(values: Any, spec: BenchmarkSpec, metric: str, raw: bool = False) -> Any:
    """Raw ``values`` (a number or a Series) of ``metric`` in the unit the page shows (:func:`display_of`),
    unrounded, for charts and breakdown tables."""
    display = display_of(spec, metric, raw)
    if isinstance(values, pd.Series):
        return values.astype(float).map(lambda v: show(v, display))
    return show(as_number(values), display)


def display_name(spec: BenchmarkSpec, metric: str, raw: bool = False) -> str:
    """The column name :func:`display_table` gives ``metric`` (``"scr@0.5 (%)"``, ``"aesthetic (x10)"``;
    a raw metric, and every metric under the raw-values switch, keeps its bare name)."""
    return metric + DISPLAYS[display_of(spec, metric, raw)].suffix


def display_legend(spec: BenchmarkSpec, raw: bool = False) -> dict[str, str]:
    """Column name -> how its values are made and where the convention comes from (or that it is ours),
    for the metrics of the suite: what the app shows under the table."""
    return {
        display_name(spec, m.name, raw): "; ".join(
            filter(None, ("raw value" if raw else m.display_label, twin_note(spec, m.name)))
        )
        for m in spec.metric_suite
    }


def column_help(spec: BenchmarkSpec, raw: bool = False) -> dict[str, str]:
    """Displayed column name -> its header tooltip: the papers' columns that leave judge failures out
    (:func:`twin_note`), and each metric's missing-evidence count, which a reader otherwise has to guess."""
    notes = {display_name(spec, m.name, raw): twin_note(spec, m.name) for m in spec.metric_suite if m.itt_twin}
    for m in spec.metric_suite:
        if m.missing_evidence:
            notes[m.name + MISSING + " (per image)"] = (
                f"How many of what {m.name} scores per image had no evidence (`{m.missing_evidence}`: e.g. no "
                f"face found, nothing located). Those are left out of {m.name}'s mean, never counted as 0 or "
                "as a match: a high count means the mean rests on few of the image's items."
            )
    return notes


# --- the displayed table --------------------------------------------------------------------------

# Columns about who and what a row is: after the metrics, so the ranked metric is the first column after
# the model's name (and its link) on any screen width.
METADATA_COLUMNS = ("family", "submitter", "profile", "marks", JUDGE, COPIES, NOT_RANKED, "submission")
LEADING_COLUMNS = ("rank", "rank interval", "tier", "model", "link")


def reading_order(shown: pd.DataFrame) -> pd.DataFrame:
    """The columns in reading order: rank, rank interval, tier, model (and link), the metrics (the ranked
    one first, in the table's order), then the metadata columns."""
    leading = [c for c in LEADING_COLUMNS if c in shown.columns]
    trailing = [c for c in METADATA_COLUMNS if c in shown.columns]
    middle = [c for c in shown.columns if c not in leading and c not in trailing]
    return shown[leading + middle + trailing]


def display_table(table: pd.DataFrame, spec: BenchmarkSpec, compact: bool = False, raw: bool = False) -> pd.DataFrame:
    """The table as shown and downloaded: each metric column under its display convention.

    Each metric's mean and CI go through its ``display`` (``idbench.builders.display``: x100, percent,
    x10, the CLIPScore scale 2.5 x max(cos, 0) x 100) and the column is renamed with the unit
    (``"scr@0.5 (%)"``, ``"aesthetic (x10)"``) so a reader of the CSV knows it;
    values are rounded as :func:`idbench.evaluate_pkg.report.display_value` rounds them (4 decimals
    raw, 2 scaled). Judge-failure rates are shown in percent, missing-evidence counts as they are (a
    mean per image), a chance level (``"<metric> random"``) under its metric's convention. Numbers stay numbers, so the app's table sorts numerically.

    ``raw`` (the app's unit switch set to raw values): every metric shown as its raw value, unrenamed.
    Columns come in :func:`reading_order`.

    ``compact`` (the app's table): each metric's mean and interval become one text column,
    ``"72.00 [65.00, 78.60]"`` (:func:`interval_text`), without the two CI columns; the CSV keeps
    the numbers (``compact=False``). Rows keep the ranking's order either way.
    """
    shown = table.copy()
    intervals = {}  # metric -> its compact texts, made from the raw values (one rounding, as show_text)
    for m in metric_specs(spec).values():
        if compact and m.name in table.columns:
            low, high = (
                table.get(m.name + suffix, pd.Series(math.nan, index=table.index)) for suffix in (CI_LOW, CI_HIGH)
            )
            intervals[m.name] = [
                interval_text(*values, display_of(spec, m.name, raw)) for values in zip(table[m.name], low, high)
            ]
            shown = shown.drop(columns=[c for c in (m.name + CI_LOW, m.name + CI_HIGH) if c in shown.columns])
    renames = {}
    for column in [
        c for c in shown.columns if c.endswith((FAILURES, COVERAGE, *(suffix for _, suffix in SHARES.values())))
    ]:  # a share of images: shown in percent
        shown[column] = (shown[column].astype(float) * 100).round(2)
        renames[column] = column + " (%)"
    for column in [c for c in shown.columns if c.endswith(MISSING)]:
        shown[column] = shown[column].astype(float).round(4)
        renames[column] = column + " (per image)"
    for m in metric_specs(spec).values():
        display = display_of(spec, m.name, raw)
        convention = DISPLAYS[display]
        for column in (m.name, m.name + CI_LOW, m.name + CI_HIGH, m.name + CHANCE):
            if column in shown.columns:
                if m.name in intervals and column == m.name:
                    shown[column] = pd.Series(intervals[m.name], index=shown.index, dtype=object)
                else:
                    shown[column] = (
                        shown[column].astype(float).map(lambda v, d=display: show(v, d)).round(convention.decimals)
                    )
                renames[column] = m.name + convention.suffix + column[len(m.name) :]
    return reading_order(shown.rename(columns=renames))


def interval_text(mean: Any, low: Any, high: Any, display: str) -> str:
    """A value and its interval as one short text in the display convention: ``"72.00 [65.00, 78.60]"``;
    the value alone when it has no interval (one prompt), "n/a" when it has no value."""
    text = show_text(as_number(mean), display)
    if text == "n/a" or math.isnan(as_number(low)) or math.isnan(as_number(high)):
        return text
    return f"{text} [{show_text(as_number(low), display)}, {show_text(as_number(high), display)}]"


# --- paired comparisons on the model page ---------------------------------------------------------


def comparison_tables(
    rows: Iterable[Mapping[str, Any]], spec: BenchmarkSpec, raw: bool = False
) -> dict[str, pd.DataFrame]:
    """The rows of ``idbench.evaluate_pkg.compare`` (one per table and metric, raw values) as one frame
    per table ("overall", then each breakdown cell): metric (named with its unit), A, B, B - A and its
    interval in the page's units, p, p_holm, verdict, shared images and prompts.

    Means are shown through the metric's display convention. A difference is scaled by the
    convention's factor (``apply(1) - apply(0)``: x100, x10, x250 for CLIPScore), which is the
    difference of the displayed means for every linear convention; CLIPScore's clamp at 0 is not
    applied to a difference (a negative difference is real, a negative mean cosine practically never).
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        metric = str(row["metric"])
        display = display_of(spec, metric, raw) if metric in metric_specs(spec) else "raw"
        convention = DISPLAYS[display]
        factor = convention.apply(1.0) - convention.apply(0.0)
        digits = convention.decimals
        scaled = lambda v, f=factor, n=digits: None if v is None else round(f * float(v), n)  # noqa: E731
        shown = lambda v, d=display, n=digits: None if v is None else round(show(v, d), n)  # noqa: E731
        low, high = scaled(row.get("ci_low")), scaled(row.get("ci_high"))
        out.setdefault(str(row["table"]), []).append(
            {
                "metric": display_name(spec, metric, raw) if metric in metric_specs(spec) else metric,
                "A": shown(row.get("a")),
                "B": shown(row.get("b")),
                "B - A": scaled(row.get("diff")),
                "interval": "n/a" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]",
                "p": row.get("p"),
                "p_holm": row.get("p_holm"),
                "verdict": row.get("verdict"),
                "images": row.get("n"),
                "prompts": row.get("n_prompts"),
            }
        )
    return {name: pd.DataFrame(table) for name, table in out.items()}


# --- links, and the model and status pages' plain tables ------------------------------------------

MODEL_PAGE = "./model"  # relative, so a link works under whatever host and path serves the app
MODEL_NAME_IN_URL = r"[?&]model=([^&]*)$"  # the LinkColumn's display_text: the model name (the URL's last parameter)


def model_url(benchmark: str, task: str, submission: int, model: str) -> str:
    """The model page's deep link for one result: benchmark, track, submission, then the model's name
    last (the table shows it through :data:`MODEL_NAME_IN_URL`). Spaces as %20: the grid decodes those."""
    params = {"benchmark": benchmark, "track": task, "submission": str(int(submission)), "model": model}
    return f"{MODEL_PAGE}?{urlencode(params, quote_via=quote)}"


def safe_link(link: Any) -> str | None:
    """A submitter's link when it is an http(s) URL with a host, else None (nothing else becomes clickable)."""
    if not isinstance(link, str) or any(c.isspace() or ord(c) < 32 for c in link.strip()):
        return None
    parts = urlsplit(link.strip())
    return link.strip() if parts.scheme in ("http", "https") and parts.netloc else None


def with_links(shown: pd.DataFrame, results: pd.DataFrame, task: str) -> pd.DataFrame:
    """The displayed table with each model name turned into its model-page URL and, after it, a
    ``link`` column with the model's own link (``safe_link``: None when absent or not http(s))."""
    if shown.empty:
        return shown.assign(link=pd.Series(dtype=object))
    by_id = {int(row["submission_id"]): row for _, row in results.iterrows()}
    out = shown.copy()
    out["model"] = [
        model_url(by_id[i]["benchmark"], task, i, name)
        for i, name in zip(out["submission"].astype(int), out["model"].astype(str))
    ]
    out.insert(
        out.columns.get_loc("model") + 1,
        "link",
        [safe_link((by_id[i]["metadata"] or {}).get("link")) for i in out["submission"].astype(int)],
    )
    return out


def metadata_table(row: Mapping[str, Any]) -> pd.DataFrame:
    """One result's metadata as ``field, value`` rows of text (shown as a table, never as Markdown)."""
    metadata = row.get("metadata") or {}
    fields = [
        ("model", row.get("model_name")),
        ("family", family_of(row)),
        ("submitter", _text_or(row.get("submitter"), "(not given)")),
        ("link", metadata.get("link")),
        ("task", task_of(row)),
        ("profile", row.get("profile")),
        ("plumbing check", "yes (random weights)" if row.get("plumbing") else "no"),
        ("benchmark version", row.get("benchmark_version")),
        ("suite version", row.get("suite_version")),
        ("idbench version", row.get("idbench_version")),
        ("submission", row.get("submission_id")),
    ]
    return pd.DataFrame([(name, _text_or(value, "")) for name, value in fields], columns=["field", "value"])


def _text_or(value: Any, missing: str) -> str:
    """``value`` as text, ``missing`` where it is absent: None, or the NaN a results frame holds for a
    submission made without it (never shown as "nan")."""
    if value is None or (isinstance(value, float) and value != value):
        return missing
    return str(value)


# The generation record's fields (idbench generate, docs/generation.md) in the order the model page shows them.
GENERATION_FIELDS = (
    "adapter",
    "model_id",
    "revision",
    "pipeline_class",
    "dtype",
    "steps",
    "guidance",
    "resolution",
    "task",
    "references",
    "reference_side",
    "device",
    "processes",
    "seed_rule",
    "seconds_per_image",
)
# A value the submitter wrote is cut to this many characters on the page (the whole record is in the JSON expander).
GENERATION_VALUE_CHARS = 300
GENERATION_NOT_RECORDED = (
    "Generation: not recorded (made outside `idbench generate`: submission.json has no generation record "
    "of the adapter, model revision and sampling)."
)


def generation_table(row: Mapping[str, Any]) -> pd.DataFrame | None:
    """The generation record of ``idbench generate`` in ``submission.json`` as ``field, value`` rows of
    text, the libraries as one row; None when the submission has no record (the adapter field marks one).

    The submitter wrote these values: they are shown as plain text, cut to GENERATION_VALUE_CHARS.
    """
    record = (row.get("metadata") or {}).get("generation")
    if not isinstance(record, Mapping) or not isinstance(record.get("adapter"), str):
        return None

    def text(value: Any) -> str:
        shown = json.dumps(value, sort_keys=True, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
        return shown if len(shown) <= GENERATION_VALUE_CHARS else shown[: GENERATION_VALUE_CHARS - 3] + "..."

    rows = [(field, text(record[field])) for field in GENERATION_FIELDS if record.get(field) not in (None, "")]
    libraries = record.get("libraries")
    if isinstance(libraries, Mapping) and libraries:
        rows.append(("libraries", text(", ".join(f"{k} {v}" for k, v in sorted(libraries.items())))))
    return pd.DataFrame(rows, columns=["field", "value"])


def latest_jobs(jobs: list[Mapping[str, Any]], tasks: Mapping[int, str], n: int) -> pd.DataFrame:
    """The ``n`` newest jobs (of :func:`idbench.leaderboard.queue.jobs_table`, oldest first) newest first:
    ``submitted, model, benchmark, task, state``; ``tasks`` maps a submission id to its task."""
    columns = ["submitted", "model", "benchmark", "task", "state", "submission"]
    newest = sorted(jobs, key=lambda j: int(j["job"]), reverse=True)[:n]
    rows = [
        (
            j["created"],
            j["model"],
            j["benchmark"],
            tasks.get(int(j["submission"]), DEFAULT_TASK),
            j["state"],
            int(j["submission"]),
        )
        for j in newest
    ]
    return pd.DataFrame(rows, columns=columns)
