"""``idbench score``: validate and score a submission (optionally also its Hub Eval Results file)."""

from __future__ import annotations

import argparse
from pathlib import Path

from idbench.cli._options import (
    ScoringErrorForCli,
    add_judge_arguments,
    add_profile_argument,
    judge_config,
    metric_names,
)


def add_score(commands) -> None:
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
    add_profile_argument(
        score,
        "paper: the papers' models (default); tiny: random weights, a plumbing check; paper-random: the papers' "
        "architectures at their real sizes with random weights, a plumbing check for timing",
    )
    score.add_argument("--metrics", help="comma-separated subset of the suite (default: all)")
    score.add_argument("--device", default="cpu", help="torch device, e.g. cuda or cuda:1 (default: %(default)s)")
    score.add_argument("--dtype", help="bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on the CPU)")
    score.add_argument("--batch-size", type=int, default=32)
    score.add_argument("--num-workers", type=int, default=0, help="DataLoader workers that decode images")
    score.add_argument(
        "--cache-dir", type=Path, help="feature cache (default: $IDBENCH_CACHE/features, ~/.cache/idbench/features)"
    )
    score.add_argument(
        "--models-dir", type=Path, help="models cache (default: $IDBENCH_MODELS or ~/.cache/idbench/models)"
    )
    score.add_argument("--overwrite", action="store_true")
    score.add_argument(
        "--hub-eval-results",
        type=Path,
        metavar="DIR",
        help="also write DIR/.eval_results/<benchmark>.yaml for a model repo (paper profile and a "
        "non-sample build only; refused before scoring otherwise)",
    )
    score.add_argument("--dataset-id", help="the benchmark's Hub dataset repo, for --hub-eval-results")
    score.add_argument(
        "--dataset-revision",
        metavar="SHA",
        help="the commit of that dataset repo the data was downloaded at (recorded in each entry's dataset.revision)",
    )
    score.add_argument(
        "--source-url",
        metavar="URL",
        help="where the result can be checked (the leaderboard, a results repo); each entry's source.url",
    )
    score.add_argument("--source-name", help='display name of --source-url (e.g. "idbench leaderboard")')
    score.add_argument(
        "--shard",
        metavar="K/N",
        help="score only shard K (from 0) of N and write what the merge needs into OUT/shards (K-of-N/, its features and "
        "judge answers, and the record K-of-N.json; --cache-dir may be each node's own); `idbench merge OUT` then writes "
        "the results (default: from SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT, or JOB_COMPLETION_INDEX with "
        "IDBENCH_SHARD_COUNT; docs/cluster.md)",
    )
    add_judge_arguments(score)
    score.set_defaults(func=cmd_score)


def add_merge(commands) -> None:
    merge = commands.add_parser(
        "merge",
        help="the results of a scoring run done in shards (score --shard K/N): checked complete, then written",
        description="Reads OUT/shards (each shard's record K-of-N.json and folder K-of-N/), refuses an incomplete, mixed "
        "or altered set of shards in one line, then scores the whole submission from the features and judge answers "
        "in the shards' folders (no cache is read, nothing is computed again), writing the results.parquet, "
        "aggregates.json and report.md a single process would. Idempotent. See docs/cluster.md.",
    )
    merge.add_argument("out", type=Path, metavar="OUT", help="the --out of the shards")
    merge.add_argument("--device", default="cpu", help="where the models are loaded (nothing heavy runs; default: cpu)")
    merge.add_argument("--num-workers", type=int, default=0, help="DataLoader workers that decode images")
    merge.set_defaults(func=cmd_merge)


def cmd_merge(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.merge import merge
    from idbench.evaluate_pkg.report import format_summary

    summary = merge(args.out, device=args.device, num_workers=args.num_workers)
    features = summary["features"]
    print(format_summary(summary))
    print(
        f"merged the shards in {args.out / 'shards'}: {sum(features['cached'].values())} features read from the shards' "
        f"folders, {sum(features['computed'].values())} computed here; results in {args.out} (results.parquet, aggregates.json, report.md)"
    )
    _print_judge_line(summary)
    return 0


def _print_judge_line(summary: dict) -> None:
    """How many of the judge's answers came from its answer cache, how many were asked, and how many cache
    entries were refused (judge/cache.py: edited, planted, unsigned, signed with another key, linked)."""
    judge = summary.get("judge") or {}
    stats = judge.get("stats") or {}
    if not stats:
        return
    refused = int(stats.get("cache_refused") or 0)
    print(
        f"judge {judge.get('model', '?')}: {stats.get('cache_hits', 0)} of {stats.get('answers', 0)} answers read from "
        f"the answer cache, {stats.get('requests_sent', 0)} requests sent here; {refused} cache entries refused"
        + (" (not signed with this run's key, linked or damaged: asked again; docs/judge.md)" if refused else "")
    )


def cmd_score(args: argparse.Namespace) -> int:
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.runner import accelerator_if_launched, score_submission
    from idbench.shards import resolve_shard

    shard = resolve_shard(args.shard)  # a bad --shard or scheduler variable: one line, before any work
    if shard is not None and args.hub_eval_results:
        raise ScoringErrorForCli("--hub-eval-results with --shard: a shard has no results (pass it to the merge's run)")
    eval_results_source = _check_hub_eval_results(args) if args.hub_eval_results else None
    accelerator = accelerator_if_launched(args.device)
    options = ScoreOptions(
        profile=args.profile,
        metrics=_metrics(args.metrics),
        device=str(accelerator.device) if accelerator is not None else args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        models_dir=str(args.models_dir) if args.models_dir else None,
        judge=judge_config(args),
    )
    if shard is not None:
        return _score_shard(args, options, accelerator, shard)
    summary = score_submission(
        args.submission,
        args.data,
        args.out,
        options,
        cache_dir=args.cache_dir,
        overwrite=args.overwrite,
        accelerator=accelerator,
    )
    if accelerator is None or accelerator.is_main_process:
        _report(args, summary, eval_results_source)
    if accelerator is not None:
        # Leave the process group together and cleanly: a collective thread still alive at
        # interpreter exit makes torch abort the process (seen with gloo).
        accelerator.wait_for_everyone()
        accelerator.end_training()
    return 0


def _score_shard(args: argparse.Namespace, options, accelerator, shard) -> int:
    """One shard: its images into the caches, then its record (evaluate_pkg/merge.py)."""
    from idbench.evaluate_pkg.merge import score_shard
    from idbench.evaluate_pkg.runner import default_cache_dir

    summary, path = score_shard(
        args.submission,
        args.data,
        args.out,
        options,
        shard,
        cache_dir=args.cache_dir,
        overwrite=args.overwrite,
        accelerator=accelerator,
    )
    if path is None:  # another process of this shard's accelerate launch writes the record
        return 0
    cache_dir = args.cache_dir or default_cache_dir()
    folder = summary["folder"]
    print(
        f"shard {shard} (from {shard.source}): {summary['images']} images of {args.submission} scored with the feature "
        f"cache {cache_dir} ({sum(summary['features']['computed'].values())} features computed); what the merge reads "
        f"({folder['files']} files, {folder['bytes'] / 1e6:.1f} MB) in {path.with_suffix('')}, recorded in {path}"
    )
    _print_judge_line(summary)
    print(f"when all {shard.count} shards have finished: idbench merge {args.out}")
    return 0


def _metrics(text: str | None) -> tuple[str, ...] | None:
    names = metric_names(text)
    return tuple(names) if names is not None else None


def _report(args: argparse.Namespace, summary: dict, eval_results_source: dict | None) -> None:
    from idbench.evaluate_pkg.report import format_summary

    if args.hub_eval_results:
        from idbench.builders.registry import get_benchmark
        from idbench.leaderboard.hub import write_eval_results

        path = write_eval_results(
            summary,
            get_benchmark(summary["benchmark"]),
            args.hub_eval_results,
            args.dataset_id,
            dataset_revision=args.dataset_revision,
            source=eval_results_source,
        )
        print(f"wrote {path} (commit it to the model's Hub repo)")
    print(format_summary(summary))
    _print_judge_line(summary)
    print(f"results in {args.out} (results.parquet, aggregates.json, report.md)")


def _check_hub_eval_results(args: argparse.Namespace) -> dict[str, str] | None:
    """Refuse, before any scoring, a --hub-eval-results run whose results could not be published; return
    the entries' source ({"url", "name"?}) or None.

    Refused here: no --dataset-id and --source-name without --source-url; by the library, a plumbing
    profile (tiny, paper-random) and data that is a sample build (the shipped samples, not the benchmark).
    """
    from idbench.leaderboard.hub import refuse_unpublishable_data

    if not args.dataset_id:
        raise ScoringErrorForCli("--hub-eval-results needs --dataset-id ORG/NAME (the benchmark's Hub repo)")
    if args.source_name and not args.source_url:
        raise ScoringErrorForCli("--source-name needs --source-url (the Hub shows the name as the link's text)")
    refuse_unpublishable_data(args.data, args.profile)
    if not args.source_url:
        return None
    return {"url": args.source_url, **({"name": args.source_name} if args.source_name else {})}
