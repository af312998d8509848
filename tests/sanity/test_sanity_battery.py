"""The metric sanity battery (docs/metric-sanity.md): what each metric scores on pictures whose right
answer is known by construction.

Every benchmark's sample build is scored once per module (profile ``tiny``: the papers' architectures
with random weights, plus the real dlib face model) on the model-free baselines, and the judged
metrics with scripted judges (tests/sanity/judges.py). Then each row of PROPERTIES is checked. A row
is a (benchmark, pictures, metric, property) claim that holds by construction (identical pixels give
identical features, a rate is monotone in its threshold, a scripted judge's answers fix the score) or
by the real face model; what random weights make meaningless is said in the doc, not asserted.

The measured values and every row's outcome go to a JSON file ($IDBENCH_SANITY_RESULTS, default
tests/artifacts/metric-sanity.json); ``scripts/metric_sanity_table.py`` renders the doc's tables from
it, and the last test fails when the committed doc differs from that rendering.

Rows with ``depends`` state what an item of issue 11 will make true; they are strict xfails until
that item's branch is merged, so they flip (XPASS fails) the moment it is.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from judges import judges

from idbench.builders.build import build
from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import Models, ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.evaluate_pkg.runner import score_submission

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "metric-sanity.md"
SCRIPT = ROOT / "scripts" / "metric_sanity_table.py"
RESULTS = Path(os.environ.get("IDBENCH_SANITY_RESULTS", ROOT / "tests" / "artifacts" / "metric-sanity.json"))
PROFILE = "tiny"

# What is built and scored: (prompts, picture size, baselines). CogCanvas pictures are 512 px so that
# dlib's HOG finds most pasted faces; each face-less picture (blank, noise, background) costs dlib's
# CNN fallback ~3 s, so CogCanvas keeps 8 prompts (2 to 5 persons). ``copy`` of a multi-subject prompt
# is the collage, pixel for pixel (tests/scoring/test_baselines.py), so it is scored only on CHARIS.
BASELINES = ("blank", "noise", "background", "clone", "swap", "impostor", "collage")
RUNS: dict[str, tuple[int | None, int, tuple[str, ...]]] = {
    "charis": (29, 128, (*BASELINES, "copy")),  # one prompt per subject
    "cogcanvas": (8, 512, (*BASELINES, "crossed", "crowd", "stranger")),
    # Its recipe fixes a grid of 75 prompts (5 group sizes x 3 scenes x 5); the first 2 of each of the
    # 15 cells are scored (every group size in every scene; the whole grid took 55 % of the battery).
    "identity-collapse": (30, 128, BASELINES),
}
FIXED_GRID = {"identity-collapse": ("n_subjects", "scene")}  # benchmark -> the columns of its grid's cells
# Judged runs: (benchmark, picture, judge, metrics). Scripted judges never look at the picture; it is
# named for what the judge's answers would be true of.
# attr_vqa.binding: the T2I track's Attr-VQA; the _itt twins are the ranked ones (a failed answer not confirmed).
VQA = (
    "attr_vqa",
    "attr_vqa_itt",
    "igc",
    "igc_itt",
    "attr_vqa_paired",
    "igc_paired",
    "attr_vqa.binding",
    "attr_vqa.binding_itt",
)
JUDGED = (
    ("charis", "copy", "always-yes", ("charis_score",)),
    ("charis", "copy", "always-no", ("charis_score",)),
    ("charis", "copy", "truth", ("charis_score", "charis_score_itt", "prompt_adherence", "charis_overall")),
    ("charis", "copy", "back-view", ("charis_score", "charis_score_itt")),
    ("cogcanvas", "blank", "always-yes", VQA),
    ("cogcanvas", "blank", "always-no", VQA),
    ("cogcanvas", "collage", "truth", VQA),
)


SECONDS: dict[str, float] = {}  # scoring time per run, kept in the results file (not in the doc)

# --- scoring -------------------------------------------------------------------------------------


@dataclass
class Run:
    overall: dict  # metric -> aggregate statistics (mean, n, n_nan, ...)
    rows: pd.DataFrame  # results.parquet
    notes: dict
    sizes: dict  # prompt_id -> its number of subjects (the spec's group-size axis; 1 without one)

    def images(self, metric: str) -> pd.Series:
        """The per-image values of ``metric``, indexed by (prompt_id, seed)."""
        rows = self.rows[(self.rows["metric"] == metric) & (self.rows["subject"] == "")]
        return rows.set_index(["prompt_id", "seed"])["value"].sort_index()

    def mean(self, metric: str) -> float:
        value = self.overall.get(metric, {}).get("mean")
        return float("nan") if value is None else value


def _first_per_cell(data, columns: tuple[str, ...], keep: int):
    """``data`` with its prompts cut to the first ``keep`` of each cell of ``columns`` (build order)."""
    seen: dict[tuple, int] = {}
    rows = []
    for index, prompt in enumerate(data.prompts):
        cell = tuple(prompt[c] for c in columns)
        seen[cell] = seen.get(cell, 0) + 1
        if seen[cell] <= keep:
            rows.append(index)
    return dataclasses.replace(data, tables={**data.tables, "prompts": data.prompts.select(rows)})


def _truth(data) -> dict[str, str]:
    return {q["question_id"]: q["answer"] for p in data.prompt_rows.values() for q in p.get("questions") or ()}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, shared_features) -> dict[str, dict[str, Run]]:
    """benchmark -> run label ("collage", "blank+always-no", ...) -> Run; one feature cache for all (the
    session's: the leaderboard tests' stores score some of the same Identity Collapse pictures)."""
    root = tmp_path_factory.mktemp("sanity")
    cache = shared_features
    models = Models(ScoreOptions(profile=PROFILE))
    out: dict[str, dict[str, Run]] = {}

    def score(benchmark, data, baseline, label, options):
        started = time.perf_counter()
        target = root / "scores" / benchmark / label
        summary = score_submission(
            root / benchmark / baseline, data, target, options, cache_dir=cache, progress=False, models=models
        )
        axis = data.spec.group_size_axis
        sizes = {p: int(row[axis]) if axis else 1 for p, row in data.prompt_rows.items()}
        out[benchmark][label] = Run(
            summary["aggregates"]["overall"], pd.read_parquet(target / "results.parquet"), summary["notes"], sizes
        )
        SECONDS[f"{benchmark}/{label}"] = round(time.perf_counter() - started, 1)

    datas = {}
    for benchmark, (n_prompts, size, baselines) in RUNS.items():
        grid = FIXED_GRID.get(benchmark)
        build(benchmark, out=root / "data" / benchmark, n_prompts=None if grid else n_prompts)
        data = load_benchmark_data(root / "data" / benchmark, cache_dir=str(root / "hf"))
        if grid:
            cells = len({tuple(p[c] for c in grid) for p in data.prompts})
            data = _first_per_cell(data, grid, n_prompts // cells)
            assert len(data.prompt_rows) == n_prompts, f"{benchmark}: {n_prompts} prompts are not whole cells"
        datas[benchmark] = data
        out[benchmark] = {}
        for baseline in baselines:
            make_baseline(baseline, data, root / benchmark / baseline, size=size)
            # encoder metrics only: the judged ones run below with each scripted judge
            encoders = tuple(m.name for m in data.spec.metric_suite if not m.judged and DEFAULT_TASK in m.tasks)
            score(benchmark, data, baseline, baseline, ScoreOptions(profile=PROFILE, metrics=encoders))
    for benchmark, picture, judge, metrics in JUDGED:
        scripted = judges(_truth(datas[benchmark]))[judge]
        score(
            benchmark,
            datas[benchmark],
            picture,
            f"{picture}+{judge}",
            ScoreOptions(profile=PROFILE, metrics=metrics, judge=scripted),
        )
    return out


@pytest.fixture(scope="module")
def battery(measured) -> dict:
    """Every property checked once, the results written to RESULTS (what the doc is rendered from)."""
    checks = {}
    for prop in PROPERTIES:
        try:
            passed, shown = prop.check(measured[prop.benchmark])
        except Exception as err:  # a check that cannot run (a metric missing) is a failed property
            passed, shown = False, f"error: {type(err).__name__}: {err}"
        checks[prop.id] = {**prop.record(), "passed": bool(passed), "measured": shown}
    values = {
        b: {
            label: {m: (None if math.isnan(r.mean(m)) else round(r.mean(m), 6)) for m in sorted(r.overall)}
            for label, r in runs.items()
        }
        for b, runs in measured.items()
    }
    result = {
        "profile": PROFILE,
        "face_model": "dlib (real weights)",
        "runs": {b: list(RUNS[b][:2]) for b in RUNS},
        "values": values,
        "properties": list(checks.values()),
        "seconds": SECONDS,
    }
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    # The doc check renders what the script will read back: the file's own (sorted) form.
    return {"checks": checks, "result": json.loads(text)}


# --- the properties ------------------------------------------------------------------------------

Check = Callable[[dict[str, Run]], tuple[bool, str]]


@dataclass(frozen=True)
class Prop:
    benchmark: str
    pictures: str  # the runs it looks at, as the table shows them
    metric: str
    expect: str  # the property, in words
    check: Check
    depends: int | None = None  # the issue 11 item that makes it true (a strict xfail until merged)

    @property
    def id(self) -> str:
        return f"{self.benchmark}:{self.metric}:{self.pictures}:{self.expect}"

    def record(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "pictures": self.pictures,
            "metric": self.metric,
            "expect": self.expect,
            "depends_on": None if self.depends is None else f"issue 11 item {self.depends}",
        }


def _f(x: float) -> str:
    return "NaN" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def _diff(diff: float) -> str:
    """A difference as the doc shows it: float noise below 1e-6 reads as equal, so the table is stable."""
    return "equal (max diff < 1e-6)" if diff <= 1e-6 else f"max diff {diff:.2g}"


def every(run: str, metric: str, test: Callable[[np.ndarray], bool], word: str) -> Check:
    """``test`` holds for the per-image values of ``run`` (no image left out: NaN fails unless ``test`` wants it)."""

    def check(m):
        v = m[run].images(metric).to_numpy()
        shown = f"{word}: min {_f(np.nanmin(v)) if np.isfinite(v).any() else 'NaN'}, max {_f(np.nanmax(v)) if np.isfinite(v).any() else 'NaN'}, NaN {int(np.isnan(v).sum())}/{len(v)}"
        return len(v) > 0 and bool(test(v)), shown

    return check


def equals(run: str, metric: str, value: float, tol: float = 1e-9) -> Check:
    return every(run, metric, lambda v: bool(np.all(np.abs(v - value) <= tol)), run)


def at_least(run: str, metric: str, value: float) -> Check:
    return every(run, metric, lambda v: bool(np.all(v >= value)), run)


def all_nan(run: str, metric: str) -> Check:
    return every(run, metric, lambda v: bool(np.isnan(v).all()), run)


def same(a: str, b: str, metric: str) -> Check:
    """Per image, ``a`` and ``b`` score the same (their pictures are the same pixels)."""

    def check(m):
        x, y = m[a].images(metric), m[b].images(metric)
        diff = float(np.nanmax(np.abs(x.to_numpy() - y.to_numpy()))) if len(x) else float("nan")
        return x.index.equals(y.index) and np.array_equal(
            np.isnan(x.to_numpy()), np.isnan(y.to_numpy())
        ) and diff <= 1e-6, _diff(diff)

    return check


def order(metric: str, *runs: str) -> Check:
    """Means strictly decrease along ``runs``."""

    def check(m):
        means = [m[r].mean(metric) for r in runs]
        return all(x > y for x, y in zip(means, means[1:])), " > ".join(f"{r} {_f(v)}" for r, v in zip(runs, means))

    return check


def mean_is(run: str, metric: str, value: float) -> Check:
    def check(m):
        got = m[run].mean(metric)
        return got == pytest.approx(value, abs=1e-9), f"{run} mean {_f(got)}"

    return check


def never_above(run: str, metric: str, bound: str) -> Check:
    """Per image, ``metric`` <= ``bound`` (NaN only where ``bound`` is NaN)."""

    def check(m):
        x, y = m[run].images(metric), m[run].images(bound)
        x, y = x.to_numpy(), y.reindex(x.index).to_numpy()
        gap = np.nanmax(x - y) if np.isfinite(x - y).any() else float("nan")
        ok = len(x) > 0 and np.array_equal(np.isnan(x), np.isnan(y)) and bool(np.all((x <= y + 1e-12) | np.isnan(x)))
        return ok, f"{run}: max({metric} - {bound}) {_f(gap)}"

    return check


def swap_keeps_matched_faces(m) -> tuple[bool, str]:
    """Per person found in both pictures (at 512 px HOG finds 60 % of them in both), the matched ID-Sim of swap equals the collage's (to HOG's
    pixel-offset jitter): Hungarian matching is blind to where a face stands."""

    def per_person(run):
        rows = m[run].rows
        rows = rows[(rows["metric"] == "id_sim") & (rows["subject"] != "")]
        return rows.set_index(["prompt_id", "subject"])["value"]

    c, s = per_person("collage"), per_person("swap")
    both = (c > 0) & (s > 0)
    diff = float(np.abs(c[both] - s[both]).max()) if both.any() else float("nan")
    return both.mean() >= 0.5 and diff < 0.02, f"found in both {both.mean():.0%}, max |diff| {diff:.3f}"


def mean_above(run: str, metric: str, value: float) -> Check:
    def check(m):
        got = m[run].mean(metric)
        return got > value, f"{run} mean {_f(got)}"

    return check


def id_sim_decomposes(run: str) -> Check:
    """Per image, id_sim = id_sim.face_share x id_sim.matched_mean (a person without a face scores 0)."""

    def check(m):
        whole, share, matched = (m[run].images(x) for x in ("id_sim", "id_sim.face_share", "id_sim.matched_mean"))
        product = (share * matched.reindex(share.index)).fillna(0.0)
        diff = float(np.abs(whole - product).max())
        return diff < 1e-9, _diff(diff)

    return check


def faces_expected(run: str) -> Check:
    def check(m):
        expected = m[run].images("faces_expected")
        wanted = np.array([m[run].sizes[p] for p, _ in expected.index])
        return bool(len(wanted) and (expected.to_numpy() == wanted).all()), f"{run}: mean {_f(expected.mean())}"

    return check


def faces_found(run: str, share: float) -> Check:
    """Faces found on at least ``share`` of the persons the prompts hold, summed over the images."""

    def check(m):
        found, expected = (m[run].images(x).to_numpy() for x in ("faces_detected", "faces_expected"))
        ratio = float(np.minimum(found, expected).sum() / max(1.0, expected.sum()))
        return bool(len(found)) and ratio >= share, f"{run}: {int(found.sum())} faces for {int(expected.sum())} persons"

    return check


def no_faces(run: str) -> Check:
    """No face found, every reference unmatched: ID-Sim exactly 0 (not NaN), faces_detected 0 reported."""

    def check(m):
        faces, sim = m[run].images("faces_detected").to_numpy(), m[run].images("id_sim").to_numpy()
        return bool(
            len(sim) and (faces == 0).all() and (sim == 0).all()
        ), f"{run}: faces {int(faces.sum())}, id_sim {_f(np.mean(sim))}, NaN {int(np.isnan(sim).sum())}"

    return check


def scr_monotone(run: str, prefix: str, taus=(0.4, 0.5, 0.6)) -> Check:
    """SCR@tau can only grow with tau (a reference below 0.4 is below 0.5), per image."""

    def check(m):
        cols = [m[run].images(f"{prefix}@{t}").to_numpy() for t in taus]
        ok = all(np.all(a <= b) for a, b in zip(cols, cols[1:]))
        return ok, f"{run}: means " + " <= ".join(_f(c.mean()) for c in cols)

    return check


def scr_is_share_below(run: str, tau: float = 0.5) -> Check:
    """SCR@tau equals the share of the image's per-reference DINO-Sim rows below tau."""

    def check(m):
        rows = m[run].rows
        per = rows[(rows["metric"] == "dino_sim") & (rows["subject"] != "")]
        share = (per["value"] < tau).groupby([per["prompt_id"], per["seed"]]).mean().sort_index()
        scr = m[run].images(f"scr@{tau}")
        diff = float(np.abs(share.to_numpy() - scr.to_numpy()).max())
        return share.index.equals(scr.index) and diff < 1e-9, f"{run}: {_diff(diff)}"

    return check


def instance_bound(run: str, tau: float = 0.5) -> Check:
    """A reference without a crop counts as collapsed: SCR_instance >= 1 - detected / N, per image."""

    def check(m):
        scr = m[run].images(f"scr_instance@{tau}")
        found = m[run].images("subjects_detected")
        bound = np.array([max(0.0, 1 - f / m[run].sizes[p]) for (p, _), f in found.items()])
        return bool(np.all(scr.to_numpy() >= bound - 1e-9)), f"{run}: scr {_f(scr.mean())} >= bound {_f(bound.mean())}"

    return check


def has_diagnostic(run: str, prefix: str, word: str) -> Check:
    """Some per-image count named ``<prefix>*`` (besides the failure rate) reaches the aggregates."""

    def check(m):
        names = sorted(k for k in m[run].overall if k.startswith(prefix) and not k.endswith("failure_rate"))
        return bool(names) and (word == "" or any(word in n for n in names)), f"{run}: {', '.join(names) or 'none'}"

    return check


def charis_insufficient(run: str) -> Check:
    """Every pair NaN, and counted as insufficient evidence (a count of its own, not only the failure rate)."""

    def check(m):
        scores = m[run].images("charis_score").to_numpy()
        names = [k for k in m[run].overall if k.startswith("charis_score.") and "insufficient" in k]
        counted = bool(names) and all(m[run].mean(k) == pytest.approx(1.0) for k in names)
        return bool(
            np.isnan(scores).all() and counted
        ), f"{run}: NaN {int(np.isnan(scores).sum())}/{len(scores)}, counts: {', '.join(names) or 'none'}"

    return check


ALL_VQA = (*VQA, "attr_vqa.negative_yes_rate")


def copy_flags(benchmark: str) -> list[Prop]:
    """The copy check on every benchmark: pasted references flagged, pictures without them never."""
    pasted = "copy" if benchmark == "charis" else "collage"
    props = [
        Prop(
            benchmark,
            pasted,
            "copy.flag",
            "> 0.5 of the images flagged: the references pasted whole",
            mean_above(pasted, "copy.flag", 0.5),
        )
    ]
    props += [
        Prop(
            benchmark,
            run,
            "copy.flag",
            "= 0 on every image: no reference in the picture",
            equals(run, "copy.flag", 0.0),
        )
        for run in ("blank", "noise")
    ]
    return props


def _charis() -> list[Prop]:
    b = "charis"
    props = [
        Prop(
            b,
            "copy",
            metric,
            "= 1: the reference's own pixels give identical features",
            at_least("copy", metric, 1 - 1e-5),
        )
        for metric in ("clip_i", "dino_sim")
    ]
    for metric in ("clip_i", "dino_sim"):
        props += [
            Prop(
                b,
                "clone = collage",
                metric,
                "equal per image (one subject: the same picture)",
                same("clone", "collage", metric),
            ),
            Prop(
                b,
                "background = blank",
                metric,
                "equal per image (no background reference: the grey canvas)",
                same("background", "blank", metric),
            ),
        ]
    props += [
        Prop(
            b,
            "copy+always-yes",
            "charis_score",
            "= 0 (mismatch): every feature seen changed, nothing explains it",
            equals("copy+always-yes", "charis_score", 0.0),
        ),
        Prop(
            b,
            "copy+truth",
            "charis_score",
            "= 1 (exact): every feature seen, none changed",
            equals("copy+truth", "charis_score", 1.0),
        ),
        Prop(
            b,
            "copy+always-no",
            "charis_score",
            "NaN for every pair (nothing visible), never a number",
            all_nan("copy+always-no", "charis_score"),
        ),
        Prop(
            b,
            "copy+always-no",
            "charis_score.failure_rate",
            "= 0: the judge answered; nothing visible is not a judge failure",
            equals("copy+always-no", "charis_score.failure_rate", 0.0),
        ),
        Prop(
            b,
            "copy+always-no",
            "charis_score",
            "counted as insufficient evidence, beside the failure rate",
            charis_insufficient("copy+always-no"),
        ),
        Prop(
            b,
            "copy+back-view",
            "charis_score",
            "NaN (insufficient evidence) when no core feature is visible, never exact",
            charis_insufficient("copy+back-view"),
        ),
        Prop(
            b,
            "copy+back-view",
            "charis_score_itt",
            "= 0 where the prompt did not ask to hide the subject (not shown is a mismatch), NaN where it did",
            every(
                "copy+back-view", "charis_score_itt", lambda v: bool(np.all((v == 0) | np.isnan(v))), "copy+back-view"
            ),
        ),
        Prop(
            b,
            "copy+truth",
            "prompt_adherence",
            "= 0: a copy shows none of the transformations asked for",
            every("copy+truth", "prompt_adherence", lambda v: bool(np.all(v == 0)), "copy+truth"),
        ),
        Prop(
            b,
            "copy+truth",
            "charis_overall",
            "= 0 (or NaN on hide-prompts): identity kept, prompt ignored, so the default ranking gives nothing",
            every("copy+truth", "charis_overall", lambda v: bool(np.all((v == 0) | np.isnan(v))), "copy+truth"),
        ),
        *copy_flags(b),
    ]
    return props


def _cogcanvas() -> list[Prop]:
    b = "cogcanvas"
    props = [
        Prop(b, run, "id_sim", "= 0 with faces_detected 0 reported (no face, references unmatched)", no_faces(run))
        for run in ("blank", "noise", "background")
    ]
    props += [
        Prop(
            b,
            "collage > clone > impostor",
            "id_sim",
            "real dlib faces: clone keeps 1 identity of N, impostor none",
            order("id_sim", "collage", "clone", "impostor"),
        ),
        Prop(
            b,
            "swap vs collage",
            "id_sim",
            "each person found in both matches as well (position-blind)",
            swap_keeps_matched_faces,
        ),
        Prop(b, "collage", "faces_expected", "= the prompt's N on every image", faces_expected("collage")),
        # Drawn people from outside the benchmark: faces to find, none of them anybody's of the pool.
        Prop(
            b,
            "stranger",
            "copy.flag",
            "= 0 on every image: faces, but no reference",
            equals("stranger", "copy.flag", 0),
        ),
        Prop(b, "stranger", "faces_detected", ">= 90 % of the persons' faces found", faces_found("stranger", 0.9)),
        Prop(
            b,
            "collage > stranger",
            "id_arranged",
            "the prompt's faces beat faces of nobody in it",
            order("id_arranged", "collage", "stranger"),
        ),
        Prop(
            b,
            "collage",
            "id_sim",
            "= id_sim.face_share x id_sim.matched_mean per image (faces found x faces alike)",
            id_sim_decomposes("collage"),
        ),
        # At 512 px HOG misses the crowd's small faces, so no surplus face is found here; the 1024 px
        # pictures of tests/benchmarks/cogcanvas/test_identity_grounding.py count them.
        Prop(
            b,
            "collage > crowd",
            "id_sim_strict",
            "every pool identity pasted: the crowd does not beat the collage",
            order("id_sim_strict", "collage", "crowd"),
        ),
        # id_arranged, the default ranking: the right faces one place off (swap: items travel with them;
        # crossed: items stay) are credited nothing where every face is found; HOG's misses at 512 px
        # leave some persons in order among the found ones.
        Prop(
            b,
            "collage > swap",
            "id_arranged",
            "the right faces one place off lose their shares (the default ranking)",
            order("id_arranged", "collage", "swap"),
        ),
        Prop(
            b,
            "collage > crossed",
            "id_arranged",
            "the right faces one place off, holding another's item",
            order("id_arranged", "collage", "crossed"),
        ),
        Prop(
            b,
            "collage > crowd",
            "id_arranged",
            "every pool identity pasted: padding does not pay",
            order("id_arranged", "collage", "crowd"),
        ),
        *(
            Prop(
                b,
                run,
                "id_arranged",
                "<= id_sim_strict on every image (a share kept or dropped whole)",
                never_above(run, "id_arranged", "id_sim_strict"),
            )
            for run in ("collage", "swap")
        ),
        *(
            Prop(b, run, "id_arranged", "= 0: no face, nobody found", equals(run, "id_arranged", 0.0))
            for run in ("blank", "background")
        ),
        Prop(
            b, "clone", "who.cloned", "> 0: one person shown on several faces", mean_above("clone", "who.cloned", 0.0)
        ),
        Prop(b, "swap", "who.swapped", "> 0: found persons out of place", mean_above("swap", "who.swapped", 0.0)),
        Prop(
            b,
            "collage > swap",
            "layout_grounded",
            "the located identities' order breaks the left-of edges",
            order("layout_grounded", "collage", "swap"),
        ),
        Prop(b, "collage", "who.swapped", "= 0 on every image", equals("collage", "who.swapped", 0.0)),
        *(
            Prop(b, run, "id_sim_strict", "= 0: no face, nobody found", equals(run, "id_sim_strict", 0.0))
            for run in ("blank", "background")
        ),
        Prop(
            b,
            "blank+always-yes",
            "attr_vqa",
            "= 1: a yes-judge confirms every fact of a blank image",
            equals("blank+always-yes", "attr_vqa", 1.0),
        ),
        Prop(b, "blank+always-yes", "igc", "= 1", equals("blank+always-yes", "igc", 1.0)),
        Prop(
            b,
            "blank+always-yes",
            "attr_vqa_paired",
            "= 0: no negative denied",
            mean_is("blank+always-yes", "attr_vqa_paired", 0.0),
        ),
        Prop(b, "blank+always-yes", "igc_paired", "= 0", mean_is("blank+always-yes", "igc_paired", 0.0)),
        Prop(
            b,
            "blank+always-yes",
            "attr_vqa.negative_yes_rate",
            "= 1: the yes-bias shows",
            equals("blank+always-yes", "attr_vqa.negative_yes_rate", 1.0),
        ),
        Prop(
            b,
            "blank+always-no",
            "attr_vqa",
            "= 0: a blank image confirms nothing (no 50 % floor)",
            equals("blank+always-no", "attr_vqa", 0.0),
        ),
        Prop(b, "blank+always-no", "igc", "= 0", equals("blank+always-no", "igc", 0.0)),
        Prop(
            b,
            "blank+always-yes",
            "attr_vqa.binding",
            "= 1 (the T2I track's Attr-VQA, the paper's definition)",
            equals("blank+always-yes", "attr_vqa.binding", 1.0),
        ),
        Prop(b, "blank+always-no", "attr_vqa.binding", "= 0", equals("blank+always-no", "attr_vqa.binding", 0.0)),
        # The twins read as the paper's wherever the judge answers: only failures tell them apart.
        *(
            Prop(
                b,
                f"blank+{judge}",
                twin,
                f"= {value:g}, as {twin.removesuffix('_itt')} (every answer usable)",
                equals(f"blank+{judge}", twin, value),
            )
            for twin in ("attr_vqa_itt", "igc_itt", "attr_vqa.binding_itt")
            for judge, value in (("always-yes", 1.0), ("always-no", 0.0))
        ),
        Prop(b, "blank+always-no", "attr_vqa_paired", "= 0", mean_is("blank+always-no", "attr_vqa_paired", 0.0)),
        Prop(b, "blank+always-no", "igc_paired", "= 0", mean_is("blank+always-no", "igc_paired", 0.0)),
        Prop(
            b,
            "blank+always-no",
            "attr_vqa.negative_yes_rate",
            "= 0",
            equals("blank+always-no", "attr_vqa.negative_yes_rate", 0.0),
        ),
        *(
            Prop(b, "collage+truth", metric, "= 1: the true graph's answers", mean_is("collage+truth", metric, 1.0))
            for metric in VQA
        ),
        Prop(
            b,
            "collage+truth",
            "attr_vqa.negative_yes_rate",
            "= 0",
            equals("collage+truth", "attr_vqa.negative_yes_rate", 0.0),
        ),
        Prop(
            b,
            "blank",
            "bg_sim",
            "generations with no foreground / all foreground are counted and reported",
            has_diagnostic("blank", "bg_sim.", "no_foreground"),
        ),
        *copy_flags(b),
    ]
    return props


def _collapse() -> list[Prop]:
    b = "identity-collapse"
    props = []
    for metric in ("clip_t", "dino_sim", "scr@0.5", "scr_instance@0.5"):
        props.append(
            Prop(
                b,
                "background = blank",
                metric,
                "equal per image (the grey canvas)",
                same("background", "blank", metric),
            )
        )
    for run in BASELINES:
        props += [
            Prop(b, run, "scr@tau", "monotone in tau, per image", scr_monotone(run, "scr")),
            Prop(b, run, "scr_instance@tau", "monotone in tau, per image", scr_monotone(run, "scr_instance")),
            Prop(b, run, "scr@0.5", "= share of its per-reference DINO-Sim below 0.5", scr_is_share_below(run)),
            Prop(
                b,
                run,
                "scr_instance@0.5",
                ">= 1 - subjects_detected / N (a reference without a crop is collapsed)",
                instance_bound(run),
            ),
        ]
    return props + copy_flags(b)


PROPERTIES: list[Prop] = [*_charis(), *_cogcanvas(), *_collapse()]


# --- the tests -----------------------------------------------------------------------------------


def _param(prop: Prop):
    marks = (
        [
            pytest.mark.xfail(
                strict=True, reason=f"depends on issue 11 item {prop.depends} (in progress on another branch)"
            )
        ]
        if prop.depends
        else []
    )
    return pytest.param(prop, id=prop.id, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("prop", [_param(p) for p in PROPERTIES])
def test_property(battery, prop):
    outcome = battery["checks"][prop.id]
    assert outcome["passed"], (
        f"{prop.benchmark}, {prop.pictures}, {prop.metric}: expected {prop.expect}; measured {outcome['measured']}"
    )


def test_property_ids_are_unique():
    assert len({p.id for p in PROPERTIES}) == len(PROPERTIES)


def _renderer():
    spec = importlib.util.spec_from_file_location("metric_sanity_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_committed_doc_shows_these_results(battery):
    """The doc's tables are this run's rendering; if not, regenerate them (values may move with the code)."""
    render = _renderer()
    current = DOC.read_text(encoding="utf-8")
    assert render.replace_section(current, render.render(battery["result"])) == current, (
        f"docs/metric-sanity.md is stale: run `.venv/bin/python {SCRIPT.relative_to(ROOT)}` "
        f"(it renders {RESULTS}, which this run just wrote) and commit the doc"
    )
