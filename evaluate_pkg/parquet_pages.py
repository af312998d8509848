"""The page headers of a parquet column chunk, read without decoding a page: what a page will cost.

A parquet page is the smallest unit a reader decodes: pyarrow allocates the page's uncompressed size,
as its header states, and decompresses the whole page before it hands out a single value. A row
group's metadata (``total_byte_size``, ``total_uncompressed_size``) only gives totals, so one
480 MB image among 224 tiny ones averages 2 MB a row and passes any check of the metadata. The page
headers say more: each states its uncompressed size and how many values it holds, so an image over
the per-image limit (a page of one value, or a page of several that is larger than any page of
images within the limits needs to be) is seen before anything is decoded.

:func:`column_pages` walks the pages of one column chunk, over the same byte range pyarrow reads
(the chunk's first page, dictionary or data, through ``total_compressed_size``), reading each page's
header (Thrift compact protocol: a few small integers, and an optional statistics struct that is
skipped) and seeking past its body. It reads at most ``MAX_HEADER_BYTES`` per header and never the
pages themselves, so it costs a few kilobytes of memory whatever the file holds. Anything it cannot
read is a :class:`PageHeaderError`: the file is then refused, as pyarrow would fail on it anyway.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

# A page header is a few dozen bytes; with min/max statistics of a binary column it can grow, but
# writers cap those (pyarrow drops statistics over 4 KiB). A larger header is refused, not read.
MAX_HEADER_BYTES = 1024 * 1024
# Structs nest this deep at most in a page header (PageHeader > DataPageHeader > Statistics).
_MAX_NESTING = 8

# PageType
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3


class PageHeaderError(ValueError):
    """A page header that cannot be read: a truncated, corrupt or crafted file."""


@dataclass(frozen=True)
class Page:
    """One page of a column chunk, as its header describes it."""

    kind: int  # DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 (or INDEX_PAGE)
    uncompressed_bytes: int  # what decoding it allocates
    compressed_bytes: int  # its body on disk
    values: int  # values it holds (a data page: rows, for a column that is not repeated)
    first_value: int  # the index of its first value in the chunk (data pages; 0 for a dictionary page)

    @property
    def is_data(self) -> bool:
        return self.kind in (DATA_PAGE, DATA_PAGE_V2)


class _Compact:
    """A reader of Thrift's compact protocol over ``data``, just enough for a PageHeader."""

    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise EOFError
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            value = self.byte()
            result |= (value & 0x7F) << shift
            if not value & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise PageHeaderError("a varint longer than 64 bits")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def skip(self, kind: int, depth: int) -> None:
        """Skip one value of compact type ``kind``."""
        if depth > _MAX_NESTING:
            raise PageHeaderError("nested too deep")
        if kind in (1, 2):  # a bool inside a struct: its value is the type itself
            return
        if kind == 3:  # byte
            self.byte()
        elif kind in (4, 5, 6):  # i16, i32, i64
            self.varint()
        elif kind == 7:  # double
            self.skip_bytes(8)
        elif kind == 8:  # binary / string
            self.skip_bytes(self.varint())
        elif kind in (9, 10):  # list, set
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.skip(element, depth + 1) if element not in (1, 2) else self.byte()
        elif kind == 11:  # map
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, depth + 1)
                    self.skip(types & 0x0F, depth + 1)
        elif kind == 12:  # struct
            self.struct(lambda field, kind: self.skip(kind, depth + 1), depth + 1)
        else:
            raise PageHeaderError(f"unknown Thrift type {kind}")

    def skip_bytes(self, count: int) -> None:
        if count < 0 or self.at + count > len(self.data):
            raise EOFError
        self.at += count

    def struct(self, on_field, depth: int = 0) -> None:
        """Read a struct's fields, calling ``on_field(field id, type)`` for each (it reads or skips the value)."""
        if depth > _MAX_NESTING:
            raise PageHeaderError("nested too deep")
        last = 0
        while True:
            header = self.byte()
            if header == 0:  # STOP
                return
            kind, delta = header & 0x0F, header >> 4
            field = last + delta if delta else self.zigzag()
            on_field(field, kind)
            last = field


def _parse_header(data: bytes) -> tuple[Page, int]:
    """The page a header in ``data`` describes, and the header's length in bytes (EOFError: read more)."""
    reader = _Compact(data)
    found: dict[str, int] = {}

    def values_of(key: str):
        def on_field(field: int, kind: int) -> None:
            if field == 1 and kind == 5:  # num_values of DataPageHeader, DictionaryPageHeader, DataPageHeaderV2
                found[key] = reader.zigzag()
            else:
                reader.skip(kind, 2)

        return on_field

    def on_field(field: int, kind: int) -> None:
        if field in (1, 2, 3) and kind == 5:  # type, uncompressed_page_size, compressed_page_size
            found[("type", "uncompressed", "compressed")[field - 1]] = reader.zigzag()
        elif field in (5, 7, 8) and kind == 12:  # data_page_header, dictionary_page_header, data_page_header_v2
            reader.struct(values_of("values"), 1)
        else:
            reader.skip(kind, 1)

    reader.struct(on_field)
    missing = [key for key in ("type", "uncompressed", "compressed") if key not in found]
    if missing:
        raise PageHeaderError(f"a page header without {', '.join(missing)}")
    if found["uncompressed"] < 0 or found["compressed"] < 0 or found.get("values", 0) < 0:
        raise PageHeaderError("a page header with a negative size")
    page = Page(found["type"], found["uncompressed"], found["compressed"], found.get("values", 0), 0)
    return page, reader.at


def column_pages(stream: BinaryIO, start: int, length: int) -> Iterator[Page]:
    """The pages of the column chunk at ``start`` (``length`` bytes: its ``total_compressed_size``).

    ``stream`` is the parquet file, opened for binary reading and seekable. Raises
    :class:`PageHeaderError` for a header that cannot be read, is over ``MAX_HEADER_BYTES`` or runs
    past the chunk.
    """
    if start < 0 or length < 0:
        raise PageHeaderError("a column chunk at a negative offset or of a negative size")
    end, at, first_value = start + length, start, 0
    while at < end:
        want = min(4096, end - at)
        while True:
            stream.seek(at)
            data = stream.read(want)
            try:
                page, header_bytes = _parse_header(data)
                break
            except EOFError:
                if len(data) < want or want >= min(MAX_HEADER_BYTES, end - at):
                    raise PageHeaderError(
                        f"a page header at byte {at} is truncated or over {MAX_HEADER_BYTES} bytes"
                    ) from None
                want = min(want * 4, MAX_HEADER_BYTES, end - at)
        if page.is_data:
            page = Page(page.kind, page.uncompressed_bytes, page.compressed_bytes, page.values, first_value)
            first_value += page.values
        yield page
        at += header_bytes + page.compressed_bytes
        if at > end:
            raise PageHeaderError(
                f"a page at byte {at - header_bytes - page.compressed_bytes} runs past its column chunk"
            )


def chunk_range(column) -> tuple[int, int]:
    """(start, length) of a column chunk (pyarrow's ``ColumnChunkMetaData``): its first page through its
    ``total_compressed_size``, the range pyarrow reads."""
    starts = [
        offset
        for offset in (column.dictionary_page_offset, column.data_page_offset)
        if offset is not None and offset > 0
    ]
    start = min(starts) if starts else column.data_page_offset or 0
    return start, column.total_compressed_size
