"""The built-in diffusers adapters on tiny pipelines built here from component configs (no download):
a Stable Diffusion text-to-image pipeline saved to a folder and loaded by ``diffusers-t2i`` as a user
would (``--model-id FOLDER``), and the image-list adapter's arguments."""

from __future__ import annotations

import hashlib
import json

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from idbench.builders.build import build  # noqa: E402
from idbench.cli import main  # noqa: E402
from idbench.evaluate_pkg.data import load_benchmark_data  # noqa: E402
from idbench.evaluate_pkg.models.clip import write_clip_tokenizer_files  # noqa: E402
from idbench.generation.adapters import DiffusersImageList, GeneratorError, GeneratorOptions, load_generator  # noqa: E402
from idbench.generation.requests import build_requests  # noqa: E402
from idbench.generation.run import generate_submission  # noqa: E402

SIZE = 32


def tiny_stable_diffusion(folder):
    """A Stable Diffusion pipeline of random tiny components (the shapes diffusers' own tests use), saved."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        block_out_channels=(4, 8), layers_per_block=1, sample_size=16, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=16, norm_num_groups=2,
    )  # fmt: skip
    vae = diffusers.AutoencoderKL(
        block_out_channels=(4, 8), in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=2,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
    )  # fmt: skip
    text_encoder = CLIPTextModel(CLIPTextConfig(
        bos_token_id=49406, eos_token_id=49407, hidden_size=16, intermediate_size=32, num_attention_heads=2,
        num_hidden_layers=2, pad_token_id=49407, vocab_size=49408, max_position_embeddings=77,
    ))  # fmt: skip
    tokens = folder / "tokenizer-files"
    tokens.mkdir(parents=True)
    write_clip_tokenizer_files(tokens)
    tokenizer = CLIPTokenizer(vocab=str(tokens / "vocab.json"), merges=str(tokens / "merges.txt"), model_max_length=77)
    pipeline = diffusers.StableDiffusionPipeline(
        unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, scheduler=diffusers.DDIMScheduler(clip_sample=False, set_alpha_to_one=False, steps_offset=1),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipeline.set_progress_bar_config(disable=True)
    pipeline.save_pretrained(folder / "pipeline")
    return folder / "pipeline"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffusers")
    build("cogcanvas", out=root / "cogcanvas")
    return load_benchmark_data(root / "cogcanvas"), tiny_stable_diffusion(root)


def test_the_text_to_image_adapter_loads_a_folder_and_fills_the_text_to_image_track(setup, tmp_path, capsys):
    data, pipeline = setup
    out = tmp_path / "sub"
    argv = ["generate", "cogcanvas", "--data", str(data.folder), "--model", "diffusers-t2i", "--model-id", str(pipeline),
            "--out", str(out), "--task", "text-to-image", "--resolution", str(SIZE), "--steps", "2"]  # fmt: skip
    assert main(argv) == 0
    assert main(["validate", str(out), "--data", str(data.folder)]) == 0
    record = json.loads((out / "submission.json").read_text())["generation"]
    assert record["adapter"] == "diffusers-t2i" and record["pipeline_class"] == "StableDiffusionPipeline"
    assert record["steps"] == 2 and record["dtype"] == "float32" and record["diffusers"] == diffusers.__version__
    # The same seed gives the same bytes: regenerate two images and compare.
    files = sorted((out / "images").glob("*.png"))[:2]
    before = [hashlib.sha256(f.read_bytes()).digest() for f in files]
    for f in files:
        f.unlink()
    capsys.readouterr()
    assert main(argv) == 0
    assert f"generated 2 images" in capsys.readouterr().out
    assert [hashlib.sha256(f.read_bytes()).digest() for f in files] == before


def test_the_text_to_image_adapter_refuses_references_unless_told(setup, tmp_path):
    data, pipeline = setup
    adapter = load_generator("diffusers-t2i", GeneratorOptions(model_id=str(pipeline), steps=1))
    with pytest.raises(GeneratorError, match="reference image.*--task text-to-image.*--ignore-references"):
        generate_submission(data, adapter, tmp_path / "ref", resolution=SIZE, limit=1, progress=False)
    ignoring = load_generator("diffusers-t2i", GeneratorOptions(model_id=str(pipeline), steps=1, ignore_references=True))
    generate_submission(data, ignoring, tmp_path / "ok", resolution=SIZE, limit=1, progress=False)
    assert json.loads((tmp_path / "ok" / "submission.json").read_text())["generation"]["references"] == "ignored"


def test_the_image_list_adapter_passes_the_references_in_order(setup):
    data, _ = setup
    seen = {}

    class Recorder:
        def __call__(self, **arguments):
            seen.update(arguments)
            return type("Output", (), {"images": [arguments["image"][0]]})()

    request = build_requests(data, [("cogcanvas-02", 0, "images/x.png")], resolution=SIZE)[0]
    adapter = DiffusersImageList.from_pipeline(Recorder(), steps=3, call_arguments={"max_sequence_length": 32})
    adapter(request)
    assert seen["max_sequence_length"] == 32 and adapter.generation_record()["call_arguments"] == {"max_sequence_length": 32}
    assert seen["image"] == request.images and len(seen["image"]) == 5  # A, B, their items, the background
    assert (seen["height"], seen["num_inference_steps"], seen["prompt"]) == (SIZE, 3, request.prompt)
    assert seen["generator"].initial_seed() == 0

