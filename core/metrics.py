"""The metric math as ``evaluate`` modules, by name, wherever idbench is installed.

``evaluate.load`` takes a folder; :func:`path` gives the installed folder of one of ours, so this works
from any directory (a wheel install has no repository to point into)::

    import evaluate
    import idbench.metrics

    clip_t = evaluate.load(str(idbench.metrics.path("clip_t")))   # or: idbench.metrics.load("clip_t")
    clip_t.compute(image_embeddings=[[1.0, 0.0]], text_embeddings=[[1.0, 1.0]])   # clip_t ~ 0.7071

``NAMES`` lists the modules; an unknown name raises :class:`UnknownMetricError` (a ``KeyError``)
whose message lists them. The modules take precomputed features, never images (see
:mod:`idbench.evaluate_pkg.metrics`); :func:`embed_images` and :func:`embed_texts` make those features
from images and texts with the profile's own models, decoded as the scorer decodes them::

    dino = idbench.metrics.embed_images(["gen.png", "ref.png"], model="dinov2", profile="paper")
    idbench.metrics.load("dino_sim").compute(generated_embeddings=[dino[0]], reference_embeddings=[[dino[1]]])

(``profile="tiny"`` gives random weights: a plumbing check, never a score.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from idbench.evaluate_pkg.metrics import METRIC_NAMES as NAMES
from idbench.evaluate_pkg.metrics import UnknownMetricError, load
from idbench.evaluate_pkg.metrics import metric_path as path

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = ["IMAGE_MODELS", "NAMES", "UnknownMetricError", "embed_images", "embed_texts", "load", "path"]

#: The profile roles whose encoders give one vector per image, and its feature name: CLIP's projected
#: embedding (CLIP-I, CLIP-T), DINOv2's CLS token (DINO-Sim, SCR).
IMAGE_MODELS = {"clip": "embedding", "dinov2": "cls"}


def _encoder(model: str, profile: str, device: str):
    from idbench.errors import IdbenchError
    from idbench.evaluate_pkg.context import check_device
    from idbench.evaluate_pkg.models.registry import load_model, resolve_profile

    if model not in IMAGE_MODELS:
        raise IdbenchError(f"model {model!r}: expected one of {', '.join(IMAGE_MODELS)}")
    check_device(device)
    return load_model(resolve_profile(profile)[model].name, device=device)


def embed_images(
    images: Iterable[str | Path | Image.Image],
    *,
    model: str = "dinov2",
    profile: str = "paper",
    device: str = "cpu",
    batch_size: int = 16,
) -> np.ndarray:
    """(n, d) float32 image embeddings (not normalised) of ``images`` (files or PIL images) by the profile's
    ``model`` (``clip`` or ``dinov2``): what the metric modules take as ``*_embeddings``. Files are decoded
    and reduced to the scorer's working size (:func:`idbench.evaluate_pkg.images.working_image`)."""
    import numpy as np
    from PIL import Image as PILImage

    from idbench.evaluate_pkg.images import working_image
    from idbench.evaluate_pkg.models.registry import batched

    encoder = _encoder(model, profile, device)
    decoded = []
    for item in images:
        if isinstance(item, PILImage.Image):
            decoded.append(item.convert("RGB"))
        else:
            decoded.append(working_image(Path(item).read_bytes(), where=str(item)))
    vectors = []
    for chunk in batched(decoded, batch_size):
        batch = encoder.collate([encoder.preprocess(image) for image in chunk])
        vectors += [features[IMAGE_MODELS[model]] for features in encoder.encode_batch(batch)]
    return np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, 0), np.float32)


def embed_texts(texts: Iterable[str], *, profile: str = "paper", device: str = "cpu") -> np.ndarray:
    """(n, d) float32 CLIP text embeddings (not normalised; 77 tokens at most) by the profile's CLIP:
    ``clip_t``'s ``text_embeddings``."""
    return _encoder("clip", profile, device).encode_texts(list(texts))
