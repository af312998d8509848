"""The optional CHARIS human_ratings config: built when the source has human_ratings.csv."""

from __future__ import annotations

import shutil

import datasets
import pytest
from helpers import SAMPLES, write_manifest

from idbench.builders.build import build
from idbench.builders.sources import SourceError

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.fixture
def charis_source(tmp_path):
    folder = tmp_path / "src"
    shutil.copytree(SAMPLES, folder)
    return folder


def test_ratings_become_a_config(charis_source, tmp_path, fresh_cache):
    rows = [
        ["uno", "charis-001", "annotator-1", "exact"],
        ["uno", "charis-001", "annotator-2", "near_exact"],
        ["dsd", "charis-002", "annotator-1", "mismatch"],
    ]
    write_manifest(charis_source / "human_ratings.csv", ["model", "prompt_id", "annotator", "category"], rows)
    info = build("charis", out=tmp_path / "out", source=charis_source / "charis.csv")
    assert info["configs"]["human_ratings"]["rows"] == 3
    loaded = datasets.load_dataset(str(tmp_path / "out"), "human_ratings", split="test", cache_dir=fresh_cache)
    assert [list(r.values()) for r in loaded] == rows
    assert "config_name: human_ratings" in (tmp_path / "out" / "README.md").read_text()


def test_without_ratings_there_is_no_config(tmp_path):
    info = build("charis", out=tmp_path / "out")
    assert "human_ratings" not in info["configs"]
    assert "human_ratings" not in (tmp_path / "out" / "README.md").read_text().split("---")[1]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (["uno", "charis-001", "a1", "great"], "category 'great'"),
        (["uno", "charis-999", "a1", "exact"], "prompt_id 'charis-999'"),
    ],
)
def test_bad_rating_rows(charis_source, tmp_path, row, expected):
    write_manifest(charis_source / "human_ratings.csv", ["model", "prompt_id", "annotator", "category"], [row])
    with pytest.raises(SourceError, match="human_ratings.csv, row 1") as info:
        build("charis", out=tmp_path / "out", source=charis_source / "charis.csv")
    assert expected in str(info.value)
    assert not (tmp_path / "out").exists()
