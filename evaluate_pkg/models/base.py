"""What every model the scorer uses looks like to the feature store.

A *model card* (registry entry) names a model: its family, its pinned Hub id and revision, and how to
get it. A *loaded encoder* turns decoded images into numpy features in two steps, so that the feature
store can batch and parallelise them:

- ``preprocess(image)`` runs in DataLoader workers, on the CPU, one image at a time, with the model's
  own processor (resize / crop / normalise exactly as the model was trained);
- ``encode_batch(batch)`` runs in the main process, on the chosen device and dtype, and returns one
  ``dict[str, np.ndarray]`` per image (float32 on the CPU), e.g. ``{"embedding": (d,)}`` or, for a face
  model, ``{"boxes": (k, 4), "embeddings": (k, d)}`` with ``k`` faces found (possibly 0).

``key`` identifies the weights (name + revision, or name + hash of locally made tiny weights): the
feature cache is keyed by image content hash + ``key`` + ``FEATURE_VERSION`` of the encoder, so changing
weights, revision or preprocessing never serves stale features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from idbench.errors import IdbenchError


class ModelNotAvailableError(IdbenchError, RuntimeError):
    """A model's weights are not on this machine; the message names the model and how to get it."""


@dataclass(frozen=True)
class ModelCard:
    name: str  # registry name, e.g. "clip-vit-l-14"
    family: str  # loader family: "clip", "dinov2", "dinov3", "aesthetic-v2", "arcface", "dlib-face", ...
    hub_id: str | None  # pinned Hub repository (None for models that ship in a Python package)
    revision: str | None  # pinned commit of that repository
    description: str
    how_to_get: str  # shown when the model is missing
    #: The weights' licence as their own page or release states it ("not stated on the model page" where
    #: it states none: never a guess), with the pages it was read from; the README's Models table shows both.
    license: str = ""
    license_sources: tuple[str, ...] = ()
    #: The Hub repo serves its files only to a logged-in user who accepted its licence there (registry.HUB_NOTES).
    gated: bool = False
    #: Where weights that are not on the Hub come from (a Hub card's source is its hub_id at its revision).
    source: str = ""


@runtime_checkable
class ImageEncoder(Protocol):
    key: str
    card: ModelCard
    #: bumped when preprocessing or the output format changes, so cached features are recomputed
    feature_version: int

    def preprocess(self, image: Image.Image) -> Any:
        """CPU work for one RGB image (runs in a DataLoader worker); returns what ``collate`` stacks."""

    def collate(self, items: Sequence[Any]) -> Any:
        """Stack preprocessed items into one batch (default: ``torch.stack``)."""

    def encode_batch(self, batch: Any) -> list[dict[str, np.ndarray]]:
        """Features for every image of the batch, as float32 numpy arrays on the CPU."""


@runtime_checkable
class TextEncoder(Protocol):
    key: str
    feature_version: int

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 embeddings, not normalised."""
