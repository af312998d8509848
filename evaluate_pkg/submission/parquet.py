"""A folder of parquet: ``submission.json`` and ``*.parquet`` files anywhere inside the folder.

The files hold the columns ``prompt_id`` (string), ``seed`` (integer) and ``image``: a
``datasets.Image()`` struct ``{bytes, path}`` with the bytes embedded, or plain binary (the encoded
file); any other column (the prompt, say) is ignored. ``Dataset.to_parquet`` writes this.

A parquet file says little about its values until they are decoded, so the checks come in rounds,
each before anything bigger is read:

1. the metadata (:func:`_parquet_problem`): the columns and their types, no row group over
   ``MAX_ROW_GROUP_BYTES``, no row group whose images average over ``MAX_IMAGE_BYTES`` a row; then the
   rows of all files against :func:`~.shared.max_listing_rows` and their image bytes against the
   unpacked-bytes limit of :class:`~.archive.ZipLimits`;
2. every page header of the columns read (:func:`_page_problem`, with
   :mod:`idbench.evaluate_pkg.parquet_pages`): a page holding one image over ``MAX_IMAGE_BYTES`` is
   refused naming its row, any page over ``MAX_PAGE_BYTES`` as too large to decode;
3. the rows, read one at a time (:func:`_spool_parquet`): an image over ``MAX_IMAGE_BYTES`` is refused
   on its length before it is copied, and the bytes written are counted against the unpacked-bytes
   limit again (dictionary encoding can make the metadata understate a column).

Each accepted image is copied out to a file of its own in the submission's temporary folder, so that
any one image is read later without reading a row group. docs/hostile-input.md has the whole order.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from idbench.evaluate_pkg.images import MAX_IMAGE_BYTES
from idbench.evaluate_pkg.parquet_pages import PageHeaderError, chunk_range, column_pages

from .archive import UNPACKED_BYTES_ENV, ZipLimits
from .problems import Problem, SubmissionError, _Problems
from .shared import _Row, _Scratch

PARQUET_COLUMNS = ("prompt_id", "seed", "image")
# Parquet is read one row group at a time; a bigger group than this is refused to keep memory bounded.
MAX_ROW_GROUP_BYTES = 512 * 1024 * 1024
# A page is what parquet decodes whole (its header's uncompressed size is allocated, then one value is
# copied out of it): a page of the columns read over this is refused from its header, before any is
# decoded, so decoding holds at most about twice this. datasets' to_parquet writes one image a page.
MAX_PAGE_BYTES = 128 * 1024 * 1024
# A page of one value larger than MAX_IMAGE_BYTES by more than this (the value's length prefix and
# levels take a few bytes) holds an image over the limit: refused from its header, never decoded.
PAGE_OVERHEAD_BYTES = 4096
# Parquet files are read through a buffer of this size, so a column chunk is never read whole.
PARQUET_BUFFER_BYTES = 1024 * 1024


def _read_parquets(
    parquets: list[Path], folder: Path, workdir: _Scratch, problems: _Problems, max_rows: int, limits: ZipLimits
) -> list[_Row] | None:
    """Rows of every parquet file, their images copied out one file each (read once, in file order).

    Every file's metadata is checked first (columns, row groups, rows, image bytes: see
    :func:`_parquet_problem`), and the rows of all files together against ``max_rows`` and their
    image bytes against the unpacked-bytes limit, before a single image is spooled. Returns None when
    a file as a whole is unusable: its rows would all be reported missing.
    """
    readers: list[tuple[str, pq.ParquetFile]] = []
    rows_in_all = images_in_all = 0
    for parquet in parquets:
        name = parquet.relative_to(folder).as_posix()
        try:
            reader = pq.ParquetFile(parquet, buffer_size=PARQUET_BUFFER_BYTES)
            problem = _parquet_problem(reader) or _page_problem(parquet, reader)
        except (pa.ArrowException, OSError) as err:
            problem = f"not a readable parquet file ({err})"
        if problem:
            problems.append(Problem(None, None, name, problem))
            continue
        readers.append((name, reader))
        rows_in_all += reader.metadata.num_rows
        images_in_all += _image_bytes(reader)
    if len(readers) < len(parquets):
        return None
    listing = "the parquet files"
    if rows_in_all > max_rows:
        problems.append(
            Problem(
                None, None, listing, f"{rows_in_all} rows, more than this benchmark could need (at most {max_rows})"
            )
        )
        return None
    if images_in_all > limits.max_bytes:
        message = (
            f"hold {images_in_all} bytes of images, over the {limits.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})"
        )
        problems.append(Problem(None, None, listing, message))
        return None
    rows: list[_Row] = []
    spooled = _Spooled(limits.max_bytes)
    for number, (name, reader) in enumerate(readers):
        out = workdir.folder(f"parquet-{number:04d}")
        try:
            rows.extend(_spool_parquet(reader, name, out, problems, spooled))
        except (pa.ArrowException, OSError) as err:
            problems.append(Problem(None, None, name, f"not a readable parquet file ({err})"))
            return None
    return rows


def _image_bytes(reader: pq.ParquetFile) -> int:
    """The uncompressed bytes of the image column (its leaves: a struct's bytes and path) in the metadata."""
    metadata = reader.metadata
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.path_in_schema.split(".")[0] == "image":
                total += chunk.total_uncompressed_size
    return total


def _parquet_problem(reader: pq.ParquetFile) -> str | None:
    """What is wrong with a parquet file's columns or layout, if anything: read from its metadata only.

    Row groups over ``MAX_ROW_GROUP_BYTES`` are refused, and so is a row group whose image bytes
    average more than ``MAX_IMAGE_BYTES`` a row (then at least one image is over the limit).
    """
    schema = reader.schema_arrow
    missing = [c for c in PARQUET_COLUMNS if c not in schema.names]
    if missing:
        expected, found = ", ".join(PARQUET_COLUMNS), ", ".join(schema.names)
        return f"missing column(s) {', '.join(missing)}; expected {expected} (found {found})"
    kinds = {name: schema.field(name).type for name in PARQUET_COLUMNS}
    if not (pa.types.is_string(kinds["prompt_id"]) or pa.types.is_large_string(kinds["prompt_id"])):
        return f"column prompt_id should hold strings, found {kinds['prompt_id']}"
    if not pa.types.is_integer(kinds["seed"]):
        return f"column seed should hold integers, found {kinds['seed']}"
    image = kinds["image"]
    if pa.types.is_struct(image):
        image = image.field("bytes").type if image.get_field_index("bytes") >= 0 else None
    if image is None or not (pa.types.is_binary(image) or pa.types.is_large_binary(image)):
        return f"column image should be a datasets Image struct {{bytes, path}} or binary, found {kinds['image']}"
    # A row group is the smallest unit parquet reads; bound it so that memory stays bounded.
    metadata = reader.metadata
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        size = row_group.total_byte_size
        if size > MAX_ROW_GROUP_BYTES:
            return (
                f"row group {group} holds {size} bytes, over the {MAX_ROW_GROUP_BYTES}-byte limit; "
                "write smaller row groups (datasets' to_parquet does)"
            )
        images = sum(
            row_group.column(c).total_uncompressed_size
            for c in range(row_group.num_columns)
            if row_group.column(c).path_in_schema.split(".")[0] == "image"
        )
        if row_group.num_rows and images / row_group.num_rows > MAX_IMAGE_BYTES:
            average = images // row_group.num_rows
            return f"row group {group}: its images average {average} bytes, over the {MAX_IMAGE_BYTES}-byte limit per image"
    return None


def _page_problem(path: Path, reader: pq.ParquetFile) -> str | None:
    """What the page headers of the columns read (``PARQUET_COLUMNS``) show to be over a limit, or None.

    Every page of those columns is looked at (:mod:`idbench.evaluate_pkg.parquet_pages`: headers only,
    a few KB read each), before any is decoded: a page of one image over ``MAX_IMAGE_BYTES`` names
    its row, and any page over ``MAX_PAGE_BYTES`` is refused as too large to decode. The metadata's
    sizes are totals (an image of 480 MB among 224 small ones averages 2 MB a row); the headers state
    what decoding each page allocates.
    """
    metadata = reader.metadata
    first_row = 0
    with path.open("rb") as stream:
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                column = row_group.column(index)
                name = column.path_in_schema
                if name.split(".")[0] not in PARQUET_COLUMNS:
                    continue  # never read
                try:
                    for page in column_pages(stream, *chunk_range(column)):
                        size = page.uncompressed_bytes
                        if (
                            name.split(".")[0] == "image"
                            and page.is_data
                            and page.values == 1
                            and size > MAX_IMAGE_BYTES + PAGE_OVERHEAD_BYTES
                        ):
                            row = first_row + page.first_value
                            return f"row {row}: an image of about {size} bytes, over the {MAX_IMAGE_BYTES}-byte limit (read from its page header; not decoded)"
                        if size > MAX_PAGE_BYTES:
                            what = "dictionary page" if not page.is_data else f"page of {page.values} values"
                            return (
                                f"row group {group}, column {name}: a {what} holding {size} bytes, over the {MAX_PAGE_BYTES}-byte "
                                "limit per page (read from its header; not decoded); write one image a page, as datasets' "
                                "to_parquet does, or smaller row groups"
                            )
                except PageHeaderError as err:
                    return f"row group {group}, column {name}: unreadable page header ({err})"
            first_row += row_group.num_rows
    return None


class _Spooled:
    """Counts the image bytes spooled out of parquet files against the unpacked-bytes limit.

    The metadata's uncompressed sizes are checked first, but a dictionary-encoded column can decode
    to more than they say; this count holds the limit on the bytes actually written.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.total = 0

    def add(self, size: int, source: str) -> None:
        self.total += size
        if self.total > self.max_bytes:
            message = f"images add up to more than the {self.max_bytes}-byte limit (${UNPACKED_BYTES_ENV})"
            raise SubmissionError([Problem(None, None, source, message)])


def _spool_parquet(reader: pq.ParquetFile, name: str, out: Path, problems: _Problems, spooled: _Spooled) -> list[_Row]:
    """The rows of one parquet file, each image copied out to a file of its own under ``out``.

    Rows are read one at a time (a batch of one row), so memory holds one image, not a row group of
    them; an image over ``MAX_IMAGE_BYTES`` is refused before it is written.
    """
    rows = []
    batches = reader.iter_batches(batch_size=1, columns=list(PARQUET_COLUMNS), use_threads=False)
    for number, batch in enumerate(batches):
        images = batch.column("image")
        if pa.types.is_struct(images.type):
            images = images.field("bytes")
        prompt_id, seed, image = batch.column("prompt_id")[0].as_py(), batch.column("seed")[0].as_py(), images[0]
        source = f"{name} row {number}"
        if prompt_id is None or seed is None or seed < 0:
            message = "prompt_id is missing" if prompt_id is None else f"seed {seed} is not a non-negative integer"
            problems.append(Problem(prompt_id, None, source, message))
            continue
        data = image.as_buffer() if image.is_valid else None  # the value in Arrow's memory, not a copy
        if data is None:
            error = "no image bytes (an image given only as a path); embed the bytes"
            rows.append(_Row(prompt_id, seed, source, source, None, error))
        elif data.size > MAX_IMAGE_BYTES:  # measured before any copy is made or anything decodes it
            error = f"{data.size} bytes, over the {MAX_IMAGE_BYTES}-byte limit"
            rows.append(_Row(prompt_id, seed, source, source, None, error))
        else:
            spooled.add(data.size, source)
            path = out / f"{number:08d}.img"
            path.write_bytes(data)
            rows.append(_Row(prompt_id, seed, source, source, path))
        del data, image, images, batch  # the next batch is decoded without this one's value still held
    return rows
