"""Who became whom on the model page: the pure pieces (worst images first, the summary by N, each
person's verdict, the face crops) on hand-made records, then the page itself through AppTest over a
store holding a CogCanvas baseline scored on the identity metrics.

The page's numbers are checked against what the store and the result folder hold (read with sqlite3
and pandas here), not against the functions that made the page.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from filled_store import add_cogcanvas_who
from PIL import Image
from streamlit.testing.v1 import AppTest

from idbench.builders.registry import get_benchmark
from idbench.leaderboard import query, samples
from idbench.leaderboard.app import APP_PATH
from idbench.leaderboard.app.screens.model_samples import WHO_NOT_RECORDED
from idbench.leaderboard.hub_mirror import NOT_PUBLIC

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

SPEC = get_benchmark("cogcanvas")
TIMEOUT = 60
COUNTS = ["found", "missing", "swapped", "cloned", "extra"]


# --- pure functions ------------------------------------------------------------------------------


def _record(
    counts: dict, identities: list[dict] | None = None, faces: list | None = None, clone_group: list | None = None
) -> dict:
    return {
        "identities": identities or [],
        "faces": faces or [],
        "clone_group": clone_group or [],
        "counts": {"found": 0, "missing": 0, "swapped": 0, "cloned": 0, "extra": 0, "faces": len(faces or [])} | counts,
    }


def _identity(
    slot: str, face: int, found: bool, in_place: bool, has_reference: bool = True, cosine=0.5, margin=0.1
) -> dict:
    box = [10.0 * face, 0.0, 10.0 * face + 8, 8.0] if face >= 0 else None
    return {
        "slot": slot,
        "face": face,
        "box": box,
        "cosine": cosine if face >= 0 else None,
        "margin": margin if face >= 0 else None,
        "found": found,
        "has_reference": has_reference,
        "in_place": in_place,
    }


def test_worst_images_come_first_by_errors_then_lowest_strict_id_sim():
    records = {
        ("p1", 0): _record({"swapped": 2}),  # 2 errors
        ("p2", 0): _record({"missing": 1, "extra": 1, "cloned": 1}),  # 3 errors
        ("p3", 0): _record({"swapped": 1, "missing": 1}),  # 2 errors, lower id_sim_strict than p1
        ("p4", 0): _record({"found": 3}),  # none
        ("p5", 1): _record({"cloned": 2}),  # 2 errors, no id_sim_strict value: after p1 and p3
        ("p0", 0): _record({"missing": 2}),  # 2 errors, same value as p1: prompt order breaks the tie
    }
    strict = pd.DataFrame(
        {"prompt_id": ["p1", "p2", "p3", "p4", "p0"], "seed": [0] * 5, "value": [0.4, 0.9, 0.1, 0.8, 0.4]}
    )
    worst = samples.worst_assignments(records, strict, k=5)
    assert list(zip(worst["prompt_id"], worst["seed"])) == [("p2", 0), ("p3", 0), ("p0", 0), ("p1", 0), ("p5", 1)]
    assert worst["errors"].tolist() == [3, 2, 2, 2, 2]
    assert worst.loc[0, ["swapped", "cloned", "missing", "extra"]].tolist() == [0, 1, 1, 1]
    assert math.isnan(worst.loc[4, "id_sim_strict"])
    assert len(samples.worst_assignments(records, strict, k=2)) == 2
    assert samples.worst_assignments({}, strict, k=6).empty


def test_summary_by_group_size_from_the_aggregates():
    def stats(mean: float, n: int) -> dict:
        return {"mean": mean, "ci_low": None, "ci_high": None, "n": n, "n_nan": 0, "n_prompts": n}

    def cell(values: dict[str, float], n: int) -> dict:
        return {f"who.{name}": stats(value, n) for name, value in values.items()} | {"id_sim": stats(0.3, n)}

    aggregates = {
        "overall": cell({"found": 1.5, "missing": 0.75, "swapped": 0.5, "cloned": 0.25, "extra": 0.125}, 8),
        "breakdowns": {
            "n_persons": {
                "3": cell({"found": 1.0, "missing": 1.5, "swapped": 0.0, "cloned": 0.5, "extra": 0.25}, 4),
                "2": cell({"found": 2.0, "missing": 0.0, "swapped": 1.0, "cloned": 0.0, "extra": 0.0}, 4),
            }
        },
    }
    table = query.who_summary(aggregates, SPEC)
    assert table.index.name == "N" and table.index.tolist() == ["2", "3", "all"]
    assert table.columns.tolist() == [*COUNTS, "images"]
    assert table.loc["2"].tolist() == [2.0, 0.0, 1.0, 0.0, 0.0, 4.0]
    assert table.loc["3"].tolist() == [1.0, 1.5, 0.0, 0.5, 0.25, 4.0]
    assert table.loc["all"].tolist() == [1.5, 0.75, 0.5, 0.25, 0.125, 8.0]
    # A result scored before suite 0.3 has none of the counts: an empty table, which the page reads as "not recorded".
    old = {"overall": {"id_sim": stats(0.3, 8)}, "breakdowns": {"n_persons": {"2": {"id_sim": stats(0.3, 4)}}}}
    assert query.who_summary(old, SPEC).empty and query.who_summary({}, SPEC).empty


def test_only_the_tracks_that_score_strict_id_sim_record_who_became_whom():
    assert query.records_who_became_whom(SPEC, "reference")
    assert not query.records_who_became_whom(SPEC, "text-to-image")  # no references: nobody to become
    assert not query.records_who_became_whom(get_benchmark("identity-collapse"), "reference")


def test_each_person_gets_a_verdict_and_the_unmatched_faces_are_listed():
    record = _record(
        {"found": 2, "swapped": 1, "missing": 1, "cloned": 1, "extra": 1},
        identities=[
            _identity("A", 0, found=True, in_place=True),
            _identity("B", 1, found=True, in_place=False),
            _identity("C", -1, found=False, in_place=False),
            _identity("D", -1, found=False, in_place=False, has_reference=False),
        ],
        faces=[[0, 0, 8, 8], [10, 0, 18, 8], [20, 0, 28, 8], [30, 0, 38, 8]],
        clone_group=[0, -1, 0, -1],  # face 2 shows A again; face 3 is nobody of the prompt
    )
    table = samples.identity_table(record, {"A": "ref-a", "B": "ref-b", "C": "ref-c", "D": "ref-d"})
    assert table.columns.tolist() == ["slot", "reference", "verdict", "cosine", "margin", "face", "box"]
    assert table["verdict"].tolist() == ["found + cloned", "swapped", "missing", "no reference face"]
    assert table["reference"].tolist() == ["ref-a", "ref-b", "ref-c", "ref-d"]
    assert (
        table["face"].tolist() == [0, 1, -1, -1] and table.loc[2, "box"] is None and math.isnan(table.loc[2, "cosine"])
    )
    others = samples.unmatched_faces(record)
    assert others["face"].tolist() == [2, 3] and others["repeats"].tolist() == ["A", ""]
    assert samples.who_errors(record) == 4


def test_a_face_crop_is_padded_and_clipped_to_the_image():
    image = Image.new("RGB", (100, 80))
    assert samples.face_crop(image, [40, 30, 60, 50], pad=0.5).size == (40, 40)  # 20 px box, 10 px each side
    assert samples.face_crop(image, [0, 0, 20, 20], pad=0.5).size == (30, 30)  # clipped at the top-left corner
    assert samples.face_crop(image, [90, 70, 100, 80], pad=1.0).size == (20, 20)  # and at the bottom-right


def test_the_names_and_definitions_agree_with_the_scorer():
    """The app keeps the evidence name and the counts' definitions as text (the Space installs no scorer):
    they must stay those of evaluate_pkg."""
    from idbench.benchmarks.cogcanvas import suite as cogcanvas
    from idbench.evaluate_pkg.functional import identity

    assert samples.WHO_BECAME_WHOM == cogcanvas.WHO
    assert {f"who.{name}" for name in query.WHO_COUNTS} == {
        name for name in cogcanvas.DIAGNOSTICS if name.startswith("who.")
    }
    defined = re.findall(r"^- \*\*(\w+)\*\*: (.*?)(?=^- |\Z)", identity.__doc__, flags=re.M | re.S)
    doc = {name: " ".join(text.split()) for name, text in defined}
    assert set(doc) == set(query.WHO_COUNTS)
    for name, text in query.WHO_COUNTS.items():  # each of ours is the doc's, give or take its markup
        words = lambda s: re.findall(r"[a-z]+", s.lower())  # noqa: E731
        assert set(words(text)) <= set(words(doc[name])) | {"face", "model", "s", "same", "identity", "threshold"}, name


# --- the model page ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    """``$IDBENCH_HOME`` with the CogCanvas crossed baseline scored on the identity metrics (submission 1)."""
    root = tmp_path_factory.mktemp("who")
    add_cogcanvas_who(root, root / "home")
    return root / "home"


def _model_page(home: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("IDBENCH_HOME", str(home))
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT).run()
    at.query_params.update({"benchmark": "cogcanvas", "submission": "1"})
    return at.switch_page("views/model.py").run()


def _stored(home: Path) -> tuple[dict, Path]:
    """Submission 1's aggregates and result folder, as stored (sqlite3, not the store or the app)."""
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        text, folder = db.execute(
            "SELECT aggregates_json, results_path FROM results WHERE submission_id = 1 AND current"
        ).fetchone()
    return json.loads(text), Path(folder)


def _summary(at: AppTest) -> pd.DataFrame:
    [frame] = [d.value for d in at.dataframe if list(d.value.columns)[:1] == ["N"]]
    return frame


def _who_expanders(at: AppTest) -> list:
    return [e for e in at.expander if " seed " in e.label and "swapped" in e.label]


@pytest.mark.browser
def test_the_model_page_shows_the_summary_by_n_and_the_worst_assignments(scored, monkeypatch):
    at = _model_page(scored, monkeypatch)
    assert not at.exception and "Who became whom" in [h.value for h in at.subheader]
    aggregates, folder = _stored(scored)
    table = _summary(at)
    cells = aggregates["breakdowns"]["n_persons"]
    assert table["N"].tolist() == sorted(cells, key=int) + ["all"]
    for label, shown in zip(table["N"], table.itertuples()):
        stats = aggregates["overall"] if label == "all" else cells[label]
        for name in COUNTS:
            assert getattr(shown, name) == round(stats[f"who.{name}"]["mean"], 3), (label, name)
        assert shown.images == stats["who.found"]["n"]
    assert any("Swapped: a found identity out of place" in c.value for c in at.caption)

    # The worst images, worst first: as many errors as the evidence file's worst records.
    evidence = pd.read_parquet(folder / "judge_evidence.parquet")
    records = [json.loads(e) for e in evidence[evidence["metric"] == "who_became_whom"]["evidence"]]
    errors = sorted(
        (sum(r["counts"][c] for c in ("swapped", "cloned", "missing", "extra")) for r in records), reverse=True
    )
    expanders = _who_expanders(at)
    assert len(expanders) == min(6, len(records))
    shown_errors = [
        sum(int(n) for n in re.findall(r"(\d+) (?:swapped|cloned|missing|extra)", e.label)) for e in expanders
    ]
    assert shown_errors == errors[: len(expanders)]
    # Inside one: a row per person of its prompt with its verdict, and each person's reference thumbnail.
    first = expanders[0]
    prompt_id, seed = re.match(r"(\S+) seed (\d+)", first.label.replace("\\", "")).groups()
    mine = (
        (evidence["prompt_id"] == prompt_id)
        & (evidence["seed"] == int(seed))
        & (evidence["metric"] == "who_became_whom")
    )
    [stored] = evidence[mine]["evidence"]
    identities = json.loads(stored)["identities"]
    [persons] = first.dataframe
    assert persons.value["slot"].tolist() == [i["slot"] for i in identities]
    verdicts = {"found", "swapped", "missing", "no reference face"}
    assert set(persons.value["verdict"]) <= verdicts | {f"{v} + cloned" for v in verdicts}
    assert len(_images(first)) >= len(identities)  # a reference per person, plus the faces found


def _images(node) -> list:
    out = []
    for child in getattr(node, "children", {}).values():
        out += [child] if getattr(child, "type", "") == "image" else _images(child)
    return out


@pytest.mark.browser
def test_a_result_scored_before_suite_0_3_says_it_was_not_recorded(scored, tmp_path, monkeypatch):
    home = shutil.copytree(scored, tmp_path / "home")
    aggregates, folder = _stored(home)
    # The result as suite 0.2 left it: no who.* counts anywhere, no who-became-whom evidence.
    strip = lambda stats: {m: v for m, v in stats.items() if not m.startswith("who.")}  # noqa: E731
    aggregates["overall"] = strip(aggregates["overall"])
    for cells in aggregates["breakdowns"].values():
        for label in cells:
            cells[label] = strip(cells[label])
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:
        db.execute(
            "UPDATE results SET aggregates_json = ?, suite_version = '0.2', results_path = ?",
            (json.dumps(aggregates), str(home / "old")),
        )
    (home / "old").mkdir()
    shutil.copy(folder / "results.parquet", home / "old" / "results.parquet")
    at = _model_page(home, monkeypatch)
    assert not at.exception and not at.error
    assert WHO_NOT_RECORDED in [t.value for t in at.text]
    assert not [d for d in at.dataframe if list(d.value.columns)[:1] == ["N"]] and not _who_expanders(at)


@pytest.mark.browser
def test_a_hub_mirror_shows_the_summary_and_says_the_images_are_not_public(scored, tmp_path, monkeypatch):
    home = shutil.copytree(scored, tmp_path / "home")
    with sqlite3.connect(home / "leaderboard.sqlite3") as db:  # what hub_mirror writes: no images, no data
        db.execute("UPDATE submissions SET stored_path = ?, data_dir = ?", (NOT_PUBLIC, NOT_PUBLIC))
    at = _model_page(home, monkeypatch)
    assert not at.exception and not at.error
    assert _summary(at)["N"].tolist()[-1] == "all"
    assert any("not public" in t.value for t in at.text) and not _who_expanders(at)
