"""The last check of every image format: each image decoded in full, as scoring will decode it.

Before decoding, each image's header is checked (the pixel limit, and for a submitted image the side
and aspect-ratio limits: :func:`idbench.evaluate_pkg.images.size_problem`); then
:func:`idbench.evaluate_pkg.images.working_image` decodes it, so a truncated file fails at validation
rather than halfway through scoring. Decoding runs on ``DECODE_WORKERS`` threads that together hold
at most ``MAX_PIXELS_IN_FLIGHT`` pixels (by the headers' sizes), so memory stays bounded whatever the
images and the number of cores. A good image's content hash is kept; a bad one is a problem of its row.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from idbench.evaluate_pkg.images import (
    MAX_IMAGE_BYTES,
    MAX_PIXELS,
    ImageError,
    content_hash,
    header_size,
    working_image,
)

from .problems import Problem, _Problems
from .shared import _Row

# Images are decoded in threads (Pillow releases the GIL while decoding); each holds one image.
DECODE_WORKERS = min(8, os.cpu_count() or 1)
# The pixels (width x height, from the headers) the decode threads hold at once: one image at the pixel
# limit, or many small ones side by side. A thread waits for its image's share before decoding it, so the
# memory of validation does not grow with the number of threads (16 RGBA images of 40 MP on 8 threads
# would otherwise hold 8 of them, and their copies, at once). An image is decoded as scoring decodes it
# (images.working_image: at most the decoded frame at full size, then the reduced copy).
MAX_PIXELS_IN_FLIGHT = MAX_PIXELS


class _PixelBudget:
    """Pixels the decode threads may hold at once (``MAX_PIXELS_IN_FLIGHT``); a thread waits for its share.

    A share larger than the whole budget takes the whole budget (that image is decoded alone)."""

    def __init__(self, total: int):
        self.total = total
        self.free = total
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, pixels: int) -> Iterator[None]:
        share = min(max(pixels, 0), self.total)
        with self._changed:
            self._changed.wait_for(lambda: self.free >= share)
            self.free -= share
        try:
            yield
        finally:
            with self._changed:
                self.free += share
                self._changed.notify_all()


def _check_images(rows: list[_Row], problems: _Problems) -> dict[_Row, str]:
    """Decode every image fully, as scoring will (a truncated file fails here), under the pixel budget in
    flight; the content hash of each good one, a problem for each bad one."""
    budget = _PixelBudget(MAX_PIXELS_IN_FLIGHT)

    def check(row: _Row) -> str | Problem:
        try:
            data = _row_bytes(row)
            size = header_size(data)
            with budget.hold(size[0] * size[1] if size else 0):
                working_image(data, where=row.source, submitted=True)
        except _RowProblem as err:
            return row.problem(str(err))
        except ImageError as err:
            return row.problem(err.reason)
        return content_hash(data)

    hashes = {}
    with ThreadPoolExecutor(max_workers=DECODE_WORKERS) as pool:
        for row, result in zip(rows, pool.map(check, rows)):
            if isinstance(result, Problem):
                problems.append(result)
            else:
                hashes[row] = result
    return hashes


class _RowProblem(Exception):
    """A row's image cannot be read at all (as opposed to read but not decoded: ImageError)."""


def _row_bytes(row: _Row) -> bytes:
    if row.path is None:
        raise _RowProblem(row.error or "no image")
    if not row.path.is_file():
        raise _RowProblem("the file does not exist in the submission folder")
    size = row.path.stat().st_size
    if size > MAX_IMAGE_BYTES:  # checked before reading, so a huge file is never read into memory
        raise _RowProblem(f"{size} bytes, over the {MAX_IMAGE_BYTES}-byte limit")
    try:
        return row.path.read_bytes()
    except OSError as err:
        raise _RowProblem(f"cannot be read ({err})") from None
