"""BG-Sim: similarity of the backgrounds of a generation and of the reference background scene.

Following CogCanvas: mask every foreground subject in both images, take a ViT's (DINOv3's) patch
tokens, and compare the features of what is left. We pool the patch tokens over the background
instead of blacking pixels out: a black hole is itself content the encoder would see.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .similarity import cosine

#: A patch belongs to a region when strictly more than this fraction of its area is inside it.
PATCH_THRESHOLD = 0.5


def _area_weights(n_pixels: int, n_patches: int) -> np.ndarray:
    """(n_patches, n_pixels): fraction of each patch's extent that each pixel covers (rows sum to 1).

    Patch p spans pixels [p * n_pixels / n_patches, (p + 1) * n_pixels / n_patches), so sizes that
    do not divide evenly are handled exactly, like an area (box) resize.
    """
    edges = np.arange(n_patches + 1) * (n_pixels / n_patches)
    lo, hi = edges[:-1, None], edges[1:, None]
    pix = np.arange(n_pixels)[None, :]
    overlap = np.clip(np.minimum(hi, pix + 1) - np.maximum(lo, pix), 0.0, None)
    return overlap / (n_pixels / n_patches)


def mask_to_patch_grid(mask: Any, grid: tuple[int, int]) -> np.ndarray:
    """Area-average a pixel mask ``(H, W)`` onto a patch grid ``(h, w)``: the fraction of each patch inside.

    The mask must show the same field of view as the tokens: if the model's processor centre-crops,
    crop the mask the same way first (a plain resize needs nothing, area fractions do not depend on
    resolution).

    >>> mask_to_patch_grid([[1, 1, 0, 0], [1, 0, 0, 0]], (1, 2)).tolist()
    [[0.75, 0.0]]
    """
    m = np.asarray(mask, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"mask_to_patch_grid: expected an (H, W) mask, got shape {m.shape}")
    h, w = grid
    return _area_weights(m.shape[0], h) @ m @ _area_weights(m.shape[1], w).T


def pooled_masked_features(patch_tokens: Any, mask: Any, threshold: float = PATCH_THRESHOLD) -> np.ndarray:
    """Mean of the patch tokens whose patch lies mostly inside ``mask``.

    ``patch_tokens`` ``(h, w, d)``: the patch tokens only, on their grid (drop the CLS token and any
    register tokens, e.g. DINOv3's 4, then reshape). ``mask`` ``(H, W)`` bool at any resolution.
    A patch counts when more than ``threshold`` (default half) of its area is inside the mask.
    If no patch counts, the result is a vector of NaN: there is nothing to pool, and no number is
    made up for it.

    >>> tokens = np.arange(8.0).reshape(2, 2, 2)  # 2x2 grid of 2-d tokens
    >>> pooled_masked_features(tokens, [[True, False], [True, False]]).tolist()
    [2.0, 3.0]
    """
    tokens = np.asarray(patch_tokens, dtype=np.float64)
    if tokens.ndim != 3:
        raise ValueError(f"pooled_masked_features: expected (h, w, d) patch tokens, got shape {tokens.shape}")
    inside = mask_to_patch_grid(mask, tokens.shape[:2]) > threshold
    if not inside.any():
        return np.full(tokens.shape[2], np.nan)
    return tokens[inside].mean(axis=0)


def bg_sim(
    gen_tokens: Any,
    gen_fg_mask: Any,
    ref_tokens: Any,
    ref_fg_mask: Any | None = None,
    threshold: float = PATCH_THRESHOLD,
) -> float:
    """BG-Sim for one image: cosine of the background-pooled patch features of generation and reference.

    Background = NOT foreground, where the foreground mask is the union of all subject masks.
    ``ref_fg_mask=None`` means the reference has no foreground (a clean background photo). Returns NaN
    when either image has no background patch (e.g. an all-foreground generation): BG-Sim is then
    undefined, and aggregates must count such images rather than score them.

    >>> tok = np.ones((2, 2, 3))
    >>> round(bg_sim(tok, np.zeros((4, 4), bool), tok), 6)
    1.0
    >>> bg_sim(tok, np.ones((4, 4), bool), tok)
    nan
    """
    gen_bg = ~np.asarray(gen_fg_mask, dtype=bool)
    ref_tok = np.asarray(ref_tokens, dtype=np.float64)
    ref_bg = (
        np.ones(ref_tok.shape[:2], dtype=bool) if ref_fg_mask is None else ~np.asarray(ref_fg_mask, dtype=bool)
    )
    gen_feat = pooled_masked_features(gen_tokens, gen_bg, threshold)
    ref_feat = pooled_masked_features(ref_tok, ref_bg, threshold)
    if np.isnan(gen_feat).any() or np.isnan(ref_feat).any():
        return float("nan")
    return float(cosine(gen_feat, ref_feat))
