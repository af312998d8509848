"""Stable Diffusion pipelines of random weights built from component configs: no download, no real model.

For plumbing checks (the tests, ``bench/generation_throughput.py``) and for timing a GPU without weights.
Their images are noise-like: never scores of a model. Two sizes:

- ``tiny``: the shapes diffusers' own tests use (a UNet of 4/8 channels, 16-wide text encoder): an image in
  tens of milliseconds on a CPU;
- ``paper``: Stable Diffusion 1.x's architecture (UNet 320-1280 channels, CLIP ViT-L/14-sized text encoder,
  the 4-channel VAE), about a billion random parameters: the cost of a real pipeline call, on a GPU.

The tokenizer is CLIP's byte-level BPE written locally (:func:`idbench.evaluate_pkg.models.clip.write_clip_tokenizer_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SIZES = ("tiny", "paper")


def _components(size: str) -> dict[str, Any]:
    import diffusers
    from transformers import CLIPTextConfig, CLIPTextModel

    if size == "tiny":
        unet = diffusers.UNet2DConditionModel(
            block_out_channels=(4, 8),
            layers_per_block=1,
            sample_size=16,
            in_channels=4,
            out_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=16,
            norm_num_groups=2,
        )
        vae = diffusers.AutoencoderKL(
            block_out_channels=(4, 8),
            in_channels=3,
            out_channels=3,
            latent_channels=4,
            norm_num_groups=2,
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2,
        )
        text = CLIPTextConfig(
            bos_token_id=49406,
            eos_token_id=49407,
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_hidden_layers=2,
            pad_token_id=49407,
            vocab_size=49408,
            max_position_embeddings=77,
        )
    elif size == "paper":  # Stable Diffusion 1.x's published component configs
        unet = diffusers.UNet2DConditionModel(
            sample_size=64,
            in_channels=4,
            out_channels=4,
            layers_per_block=2,
            block_out_channels=(320, 640, 1280, 1280),
            down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
            up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
            cross_attention_dim=768,
            attention_head_dim=8,
        )
        vae = diffusers.AutoencoderKL(
            block_out_channels=(128, 256, 512, 512),
            in_channels=3,
            out_channels=3,
            latent_channels=4,
            layers_per_block=2,
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            sample_size=512,
        )
        text = CLIPTextConfig(
            bos_token_id=49406,
            eos_token_id=49407,
            hidden_size=768,
            intermediate_size=3072,
            num_attention_heads=12,
            num_hidden_layers=12,
            pad_token_id=49407,
            vocab_size=49408,
            max_position_embeddings=77,
            hidden_act="quick_gelu",
        )
    else:
        raise ValueError(f"size {size!r}: expected one of {', '.join(SIZES)}")
    return {"unet": unet, "vae": vae, "text_encoder": CLIPTextModel(text)}


def random_stable_diffusion(folder: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """Build a Stable Diffusion pipeline of random weights (``size``: see the module docstring), save it under
    ``folder/pipeline`` (loadable with ``--model diffusers-t2i --model-id folder/pipeline``) and return that path.

    The same ``seed`` gives the same weights."""
    import diffusers
    import torch
    from transformers import CLIPTokenizer

    from idbench.evaluate_pkg.models.clip import write_clip_tokenizer_files

    folder = Path(folder)
    torch.manual_seed(seed)
    components = _components(size)
    tokens = folder / "tokenizer-files"
    tokens.mkdir(parents=True, exist_ok=True)
    write_clip_tokenizer_files(tokens)
    tokenizer = CLIPTokenizer(vocab=str(tokens / "vocab.json"), merges=str(tokens / "merges.txt"), model_max_length=77)
    pipeline = diffusers.StableDiffusionPipeline(
        **components,
        tokenizer=tokenizer,
        scheduler=diffusers.DDIMScheduler(clip_sample=False, set_alpha_to_one=False, steps_offset=1),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipeline.set_progress_bar_config(disable=True)
    pipeline.save_pretrained(folder / "pipeline")
    return folder / "pipeline"
