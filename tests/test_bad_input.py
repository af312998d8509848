"""Every bad source gets one clear error naming the culprit, and no output folder appears."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import COLLAPSE_HEADER, SAMPLES, make_collapse_source, noise_jpeg, write_manifest
from PIL import Image

from idbench.builders.build import build
from idbench.builders.sources import SourceError
from idbench.builders.write import OutputExistsError

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def assert_refused(tmp_path: Path, benchmark: str, source: Path, *fragments: str, **options) -> None:
    out = tmp_path / "out"
    with pytest.raises(SourceError) as info:
        build(benchmark, out=out, source=source, **options)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert not out.exists()
    # nothing half-written next to it either (the staging folder is removed)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def read_rows(manifest: Path) -> list[list[str]]:
    with manifest.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def rewrite_row(manifest: Path, row: int, column: str, value: str) -> None:
    """Set one cell of data row ``row`` (1-based; the header is row 0)."""
    rows = read_rows(manifest)
    rows[row][rows[0].index(column)] = value
    write_manifest(manifest, rows[0], rows[1:])


def test_missing_file(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    (tmp_path / "src" / "img" / "subject_004.jpg").unlink()
    assert_refused(tmp_path, "identity-collapse", manifest, "row 5", "img/subject_004.jpg", "does not exist")


def test_truncated_image(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    target = tmp_path / "src" / "img" / "subject_002.jpg"
    target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
    assert_refused(tmp_path, "identity-collapse", manifest, "row 3", "subject_002.jpg", "not a readable image")


def test_not_an_image(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    (tmp_path / "src" / "img" / "subject_000.jpg").write_text("hello")
    assert_refused(tmp_path, "identity-collapse", manifest, "row 1", "subject_000.jpg", "not a readable image")


def test_decompression_bomb_is_refused(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    buffer = io.BytesIO()
    Image.new("L", (9000, 5000)).save(buffer, format="PNG")  # 45 Mpixel, a few KB on disk
    (tmp_path / "src" / "img" / "subject_003.jpg").write_bytes(buffer.getvalue())
    assert_refused(tmp_path, "identity-collapse", manifest, "row 4", "subject_003.jpg", "pixel")


def test_unknown_kind(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    rewrite_row(manifest, 7, "kind", "robot")
    assert_refused(tmp_path, "identity-collapse", manifest, "row 7", "'kind'", "'robot'", "human, animal")


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [("type", "robot", "'type' has 'robot'"), ("style", "oil", "'style' has 'oil'")],
)
def test_unknown_type_or_style(tmp_path, column, value, expected):
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    rewrite_row(source / "charis.csv", 3, column, value)
    assert_refused(tmp_path, "charis", source / "charis.csv", "charis.csv, row 3", expected)


def test_duplicate_id(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    first_id = read_rows(source / "charis.csv")[1][0]
    rewrite_row(source / "charis.csv", 5, "subject_id", first_id)
    assert_refused(tmp_path, "charis", source / "charis.csv", "row 5", "duplicate subject_id", first_id, "row 1")


def test_unknown_kind_cogcanvas(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    rewrite_row(source / "cogcanvas.csv", 2, "kind", "vehicle")
    assert_refused(tmp_path, "cogcanvas", source / "cogcanvas.csv", "row 2", "'vehicle'")


def test_wrong_column_in_header(tmp_path):
    folder = tmp_path / "src"
    make_collapse_source(folder, 12)
    text = (folder / "manifest.csv").read_text().replace("kind", "knid", 1)
    (folder / "manifest.csv").write_text(text)
    assert_refused(tmp_path, "identity-collapse", folder, "manifest.csv", "unknown column(s) 'knid'")


def test_row_with_extra_field(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    lines = manifest.read_text().splitlines()
    lines[6] += ",surplus"
    manifest.write_text("\n".join(lines) + "\n")
    assert_refused(tmp_path, "identity-collapse", manifest, "row 6", "7 fields", "6 columns")


def test_empty_required_value(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    rewrite_row(manifest, 2, "license", "")
    assert_refused(tmp_path, "identity-collapse", manifest, "row 2", "'license' is empty")


def test_too_few_subjects(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 9)
    assert_refused(tmp_path, "identity-collapse", manifest, "manifest.csv", "at least 10", "has 9")


def test_duplicates_count_against_the_pool(tmp_path):
    # 10 rows, but one is a byte copy of another: after dedup only 9 distinct subjects remain
    manifest = make_collapse_source(tmp_path / "src", 10)
    shutil.copy(tmp_path / "src" / "img" / "subject_000.jpg", tmp_path / "src" / "img" / "subject_009.jpg")
    assert_refused(tmp_path, "identity-collapse", manifest, "at least 10", "has 9")


def test_path_escaping_the_source_folder(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    (tmp_path / "outside.jpg").write_bytes(noise_jpeg(999))
    rewrite_row(manifest, 1, "file", "../outside.jpg")
    assert_refused(tmp_path, "identity-collapse", manifest, "row 1", "../outside.jpg", "inside")


def test_missing_source_folder(tmp_path):
    assert_refused(tmp_path, "identity-collapse", tmp_path / "nowhere", "nowhere", "does not exist")


def test_folder_without_manifest(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_refused(tmp_path, "identity-collapse", tmp_path / "empty", "no identity-collapse.csv or manifest.csv")


def test_cogcanvas_metadata_of_the_wrong_kind(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    rows = read_rows(source / "cogcanvas.csv")
    person_row = next(i for i, row in enumerate(rows) if row[rows[0].index("kind")] == "person")
    rewrite_row(source / "cogcanvas.csv", person_row, "scene_type", "landmark")
    assert_refused(tmp_path, "cogcanvas", source / "cogcanvas.csv", f"row {person_row}", "'scene_type'", "background")


def test_existing_output_is_not_clobbered(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    out = tmp_path / "built"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        build("identity-collapse", out=out, source=manifest)
    assert (out / "keep.txt").read_text() == "precious"


def test_failed_rebuild_keeps_the_old_output(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    out = tmp_path / "built"
    build("identity-collapse", out=out, source=manifest)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    rewrite_row(manifest, 1, "kind", "robot")
    with pytest.raises(SourceError):
        build("identity-collapse", out=out, source=manifest, overwrite=True)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


@pytest.mark.parametrize("n_prompts", [10, 0, 90, 16])
def test_the_grid_refuses_a_prompt_count_that_is_not_whole_cells(tmp_path, n_prompts):
    manifest = make_collapse_source(tmp_path / "src", 12)
    assert_refused(tmp_path, "identity-collapse", manifest, "must be a multiple of 15 up to 75", n_prompts=n_prompts)


def test_header_only_manifest(tmp_path):
    manifest = write_manifest(tmp_path / "src" / "manifest.csv", COLLAPSE_HEADER, [])
    assert_refused(tmp_path, "identity-collapse", manifest, "no data rows")


# --- names a prompt holds together must be told apart (issue 11.10) --------------------------------


def reads_alike(a: str, b: str) -> bool:
    """The test's own reading of "the same name": case, spacing and one leading article ignored."""

    def bare(name: str) -> str:
        words = name.lower().split()
        return " ".join(words[1:] if len(words) > 1 and words[0] in ("the", "a", "an") else words)

    return bare(a) == bare(b)


def test_reads_alike_matches_the_builder():
    from idbench.builders.sources import reader_name

    pairs = [
        ("the dog", "The Dog "),
        ("the  dog", "dog"),
        ("a dog", "the dog"),
        ("the dog", "the brown dog"),
        ("dog", "dogs"),
    ]
    for a, b in pairs:
        assert (reader_name(a) == reader_name(b)) == reads_alike(a, b), (a, b)


def test_collapse_subjects_sharing_a_name_are_refused_in_one_error(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    rewrite_row(manifest, 3, "name", "the dog")
    rewrite_row(manifest, 8, "name", "The Dog ")
    rewrite_row(manifest, 11, "name", "dog")
    rewrite_row(manifest, 5, "name", "a cat")
    rewrite_row(manifest, 6, "name", "the cat")
    assert_refused(
        tmp_path,
        "identity-collapse",
        manifest,
        "manifest.csv",
        "row 3, row 8 and row 11 share the name 'dog' ('the dog', 'The Dog', 'dog')",
        "row 5 and row 6 share the name 'cat' ('a cat', 'the cat')",
        "distinguishing name in the 'name' column",
    )


def test_collapse_distinct_names_build(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    rewrite_row(manifest, 3, "name", "the dog")
    rewrite_row(manifest, 8, "name", "the brown dog")
    info = build("identity-collapse", out=tmp_path / "out", source=manifest)
    assert info["configs"]["subjects"]["rows"] == 12


def cogcanvas_copy(tmp_path: Path) -> tuple[Path, list[list[str]]]:
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    return source / "cogcanvas.csv", read_rows(source / "cogcanvas.csv")


def row_of(rows: list[list[str]], entity: str) -> list[int]:
    column = rows[0].index("entity_id")
    return [i for i, row in enumerate(rows) if i and row[column] == entity]


def test_cogcanvas_persons_sharing_a_name_are_refused(tmp_path):
    manifest, rows = cogcanvas_copy(tmp_path)
    (first,), (second,) = row_of(rows, "person-grace-hopper"), row_of(rows, "person-aksel-andersson")
    rewrite_row(manifest, first, "name", "the dog")
    rewrite_row(manifest, second, "name", "The Dog ")
    assert_refused(
        tmp_path,
        "cogcanvas",
        manifest,
        f"entity person-grace-hopper (row {first}) and entity person-aksel-andersson (row {second}) share the name 'dog'",
        "'the dog', 'The Dog'",
        "distinguishing name",
    )


def test_cogcanvas_a_person_and_an_item_sharing_a_name_are_refused(tmp_path):
    # Persons and items stand side by side in one prompt ("person A (the doll) holds the doll").
    manifest, rows = cogcanvas_copy(tmp_path)
    (person,) = row_of(rows, "person-grace-hopper")
    dress = row_of(rows, "fashion-blue-dress")
    for row in (person, *dress):
        rewrite_row(manifest, row, "name", "the doll")
    assert_refused(
        tmp_path,
        "cogcanvas",
        manifest,
        f"entity person-grace-hopper (row {person}) and entity fashion-blue-dress (rows {dress[0]}, {dress[1]}) share the name 'doll'",
    )


def test_cogcanvas_a_background_may_not_share_an_item_name_but_two_backgrounds_may(tmp_path):
    # A prompt holds one background, so two never meet; its name does meet the items' names.
    manifest, rows = cogcanvas_copy(tmp_path)
    (park_a,), (park_b,) = row_of(rows, "bg-autumn-ridge"), row_of(rows, "bg-dandelion-meadow")
    rewrite_row(manifest, park_a, "name", "the park")
    rewrite_row(manifest, park_b, "name", "The Park")
    info = build("cogcanvas", out=tmp_path / "ok", source=manifest, n_prompts=6)
    assert info["configs"]["references"]["rows"] == len(rows) - 1

    (chair,) = row_of(rows, "object-white-chair")
    rewrite_row(manifest, chair, "name", "the park")
    assert_refused(
        tmp_path,
        "cogcanvas",
        manifest,
        f"entity object-white-chair (row {chair})",
        f"entity bg-autumn-ridge (row {park_a})",
    )


def test_cogcanvas_one_entity_with_several_references_of_one_name_builds(tmp_path):
    manifest, rows = cogcanvas_copy(tmp_path)
    name = rows[0].index("name")
    dress = row_of(rows, "fashion-blue-dress")
    assert len(dress) == 2 and reads_alike(
        rows[dress[0]][name], rows[dress[1]][name]
    )  # so the shipped samples prove it
    rewrite_row(manifest, dress[1], "name", "The Blue dress  with the purple waistband")
    info = build("cogcanvas", out=tmp_path / "out", source=manifest, n_prompts=6)
    assert info["configs"]["references"]["rows"] == len(rows) - 1


def test_charis_allows_subjects_sharing_a_name(tmp_path):
    # A CHARIS prompt names one subject and everything refers to subjects by subject_id: no ambiguity.
    source = tmp_path / "src"
    shutil.copytree(SAMPLES, source)
    rows = read_rows(source / "charis.csv")
    rewrite_row(source / "charis.csv", 1, "name", "the dog")
    rewrite_row(source / "charis.csv", 2, "name", "The Dog ")
    build("charis", out=tmp_path / "out", source=source / "charis.csv")
    subjects = {r[0] for r in rows[1:3]}
    prompts = pq.read_table(tmp_path / "out" / "prompts").to_pylist()
    assert {p["subject_id"] for p in prompts} >= subjects
    for p in prompts:
        if p["subject_id"] in subjects:
            assert p["prompt"].lower().count("the dog") == 1


@pytest.mark.parametrize("benchmark", ["identity-collapse", "cogcanvas", "charis"])
def test_the_shipped_samples_have_no_names_that_read_alike(benchmark):
    # Brute force over pairs, with the test's own reading of names and of which subjects meet in a prompt.
    with (SAMPLES / f"{benchmark}.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    clashes = [
        (a["name"], b["name"])
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
        if reads_alike(a["name"], b["name"])
        and a.get("entity_id", a["file"]) != b.get("entity_id", b["file"])
        and not (a.get("kind") == b.get("kind") == "background")
    ]
    assert clashes == []


def test_a_name_changed_by_curation_is_checked_before_sampling(tmp_path, monkeypatch):
    """The check runs on the rows the sampler gets, not only on the manifest."""
    from idbench.benchmarks.cogcanvas import curation

    def rename(rows, run):  # CogCanvas's metadata stage, as if the judge renamed the teacup
        return [{**r, "name": "the red espresso cup"} if r["entity_id"] == "object-white-teacup" else r for r in rows]

    monkeypatch.setattr(curation, "curate_cogcanvas_references", rename)

    class Log:
        stages: dict = {}

        def write(self, folder):
            pass

    class Renamer:
        log, fills_metadata, judge, options = Log(), False, None, None

        def curate_images(self, images, id_of, text_of):
            return list(images)

    manifest, rows = cogcanvas_copy(tmp_path)
    (cup,), (teacup,) = row_of(rows, "object-red-espresso-cup"), row_of(rows, "object-white-teacup")
    assert_refused(
        tmp_path,
        "cogcanvas",
        manifest,
        f"entity object-red-espresso-cup (row {cup}) and entity object-white-teacup (row {teacup}) share the name 'red espresso cup'",
        curator=Renamer(),
        n_prompts=6,
    )


def test_a_spec_naming_an_unknown_column_for_distinct_names_is_refused():
    from dataclasses import replace

    from idbench.benchmarks.identity_collapse.spec import SPEC
    from idbench.builders.spec import DistinctNames, SpecError

    with pytest.raises(SpecError, match="'label'"):
        replace(SPEC, distinct_names=DistinctNames("label"))
