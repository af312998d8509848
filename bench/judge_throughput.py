"""Judge throughput: bounded concurrency against one request at a time, and the cache-hit path.

A judge server decodes many sequences at once, so the client's job is to keep enough requests in
flight. This runs the judge client against the tests' local scripted server (``tests/judge/
openai_server.py``) with a fixed latency per request (a stand-in for decoding time), N distinct
requests each carrying one image, and prints requests per second at concurrency 1 (sequential) and at
higher bounds, the speed-up over sequential, the most requests the server saw at once, and then a
rerun of the same requests through the answer cache (requests sent: 0). Last, several servers of one
model: the same requests over one server, two, and two of which one is down (connection refused), at a
fixed concurrency per server and small images (so that the client's CPU is not the limit).

With a fixed latency L and concurrency C the ideal is C / L requests/s; what falls short of it is the
client's own overhead (image preparation, JSON, HTTP) and the server thread's.

Run: .venv/bin/python bench/judge_throughput.py [--requests 200] [--latency-ms 50] [--concurrency 1,4,16,32]
     [--servers-latency-ms 200] [--per-server 8]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "judge"))

from openai_server import ScriptedServer, answer  # noqa: E402

from idbench.evaluate_pkg.judge import AnswerCache, JudgeConfig, JudgeRequest, OpenAIJudge  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {"same_identity": {"type": "boolean"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["same_identity", "confidence"],
    "additionalProperties": False,
}


def make_requests(n: int, side: int = 1024) -> list[JudgeRequest]:
    """N distinct questions, each with its own ``side`` x ``side`` JPEG."""
    rng = np.random.default_rng(0)
    requests = []
    for i in range(n):
        coarse = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(coarse).resize((side, side), Image.Resampling.BILINEAR).save(buffer, format="JPEG", quality=90)
        requests.append(
            JudgeRequest(
                task="bench.identity",
                prompt=f"Question {i}: same person in both?",
                schema=SCHEMA,
                images=(buffer.getvalue(),),
            )
        )
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the server's fixed time per request")
    parser.add_argument("--concurrency", default="1,4,16,32", help="bounds to time; 1 is the sequential baseline")
    parser.add_argument(
        "--image-side",
        type=int,
        default=1024,
        help="side of each request's square image (above 768 the client downsizes it)",
    )
    parser.add_argument("--servers-latency-ms", type=float, default=200.0, help="latency of the several-servers runs")
    parser.add_argument("--per-server", type=int, default=8, help="concurrency per server in the several-servers runs")
    args = parser.parse_args()
    bounds = [int(value) for value in args.concurrency.split(",")]
    requests = make_requests(args.requests, args.image_side)
    latency = args.latency_ms / 1000

    print(
        f"{args.requests} requests, one {args.image_side}x{args.image_side} image each, "
        f"server latency {args.latency_ms:g} ms, {os.cpu_count()} CPUs"
    )
    header = ("concurrency", "time (s)", "req/s", "ideal req/s", "speed-up", "max in flight")
    print("  ".join(f"{name:>{width}}" for name, width in zip(header, (11, 9, 8, 11, 8, 13))))
    with (
        ScriptedServer(default=answer({"same_identity": True, "confidence": 0.9}), latency_s=latency) as server,
        tempfile.TemporaryDirectory() as folder,
    ):
        baseline = None
        for bound in bounds:
            server.reset()
            judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, model="bench", concurrency=bound))
            start = time.perf_counter()
            answers = judge.ask(requests)
            elapsed = time.perf_counter() - start
            assert all(a.ok for a in answers), [a.error for a in answers if not a.ok][:3]
            rate = len(requests) / elapsed
            baseline = baseline or rate
            print(
                f"{bound:>11}  {elapsed:>9.2f}  {rate:>8.1f}  {bound / latency:>11.1f}  {rate / baseline:>7.1f}x"
                f"  {server.max_in_flight:>13}"
            )

        # The cache-hit path: fill the cache once, then rerun the same requests.
        cache_path = Path(folder) / "answers"
        OpenAIJudge(
            JudgeConfig(base_url=server.base_url, model="bench", concurrency=max(bounds)), cache=AnswerCache(cache_path)
        ).ask(requests)
        server.reset()
        judge = OpenAIJudge(JudgeConfig(base_url=server.base_url, model="bench"), cache=AnswerCache(cache_path))
        start = time.perf_counter()
        answers = judge.ask(requests)
        elapsed = time.perf_counter() - start
        assert all(a.cached for a in answers)
        print(
            f"rerun from the cache: {elapsed * 1000:.1f} ms for {len(requests)} answers "
            f"({len(requests) / elapsed:,.0f} answers/s), requests sent: {len(server.requests)}, "
            f"cache hits: {judge.stats.cache_hits}"
        )
    several_servers(args.requests, args.servers_latency_ms / 1000, args.per_server)


def several_servers(n: int, latency: float, per_server: int) -> None:
    """One server, two, and two with one refusing connections: time and each server's share."""
    requests = make_requests(n, side=256)
    reply = answer({"same_identity": True, "confidence": 0.9})
    print(
        f"\nseveral servers: {n} requests (256 px), latency {latency * 1000:g} ms, concurrency {per_server} per server"
    )
    with (
        ScriptedServer(default=reply, latency_s=latency) as first,
        ScriptedServer(default=reply, latency_s=latency) as second,
    ):
        with ScriptedServer() as gone:
            dead = gone.base_url  # stopped when this block ends: its port refuses connections
        runs = [("1 server", [first.base_url]), ("2 servers", [first.base_url, second.base_url])]
        runs.append(("2, one down", [first.base_url, dead]))
        one = None
        for name, urls in runs:
            config = JudgeConfig(base_url=urls[0], replica_urls=tuple(urls[1:]), model="bench", concurrency=per_server)
            judge = OpenAIJudge(config)
            start = time.perf_counter()
            answers = judge.ask(requests)
            elapsed = time.perf_counter() - start
            assert all(a.ok for a in answers), [a.error for a in answers if not a.ok][:3]
            one = one or elapsed
            shares = ", ".join(
                f"{counts.replies} replies / {counts.transport_failures} refused"
                for counts in judge.stats.by_endpoint.values()
            )
            print(f"  {name:<12} {elapsed:6.2f} s  {one / elapsed:4.2f}x  ({shares})")


if __name__ == "__main__":
    main()
