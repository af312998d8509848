"""The encoder registry, its profiles, and the CLIP / DINOv2 / DINOv3 / aesthetic loaders.

Nothing downloads. The ``paper`` loaders are exercised for real: each test makes a tiny checkpoint in
the exact file layout of the model's Hub repo, places it in a temporary Hugging Face cache in the
hub layout (``models--org--name/blobs``, ``snapshots/<pinned revision>`` symlinks, ``refs/main``), and
loads it through ``load_model(<paper name>)`` with ``HF_HUB_OFFLINE=1``: only the download itself is
left untested. Outputs are compared with the same weights run by hand (transformers directly, open_clip's
tokenizer, PIL, a torch copy of the original aesthetic MLP).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image

from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.aesthetic import FILENAME as AESTHETIC_FILENAME
from idbench.evaluate_pkg.models.aesthetic import make_tiny_aesthetic
from idbench.evaluate_pkg.models.base import ImageEncoder, ModelNotAvailableError, TextEncoder
from idbench.evaluate_pkg.models.clip import CONTEXT_LENGTH, make_tiny_clip
from idbench.evaluate_pkg.models.dino import make_tiny_dinov2, make_tiny_dinov3

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

MY_TINY = ("clip-vit-l-14-tiny", "dinov2-base-tiny", "dinov3-vitb16-tiny", "laion-aesthetic-v2-tiny")
MAKERS = {
    "clip-vit-l-14": make_tiny_clip,
    "dinov2-base": make_tiny_dinov2,
    "dinov3-vitb16": make_tiny_dinov3,
    "laion-aesthetic-v2": make_tiny_aesthetic,
}
PROMPTS = [
    "a photo of a cat",
    "Two women, one in a red coat, hold hands in front of the Eiffel Tower at dusk.",
    "A corgi's toy: 3 balls & a café sign -- watercolor, 4K!",
    "the man on the left (wearing glasses) gives the woman on the right a bouquet of sunflowers",
    " ".join(["a very long prompt about many subjects"] * 12),  # well over 77 tokens
]


def picture(seed: int, size: tuple[int, int] = (300, 200)) -> Image.Image:
    """A smooth random RGB picture (width, height)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    return Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)


# --- a Hugging Face cache in the hub layout --------------------------------------------------------------


def place_in_hub_cache(cache: Path, repo_id: str, revision: str, source: Path) -> Path:
    """Put ``source``'s files into ``cache`` as huggingface_hub stores a download of ``repo_id@revision``.

    Blobs under ``blobs/``, relative symlinks under ``snapshots/<revision>/``, the commit in ``refs/main``.
    """
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in sorted(source.iterdir()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache that both idbench and huggingface_hub read, offline.

    huggingface_hub copies ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE`` into module constants at import;
    the registry reads the environment when it loads, so both are patched.
    """
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def tiny_sources(tmp_path_factory) -> dict[str, Path]:
    """paper name -> a folder with a tiny checkpoint in that model's Hub file layout (made once)."""
    root = tmp_path_factory.mktemp("tiny-sources")
    sources = {}
    for name, maker in MAKERS.items():
        folder = root / name
        folder.mkdir()
        maker(folder, seed=7)
        sources[name] = folder
    return sources


@pytest.fixture
def paper(hf_cache, tiny_sources, tmp_path):
    """Place the tiny checkpoint of a paper model in the cache; returns ``(snapshot, encoder)``."""

    def install_and_load(name: str):
        card = registry.get_card(name)
        snapshot = place_in_hub_cache(hf_cache, card.hub_id, card.revision, tiny_sources[name])
        encoder = registry.load_model(name, models_dir=tmp_path / "idbench-models")
        return snapshot, encoder

    return install_and_load


# --- cards and profiles ------------------------------------------------------------------------------------


def test_cards_pin_revisions_and_name_their_hub_repos():
    expected_hubs = {
        "clip-vit-l-14": "openai/clip-vit-large-patch14",
        "dinov2-base": "facebook/dinov2-base",
        "dinov3-vitb16": "facebook/dinov3-vitb16-pretrain-lvd1689m",
        "grounding-dino-tiny": "IDEA-Research/grounding-dino-tiny",
        "sam2.1-hiera-tiny": "facebook/sam2.1-hiera-tiny",
    }
    for name, hub_id in expected_hubs.items():
        assert registry.get_card(name).hub_id == hub_id
    for card in registry.MODEL_CARDS.values():
        assert card.revision is None or re.fullmatch(r"[0-9a-f]{40}", card.revision), card.name
        assert card.family in registry.LOADERS, card.name
        if card.hub_id is not None:
            assert card.revision is not None, f"{card.name} is hosted on the Hub but not pinned"
    aesthetic = registry.get_card("laion-aesthetic-v2")
    assert AESTHETIC_FILENAME == "sac+logos+ava1-l14-linearMSE.pth"
    assert AESTHETIC_FILENAME in aesthetic.description and AESTHETIC_FILENAME in aesthetic.how_to_get
    assert "gated" in registry.get_card("dinov3-vitb16").how_to_get.lower()
    assert "insightface/models/buffalo_l" in registry.get_card("arcface-buffalo-l").how_to_get
    assert registry.get_card("dlib-face").hub_id is None


def test_tiny_cards_are_plumbing_and_made_locally():
    tiny = {
        "clip-vit-l-14-tiny",
        "dinov2-base-tiny",
        "dinov3-vitb16-tiny",
        "laion-aesthetic-v2-tiny",
        "arcface-tiny",
        "grounding-dino-tiny-random",
        "sam2.1-hiera-tiny-random",
    }
    paper_random = {f"{name}-paper-random" for name in registry.PROFILES["paper"].values()}
    assert registry.PLUMBING_MODELS == tiny | paper_random  # paper-random: tests/scoring/test_paper_random.py
    assert {name for name, size in registry.RANDOM_SIZES.items() if size == "tiny"} == tiny
    for name in tiny:
        card = registry.get_card(name)
        assert card.hub_id is None and card.revision is None
        assert card.how_to_get == "idbench models make-tiny (made locally, random weights: plumbing checks only)"
        assert registry.is_plumbing(card) and registry.is_plumbing(name)
        assert card.family in registry.TINY_MAKERS
    for name in registry.MODEL_CARDS.keys() - tiny - paper_random:
        assert not registry.is_plumbing(name)


@pytest.mark.slow
def test_loaders_and_makers_name_the_agreed_functions():
    assert registry.LOADERS["arcface"] == "idbench.evaluate_pkg.models.faces:load_arcface"
    assert registry.LOADERS["dlib-face"] == "idbench.evaluate_pkg.models.faces:load_dlib_face"
    assert registry.LOADERS["grounding-dino"] == "idbench.evaluate_pkg.models.detection:load_grounding_dino"
    assert registry.LOADERS["sam2"] == "idbench.evaluate_pkg.models.detection:load_sam2"
    assert registry.TINY_MAKERS["arcface"] == "idbench.evaluate_pkg.models.faces:make_tiny_arcface"
    assert registry.TINY_MAKERS["grounding-dino"] == "idbench.evaluate_pkg.models.detection:make_tiny_grounding_dino"
    assert registry.TINY_MAKERS["sam2"] == "idbench.evaluate_pkg.models.detection:make_tiny_sam2"
    for family in ("clip", "dinov2", "dinov3", "aesthetic-v2"):  # this module's own: they must resolve
        assert callable(registry._resolve(registry.LOADERS[family]))
        assert callable(registry._resolve(registry.TINY_MAKERS[family]))


@pytest.mark.slow
def test_profiles_resolve_every_role():
    paper = registry.resolve_profile("paper")
    tiny = registry.resolve_profile("tiny")
    assert tuple(paper) == registry.ROLES == tuple(tiny)
    assert registry.DEFAULT_PROFILE == "paper" and registry.resolve_profile() == paper
    assert {role: card.name for role, card in paper.items()} == {
        "clip": "clip-vit-l-14",
        "dinov2": "dinov2-base",
        "dinov3": "dinov3-vitb16",
        "aesthetic": "laion-aesthetic-v2",
        "face": "arcface-buffalo-l",
        "detector": "grounding-dino-tiny",
        "segmenter": "sam2.1-hiera-tiny",
    }
    assert tiny["face"].name == "dlib-face"  # the real offline face model
    assert all(registry.is_plumbing(card) for role, card in tiny.items() if role != "face")
    assert not any(registry.is_plumbing(card) for card in paper.values())
    assert registry.profile_is_plumbing("tiny") and not registry.profile_is_plumbing("paper")
    for role, card in tiny.items():  # each tiny stand-in has the architecture of the paper model
        assert card.family == paper[role].family or role == "face"


@pytest.mark.slow
def test_unknown_names_list_the_known_ones():
    with pytest.raises(registry.UnknownModelError) as error:
        registry.get_card("clip-vit-h-14")
    message = str(error.value)
    assert "clip-vit-h-14" in message and "clip-vit-l-14" in message and "dinov3-vitb16-tiny" in message
    with pytest.raises(registry.UnknownModelError, match=r"'huge'.*paper, paper-random, tiny"):
        registry.resolve_profile("huge")
    with pytest.raises(registry.UnknownModelError, match="dinov2-base"):
        registry.load_model("dinov9")
    with pytest.raises(ValueError, match="not a tiny model"):
        registry.make_tiny(["clip-vit-l-14"], models_dir="unused")


def test_models_dir_and_hub_cache_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("IDBENCH_MODELS", str(tmp_path / "mine"))
    assert registry.models_dir() == tmp_path / "mine"
    assert registry.tiny_path("dinov2-base-tiny") == tmp_path / "mine" / "tiny" / "dinov2-base-tiny"
    monkeypatch.delenv("IDBENCH_MODELS")
    assert registry.models_dir() == Path.home() / ".cache" / "idbench" / "models"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert registry.hub_cache_dir() == tmp_path / "hub"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert registry.hub_cache_dir() == tmp_path / "home" / "hub"


@pytest.mark.e2e
def test_importing_the_registry_stays_cheap():
    code = "import sys, evaluate_pkg.models.registry as r; r.resolve_profile('tiny'); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_precision_policy():
    assert registry.compute_dtype("cpu") == torch.float32
    assert registry.compute_dtype("cuda") == torch.bfloat16  # a device name, no GPU needed to decide
    assert registry.compute_dtype("cuda:1", "fp16") == torch.float16
    assert registry.compute_dtype("cpu", torch.bfloat16) == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype"):
        registry.compute_dtype("cpu", "int3")


# --- missing models ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_missing_paper_model_is_one_clear_error(name, hf_cache, tmp_path):
    card = registry.get_card(name)
    with pytest.raises(ModelNotAvailableError) as error:
        registry.load_model(name, models_dir=tmp_path)
    message = str(error.value)
    assert name in message and card.hub_id in message and card.revision in message
    assert f"hf download {card.hub_id}" in message and f"--revision {card.revision}" in message
    assert str(hf_cache) in message
    assert "or use --profile tiny for a plumbing check" in message.lower()
    if name == "dinov3-vitb16":
        assert "license" in message and "hf auth login" in message


@pytest.mark.slow
def test_a_partial_or_other_revision_download_is_missing(hf_cache, tiny_sources, tmp_path):
    card = registry.get_card("dinov2-base")
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.json", "preprocessor_config.json"):  # no model.safetensors
        (partial / name).write_bytes((tiny_sources["dinov2-base"] / name).read_bytes())
    place_in_hub_cache(hf_cache, card.hub_id, card.revision, partial)
    with pytest.raises(ModelNotAvailableError, match=r"model\.safetensors not in the Hugging Face cache"):
        registry.load_model("dinov2-base", models_dir=tmp_path)

    clip = registry.get_card("clip-vit-l-14")  # downloaded at another commit: not the pinned model
    place_in_hub_cache(hf_cache, clip.hub_id, "0" * 40, tiny_sources["clip-vit-l-14"])
    with pytest.raises(ModelNotAvailableError, match=clip.revision):
        registry.load_model("clip-vit-l-14", models_dir=tmp_path)


@pytest.mark.slow
def test_an_unimportable_loader_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(registry.LOADERS, "clip", "idbench.evaluate_pkg.models.no_such_module:load")
    with pytest.raises(ModelNotAvailableError, match="no_such_module"):
        registry.load_model("clip-vit-l-14")


# --- tiny weights --------------------------------------------------------------------------------------------


def _tree_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.slow
def test_tiny_weights_are_deterministic_and_made_on_first_use(tmp_path):
    first = registry.make_tiny(MY_TINY, models_dir=tmp_path / "a")
    assert first == [registry.tiny_path(name, tmp_path / "a") for name in MY_TINY]
    assert not (tmp_path / "b").exists()
    image = picture(3)
    for name, folder in zip(MY_TINY, first):
        again = registry.tiny_path(name, tmp_path / "b")
        encoder = registry.load_model(name, models_dir=tmp_path / "b")  # made here, on first use
        assert again.is_dir() and _tree_bytes(again) == _tree_bytes(folder), name
        assert not [p for p in again.parent.iterdir() if p.name.startswith(".")]  # no staging left behind
        twin = registry.load_model(name, models_dir=tmp_path / "a")
        assert encoder.key == twin.key and encoder.key.startswith(f"{name}@tiny-")
        if hasattr(encoder, "preprocess"):
            batch = encoder.collate([encoder.preprocess(image)])
            for got, want in zip(encoder.encode_batch(batch), twin.encode_batch(batch)):
                assert got.keys() == want.keys()
                for key in got:
                    np.testing.assert_array_equal(got[key], want[key])
    # the same layout as the Hub repos the tiny models stand for
    assert sorted(_tree_bytes(first[0])) == sorted(registry.HUB_FILES["clip-vit-l-14"])
    assert sorted(_tree_bytes(first[1])) == sorted(registry.HUB_FILES["dinov2-base"])
    assert sorted(_tree_bytes(first[2])) == sorted(registry.HUB_FILES["dinov3-vitb16"])
    assert sorted(_tree_bytes(first[3])) == [AESTHETIC_FILENAME]
    # making again keeps what is there
    assert registry.make_tiny(MY_TINY[:1], models_dir=tmp_path / "a") == first[:1]


@pytest.mark.slow
def test_tiny_clip_tokenizer_reads_real_prompts_as_open_clip_does(tmp_path):
    encoder = registry.load_model("clip-vit-l-14-tiny", models_dir=tmp_path)
    assert len(encoder.tokenizer) == 49408 and encoder.model.config.text_config.vocab_size == 49408
    reference = open_clip.tokenize(PROMPTS)  # (n, 77), zero-padded, truncated with the end token kept
    for prompt, row in zip(PROMPTS, reference):
        ids = encoder.tokenizer(prompt, truncation=True, max_length=CONTEXT_LENGTH)["input_ids"]
        assert ids == row[: len(ids)].tolist(), prompt
        assert not row[len(ids) :].any()
    assert encoder.count_truncated(PROMPTS) == 1
    assert encoder.token_counts(PROMPTS[:1]) == [7]


# --- paper loaders on Hub-layout checkpoints ------------------------------------------------------------------


@pytest.mark.slow
def test_clip_paper_loader(paper):
    from transformers import AutoImageProcessor, CLIPModel

    snapshot, encoder = paper("clip-vit-l-14")
    card = registry.get_card("clip-vit-l-14")
    assert encoder.key == f"clip-vit-l-14@{card.revision}" and encoder.card == card
    assert isinstance(encoder, ImageEncoder) and isinstance(encoder, TextEncoder)
    assert encoder.dtype == torch.float32 and encoder.device.type == "cpu"

    # preprocessing: the checkpoint's own processor, equal to OpenAI CLIP's PIL pipeline
    images = [picture(1), picture(2, (180, 260)), picture(3, (224, 224))]
    own = AutoImageProcessor.from_pretrained(snapshot, backend="pil")
    mean = np.array([0.48145466, 0.4578275, 0.40821073], np.float32)
    std = np.array([0.26862954, 0.26130258, 0.27577711], np.float32)
    for image in images:
        pixels = encoder.preprocess(image)
        np.testing.assert_array_equal(pixels.numpy(), own(images=image, return_tensors="np")["pixel_values"][0])
        # by hand: bicubic shortest side to 224 (long side truncated), centre crop (offsets floored), normalise
        width, height = image.size
        short, long = min(width, height), max(width, height)
        side = (224, int(224 * long / short))
        resized = image.resize(side if width <= height else side[::-1], Image.Resampling.BICUBIC)
        left, top = (resized.width - 224) // 2, (resized.height - 224) // 2
        crop = np.asarray(resized.crop((left, top, left + 224, top + 224)), np.float32) / 255.0
        np.testing.assert_allclose(pixels.numpy(), ((crop - mean) / std).transpose(2, 0, 1), atol=1e-6)

    # image embeddings: the projected pooled output, run by hand on the same weights
    batch = encoder.collate([encoder.preprocess(image) for image in images])
    features = encoder.encode_batch(batch)
    direct = CLIPModel.from_pretrained(snapshot).eval()
    with torch.no_grad():
        pooled = direct.vision_model(pixel_values=batch).pooler_output
        expected = direct.visual_projection(pooled).numpy()
    assert [f["embedding"].shape for f in features] == [(768,)] * 3
    assert all(f["embedding"].dtype == np.float32 for f in features)
    np.testing.assert_allclose(np.stack([f["embedding"] for f in features]), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.linalg.norm(expected, axis=1), 1.0)  # raw, not normalised

    # text embeddings: ids from open_clip's tokenizer, pooled at the end token by hand
    texts = encoder.encode_texts(PROMPTS)
    assert texts.shape == (len(PROMPTS), 768) and texts.dtype == np.float32
    ids = open_clip.tokenize(PROMPTS)
    with torch.no_grad():
        hidden = direct.text_model(input_ids=ids).last_hidden_state
        at_end = hidden[torch.arange(len(ids)), ids.argmax(dim=1)]  # the end token has the largest id
        expected_text = direct.text_projection(at_end).numpy()
    np.testing.assert_allclose(texts, expected_text, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(encoder.encode_texts(PROMPTS[2:3]), texts[2:3], rtol=1e-5, atol=1e-5)
    assert encoder.encode_texts([]).shape == (0, 768)


def _direct_dino(snapshot: Path, model_class, backend):
    from transformers import AutoImageProcessor

    return model_class.from_pretrained(snapshot).eval(), AutoImageProcessor.from_pretrained(snapshot, backend=backend)


@pytest.mark.slow
def test_dinov2_paper_loader(paper):
    from transformers import Dinov2Model

    snapshot, encoder = paper("dinov2-base")
    card = registry.get_card("dinov2-base")
    assert encoder.key == f"dinov2-base@{card.revision}" and not encoder.patches
    model, processor = _direct_dino(snapshot, Dinov2Model, "pil")
    assert type(processor).__name__ == type(encoder.image_processor).__name__ == "BitImageProcessorPil"
    images = [picture(4), picture(5, (200, 320))]
    batch = encoder.collate([encoder.preprocess(image) for image in images])
    own = torch.from_numpy(processor(images=images, return_tensors="np")["pixel_values"])
    torch.testing.assert_close(batch, own, rtol=0, atol=0)
    assert batch.shape == (2, 3, 224, 224)

    with torch.no_grad():
        hidden = model(pixel_values=batch).last_hidden_state.numpy()
    hidden_size = json.loads((snapshot / "config.json").read_text())["hidden_size"]
    plain = encoder.encode_batch(batch)
    assert [sorted(f) for f in plain] == [["cls"], ["cls"]]
    gridded = encoder.with_patches().encode_batch(batch)
    assert encoder.with_patches().key == encoder.key + "+patches"
    for index, (cls_only, both) in enumerate(zip(plain, gridded)):
        np.testing.assert_allclose(cls_only["cls"], hidden[index, 0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(cls_only["cls"], both["cls"])
        assert both["patches"].shape == (16, 16, hidden_size)  # 224 / 14
        np.testing.assert_allclose(both["patches"].reshape(256, -1), hidden[index, 1:], rtol=1e-5, atol=1e-5)

    # shortest side 256, centre crop 224: of a 300x200 image the grid sees x 62.5..237.5, y 12.5..187.5
    assert encoder.patch_box(300, 200) == pytest.approx((62.5, 12.5, 237.5, 187.5))


@pytest.mark.slow
def test_dinov3_paper_loader_drops_register_tokens(paper):
    from transformers import DINOv3ViTModel

    snapshot, encoder = paper("dinov3-vitb16")
    card = registry.get_card("dinov3-vitb16")
    assert encoder.key == f"dinov3-vitb16@{card.revision}+patches" and encoder.patches
    config = json.loads((snapshot / "config.json").read_text())
    registers = config["num_register_tokens"]
    assert registers == 4
    model, processor = _direct_dino(snapshot, DINOv3ViTModel, None)
    images = [picture(6), picture(7, (160, 240))]
    batch = encoder.collate([encoder.preprocess(image) for image in images])
    torch.testing.assert_close(batch, processor(images=images, return_tensors="pt")["pixel_values"])
    assert batch.shape == (2, 3, 224, 224)  # plain resize, no crop

    with torch.no_grad():
        hidden = model(pixel_values=batch).last_hidden_state.numpy()
    assert hidden.shape[1] == 1 + registers + 14 * 14
    features = encoder.encode_batch(batch)
    for index, feature in enumerate(features):
        assert feature["cls"].shape == (config["hidden_size"],)
        assert feature["patches"].shape == (14, 14, config["hidden_size"])
        np.testing.assert_allclose(feature["cls"], hidden[index, 0], rtol=1e-5, atol=1e-5)
        patches = hidden[index, 1 + registers :].reshape(14, 14, -1)
        np.testing.assert_allclose(feature["patches"], patches, rtol=1e-5, atol=1e-5)
        # the registers are not patches: keeping them would shift the whole grid
        assert not np.allclose(feature["patches"].reshape(196, -1)[:4], hidden[index, 1:5])
    assert sorted(encoder.with_patches(False).encode_batch(batch)[0]) == ["cls"]
    assert encoder.patch_box(300, 200) == (0.0, 0.0, 300.0, 200.0)


@pytest.mark.slow
def test_aesthetic_paper_loader(paper):
    snapshot, head = paper("laion-aesthetic-v2")
    card = registry.get_card("laion-aesthetic-v2")
    assert head.key == f"laion-aesthetic-v2@{card.revision}" and head.input_dim == 768
    assert sorted(head.weights) == [f"layers.{i}.{p}" for i in (0, 2, 4, 6, 7) for p in ("bias", "weight")]

    # the original repo's MLP, in torch, on the original file
    mlp = torch.nn.Sequential(
        torch.nn.Linear(768, 1024),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(1024, 128),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(128, 64),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(64, 16),
        torch.nn.Linear(16, 1),
    )
    state = torch.load(snapshot / AESTHETIC_FILENAME, weights_only=True)
    mlp.load_state_dict({key.removeprefix("layers."): value for key, value in state.items()})
    mlp.eval()
    embeddings = np.random.default_rng(0).normal(size=(5, 768)).astype(np.float32) * 3.0
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    with torch.no_grad():
        expected = mlp(torch.from_numpy(unit)).numpy()[:, 0]
    scores = head.score(embeddings)
    assert scores.shape == (5,) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(head.score(embeddings[0]), scores[:1], rtol=1e-6)  # one vector
    np.testing.assert_allclose(head.score(embeddings * 10), scores, rtol=1e-5)  # scale-free: normalised
    with pytest.raises(ValueError, match="768"):
        head.score(np.zeros((2, 512)))


@pytest.mark.slow
def test_aesthetic_head_takes_the_tiny_clip_embedding(tmp_path):
    clip = registry.load_model("clip-vit-l-14-tiny", models_dir=tmp_path)
    head = registry.load_model("laion-aesthetic-v2-tiny", models_dir=tmp_path)
    embedding = clip.encode_batch(clip.collate([clip.preprocess(picture(9))]))[0]["embedding"]
    assert np.isfinite(head.score(embedding)).all()


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_on_cuda_is_close_to_fp32_on_the_cpu(tmp_path):
    images = [picture(10), picture(11, (200, 300))]
    for name in ("clip-vit-l-14-tiny", "dinov2-base-tiny", "dinov3-vitb16-tiny"):
        cpu = registry.load_model(name, models_dir=tmp_path)
        gpu = registry.load_model(name, models_dir=tmp_path, device="cuda")
        assert gpu.dtype == torch.bfloat16
        batch = cpu.collate([cpu.preprocess(image) for image in images])
        for want, got in zip(cpu.encode_batch(batch), gpu.encode_batch(batch)):
            for key in want:
                assert got[key].dtype == np.float32
                cosine = (want[key].ravel() @ got[key].ravel()) / (np.linalg.norm(want[key]) * np.linalg.norm(got[key]))
                assert cosine > 0.99, (name, key, cosine)
    cpu = registry.load_model("clip-vit-l-14-tiny", models_dir=tmp_path)
    gpu = registry.load_model("clip-vit-l-14-tiny", models_dir=tmp_path, device="cuda")
    np.testing.assert_allclose(gpu.encode_texts(PROMPTS), cpu.encode_texts(PROMPTS), rtol=0.05, atol=0.05)
