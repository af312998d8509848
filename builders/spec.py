"""The shape of a benchmark description.

Every benchmark is described once, in ``builders/benchmarks/<name>.py`` (or in a third-party package,
registered through the ``idbench.benchmarks`` entry point), by a :class:`BenchmarkSpec`. Builders, the
scorer and the leaderboard all read that object instead of repeating what it says: which configs exist
and their ``datasets.Features``, which columns of the source manifest the builder accepts, which prompt
columns results are broken down by, which metrics make up the suite, the models each needs and how it
is displayed, which table holds the references, the group sizes, the card template, the page order.

Code of higher layers (the scoring suite, the baseline layout) and the build recipe are named by
``"module:attr"`` strings and imported only when used (:func:`resolve`, entry-point style), so this
layer never imports the scorer or the leaderboard and a benchmark stays described in one place.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass, field
from typing import Any

import datasets

from idbench.builders.display import DISPLAYS
from idbench.builders.display import label as display_label
from idbench.errors import IdbenchError

# The role a judged metric lists in ``MetricSpec.roles``: not an encoder of the model registry but
# the vision-language judge.
JUDGE_ROLE = "judge"

# What a submission can hold, declared as ``"task"`` in its submission.json:
# - "reference": images generated from the prompts *and* their reference images (the primary task of
#   every benchmark, and the default);
# - "text-to-image": images generated from the prompts alone (CogCanvas's auxiliary T2I task);
# - "retrieval": no images, a ranking of each slot's candidate references (CogCanvas's retrieval task).
TASKS = ("reference", "text-to-image", "retrieval")
DEFAULT_TASK = "reference"


class SpecError(IdbenchError, ValueError):
    """A benchmark description that contradicts itself or names code that does not exist (a user's own
    benchmark registered through the entry point can be wrong, so this is reported like bad input)."""


def resolve(reference: str, where: str = "") -> Any:
    """The object a ``"package.module:attr"`` (or ``"package.module"``) string names, imported now.

    The error names the spec field (``where``) so that a typo in a third-party spec is found at once.
    """
    module_name, _, attr = reference.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise SpecError(f"{where or 'spec'}: cannot load {reference!r} ({err})") from None
    return obj


def version_key(version: object) -> tuple[int, ...]:
    """A suite version ("0.4") as numbers, for ordering; () for one that is not dotted digits (unknown).

    >>> version_key("0.10") > version_key("0.9")
    True
    """
    parts = str(version or "").strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


@dataclass(frozen=True)
class ConfigSpec:
    """One Hugging Face config of a benchmark dataset (one table, one ``test`` split)."""

    name: str
    features: datasets.Features
    description: str
    primary_key: tuple[str, ...]
    # Optional configs are built only when the source folder provides their data.
    optional: bool = False

    @property
    def image_columns(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.features.items() if isinstance(v, datasets.Image))


@dataclass(frozen=True)
class SourceColumn:
    """One column of a source manifest (a CSV file; one row per reference image)."""

    name: str
    description: str
    required: bool = True  # an empty value is an error
    choices: tuple[str, ...] | None = None  # allowed values, when the column is categorical
    is_list: bool = False  # a ';'-separated list in the CSV
    pattern: str | None = None  # a regular expression the value must match in full


@dataclass(frozen=True)
class DistinctNames:
    """Which names of a source a prompt can hold together, and so must tell apart.

    Two subjects conflict when their ``column`` values read the same (case, spacing and a leading
    article ignored: "The dog", "the  dog" and "dog" are one name to a reader) and a prompt can name
    both. Rows with the same ``entity_column`` value are one subject shown in several images, so they
    may repeat their name; None: every row is a subject of its own. Kinds listed in ``alone_kinds``
    (values of ``kind_column``) appear at most once per prompt, so two subjects of one such kind never
    meet and may share a name; they still may not share one with any other kind's subject.
    """

    column: str = "name"
    entity_column: str | None = None
    kind_column: str | None = None
    alone_kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricSpec:
    """A metric of the suite: what the scorer computes and how the leaderboard shows it.

    Raw values are always stored (a cosine stays a cosine); ``display`` says how to present them (a
    name of :data:`idbench.builders.display.DISPLAYS`: "raw", "x100", "percent", "x10", "clipscore"),
    ``display_source`` which paper table that presentation reproduces (evidence in
    docs/display-conventions.md), empty when the paper's convention could not be identified: the
    label then says the scale is ours.
    """

    name: str
    description: str
    higher_is_better: bool = True
    display: str = "raw"
    # The model roles it needs (profile roles of the model registry such as "clip", "dinov2",
    # "detector"; JUDGE_ROLE for the vision-language judge). The scorer loads exactly these.
    roles: tuple[str, ...] = ()
    # The submission tasks (TASKS) it scores: a submission of another task reports it not run. A
    # leaderboard row is complete when every metric of its task ran; each task ranks on its own track.
    tasks: tuple[str, ...] = (DEFAULT_TASK,)
    display_source: str = ""
    # The per-image diagnostic that counts what this metric could not judge for lack of evidence (a
    # reference without a face, a subject with no core feature in view): those samples are NaN, and
    # the count is shown beside the metric (report.md, leaderboard). Empty: none.
    missing_evidence: str = ""
    # The per-prompt diagnostic that holds what a random guess scores on this metric in expectation
    # (a retrieval metric's random ranker): shown beside the value (report.md, leaderboard), since a
    # score means little without its chance level. Empty: none.
    chance: str = ""
    # A judged metric that leaves out what it could not judge (a judge failure, a subject not shown)
    # can be won by hiding the subject or making the judge fail. Its intent-to-treat twin (those cases
    # scored as the worst outcome) is named here: the leaderboard shows the twin beside it and never
    # ranks on this one (spec.ranking may not name it). Empty: the metric is ranked as it is.
    itt_twin: str = ""
    # The suite version (BenchmarkSpec.suite_version) from which this name has its present definition:
    # a result of an older suite holds another quantity under the name (a judge failure left out where
    # it now scores 0), so the leaderboard reads it as not computed there (the row is an incomplete
    # suite) rather than show or rank it as this metric. Empty: the name has never changed meaning.
    defined_in: str = ""
    # A copy of the reference earns nothing (docs/copies.md): a ranked metric names here its
    # copy-floored twin, the same per-sample values except that every image the copy check flagged
    # (``copy.flag``) scores the twin's ``floor``. The leaderboard ranks on the twin, never on this one
    # (spec.ranking may not name it), and shows this one, unchanged, beside it. Empty: no twin.
    floored_twin: str = ""
    # On a copy-floored twin (made by :func:`copy_floored`): what a flagged image scores, the metric's
    # worst possible value, the bound of its range (the lower one when higher is better): -1 for a raw
    # cosine, which can be negative; 0 for a share or a score clamped at 0; 1 for a lower-is-better
    # share. Only the bound guarantees that a copy never raises the column, whatever the run's other
    # images score. None: not a twin.
    floor: float | None = None

    def __post_init__(self) -> None:
        if self.display not in DISPLAYS:
            raise ValueError(f"metric {self.name}: display {self.display!r} is not one of {', '.join(DISPLAYS)}")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            raise ValueError(f"metric {self.name}: tasks {self.tasks!r} must be some of {', '.join(TASKS)}")
        if self.floor is not None and not math.isfinite(self.floor):
            raise ValueError(f"metric {self.name}: floor {self.floor!r} is not a finite number")

    @property
    def display_label(self) -> str:
        """How the displayed value is made and where that convention comes from (or that it is ours)."""
        return display_label(self.display, self.display_source)

    @property
    def judged(self) -> bool:
        """Needs a vision-language judge rather than (only) encoders."""
        return JUDGE_ROLE in self.roles

    @property
    def rankable(self) -> bool:
        """Whether a leaderboard may rank on it: not a metric shown beside its intent-to-treat twin or
        its copy-floored twin."""
        return not self.itt_twin and not self.floored_twin


# The suffix of a copy-floored twin's name: ``dino_sim_floored`` is ``dino_sim`` with every flagged image
# scored -1. A new name, so that every existing name keeps its meaning (the paper's values stay under it).
FLOORED_SUFFIX = "_floored"


def copy_floored(metric: MetricSpec, floor: float) -> tuple[MetricSpec, MetricSpec]:
    """``metric`` pointing at its copy-floored twin, and that twin (the pair, in suite order).

    The twin is ``metric`` in everything it is shown and ranked by (direction, display and its source,
    roles, tasks, missing evidence) except its name and its ``floor``, the value the scorer gives it on
    an image the copy check flagged (:mod:`idbench.evaluate_pkg.floors`). ``floor`` is the metric's
    worst possible value (:attr:`MetricSpec.floor` says which).
    """
    name = metric.name + FLOORED_SUFFIX
    twin = MetricSpec(
        name,
        f"not in the paper, ranked: {metric.name} with every image the copy check flagged (copy.flag) scored "
        f"{floor:g}, its worst possible value, so a copied or pasted reference earns nothing",
        higher_is_better=metric.higher_is_better,
        display=metric.display,
        roles=metric.roles,
        tasks=metric.tasks,
        display_source=metric.display_source,
        missing_evidence=metric.missing_evidence,
        floor=float(floor),
    )
    return dataclasses.replace(metric, floored_twin=name), twin


# Which per-sample rows a :class:`SubjectBreakdown` groups, by results.parquet's ``subject`` column:
# "image" the whole-image rows (subject ""), "slot" a subject's own rows (subject "A", the slot of a
# record in ``BenchmarkSpec.slot_records``), "item" the rows of the item bound to a slot ("A.item").
SUBJECT_LEVELS = ("image", "slot", "item")
ITEM_SUFFIX = ".item"
# The cell of a subject whose metadata is empty (an unannotated reference): counted, never dropped.
UNKNOWN_CELL = "unknown"


@dataclass(frozen=True)
class SubjectBreakdown:
    """A breakdown of results by what the references (or the prompt's own records) say about the
    subjects the rows score, rather than by a prompt column: gender of the persons, size of the items,
    scene type of the background.

    ``levels`` say which per-sample rows it groups (:data:`SUBJECT_LEVELS`); each row's cell is
    ``field`` of its record: the slot's record (levels "slot" and "item") or the prompt (level
    "image"). With ``via``, that record's ``via`` holds a reference id instead, and ``field`` is read
    from the reference table (``BenchmarkSpec.reference_config``). A per-person metric thus falls in
    the cell of its person's annotated gender; an empty value falls in :data:`UNKNOWN_CELL`.
    """

    name: str
    levels: tuple[str, ...]
    field: str
    via: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        unknown = [level for level in self.levels if level not in SUBJECT_LEVELS]
        if unknown or not self.levels:
            raise ValueError(
                f"subject breakdown {self.name}: levels {self.levels!r} must be some of {', '.join(SUBJECT_LEVELS)}"
            )


@dataclass(frozen=True)
class UnitFactor:
    """A unit that prompts share and reuse (a subject, an identity, an item, a background): the prompt
    column that names a prompt's level(s) of it. ``column`` holds one id, a list of ids, or (with
    ``key``) a list of records whose ``key`` is the id; an empty id is no level."""

    name: str  # e.g. "subject"; "prompt" is reserved for the prompt itself
    column: str
    key: str | None = None
    description: str = ""

    def levels(self, prompt: dict[str, Any]) -> list[str]:
        """The ids of this unit a prompt row names (distinct, in order)."""
        value = prompt.get(self.column)
        items = [] if value is None else [value] if isinstance(value, str) else list(value)
        ids = [item.get(self.key) if self.key is not None and isinstance(item, dict) else item for item in items]
        return list(dict.fromkeys(str(i) for i in ids if i is not None and str(i).strip()))


@dataclass(frozen=True)
class Resampling:
    """What the intervals of a benchmark resample (docs/statistics.md).

    No ``factors``: prompts are the independent units (each with all its seeds). With factors and
    ``prompts_nested``: the prompts are nested in their factor's levels (CHARIS: ~7 prompts per
    subject), and the top level is resampled with all its prompts (two-stage bootstrap, top level
    only). Otherwise the factors are crossed with the prompts: a multi-way bootstrap that gives every
    level of every factor and every prompt its own draw (Identity Collapse, CogCanvas).
    """

    factors: tuple[UnitFactor, ...] = ()
    prompts_nested: bool = False

    def __post_init__(self) -> None:
        names = [f.name for f in self.factors]
        if len(set(names)) != len(names) or "prompt" in names:
            raise ValueError(f"resampling factors {names!r}: names must be unique and not 'prompt'")
        if self.prompts_nested and len(self.factors) != 1:
            raise ValueError("resampling: prompts nest in exactly one factor")

    @property
    def factor_names(self) -> tuple[str, ...]:
        """The design's factors as the bootstrap reads them (``"prompt"`` is each prompt itself)."""
        names = tuple(f.name for f in self.factors)
        return names if self.prompts_nested else ("prompt", *names)

    @property
    def method(self) -> str:
        """The interval's name, as aggregates.json records it under ``ci_method``."""
        plural = lambda name: name[:-1] + "ies" if name.endswith("y") else name + "s"  # noqa: E731
        if not self.factors:
            return "percentile bootstrap over prompts"
        if self.prompts_nested:
            return f"percentile bootstrap, {plural(self.factors[0].name)} (prompts nested)"
        return (
            "percentile multi-way bootstrap, prompts x "
            + " x ".join(plural(f.name) for f in self.factors)
            + " (crossed)"
        )

    def units(self, prompts: Any) -> dict[str, dict[str, list[str]]]:
        """prompt id -> factor name -> the ids it names, for prompt rows (dicts with ``prompt_id``)."""
        return {row["prompt_id"]: {f.name: f.levels(row) for f in self.factors} for row in prompts}


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str  # the dataset / CLI name, e.g. "identity-collapse"
    title: str
    summary: str
    paper: str  # title of the paper that defines it
    citation: str  # BibTeX
    configs: dict[str, ConfigSpec]
    source_columns: tuple[SourceColumn, ...]
    breakdowns: tuple[tuple[str, ...], ...]  # prompt columns (or column tuples) results group by
    metric_suite: tuple[MetricSpec, ...]
    seeds: tuple[int, ...]  # seeds per prompt a submission must contain
    # metrics that rank models by default, best first; the first one a run computed is used
    ranking: tuple[str, ...] = ()
    task_categories: tuple[str, ...] = ("text-to-image",)
    tags: tuple[str, ...] = field(default=("identity-preservation", "subject-driven-generation", "benchmark"))
    limitations: tuple[str, ...] = ()
    # (what, url) pairs the paper's own text gives beyond its title (where its data and code were released).
    links: tuple[tuple[str, str], ...] = ()

    # --- where the rest of the system finds this benchmark ----------------------------------------
    # The build recipe, "module:attr" of a function (source, seed, n_prompts, max_distance, curator)
    # -> (Recipe, dropped duplicates); see idbench.builders.recipe.
    recipe: str = ""
    # A manifest column whose values must be unique (the reference id), or None.
    unique_source_column: str | None = None
    # Names that prompts put side by side must differ (checked on the source and on the rows the
    # sampler gets); None: a prompt names one subject, so names may repeat.
    distinct_names: DistinctNames | None = None
    # The config that holds the reference images, and its id column (what prompts refer to).
    reference_config: str = ""
    reference_id: str = ""
    # The scoring suite, "module" or "module:attr" of an object with NOT_RUN and score(ctx, metrics).
    suite: str = ""
    # The baseline layout, "module:attr" of an idbench.evaluate_pkg.baselines.Layout; None: no baselines.
    baselines: str | None = None
    # The judge's control questions, "module:attr" of an object with checks(metrics) and
    # outcomes(data, judge, checks, k) (idbench.evaluate_pkg.judge.controls.BenchmarkControls); "": none.
    controls: str = ""
    # The scorer of ranking submissions (a "retrieval" task), "module" or "module:attr" of an object with
    # score_rankings(data, rankings, metrics) and slot_count_note(data); "": the benchmark has no such task.
    rankings: str = ""
    # The breakdown column that counts subjects per prompt and the sizes the benchmark is built with
    # (eval.yaml tasks, "metric vs N" plots); None when prompts have one subject.
    group_size_axis: str | None = None
    group_sizes: tuple[int, ...] = ()
    # The group size the leaderboard ranks within by default (a value of group_sizes); None: it ranks
    # by the pooled mean over every prompt, which weighs each group size by its share of the prompts.
    default_group_size: int | None = None
    # The prompt column that lists a prompt's subjects, one record per slot, and the record's key that
    # per-subject result rows name ("A"; "A.item" for the slot's item): what SubjectBreakdowns read.
    slot_records: str | None = None
    slot_key: str = "slot"
    # Breakdowns by the subjects' metadata (aggregates["subject_breakdowns"]); see SubjectBreakdown.
    subject_breakdowns: tuple[SubjectBreakdown, ...] = ()
    # The dataset card's Jinja2 template: "package:file" (each built-in benchmark ships its own beside its
    # code, "idbench.benchmarks.charis:charis.md.j2"), or a file of idbench.cards; None: the shared card.md.j2.
    card_template: str | None = None
    # The version of the scoring suite, stored with every result (a change makes old results stale).
    suite_version: str = "0.1"
    # Where the leaderboard lists the benchmark (lower first; ties by name).
    page_order: int = 100
    # The units the intervals resample (prompts alone by default); see Resampling.
    resampling: Resampling = field(default_factory=Resampling)

    def __post_init__(self) -> None:
        where = f"benchmark {self.name}"
        # Fields a spec leaves empty are checked where they are needed (a card-only spec needs none).
        if self.reference_config and self.reference_config not in self.configs:
            raise SpecError(
                f"{where}: reference_config {self.reference_config!r} is not one of its configs ({', '.join(self.configs)})"
            )
        if self.reference_config and self.reference_id not in self.configs[self.reference_config].features:
            raise SpecError(f"{where}: reference_id {self.reference_id!r} is not a column of {self.reference_config}")
        if self.distinct_names is not None:
            rule, declared = self.distinct_names, {c.name for c in self.source_columns}
            for column in (rule.column, rule.entity_column, rule.kind_column):
                if column is not None and column not in declared:
                    raise SpecError(f"{where}: distinct_names names {column!r}, which is not one of its source_columns")
            if rule.alone_kinds and rule.kind_column is None:
                raise SpecError(f"{where}: distinct_names lists alone_kinds but no kind_column")
        names = [m.name for m in self.metric_suite]
        if len(set(names)) != len(names):
            raise SpecError(f"{where}: a metric is listed twice in its metric_suite")
        for m in self.metric_suite:
            if m.itt_twin and m.itt_twin not in names:
                raise SpecError(f"{where}: metric {m.name}'s itt_twin {m.itt_twin!r} is not in its metric_suite")
        self._check_floored_twins(where)
        later = [
            m.name
            for m in self.metric_suite
            if m.defined_in and version_key(m.defined_in) > version_key(self.suite_version)
        ]
        if later:
            raise SpecError(
                f"{where}: {', '.join(later)} defined_in a suite version after its suite_version {self.suite_version}"
            )
        unrankable = sorted(set(self.ranking) & {m.name for m in self.metric_suite if not m.rankable})
        if unrankable:
            raise SpecError(
                f"{where}: ranking names {', '.join(unrankable)}, shown only beside an intent-to-treat or copy-floored twin"
            )
        if self.group_size_axis is not None and (self.group_size_axis,) not in self.breakdowns:
            raise SpecError(f"{where}: group_size_axis {self.group_size_axis!r} is not a one-column breakdown")
        if bool(self.group_size_axis) != bool(self.group_sizes):
            raise SpecError(f"{where}: group_size_axis and group_sizes go together")
        if self.default_group_size is not None and self.default_group_size not in self.group_sizes:
            raise SpecError(
                f"{where}: default_group_size {self.default_group_size} is not one of its group_sizes {self.group_sizes}"
            )
        self._check_subject_breakdowns(where)
        prompts = self.configs.get("prompts")
        for factor in self.resampling.factors:
            if prompts is None or factor.column not in prompts.features:
                raise SpecError(
                    f"{where}: resampling factor {factor.name} reads {factor.column!r}, which is not a prompts column"
                )

    def _check_floored_twins(self, where: str) -> None:
        """Every ``floored_twin`` names a twin of the suite with a floor, shown and ranked like its metric,
        and every metric with a floor is the twin of exactly one metric."""
        by_name = {m.name: m for m in self.metric_suite}
        named = [m.floored_twin for m in self.metric_suite if m.floored_twin]
        for m in self.metric_suite:
            twin = by_name.get(m.floored_twin) if m.floored_twin else None
            if m.floored_twin and (twin is None or twin.floor is None):
                raise SpecError(
                    f"{where}: metric {m.name}'s floored_twin {m.floored_twin!r} is not a twin with a floor in its metric_suite"
                )
            if twin is not None and (twin.higher_is_better, twin.tasks, twin.display) != (
                m.higher_is_better,
                m.tasks,
                m.display,
            ):
                raise SpecError(
                    f"{where}: {twin.name} is not ranked and shown like {m.name}, whose copy-floored twin it is"
                )
            if m.floor is not None and named.count(m.name) != 1:
                raise SpecError(
                    f"{where}: {m.name} has a floor but is the floored_twin of {named.count(m.name)} metrics, not one"
                )

    @property
    def floored_twins(self) -> dict[str, MetricSpec]:
        """Metric name -> its copy-floored twin (``MetricSpec.floored_twin``), in suite order."""
        by_name = {m.name: m for m in self.metric_suite}
        return {m.name: by_name[m.floored_twin] for m in self.metric_suite if m.floored_twin}

    def _check_subject_breakdowns(self, where: str) -> None:
        """Every field a SubjectBreakdown reads is a column of the table it reads it from."""
        if not self.subject_breakdowns and self.slot_records is None:
            return
        names = [b.name for b in self.subject_breakdowns]
        if len(set(names)) != len(names) or set(names) & {" x ".join(axes) for axes in self.breakdowns}:
            raise SpecError(f"{where}: subject_breakdowns names must be unique and differ from its breakdowns")
        prompts = self.configs.get("prompts")
        if prompts is None:
            raise SpecError(f"{where}: subject_breakdowns need a prompts config")
        records = None
        if self.slot_records is not None:
            feature = prompts.features.get(self.slot_records)
            records = getattr(feature, "feature", None)
            if not isinstance(records, dict) or self.slot_key not in records:
                raise SpecError(
                    f"{where}: slot_records {self.slot_records!r} is not a prompts column of records with {self.slot_key!r}"
                )
        references = self.configs[self.reference_config].features if self.reference_config else {}
        for b in self.subject_breakdowns:
            if any(level != "image" for level in b.levels) and records is None:
                raise SpecError(
                    f"{where}: subject breakdown {b.name} groups per-subject rows but the spec has no slot_records"
                )
            for level in b.levels:
                record = prompts.features if level == "image" else records
                if b.via is not None and (b.via not in record or b.field not in references):
                    raise SpecError(
                        f"{where}: subject breakdown {b.name}: {b.via!r} or the reference column {b.field!r} is missing"
                    )
                if b.via is None and b.field not in record:
                    raise SpecError(f"{where}: subject breakdown {b.name}: {b.field!r} is not a field of its records")

    @property
    def breakdown_columns(self) -> tuple[str, ...]:
        """The prompt columns the aggregates read: the breakdowns' and what the subject breakdowns need."""
        columns = {c for axes in self.breakdowns for c in axes}
        if self.subject_breakdowns and self.slot_records:
            columns.add(self.slot_records)
        for b in self.subject_breakdowns:
            if "image" in b.levels:
                columns.add(b.via or b.field)
        columns.update(f.column for f in self.resampling.factors)  # the ids the intervals resample
        return tuple(sorted(columns))

    @property
    def reference_columns(self) -> tuple[str, ...]:
        """The reference-table columns the subject breakdowns read (the reference id first)."""
        fields = sorted({b.field for b in self.subject_breakdowns if b.via is not None})
        return (self.reference_id, *fields) if fields else ()

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks a submission may declare: the default, and every task some metric scores."""
        scored = {t for m in self.metric_suite for t in m.tasks}
        return tuple(t for t in TASKS if t == DEFAULT_TASK or t in scored)

    def task_metrics(self, task: str) -> tuple[MetricSpec, ...]:
        """The metrics a submission of ``task`` is scored with, in suite order."""
        return tuple(m for m in self.metric_suite if task in m.tasks)

    def metric(self, name: str) -> MetricSpec:
        for metric in self.metric_suite:
            if metric.name == name:
                return metric
        raise KeyError(f"{self.name} has no metric {name!r}; it has: {', '.join(m.name for m in self.metric_suite)}")

    def load(self, field_name: str) -> Any:
        """The object one of the ``"module:attr"`` fields names (``recipe``, ``suite``, ``baselines``,
        ``controls``, ``rankings``)."""
        reference = getattr(self, field_name)
        if not reference:
            raise SpecError(f"benchmark {self.name} has no {field_name}")
        return resolve(reference, f"benchmark {self.name}, {field_name}")

    def config(self, name: str) -> ConfigSpec:
        try:
            return self.configs[name]
        except KeyError:
            raise KeyError(f"{self.name} has no config {name!r}; it has: {', '.join(self.configs)}") from None
