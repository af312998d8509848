"""Growth exponents of each stage from several ``scale.json`` files of bench/paper_scale.py, and a projection.

For each benchmark, each stage's wall seconds (and CPU seconds, and peak RSS) are fitted against the size
that grows, by least squares on log-log (``scipy.stats.linregress``): the required images, or the
references where the images do not change between the files (Identity Collapse: its grid is 225 images at
every scale, only its pool grows). An exponent of 1 is linear; the issue's bar is 1.15. With two scales a
fit is a slope through two points, not a test: the table says how many scales each fit has.

The projection to the paper's size (scale 1.0) takes the largest measured scale's seconds times
(full size / that size) ** exponent, and, beside it, the linear projection (exponent 1), so the gap
between the two shows what the measured curvature would cost if it held.

Prints a markdown table per benchmark (``--json PATH`` also writes the numbers).

Run: .venv/bin/python bench/fit_exponents.py bench/results/paper_scale/*.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper_scale import design  # noqa: E402

LINEAR_BAR = 1.15


def load(paths: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """scale.json files by benchmark, each list sorted by scale."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        result = json.loads(Path(path).read_text())
        runs.setdefault(result["benchmark"], []).append(result)
    return {name: sorted(found, key=lambda r: r["scale"]) for name, found in sorted(runs.items())}


def size_axis(results: list[dict[str, Any]]) -> str:
    """'images', or 'references' where the images are the same in every file."""
    return "references" if len({r["images"] for r in results}) == 1 else "images"


def slope(xs: list[float], ys: list[float]) -> float | None:
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x and y and x > 0 and y > 0]
    if len({p[0] for p in points}) < 2:
        return None
    return float(stats.linregress([p[0] for p in points], [p[1] for p in points]).slope)


def fit(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every stage's exponents and projection for one benchmark's runs."""
    axis = size_axis(results)
    full = design(results[0]["benchmark"], 1.0)[axis]
    largest = results[-1]
    stages: dict[str, Any] = {}
    names = [s for s in largest["stages"] if all(s in r["stages"] for r in results)]
    for name in names:
        rows = [(r[axis], r["stages"][name]) for r in results]
        xs = [float(x) for x, _ in rows]
        seconds = [s["seconds"] for _, s in rows]
        exponent = slope(xs, seconds)
        last, ratio = seconds[-1], full / xs[-1]
        rss = [s.get("peak_rss_mb") for _, s in rows]
        stages[name] = {
            "scales": len(rows),
            "seconds": seconds,
            "exponent": exponent,
            "cpu_exponent": slope(xs, [s.get("cpu_seconds") or 0.0 for _, s in rows]),
            "rss_exponent": slope(xs, rss) if all(rss) else None,
            "peak_rss_mb": rss,
            "projected_seconds": last * ratio ** (exponent if exponent is not None else 1.0),
            "linear_seconds": last * ratio,
        }
    return {
        "benchmark": results[0]["benchmark"],
        "axis": axis,
        "sizes": [r[axis] for r in results],
        "scales": [r["scale"] for r in results],
        "full": full,
        "stages": stages,
    }


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(fitted: dict[str, Any]) -> str:
    sizes = " / ".join(str(s) for s in fitted["sizes"])
    scales = " / ".join(str(s) for s in fitted["scales"])
    lines = [
        f"**{fitted['benchmark']}**: scales {scales} ({fitted['axis']} {sizes}; at 1.0: {fitted['full']})",
        "",
        "| stage | scales | seconds | exponent | CPU exponent | peak RSS MB | RSS exponent | projected at 1.0 | linear at 1.0 |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, s in fitted["stages"].items():
        flag = " **>1.15**" if s["exponent"] is not None and s["exponent"] > LINEAR_BAR else ""
        rss = " / ".join("-" if r is None else f"{r:.0f}" for r in s["peak_rss_mb"])
        lines.append(
            f"| {name} | {s['scales']} | {' / '.join(f'{v:.1f}' for v in s['seconds'])} | "
            f"{number(s['exponent'])}{flag} | {number(s['cpu_exponent'])} | {rss} | {number(s['rss_exponent'])} | "
            f"{s['projected_seconds']:.0f} s | {s['linear_seconds']:.0f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="scale.json files (any benchmarks, any scales)")
    parser.add_argument("--json", type=Path, help="also write the fits here")
    args = parser.parse_args(argv)
    fits = [fit(results) for results in load(args.files).values()]
    for fitted in fits:
        print(table(fitted))
        print()
    if args.json:
        args.json.write_text(json.dumps(fits, indent=1) + "\n")
    return fits


if __name__ == "__main__":
    main()
