"""Submitting from a Hub dataset repo: read offline from a Hugging Face cache laid out as a download."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import HUB_REVISION as REVISION
from helpers import place_dataset_in_hub_cache

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.hub_submission import (
    HubSubmissionError,
    RepoRef,
    fetch_submission,
    is_hub_ref,
    parse_repo_ref,
)
from idbench.evaluate_pkg.submission import validate_submission

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def collapse(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub-sub")
    build("identity-collapse", out=root / "data")
    make_baseline("collage", load_benchmark_data(root / "data"), root / "collage", size=64)
    return root


@pytest.mark.parametrize(
    "text, ref",
    [
        ("alice/gens", RepoRef("alice/gens")),
        ("hf://datasets/alice/gens@v1.0", RepoRef("alice/gens", "v1.0")),
        (f"alice/my.gens-2@{REVISION}", RepoRef("alice/my.gens-2", REVISION)),
    ],
)
def test_parse_repo_ref(text, ref):
    assert parse_repo_ref(text) == ref


@pytest.mark.parametrize(
    "text", ["gens", "../x/y", "a/b/c", "alice/..", "alice/gens@../main", "alice/gens@", "/abs/path"]
)
def test_parse_repo_ref_refuses_what_is_not_a_repo(text):
    if text.endswith("@"):  # an empty revision is the default branch, not an error
        assert parse_repo_ref(text).revision is None
        return
    with pytest.raises(HubSubmissionError, match="repo id|branch"):
        parse_repo_ref(text)


def test_only_the_prefix_makes_a_cli_argument_a_hub_repo():
    assert is_hub_ref("hf://datasets/alice/gens") and not is_hub_ref("alice/gens")


def test_fetch_copies_only_submission_files_as_plain_files(hf_cache, collapse, tmp_path):
    source = shutil.copytree(collapse / "collage", tmp_path / "repo")
    (source / "run.py").write_text("import os; os.system('rm -rf /')")  # never fetched, never executed
    (source / ".gitattributes").write_text("*.png filter=lfs")
    place_dataset_in_hub_cache(hf_cache, "alice/gens", source)
    folder = fetch_submission("hf://datasets/alice/gens", tmp_path / "fetched")
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    expected = sorted(
        p.relative_to(collapse / "collage").as_posix() for p in (collapse / "collage").rglob("*") if p.is_file()
    )
    assert files == expected
    assert not any(p.is_symlink() for p in folder.rglob("*"))
    with validate_submission(folder, load_benchmark_data(collapse / "data")) as submission:
        assert submission.model == "baseline-collage"


def test_fetch_refuses_too_much_and_leaves_nothing(hf_cache, collapse, tmp_path):
    place_dataset_in_hub_cache(hf_cache, "alice/gens", collapse / "collage")
    with pytest.raises(HubSubmissionError, match="over the limit|more than 1000 bytes"):
        fetch_submission("alice/gens", tmp_path / "fetched", max_bytes=1000)
    assert not (tmp_path / "fetched").exists()


def test_a_repo_not_in_the_cache_offline_is_one_clear_error(hf_cache, tmp_path):
    with pytest.raises(HubSubmissionError, match="alice/missing.*offline"):
        fetch_submission("alice/missing", tmp_path / "fetched")
    assert not (tmp_path / "fetched").exists()


def test_online_a_repo_over_the_limit_is_refused_before_any_download(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import huggingface_hub
    import huggingface_hub.constants as hub_constants

    class FileList:  # what HfApi.dataset_info(files_metadata=True) answers, as far as fetch reads it
        def dataset_info(self, repo_id, revision=None, files_metadata=False):
            assert files_metadata
            siblings = [
                SimpleNamespace(rfilename="manifest.csv", size=10),
                SimpleNamespace(rfilename="images/a.png", size=5000),
                SimpleNamespace(rfilename="weights.safetensors", size=10**12),
            ]
            return SimpleNamespace(sha=REVISION, siblings=siblings)

    def no_download(*args, **kwargs):
        raise AssertionError("downloaded although the size check should have refused")

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "HfApi", FileList)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_download)
    # 5010 bytes of submission files: the weights file is not submission content and does not count.
    with pytest.raises(HubSubmissionError, match="5010 bytes, over the limit of 5000"):
        fetch_submission("alice/gens", tmp_path / "fetched", max_bytes=5000)
    assert not (tmp_path / "fetched").exists()
