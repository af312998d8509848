"""The judge's answer cache as a folder of one file per answer: what several writers, a damaged, edited,
planted, unsigned, foreign or linked entry and an earlier version's SQLite file do to it. The cache alone
(one test through the client, against the local scripted server), in seconds."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sqlite3

import pytest

from idbench.evaluate_pkg.judge.cache import LEGACY_FILE, MAX_ENTRY_BYTES, AnswerCache
from idbench.settings import SettingError

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def key(i: int) -> str:
    return hashlib.sha256(f"question {i}".encode()).hexdigest()


def entry_path(cache: AnswerCache, k: str):
    return cache.path / k[:2] / f"{k}.json"


def _write_answers(folder: str, first: int, count: int) -> None:
    cache = AnswerCache(folder)
    for i in range(first, first + count):
        cache.put(key(i), model="m", task="t", raw=f'{{"i": {i}}}', value={"i": i})


@pytest.mark.slow
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


def test_damaged_entries_are_asked_again_not_served(tmp_path, caplog):
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
    # one line for the lookup, the four refusals counted
    assert caplog.text.count("asked again") == 1 and "4 entries refused" in caplog.text
    assert cache.refused.total() == 4


# --- the trust boundary: only entries signed with this cache's key, read inside its folder, are served -----

SIGNING_KEY = "k" * 40


def _signed_cache(folder, signing_key: str = SIGNING_KEY) -> AnswerCache:
    return AnswerCache(folder, signing_key=signing_key)


def _tamper(cache: AnswerCache, k: str, how: str, tmp_path) -> None:
    """Change the entry of ``k`` as one who can write the folder (but holds no key) would."""
    path = entry_path(cache, k)
    entry = json.loads(path.read_text())
    if how == "edited":  # the opposite verdict, the old signature kept
        entry["value"] = {"verdict": "no"}
        entry["raw"] = json.dumps(entry["value"])
        path.write_text(json.dumps(entry))
    elif how == "planted":  # written before any run: the key needs only public inputs; a signature made up
        path.unlink()
        entry = {"key": k, "model": "m", "task": "t", "raw": '{"verdict": "no"}', "value": {"verdict": "no"}}
        path.write_text(json.dumps({**entry, "created": 1.0, "mac": "0" * 64}))
    elif how == "odd signature":  # not hex (hmac.compare_digest raises on non-ASCII text)
        entry["mac"] = "\u00e9" * 64
        path.write_text(json.dumps(entry))
    elif how == "unsigned":  # an entry as the cache wrote them before it signed them
        del entry["mac"]
        path.write_text(json.dumps(entry))
    elif how == "another key":  # a whole, signed entry, but signed with another key (another run's home)
        path.unlink()
        AnswerCache(cache.path, signing_key="x" * 40).put(k, model="m", task="t", raw="{}", value={"verdict": "no"})
    elif how == "symlink":  # the entry's name links to a signed answer outside the folder
        outside = tmp_path / "elsewhere.json"
        outside.write_text(path.read_text())
        path.unlink()
        path.symlink_to(outside)
    elif how == "linked folder":  # the entry's sub-folder links outside the cache
        outside = tmp_path / "elsewhere"
        shutil.copytree(path.parent, outside)
        shutil.rmtree(path.parent)
        path.parent.symlink_to(outside, target_is_directory=True)
    elif how == "hard link":  # the entry is also a file outside the folder, which others may change in place
        outside = tmp_path / "elsewhere.json"
        os.link(path, outside)
    elif how == "deep":  # nested far deeper than any answer: must not end the reader in a RecursionError
        depth = 200_000
        path.write_text('{"key": "' + k + '", "value": ' + "[" * depth + "]" * depth + "}")
    else:
        raise AssertionError(how)


CASES = [
    "edited",
    "planted",
    "odd signature",
    "unsigned",
    "another key",
    "symlink",
    "linked folder",
    "hard link",
    "deep",
]


@pytest.mark.parametrize("how", CASES)
def test_an_entry_not_signed_here_or_reached_through_a_link_is_refused(tmp_path, caplog, how):
    cache = _signed_cache(tmp_path / "answers")
    for i in range(3):
        cache.put(key(i), model="m", task="t", raw='{"verdict": "yes"}', value={"verdict": "yes"})
    _tamper(cache, key(1), how, tmp_path)
    found, refused = cache.read_many([key(i) for i in range(3)])
    assert sorted(found) == sorted([key(0), key(2)]) and refused == 1
    assert all(hit.value == {"verdict": "yes"} for hit in found.values())
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1 and "1 entries refused and asked again" in lines[0] and "\n" not in lines[0]
    assert cache.get(key(1)) is None  # get() refuses alike
    # Asked again and stored by this cache: served from then on.
    cache.put(key(1), model="m", task="t", raw='{"verdict": "yes"}', value={"verdict": "yes"})
    assert cache.get(key(1)).value == {"verdict": "yes"}


def test_the_signing_key_is_made_once_in_the_home_and_shared_through_it(tmp_path, monkeypatch):
    from idbench.evaluate_pkg.judge.cache import KEY_FILE, CacheKeyError

    home = tmp_path / "home"
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    monkeypatch.delenv("IDBENCH_JUDGE_CACHE_KEY", raising=False)
    first = AnswerCache(tmp_path / "answers")
    first.put(key(0), model="m", task="t", raw="{}", value={"i": 0})
    assert (home / KEY_FILE).stat().st_mode & 0o777 == 0o600 and len((home / KEY_FILE).read_text().strip()) == 64
    assert AnswerCache(tmp_path / "answers").get(key(0)).value == {"i": 0}  # another process, the same home
    # Another home is another key: its entries are asked again.
    monkeypatch.setenv("IDBENCH_HOME", str(tmp_path / "other-home"))
    assert AnswerCache(tmp_path / "answers").get(key(0)) is None
    # The variable names the key for every shard whatever their homes; a short one is one line, not shown.
    monkeypatch.setenv("IDBENCH_JUDGE_CACHE_KEY", "s" * 40)
    AnswerCache(tmp_path / "answers").put(key(1), model="m", task="t", raw="{}", value={"i": 1})
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    assert AnswerCache(tmp_path / "answers").get(key(1)).value == {"i": 1}
    monkeypatch.setenv("IDBENCH_JUDGE_CACHE_KEY", "short-key-do-not-print")
    with pytest.raises(SettingError, match="at least 32") as refused:
        AnswerCache(tmp_path / "answers")
    assert "do-not-print" not in str(refused.value) and "\n" not in str(refused.value)
    # A key file that holds no key is one line naming it.
    monkeypatch.delenv("IDBENCH_JUDGE_CACHE_KEY")
    (home / KEY_FILE).write_text("x")
    with pytest.raises(CacheKeyError, match=KEY_FILE):
        AnswerCache(tmp_path / "answers")


def test_the_judge_asks_again_what_the_cache_refuses_and_counts_it(tmp_path):
    """Through the client: an edited entry sends one request, the server's answer is used and counted."""
    from openai_server import ScriptedServer, answer

    from idbench.evaluate_pkg.judge import JudgeConfig, JudgeRequest, OpenAIJudge

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    requests = [JudgeRequest(task="t", prompt=f"question {i}", schema=schema) for i in range(3)]
    cache = _signed_cache(tmp_path / "answers")
    with ScriptedServer(default=answer({"ok": True})) as server:
        config = JudgeConfig(base_url=server.base_url, model="judge-test", backoff_s=0.01, timeout_s=5.0)
        assert all(a.value == {"ok": True} for a in OpenAIJudge(config, cache=cache).ask(requests))
        sent = len(server.requests)
        # Every entry flipped to the opposite verdict by hand: none is served.
        for entry in cache.path.glob("??/*.json"):
            data = json.loads(entry.read_text())
            data["value"], data["raw"] = {"ok": False}, '{"ok": false}'
            entry.write_text(json.dumps(data))
        judge = OpenAIJudge(config, cache=_signed_cache(tmp_path / "answers"))
        answers = judge.ask(requests)
        assert [a.value for a in answers] == [{"ok": True}] * 3 and not any(a.cached for a in answers)
        assert len(server.requests) == sent + 3
        assert judge.stats.cache_refused == 3 and judge.stats.cache_hits == 0
        again = OpenAIJudge(config, cache=_signed_cache(tmp_path / "answers"))
        assert all(a.cached for a in again.ask(requests)) and again.stats.cache_refused == 0


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
