"""The dataset card: front matter the Hub and `datasets` accept, a body that covers the spec, determinism.

Most tests use a small made-up benchmark so that they exercise the shared template and stay
independent of the real descriptions; one test renders each real benchmark when it imports.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import datasets
import pytest
import yaml
from datasets import ClassLabel, Features, Image, List, Value
from PIL import Image as PILImage

from idbench.builders.card import card_metadata, describe_feature, render_card, render_license, size_category
from idbench.builders.spec import JUDGE_ROLE, BenchmarkSpec, ConfigSpec, MetricSpec

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SAMPLE_WARNING = "Sample build: a plumbing check"

_EDGE = {"source": Value("string"), "relation": Value("string"), "target": Value("string")}

REFERENCES = Features(
    {
        "ref_id": Value("string"),
        "image": Image(),
        "license": Value("string"),
        "attribution": Value("string"),
    }
)
PROMPTS = Features(
    {
        "prompt_id": Value("string"),
        "n_subjects": Value("int32"),
        "ref_ids": List(Value("string")),
        "graph": List(_EDGE),
        "prompt": Value("string"),
    }
)
RATINGS = Features({"prompt_id": Value("string"), "category": Value("string")})

TOY = BenchmarkSpec(
    name="toybench",
    title="Toy Bench",
    summary="A made-up benchmark for testing the card.",
    paper="A Paper About Toys",
    citation="@misc{toy,\n  title = {A Paper About Toys}\n}",
    configs={
        "references": ConfigSpec("references", REFERENCES, "Reference images.", ("ref_id",)),
        "prompts": ConfigSpec("prompts", PROMPTS, "Prompts with a graph.", ("prompt_id",)),
        "ratings": ConfigSpec("ratings", RATINGS, "Optional human ratings.", ("prompt_id",), optional=True),
    },
    source_columns=(),
    breakdowns=(("n_subjects",),),
    metric_suite=(
        MetricSpec("clip_t", "CLIP cosine between prompt and generation"),
        MetricSpec("scr@0.5", "collapse rate | share below 0.5", higher_is_better=False, display="percent"),
        MetricSpec("judge_score", "a judged score", display="x100", roles=(JUDGE_ROLE,)),
    ),
    seeds=(0, 1),
    task_categories=("text-to-image",),
    tags=("identity-preservation", "benchmark"),
    limitations=("Toys are not people.", "Only two seeds."),
)


def toy_build_info(*, sample_build: bool = True, prompts: int = 3, references: int = 2) -> dict:
    return {
        "benchmark": "toybench",
        "idbench_version": "0.1.0",
        "seed": 7,
        "sample_build": sample_build,
        "options": {"prompts": prompts},
        "source": {"manifest": "toy.csv", "sha256": "f" * 64, "rows": references},
        "configs": {
            "references": {"rows": references, "shards": ["references/test-00000-of-00001.parquet"]},
            "prompts": {"rows": prompts, "shards": ["prompts/test-00000-of-00001.parquet"]},
        },
        "cells": {"prompts by n_subjects": {"2": 2, "4": 1}},
        "dropped_duplicates": [{"id": "ref-dup", "duplicate_of": "ref-a", "distance": 2}],
    }


def split_card(text: str) -> tuple[dict, str]:
    """(front matter as parsed YAML, body) of a card."""
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


# ----------------------------------------------------------------------------------------------


def test_front_matter_parses_and_declares_the_built_configs():
    meta, _ = split_card(render_card(TOY, toy_build_info()))
    assert meta["pretty_name"] == "Toy Bench"
    assert meta["license"] == "other"
    assert meta["license_name"] == "mixed-per-image"
    assert meta["license_link"] == "LICENSE"
    assert meta["language"] == ["en"]
    assert meta["task_categories"] == ["text-to-image"]
    assert meta["tags"] == ["identity-preservation", "benchmark"]
    assert meta["size_categories"] == ["n<1K"]
    # The optional `ratings` config was not built, so it is not declared.
    assert meta["configs"] == [
        {"config_name": "references", "data_files": [{"split": "test", "path": "references/test-*.parquet"}]},
        {
            "config_name": "prompts",
            "data_files": [{"split": "test", "path": "prompts/test-*.parquet"}],
            "default": True,
        },
    ]


def test_license_link_points_at_the_license_file():
    meta, body = split_card(render_card(TOY, toy_build_info()))
    assert meta["license_link"] == "LICENSE"
    assert "\n## Licenses\n" in body and "[`LICENSE`](LICENSE)" in body
    assert "`license`" in body and "`attribution`" in body


def test_license_file_lists_every_image_with_its_license():
    rows = {
        "references": [
            {"ref_id": "a", "license": "CC0-1.0", "attribution": "Ann | Co"},
            {"ref_id": "b", "license": "CC-BY-4.0", "attribution": "Bob"},
            {"ref_id": "c", "license": "CC0-1.0", "attribution": ""},
        ],
        "prompts": [{"prompt_id": "p1"}],  # no license columns: not listed
    }
    text = render_license(TOY, rows, toy_build_info(sample_build=False))
    assert text.startswith("# Toy Bench: licenses of the images\n")
    assert "## `references` (3 images)" in text and "`prompts`" not in text
    assert "- CC-BY-4.0: 1\n- CC0-1.0: 2\n" in text  # images per license, licenses sorted
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table == [
        "| ref_id | license | attribution |",
        "| --- | --- | --- |",
        "| a | CC0-1.0 | Ann \\| Co |",  # a '|' cannot break the table
        "| b | CC-BY-4.0 | Bob |",
        "| c | CC0-1.0 |  |",
    ]
    assert "samples/" not in text
    assert "LICENSES.md" in render_license(TOY, rows, toy_build_info(sample_build=True))
    assert render_license(TOY, rows, toy_build_info()) == render_license(TOY, rows, toy_build_info())


def test_sensitive_information_bias_and_submission_sections():
    _, body = split_card(render_card(TOY, toy_build_info()))
    headings = re.findall(r"^## (.+)$", body, re.M)
    for heading in ("How to submit", "Personal and sensitive information", "Bias, risks and limitations", "Citation"):
        assert heading in headings
    assert "not part of this release" not in body  # the stale wording is gone
    assert "request" in body.lower() or "removed" in body
    sensitive = body.split("## Personal and sensitive information", 1)[1].split("\n## ", 1)[0]
    assert "Community tab" in sensitive and "removed" in sensitive


def _bash_commands(body: str) -> list[list[str]]:
    """The `idbench ...` command lines of the card's bash blocks, split like a shell would (no pipes here)."""
    import shlex

    blocks = re.findall(r"```bash\n(.*?)```", body, re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("idbench ")]


@pytest.mark.parametrize("name", ["charis", "cogcanvas", "identity-collapse"])
def test_how_to_submit_uses_real_commands(name):
    from idbench.builders.registry import get_benchmark
    from idbench.cli import make_parser

    spec = get_benchmark(name)
    built = [c for c in spec.configs.values() if not c.optional]
    info = {
        "benchmark": name,
        "seed": 0,
        "sample_build": False,
        "configs": {c.name: {"rows": 3, "shards": []} for c in built},
    }
    _, body = split_card(render_card(spec, info))
    commands = _bash_commands(body.split("## How to submit", 1)[1].split("\n## ", 1)[0])
    assert [argv[1] for argv in commands] == ["template", "validate", "score", "submit"]
    parser = make_parser()
    for argv in commands:
        args = parser.parse_args(argv[1:])  # exits (fails the test) on a flag the CLI does not have
        assert args.command == argv[1]


def test_real_cards_state_sensitive_data_and_cite_only_what_the_paper_gives():
    from idbench.builders.registry import get_benchmark

    def body_of(name):
        spec = get_benchmark(name)
        built = [c for c in spec.configs.values() if not c.optional]
        info = {
            "benchmark": name,
            "seed": 0,
            "sample_build": False,
            "configs": {c.name: {"rows": 3, "shards": []} for c in built},
        }
        return spec, split_card(render_card(spec, info))[1]

    spec, body = body_of("cogcanvas")
    sensitive = body.split("## Personal and sensitive information", 1)[1].split("\n## ", 1)[0]
    assert "face photographs" in sensitive
    for label in ("`age_group`", "`gender`", "`ethnicity`"):
        assert label in sensitive
    assert "ArcFace" in body.split("## Bias, risks and limitations", 1)[1]
    for name in ("charis", "cogcanvas", "identity-collapse"):
        spec, body = body_of(name)
        bibtex = re.search(r"```bibtex\n(.*?)```", body, re.S).group(1)
        entry = re.fullmatch(r"@misc\{(\w+),\n((?:  \w+ = \{[^{}]*\},?\n)+)\}\n", bibtex)
        assert entry, bibtex
        fields = dict(re.findall(r"  (\w+) = \{([^{}]*)\}", entry.group(2)))
        # The paper texts (shared/papers) give the title and nothing else: no author, year or venue is invented.
        assert fields == {"title": spec.paper}
        assert "names no authors, year or venue" in body


@pytest.mark.parametrize(
    ("rows", "bucket"),
    [
        (0, "n<1K"),
        (999, "n<1K"),
        (1_000, "1K<n<10K"),
        (9_999, "1K<n<10K"),
        (10_000, "10K<n<100K"),
        (99_999, "10K<n<100K"),
        (100_000, "100K<n<1M"),
        (999_999, "100K<n<1M"),
        (1_000_000, "1M<n<10M"),
        (10**9, "1B<n<10B"),
        (10**12 - 1, "100B<n<1T"),
        (10**12, "n>1T"),
    ],
)
def test_size_category_buckets(rows, bucket):
    assert size_category(rows) == bucket


def test_size_category_rejects_negative_counts():
    with pytest.raises(ValueError):
        size_category(-1)


def test_size_category_follows_the_largest_config():
    info = toy_build_info(prompts=1_000, references=12)
    assert card_metadata(TOY, info)["size_categories"] == ["1K<n<10K"]
    info = toy_build_info(prompts=5, references=10_000)
    assert card_metadata(TOY, info)["size_categories"] == ["10K<n<100K"]


@pytest.mark.parametrize("sample_build", [True, False])
def test_sample_build_warning_iff_sample_build(sample_build):
    text = render_card(TOY, toy_build_info(sample_build=sample_build))
    assert (SAMPLE_WARNING in text) is sample_build
    assert ("LICENSES.md" in text) is sample_build


def test_every_config_and_metric_is_described():
    _, body = split_card(render_card(TOY, toy_build_info(prompts=3)))
    for config in ("references", "prompts"):
        assert f"### `{config}`" in body
        assert f'load_dataset(REPO, "{config}", split="test")' in body
    assert "`ratings`" not in body  # not built
    for metric in TOY.metric_suite:
        assert f"`{metric.name}`" in body
    # A '|' inside a description must not break the metric table.
    assert "collapse rate \\| share below 0.5" in body
    # Field types, nested lists of structs included.
    assert "| `graph` | `list<struct{source, relation, target}>` |" in body
    assert "| `image` | `image` |" in body
    # Submission: prompts x seeds, through a manifest, scored by idbench.
    assert "3 prompts x 2 seeds = 6 images" in body
    assert "manifest" in body and "idbench score my-submission" in body


def test_provenance_cells_citation_and_limitations():
    _, body = split_card(render_card(TOY, toy_build_info()))
    assert "f" * 64 in body  # source manifest sha256
    assert "idbench 0.1.0 with seed 7" in body
    assert "Build options: `prompts` = `3`." in body
    assert "| `ref-dup` | `ref-a` | 2 |" in body
    assert "| n_subjects | count |" in body and "| 4 | 1 |" in body
    assert "```bibtex\n@misc{toy,\n  title = {A Paper About Toys}\n}\n```" in body
    for limitation in TOY.limitations:
        assert f"- {limitation}" in body


def test_no_duplicates_dropped_is_said():
    info = toy_build_info()
    info["dropped_duplicates"] = []
    assert "dropped before building: none" in render_card(TOY, info)


def test_two_axis_cells_render_as_a_grid():
    info = toy_build_info()
    info["cells"] = {"prompts by n_subjects x scene": {"2": {"neutral": 5, "occlusion": 4}, "4": {"neutral": 1}}}
    body = render_card(TOY, info)
    assert "| n_subjects x scene | neutral | occlusion |" in body
    assert "| 4 | 1 |  |" in body


def test_rendering_is_deterministic():
    info = toy_build_info()
    first = render_card(TOY, info)
    assert render_card(TOY, json.loads(json.dumps(info))) == first
    # The builder's order of configs does not change the card either.
    reordered = dict(info, configs=dict(reversed(list(info["configs"].items()))))
    assert render_card(TOY, reordered) == first


def test_mismatched_build_info_is_refused():
    with pytest.raises(ValueError, match="not 'toybench'"):
        render_card(TOY, dict(toy_build_info(), benchmark="other"))
    with pytest.raises(ValueError, match="'nope'"):
        render_card(TOY, dict(toy_build_info(), configs={"nope": {"rows": 1}}))
    with pytest.raises(ValueError, match="no built config"):
        render_card(TOY, dict(toy_build_info(), configs={}))


def test_describe_feature():
    assert describe_feature(Value("int32")) == "int32"
    assert describe_feature(List(Value("string"))) == "list<string>"
    assert describe_feature(List(Value("string"), length=3)) == "list<string>[3]"
    assert describe_feature(List(_EDGE)) == "list<struct{source, relation, target}>"
    assert describe_feature(List({"name": Value("string"), "w": Value("float32")})) == "list<struct{name, w: float32}>"
    assert describe_feature(Image()) == "image"
    assert describe_feature(ClassLabel(names=["no", "yes"])) == "class_label{no, yes}"


# ----------------------------------------------------------------------------------------------


def _png() -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 4), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_datasets_loads_a_folder_through_the_card(tmp_path: Path):
    """The front matter is what `load_dataset` reads: configs, globs and the default config."""
    folder = tmp_path / "toybench"
    refs = datasets.Dataset.from_dict(
        {
            "ref_id": ["a", "b"],
            "image": [{"bytes": _png(), "path": None}] * 2,
            "license": ["CC0"] * 2,
            "attribution": ["x", "y"],
        },
        features=REFERENCES,
    )
    prompts = datasets.Dataset.from_dict(
        {
            "prompt_id": ["p1", "p2", "p3"],
            "n_subjects": [2, 2, 4],
            "ref_ids": [["a", "b"], ["b", "a"], ["a", "b"]],
            "graph": [[{"source": "A", "relation": "hugs", "target": "B"}], [], []],
            "prompt": ["one", "two", "three"],
        },
        features=PROMPTS,
    )
    for name, table in (("references", refs), ("prompts", prompts)):
        (folder / name).mkdir(parents=True)
        table.to_parquet(str(folder / name / "test-00000-of-00001.parquet"))
    (folder / "README.md").write_text(render_card(TOY, toy_build_info()), encoding="utf-8")

    cache = str(tmp_path / "cache")
    loaded = datasets.load_dataset(str(folder), "prompts", split="test", cache_dir=cache)
    assert loaded.num_rows == 3 and loaded.features == PROMPTS
    assert datasets.load_dataset(str(folder), split="test", cache_dir=cache)["prompt_id"] == ["p1", "p2", "p3"]
    loaded_refs = datasets.load_dataset(str(folder), "references", split="test", cache_dir=cache)
    assert loaded_refs[0]["image"].size == (4, 4)
    # The shared template's generic loading and lookup code works as written.
    namespace = _run_card_snippets((folder / "README.md").read_text(), folder, "<org>/toybench", cache)
    assert namespace["reference_image"]("b").size == (4, 4)


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["charis", "cogcanvas", "identity-collapse"])
def test_real_benchmarks_render(name):
    from idbench.builders.registry import get_benchmark

    spec = get_benchmark(name)
    built = [c for c in spec.configs.values() if not c.optional]
    info = {
        "benchmark": name,
        "idbench_version": "0.1.0",
        "seed": 0,
        "sample_build": True,
        "configs": {c.name: {"rows": 3, "shards": [f"{c.name}/test-00000-of-00001.parquet"]} for c in built},
    }
    text = render_card(spec, info)
    meta, body = split_card(text)
    assert [c["config_name"] for c in meta["configs"]] == [c.name for c in built]
    assert "### How the scores are computed" in body  # the benchmark's own prose was used
    for config in built:
        assert f"### `{config.name}`" in body
    for metric in spec.metric_suite:
        assert f"`{metric.name}`" in body
    assert render_card(spec, info) == text


def _run_card_snippets(card: str, folder: Path, repo: str, cache: str) -> dict:
    """Execute the card's Python blocks against ``folder``, as a reader would after a download."""
    code = "\n".join(re.findall(r"```python\n(.*?)```", card, re.S))
    code = code.replace(f'"{repo}"', repr(str(folder))).replace('split="test")', f'split="test", cache_dir={cache!r})')
    code = re.sub(r"^(\s*)# generate", r"\1pass  # generate", code, flags=re.M)  # a comment-only loop body
    namespace: dict = {}
    exec(compile(code, "<card>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", ["charis", "cogcanvas", "identity-collapse"])
def test_card_snippets_run_on_a_sample_build(name, tmp_path):
    """The loading and pairing code of each card runs on that benchmark's sample build."""
    from idbench.builders.build import build

    folder = tmp_path / name
    build(name, out=folder)
    card = (folder / "README.md").read_text(encoding="utf-8")
    namespace = _run_card_snippets(card, folder, f"<org>/{name}", str(tmp_path / "cache"))
    assert namespace["prompts"].num_rows > 0
    assert "prompt" in namespace  # the pairing loop ran over the prompts
