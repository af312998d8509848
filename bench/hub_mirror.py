"""What the Space pays to show the Hub's results: its SQLite mirror against re-reading the repo files.

Writes ``--results`` result folders (``aggregates.json``, the layout ``idbench sync`` and the Hub
worker push) and as many FINISHED request records into two local stand-in repos, then times:

- the mirror build (:func:`idbench.leaderboard.hub_mirror.mirror`), paid once per change of a repo's
  head (and at most every ``IDBENCH_HUB_REFRESH_S`` seconds);
- a page's data from the mirror: ``Store.current_results`` on the mirrored store;
- the slow obvious way, for comparison: on every page view, parse every ``aggregates.json`` of the
  results snapshot into the same rows (what an app without a mirror would do);
- a head check with nothing new (``mirror`` again, both heads unchanged): what most refreshes cost.

The stand-in keeps the files on local disk, so the Hub's download time is not in these numbers: the
mirror only changes how often the parsing happens, not what is fetched.

Usage: ``.venv/bin/python bench/hub_mirror.py [--results 1000] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from idbench.builders.registry import get_benchmark  # noqa: E402
from idbench.evaluate_pkg.results import AGGREGATES_FILE  # noqa: E402
from idbench.leaderboard import hub_mirror  # noqa: E402
from idbench.leaderboard.hubrepo import FileAdd, LocalRepoStandIn  # noqa: E402
from idbench.leaderboard.store import Store  # noqa: E402

BENCHMARK = "cogcanvas"


def aggregates(k: int) -> dict:
    """A complete overall block and an n_persons breakdown, values varying with ``k``."""
    spec = get_benchmark(BENCHMARK)
    value = 0.3 + (k % 97) / 200
    cell = {"mean": value, "ci_low": value - 0.02, "ci_high": value + 0.02, "n": 1361, "n_prompts": 1361}
    overall = {m.name: dict(cell) for m in spec.task_metrics("reference")}
    by_size = {str(n): {m: dict(cell) for m in overall} for n in (2, 3, 4, 5)}
    return {"overall": overall, "breakdowns": {"n_persons": by_size}}


def fill(requests: LocalRepoStandIn, results: LocalRepoStandIn, n: int) -> None:
    request_ops, result_ops = [], []
    for k in range(n):
        digest = f"{k:012x}" + "0" * 52
        model = f"model-{k:04d}"
        folder = f"{BENCHMARK}/{model}/{digest[:12]}"
        common = {
            "model": model,
            "benchmark": BENCHMARK,
            "benchmark_version": "v1",
            "content_hash": digest,
            "task": "reference",
        }
        request = common | {
            "schema": 1,
            "metadata": {"family": f"family-{k % 7}", "link": "", "model": model},
            "state": "FINISHED",
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T01:00:00+00:00",
            "attempts": 1,
            "worker": None,
            "lease_until": None,
            "reason": None,
            "files": f"{folder}.zip",
        }
        result = common | {
            "suite_version": "0.2",
            "idbench_version": "0.1.0",
            "profile": "paper",
            "models": {},
            "aggregates": aggregates(k),
            "not_run": {},
            "scored_at": "2026-01-02T00:00:00+00:00",
            "samples": None,
            "metadata": {"family": f"family-{k % 7}", "link": ""},
        }
        request_ops.append(FileAdd(f"{folder}.json", data=json.dumps(request).encode()))
        result_ops.append(FileAdd(f"{folder}/{AGGREGATES_FILE}", data=json.dumps(result).encode()))
    requests.commit(request_ops, "requests", requests.head())
    results.commit(result_ops, "results", results.head())


def reread_rows(snapshot: Path) -> list[dict]:
    """The slow obvious way: every result record parsed again, one row per current result."""
    rows = []
    for path in sorted(snapshot.rglob(AGGREGATES_FILE)):
        record = json.loads(path.read_text(encoding="utf-8"))
        rows.append(
            {"model_name": record["model"], "aggregates": record["aggregates"], "content_hash": record["content_hash"]}
        )
    return rows


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        requests, results = LocalRepoStandIn(tmp / "org" / "requests"), LocalRepoStandIn(tmp / "org" / "results")
        fill(requests, results, args.results)
        start = time.perf_counter()
        info = hub_mirror.mirror(requests, results, tmp / "space")
        build = time.perf_counter() - start
        store = Store(info.store_home)
        page, table = timed(lambda: store.current_results(BENCHMARK), args.repeats)
        slow, rows = timed(lambda: reread_rows(results.snapshot(results.head())), args.repeats)
        unchanged, _ = timed(lambda: hub_mirror.mirror(requests, results, tmp / "space"), args.repeats)
        assert len(table) == len(rows) == args.results, (len(table), len(rows))
        print(f"{args.results} results (CogCanvas aggregates with an n_persons breakdown), median of {args.repeats}:")
        print(f"  mirror build (once per head change):     {build:8.3f} s")
        print(f"  page data from the mirror (current_results): {page:8.3f} s")
        print(f"  page data re-reading every aggregates.json:  {slow:8.3f} s  ({slow / page:.1f}x the mirror)")
        print(f"  refresh with both heads unchanged:       {unchanged:8.4f} s")


if __name__ == "__main__":
    main()
