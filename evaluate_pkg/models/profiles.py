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
    # The paper models' architectures at their real sizes with random weights, made on this machine from the
    # configurations shipped in configs/: for timing (a GPU's images per second) without any download.
    "paper-random": {
        "clip": "clip-vit-l-14-paper-random",
        "dinov2": "dinov2-base-paper-random",
        "dinov3": "dinov3-vitb16-paper-random",
        "aesthetic": "laion-aesthetic-v2-paper-random",
        # Cannot be made offline (registry.NOT_MADE says why): the face metrics stop with that error.
        "face": "arcface-buffalo-l-paper-random",
        "detector": "grounding-dino-tiny-paper-random",
        "segmenter": "sam2.1-hiera-tiny-paper-random",
    },
}

#: The profiles whose models have random weights, with what a report says of them. Everything scored with
#: one is a plumbing check: labelled so everywhere and never published or ranked. registry.profile_is_plumbing
#: decides from the cards themselves; tests/scoring/test_paper_random.py keeps the two in agreement. The
#: leaderboard's publishing checks read this (they must refuse a plumbing profile even in a summary whose
#: ``plumbing`` flag says otherwise).
PLUMBING_PROFILES: dict[str, str] = {
    "tiny": "same architectures, small sizes, random weights (the dlib face model excepted)",
    "paper-random": "the papers' architectures at their real sizes with random weights, for timing (ArcFace cannot "
    "be made offline: the face metrics are not run)",
}
