"""A leaderboard home with the identity-collapse sample and three scored baselines, for app tests."""

from __future__ import annotations

import io
import sqlite3
import zipfile
from pathlib import Path

from idbench.builders.build import build
from idbench.evaluate_pkg.baselines import make_baseline
from idbench.evaluate_pkg.context import ScoreOptions
from idbench.evaluate_pkg.data import load_benchmark_data
from idbench.leaderboard import board
from idbench.leaderboard.queue import submit
from idbench.leaderboard.store import Store
from idbench.leaderboard.worker import run_worker

BENCHMARK = "identity-collapse"
# The first 2 prompts of each of its grid's 15 cells (every group size in every scene), x 3 seeds: the
# tables, filters and breakdowns are all there at 90 images a submission instead of 225.
PROMPTS = 30
# CogCanvas's rows: 20 of its 82 sample prompts, every group size (2-5 persons) still there.
COGCANVAS_PROMPTS = 20


def lift_copy_marks(store_path: Path) -> None:
    """Unmark the copy check of every stored result, keeping its share and criteria.

    The baselines these fixtures score paste the references, so the copy check marks every one of them
    and the default view would rank none. The tests that use these stores are about the table's
    mechanics (filters, sorting, links, downloads), so the mark is lifted in the stored record; the copy
    mark itself is tested on stores that keep it (test_judge_and_copies.py, test_app_judges.py).
    """
    with sqlite3.connect(store_path) as db:
        db.execute(
            "UPDATE results SET copies_json = json_set(copies_json, '$.marked', json('false')) WHERE copies_json IS NOT NULL"
        )
    # An edit of the stored records is not a finished job: the boards are computed again, as an admin would.
    board.refresh(Store(Path(store_path).parent))


def share_features(home: Path, features: Path | None) -> None:
    """Make ``home``'s feature cache the session's shared one (``features``, the ``shared_features``
    fixture of tests/conftest.py) by a link, so the stores built from the same pictures in other test
    modules compute nothing again; None keeps a cache of its own. A copy of such a home must copy the link
    (``shutil.copytree(..., symlinks=True)``), not the shared cache."""
    if features is None:
        return
    home.mkdir(parents=True, exist_ok=True)
    link = home / "features"
    if not link.exists():
        link.symlink_to(features, target_is_directory=True)


def fill_store(root: Path, cogcanvas: bool = False, features: Path | None = None) -> Path:
    """``root/home`` as ``$IDBENCH_HOME``: the built benchmark and collage, clone, swap scored (tiny).

    Submission 1 (the collage) is then marked as not a plumbing check, so that the default view,
    which hides plumbing rows, has one row to show; it is given the family "Collages". The whole
    suite is scored, so no row is an incomplete suite.

    With ``cogcanvas``, the CogCanvas sample is built too and its collage baseline scored with the
    tiny profile on DINO and CLIP-T only (seconds, where the whole suite takes minutes): one
    plumbing-check, incomplete-suite row, as the demo leaves a benchmark (submission 4).

    ``features``: a feature cache shared with other fixtures (:func:`share_features`).
    """
    home = root / "home"
    share_features(home, features)
    data_dir = home / "benchmarks" / BENCHMARK  # where the app (like `idbench submit`) looks for it
    build(BENCHMARK, out=data_dir, n_prompts=PROMPTS)
    data = load_benchmark_data(data_dir)
    store = Store(home)
    for name in ("collage", "clone", "swap"):
        make_baseline(name, data, root / name, size=128)
        submit(store, root / name, data_dir)
    run_worker(store, once=True, options=ScoreOptions(profile="tiny"))
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE results SET plumbing = 0 WHERE submission_id = 1")
        db.execute(
            "UPDATE submissions SET metadata_json = json_set(metadata_json, '$.family', 'Collages') WHERE id = 1"
        )
    if cogcanvas:
        add_cogcanvas(root, home)  # the home's cache is the shared one already, when one was given
    lift_copy_marks(store.path)
    return home


def add_cogcanvas(root: Path, home: Path, features: Path | None = None) -> None:
    """Build the CogCanvas sample under ``home`` and score its collage baseline with the tiny profile on
    DINO and CLIP-T only (seconds; the whole suite takes minutes): a plumbing, incomplete-suite row.
    ``features``: as for :func:`fill_store`."""
    share_features(home, features)
    data_dir = home / "benchmarks" / "cogcanvas"
    if not data_dir.is_dir():  # built already when another CogCanvas row came first
        build("cogcanvas", out=data_dir, n_prompts=COGCANVAS_PROMPTS)
    make_baseline("collage", load_benchmark_data(data_dir), root / "cogcanvas-collage", size=128)
    store = Store(home)
    submit(store, root / "cogcanvas-collage", data_dir)
    run_worker(store, once=True, options=ScoreOptions(profile="tiny", metrics=("dino_sim", "clip_t")))
    lift_copy_marks(store.path)


def add_charis(root: Path, home: Path) -> int:
    """Build the CHARIS sample under ``home`` and score its collage baseline with the tiny profile on
    DINO and CLIP-I only (no judge): a plumbing, incomplete-suite row whose copy mark is kept, so it is
    shown apart, unranked, as the demo leaves every row. Returns its submission id."""
    data_dir = home / "benchmarks" / "charis"
    build("charis", out=data_dir)
    make_baseline("collage", load_benchmark_data(data_dir), root / "charis-collage", size=128)
    store = Store(home)
    submitted = submit(store, root / "charis-collage", data_dir)
    run_worker(store, once=True, options=ScoreOptions(profile="tiny", metrics=("dino_sim", "clip_i")))
    return submitted.submission_id


def zip_folder(folder: Path) -> bytes:
    """``folder``'s files as a zip archive (paths relative to it), as a submitter would upload them."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(folder).as_posix())
    return archive.getvalue()


def add_cogcanvas_who(root: Path, home: Path) -> None:
    """Build the CogCanvas sample under ``home`` and score its crossed baseline (every person moved one
    slot: swaps by construction) with the tiny profile on the identity metrics only, which record who
    became whom (``who.*`` counts and per-image evidence; the face model is the real one): a plumbing,
    incomplete-suite row. At 512 px dlib's HOG finds most pasted faces; at 256 its CNN fallback ran on
    most pictures (the module's setup took 75 s on one core instead of 52)."""
    data_dir = home / "benchmarks" / "cogcanvas"
    if not data_dir.is_dir():
        build("cogcanvas", out=data_dir, n_prompts=COGCANVAS_PROMPTS)
    make_baseline("crossed", load_benchmark_data(data_dir), root / "cogcanvas-crossed", size=512)
    store = Store(home)
    submit(store, root / "cogcanvas-crossed", data_dir)
    run_worker(store, once=True, options=ScoreOptions(profile="tiny", metrics=("id_sim", "id_sim_strict")))
