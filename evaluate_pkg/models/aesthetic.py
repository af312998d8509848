"""The LAION aesthetic predictor v2 head (christophschuhmann/improved-aesthetic-predictor).

An MLP 768 -> 1024 -> 128 -> 64 -> 16 -> 1 with dropout between layers and *no* nonlinearity, trained
on L2-normalised CLIP ViT-L/14 image embeddings. The checkpoint ``sac+logos+ava1-l14-linearMSE.pth`` is
a plain state dict whose keys (``layers.0.weight`` ... ``layers.7.bias``) index the original
``nn.Sequential``: 0, 2, 4 are Linear layers followed by Dropout (1, 3, 5), 6 and 7 are Linear.

It is read with ``torch.load(weights_only=True)`` (tensors only: a pickle cannot run code) into numpy
arrays under the original keys, and evaluated in numpy (float64, dropout off as in eval mode): the head
is ~1M multiply-adds per image, so it needs no device. Its input must be the CLIP ViT-L/14 *image*
embedding (projected, 768-d); the head normalises it itself, as the original ``normalized()`` does.
Scores are on the predictor's 1-10 scale and are not comparable with the v2.5 SigLIP predictor's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelCard

FILENAME = registry.AESTHETIC_FILE
#: The Linear layers of the original nn.Sequential, by index, with their (out, in) shapes.
LAYERS: tuple[tuple[int, tuple[int, int]], ...] = (
    (0, (1024, 768)),
    (2, (128, 1024)),
    (4, (64, 128)),
    (6, (16, 64)),
    (7, (1, 16)),
)


def head_parameter_count() -> int:
    """The head's parameter count (weights and biases of every layer)."""
    return sum(rows * cols + rows for _, (rows, cols) in LAYERS)


INPUT_DIM = 768


class AestheticHead:
    """Scores CLIP ViT-L/14 image embeddings with the LAION v2 head (numpy, no device needed)."""

    feature_version = 1
    input_dim = INPUT_DIM

    def __init__(self, card: ModelCard, key: str, weights: dict[str, np.ndarray]):
        check_state_dict(weights, where=card.name)
        self.card = card
        self.key = key
        self.weights = weights

    def score(self, clip_embeddings: np.ndarray) -> np.ndarray:
        """(n,) float32 aesthetic scores for (n, 768) raw CLIP image embeddings (normalised here)."""
        x = np.asarray(clip_embeddings, dtype=np.float64)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != INPUT_DIM:
            raise ValueError(f"expected (n, {INPUT_DIM}) CLIP ViT-L/14 image embeddings, got shape {x.shape}")
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.where(norms == 0, 1.0, norms)  # the original normalized(): a zero vector stays zero
        for index, _ in LAYERS:
            weight = self.weights[f"layers.{index}.weight"].astype(np.float64)
            bias = self.weights[f"layers.{index}.bias"].astype(np.float64)
            x = x @ weight.T + bias
        return x[:, 0].astype(np.float32)


def check_state_dict(state: dict[str, np.ndarray], where: str) -> None:
    """The keys and shapes of the v2 head, or a ``ValueError`` saying which one is off."""
    expected = {}
    for index, (rows, cols) in LAYERS:
        expected[f"layers.{index}.weight"] = (rows, cols)
        expected[f"layers.{index}.bias"] = (rows,)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise ValueError(f"{where}: not the LAION v2 head (missing keys {missing}, unexpected keys {extra})")
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise ValueError(f"{where}: {name} has shape {tuple(state[name].shape)}, expected {shape}")


def read_state_dict(file: Path) -> dict[str, np.ndarray]:
    """The head's tensors as float32 numpy arrays under their original keys (.pth or .safetensors)."""
    file = Path(file)
    if file.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return {name: array.astype(np.float32) for name, array in load_file(str(file)).items()}
    import torch

    state = torch.load(file, map_location="cpu", weights_only=True)
    return {name: tensor.detach().float().numpy() for name, tensor in state.items()}


def load_aesthetic(
    card: ModelCard,
    *,
    device: str = "cpu",
    dtype: object = None,
    models_dir: str | os.PathLike | None = None,
) -> AestheticHead:
    """The LAION v2 head of ``card`` from local files only (``device`` and ``dtype`` are not needed)."""
    del device, dtype  # numpy on the CPU: the head is too small to be worth a device
    folder = registry.model_folder(card, (FILENAME,), models_dir)
    weights = read_state_dict(folder / FILENAME)
    return AestheticHead(card, registry.weights_key(card, folder, (FILENAME,)), weights)


def make_tiny_aesthetic(path: Path, seed: int, size: str = "tiny") -> None:
    """A random head with the real shapes and file name (``torch.save`` of a state dict, deterministic).

    The head is small (0.93 M parameters), so its tiny and ``paper`` sizes are the same: the real one.
    """
    import torch

    if size not in ("tiny", "paper"):
        raise ValueError(f"unknown size {size!r}; sizes: tiny, paper")

    generator = torch.Generator().manual_seed(seed)
    state = {}
    for index, (rows, cols) in LAYERS:
        bound = 1.0 / np.sqrt(cols)  # nn.Linear's default init range, so scores have a sane spread
        state[f"layers.{index}.weight"] = (torch.rand(rows, cols, generator=generator) * 2 - 1) * bound
        state[f"layers.{index}.bias"] = (torch.rand(rows, generator=generator) * 2 - 1) * bound
    torch.save(state, Path(path) / FILENAME)
