"""A fourth benchmark, defined in this file only, through build, template, validate, score and the
leaderboard query: proof that a benchmark is added without editing a shared module.

Toy Bench: one subject per prompt, two scenes per subject, one embedding metric (``dino_sim``, the
DINOv2 cosine of generation and reference) and one metric this engine reports as not run. Everything
it needs (spec, recipe, suite, baseline layout) is below; the registry finds it through one entry
point (the ``toy`` fixture installs it as pip would), and every layer reaches its code through the
spec's ``"module:attr"`` strings. This
file is the worked example of docs/adding-a-benchmark.md.
"""

from __future__ import annotations

import csv
import json
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from datasets import Features, Image, Value
from helpers import check_suite_contract, noise_jpeg, write_manifest

from idbench.builders.recipe import Curator, Recipe, dedupe, name_of, reference_row
from idbench.builders.registry import BENCHMARKS, get_benchmark, unregister
from idbench.builders.sources import Source, SourceError
from idbench.builders.spec import BenchmarkSpec, ConfigSpec, MetricSpec, SourceColumn
from idbench.builders.write import count_by
from idbench.cli import main
from idbench.evaluate_pkg import functional as F
from idbench.evaluate_pkg.baselines import Layout, Slot, make_baseline
from idbench.evaluate_pkg.context import Context, Result, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.leaderboard import query
from idbench.leaderboard.queue import submit
from idbench.leaderboard.store import Store
from idbench.leaderboard.worker import run_worker

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

NAME = "toy-bench"
SCENES = ("beach", "studio")

SUBJECTS = Features(
    {
        "subject_id": Value("string"),
        "name": Value("string"),
        "image": Image(),
        "source": Value("string"),
        "license": Value("string"),
        "attribution": Value("string"),
    }
)
PROMPTS = Features(
    {"prompt_id": Value("string"), "subject_id": Value("string"), "scene": Value("string"), "prompt": Value("string")}
)


# --- the recipe (builders layer) ------------------------------------------------------------------


def toy_recipe(source: Source, seed: int, n_prompts: int | None, max_distance: int, curator: Curator | None = None):
    if n_prompts is not None:
        raise SourceError(f"{NAME} has one prompt per subject and scene; drop --prompts")
    images, dropped = dedupe(list(source.images), "subject_id", max_distance)
    if curator is not None:
        images = curator.curate_images(images, lambda i: i.values["subject_id"], name_of)
    subjects = [reference_row(i, SUBJECTS) for i in images]
    prompts = [
        {
            "prompt_id": f"{s['subject_id']}-{scene}",
            "subject_id": s["subject_id"],
            "scene": scene,
            "prompt": f"{s['name']} on a {scene}",
        }
        for s in subjects
        for scene in SCENES
    ]
    return Recipe({"subjects": subjects, "prompts": prompts}, {"prompts by scene": count_by(prompts, "scene")}), dropped


# --- the scoring suite and baseline layout (evaluate layer) ---------------------------------------

NOT_RUN = {"human_score": "people rate the toy's images; no engine computes that"}


def score(ctx: Context, metrics: set[str]) -> list[Result]:
    prompts, generations = ctx.data.prompt_rows, ctx.generation_keys()
    subject_ids = sorted({p["subject_id"] for p in prompts.values()})
    refs = ctx.image_features("dinov2", ctx.reference_loaders(subject_ids))
    gens = ctx.image_features("dinov2", ctx.generation_loaders())
    pairs = list(generations)
    values = F.cosine(
        np.stack([gens[generations[pair]]["cls"] for pair in pairs]),
        np.stack([refs[ctx.reference_key(prompts[p]["subject_id"])]["cls"] for p, _ in pairs]),
    )
    return [Result(p, seed, "dino_sim", float(v)) for (p, seed), v in zip(pairs, values)]


BASELINES = Layout(slots=lambda data, prompt: [Slot(prompt["subject_id"], prompt["subject_id"])])

# --- the spec -------------------------------------------------------------------------------------

SPEC = BenchmarkSpec(
    name=NAME,
    title="Toy Bench",
    summary="One subject per prompt in two scenes; DINOv2 similarity to the reference.",
    paper="A Paper About Toys",
    citation="@misc{toy,\n  title = {A Paper About Toys}\n}",
    configs={
        "subjects": ConfigSpec("subjects", SUBJECTS, "One reference image per subject.", ("subject_id",)),
        "prompts": ConfigSpec("prompts", PROMPTS, "One prompt per subject and scene.", ("prompt_id",)),
    },
    source_columns=(
        SourceColumn("subject_id", "unique subject id", pattern=r"[a-z0-9][a-z0-9_\-]*"),
        SourceColumn("file", "image path, relative to the manifest's folder"),
        SourceColumn("name", "a short noun phrase for the subject"),
        SourceColumn("source", "where the image comes from"),
        SourceColumn("license", "the image's license"),
        SourceColumn("attribution", "who to credit", required=False),
    ),
    breakdowns=(("scene",),),
    metric_suite=(
        MetricSpec("dino_sim", "DINOv2 cosine, reference vs generation", roles=("dinov2",)),
        MetricSpec("human_score", "a human rating of identity", tasks=("retrieval",)),
    ),
    seeds=(0,),
    ranking=("dino_sim",),
    recipe=f"{__name__}:toy_recipe",
    unique_source_column="subject_id",
    reference_config="subjects",
    reference_id="subject_id",
    suite=__name__,
    baselines=f"{__name__}:BASELINES",
    suite_version="toy-1",
    page_order=50,
)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy installed as a plugin is: a distribution on sys.path whose one entry point names the spec,
    what `pip install` leaves for a package declaring [project.entry-points."idbench.benchmarks"]."""
    site = tmp_path_factory.mktemp("site-packages")
    info = site / "toy_bench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-bench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[idbench.benchmarks]\n{NAME} = {__name__}:SPEC\n")
    sys.path.append(str(site))
    try:
        yield get_benchmark(NAME)
    finally:
        sys.path.remove(str(site))
        unregister(NAME)


def make_source(folder, n: int = 3):
    rows = []
    (folder / "img").mkdir(parents=True, exist_ok=True)
    for k in range(n):
        (folder / "img" / f"s{k}.jpg").write_bytes(noise_jpeg(100 + k, size=(96, 96)))
        rows.append([f"s{k}", f"img/s{k}.jpg", f"the toy number {k}", "generated", "CC0-1.0", ""])
    return write_manifest(
        folder / "manifest.csv", ["subject_id", "file", "name", "source", "license", "attribution"], rows
    )


def test_the_toy_goes_through_every_layer(toy, tmp_path, capsys):
    assert get_benchmark(NAME) is toy and NAME in BENCHMARKS and list(BENCHMARKS)[-1] == NAME  # page order 50 > 2

    # build (the CLI accepts the registered name), with the shared card template
    data_dir = tmp_path / "data"
    assert main(["build", NAME, "--source", str(make_source(tmp_path / "source")), "--out", str(data_dir)]) == 0
    data = load_benchmark_data(data_dir)
    assert sorted(data.prompt_rows) == sorted(f"s{k}-{scene}" for k in range(3) for scene in SCENES)
    assert "# Toy Bench" in (data_dir / "README.md").read_text()

    # template, filled by hand: every generation is its subject's reference image, byte for byte
    submission = tmp_path / "submission"
    assert main(["template", NAME, "--data", str(data_dir), "--out", str(submission)]) == 0
    with (submission / "manifest.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            subject = data.prompt_rows[row["prompt_id"]]["subject_id"]
            (submission / row["file"]).write_bytes(data.reference_bytes[subject])
    metadata = json.loads((submission / "submission.json").read_text())
    (submission / "submission.json").write_text(json.dumps({**metadata, "model": "copy-of-the-reference"}))

    # validate, score (tiny profile: random weights, but identical images still have cosine 1)
    assert main(["validate", str(submission), "--data", str(data_dir)]) == 0
    out = tmp_path / "scored"
    assert main(["score", str(submission), "--data", str(data_dir), "--out", str(out), "--profile", "tiny"]) == 0
    summary = json.loads((out / "aggregates.json").read_text())
    assert summary["aggregates"]["overall"]["dino_sim"]["mean"] == pytest.approx(1.0, abs=1e-5)
    assert summary["not_run"] == NOT_RUN and summary["suite_version"] == "toy-1"
    assert set(summary["models"]) == {"dinov2"}  # only the roles the MetricSpec declares are loaded
    check_suite_contract(toy, summary, set(pd.read_parquet(out / "results.parquet")["metric"]), toy.load("suite"))

    # the leaderboard: the copy and the grey-canvas baseline, ranked by the spec's ranking metric
    store = Store(tmp_path / "home")
    served = store.home / "benchmarks" / NAME
    shutil.copytree(data_dir, served)
    served_data = load_benchmark_data(served)
    make_baseline("background", served_data, tmp_path / "grey", size=96)
    submit(store, submission, served, submitter="tester")
    submit(store, tmp_path / "grey", served, submitter="tester")
    assert run_worker(store, once=True, options=ScoreOptions(profile="tiny")) == 2
    table = query.ranked_table(store.current_results(NAME), toy, include_plumbing=True)
    # The copy has the best DINO-Sim but returns its references: the copy check shows it apart, unranked.
    assert list(table["model"]) == ["baseline-background", "copy-of-the-reference"]
    assert table["rank"].iloc[0] == 1 and pd.isna(table["rank"].iloc[1])
    assert table["not ranked"].iloc[1].startswith("copies references")
    assert table["dino_sim"].iloc[1] == pytest.approx(1.0, abs=1e-5) and table["dino_sim"].iloc[0] < 1.0 - 1e-3
    with_copies = query.ranked_table(store.current_results(NAME), toy, include_plumbing=True, include_copies=True)
    assert list(with_copies["model"]) == ["copy-of-the-reference", "baseline-background"]
