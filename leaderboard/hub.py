"""Optional Hugging Face Hub side of the leaderboard: Eval Results files and a requests/results sync.

Two independent things live here; nothing in this module runs unless a command asks for it.

1. **The Hub's Eval Results system** (a work-in-progress Hub feature). A benchmark dataset repo
   declares its tasks in an ``eval.yaml`` at the repo root (:func:`eval_yaml`); a model repo lists its
   scores in ``.eval_results/*.yaml`` (:func:`eval_results_entries`, :func:`write_eval_results`);
   the Hub shows those scores on the model page and aggregates them into the benchmark's leaderboard.

   Format source followed (looked up, not guessed):

   - "Evaluation Results", huggingface/hub-docs ``docs/hub/eval-results.md`` (the version with the
     "Eval.yaml specification" section, i.e. after hub-docs PR #2226 "[Eval results] Make it
     framework-agnostic"), published at https://huggingface.co/docs/hub/eval-results. ``eval.yaml``
     holds ``name``, ``description``, ``evaluation_framework`` and ``tasks[]``; each task needs an
     ``id`` (one sub-leaderboard each, "feel free to choose a leaderboard identifier for each task")
     and may give the dataset ``config`` and ``split``. Each ``.eval_results`` entry is
     ``{dataset: {id, task_id, revision?}, value, date?, source?: {url, name?, user?}, notes?}``.
   - The installed ``huggingface_hub`` (2.x), ``huggingface_hub/_eval_results.py``:
     :class:`~huggingface_hub.EvalResultEntry` and
     :func:`~huggingface_hub.eval_result_entries_to_yaml` build the entries, so our files are
     exactly what the library itself writes and parses back
     (:func:`~huggingface_hub.parse_eval_result_entries`).
   - The list of accepted ``evaluation_framework`` values: huggingface/huggingface.js
     ``packages/tasks/src/eval.ts`` (``EVALUATION_FRAMEWORKS``).

   Our assumptions (the spec leaves them open):

   - ``evaluation_framework: idbench``. ``idbench`` is **not** in huggingface.js's
     ``EVALUATION_FRAMEWORKS`` yet; the docs say the file is validated at push time and the list is
     extended on request, so a real ``eval.yaml`` push needs that entry (and the Beta allow-list).
   - Headline metrics are the benchmark's ``ranking`` metrics (``BenchmarkSpec.ranking``): one task
     per headline metric overall, plus one per headline metric and group size when the benchmark
     has a group-size breakdown (``n_subjects``, ``n_persons``). Benchmarks without one (CHARIS) get
     the overall tasks only.
   - Task ids: ``<metric>`` overall and ``<metric>-<axis>-<size>`` per group size, the metric name
     made id-safe (``scr@0.5`` becomes ``scr_at_0.5``), e.g. ``dino_sim-n_subjects-4``.
   - Each task names ``config: prompts`` and ``split: test``: the config and split a model is run on.
   - Values are raw (a cosine stays a cosine, a rate stays a fraction): display conventions such as
     x100 are for our own reports only.
   - **Lower-is-better metrics are published flipped.** The Hub format has no way to say "lower is
     better" (the ``metrics``/``lower_is_better`` proposal of hub-docs PR #2221 was closed unmerged)
     and ranks every task higher-first. So a lower-is-better headline metric (the Subject Collapse
     Rate ``scr@0.5``; every lower-is-better metric of the suites is a rate in [0, 1]) is published
     as ``1 - value`` under its own task id, ``one_minus_<metric>`` (``one_minus_scr_at_0.5``), its
     interval flipped with it (``[1 - ci_high, 1 - ci_low]``); ``eval.yaml``'s description and each
     entry's ``notes`` say so ("1 - Subject Collapse Rate, higher is better"). Tasks carry only the
     documented fields, so the explanation lives in the benchmark's description, not on the task.
   - Summaries scored with a plumbing profile (``tiny``, ``paper-random``: random weights) are refused: they must never
     be published as a model's scores. So are summaries of a sample build (the shipped samples, see
     ``build_info.json``'s ``sample_build``): their numbers are not the benchmark's.

2. **A requests/results sync** for a public deployment, the pattern of the Hugging Face leaderboard
   template (one dataset repo of request files, one of result files, the Space reading both):
   :func:`sync_plan` lists what to push, :func:`sync` pushes it in one commit per repo
   (``HfApi.create_commit`` with ``CommitOperationAdd``). Layout::

       requests repo:  <benchmark>/<model>/<hash12>.json                 model, benchmark, task, state, submitted_at
       results repo:   <benchmark>/<model>/<hash12>/aggregates.json      the current result's aggregates
                       <benchmark>/<model>/<hash12>/results.parquet      its per-sample values

   ``<hash12>`` is the start of the submission's content hash, so two submissions under one model name
   never collide and a rescore overwrites its own files (the repo's git history keeps the old ones).
   Nothing of a submitter beyond that metadata is pushed: no images, no manifest, no submitter name.
   Plumbing results are never pushed. :func:`result_record` builds ``aggregates.json`` for this sync
   and for the Hub-backed worker (``leaderboard/queue/hub.py``, which reads and writes the same
   layout), so both publish the same fields.

Authentication is huggingface_hub's own (``hf auth login`` or ``HF_TOKEN``); a token is never taken as
an argument, printed or logged. A dry run needs neither network nor token.

Example::

    eval_yaml(get_benchmark("identity-collapse"))                 # the dataset repo's eval.yaml, as a dict
    write_eval_results(summary, spec, Path("my-model"), "org/identity-collapse")
    sync(Store(), "org/idbench-requests", "org/idbench-results", dry_run=True)
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import CommitOperationAdd, HfApi, constants, get_token
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from idbench.builders.spec import DEFAULT_TASK, BenchmarkSpec
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.models.profiles import PLUMBING_PROFILES
from idbench.evaluate_pkg.results import AGGREGATES_FILE, SAMPLES_FILE
from idbench.leaderboard.judges import judge_record
from idbench.leaderboard.store import Store, iso

logger = logging.getLogger(__name__)

EVALUATION_FRAMEWORK = "idbench"
EVAL_YAML = "eval.yaml"
EVAL_RESULTS_FOLDER = ".eval_results"  # huggingface_hub.constants.EVAL_RESULTS_FOLDER (>= 1.4), spelt out so
# that importing this module never needs the Eval Results part of huggingface_hub
FLIPPED_PREFIX = "one_minus_"  # task ids of lower-is-better metrics, published as 1 - value
TASK_CONFIG = "prompts"  # the config a model is run on
TASK_SPLIT = "test"  # builders.write.SPLIT: every config is built as one "test" split
REPO_TYPE = "dataset"


class HubExportError(IdbenchError, ValueError):
    """A summary or store cannot be turned into what the Hub expects; the message says why."""


# --- eval.yaml ---------------------------------------------------------------------------------------


def task_id(metric: str, axis: str | None = None, size: int | str | None = None, *, flipped: bool = False) -> str:
    """The Hub task id of a headline metric, overall (``dino_sim``) or per group size (``dino_sim-n_subjects-4``).

    Metric names may hold ``@`` (``scr@0.5``); ids keep to letters, digits, ``_``, ``.`` and ``-``,
    the characters the documented examples use. ``flipped`` (a lower-is-better metric, published as
    ``1 - value``) prefixes ``one_minus_``: ``one_minus_scr_at_0.5``.
    """
    slug = re.sub(r"[^A-Za-z0-9_.]+", "_", metric.replace("@", "_at_"))
    if flipped:
        slug = FLIPPED_PREFIX + slug
    if axis is None:
        return slug
    return f"{slug}-{axis}-{size}"


def group_size_axis(spec: BenchmarkSpec) -> str | None:
    """The breakdown that counts subjects per prompt (``spec.group_size_axis``), or None (CHARIS has none)."""
    return spec.group_size_axis


def _declared_group_sizes(spec: BenchmarkSpec) -> tuple[int, ...]:
    """The group sizes the benchmark is built with, from its spec (the sampler uses the same constants)."""
    return tuple(int(size) for size in spec.group_sizes)


def headline_metrics(spec: BenchmarkSpec) -> tuple[str, ...]:
    """The metrics a model is ranked by (``spec.ranking``), in the benchmark's order."""
    known = {metric.name for metric in spec.metric_suite}
    missing = [m for m in spec.ranking if m not in known]
    if missing:  # a spec bug; better caught here than as a task that never gets a score
        raise HubExportError(f"{spec.name}: ranking names metrics outside the suite: {', '.join(missing)}")
    return tuple(spec.ranking)


def task_ids(spec: BenchmarkSpec, group_sizes: Iterable[int] | None = None) -> list[str]:
    """Every task id :func:`eval_yaml` declares, in its order: per metric, overall then each group size."""
    axis = group_size_axis(spec)
    sizes = tuple(group_sizes) if group_sizes is not None else _declared_group_sizes(spec)
    flipped = _flipped_metrics(spec)
    ids = []
    for metric in headline_metrics(spec):
        ids.append(task_id(metric, flipped=metric in flipped))
        if axis is not None:
            ids += [task_id(metric, axis, size, flipped=metric in flipped) for size in sizes]
    return ids


def _flipped_metrics(spec: BenchmarkSpec) -> set[str]:
    """The headline metrics published as ``1 - value``: those where lower is better."""
    return {m.name for m in spec.metric_suite if not m.higher_is_better and m.name in spec.ranking}


def _description(spec: BenchmarkSpec) -> str:
    """The benchmark's summary, plus what the flipped tasks hold (tasks have no description field)."""
    flipped = sorted(_flipped_metrics(spec))
    if not flipped:
        return spec.summary
    names = "; ".join(f"{task_id(m, flipped=True)}: {flipped_label(spec, m)}" for m in flipped)
    return f"{spec.summary} Tasks rank higher-first, so lower-is-better metrics are published as 1 minus their value ({names})."


def flipped_label(spec: BenchmarkSpec, metric: str) -> str:
    """What a flipped task holds, in words: "1 - Subject Collapse Rate (scr@0.5), higher is better"
    (a copy-floored twin is named by its metric's words: "1 - Subject Collapse Rate (scr@0.5_floored)")."""
    floored_from = {twin.name: name for name, twin in spec.floored_twins.items()}
    description = spec.metric(floored_from.get(metric, metric)).description
    name = description.split(":", 1)[0] if ":" in description else metric
    return f"1 - {name} ({metric}), higher is better"


def eval_yaml(spec: BenchmarkSpec, group_sizes: Iterable[int] | None = None) -> dict[str, Any]:
    """The benchmark dataset repo's ``eval.yaml`` as a dict (dump it with ``yaml.safe_dump(..., sort_keys=False)``).

    One task per headline metric, and one per headline metric and group size where the benchmark has
    a group-size breakdown. ``group_sizes`` overrides the sizes declared on the spec (``BenchmarkSpec.group_sizes``).
    Tasks carry only the documented fields (``id``, ``config``, ``split``): the file is validated when
    pushed, and unknown keys are a risk we do not need to take.
    """
    return {
        "name": spec.title,
        "description": _description(spec),
        "evaluation_framework": EVALUATION_FRAMEWORK,
        "tasks": [{"id": tid, "config": TASK_CONFIG, "split": TASK_SPLIT} for tid in task_ids(spec, group_sizes)],
    }


def dump_yaml(data: Any) -> str:
    """YAML text in the order we built it (deterministic; no Python-specific tags)."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def write_eval_yaml(folder: Path) -> Path | None:
    """Write ``folder/eval.yaml`` for the benchmark its ``build_info.json`` names (``idbench publish
    --eval-yaml``); None, writing nothing, when the folder names no benchmark."""
    from idbench.builders.registry import get_benchmark

    info_path = folder / "build_info.json"
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    if "benchmark" not in info:
        return None
    path = folder / EVAL_YAML
    path.write_text(dump_yaml(eval_yaml(get_benchmark(info["benchmark"]))))
    return path


# --- .eval_results -----------------------------------------------------------------------------------


def refuse_unpublishable(summary: dict[str, Any]) -> None:
    """Raise :class:`HubExportError` unless a summary may become a model's Eval Results: not a plumbing
    check, not scored on a sample build. The CLI also calls it on what it knows before scoring
    (``profile``, ``plumbing``, ``sample_build``), so a refused run is refused before the work."""
    _refuse_plumbing(summary)
    _refuse_sample_build(summary)


def refuse_unpublishable_data(data_dir: Path, profile: str) -> None:
    """:func:`refuse_unpublishable` before any scoring, on what is known then: the profile and the data
    folder's ``build_info.json`` (a sample build is refused). A folder that is not a build passes: scoring
    itself reports it, naming the file."""
    from idbench.evaluate_pkg.models.registry import profile_is_plumbing

    try:
        info = json.loads((Path(data_dir) / "build_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(info, dict):
        refuse_unpublishable(
            {
                "profile": profile,
                "plumbing": profile_is_plumbing(profile),
                "sample_build": bool(info.get("sample_build", False)),
            }
        )


def _refuse_plumbing(summary: dict[str, Any]) -> None:
    """Raise unless the summary is positively a real (non-plumbing) scoring run."""
    profile = summary.get("profile")
    if "plumbing" not in summary:
        # Fail closed: a summary that does not say what it was scored with cannot be published.
        raise HubExportError("the summary does not say whether it is a plumbing check; refusing to publish it")
    if summary["plumbing"] or profile in PLUMBING_PROFILES:
        raise HubExportError(
            f"the summary was scored with the {profile!r} profile, a plumbing check (random weights): its "
            "numbers are not a model's scores and must never be published; rescore with a real profile"
        )


def _refuse_sample_build(summary: dict[str, Any]) -> None:
    """Raise unless the summary is positively of a real build (not of the shipped samples)."""
    if "sample_build" not in summary:
        # Fail closed, as for plumbing: older summaries do not say what data they were scored on.
        raise HubExportError(
            "the summary does not say whether its benchmark data is a sample build; rescore it with this "
            "idbench (aggregates.json then records `sample_build`)"
        )
    if summary["sample_build"]:
        raise HubExportError(
            "the summary was scored on a sample build (the small samples shipped with idbench, `sample_build` in "
            "the data's build_info.json): its numbers are not scores on the benchmark and must never be published "
            "against its dataset; score on the published benchmark (`hf download --repo-type dataset ORG/NAME`)"
        )


def eval_results_entries(
    summary: dict[str, Any],
    spec: BenchmarkSpec,
    dataset_id: str,
    dataset_revision: str | None = None,
    source: dict[str, str] | None = None,
    *,
    date: str | None = None,
    group_sizes: Iterable[int] | None = None,
) -> list[dict[str, Any]]:
    """The ``.eval_results/<benchmark>.yaml`` entries of one scoring summary, as YAML-ready dicts.

    One entry per headline metric the run computed, overall and per group size, in :func:`task_ids`
    order; ``value`` is the raw mean. Metrics or cells the run did not compute are left out (a Hub
    entry needs a value). ``dataset_id`` is the benchmark dataset repo (the one holding
    :func:`eval_yaml`), ``dataset_revision`` its commit. ``source`` is ``{"url", "name"?, "user"?,
    "org"?}``: where the result comes from. ``date`` (ISO 8601) is omitted by default, so the output
    is deterministic and the Hub uses the commit time. A lower-is-better metric is published as
    ``1 - mean`` under its ``one_minus_`` task id (see the module docstring). Raises
    :class:`HubExportError` for a plumbing summary, a summary of a sample build, another benchmark's
    summary, or a bad dataset id.
    """
    # Imported here, not at module level: EvalResultEntry exists from huggingface_hub 1.4 on, and no
    # other command should need it.
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    refuse_unpublishable(summary)
    if summary.get("benchmark") != spec.name:
        raise HubExportError(f"the summary is of benchmark {summary.get('benchmark')!r}, not {spec.name!r}")
    try:
        validate_repo_id(dataset_id)
    except HFValidationError as err:
        raise HubExportError(f"invalid dataset repo id {dataset_id!r}: {err}") from None
    source = dict(source or {})
    unknown = set(source) - {"url", "name", "user", "org"}
    if unknown:
        raise HubExportError(f"source: unknown keys {sorted(unknown)}; allowed: url, name, user, org")
    if source.get("url") is not None and not re.match(r"https?://[^\s/]+", source["url"]):
        raise HubExportError(f"source url {source['url']!r} is not an http(s) URL")

    aggregates = summary.get("aggregates") or {}
    overall = aggregates.get("overall", {})
    axis = group_size_axis(spec)
    cells = aggregates.get("breakdowns", {}).get(axis, {}) if axis else {}
    declared = set(task_ids(spec, group_sizes))
    flipped = _flipped_metrics(spec)

    def entry(tid: str, stats: dict[str, Any] | None, metric: str) -> EvalResultEntry | None:
        if not stats or stats.get("mean") is None:
            return None  # not computed (or all NaN): no value to report
        if tid not in declared:
            raise HubExportError(
                f"{spec.name}: the summary has a cell ({tid!r}) that eval.yaml does not declare; "
                "was it scored against another build of the benchmark?"
            )
        published = flip_stats(stats, metric) if metric in flipped else stats
        label = flipped_label(spec, metric) if metric in flipped else None
        try:
            return EvalResultEntry(
                dataset_id=dataset_id,
                task_id=tid,
                value=float(published["mean"]),
                dataset_revision=dataset_revision,
                date=date,
                source_url=source.get("url"),
                source_name=source.get("name"),
                source_user=source.get("user"),
                source_org=source.get("org"),
                notes=_notes(summary, published, label),
            )
        except ValueError as err:  # EvalResultEntry: source name/user/org without a url
            raise HubExportError(f"source: {err}") from None

    entries: list[EvalResultEntry] = []
    for metric in headline_metrics(spec):
        is_flipped = metric in flipped
        candidates = [(task_id(metric, flipped=is_flipped), overall.get(metric))]
        # Cells are labelled by the group size as a string ("2"); sort numerically for a stable order.
        for label in sorted(
            cells, key=lambda label: (0, int(label), "") if label.isascii() and label.isdigit() else (1, 0, label)
        ):
            candidates.append((task_id(metric, axis, label, flipped=is_flipped), cells[label].get(metric)))
        entries += [e for tid, stats in candidates if (e := entry(tid, stats, metric)) is not None]
    if not entries:
        raise HubExportError(f"the summary has none of {spec.name}'s headline metrics ({', '.join(spec.ranking)})")
    return eval_result_entries_to_yaml(entries)


def flip_stats(stats: dict[str, Any], metric: str) -> dict[str, Any]:
    """The aggregate of a lower-is-better rate as ``1 - rate``: the mean flips, the interval flips and swaps.

    A rate's interval ``[low, high]`` becomes ``[1 - high, 1 - low]``; counts (``n``, ...) are kept.
    Refuses a value outside [0, 1]: ``1 - value`` would not be a rate any more.
    """
    flipped = dict(stats)
    for key in ("mean", "ci_low", "ci_high"):
        value = stats.get(key)
        if value is not None and not 0.0 <= float(value) <= 1.0:
            raise HubExportError(f"{metric}: {key} {value} is outside [0, 1]; it cannot be published as 1 - {metric}")
    flipped["mean"] = 1.0 - float(stats["mean"])
    if stats.get("ci_low") is not None and stats.get("ci_high") is not None:
        flipped["ci_low"], flipped["ci_high"] = 1.0 - float(stats["ci_high"]), 1.0 - float(stats["ci_low"])
    return flipped


def _notes(summary: dict[str, Any], stats: dict[str, Any], flipped_label: str | None) -> str:
    """How the value was obtained, in one line: what a reader needs to compare it with another."""
    parts = [flipped_label] if flipped_label else []  # first: the value is not the metric itself
    parts += [
        f"idbench {summary.get('idbench_version', '?')}",
        f"metric suite {summary.get('suite_version', '?')}",
        f"profile {summary.get('profile', '?')}",
    ]
    if stats.get("n") is not None:
        parts.append(f"n={stats['n']}")
    if stats.get("ci_low") is not None and stats.get("ci_high") is not None:
        # Say what the interval resampled (recorded by the scorer; older summaries lack it).
        ci = (summary.get("aggregates") or {}).get("ci") or {}
        how = f" ({ci['method']}, {stats['n_prompts']} prompts)" if ci and stats.get("n_prompts") else ""
        parts.append(f"95% CI [{stats['ci_low']:.4f}, {stats['ci_high']:.4f}]{how}")
    return "; ".join(parts)


def eval_results_path(out_dir: Path, spec: BenchmarkSpec) -> Path:
    """``out_dir/.eval_results/<benchmark>.yaml``: where a model repo keeps this benchmark's scores."""
    return Path(out_dir) / EVAL_RESULTS_FOLDER / f"{spec.name}.yaml"


def write_eval_results(
    summary: dict[str, Any],
    spec: BenchmarkSpec,
    out_dir: Path,
    dataset_id: str,
    dataset_revision: str | None = None,
    source: dict[str, str] | None = None,
    *,
    date: str | None = None,
    group_sizes: Iterable[int] | None = None,
) -> Path:
    """Write ``out_dir/.eval_results/<benchmark>.yaml`` for a model repo; return its path.

    The entries are :func:`eval_results_entries`' (same arguments and refusals); the file is
    deterministic for a given summary and arguments. It replaces an earlier file of the same
    benchmark: it holds the model's current scores, and the model repo's git keeps the history.
    Nothing is written when the summary is refused.
    """
    entries = eval_results_entries(
        summary, spec, dataset_id, dataset_revision, source, date=date, group_sizes=group_sizes
    )
    path = eval_results_path(out_dir, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# {spec.title} scores written by idbench; format: https://huggingface.co/docs/hub/eval-results\n"
    path.write_text(header + dump_yaml(entries), encoding="utf-8")
    return path


# --- requests / results sync -------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """One file to add to a dataset repo: bytes we build here, or a local file (the per-sample parquet)."""

    repo_id: str
    path_in_repo: str
    data: bytes | None = None
    local_path: Path | None = None

    def commit_operation(self) -> CommitOperationAdd:
        # A fresh object each time: create_commit mutates the operations it is given.
        source = self.data if self.data is not None else str(self.local_path)
        return CommitOperationAdd(path_in_repo=self.path_in_repo, path_or_fileobj=source)

    def __str__(self) -> str:
        return f"{self.repo_id}: {self.path_in_repo}"


def _slug(name: str) -> str:
    """A model name as one safe path component ("org/model" -> "org__model"): no folders, no dot-dot."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("/", "__")).strip("._")
    return slug or "model"


def json_bytes(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def request_path(benchmark: str, model: str, content_hash: str) -> str:
    """A submission's record in the requests repo: ``<benchmark>/<slug>/<hash12>.json``."""
    return f"{benchmark}/{_slug(model)}/{content_hash[:12]}.json"


def result_folder(benchmark: str, model: str, content_hash: str) -> str:
    """A submission's folder in the results repo: ``<benchmark>/<slug>/<hash12>``."""
    return f"{benchmark}/{_slug(model)}/{content_hash[:12]}"


PUBLIC_METADATA = ("family", "link")  # what a result record shows of submission.json: never the submitter


def result_record(
    scored: dict[str, Any],
    *,
    model: str,
    benchmark: str,
    benchmark_version: str,
    content_hash: str,
    scored_at: str | None,
    samples: str | None,
    task: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result's ``aggregates.json`` in the results repo, for ``idbench sync`` and ``idbench worker --hub`` alike.

    ``scored`` is a scoring summary or a store result row: its ``suite_version``, ``idbench_version``,
    ``profile``, ``models``, ``aggregates``, ``not_run``, ``judge`` (without its run statistics) and
    ``copies`` are copied. ``samples`` is the repo path
    of the per-sample parquet, or None. Of ``metadata`` only ``family`` and ``link`` are kept.
    """
    metadata = metadata or {}
    return {
        "model": model,
        "benchmark": benchmark,
        "benchmark_version": benchmark_version,
        "suite_version": scored["suite_version"],
        "idbench_version": scored["idbench_version"],
        "profile": scored["profile"],
        "models": scored.get("models") or {},
        "aggregates": scored["aggregates"],
        "not_run": scored.get("not_run") or {},
        # who judged (no run statistics) and the copy check; null when no judge ran / no check was made
        "judge": judge_record(scored.get("judge")),
        "copies": scored.get("copies") if isinstance(scored.get("copies"), dict) else None,
        "scored_at": scored_at,
        "content_hash": content_hash,
        "samples": samples,
        "task": task or DEFAULT_TASK,
        "metadata": {key: metadata.get(key) or None for key in PUBLIC_METADATA},  # blank = not given
    }


def _submissions(store: Store) -> list[dict[str, Any]]:
    """Each submission once, with the state of its latest job, oldest submission first."""
    latest: dict[int, dict[str, Any]] = {}
    for job in store.list_jobs():  # ordered by job id: a later job of a submission replaces an earlier one
        latest[job["submission_id"]] = job
    return [latest[sid] for sid in sorted(latest)]


def sync_plan(store: Store, requests_repo: str, results_repo: str) -> list[Operation]:
    """What :func:`sync` pushes: one request file per submission, two result files per current result.

    Reads the store only. Request records hold ``model``, ``benchmark``, ``task``, ``state`` (of the
    latest job), ``submitted_at`` and, to tell submissions apart, ``benchmark_version`` and
    ``content_hash``; nothing else of the submitter. Each current, non-plumbing result of every track
    (the reference-based one, text-to-image, ...) gives its
    aggregates JSON and, when the worker's folder still has it, its per-sample parquet (the JSON
    names the parquet's path in the repo, or null). Sorted by repo, then path.
    """
    for repo in (requests_repo, results_repo):
        try:
            validate_repo_id(repo)
        except HFValidationError as err:
            raise HubExportError(f"invalid dataset repo id {repo!r}: {err}") from None

    operations: list[Operation] = []
    tracks: set[tuple[str, str]] = set()  # (benchmark, task): each task ranks on a track of its own
    for job in _submissions(store):
        submission = store.submission(job["submission_id"])
        tracks.add((submission["benchmark"], submission["task"]))
        record = {
            "model": submission["model_name"],
            "benchmark": submission["benchmark"],
            "benchmark_version": submission["benchmark_version"],
            "content_hash": submission["content_hash"],
            "task": submission["task"],
            "state": job["state"],
            "submitted_at": iso(submission["created_at"]),
        }
        path = request_path(submission["benchmark"], submission["model_name"], submission["content_hash"])
        operations.append(Operation(requests_repo, path, data=json_bytes(record)))

    for benchmark, task in sorted(tracks):
        for row in store.current_results(benchmark, task).to_dict("records"):
            if row["plumbing"]:
                continue  # random-weight numbers are never published
            folder = result_folder(benchmark, row["model_name"], row["content_hash"])
            samples = Path(row["results_path"]) / SAMPLES_FILE
            samples_in_repo = f"{folder}/{SAMPLES_FILE}" if samples.is_file() else None
            if samples_in_repo is None:
                logger.warning("result %s: %s is missing; pushing its aggregates only", row["id"], samples)
            record = result_record(
                row,
                model=row["model_name"],
                benchmark=benchmark,
                benchmark_version=row["benchmark_version"],
                content_hash=row["content_hash"],
                scored_at=iso(row["created_at"]),
                samples=samples_in_repo,
                task=row["task"],
                metadata=row["metadata"],
            )
            operations.append(Operation(results_repo, f"{folder}/{AGGREGATES_FILE}", data=json_bytes(record)))
            if samples_in_repo is not None:
                operations.append(Operation(results_repo, samples_in_repo, local_path=samples))
    return sorted(operations, key=lambda op: (op.repo_id, op.path_in_repo))


def sync(
    store: Store,
    requests_repo: str,
    results_repo: str,
    *,
    dry_run: bool = False,
    api: HfApi | None = None,
    echo: Callable[[str], None] = print,
) -> list[Operation]:
    """Push :func:`sync_plan` to the two dataset repos, one ``create_commit`` per repo; return the plan.

    ``dry_run`` prints each planned ``repo: path`` through ``echo`` and returns: no network, no token.
    Otherwise each repo is created if missing (``exist_ok``) and receives its files in one commit;
    a repo with nothing to push gets no commit. ``api`` is for tests and for callers with their own
    client; by default a plain :class:`HfApi` reads the user's login. Raises :class:`HubExportError`
    when there is no token (only its presence is checked: it is never read into a message).
    """
    operations = sync_plan(store, requests_repo, results_repo)
    if dry_run:
        for operation in operations:
            echo(str(operation))
        return operations

    if api is None:
        if constants.HF_HUB_OFFLINE:
            raise HubExportError("huggingface_hub is in offline mode (HF_HUB_OFFLINE is set); unset it to sync")
        api = HfApi()
    if not getattr(api, "token", None) and not get_token():
        raise HubExportError(
            "no Hugging Face token found: run `hf auth login` (or set HF_TOKEN) and try again; "
            "`--dry-run` shows what would be pushed without one"
        )

    by_repo: dict[str, list[Operation]] = {}
    for operation in operations:
        by_repo.setdefault(operation.repo_id, []).append(operation)
    for repo_id, repo_operations in by_repo.items():
        api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
        api.create_commit(
            repo_id=repo_id,
            repo_type=REPO_TYPE,
            operations=[op.commit_operation() for op in repo_operations],
            commit_message=f"idbench sync: {len(repo_operations)} file(s)",
        )
    return operations
