"""The judge client against a local scripted OpenAI-compatible server: retries, failures, cache, limits.

Every test talks HTTP to a server in a background thread (``openai_server.py``); nothing leaves the
machine. Backoffs and timeouts are tiny so the file runs in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import logging
import pickle
import threading
import time
from pathlib import Path

import pytest
from openai_server import (
    ScriptedServer,
    answer,
    delay,
    image_urls,
    malformed,
    reject_response_format,
    status,
    user_text,
)
from PIL import Image

from idbench.evaluate_pkg.judge import (
    AnswerCache,
    JudgeConfig,
    JudgeRequest,
    OpenAIJudge,
    default_cache_path,
    parse_json_answer,
)
from idbench.evaluate_pkg.judge.cache import answer_key

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "why": {"type": "string"}},
    "required": ["ok"],
    "additionalProperties": False,
}
KEY = "sk-idbench-TEST-KEY-5f3a9c"  # distinctive: any occurrence in an output is a leak


def make_config(server: ScriptedServer, **overrides) -> JudgeConfig:
    settings = {"backoff_s": 0.01, "backoff_cap_s": 0.05, "timeout_s": 2.0, "model": "judge-test"}
    settings.update(overrides)
    return JudgeConfig(base_url=server.base_url, **settings)


def hex_key(i: int) -> str:
    """A key shaped like answer_key's (the cache names files by it and accepts nothing else)."""
    return hashlib.sha256(str(i).encode()).hexdigest()


def make_request(i: int = 0, images: tuple[bytes, ...] = (), task: str = "test.ok") -> JudgeRequest:
    return JudgeRequest(task=task, prompt=f"Is picture {i} fine?", schema=SCHEMA, images=images, system="Be a judge.")


def png_bytes(size: tuple[int, int], mode: str = "RGB", color=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format="PNG")
    return buffer.getvalue()


# --- answers, retries, failures --------------------------------------------------------------------------


def test_answers_come_back_in_order_with_usage_and_stats():
    def by_prompt(body):
        number = int(user_text(body).split("picture ")[1].split(" ")[0])
        return answer({"ok": number % 2 == 0})

    with ScriptedServer(by_prompt) as server:
        judge = OpenAIJudge(make_config(server))
        answers = judge.ask([make_request(i) for i in range(6)])
    assert [a.value for a in answers] == [{"ok": i % 2 == 0} for i in range(6)]
    assert all(a.ok and a.attempts == 1 and not a.cached for a in answers)
    assert answers[0].usage == {"prompt_tokens": 100, "completion_tokens": 10}
    stats = judge.stats
    assert (stats.answers, stats.requests_sent, stats.failures, stats.retries) == (6, 6, 0, 0)
    assert (stats.prompt_tokens, stats.completion_tokens, stats.estimated_cost) == (600, 60, None)
    assert stats.by_task["test.ok"].answers == 6
    body = server.requests[0].body
    assert body["model"] == "judge-test" and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "Be a judge."}
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert body["response_format"]["json_schema"]["name"] == "test_ok"
    assert body["response_format"]["json_schema"]["strict"] is False  # "why" is optional: not strict-mode


def test_strict_mode_is_asked_for_only_when_the_schema_allows_it():
    from idbench.evaluate_pkg.judge.client import strict_compatible

    closed = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_compatible(closed)
    assert strict_compatible({**closed, "properties": {"a": {"type": "array", "items": closed}}})
    assert not strict_compatible({**closed, "required": []})
    assert not strict_compatible({k: v for k, v in closed.items() if k != "additionalProperties"})
    assert not strict_compatible({**closed, "properties": {"a": {"type": "array", "items": {"type": "object"}}}})
    assert not strict_compatible(SCHEMA)


def test_429_and_500_are_retried_then_succeed():
    with ScriptedServer([status(429, retry_after=0.01), status(500), answer({"ok": True})]) as server:
        judge = OpenAIJudge(make_config(server))
        [result] = judge.ask([make_request()])
    assert result.ok and result.value == {"ok": True}
    assert result.attempts == 3
    assert (judge.stats.requests_sent, judge.stats.retries, judge.stats.failures) == (3, 2, 0)
    assert len(server.requests) == 3


def test_a_timeout_is_retried():
    with ScriptedServer([delay(3.0, answer({"ok": False})), answer({"ok": True})]) as server:
        judge = OpenAIJudge(make_config(server, timeout_s=0.5))
        [result] = judge.ask([make_request()])
    assert result.ok and result.value == {"ok": True} and result.attempts == 2
    assert judge.stats.retries == 1


def test_failure_after_max_retries_is_an_answer_and_counted(caplog):
    with ScriptedServer(default=status(500, "the GPU fell over")) as server:
        judge = OpenAIJudge(make_config(server, max_retries=2))
        with caplog.at_level(logging.WARNING, logger="idbench.evaluate_pkg.judge.client"):
            [result] = judge.ask([make_request()])
    assert not result.ok and result.value is None
    assert "HTTP 500" in result.error and "the GPU fell over" in result.error and "after 3 attempts" in result.error
    assert result.attempts == 3 and len(server.requests) == 3
    assert (judge.stats.failures, judge.stats.retries, judge.stats.failure_rate) == (1, 2, 1.0)
    assert judge.stats.by_task["test.ok"].failures == 1
    assert "HTTP 500" in caplog.text


def test_timeouts_until_retries_run_out_fail():
    with ScriptedServer(default=delay(1.0, answer({"ok": True}))) as server:
        judge = OpenAIJudge(make_config(server, timeout_s=0.1, max_retries=1))
        [result] = judge.ask([make_request()])
    assert not result.ok and "timed out" in result.error and result.attempts == 2


def test_a_client_error_is_not_retried():
    with ScriptedServer(default=status(401, "bad credentials")) as server:
        judge = OpenAIJudge(make_config(server))
        [result] = judge.ask([make_request()])
    assert not result.ok and result.error.startswith("HTTP 401") and result.attempts == 1


def test_malformed_json_is_retried_then_fails():
    with ScriptedServer([malformed(), answer({"ok": True})]) as server:
        judge = OpenAIJudge(make_config(server))
        [result] = judge.ask([make_request()])
    assert result.ok and result.attempts == 2

    with ScriptedServer(default=malformed()) as server:
        judge = OpenAIJudge(make_config(server, max_retries=1))
        [result] = judge.ask([make_request()])
    assert not result.ok and result.error.startswith("invalid JSON") and result.attempts == 2
    assert result.raw == '{"answer": yes, definitely'  # kept for inspection
    assert judge.stats.failures == 1


def test_schema_invalid_answer_is_a_failure_and_not_cached(tmp_path):
    cache = AnswerCache(tmp_path / "answers")
    with ScriptedServer(default=answer({"ok": "yes"})) as server:
        judge = OpenAIJudge(make_config(server, max_retries=1), cache=cache)
        [result] = judge.ask([make_request()])
        assert not result.ok and "does not match the schema" in result.error and "ok" in result.error
        assert judge.stats.failures == 1 and len(cache) == 0
        judge.ask([make_request()])  # a rerun asks again
    assert len(server.requests) == 4


def test_cut_off_reply_says_so():
    from openai_server import text

    with ScriptedServer(default=text('{"ok": tr', finish_reason="length")) as server:
        [result] = OpenAIJudge(make_config(server, max_retries=0, max_tokens=5)).ask([make_request()])
    assert "max_tokens=5" in result.error


def test_an_empty_reply_is_retried_then_fails():
    from openai_server import Behaviour

    with ScriptedServer(default=Behaviour(content=None)) as server:
        [result] = OpenAIJudge(make_config(server, max_retries=1)).ask([make_request()])
    assert result.error.startswith("empty reply") and result.attempts == 2


def test_an_unwritable_cache_costs_a_rerun_not_the_answer(tmp_path):
    cache = AnswerCache(tmp_path / "answers")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    cache.put = disk_full  # every write now fails, as on a full disk
    with ScriptedServer() as server:
        [result] = OpenAIJudge(make_config(server), cache=cache).ask([make_request()])
    assert result.ok and len(cache) == 0


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('{"ok": true}', {"ok": True}),
        ('  \n{"ok": false}\n', {"ok": False}),
        ('```json\n{"ok": true}\n```', {"ok": True}),
        ('```\n{"ok": true}\n```', {"ok": True}),
    ],
)
def test_strict_parser_accepts_an_object_maybe_fenced(reply, value):
    assert parse_json_answer(reply) == value


@pytest.mark.parametrize(
    "reply",
    [
        'Sure! {"ok": true}',
        '{"ok": true} I hope this helps',
        '```json\n{"ok": true}\n```\nThat is my answer.',
        '[{"ok": true}]',
        '"ok"',
        '{"ok": true}{"ok": false}',
        '{"score": NaN}',
        "",
    ],
)
def test_strict_parser_refuses_anything_else(reply):
    with pytest.raises(ValueError):
        parse_json_answer(reply)


def test_a_bad_image_fails_its_request_without_sending():
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server))
        bad, good = judge.ask([make_request(0, images=(b"not an image",)), make_request(1)])
    assert not bad.ok and bad.error.startswith("unusable image") and bad.attempts == 0
    assert good.ok and len(server.requests) == 1


def test_a_malformed_schema_raises_before_anything_is_sent():
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server))
        with pytest.raises(ValueError, match="invalid JSON schema"):
            judge.ask([JudgeRequest(task="t", prompt="p", schema={"type": "nonsense"})])
    assert server.requests == []


# --- structured output ----------------------------------------------------------------------------------


def test_json_schema_rejected_with_400_falls_back_to_plain_text_once(tmp_path, caplog):
    cache = AnswerCache(tmp_path / "answers")
    with ScriptedServer(default=reject_response_format(answer({"ok": True}))) as server:
        judge = OpenAIJudge(make_config(server, concurrency=1), cache=cache)
        with caplog.at_level(logging.WARNING, logger="idbench.evaluate_pkg.judge.client"):
            answers = judge.ask([make_request(i) for i in range(3)])
        assert all(a.ok for a in answers)
        bodies = [r.body for r in server.requests]
        assert len(bodies) == 4  # one rejected json_schema request, then three in plain text
        assert "response_format" in bodies[0]
        assert all("response_format" not in body for body in bodies[1:])
        assert all('"required": ["ok"]' in user_text(body) for body in bodies[1:])  # the schema, in the prompt
        assert caplog.text.count("rejected response_format") == 1
        assert judge.stats.failures == 0 and "none" in repr(judge)

        # A fresh judge on the same cache finds the plain-text answers without asking.
        server.reset()
        again = OpenAIJudge(make_config(server), cache=cache).ask([make_request(i) for i in range(3)])
        assert all(a.cached for a in again) and server.requests == []


def test_a_400_after_json_schema_worked_is_a_plain_failure():
    with ScriptedServer([answer({"ok": True}), status(400, "prompt too long")]) as server:
        judge = OpenAIJudge(make_config(server, concurrency=1))
        first, second = judge.ask([make_request(0), make_request(1)])
    assert first.ok
    assert not second.ok and second.error.startswith("HTTP 400") and "prompt too long" in second.error
    assert len(server.requests) == 2


def test_forced_modes_send_what_they_say():
    with ScriptedServer() as server:
        OpenAIJudge(make_config(server, structured="json_object")).ask([make_request()])
        OpenAIJudge(make_config(server, structured="none")).ask([make_request()])
    obj, plain = (r.body for r in server.requests)
    assert obj["response_format"] == {"type": "json_object"} and "JSON Schema" in user_text(obj)
    assert "response_format" not in plain and "JSON Schema" in user_text(plain)


# --- cache ----------------------------------------------------------------------------------------------


def test_a_second_run_of_the_same_requests_sends_nothing(tmp_path):
    path = tmp_path / "answers"
    requests = [make_request(i, images=(png_bytes((40, 30), color=(i, 0, 0)),)) for i in range(5)]
    with ScriptedServer() as server:
        first = OpenAIJudge(make_config(server), cache=AnswerCache(path)).ask(requests)
        assert len(server.requests) == 5
        server.reset()
        judge = OpenAIJudge(make_config(server), cache=AnswerCache(path))
        second = judge.ask(requests)
    assert server.requests == []
    assert [a.value for a in second] == [a.value for a in first]
    assert all(a.cached and a.ok and a.attempts == 0 for a in second)
    assert (judge.stats.cache_hits, judge.stats.requests_sent, judge.stats.answers) == (5, 0, 5)


def test_the_cache_key_covers_what_changes_an_answer(tmp_path):
    cache = AnswerCache(tmp_path / "answers")
    picture = (png_bytes((80, 80)),)
    with ScriptedServer() as server:
        OpenAIJudge(make_config(server), cache=cache).ask([make_request(0, images=picture)])
        server.reset()
        OpenAIJudge(make_config(server), cache=cache).ask([make_request(0, images=picture)])
        assert server.requests == []
        OpenAIJudge(make_config(server, model="other-model"), cache=cache).ask([make_request(0, images=picture)])
        OpenAIJudge(make_config(server, max_tokens=99), cache=cache).ask([make_request(0, images=picture)])
        OpenAIJudge(make_config(server, max_image_side=64), cache=cache).ask([make_request(0, images=picture)])
        OpenAIJudge(make_config(server), cache=cache).ask([make_request(0, images=(png_bytes((8, 8)),))])
        OpenAIJudge(make_config(server), cache=cache).ask([make_request(1, images=picture)])
        assert len(server.requests) == 5
        # Without images the image settings do not matter.
        OpenAIJudge(make_config(server), cache=cache).ask([make_request(2)])
        OpenAIJudge(make_config(server, max_image_side=64), cache=cache).ask([make_request(2)])
        assert len(server.requests) == 6

    base = dict(
        model="m",
        system=None,
        prompt="p",
        schema=SCHEMA,
        image_hashes=["a"],
        temperature=0.0,
        max_tokens=10,
        structured="json_schema",
        image_settings="s",
    )
    variants = [
        {"prompt": "q"},
        {"system": "s"},
        {"schema": {"type": "object"}},
        {"image_hashes": ["b"]},
        {"structured": "none"},
        {"image_settings": "t"},
    ]
    keys = {answer_key(**base)} | {answer_key(**{**base, **change}) for change in variants}
    assert len(keys) == 1 + len(variants)


def test_failures_are_not_cached(tmp_path):
    cache = AnswerCache(tmp_path / "answers")
    with ScriptedServer(default=status(503)) as server:
        [failed] = OpenAIJudge(make_config(server, max_retries=0), cache=cache).ask([make_request()])
    assert not failed.ok and len(cache) == 0
    with ScriptedServer() as server:
        [result] = OpenAIJudge(make_config(server), cache=cache).ask([make_request()])
    assert result.ok and not result.cached and len(server.requests) == 1 and len(cache) == 1


def test_temperature_above_zero_is_neither_cached_nor_deduplicated(tmp_path):
    cache = AnswerCache(tmp_path / "answers")
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server, temperature=0.7), cache=cache)
        judge.ask([make_request(0), make_request(0)])
        judge.ask([make_request(0)])
    assert len(server.requests) == 3 and len(cache) == 0 and judge.stats.cache_hits == 0


def test_identical_requests_in_a_batch_are_sent_once():
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server))
        answers = judge.ask([make_request(0)] * 3 + [make_request(1)])
    assert len(server.requests) == 2 and all(a.ok for a in answers)
    assert (judge.stats.answers, judge.stats.deduplicated) == (4, 2)


def test_the_cache_folder_is_shared_safely_between_writers(tmp_path):
    path = tmp_path / "answers"
    caches = [AnswerCache(path), AnswerCache(path)]

    def write(cache: AnswerCache, offset: int) -> None:
        for i in range(200):  # both write keys 100..199 too: the same key from two writers at once
            cache.put(hex_key(offset * 100 + i), model="m", task="t", raw="{}", value={"i": offset * 100 + i})

    threads = [threading.Thread(target=write, args=(cache, n)) for n, cache in enumerate(caches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(caches[0]) == len(caches[1]) == 300
    assert caches[1].get(hex_key(7)).value == {"i": 7}
    assert [p.name for p in path.rglob("*.tmp")] == []  # no temporary file left behind


def test_default_cache_path_follows_idbench_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("IDBENCH_CACHE", str(tmp_path))
    assert default_cache_path() == tmp_path / "judge" / "answers"
    monkeypatch.delenv("IDBENCH_CACHE")
    assert default_cache_path() == Path.home() / ".cache" / "idbench" / "judge" / "answers"


# --- limits ---------------------------------------------------------------------------------------------


def test_concurrency_is_bounded():
    with ScriptedServer(latency_s=0.05) as server:
        judge = OpenAIJudge(make_config(server, concurrency=4))
        start = time.perf_counter()
        answers = judge.ask([make_request(i) for i in range(40)])
        elapsed = time.perf_counter() - start
    assert all(a.ok for a in answers)
    assert server.max_in_flight <= 4
    assert server.max_in_flight >= 2  # it did run requests side by side
    assert elapsed < 40 * 0.05  # faster than one at a time


def test_request_budget_fails_the_rest_without_sending(caplog):
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server, concurrency=1, request_budget=3))
        with caplog.at_level(logging.WARNING, logger="idbench.evaluate_pkg.judge.client"):
            answers = judge.ask([make_request(i) for i in range(5)])
    assert [a.ok for a in answers] == [True, True, True, False, False]
    assert answers[-1].error == "budget exhausted" and answers[-1].attempts == 0
    assert len(server.requests) == 3 and judge.stats.failures == 2
    assert caplog.text.count("budget exhausted") == 1


def test_token_budget_and_cost_estimate():
    with ScriptedServer(usage=(100, 10)) as server:
        judge = OpenAIJudge(
            make_config(
                server, concurrency=1, token_budget=200, price_per_million_input=1.0, price_per_million_output=2.0
            )
        )
        answers = judge.ask([make_request(i) for i in range(4)])
    assert [a.ok for a in answers] == [True, True, False, False]  # 110 tokens each: the third would pass 200
    assert judge.stats.estimated_cost == pytest.approx((200 * 1.0 + 20 * 2.0) / 1e6)
    assert judge.stats.as_dict()["failure_rate"] == 0.5


# --- images ---------------------------------------------------------------------------------------------


def test_images_arrive_downscaled_as_jpeg_data_urls():
    big = png_bytes((2000, 1000), mode="RGBA", color=(0, 0, 0, 0))  # fully transparent: white once flattened
    small = png_bytes((100, 60))
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server, max_image_side=256))
        [result] = judge.ask([make_request(images=(big, small))])
    assert result.ok
    urls = image_urls(server.requests[0].body)
    assert len(urls) == 2 and all(url.startswith("data:image/jpeg;base64,") for url in urls)
    decoded = [Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) for url in urls]
    assert [image.size for image in decoded] == [(256, 128), (100, 60)]
    assert decoded[0].format == "JPEG" and decoded[0].convert("L").getextrema()[0] > 240
    content = server.requests[0].body["messages"][1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url", "image_url"]


# --- the key --------------------------------------------------------------------------------------------


def test_the_api_key_never_leaks(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("IDBENCH_JUDGE_API_KEY", KEY)
    cache_path = tmp_path / "answers"
    script = [
        status(500, f"server echoes the key {KEY}"),
        malformed(),
        answer({"ok": True}),
        status(401, f"unauthorized: {KEY}"),
    ]
    with ScriptedServer(script, default=answer({"ok": False, "why": "fine"})) as server:
        monkeypatch.setenv("IDBENCH_JUDGE_URL", server.base_url)
        monkeypatch.setenv("IDBENCH_JUDGE_MODEL", "judge-test")
        config = JudgeConfig.from_env(backoff_s=0.01, concurrency=1)
        judge = OpenAIJudge(config, cache=AnswerCache(cache_path))
        with caplog.at_level(logging.DEBUG):
            answers = judge.ask([make_request(0), make_request(1), make_request(2)])
            answers += judge.ask([make_request(0)])  # from the cache
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it is sent, to the server only
    assert [a.ok for a in answers] == [True, False, True, True]
    assert "unauthorized" in answers[1].error and "***" in answers[1].error

    outputs = [
        caplog.text,
        repr(config),
        str(config),
        repr(judge),
        repr(answers),
        repr(judge.stats),
        json.dumps(judge.stats.as_dict()),
        repr(vars(judge)),
    ]
    for text in outputs:
        assert KEY not in text
    judge.cache.close()
    files = [file for file in tmp_path.rglob("*") if file.is_file()]
    for file in files:
        assert KEY.encode() not in file.read_bytes(), file.name
    assert len(judge.cache) == 2
    with pytest.raises(TypeError):
        pickle.dumps(judge._key)


# --- configuration and entry points -----------------------------------------------------------------------


def test_config_from_env_and_overrides(monkeypatch):
    monkeypatch.setenv("IDBENCH_JUDGE_URL", "http://env-host:8000/v1")
    monkeypatch.setenv("IDBENCH_JUDGE_MODEL", "env-model")
    config = JudgeConfig.from_env()
    assert (config.base_url, config.model, config.structured, config.temperature) == (
        "http://env-host:8000/v1",
        "env-model",
        "auto",
        0.0,
    )
    config = JudgeConfig.from_env(url="http://flag:1/v1", model="flag-model", concurrency=32)
    assert (config.base_url, config.model, config.concurrency) == ("http://flag:1/v1", "flag-model", 32)
    with pytest.raises(TypeError, match="api_key"):
        JudgeConfig.from_env(api_key="no")  # there is no such field, on purpose
    monkeypatch.delenv("IDBENCH_JUDGE_URL")
    with pytest.raises(ValueError, match="IDBENCH_JUDGE_URL"):
        JudgeConfig.from_env()
    with pytest.raises(ValueError, match="structured"):
        JudgeConfig(base_url="http://x/v1", model="m", structured="yaml")
    with pytest.raises(ValueError, match="concurrency"):
        JudgeConfig(base_url="http://x/v1", model="m", concurrency=0)


def test_ask_works_inside_a_running_event_loop_and_ask_async_directly():
    with ScriptedServer() as server:
        judge = OpenAIJudge(make_config(server))

        async def from_async_code():
            direct = await judge.ask_async([make_request(0)])
            nested = judge.ask([make_request(1)])  # sync call from async code: runs on a loop of its own
            return direct + nested

        answers = asyncio.run(from_async_code())
    assert [a.ok for a in answers] == [True, True] and judge.model == "judge-test"
    assert judge.ask([]) == []


@pytest.mark.parametrize(
    "url, says",
    [
        ("https://alice:s3cret-key@judge.example/v1", "a user part (user:password@host)"),
        ("https://sk-live-123@judge.example/v1", "a user part (user:password@host)"),
        ("https://judge.example/v1?api-key=s3cret-key", "a query (?...)"),
        ("https://judge.example/v1?apikey=s3cret-key&x=1", "a query (?...)"),
        ("https://judge.example/v1?session=s3cret-key", "a query (?...)"),
        ("https://judge.example/v1?code=s3cret-key", "a query (?...)"),
        ("https://judge.example/v1?s3cret-key", "a query (?...)"),
        ("https://judge.example/v1#key=s3cret-key", "a fragment (#...)"),
        ("https://u:s3cret-key@judge.example/v1?api-key=s3cret-key", "a user part (user:password@host) and a query"),
        ("ftp://judge.example/v1", "http(s) URL with a host"),
        ("http:///v1", "http(s) URL with a host"),
        ("http://judge.example:s3cret-key/v1", "not a URL"),
    ],
)
def test_a_judge_url_with_more_than_scheme_host_port_and_path_is_refused_without_repeating_it(url, says):
    """A user part, a query (whatever its parameters: no list of names knows every gateway's) and a
    fragment are where keys go; the URL is recorded with the results, so each is refused, in one line
    that says where the key belongs and never repeats the URL."""
    with pytest.raises(ValueError) as error:
        JudgeConfig(base_url=url, model="m")
    message = str(error.value)
    assert says in message and "s3cret" not in message and "sk-live" not in message and "\n" not in message
    if any(mark in url for mark in "@?#"):
        assert "$IDBENCH_JUDGE_API_KEY" in message  # where the key belongs


def test_a_plain_judge_url_with_a_port_and_path_is_accepted_and_a_path_token_is_never_shown():
    assert JudgeConfig(base_url="http://localhost:8000/v1", model="m").base_url == "http://localhost:8000/v1"
    token = "sk-proj-0a1b2c3d4e5f6a7b8c9d"
    config = JudgeConfig(base_url=f"https://gateway.example/{token}/v1", model="m")
    assert config.base_url.endswith(f"/{token}/v1")  # it is what the client calls
    judge = OpenAIJudge(config)
    assert token not in repr(config) and token not in repr(judge)
    assert "https://gateway.example/***/v1" in repr(config)


# --- a judge that is down ---------------------------------------------------------------------------


def _closed_port() -> int:
    """A local port nothing listens on (connection refused, no network needed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_judge_that_refuses_connections_is_found_unreachable_and_the_rest_is_not_sent():
    from idbench.evaluate_pkg.judge.client import UNREACHABLE, UNREACHABLE_AFTER

    config = JudgeConfig(
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        model="judge-test",
        max_retries=1,
        backoff_s=0.001,
        backoff_cap_s=0.002,
        timeout_s=1.0,
        concurrency=1,
    )
    judge = OpenAIJudge(config)
    n = UNREACHABLE_AFTER + 20
    answers = judge.ask([make_request(i) for i in range(n)])
    assert len(answers) == n and not any(a.ok for a in answers)
    assert judge.stats.unreachable is not None and "connection error" in judge.stats.unreachable
    # Serially, the circuit opens after UNREACHABLE_AFTER requests; each of those was tried twice.
    assert judge.stats.requests_sent == UNREACHABLE_AFTER * 2
    assert sum(a.error.startswith(UNREACHABLE) for a in answers) == n - UNREACHABLE_AFTER
    assert judge.stats.as_dict()["unreachable"] == judge.stats.unreachable


def test_failed_answers_without_a_transport_fault_do_not_open_the_circuit():
    with ScriptedServer(lambda body: malformed()) as server:  # a server that answers, badly
        judge = OpenAIJudge(make_config(server, max_retries=0, concurrency=1))
        answers = judge.ask([make_request(i) for i in range(12)])
    assert not any(a.ok for a in answers) and judge.stats.unreachable is None and judge.stats.requests_sent == 12


def test_judge_unavailable_counts_unreachable_and_a_failure_share_above_the_limit():
    from idbench.evaluate_pkg.judge.card import UNAVAILABLE_ABOVE, judge_unavailable

    assert judge_unavailable(None) is None
    assert judge_unavailable({"model": "m", "stats": {"answers": 100, "failures": 0}}) is None
    at_limit = round(100 * UNAVAILABLE_ABOVE)
    assert judge_unavailable({"model": "m", "stats": {"answers": 100, "failures": at_limit}}) is None
    assert "failed 51 of 100" in judge_unavailable({"model": "m", "stats": {"answers": 100, "failures": at_limit + 1}})
    assert "unreachable" in judge_unavailable(
        {"model": "m", "stats": {"answers": 9, "failures": 9, "unreachable": "connection error"}}
    )
