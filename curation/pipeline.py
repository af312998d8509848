"""The model stages of a build (``idbench build ... --curate``), between the source and the sampler.

The builders' recipes call these (through :class:`Curation`, which the CLI hands to
``idbench.builders.build.build(curator=...)``) with the rows they already validated and pHash-deduplicated:

1. :func:`curate_images` (every benchmark): embedding near-duplicates (DINOv2 through the feature
   store), then the two-stage quality filter (cheap checks, then aesthetics and relevance to the
   entity's name); needs the encoders of ``options.profile``.
2. :func:`curate_cogcanvas_references`: MLLM metadata for every reference (filling what the manifest
   left empty; the manifest wins) and the demographic audit of the identity pool.
3. :func:`curate_cogcanvas_prompts`: the MLLM writes each sampled prompt and a verifier checks it;
   prompts that never pass keep their template text, flagged in the audit.
4. :func:`curate_charis_prompts`: the VLM proposes 5-6-axis prompts per subject (a review export is
   written for people); or the prompts of a reviewed export are taken as they are.

Stages 2-4 need a judge. Without one they are skipped, and the build report and ``build_info.json``
say so, stage by stage: nothing is silently left out. Every stage's audit (what was removed and why,
what was filled, which prompts were rewritten) is written into the build's ``curation/`` folder.

Model decisions (aesthetic and relevance thresholds, DINOv2 near-duplicates) remove images only when
the profile's weights are real: :attr:`CurateOptions.model_decisions_apply` is that one rule. With the
tiny profile's random weights they are computed and reported, labelled plumbing checks, and remove
nothing; the pixel checks (resolution, aspect, blur, near-uniform) apply either way.

When the build fails after a stage removed images (the sampler finds too few persons, say),
:meth:`Curation.failure` turns the error into a :class:`CurationError` that names each stage, what
it removed of each kind and by which threshold, and writes the audit to a folder the message names
(the build's own output is not written).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idbench.builders.sources import SourceError

logger = logging.getLogger(__name__)

NO_JUDGE = "skipped: no judge configured (pass --judge-url and --judge-model, or set IDBENCH_JUDGE_URL and IDBENCH_JUDGE_MODEL)"
AUDIT_DIR = "curation"  # inside the built benchmark folder


@dataclass
class CurateOptions:
    """How the model stages run. ``judge``: a JudgeConfig, a ready Judge, or None (MLLM stages skipped)."""

    profile: str = "paper"
    device: str = "cpu"
    judge: Any = None
    cache_dir: Path | None = None
    dedup_threshold: float | None = None  # None: curation.embedding_dedup's default
    quality: Any = None  # a curation.quality.QualityThresholds; None: its defaults
    quality_from: str | None = None  # where ``quality`` came from and why, for the audit
    max_attempts: int = 3
    reviewed_prompts: Path | None = None  # CHARIS: take the prompts of this reviewed export instead
    image_stages: bool = True  # False: only the prompt stages (e.g. importing a reviewed export)

    @property
    def model_decisions_apply(self) -> bool:
        """Whether model scores may remove images: only when every encoder of the profile is real.

        Random tiny weights (``--profile tiny``) give random aesthetic scores, relevances and DINOv2
        similarities: acting on them would drop arbitrary images (often every person of a small
        pool). Like every tiny result they are plumbing checks: computed and reported, never acted on.
        """
        from idbench.evaluate_pkg.models.registry import profile_is_plumbing

        return not profile_is_plumbing(self.profile)


class CurationError(SourceError):
    """A curation stage left too little for what comes after it; the message says what and where the audit is."""


@dataclass(frozen=True)
class StageCounts:
    """What one image stage took in and let through, per kind, and which thresholds removed the rest."""

    stage: str  # as the message names it: "quality filter", "embedding dedup"
    went_in: dict[str, int]  # kind -> images
    came_out: dict[str, int]
    removed_by: dict[str, dict[str, int]]  # kind -> threshold label ("min_side=512") -> images it failed

    def summary(self) -> str | None:
        """E.g. ``quality filter removed 6 of 6 person references (min_side=512: 6)``; None if nothing removed."""
        parts = []
        for kind, count in self.went_in.items():
            removed = count - self.came_out.get(kind, 0)
            if removed:
                why = ", ".join(f"{label}: {n}" for label, n in sorted(self.removed_by.get(kind, {}).items()))
                parts.append(f"{removed} of {count} {_references(kind)}" + (f" ({why})" if why else ""))
        return f"{self.stage} removed " + ", ".join(parts) if parts else None


def _references(kind: str) -> str:
    return f"{kind} references" if kind else "references"


def _kind_of(image: Any) -> str:
    """The kind the counts are kept by: the manifest's ``kind`` (CogCanvas, Identity Collapse) or ``type`` (CHARIS)."""
    values = getattr(image, "values", None) or {}
    return str(values.get("kind") or values.get("type") or "")


@dataclass
class CurationLog:
    """What the stages did: a JSON-ready summary per stage (for build_info) and audit files to write."""

    stages: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path inside curation/ -> text
    writers: list[Callable[[Path], None]] = field(default_factory=list)  # write into curation/ (thumbnails...)
    counts: list[StageCounts] = field(default_factory=list)  # the image stages, in the order they ran

    def write(self, folder: Path) -> None:
        """Write every audit file under ``folder/curation`` (called on the build's staging folder)."""
        self.write_into(Path(folder) / AUDIT_DIR)

    def write_into(self, root: Path) -> None:
        """Write every audit file directly into ``root``."""
        root.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        for writer in self.writers:
            writer(root)


class Curation:
    """One build's curation: the options, the log, and the judge and models, made on first use and
    shared by every stage of the build. The builders pass it to each stage function."""

    def __init__(self, options: CurateOptions):
        self.options = options
        self.log = CurationLog()
        self._judge: Any = None
        self._models: Any = None

    @property
    def judge(self) -> Any:
        if self._judge is None and self.options.judge is not None:
            from idbench.evaluate_pkg.runner import make_judge

            self._judge = make_judge(self.options.judge, self.options.cache_dir)
        return self._judge

    @property
    def models(self) -> Any:
        if self._models is None:
            from idbench.curation.embedding_dedup import load_models

            self._models = load_models(self.options.profile, device=self.options.device)
        return self._models

    def failure(self, error: Exception, audit_dir: Path) -> CurationError | None:
        """``error`` (the build failed after curation ran) explained by what the image stages removed.

        Writes the audit so far into ``audit_dir`` (staged, then swapped in) and returns the error to
        raise in place of ``error``; None when no curation stage ran (the error is not curation's).
        """
        if not self.log.stages:
            return None
        from idbench.atomic import atomic_directory

        # A failed build's audit replaces an earlier failed build's (the message names the folder).
        with atomic_directory(audit_dir, overwrite=True) as staging:
            self.log.write_into(staging)
            # No build_info.json is written on failure: the stage summaries it would hold go here.
            summary = json.dumps(self.log.stages, indent=2, ensure_ascii=False, default=str) + "\n"
            (staging / "stages.json").write_text(summary, encoding="utf-8")
        removed = [text for text in (c.summary() for c in self.log.counts) if text]
        if removed:
            left = self.log.counts[-1].came_out
            what = (
                "; ".join(removed)
                + "; left: "
                + ", ".join(f"{n} {kind}".strip() for kind, n in left.items())
                + " references"
            )
            message = f"{what}; then the build failed: {error}"
        else:
            message = str(error)  # the image stages removed nothing: the error is the build's own
        return CurationError(f"{message} (curation audit kept in {audit_dir})")

    # The Curator protocol of idbench.builders.recipe: what a build recipe calls. The CLI makes this
    # object and hands it to idbench.builders.build.build(curator=...), so builders never import curation.

    @property
    def fills_metadata(self) -> bool:
        return self.options.judge is not None

    def curate_images(
        self, images: Sequence[Any], id_of: Callable[[Any], str], text_of: Callable[[Any], str]
    ) -> list[Any]:
        return curate_images(images, id_of, text_of, self)


def judge_stats(judge: Any) -> dict[str, Any] | None:
    stats = getattr(judge, "stats", None)
    return stats.as_dict() if stats is not None and hasattr(stats, "as_dict") else None


# --- 1. images -------------------------------------------------------------------------------------


def curate_images(
    images: Sequence[Any],
    id_of: Callable[[Any], str],
    text_of: Callable[[Any], str],
    run: Curation,
) -> list[Any]:
    """``images`` (SourceImage-like: ``.data``, ``.width``, ``.height``) without embedding duplicates
    and without those the quality filter removes; both decisions are logged with their reasons."""
    from idbench.curation.embedding_dedup import DEFAULT_THRESHOLD, feature_source, find_near_duplicates, image_features
    from idbench.curation.quality import QualityThresholds, filter_images

    options, log = run.options, run.log
    if not options.image_stages:
        log.stages["images"] = "skipped (no --curate)"
        return list(images)
    by_id = {id_of(i): i for i in images}
    kind = {image_id: _kind_of(image) for image_id, image in by_id.items()}
    data = {image_id: image.data for image_id, image in by_id.items()}
    thresholds = options.quality or QualityThresholds()
    apply = options.model_decisions_apply  # the one rule: tiny weights decide nothing
    not_applied = "not applied: plumbing checks (random tiny weights), values in the audit"
    quality = filter_images(
        data,
        {image_id: text_of(image) for image_id, image in by_id.items()},
        thresholds,
        profile=options.profile,
        device=options.device,
        cache_dir=options.cache_dir,
        models=run.models,
        apply_model_checks=apply,
    )
    audit = quality.to_dict()
    audit["thresholds_from"] = options.quality_from or "the defaults of idbench.curation.quality.QualityThresholds"
    log.stages["quality"] = {
        "thresholds_from": audit["thresholds_from"],
        "model_checks": "applied" if apply else not_applied,
        "counts": audit.get("counts"),
        "plumbing": quality.plumbing,
        "thresholds": audit["thresholds"],
    }
    log.files["quality.json"] = json.dumps(audit, indent=2, ensure_ascii=False, default=str) + "\n"
    log.files["quality.csv"] = quality.csv_text()
    passed = [image_id for image_id in by_id if quality.images[image_id].kept]
    log.counts.append(
        _counts(
            "quality filter",
            list(by_id),
            passed,
            kind,
            {i: Counter(r.label for r in quality.images[i].reasons) for i in by_id},
        )
    )

    vectors = image_features(
        {i: data[i] for i in passed},
        "dinov2",
        options.profile,
        device=options.device,
        cache_dir=options.cache_dir,
        models=run.models,
    )
    aesthetic, sizes = quality.aesthetic, quality.sizes
    report = find_near_duplicates(
        vectors,
        options.dedup_threshold if options.dedup_threshold is not None else DEFAULT_THRESHOLD,
        # keep rule: the better aesthetic score, then more pixels (when every kept image has a score)
        quality={i: aesthetic[i] for i in passed} if all(i in aesthetic for i in passed) else None,
        resolution={i: sizes.get(i, (by_id[i].width, by_id[i].height)) for i in passed},
        features=feature_source(run.models),
    )
    plumbing = not apply  # tiny random encoders: the decisions check the pipeline only
    dedup_audit = {**report.to_dict(), "applied": apply}
    counts = report.to_dict()["counts"]
    log.stages["embedding_dedup"] = {
        "decisions": "applied" if apply else not_applied,
        **counts,
        # what the report calls removed is only flagged when the decisions are not applied
        **({} if apply else {"kept": len(passed), "removed": 0, "flagged_near_duplicates": counts["removed"]}),
        "threshold": report.threshold,
        "profile": options.profile,
        "plumbing": plumbing,
    }
    log.files["embedding_dedup.json"] = json.dumps(dedup_audit, indent=2, ensure_ascii=False) + "\n"
    log.files["embedding_dedup.csv"] = report.csv_text()
    kept = set(report.kept) if apply else set(passed)
    out = [i for i in passed if i in kept]
    label = f"near-duplicate (DINOv2 cosine >= {report.threshold})"
    log.counts.append(
        _counts("embedding dedup", passed, out, kind, {i: Counter([label]) for i in passed if i not in kept})
    )
    persons = [i for i in out if kind[i] == "person"]  # CogCanvas: the references ID-Sim compares faces with
    if persons:
        log.stages["faces"] = face_audit({i: data[i] for i in persons}, run)
    return [by_id[i] for i in out]


def face_audit(images: Mapping[str, bytes], run: Curation) -> dict[str, Any]:
    """Which person references the profile's face backend finds no face in; a warning, not a filter.

    ID-Sim has no value for a prompt whose reference has no face (the scorer counts it as missing
    evidence), so the builder says so up front: the ids go into build_info and the build report, and
    each is logged as a warning. They are kept: whether a reference is usable is the maintainer's
    call, and a tiny profile's verdict is a plumbing check. A backend that cannot load is recorded as
    not run, with why, rather than failing the build or pretending every face was found.
    """
    from idbench.curation.embedding_dedup import default_cache_dir
    from idbench.evaluate_pkg.features import FeatureStore
    from idbench.evaluate_pkg.images import content_hash
    from idbench.evaluate_pkg.models.registry import is_plumbing

    options = run.options
    try:
        encoder = run.models["face"]
        identity = run.models.used(["face"])["face"]
    except Exception as error:  # a missing backend (dlib / insightface not installed, no weights)
        return {
            "not_run": f"the face backend did not load: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        }
    hashes = {image_id: content_hash(data) for image_id, data in images.items()}
    loaders = {hashes[i]: (lambda data=data: data) for i, data in images.items()}
    store = FeatureStore(Path(options.cache_dir) if options.cache_dir is not None else default_cache_dir())
    features = store.encode_images(encoder, loaders)
    no_face = sorted(i for i, key in hashes.items() if len(features[key]["scores"]) == 0)
    for image_id in no_face:
        logger.warning(
            "person reference %s: %s finds no face in it; its prompts will have no ID-Sim", image_id, identity["name"]
        )
    return {
        "backend": identity["name"],
        "plumbing": is_plumbing(identity["name"]),
        "checked": len(images),
        "no_face": no_face,
    }


def _counts(
    stage: str, went_in: Sequence[str], came_out: Sequence[str], kind: Mapping[str, str], why: Mapping[str, Counter]
) -> StageCounts:
    """Per kind: images in, images out, and for the removed ones the thresholds they failed."""
    out = set(came_out)
    removed_by: dict[str, Counter] = {}
    for image_id in went_in:
        if image_id not in out:
            removed_by.setdefault(kind[image_id], Counter()).update(why.get(image_id, Counter()))
    kinds = dict.fromkeys(kind.values())  # every kind of the stage's input, first-seen order
    return StageCounts(
        stage,
        {k: sum(kind[i] == k for i in went_in) for k in kinds},
        {k: sum(kind[i] == k for i in came_out) for k in kinds},
        {k: dict(c) for k, c in removed_by.items()},
    )


# --- a curated build ---------------------------------------------------------------------------------


def quality_thresholds_for(path: Path | None, shipped_samples: bool = False) -> tuple[Any, str | None]:
    """(QualityThresholds or None for the defaults, why they apply) for a curated build.

    An explicit thresholds file wins; otherwise a build of the shipped samples takes the samples' own
    thresholds (the samples are 183-512 px, below the default 512 px floor). A malformed file or an
    unknown key is one :class:`SourceError` naming the file.
    """
    from idbench.curation.quality import SAMPLE_THRESHOLDS, QualityThresholds, sample_thresholds

    if path is not None:
        try:
            return QualityThresholds.from_json(
                Path(path).read_text(encoding="utf-8"), where=str(path)
            ), f"--quality-thresholds {path}"
        except OSError as error:
            raise SourceError(f"{path}: {error.strerror or error}") from None
        except ValueError as error:
            raise SourceError(str(error)) from None
    if shipped_samples:
        return (
            sample_thresholds(),
            f"shipped samples' own (idbench.samples/{SAMPLE_THRESHOLDS}): no --source, no --quality-thresholds",
        )
    return None, None


def failed_audit_dir(out: Path) -> Path:
    """Where the curation audit of a failed build goes: beside the output, which is not written."""
    return out.parent / f"{out.name}.curation-audit"


def build_curated(benchmark: str, options: CurateOptions, out: Path, **build_options: Any) -> tuple[dict, Path | None]:
    """``idbench.builders.build.build`` with the model stages of ``options``: (build_info, the folder of an
    earlier failed build's audit that was removed, or None).

    A build that fails after curation ran raises a :class:`CurationError` saying what the stages removed,
    with their audit beside the unwritten output (:func:`failed_audit_dir`).
    """
    from idbench.builders.build import build

    curator = Curation(options)
    try:
        info = build(benchmark, out=out, curator=curator, **build_options)
    except SourceError as error:
        explained = curator.failure(error, failed_audit_dir(out))
        if explained is None:
            raise
        raise explained from None
    stale = failed_audit_dir(out)
    if not stale.is_dir():
        return info, None
    # The audit of an earlier failed build describes data this build replaced: left beside the new
    # output it would read as this build's. The new build's own audit is inside it.
    shutil.rmtree(stale)
    return info, stale
