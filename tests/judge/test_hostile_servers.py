"""Judge servers that misbehave on purpose: one that drips its reply a byte at a time, one that sends
50 MB, one that redirects elsewhere. Each attempt has a deadline, each reply a size cap, and a redirect
leaves its origin only as a failure; what a server does wrong is a transport failure, so a server that
keeps stalling is rested, and a judge made of it found unreachable, like a server that is down.

Local scripted servers (``openai_server.py``: :func:`drip`, :func:`oversized`, :func:`redirect`); the
only waiting is the servers' own.
"""

from __future__ import annotations

import time
import tracemalloc

import openai  # noqa: F401  imported here, so the first ask's timing is the request's, not the SDK's import
import pytest
from openai_server import Behaviour, ScriptedServer, answer, drip, oversized, redirect

from idbench.evaluate_pkg.judge import JudgeConfig, JudgeRequest, OpenAIJudge
from idbench.evaluate_pkg.judge.client import ENDPOINT_DOWN_AFTER, MAX_REPLY_BYTES, UNREACHABLE, UNREACHABLE_AFTER

pytestmark: list = []  # the fast tier: no model, browser or subprocess here

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "why": {"type": "string"}}, "required": ["ok"]}


def requests(n: int = 1) -> list[JudgeRequest]:
    return [JudgeRequest(task="t", prompt=f"Is picture {i} fine?", schema=SCHEMA) for i in range(n)]


def config(*servers, **overrides) -> JudgeConfig:
    # A generous deadline by default: a loaded CI machine must not fail a test that expects an answer; the
    # deadline tests set their own.
    urls = [s.base_url for s in servers]
    settings = {"backoff_s": 0.01, "backoff_cap_s": 0.02, "timeout_s": 10.0, "max_retries": 0, "model": "judge-test"}
    return JudgeConfig(base_url=urls[0], replica_urls=tuple(urls[1:]), **{**settings, **overrides})


# --- a deadline on each attempt ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_server_dripping_its_reply_is_cut_at_the_deadline(where):
    # A byte every 0.25 s: httpx's per-read timeout (1 s) never fires; only the attempt's deadline does.
    with ScriptedServer(default=drip(where, every_s=0.25)) as server:
        judge = OpenAIJudge(config(server, timeout_s=1.0))
        start = time.monotonic()
        [result] = judge.ask(requests())
        elapsed = time.monotonic() - start
    assert elapsed < 2.5, f"the drip held the request {elapsed:.1f} s"
    assert not result.ok and result.error.startswith("timed out after 1 s")
    assert judge.stats.by_endpoint[server.base_url].transport_failures == 1


def test_a_cut_request_is_retried_like_a_timeout():
    with ScriptedServer([drip("body", every_s=0.25)], default=answer({"ok": True})) as server:
        judge = OpenAIJudge(config(server, timeout_s=1.0, max_retries=1))
        start = time.monotonic()
        [result] = judge.ask(requests())
    assert time.monotonic() - start < 2.5
    assert result.ok and result.attempts == 2 and judge.stats.retries == 1


def test_a_stalling_server_is_rested_like_a_failing_one():
    # As test_servers.py's dead server: a few attempts, then its share goes to the other server.
    with ScriptedServer(default=drip("body", every_s=0.1)) as stalling, ScriptedServer() as alive:
        judge = OpenAIJudge(config(stalling, alive, timeout_s=0.5, max_retries=4, concurrency=2))
        answers = judge.ask(requests(12))
    assert all(answer.ok for answer in answers) and len(alive.requests) == 12
    stalled = judge.stats.by_endpoint[stalling.base_url]
    assert stalled.replies == 0 and 1 <= stalled.transport_failures <= ENDPOINT_DOWN_AFTER + 1
    assert judge.stats.unreachable is None and judge.stats.failures == 0


def test_a_judge_that_only_stalls_is_found_unreachable():
    n = UNREACHABLE_AFTER + 8
    with ScriptedServer(default=drip("headers", every_s=0.1)) as stalling:
        judge = OpenAIJudge(config(stalling, timeout_s=0.5, concurrency=4))
        start = time.monotonic()
        answers = judge.ask(requests(n))
        elapsed = time.monotonic() - start
    assert not any(answer.ok for answer in answers) and elapsed < 3
    assert judge.stats.unreachable is not None and "timed out" in judge.stats.unreachable
    # Cut four at a time, UNREACHABLE_AFTER in a row open the circuit (a few more left as it opened); the
    # rest fail unsent, as with a judge that refuses connections.
    sent = judge.stats.requests_sent
    assert UNREACHABLE_AFTER <= sent < n and len(stalling.requests) == sent
    assert sum(answer.error.startswith(UNREACHABLE) for answer in answers) == n - sent


# --- a cap on each reply ---------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_50_mb_reply_is_refused_without_holding_it(declared):
    with ScriptedServer([answer({"ok": True})], default=oversized(50 << 20, declared=declared)) as server:
        judge = OpenAIJudge(config(server, timeout_s=10.0, temperature=0.5))  # not cached: each ask asks
        assert judge.ask(requests())[0].ok  # the client and its imports warmed up, outside the measure
        tracemalloc.start()
        try:
            [result] = judge.ask(requests())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # Read whole, as before the cap, this reply peaked at 300 MB of Python allocations.
    assert peak < 16 << 20, f"peak {peak / 2**20:.0f} MB while refusing a 50 MB reply"
    assert not result.ok and "limit" in result.error and "\n" not in result.error
    assert ("refused unread" in result.error) == declared  # a declared size is refused before a byte is read
    assert judge.stats.by_endpoint[server.base_url].transport_failures == 1


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_reply_under_the_cap_is_read_whole(declared):
    with ScriptedServer(default=oversized(MAX_REPLY_BYTES - 1024, declared=declared)) as server:
        [result] = OpenAIJudge(config(server)).ask(requests())
    assert result.ok and result.value["ok"] is True and len(result.value["why"]) > MAX_REPLY_BYTES - 2048


def test_plain_bodies_are_asked_for_and_a_compressed_one_is_refused():
    # A few MB of gzip may unpack to GBs past any byte count, so the judge takes none.
    gzipped = Behaviour(content='{"ok": true}', headers=(("content-encoding", "gzip"),))
    with ScriptedServer(default=gzipped) as server:
        [result] = OpenAIJudge(config(server)).ask(requests())
    assert server.requests[0].headers["accept-encoding"] == "identity"
    assert not result.ok and "compressed reply" in result.error


# --- redirects -------------------------------------------------------------------------------------------


def test_a_redirect_to_another_origin_is_not_followed_and_names_only_the_origin():
    with ScriptedServer() as elsewhere:
        target = f"{elsewhere.base_url}/chat/completions?token=SECRET-do-not-print"
        with ScriptedServer(default=redirect(target, code=307)) as server:
            judge = OpenAIJudge(config(server))
            [result] = judge.ask(requests())
    origin = elsewhere.base_url.removesuffix("/v1")
    assert elsewhere.requests == []  # neither the request nor its key went there
    assert not result.ok and f"another origin ({origin})" in result.error
    assert "SECRET" not in result.error and "chat/completions" not in result.error
    assert judge.stats.by_endpoint[server.base_url].transport_failures == 1


def test_a_redirect_within_the_origin_is_followed():
    with ScriptedServer() as server:
        server.push(redirect(f"{server.base_url}/chat/completions", code=307))
        [result] = OpenAIJudge(config(server)).ask(requests())
    assert result.ok and len(server.requests) == 2
