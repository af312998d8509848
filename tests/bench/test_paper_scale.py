"""bench/paper_scale.py at a very small scale (CogCanvas, 6 prompts): the synthetic source, the real build,
the trivial adapter's submission and its validation, each in a child process; scale.json's schema and the
design's counts. bench/fit_exponents.py on two made-up scale.json files.

Tier: e2e (paper_scale starts each stage as a Python subprocess: `idbench build`, `generate`, `validate`);
no model is loaded. About 10 s on a 2-core machine. The fit test is in the fast tier."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import fit_exponents  # noqa: E402
import paper_scale  # noqa: E402

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


@pytest.mark.e2e
def test_a_small_cogcanvas_is_built_generated_and_validated_with_the_designs_counts(tmp_path):
    out = tmp_path / "scale"
    stages = ("source", "build", "generate", "validate")
    paper_scale.main(
        ["--benchmark", "cogcanvas", "--scale", "0.01", "--prompts", "6", "--out", str(out)]
        + ["--stages", ",".join(stages)]
    )

    result = json.loads((out / "scale.json").read_text())
    assert {"benchmark", "scale", "prompts", "references", "images", "stages"} <= set(result)
    assert result["benchmark"] == "cogcanvas" and result["scale"] == 0.01
    assert list(result["stages"]) == list(stages)
    for record in result["stages"].values():
        assert record["seconds"] > 0 and record["cpu_seconds"] >= 0 and record["peak_rss_mb"] > 0
    # The design at 1 %: the minimum entities of each kind (5 persons for groups of 5), round(1 % of 1,952)
    # images over them, the prompts asked for, one seed each; pHash dedup dropped none of the synthetic images.
    plan = paper_scale.design("cogcanvas", 0.01, 6)
    assert plan["entities"] == {"person": 5, "object": 4, "fashion": 2, "background": 2}
    assert plan["references"] == 20
    assert (result["prompts"], result["references"], result["images"]) == (6, 20, 6)
    built = json.loads((out / "data" / "build_info.json").read_text())
    assert built["cells"]["entities by kind"] == plan["entities"]


def test_the_fit_finds_the_exponent_and_projects_to_the_papers_size(tmp_path):
    files = []
    for scale, images in ((0.05, 68), (0.1, 136), (0.2, 272)):
        stages = {
            "linear": {"seconds": 2.0 * images, "cpu_seconds": 2.0 * images, "peak_rss_mb": 500.0},
            "quadratic": {"seconds": 0.01 * images**2, "cpu_seconds": 0.01 * images**2, "peak_rss_mb": 500.0},
        }
        path = tmp_path / f"cogcanvas-{scale}.json"
        path.write_text(
            json.dumps(
                {
                    "benchmark": "cogcanvas",
                    "scale": scale,
                    "prompts": images,
                    "references": 2 * images,
                    "images": images,
                    "stages": stages,
                }
            )
        )
        files.append(str(path))
    (fitted,) = fit_exponents.main(files)
    assert fitted["axis"] == "images" and fitted["full"] == 1361
    assert fitted["stages"]["linear"]["exponent"] == pytest.approx(1.0)
    assert fitted["stages"]["quadratic"]["exponent"] == pytest.approx(2.0)
    assert fitted["stages"]["linear"]["projected_seconds"] == pytest.approx(2.0 * 1361)
    assert fitted["stages"]["quadratic"]["projected_seconds"] == pytest.approx(0.01 * 1361**2)
    assert fitted["stages"]["linear"]["rss_exponent"] == pytest.approx(0.0)
