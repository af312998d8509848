"""The scoring profiles: role -> model card name, per profile (the cards are in :mod:`.registry`).

No imports: the command line reads the profile names for its choices without loading the model stack.
"""

from __future__ import annotations

ROLES: tuple[str, ...] = ("clip", "dinov2", "dinov3", "aesthetic", "face", "detector", "segmenter")
DEFAULT_PROFILE = "paper"

PROFILES: dict[str, dict[str, str]] = {
    "paper": {
        "clip": "clip-vit-l-14",
        "dinov2": "dinov2-base",
        "dinov3": "dinov3-vitb16",
        "aesthetic": "laion-aesthetic-v2",
        "face": "arcface-buffalo-l",
        "detector": "grounding-dino-tiny",
        "segmenter": "sam2.1-hiera-tiny",
    },
    "tiny": {
        "clip": "clip-vit-l-14-tiny",
        "dinov2": "dinov2-base-tiny",
        "dinov3": "dinov3-vitb16-tiny",
        "aesthetic": "laion-aesthetic-v2-tiny",
        "face": "dlib-face",  # real weights that install offline: the one real model of this profile
        "detector": "grounding-dino-tiny-random",
        "segmenter": "sam2.1-hiera-tiny-random",
    },
}
