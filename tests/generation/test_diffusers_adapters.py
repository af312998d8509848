"""The built-in diffusers adapters on tiny pipelines built here from component configs (no download):
a Stable Diffusion text-to-image pipeline saved to a folder and loaded by ``diffusers-t2i`` as a user
would (``--model-id FOLDER``), its batches, and the multi-reference adapters' arguments (a recording
stand-in for the pipeline; tests/generation/test_multireference_pipelines.py runs real tiny ones)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from PIL import Image  # noqa: E402

from idbench.builders.build import build  # noqa: E402
from idbench.cli import main  # noqa: E402
from idbench.evaluate_pkg.data import load_benchmark_data  # noqa: E402
from idbench.generation.adapters import (  # noqa: E402
    DiffusersImageList,
    DiffusersKontext,
    DiffusersOmniGen,
    GeneratorError,
    GeneratorOptions,
    fit_reference,
    load_generator,
    omnigen_prompt,
    reference_collage,
)
from idbench.generation.requests import GenerationRequest, Reference, build_requests  # noqa: E402
from idbench.generation.run import generate_submission  # noqa: E402
from idbench.generation.tiny import random_stable_diffusion  # noqa: E402

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SIZE = 32


def tiny_stable_diffusion(folder):
    """A Stable Diffusion pipeline of random tiny components (the shapes diffusers' own tests use), saved."""
    return random_stable_diffusion(folder, "tiny")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffusers")
    build("cogcanvas", out=root / "cogcanvas")
    return load_benchmark_data(root / "cogcanvas"), tiny_stable_diffusion(root)


@pytest.mark.slow
def test_the_text_to_image_adapter_loads_a_folder_and_fills_the_text_to_image_track(setup, tmp_path, capsys):
    data, pipeline = setup
    out = tmp_path / "sub"
    argv = [
        "generate",
        "cogcanvas",
        "--data",
        str(data.folder),
        "--model",
        "diffusers-t2i",
        "--model-id",
        str(pipeline),
        "--out",
        str(out),
        "--task",
        "text-to-image",
        "--resolution",
        str(SIZE),
        "--steps",
        "2",
        "--batch-size",
        "8",
    ]
    assert main(argv) == 0
    assert main(["validate", str(out), "--data", str(data.folder)]) == 0
    record = json.loads((out / "submission.json").read_text())["generation"]
    assert record["adapter"] == "diffusers-t2i" and record["pipeline_class"] == "StableDiffusionPipeline"
    assert record["seed_rule"].startswith("torch.Generator('cpu').manual_seed(seed)")  # what the adapter does
    assert record["steps"] == 2 and record["dtype"] == "float32" and record["diffusers"] == diffusers.__version__
    assert record["batch_size"] == 8
    # The same seed gives the same image: regenerate two (a batch of 2, not of 8) and compare. A batch changes
    # the order of float sums, so pixels may move by one level; one at a time is bitwise (test_generate).
    files = sorted((out / "images").glob("*.png"))[:2]
    before = [np.asarray(Image.open(f), np.int16) for f in files]
    for f in files:
        f.unlink()
    capsys.readouterr()
    assert main(argv) == 0
    assert "generated 2 images" in capsys.readouterr().out
    assert all(np.abs(np.asarray(Image.open(f), np.int16) - b).max() <= 1 for f, b in zip(files, before))


@pytest.mark.slow
def test_the_text_to_image_adapter_refuses_references_unless_told(setup, tmp_path):
    data, pipeline = setup
    adapter = load_generator("diffusers-t2i", GeneratorOptions(model_id=str(pipeline), steps=1))
    with pytest.raises(GeneratorError, match="reference image.*--task text-to-image.*--ignore-references"):
        generate_submission(data, adapter, tmp_path / "ref", resolution=SIZE, limit=1, progress=False)
    ignoring = load_generator(
        "diffusers-t2i", GeneratorOptions(model_id=str(pipeline), steps=1, ignore_references=True)
    )
    generate_submission(data, ignoring, tmp_path / "ok", resolution=SIZE, limit=1, progress=False)
    assert json.loads((tmp_path / "ok" / "submission.json").read_text())["generation"]["references"] == "ignored"


@pytest.mark.slow
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
    assert seen["max_sequence_length"] == 32 and adapter.generation_record()["call_arguments"] == {
        "max_sequence_length": 32
    }
    assert seen["image"] == request.images and len(seen["image"]) == 5  # A, B, their items, the background
    assert (seen["height"], seen["num_inference_steps"], seen["prompt"]) == (SIZE, 3, request.prompt)
    assert seen["generator"].initial_seed() == 0


class Recorder:
    """A stand-in pipeline: keeps the arguments of each call, returns a blank image."""

    def __init__(self):
        self.calls = []

    def __call__(self, **arguments):
        self.calls.append(arguments)
        return type("Output", (), {"images": [Image.new("RGB", (SIZE, SIZE))]})()


def solid_request(*colours_and_sizes):
    references = tuple(
        Reference(f"subject {k + 1}", f"r{k}", Image.new("RGB", size, colour))
        for k, (colour, size) in enumerate(colours_and_sizes)
    )
    return GenerationRequest("b", "p", 7, "images/p.png", "two friends", references, SIZE)


def test_references_are_downscaled_to_the_reference_side_only():
    wide = Image.new("RGB", (400, 100), "red")
    assert fit_reference(wide, 100).size == (100, 25) and fit_reference(wide, None) is wide
    assert fit_reference(wide, 500) is wide  # never enlarged
    assert fit_reference(Image.new("L", (10, 10)), 5).mode == "RGB"
    with pytest.raises(GeneratorError, match="reference side"):
        DiffusersImageList.from_pipeline(Recorder(), reference_side=0)
    recorder = Recorder()
    DiffusersImageList.from_pipeline(recorder, reference_side=64)(
        solid_request(("red", (256, 128)), ("blue", (32, 48)))
    )
    assert [image.size for image in recorder.calls[0]["image"]] == [(64, 32), (32, 48)]


def test_the_kontext_collage_is_a_grid_in_the_request_order():
    colours = ["red", "lime", "blue", "yellow", "magenta"]
    canvas = reference_collage([Image.new("RGB", (40, 20), colour) for colour in colours], cell=50)
    assert canvas.size == (150, 100)  # 5 references: 3 columns, 2 rows of 50 px cells
    centres = [(25, 25), (75, 25), (125, 25), (25, 75), (75, 75)]
    assert [canvas.getpixel(xy) for xy in centres] == [Image.new("RGB", (1, 1), c).getpixel((0, 0)) for c in colours]
    assert canvas.getpixel((25, 5)) == (255, 255, 255)  # a 2:1 image fitted into its cell leaves white above
    assert canvas.getpixel((125, 75)) == (255, 255, 255)  # the sixth cell is empty
    assert [reference_collage([Image.new("RGB", (1, 1))] * n, cell=10).size for n in (2, 3, 4, 9)] == [
        (20, 10),
        (20, 20),
        (20, 20),
        (30, 30),
    ]

    recorder = Recorder()
    adapter = DiffusersKontext.from_pipeline(recorder, reference_side=50)
    adapter(solid_request(("red", (40, 20)), ("blue", (20, 40))))
    passed = recorder.calls[0]["image"]
    assert (
        passed.size == (100, 50)
        and passed.getpixel((25, 25)) == (255, 0, 0)
        and passed.getpixel((75, 25)) == (0, 0, 255)
    )
    one = solid_request(("red", (80, 40)))
    adapter(one)
    assert recorder.calls[1]["image"].size == (50, 25)  # one reference: as it is, within the reference side
    assert (
        "one collage, left to right then top to bottom in the request's order"
        in adapter.generation_record()["references"]
    )


def test_the_omnigen_prompt_names_each_reference_by_its_role():
    assert omnigen_prompt("Two people talk. ", ["person A", "person A's item"]) == (
        "Two people talk. References: person A: <img><|image_1|></img>, person A's item: <img><|image_2|></img>."
    )
    assert omnigen_prompt("A cat.", []) == "A cat."
    recorder = Recorder()
    DiffusersOmniGen.from_pipeline(recorder)(solid_request(("red", (8, 8)), ("blue", (8, 8))))
    call = recorder.calls[0]
    assert call["prompt"].endswith("subject 1: <img><|image_1|></img>, subject 2: <img><|image_2|></img>.")
    assert [image.getpixel((0, 0)) for image in call["input_images"]] == [
        (255, 0, 0),
        (0, 0, 255),
    ] and "image" not in call


@pytest.mark.slow
def test_a_text_to_image_batch_gives_the_images_of_one_at_a_time(setup):
    _, pipeline = setup
    adapter = load_generator("diffusers-t2i", GeneratorOptions(model_id=str(pipeline), steps=2))
    requests = [
        GenerationRequest("b", f"p{k}", k, f"images/p{k}.png", f"a photo of person {k}", (), SIZE, "text-to-image")
        for k in range(3)
    ]
    one_at_a_time = [np.asarray(adapter(request), np.int16) for request in requests]
    batched = [np.asarray(image, np.int16) for image in adapter.generate_batch(requests)]
    # The same images up to float summation order: at most one level of 255 apart (bitwise on some CPUs).
    assert len(batched) == 3 and all(np.abs(a - b).max() <= 1 for a, b in zip(batched, one_at_a_time))
    recorder = Recorder()
    with_references = DiffusersImageList.from_pipeline(recorder)
    with_references.generate_batch([solid_request(("red", (8, 8)))] * 2)
    assert len(recorder.calls) == 2  # requests with references go one at a time
