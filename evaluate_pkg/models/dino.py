"""DINOv2 and DINOv3 (transformers ``Dinov2Model`` / ``DINOv3ViTModel``): CLS and patch features.

Outputs per image:

- ``"cls"`` (d,): the final-layer-normed CLS token (``pooler_output``), the DINO-Sim / SCR feature;
- ``"patches"`` (h, w, d): the final-layer-normed patch tokens on the model's patch grid, for BG-Sim
  (pool them over a background mask). Only when the encoder was made with ``patches=True`` (the
  default for DINOv3, whose job is BG-Sim; ``encoder.with_patches()`` gives the other variant): a
  ViT-B patch grid is ~200x the size of a CLS vector in the feature cache.

The sequence DINOv3 returns is ``[CLS, 4 register tokens, patches...]``: the registers are not image
patches and are dropped (``1 + config.num_register_tokens`` prefix tokens), as DINOv2's single CLS is.

Preprocessing is the checkpoint's own ``preprocessor_config.json``: DINOv2 resizes the shortest side to
256 and centre-crops 224 (read with transformers' PIL backend, the resampling DINOv2 was evaluated
with); DINOv3 resizes to 224x224 without a crop (its processor exists only for the torchvision
backend). ``patch_box`` says which part of the original image the patch grid covers.

Tiny makers write the Hub layout of ``facebook/dinov2-base`` / ``facebook/dinov3-vitb16-pretrain-
lvd1689m`` (config.json in those repos' format, model.safetensors, preprocessor_config.json) with two
small layers; DINOv3 keeps its 4 register tokens so that their removal is exercised. With
``size="paper"`` they write the repos' own configurations unchanged (shipped as ``configs/dinov2-base.json``
and ``configs/dinov3-vitb16.json``), with random weights: the paper-random profile, for timing.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelCard

DINO_FILES = registry.HUB_FILES["dinov2-base"]  # the same three names for DINOv2 and DINOv3
#: Image processor backend per family: PIL where transformers has it (see the module docstring).
IMAGE_BACKENDS = {"dinov2": "pil", "dinov3": None}


class DinoEncoder:
    """CLS (+ optional patch-grid) features of a DINOv2 / DINOv3 backbone."""

    feature_version = 1

    def __init__(
        self,
        card: ModelCard,
        key: str,
        model: Any,
        image_processor: Any,
        *,
        device: torch.device,
        dtype: torch.dtype,
        patches: bool,
    ):
        self.card = card
        self.weights_key = key
        self.model = model
        self.image_processor = image_processor
        self.device = device
        self.dtype = dtype
        self.patches = patches
        config = model.config
        self.patch_size = int(config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0])
        # DINOv3 puts register tokens between CLS and the patches; DINOv2 has none.
        self.num_prefix_tokens = 1 + int(getattr(config, "num_register_tokens", 0) or 0)
        self.embedding_dim = int(config.hidden_size)

    @property
    def key(self) -> str:
        """Weights key, plus ``+patches`` when the output holds the patch grid (a different feature set)."""
        return f"{self.weights_key}+patches" if self.patches else self.weights_key

    def with_patches(self, patches: bool = True) -> DinoEncoder:
        """The same model (shared, not copied) with or without the patch-grid output."""
        variant = copy.copy(self)
        variant.patches = patches
        return variant

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        """(3, H, W) float32 pixel values for one image, by the checkpoint's own processor."""
        return self.image_processor(images=image.convert("RGB"), return_tensors="pt")["pixel_values"][0]

    def collate(self, items: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack(list(items))

    @torch.inference_mode()
    def encode_batch(self, batch: torch.Tensor) -> list[dict[str, np.ndarray]]:
        """``{"cls": (d,)}`` per image, plus ``"patches": (h, w, d)`` when ``self.patches``."""
        with registry.autocast(self.device, self.dtype):
            output = self.model(pixel_values=batch.to(self.device))
        cls = output.pooler_output.float().cpu().numpy()
        if not self.patches:
            return [{"cls": vector} for vector in cls]
        rows, cols = batch.shape[-2] // self.patch_size, batch.shape[-1] // self.patch_size
        tokens = output.last_hidden_state[:, self.num_prefix_tokens :, :].float().cpu().numpy()
        if tokens.shape[1] != rows * cols:
            raise RuntimeError(
                f"{self.card.name}: {tokens.shape[1]} patch tokens for a {rows}x{cols} grid "
                f"({self.num_prefix_tokens} prefix tokens dropped)"
            )
        grids = tokens.reshape(len(tokens), rows, cols, -1)
        return [{"cls": vector, "patches": grid} for vector, grid in zip(cls, grids)]

    def patch_box(self, width: int, height: int) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) of a ``width`` x ``height`` image that the patch grid covers.

        In the original image's pixels: the whole image for DINOv3 (plain resize), the centre crop for
        DINOv2 (shortest side to 256, crop 224). Lets BG-Sim map its mask onto the grid.
        """
        processor = self.image_processor
        size = processor.size
        resized_w, resized_h = width, height
        if processor.do_resize:
            if size.shortest_edge:
                short = size.shortest_edge
                if width <= height:
                    resized_w, resized_h = short, int(short * height / width)
                else:
                    resized_w, resized_h = int(short * width / height), short
            elif size.height and size.width:
                resized_w, resized_h = size.width, size.height
        left, top, crop_w, crop_h = 0, 0, resized_w, resized_h
        crop = getattr(processor, "crop_size", None)
        if getattr(processor, "do_center_crop", False) and crop is not None and crop.height and crop.width:
            crop_w, crop_h = crop.width, crop.height
            left, top = (resized_w - crop_w) // 2, (resized_h - crop_h) // 2
        # back to original pixels (multiply before dividing: whole-image boxes come out exact)
        return (
            left * width / resized_w,
            top * height / resized_h,
            (left + crop_w) * width / resized_w,
            (top + crop_h) * height / resized_h,
        )

    def square_keep(self) -> float:
        """The fraction of a square image's side that the processor keeps (DINOv2: 224 / 256, DINOv3: 1).

        Crops are padded to squares this much larger than their content (``detection.square_crop``), so
        the centre crop removes only padding.
        """
        side = 1024
        left, top, right, bottom = self.patch_box(side, side)
        return min(right - left, bottom - top) / side


def _load(
    card: ModelCard,
    model_class: Any,
    *,
    device: str | torch.device,
    dtype: torch.dtype | str | None,
    models_dir: str | os.PathLike | None,
    patches: bool,
) -> DinoEncoder:
    from transformers import AutoImageProcessor

    folder = registry.model_folder(card, DINO_FILES, models_dir)
    target = torch.device(device)
    model = model_class.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    model.to(target).eval()
    processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True, backend=IMAGE_BACKENDS[card.family])
    return DinoEncoder(
        card,
        registry.weights_key(card, folder, DINO_FILES),
        model,
        processor,
        device=target,
        dtype=registry.compute_dtype(target, dtype),
        patches=patches,
    )


def load_dinov2(
    card: ModelCard,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str | None = None,
    models_dir: str | os.PathLike | None = None,
    patches: bool = False,
) -> DinoEncoder:
    """A DINOv2 ``DinoEncoder`` (CLS only unless ``patches``) from local files only."""
    from transformers import Dinov2Model

    return _load(card, Dinov2Model, device=device, dtype=dtype, models_dir=models_dir, patches=patches)


def load_dinov3(
    card: ModelCard,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str | None = None,
    models_dir: str | os.PathLike | None = None,
    patches: bool = True,
) -> DinoEncoder:
    """A DINOv3 ``DinoEncoder`` (CLS + patch grid unless ``patches=False``) from local files only."""
    from transformers import DINOv3ViTModel

    return _load(card, DINOv3ViTModel, device=device, dtype=dtype, models_dir=models_dir, patches=patches)


# --- tiny checkpoints ------------------------------------------------------------------------------------

_TINY = {"hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2}

# The Hub repos' config.json and preprocessor_config.json, shipped as package data (configs/*.json, each
# with where it comes from); the tiny makers shrink the sizes, the paper-random ones keep them.
_DINOV2_SHIPPED = registry.paper_config("dinov2-base")
_DINOV3_SHIPPED = registry.paper_config("dinov3-vitb16")
#: config.json as facebook/dinov2-base serves it.
DINOV2_HUB_CONFIG: dict[str, Any] = _DINOV2_SHIPPED["config"]
#: preprocessor_config.json as facebook/dinov2-base serves it.
DINOV2_HUB_PREPROCESSOR: dict[str, Any] = _DINOV2_SHIPPED["preprocessor"]
#: config.json as facebook/dinov3-vitb16-pretrain-lvd1689m serves it.
DINOV3_HUB_CONFIG: dict[str, Any] = _DINOV3_SHIPPED["config"]
#: preprocessor_config.json as facebook/dinov3-vitb16-pretrain-lvd1689m serves it (a "fast" processor).
DINOV3_HUB_PREPROCESSOR: dict[str, Any] = _DINOV3_SHIPPED["preprocessor"]
_CLASSES = {"dinov2": "Dinov2Model", "dinov3": "DINOv3ViTModel"}


def dino_config(family: str, size: str = "tiny") -> dict[str, Any]:
    """config.json of a random DINOv2 / DINOv3: ``tiny`` (two small layers) or ``paper`` (ViT-B, real size)."""
    hub = {"dinov2": DINOV2_HUB_CONFIG, "dinov3": DINOV3_HUB_CONFIG}[family]
    if size == "paper":
        return dict(hub)
    if size == "tiny":
        shrink = {"mlp_ratio": 2} if family == "dinov2" else {"intermediate_size": 64}
        return {**hub, **_TINY, **shrink}
    raise ValueError(f"unknown size {size!r}; sizes: tiny, paper")


def _random(family: str, size: str, device: Any) -> Any:
    import contextlib

    import transformers

    config = transformers.AutoConfig.for_model(**dino_config(family, size))
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return getattr(transformers, _CLASSES[family])(config)


def random_dinov2(size: str = "tiny", device: Any = None) -> Any:
    """The ``Dinov2Model`` of :func:`dino_config` (``device="meta"``: shapes only, nothing allocated)."""
    return _random("dinov2", size, device)


def random_dinov3(size: str = "tiny", device: Any = None) -> Any:
    """The ``DINOv3ViTModel`` of :func:`dino_config` (``device="meta"``: shapes only, nothing allocated)."""
    return _random("dinov3", size, device)


def _make_tiny(path: Path, seed: int, model_class_name: str, config: dict, preprocessor: dict) -> None:
    import transformers

    path = Path(path)
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (path / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n", encoding="utf-8")
    model_class = getattr(transformers, model_class_name)
    loaded_config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(seed)
        model = model_class(loaded_config)
    registry.save_safetensors(model, path / "model.safetensors")


def make_tiny_dinov2(path: Path, seed: int, size: str = "tiny") -> None:
    """A random DINOv2 in facebook/dinov2-base's layout, tiny or (``size="paper"``) at ViT-B/14's real size.

    Deterministic for a given ``seed``.
    """
    _make_tiny(path, seed, _CLASSES["dinov2"], dino_config("dinov2", size), DINOV2_HUB_PREPROCESSOR)


def make_tiny_dinov3(path: Path, seed: int, size: str = "tiny") -> None:
    """A random DINOv3 (4 register tokens kept) in facebook/dinov3-vitb16-pretrain-lvd1689m's layout, tiny
    or (``size="paper"``) at ViT-B/16's real size. Deterministic for a given ``seed``."""
    _make_tiny(path, seed, _CLASSES["dinov3"], dino_config("dinov3", size), DINOV3_HUB_PREPROCESSOR)
