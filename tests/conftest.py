"""Shared fixtures. Nothing here, or in any test, reaches the network."""

from __future__ import annotations

import csv
import hashlib
import io
import os

# Before anything imports huggingface_hub or datasets: tests never reach for a hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# idbench's own caches (tiny models, features, datasets) go to one temporary folder per test session,
# never into the user's home.
import tempfile  # noqa: E402

_SESSION_CACHE = tempfile.mkdtemp(prefix="idbench-tests-")
for _variable, _sub in (
    ("IDBENCH_MODELS", "models"), ("IDBENCH_CACHE", "cache"), ("IDBENCH_DATASETS_CACHE", "datasets"), ("IDBENCH_HOME", "home")
):
    os.environ.setdefault(_variable, os.path.join(_SESSION_CACHE, _sub))

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def noise_jpeg(seed: int, size: tuple[int, int] = (64, 48)) -> bytes:
    """A small JPEG of smooth random blobs: every seed gives a different picture (and pHash)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_manifest(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


COLLAPSE_HEADER = ["file", "name", "kind", "source", "license", "attribution"]


def make_collapse_source(folder: Path, n: int, first_seed: int = 0) -> Path:
    """An identity-collapse source folder with ``n`` distinct generated subjects."""
    rows = []
    for k in range(n):
        name = f"img/subject_{k:03d}.jpg"
        (folder / "img").mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(noise_jpeg(first_seed + k))
        rows.append([name, f"the subject number {k}", "human" if k % 2 else "animal", "generated", "CC0-1.0", ""])
    return write_manifest(folder / "manifest.csv", COLLAPSE_HEADER, rows)


@pytest.fixture
def fresh_cache(tmp_path_factory) -> str:
    """A datasets cache of its own: load_dataset can serve stale data for a rewritten local folder."""
    return str(tmp_path_factory.mktemp("hf-cache"))


# --- a dataset repo in the Hugging Face cache, as a download leaves it ---------------------------

HUB_REVISION = "0123456789abcdef0123456789abcdef01234567"


def place_dataset_in_hub_cache(cache: Path, repo_id: str, source: Path) -> Path:
    """``source`` (recursively) as huggingface_hub stores a download of dataset ``repo_id`` at HUB_REVISION."""
    repo = cache / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / HUB_REVISION
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(HUB_REVISION)
    return snapshot


# --- the suite contract: every metric of a spec is computed or reported not run ------------------


def check_suite_contract(spec, summary: dict, produced: set[str], suite) -> None:
    """One scoring run of ``spec`` against its suite's contract (see idbench.evaluate_pkg.suites).

    Every metric of ``spec.metric_suite`` is either among the ``produced`` metric names of the
    results or in ``summary["not_run"]`` with a non-empty reason, never both; nothing is produced
    besides suite metrics, ``<judged metric>.failure_rate`` and the suite's declared DIAGNOSTICS.
    """
    declared = {m.name for m in spec.metric_suite}
    not_run = summary["not_run"]
    for metric in declared:
        if metric in not_run:
            assert metric not in produced, f"{spec.name}: {metric} is both computed and reported not run"
            assert isinstance(not_run[metric], str) and not_run[metric].strip(), f"{spec.name}: {metric} not run without a reason"
        else:
            assert metric in produced, f"{spec.name}: {metric} was neither computed nor reported not run"
    assert set(not_run) <= declared, f"{spec.name}: not_run names metrics outside the suite: {set(not_run) - declared}"
    from idbench.evaluate_pkg.copies import DIAGNOSTICS as COPY_DIAGNOSTICS  # the runner's, for every benchmark

    allowed = (declared | {f"{m.name}.failure_rate" for m in spec.metric_suite if m.judged}
               | set(getattr(suite, "DIAGNOSTICS", {})) | set(COPY_DIAGNOSTICS))
    assert produced <= allowed, f"{spec.name}: produced metrics outside its suite: {sorted(produced - allowed)}"
