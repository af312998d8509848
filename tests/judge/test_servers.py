"""A judge with several servers of one model (one vLLM server per node): how the load is spread, what a
dead or slow server costs, and how the configuration is given. Local scripted servers, tiny delays."""

from __future__ import annotations

import dataclasses
import json

import pytest
from openai_server import ScriptedServer

from idbench.evaluate_pkg.judge import JudgeConfig, JudgeRequest, OpenAIJudge
from idbench.evaluate_pkg.judge.client import ENDPOINT_DOWN_AFTER, UNREACHABLE, UNREACHABLE_AFTER

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SCHEMA_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest(task="t", prompt=f"Is picture {i} fine?", schema=SCHEMA_OK) for i in range(n)]


def config(*servers, **overrides) -> JudgeConfig:
    urls = [s if isinstance(s, str) else s.base_url for s in servers]
    settings = {"backoff_s": 0.01, "backoff_cap_s": 0.02, "timeout_s": 2.0, "concurrency": 2}
    return JudgeConfig(base_url=urls[0], replica_urls=tuple(urls[1:]), model="judge-test", **{**settings, **overrides})


def dead_url() -> str:
    """A URL nothing listens at (a server started, then stopped: its port refuses connections)."""
    with ScriptedServer() as server:
        url = server.base_url
    return url


def test_requests_are_spread_over_the_servers_within_each_ones_concurrency():
    with ScriptedServer(latency_s=0.05) as a, ScriptedServer(latency_s=0.05) as b:
        judge = OpenAIJudge(config(a, b))
        answers = judge.ask(requests(16))
    assert all(answer.ok for answer in answers)
    assert len(a.requests) + len(b.requests) == 16 and min(len(a.requests), len(b.requests)) >= 6
    assert a.max_in_flight <= 2 and b.max_in_flight <= 2 and max(a.max_in_flight, b.max_in_flight) == 2
    by = judge.stats.by_endpoint
    assert (by[a.base_url].requests_sent, by[b.base_url].requests_sent) == (len(a.requests), len(b.requests))
    assert by[a.base_url].replies == len(a.requests) and by[a.base_url].transport_failures == 0


def test_a_faster_server_takes_more_of_the_work():
    with ScriptedServer(latency_s=0.5) as slow, ScriptedServer(latency_s=0.01) as fast:
        answers = OpenAIJudge(config(slow, fast, concurrency=1)).ask(requests(20))
    assert all(answer.ok for answer in answers)
    assert len(fast.requests) >= 15 and len(slow.requests) >= 1


def test_a_dead_server_costs_a_few_attempts_and_no_answer():
    dead = dead_url()
    with ScriptedServer() as alive:
        judge = OpenAIJudge(config(dead, alive))
        answers = judge.ask(requests(12))
    assert all(answer.ok for answer in answers) and len(alive.requests) == 12
    failed = judge.stats.by_endpoint[dead]
    # At most its concurrency at once, and no new attempt once ENDPOINT_DOWN_AFTER failed in a row.
    assert failed.replies == 0 and 1 <= failed.transport_failures <= ENDPOINT_DOWN_AFTER + 1
    assert judge.stats.unreachable is None and judge.stats.failures == 0


def test_with_every_server_dead_the_judge_is_unreachable_as_with_one():
    judge = OpenAIJudge(config(dead_url(), dead_url(), max_retries=1, concurrency=1))
    answers = judge.ask(requests(UNREACHABLE_AFTER + 4))
    assert not any(answer.ok for answer in answers)
    assert judge.stats.unreachable is not None and sum(UNREACHABLE in a.error for a in answers) >= 1
    assert sum(s.replies for s in judge.stats.by_endpoint.values()) == 0


def test_the_urls_come_as_a_list_from_the_flag_or_the_environment(monkeypatch):
    monkeypatch.setenv("IDBENCH_JUDGE_MODEL", "m")
    monkeypatch.setenv("IDBENCH_JUDGE_URL", "http://node0:8000/v1, http://node1:8000/v1")
    from_env = JudgeConfig.from_env()
    assert from_env.urls == ("http://node0:8000/v1", "http://node1:8000/v1")
    assert JudgeConfig.from_env("http://a:1/v1 http://b:2/v1").replica_urls == ("http://b:2/v1",)
    assert JudgeConfig.from_env("http://a:1/v1").replica_urls == ()
    # A shard's record stores the config as JSON; read back, it is the same config (tuples, not lists).
    again = JudgeConfig(**json.loads(json.dumps(dataclasses.asdict(from_env))))
    assert again == from_env and isinstance(again.replica_urls, tuple)


@pytest.mark.parametrize(
    ("replicas", "problem"),
    [
        (("http://a:1/v1",), "given twice"),
        (("http://user:secret@b:1/v1",), "credentials"),
        (("ftp://b/v1",), "http(s) URL"),
        ("http://b:1/v1", "not one string"),
    ],
)
def test_bad_server_lists_are_refused_in_one_line(replicas, problem):
    with pytest.raises(ValueError, match="invalid judge configuration") as raised:
        JudgeConfig(base_url="http://a:1/v1", model="m", replica_urls=replicas)
    assert problem in str(raised.value) and "\n" not in str(raised.value)
