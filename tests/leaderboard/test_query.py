"""The leaderboard's pure query functions, against a real store and against hand-made rows.

The store fixture scores three identity-collapse baselines with the tiny profile (quick; every row is
a plumbing check), then marks one result as a real run so the plumbing filter has something to hide.
Means are checked against a pandas groupby over each result's own ``results.parquet``.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from filled_store import PROMPTS, lift_copy_marks, share_features

from idbench.builders.build import build
from idbench.builders.registry import get_benchmark
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.leaderboard import query
from idbench.leaderboard.queue import submit
from idbench.leaderboard.store import Store
from idbench.leaderboard.worker import run_worker

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

BENCHMARK = "identity-collapse"
SPEC = get_benchmark(BENCHMARK)
BASELINES = ("collage", "clone", "swap")


@pytest.fixture(scope="module")
def filled(tmp_path_factory, shared_features) -> tuple[Store, pd.DataFrame]:
    """A store with three scored baselines; submission 1's result is marked as a real (non-plumbing) run."""
    root = tmp_path_factory.mktemp("query")
    share_features(root / "home", shared_features)  # the pictures of test_app's and test_browser's stores
    data_dir = root / "home" / "benchmarks" / BENCHMARK
    build(BENCHMARK, out=data_dir, n_prompts=PROMPTS)
    data = load_benchmark_data(data_dir)
    store = Store(root / "home")
    for name in BASELINES:
        make_baseline(name, data, root / name, size=128)
        submit(store, root / name, data_dir, submitter="tester")
    run_worker(store, once=True, options=ScoreOptions(profile="tiny", metrics=("clip_t", "dino_sim")))
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE results SET plumbing = 0 WHERE submission_id = 1")
    lift_copy_marks(store.path)  # the baselines paste references; these tests are about the table's mechanics
    prompts = data.prompts.to_pandas()[["prompt_id", "n_subjects", "scene"]]
    return store, prompts


def _parquet_means(results: pd.DataFrame, prompts: pd.DataFrame, metric: str, **cell) -> dict[int, float]:
    """Independently: each submission's mean of ``metric`` over image-level rows in the given cell."""
    out = {}
    for _, row in results.iterrows():
        values = pd.read_parquet(Path(row["results_path"]) / "results.parquet")
        values = values[(values["subject"] == "") & (values["metric"] == metric)].merge(prompts, on="prompt_id")
        for axis, value in cell.items():
            values = values[values[axis] == value]
        out[int(row["submission_id"])] = float(values["value"].mean())
    return out


@pytest.mark.slow
def test_store_version_changes_with_results(filled, tmp_path):
    store, _ = filled
    assert query.store_version(store) == (3, 3, 0)
    assert query.store_version(Store(tmp_path / "empty")) == (0, 0, 0)
    # Withdrawing changes what is ranked without adding a result: the key must change too.
    (tmp_path / "copy").mkdir()
    with sqlite3.connect(store.path) as source, sqlite3.connect(tmp_path / "copy" / store.path.name) as target:
        source.backup(target)  # a consistent copy, WAL content included
    copy = Store(tmp_path / "copy")
    copy.withdraw(2, "test")
    assert query.store_version(copy) == (3, 3, 1)


@pytest.mark.slow
def test_overall_and_filtered_means_match_the_parquet(filled):
    store, prompts = filled
    results = store.current_results(BENCHMARK)
    for cell, filters in [
        ({}, {}),
        ({"n_subjects": 4}, {"n_subjects": "4", "scene": None}),
        ({"scene": "occlusion"}, {"scene": "occlusion"}),
        ({"n_subjects": 4, "scene": "occlusion"}, {"n_subjects": 4, "scene": "occlusion"}),
    ]:
        table = query.ranked_table(results, SPEC, metric="dino_sim", filters=filters, include_plumbing=True)
        expected = _parquet_means(results, prompts, "dino_sim", **cell)
        got = dict(zip(table["submission"], table["dino_sim"]))
        assert got == pytest.approx(expected, abs=1e-6), filters
        assert (table["dino_sim ci_low"] <= table["dino_sim"]).all() and (
            table["dino_sim"] <= table["dino_sim ci_high"]
        ).all()
    # the 4-subject occlusion cell differs from the overall mean: the filter really changes the table
    overall = query.ranked_table(results, SPEC, include_plumbing=True)
    cell = query.ranked_table(results, SPEC, filters={"n_subjects": "4", "scene": "occlusion"}, include_plumbing=True)
    assert not overall["dino_sim"].reset_index(drop=True).equals(cell["dino_sim"].reset_index(drop=True))


@pytest.mark.slow
def test_ranked_table_columns_sorting_and_plumbing(filled):
    store, _ = filled
    results = store.current_results(BENCHMARK)
    shown = query.ranked_table(results, SPEC)  # default metric: the spec's first computed ranking metric
    assert list(shown["submission"]) == [1]  # plumbing rows left out by default
    assert shown.loc[0, "marks"] == "incomplete suite"  # only clip_t and dino_sim were run
    every = query.ranked_table(results, SPEC, include_plumbing=True)
    assert list(every.columns[:12]) == [*query.ID_COLUMNS, "dino_sim", "dino_sim ci_low"]
    assert list(every["rank"]) == [1, 2, 3] and set(every["submitter"]) == {"tester"}
    assert every["dino_sim"].is_monotonic_decreasing  # higher is better: best first
    assert (every.set_index("submission").loc[[2, 3], "marks"] == "plumbing, incomplete suite").all()
    by_clip = query.ranked_table(results, SPEC, metric="clip_t", include_plumbing=True)
    assert list(by_clip.columns[10:13]) == ["clip_t", "clip_t ci_low", "clip_t ci_high"]
    assert by_clip["clip_t"].is_monotonic_decreasing


@pytest.mark.slow
def test_filter_options_and_cells(filled):
    store, _ = filled
    results = store.current_results(BENCHMARK)
    assert query.filter_options(results, SPEC) == {
        "n_subjects": ["2", "4", "6", "8", "10"],
        "scene": ["interaction", "neutral", "occlusion"],
    }
    assert query.breakdown_cell(SPEC, {"n_subjects": None, "scene": None}) is None
    assert query.breakdown_cell(SPEC, {"scene": "neutral", "n_subjects": 6}) == ("n_subjects x scene", "6 x neutral")
    with pytest.raises(ValueError, match="no breakdown by type"):
        query.breakdown_cell(SPEC, {"type": "human"})


@pytest.mark.slow
def test_metric_vs_group_size_matches_the_parquet(filled):
    store, prompts = filled
    results = store.current_results(BENCHMARK)
    long = query.metric_vs_group_size(results, SPEC, "dino_sim", include_plumbing=True)
    assert list(long.columns) == ["model", "group_size", "mean", "ci_low", "ci_high"] and len(long) == 3 * 5
    labels = dict(zip(results["submission_id"], results["model_name"]))
    for size in (2, 10):
        expected = _parquet_means(results, prompts, "dino_sim", n_subjects=size)
        got = long[long["group_size"] == size].set_index("model")["mean"]
        assert {sid: got[labels[sid]] for sid in expected} == pytest.approx(expected, abs=1e-6)
    assert list(query.metric_vs_group_size(results, SPEC, "dino_sim")["model"].unique()) == ["baseline-collage"]


@pytest.mark.slow
def test_breakdown_tables_and_radar(filled):
    store, _ = filled
    results = store.current_results(BENCHMARK)
    tables = query.breakdown_tables(results.iloc[0].to_dict(), SPEC)
    assert list(tables) == ["n_subjects", "scene", "n_subjects x scene"]
    assert list(tables["n_subjects"].index) == ["2", "4", "6", "8", "10"]
    assert list(tables["n_subjects"].columns) == ["clip_t", "dino_sim"] and len(tables["n_subjects x scene"]) == 15
    radar = query.radar_axes(results, SPEC, include_plumbing=True)
    assert radar.shape == (3, 2) and set(radar.columns) == {"clip_t", "dino_sim"}


# --- hand-made rows: lower-is-better sorting, display conventions, CHARIS matrix ------------------


def _row(
    submission: int, overall: dict, plumbing: bool = False, breakdowns: dict | None = None, model: str | None = None
) -> dict:
    stats = lambda mean: {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n": 10, "n_nan": 0}  # noqa: E731
    return {
        "submission_id": submission,
        "model_name": model or f"m{submission}",
        "submitter": None,
        "profile": "tiny" if plumbing else "full",
        "plumbing": plumbing,
        "not_run": {},
        "aggregates": {
            "overall": {m: stats(v) for m, v in overall.items()},
            "breakdowns": {
                name: {cell: {m: stats(v) for m, v in values.items()} for cell, values in cells.items()}
                for name, cells in (breakdowns or {}).items()
            },
        },
    }


def test_lower_is_better_sorts_ascending_and_nan_last():
    full = {m.name: 0.5 for m in SPEC.metric_suite}
    rows = [
        _row(1, {**full, "scr@0.5": 0.9}),
        _row(2, {**full, "scr@0.5": 0.2}),
        _row(3, {**full, "scr@0.5": 0.5}),
        _row(4, {k: v for k, v in full.items() if k != "scr@0.5"}),
    ]
    table = query.ranked_table(pd.DataFrame(rows), SPEC, metric="scr@0.5")
    assert list(table["submission"]) == [2, 3, 1, 4] and math.isnan(table.loc[3, "scr@0.5"])
    assert list(table["marks"]) == ["", "", "", "incomplete suite"]
    shown = query.display_table(table, SPEC)
    assert "scr@0.5 (%)" in shown.columns and "scr@0.5 (%) ci_low" in shown.columns and "dino_sim" in shown.columns
    assert shown.loc[0, "scr@0.5 (%)"] == 20.0 and shown.loc[0, "scr@0.5 (%) ci_high"] == 21.0
    assert shown.loc[0, "dino_sim"] == 0.5  # raw metrics are not scaled
    with pytest.raises(ValueError, match="unknown metric"):
        query.ranked_table(pd.DataFrame(rows), SPEC, metric="nope")


def test_cosines_raw_and_missing_cell_is_nan():
    cog = get_benchmark("cogcanvas")
    rows = [
        _row(1, {"id_sim": 0.41234}, breakdowns={"n_persons": {"2": {"id_sim": 0.3}}}),
        _row(2, {"id_sim": 0.5}, breakdowns={"n_persons": {"3": {"id_sim": 0.6}}}),
    ]
    table = query.ranked_table(pd.DataFrame(rows), cog, metric="id_sim", filters={"n_persons": "2"})
    assert list(table["submission"]) == [1, 2] and math.isnan(table.loc[1, "id_sim"])
    shown = query.display_table(query.ranked_table(pd.DataFrame(rows), cog), cog)
    assert list(shown["id_sim"]) == [0.5, 0.4123]  # a cosine is shown as one, on every benchmark
    long = query.metric_vs_group_size(pd.DataFrame(rows), cog, "id_sim")
    assert list(zip(long["model"], long["group_size"], long["mean"])) == [("m1", 2, 0.3), ("m2", 3, 0.6)]


def test_percent_and_x10_displays_and_the_missing_evidence_column():
    cog = get_benchmark("cogcanvas")
    # hand-made raw means: CLIP-T cosines stay cosines; LAION aesthetic 4.5 -> 45; Attr-VQA 0.25 -> 25 %;
    # id_sim with 0.25 face-less references per image on average
    rows = [
        _row(
            1,
            {"clip_t": 0.24, "aesthetic": 4.5, "attr_vqa": 0.25, "id_sim": 0.4, "id_sim.reference_without_face": 0.25},
        ),
        _row(
            2,
            {"clip_t": -0.02, "aesthetic": 5.641, "attr_vqa": 0.5, "id_sim": 0.3, "id_sim.reference_without_face": 0.0},
        ),
    ]
    table = query.ranked_table(pd.DataFrame(rows), cog, metric="clip_t")
    assert list(table["clip_t"]) == [0.24, -0.02]  # the ranked table stays raw
    assert list(table["id_sim missing evidence"]) == [0.25, 0.0]
    shown = query.display_table(table, cog)
    assert list(shown["clip_t"]) == [0.24, -0.02] and list(shown["clip_t ci_low"]) == [0.23, -0.03]
    assert list(shown["aesthetic (x10)"]) == [45.0, 56.41]
    assert list(shown["attr_vqa (%)"]) == [25.0, 50.0]
    assert list(shown["id_sim missing evidence (per image)"]) == [0.25, 0.0]
    legend = query.display_legend(cog)
    assert "x 10" in legend["aesthetic (x10)"] and "Table 2" in legend["aesthetic (x10)"]
    assert legend["clip_t"] == legend["id_sim"] == "raw value"
    assert "paper's convention)" not in " ".join(legend.values())  # nothing claims a convention it cannot show


def test_charis_insufficient_evidence_sits_beside_the_judge_failures():
    charis = get_benchmark("charis")
    rows = [_row(1, {"charis_score": 0.6, "charis_score.failure_rate": 0.1, "charis_score.insufficient_evidence": 0.2})]
    table = query.ranked_table(pd.DataFrame(rows), charis, metric="charis_score")
    columns = list(table.columns)
    assert columns.index("charis_score missing evidence") == columns.index("charis_score judge failures") + 1
    shown = query.display_table(table, charis)
    assert shown.loc[0, "charis_score judge failures (%)"] == 10.0
    assert shown.loc[0, "charis_score missing evidence (per image)"] == 0.2


def test_type_style_matrix_for_charis_and_duplicate_names():
    charis = get_benchmark("charis")
    cells = {"human x photo": {"dino_sim": 0.7}, "animal x cartoon": {"dino_sim": 0.4}}
    rows = [
        _row(1, {"dino_sim": 0.6}, breakdowns={"type x style": cells}, model="same"),
        _row(2, {"dino_sim": 0.5}, breakdowns={"type x style": {"human x photo": {"dino_sim": 0.1}}}, model="same"),
        _row(3, {"dino_sim": 0.9}, plumbing=True, breakdowns={"type x style": cells}),
    ]
    matrix = query.type_style_matrix(pd.DataFrame(rows), charis, "dino_sim")
    assert list(matrix.index) == ["same #1", "same #2"] and list(matrix.columns) == [
        "animal x cartoon",
        "human x photo",
    ]
    assert matrix.loc["same #1", "human x photo"] == 0.7 and math.isnan(matrix.loc["same #2", "animal x cartoon"])
    assert query.metric_vs_group_size(pd.DataFrame(rows), charis, "dino_sim").empty  # CHARIS has no group size
    assert query.type_style_matrix(pd.DataFrame(rows), SPEC, "dino_sim").empty


# --- completeness, families, samples -------------------------------------------------------------


def _result_row(overall: dict, **extra) -> dict:
    return {"plumbing": False, "aggregates": {"overall": overall}, "metadata": {}, **extra}


def test_metrics_of_other_tasks_do_not_make_a_row_incomplete():
    spec = get_benchmark("cogcanvas")
    generation = [m.name for m in spec.metric_suite if "reference" in m.tasks]
    assert "attr_vqa" in generation and not any(name.startswith("retrieval") for name in generation)
    # A text-to-image row is complete with its own metrics (written out by hand: paper 001's protocol, count
    # accuracy and binding Attr-VQA, the latter beside its intent-to-treat twin since suite 0.6, both beside
    # their copy-floored twins since 0.7).
    t2i = _result_row(
        {
            "count_accuracy": {"mean": 0.5},
            "count_accuracy_floored": {"mean": 0.5},
            "attr_vqa.binding": {"mean": 0.2},
            "attr_vqa.binding_itt": {"mean": 0.2},
            "attr_vqa.binding_itt_floored": {"mean": 0.2},
        },
        task="text-to-image",
    )
    assert query.missing_metrics(t2i, spec) == [] and query.marks(t2i, spec) == ""
    assert query.missing_metrics(_result_row({"count_accuracy": {"mean": 0.5}}, task="text-to-image"), spec) == [
        "attr_vqa.binding",
        "attr_vqa.binding_itt",
        "attr_vqa.binding_itt_floored",
        "count_accuracy_floored",
    ]
    complete = _result_row({name: {"mean": 0.5} for name in generation})
    assert query.missing_metrics(complete, spec) == [] and query.marks(complete, spec) == ""
    without_judge = _result_row(
        {name: {"mean": 0.5} for name in generation if not name.startswith(("attr_vqa", "igc"))}
    )
    assert set(query.missing_metrics(without_judge, spec)) == {
        m for m in generation if m.startswith(("attr_vqa", "igc"))
    }
    assert query.marks(without_judge, spec) == "incomplete suite"


@pytest.mark.slow
def test_family_view(filled):
    store, _ = filled
    results = store.current_results(BENCHMARK).copy()
    results["metadata"] = [{"family": "Collages"} if s == 1 else {} for s in results["submission_id"]]
    assert query.families(results) == ["Collages"]
    table = query.ranked_table(results, SPEC, include_plumbing=True, family="Collages")
    assert table["submission"].tolist() == [1] and table["family"].tolist() == ["Collages"]
    assert query.ranked_table(results, SPEC, include_plumbing=True, family="Other").empty
    # Incomplete rows (only clip_t and dino_sim ran here) disappear when asked to.
    assert query.ranked_table(results, SPEC, include_plumbing=True, include_incomplete=False).empty


@pytest.mark.slow
def test_sample_extremes_and_their_images(filled):
    from idbench.leaderboard import samples

    store, _ = filled
    row = store.current_results(BENCHMARK).set_index("submission_id").loc[1]
    values = pd.read_parquet(Path(row["results_path"]) / "results.parquet")
    # Independently: per image, the mean over its rows of dino_sim (one per subject, or one for the image).
    per_image = {}
    for record in values[values["metric"] == "dino_sim"].itertuples():
        per_image.setdefault((record.prompt_id, record.seed), []).append(record.value)
    expected = {key: sum(v) / len(v) for key, v in per_image.items()}
    scores = samples.sample_scores(Path(row["results_path"]), "dino_sim")
    assert {(r.prompt_id, r.seed): pytest.approx(r.value) for r in scores.itertuples()} == expected
    best, worst = samples.extremes(scores, higher_is_better=True, k=3)
    ranked = sorted(expected.items(), key=lambda item: -item[1])
    assert best["value"].tolist() == pytest.approx([v for _, v in ranked[:3]])
    assert worst["value"].tolist() == pytest.approx([v for _, v in ranked[::-1][:3]])
    submission = store.submission(1)
    data = load_benchmark_data(Path(submission["data_dir"]))
    pick = best.iloc[0]
    image = samples.generation_file(Path(submission["stored_path"]), pick["prompt_id"], int(pick["seed"]))
    assert image.is_file() and image.parent.parent == Path(submission["stored_path"])
    assert samples.reference_ids(data, pick["prompt_id"]) == list(data.prompt_rows[pick["prompt_id"]]["subject_ids"])
    # The collage pastes its references: the only evidence of its images is the copy check's (no judge ran).
    evidence = samples.evidence(Path(row["results_path"]), pick["prompt_id"], int(pick["seed"]))
    assert set(evidence) == {"copies"} and set(evidence["copies"]["found"]) <= set(
        samples.reference_ids(data, pick["prompt_id"])
    )
    with pytest.raises(KeyError, match="no image for prompt 'nope'"):
        samples.generation_file(Path(submission["stored_path"]), "nope", 0)


def test_extremes_never_show_an_image_twice():
    from idbench.leaderboard import samples

    scores = pd.DataFrame({"prompt_id": ["a", "b", "c"], "seed": [0, 0, 0], "value": [0.3, 0.9, 0.1]})
    best, worst = samples.extremes(scores, higher_is_better=False, k=2)  # lower is better: 0.1 first
    assert best["prompt_id"].tolist() == ["c", "a"] and worst["prompt_id"].tolist() == ["b"]


def test_reference_ids_of_a_cogcanvas_prompt():
    from types import SimpleNamespace

    from idbench.leaderboard import samples

    prompt = {
        "prompt_id": "p",
        "persons": [{"ref_id": "ann", "item_ref_id": "hat"}, {"ref_id": "bob", "item_ref_id": None}],
        "background_ref_id": "beach",
    }
    data = SimpleNamespace(prompt_rows={"p": prompt})
    assert samples.reference_ids(data, "p") == ["ann", "bob", "hat", "beach"]


def test_judged_metrics_carry_their_failure_rate():
    spec = get_benchmark("charis")
    row = {
        "submission_id": 7,
        "model_name": "m",
        "submitter": "",
        "profile": "paper",
        "plumbing": False,
        "metadata": {},
        "aggregates": {
            "overall": {
                "charis_score": {"mean": 0.6, "ci_low": 0.5, "ci_high": 0.7},
                "charis_score.failure_rate": {"mean": 0.125},
                "clip_i": {"mean": 0.8, "ci_low": 0.7, "ci_high": 0.9},
            }
        },
    }
    table = query.ranked_table(pd.DataFrame([row]), spec, include_plumbing=True)
    columns = list(table.columns)
    at = columns.index("charis_score")
    assert columns[at : at + 4] == [
        "charis_score",
        "charis_score ci_low",
        "charis_score ci_high",
        "charis_score judge failures",
    ]
    assert table.loc[0, "charis_score judge failures"] == 0.125
    assert "clip_i judge failures" not in columns  # an encoder metric has no judge to fail
    shown = query.display_table(table, spec)
    assert shown.loc[0, "charis_score judge failures (%)"] == 12.5


def test_a_retrieval_metric_shows_its_random_ranker_beside_it():
    cog = get_benchmark("cogcanvas")
    # hand-made raw means: P@1 0.8 against a random ranker's 0.5 (two candidates a slot), shown in percent
    rows = [
        _row(1, {"retrieval_p@1": 0.8, "retrieval_p@1.random": 0.5, "retrieval_r@5": 1.0, "retrieval_r@5.random": 1.0})
    ]
    table = query.ranked_table(pd.DataFrame(rows), cog, metric="retrieval_p@1", include_incomplete=True)
    columns = list(table.columns)
    assert columns.index("retrieval_p@1 random") == columns.index("retrieval_p@1 ci_high") + 1
    assert table.loc[0, "retrieval_p@1 random"] == 0.5 and table.loc[0, "retrieval_r@5 random"] == 1.0
    shown = query.display_table(table, cog)
    assert shown.loc[0, "retrieval_p@1 (%)"] == 80.0 and shown.loc[0, "retrieval_p@1 (%) random"] == 50.0
    # a metric that declares no chance level gets no such column
    assert not any(
        c.startswith("id_sim") and c.endswith(" random")
        for c in query.ranked_table(pd.DataFrame([_row(1, {"id_sim": 0.4})]), cog).columns
    )


def _stats(mean: float, prompts: int) -> dict:
    return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n": prompts, "n_nan": 0, "n_prompts": prompts}


def _cog_row(submission: int, pooled: float, by_n: dict[str, float], prompts: dict[str, int]) -> dict:
    row = _row(submission, {"id_sim": pooled})
    row["aggregates"]["overall"]["id_sim"] = _stats(pooled, sum(prompts.values()))
    row["aggregates"]["breakdowns"] = {"n_persons": {n: {"id_sim": _stats(v, prompts[n])} for n, v in by_n.items()}}
    return row


def test_cogcanvas_ranks_within_n_2_first_and_offers_the_pooled_mean():
    cog = get_benchmark("cogcanvas")
    prompts = {"2": 41, "3": 28, "4": 17, "5": 14}  # the paper's proportions, roughly
    # m1 wins the pooled mean, m2 wins at N = 2: the default must rank m2 first
    rows = pd.DataFrame(
        [
            _cog_row(1, 0.50, {"2": 0.55, "3": 0.5, "4": 0.45, "5": 0.4}, prompts),
            _cog_row(2, 0.40, {"2": 0.60, "3": 0.3, "4": 0.2, "5": 0.1}, prompts),
        ]
    )
    filters = query.default_filters(rows, cog)
    assert filters == {"n_persons": "2"} and query.ranking_scope(cog, filters) == "N = 2"
    table = query.ranked_table(rows, cog, metric="id_sim", filters=filters)
    assert list(table["model"]) == ["m2", "m1"] and list(table["id_sim"]) == [0.60, 0.55]
    pooled = query.ranked_table(rows, cog, metric="id_sim", filters={"n_persons": None})
    assert list(pooled["model"]) == ["m1", "m2"] and list(pooled["id_sim"]) == [0.50, 0.40]
    assert query.group_size_label(None) == query.POOLED == "all N (pooled)" and query.group_size_label("3") == "N = 3"
    # the caption names the weights the pooled mean gives each N
    assert query.group_size_shares(rows, cog, "id_sim") == pytest.approx({"2": 0.41, "3": 0.28, "4": 0.17, "5": 0.14})
    note = query.group_size_note(rows, cog, "id_sim", {"n_persons": None})
    assert note.startswith("Ranked over all N (pooled)") and "N = 2: 41%" in note and "share of the prompts" in note
    assert query.group_size_note(rows, cog, "id_sim", filters).startswith("Ranked within N = 2")


def test_default_group_size_falls_back_and_other_benchmarks_pool():
    cog = get_benchmark("cogcanvas")
    only_3 = pd.DataFrame([_cog_row(1, 0.5, {"3": 0.5, "4": 0.4}, {"3": 5, "4": 5})])
    assert query.default_filters(only_3, cog) == {"n_persons": "3"}  # N = 2 not stored: the smallest that is
    assert query.default_filters(pd.DataFrame([_row(1, {"id_sim": 0.5})]), cog) == {"n_persons": None}
    # Identity Collapse ranks pooled (a balanced grid); CHARIS has no group size
    assert query.default_filters(
        pd.DataFrame([_row(1, {"dino_sim": 0.5}, breakdowns={"n_subjects": {"2": {"dino_sim": 0.5}}})]), SPEC
    ) == {"n_subjects": None, "scene": None}
    charis = get_benchmark("charis")
    assert all(v is None for v in query.default_filters(pd.DataFrame(), charis).values())
    assert (
        query.ranking_scope(charis, {}) == ""
        and query.group_size_note(pd.DataFrame(), charis, "charis_score", {}) == ""
    )


def test_breakdown_tables_show_subject_breakdowns_with_counts():
    cog = get_benchmark("cogcanvas")
    row = _cog_row(1, 0.5, {"2": 0.5}, {"2": 3})
    row["aggregates"]["subject_breakdowns"] = {
        "gender": {
            "unknown": {"id_sim": {**_stats(0.2, 1), "n": 2}},
            "female": {"id_sim": {**_stats(0.4, 3), "n": 5, "n_nan": 1}},
        }
    }
    tables = query.breakdown_tables(row, cog)
    assert list(tables) == ["n_persons", "gender"]  # axes the result lacks get no table
    gender = tables["gender"]
    assert list(gender.index) == ["female", "unknown"] and gender.index.name == "gender"
    assert list(gender["id_sim"]) == [0.4, 0.2] and list(gender["rows"]) == [6, 2] and list(gender["prompts"]) == [3, 1]


def test_the_metadata_table_never_shows_nan_or_none():
    from idbench.leaderboard.query import metadata_table

    row = {"model_name": "m", "submitter": float("nan"), "metadata": {"link": None}, "profile": "tiny"}
    values = dict(metadata_table(row).itertuples(index=False))
    assert values["submitter"] == "(not given)" and values["link"] == ""
    assert not any(v in ("nan", "None") for v in values.values())


def test_the_units_tooltip_names_only_conventions_some_metric_uses():
    from idbench.builders.registry import BENCHMARKS, get_benchmark
    from idbench.leaderboard.query import units_help

    used = {m.display for name in BENCHMARKS for m in get_benchmark(name).metric_suite}
    text = units_help()
    assert "CLIPScore" not in text and ("x100" in text) == ("x100" in used)
    assert ("x10:" in text) == ("x10" in used) and ("%:" in text) == ("percent" in used)


def test_each_missing_evidence_column_is_explained_on_its_header():
    from idbench.builders.registry import get_benchmark
    from idbench.leaderboard.query import column_help

    spec = get_benchmark("cogcanvas")
    notes = column_help(spec)
    counted = [m.name for m in spec.metric_suite if m.missing_evidence]
    assert counted and all("left out of" in notes[f"{m} missing evidence (per image)"] for m in counted)


def test_a_breakdown_table_shows_each_cell_with_its_interval_in_one_format():
    """The model page's breakdowns read as the ranked table does: "mean [low, high]", every value of a
    metric with the same decimals under its convention (not 0, 7.2 and 0.2406 side by side)."""
    cog = get_benchmark("cogcanvas")
    row = _cog_row(1, 0.5, {"2": 0.5, "3": 0.0}, {"2": 3, "3": 2})
    tables = query.breakdown_tables(row, cog, intervals=True)
    shown = query.display_table(tables["n_persons"], cog, compact=True)
    assert list(shown.index) == ["2", "3"]
    column = [c for c in shown.columns if c.startswith("id_sim")][0]
    cells = row["aggregates"]["breakdowns"]["n_persons"]
    assert list(shown[column]) == [
        f"{cells[n]['id_sim']['mean']:.4f} [{cells[n]['id_sim']['ci_low']:.4f}, {cells[n]['id_sim']['ci_high']:.4f}]"
        for n in ("2", "3")
    ]
