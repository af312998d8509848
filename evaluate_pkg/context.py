"""What a benchmark suite sees while scoring: the data, the submission, models by role, cached features.

The suites (``evaluate_pkg/suites/``) ask for features of *inputs* (a generation, a reference, a crop)
by role ("clip", "dinov2", ...); the context turns every request into one call to the feature store
over the unique inputs, so each image is encoded once per model whatever number of prompts share it.

Every model gets the *working image* (``images.working_image``: decoded once, longest side at most
``images.WORKING_SIDE``), never the submitted resolution. Pixel positions are always in the submitted
image's pixels: detector boxes are scaled up from the working image before they are cached, the
segmenter's boxes are scaled down onto it, and :func:`crop_bytes` maps a box onto the working image
before cropping. Masks are at the working image's size (BG-Sim area-averages them onto the patch grid,
so only their aspect matters). Generation loaders are ``images.ImageSource``s that name the prompt, the
seed and the file, so an image whose content cannot be decoded fails its submission with that name.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from idbench.errors import IdbenchError
from idbench.evaluate_pkg.data import BenchmarkData
from idbench.evaluate_pkg.features import Features, FeatureStore, condition_hash, image_feature_version
from idbench.evaluate_pkg.images import (
    ImageSource,
    content_hash,
    load_working_image,
    original_size,
    scale_to_original,
    scale_to_working,
    working_image,
)
from idbench.evaluate_pkg.models.detection import square_crop
from idbench.evaluate_pkg.models.registry import check_available, get_card, load_model, resolve_profile
from idbench.evaluate_pkg.submission import Submission

# Images a judged metric sends per batch: each batch's requests run concurrently; only one batch of
# images is in memory at a time.
JUDGE_CHUNK = 512


@dataclass(frozen=True)
class Result:
    prompt_id: str
    seed: int
    metric: str
    value: float
    subject: str = ""  # a reference slot / subject id for per-subject values, "" for the whole image


@dataclass
class ScoreOptions:
    profile: str = "paper"
    metrics: tuple[str, ...] | None = None  # None: the whole suite
    device: str = "cpu"
    dtype: str | None = None  # default: bf16 on CUDA, fp32 on the CPU
    batch_size: int = 32
    num_workers: int = 0
    models_dir: str | None = None
    # The VLM judge for the judged metrics: a JudgeConfig (the runner builds the client and its answer
    # cache) or any object with the Judge protocol (tests, notebooks). None: judged metrics are not run.
    judge: Any = None


class DeviceError(IdbenchError, ValueError):
    """A --device this machine does not have (no GPU, a GPU index past the last one) or cannot parse."""


def device_choices() -> list[str]:
    """The devices this machine can score on: ``cpu``, each CUDA GPU (``cuda``, ``cuda:0`` ...), ``mps``."""
    import torch

    choices = ["cpu"]
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        choices += ["cuda"] + [f"cuda:{i}" for i in range(count)]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        choices.append("mps")
    return choices


def check_device(device: str) -> None:
    """Refuse a device this machine cannot score on, before any model loads (one error, no traceback).

    Without it a missing GPU surfaced deep inside the first model's ``.to(device)`` as a long CUDA
    traceback. Only the devices the models are written for count (cpu, cuda[:i], mps); torch's other
    device types (xpu, meta, ...) are refused with the same list.
    """
    import torch

    choices = device_choices()
    what = f"--device {device!r}"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError(f"{what} is not a device name; this machine has: {', '.join(choices)}") from None
    if parsed.type == "cpu":
        return
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"{what}: no CUDA GPU is available on this machine (torch sees none); this machine has: "
                f"{', '.join(choices)}"
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise DeviceError(
                f"{what}: this machine has {torch.cuda.device_count()} CUDA GPU(s); choose one of: {', '.join(choices)}"
            )
        return
    if parsed.type == "mps":
        if "mps" not in choices:
            raise DeviceError(
                f"{what}: Apple's MPS backend is not available on this machine; this machine has: {', '.join(choices)}"
            )
        return
    raise DeviceError(f"{what}: idbench scores on cpu, cuda or mps only; this machine has: {', '.join(choices)}")


# Loaded models, held for the life of the process and shared by every Models of it: a second scoring
# call (a notebook's second idbench.score, a worker's next job, the next test) skips the warm-up, which
# was most of a small run (18 s for the first call of a test file, 9 s for the second). Keyed by what
# decides the weights and where they run; a tiny model also by its folder's time stamp, so remaking it
# loads it again. :func:`release_models` lets them go.
_LOADED: dict[tuple[str, ...], Any] = {}


def _model_key(card: Any, options: ScoreOptions) -> tuple[str, ...]:
    from idbench.evaluate_pkg.models import registry

    root = registry._root(options.models_dir)
    stamp = ""
    if registry.is_plumbing(card):
        folder = registry.ensure_tiny(card, root)
        stamp = str(folder.stat().st_mtime_ns)
    return (
        card.name,
        str(options.device),
        str(options.dtype),
        str(root.resolve()),
        str(registry.hub_cache_dir()),
        stamp,
    )


def release_models() -> int:
    """Drop every model this process holds (and the GPU memory PyTorch caches for them); returns how many."""
    import gc

    count = len(_LOADED)
    _LOADED.clear()
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - the scoring extra is installed wherever a model was loaded
        pass
    return count


class Models:
    """The profile's models, loaded on first use and kept for the process (:func:`release_models`)."""

    def __init__(self, options: ScoreOptions):
        # Every scoring path (score, baseline retrieval-*, the workers, curation) makes its Models here
        # first: a device the machine lacks is refused before any model or submission work.
        check_device(options.device)
        self.options = options
        self.cards = resolve_profile(options.profile)
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, role: str) -> Any:
        if role not in self._loaded:
            card = self.cards[role]
            key = _model_key(card, self.options)
            if key not in _LOADED:
                _LOADED[key] = load_model(
                    card.name, device=self.options.device, dtype=self.options.dtype, models_dir=self.options.models_dir
                )
            self._loaded[role] = _LOADED[key]
        return self._loaded[role]

    def preload(self, roles: Iterable[str]) -> None:
        """Load every model of ``roles`` now; one error lists all that are missing, before any work."""
        from idbench.evaluate_pkg.models.base import ModelNotAvailableError

        missing = []
        for role in sorted(set(roles)):
            try:
                self[role]
            except ModelNotAvailableError as err:
                missing.append(str(err))
        if len(missing) == 1:
            raise ModelNotAvailableError(missing[0])
        if missing:
            from idbench.evaluate_pkg.models.registry import ALL_AT_ONCE

            each = [m.replace("\n" + ALL_AT_ONCE, "") for m in missing]
            tail = f"\n\n{ALL_AT_ONCE}" if any(ALL_AT_ONCE in m for m in missing) else ""
            raise ModelNotAvailableError(f"{len(missing)} models are missing:\n\n" + "\n\n".join(each) + tail)

    def missing(self, roles: Iterable[str]) -> dict[str, str]:
        """Card name -> why it cannot be loaded, for the models of ``roles`` not on this machine.

        Loads nothing (``registry.check_available``); a worker asks this before it claims a job.
        """
        from idbench.evaluate_pkg.models.base import ModelNotAvailableError

        out = {}
        for role in sorted(set(roles)):
            card = self.cards[role]
            try:
                check_available(card, self.options.models_dir)
            except ModelNotAvailableError as err:
                out[card.name] = str(err)
        return out

    def used(self, roles: Iterable[str] | None = None) -> dict[str, dict]:
        """Role -> identity (name, Hub id, revision, weights key) of the loaded models (of ``roles``)."""
        out = {}
        for role, model in self._loaded.items():
            if roles is not None and role not in roles:
                continue
            card = get_card(self.cards[role].name)
            out[role] = {"name": card.name, "hub_id": card.hub_id, "revision": card.revision, "key": model.key}
        return out


@dataclass
class Context:
    data: BenchmarkData
    submission: Submission
    store: FeatureStore
    models: Models
    options: ScoreOptions
    progress: Callable[[str, int], Callable[[int], None]] = lambda stage, total: lambda n: None
    notes: dict[str, Any] = field(default_factory=dict)
    judge: Any = None  # a Judge, when judged metrics are computed
    # (prompt_id, seed, metric, JSON-ready dict): why a judge decided what it did, for the model page.
    evidence: list[tuple[str, int, str, dict]] = field(default_factory=list)
    # summary["copies"] of the copy check (idbench.evaluate_pkg.copies), once it has run
    copies: dict[str, Any] | None = None

    # --- inputs by content hash ---------------------------------------------------------------------

    def generation_keys(self) -> dict[tuple[str, int], str]:
        """(prompt_id, seed) -> content hash of the generated image."""
        return {(e.prompt_id, e.seed): e.content_hash for e in self.submission.entries}

    def generation_loaders(self) -> dict[str, Callable[[], bytes]]:
        """Content hash -> the generated image's loader, naming its prompt, seed and file in errors."""
        return {
            e.content_hash: ImageSource(e.data, where=_generation_name(e), submitted=True)
            for e in self.submission.entries
        }

    def generation_bytes(self, chunk: int | None = None) -> Iterator[dict[tuple[str, int], bytes]]:
        """(prompt_id, seed) -> the generated image's bytes, for the judge (which sends encoded images),
        ``chunk`` images at a time (all at once when None), so a large submission is never in memory whole.
        """
        entries = list(self.submission.entries)
        step = chunk or max(len(entries), 1)
        for start in range(0, len(entries), step):
            yield {(e.prompt_id, e.seed): e.data() for e in entries[start : start + step]}

    def reference_key(self, reference_id: str) -> str:
        return content_hash(self.data.reference_bytes[reference_id])

    def reference_loaders(self, reference_ids: Sequence[str]) -> dict[str, Callable[[], bytes]]:
        blobs = self.data.reference_bytes
        return {
            content_hash(blobs[r]): ImageSource(lambda r=r: blobs[r], where=f"reference {r}") for r in reference_ids
        }

    # --- features ----------------------------------------------------------------------------------

    def image_features(
        self, role: str, loaders: Mapping[str, Callable[[], bytes]], encoder: Any = None
    ) -> dict[str, Features]:
        encoder = encoder if encoder is not None else self.models[role]
        tick = self.progress(f"{role} features", len(loaders))
        features = self.store.encode_images(
            encoder, loaders, batch_size=self.options.batch_size, num_workers=self.options.num_workers, progress=tick
        )
        end_stage(tick)
        return features

    def text_features(self, role: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        # batched like the images (--batch-size): with batches of one, no text's embedding depends on
        # which other texts shared its batch, so a sharded run's features are a single process's
        return self.store.encode_texts(self.models[role], texts, batch_size=self.options.batch_size)

    def detections(
        self, loaders: Mapping[str, Callable[[], bytes]], queries: Mapping[str, Sequence[str]]
    ) -> dict[str, Features]:
        """Detector boxes for each image and its text queries: {"boxes": (k,4), "scores": (k,), "labels": (k,)}.

        ``labels`` index into that image's query list. Keyed by image hash + queries, so the same image
        asked about other objects is a different cache entry.
        """
        detector = self.models["detector"]
        items = {condition_hash(key, *queries[key]): (key, tuple(queries[key])) for key in loaders}

        def compute(keys: list[str], payloads: list[tuple[str, tuple[str, ...]]]) -> list[Features]:
            images = [load_working_image(loaders[k], k) for k, _ in payloads]
            found = detector.detect(images, [list(q) for _, q in payloads])
            out = []
            for (_, query), detections, image in zip(payloads, found, images):
                boxes = np.array([d.box for d in detections], dtype=np.float32).reshape(-1, 4)
                out.append(
                    {
                        "boxes": scale_to_original(boxes, image.size, original_size(image)),
                        "scores": np.array([d.score for d in detections], dtype=np.float32),
                        "labels": np.array(
                            [query.index(d.label) if d.label in query else -1 for d in detections], dtype=np.int64
                        ),
                    }
                )
            return out

        tick = self.progress("detections", len(items))
        version = image_feature_version(detector.feature_version)
        by_condition = self.store.cached_map(detector.key, version, items, compute, self.options.batch_size, tick)
        end_stage(tick)
        return {image_key: by_condition[cond] for cond, (image_key, _) in items.items()}

    def foreground_masks(
        self, loaders: Mapping[str, Callable[[], bytes]], boxes: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Union of the segmenter's masks for each image's boxes (in the submitted image's pixels), (H, W)
        bool at the working image's size (the submitted size when that is within ``WORKING_SIDE``)."""
        segmenter = self.models["segmenter"]
        items = {condition_hash(key, np.asarray(boxes[key], dtype=np.float32).tobytes()): key for key in loaders}

        def compute(keys: list[str], image_keys: list[str]) -> list[Features]:
            images = [load_working_image(loaders[k], k) for k in image_keys]
            prompts = [
                scale_to_working(np.asarray(boxes[k], dtype=np.float32).reshape(-1, 4), img.size, original_size(img))
                for k, img in zip(image_keys, images)
            ]
            masks = segmenter.segment(images, prompts)
            return [
                {"mask": (m.any(axis=0) if len(m) else np.zeros(img.size[::-1], dtype=bool))}
                for m, img in zip(masks, images)
            ]

        tick = self.progress("masks", len(items))
        version = image_feature_version(segmenter.feature_version)
        by_condition = self.store.cached_map(segmenter.key, version, items, compute, self.options.batch_size, tick)
        end_stage(tick)
        return {image_key: by_condition[cond]["mask"] for cond, image_key in items.items()}


def end_stage(tick: Callable[[int], None]) -> None:
    """End a progress stage now (``idbench.progress``): cached items never tick, so its count may stay
    below the total, and its done line should not wait for the next stage to start."""
    close = getattr(tick, "close", None)
    if close is not None:
        close()


def _generation_name(entry: Any) -> str:
    """How errors name a generated image: its prompt id and seed, and its file when the entry knows it."""
    source = getattr(entry, "source", None)
    return f"prompt_id {entry.prompt_id!r} seed {entry.seed}" + (f", file {source}" if source else "")


def crop_bytes(
    source: bytes | Image.Image, box: Sequence[float], keep: float = 1.0, pad: float = 0.05, *, where: str = "crop"
) -> bytes:
    """PNG bytes of a detector box padded to a square (``models.detection.square_crop``): a crop becomes
    an input of its own (hashed and cached). ``keep``: the fraction of a square the encoder's processor
    keeps (``encoder.square_keep()``), so its centre crop removes only padding, never the subject.

    ``box`` is in the submitted image's pixels; the crop is cut from the working image (the box mapped
    onto it), so a crop is never larger than the working image, whatever the submitted resolution.
    ``source`` is the image's encoded bytes, or its working image already decoded (``working_image``):
    a generation with several crops is then decoded once, not once per crop (on the demo's CogCanvas
    runs, decoding a generation per crop was 7 % of the scoring time).
    """
    image = source if isinstance(source, Image.Image) else working_image(source, where=where)
    box_on_image = scale_to_working(np.asarray(box, dtype=np.float32).reshape(4), image.size, original_size(image))
    buffer = io.BytesIO()
    square_crop(image, box_on_image, pad=pad, keep=keep).save(buffer, format="PNG")
    return buffer.getvalue()


def image_size(data: bytes) -> tuple[int, int]:
    """The upright (EXIF orientation applied) size of an encoded image, read from its header: the
    frame of every box and landmark the scorer stores."""
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        orientation = image.getexif().get(0x0112, 1)
    return (height, width) if orientation in (5, 6, 7, 8) else (width, height)
