"""Scoring in shards (score --shard K/N), then `idbench merge` (evaluate_pkg/merge.py): the merged results are
a single process's, whether the shards shared a cache or each had its own; an incomplete, mixed or altered set
of shards is refused in one line; a killed shard resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from idbench.builders.build import build
from idbench.cli import main
from idbench.evaluate_pkg import features as features_module
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.shards import Shard, unit_key

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

METRICS = "dino_sim,clip_t"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shards")
    build("cogcanvas", out=root / "data", n_prompts=6)
    make_baseline("collage", load_benchmark_data(root / "data"), root / "sub", size=128)
    return root


def score(built: Path, out: Path, cache: Path, *more: str) -> int:
    argv = ["score", str(built / "sub"), "--data", str(built / "data"), "--out", str(out)]
    return main([*argv, "--profile", "tiny", "--metrics", METRICS, "--cache-dir", str(cache), *more])


@pytest.fixture(scope="module")
def single(built, tmp_path_factory) -> Path:
    """One process's results, with batches of one (what the bit-for-bit comparisons compare with)."""
    root = tmp_path_factory.mktemp("single")
    assert score(built, root / "out", root / "cache", "--batch-size", "1") == 0
    return root / "out"


def same_as_one_process(out: Path, single: Path) -> dict:
    """Assert that the merged results in ``out`` are one process's (``single``) bit for bit; the merged summary."""
    merged = json.loads((out / "aggregates.json").read_text())
    one = json.loads((single / "aggregates.json").read_text())
    # The same floats in the same places (the feature counts say what each run computed).
    assert merged["aggregates"] == one["aggregates"] and merged["copies"] == one["copies"]
    assert merged["notes"] == one["notes"] and merged["images"] == one["images"]
    assert computed(merged) == 0 and computed(one) > 0
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), pd.read_parquet(single / "results.parquet"))
    return merged


def computed(summary: dict) -> int:
    return sum(summary["features"]["computed"].values())


def close(a, b, rel: float = 1e-5) -> bool:
    """Equal structure and counts, floats within ``rel``: what batches of another size change."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-9, nan_ok=True)
    return a == b


@pytest.mark.slow
def test_three_shards_and_a_merge_write_what_one_process_writes(built, single, tmp_path, capsys):
    # Batches of one: an image's features cannot depend on the batch it was in, so a single process and
    # the shards compute the same floats, and the merge must reproduce the single process bit for bit.
    one = ("--batch-size", "1")
    out, cache = tmp_path / "sharded", tmp_path / "cache-shards"
    for k in (0, 2):
        assert score(built, out, cache, "--shard", f"{k}/3", *one) == 0
    capsys.readouterr()
    # Shard 1 has not run: refused in one line that names it and what it holds.
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    data = load_benchmark_data(built / "data")
    mine = [p for p in data.required_pairs if Shard(1, 3).owns(unit_key(*p))]
    assert err.count("\n") == 0 and "shard(s) 1 of 3 have not finished" in err
    assert "--shard 1/3" in err and f"--out {out}" in err  # the command that runs it
    assert f"{len(mine)} of {len(data.required_pairs)} (prompt_id, seed) rows unscored" in err
    assert not (out / "aggregates.json").exists()

    assert score(built, out, cache, "--shard", "1/3", *one) == 0
    assert "when all 3 shards have finished: idbench merge" in capsys.readouterr().out
    assert main(["merge", str(out)]) == 0
    assert "0 computed here" in capsys.readouterr().out
    merged = same_as_one_process(out, single)
    assert merged["images"] == len(data.required_pairs)
    assert (out / "report.md").is_file() and sorted(p.name for p in (out / "shards").iterdir()) == [
        "0-of-3",
        "0-of-3.json",
        "1-of-3",
        "1-of-3.json",
        "2-of-3",
        "2-of-3.json",
    ]
    # Each shard scored its own images only, and together every image once.
    records = [json.loads((out / "shards" / f"{k}-of-3.json").read_text()) for k in range(3)]
    assert sum(r["images"] for r in records) == len(data.required_pairs)
    assert "api_key" not in json.dumps(records)  # no secret in a record (the judge's key stays in the environment)
    # Idempotent: a second merge writes the same file.
    before = (out / "aggregates.json").read_bytes()
    assert main(["merge", str(out)]) == 0
    assert (out / "aggregates.json").read_bytes() == before


@pytest.mark.slow
def test_shards_with_a_cache_each_merge_to_what_one_process_writes(built, single, tmp_path, capsys):
    # Nodes with their own disks: each shard has its own cache, which the merge never sees (gone before it
    # runs). What the merge reads is in OUT/shards, and its results are one process's, bit for bit.
    out = tmp_path / "out"
    for k in range(3):
        assert score(built, out, tmp_path / f"node-{k}", "--shard", f"{k}/3", "--batch-size", "1") == 0
        said = capsys.readouterr().out
        assert "what the merge reads (" in said and f"in {out / 'shards' / f'{k}-of-3'}, recorded in" in said
        shutil.rmtree(tmp_path / f"node-{k}")
    records = {f"{k}-of-3": json.loads((out / "shards" / f"{k}-of-3.json").read_text()) for k in range(3)}
    assert main(["merge", str(out)]) == 0
    assert "features read from the shards' folders, 0 computed here" in capsys.readouterr().out
    merged = same_as_one_process(out, single)
    # aggregates.json says what each shard read from its cache and computed (each computed its references too).
    assert merged["features"]["shards"] == {name: record["features"] for name, record in records.items()}
    assert all(computed(record) > 0 for record in records.values())


@pytest.mark.slow
def test_with_the_default_batches_the_merge_agrees_to_float32_rounding(built, tmp_path):
    # A shard's batches hold other images than one process's: an encoder's floats then differ in the
    # last bits (the matrix products are blocked differently), and so do the means, by ~1e-8 here.
    assert score(built, tmp_path / "single", tmp_path / "cache-single") == 0
    out, cache = tmp_path / "sharded", tmp_path / "cache-shards"
    for k in range(2):
        assert score(built, out, cache, "--shard", f"{k}/2") == 0
    assert main(["merge", str(out)]) == 0
    single = json.loads((tmp_path / "single" / "aggregates.json").read_text())
    merged = json.loads((out / "aggregates.json").read_text())
    assert close(merged["aggregates"], single["aggregates"]) and merged["copies"] == single["copies"]

    # The same from Python: idbench.score_shard per shard, then idbench.merge (the features are cached now,
    # so nothing is computed and the floats are the CLI merge's own).
    import idbench
    from idbench.atomic import OutputExistsError
    from idbench.shards import ShardError

    api_out = tmp_path / "api"
    kwargs = {"profile": "tiny", "metrics": METRICS.split(","), "cache_dir": cache, "progress": False}
    paths = [idbench.score_shard(built / "sub", built / "data", api_out, shard=f"{k}/2", **kwargs) for k in range(2)]
    assert paths == [api_out / "shards" / "0-of-2.json", api_out / "shards" / "1-of-2.json"]
    with pytest.raises(OutputExistsError, match="shard 0/2 has finished"):
        idbench.score_shard(built / "sub", built / "data", api_out, shard="0/2", **kwargs)
    with pytest.raises(ShardError, match="outside a job array"):
        idbench.score_shard(built / "sub", built / "data", api_out, shard="auto", **kwargs)
    result = idbench.merge(api_out, progress=False)
    assert result.summary["aggregates"] == merged["aggregates"] and computed(result.summary) == 0
    assert len(result.samples) == len(pd.read_parquet(out / "results.parquet"))


@pytest.mark.slow
def test_a_killed_shard_leaves_no_record_and_its_rerun_resumes(built, tmp_path, monkeypatch, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    original, saved = features_module.FeatureStore.save, {"n": 0}

    def dies_after_five(self, *args, **kwargs):
        if saved["n"] == 5:
            raise KeyboardInterrupt("simulated kill")
        saved["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(features_module.FeatureStore, "save", dies_after_five)
    assert score(built, out, cache, "--shard", "0/2") == 130
    assert not (out / "shards" / "0-of-2.json").exists()
    monkeypatch.setattr(features_module.FeatureStore, "save", original)
    assert score(built, out, cache, "--shard", "0/2") == 0
    record = json.loads((out / "shards" / "0-of-2.json").read_text())
    fresh_cache = tmp_path / "fresh"
    assert score(built, tmp_path / "fresh-out", fresh_cache, "--shard", "0/2") == 0
    fresh = json.loads((tmp_path / "fresh-out" / "shards" / "0-of-2.json").read_text())
    # the rerun computed only what the killed run had not saved
    assert sum(record["features"]["computed"].values()) == sum(fresh["features"]["computed"].values()) - 5
    capsys.readouterr()
    assert score(built, out, cache, "--shard", "0/2") == 2  # finished: not scored again by mistake
    assert "has finished; pass --overwrite" in capsys.readouterr().err


@pytest.mark.slow
def test_the_scheduler_names_the_shard(built, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "11")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "10")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    assert score(built, tmp_path / "out", tmp_path / "cache") == 0
    record = json.loads((tmp_path / "out" / "shards" / "1-of-2.json").read_text())
    assert record["shard"] == {"index": 1, "count": 2, "from": "SLURM_ARRAY_TASK_ID"}


@pytest.mark.slow
def test_what_the_merge_refuses(built, tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(["merge", str(out)]) == 2
    assert "no shards/ folder" in capsys.readouterr().err
    assert score(built, out, cache, "--shard", "0/1") == 0
    capsys.readouterr()
    # a record of another split beside it: two runs' shards mixed
    mixed = json.loads((out / "shards" / "0-of-1.json").read_text())
    mixed["shard"]["count"] = 2
    (out / "shards" / "0-of-2.json").write_text(json.dumps(mixed))
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "records of different splits overlap" in err and "0-of-2.json (2 shards)" in err
    (out / "shards" / "0-of-2.json").unlink()
    # a record that is not one
    (out / "shards" / "notes.txt").write_text("x")
    assert main(["merge", str(out)]) == 2
    assert "is not a shard record" in capsys.readouterr().err
    (out / "shards" / "notes.txt").unlink()
    # a record of 2 MB (one is a few hundred bytes): refused by its size, before it is parsed
    huge = out / "shards" / "1-of-2.json"
    huge.write_text('{"shard": ' + " " * (2 << 20) + "}")
    assert main(["merge", str(out)]) == 2
    assert "1-of-2.json is not a shard record: 2097163 bytes, over the 1048576-byte limit" in capsys.readouterr().err
    huge.unlink()
    # the submission changed after its shards scored it
    changed = tmp_path / "changed"
    shutil.copytree(built / "sub", changed)
    first = sorted((changed / "images").iterdir())[0]
    shutil.copy(sorted((changed / "images").iterdir())[1], first)
    record = json.loads((out / "shards" / "0-of-1.json").read_text())
    record["submission"] = str(changed)
    (out / "shards" / "0-of-1.json").write_text(json.dumps(record))
    assert main(["merge", str(out)]) == 2
    assert "changed since its shards scored it" in capsys.readouterr().err


@pytest.fixture(scope="module")
def two_shards(built, tmp_path_factory) -> Path:
    """One finished run of two shards (no judge), for the tests that tamper with its records."""
    root = tmp_path_factory.mktemp("two-shards")
    for k in range(2):
        assert score(built, root / "out", root / "cache", "--shard", f"{k}/2") == 0
    return root / "out"


def _tampered_copy(two_shards: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(two_shards / "shards", out / "shards")
    return out


def _set_in(out: Path, name: str, change) -> None:
    path = out / "shards" / name
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _reseal(out: Path, name: str) -> None:
    """Seal shard ``name``'s folder again after a change, and put its account in the record: what anyone who
    may write OUT/shards can do (the folder then matches its record; the judge's answers stay signed)."""
    from idbench.evaluate_pkg.merge import seal_folder

    account = seal_folder(out / "shards" / name)
    _set_in(out, f"{name}.json", lambda record: record.__setitem__("folder", account))


def _copied_for_shard_1(record: dict) -> None:  # shard 0's record, renumbered for shard 1 (which never ran)
    record["shard"]["index"] = 1


RUN_CASES = {
    # what the records say of the run, each checked against the submission and the split
    "a copied record for a shard that never ran": (
        "copy",
        "fields 'images' and 'rows_sha256' are not shard 1/2's rows of the submission",
    ),
    "one image more": (
        lambda r: r.__setitem__("images", r["images"] + 1),
        "fields 'images' and 'rows_sha256' are not shard 1/2's rows",
    ),
    "another shard's rows hash": (
        lambda r: r.__setitem__("rows_sha256", "0" * 64),
        "fields 'images' and 'rows_sha256' are not shard 1/2's rows",
    ),
    "another build": (lambda r: r["build"].__setitem__("seed", 99), "differ in 'build'"),
    "a data folder that is not there": (lambda r: r.__setitem__("data", "/nowhere/data"), "differ in 'data'"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", RUN_CASES)
def test_a_record_that_is_not_its_shards_work_is_refused_in_one_line(two_shards, tmp_path, capsys, case):
    out = _tampered_copy(two_shards, tmp_path)
    change, says = RUN_CASES[case]
    if change == "copy":
        shutil.copy(out / "shards" / "0-of-2.json", out / "shards" / "1-of-2.json")
        _set_in(out, "1-of-2.json", _copied_for_shard_1)
    else:
        _set_in(out, "1-of-2.json", change)
    capsys.readouterr()
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err and "1-of-2.json" in err
    assert not (out / "aggregates.json").exists()


def _a_feature(out: Path) -> Path:
    """One feature entry of shard 1's folder (the first by name)."""
    return sorted((out / "shards" / "1-of-2" / "features").rglob("*.npz"))[0]


def _flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def _nan_feature(out: Path) -> None:  # a valid entry with other values: NaN
    import numpy as np

    path = _a_feature(out)
    with np.load(path) as archive:
        arrays = {name: np.full_like(archive[name], np.nan, dtype=np.float32) for name in archive.files}
    path.unlink()
    np.savez(path, **arrays)


def _linked_feature(out: Path) -> None:  # a link to a copy of the file, outside the folder
    path = _a_feature(out)
    shutil.copy(path, out / "elsewhere.npz")
    path.unlink()
    path.symlink_to(out / "elsewhere.npz")


FOLDER_CASES = {
    # each shard's folder against its record: (change, what the line says, the file it names)
    "a feature changed by one byte": (
        lambda out: _a_feature(out).write_bytes(_flip_last_byte(_a_feature(out).read_bytes())),
        "is not the file its manifest lists",
        _a_feature,
    ),
    "a feature cut short": (
        lambda out: _a_feature(out).write_bytes(_a_feature(out).read_bytes()[:100]),
        "is not the file its manifest lists",
        _a_feature,
    ),
    "a feature with NaN values": (_nan_feature, "is not the file its manifest lists", _a_feature),
    "a feature missing": (lambda out: _a_feature(out).unlink(), "is missing", lambda out: "1-of-2/features/"),
    "a file more": (
        lambda out: shutil.copy(_a_feature(out), _a_feature(out).with_name("0" * 64 + ".npz")),
        "is not in",
        lambda out: "0" * 64 + ".npz",
    ),
    "a link in place of a feature": (_linked_feature, "is a symbolic link", _a_feature),
    "the folder missing": (
        lambda out: shutil.rmtree(out / "shards" / "1-of-2"),
        "is missing",
        lambda out: out / "shards" / "1-of-2" / "manifest.json",
    ),
    "the folder of shard 0 as shard 1's": (
        lambda out: (
            shutil.rmtree(out / "shards" / "1-of-2"),
            shutil.copytree(out / "shards" / "0-of-2", out / "shards" / "1-of-2"),
        ),
        "is not the manifest 1-of-2.json records",
        lambda out: out / "shards" / "1-of-2" / "manifest.json",
    ),
    "a manifest of 70 MB": (
        lambda out: (out / "shards" / "1-of-2" / "manifest.json").write_text(" " * (70 << 20)),
        "over the 67108864-byte limit",
        lambda out: out / "shards" / "1-of-2",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", FOLDER_CASES)
def test_a_shard_folder_that_is_not_what_its_record_says_is_refused_in_one_line(two_shards, tmp_path, capsys, case):
    out = _tampered_copy(two_shards, tmp_path)
    change, says, names = FOLDER_CASES[case]
    named = str(names(out))  # before the change: the file it changes
    change(out)
    capsys.readouterr()
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and named in err and "Traceback" not in err, err
    assert not (out / "aggregates.json").exists()


SAME_IN_BOTH = {
    # changed in every record alike (one run's records, then): the merge's own checks, one line each
    "a data folder that is not there": (lambda r: r.__setitem__("data", "/nowhere/data"), "/nowhere/data"),
    "a submission that is not there": (lambda r: r.__setitem__("submission", "/nowhere/sub"), "/nowhere/sub"),
    "an unknown profile": (lambda r: r["options"].__setitem__("profile", "nope"), "nope"),
    "an unknown metric": (lambda r: r["options"].__setitem__("metrics", ["nope"]), "nope"),
    "a dtype no one has": (lambda r: r["options"].__setitem__("dtype", "fp3"), "fp3"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", SAME_IN_BOTH)
def test_what_every_record_says_alike_is_checked_too(two_shards, tmp_path, capsys, case):
    out = _tampered_copy(two_shards, tmp_path)
    change, says = SAME_IN_BOTH[case]
    for k in range(2):
        _set_in(out, f"{k}-of-2.json", change)
    capsys.readouterr()
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
    assert not (out / "aggregates.json").exists()


def _yes_to_every_question(body: dict):
    """The scripted judge: every Attr-VQA question (the submission's and the controls') answered "yes"."""
    from openai_server import answer

    schema = body["response_format"]["json_schema"]["schema"]
    ids = schema["properties"]["answers"]["items"]["properties"]["question_id"]["enum"]
    return answer({"answers": [{"question_id": i, "answer": "yes"} for i in ids]})


def test_a_merge_that_would_have_to_ask_a_judge_that_is_down_stops_in_one_line(built, tmp_path, capsys, monkeypatch):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "judge"))
    from openai_server import ScriptedServer

    import idbench
    from idbench.evaluate_pkg.judge import JudgeConfig

    monkeypatch.delenv("IDBENCH_JUDGE_URL", raising=False)
    out, cache = tmp_path / "out", tmp_path / "cache"
    kwargs = {"profile": "tiny", "metrics": ["attr_vqa"], "cache_dir": cache, "progress": False}
    with ScriptedServer(_yes_to_every_question) as server:
        judge = JudgeConfig(base_url=server.base_url, model="scripted-vlm", max_retries=0, backoff_s=0.01, timeout_s=5)
        for k in range(2):
            idbench.score_shard(built / "sub", built / "data", out, shard=f"{k}/2", judge=judge, **kwargs)
        asked = len(server.requests)
    # The judge is down now. Every answer is in the cache (shard 0 asked the controls too): the merge needs no judge.
    capsys.readouterr()
    assert main(["merge", str(out)]) == 0
    said = capsys.readouterr().out
    merged = json.loads((out / "aggregates.json").read_text())
    answers = merged["judge"]["stats"]["answers"]
    assert answers > 0 and merged["judge"]["stats"]["cache_hits"] == answers and asked > answers
    assert (
        f"judge scripted-vlm: {answers} of {answers} answers read from the answer cache, 0 requests sent here" in said
    )
    assert merged["aggregates"]["overall"]["attr_vqa"]["mean"] == 1.0
    before = (out / "aggregates.json").read_bytes()

    # Some answers not in the shards' folders (as when a shard's judge failed to give them), the judge still
    # down: the merge would write another number. Refused.
    for k in range(2):
        for entry in sorted((out / "shards" / f"{k}-of-2" / "judge" / "answers").glob("??/*.json"))[:3]:
            entry.unlink()
        _reseal(out, f"{k}-of-2")
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("idbench merge: error: ") and "judge answers are not in the shards' folders" in err
    assert "could not give them (connection error" in err and "nothing was written" in err
    assert (out / "aggregates.json").read_bytes() == before  # the earlier merge's results stand


def test_an_edited_judge_answer_is_asked_again_and_counted_by_the_merge(built, tmp_path, capsys, monkeypatch):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "judge"))
    from openai_server import ScriptedServer

    import idbench
    from idbench.evaluate_pkg.judge import JudgeConfig

    monkeypatch.delenv("IDBENCH_JUDGE_URL", raising=False)
    out, cache = tmp_path / "out", tmp_path / "cache"
    kwargs = {"profile": "tiny", "metrics": ["attr_vqa"], "cache_dir": cache, "progress": False}
    with ScriptedServer(_yes_to_every_question) as server:
        judge = JudgeConfig(base_url=server.base_url, model="scripted-vlm", max_retries=0, backoff_s=0.01, timeout_s=5)
        for k in range(2):
            idbench.score_shard(built / "sub", built / "data", out, shard=f"{k}/2", judge=judge, **kwargs)
        # One who can write OUT/shards (but holds no signing key) turns every "yes" of the judge into a "no",
        # and seals the folders again, so that they match their records.
        for k in range(2):
            for entry in (out / "shards" / f"{k}-of-2" / "judge" / "answers").glob("??/*.json"):
                record = json.loads(entry.read_text())
                flipped = json.loads(record["raw"])
                for item in flipped["answers"]:
                    item["answer"] = "no"
                record["raw"], record["value"] = json.dumps(flipped), flipped
                entry.write_text(json.dumps(record))
            _reseal(out, f"{k}-of-2")
        sent = len(server.requests)
        capsys.readouterr()
        assert main(["merge", str(out)]) == 0
        said = capsys.readouterr().out
        merged = json.loads((out / "aggregates.json").read_text())
        stats = merged["judge"]["stats"]
        # Not one edited answer served: each asked again of the judge, whose answers stand.
        assert merged["aggregates"]["overall"]["attr_vqa"]["mean"] == 1.0
        assert stats["cache_hits"] == 0 and stats["cache_refused"] == stats["answers"] > 0
        assert len(server.requests) > sent
        assert f"0 of {stats['answers']} answers read from the answer cache" in said
        assert f"{stats['cache_refused']} cache entries refused" in said


def test_the_missing_shard_command_repeats_the_finished_shards_options(tmp_path):
    from idbench.evaluate_pkg.merge import shard_command

    record = {
        "shard": {"index": 0, "count": 4},
        "submission": "/data/my run",
        "data": "/data/bench",
        "options": {
            "profile": "tiny",
            "metrics": ["dino_sim", "clip_t"],
            "dtype": None,
            "batch_size": 8,
            "models_dir": None,
        },
        "judge": None,
    }
    line = shard_command(tmp_path / "out", record, 3)
    assert "score '/data/my run' --data /data/bench --out " + str(tmp_path / "out") in line
    assert "--profile tiny --batch-size 8 --metrics dino_sim,clip_t --shard 3/4" in line
    assert "judge" not in line
    assert "with the same judge options" in shard_command(tmp_path, record | {"judge": {"model": "m"}}, 1)
    # A forged record cannot drive the terminal or break the one-line refusal.
    forged = shard_command(tmp_path, record | {"submission": "/x\n\x1b[2Jevil"}, 1)
    assert "\n" not in forged and "\x1b" not in forged
