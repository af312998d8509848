"""The ``idbench`` command line: one subcommand per job; the work happens in the packages it calls."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from idbench.errors import IdbenchError, disk_full, failed_path, storage_failure

DEFAULT_DEMO_OUT = Path("idbench-output")


def benchmark_name(name: str) -> str:
    """argparse type of a benchmark argument: a name the registry knows (built-in, registered or from an
    ``idbench.benchmarks`` entry point); otherwise argparse's one-line error lists those that exist."""
    from idbench.builders.benchmarks import UnknownBenchmarkError, get_benchmark

    try:
        return get_benchmark(name).name
    except UnknownBenchmarkError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _cmd_build(args: argparse.Namespace) -> int:
    from idbench.builders.build import build, format_report
    from idbench.builders.sources import SourceError

    # The CLI composes building with curation: builders take the model stages as a Curator and never
    # import idbench.curation (a higher layer).
    curator = None
    if args.curate or args.reviewed_prompts:
        import transformers

        from idbench.curation.pipeline import CurateOptions, Curation

        transformers.utils.logging.disable_progress_bar()  # loading the encoders would drown the report
        thresholds, why = _quality_thresholds(args.quality_thresholds, shipped_samples=args.source is None)
        curator = Curation(CurateOptions(
            profile=args.profile,
            device=args.device,
            judge=_judge_config(args),
            dedup_threshold=args.dedup_threshold,
            reviewed_prompts=args.reviewed_prompts,
            image_stages=args.curate,
            quality=thresholds,
            quality_from=why,
        ))  # fmt: skip
    try:
        info = build(
            args.benchmark,
            out=args.out,
            source=args.source,
            seed=args.seed,
            n_prompts=args.prompts,
            overwrite=args.overwrite,
            curator=curator,
        )
    except SourceError as error:
        # A later step failed after curation ran: say what the stages removed, keep their audit
        # beside the (unwritten) output.
        explained = curator.failure(error, _failed_audit_dir(args.out)) if curator is not None else None
        if explained is None:
            raise
        raise explained from None
    print(format_report(info))
    print(f"written to {args.out}")
    stale = _failed_audit_dir(args.out)
    if curator is not None and stale.is_dir():
        # The audit of an earlier failed build describes data this build replaced: left beside the
        # new output it would read as this build's. The new build's own audit is inside it.
        shutil.rmtree(stale)
        print(f"removed {stale} (the curation audit of an earlier failed build)")
    return 0


def _failed_audit_dir(out: Path) -> Path:
    """Where the curation audit of a failed build goes: beside the output, which is not written."""
    return out.parent / f"{out.name}.curation-audit"


def _quality_thresholds(path: Path | None, shipped_samples: bool = False):
    """(QualityThresholds or None for the defaults, why they apply) for a curated build.

    An explicit ``--quality-thresholds`` file wins; otherwise a build of the shipped samples takes
    the samples' own thresholds (the samples are 183-512 px, below the default 512 px floor). A
    malformed file or an unknown key is one error naming the file.
    """
    from idbench.builders.sources import SourceError
    from idbench.curation.quality import SAMPLE_THRESHOLDS, QualityThresholds, sample_thresholds

    if path is not None:
        try:
            return QualityThresholds.from_json(Path(path).read_text(encoding="utf-8"), where=str(path)), f"--quality-thresholds {path}"
        except OSError as error:
            raise SourceError(f"{path}: {error.strerror or error}") from None
        except ValueError as error:
            raise SourceError(str(error)) from None
    if shipped_samples:
        return sample_thresholds(), f"shipped samples' own (idbench.samples/{SAMPLE_THRESHOLDS}): no --source, no --quality-thresholds"
    return None, None


def _cmd_publish(args: argparse.Namespace) -> int:
    from idbench.builders.publish import EVAL_YAML, EvalYamlRejected, publish

    if args.eval_yaml:
        import json

        from idbench.builders.benchmarks import get_benchmark
        from idbench.leaderboard.hub import dump_yaml, eval_yaml

        info = json.loads((args.folder / "build_info.json").read_text()) if (args.folder / "build_info.json").is_file() else {}
        if "benchmark" in info:
            (args.folder / EVAL_YAML).write_text(dump_yaml(eval_yaml(get_benchmark(info["benchmark"]))))

    def report(verb: str, files: list[str]) -> None:
        print(f"{verb} {len(files)} file(s) to dataset repo {args.repo_id}:")
        for name in files:
            print(f"  {name}")

    try:
        files = publish(args.folder, args.repo_id, private=args.private, dry_run=args.dry_run)
    except EvalYamlRejected as rejected:  # the dataset commit is up; say what is, then why eval.yaml is not
        report("uploaded", rejected.uploaded)
        raise
    report("would upload" if args.dry_run else "uploaded", files)
    return 0


def _load_data(folder: Path, benchmark: str | None = None):
    from idbench.evaluate_pkg.data import BenchmarkDataError, load_benchmark_data

    data = load_benchmark_data(folder)
    if benchmark is not None and data.name != benchmark:
        raise BenchmarkDataError(f"{folder} holds the {data.name} benchmark, not {benchmark}")
    return data


def _cmd_template(args: argparse.Namespace) -> int:
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.evaluate_pkg.submission import write_template

    data = _load_data(args.data, args.benchmark)
    task = args.task or DEFAULT_TASK
    write_template(data, args.out, overwrite=args.overwrite, task=task)
    if task == "retrieval":
        print(f"wrote a {data.name} retrieval template to {args.out}: rankings.csv lists every slot's candidates; "
              f"give each a rank (1 = best; drop the rows you do not rank) and fill in submission.json")
    else:
        print(f"wrote a {data.name} {task} submission template to {args.out}: {len(data.required_pairs)} (prompt_id, seed) "
              f"rows in manifest.csv; put each image at the file its row names and fill in submission.json")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.submission import validate_submission

    data = _load_data(args.data)
    with validate_submission(args.submission, data) as submission:
        print(f"valid: {len(submission.entries)} images for {data.name}, model {submission.metadata.get('model')!r}")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.generation.adapters import check_device, load_generator
    from idbench.generation.run import generate_submission

    data = _load_data(args.data, args.benchmark)
    check_device(args.device)
    processes = _process_group_if_launched(args.device)
    device = str(processes.device) if processes is not None else args.device
    adapter = load_generator(args.model, _generator_options(args, device))
    task = args.task or DEFAULT_TASK
    report = generate_submission(
        data, adapter, args.out, adapter_name=args.model, model_name=args.name, resolution=args.resolution,
        task=task, limit=args.limit, batch_size=args.batch_size, processes=processes,
    )  # fmt: skip
    if processes is not None:
        # Leave the process group together and cleanly (gloo threads alive at exit abort the process).
        processes.wait_for_everyone()
        processes.destroy_process_group()
        if not processes.is_main_process:
            return 0  # the main process reports the run
    per_image = f", {report.seconds_per_image:.2f} s per image" if report.seconds_per_image is not None else ""
    print(f"generated {report.generated} images for {data.name} ({task}) into {args.out}; skipped {report.skipped} already there"
          f"{per_image}; {report.total} of {len(data.required_pairs)} rows considered")  # fmt: skip
    if report.total < len(data.required_pairs):
        print(f"note: --limit left {len(data.required_pairs) - report.total} rows out; validate needs them all (rerun without --limit)")
    else:
        print(f"next: idbench validate {args.out} --data {args.data}")
    return 0


def _generator_options(args: argparse.Namespace, device: str):
    from idbench.generation.adapters import GeneratorOptions

    return GeneratorOptions(
        model_id=args.model_id, revision=args.revision, device=device, dtype=args.dtype,
        steps=args.steps, guidance=args.guidance, ignore_references=args.ignore_references, reference_side=args.reference_side,
    )  # fmt: skip


def _cmd_run(args: argparse.Namespace) -> int:
    """generate -> validate -> score (-> submit): the researcher's one command (docs/generation.md, "idbench run")."""
    from idbench.builders.spec import DEFAULT_TASK
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.report import format_summary
    from idbench.evaluate_pkg.runner import score_submission
    from idbench.evaluate_pkg.submission import validate_submission
    from idbench.generation.adapters import check_device, load_generator
    from idbench.generation.run import generate_submission

    check_device(args.device)
    judge = _judge_config(args)  # a half-given judge is refused before any image is drawn
    out: Path = args.out
    data_dir = args.data
    if data_dir is None:
        from idbench.builders.build import build

        data_dir = out / "data"
        if not (data_dir / "build_info.json").is_file():
            print(f"[1/4] build: no --data; building the shipped {args.benchmark} sample into {data_dir} (a sample build, not the benchmark)")
            build(args.benchmark, out=data_dir)
    data = _load_data(data_dir, args.benchmark)
    task = args.task or DEFAULT_TASK
    submission, results = out / "submission", out / "results"

    print(f"[2/4] generate: {args.model} -> {submission}")
    adapter = load_generator(args.model, _generator_options(args, args.device))
    report = generate_submission(
        data, adapter, submission, adapter_name=args.model, model_name=args.name, resolution=args.resolution,
        task=task, batch_size=args.batch_size,
    )  # fmt: skip
    per_image = f", {report.seconds_per_image:.2f} s per image" if report.seconds_per_image is not None else ""
    print(f"      generated {report.generated}, skipped {report.skipped} already there{per_image}")

    print("[3/4] validate")
    with validate_submission(submission, data) as valid:
        print(f"      valid: {len(valid.entries)} images, model {valid.metadata.get('model')!r}")

    print(f"[4/4] score: profile {args.profile} -> {results}")
    options = ScoreOptions(
        profile=args.profile, metrics=tuple(args.metrics.split(",")) if args.metrics else None, device=args.device,
        models_dir=str(args.models_dir) if args.models_dir else None, judge=judge,
    )  # fmt: skip
    # A rerun rescores (the feature cache makes the unchanged images free): results follow the images.
    summary = score_submission(submission, data, results, options, cache_dir=args.cache_dir, overwrite=True)
    print(format_summary(summary))
    print(f"results in {results} (results.parquet, aggregates.json, report.md)")
    if args.submit:
        from idbench.leaderboard.queue import submit
        from idbench.leaderboard.store import Store

        queued = submit(Store(), submission, data_dir, model_name=args.name, submitter=args.submitter)
        state = "already submitted" if queued.duplicate else "queued"
        print(f"{state}: submission {queued.submission_id}, job {queued.job_id} on the local leaderboard; run `idbench worker --once`")
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.runner import score_submission

    eval_results_source = _check_hub_eval_results(args) if args.hub_eval_results else None
    accelerator = _accelerator_if_launched(args.device)
    options = ScoreOptions(
        profile=args.profile,
        metrics=tuple(args.metrics.split(",")) if args.metrics else None,
        device=str(accelerator.device) if accelerator is not None else args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        models_dir=str(args.models_dir) if args.models_dir else None,
        judge=_judge_config(args),
    )
    summary = score_submission(
        args.submission, args.data, args.out, options,
        cache_dir=args.cache_dir, overwrite=args.overwrite, accelerator=accelerator,
    )
    if args.hub_eval_results and (accelerator is None or accelerator.is_main_process):
        from idbench.builders.benchmarks import get_benchmark
        from idbench.leaderboard.hub import write_eval_results

        path = write_eval_results(
            summary, get_benchmark(summary["benchmark"]), args.hub_eval_results, args.dataset_id,
            dataset_revision=args.dataset_revision, source=eval_results_source,
        )  # fmt: skip
        print(f"wrote {path} (commit it to the model's Hub repo)")
    if accelerator is None or accelerator.is_main_process:
        from idbench.evaluate_pkg.report import format_summary

        print(format_summary(summary))
        print(f"results in {args.out} (results.parquet, aggregates.json, report.md)")
    if accelerator is not None:
        # Leave the process group together and cleanly: a collective thread still alive at
        # interpreter exit makes torch abort the process (seen with gloo).
        accelerator.wait_for_everyone()
        accelerator.end_training()
    return 0


def _check_hub_eval_results(args: argparse.Namespace) -> dict[str, str] | None:
    """Refuse, before any scoring, a --hub-eval-results run whose results could not be published; return
    the entries' source ({"url", "name"?}) or None.

    Refused: no --dataset-id, --source-name without --source-url, a plumbing profile (tiny), and data
    that is a sample build (build_info.json's ``sample_build``: the shipped samples, not the benchmark).
    """
    import json

    from idbench.evaluate_pkg.models.registry import profile_is_plumbing
    from idbench.leaderboard.hub import refuse_unpublishable

    if not args.dataset_id:
        raise ScoringErrorForCli("--hub-eval-results needs --dataset-id ORG/NAME (the benchmark's Hub repo)")
    if args.source_name and not args.source_url:
        raise ScoringErrorForCli("--source-name needs --source-url (the Hub shows the name as the link's text)")
    info_path = Path(args.data) / "build_info.json"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = None  # not a built folder: scoring itself reports it, naming the file
    if isinstance(info, dict):
        refuse_unpublishable({
            "profile": args.profile,
            "plumbing": profile_is_plumbing(args.profile),
            "sample_build": bool(info.get("sample_build", False)),
        })  # fmt: skip
    if not args.source_url:
        return None
    return {"url": args.source_url, **({"name": args.source_name} if args.source_name else {})}


class ScoringErrorForCli(IdbenchError, ValueError):
    """A flag combination the CLI refuses (half a judge configuration, --hub-eval-results without --dataset-id)."""


def _judge_config(args: argparse.Namespace):
    """The judge from --judge-url/--judge-model or $IDBENCH_JUDGE_URL/$IDBENCH_JUDGE_MODEL; None if neither.

    Half a configuration (a URL without a model) is an error, not a quiet "not run".
    """
    import os

    if not (args.judge_url or args.judge_model or os.environ.get("IDBENCH_JUDGE_URL") or os.environ.get("IDBENCH_JUDGE_MODEL")):
        return None
    from idbench.evaluate_pkg.judge import JudgeConfig

    try:
        return JudgeConfig.from_env(args.judge_url, args.judge_model, concurrency=args.judge_concurrency)
    except (TypeError, ValueError) as error:
        raise ScoringErrorForCli(str(error)) from None


def _add_judge_arguments(
    parser: argparse.ArgumentParser,
    what: str = "the VLM judge of the judged metrics (CHARIS score, Attr-VQA); without one they are reported as not run",
) -> None:
    group = parser.add_argument_group("judge", what)
    group.add_argument("--judge-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (default: $IDBENCH_JUDGE_URL)")
    group.add_argument("--judge-model", help="the served model's name (default: $IDBENCH_JUDGE_MODEL); the key comes from $IDBENCH_JUDGE_API_KEY")
    group.add_argument("--judge-concurrency", type=int, default=8, help="requests in flight at once (default: %(default)s)")


def _process_group_if_launched(device: str):
    """accelerate's PartialState when started by `accelerate launch` / torchrun with several processes (no
    model or optimizer to prepare: generation only needs who is who and a barrier)."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import PartialState

    return PartialState(cpu=device == "cpu")


def _accelerator_if_launched(device: str):
    """An accelerate.Accelerator when started by `accelerate launch` / torchrun with several processes."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(cpu=device == "cpu")


def _cmd_baseline(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.baselines import make_baseline

    data = _load_data(args.data, args.benchmark)
    if args.name.startswith("retrieval-"):
        from idbench.evaluate_pkg.context import ScoreOptions
        from idbench.evaluate_pkg.retrieval import make_retrieval_baseline, retrieval_rows

        options = ScoreOptions(
            profile=args.profile, device=args.device, batch_size=args.batch_size,
            models_dir=str(args.models_dir) if args.models_dir else None,
        )
        make_retrieval_baseline(args.name, data, args.out, options=options, cache_dir=args.cache_dir, overwrite=args.overwrite)
        print(f"wrote the {args.name} ranking for {data.name} to {args.out} ({len(retrieval_rows(data))} slots, rankings.csv)")
        return 0
    make_baseline(args.name, data, args.out, size=args.size, seed=args.seed, overwrite=args.overwrite)
    print(f"wrote the {args.name} baseline for {data.name} to {args.out} ({len(data.required_pairs)} images)")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.models import registry

    if args.action == "make-tiny":
        for path in registry.make_tiny(models_dir=args.models_dir):
            print(f"  {path}")
        print("tiny models ready (random weights: results made with them are plumbing checks)")
        return 0
    from idbench.evaluate_pkg.models import download

    if args.action == "download" and args.dry_run:
        for step in download.plan(args.profile or registry.DEFAULT_PROFILE, models_dir=args.models_dir):
            print(f"  {step.role:10s} {step.name:28s} {step.describe()}")
        return 0
    if args.action == "download":
        accepted = {download.INSIGHTFACE_LICENSE} if args.accept_insightface_license else set()
        report = download.download(args.profile or registry.DEFAULT_PROFILE, models_dir=args.models_dir, accept_licenses=accepted)
        print(report.summary())
        return 0 if report.ok else 1  # 1: the profile is not complete on this machine yet (each line says why)
    registry.resolve_profile(args.profile or registry.DEFAULT_PROFILE)  # an unknown profile: one error listing the known
    for line in download.list_lines(args.profile, models_dir=args.models_dir):
        print(line)
    return 0


def _leaderboard_data_dir(benchmark: str, data: Path | None) -> Path:
    """The built benchmark a leaderboard scores against: --data, else $IDBENCH_HOME/benchmarks/<name>."""
    from idbench.leaderboard.store import Store

    return data if data is not None else Store().home / "benchmarks" / benchmark


def _cmd_submit(args: argparse.Namespace) -> int:
    import functools
    import tempfile

    from idbench.evaluate_pkg.hub_submission import fetch_submission, is_hub_ref
    from idbench.leaderboard.queue import submit
    from idbench.leaderboard.store import Store

    data_dir = _leaderboard_data_dir(args.benchmark, args.data)
    _load_data(data_dir, args.benchmark)
    options = dict(model_name=args.model_name, submitter=args.submitter, family=args.family, link=args.link)
    if args.hub:  # a maintainer queueing a submission straight into the Hub requests repo
        from idbench.leaderboard.hub_queue import submit_request
        from idbench.leaderboard.hubrepo import open_repo

        queue = functools.partial(submit_request, open_repo(args.hub))
    else:
        queue = functools.partial(submit, Store())
    if is_hub_ref(args.submission):
        with tempfile.TemporaryDirectory(prefix="idbench-hub-") as folder:
            fetched = fetch_submission(args.submission, Path(folder) / "submission")
            result = queue(fetched, data_dir, **options)
    else:
        result = queue(Path(args.submission), data_dir, **options)
    if args.hub:
        verb = "already requested" if result.duplicate else "requested"
        print(f"{verb}: {args.hub}: {result.path} ({'not committed again' if result.duplicate else 'PENDING'})")
        return 0
    if result.duplicate:
        print(f"already submitted: submission {result.submission_id} (job {result.job_id}); not queued again")
    else:
        print(f"queued: submission {result.submission_id}, job {result.job_id} (PENDING); run `idbench worker --once`")
    return 0


def _queue(args: argparse.Namespace, *, results_needed: bool = False):
    """The job queue the command works on: the Hub deployment's repos with ``--hub``, else the local store."""
    from idbench.leaderboard.store import Store

    hub, results = getattr(args, "hub", None), getattr(args, "results", None)
    if not (hub or results):
        if getattr(args, "data", None):
            raise HubArgumentError("--data is an option of the Hub worker (with --hub and --results)")
        from idbench.leaderboard.queue import StoreQueue

        return StoreQueue(Store())
    from idbench.leaderboard.hub_queue import HubQueue
    from idbench.leaderboard.hubrepo import open_repo

    if not hub or (results_needed and not results):
        raise HubArgumentError(f"idbench {args.command} on the Hub needs both --hub ORG/REQUESTS and --results ORG/RESULTS")
    results_repo = open_repo(results) if results else None
    return HubQueue(open_repo(hub), results_repo, _hub_data_dirs(getattr(args, "data", None) or []))


def _cmd_worker(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.leaderboard.worker import run_worker

    options = ScoreOptions(profile=args.profile, device=args.device, batch_size=args.batch_size, judge=_judge_config(args))
    queue = _queue(args, results_needed=True)
    done = run_worker(queue, once=args.once, lease_seconds=args.lease_seconds, options=options, dry_run=args.dry_run,
                      job_seconds=args.job_time_limit)  # fmt: skip
    if args.dry_run:
        print(f"dry run: {done} {queue.unit}(s) would be claimed; nothing was changed")
    else:
        print(f"worker finished {done} {queue.unit}(s)")
    return 0


class HubArgumentError(IdbenchError):
    """Options of the Hub-backed commands that do not go together."""


def _hub_data_dirs(entries: list[str]) -> dict[str, Path]:
    """``--data BENCH=DIR`` entries over the defaults ``$IDBENCH_HOME/benchmarks/<benchmark>``."""
    from idbench.builders.benchmarks import BENCHMARKS
    from idbench.leaderboard.store import default_home

    folders = {name: default_home() / "benchmarks" / name for name in BENCHMARKS}
    for entry in entries:
        name, sep, folder = entry.partition("=")
        if not sep or not folder:
            raise HubArgumentError(f"--data {entry!r}: expected BENCHMARK=DIR, e.g. identity-collapse=data/identity-collapse")
        try:
            folders[benchmark_name(name)] = Path(folder)
        except argparse.ArgumentTypeError as err:
            raise HubArgumentError(f"--data {entry!r}: {err}") from None
    return folders


def _cmd_jobs(args: argparse.Namespace) -> int:
    import json

    from idbench.names import terminal_safe

    rows, skipped = _queue(args).list_jobs()
    for problem in skipped:  # a malformed record is named, the others still listed
        print(f"idbench jobs: skipped {terminal_safe(problem)}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print(f"no requests in {args.hub}" if args.hub else "no submissions yet")
    for row in rows:
        # Names, paths and reasons are a submitter's text: escaped, so no escape sequence or bidi control acts.
        reason = f"  {terminal_safe(row['reason'])}" if row.get("reason") else ""
        if args.hub:
            print(f"{row['state']:<9} attempts {row['attempts']}  {terminal_safe(row['path'])}  {terminal_safe(row['model'])}{reason}")
        else:
            print(f"job {row['job']:>4}  {row['state']:<9} {row['benchmark']:<18} {terminal_safe(row['model'])}{reason}")
    return 0


def _cmd_alignment(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.alignment import read_prompts, read_ratings, read_scores, run_study

    prompts = args.prompts or args.ratings
    result = run_study(
        read_ratings(args.ratings), read_scores(args.results), read_prompts(prompts), args.out,
        metrics=args.metrics, n_boot=args.n_boot, seed=args.seed, overwrite=args.overwrite,
    )  # fmt: skip
    print(result.table1.to_string(index=False))
    for note in result.notes:
        print(f"note: {note}")
    print(f"tables, plot and report in {args.out}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.compare import compare, format_comparison

    result = compare(args.a, args.b, alpha=args.alpha)
    print(format_comparison(result))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
        print(f"written to {args.json}")
    return 0


def _cmd_withdraw(args: argparse.Namespace) -> int:
    print(_queue(args, results_needed=True).withdraw(args.submission, args.reason))
    return 0


def _cmd_rescore(args: argparse.Namespace) -> int:
    if args.all:
        from idbench.leaderboard.queue import rescore_all
        from idbench.leaderboard.store import Store

        if args.hub:
            raise HubArgumentError("rescore --all queues the local store's submissions again; a Hub request is requeued with --request")
        jobs = rescore_all(Store(), benchmark=args.benchmark)
        print(f"queued {len(jobs)} rescoring job(s); earlier results stay, marked not current")
        return 0
    if args.request and not args.hub:
        raise HubArgumentError("requeueing a Hub request needs --hub ORG/REQUESTS and --request PATH")
    if args.hub and not args.request:
        raise HubArgumentError("on the Hub, rescore takes --request PATH (a PARKED or FAILED request)")
    print(_queue(args).rescore(args.request or str(args.submission)))
    return 0


def _cmd_sync(args: argparse.Namespace) -> int:
    from idbench.leaderboard.hub import sync
    from idbench.leaderboard.store import Store

    operations = sync(Store(), args.requests_repo, args.results_repo, dry_run=args.dry_run, echo=lambda _: None)
    verb = "would push" if args.dry_run else "pushed"
    print(f"{verb} {len(operations)} file(s):")
    for operation in operations:
        print(f"  {operation}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from idbench.leaderboard.app import serve

    return serve(port=args.port, headless=not args.browser)


def _cmd_demo(args: argparse.Namespace) -> int:
    from idbench.demo import run_demo

    run_demo(args.out)
    return 0


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """Options of the main parser, given before the command: ``idbench -v worker --once``."""
    from idbench import __version__  # from the installed distribution's metadata

    parser.add_argument("--version", action="version", version=f"idbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show idbench's log messages (job claims and outcomes, ...) on stderr; same as --log-level INFO")
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
                        help=f"level of idbench's log messages on stderr: {', '.join(LOG_LEVELS)} (default: WARNING)")


def _configure_logging(args: argparse.Namespace) -> None:
    """Send idbench's log records at the asked level to stderr; other libraries stay at WARNING.

    Nothing changes without -v / --log-level (Python then prints warnings and errors only). The level
    goes on the ``idbench`` logger, the parent of every module's logger, so the libraries' own INFO
    chatter (http clients, datasets) stays out; basicConfig leaves a root handler that is already
    there (an application embedding main()) alone.
    """
    level = args.log_level or ("INFO" if args.verbose else None)
    if level is None:
        return
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("idbench").setLevel(level)


def _add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and sampling flags of `generate` and `run`."""
    parser.add_argument("--model", required=True, metavar="ADAPTER",
                        help="an adapter: diffusers-t2i, diffusers-image-list, diffusers-omnigen, diffusers-kontext, a name from the "
                        "idbench.generators entry points, or module:attr")
    parser.add_argument("--model-id", help="the model the adapter loads: a Hub id or a local folder")
    parser.add_argument("--revision", help="the Hub commit of --model-id (required for a Hub id; never guessed)")
    parser.add_argument("--name", help="the model name in submission.json (default: the model id, else the adapter)")
    parser.add_argument("--task", metavar="TASK", help="reference (default) or text-to-image, as the benchmark offers")
    parser.add_argument("--resolution", type=int, default=1024, help="the side of the square images, in pixels (default 1024)")
    parser.add_argument("--device", default="cpu", help="where the adapter runs (cpu, cuda, cuda:1, ...)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), help="the pipeline's dtype (default float32)")
    parser.add_argument("--steps", type=int, help="inference steps (default: the pipeline's)")
    parser.add_argument("--guidance", type=float, help="guidance scale (default: the pipeline's)")
    parser.add_argument("--batch-size", type=int, default=1, help="requests per call, for adapters that batch (default 1)")
    parser.add_argument("--reference-side", type=int, metavar="PX",
                        help="downscale references longer than PX on their longest side before the model sees them (default: as given; recorded)")
    parser.add_argument("--ignore-references", action="store_true",
                        help="let a text-only adapter run the reference task from the prompts alone (recorded)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="idbench",
        description="Benchmarks for identity preservation in reference-guided and multi-subject image generation.",
    )
    _add_global_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="the main job on the shipped samples: build the three benchmarks and read them back",
        description="Build CHARIS, CogCanvas and Identity Collapse from the shipped samples into OUT/datasets "
        "(replacing an earlier demo build), then load every config back with datasets.load_dataset.",
    )
    demo.add_argument("--out", type=Path, default=DEFAULT_DEMO_OUT, help="output folder (default: %(default)s)")
    demo.set_defaults(func=_cmd_demo)

    build = commands.add_parser(
        "build",
        help="build one benchmark dataset (parquet shards + dataset card) from a source folder",
        description="Validate a source manifest, drop exact and near-duplicate images (pHash), sample the "
        "prompts deterministically from --seed, and write parquet shards with embedded images and a "
        "README.md dataset card into --out. The output appears only when complete.",
    )
    build.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK", help="a registered benchmark (identity-collapse, charis, cogcanvas, or one installed through the idbench.benchmarks entry point)")
    build.add_argument(
        "--source",
        type=Path,
        help="a manifest CSV, or a folder holding manifest.csv or <benchmark>.csv (default: the shipped samples)",
    )
    build.add_argument("--out", type=Path, required=True, help="output folder for the dataset")
    build.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    build.add_argument(
        "--prompts",
        type=int,
        help="number of prompts (charis: default 7 per subject; cogcanvas: default 1,361 scaled by identities/100; "
        "identity-collapse is a fixed grid of 75)",
    )
    build.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    curate = build.add_argument_group(
        "curation", "model stages between the source and the sampler (see docs/curation.md); audit files go to OUT/curation/"
    )
    curate.add_argument("--curate", action="store_true", help="embedding dedup and quality filter; with a judge also the MLLM stages")
    curate.add_argument("--profile", choices=("paper", "tiny"), default="paper", help="encoders of the image stages (tiny: a plumbing check)")
    curate.add_argument("--device", default="cpu")
    curate.add_argument("--dedup-threshold", type=float, help="DINOv2 cosine at which two images are near duplicates")
    curate.add_argument("--reviewed-prompts", type=Path, help="charis: take the prompts of this reviewed export (review.csv)")
    curate.add_argument("--quality-thresholds", type=Path, metavar="JSON",
                        help="a JSON object of quality thresholds (min_side, min_blur, min_aesthetic, ...; null turns a check off); "
                        "default: the samples' own for a build of the shipped samples, else the papers' (512 px and up)")
    _add_judge_arguments(build, "the MLLM of the curation stages (metadata, prompt writing and checking); without one they are skipped, and the report says so")
    build.set_defaults(func=_cmd_build)

    publish = commands.add_parser(
        "publish",
        help="upload a built dataset folder to the Hugging Face Hub",
        description="Check the card's metadata and the shards, then create the dataset repo (if needed) and upload "
        "the card, LICENSE, build_info.json and every shard in one commit; eval.yaml (--eval-yaml) follows in a "
        "commit of its own, so a refusal of it leaves the dataset up. The token comes from `hf auth login` or "
        "HF_TOKEN, never from a flag.",
    )
    publish.add_argument("folder", type=Path, help="a folder written by `idbench build`")
    publish.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repo")
    publish.add_argument("--private", action="store_true", help="create the repo as private")
    publish.add_argument("--dry-run", action="store_true", help="list what would be uploaded; no network")
    publish.add_argument("--eval-yaml", action="store_true",
                         help="also declare the benchmark's tasks for the Hub's Eval Results (eval.yaml)")
    publish.set_defaults(func=_cmd_publish)

    template = commands.add_parser(
        "template",
        help="write an empty submission: manifest.csv of every (prompt_id, seed) and submission.json",
        description="Write the submission skeleton for a built benchmark: manifest.csv names the file expected "
        "for every required (prompt_id, seed); submission.json holds the model's metadata.",
    )
    template.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    template.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    template.add_argument("--out", type=Path, required=True, help="the submission folder to create")
    template.add_argument("--overwrite", action="store_true")
    template.add_argument("--task", metavar="TASK",
                          help="what the submission will hold: reference (default), text-to-image or retrieval, as the benchmark offers")
    template.set_defaults(func=_cmd_template)

    validate = commands.add_parser(
        "validate",
        help="check a submission (folder, parquet folder or zip) against a built benchmark",
        description="Every required (prompt_id, seed) exactly once, no unknown ids, every image decodable and "
        "within limits. All problems are listed, each with its id and file.",
    )
    validate.add_argument("submission", type=Path)
    validate.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    validate.set_defaults(func=_cmd_validate)

    generate = commands.add_parser(
        "generate",
        help="generate a submission with a model adapter: every (prompt_id, seed) of the template, resumable",
        description="Hand every (prompt_id, seed) row of the benchmark's template to a model adapter (the prompt, the "
        "reference images in a documented order with their roles, the seed, the resolution) and write each image "
        "where the manifest says, plus submission.json with the generation record. A rerun generates only the "
        "missing images. See docs/generation.md.",
    )
    generate.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    generate.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    generate.add_argument("--out", type=Path, required=True, help="the submission folder (created, or continued on a rerun)")
    _add_generation_arguments(generate)
    generate.add_argument("--limit", type=int, metavar="N", help="only the first N rows of the manifest (a trial run)")
    generate.set_defaults(func=_cmd_generate)

    run = commands.add_parser(
        "run",
        help="generate, validate and score a submission in one command (optionally queue it on the local leaderboard)",
        description="idbench generate, then validate, then score, into OUT/submission and OUT/results. Without --data "
        "the shipped sample of the benchmark is built into OUT/data (a sample build: its numbers are not the "
        "benchmark's). A rerun continues: only missing images are generated, and the scores are recomputed "
        "from the feature cache. See docs/generation.md.",
    )
    run.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    run.add_argument("--data", type=Path, help="the built benchmark folder (default: build the shipped sample into OUT/data)")
    run.add_argument("--out", type=Path, required=True, help="the run folder: OUT/submission, OUT/results")
    _add_generation_arguments(run)
    run.add_argument("--profile", choices=("paper", "tiny"), default="paper",
                     help="scoring models: paper (default) or tiny (random weights, a plumbing check)")
    run.add_argument("--metrics", help="comma-separated subset of the suite (default: all)")
    run.add_argument("--cache-dir", type=Path, help="feature cache (default: $IDBENCH_CACHE or ~/.cache/idbench/features)")
    run.add_argument("--models-dir", type=Path, help="models cache (default: $IDBENCH_MODELS or ~/.cache/idbench/models)")
    run.add_argument("--submit", action="store_true", help="then queue the submission on the local leaderboard ($IDBENCH_HOME)")
    run.add_argument("--submitter", help="who submits (with --submit)")
    _add_judge_arguments(run)
    run.set_defaults(func=_cmd_run)

    score = commands.add_parser(
        "score",
        help="validate and score a submission with the benchmark's metric suite",
        description="Writes results.parquet (raw value per prompt, seed, metric, subject), aggregates.json "
        "(means, 95%% bootstrap CIs, breakdowns) and report.md with plots. Under `accelerate launch` the "
        "unique images are split across processes.",
    )
    score.add_argument("submission", type=Path)
    score.add_argument("--data", type=Path, required=True, help="the built benchmark folder")
    score.add_argument("--out", type=Path, required=True, help="results folder")
    score.add_argument("--profile", choices=("paper", "tiny"), default="paper",
                       help="paper: the papers' models (default); tiny: random weights, a plumbing check")
    score.add_argument("--metrics", help="comma-separated subset of the suite (default: all)")
    score.add_argument("--device", default="cpu", help="torch device, e.g. cuda or cuda:1 (default: %(default)s)")
    score.add_argument("--dtype", help="bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on the CPU)")
    score.add_argument("--batch-size", type=int, default=32)
    score.add_argument("--num-workers", type=int, default=0, help="DataLoader workers that decode images")
    score.add_argument("--cache-dir", type=Path, help="feature cache (default: $IDBENCH_CACHE or ~/.cache/idbench/features)")
    score.add_argument("--models-dir", type=Path, help="models cache (default: $IDBENCH_MODELS or ~/.cache/idbench/models)")
    score.add_argument("--overwrite", action="store_true")
    score.add_argument("--hub-eval-results", type=Path, metavar="DIR",
                       help="also write DIR/.eval_results/<benchmark>.yaml for a model repo (paper profile and a "
                       "non-sample build only; refused before scoring otherwise)")
    score.add_argument("--dataset-id", help="the benchmark's Hub dataset repo, for --hub-eval-results")
    score.add_argument("--dataset-revision", metavar="SHA",
                       help="the commit of that dataset repo the data was downloaded at (recorded in each entry's dataset.revision)")
    score.add_argument("--source-url", metavar="URL",
                       help="where the result can be checked (the leaderboard, a results repo); each entry's source.url")
    score.add_argument("--source-name", help="display name of --source-url (e.g. \"idbench leaderboard\")")
    _add_judge_arguments(score)
    score.set_defaults(func=_cmd_score)

    baseline = commands.add_parser(
        "baseline",
        help="make a baseline submission without a generative model (collage, swap, impostor, clone, background, blank, "
        "noise, copy, crossed, crowd, mannequin; CogCanvas retrieval rankings: retrieval-clip, retrieval-metadata)",
    )
    # Spelled out rather than imported from evaluate_pkg.baselines, so that parsing the command line
    # imports no image stack (tests/test_cli.py checks the two lists agree).
    baseline.add_argument("name", choices=("collage", "swap", "impostor", "clone", "background", "blank", "noise", "copy",
                                           "crossed", "crowd", "mannequin", "retrieval-clip", "retrieval-metadata"))
    baseline.add_argument("benchmark", type=benchmark_name, metavar="BENCHMARK")
    baseline.add_argument("--data", type=Path, required=True)
    baseline.add_argument("--out", type=Path, required=True)
    baseline.add_argument("--size", type=int, default=512)
    baseline.add_argument("--seed", type=int, default=0)
    baseline.add_argument("--overwrite", action="store_true")
    # retrieval-clip only: the CLIP encoder of a profile, as `idbench score` loads it
    baseline.add_argument("--profile", choices=("paper", "tiny"), default="paper",
                          help="retrieval-clip: paper (CLIP ViT-L/14, default) or tiny (random weights, a plumbing check)")
    baseline.add_argument("--device", default="cpu", help="retrieval-clip: torch device (default: %(default)s)")
    baseline.add_argument("--batch-size", type=int, default=32)
    baseline.add_argument("--cache-dir", type=Path, help="retrieval-clip: feature cache (default: $IDBENCH_CACHE)")
    baseline.add_argument("--models-dir", type=Path, help="retrieval-clip: models cache (default: $IDBENCH_MODELS)")
    baseline.set_defaults(func=_cmd_baseline)

    submit = commands.add_parser(
        "submit",
        help="validate a submission and queue it on the local leaderboard ($IDBENCH_HOME, default ~/.idbench)",
        description="Validates with the scorer's validator before anything is stored, keeps the files under "
        "a content-addressed path and creates a PENDING job. The same files for the same model are "
        "recognised and not queued again.",
    )
    submit.add_argument(
        "submission", help="a manifest folder, a parquet folder, a .zip, or a Hub dataset repo as hf://datasets/OWNER/NAME[@REVISION]"
    )
    submit.add_argument("--benchmark", required=True, type=benchmark_name, metavar="BENCHMARK")
    submit.add_argument("--data", type=Path, help="built benchmark folder (default: $IDBENCH_HOME/benchmarks/<benchmark>)")
    submit.add_argument("--model-name", help="overrides the model name of submission.json")
    submit.add_argument("--submitter", help="who submits (shown on the leaderboard)")
    submit.add_argument("--family", help="overrides the model family of submission.json (the leaderboard filters by it)")
    submit.add_argument("--link", help="overrides the link of submission.json (an http(s) URL to the paper, code or weights)")
    submit.add_argument("--hub", metavar="ORG/REQUESTS", help="add it to this Hub requests repo instead of the local store (maintainers)")
    submit.set_defaults(func=_cmd_submit)

    alignment = commands.add_parser(
        "alignment",
        help="correlate metrics with human ratings (the CHARIS study's Tables 1-3)",
        description="Pearson r between each metric and the mean human rating per model, per type x style and "
        "across models, the human-human agreement, and mean scores per model, with bootstrap CIs; "
        "written as CSV, Markdown and a plot. See docs/alignment.md.",
    )
    alignment.add_argument("--ratings", type=Path, required=True, help="human_ratings.csv, or a built CHARIS folder with that config")
    alignment.add_argument("--prompts", type=Path, help="a built CHARIS folder or a prompt_id,type,style CSV (default: --ratings)")
    alignment.add_argument("--results", type=Path, nargs="+", required=True, help="results.parquet files or `idbench score` folders, one per model")
    alignment.add_argument("--out", type=Path, required=True)
    alignment.add_argument("--metrics", nargs="+", help="metrics to correlate (default: the paper's charis_score, clip_i, dino_sim where present)")
    alignment.add_argument("--n-boot", type=int, default=1000)
    alignment.add_argument("--seed", type=int, default=0)
    alignment.add_argument("--overwrite", action="store_true")
    alignment.set_defaults(func=_cmd_alignment)

    compare_parser = commands.add_parser(
        "compare",
        help="paired comparison of two scored runs (B - A per metric, with CI and Holm-corrected p-values)",
        description="B - A on the (prompt, seed) pairs both `idbench score` folders hold, per metric overall and per "
        "breakdown cell, with a percentile interval and a two-sided p-value from the benchmark's resampling design "
        "(the same draws for both runs), Holm-corrected across the metrics of each table. Refuses runs of different "
        "benchmarks, builds, suites, profiles, tasks or judges. See docs/statistics.md.",
    )
    compare_parser.add_argument("a", type=Path, metavar="RESULTS_A", help="results folder of `idbench score` (aggregates.json, results.parquet)")
    compare_parser.add_argument("b", type=Path, metavar="RESULTS_B")
    compare_parser.add_argument("--alpha", type=float, default=0.05, help="level of the verdicts, on the Holm-corrected p (default 0.05)")
    compare_parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    compare_parser.set_defaults(func=_cmd_compare)

    withdraw = commands.add_parser(
        "withdraw",
        help="take a submission off the leaderboard (an admin action); its files, jobs and results are kept",
    )
    withdraw.add_argument("submission", metavar="SUBMISSION", help="the local submission id; with --hub, the request's path or hash12")
    withdraw.add_argument("--reason", required=True, help="shown on the status page")
    withdraw.add_argument("--hub", metavar="ORG/REQUESTS", help="withdraw a request of this Hub requests repo (needs --results)")
    withdraw.add_argument("--results", metavar="ORG/RESULTS", help="the Hub results repo whose result files of it are deleted")
    withdraw.set_defaults(func=_cmd_withdraw)

    worker = commands.add_parser(
        "worker",
        help="claim queued jobs and score them (several workers may run at once)",
        description="Checks first that this machine has what the queued jobs need (the profile's models, the "
        "judge settings, the benchmark data) and, if not, exits with the reason without claiming anything. "
        "Then claims jobs atomically with a lease and scores them: FINISHED, or FAILED when the submission is "
        "at fault. A fault of the worker (model, GPU memory, the judge unreachable or failing, disk) puts the job "
        "back in the queue and stops the worker; a job with 3 such attempts is PARKED (not the submitter's fault; "
        "requeue it with `idbench rescore --submission ID`), as is a job past --job-time-limit. A job whose worker "
        "died is claimed again when its lease expires. The same loop serves the local store and, with --hub and "
        "--results, a Hub deployment's repos.",
    )
    worker.add_argument("--once", action="store_true", help="drain the queue, then exit (cron, CI)")
    worker.add_argument("--profile", choices=("paper", "tiny"), default="paper")
    worker.add_argument("--device", default="cpu")
    worker.add_argument("--batch-size", type=int, default=32)
    worker.add_argument("--lease-seconds", type=float, default=600)
    worker.add_argument("--job-time-limit", type=float, default=6 * 3600.0, metavar="SECONDS",
                        help="a job running longer is stopped and PARKED (default: 6 hours)")
    worker.add_argument("--dry-run", action="store_true", help="list what would be claimed and check this worker; change nothing")
    hub = worker.add_argument_group(
        "Hub queue", "claim requests from a Hub requests repo and push results to a Hub results repo instead of the "
        "local store (IDBENCH_HUB_STAND_IN=DIR: a local stand-in for both, for trials)",
    )
    hub.add_argument("--hub", metavar="ORG/REQUESTS", help="the requests dataset repo")
    hub.add_argument("--results", metavar="ORG/RESULTS", help="the results dataset repo")
    hub.add_argument("--data", action="append", default=[], metavar="BENCHMARK=DIR",
                     help="a built benchmark folder (repeatable; default: $IDBENCH_HOME/benchmarks/<benchmark>)")
    _add_judge_arguments(worker)
    worker.set_defaults(func=_cmd_worker)

    jobs = commands.add_parser("jobs", help="list submissions with their job states and failure reasons")
    jobs.add_argument("--json", action="store_true")
    jobs.add_argument("--hub", metavar="ORG/REQUESTS", help="list the requests of this Hub requests repo instead")
    jobs.set_defaults(func=_cmd_jobs)

    rescore = commands.add_parser(
        "rescore", help="queue every scored submission again (after a metric-suite change); old results are kept"
    )
    which = rescore.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every submission with results")
    which.add_argument("--submission", type=int, metavar="ID", help="one submission")
    which.add_argument("--request", metavar="PATH", help="with --hub: a PARKED or FAILED request (its path or hash12)")
    rescore.add_argument("--benchmark", type=benchmark_name, metavar="BENCHMARK", help="with --all: only this benchmark")
    rescore.add_argument("--hub", metavar="ORG/REQUESTS", help="with --request: the Hub requests repo")
    rescore.set_defaults(func=_cmd_rescore)

    serve_parser = commands.add_parser(
        "serve",
        help="open the Streamlit leaderboard over the local store ($IDBENCH_HOME)",
        description="One page per benchmark (ranked table, filters, CSV, plots), a model page, a submit page, "
        "the queue's status and an about page. Plumbing-check rows are hidden unless asked for.",
    )
    serve_parser.add_argument("--port", type=int, default=None,
                              help="port to listen on (default: Streamlit's own setting: STREAMLIT_SERVER_PORT, "
                              ".streamlit/config.toml, else 8501)")
    serve_parser.add_argument("--browser", action="store_true", help="also open a browser window")
    serve_parser.set_defaults(func=_cmd_serve)

    sync_parser = commands.add_parser(
        "sync",
        help="push the local leaderboard's requests and results to Hugging Face dataset repos",
        description="One commit per repo, as the Hugging Face leaderboard template does; plumbing-check "
        "results and submitters' names are never pushed. The token comes from `hf auth login` or HF_TOKEN.",
    )
    sync_parser.add_argument("--requests-repo", required=True, help="ORG/NAME dataset repo for submission records")
    sync_parser.add_argument("--results-repo", required=True, help="ORG/NAME dataset repo for results")
    sync_parser.add_argument("--dry-run", action="store_true", help="list what would be pushed; no network")
    sync_parser.set_defaults(func=_cmd_sync)

    models = commands.add_parser(
        "models", help="list the profiles' models and whether they are here, download them, or make the tiny ones",
        description="list: per role, the card, its Hub id@revision (or local) and present/missing (nothing is loaded). "
        "download: fetch what the profile lacks (Hub files into the Hugging Face cache, resumable; insightface's "
        "buffalo_l pack only with --accept-insightface-license); exit code 1 while anything is still missing. "
        "make-tiny: make the tiny random models (plumbing checks) ahead of use.",
    )  # fmt: skip
    models.add_argument("action", choices=("list", "download", "make-tiny"))
    models.add_argument("--profile", help="list: one profile (default: all); download: the profile to fetch (default: paper)")
    models.add_argument("--models-dir", type=Path, help="idbench's model folder (default: $IDBENCH_MODELS or ~/.cache/idbench/models)")
    models.add_argument("--accept-insightface-license", action="store_true",
                        help="download: you accept insightface's non-commercial research licence; fetches buffalo_l")  # fmt: skip
    models.add_argument("--dry-run", action="store_true", help="download: print what would be fetched, from where; fetch nothing")
    models.set_defaults(func=_cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return _run_command(args)
    except KeyboardInterrupt:
        # Ctrl-C is the user stopping a long run, not a bug: one line, no traceback, and the shell's
        # exit status for SIGINT (128 + 2). Results are written atomically, so nothing is half-written.
        _close_progress_bars()  # else the line lands after a half-drawn bar, on the same terminal line
        print(_interrupted_line(args), file=sys.stderr)
        return 130


def _close_progress_bars() -> None:
    """Close the progress bars still open (the interrupted stage's): the scorer's bars clear themselves."""
    tqdm = sys.modules.get("tqdm")  # none were drawn if tqdm was never imported; never import it here
    if tqdm is None:
        return
    for bar in list(getattr(tqdm.tqdm, "_instances", ())):
        bar.close()


# Commands whose work lands in the feature cache as it goes: what an interrupted run keeps.
_CACHE_KEEPING = {
    "score": "the features computed so far are kept in the feature cache{where} and a rerun resumes from there; no results were written",
    "worker": "the features computed so far are kept in the leaderboard's feature cache and a rerun resumes from there; "
              "the job's results were not written",
    "demo": "the features computed so far are kept in the leaderboard's feature cache and a rerun resumes from there",
    "generate": "every image written so far is whole and kept in {out}; the same command generates only the missing ones",
    "run": "the images written so far are kept in {out}/submission and the features in the feature cache; "
           "the same command resumes from there",
}


def _interrupted_line(args: argparse.Namespace) -> str:
    """The one line an interrupted command ends with: what it kept, and that a rerun resumes."""
    kept = _CACHE_KEEPING.get(args.command)
    if kept is None:
        return f"idbench {args.command}: interrupted"
    cache = getattr(args, "cache_dir", None)
    runner = sys.modules.get("idbench.evaluate_pkg.runner")  # imported by then when scoring began; never import it here
    if cache is None and args.command == "score" and runner is not None:
        cache = runner.default_cache_dir()
    return f"idbench {args.command}: interrupted; " + kept.format(where=f" ({cache})" if cache else "", out=getattr(args, "out", ""))


def _run_command(args: argparse.Namespace) -> int:
    _configure_logging(args)
    import datasets

    # The builder writes a handful of small tables and the scorer loads small models: their per-step
    # progress bars would drown the report (the scorer shows its own per stage).
    datasets.disable_progress_bars()
    if args.command in ("score", "demo", "run", "worker"):  # a worker's jobs say their own stages (idbench.progress)
        import transformers

        transformers.utils.logging.disable_progress_bar()
    try:
        return args.func(args)
    except IdbenchError as err:
        # Input problems are the user's to fix: the message names the culprit; no traceback.
        problems = getattr(err, "problems", None)  # a submission's problems, one line each
        if problems:
            total = getattr(err, "total", len(problems))  # a SubmissionError lists at most MAX_PROBLEMS of them
            print(f"idbench {args.command}: error: {total} problem(s), nothing was written:", file=sys.stderr)
            for line in str(err).splitlines():
                print(f"  {line}", file=sys.stderr)
        else:
            print(f"idbench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - a full disk gets one line; anything else is a bug, traceback kept
        if not storage_failure(err):  # a full or failing disk, a file SQLite cannot read or write
            raise
        path = failed_path(err)
        where = f" at {path}" if path and path not in str(err) else ""
        text = " ".join(str(err).split()) or type(err).__name__
        if disk_full(err):
            print(f"idbench {args.command}: error: disk full{where} ({text}); the command stopped there: "
                  "free space and run it again", file=sys.stderr)  # fmt: skip
        else:
            print(f"idbench {args.command}: error: a file could not be read or written{where} ({text}); the command stopped "
                  "there: check the disk and run it again", file=sys.stderr)  # fmt: skip
        return 2


if __name__ == "__main__":
    sys.exit(main())
