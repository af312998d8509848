"""``idbench score``: validate a submission, compute the benchmark's metric suite, write the results.

Outputs (written to a temporary sibling of ``--out`` and moved into place when complete):

- ``results.parquet``: one row per (prompt_id, seed, metric[, subject]) with the raw value, plus the
  submission's model name, benchmark, profile, metric-suite version (the benchmark spec's
  ``suite_version``) and whether it is a plumbing check;
- ``aggregates.json``: means and 95 % bootstrap CIs, overall and per breakdown cell, the models used
  (names, Hub ids, revisions, weights keys), metrics not run and why, and run notes;
- ``report.md`` with PNG plots.

A failed validation raises before anything is computed or written.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

import idbench
from idbench import settings
from idbench.builders.spec import DEFAULT_TASK, JUDGE_ROLE, MetricSpec, SpecError
from idbench.errors import IdbenchError
from idbench.evaluate_pkg import results as result_files
from idbench.evaluate_pkg.context import Context, Models, Result, ScoreOptions
from idbench.evaluate_pkg.copies import detect_copies
from idbench.evaluate_pkg.data import BenchmarkData, load_benchmark_data
from idbench.evaluate_pkg.features import FeatureStore
from idbench.evaluate_pkg.floors import floor_record, floored_results
from idbench.evaluate_pkg.models.registry import NOT_MADE, profile_is_plumbing, resolve_profile
from idbench.evaluate_pkg.report import aggregate, write_report
from idbench.evaluate_pkg.submission import Submission, validate_submission
from idbench.evaluate_pkg.suites import suite_for
from idbench.progress import Progress, library_bars_off, progress_for
from idbench.shards import Shard, rows_sha256, unit_key


class ScoringError(IdbenchError, ValueError):
    pass


def default_cache_dir() -> Path:
    """The feature cache: ``$IDBENCH_CACHE/features``, default ``~/.cache/idbench/features``."""
    return settings.features_cache_dir()


NO_JUDGE = "needs a VLM judge; none was configured (pass --judge-url and --judge-model, or set IDBENCH_JUDGE_URL and IDBENCH_JUDGE_MODEL)"


# Why a metric of the suite is not run for a submission of another task (MetricSpec.tasks).
RANKING_NOT_RUN = "scores a ranking of references (the retrieval task), not generated images"
TASK_NOT_RUN = {
    "text-to-image": "text-to-image task: no references given (its protocol is count accuracy and Attr-VQA on the binding questions)",
    "retrieval": "retrieval task: the submission ranks references and holds no generated images",
}


def task_not_run(task: str, metric: MetricSpec) -> str:
    """The reason ``metric`` is not run for a submission of ``task`` (one it does not score)."""
    if task != "retrieval" and metric.tasks == ("retrieval",):
        return RANKING_NOT_RUN
    return TASK_NOT_RUN.get(task, f"scores the {', '.join(metric.tasks)} task, not the {task} task")


def unmade_roles(profile: str) -> dict[str, str]:
    """role -> why, for the roles of ``profile`` whose random model cannot be made (``registry.NOT_MADE``).

    Only ``paper-random``'s face role today (insightface's ArcFace pack has no offline definition).
    """
    return {
        role: f"needs the {role} model, and the {profile} profile's {card.name} cannot be made: {NOT_MADE[card.name]}"
        for role, card in resolve_profile(profile).items()
        if card.name in NOT_MADE
    }


def select_metrics(
    data: BenchmarkData,
    requested: tuple[str, ...] | None,
    judge: Any = None,
    task: str = DEFAULT_TASK,
    unmade: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The metrics to compute and those of the suite that will show as not run (with the reason).

    The metrics are the spec's ``metric_suite``; those that do not score the submission's ``task``
    (``MetricSpec.tasks``) are not run, with :func:`task_not_run`'s reason; the suite's ``NOT_RUN``
    says which others this engine does not compute, and why. A judged metric (one whose roles include
    the judge) is not run, with that reason, when no judge is configured: the rest is scored all the same.
    ``unmade`` (:func:`unmade_roles`): roles whose model the profile cannot make; a metric needing one is
    not run, with that reason, when the whole suite is scored (one asked for by name is kept, and loading
    its model then stops the run with the same reason).
    """
    not_computed = suite_for(data.name).NOT_RUN
    known = [m.name for m in data.spec.metric_suite]
    stray = sorted(set(not_computed) - set(known))
    if stray:  # a suite that names metrics its spec does not declare is a bug of the benchmark's code
        raise SpecError(
            f"benchmark {data.name}: the suite's NOT_RUN names metrics outside its metric_suite: {', '.join(stray)}"
        )
    unknown = [m for m in requested or () if m not in known]
    if unknown:
        raise ScoringError(f"unknown metric(s) {', '.join(unknown)} for {data.name}; known: {', '.join(known)}")
    wanted = list(known) if requested is None else list(requested)
    floored_from = {twin.name: metric for metric, twin in data.spec.floored_twins.items()}
    metrics, not_run = [], {}
    unmade = dict(unmade or {}) if requested is None else {}

    def unmade_reason(name: str) -> str | None:
        roles = [
            *data.spec.metric(name).roles,
            *(data.spec.metric(floored_from[name]).roles if name in floored_from else ()),
        ]
        return next((unmade[role] for role in roles if role in unmade), None)

    for m in wanted:
        if m in not_computed:
            not_run[m] = not_computed[m]
        elif floored_from.get(m) in not_computed:  # a copy-floored twin is its metric's values
            not_run[m] = f"the copy-floored {floored_from[m]}, which is not run: {not_computed[floored_from[m]]}"
        elif task not in data.spec.metric(m).tasks:
            not_run[m] = task_not_run(task, data.spec.metric(m))
        elif data.spec.metric(m).judged and judge is None:
            not_run[m] = NO_JUDGE
        elif (reason := unmade_reason(m)) is not None:
            not_run[m] = reason
        else:
            metrics.append(m)
    return metrics, not_run


def make_judge(judge: Any, cache_dir: Path | None) -> Any:
    """A ready judge: ``judge`` itself if it answers ``ask``, else an OpenAIJudge for the JudgeConfig.

    Its answers are cached in ``cache_dir/judge/answers/`` next to the features when a cache
    folder is given (``--cache-dir``, the leaderboard's), else in the default judge cache
    (``$IDBENCH_CACHE/judge``), so a rerun of an unchanged submission sends no request.
    """
    if judge is None or hasattr(judge, "ask"):
        return judge
    from idbench.evaluate_pkg.judge import AnswerCache, OpenAIJudge, default_cache_path
    from idbench.evaluate_pkg.judge.cache import FOLDER

    path = Path(cache_dir) / "judge" / FOLDER if cache_dir is not None else default_cache_path()
    return OpenAIJudge(judge, cache=AnswerCache(path))


def judge_summary(judge: Any) -> dict[str, Any] | None:
    """The judge as recorded with the results: model, endpoint (as ``settings.redact_url`` shows it: no
    credentials, a key-shaped path segment masked), settings, statistics."""
    if judge is None:
        return None
    out: dict[str, Any] = {"model": judge.model}
    config = getattr(judge, "config", None)
    if config is not None:
        out["base_url"] = settings.redact_url(config.base_url)
        if getattr(config, "replica_urls", ()):
            out["replica_urls"] = [settings.redact_url(address) for address in config.replica_urls]
        out["settings"] = {
            k: getattr(config, k) for k in ("temperature", "max_tokens", "max_image_side", "structured", "concurrency")
        }
        if getattr(config, "revision", None):
            out["settings"]["revision"] = config.revision
    stats = getattr(judge, "stats", None)
    if stats is not None and hasattr(stats, "as_dict"):
        out["stats"] = stats.as_dict()
    return out


def accelerator_if_launched(device: str):
    """An ``accelerate.Accelerator`` when started by ``accelerate launch`` / torchrun with several processes
    (hand it to :func:`score_submission`); None in a single process."""
    if settings.world_size() <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(cpu=device == "cpu")


def _progress_factory(enabled: bool | Progress) -> Progress:
    """The run's reporter (``idbench.progress``): bars on a terminal, bounded log lines otherwise, none
    when ``enabled`` is False; a reporter made by the caller (a worker's) is used as it is."""
    return progress_for(enabled)


@library_bars_off()  # the libraries' own bars would interleave with the run's stage lines
def score_submission(
    submission_path: Path,
    data: BenchmarkData | Path,
    out: Path | None,
    options: ScoreOptions | None = None,
    *,
    cache_dir: Path | None = None,
    overwrite: bool = False,
    accelerator: Any = None,
    progress: bool | Progress = True,
    models: Models | None = None,
    shard: Shard | None = None,
    carry: str | None = None,
    store: FeatureStore | None = None,
) -> dict[str, Any]:
    """Score one submission; returns the summary written to ``aggregates.json``.

    ``out=None`` computes without writing (tests, notebooks). Under ``accelerate launch`` pass the
    ``Accelerator``: unique images are split across processes, features gathered, and only the main
    process writes. ``models`` lets several runs with the same options share loaded models.
    ``progress``: what the run says on stderr while it works (``idbench.progress``; only the main
    process speaks): True for bars on a terminal and bounded log lines elsewhere, False for nothing,
    or a reporter of the caller's.

    ``shard`` (:mod:`idbench.shards`): score only that shard's images, into the feature cache and the
    judge's answer cache, and write nothing else; :mod:`idbench.evaluate_pkg.merge` copies what the shard
    used beside its record, and ``idbench merge`` scores the whole submission from those copies. Returns a
    shorter summary (no aggregates). ``carry``: a sub-folder of an existing ``out`` kept in the new one
    (the merge's shard folder). ``store``: the feature store to read and fill (default: a
    :class:`FeatureStore` of ``cache_dir``); the shards and the merge pass their own.
    """
    options = options or ScoreOptions()
    data = data if isinstance(data, BenchmarkData) else load_benchmark_data(data)
    is_main = accelerator is None or accelerator.is_main_process
    if out is not None and Path(out).exists() and not overwrite:
        raise ScoringError(f"{out} already exists; pass --overwrite to replace it")
    # A device the machine lacks is refused first (Models checks it), before any line of progress.
    models = models if models is not None else Models(options)
    reporter = _progress_factory(progress if is_main else False)
    shared = accelerator is not None and accelerator.num_processes > 1
    try:
        with reporter.step(f"scoring on {data.name} ({options.profile} profile)") as scoring:
            summary = _score(
                submission_path,
                data,
                out,
                options,
                cache_dir,
                overwrite,
                accelerator,
                models,
                is_main,
                reporter,
                shared,
                shard,
                carry,
                store,
            )
            scoring.note = f"{summary['images']} images" if summary["images"] else "a ranking of references"
    except BaseException:
        reporter.close(quiet=True)  # the error's (or Ctrl-C's) own line follows, not a stage's done line
        raise
    return summary


def _listing(names: list[str], at_most: int = 10) -> str:
    """Names for a progress line, the first ``at_most`` of them: a suite of thirty would fill a screen."""
    if not names:
        return "none"
    shown = ", ".join(names[:at_most])
    return shown + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


def _score(
    submission_path,
    data,
    out,
    options,
    cache_dir,
    overwrite,
    accelerator,
    models,
    is_main,
    reporter,
    shared,
    shard,
    carry,
    store,
):
    """score_submission's work, reported to ``reporter`` (``shared``: other processes compute part of the features)."""
    # Validation comes first: the submission's task decides which metrics (and models) apply.
    with validate_submission(Path(submission_path), data) as whole:
        submission = whole if shard is None else _share(whole, shard)
        # Under accelerate only the main process asks the judge (the others would send the same requests);
        # judged metrics use no collective, so the processes still meet at the same feature gathers.
        metrics, not_run = select_metrics(
            data, options.metrics, options.judge if is_main else None, submission.task, unmade_roles(options.profile)
        )
        model = submission.metadata.get("model") or Path(submission_path).name
        count = (
            f"{len(submission.rankings)} rankings"
            if submission.task == "retrieval"
            else f"{len(submission.entries)} images"
        )
        reporter.line(
            f"{model}: {count} ({submission.task} task); metrics: {_listing(metrics)}"
            + (f"; {len(not_run)} not run (the report says why)" if not_run else "")
        )
        roles = model_roles(data, metrics)
        with reporter.step(f"loading models ({', '.join(sorted(roles)) or 'none'})"):
            models.preload(roles)  # fail before any model work
        judged = any(data.spec.metric(m).judged for m in metrics)
        judge = make_judge(options.judge, Path(cache_dir) if cache_dir else None) if judged else None
        if store is None:
            store = FeatureStore(Path(cache_dir or default_cache_dir()), accelerator=accelerator)
        stages = functools.partial(reporter, shared=shared)
        context = Context(data, submission, store, models, options, progress=stages, judge=judge)
        if submission.task == "retrieval":
            # Rankings, not images: the benchmark's own scorer (BenchmarkSpec.rankings), no copy check.
            scorer = data.spec.load("rankings")
            results = scorer.score_rankings(data, submission.rankings, metrics=set(metrics))
            context.notes["retrieval"] = scorer.slot_count_note(data)
        else:
            # A copy-floored twin is computed from its metric's rows (below): the suite computes the metric.
            floored_from = {twin.name: metric for metric, twin in data.spec.floored_twins.items()}
            results = suite_for(data.name).score(context, {floored_from.get(m, m) for m in metrics})
            # Every benchmark, whatever metrics ran: a copy or paste of the references wins identity
            # scores without generating anything, so it is flagged per image and the run marked (over
            # 5 % flagged); a flagged image scores the floor in every ranked column (evaluate_pkg/floors.py).
            copy_rows, context.copies = detect_copies(context)
            floored = floored_results(data.spec, results + copy_rows, metrics)
            context.copies["floored"] = floor_record(data.spec, copy_rows, floored)
            results += copy_rows + floored
        reporter.close()
        if shard is not None:  # the work is in the store and the answer cache; the results come from the merge
            judged_record = judge_summary(context.judge)  # the shard's own questions, before any control
            if shard.index == 0 and context.judge is not None:
                # The judge's controls, asked once per run (by shard 0): their answers travel in shard 0's
                # folder like its own, so the merge needs no judge when every answer is there.
                from idbench.evaluate_pkg.judge.controls import run_controls

                with reporter.step("asking the judge its control questions"):
                    run_controls(data, context.judge, set(metrics))
            return shard_summary(data, whole, shard, context, judged_record)
        # The judge's controls (judge/controls.py), asked after the submission's own questions, which are
        # all that judge_summary's statistics count; they never enter the results.
        judged_record, controls = judge_summary(context.judge), None
        if context.judge is not None:
            from idbench.evaluate_pkg.judge.controls import run_controls

            with reporter.step("asking the judge its control questions"):
                controls = run_controls(data, context.judge, set(metrics))
        summary = summarize(data, submission.metadata, results, context, not_run)
        if judged_record is not None:
            from idbench.evaluate_pkg.judge.card import describe_judge

            judged = [m for m in metrics if data.spec.metric(m).judged]
            summary["judge"] = describe_judge(judged_record, controls, summary["aggregates"]["overall"], judged)
        if out is not None and is_main:
            with reporter.step(
                f"writing {result_files.SAMPLES_FILE}, {result_files.AGGREGATES_FILE} and {result_files.REPORT_FILE}"
            ) as writing:
                writing.note = f"into {out}"
                keys, loaders = context.generation_keys(), context.generation_loaders()
                write_outputs(
                    Path(out),
                    data,
                    results,
                    summary,
                    context.evidence,
                    overwrite=overwrite,
                    carry=carry,
                    generation=lambda prompt_id, seed: loaders[keys[(prompt_id, seed)]](),
                )
    return summary


def _share(submission: Submission, shard: Shard) -> Submission:
    """The images of ``submission`` that are ``shard``'s work."""
    if submission.task == "retrieval":
        raise ScoringError(
            f"--shard {shard}: a retrieval submission is one table of rankings, scored in seconds; score it whole"
        )
    return submission.only(lambda entry: shard.owns(unit_key(entry.prompt_id, entry.seed)))


def submission_fingerprint(submission: Submission) -> str:
    """One hash of every (prompt_id, seed) and its image's content: two shards scored the same submission
    exactly when their fingerprints are equal."""
    import hashlib

    digest = hashlib.sha256()
    for entry in submission.entries:
        digest.update(f"{entry.prompt_id}\x00{entry.seed}\x00{entry.content_hash}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def shard_summary(
    data: BenchmarkData, whole: Submission, shard: Shard, context: Context, judged: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a shard reports: which shard, how many images (and a hash of their rows, which the merge checks
    against the split), of which submission, what it computed, and what its judge did (``judged``:
    :func:`judge_summary` of its questions)."""
    return {
        "benchmark": data.name,
        "shard": str(shard),
        "images": len(context.submission.entries),
        "rows_sha256": rows_sha256((entry.prompt_id, entry.seed) for entry in context.submission.entries),
        "judge": judged,
        "submission_sha256": submission_fingerprint(whole),
        "build": build_record(data),
        "profile": context.options.profile,
        "features": context.store.counts(),
    }


def results_frame(data: BenchmarkData, metadata: dict, results: list[Result], profile: str) -> pd.DataFrame:
    frame = pd.DataFrame([r.__dict__ for r in results], columns=["prompt_id", "seed", "metric", "subject", "value"])
    frame["value"] = frame["value"].astype("float64")
    frame["seed"] = frame["seed"].astype("int64")
    frame.insert(0, "model", metadata.get("model", ""))
    frame.insert(1, "benchmark", data.name)
    frame["profile"] = profile
    frame["plumbing"] = profile_is_plumbing(profile)
    frame["suite_version"] = data.spec.suite_version
    return frame


def prompts_frame(data: BenchmarkData) -> pd.DataFrame:
    """The prompt columns the aggregates group by (``spec.breakdown_columns``), one row per prompt."""
    columns = data.spec.breakdown_columns
    return pd.DataFrame(
        [{"prompt_id": p["prompt_id"], **{c: p.get(c) for c in columns}} for p in data.prompt_rows.values()]
    )


def references_frame(data: BenchmarkData) -> pd.DataFrame | None:
    """The reference metadata the subject breakdowns read (no images); None when they read none.

    A column an older build lacks is left out, and the axes that need it with it (report.aggregate).
    """
    wanted = data.spec.reference_columns
    if not wanted:
        return None
    table = data.reference_table
    return table.select_columns([c for c in wanted if c in table.column_names]).to_pandas()


def model_roles(data: BenchmarkData, metrics) -> set[str]:
    """The encoder roles ``metrics`` need, as their MetricSpecs declare them (the judge is no encoder)."""
    return {role for metric in metrics for role in data.spec.metric(metric).roles} - {JUDGE_ROLE}


def _roles_of(data: BenchmarkData, context: Context, not_run: dict) -> set[str]:
    """The model roles the computed metrics need (a shared Models object may hold others)."""
    known = {m.name for m in data.spec.metric_suite}
    computed = context.options.metrics or tuple(known)
    return model_roles(data, [m for m in computed if m in known and m not in not_run])


def build_record(data: BenchmarkData) -> dict[str, Any]:
    """What identifies the benchmark build a run was scored on (``aggregates["build"]``): its seed,
    source and idbench version from build_info.json, and a fingerprint of its prompt rows, so that
    ``idbench compare`` refuses runs of two different builds of one benchmark."""
    import hashlib

    rows = json.dumps(sorted(data.prompt_rows.items()), sort_keys=True, default=str).encode()
    info = data.build_info
    return {
        "seed": info.get("seed"),
        "idbench_version": info.get("idbench_version"),
        "source_sha256": (info.get("source") or {}).get("sha256"),
        "prompts_sha256": hashlib.sha256(rows).hexdigest(),
    }


def summarize(
    data: BenchmarkData, metadata: dict, results: list[Result], context: Context, not_run: dict
) -> dict[str, Any]:
    frame = results_frame(data, metadata, results, context.options.profile)
    return {
        "benchmark": data.name,
        "task": metadata.get("task") or DEFAULT_TASK,
        "submission": metadata,
        "profile": context.options.profile,
        "plumbing": profile_is_plumbing(context.options.profile),
        # Scored on a build of the shipped samples (build_info.json): never published as benchmark scores.
        "sample_build": bool(data.build_info.get("sample_build", False)),
        "build": build_record(data),
        "suite_version": data.spec.suite_version,
        "idbench_version": idbench.__version__,
        "images": len(context.submission.entries),
        "models": context.models.used(_roles_of(data, context, not_run)),
        "aggregates": aggregate(frame, prompts_frame(data), data.spec, references_frame(data)),
        "not_run": not_run,
        "notes": context.notes,
        "features": context.store.counts(),
        "judge": judge_summary(context.judge),
        # None for a retrieval submission (it holds no images to copy)
        "copies": context.copies,
    }


def evidence_frame(evidence: list[tuple[str, int, str, dict]]) -> pd.DataFrame:
    """One row per (prompt_id, seed, metric) with the judge's evidence as a JSON string."""
    rows = [(p, int(s), m, json.dumps(e, sort_keys=True, default=str)) for p, s, m, e in evidence]
    return pd.DataFrame(rows, columns=["prompt_id", "seed", "metric", "evidence"])


def write_outputs(
    out: Path,
    data: BenchmarkData,
    results: list[Result],
    summary: dict[str, Any],
    evidence: list | None = None,
    overwrite: bool = False,
    carry: str | None = None,
    generation: Callable[[str, int], bytes] | None = None,
) -> None:
    """Write results.parquet, the judge's evidence, aggregates.json and report.md into ``out``, atomically.

    With ``generation`` ((prompt id, seed) -> the image's bytes), the images the copy check flagged are
    drawn beside their reference with the place found outlined (``copies/``, listed in ``copies/index.json``
    and in the report; evaluate_pkg/copy_figures.py).

    An earlier ``out`` is moved aside and removed only once the new results are in place, so a crash
    while writing leaves the previous results readable. ``score_submission`` refused an existing
    ``out`` without --overwrite before scoring; ``overwrite=False`` still refuses one that appeared since.
    """
    with result_files.staged(out, overwrite=overwrite, carry=carry) as staging:  # carry: the merge's shard records
        result_files.write_data(
            staging,
            results_frame(data, summary["submission"], results, summary["profile"]),
            summary,
            evidence_frame(evidence) if evidence else None,
        )
        flagged = None
        if evidence and generation is not None:
            from idbench.evaluate_pkg.copy_figures import write_copy_figures

            flagged = write_copy_figures(staging, evidence, generation, lambda ref_id: data.reference_bytes[ref_id])
            if flagged:
                result_files.write_copy_index(staging, flagged)
        write_report(staging, summary, data.spec, flagged=flagged)
