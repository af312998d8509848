"""The empty submission a user fills in (``idbench template``).

For an image task, ``submission.json`` to complete, an empty ``images/`` folder and a manifest that
lists every required (prompt_id, seed) with a proposed file name; for ``retrieval``, ``rankings.csv``
listing every slot's candidates with the rank left blank. The file names are only a proposal: the
manifest is what pairs an image with its prompt.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import idbench
from idbench.atomic import atomic_directory
from idbench.builders.spec import DEFAULT_TASK
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError

from .folder import MANIFEST_COLUMNS, MANIFEST_NAME
from .metadata import METADATA_NAME
from .rankings import RANKING_COLUMNS, RANKINGS_NAME

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def expected_file(prompt_id: str, seed: int) -> str:
    """The file name the template proposes for a pair (only a proposal: the manifest is what counts)."""
    return f"images/{_SAFE_NAME.sub('_', prompt_id)}_s{seed}.png"


def template_metadata(data: BenchmarkData) -> dict:
    """``submission.json`` as the template writes it: the benchmark filled in, the rest to fill."""
    return {
        "benchmark": data.name,
        "model": "",
        "family": "",
        "link": "",
        "license": "",
        "generation": {},
        "notes": "",
        "idbench_version": idbench.__version__,
    }


def write_template(data: BenchmarkData, out: Path, overwrite: bool = False, task: str = DEFAULT_TASK) -> Path:
    """Write an empty submission of ``task`` for ``data`` into ``out``; return ``out``.

    Image tasks (``reference``, ``text-to-image``) get ``images/`` and a manifest of every required
    (prompt_id, seed); ``retrieval`` gets ``rankings.csv`` listing each slot's candidates with the
    rank left empty, for the submitter to fill (1 = best) or to cut short. ``submission.json`` holds
    the metadata to fill, and the task when it is not the default. A task the benchmark does not
    offer is refused (:class:`~idbench.evaluate_pkg.data.BenchmarkDataError`).

    The folder is written next to ``out`` and renamed into place when complete; an existing ``out``
    is refused (:class:`~idbench.atomic.OutputExistsError`) unless ``overwrite``, and then replaced only
    once the new one is complete. Example::

        write_template(load_benchmark_data("data/identity-collapse"), Path("my-submission"))
    """
    if task not in data.spec.tasks:
        raise BenchmarkDataError(f"{data.name} offers the tasks {', '.join(data.spec.tasks)}, not {task!r}")
    out = Path(out)
    with atomic_directory(out, overwrite=overwrite) as staging:
        metadata = template_metadata(data) | ({} if task == DEFAULT_TASK else {"task": task})
        (staging / METADATA_NAME).write_text(
            json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if task == "retrieval":
            _write_rankings_template(data, staging / RANKINGS_NAME)
            return out
        (staging / "images").mkdir()
        files: set[str] = set()
        with (staging / MANIFEST_NAME).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(MANIFEST_COLUMNS)
            for prompt_id, seed in data.required_pairs:
                name = expected_file(prompt_id, seed)
                if name in files:  # two ids that differ only in unsafe characters
                    name = name.removesuffix(".png") + f"_{len(files)}.png"
                files.add(name)
                writer.writerow([prompt_id, seed, name])
    return out


def _write_rankings_template(data: BenchmarkData, path: Path) -> None:
    """``rankings.csv`` with every (prompt, slot, candidate) of the retrieval config and an empty rank."""
    if "retrieval" not in data.tables:
        raise BenchmarkDataError(f"{data.name} (this build) has no retrieval config to rank")
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(RANKING_COLUMNS)
        for row in data.tables["retrieval"]:
            for ref_id in row["candidate_ref_ids"]:
                writer.writerow([row["prompt_id"], row["slot"], "", ref_id])
