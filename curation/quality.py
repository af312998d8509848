"""The two-stage quality filter of the curation pipeline: cheap pixel checks, then model scores.

CogCanvas filters its crawled references "in two stages": an aesthetic quality filter, then the
removal of visually irrelevant samples; CHARIS asks for high-resolution references without artefacts
or watermarks and with a single subject. Both run here, cheap checks first so that the models only see
images worth scoring:

Stage 1 (pixels only, per image, in threads):

- ``min_side``: the shorter side in pixels. Generators take references at 512-1024 px (CHARIS asks
  for >= 1024x1024), so a smaller reference is upscaled by the generator and its detail invented.
- ``max_aspect_ratio``: longer side / shorter side. CLIP and DINOv2 see a square centre crop, which
  keeps 1/ratio of the picture: beyond 2.5 (banners, panoramas, strips) less than 40 % is seen and
  the subject is likely cut. 16:9 scenes (1.78) and full-length figures (about 2:1) pass.
- ``min_blur``: the variance of the Laplacian, measured on a greyscale copy whose shorter side is
  :data:`BLUR_SIDE` (256) px. A fixed scale makes the value independent of the file's resolution: the
  same picture at 4000 px and at 500 px measures the same (at native size a large image would measure
  far sharper per pixel than its downscaled copy, so no single threshold would fit both). 256 px is
  about what the encoders see (224 px) and below the resolution floor, so the measurement downscales
  (never inventing blur by upscaling) for any image that passes ``min_side``. The measure depends on
  content as well as sharpness (flat vector art scores low, line art high): on the 62 shipped samples
  sharp images score 71-4870, and a Gaussian blur of sigma = 3 px at 512 px brings the photographs to
  4-50. So it is a floor that removes clearly blurred images; subtle softness is left to the aesthetic
  score and to the manual review the paper describes.
- ``min_pixel_std``: the largest per-channel standard deviation (0-255) of that same copy. A blank,
  single-colour or almost-blank image (a placeholder, a failed download) scores below 10; the samples
  score 32-122.
- Single subject and no watermark (the CHARIS criteria) need to understand the picture: they are left
  to the VLM judge of the metadata stage and are *not* checked here; the report says so.

Stage 2 (models of the scoring profile, on the images that passed stage 1):

- ``min_aesthetic``: the LAION aesthetic predictor v2 on the CLIP ViT-L/14 image embedding, as the
  scorer's ``aesthetic`` metric computes it. 4.5 is the lowest cut LAION published (the broadest
  LAION-Aesthetics V2 subset, "4.5+"): it removes the poorest snapshots and keeps ordinary product and
  scene photographs; stricter pools can pass 5 or more.
- ``min_relevance``: the CLIP cosine of the image with its entity's name or description (raw cosine,
  ViT-L/14). Matching image-text pairs of CLIP ViT-L/14 typically score 0.2-0.35 and unrelated ones
  around 0.1-0.18, so 0.20 removes images that do not show their entity at all. Optional
  ``relevance_margin``: the cosine with its own text minus the best cosine with any *other* entity's
  text must be at least this (0 = its own entity must be the best match), which catches an image of
  the wrong item even when its absolute score is high; off by default because two entities of one
  category (two handbags) can legitimately be close.

Neither stage-2 threshold was calibrated in this environment (no real weights here); every measured
value goes into the report, so a maintainer can see the margins and tune the builder config.

``apply_model_checks=False`` computes and reports the stage-2 values and the checks they fail, but
removes nothing for them (the curation pipeline's rule for random tiny weights: plumbing checks).

Order with dedup: run :func:`filter_images` first and :func:`idbench.curation.embedding_dedup.find_near_duplicates`
on the kept ids, with ``quality=report.aesthetic`` and ``resolution=report.sizes``: a removed duplicate
then always has a kept twin that passed the filter, and the keeper is the better-looking one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from idbench.curation.embedding_dedup import image_features, load_models, write_text_atomic

if TYPE_CHECKING:
    from idbench.evaluate_pkg.context import Models

#: The shorter side (px) of the copy on which blur and pixel spread are measured.
BLUR_SIDE = 256

#: Checks this module does not make, and who does.
NOT_CHECKED = {
    "single_subject": "left to the VLM judge (metadata stage); not measurable from pixels alone",
    "watermark": "left to the VLM judge (metadata stage); not measurable from pixels alone",
}


#: The threshold each check compares against (a removal is reported as ``min_side=512``).
THRESHOLD_OF_CHECK = {
    "min_side": "min_side",
    "max_aspect_ratio": "max_aspect_ratio",
    "blur": "min_blur",
    "uniform": "min_pixel_std",
    "aesthetic": "min_aesthetic",
    "relevance": "min_relevance",
    "relevance_margin": "relevance_margin",
}

#: The thresholds of the shipped samples (183-512 px), package data of ``idbench.samples``.
SAMPLE_THRESHOLDS = "quality-thresholds.json"


@dataclass(frozen=True)
class QualityThresholds:
    """Every threshold of the filter (``None`` turns a stage-2 check off). See the module docstring."""

    min_side: int = 512
    max_aspect_ratio: float = 2.5
    min_blur: float = 50.0
    min_pixel_std: float = 10.0
    min_aesthetic: float | None = 4.5
    min_relevance: float | None = 0.20
    relevance_margin: float | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None and item.name in {"min_aesthetic", "min_relevance", "relevance_margin"}:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"quality threshold {item.name}: expected a finite number, got {value!r}")
        if self.min_side < 1:
            raise ValueError(f"quality threshold min_side: expected >= 1 px, got {self.min_side!r}")
        if self.max_aspect_ratio < 1:
            raise ValueError(
                f"quality threshold max_aspect_ratio: longer/shorter side, expected >= 1, got {self.max_aspect_ratio!r}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "quality thresholds") -> QualityThresholds:
        """Thresholds from a config mapping (the builder's); an unknown key is an error naming it."""
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
        try:
            return cls(**dict(values))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    @classmethod
    def from_json(cls, text: str, where: str) -> QualityThresholds:
        """Thresholds from the text of a JSON object; ValueError naming ``where`` when it is not one."""
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not valid JSON ({error})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{where}: expected a JSON object of thresholds, got {type(values).__name__}")
        return cls.from_mapping(values, where=where)


def sample_thresholds() -> QualityThresholds:
    """The thresholds shipped with the samples (``idbench.samples/quality-thresholds.json``).

    The samples are 183-512 px, below the default 512 px floor, so a curated sample build uses these.
    """
    from importlib import resources

    text = resources.files("idbench.samples").joinpath(SAMPLE_THRESHOLDS).read_text(encoding="utf-8")
    return QualityThresholds.from_json(text, where=f"idbench.samples/{SAMPLE_THRESHOLDS}")


@dataclass(frozen=True)
class Reason:
    """Why an image was removed: which check, what was measured, against which threshold."""

    stage: int
    check: str
    value: float | None
    threshold: float | None
    message: str

    @property
    def label(self) -> str:
        """The threshold that removed the image, as ``min_side=512`` (``unreadable`` has none)."""
        name = THRESHOLD_OF_CHECK.get(self.check)
        return f"{name}={self.threshold}" if name is not None else self.check


@dataclass(frozen=True)
class ImageMeasures:
    """Stage-1 measurements of one image (see the module docstring for each)."""

    width: int
    height: int
    aspect_ratio: float
    blur: float
    pixel_std: float


@dataclass(frozen=True)
class ImageQuality:
    """Everything measured for one image and every reason it was removed (none: kept)."""

    id: str
    measures: ImageMeasures | None  # None when the image could not be read
    aesthetic: float | None = None  # stage 2 values: None when stage 2 did not look at the image
    relevance: float | None = None
    relevance_margin: float | None = None
    reasons: tuple[Reason, ...] = ()
    # Stage-2 checks the image fails that were not applied (apply_model_checks=False: plumbing checks).
    not_applied: tuple[Reason, ...] = ()

    @property
    def kept(self) -> bool:
        return not self.reasons

    @property
    def removed_at(self) -> int | None:
        return min(reason.stage for reason in self.reasons) if self.reasons else None


@dataclass(frozen=True)
class QualityReport:
    """The filter's decisions: per image its values and reasons, the ids kept, how it was run."""

    thresholds: QualityThresholds
    images: dict[str, ImageQuality]  # in input order
    profile: str | None = None  # None when stage 2 ran no model
    plumbing: bool = False  # True with random tiny weights: the stage-2 values measure nothing
    model_checks_applied: bool = True  # False: stage-2 values were computed and reported, removed nothing
    models: dict[str, dict] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(image_id for image_id, entry in self.images.items() if entry.kept)

    def removed(self, stage: int | None = None) -> tuple[str, ...]:
        """Ids removed (at ``stage`` only, when given)."""
        return tuple(
            image_id
            for image_id, entry in self.images.items()
            if entry.reasons and (stage is None or entry.removed_at == stage)
        )

    @property
    def aesthetic(self) -> dict[str, float]:
        """id -> aesthetic score of every image stage 2 scored: the dedup keep rule's quality."""
        return {i: e.aesthetic for i, e in self.images.items() if e.aesthetic is not None}

    @property
    def sizes(self) -> dict[str, tuple[int, int]]:
        """id -> (width, height) of every readable image: the dedup keep rule's resolution."""
        return {i: (e.measures.width, e.measures.height) for i, e in self.images.items() if e.measures is not None}

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds": asdict(self.thresholds),
            "profile": self.profile,
            "plumbing": self.plumbing,
            "model_checks_applied": self.model_checks_applied,
            "models": self.models,
            "notes": list(self.notes),
            "not_checked": NOT_CHECKED,
            "counts": {
                "images": len(self.images),
                "kept": len(self.kept),
                "removed_stage_1": len(self.removed(1)),
                "removed_stage_2": len(self.removed(2)),
                "failed_stage_2_not_applied": sum(bool(e.not_applied) for e in self.images.values()),
            },
            "images": [
                {
                    "id": entry.id,
                    "kept": entry.kept,
                    "removed_at": entry.removed_at,
                    **(asdict(entry.measures) if entry.measures is not None else {}),
                    "aesthetic": entry.aesthetic,
                    "relevance": entry.relevance,
                    "relevance_margin": entry.relevance_margin,
                    "reasons": [asdict(reason) for reason in entry.reasons],
                    "not_applied": [asdict(reason) for reason in entry.not_applied],
                }
                for entry in self.images.values()
            ],
        }

    def write_json(self, path: str | os.PathLike) -> Path:
        return write_text_atomic(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    def csv_text(self) -> str:
        """One row per image: kept or the stage that removed it, every value, the reasons in words."""
        columns = [
            "id",
            "kept",
            "removed_at",
            "width",
            "height",
            "aspect_ratio",
            "blur",
            "pixel_std",
            "aesthetic",
            "relevance",
            "relevance_margin",
            "checks_failed",
            "reasons",
            "not_applied",
        ]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for entry in self.images.values():
            measures = asdict(entry.measures) if entry.measures is not None else {}
            row = {
                "id": entry.id,
                "kept": entry.kept,
                "removed_at": entry.removed_at,
                **measures,
                "aesthetic": entry.aesthetic,
                "relevance": entry.relevance,
                "relevance_margin": entry.relevance_margin,
                "checks_failed": ";".join(reason.check for reason in entry.reasons),
                "reasons": "; ".join(reason.message for reason in entry.reasons),
                "not_applied": "; ".join(reason.message for reason in entry.not_applied),
            }
            writer.writerow({name: "" if row.get(name) is None else row[name] for name in columns})
        return buffer.getvalue()

    def write_csv(self, path: str | os.PathLike) -> Path:
        return write_text_atomic(path, self.csv_text())


# --- stage 1 ----------------------------------------------------------------------------------------


def measure_image(data: bytes, *, where: str) -> ImageMeasures:
    """Stage-1 measurements of one encoded image; an unreadable one raises ``ImageError`` naming ``where``."""
    from idbench.evaluate_pkg.images import normalize_image

    image = normalize_image(data, where=where)
    width, height = image.size
    scale = BLUR_SIDE / min(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    # BOX (area averaging) when shrinking: no aliasing to pass for detail; bicubic when enlarging.
    resample = Image.Resampling.BOX if scale < 1 else Image.Resampling.BICUBIC
    small = image.resize(size, resample) if size != image.size else image
    rgb = np.asarray(small, dtype=np.float64)
    grey = np.asarray(small.convert("L"), dtype=np.float64)
    return ImageMeasures(
        width=width,
        height=height,
        aspect_ratio=max(width, height) / min(width, height),
        blur=laplacian_variance(grey),
        pixel_std=float(rgb.reshape(-1, 3).std(axis=0).max()),
    )


def laplacian_variance(grey: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian over the interior pixels of a 2-D greyscale array.

    >>> laplacian_variance(np.zeros((5, 5)))
    0.0
    """
    if grey.shape[0] < 3 or grey.shape[1] < 3:
        return 0.0
    laplacian = grey[:-2, 1:-1] + grey[2:, 1:-1] + grey[1:-1, :-2] + grey[1:-1, 2:] - 4.0 * grey[1:-1, 1:-1]
    return float(laplacian.var())


def stage1_reasons(measures: ImageMeasures, thresholds: QualityThresholds) -> list[Reason]:
    """Every stage-1 check that ``measures`` fails (empty: passes), in the order of the table below."""
    t, m = thresholds, measures
    side = min(m.width, m.height)
    # (failed, reason name, measured value, threshold, message): one row per check.
    checks = (
        (
            side < t.min_side,
            "min_side",
            side,
            t.min_side,
            f"shorter side {side} px < {t.min_side} px ({m.width}x{m.height})",
        ),
        (
            m.aspect_ratio > t.max_aspect_ratio,
            "max_aspect_ratio",
            round(m.aspect_ratio, 4),
            t.max_aspect_ratio,
            f"aspect ratio {m.aspect_ratio:.2f} > {t.max_aspect_ratio}",
        ),
        (
            m.blur < t.min_blur,
            "blur",
            round(m.blur, 3),
            t.min_blur,
            f"Laplacian variance {m.blur:.1f} < {t.min_blur} (blurred)",
        ),
        (
            m.pixel_std < t.min_pixel_std,
            "uniform",
            round(m.pixel_std, 3),
            t.min_pixel_std,
            f"pixel std {m.pixel_std:.1f} < {t.min_pixel_std} (near-uniform)",
        ),
    )
    return [Reason(1, name, value, threshold, message) for failed, name, value, threshold, message in checks if failed]


def measure_images(images: Mapping[str, bytes], *, workers: int | None = None) -> dict[str, ImageMeasures | Exception]:
    """id -> measures, or the ``ImageError`` of an unreadable image; decoded in ``workers`` threads.

    Threads suffice: Pillow's decoders and resampling and numpy release the GIL.
    """
    from idbench.evaluate_pkg.images import ImageError

    def one(item: tuple[str, bytes]) -> ImageMeasures | Exception:
        image_id, data = item
        try:
            return measure_image(data, where=image_id)
        except ImageError as err:
            return err

    count = workers if workers is not None else min(8, os.cpu_count() or 1)
    if count <= 1 or len(images) <= 1:
        return {image_id: one((image_id, data)) for image_id, data in images.items()}
    with ThreadPoolExecutor(max_workers=count) as pool:
        return dict(zip(images, pool.map(one, images.items())))


def cheap_checks(
    images: Mapping[str, bytes], thresholds: QualityThresholds = QualityThresholds(), *, workers: int | None = None
) -> dict[str, list[Reason]]:
    """Stage 1 alone: id -> the reasons to remove the image (empty list: it passes)."""
    out = {}
    for image_id, measured in measure_images(images, workers=workers).items():
        out[image_id] = _stage1(measured, thresholds)
    return out


def _stage1(measured: ImageMeasures | Exception, thresholds: QualityThresholds) -> list[Reason]:
    if isinstance(measured, Exception):
        detail = getattr(measured, "reason", str(measured))
        return [Reason(1, "unreadable", None, None, f"unreadable: {detail}")]
    return stage1_reasons(measured, thresholds)


# --- stage 2 ----------------------------------------------------------------------------------------


def aesthetic_scores(
    images: Mapping[str, bytes],
    profile: str = "paper",
    *,
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    models: Models | None = None,
    batch_size: int = 32,
) -> dict[str, float]:
    """id -> LAION aesthetic v2 score (CLIP ViT-L/14 embedding through the head, as the scorer does)."""
    from idbench.evaluate_pkg.functional.aesthetic import aesthetic_score

    models = load_models(profile, device=device, models=models)
    embeddings = image_features(images, "clip", profile, cache_dir=cache_dir, models=models, batch_size=batch_size)
    if not embeddings:
        return {}
    ids = list(embeddings)
    values = aesthetic_score(models["aesthetic"].weights, np.stack([embeddings[i] for i in ids]))
    return {image_id: float(value) for image_id, value in zip(ids, values)}


def relevance_scores(
    images: Mapping[str, bytes],
    texts: Mapping[str, str],
    profile: str = "paper",
    *,
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    models: Models | None = None,
    batch_size: int = 32,
) -> dict[str, tuple[float, float | None]]:
    """id -> (CLIP cosine with its own text, that minus the best cosine with another entity's text).

    The margin is None when every image has the same text (no other entity to compare with).
    """
    from idbench.curation.embedding_dedup import default_cache_dir
    from idbench.evaluate_pkg.features import FeatureStore

    missing = [image_id for image_id in images if image_id not in texts]
    if missing:
        raise ValueError(f"relevance: no entity text for {len(missing)} image(s), first {missing[0]!r}")
    for image_id in images:
        if not isinstance(texts[image_id], str) or not texts[image_id].strip():
            raise ValueError(f"relevance: the entity text of {image_id!r} is empty or not a string")
    models = load_models(profile, device=device, models=models)
    vectors = image_features(images, "clip", profile, cache_dir=cache_dir, models=models, batch_size=batch_size)
    store = FeatureStore(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    distinct = sorted({texts[image_id] for image_id in images})
    encoded = store.encode_texts(models["clip"], distinct)
    text_matrix = np.stack([encoded[text] for text in distinct]).astype(np.float64)
    text_matrix /= np.maximum(np.linalg.norm(text_matrix, axis=1, keepdims=True), 1e-12)
    position = {text: k for k, text in enumerate(distinct)}
    out: dict[str, tuple[float, float | None]] = {}
    for image_id, vector in vectors.items():
        cosines = text_matrix @ vector.astype(np.float64)
        own = position[texts[image_id]]
        others = np.delete(cosines, own)
        margin = float(cosines[own] - others.max()) if others.size else None
        out[image_id] = (float(cosines[own]), margin)
    return out


# --- both stages ------------------------------------------------------------------------------------


def filter_images(
    images: Mapping[str, bytes],
    texts: Mapping[str, str] | None = None,
    thresholds: QualityThresholds = QualityThresholds(),
    *,
    profile: str = "paper",
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    models: Models | None = None,
    batch_size: int = 32,
    workers: int | None = None,
    apply_model_checks: bool = True,
) -> QualityReport:
    """Run stage 1 on every image and stage 2 on those that pass; report what each stage removed and why.

    ``texts``: id -> the entity name or description its image should show (for relevance); None skips
    the relevance check (noted in the report). ``apply_model_checks=False``: the stage-2 checks an
    image fails are reported as ``not_applied`` and do not remove it. Stage 2 loads the ``clip`` and ``aesthetic`` models of
    ``profile`` (or uses ``models``) and only when one of its thresholds is set. Example::

        report = filter_images(images, {"cup_1": "a ceramic coffee cup", ...}, QualityThresholds(min_side=256))
        report.write_csv("audit/quality.csv")
        keep = report.kept
    """
    measured = measure_images(images, workers=workers)
    reasons = {image_id: _stage1(value, thresholds) for image_id, value in measured.items()}
    survivors = {image_id: images[image_id] for image_id in images if not reasons[image_id]}

    notes: list[str] = []
    check_relevance = thresholds.min_relevance is not None or thresholds.relevance_margin is not None
    if check_relevance and texts is None:
        notes.append("relevance not checked: no entity texts were given")
        check_relevance = False
    check_aesthetic = thresholds.min_aesthetic is not None
    aesthetic: dict[str, float] = {}
    relevance: dict[str, tuple[float, float | None]] = {}
    used_models: dict[str, dict] = {}
    plumbing = False
    ran_profile = None
    if survivors and (check_aesthetic or check_relevance):
        from idbench.evaluate_pkg.models.registry import profile_is_plumbing

        models = load_models(profile, device=device, models=models)
        ran_profile = models.options.profile
        plumbing = profile_is_plumbing(ran_profile)
        if plumbing:
            notes.append(f"profile {ran_profile!r} has random weights: stage-2 values are plumbing checks")
        if check_aesthetic:
            aesthetic = aesthetic_scores(survivors, cache_dir=cache_dir, models=models, batch_size=batch_size)
        if check_relevance:
            assert texts is not None
            relevance = relevance_scores(survivors, texts, cache_dir=cache_dir, models=models, batch_size=batch_size)
            if relevance and thresholds.relevance_margin is not None and next(iter(relevance.values()))[1] is None:
                notes.append("relevance margin not checked: all images share one entity text")
        used_models = models.used(["clip", "aesthetic"])

    if survivors and (check_aesthetic or check_relevance) and not apply_model_checks:
        notes.append("stage-2 thresholds not applied: their values are reported, they remove nothing")
    t = thresholds
    entries: dict[str, ImageQuality] = {}
    for image_id in images:
        found: list[Reason] = []  # stage 2
        score = aesthetic.get(image_id)
        if score is not None and t.min_aesthetic is not None and score < t.min_aesthetic:
            found.append(
                Reason(
                    2, "aesthetic", round(score, 4), t.min_aesthetic, f"aesthetic score {score:.2f} < {t.min_aesthetic}"
                )
            )
        own, margin = relevance.get(image_id, (None, None))
        if own is not None and t.min_relevance is not None and own < t.min_relevance:
            found.append(
                Reason(
                    2,
                    "relevance",
                    round(own, 4),
                    t.min_relevance,
                    f"CLIP similarity to its entity text {own:.3f} < {t.min_relevance}",
                )
            )
        if margin is not None and t.relevance_margin is not None and margin < t.relevance_margin:
            found.append(
                Reason(
                    2,
                    "relevance_margin",
                    round(margin, 4),
                    t.relevance_margin,
                    f"CLIP similarity to its own text minus the best other entity's {margin:.3f} "
                    f"< {t.relevance_margin}",
                )
            )
        value = measured[image_id]
        entries[image_id] = ImageQuality(
            id=image_id,
            measures=value if isinstance(value, ImageMeasures) else None,
            aesthetic=score,
            relevance=own,
            relevance_margin=margin,
            reasons=tuple(reasons[image_id] + (found if apply_model_checks else [])),
            not_applied=() if apply_model_checks else tuple(found),
        )
    return QualityReport(
        thresholds=thresholds,
        images=entries,
        profile=ran_profile,
        plumbing=plumbing,
        model_checks_applied=apply_model_checks,
        models=used_models,
        notes=tuple(notes),
    )
