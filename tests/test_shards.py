"""Shards (idbench.shards): the split of units among N shards, and where a shard is read from."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from scipy import stats

from idbench.settings import SettingError
from idbench.shards import MAX_SHARDS, Shard, ShardError, parse_shard, resolve_shard, shard_of, unit_key

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
    # merge, which asks the judge what the cache lacks, takes the real URL from $IDBENCH_JUDGE_URL.
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
