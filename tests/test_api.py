"""The Python API (idbench.score, the lazy public names), Ctrl-C on the command line, and --device checks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import idbench
from idbench.cli import main

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = (
    "score",
    "metrics",
    "load_benchmark_data",
    "validate_submission",
    "ScoreOptions",
    "JudgeConfig",
    "IdbenchError",
)


# --- import idbench ----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_import_idbench_is_light_and_names_resolve_on_use():
    """In a fresh interpreter: no torch, pandas or datasets after `import idbench`; each public name then
    resolves to the object its own module defines; dir() and __all__ list them before any is used."""
    probe = (
        "import sys, json, idbench\n"
        "heavy = sorted(m for m in ('torch', 'pandas', 'datasets', 'transformers') if m in sys.modules)\n"
        "listed = [n for n in " + repr(PUBLIC) + " if n in dir(idbench) and n in idbench.__all__]\n"
        "print(json.dumps({'heavy': heavy, 'listed': listed}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={**os.environ})
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "listed": list(PUBLIC)}

    import idbench.metrics as metrics_module
    from idbench.errors import IdbenchError
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.judge.client import JudgeConfig
    from idbench.evaluate_pkg.submission import validate_submission

    assert idbench.metrics is metrics_module and "clip_t" in idbench.metrics.NAMES
    assert idbench.IdbenchError is IdbenchError and idbench.ScoreOptions is ScoreOptions
    assert idbench.JudgeConfig is JudgeConfig and idbench.load_benchmark_data is load_benchmark_data
    assert idbench.validate_submission is validate_submission and callable(idbench.score)


def test_an_unknown_name_is_an_attribute_error_listing_the_public_ones():
    with pytest.raises(AttributeError, match="no attribute 'scores'.*load_benchmark_data"):
        idbench.scores  # noqa: B018
    assert not hasattr(idbench, "generate_everything")


# --- idbench.score -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline

    root = tmp_path_factory.mktemp("api")
    build("identity-collapse", out=root / "data")
    data = idbench.load_benchmark_data(root / "data")
    make_baseline("collage", data, root / "collage", size=128)
    return root, data


METRICS = ("clip_t", "dino_sim")


@pytest.mark.slow
def test_a_second_score_in_one_process_loads_no_model_again(collapse, tmp_path, monkeypatch, shared_features):
    import idbench.evaluate_pkg.context as context

    loads = []
    real = context.load_model
    monkeypatch.setattr(context, "load_model", lambda name, **kw: loads.append(name) or real(name, **kw))
    idbench.release_models()
    root, data = collapse
    first = idbench.score(
        root / "collage", data, profile="tiny", metrics=list(METRICS), cache_dir=shared_features, progress=False
    )
    assert loads and len(loads) == len(set(loads))  # each model of the roles used, once
    again = idbench.score(
        root / "collage", data, profile="tiny", metrics=list(METRICS), cache_dir=tmp_path / "b", progress=False
    )
    assert len(loads) == len(set(loads))  # nothing loaded the second time (another feature cache: computed anew)
    pd.testing.assert_frame_equal(first.aggregates, again.aggregates)
    assert idbench.release_models() == len(set(loads))
    # the first run's cache (the session's) again: every feature is read back, yet the models are loaded before any work
    idbench.score(
        root / "collage", data, profile="tiny", metrics=list(METRICS), cache_dir=shared_features, progress=False
    )
    assert len(loads) == 2 * len(set(loads))  # released: loaded again


@pytest.mark.slow
def test_score_returns_the_runners_summary_and_its_rows_as_frames(collapse, tmp_path, monkeypatch, shared_features):
    root, data = collapse
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))  # where score() stages the rows it reads back
    result = idbench.score(
        root / "collage", data, profile="tiny", metrics=list(METRICS), cache_dir=shared_features, progress=False
    )
    # out=None: score() keeps nothing of its own on disk but the feature cache (torch may leave its own
    # compile cache in the temporary folder; that is not ours)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("idbench-")] == []
    assert result.out is None and result.plumbing

    samples = result.samples
    assert set(samples.columns) >= {"prompt_id", "seed", "metric", "subject", "value", "profile", "plumbing"}
    whole = samples[samples["subject"] == ""]
    assert whole.groupby("metric").size().loc[list(METRICS)].eq(len(data.required_pairs)).all()

    aggregates = result.aggregates
    assert list(aggregates.columns) == ["mean", "ci_low", "ci_high", "n", "n_nan"]
    assert aggregates.index.name == "metric"
    assert set(aggregates.index) == set(result.summary["aggregates"]["overall"]) >= set(METRICS)
    for metric in METRICS:  # the view's means are the means of the per-sample rows, computed here
        values = whole[whole["metric"] == metric]["value"]
        assert aggregates.loc[metric, "mean"] == pytest.approx(values.mean())
        assert aggregates.loc[metric, "n"] == values.notna().sum()
        assert aggregates.loc[metric, "ci_low"] <= aggregates.loc[metric, "mean"] <= aggregates.loc[metric, "ci_high"]
    assert result.summary["profile"] == "tiny" and result.summary["benchmark"] == "identity-collapse"
    assert "plumbing check" in repr(result) and "identity-collapse" in repr(result)
    html = result._repr_html_()  # a notebook's view: the summary line and one table row per metric
    assert "plumbing check" in html and html.count("<tr") == len(aggregates) + 2  # two header rows (index name)


@pytest.mark.slow
def test_score_with_out_writes_the_clis_outputs(collapse, tmp_path, shared_features):
    root, data = collapse
    out = tmp_path / "scores"
    # a folder path for data, as a notebook would pass it, and the feature cache of an earlier run
    result = idbench.score(
        root / "collage",
        str(root / "data"),
        profile="tiny",
        metrics=["clip_t"],
        out=out,
        cache_dir=shared_features,
        progress=False,
    )
    assert result.out == out and {"results.parquet", "aggregates.json", "report.md"} <= {p.name for p in out.iterdir()}
    pd.testing.assert_frame_equal(result.samples, pd.read_parquet(out / "results.parquet"))
    written = json.loads((out / "aggregates.json").read_text())
    assert written["aggregates"]["overall"] == json.loads(json.dumps(result.summary["aggregates"]["overall"]))
    with pytest.raises(idbench.IdbenchError, match="already exists"):  # the CLI's refusal, the same class
        idbench.score(root / "collage", data, profile="tiny", metrics=["clip_t"], out=out, progress=False)


@pytest.mark.slow
def test_score_raises_the_clis_errors(collapse, tmp_path):
    root, data = collapse
    with pytest.raises(idbench.IdbenchError, match="unknown metric"):
        idbench.score(root / "collage", data, profile="tiny", metrics=["no_such_metric"], progress=False)
    with pytest.raises(idbench.IdbenchError):
        idbench.score(tmp_path / "missing-submission", data, profile="tiny", progress=False)


# --- the README's example runs as written ------------------------------------------------------------


def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- python-example:start -->\s*```python\n(.*?)```\s*<!-- python-example:end -->", text, re.S)
    assert block, "README.md lost its python-example markers"
    return block.group(1)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_readmes_python_example_runs_as_written(tmp_path):
    code = readme_python_example()
    assert "idbench.score(" in code and "result.aggregates" in code
    # A fresh interpreter in an empty folder, as a reader would run it; this session's caches (conftest).
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env={**os.environ}, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "plumbing check" in lines[0]
    assert re.search(r"^clip_t\s+-?\d", done.stdout, re.M) and re.search(r"^dino_sim\s+-?\d", done.stdout, re.M)
    assert "ci_low" in done.stdout and "Traceback" not in done.stderr


# --- Ctrl-C ------------------------------------------------------------------------------------------


def _interrupt(args):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["score", "worker", "demo"])
def test_ctrl_c_is_one_line_saying_the_cache_keeps_the_work(command, tmp_path, monkeypatch, capsys):
    import idbench.cli as cli

    monkeypatch.setattr(getattr(cli, command), f"cmd_{command}", _interrupt)  # each in its own module
    argv = {
        "score": [
            "score",
            str(tmp_path / "sub"),
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        "worker": ["worker", "--once"],
        "demo": ["demo", "--out", str(tmp_path / "demo")],
    }[command]
    assert main(argv) == 130
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"idbench {command}: interrupted")
    assert "feature cache" in lines[0] and "rerun resumes" in lines[0]
    if command == "score":
        assert str(tmp_path / "cache") in lines[0]
    assert not (tmp_path / "out").exists()


def test_ctrl_c_elsewhere_is_one_line_too(tmp_path, monkeypatch, capsys):
    import idbench.cli as cli

    monkeypatch.setattr(cli.submission, "cmd_validate", _interrupt)
    assert main(["validate", str(tmp_path / "sub"), "--data", str(tmp_path / "data")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "idbench validate: interrupted"


# --- --device ----------------------------------------------------------------------------------------


@pytest.fixture
def no_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def one_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("cuda", "no CUDA GPU"),
        ("cuda:0", "no CUDA GPU"),
        ("mps", "MPS"),
        ("gpu", "not a device name"),
        ("xpu", "cpu, cuda or mps"),
    ],
)
def test_a_device_this_machine_lacks_is_one_error_listing_the_choices(no_gpu, device, says):
    from idbench.evaluate_pkg.context import DeviceError, check_device

    with pytest.raises(DeviceError, match=re.escape(says)) as caught:
        check_device(device)
    message = str(caught.value)
    assert "\n" not in message and f"'{device}'" in message and message.endswith("this machine has: cpu")


def test_a_gpu_index_past_the_last_one_is_refused_naming_the_valid_ones(one_gpu):
    from idbench.evaluate_pkg.context import DeviceError, check_device

    for fine in ("cpu", "cuda", "cuda:0"):
        check_device(fine)
    with pytest.raises(DeviceError, match=r"1 CUDA GPU\(s\); choose one of: cpu, cuda, cuda:0$"):
        check_device("cuda:7")


@pytest.mark.slow
def test_score_without_a_gpu_stops_before_any_model_loads(collapse, no_gpu, tmp_path, monkeypatch, capsys):
    import idbench.evaluate_pkg.context as context

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the device was checked")

    monkeypatch.setattr(context, "load_model", no_loading)
    root, data = collapse
    argv = [
        "score",
        str(root / "collage"),
        "--data",
        str(data.folder),
        "--out",
        str(tmp_path / "out"),
        "--profile",
        "tiny",
        "--device",
        "cuda",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "idbench score: error: --device 'cuda': no CUDA GPU is available on this machine (torch sees none); this machine has: cpu"
    ]
    assert not (tmp_path / "out").exists()
    with pytest.raises(context.DeviceError):  # the Python API takes the same path
        idbench.score(root / "collage", data, profile="tiny", device="cuda", progress=False)


@pytest.mark.slow
def test_the_metric_modules_take_features_made_from_images_and_texts(tmp_path):
    """idbench.metrics.embed_images / embed_texts make the modules' inputs; checked against numpy cosines."""
    import numpy as np
    from PIL import Image

    import idbench

    red = Image.new("RGB", (64, 48), (200, 30, 30))
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8))
    red.save(tmp_path / "red.png")
    vectors = idbench.metrics.embed_images([tmp_path / "red.png", red, noise], model="dinov2", profile="tiny")
    assert vectors.shape[0] == 3 and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)  # a file decodes as the image it holds
    result = idbench.metrics.load("dino_sim").compute(
        generated_embeddings=[vectors[0]], reference_embeddings=[[vectors[2]]]
    )
    cosine = float(vectors[0] @ vectors[2] / np.linalg.norm(vectors[0]) / np.linalg.norm(vectors[2]))
    assert abs(result["dino_sim"] - cosine) < 1e-5
    images = idbench.metrics.embed_images([red], model="clip", profile="tiny")
    texts = idbench.metrics.embed_texts(["a red square"], profile="tiny")
    clip_t = idbench.metrics.load("clip_t").compute(image_embeddings=images, text_embeddings=texts)["clip_t"]
    assert abs(clip_t - float(images[0] @ texts[0] / np.linalg.norm(images[0]) / np.linalg.norm(texts[0]))) < 1e-5
    with pytest.raises(idbench.IdbenchError, match="expected one of clip, dinov2"):
        idbench.metrics.embed_images([red], model="arcface")
