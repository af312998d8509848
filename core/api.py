"""Generating and scoring from Python: ``idbench.generate(...)``, ``idbench.score(...)``, ``idbench.run(...)``
and what they return.

A thin layer over :func:`idbench.evaluate_pkg.runner.score_submission` (the same validation, models,
feature cache and math as ``idbench score``), returning a :class:`ScoreResult` whose tables are pandas
DataFrames, for a notebook::

    import idbench

    result = idbench.score("my-sub", "built/cogcanvas", profile="tiny")
    result.aggregates          # one row per metric: mean, ci_low, ci_high, n, n_nan
    result.samples             # one row per (prompt_id, seed, metric[, subject])
    result.summary             # everything aggregates.json holds

and generation with any adapter object, plain callable (request -> PIL image) or adapter name::

    report = idbench.generate("built/cogcanvas", my_model, "my-sub", resolution=1024)
    report.generated, report.skipped, report.seconds_per_image

in shards, one per job of a cluster (docs/cluster.md), then merged into one result::

    idbench.generate("built/cogcanvas", my_model, "my-sub", shard="auto")   # the job array's shard
    idbench.score_shard("my-sub", "built/cogcanvas", "scores", shard="auto", cache_dir="/shared/features")
    result = idbench.merge("scores")                                         # once every shard has finished

or the whole generate -> validate -> score (-> submit) pipeline of ``idbench run``::

    done = idbench.run("cogcanvas", "diffusers-image-list", "runs/mine", model_id=..., revision=..., echo=print)
    done.summary, done.results
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for the annotations: importing idbench must not import pandas or torch
    import pandas as pd

    from idbench.evaluate_pkg.data import BenchmarkData
    from idbench.generation.run import RunReport
    from idbench.leaderboard.queue import SubmitResult
    from idbench.shards import Shard

# The columns of ScoreResult.aggregates, in this order, from each metric's overall statistics.
AGGREGATE_COLUMNS = ("mean", "ci_low", "ci_high", "n", "n_nan")


@dataclass(frozen=True)
class ScoreResult:
    """One scored submission: ``summary`` (the dict ``aggregates.json`` holds), ``samples`` (the
    per-sample results, as ``results.parquet`` holds them) and, when written, the ``out`` folder."""

    summary: dict[str, Any]
    samples: pd.DataFrame
    out: Path | None = None

    @property
    def aggregates(self) -> pd.DataFrame:
        """The overall aggregates, one row per metric (the index), columns :data:`AGGREGATE_COLUMNS`.

        A view of ``summary["aggregates"]["overall"]`` made on each access; a statistic a metric does
        not report (a count without an interval) is NaN. The breakdowns stay in ``summary``.
        """
        import pandas as pd

        overall = self.summary["aggregates"]["overall"]
        rows = {
            metric: {column: stats.get(column) for column in AGGREGATE_COLUMNS} for metric, stats in overall.items()
        }
        frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(AGGREGATE_COLUMNS))
        frame.index.name = "metric"
        return frame.astype({"mean": "float64", "ci_low": "float64", "ci_high": "float64"})

    @property
    def plumbing(self) -> bool:
        """Whether the scores come from a plumbing profile (random weights): never benchmark scores."""
        return bool(self.summary.get("plumbing"))

    def __repr__(self) -> str:
        from idbench.evaluate_pkg.report import headline, verdict

        s = self.summary
        label = "plumbing check (random weights, not benchmark scores)" if self.plumbing else "benchmark scores"
        sample = ", sample build" if s.get("sample_build") else ""
        key = headline(s)
        stats = s["aggregates"]["overall"].get(key) or {}
        lead = (
            f"{key} = {_raw(stats.get('mean'))} [{_raw(stats.get('ci_low'))}, {_raw(stats.get('ci_high'))}]; "
            if key
            else ""
        )
        return (
            f"<idbench ScoreResult {s['benchmark']} / {s['submission'].get('model', '?')} / profile {s['profile']}: "
            f"{lead}{verdict(s)}; {label}{sample}; {s['images']} images, {len(s['aggregates']['overall'])} metrics, "
            f"{len(s['not_run'])} not run>"
        )

    def _repr_html_(self) -> str:
        """In a notebook: the one-line summary over the overall aggregates (raw values, one row per
        metric); the per-sample rows are ``samples``, the breakdowns ``summary``."""
        from html import escape

        return f"<p>{escape(repr(self))}; raw values</p>" + self.aggregates.to_html(float_format=lambda v: f"{v:.4f}")


def score(
    submission: str | Path,
    data: str | Path | BenchmarkData,
    *,
    profile: str = "paper",
    metrics: Iterable[str] | None = None,
    judge: Any = None,
    device: str = "cpu",
    out: str | Path | None = None,
    cache_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> ScoreResult:
    """Score ``submission`` (a folder or zip) on ``data`` (a built benchmark folder or a loaded
    :class:`~idbench.evaluate_pkg.data.BenchmarkData`), as ``idbench score`` does.

    ``metrics``: a subset of the benchmark's suite (default: all of it). ``judge``: a
    :class:`~idbench.evaluate_pkg.judge.JudgeConfig` or any object with the judge protocol; without one
    the judged metrics are reported as not run. ``out``: also write ``results.parquet``,
    ``aggregates.json`` and ``report.md`` there (as the CLI does); None writes nothing the caller keeps.
    ``cache_dir``: the feature cache (default ``$IDBENCH_CACHE/features``), which a rerun reads back.

    Raises the same :class:`~idbench.errors.IdbenchError` subclasses as the command line (an invalid
    submission, an unknown metric, a missing model, a device the machine lacks), before any scoring.
    """
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.results import read_samples
    from idbench.evaluate_pkg.runner import score_submission

    options = ScoreOptions(
        profile=profile, metrics=tuple(metrics) if metrics is not None else None, device=device, judge=judge
    )
    if out is not None:
        summary = score_submission(
            Path(submission), data, Path(out), options, cache_dir=cache_dir, overwrite=overwrite, progress=progress
        )
        return ScoreResult(summary, read_samples(out), Path(out))
    # score_submission returns the summary only; its per-sample rows reach us through the results file
    # it writes atomically, so it writes into a scratch folder that is removed once the rows are read.
    scratch = Path(tempfile.mkdtemp(prefix="idbench-score-"))
    try:
        written = scratch / "results"
        summary = score_submission(Path(submission), data, written, options, cache_dir=cache_dir, progress=progress)
        samples = read_samples(written)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ScoreResult(summary, samples)


def _shard(shard: str | Shard | None) -> Shard | None:
    """``"K/N"``, a Shard, ``"auto"`` (the scheduler's variables, as the CLI reads them without --shard;
    None outside a job array) or None (the whole benchmark)."""
    from idbench.shards import Shard, parse_shard, shard_from_environment

    if shard is None or isinstance(shard, Shard):
        return shard
    return shard_from_environment() if shard == "auto" else parse_shard(str(shard), "shard")


def score_shard(
    submission: str | Path,
    data: str | Path,
    out: str | Path,
    *,
    shard: str | Shard,
    profile: str = "paper",
    metrics: Iterable[str] | None = None,
    judge: Any = None,
    device: str = "cpu",
    cache_dir: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> Path:
    """Score one shard of ``submission`` (``"K/N"``, a :class:`~idbench.shards.Shard`, or ``"auto"``: the job
    array's), as ``idbench score --shard`` does: its images' features, copy searches and judge answers go
    into ``cache_dir`` (shared by the jobs or each node's own), a copy of those it used into
    ``out/shards/K-of-N/``, and its record into ``out/shards/K-of-N.json``, whose path is returned.
    :func:`merge` makes the run's results once every shard has finished.
    """
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.merge import score_shard as score_one_shard
    from idbench.shards import ShardError

    which = _shard(shard)
    if which is None:
        raise ShardError('shard="auto" outside a job array (no scheduler variables): give shard="K/N"')
    options = ScoreOptions(
        profile=profile, metrics=tuple(metrics) if metrics is not None else None, device=device, judge=judge
    )
    _, path = score_one_shard(
        Path(submission),
        Path(data),
        Path(out),
        options,
        which,
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        overwrite=overwrite,
        progress=progress,
    )
    assert path is not None  # one process: it writes its record
    return path


def merge(out: str | Path, *, device: str = "cpu", progress: bool = True) -> ScoreResult:
    """The results of a run scored in shards (:func:`score_shard`), as ``idbench merge`` writes them into
    ``out``: the shards' records checked (one complete run, else an error naming what is missing), then
    the whole submission scored from the features and judge answers in their folders (no cache is read)."""
    from idbench.evaluate_pkg.merge import merge as merge_shards
    from idbench.evaluate_pkg.results import read_samples

    summary = merge_shards(Path(out), device=device, progress=progress)
    return ScoreResult(summary, read_samples(out), Path(out))


def _benchmark_data(data: str | Path | BenchmarkData) -> BenchmarkData:
    from idbench.evaluate_pkg.data import BenchmarkData, load_benchmark_data

    return data if isinstance(data, BenchmarkData) else load_benchmark_data(Path(data))


def generate(
    data: str | Path | BenchmarkData,
    adapter: Any,
    out: str | Path,
    *,
    resolution: int | None = None,
    task: str | None = None,
    limit: int | None = None,
    batch_size: int = 1,
    model_name: str | None = None,
    progress: bool | None = None,
    shard: str | Shard | None = None,
    **adapter_options: Any,
) -> RunReport:
    """Generate the submission ``out`` for ``data`` (a built benchmark folder or loaded data), as ``idbench
    generate`` does: every missing (prompt_id, seed) image of the template, written atomically, with the
    generation record in ``submission.json``; a rerun generates only what is missing.

    ``adapter``: an adapter object or any callable taking a
    :class:`~idbench.generation.requests.GenerationRequest` and returning a PIL image, or the name of one
    (``"diffusers-image-list"``, an entry point, ``"module:attr"``), which is then made with
    ``adapter_options`` as :class:`~idbench.generation.adapters.GeneratorOptions` (``model_id``,
    ``revision``, ``device``, ``dtype``, ``steps``, ``guidance``, ...). ``resolution`` defaults to 1024 and
    ``task`` to the benchmark's reference task. ``shard`` (``"K/N"``, a :class:`~idbench.shards.Shard`, or
    ``"auto"``: the job array's) generates only that shard's rows into ``out``, which the other shards
    fill too (docs/cluster.md). Returns the run's
    :class:`~idbench.generation.run.RunReport` (generated, skipped, seconds per image).
    """
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.generation.adapters import GeneratorError, GeneratorOptions, check_device, load_generator
    from idbench.generation.requests import DEFAULT_RESOLUTION
    from idbench.generation.run import generate_submission

    name = None
    if isinstance(adapter, str):
        name = adapter
        options = GeneratorOptions(**adapter_options)
        check_device(options.device)
        adapter = load_generator(name, options)
    elif adapter_options:
        raise GeneratorError(
            f"options {', '.join(sorted(adapter_options))} make an adapter from its name; this adapter is already made"
        )
    return generate_submission(
        _benchmark_data(data),
        adapter,
        out,
        adapter_name=name,
        model_name=model_name,
        resolution=resolution or DEFAULT_RESOLUTION,
        task=task or DEFAULT_TASK,
        limit=limit,
        batch_size=batch_size,
        progress=progress,
        shard=_shard(shard),
    )


def compare(a: str | Path | ScoreResult, b: str | Path | ScoreResult, alpha: float = 0.05, **options: Any):
    """``idbench.compare(a, b)``: the paired comparison of two scored runs, B - A per metric (overall and
    per breakdown cell), with intervals and Holm-corrected p-values from the benchmark's resampling
    design, as ``idbench compare`` prints it. ``a`` and ``b`` are results folders of ``idbench score``
    or :class:`ScoreResult` objects. Returns a :class:`~idbench.evaluate_pkg.compare.Comparison`
    (``.frame()`` a DataFrame of its rows, ``.as_dict()`` what ``--json`` writes).
    """
    from idbench.evaluate_pkg.compare import Run
    from idbench.evaluate_pkg.compare import compare as compare_runs

    as_run = lambda r: Run(r.out, r.summary, r.samples) if isinstance(r, ScoreResult) else r  # noqa: E731
    return compare_runs(as_run(a), as_run(b), alpha=alpha, **options)


def standings(
    benchmark: str,
    *,
    task: str | None = None,
    metric: str | None = None,
    filters: dict[str, str | None] | None = None,
    home: str | Path | None = None,
):
    """``idbench.standings("identity-collapse")``: the board of a benchmark in the local leaderboard
    (``home``, default ``$IDBENCH_HOME``; ``task`` the track, default the reference-based one) as its page
    opens, or ranked on ``metric`` in the breakdown cell
    ``filters`` selects: the ranked rows with their rank interval and tier, the rows set apart with why
    (:class:`~idbench.leaderboard.board.Standings`; ``.table`` all rows, ``.caption`` what the
    intervals claim). Nothing is resampled: the intervals are those stored when the results last changed.
    """
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.leaderboard.board import standings as board_standings
    from idbench.leaderboard.store import Store

    store = Store(Path(home) if home is not None else None)
    return board_standings(store, benchmark, task or DEFAULT_TASK, metric, filters)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: the data folder scored against, the submission and results folders, the
    generation's :class:`~idbench.generation.run.RunReport`, the scoring summary (``aggregates.json``)
    and, with ``submit=True``, the local leaderboard's ``SubmitResult``."""

    data: Path
    submission: Path
    results: Path
    generation: RunReport
    summary: dict[str, Any]
    queued: SubmitResult | None = None
    recorded: str | None = None  # with submit=True: the job's state once recorded (FINISHED, FAILED, ...)


def _raw(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _quiet(line: str) -> None:
    """The default ``echo`` of :func:`run`: no stage lines."""


def run(
    benchmark: str,
    model: str,
    out: str | Path,
    *,
    data: str | Path | None = None,
    model_name: str | None = None,
    task: str | None = None,
    resolution: int | None = None,
    batch_size: int = 1,
    profile: str = "paper",
    metrics: Iterable[str] | None = None,
    judge: Any = None,
    device: str = "cpu",
    models_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    submit: bool = False,
    submitter: str | None = None,
    echo: Callable[[str], None] = _quiet,
    **adapter_options: Any,
) -> RunResult:
    """generate -> validate -> score (-> submit), as ``idbench run`` does, into ``out/submission`` and
    ``out/results``.

    ``model``: an adapter name (``"diffusers-image-list"``, an entry point, ``"module:attr"``), made with
    ``device`` and ``adapter_options`` (``model_id``, ``revision``, ``dtype``, ``steps``, ...) as in
    :func:`generate`. Without ``data`` the shipped sample of ``benchmark`` is built into ``out/data`` (a
    sample build: its numbers are not the benchmark's). A rerun continues: only missing images are
    generated, and the scores are recomputed from the feature cache. ``submit`` then queues the
    submission on the local leaderboard ($IDBENCH_HOME) and records its scores there (the worker's
    checks, this run's profile and feature cache: nothing is computed again). ``echo`` receives each stage's lines (pass
    ``print`` to see them).
    """
    from idbench.builders.registry import get_benchmark
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.generation.adapters import GeneratorOptions, check_device, load_generator
    from idbench.generation.requests import DEFAULT_RESOLUTION
    from idbench.generation.run import generate_submission

    check_device(device)
    benchmark = get_benchmark(benchmark).name  # an unknown name: one error listing the known ones
    out = Path(out)
    data_dir = _run_data_dir(benchmark, out, data, echo)
    loaded = load_benchmark_data(data_dir, benchmark=benchmark)
    submission, results = out / "submission", out / "results"

    echo(f"[2/4] generate: {model} -> {submission}")
    adapter = load_generator(model, GeneratorOptions(device=device, **adapter_options))
    report = generate_submission(
        loaded,
        adapter,
        submission,
        adapter_name=model,
        model_name=model_name,
        resolution=DEFAULT_RESOLUTION if resolution is None else resolution,
        task=task or DEFAULT_TASK,
        batch_size=batch_size,
    )
    per_image = f", {report.seconds_per_image:.2f} s per image" if report.seconds_per_image is not None else ""
    echo(f"      generated {report.generated}, skipped {report.skipped} already there{per_image}")

    options = _score_options(profile, metrics, judge, device, models_dir)
    summary = _validate_and_score(submission, loaded, results, options, cache_dir, echo)
    queued = recorded = None
    if submit:
        queued, recorded = _submit_and_record(submission, data_dir, options, cache_dir, model_name, submitter, echo)
    return RunResult(data_dir, submission, results, report, summary, queued, recorded)


def _submit_and_record(submission, data_dir, options, cache_dir, model_name, submitter, echo):
    """Queue the submission on the local leaderboard, then record its scores there at once: the worker's
    own path for that one job (the store's copy of the submission, validated again, the fault ladder,
    the record), with the run's options and feature cache, so what was scored a moment ago is read from
    the cache rather than computed again, and no worker with other models is needed. Returns the
    ``SubmitResult`` and the job's final state (None for a duplicate: nothing new was queued)."""
    from idbench.evaluate_pkg.runner import default_cache_dir
    from idbench.leaderboard.queue import StoreQueue
    from idbench.leaderboard.queue import submit as queue_submission
    from idbench.leaderboard.store import Store
    from idbench.leaderboard.worker import run_worker, score_work

    store = Store()
    queued = queue_submission(store, submission, data_dir, model_name=model_name, submitter=submitter)
    if queued.duplicate:
        return queued, None
    features = Path(cache_dir) if cache_dir is not None else default_cache_dir()

    def scorer(stored, data, out, job_options, _store_cache):  # the run's cache, not the store's
        return score_work(stored, data, out, job_options, features)

    echo(f"[submit] submission {queued.submission_id}, job {queued.job_id}: recording the scores (feature cache)")
    run_worker(StoreQueue(store, job_id=queued.job_id), once=True, options=options, scorer=scorer, progress=False)
    return queued, store.job(queued.job_id)["state"]


def _run_data_dir(benchmark: str, out: Path, data: str | Path | None, echo: Callable[[str], None]) -> Path:
    """The built benchmark of a run: ``data``, else the shipped sample built once into ``out/data``."""
    if data is not None:
        return Path(data)
    data_dir = out / "data"
    if not (data_dir / "build_info.json").is_file():
        from idbench.builders.build import build

        echo(
            f"[1/4] build: no --data; building the shipped {benchmark} sample into {data_dir} (a sample build, not the benchmark)"
        )
        build(benchmark, out=data_dir)
    return data_dir


def _score_options(profile, metrics, judge, device, models_dir):
    from idbench.evaluate_pkg.context import ScoreOptions

    return ScoreOptions(
        profile=profile,
        metrics=tuple(metrics) if metrics is not None else None,
        device=device,
        models_dir=str(models_dir) if models_dir else None,
        judge=judge,
    )


def _validate_and_score(submission, data, results, options, cache_dir, echo) -> dict[str, Any]:
    """Steps 3 and 4 of :func:`run`; returns the summary."""
    from idbench.evaluate_pkg.report import format_summary
    from idbench.evaluate_pkg.runner import score_submission
    from idbench.evaluate_pkg.submission import validate_submission

    echo("[3/4] validate")
    with validate_submission(submission, data) as valid:
        echo(f"      valid: {len(valid.entries)} images, model {valid.metadata.get('model')!r}")

    echo(f"[4/4] score: profile {options.profile} -> {results}")
    # A rerun rescores (the feature cache makes the unchanged images free): results follow the images.
    summary = score_submission(submission, data, results, options, cache_dir=cache_dir, overwrite=True)
    echo(format_summary(summary))
    echo(f"results in {results} (results.parquet, aggregates.json, report.md)")
    return summary
