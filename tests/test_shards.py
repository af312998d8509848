"""Shards (idbench.shards): the split of units among N shards, and where a shard is read from."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from scipy import stats

from idbench.settings import SettingError
from idbench.shards import MAX_SHARDS, Shard, ShardError, parse_shard, resolve_shard, shard_of, unit_key

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

UNITS = [unit_key(f"p{i:04d}", seed) for i in range(700) for seed in (0, 1, 2)]  # 2,100 (prompt, seed) rows


def test_every_unit_is_in_exactly_one_shard():
    for count in (1, 2, 3, 7):
        shards = [Shard(k, count) for k in range(count)]
        for unit in UNITS:
            assert sum(s.owns(unit) for s in shards) == 1


def test_the_split_is_the_documented_rule_computed_independently():
    # highest sha256("<index>\0<prompt_id>\0<seed>") wins, written out here by hand
    for prompt_id, seed in (("p0001", 0), ("cogcanvas-0042", 2), ("é/x", 1)):
        digests = [hashlib.sha256(f"{k}\x00{prompt_id}\x00{seed}".encode()).digest() for k in range(5)]
        assert shard_of(unit_key(prompt_id, seed), 5) == digests.index(max(digests))


def test_adding_a_shard_moves_units_only_to_the_new_one():
    for count in (1, 2, 5, 9):
        moved = 0
        for unit in UNITS:
            before, after = shard_of(unit, count), shard_of(unit, count + 1)
            assert after in (before, count)  # finished work never moves between the shards that ran it
            moved += after != before
        # about 1/(N+1) of the units go to the new shard (a hash mod N would move most of them)
        assert abs(moved / len(UNITS) - 1 / (count + 1)) < 0.05


def test_the_shards_are_balanced():
    counts = Counter(shard_of(unit, 8) for unit in UNITS)
    assert sorted(counts) == list(range(8))
    assert stats.chisquare([counts[k] for k in range(8)]).pvalue > 0.001


def test_a_shard_is_written_k_of_n_from_zero():
    assert parse_shard("2/4") == Shard(2, 4) and str(parse_shard(" 0 / 1 ")) == "0/1"
    for bad, says in (
        ("4/4", "shard 4 of 4; expected 0 to 3"),
        ("1/0", "0 shards"),
        (f"0/{MAX_SHARDS + 1}", f"expected 1 to {MAX_SHARDS}"),
        ("-1/4", "expected K/N"),
        ("a/b", "expected K/N"),
        ("3", "expected K/N"),
    ):
        with pytest.raises(ShardError, match=says.replace("(", r"\(")) as caught:
            parse_shard(bad)
        assert "\n" not in str(caught.value)


def test_the_scheduler_names_the_shard():
    slurm = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert resolve_shard(None, slurm) == Shard(2, 4, "SLURM_ARRAY_TASK_ID")  # --array=3-6: the third task
    assert resolve_shard(None, {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}) == Shard(
        1, 2, "SLURM_ARRAY_TASK_ID"
    )
    assert resolve_shard("0/3", slurm) == Shard(0, 3)  # --shard wins
    with pytest.raises(ShardError, match="SLURM_ARRAY_TASK_STEP=2"):
        resolve_shard(None, {**slurm, "SLURM_ARRAY_TASK_STEP": "2"})
    with pytest.raises(ShardError, match="shard 4 of 4"):  # an id past the count
        resolve_shard(None, {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4"})
    kubernetes = {"JOB_COMPLETION_INDEX": "3", "IDBENCH_SHARD_COUNT": "8"}
    assert resolve_shard(None, kubernetes) == Shard(3, 8, "JOB_COMPLETION_INDEX")
    with pytest.raises(ShardError, match="IDBENCH_SHARD_COUNT is not"):
        resolve_shard(None, {"JOB_COMPLETION_INDEX": "3"})
    with pytest.raises(SettingError, match=r"JOB_COMPLETION_INDEX='x': expected a whole number"):
        resolve_shard(None, {"JOB_COMPLETION_INDEX": "x", "IDBENCH_SHARD_COUNT": "8"})
    # torch's RANK / WORLD_SIZE belong to the process group inside a shard (accelerate launch), not to shards
    assert resolve_shard(None, {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) is None
    assert resolve_shard(None, {}) is None


def test_shards_asking_their_own_servers_of_one_judge_are_one_run():
    # Each node's shard may ask its own local server (another URL, concurrency) of the same model: one run.
    # Another model, revision or decoding setting is another judge: refused, naming the field.
    import dataclasses
    from pathlib import Path

    from idbench.evaluate_pkg.judge import JudgeConfig
    from idbench.evaluate_pkg.merge import MergeError, _one_run

    def record(index: int, **judge) -> tuple[Path, dict]:
        config = JudgeConfig(**{"base_url": f"http://node{index}:8000/v1", "model": "qwen", **judge})
        return Path(f"{index}-of-2.json"), {"shard": {"index": index, "count": 2}, "judge": dataclasses.asdict(config)}

    assert _one_run(Path("out"), [record(0), record(1, concurrency=32, replica_urls=("http://node0:8000/v1",))])
    for change in ({"model": "other"}, {"revision": "abc"}, {"max_tokens": 9}):
        with pytest.raises(MergeError, match="1-of-2.json and 0-of-2.json differ in 'judge'"):
            _one_run(Path("out"), [record(0), record(1, **change)])


def test_a_shard_record_keeps_the_judge_url_masked_and_the_merge_takes_it_back_from_the_environment(monkeypatch):
    # A gateway key in the URL's path is masked in OUT/shards/*.json (a file beside the results); the
    # merge, which asks the judge what the shards' folders lack, takes the real URL from $IDBENCH_JUDGE_URL.
    from pathlib import Path

    from idbench.evaluate_pkg.judge import JudgeConfig
    from idbench.evaluate_pkg.merge import MergeError, judge_for_merge, recorded_judge

    token = "sk-gateway-0123456789abcdef"
    config = JudgeConfig(
        base_url=f"https://gateway.example/{token}/v1", replica_urls=("http://node1:8000/v1",), model="qwen"
    )
    record = recorded_judge(config)
    assert token not in json.dumps(record)
    assert record["base_url"] == "https://gateway.example/***/v1" and record["replica_urls"] == ["http://node1:8000/v1"]
    assert recorded_judge(None) is None

    monkeypatch.delenv("IDBENCH_JUDGE_URL", raising=False)
    with pytest.raises(MergeError, match=r"set \$IDBENCH_JUDGE_URL") as refused:
        judge_for_merge(Path("out"), record)
    assert token not in str(refused.value) and "\n" not in str(refused.value)
    monkeypatch.setenv("IDBENCH_JUDGE_URL", f"https://gateway.example/{token}/v1,http://node1:8000/v1")
    assert judge_for_merge(Path("out"), json.loads(json.dumps(record))) == config
    plain = recorded_judge(JudgeConfig(base_url="http://node0:8000/v1", model="qwen"))
    monkeypatch.delenv("IDBENCH_JUDGE_URL")
    assert judge_for_merge(Path("out"), plain).base_url == "http://node0:8000/v1"  # nothing masked: as recorded


# --- shard records are input: each tampered record is one line naming the file and the field -------------


def _record(index: int, count: int = 2) -> dict:
    """A record of the shape evaluate_pkg.merge.shard_record writes (the merge's checks of the run itself,
    its rows against the split, come after these and are tested in tests/scoring/test_shards_merge.py)."""
    return {
        "shard": {"index": index, "count": count, "from": "--shard"},
        "benchmark": "cogcanvas",
        "images": 3,
        "rows_sha256": "a" * 64,
        "submission": "/runs/sub",
        "submission_sha256": "b" * 64,
        "data": "/runs/data",
        "build": {"seed": 0, "idbench_version": "0.1.0", "source_sha256": None, "prompts_sha256": "c" * 64},
        "cache_dir": "/runs/cache",
        "options": {"profile": "tiny", "metrics": ["dino_sim"], "dtype": None, "batch_size": 32, "models_dir": None},
        "judge": None,
        "features": {"cached": {"dino": 3}, "computed": {"dino": 0}},
        "folder": {"manifest_sha256": "d" * 64, "files": 3, "bytes": 3000},
    }


def _write_run(out, count: int = 2):
    folder = out / "shards"
    folder.mkdir(parents=True)
    for k in range(count):
        (folder / f"{k}-of-{count}.json").write_text(json.dumps(_record(k, count)))
    return folder


def _set(path: str, value):
    """A change to record 1 of 2: ``path`` like "shard.index", set to ``value``."""

    def change(record: dict) -> dict:
        *parents, name = path.split(".")
        target = record
        for parent in parents:
            target = target[parent]
        target[name] = value
        return record

    return change


def _judge(**fields):
    judge = {"base_url": "http://judge:8000/v1", "model": "qwen", **fields}
    return lambda record: {**record, "judge": judge}


RECORD_CASES = {
    # field types: bool is not a number, numbers are finite, text is text
    "index true": (_set("shard.index", True), "field 'shard.index': expected a whole number, found true"),
    "index text": (_set("shard.index", "1"), "field 'shard.index': expected a whole number, found \"1\""),
    "index float": (_set("shard.index", 1.0), "field 'shard.index': expected a whole number, found 1.0"),
    "count huge": (_set("shard.count", 10**30), "field 'shard.count': 1000000000000000000000000000000 is outside"),
    "images negative": (_set("images", -1), "field 'images': -1 is outside 0"),
    "features text": (_set("features.computed", {"dino": "3"}), "field 'features.computed': 'dino': expected a whole"),
    "features bool": (_set("features.cached", {"dino": False}), "field 'features.cached': 'dino': expected a whole"),
    "batch size huge": (_set("options.batch_size", 1 << 40), "field 'options.batch_size': 1099511627776 is outside"),
    "metrics one string": (_set("options.metrics", "dino_sim"), "field 'options.metrics': expected an array"),
    "benchmark number": (_set("benchmark", 5), "field 'benchmark': expected a string, found 5"),
    "sha not hex": (_set("submission_sha256", "x" * 64), "field 'submission_sha256': expected a sha256"),
    "folder's sha not hex": (_set("folder.manifest_sha256", "x"), "field 'folder.manifest_sha256': expected a sha256"),
    "folder missing": (lambda r: {k: v for k, v in r.items() if k != "folder"}, "field 'folder' is missing"),
    "rows missing": (lambda r: {k: v for k, v in r.items() if k != "rows_sha256"}, "field 'rows_sha256' is missing"),
    "unknown field": (_set("extra", 1), "unknown field 'extra'"),
    "not an object": (lambda r: [r], "expected an object, found an array"),
    "shard not an object": (_set("shard", [1, 2]), "field 'shard': expected an object, found an array"),
    "index of another shard": (
        _set("shard.index", 0),
        "field 'shard' says shard 0/2, but the file is named for shard 1/2",
    ),
    "judge unknown setting": (_judge(bogus=1), "field 'judge': unknown field 'bogus'"),
    "judge temperature text": (_judge(temperature="0"), "field 'judge.temperature': expected a number"),
    "judge timeout huge": (_judge(timeout_s=1e300), "field 'judge.timeout_s': 1e+300 is outside"),
    # JSON that must not reach the parser's recursion or Python's floats
    "NaN count": (b'{"shard": {"index": 1, "count": 2}, "images": NaN}', "NaN is not a JSON number"),
    "infinite count": (b'{"shard": {"index": 1, "count": 1e400}}', "the number 1e400 is out of range"),
    "deep": (b'{"build": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested 100001 levels deep, over the limit of 8"),
    "key twice": (b'{"images": 3, "images": 4}', "the key 'images' appears twice"),
    "not UTF-8": (b'{"benchmark": "\xff"}', "not UTF-8 text"),
    "digits past Python's limit": (b'{"images": ' + b"9" * 5000 + b"}", "not valid JSON"),
    "cut short": (b'{"shard": {"index": 1,', "not valid JSON"),
    "too large": (b'{"x": "' + b" " * (2 << 20) + b'"}', "2097161 bytes, over the 1048576-byte limit"),
}


@pytest.mark.parametrize("case", RECORD_CASES)
def test_a_tampered_record_is_one_line_naming_the_file_and_the_field(tmp_path, case, capsys):
    from idbench.cli import main
    from idbench.evaluate_pkg.merge import MergeError, read_records

    folder = _write_run(tmp_path / "out")
    tamper, says = RECORD_CASES[case]  # a change of record 1's fields, or its bytes
    record = folder / "1-of-2.json"
    if isinstance(tamper, bytes):
        record.write_bytes(tamper)
    else:
        record.write_text(json.dumps(tamper(json.loads(record.read_text()))))
    with pytest.raises(MergeError) as refused:
        read_records(tmp_path / "out")
    message = str(refused.value)
    assert "1-of-2.json" in message and says in message and "\n" not in message
    # The command says the same in one line, exit 2, no traceback.
    assert main(["merge", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


NAME_CASES = {
    "leading zero": ("00-of-2.json", "its name is not K-of-N.json"),
    "leading zero in N": ("1-of-02.json", "its name is not K-of-N.json"),
    "Arabic-Indic digit": ("\u0660-of-2.json", "its name is not K-of-N.json"),
    "fullwidth digit": ("\uff11-of-2.json", "its name is not K-of-N.json"),
    "K not below N": ("2-of-2.json", "there is no shard 2 of 2"),
    "no shards": ("0-of-0.json", "its name is not K-of-N.json"),
    "another extension": ("0-of-2.json.bak", "its name is not K-of-N.json"),
}


@pytest.mark.parametrize("case", NAME_CASES)
def test_a_record_under_another_name_than_its_shards_one_is_refused(tmp_path, case, capsys):
    from idbench.cli import main
    from idbench.evaluate_pkg.merge import MergeError, read_records

    folder = _write_run(tmp_path / "out")
    name, says = NAME_CASES[case]
    (folder / name).write_text((folder / "0-of-2.json").read_text())  # a second record of shard 0, say
    with pytest.raises(MergeError, match=says) as refused:
        read_records(tmp_path / "out")
    assert name in str(refused.value) and "\n" not in str(refused.value)
    assert main(["merge", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["symlink", "hard link", "folder", "fifo"])
def test_a_record_that_is_not_a_file_of_its_own_is_refused(tmp_path, kind):
    import os

    from idbench.evaluate_pkg.merge import MergeError, read_records

    folder = _write_run(tmp_path / "out")
    record = folder / "1-of-2.json"
    elsewhere = tmp_path / "elsewhere.json"
    record.rename(elsewhere)
    if kind == "symlink":
        record.symlink_to(elsewhere)
    elif kind == "hard link":
        os.link(elsewhere, record)
    elif kind == "folder":
        record.mkdir()
    else:
        os.mkfifo(record)
    says = {"symlink": "a symbolic link", "hard link": "2 hard links", "folder": "not a regular file"}.get(
        kind, "not a regular file"
    )
    with pytest.raises(MergeError, match=says) as refused:
        read_records(tmp_path / "out")
    assert "1-of-2.json" in str(refused.value)


def test_a_judge_setting_no_judge_takes_is_one_line(tmp_path, capsys):
    # The types are right, the values are not a judge's (an empty URL): the judge's own check, as one line.
    from idbench.cli import main

    folder = _write_run(tmp_path / "out")
    for k in range(2):
        record = _record(k)
        record["judge"] = {"base_url": "", "model": "qwen"}
        (folder / f"{k}-of-2.json").write_text(json.dumps(record))
    assert main(["merge", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'judge' is not a judge's settings" in err and "base_url is empty" in err


def test_the_rows_of_a_shard_hash_alike_in_any_order():
    from idbench.shards import rows_sha256

    rows = [("p1", 0), ("p2", 1), ("p3", 0)]
    assert rows_sha256(rows) == rows_sha256(reversed(rows)) != rows_sha256(rows[:2])
    assert rows_sha256([]) == hashlib.sha256(b"").hexdigest()
