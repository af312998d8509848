"""The LAION aesthetic predictor v2 head, evaluated in numpy (no torch needed to score).

The head (christophschuhmann/improved-aesthetic-predictor, e.g. ``sac+logos+ava1-l14-linearMSE.pth``)
is ``nn.Sequential(Linear(768, 1024), Dropout(0.2), Linear(1024, 128), Dropout(0.2), Linear(128, 64),
Dropout(0.1), Linear(64, 16), Linear(16, 1))``: no activations, so at inference (dropout off) it is one
affine map, but we apply the layers as stored so a state dict loads as is. Its input is the
L2-normalised CLIP ViT-L/14 image embedding (768-d, projected). It predicts a rating on the 1-10 scale
of the AVA / LAION ratings; how a paper rescales it for display is a display convention.

Not comparable with the aesthetic predictor v2.5 (a SigLIP-based model with its own head and scale):
scores from the two must never share a column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .similarity import l2_normalize

#: The Linear layers of the head as named in the original checkpoint, with their (out, in) shapes.
AESTHETIC_V2_LAYERS: tuple[tuple[str, tuple[int, int]], ...] = (
    ("layers.0", (1024, 768)),
    ("layers.2", (128, 1024)),
    ("layers.4", (64, 128)),
    ("layers.6", (16, 64)),
    ("layers.7", (1, 16)),
)


def _checked_layers(head_weights: Mapping[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) per layer as float64, after checking every key and shape."""
    layers = []
    for prefix, (out_dim, in_dim) in AESTHETIC_V2_LAYERS:
        for suffix, shape in (("weight", (out_dim, in_dim)), ("bias", (out_dim,))):
            key = f"{prefix}.{suffix}"
            if key not in head_weights:
                raise KeyError(
                    f"aesthetic head: missing {key!r}; expected the LAION aesthetic predictor v2 state dict "
                    f"(keys layers.{{0,2,4,6,7}}.{{weight,bias}}), got keys {sorted(head_weights)}"
                )
            found = np.shape(head_weights[key])
            if tuple(found) != shape:
                raise ValueError(f"aesthetic head: {key!r} has shape {tuple(found)}, expected {shape}")
        layers.append(
            (
                np.asarray(head_weights[f"{prefix}.weight"], dtype=np.float64),
                np.asarray(head_weights[f"{prefix}.bias"], dtype=np.float64),
            )
        )
    return layers


def aesthetic_score(head_weights: Mapping[str, Any], clip_emb: Any) -> np.ndarray:
    """Predicted aesthetic rating per image from its CLIP ViT-L/14 image embedding.

    ``head_weights``: the v2 head's state dict as arrays (numpy, or CPU torch tensors), keys
    ``layers.{0,2,4,6,7}.{weight,bias}``. ``clip_emb``: ``(n, 768)`` or ``(768,)``, the projected image
    embedding, raw; it is L2-normalised here as the original inference code does. Returns ``(n,)``.

    >>> w = {}
    >>> for name, (out_dim, in_dim) in AESTHETIC_V2_LAYERS:
    ...     w[f"{name}.weight"], w[f"{name}.bias"] = np.zeros((out_dim, in_dim)), np.zeros(out_dim)
    >>> w["layers.7.bias"] = np.array([5.0])
    >>> aesthetic_score(w, np.ones(768)).tolist()
    [5.0]
    """
    layers = _checked_layers(head_weights)
    x = np.atleast_2d(np.asarray(clip_emb, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != layers[0][0].shape[1]:
        raise ValueError(f"aesthetic_score: expected (n, 768) CLIP ViT-L/14 embeddings, got shape {x.shape}")
    x = l2_normalize(x)
    for weight, bias in layers:  # Dropout layers are the identity at inference
        x = x @ weight.T + bias
    return x[:, 0]
