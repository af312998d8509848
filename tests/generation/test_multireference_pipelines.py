"""Three multi-reference pipeline families built here from component configs (no download), saved to folders
and run through ``idbench generate`` and the Python API on all three benchmarks: FLUX.2 klein
(``diffusers-image-list``, ``image=[...]``), OmniGen (``diffusers-omnigen``, ``input_images=`` and prompt
placeholders) and FLUX.1 Kontext (``diffusers-kontext``, one ``image=``: a collage of several). Random tiny
weights: a plumbing check of the call, the reference order, seeds and the record, not of image quality."""

from __future__ import annotations

import hashlib
import json
import re
from unittest import mock

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("torchvision")  # OmniGen's image processor uses it

from idbench.builders.build import build  # noqa: E402
from idbench.cli import main  # noqa: E402
from idbench.evaluate_pkg.baselines import reference_image  # noqa: E402
from idbench.evaluate_pkg.data import load_benchmark_data  # noqa: E402
from idbench.evaluate_pkg.models.clip import write_clip_tokenizer_files  # noqa: E402
from idbench.evaluate_pkg.submission import SubmissionError, validate_submission  # noqa: E402
from idbench.generation.adapters import DiffusersImageList, DiffusersKontext, GeneratorOptions, load_generator  # noqa: E402
from idbench.generation.requests import manifest_rows  # noqa: E402
from idbench.generation.run import generate_submission  # noqa: E402

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

BENCHMARKS = ("cogcanvas", "charis", "identity-collapse")
SIZE = 32
# FLUX.2 refuses a reference with a side under 64 px; 160 keeps the benchmarks' narrowest references
# (234 x 512 items) above that. OmniGen takes any size: 64 keeps it fast.
# Kontext: the side of a collage's cells.
REFERENCE_SIDE = {"diffusers-image-list": 160, "diffusers-omnigen": 64, "diffusers-kontext": 64}
PIPELINE_CLASS = {
    "diffusers-image-list": "Flux2KleinPipeline",
    "diffusers-omnigen": "OmniGenPipeline",
    "diffusers-kontext": "FluxKontextPipeline",
}
# FLUX.2 klein's guidance 1 skips its second (unconditioned) pass; a short prompt sequence (its default is
# 512 tokens) keeps the tiny transformer's attention small. Both halve the test's time.
KLEIN_GUIDANCE = 1.0
KLEIN_CALL = {"max_sequence_length": 32}
# Kontext resizes its input image to one of its ~1-megapixel training sizes unless told not to (_auto_resize).
KONTEXT_CALL = {"max_sequence_length": 32, "_auto_resize": False}
WORDS = ["[UNK]", "[PAD]", "a", "photo", "of", "the", "person", "in", "and", "with", "references"]


def word_tokenizer(chat_template: str | None = None):
    """A word-level tokenizer made in memory (no vocabulary files to download): unknown words are [UNK]."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model = Tokenizer(models.WordLevel({word: k for k, word in enumerate(WORDS)}, unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model, unk_token="[UNK]", pad_token="[PAD]", model_max_length=512
    )
    if chat_template:
        tokenizer.chat_template = chat_template
    return tokenizer


def tiny_flux2_klein():
    """Flux2KleinPipeline with diffusers' test shapes, except: a VAE of four blocks (8x downscale, so a
    reference costs few tokens) and a 28-layer 16-wide text encoder, so the pipeline's default
    ``text_encoder_out_layers`` (9, 18, 27) and ``max_sequence_length`` work from the command line."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    transformer = diffusers.Flux2Transformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=48,
        timestep_guidance_channels=256,
        axes_dims_rope=[4, 4, 4, 4],
        guidance_embeds=False,
    )
    text_encoder = Qwen3ForCausalLM(
        Qwen3Config(
            intermediate_size=16,
            hidden_size=16,
            num_hidden_layers=28,
            num_attention_heads=2,
            num_key_value_heads=2,
            vocab_size=len(WORDS),
            max_position_embeddings=512,
        )
    )
    vae = diffusers.AutoencoderKLFlux2(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(4,) * 4,
        layers_per_block=1,
        latent_channels=1,
        norm_num_groups=1,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )
    tokenizer = word_tokenizer("{% for message in messages %}{{ message['content'] }}{% endfor %}")
    return diffusers.Flux2KleinPipeline(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        transformer=transformer,
    )


def tiny_omnigen():
    """OmniGenPipeline: a one-layer 16-wide OmniGen transformer and a four-block VAE (8x downscale, what
    OmniGen's processor assumes when it counts an image's tokens)."""
    torch.manual_seed(0)
    transformer = diffusers.OmniGenTransformer2DModel(
        in_channels=4,
        patch_size=2,
        hidden_size=16,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        num_layers=1,
        pad_token_id=1,
        vocab_size=len(WORDS),
        pos_embed_max_size=32,
        time_step_dim=32,
        rope_scaling={"short_factor": [1.0] * 4, "long_factor": [1.0] * 4},
    )
    vae = diffusers.AutoencoderKL(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(4,) * 4,
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=1,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
    )
    return diffusers.OmniGenPipeline(
        transformer=transformer,
        vae=vae,
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        tokenizer=word_tokenizer(),
    )


def tiny_flux_kontext(folder):
    """FluxKontextPipeline with diffusers' test shapes, a four-block VAE (8x), the CLIP tokenizer files idbench
    writes itself and a word-level tokenizer in place of T5's."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer, T5Config, T5EncoderModel

    torch.manual_seed(0)
    transformer = diffusers.FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=[4, 4, 8],
    )
    clip = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=49406,
            eos_token_id=49407,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=1,
            pad_token_id=49407,
            vocab_size=49408,
            max_position_embeddings=77,
            projection_dim=32,
        )
    )
    t5 = T5EncoderModel(T5Config(vocab_size=len(WORDS), d_model=32, d_kv=8, d_ff=37, num_layers=1, num_heads=4))
    vae = diffusers.AutoencoderKL(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(4,) * 4,
        layers_per_block=1,
        latent_channels=1,
        norm_num_groups=1,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
    )
    folder.mkdir(parents=True)
    write_clip_tokenizer_files(folder)
    tokenizer = CLIPTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"), model_max_length=77)
    return diffusers.FluxKontextPipeline(
        scheduler=diffusers.FlowMatchEulerDiscreteScheduler(),
        text_encoder=clip,
        text_encoder_2=t5,
        tokenizer=tokenizer,
        tokenizer_2=word_tokenizer(),
        transformer=transformer,
        vae=vae,
        image_encoder=None,
        feature_extractor=None,
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("multireference")
    for name in BENCHMARKS:
        build(name, out=root / name)
    folders = {}
    makers = {
        "diffusers-image-list": tiny_flux2_klein,
        "diffusers-omnigen": tiny_omnigen,
        "diffusers-kontext": lambda: tiny_flux_kontext(root / "clip-files"),
    }
    for adapter, make in makers.items():
        folders[adapter] = root / PIPELINE_CLASS[adapter]
        make().save_pretrained(folders[adapter])
    return {name: load_benchmark_data(root / name) for name in BENCHMARKS}, folders


@pytest.fixture(scope="module")
def adapters(setup):
    """Each family loaded from its folder once, as ``--model-id FOLDER`` does, references bounded."""
    _, folders = setup
    klein = GeneratorOptions(
        model_id=str(folders["diffusers-image-list"]),
        steps=1,
        guidance=KLEIN_GUIDANCE,
        reference_side=REFERENCE_SIDE["diffusers-image-list"],
    )
    omnigen = GeneratorOptions(
        model_id=str(folders["diffusers-omnigen"]), steps=1, reference_side=REFERENCE_SIDE["diffusers-omnigen"]
    )
    kontext = GeneratorOptions(
        model_id=str(folders["diffusers-kontext"]), steps=1, reference_side=REFERENCE_SIDE["diffusers-kontext"]
    )
    return {
        "diffusers-image-list": DiffusersImageList(
            klein, call_arguments=KLEIN_CALL
        ),  # what load_generator builds, plus call arguments
        "diffusers-omnigen": load_generator("diffusers-omnigen", omnigen),
        "diffusers-kontext": DiffusersKontext(kontext, call_arguments=KONTEXT_CALL),
    }


def thumbnail(image) -> np.ndarray:
    return np.asarray(image.convert("RGB").resize((8, 8)), dtype=float)


def closest(image, candidates: dict[str, object]) -> str:
    """The id of the candidate image that ``image`` is a resized copy of (nearest 8x8 thumbnail)."""
    small = thumbnail(image)
    return min(candidates, key=lambda key: float(np.abs(thumbnail(candidates[key]) - small).mean()))


def expected_references(data, prompt_id: str) -> list[str]:
    """The reference ids in the documented order, read from the prompt row itself (docs/generation.md)."""
    prompt = data.prompt_rows[prompt_id]
    if data.name == "cogcanvas":
        persons = sorted(prompt["persons"], key=lambda person: person["slot"])
        items = [person["item_ref_id"] for person in persons if person.get("item_ref_id")]
        background = [prompt["background_ref_id"]] if prompt.get("background_ref_id") else []
        return [person["ref_id"] for person in persons] + items + background
    if data.name == "charis":
        return [prompt["subject_id"]]
    return list(prompt["subject_ids"])


def expected_roles(data, prompt_id: str) -> list[str]:
    prompt = data.prompt_rows[prompt_id]
    if data.name == "cogcanvas":
        slots = sorted(person["slot"] for person in prompt["persons"])
        items = [
            f"person {p['slot']}'s item"
            for p in sorted(prompt["persons"], key=lambda p: p["slot"])
            if p.get("item_ref_id")
        ]
        return (
            [f"person {slot}" for slot in slots] + items + (["background"] if prompt.get("background_ref_id") else [])
        )
    if data.name == "charis":
        return ["subject"]
    return [f"subject {k}" for k in range(1, len(prompt["subject_ids"]) + 1)]


def collage_cells(collage, count: int, cell: int) -> list:
    """The ``count`` cells of a Kontext collage, row by row: a grid as square as it gets, columns first
    (docs/generation.md: ceil(sqrt(n)) columns)."""
    columns = int(np.ceil(np.sqrt(count)))
    assert collage.size == (columns * cell, int(np.ceil(count / columns)) * cell)
    return [
        collage.crop(((k % columns) * cell, (k // columns) * cell, (k % columns + 1) * cell, (k // columns + 1) * cell))
        for k in range(count)
    ]


def check_only_the_left_out_rows_fail(out, data, generated: int) -> None:
    """A --limit run validates except for the rows it left out: every problem is one of those missing."""
    rows = manifest_rows(out / "manifest.csv")
    left_out = {(p, s) for p, s, _ in rows[generated:]}
    with pytest.raises(SubmissionError) as caught:
        validate_submission(out, data)
    problems = caught.value.problems
    assert problems and all((problem.prompt_id, problem.seed) in left_out for problem in problems)
    assert caught.value.total == len(left_out)


@pytest.mark.parametrize("adapter_name", sorted(PIPELINE_CLASS))
def test_the_command_line_runs_a_saved_family_folder(setup, tmp_path, adapter_name):
    data_by_name, folders = setup
    data = data_by_name["charis"]  # one 512 x 512 reference per prompt: fast at full size
    out = tmp_path / "sub"
    argv = [
        "generate",
        "charis",
        "--data",
        str(data.folder),
        "--model",
        adapter_name,
        "--model-id",
        str(folders[adapter_name]),
        "--resolution",
        str(SIZE),
        "--steps",
        "1",
        "--limit",
        "1",
        "--out",
        str(out),
    ]
    if adapter_name == "diffusers-image-list":
        argv += ["--guidance", str(KLEIN_GUIDANCE)]
    side = 64 if adapter_name == "diffusers-omnigen" else None  # one family with the flag, the others as given
    assert main(argv + (["--reference-side", str(side)] if side else [])) == 0
    record = json.loads((out / "submission.json").read_text())["generation"]
    assert record["adapter"] == adapter_name and record["pipeline_class"] == PIPELINE_CLASS[adapter_name]
    assert record["steps"] == 1 and record["reference_side"] == side and record["resolution"] == SIZE
    check_only_the_left_out_rows_fail(out, data, generated=1)
    file = manifest_rows(out / "manifest.csv")[0][2]
    with Image.open(out / file) as image:
        assert image.size == (SIZE, SIZE)  # Kontext would draw 1024 x 1024 unless told max_area


@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("adapter_name", sorted(PIPELINE_CLASS))
def test_each_family_gets_the_references_in_order_on_every_benchmark(
    setup, adapters, tmp_path, adapter_name, benchmark
):
    data = setup[0][benchmark]
    adapter = adapters[adapter_name]
    pipeline_class = type(adapter.pipeline)
    out = tmp_path / "sub"
    with mock.patch.object(pipeline_class, "__call__", autospec=True, side_effect=pipeline_class.__call__) as spy:
        generate_submission(data, adapter, out, resolution=SIZE, limit=2, progress=False)
    rows = manifest_rows(out / "manifest.csv")[:2]
    assert spy.call_count == 2
    for (prompt_id, seed, _file), call in zip(rows, spy.call_args_list):
        arguments = call.kwargs
        prompt = data.prompt_rows[prompt_id]
        assert arguments["generator"].initial_seed() == seed and arguments["height"] == SIZE
        ids = expected_references(data, prompt_id)
        originals = {ref_id: reference_image(data, ref_id, prompt) for ref_id in ids}
        side = REFERENCE_SIDE[adapter_name]
        if adapter_name == "diffusers-kontext" and len(ids) > 1:
            cells = collage_cells(arguments["image"], len(ids), side)
            assert [closest(cell, originals) for cell in cells] == ids
            assert arguments["max_area"] == SIZE * SIZE
            continue
        passed = {
            "diffusers-image-list": lambda: arguments["image"],  # noqa: B023 (called at once, in this iteration)
            "diffusers-omnigen": lambda: arguments["input_images"],  # noqa: B023
            "diffusers-kontext": lambda: [arguments["image"]],  # noqa: B023
        }[adapter_name]()
        assert [closest(image, originals) for image in passed] == ids
        for image, ref_id in zip(passed, ids):
            width, height = originals[ref_id].size
            assert max(image.size) == min(side, max(width, height))
            assert abs(image.width / image.height - width / height) < 0.05  # aspect kept
        if adapter_name == "diffusers-omnigen":
            named = re.findall(r"([^:,]+): <img><\|image_(\d+)\|></img>", arguments["prompt"].split(" References: ")[1])
            assert [(role.strip(), int(k)) for role, k in named] == [
                (role, k + 1) for k, role in enumerate(expected_roles(data, prompt_id))
            ]
            assert arguments["prompt"].startswith(prompt["prompt"].rstrip())
        else:
            assert arguments["prompt"] == prompt["prompt"]
    check_only_the_left_out_rows_fail(out, data, generated=2)
    record = json.loads((out / "submission.json").read_text())["generation"]
    assert record["adapter"] == adapter_name and record["pipeline_class"] == PIPELINE_CLASS[adapter_name]
    assert record["reference_side"] == REFERENCE_SIDE[adapter_name] and "request's order" in record["references"]
    if adapter_name == "diffusers-omnigen":
        assert (
            "<img><|image_{k}|></img>" in record["prompt_rule"]
            and "torch.manual_seed(seed)" in record["global_seed_rule"]
        )
    # The same seed gives the same bytes: remove the first image, generate it again.
    first = out / rows[0][2]
    before = hashlib.sha256(first.read_bytes()).digest()
    first.unlink()
    report = generate_submission(data, adapter, out, resolution=SIZE, limit=2, progress=False)
    assert (report.generated, report.skipped) == (1, 1)
    assert hashlib.sha256(first.read_bytes()).digest() == before
