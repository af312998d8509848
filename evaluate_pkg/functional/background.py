"""BG-Sim: similarity of the backgrounds of a generation and of the reference background scene.

Following CogCanvas: mask every foreground subject in both images, take a ViT's (DINOv3's) patch
tokens, and compare the features of what is left. How the masked tokens are pooled:

1. The pixel mask (the union of the subjects' SAM 2 masks, at the image's size) is area-averaged onto
   the encoder's patch grid (:func:`mask_to_patch_grid`): each patch gets the fraction of its area that
   is background. DINOv3's processor resizes the whole image to 224x224 (no crop), so the grid covers
   the whole image and the fractions do not depend on the resize.
2. A patch is background when strictly more than ``PATCH_THRESHOLD`` (half) of its area is: the token
   then mostly shows background (the majority rule, as a nearest-neighbour downsampling of the mask
   would decide). A stricter rule would lose the background around every subject; a looser one would
   pool tokens that mostly show a subject.
3. The background feature is the plain mean of the kept patch tokens (:func:`pooled_masked_features`),
   each kept patch weighing the same whatever its exact fraction: BG-Sim asks "is this the same
   scene", so every visible piece of scene counts once; the cosine of the two means is BG-Sim.

We pool tokens over the background instead of blacking pixels out before encoding: a black hole is
itself content the encoder would see, and it would differ between the two images wherever their
subjects stand. Tokens still carry some context from the subjects (attention is global): the masked
pool lowers, not removes, the subjects' influence.
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


def background_patches(fg_mask: Any, grid: tuple[int, int], threshold: float = PATCH_THRESHOLD) -> int:
    """How many patches of ``grid`` count as background (more than ``threshold`` of their area outside
    ``fg_mask``): 0 means an all-foreground image, for which BG-Sim is undefined.

    >>> background_patches([[1, 1, 0, 0], [1, 1, 0, 0]], (1, 2))
    1
    """
    return int((mask_to_patch_grid(~np.asarray(fg_mask, dtype=bool), grid) > threshold).sum())


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
    ref_bg = np.ones(ref_tok.shape[:2], dtype=bool) if ref_fg_mask is None else ~np.asarray(ref_fg_mask, dtype=bool)
    gen_feat = pooled_masked_features(gen_tokens, gen_bg, threshold)
    ref_feat = pooled_masked_features(ref_tok, ref_bg, threshold)
    if np.isnan(gen_feat).any() or np.isnan(ref_feat).any():
        return float("nan")
    return float(cosine(gen_feat, ref_feat))
