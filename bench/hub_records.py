"""What the bounded Hub-record reader costs against a bare ``json.loads``, on hostile and on ordinary records.

Each case runs in a fresh child process (``python bench/hub_records.py --case NAME``), which reports its
CPU time (median of ``--repeats`` calls) and the growth of its peak RSS over the case, so one case's
memory does not hide another's:

- ``nested``: a 200 KB request record nested 100,000 levels deep (issue 18). ``json.loads`` ends in
  RecursionError (what crashed every Hub worker and the Space); ``load_record`` refuses it by a
  linear bracket scan before parsing;
- ``big``: a 1 GB request record (a sparse file): ``read_record`` reads 64 KiB + 1 byte of it and
  refuses it; ``json.loads`` of the whole file is not tried (it would need the gigabyte);
- ``request`` / ``result``: an ordinary request record and a CogCanvas-sized ``aggregates.json``
  (every metric, an n_persons breakdown): ``checked_request`` / ``checked_result`` (read, bounds and
  schema) against ``json.loads`` alone: the price of the checks on every valid record.

Usage: ``.venv/bin/python bench/hub_records.py [--repeats 20]``. Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from idbench.evaluate_pkg.results import AGGREGATES_FILE, SAMPLES_FILE  # noqa: E402

DIGEST = "0123456789abcdef" * 4
BENCHMARK = "cogcanvas"
REQUEST_PATH = f"{BENCHMARK}/model-a/{DIGEST[:12]}.json"
RESULT_PATH = f"{BENCHMARK}/model-a/{DIGEST[:12]}/{AGGREGATES_FILE}"
CASES = ("nested", "big", "request", "result")


def request_bytes() -> bytes:
    return json.dumps(
        {
            "schema": 1,
            "model": "model-a",
            "benchmark": BENCHMARK,
            "benchmark_version": "v1",
            "content_hash": DIGEST,
            "task": "reference",
            "metadata": {"family": "F", "link": "https://example.org/m", "model": "model-a"},
            "state": "RUNNING",
            "submitted_at": "2026-05-01T00:00:00+00:00",
            "updated_at": "2026-05-31T23:55:00+00:00",
            "attempts": 1,
            "worker": "w1",
            "lease_until": "2026-06-01T00:05:00+00:00",
            "reason": None,
            "files": f"{BENCHMARK}/model-a/{DIGEST[:12]}.zip",
        },
        indent=2,
    ).encode()


def result_bytes() -> bytes:
    from idbench.builders.registry import get_benchmark

    cell = {"mean": 0.5, "ci_low": 0.48, "ci_high": 0.52, "n": 1361, "n_nan": 0, "n_prompts": 1361}
    overall = {m.name: dict(cell) for m in get_benchmark(BENCHMARK).task_metrics("reference")}
    return json.dumps(
        {
            "model": "model-a",
            "benchmark": BENCHMARK,
            "benchmark_version": "v1",
            "suite_version": "s1",
            "idbench_version": "0.1.0",
            "profile": "paper",
            "models": {},
            "not_run": {},
            "judge": None,
            "copies": None,
            "aggregates": {
                "overall": overall,
                "breakdowns": {"n_persons": {str(n): {m: dict(cell) for m in overall} for n in (2, 3, 4, 5)}},
            },
            "scored_at": "2026-05-02T00:00:00+00:00",
            "content_hash": DIGEST,
            "samples": f"{BENCHMARK}/model-a/{DIGEST[:12]}/{SAMPLES_FILE}",
            "task": "reference",
            "metadata": {},
        },
        indent=2,
    ).encode()


def _timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def run_case(name: str, repeats: int) -> dict:
    """One case in this process: {"checked": s, "plain": s or None, "rss_kb": growth, "outcome": text}."""
    from idbench.leaderboard.hub_records import (
        MalformedRecord,
        checked_request,
        checked_result,
        load_record,
        read_record,
    )

    now = time.time()
    if name == "nested":
        data = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        checked = lambda: load_record(REQUEST_PATH, data, max_bytes=len(data))  # noqa: E731 - the depth limit alone
        plain = lambda: json.loads(data)  # noqa: E731
    elif name == "big":
        folder = Path(tempfile.mkdtemp())
        with open(folder / "big.json", "wb") as file:
            file.write(b'{"reason": "')
            file.truncate(10**9)
        checked, plain = (lambda: read_record(folder, "big.json")), None
    elif name == "request":
        data = request_bytes()
        checked, plain = (lambda: checked_request(REQUEST_PATH, data, now)), (lambda: json.loads(data))
    else:
        data = result_bytes()
        checked, plain = (lambda: checked_result(RESULT_PATH, data, now)), (lambda: json.loads(data))

    def outcome(call) -> str:
        try:
            call()
            return "accepted"
        except MalformedRecord as error:
            return f"MalformedRecord: {str(error)[:70]}"
        except RecursionError:
            return "RecursionError"

    before = _peak_kb()
    said = outcome(checked)
    seconds = _timed(lambda: outcome(checked), repeats)
    grown = _peak_kb() - before
    plain_said = outcome(plain) if plain else None
    plain_seconds = _timed(lambda: outcome(plain), repeats) if plain else None
    return {
        "checked": seconds,
        "plain": plain_seconds,
        "rss_kb": grown,
        "outcome": said,
        "plain_outcome": plain_said,
        "bytes": 10**9 if name == "big" else len(data),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.repeats)))
        return
    for name in CASES:
        out = subprocess.run(
            [sys.executable, __file__, "--case", name, "--repeats", str(args.repeats)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout)
        line = f"{name:8} {r['bytes']:>11,} B  checked {r['checked'] * 1e3:8.3f} ms CPU, peak RSS +{r['rss_kb'] / 1024:.1f} MiB: {r['outcome']}"
        if r["plain"] is not None:
            line += f"\n{'':22}json.loads {r['plain'] * 1e3:8.3f} ms CPU: {r['plain_outcome']}  (checked/plain {r['checked'] / max(r['plain'], 1e-9):.2f}x)"
        print(line)


if __name__ == "__main__":
    main()
