"""The judge's answer cache as a folder of one file per answer: what several writers, a damaged or
planted entry and an earlier version's SQLite file do to it. No server: the cache alone, in seconds."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3

import pytest

from idbench.evaluate_pkg.judge.cache import LEGACY_FILE, MAX_ENTRY_BYTES, AnswerCache


def key(i: int) -> str:
    return hashlib.sha256(f"question {i}".encode()).hexdigest()


def entry_path(cache: AnswerCache, k: str):
    return cache.path / k[:2] / f"{k}.json"


def _write_answers(folder: str, first: int, count: int) -> None:
    cache = AnswerCache(folder)
    for i in range(first, first + count):
        cache.put(key(i), model="m", task="t", raw=f'{{"i": {i}}}', value={"i": i})


def test_processes_writing_one_folder_at_once_lose_nothing(tmp_path):
    # Four processes (a node's shards, or shards on several nodes sharing the folder), overlapping keys:
    # every answer readable afterwards, each entry whole, no temporary file left.
    folder = tmp_path / "answers"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_answers, args=(str(folder), 50 * n, 100)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    cache = AnswerCache(folder)
    found = cache.get_many([key(i) for i in range(260)])
    assert sorted(hit.value["i"] for hit in found.values()) == list(range(250))
    assert all(json.loads(hit.raw) == hit.value for hit in found.values())
    assert len(cache) == 250 and not list(folder.rglob("*.tmp"))


def test_damaged_or_planted_entries_are_asked_again_not_served(tmp_path, caplog):
    cache = AnswerCache(tmp_path / "answers")
    for i in range(5):
        cache.put(key(i), model="m", task="t", raw="{}", value={"i": i})
    entry_path(cache, key(0)).write_text('{"key": "' + key(0) + '", "raw": "{}", "value": ')  # cut short
    moved = json.loads(entry_path(cache, key(2)).read_text())
    entry_path(cache, key(1)).write_text(json.dumps(moved))  # another key's answer under this name
    entry_path(cache, key(2)).unlink()
    os.mkfifo(entry_path(cache, key(2)))  # a reader that opened it blocking would hang here
    with entry_path(cache, key(3)).open("r+b") as handle:  # larger than any answer: not read whole
        handle.truncate(MAX_ENTRY_BYTES + 10)
    found = cache.get_many([key(i) for i in range(5)])
    assert list(found) == [key(4)] and found[key(4)].value == {"i": 4}
    assert caplog.text.count("asking again") == 4


def test_keys_are_answer_keys_only(tmp_path):
    cache = AnswerCache(tmp_path / "answers")
    for bad in ("../../etc/passwd", "0" * 63, "A" * 64, key(0) + "/x"):
        with pytest.raises(ValueError, match="not an answer key"):
            cache.get(bad)
        with pytest.raises(ValueError, match="not an answer key"):
            cache.put(bad, model="m", task="t", raw="{}", value={})


def test_an_earlier_sqlite_cache_is_imported_once(tmp_path, caplog):
    legacy = tmp_path / LEGACY_FILE  # the old default layout: judge/answers.sqlite3 beside judge/answers/
    with sqlite3.connect(legacy) as db:
        db.execute(
            "CREATE TABLE answers (key TEXT PRIMARY KEY, model TEXT, task TEXT, raw TEXT, value TEXT, created REAL)"
        )
        rows = [(key(i), "m", "t", f'{{"i": {i}}}', json.dumps({"i": i}), 1.0e9 + i) for i in range(3)]
        db.executemany(
            "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?)", rows + [("not-a-key", "m", "t", "{}", "{}", 0.0)]
        )
    db.close()
    cache = AnswerCache(tmp_path / "answers")
    assert {k: hit.value for k, hit in cache.get_many([key(i) for i in range(4)]).items()} == {
        key(i): {"i": i} for i in range(3)
    }
    assert cache.get(key(1)).created == 1.0e9 + 1 and len(cache) == 3
    # Opened again: nothing imported again (an answer replaced since stays replaced).
    cache.put(key(1), model="m", task="t", raw="{}", value={"i": "new"})
    assert AnswerCache(tmp_path / "answers").get(key(1)).value == {"i": "new"}
    # A damaged old file is said and skipped, never fatal.
    legacy.write_bytes(b"not a database" * 100)
    AnswerCache(tmp_path / "answers")
    assert "could not import" in caplog.text


def test_a_file_given_as_the_cache_is_refused_in_one_line(tmp_path):
    (tmp_path / "answers.sqlite3").write_bytes(b"")
    with pytest.raises(ValueError, match="a file, not a folder"):
        AnswerCache(tmp_path / "answers.sqlite3")
