"""`idbench generate` through a test adapter for all three benchmarks: requests, the run, resume, determinism,
plugins and the refusals (docs/generation.md)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from idbench.builders.build import build
from idbench.cli import main
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.submission import validate_submission
from idbench.generation.adapters import GeneratorError, GeneratorOptions, load_generator, register_generator
from idbench.generation.requests import build_requests, manifest_rows, reference_roles
from idbench.generation.run import GenerationRunError, generate_submission

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

BENCHMARKS = ("cogcanvas", "charis", "identity-collapse")
SIZE = 64


def side_by_side(request):
    """The test adapter: the request's references side by side on a canvas tinted by the seed (no references:
    the tint alone), so an image depends on the references, their order and the seed only."""
    rng = np.random.default_rng(request.seed)
    canvas = Image.new("RGB", (request.resolution, request.resolution), tuple(int(v) for v in rng.integers(0, 256, 3)))
    images = request.images
    for k, image in enumerate(images):
        width = request.resolution // len(images)
        canvas.paste(
            image.convert("RGB").resize((width, request.resolution // 2)), (k * width, request.resolution // 4)
        )
    return canvas


class CountingAdapter:
    """A factory adapter (a class): counts what it is asked for and reports a generation record."""

    def __init__(self, options: GeneratorOptions):
        self.options = options
        self.calls: list[tuple[str, int]] = []

    def __call__(self, request):
        self.calls.append((request.prompt_id, request.seed))
        return side_by_side(request)

    def generation_record(self):
        return {"model_id": "test/side-by-side", "revision": "0" * 40, "pipeline_class": "none", "steps": 0}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    for name in BENCHMARKS:
        build(name, out=root / name)
    return {name: load_benchmark_data(root / name) for name in BENCHMARKS}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Generates a whole submission of every sample benchmark.
@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_generates_a_valid_submission(built, tmp_path, name):
    data = built[name]
    report = generate_submission(data, side_by_side, tmp_path / "sub", resolution=SIZE, progress=False)
    assert (report.generated, report.skipped) == (len(data.required_pairs), 0)
    with validate_submission(tmp_path / "sub", data) as submission:
        assert len(submission.entries) == len(data.required_pairs)
    metadata = json.loads((tmp_path / "sub" / "submission.json").read_text())
    record = metadata["generation"]
    assert metadata["model"] == "side_by_side" and record["adapter"] == "side_by_side"
    # A plain function says nothing of how it seeds: the record claims no torch generator for it.
    assert record["resolution"] == SIZE and "torch" not in record["seed_rule"] and "not reported" in record["seed_rule"]
    assert record["seconds_per_image"] >= 0 and record["libraries"]["idbench"]


def test_reference_order_and_roles(built):
    cog = built["cogcanvas"]
    prompt = cog.prompt_rows["cogcanvas-02"]  # laid out B, A: the roles still go by letter
    assert prompt["layout"] == ["B", "A"]
    by_slot = {p["slot"]: p for p in prompt["persons"]}
    assert reference_roles(cog, prompt) == [
        ("person A", by_slot["A"]["ref_id"]),
        ("person B", by_slot["B"]["ref_id"]),
        ("person A's item", by_slot["A"]["item_ref_id"]),
        ("person B's item", by_slot["B"]["item_ref_id"]),
        ("background", prompt["background_ref_id"]),
    ]
    charis = built["charis"]
    first = next(iter(charis.prompt_rows.values()))
    assert reference_roles(charis, first) == [("subject", first["subject_id"])]
    collapse = built["identity-collapse"]
    first = next(iter(collapse.prompt_rows.values()))
    assert reference_roles(collapse, first) == [(f"subject {k + 1}", s) for k, s in enumerate(first["subject_ids"])]


def test_requests_follow_the_template_and_share_references_per_prompt(built, tmp_path):
    data = built["identity-collapse"]
    generate_submission(data, side_by_side, tmp_path / "sub", resolution=SIZE, limit=1, progress=False)
    rows = manifest_rows(tmp_path / "sub" / "manifest.csv")
    assert [(p, s) for p, s, _ in rows] == data.required_pairs
    requests = build_requests(data, rows[:3], resolution=SIZE)
    assert [r.file for r in requests] == [f for _, _, f in rows[:3]]
    assert requests[0].references is requests[1].references  # three seeds of one prompt, decoded once
    assert requests[0].prompt == data.prompt_rows[rows[0][0]]["prompt"]


def test_text_to_image_has_no_references(built, tmp_path):
    data = built["cogcanvas"]
    seen = []

    def text_only(request):
        seen.append(request.references)
        return side_by_side(request)

    generate_submission(
        data, text_only, tmp_path / "t2i", resolution=SIZE, task="text-to-image", limit=3, progress=False
    )
    assert seen == [(), (), ()]
    metadata = json.loads((tmp_path / "t2i" / "submission.json").read_text())
    assert metadata["task"] == "text-to-image" and metadata["generation"]["task"] == "text-to-image"


def test_a_rerun_generates_only_the_missing_images_and_the_same_bytes(built, tmp_path):
    data = built["charis"]
    out = tmp_path / "sub"
    first = CountingAdapter(GeneratorOptions())
    generate_submission(data, first, out, resolution=SIZE, progress=False)
    rows = manifest_rows(out / "manifest.csv")
    before = {file: sha(out / file) for _, _, file in rows}
    removed = [rows[3], rows[10]]
    for _, _, file in removed:
        (out / file).unlink()
    again = CountingAdapter(GeneratorOptions())
    report = generate_submission(data, again, out, resolution=SIZE, progress=False)
    assert (report.generated, report.skipped) == (2, len(rows) - 2)
    assert again.calls == [(p, s) for p, s, _ in removed]
    assert {file: sha(out / file) for _, _, file in rows} == before  # same adapter and seed: same bytes
    assert not list(out.rglob("*.tmp"))
    record = json.loads((out / "submission.json").read_text())["generation"]
    assert record["model_id"] == "test/side-by-side" and record["revision"] == "0" * 40


def test_the_cli_runs_a_registered_adapter_and_reports_the_skips(built, tmp_path, capsys):
    register_generator("test-side-by-side", side_by_side)
    data = built["identity-collapse"]
    argv = [
        "generate",
        "identity-collapse",
        "--data",
        str(data.folder),
        "--model",
        "test-side-by-side",
        "--out",
        str(tmp_path / "sub"),
        "--resolution",
        str(SIZE),
        "--name",
        "Side by side",
    ]
    assert main(argv + ["--limit", "4"]) == 0
    assert "generated 4 images" in capsys.readouterr().out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"generated {len(data.required_pairs) - 4} images" in out and "skipped 4 already there" in out
    assert main(["validate", str(tmp_path / "sub"), "--data", str(data.folder)]) == 0
    assert json.loads((tmp_path / "sub" / "submission.json").read_text())["model"] == "Side by side"


def test_an_entry_point_adapter_and_module_attr_run(built, tmp_path, monkeypatch):
    module = type(sys)("user_generators")
    module.Factory = CountingAdapter
    monkeypatch.setitem(sys.modules, "user_generators", module)
    point = importlib.metadata.EntryPoint("user-model", "user_generators:Factory", "idbench.generators")
    real = importlib.metadata.entry_points
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda **kw: importlib.metadata.EntryPoints([point]) if kw.get("group") == "idbench.generators" else real(**kw),
    )
    adapter = load_generator("user-model")
    assert isinstance(adapter, CountingAdapter)
    generate_submission(built["charis"], adapter, tmp_path / "ep", resolution=SIZE, limit=2, progress=False)
    assert len(adapter.calls) == 2
    assert isinstance(load_generator("user_generators:Factory"), CountingAdapter)


# Asks the diffusers pipeline loader for a model that is not in the cache (the refusal under test).
@pytest.mark.slow
def test_refusals_are_one_error(built, tmp_path, capsys):
    data = built["charis"]
    with pytest.raises(GeneratorError, match="unknown adapter 'nope'.*diffusers-t2i"):
        load_generator("nope")
    with pytest.raises(GeneratorError, match="cannot import"):
        load_generator("no_such_module_here:thing")
    generate_submission(data, side_by_side, tmp_path / "sub", resolution=SIZE, limit=1, progress=False)
    with pytest.raises(GenerationRunError, match="not cogcanvas"):
        generate_submission(built["cogcanvas"], side_by_side, tmp_path / "sub", resolution=SIZE, progress=False)
    with pytest.raises(GenerationRunError, match="not a PIL image"):
        generate_submission(data, lambda r: "a string", tmp_path / "bad", resolution=SIZE, progress=False)
    assert not list((tmp_path / "bad").rglob("*.png"))
    with pytest.raises(IdbenchError, match="retrieval"):
        generate_submission(built["cogcanvas"], side_by_side, tmp_path / "r", task="retrieval", progress=False)
    argv = ["generate", "charis", "--data", str(data.folder), "--model", "diffusers-t2i", "--out", str(tmp_path / "x")]
    assert main(argv + ["--model-id", "some-org/some-model"]) == 2
    assert "pin the revision" in capsys.readouterr().err
    assert main(argv + ["--model-id", "some-org/some-model", "--revision", "a" * 40]) == 2
    assert f"hf download some-org/some-model --revision {'a' * 40}" in capsys.readouterr().err
