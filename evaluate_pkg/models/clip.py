"""CLIP (transformers ``CLIPModel``): image and text embeddings for CLIP-T, CLIP-I and the aesthetic head.

One encoder object serves both sides (``ImageEncoder`` and ``TextEncoder`` of ``base.py``). Outputs are
the *projected* embeddings (``get_*_features(...).pooler_output`` in transformers 5), not normalised:
the metrics normalise, and the aesthetic head needs the raw vector to normalise itself.

Preprocessing is the checkpoint's own ``preprocessor_config.json`` read by transformers' PIL backend
(``CLIPImageProcessorPil``): PIL bicubic resize of the shortest side, centre crop, CLIP mean/std, which
is what OpenAI's ``clip.load`` preprocessing and transformers 4.x did. transformers 5 would otherwise
pick its torchvision backend, whose resampling differs slightly from PIL's and would shift the
published numbers by up to 0.015 per normalised pixel. (One difference remains: transformers floors
an odd crop margin where torchvision's ``CenterCrop`` rounds it, a one-pixel shift for some aspect
ratios.) Text is tokenised by the checkpoint's tokenizer and truncated at CLIP's 77 tokens;
``count_truncated`` reports how many prompts lost words that way (the report says so).

The tiny maker writes the Hub layout of ``openai/clip-vit-large-patch14`` (config.json in that repo's
transformers-4 format, model.safetensors, preprocessor_config.json, tokenizer files) with a few small
layers, ``projection_dim`` 768 (so the aesthetic head fits) and the *real* CLIP tokenizer, rebuilt
offline from the BPE file that open_clip ships: its ids equal ``open_clip.tokenize``. With
``size="paper"`` it writes the same files at ViT-L/14's real size (``configs/clip-vit-l-14.json``: the
numbers of open_clip's own ViT-L-14.json), random weights: the paper-random profile, for timing.
"""

from __future__ import annotations

import contextlib
import gzip
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

#: CLIP's text context: prompts longer than this (special tokens included) are truncated.
CONTEXT_LENGTH = 77
#: The image processor backend (see the module docstring for why PIL).
IMAGE_BACKEND = "pil"
#: Files the loader reads; the same names as the Hub repo.
CLIP_FILES = registry.HUB_FILES["clip-vit-l-14"]

_TEXT_BATCH = 256


class ClipEncoder:
    """Image + text encoder over a transformers ``CLIPModel``.

    ``preprocess`` runs on the CPU in DataLoader workers; ``encode_batch`` / ``encode_texts`` run on
    ``device`` in ``dtype`` autocast (bf16 on CUDA by default, fp32 on the CPU) and return float32.
    """

    feature_version = 1

    def __init__(
        self,
        card: ModelCard,
        key: str,
        model: Any,
        image_processor: Any,
        tokenizer: Any,
        *,
        device: torch.device,
        dtype: torch.dtype,
    ):
        self.card = card
        self.key = key
        self.model = model
        self.image_processor = image_processor
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype
        self.embedding_dim: int = int(model.config.projection_dim)

    # --- images ----------------------------------------------------------------------------------

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        """(3, H, W) float32 pixel values for one image, by the checkpoint's own processor."""
        pixels = self.image_processor(images=image.convert("RGB"), return_tensors="pt")["pixel_values"]
        return pixels[0]

    def collate(self, items: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack(list(items))

    @torch.inference_mode()
    def encode_batch(self, batch: torch.Tensor) -> list[dict[str, np.ndarray]]:
        """``{"embedding": (d,)}`` per image: the projected image embedding, not normalised."""
        with registry.autocast(self.device, self.dtype):
            output = self.model.get_image_features(pixel_values=batch.to(self.device))
        vectors = output.pooler_output.float().cpu().numpy()
        return [{"embedding": vector} for vector in vectors]

    # --- texts -----------------------------------------------------------------------------------

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text before truncation, start and end tokens included."""
        # verbose=False: measuring over-long texts is the point here, not a misuse to warn about
        encoded = self.tokenizer(list(texts), truncation=False, padding=False, verbose=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many of ``texts`` exceed CLIP's 77-token context and lose their end in ``encode_texts``."""
        return sum(count > CONTEXT_LENGTH for count in self.token_counts(texts))

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 projected text embeddings, not normalised; texts truncated at 77 tokens."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        parts = []
        for chunk in registry.batched(texts, _TEXT_BATCH):
            tokens = self.tokenizer(
                list(chunk), padding=True, truncation=True, max_length=CONTEXT_LENGTH, return_tensors="pt"
            )
            with registry.autocast(self.device, self.dtype):
                output = self.model.get_text_features(
                    input_ids=tokens["input_ids"].to(self.device),
                    attention_mask=tokens["attention_mask"].to(self.device),
                )
            parts.append(output.pooler_output.float().cpu().numpy())
        return np.concatenate(parts, axis=0)


def load_clip(
    card: ModelCard,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str | None = None,
    models_dir: str | os.PathLike | None = None,
) -> ClipEncoder:
    """A ``ClipEncoder`` for ``card`` from local files only (Hub cache snapshot or tiny folder)."""
    from transformers import AutoImageProcessor, CLIPModel, CLIPTokenizer

    folder = registry.model_folder(card, CLIP_FILES, models_dir)
    target = torch.device(device)
    model = CLIPModel.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    model.to(target).eval()
    image_processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True, backend=IMAGE_BACKEND)
    tokenizer = CLIPTokenizer.from_pretrained(folder, local_files_only=True)
    return ClipEncoder(
        card,
        registry.weights_key(card, folder, CLIP_FILES),
        model,
        image_processor,
        tokenizer,
        device=target,
        dtype=registry.compute_dtype(target, dtype),
    )


# --- tiny checkpoint -------------------------------------------------------------------------------------

# The sizes that make it tiny; everything else follows openai/clip-vit-large-patch14.
_TINY_TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2}
_TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "patch_size": 32,  # 7 x 7 patches of a 224 px crop: the real processor config, fast on a CPU
}
_PROJECTION_DIM = 768  # as ViT-L/14, so the LAION aesthetic head (768 inputs) fits

_BOS, _EOS = "<|startoftext|>", "<|endoftext|>"


def hub_style_config(text: dict[str, Any], vision: dict[str, Any], projection_dim: int) -> dict[str, Any]:
    """A config.json as openai/clip-vit-large-patch14 serves it (transformers-4 era keys and quirks).

    Among the quirks: ``eos_token_id`` 2 in the text config, which makes transformers pool the text at
    the highest token id (the end token of a CLIP tokenisation) rather than at a given id.
    """
    text_config = {
        "architectures": None,
        "attention_dropout": 0.0,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "pad_token_id": 1,
        "hidden_act": "quick_gelu",
        "initializer_factor": 1.0,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "max_position_embeddings": CONTEXT_LENGTH,
        "model_type": "clip_text_model",
        "projection_dim": projection_dim,
        "vocab_size": 49408,
        **text,
    }
    vision_config = {
        "architectures": None,
        "attention_dropout": 0.0,
        "hidden_act": "quick_gelu",
        "image_size": 224,
        "initializer_factor": 1.0,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-05,
        "model_type": "clip_vision_model",
        "num_channels": 3,
        "projection_dim": projection_dim,
        **vision,
    }
    return {
        "_name_or_path": "openai/clip-vit-large-patch14",
        "architectures": ["CLIPModel"],
        "initializer_factor": 1.0,
        "logit_scale_init_value": 2.6592,
        "model_type": "clip",
        "projection_dim": projection_dim,
        "text_config": text_config,
        "text_config_dict": {**text, "projection_dim": projection_dim},
        "torch_dtype": "float32",
        "transformers_version": None,
        "vision_config": vision_config,
        "vision_config_dict": {**vision, "projection_dim": projection_dim},
    }


#: preprocessor_config.json as openai/clip-vit-large-patch14 serves it (legacy feature-extractor keys).
HUB_PREPROCESSOR_CONFIG: dict[str, Any] = {
    "crop_size": 224,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor",
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "size": 224,
}


def write_clip_tokenizer_files(path: Path) -> None:
    """vocab.json + merges.txt of OpenAI's CLIP BPE, rebuilt from the file open_clip ships.

    The vocabulary is the byte-level base alphabet, the same with ``</w>``, the first 48,894 merges,
    then the start and end tokens: 49,408 entries, in the order (and so with the ids) of OpenAI's
    tokenizer and of ``open_clip.tokenize``.
    """
    from open_clip.tokenizer import bytes_to_unicode, default_bpe

    with gzip.open(default_bpe(), "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    merges = lines[1 : 49152 - 256 - 2 + 1]  # the slice open_clip's SimpleTokenizer takes
    alphabet = list(bytes_to_unicode().values())
    vocab = alphabet + [token + "</w>" for token in alphabet]
    vocab += ["".join(merge.split()) for merge in merges] + [_BOS, _EOS]
    if len(vocab) != 49408:
        raise RuntimeError(f"the CLIP BPE file gave {len(vocab)} tokens, expected 49408")
    (path / "vocab.json").write_text(
        json.dumps({token: index for index, token in enumerate(vocab)}, ensure_ascii=False), encoding="utf-8"
    )
    (path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")


def clip_config(size: str = "tiny") -> dict[str, Any]:
    """config.json of a random CLIP: ``tiny`` (a few small layers) or ``paper`` (ViT-L/14's real size)."""
    if size == "tiny":
        return hub_style_config(_TINY_TEXT, _TINY_VISION, _PROJECTION_DIM)
    if size == "paper":
        shipped = registry.paper_config("clip-vit-l-14")["config"]
        return hub_style_config(shipped["text"], shipped["vision"], shipped["projection_dim"])
    raise ValueError(f"unknown size {size!r}; sizes: tiny, paper")


def random_clip(size: str = "tiny", device: Any = None) -> Any:
    """The ``CLIPModel`` of :func:`clip_config` (``device="meta"``: shapes only, nothing allocated)."""
    from transformers import CLIPConfig, CLIPModel

    config = CLIPConfig.from_dict(clip_config(size))
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return CLIPModel(config)


def make_tiny_clip(path: Path, seed: int, size: str = "tiny") -> None:
    """Write a random CLIP into the empty folder ``path``, in openai/clip-vit-large-patch14's layout.

    ``size``: ``tiny`` (a few small layers) or ``paper`` (ViT-L/14's real size, ~428 M parameters,
    1.7 GB). Deterministic: the same ``seed`` gives byte-identical files.
    """
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    path = Path(path)
    config_dict = clip_config(size)
    config_text = json.dumps(config_dict, indent=2, sort_keys=True) + "\n"
    (path / "config.json").write_text(config_text, encoding="utf-8")
    config = CLIPConfig.from_pretrained(path, local_files_only=True)
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(seed)
        model = CLIPModel(config)
    registry.save_safetensors(model, path / "model.safetensors")

    (path / "preprocessor_config.json").write_text(json.dumps(HUB_PREPROCESSOR_CONFIG, indent=2) + "\n")
    write_clip_tokenizer_files(path)
    tokenizer = CLIPTokenizer(
        vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"), model_max_length=CONTEXT_LENGTH
    )
    tokenizer.save_pretrained(path)  # tokenizer.json + tokenizer_config.json
    special = {"bos_token": _BOS, "eos_token": _EOS, "pad_token": _EOS, "unk_token": _EOS}
    (path / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
