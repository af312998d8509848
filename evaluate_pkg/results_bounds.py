"""Bounds on a results file read back: ``results.parquet`` and ``judge_evidence.parquet`` of a result folder.

The scorer writes these files, but the readers (``idbench compare``, the leaderboard's model pages and
rank intervals) also meet files edited in place on a results repo or copied from elsewhere. Parquet
compresses well: 3.8 MB of 20 million identical rows took one page run of the app from 875 MB to 2.8 GB.
So, before a reader decodes anything, the file's footer is held to what a real result needs:

- at most :data:`MAX_RESULT_ROWS` rows. A full-size CogCanvas run at 4 seeds holds about half a million
  (prompts x seeds x (metrics + per-subject rows)); the bound leaves a margin of about 8.
- at most :data:`MAX_RESULT_BYTES` of uncompressed data in the columns read, by the row groups' own
  metadata (the values before any decoding; a full-size run is some tens of MB).
- at most :data:`MAX_RESULT_FILE_BYTES` on disk, checked before the footer is parsed.

The row groups' sizes are what the file says of itself; the page headers, which a crafted file could
make disagree with them, are checked only for submissions (``evaluate_pkg.parquet_pages``), where
anyone can upload. A results file needs write access to the results repo.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

MAX_RESULT_ROWS = 4_000_000
MAX_RESULT_BYTES = 256 * 1024 * 1024
MAX_RESULT_FILE_BYTES = 256 * 1024 * 1024


def results_file_problem(path: Path, columns: Sequence[str] | None = None) -> str | None:
    """Why ``path`` (a parquet file of a result folder) is too large to read, in one line naming it; None
    when its size, row count and the uncompressed size of ``columns`` (all when None) are within bounds.
    An unreadable footer raises as pyarrow does (OSError, ValueError): the callers already say that."""
    import pyarrow.parquet as pq

    size = Path(path).stat().st_size
    if size > MAX_RESULT_FILE_BYTES:
        return f"{path}: {size / 2**20:,.0f} MiB on disk, over the {MAX_RESULT_FILE_BYTES / 2**20:,.0f} MiB a results file may have"
    metadata = pq.ParquetFile(path).metadata
    if metadata.num_rows > MAX_RESULT_ROWS:
        return f"{path}: {metadata.num_rows:,} rows, over the {MAX_RESULT_ROWS:,} a results file may have"
    wanted = None if columns is None else set(columns)
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            if wanted is None or chunk.path_in_schema.split(".")[0] in wanted:
                total += max(0, chunk.total_uncompressed_size)
    if total > MAX_RESULT_BYTES:
        return (
            f"{path}: {total / 2**20:,.0f} MiB of values uncompressed, over the {MAX_RESULT_BYTES / 2**20:,.0f} MiB "
            "a results file may have"
        )
    return None
