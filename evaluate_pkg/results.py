"""The result folder of ``idbench score``: its file names, how it is written and how it is read back.

The scorer writes one folder per scored submission; the leaderboard's queues and Hub mirror copy it,
the pages, ``idbench compare``, the API, CHARIS's alignment study and the bench scripts read it. They
all take the names and the readers from here, so a file is renamed, bounded or checked in one place.

Layout of a result folder::

    results.parquet         one row per (prompt_id, seed, metric[, subject]): the raw values
    aggregates.json         the summary: means and intervals, models, notes, the metrics not run
    judge_evidence.parquet  what a judge or the copy check kept per image (only when there is some)
    report.md               the report, with its PNG plots beside it
    copies/                 the copy check's figures, listed in copies/index.json (only when flagged)
    shards/                 a run scored in shards: K-of-N.json records and their folders (kept by a merge)

Writing goes through :func:`idbench.atomic.atomic_directory` (:func:`staged`): a folder is whole or
absent, and an older one is replaced only once the new one is complete. Reading holds every file to
bounds before it is decoded (:mod:`.results_bounds` for the parquet files, :data:`MAX_AGGREGATES_BYTES`
for the summary), since readers also meet folders copied from elsewhere or edited on a results repo;
anything wrong is one :class:`ResultFileError` line naming the file.

This module imports neither torch nor the scorer: the leaderboard (a Space without torch) reads
result folders through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idbench.atomic import atomic_directory
from idbench.errors import IdbenchError
from idbench.evaluate_pkg.results_bounds import results_file_problem

if TYPE_CHECKING:
    import pandas as pd

SAMPLES_FILE = "results.parquet"
AGGREGATES_FILE = "aggregates.json"
EVIDENCE_FILE = "judge_evidence.parquet"
REPORT_FILE = "report.md"
COPIES_FOLDER = "copies"
COPY_INDEX_FILE = f"{COPIES_FOLDER}/index.json"
SHARDS_FOLDER = "shards"  # a run scored in shards: each shard's record and features (evaluate_pkg.merge)

# The summary of the largest benchmark is a few hundred kB; the bound only keeps a stray huge file out of memory.
MAX_AGGREGATES_BYTES = 256 << 20


class ResultFileError(IdbenchError, ValueError):
    """A file of a result folder that cannot be read: missing column, unreadable, too large. One line
    that starts with the file's path."""


class ResultsTooLarge(ResultFileError):
    """A parquet file of a result folder over the bounds of :mod:`.results_bounds`."""


# --- writing -------------------------------------------------------------------------------------


@contextlib.contextmanager
def staged(out: str | os.PathLike, *, overwrite: bool = False, carry: str | None = None) -> Iterator[Path]:
    """A staging folder that becomes the result folder ``out`` once the body returns (atomic_directory).

    ``carry``: a subfolder of an existing ``out`` copied into the new one first (the merge keeps its
    shards' records there, which a rewrite of the results must not drop)."""
    with atomic_directory(out, overwrite=overwrite) as staging:
        if carry is not None and (Path(out) / carry).is_dir():
            shutil.copytree(Path(out) / carry, staging / carry)
        yield staging


def aggregates_text(summary: dict[str, Any]) -> str:
    """The text of ``aggregates.json``: keys sorted and indented, so two runs diff line by line."""
    return json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"


def write_samples(folder: str | os.PathLike, frame: pd.DataFrame) -> Path:
    """The per-sample values into ``folder`` (a staging folder, or one no reader sees yet); their path."""
    path = Path(folder) / SAMPLES_FILE
    frame.to_parquet(path, index=False)
    return path


def write_evidence(folder: str | os.PathLike, frame: pd.DataFrame) -> Path:
    """The evidence table (prompt_id, seed, metric, evidence as JSON text) into ``folder``; its path."""
    path = Path(folder) / EVIDENCE_FILE
    frame.to_parquet(path, index=False)
    return path


def write_aggregates(folder: str | os.PathLike, summary: dict[str, Any]) -> Path:
    """The summary into ``folder`` as :func:`aggregates_text`; its path."""
    path = Path(folder) / AGGREGATES_FILE
    path.write_text(aggregates_text(summary))
    return path


def write_data(
    folder: str | os.PathLike, samples: pd.DataFrame, summary: dict[str, Any], evidence: pd.DataFrame | None = None
) -> None:
    """The data files of a result folder, in the scorer's order: values, evidence (when given), summary."""
    write_samples(folder, samples)
    if evidence is not None:
        write_evidence(folder, evidence)
    write_aggregates(folder, summary)


def write_copy_index(folder: str | os.PathLike, flagged: list[dict[str, Any]]) -> Path:
    """The list of the copy check's figures, ``copies/index.json``, into ``folder``; its path."""
    path = Path(folder) / COPY_INDEX_FILE
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(flagged, indent=1) + "\n")
    return path


# --- reading -------------------------------------------------------------------------------------


def one_line(error: BaseException) -> str:
    """An exception's text on one line of at most 200 characters (its type's name when it has none)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def read_parquet_file(
    file: str | os.PathLike,
    columns: Sequence[str] | None = None,
    *,
    optional: Sequence[str] = (),
    metric: str | None = None,
) -> pd.DataFrame | None:
    """The ``columns`` (all when None) and the present ``optional`` ones of a parquet file of a result
    folder, only ``metric``'s rows when given; None when the file does not exist.

    Every reader of these files comes through here, so each is checked the same way before a value is
    decoded: the columns asked for are present, and the file is within :mod:`.results_bounds` for them.
    What fails is one :class:`ResultFileError` line naming the file (:class:`ResultsTooLarge` for the
    bounds); a caller that shows no error (a page) catches it and says the values are not available.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    path = Path(file)
    if not path.is_file():
        return None
    try:
        present = pq.read_schema(path).names
        if columns is None:
            wanted = None
        else:
            missing = [name for name in columns if name not in present]
            if missing:
                raise ResultFileError(
                    f"{path}: no column {', '.join(missing)} "
                    f"(a {path.name} of `idbench score` has {', '.join(columns)})"
                )
            wanted = [*columns, *(name for name in optional if name in present and name not in columns)]
        too_large = results_file_problem(path, wanted)
        if too_large:
            raise ResultsTooLarge(too_large)
        return pd.read_parquet(path, columns=wanted, filters=[("metric", "==", metric)] if metric is not None else None)
    except ResultFileError:
        raise
    except (OSError, ValueError, TypeError, KeyError, IndexError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise ResultFileError(f"{path}: unreadable as parquet ({one_line(error)})") from None


def read_samples(
    folder: str | os.PathLike,
    columns: Sequence[str] | None = None,
    *,
    optional: Sequence[str] = (),
    metric: str | None = None,
) -> pd.DataFrame | None:
    """The per-sample values of the result folder ``folder`` (:func:`read_parquet_file` of its
    ``results.parquet``); None when it has none."""
    return read_parquet_file(Path(folder) / SAMPLES_FILE, columns, optional=optional, metric=metric)


def read_evidence(folder: str | os.PathLike) -> pd.DataFrame | None:
    """The evidence table of the result folder ``folder``, bounded like the values; None without one."""
    return read_parquet_file(Path(folder) / EVIDENCE_FILE)


def read_aggregates_file(file: str | os.PathLike, max_bytes: int = MAX_AGGREGATES_BYTES) -> Any:
    """The decoded JSON of a summary file, at most ``max_bytes`` of it; one :class:`ResultFileError` line
    naming the file when it is absent, larger or not JSON. The caller checks the fields it reads."""
    path = Path(file)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ResultFileError(f"{path}: {size} bytes, more than the {max_bytes} an {AGGREGATES_FILE} may have")
        return json.loads(path.read_bytes().decode("utf-8"))
    except ResultFileError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
        raise ResultFileError(f"{path}: unreadable ({one_line(error)})") from None


def read_aggregates(folder: str | os.PathLike, max_bytes: int = MAX_AGGREGATES_BYTES) -> Any:
    """The summary of the result folder ``folder`` (:func:`read_aggregates_file` of its ``aggregates.json``)."""
    return read_aggregates_file(Path(folder) / AGGREGATES_FILE, max_bytes)
