"""Submissions: template -> fill -> validate, and every way a submission can be wrong.

The benchmark is a real identity-collapse build from the shipped samples (75 prompts x seeds 0..2);
generations are small noise JPEGs, a different picture per pair, so a wrong pairing shows.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import pickle
import random
import stat
import zipfile
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import noise_jpeg
from PIL import Image

from idbench.builders.build import build
from idbench.builders.write import OutputExistsError
from idbench.evaluate_pkg.data import BenchmarkData, load_benchmark_data
from idbench.evaluate_pkg.images import normalize_image
from idbench.evaluate_pkg.submission import (
    MANIFEST_COLUMNS,
    Problem,
    Submission,
    SubmissionError,
    validate_submission,
    write_template,
)

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> BenchmarkData:
    folder = tmp_path_factory.mktemp("bench") / "data"
    build("identity-collapse", out=folder)
    return load_benchmark_data(folder, cache_dir=str(tmp_path_factory.mktemp("hf-cache")))


def image_for(index: int) -> bytes:
    return noise_jpeg(1000 + index, size=(24, 16))


def read_manifest(folder: Path) -> list[list[str]]:
    with (folder / "manifest.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def write_manifest(folder: Path, rows: list[list[str]]) -> None:
    with (folder / "manifest.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def set_metadata(folder: Path, **changes) -> None:
    path = folder / "submission.json"
    metadata = json.loads(path.read_text())
    metadata.update(changes)
    path.write_text(json.dumps(metadata))


@pytest.fixture
def filled(tmp_path: Path, data: BenchmarkData) -> Path:
    """The template, filled in as a user would: every expected file written, the model named."""
    folder = write_template(data, tmp_path / "submission")
    for index, (_, _, file) in enumerate(read_manifest(folder)[1:]):
        (folder / file).write_bytes(image_for(index))
    set_metadata(folder, model="TestModel", link="https://example.org/model", generation={"steps": 28})
    return folder


def problems_of(path: Path, data: BenchmarkData, **options) -> list[Problem]:
    with pytest.raises(SubmissionError) as info:
        validate_submission(path, data, **options)
    problems = list(info.value.problems)
    lines = str(info.value).splitlines()
    assert lines == [str(p) for p in problems]  # one line per problem
    return problems


def find(
    problems: list[Problem], prompt_id: str | None, seed: int | None, file: str | None, *fragments: str
) -> Problem:
    """The one problem about (prompt_id, seed, file) whose message holds every fragment."""
    matches = [
        p
        for p in problems
        if (p.prompt_id, p.seed, p.file) == (prompt_id, seed, file) and all(f in p.message for f in fragments)
    ]
    listing = "\n".join(map(str, problems))
    assert len(matches) == 1, f"no single problem {prompt_id} {seed} {file} {fragments} in:\n{listing}"
    line = str(matches[0])
    if prompt_id is not None:
        assert repr(prompt_id) in line
    if file is not None:
        assert file in line
    return matches[0]


# --- template ------------------------------------------------------------------------------------


def test_template_lists_every_required_pair(tmp_path: Path, data: BenchmarkData) -> None:
    out = write_template(data, tmp_path / "tpl")
    assert out == tmp_path / "tpl"
    metadata = json.loads((out / "submission.json").read_text())
    assert metadata["benchmark"] == "identity-collapse"
    assert metadata["model"] == ""
    assert {"link", "license", "generation", "notes", "idbench_version"} <= metadata.keys()
    rows = read_manifest(out)
    assert tuple(rows[0]) == MANIFEST_COLUMNS
    assert [(r[0], int(r[1])) for r in rows[1:]] == data.required_pairs
    assert len(rows) - 1 == 225
    assert rows[1] == ["01", "0", "images/01_s0.png"]  # the id keeps its leading zero
    assert len({r[2] for r in rows[1:]}) == 225
    assert (out / "images").is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["tpl"]  # no staging folder left behind


def test_template_refuses_existing_output_unless_overwrite(tmp_path: Path, data: BenchmarkData) -> None:
    out = tmp_path / "tpl"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(OutputExistsError):
        write_template(data, out)
    assert (out / "mine.txt").read_text() == "keep me"
    write_template(data, out, overwrite=True)
    assert not (out / "mine.txt").exists() and (out / "manifest.csv").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tpl"]


def test_unfilled_template_fails(tmp_path: Path, data: BenchmarkData) -> None:
    problems = problems_of(write_template(data, tmp_path / "tpl"), data)
    find(problems, None, None, "submission.json", "model", "empty")
    find(problems, "01", 0, "images/01_s0.png", "does not exist")
    assert len(problems) == 1 + 225


# --- a valid submission --------------------------------------------------------------------------


def test_filled_template_validates(filled: Path, data: BenchmarkData) -> None:
    submission = validate_submission(filled, data)
    assert isinstance(submission, Submission)
    assert submission.benchmark == "identity-collapse"
    assert submission.model == "TestModel"
    assert submission.metadata["generation"] == {"steps": 28}
    assert submission.workdir is None
    assert [(e.prompt_id, e.seed) for e in submission.entries] == data.required_pairs
    for index, entry in enumerate(submission.entries):
        on_disk = (filled / entry.source).read_bytes()
        assert on_disk == image_for(index)
        assert entry.content_hash == hashlib.sha256(on_disk).hexdigest()
        assert entry.data() == on_disk
    first = submission.entries[0].load()
    assert first.mode == "RGB" and first.size == (24, 16)
    assert submission.entry("02", 1) is submission.entries[4]


def test_pairing_comes_from_the_manifest_not_from_file_names(filled: Path, data: BenchmarkData) -> None:
    """File names that sort in the opposite order, rows shuffled: each pair still gets its own image."""
    rows = read_manifest(filled)
    body = rows[1:]
    expected = {}
    for index, row in enumerate(body):
        new_name = f"out/{len(body) - index:04d}.jpg"  # sorted names run backwards through the pairs
        (filled / new_name).parent.mkdir(exist_ok=True)
        (filled / row[2]).rename(filled / new_name)
        row[2] = new_name
        expected[(row[0], int(row[1]))] = image_for(index)
    random.Random(0).shuffle(body)
    write_manifest(filled, [rows[0], *body])
    submission = validate_submission(filled, data)
    assert [(e.prompt_id, e.seed) for e in submission.entries] == data.required_pairs
    for entry in submission.entries:
        assert entry.data() == expected[(entry.prompt_id, entry.seed)]


def test_manifest_columns_in_any_order(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [[r[2], r[0], r[1]] for r in rows])
    assert len(validate_submission(filled, data).entries) == 225


def test_entries_are_picklable_and_notice_changed_files(filled: Path, data: BenchmarkData) -> None:
    entry = validate_submission(filled, data).entries[7]
    clone = pickle.loads(pickle.dumps(entry))
    assert clone == entry and clone.data() == entry.data()
    (filled / entry.source).write_bytes(noise_jpeg(99999, size=(24, 16)))
    with pytest.raises(SubmissionError, match="changed since"):
        entry.data()


# --- every failure, each naming its pair and file ------------------------------------------------


def test_missing_pair(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [row for row in rows if row[:2] != ["03", "1"]])
    problems = problems_of(filled, data)
    assert problems == [Problem("03", 1, "manifest.csv", "missing: no image for this required pair")]


def test_duplicate_pair(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [*rows, ["05", "2", rows[1][2]]])
    problems = problems_of(filled, data)
    assert len(problems) == 1
    first = "manifest.csv row 15, file images/05_s2.png"
    find(problems, "05", 2, "images/01_s0.png", "duplicate", "manifest.csv row 226", first)


def test_unknown_prompt_id(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [*rows, ["1", "0", rows[1][2]], ["X99", "0", rows[2][2]]])
    problems = problems_of(filled, data)
    find(problems, "1", 0, "images/01_s0.png", "unknown prompt_id", "row 226")  # "1" is not "01"
    find(problems, "X99", 0, "images/01_s1.png", "unknown prompt_id", "row 227")
    assert len(problems) == 2


def test_seed_not_required(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [*rows, ["01", "3", rows[1][2]]])
    problems = problems_of(filled, data)
    find(problems, "01", 3, "images/01_s0.png", "seed 3 is not required", "0, 1, 2")
    assert len(problems) == 1


def test_bad_seed_and_short_row(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    rows[1][1] = "zero"
    rows[2] = rows[2][:2]
    write_manifest(filled, rows)
    problems = problems_of(filled, data)
    find(problems, "01", None, "images/01_s0.png", "seed 'zero'", "row 1")
    find(problems, None, None, "manifest.csv row 2", "2 fields")
    find(problems, "01", 0, "manifest.csv", "missing")
    find(problems, "01", 1, "manifest.csv", "missing")


def test_missing_file(filled: Path, data: BenchmarkData) -> None:
    (filled / "images/10_s2.png").unlink()
    problems = problems_of(filled, data)
    assert len(problems) == 1
    find(problems, "10", 2, "images/10_s2.png", "does not exist", "manifest.csv row 30")


def test_paths_escaping_the_folder(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(image_for(0))  # exists and is a fine image: still refused
    (filled / "images/link.jpg").symlink_to(outside)
    rows = read_manifest(filled)
    rows[1][2] = "../outside.jpg"
    rows[2][2] = str(outside)
    rows[3][2] = "images/link.jpg"
    write_manifest(filled, rows)
    problems = problems_of(filled, data)
    find(problems, "01", 0, "../outside.jpg", "relative path inside")
    find(problems, "01", 1, str(outside), "relative path inside")
    find(problems, "01", 2, "images/link.jpg", "relative path inside")
    assert len(problems) == 3


def test_corrupt_and_non_image_files(filled: Path, data: BenchmarkData) -> None:
    full = (filled / "images/02_s0.png").read_bytes()
    (filled / "images/02_s0.png").write_bytes(full[: len(full) // 2])
    (filled / "images/02_s1.png").write_text("not an image")
    problems = problems_of(filled, data)
    find(problems, "02", 0, "images/02_s0.png", "not a readable image")
    find(problems, "02", 1, "images/02_s1.png", "not an image")
    assert len(problems) == 2


def test_oversized_image(filled: Path, data: BenchmarkData) -> None:
    side = 6400  # 41 Mpx of black, about 20 kB as a 1-bit PNG
    buffer = io.BytesIO()
    Image.new("1", (side, side)).save(buffer, format="PNG")
    (filled / "images/04_s0.png").write_bytes(buffer.getvalue())
    problems = problems_of(filled, data)
    find(problems, "04", 0, "images/04_s0.png", "6400x6400", "pixel limit")


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (None, ["missing"]),
        ("{not json", ["not valid JSON"]),
        ("[1, 2]", ["JSON object"]),
        ('{"benchmark": "identity-collapse"}', ["missing field 'model'"]),
        ('{"benchmark": "charis", "model": "M"}', ["'charis'", "'identity-collapse'"]),
        ('{"benchmark": "identity-collapse", "model": "  "}', ["'model' is empty"]),
        ('{"benchmark": "identity-collapse", "model": "M", "modle": "M"}', ["unknown field 'modle'"]),
        ('{"benchmark": "identity-collapse", "model": "M", "generation": "28 steps"}', ["'generation'", "JSON object"]),
        ('{"benchmark": "identity-collapse", "model": "M", "link": "javascript:alert(1)"}', ["http(s)"]),
    ],
)
def test_bad_metadata(filled: Path, data: BenchmarkData, content: str | None, fragments: list[str]) -> None:
    path = filled / "submission.json"
    path.unlink()
    if content is not None:
        path.write_text(content)
    problems = problems_of(filled, data)
    assert len(problems) == 1
    find(problems, None, None, "submission.json", *fragments)


def test_wrong_manifest_columns(filled: Path, data: BenchmarkData) -> None:
    rows = read_manifest(filled)
    write_manifest(filled, [["prompt", "seed", "file"], *rows[1:]])
    problems = problems_of(filled, data)
    find(problems, None, None, "manifest.csv", "prompt,seed,file", "prompt_id,seed,file")
    assert len(problems) == 1  # the pairs are not all reported missing on top
    write_manifest(filled, [["prompt_id", "seed", "file", "extra"], *[r + ["x"] for r in rows[1:]]])
    find(problems_of(filled, data), None, None, "manifest.csv", "expected exactly the columns")


def test_no_listing_at_all(filled: Path, data: BenchmarkData) -> None:
    (filled / "manifest.csv").unlink()
    problems = problems_of(filled, data)
    assert len(problems) == 1 and "no manifest.csv and no *.parquet" in problems[0].message


def test_all_problems_reported_at_once(filled: Path, data: BenchmarkData) -> None:
    set_metadata(filled, model="")
    (filled / "images/06_s0.png").unlink()
    (filled / "images/06_s1.png").write_bytes(b"\x89PNG broken")
    rows = read_manifest(filled)
    rows = [r for r in rows if r[:2] != ["07", "0"]] + [["07", "1", "images/07_s1.png"], ["bogus", "0", "x.png"]]
    write_manifest(filled, rows)
    problems = problems_of(filled, data)
    find(problems, None, None, "submission.json", "'model' is empty")
    find(problems, "06", 0, "images/06_s0.png", "does not exist")
    find(problems, "06", 1, "images/06_s1.png", "not")
    find(problems, "07", 0, "manifest.csv", "missing")
    find(problems, "07", 1, "images/07_s1.png", "duplicate")
    find(problems, "bogus", 0, "x.png", "unknown prompt_id")
    assert len(problems) == 6


def test_not_a_submission(tmp_path: Path, data: BenchmarkData) -> None:
    find(problems_of(tmp_path / "nope", data), None, None, str(tmp_path / "nope"), "does not exist")
    text = tmp_path / "sub.txt"
    text.write_text("hello")
    find(problems_of(text, data), None, None, str(text), "neither a folder nor a .zip")


# --- parquet -------------------------------------------------------------------------------------

PARQUET_FEATURES = datasets.Features(
    {
        "prompt_id": datasets.Value("string"),
        "seed": datasets.Value("int64"),
        "image": datasets.Image(),
        "prompt": datasets.Value("string"),  # other columns are allowed and ignored
    }
)


def parquet_submission(folder: Path, data: BenchmarkData, shards: int = 2) -> dict[tuple[str, int], bytes]:
    """A parquet submission written with datasets, rows shuffled over ``shards`` files; pair -> bytes."""
    folder.mkdir(parents=True)
    (folder / "submission.json").write_text(json.dumps({"benchmark": data.name, "model": "ParquetModel"}))
    pairs = list(data.required_pairs)
    random.Random(1).shuffle(pairs)
    expected = {pair: image_for(index) for index, pair in enumerate(pairs)}
    rows = [
        {
            "prompt_id": p,
            "seed": s,
            "image": {"bytes": expected[(p, s)], "path": None},
            "prompt": data.prompt_rows[p]["prompt"],
        }
        for p, s in pairs
    ]
    (folder / "data").mkdir()
    for shard in range(shards):
        part = datasets.Dataset.from_list(rows[shard::shards], features=PARQUET_FEATURES)
        part.to_parquet(str(folder / "data" / f"part-{shard}.parquet"))
    return expected


def test_parquet_submission_validates(tmp_path: Path, data: BenchmarkData) -> None:
    expected = parquet_submission(tmp_path / "pq", data)
    scratch = tmp_path / "scratch"
    with validate_submission(tmp_path / "pq", data, scratch=scratch) as submission:
        assert [(e.prompt_id, e.seed) for e in submission.entries] == data.required_pairs
        for entry in submission.entries:
            assert entry.data() == expected[(entry.prompt_id, entry.seed)]
            assert entry.content_hash == hashlib.sha256(expected[(entry.prompt_id, entry.seed)]).hexdigest()
            assert entry.source.startswith("data/part-") and " row " in entry.source
        assert submission.entries[0].load().mode == "RGB"
        assert submission.workdir is not None and submission.workdir.parent == scratch
    assert list(scratch.iterdir()) == []  # closed: the copied-out images are gone
    with pytest.raises(SubmissionError, match="cannot be read any more"):
        submission.entries[0].data()


def test_parquet_with_a_plain_binary_column(tmp_path: Path, data: BenchmarkData) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"benchmark": data.name, "model": "M"}))
    ids, seeds = zip(*data.required_pairs)
    blobs = [image_for(i) for i in range(len(ids))]
    table = pa.table(
        {"prompt_id": list(ids), "seed": pa.array(seeds, pa.int32()), "image": pa.array(blobs, pa.binary())}
    )
    pq.write_table(table, folder / "generations.parquet", row_group_size=50)
    with validate_submission(folder, data, scratch=tmp_path / "scratch") as submission:
        assert [e.data() for e in submission.entries] == blobs
        assert submission.entries[60].source == "generations.parquet row 60"


def test_parquet_problems(tmp_path: Path, data: BenchmarkData) -> None:
    folder = tmp_path / "pq"
    parquet_submission(folder, data, shards=1)
    path = folder / "data/part-0.parquet"
    table = pq.read_table(path)
    index = {(p, s): i for i, (p, s) in enumerate(zip(table["prompt_id"].to_pylist(), table["seed"].to_pylist()))}
    images = table["image"].to_pylist()
    images[index[("01", 0)]] = {"bytes": b"garbage", "path": None}
    images[index[("01", 1)]] = {"bytes": None, "path": "/home/me/01_s1.png"}
    prompt_ids = table["prompt_id"].to_pylist()
    prompt_ids[index[("02", 0)]] = "nope"
    image_type = table.schema.field("image").type
    table = table.set_column(table.schema.get_field_index("image"), "image", pa.array(images, image_type))
    table = table.set_column(0, "prompt_id", pa.array(prompt_ids, pa.string()))
    duplicate = table.slice(index[("03", 2)], 1)
    pq.write_table(pa.concat_tables([table, duplicate]), path)
    scratch = tmp_path / "scratch"
    problems = problems_of(folder, data, scratch=scratch)
    assert list(scratch.iterdir()) == []  # the copied-out images were removed on failure
    at = lambda pair: f"data/part-0.parquet row {index[pair]}"  # noqa: E731
    find(problems, "01", 0, at(("01", 0)), "not an image")
    find(problems, "01", 1, at(("01", 1)), "no image bytes")
    find(problems, "nope", 0, at(("02", 0)), "unknown prompt_id")
    find(problems, "02", 0, "the parquet files", "missing")
    find(problems, "03", 2, f"data/part-0.parquet row {len(index)}", "duplicate", at(("03", 2)))
    assert len(problems) == 5


def test_parquet_with_wrong_columns(tmp_path: Path, data: BenchmarkData) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"benchmark": data.name, "model": "M"}))
    pq.write_table(pa.table({"prompt_id": [1], "seed": [0], "image": [b"x"]}), folder / "a.parquet")
    pq.write_table(pa.table({"id": ["01"], "seed": [0]}), folder / "b.parquet")
    (folder / "c.parquet").write_bytes(b"not parquet at all")
    problems = problems_of(folder, data, scratch=tmp_path / "scratch")
    find(problems, None, None, "a.parquet", "prompt_id should hold strings")
    find(problems, None, None, "b.parquet", "missing column(s) prompt_id, image")
    find(problems, None, None, "c.parquet", "not a readable parquet file")
    assert len(problems) == 3


# --- zip -----------------------------------------------------------------------------------------


def zip_folder(folder: Path, archive: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(folder.rglob("*")):
            out.write(path, prefix + path.relative_to(folder).as_posix())
    return archive


@pytest.mark.parametrize("prefix", ["", "my-submission/"])
def test_zip_submission_validates(filled: Path, data: BenchmarkData, tmp_path: Path, prefix: str) -> None:
    archive = zip_folder(filled, tmp_path / "submission.zip", prefix)
    scratch = tmp_path / "scratch"
    with validate_submission(archive, data, scratch=scratch) as submission:
        assert [(e.prompt_id, e.seed) for e in submission.entries] == data.required_pairs
        assert submission.entries[5].data() == (filled / "images/02_s2.png").read_bytes()
        assert submission.entries[5].source == "images/02_s2.png"
        assert submission.model == "TestModel"
    assert list(scratch.iterdir()) == []


def test_zip_of_parquet_validates(tmp_path: Path, data: BenchmarkData) -> None:
    expected = parquet_submission(tmp_path / "pq", data)
    archive = zip_folder(tmp_path / "pq", tmp_path / "pq.zip")
    with validate_submission(archive, data, scratch=tmp_path / "scratch") as submission:
        assert all(e.data() == expected[(e.prompt_id, e.seed)] for e in submission.entries)


def test_zip_problems_are_reported_like_folder_problems(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    (filled / "images/09_s1.png").unlink()
    archive = zip_folder(filled, tmp_path / "submission.zip")
    scratch = tmp_path / "scratch"
    problems = problems_of(archive, data, scratch=scratch)
    find(problems, "09", 1, "images/09_s1.png", "does not exist")
    assert list(scratch.iterdir()) == []


def hostile_zip(archive: Path, filled: Path, member: zipfile.ZipInfo, content: bytes) -> Path:
    """A valid zipped submission plus one hostile member."""
    zip_folder(filled, archive)
    with zipfile.ZipFile(archive, "a") as out:
        out.writestr(member, content)
    return archive


def symlink_member(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix, so the mode bits count
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("member", "fragment"),
    [
        (zipfile.ZipInfo("../evil.png"), "'..'"),
        (zipfile.ZipInfo("images/../../evil.png"), "'..'"),
        (zipfile.ZipInfo("/tmp/evil.png"), "absolute path"),
        (zipfile.ZipInfo("C:/evil.png"), "absolute path"),
        (symlink_member("images/evil.png"), "symbolic link"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute", "drive", "symlink"],
)
def test_hostile_zip_members_refused(
    filled: Path, data: BenchmarkData, tmp_path: Path, member: zipfile.ZipInfo, fragment: str
) -> None:
    content = b"../../evil.png" if "symlink" in fragment else image_for(0)  # a symlink's content is its target
    archive = hostile_zip(tmp_path / "evil.zip", filled, member, content)
    scratch = tmp_path / "deep" / "scratch"
    problems = problems_of(archive, data, scratch=scratch)
    find(problems, None, None, f"evil.zip:{member.filename}", fragment)
    assert len(problems) == 1
    assert list(scratch.iterdir()) == []  # nothing extracted, and the temp folder is gone
    assert not list(tmp_path.rglob("evil.png"))
    assert not Path("/tmp/evil.png").exists()


def test_unnamed_member_refused_by_name_whatever_its_size(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    # 8 MiB of zeros the manifest never names: refused by name, not extracted (it once was, to disk)
    info = zipfile.ZipInfo("padding.bin")
    info.compress_type = zipfile.ZIP_DEFLATED
    archive = hostile_zip(tmp_path / "bomb.zip", filled, info, bytes(8 * 1024 * 1024))
    assert archive.stat().st_size < 1024 * 1024  # 8 MiB of zeros compresses to almost nothing
    scratch = tmp_path / "scratch"
    for limit in (4 * 1024 * 1024, 64 * 1024 * 1024):  # under or over the size limit: refused all the same
        problems = problems_of(archive, data, scratch=scratch, max_zip_bytes=limit)
        find(problems, None, None, "bomb.zip:padding.bin", "not named in manifest.csv")
        assert len(problems) == 1 and list(scratch.iterdir()) == []


def bomb_zip(archive: Path, filled: Path, member: str, megabytes: int) -> Path:
    """The zipped submission with ``member`` (a file the manifest names) replaced by zeros, streamed."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(p for p in filled.rglob("*") if p.is_file()):
            name = path.relative_to(filled).as_posix()
            if name != member:
                out.write(path, name)
        with out.open(member, "w") as sink:
            block = bytes(1024 * 1024)
            for _ in range(megabytes):
                sink.write(block)
    return archive


def scratch_bytes(scratch: Path) -> int:
    return sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file())


def test_zip_bomb_refused_by_ratio_and_by_size(filled: Path, data: BenchmarkData, tmp_path: Path, monkeypatch) -> None:
    member = read_manifest(filled)[1][2]
    archive = bomb_zip(tmp_path / "bomb.zip", filled, member, megabytes=200)
    assert archive.stat().st_size < 1024 * 1024  # 200 MB of zeros in well under 1 MB
    scratch = tmp_path / "scratch"
    # the default ratio limit (100:1) refuses it before a byte of it is written
    find(problems_of(archive, data, scratch=scratch), None, None, f"bomb.zip:{member}", "compression ratio over 100:1")
    assert list(scratch.iterdir()) == []
    # a ratio allowed through the environment, a 20 MB total: the size limit refuses it
    monkeypatch.setenv("IDBENCH_MAX_COMPRESSION_RATIO", "1e9")
    monkeypatch.setenv("IDBENCH_MAX_UNPACKED_BYTES", str(20 * 1000 * 1000))
    find(problems_of(archive, data, scratch=scratch), None, None, "bomb.zip", "over the 20000000-byte limit")
    assert list(scratch.iterdir()) == []
    monkeypatch.setenv("IDBENCH_MAX_UNPACKED_BYTES", "lots")
    with pytest.raises(ValueError, match="IDBENCH_MAX_UNPACKED_BYTES"):
        validate_submission(archive, data, scratch=scratch)


def test_zip_bomb_whose_header_lies_is_stopped_while_streaming(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    """The central directory declares a huge compressed size (so the declared ratio looks harmless):
    the bytes streamed out are what is counted, against at most the archive's own size."""
    member = read_manifest(filled)[1][2]
    archive = bomb_zip(tmp_path / "bomb.zip", filled, member, megabytes=40)
    raw = bytearray(archive.read_bytes())
    entry = raw.rindex(b"PK\x01\x02")  # the central directory's last entry
    with zipfile.ZipFile(archive) as check:
        assert check.infolist()[-1].filename == member  # the bomb was written last
    raw[entry + 20 : entry + 24] = (0x7FFFFFFF).to_bytes(4, "little")  # compress_size of the bomb's entry
    archive.write_bytes(bytes(raw))
    with zipfile.ZipFile(archive) as forged:
        info = forged.getinfo(member)
        assert info.compress_size == 0x7FFFFFFF and info.file_size / info.compress_size < 1  # looks harmless
    scratch = tmp_path / "scratch"
    find(problems_of(archive, data, scratch=scratch), None, None, f"bomb.zip:{member}", "compression ratio over 100:1")
    assert list(scratch.iterdir()) == [] and scratch_bytes(scratch) == 0  # the partial file went with the folder


@pytest.mark.parametrize("inner", ["images/more.zip", "images/more.tar.gz", "more.7z"])
def test_nested_archive_refused_by_name(filled: Path, data: BenchmarkData, tmp_path: Path, inner: str) -> None:
    archive = hostile_zip(tmp_path / "nested.zip", filled, zipfile.ZipInfo(inner), b"PK\x03\x04")
    scratch = tmp_path / "scratch"
    problems = problems_of(archive, data, scratch=scratch)
    find(problems, None, None, f"nested.zip:{inner}", "nested archive")
    assert len(problems) == 1 and list(scratch.iterdir()) == []


def test_named_nested_archive_and_non_image_refused(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    rows = read_manifest(filled)
    first, second = rows[1][2], rows[2][2]
    (filled / first).rename(filled / "images" / "inner.zip")
    (filled / second).rename(filled / "images" / "notes.txt")
    rows[1][2], rows[2][2] = "images/inner.zip", "images/notes.txt"
    write_manifest(filled, rows)
    archive = zip_folder(filled, tmp_path / "sub.zip")
    problems = problems_of(archive, data, scratch=tmp_path / "scratch")
    find(problems, None, None, "sub.zip:images/inner.zip", "nested archive")
    find(problems, None, None, "sub.zip:images/notes.txt", "not an image file")
    assert len(problems) == 2


def test_unnamed_members_refused_only_junk_of_archivers_skipped(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    archive = zip_folder(filled, tmp_path / "sub.zip", "my-submission/")
    with zipfile.ZipFile(archive, "a") as out:
        out.writestr("__MACOSX/my-submission/._manifest.csv", b"\x00\x05\x16\x07")  # Finder's, skipped
        out.writestr("my-submission/.DS_Store", b"\x00\x00\x00\x01Bud1")
    scratch = tmp_path / "scratch"
    with validate_submission(archive, data, scratch=scratch) as submission:
        assert len(submission.entries) == len(data.required_pairs)
        assert not list(scratch.rglob("._manifest.csv")) and not list(scratch.rglob(".DS_Store"))
    with zipfile.ZipFile(archive, "a") as out:
        out.writestr("my-submission/images/extra.png", image_for(0))
        out.writestr("my-submission/run.sh", b"rm -rf /")
    problems = problems_of(archive, data, scratch=scratch)
    find(problems, None, None, "sub.zip:my-submission/images/extra.png", "not named in manifest.csv")
    find(problems, None, None, "sub.zip:my-submission/run.sh", "not named in manifest.csv")
    assert len(problems) == 2 and list(scratch.iterdir()) == []


def test_zip_of_parquet_takes_only_parquet(tmp_path: Path, data: BenchmarkData) -> None:
    parquet_submission(tmp_path / "pq", data)
    (tmp_path / "pq" / "README.md").write_text("hello")
    archive = zip_folder(tmp_path / "pq", tmp_path / "pq.zip")
    problems = problems_of(archive, data, scratch=tmp_path / "scratch")
    find(problems, None, None, "pq.zip:README.md", "only *.parquet files")
    assert len(problems) == 1


def test_too_many_zip_members_refused(filled: Path, data: BenchmarkData, tmp_path: Path) -> None:
    archive = zip_folder(filled, tmp_path / "many.zip")
    problems = problems_of(archive, data, max_zip_members=100, scratch=tmp_path / "s")
    find(problems, None, None, "many.zip", "over the limit of 100")


def test_entries_in_required_order_for_every_format(tmp_path: Path, data: BenchmarkData) -> None:
    """A build with a different seed list (cogcanvas: seed 0 only) gets its own required pairs."""
    folder = tmp_path / "cog"
    build("cogcanvas", out=folder)
    cog = load_benchmark_data(folder, cache_dir=str(tmp_path / "cache"))
    assert {seed for _, seed in cog.required_pairs} == {0}
    submission_folder = write_template(cog, tmp_path / "sub")
    for index, (_, _, file) in enumerate(read_manifest(submission_folder)[1:]):
        (submission_folder / file).write_bytes(image_for(index))
    set_metadata(submission_folder, model="M")
    submission = validate_submission(submission_folder, cog)
    assert [(e.prompt_id, e.seed) for e in submission.entries] == cog.required_pairs
    # a collapse submission is not a cogcanvas one
    problems = problems_of(submission_folder, data)
    find(problems, None, None, "submission.json", "'cogcanvas'")


def test_normalised_pixels_match_the_loader(filled: Path, data: BenchmarkData) -> None:
    entry = validate_submission(filled, data).entries[3]
    expected = normalize_image((filled / entry.source).read_bytes(), where="x")
    assert np.array_equal(np.asarray(entry.load()), np.asarray(expected))


def test_parquet_linked_from_outside_refused(tmp_path: Path, data: BenchmarkData) -> None:
    parquet_submission(tmp_path / "elsewhere", data, shards=1)
    folder = tmp_path / "pq"
    folder.mkdir()
    (folder / "submission.json").write_text(json.dumps({"benchmark": data.name, "model": "M"}))
    (folder / "linked.parquet").symlink_to(tmp_path / "elsewhere/data/part-0.parquet")
    problems = problems_of(folder, data, scratch=tmp_path / "scratch")
    find(problems, None, None, "linked.parquet", "outside the submission folder")


def test_zip_with_an_unreadable_manifest_reports_the_manifest_not_every_image(
    filled: Path, data: BenchmarkData, tmp_path: Path
) -> None:
    rows = read_manifest(filled)
    rows[0] = ["prompt", "seed", "path"]  # a header without the file column: nothing is named
    write_manifest(filled, rows)
    archive = zip_folder(filled, tmp_path / "sub.zip")
    scratch = tmp_path / "scratch"
    problems = problems_of(archive, data, scratch=scratch)
    find(problems, None, None, "manifest.csv", "expected exactly the columns")
    assert len(problems) == 1 and list(scratch.iterdir()) == []
