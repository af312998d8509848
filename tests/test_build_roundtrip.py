"""Built sample benchmarks read back through datasets.load_dataset exactly as they were sampled."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from helpers import SAMPLES
from PIL import Image

from idbench.builders import build as build_module
from idbench.builders.dedup import DEFAULT_MAX_DISTANCE
from idbench.builders.registry import BENCHMARKS
from idbench.builders.sources import read_source

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("built")
    for name in BENCHMARKS:
        build_module.build(name, out=root / name)
    return {name: root / name for name in BENCHMARKS}


def in_memory_tables(name: str) -> dict[str, list[dict]]:
    """What the recipe produces before anything is written (the reference for the round trip)."""
    spec = BENCHMARKS[name]
    source = read_source(spec, build_module.sample_source(name), spec.unique_source_column)
    recipe, _ = spec.load("recipe")(source, 0, None, DEFAULT_MAX_DISTANCE)
    return recipe.tables


def decoded(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_every_config_round_trips(built, fresh_cache, name):
    spec = BENCHMARKS[name]
    expected = in_memory_tables(name)
    info = json.loads((built[name] / "build_info.json").read_text())
    assert set(info["configs"]) == set(expected)
    for config, rows in expected.items():
        loaded = datasets.load_dataset(str(built[name]), config, split="test", cache_dir=fresh_cache)
        assert loaded.num_rows == len(rows) == info["configs"][config]["rows"]
        assert loaded.features == spec.config(config).features
        image_columns = spec.config(config).image_columns
        for got, want in zip(loaded, rows):
            for column in image_columns:
                # pixel-exact against the source file on disk, decoded independently
                source_file = SAMPLES / want[column]["path"]
                assert np.array_equal(np.asarray(got[column].convert("RGB")), decoded(source_file.read_bytes()))
            plain_got = {k: v for k, v in got.items() if k not in image_columns}
            plain_want = {k: v for k, v in want.items() if k not in image_columns}
            assert plain_got == plain_want  # nested graphs, questions and lists intact


def test_cogcanvas_graphs_are_typed_edge_lists(built, fresh_cache):
    prompts = datasets.load_dataset(str(built["cogcanvas"]), "prompts", split="test", cache_dir=fresh_cache)
    row = prompts[0]
    assert row["position_graph"] and set(row["position_graph"][0]) == {"source", "relation", "target"}
    assert row["interaction_graph"] and all(e["source"] in row["layout"] for e in row["interaction_graph"])


def test_same_seed_same_bytes(tmp_path):
    digests = []
    for attempt in ("first", "second"):
        out = tmp_path / attempt
        for name in BENCHMARKS:
            build_module.build(name, out=out / name, seed=5)
        digests.append(
            {
                str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(out.rglob("*"))
                if p.is_file()
            }
        )
    assert digests[0] == digests[1]
    assert any(path.endswith(".parquet") for path in digests[0])


def test_different_seed_different_prompts(tmp_path):
    for seed in (1, 2):
        build_module.build("identity-collapse", out=tmp_path / str(seed), seed=seed)
    a = (tmp_path / "1" / "prompts" / "test-00000-of-00001.parquet").read_bytes()
    b = (tmp_path / "2" / "prompts" / "test-00000-of-00001.parquet").read_bytes()
    assert a != b


def test_shards_are_cut_by_image_bytes(tmp_path, fresh_cache):
    spec = BENCHMARKS["identity-collapse"]
    source = read_source(spec, build_module.sample_source("identity-collapse"))
    recipe, _ = BENCHMARKS["identity-collapse"].load("recipe")(source, 0, None, DEFAULT_MAX_DISTANCE)
    from idbench.builders.card import render_card
    from idbench.builders.write import write_benchmark

    info = write_benchmark(
        tmp_path / "sharded",
        spec,
        recipe.tables,
        {
            "benchmark": spec.name,
            "sample_build": True,
            "seed": 0,
            "cells": {},
            "dropped_duplicates": [],
            "options": {},
            "source": {},
            "idbench_version": "test",
        },
        render_card,
        max_shard_bytes=100_000,
    )
    shards = info["configs"]["subjects"]["shards"]
    assert len(shards) > 1
    assert shards[0].endswith(f"-of-{len(shards):05d}.parquet")
    loaded = datasets.load_dataset(str(tmp_path / "sharded"), "subjects", split="test", cache_dir=fresh_cache)
    assert loaded["subject_id"] == [s["subject_id"] for s in recipe.tables["subjects"]]


def test_collapse_from_a_larger_pool(tmp_path, fresh_cache):
    from helpers import make_collapse_source

    manifest = make_collapse_source(tmp_path / "src", 40)
    info = build_module.build("identity-collapse", out=tmp_path / "out", source=manifest)
    assert info["configs"] == {
        "subjects": {"rows": 40, "shards": ["subjects/test-00000-of-00001.parquet"]},
        "prompts": {"rows": 75, "shards": ["prompts/test-00000-of-00001.parquet"]},
    }
    assert info["sample_build"] is False
    assert all(v == 5 for v in info["cells"]["prompts by n_subjects x scene"].values())
    prompts = datasets.load_dataset(str(tmp_path / "out"), "prompts", split="test", cache_dir=fresh_cache)
    assert sorted({s for ids in prompts["subject_ids"] for s in ids}) == [f"S{k:03d}" for k in range(1, 41)]


def test_a_source_inside_the_shipped_samples_is_a_sample_build(tmp_path):
    # An explicit --source pointing at the shipped samples is still a sample build (build_info's
    # sample_build, which `score --hub-eval-results` refuses); a manifest elsewhere is not.
    assert build_module.is_sample_source(None)
    assert build_module.is_sample_source(build_module.SAMPLES_DIR / "identity-collapse.csv")
    assert build_module.is_sample_source(build_module.SAMPLES_DIR)
    assert not build_module.is_sample_source(tmp_path / "manifest.csv")
