"""Publishing a built folder: validation, dry runs without network or token, one create + one upload."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from datasets import Features, Image, List, Value
from huggingface_hub import constants

import idbench.builders.publish as publish_module
from idbench.builders.card import render_card, render_license
from idbench.builders.publish import EvalYamlRejected, PublishError, plan_upload, publish
from idbench.builders.spec import BenchmarkSpec, ConfigSpec, MetricSpec
from idbench.cli import main as idbench_main

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SECRET = "hf_NeverPrintThisToken1234567890"

SPEC = BenchmarkSpec(
    name="toybench",
    title="Toy Bench",
    summary="A made-up benchmark for testing publishing.",
    paper="A Paper About Toys",
    citation="@misc{toy,\n  title = {A Paper About Toys}\n}",
    configs={
        "subjects": ConfigSpec(
            "subjects",
            Features(
                {
                    "subject_id": Value("string"),
                    "image": Image(),
                    "license": Value("string"),
                    "attribution": Value("string"),
                }
            ),
            "Subjects.",
            ("subject_id",),
        ),
        "prompts": ConfigSpec(
            "prompts",
            Features({"prompt_id": Value("string"), "subject_ids": List(Value("string"))}),
            "Prompts.",
            ("prompt_id",),
        ),
    },
    source_columns=(),
    breakdowns=(),
    metric_suite=(MetricSpec("clip_t", "CLIP cosine"),),
    seeds=(0,),
)

SHARDS = {
    "subjects": ["subjects/test-00000-of-00001.parquet"],
    "prompts": ["prompts/test-00000-of-00002.parquet", "prompts/test-00001-of-00002.parquet"],
}
EXPECTED = sorted(["README.md", "LICENSE", "build_info.json", *SHARDS["subjects"], *SHARDS["prompts"]])


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A built folder as the builder leaves it, plus litter that must never be published."""
    folder = tmp_path / "toybench"
    for shards in SHARDS.values():
        for i, shard in enumerate(shards):
            path = folder / shard
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"id": [f"{path.parent.name}-{i}"]}), path)
    info = {
        "benchmark": "toybench",
        "idbench_version": "0.1.0",
        "seed": 0,
        "sample_build": True,
        "configs": {name: {"rows": len(shards), "shards": shards} for name, shards in SHARDS.items()},
    }
    (folder / "build_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    (folder / "README.md").write_text(render_card(SPEC, info), encoding="utf-8")
    (folder / "LICENSE").write_text(render_license(SPEC, {"subjects": []}, info), encoding="utf-8")
    # Litter: a hidden temp file, a half-written shard, a stray note.
    (folder / ".tmp").write_text("scratch")
    (folder / "prompts" / ".test-00002-of-00002.parquet.tmp").write_bytes(b"partial")
    (folder / "notes.txt").write_text("not part of the dataset")
    return folder


@pytest.fixture
def offline(monkeypatch):
    """No token anywhere, offline mode on, and any attempt to build a Hub client fails the test."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def forbidden(*args, **kwargs):
        raise AssertionError("a dry run must not touch the Hub or look for a token")

    monkeypatch.setattr(publish_module, "HfApi", forbidden)
    monkeypatch.setattr(publish_module, "get_token", forbidden)


class FakeApi:
    """Records the calls publish() makes instead of talking to the Hub."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def create_repo(self, *args, **kwargs):
        self.calls.append(("create_repo", args, kwargs))
        return f"https://huggingface.co/datasets/{args[0] if args else kwargs['repo_id']}"

    def upload_folder(self, *args, **kwargs):
        self.calls.append(("upload_folder", args, kwargs))
        return "commit-info"

    def upload_file(self, *args, **kwargs):
        self.calls.append(("upload_file", args, kwargs))
        return "commit-info"


class RefusingEvalYamlApi(FakeApi):
    """The Hub as it is today: the dataset commit goes through, eval.yaml's is refused at push time."""

    def upload_file(self, *args, **kwargs):
        super().upload_file(*args, **kwargs)
        from huggingface_hub.errors import HfHubHTTPError

        response = SimpleNamespace(headers={}, request=None)  # what HfHubHTTPError reads of a response
        raise HfHubHTTPError(
            "400 Client Error: Bad Request\nevaluation_framework: 'idbench' is not a known framework", response=response
        )


# ----------------------------------------------------------------------------------------------


def test_dry_run_lists_exactly_card_build_info_and_shards(built, offline):
    files = publish(built, "my-org/toybench", dry_run=True)
    assert files == EXPECTED
    assert plan_upload(built) == EXPECTED


def test_cli_dry_run_prints_the_plan(built, offline, capsys):
    assert idbench_main(["publish", str(built), "--repo-id", "my-org/toybench", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would upload 6 file" in out
    assert [line.strip() for line in out.splitlines()[1:]] == EXPECTED


def test_missing_folder(tmp_path, offline):
    with pytest.raises(PublishError, match="no such folder"):
        publish(tmp_path / "absent", "my-org/toybench", dry_run=True)


def test_missing_readme_is_named(built, offline):
    (built / "README.md").unlink()
    with pytest.raises(PublishError, match="README.md"):
        publish(built, "my-org/toybench", dry_run=True)


def test_missing_build_info_is_named(built, offline):
    (built / "build_info.json").unlink()
    with pytest.raises(PublishError, match="build_info.json"):
        publish(built, "my-org/toybench", dry_run=True)


def test_card_without_front_matter_or_configs(built, offline):
    (built / "README.md").write_text("# Toy\n\nno front matter\n")
    with pytest.raises(PublishError, match="front matter"):
        publish(built, "my-org/toybench", dry_run=True)
    (built / "README.md").write_text("---\nlicense: other\n---\n# Toy\n")
    with pytest.raises(PublishError, match="configs"):
        publish(built, "my-org/toybench", dry_run=True)


def test_glob_without_shard_names_the_config(built, offline):
    for shard in SHARDS["prompts"]:
        (built / shard).unlink()
    with pytest.raises(PublishError, match=r"'prompts'.*prompts/test-\*\.parquet"):
        publish(built, "my-org/toybench", dry_run=True)


def test_shard_listed_in_build_info_but_missing(built, offline):
    info = json.loads((built / "build_info.json").read_text())
    info["configs"]["prompts"]["shards"].append("prompts/test-00002-of-00002.parquet")
    (built / "build_info.json").write_text(json.dumps(info))
    with pytest.raises(PublishError, match="test-00002-of-00002.parquet"):
        publish(built, "my-org/toybench", dry_run=True)


def test_leftover_shard_from_an_earlier_build_is_refused(built, offline):
    pq.write_table(pa.table({"id": ["old"]}), built / "subjects" / "test-00000-of-00002.parquet")
    with pytest.raises(PublishError, match="subjects/test-00000-of-00002.parquet"):
        publish(built, "my-org/toybench", dry_run=True)


def test_glob_escaping_the_folder_is_refused(built, offline):
    text = (built / "README.md").read_text().replace("path: prompts/test-*.parquet", "path: ../elsewhere/*.parquet")
    (built / "README.md").write_text(text)
    with pytest.raises(PublishError, match="inside the folder"):
        publish(built, "my-org/toybench", dry_run=True)


def test_invalid_repo_id(built, offline):
    with pytest.raises(PublishError, match="repo id"):
        publish(built, "not/a/repo", dry_run=True)


# ----------------------------------------------------------------------------------------------


def test_real_run_creates_once_and_uploads_once(built, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    api = FakeApi()
    files = publish(built, "my-org/toybench", private=True, api=api)

    assert files == EXPECTED
    assert [name for name, _, _ in api.calls] == ["create_repo", "upload_folder"]
    _, create_args, create_kwargs = api.calls[0]
    assert create_args == ("my-org/toybench",)
    assert create_kwargs == {"repo_type": "dataset", "private": True, "exist_ok": True}
    _, upload_args, upload = api.calls[1]
    assert upload_args == ()
    assert upload["repo_id"] == "my-org/toybench"
    assert upload["repo_type"] == "dataset"
    assert Path(upload["folder_path"]) == built
    assert upload["allow_patterns"] == EXPECTED
    assert upload["delete_patterns"] == ["prompts/test-*.parquet", "subjects/test-*.parquet"]
    assert "toybench" in upload["commit_message"] and "sample build" in upload["commit_message"]
    # The token stays with huggingface_hub: not passed along, printed or returned.
    assert all("token" not in kwargs for _, _, kwargs in api.calls)
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert SECRET not in repr(files)


def test_no_token_asks_for_login(built, monkeypatch, tmp_path, capsys):
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token-here"))
    api = FakeApi()
    with pytest.raises(PublishError, match="hf auth login"):
        publish(built, "my-org/toybench", api=api)
    assert api.calls == []  # refused before any request

    # The CLI builds its own client: make it a recording fake, with offline mode (tests' default) off.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(publish_module, "HfApi", FakeApi)
    assert idbench_main(["publish", str(built), "--repo-id", "my-org/toybench"]) == 2  # the CLI says the same
    assert "hf auth login" in capsys.readouterr().err


def test_offline_mode_is_refused_before_building_a_client(built, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PublishError, match="HF_HUB_OFFLINE"):
        publish(built, "my-org/toybench")


# --- eval.yaml in its own commit -----------------------------------------------------------------------


def _with_eval_yaml(folder: Path) -> Path:
    (folder / "eval.yaml").write_text("name: Toy Bench\nevaluation_framework: idbench\ntasks:\n- id: clip_t\n")
    return folder


def test_eval_yaml_goes_up_in_its_own_commit_after_the_dataset(built, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    api = FakeApi()
    files = publish(_with_eval_yaml(built), "my-org/toybench", api=api)
    assert files == sorted([*EXPECTED, "eval.yaml"])
    assert [name for name, _, _ in api.calls] == ["create_repo", "upload_folder", "upload_file"]
    assert "eval.yaml" not in api.calls[1][2]["allow_patterns"]  # the dataset commit holds no eval.yaml
    assert api.calls[1][2]["allow_patterns"] == EXPECTED
    upload = api.calls[2][2]
    assert upload["path_in_repo"] == "eval.yaml" and Path(upload["path_or_fileobj"]) == built / "eval.yaml"
    assert upload["repo_id"] == "my-org/toybench" and upload["repo_type"] == "dataset"


def test_a_refused_eval_yaml_leaves_the_dataset_up_with_one_clear_message(built, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    api = RefusingEvalYamlApi()
    with pytest.raises(EvalYamlRejected) as refused:
        publish(_with_eval_yaml(built), "my-org/toybench", api=api)
    assert refused.value.uploaded == EXPECTED
    assert [name for name, _, _ in api.calls] == ["create_repo", "upload_folder", "upload_file"]
    message = str(refused.value)
    assert "the dataset is up" in message and "eval.yaml" in message and "not a known framework" in message
    assert "\n" not in message

    # The CLI: the uploaded files, then the one message; exit status 2 (eval.yaml is not up).
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(publish_module, "HfApi", RefusingEvalYamlApi)
    assert idbench_main(["publish", str(built), "--repo-id", "my-org/toybench"]) == 2
    out, err = capsys.readouterr()
    assert "uploaded 6 file(s)" in out and "eval.yaml" not in out
    assert len(err.strip().splitlines()) == 1 and "the dataset is up" in err and "Traceback" not in err
    assert SECRET not in out + err


# --- the card's metadata, checked before any upload ----------------------------------------------------


def _edit_front_matter(folder: Path, edit) -> None:
    text = (folder / "README.md").read_text()
    _, head, body = text.split("---\n", 2)
    meta = yaml.safe_load(head)
    edit(meta)
    (folder / "README.md").write_text("---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n" + body)


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda m: m.update(license="apache2"), "`license`"),
        (lambda m: m.pop("language"), "`language`"),
        (lambda m: m.update(language="english"), "`language`"),
        (lambda m: m.pop("license_name"), "`license_name`"),
        (lambda m: m.update(license_link="LICENSE.txt"), "`license_link`"),
        (lambda m: m.update(license_link="../LICENSE"), "`license_link`"),
        (lambda m: m.update(size_categories=["tiny"]), "`size_categories`"),
        (lambda m: m.update(pretty_name=["a", "list"]), "`pretty_name`"),
        (lambda m: m.update(tags="one-tag-is-fine") or m.update(task_categories=[1]), "`task_categories`"),
        (lambda m: m["configs"].append(dict(m["configs"][0])), "more than once"),
        (lambda m: m["configs"][0].update(default="yes"), "default"),
    ],
)
def test_a_bad_card_is_one_error_naming_the_field_and_nothing_is_uploaded(built, monkeypatch, edit, field):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    _edit_front_matter(built, edit)
    api = FakeApi()
    with pytest.raises(PublishError, match=re.escape(field)) as error:
        publish(built, "my-org/toybench", api=api)
    assert api.calls == []  # refused before any request
    assert "README.md: front matter" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(PublishError, match=re.escape(field)):
        publish(built, "my-org/toybench", dry_run=True)  # a dry run checks the same


def test_the_license_file_is_part_of_the_upload_and_must_exist(built, offline):
    assert "LICENSE" in plan_upload(built)
    (built / "LICENSE").unlink()
    with pytest.raises(PublishError, match=r"`license_link` 'LICENSE' names no file"):
        plan_upload(built)


def test_a_license_link_url_uploads_no_file(built, offline):
    _edit_front_matter(built, lambda m: m.update(license_link="https://example.org/terms"))
    (built / "LICENSE").unlink()
    assert plan_upload(built) == [name for name in EXPECTED if name != "LICENSE"]
