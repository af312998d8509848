"""Resampling designs (evaluate_pkg/functional/bootstrap.py) and paired comparisons (idbench compare).

Coverage is measured against the truth of a simulation (the population mean, 0), never against the
code's own output: seeded datasets with variance at every level of each benchmark's design.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.compare import CompareError, Run, compare_runs, refusal
from idbench.evaluate_pkg.functional.bootstrap import (
    cluster_draws,
    design_ci,
    design_factors,
    design_weights,
    holm,
    paired_difference,
    weighted_mean_replicates,
)

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

DATASETS, RESAMPLES = 400, 1000


def coverage(units, prompts, factor_names, values, counts=None) -> float:
    """Share of the simulated datasets (columns of ``values``, one row per prompt) whose nominal 95 %
    percentile interval under ``factor_names`` holds the true mean 0. One set of draws serves every
    dataset (each dataset's interval is still an ordinary seeded bootstrap of it)."""
    counts = np.ones(len(prompts)) if counts is None else counts
    weights = design_weights(design_factors(units, prompts, factor_names), RESAMPLES, seed=0)
    replicates = weighted_mean_replicates(values * counts[:, None], counts, [weights])
    low, high = np.quantile(replicates, [0.025, 0.975], axis=0)
    return float(np.mean((low <= 0) & (0 <= high)))


def charis_like(rng):
    """29 subjects x 7 prompts (the CHARIS sample's shape), equal subject and prompt variance."""
    subjects, per = 29, 7
    prompts = [f"p{i:03d}" for i in range(subjects * per)]
    subject = np.repeat(np.arange(subjects), per)
    units = {p: {"subject": [f"s{s}"]} for p, s in zip(prompts, subject)}
    values = rng.normal(size=(subjects, DATASETS))[subject] + rng.normal(size=(len(prompts), DATASETS))
    return prompts, units, values


def collapse_like(rng):
    """75 prompts of 2-10 subjects drawn from 30 reused ones; a prompt's score averages its subjects'
    effects, plus its own."""
    pool, sizes = 30, np.repeat([2, 4, 6, 8, 10], 15)
    members = [rng.choice(pool, s, replace=False) for s in sizes]
    prompts = [f"p{i:02d}" for i in range(len(sizes))]
    units = {p: {"subject": [f"s{m}" for m in ms]} for p, ms in zip(prompts, members)}
    effects = rng.normal(size=(pool, DATASETS))
    values = np.stack([effects[ms].mean(axis=0) for ms in members]) + 0.5 * rng.normal(size=(len(prompts), DATASETS))
    return prompts, units, values


def cogcanvas_like(rng):
    """120 prompts of 1-3 persons from 40 identities, each with an item from 25, on one of 15 backgrounds."""
    n = 120
    persons = [rng.choice(40, rng.integers(1, 4), replace=False) for _ in range(n)]
    items = [rng.choice(25, len(p), replace=True) for p in persons]
    backgrounds = rng.integers(0, 15, n)
    prompts = [f"p{i:03d}" for i in range(n)]
    units = {
        p: {"identity": [f"i{x}" for x in ps], "item": [f"t{x}" for x in its], "background": [f"b{b}"]}
        for p, ps, its, b in zip(prompts, persons, items, backgrounds)
    }
    a, t, b = rng.normal(size=(40, DATASETS)), rng.normal(size=(25, DATASETS)), rng.normal(size=(15, DATASETS))
    values = np.stack([a[ps].mean(0) + t[its].mean(0) + b[bg] for ps, its, bg in zip(persons, items, backgrounds)])
    return prompts, units, values + rng.normal(size=(n, DATASETS))


@pytest.mark.parametrize(
    "benchmark, make", [("charis", charis_like), ("identity-collapse", collapse_like), ("cogcanvas", cogcanvas_like)]
)
def test_each_benchmarks_design_reaches_nominal_coverage_where_prompts_alone_do_not(benchmark, make):
    prompts, units, values = make(np.random.default_rng(7))
    design = get_benchmark(benchmark).resampling.factor_names
    before, after = coverage(units, prompts, ("prompt",), values), coverage(units, prompts, design, values)
    print(f"{benchmark}: prompts {before:.3f}, {design} {after:.3f}")
    assert after >= 0.90
    assert before <= 0.80  # the interval the aggregates had: far below its nominal 95 %


def test_intervals_stay_inside_the_data_range_without_losing_coverage():
    """A score near its ceiling on the crossed CogCanvas design (each image 1 or 0: a person found or
    not, 93 % found): the first-order mean's negative weights put interval ends above 1 on many
    datasets; held to the range of the prompt means, every interval lies in [0, 1] and covers the
    truth (the generating process's mean, by Monte Carlo) at least as often."""
    rng = np.random.default_rng(11)
    prompts, units, values = cogcanvas_like(rng)
    link = lambda z: 1 / (1 + np.exp(-(2.9 + 0.6 * z)))  # noqa: E731 -- values' sd is about 1.7
    binary = (rng.uniform(size=values.shape) < link(values)).astype(float)
    truth = float(np.mean(link(cogcanvas_like(np.random.default_rng(99))[2])))  # 48,000 fresh draws
    weights = design_weights(
        design_factors(units, prompts, get_benchmark("cogcanvas").resampling.factor_names), RESAMPLES, seed=0
    )
    counts = np.ones(len(prompts))
    held = weighted_mean_replicates(binary, counts, [weights])
    free = binary.mean(axis=0) + (weights - 1) @ (binary - binary.mean(axis=0)) / len(prompts)
    low_h, high_h = np.quantile(held, [0.025, 0.975], axis=0)
    low_f, high_f = np.quantile(free, [0.025, 0.975], axis=0)
    assert (high_f > 1).mean() > 0.2  # the problem: interval ends no image could produce
    assert ((low_h >= 0) & (high_h <= 1)).all()
    cover_h, cover_f = np.mean((low_h <= truth) & (truth <= high_h)), np.mean((low_f <= truth) & (truth <= high_f))
    print(f"ceiling score: coverage {cover_f:.3f} free, {cover_h:.3f} held to the data range")
    assert cover_h >= cover_f and cover_h >= 0.90
    # A count (extra persons, mostly 0) cannot have a negative bound.
    extra = (rng.uniform(size=values.shape) > link(values)).astype(float)
    ci = design_ci(extra[:, 0], prompts, units, get_benchmark("cogcanvas").resampling.factor_names, RESAMPLES, seed=0)
    assert 0.0 <= ci.low <= ci.mean <= ci.high <= 1.0


def test_design_ci_is_the_vectorised_simulation_for_one_dataset():
    prompts, units, values = charis_like(np.random.default_rng(1))
    column = values[:, 0]
    ci = design_ci(np.repeat(column, 3), np.repeat(prompts, 3), units, ("subject",), RESAMPLES, seed=0)
    weights = design_weights(design_factors(units, prompts, ("subject",)), RESAMPLES, seed=0)
    replicates = column.mean() + (weights - 1) @ (column - column.mean()) / len(column)
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(replicates, [0.025, 0.975])), abs=1e-12)
    assert ci.n == 3 * len(prompts) and ci.n_clusters == len(prompts) and ci.n_levels == {"subject": 29}


def test_nested_design_is_the_explicit_resampling_of_subjects():
    """Brute force: rebuild each resampled dataset by repeating each drawn subject's rows."""
    rng = np.random.default_rng(2)
    subject_of = {f"p{i}": f"s{i // 3}" for i in range(12)}  # 4 subjects x 3 prompts, equal sizes
    prompts = sorted(subject_of)
    values = rng.normal(size=len(prompts))
    units = {p: {"subject": [s]} for p, s in subject_of.items()}
    weights = design_weights(design_factors(units, prompts, ("subject",)), 50, seed=5)
    draws = cluster_draws(4, 50, seed=5)  # the first factor draws exactly as the cluster bootstrap
    for w, counts in zip(weights, draws):
        rows = [v for p, v in zip(prompts, values) for _ in range(counts[int(subject_of[p][1:])])]
        expected = np.mean(rows)
        got = values.mean() + (w - 1) @ (values - values.mean()) / len(values)
        assert got == pytest.approx(expected, abs=1e-12)


def test_crossed_weights_have_the_moments_of_independent_level_draws():
    """E[w] = 1 and Cov(w) = sum over factors of M C M^T, M the 0/1 membership of the observations in
    the factor's K levels and C = I - 1/K the covariance of multinomial(K, 1/K) draw counts."""
    units = {"a": {"s": ["x", "y"]}, "b": {"s": ["y"]}, "c": {"s": ["z"]}, "d": {"s": []}}
    prompts = ["a", "b", "c", "d"]
    weights = design_weights(design_factors(units, prompts, ("prompt", "s")), 200_000, seed=3)
    multinomial = lambda k: np.eye(k) - 1 / k  # noqa: E731
    subjects = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]])  # a: x, y; b: y; c: z; d: none
    expected = multinomial(4) + subjects @ multinomial(3) @ subjects.T
    assert weights.mean(axis=0) == pytest.approx(np.ones(4), abs=0.01)
    assert np.cov(weights, rowvar=False) == pytest.approx(expected, abs=0.02)


def test_one_level_design_agrees_with_scipy_bootstrap():
    values = np.random.default_rng(4).normal(size=40)
    ids = [f"p{i:02d}" for i in range(40)]
    ours = design_ci(values, ids, {}, ("prompt",), n_resamples=20_000, seed=1)
    ref = scipy_stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=20_000, rng=np.random.default_rng(0)
    )
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.05 * width)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.05 * width)


def test_design_ci_edges():
    units = {"p1": {"subject": ["s1"]}, "p2": {"subject": ["s1"]}}
    lone = design_ci([0.1, 0.3, float("nan")], ["p1", "p2", "p2"], units, ("subject",))
    assert lone.mean == pytest.approx(0.2) and np.isnan(lone.low) and lone.n_nan == 1  # one subject: no interval
    empty = design_ci([float("nan")], ["p1"], units, ("subject",))
    assert empty.n == 0 and np.isnan(empty.mean)


def test_holm_matches_a_hand_worked_family():
    # sorted 0.01, 0.02, 0.03, 0.5 -> 4*0.01, 3*0.02, max(2*0.03, 0.06), max(0.5, 0.06)
    assert holm([0.03, 0.01, 0.5, 0.02, float("nan")])[:4] == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert np.isnan(holm([0.03, float("nan")])[1])


def _paired_runs(rng, gap, subjects=29, per=7, seeds=3):
    """Two models on CHARIS-shaped prompts: shared subject and prompt effects (what pairing cancels),
    and model-specific subject and prompt effects (what the test must weigh)."""
    n = subjects * per
    subject = np.repeat(np.arange(subjects), per)
    shared = rng.normal(size=subjects)[subject] + rng.normal(size=n)
    own = lambda: 0.3 * rng.normal(size=subjects)[subject] + 0.3 * rng.normal(size=n)  # noqa: E731
    a = np.repeat(shared + own(), seeds) + 0.2 * rng.normal(size=n * seeds)
    b = np.repeat(shared + own() + gap, seeds) + 0.2 * rng.normal(size=n * seeds)
    prompts = [f"p{i:03d}" for i in range(n)]
    return a, b, np.repeat(prompts, seeds), {p: {"subject": [f"s{s}"]} for p, s in zip(prompts, subject)}


def test_paired_test_has_its_size_and_finds_a_planted_gap():
    rng = np.random.default_rng(11)
    nulls = [paired_difference(*_paired_runs(rng, 0.0), ("subject",), 1000, seed=r).p_value for r in range(200)]
    size = np.mean(np.array(nulls) < 0.05)
    found = [paired_difference(*_paired_runs(rng, 0.4), ("subject",), 1000, seed=r) for r in range(50)]
    power = np.mean([d.p_value < 0.05 and d.diff > 0 for d in found])
    print(f"size {size:.3f}, power {power:.2f}")
    assert 0.02 <= size <= 0.09
    assert power >= 0.9
    # the same data tested as if prompts were independent: far too many false gaps
    prompt_level = [
        paired_difference(*_paired_runs(rng, 0.0)[:3], {}, ("prompt",), 1000, seed=r).p_value for r in range(100)
    ]
    assert np.mean(np.array(prompt_level) < 0.05) > 0.15


def test_paired_difference_of_identical_runs_is_zero_and_not_significant():
    a, _, obs, units = _paired_runs(np.random.default_rng(0), 0.0)
    d = paired_difference(a, a, obs, units, ("subject",))
    assert d.diff == 0 and d.low == 0 and d.high == 0 and d.p_value == 1.0


def _summary(**changes):
    summary = {
        "benchmark": "identity-collapse",
        "build": {"prompts_sha256": "x"},
        "suite_version": "0.2",
        "profile": "tiny",
        "task": "reference",
        "judge": None,
        "submission": {"model": "m"},
        "aggregates": {
            "resampling": {"factors": ["prompt"], "method": "percentile bootstrap over prompts", "prompt_units": {}}
        },
    }
    summary.update(changes)
    return summary


@pytest.mark.parametrize(
    "change, word",
    [
        ({"benchmark": "charis"}, "benchmarks"),
        ({"build": {"prompts_sha256": "y"}}, "builds"),
        ({"suite_version": "0.1"}, "suites"),
        ({"profile": "paper"}, "profiles"),
        ({"judge": {"key": "gpt"}}, "judges"),
    ],
)
def test_compare_refuses_runs_that_are_not_comparable(change, word):
    why = refusal(_summary(), _summary(**change))
    assert why is not None and word in why and "\n" not in why
    empty = pd.DataFrame(columns=["prompt_id", "seed", "metric", "subject", "value"])
    with pytest.raises(CompareError, match=word):
        compare_runs(Run(None, _summary(), empty), Run(None, _summary(**change), empty))


@pytest.mark.slow
def test_real_compare_between_two_scored_runs(tmp_path, capsys):
    """Two tiny-profile runs (plumbing check) of the sample Identity Collapse build, compared from the CLI:
    the blank baseline, and the same with every third image a darker grey (uniform images keep the copy
    check and the feature cache fast)."""
    import shutil

    from PIL import Image

    from idbench.builders.build import build
    from idbench.cli import main
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    build("identity-collapse", out=tmp_path / "data")
    data = load_benchmark_data(tmp_path / "data")
    make_baseline("blank", data, tmp_path / "blank", size=64)
    shutil.copytree(tmp_path / "blank", tmp_path / "darker")
    meta = json.loads((tmp_path / "darker" / "submission.json").read_text())
    (tmp_path / "darker" / "submission.json").write_text(json.dumps({**meta, "model": "darker-grey"}))
    for i, path in enumerate(sorted((tmp_path / "darker" / "images").iterdir())):
        if i % 3 == 0:
            Image.new("RGB", (64, 64), (96, 96, 96)).save(path)
    for name in ("blank", "darker"):
        score_submission(
            tmp_path / name,
            data,
            tmp_path / f"{name}-scores",
            ScoreOptions(profile="tiny", metrics=("clip_t",)),
            cache_dir=tmp_path / "cache",
            progress=False,
        )
    aggregates = json.loads((tmp_path / "blank-scores" / "aggregates.json").read_text())
    assert aggregates["aggregates"]["ci_method"] == "percentile multi-way bootstrap, prompts x subjects (crossed)"
    assert aggregates["aggregates"]["resampling"]["factors"] == ["prompt", "subject"]
    assert len(aggregates["aggregates"]["resampling"]["prompt_units"]) == 75
    assert aggregates["build"]["prompts_sha256"]

    a_dir, b_dir = str(tmp_path / "blank-scores"), str(tmp_path / "darker-scores")
    assert main(["compare", a_dir, b_dir, "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "Holm" in out and "[overall]" in out and "clip_t" in out and "PLUMBING CHECK" in out
    assert out.index("[n_subjects = 2]") < out.index("[n_subjects = 10]")
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    overall = next(r for r in rows if r["table"] == "overall" and r["metric"] == "clip_t")
    a, b = (pd.read_parquet(tmp_path / f"{n}-scores" / "results.parquet") for n in ("blank", "darker"))
    pick = lambda f: f[(f["metric"] == "clip_t") & (f["subject"] == "")].set_index(["prompt_id", "seed"])["value"]  # noqa: E731
    assert overall["diff"] == pytest.approx((pick(b) - pick(a)).mean())
    assert overall["ci_low"] <= overall["diff"] <= overall["ci_high"] and overall["verdict"] in (
        "A better",
        "B better",
        "tied",
    )
    assert any(r["table"].startswith("n_subjects = ") for r in rows)
    import idbench

    result = idbench.compare(a_dir, b_dir)
    frame = result.frame()  # the same from Python
    assert frame.loc[(frame["table"] == "overall") & (frame["metric"] == "clip_t"), "diff"].item() == pytest.approx(
        overall["diff"]
    )
    # In a notebook: a one-line repr and an HTML table of the overall rows; the full table stays in .frame()
    n_overall = sum(r["table"] == "overall" for r in rows)
    assert "\n" not in repr(result) and len(repr(result)) < 400 and f"{n_overall} metrics overall" in repr(result)
    html = result._repr_html_()
    assert html.count("<tr>") == n_overall + 1 and "n_subjects = " not in html and ".frame()" in html
    # a run against itself: no difference, tied
    assert main(["compare", a_dir, a_dir]) == 0 and "tied" in capsys.readouterr().out

    assert main(["compare", a_dir, str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert "not a results folder" in err and len(err.strip().splitlines()) == 1


def test_charis_aggregates_resample_subjects_and_record_it():
    from idbench.evaluate_pkg.report import aggregate, interval_text

    spec = get_benchmark("charis")
    rng = np.random.default_rng(5)
    prompts = pd.DataFrame(
        {
            "prompt_id": [f"p{i:02d}" for i in range(28)],
            "subject_id": [f"s{i // 7}" for i in range(28)],
            "type": ["cat"] * 21 + ["dog"] * 7,
            "style": ["photo"] * 28,
        }
    )
    values = rng.normal(size=(28, 2))
    results = pd.DataFrame(
        [
            {"prompt_id": p, "seed": s, "metric": "dino_sim", "subject": "", "value": values[i, s]}
            for i, p in enumerate(prompts["prompt_id"])
            for s in range(2)
        ]
    )
    agg = aggregate(results, prompts, spec)
    assert agg["ci_method"] == "percentile bootstrap, subjects (prompts nested)" and agg["ci"]["unit"] == "subject"
    assert agg["resampling"]["prompt_units"]["p08"] == {"subject": ["s1"]}
    # independent reference: the plain percentile bootstrap of the 4 subject means (equal sizes), same draws
    means = values.reshape(4, 14).mean(axis=1)
    replicates = cluster_draws(4, 1000, seed=0) @ means / 4
    overall = agg["overall"]["dino_sim"]
    assert (overall["ci_low"], overall["ci_high"]) == pytest.approx(tuple(np.quantile(replicates, [0.025, 0.975])))
    assert overall["n_units"] == {"subject": 4}
    dog = agg["breakdowns"]["type"]["dog"]["dino_sim"]  # one subject: nothing to resample between
    assert dog["ci_low"] is None and interval_text(dog, "raw") == "n/a (1 subject)"


# --- malformed results folders: one line naming folder, file and field, exit 2 (issue 29, item 7) ---------


def _write_run(folder: Path, summary: dict | None = None, results: pd.DataFrame | None = None) -> Path:
    """A small results folder of identity-collapse: two prompts, two seeds, clip_t (a valid one by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    if summary is None:
        summary = _summary()
    (folder / "aggregates.json").write_text(json.dumps(summary))
    if results is None:
        results = pd.DataFrame(
            [
                {"prompt_id": p, "seed": s, "metric": "clip_t", "subject": "", "value": 0.2 + 0.01 * i}
                for i, (p, s) in enumerate([("01", 0), ("01", 1), ("02", 0), ("02", 1)])
            ]
        )
    results.to_parquet(folder / "results.parquet")
    return folder


def _rows(**changes) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "prompt_id": ["01", "01", "02"],
            "seed": [0, 1, 0],
            "metric": ["clip_t"] * 3,
            "subject": [""] * 3,
            "value": [0.2, 0.3, 0.4],
        }
    )
    for column, values in changes.items():
        if values is None:
            frame = frame.drop(columns=column)
        else:
            frame[column] = values
    return frame


def _json(folder: Path, text: str | bytes) -> None:
    path = folder / "aggregates.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)


def _parquet(folder: Path, data: bytes | None) -> None:
    path = folder / "results.parquet"
    path.unlink()
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)


# (id, how the folder is broken, words the line must hold: the file or folder, and the field)
MALFORMED = [
    ("no-folder", lambda f: shutil.rmtree(f), ("no such folder",)),
    ("a-file", lambda f: (shutil.rmtree(f), f.write_text("x")), ("not a folder",)),
    ("no-aggregates", lambda f: (f / "aggregates.json").unlink(), ("aggregates.json",)),
    ("no-parquet", lambda f: (f / "results.parquet").unlink(), ("results.parquet",)),
    (
        "aggregates-a-folder",
        lambda f: ((f / "aggregates.json").unlink(), (f / "aggregates.json").mkdir()),
        ("aggregates.json",),
    ),
    ("aggregates-empty", lambda f: _json(f, ""), ("aggregates.json", "unreadable")),
    ("aggregates-not-json", lambda f: _json(f, "{benchmark: x"), ("aggregates.json", "unreadable")),
    ("aggregates-not-utf8", lambda f: _json(f, b'{"benchmark": "\xff\xfe"}'), ("aggregates.json", "unreadable")),
    ("aggregates-too-deep", lambda f: _json(f, "[" * 100_000 + "]" * 100_000), ("aggregates.json", "unreadable")),
    ("aggregates-a-list", lambda f: _json(f, "[1, 2]"), ("aggregates.json", "not a JSON object")),
    (
        "no-benchmark",
        lambda f: _write_run(f, {k: v for k, v in _summary().items() if k != "benchmark"}),
        ("field benchmark", "missing"),
    ),
    ("benchmark-a-number", lambda f: _write_run(f, _summary(benchmark=7)), ("field benchmark", "int")),
    ("unknown-benchmark", lambda f: _write_run(f, _summary(benchmark="no-such-bench")), ("field benchmark", "unknown")),
    ("aggregates-field-a-list", lambda f: _write_run(f, _summary(aggregates=[1])), ("field aggregates", "list")),
    (
        "resampling-a-text",
        lambda f: _write_run(f, _summary(aggregates={"resampling": "prompt"})),
        ("aggregates.resampling",),
    ),
    (
        "factors-not-names",
        lambda f: _write_run(f, _summary(aggregates={"resampling": {"factors": [1], "method": "m"}})),
        ("aggregates.resampling.factors",),
    ),
    (
        "breakdown-a-list",
        lambda f: _write_run(f, _summary(aggregates={"breakdown_prompts": [["01"]]})),
        ("aggregates.breakdown_prompts",),
    ),
    ("submission-a-text", lambda f: _write_run(f, _summary(submission="m")), ("field submission",)),
    ("parquet-garbage", lambda f: _parquet(f, b"not a parquet file at all"), ("results.parquet", "unreadable")),
    ("parquet-empty", lambda f: _parquet(f, b""), ("results.parquet", "unreadable")),
    ("parquet-a-folder", lambda f: _parquet(f, None), ("results.parquet",)),
    (
        "parquet-truncated",
        lambda f: (f / "results.parquet").write_bytes((f / "results.parquet").read_bytes()[:-40]),
        ("results.parquet", "unreadable"),
    ),
    ("no-value-column", lambda f: _write_run(f, results=_rows(value=None)), ("results.parquet", "value")),
    (
        "values-as-text",
        lambda f: _write_run(f, results=_rows(value=["0.2", "0.3", "x"])),
        ("results.parquet", "value", "numbers"),
    ),
    (
        "seeds-as-text",
        lambda f: _write_run(f, results=_rows(seed=["0", "1", "0"])),
        ("results.parquet", "seed", "integers"),
    ),
    (
        "prompt-ids-as-numbers",
        lambda f: _write_run(f, results=_rows(prompt_id=[1, 1, 2])),
        ("results.parquet", "prompt_id", "text"),
    ),
    (
        "odd-metric-name",
        lambda f: _write_run(f, results=_rows(metric=["clip_t", "clip_t", "clip_t\x1b[2J"])),
        ("results.parquet", "metric", "control characters", "\\x1b"),
    ),
    (
        "plus-infinity",
        lambda f: _write_run(f, results=_rows(value=[0.2, float("inf"), 0.4])),
        ("results.parquet", "value", "infinite"),
    ),
    (
        "minus-infinity",
        lambda f: _write_run(f, results=_rows(value=[float("-inf"), 0.3, 0.4])),
        ("results.parquet", "value", "infinite"),
    ),
    (  # finite, but the sums overflow: was "A better" at p < 0.001 (issue 40, item 7f)
        "overflowing-values",
        lambda f: _write_run(f, results=_rows(value=[1e308, 1e308, 1e308])),
        ("results.parquet", "value", "beyond +-1e+15", "1e+308", "overflow"),
    ),
    (
        "one-huge-value",
        lambda f: _write_run(f, results=_rows(value=[0.2, -1e300, 0.4])),
        ("results.parquet", "value", "beyond +-1e+15", "-1e+300"),
    ),
    (
        "duplicate-rows",
        lambda f: _write_run(f, results=pd.concat([_rows(), _rows()], ignore_index=True)),
        ("results.parquet", "more than one row"),
    ),
]


@pytest.mark.parametrize("side", ["A", "B"])
@pytest.mark.parametrize("case, breaks, words", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_compare_refuses_a_malformed_results_folder_in_one_line(tmp_path, capsys, case, breaks, words, side):
    from idbench.cli import main

    good = _write_run(tmp_path / "good")
    bad = _write_run(tmp_path / "bad")
    breaks(bad)
    argv = ["compare", str(good), str(bad)] if side == "B" else ["compare", str(bad), str(good)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("idbench compare: error: "), err
    assert str(bad) in err, err  # the folder (or a file in it) is named
    for word in words:
        assert word in err, (word, err)


def test_breakdown_labels_that_look_like_digits_compare_as_text(tmp_path, capsys):
    """str.isdigit() is true for a superscript two, which int() cannot read: a label "\u00b2" edited into a
    results file sorted as a number and ended the comparison in a traceback (issue 29)."""
    from idbench.cli import main

    cells = {"breakdown_prompts": {"n_subjects": {"\u00b2": ["01"], "2": ["01", "02"], "\u0663": ["02"]}}}
    summary = _summary(aggregates={**_summary()["aggregates"], **cells})
    a, b = _write_run(tmp_path / "a", summary), _write_run(tmp_path / "b", summary)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "n_subjects = 2" in out and "n_subjects = \u00b2" in out


def test_compare_of_two_valid_small_folders_and_nan_values_still_works(tmp_path, capsys):
    from idbench.cli import main

    a = _write_run(tmp_path / "a")
    b = _write_run(
        tmp_path / "b", results=_rows(value=[0.25, float("nan"), 0.45])
    )  # NaN: undefined for that sample, left out
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "clip_t" in out and "[overall]" in out


def test_values_that_overflow_in_code_are_refused_not_ranked():
    """A Run built in code skips the file checks; the means overflowing to infinity still end in one
    CompareError, never a verdict (issue 40, item 7f)."""
    frame = _rows(value=[0.2, 0.3, 0.4])
    huge = _rows(value=[1e308, 1e308, 1e308])
    for a, b in ((frame, huge), (huge, frame)):
        with pytest.raises(CompareError, match="overflow to infinity") as error:
            compare_runs(Run(None, _summary(), a), Run(None, _summary(), b))
        assert "\n" not in str(error.value) and "'clip_t'" in str(error.value)


def test_compare_prints_names_and_labels_from_the_files_with_control_characters_escaped(tmp_path, capsys):
    """Model names, the resampling method and breakdown labels come from the runs' aggregates.json: a
    terminal escape in them is printed escaped (issue 40, item 7f)."""
    import unicodedata

    from idbench.cli import main
    from idbench.evaluate_pkg.compare import compare

    evil = "\x1b[2J\x1b[31mEVIL\x1b]0;pwned\x07\u202e"
    aggregates = {
        "resampling": {"factors": ["prompt"], "method": "bootstrap\x1b[5m", "prompt_units": {}},
        "breakdown_prompts": {"axis\x1b[1m": {"cell\x1b[7m": ["01", "02"]}},
    }
    a = _write_run(tmp_path / "a", _summary(aggregates=aggregates))
    b = _write_run(tmp_path / "b", _summary(submission={"model": evil}, aggregates=aggregates))
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    raw = [ch for ch in out if unicodedata.category(ch) in ("Cc", "Cf") and ch != "\n"]
    assert not raw, raw
    assert "B = \\x1b[2J\\x1b[31mEVIL\\x1b]0;pwned\\x07\\u202e;" in out
    assert "from bootstrap\\x1b[5m (" in out and "[axis\\x1b[1m = cell\\x1b[7m]" in out
    shown = repr(compare(a, b))
    assert "\x1b" not in shown and "\\x1b[2J" in shown


def test_compare_never_prints_a_negative_zero():
    from idbench.evaluate_pkg.compare import _num

    assert _num(-0.00004) == "0.0000" and _num(-0.00004, 100.0) == "0.00"
    assert _num(-0.004, 100.0) == "-0.40" and _num(None) == "n/a" and _num(0.12345) == "0.1235"


def test_p_all_is_holm_over_every_table_and_a_disagreeing_tie_is_explained(tmp_path):
    from idbench.evaluate_pkg.compare import Comparison, format_comparison, load_run

    def holm_by_hand(ps):  # step-down: the k-th smallest times (m - k), made monotone, capped at 1
        order = sorted(range(len(ps)), key=lambda i: ps[i])
        out, running = [0.0] * len(ps), 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
            out[i] = running
        return out

    run = load_run(_write_run(tmp_path / "a"))
    other = Run(None, run.summary, run.results.assign(value=run.results["value"] + 0.01))
    c = compare_runs(run, other)
    ps = [r["p"] for r in c.rows]
    assert [r["p_all"] for r in c.rows] == pytest.approx(holm_by_hand(ps))
    rows = [
        dict(c.rows[0], verdict="tied", ci_low=0.01, ci_high=0.05, p_holm=0.2, p_all=0.3),
        dict(c.rows[0], verdict="tied", ci_low=-0.01, ci_high=0.05),
    ]
    text = format_comparison(Comparison(**{**c.__dict__, "rows": rows}))
    starred = [line for line in text.splitlines() if line.endswith("tied *")]
    assert len(starred) == 1 and "the CI excludes 0 but the verdict is tied" in text and "p_all" in text
