"""The feature store: every unique input is computed once per model, in batches, and cached on disk.

References are shared by many prompts (a CogCanvas identity appears in dozens of prompts), so the
scorer never encodes "the reference of prompt k": it collects the *unique* images of a run by content
hash, asks the store for their features, and the metrics are then matrix math over cached arrays.

Cache layout: ``<root>/<model key>/v<feature version>/<hash[:2]>/<hash>.npz``, one file per input,
written to a temporary name and renamed, so a crash never leaves a half-written entry and a rerun
recomputes only what is missing. The key of a plain image feature is the sha256 of the encoded image
bytes; conditioned features (detections for given text queries, masks for given boxes) use a key that
hashes the image together with the condition.

Every image input is decoded once, at the bounded working size (``images.working_image``), and the
version folder of an image-derived feature carries the working-size rule (``v<version>-<rule>``), so
features computed under another rule (say, at full size, before there was one) are never read back.
Models that return pixel positions (``pixel_coordinate_features``: face boxes and landmarks) have them
scaled back to the submitted image's pixels before they are stored.

Decoding and preprocessing run in DataLoader workers; the model runs in the main process on the chosen
device. Under ``accelerate launch`` the missing inputs are split across processes and the features
gathered through the process group (``accelerate.utils.gather_object``), never by polling files.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

Features = dict[str, np.ndarray]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def image_feature_version(version: int) -> str:
    """The cache version of a feature computed from an image: the model's own version and the
    working-size rule (``images.WORKING_RULE``) it was computed under."""
    from idbench.evaluate_pkg.images import WORKING_RULE

    return f"{version}-{WORKING_RULE}"


def condition_hash(*parts: str | bytes) -> str:
    """One key for an input made of several parts (an image hash and the queries it is asked about)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))  # length-prefixed: ("ab","c") != ("a","bc")
        digest.update(data)
    return digest.hexdigest()


@dataclass
class StoreStats:
    """What a run did, per model key: distinct features read from the cache (computed by an earlier
    run) vs computed now. A feature two metrics ask for, or one computed earlier in the same run and
    read again, is counted once, where it came from first."""

    _cached: dict[str, set[str]] = field(default_factory=dict)
    _computed: dict[str, set[str]] = field(default_factory=dict)

    def add(self, key: str, read: Iterable[str], computed: Iterable[str]) -> None:
        done = self._computed.setdefault(key, set())
        done.update(computed)
        self._cached.setdefault(key, set()).update(k for k in read if k not in done)

    @property
    def cached(self) -> dict[str, int]:
        return {key: len(keys) for key, keys in self._cached.items()}

    @property
    def computed(self) -> dict[str, int]:
        return {key: len(keys) for key, keys in self._computed.items()}


class FeatureStore:
    def __init__(self, root: str | Path, accelerator: Any = None):
        self.root = Path(root)
        self.accelerator = accelerator  # an accelerate.Accelerator for multi-process runs, or None
        self.stats = StoreStats()

    def counts(self) -> dict[str, Any]:
        """What ``aggregates.json``'s ``features`` says: the distinct features read and computed, per model key."""
        return {"cached": self.stats.cached, "computed": self.stats.computed}

    # --- the cache --------------------------------------------------------------------------------

    def _path(self, model_key: str, version: int | str, item_key: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._@-]+", "_", model_key)
        return self.root / safe / f"v{version}" / item_key[:2] / f"{item_key}.npz"

    def load(self, model_key: str, version: int | str, item_key: str) -> Features | None:
        path = self._path(model_key, version, item_key)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}

    def save(self, model_key: str, version: int | str, item_key: str, features: Features) -> None:
        path = self._path(model_key, version, item_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                np.savez(stream, **{k: np.asarray(v) for k, v in features.items()})
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    # --- computing what is missing -----------------------------------------------------------------

    def cached_map(
        self,
        model_key: str,
        version: int | str,
        items: Mapping[str, Any],
        compute: Callable[[list[str], list[Any]], list[Features]],
        batch_size: int,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Features]:
        """Features for every ``items`` key: cached ones read, the others computed in batches and saved.

        ``compute(keys, payloads)`` returns one feature dict per payload.
        """

        def batches(keys: list[str]) -> Iterator[tuple[list[str], list[Features]]]:
            for start in range(0, len(keys), batch_size):
                chunk = keys[start : start + batch_size]
                yield chunk, compute(chunk, [items[k] for k in chunk])

        return self.cached_batches(model_key, version, items, batches, progress)

    def cached_batches(
        self,
        model_key: str,
        version: int | str,
        items: Mapping[str, Any],
        compute_batches: Callable[[list[str]], Iterable[tuple[list[str], list[Features]]]],
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Features]:
        """Like :meth:`cached_map`, with the batching left to ``compute_batches(missing_keys)``.

        Each batch is saved as soon as it arrives, so an interrupted run keeps everything finished
        before the interruption and a rerun computes only the rest.
        """
        results: dict[str, Features] = {}
        missing: list[str] = []
        for key in items:
            found = self.load(model_key, version, key)
            if found is None:
                missing.append(key)
            else:
                results[key] = found
        computed: dict[str, Features] = {}
        for keys, features in compute_batches(self._my_share(self._missing_anywhere(missing))):
            for key, feature in zip(keys, features, strict=True):
                self.save(model_key, version, key, feature)
                computed[key] = feature
            if progress is not None:
                progress(len(keys))
        results.update(self._gather(computed))
        missing_set = set(missing)
        self.stats.add(model_key, read=[k for k in items if k not in missing_set], computed=missing)
        return results

    def _missing_anywhere(self, missing: list[str]) -> list[str]:
        """The keys missing on any process, in one order everywhere.

        Processes on different machines may see different caches; splitting each one's own list
        would leave an input that one process lacks to another that has it cached and skips it.
        """
        if self.accelerator is None or self.accelerator.num_processes == 1:
            return sorted(missing)
        from accelerate.utils import gather_object

        return sorted({key for part in gather_object([missing]) for key in part})

    def _my_share(self, keys: list[str]) -> list[str]:
        if self.accelerator is None or self.accelerator.num_processes == 1:
            return keys
        return keys[self.accelerator.process_index :: self.accelerator.num_processes]

    def _gather(self, computed: dict[str, Features]) -> dict[str, Features]:
        """Every process's newly computed features, on every process (one collective call)."""
        if self.accelerator is None or self.accelerator.num_processes == 1:
            return computed
        from accelerate.utils import gather_object

        merged: dict[str, Features] = {}
        for part in gather_object([computed]):
            merged.update(part)
        return merged

    # --- images through a plain encoder ------------------------------------------------------------

    def encode_images(
        self,
        encoder: Any,
        images: Mapping[str, Callable[[], bytes]],
        *,
        batch_size: int = 32,
        num_workers: int = 0,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Features]:
        """Features of ``encoder`` for every image; ``images`` maps content hash -> a bytes loader
        (an ``images.ImageSource`` names the image in errors and marks it as submitted).

        Decoding to the working size (``idbench.evaluate_pkg.images.working_image``) and the encoder's
        own preprocessing run in ``num_workers`` DataLoader workers; ``encode_batch`` runs here, on the
        encoder's device. An image whose content cannot be decoded raises ``ImageError`` naming it, here
        in the main process (not as DataLoader's wrapped worker exception).
        """
        coordinate_features = tuple(getattr(encoder, "pixel_coordinate_features", ()))

        def compute_batches(keys: list[str]) -> Iterator[tuple[list[str], list[Features]]]:
            if not keys:
                return
            loader = DataLoader(
                _PreprocessedImages(keys, [images[k] for k in keys], encoder.preprocess),
                batch_size=batch_size,
                num_workers=num_workers,  # workers decode the next batches while the model runs
                collate_fn=_KeyedCollate(encoder.collate),
                multiprocessing_context="fork" if num_workers and _fork_available() else None,
            )
            for batch_keys, batch, geometry in loader:
                if isinstance(batch, _DecodeFailure):
                    batch.throw()
                with torch.inference_mode():
                    features = encoder.encode_batch(batch)
                if coordinate_features:
                    features = [_in_original_pixels(f, coordinate_features, *g) for f, g in zip(features, geometry)]
                yield batch_keys, features

        version = image_feature_version(encoder.feature_version)
        return self.cached_batches(encoder.key, version, images, compute_batches, progress)

    def encode_texts(self, encoder: Any, texts: Iterable[str], batch_size: int = 256) -> dict[str, np.ndarray]:
        """Text embeddings keyed by the text itself (cached by its sha256)."""
        unique = {text_hash(t): t for t in texts}

        def compute(keys: list[str], batch: list[str]) -> list[Features]:
            with torch.inference_mode():
                embeddings = encoder.encode_texts(batch)
            return [{"embedding": row} for row in embeddings]

        features = self.cached_map(f"{encoder.key}-text", encoder.feature_version, unique, compute, batch_size)
        return {text: features[key]["embedding"] for key, text in unique.items()}


@dataclass(frozen=True)
class _DecodeFailure:
    """An ImageError raised in a DataLoader worker, carried to the main process as data: DataLoader
    would re-raise it as a RuntimeError with the worker's traceback in its message."""

    where: str
    reason: str

    def throw(self) -> None:
        from idbench.evaluate_pkg.images import ImageError

        raise ImageError(self.where, self.reason)


def _in_original_pixels(
    features: Features, names: Sequence[str], working: tuple[int, int], original: tuple[int, int]
) -> Features:
    """``features`` with the pixel positions of ``names`` moved from the working image to the original."""
    from idbench.evaluate_pkg.images import scale_to_original

    if working == original:
        return features
    return {
        name: scale_to_original(value, working, original) if name in names else value
        for name, value in features.items()
    }


class _PreprocessedImages(Dataset):
    """Decodes (at the working size) and preprocesses one image per index (runs inside DataLoader workers)."""

    def __init__(self, keys: Sequence[str], loaders: Sequence[Callable[[], bytes]], preprocess: Callable):
        self.keys, self.loaders, self.preprocess = list(keys), list(loaders), preprocess

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int):
        from idbench.evaluate_pkg.images import ImageError, load_working_image, original_size

        key = self.keys[index]
        try:
            image = load_working_image(self.loaders[index], key)
        except ImageError as err:
            return key, _DecodeFailure(err.where, err.reason), None
        return key, self.preprocess(image), (image.size, original_size(image))


class _KeyedCollate:
    """Keeps each batch's content hashes and image sizes (working, original) next to the encoder's own
    collated batch; a batch holding an image that failed to decode is that failure instead."""

    def __init__(self, collate: Callable):
        self.collate = collate

    def __call__(self, items: list[tuple[str, Any, Any]]) -> tuple[list[str], Any, list[Any]]:
        keys = [key for key, _, _ in items]
        failed = [item for _, item, _ in items if isinstance(item, _DecodeFailure)]
        if failed:
            return keys, failed[0], []
        return keys, self.collate([item for _, item, _ in items]), [geometry for _, _, geometry in items]


def _fork_available() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()
