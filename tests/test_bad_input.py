"""Every bad source gets one clear error naming the culprit, and no output folder appears."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from PIL import Image

from idbench.builders.build import build
from idbench.builders.sources import SourceError
from idbench.builders.write import OutputExistsError
from conftest import COLLAPSE_HEADER, SAMPLES, make_collapse_source, noise_jpeg, write_manifest


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


def test_fixed_grid_refuses_a_prompt_count(tmp_path):
    manifest = make_collapse_source(tmp_path / "src", 12)
    assert_refused(tmp_path, "identity-collapse", manifest, "fixed grid of 75", n_prompts=10)


def test_header_only_manifest(tmp_path):
    manifest = write_manifest(tmp_path / "src" / "manifest.csv", COLLAPSE_HEADER, [])
    assert_refused(tmp_path, "identity-collapse", manifest, "no data rows")
