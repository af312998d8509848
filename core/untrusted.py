"""Reading files that someone else may have written: bounded in size, regular files only, JSON bounded in depth.

A shared folder (the judge's answer cache, a run's shard records) holds files that any process allowed to
write the folder can replace. What is read from such a folder is input, not our own state: it is opened
without following a link, checked to be a regular file, read up to a size bound, and its JSON parsed only
once its nesting is known to be shallow (a deeply nested file must not crash the reader with a
RecursionError). Numbers must be finite (``NaN`` and ``Infinity`` are not JSON; ``1e400`` would become
``inf``), and an object may not name a key twice (which of the two a reader keeps is an accident).

Every refusal is an :class:`UntrustedInput` (a ValueError) whose message says what is wrong in a few
words, for the caller to put after the file's name. A missing file raises FileNotFoundError as usual.

Low in the layering: the standard library only.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from typing import Any


class UntrustedInput(ValueError):
    """A file (or its text) refused: the message says why, without the file's name."""


def read_regular_file(path: str | os.PathLike[str], max_bytes: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes`` bytes, opened without following a link.

    Opened non-blocking, so that a FIFO or a device planted under the name cannot hang the reader; a
    symbolic link as the last component is refused, and so is a file with more than one hard link (the
    same file is also somewhere else, where others may change it). With ``dir_fd``, ``path`` is a name
    relative to that open folder (so no component above it is followed either).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags, dir_fd=dir_fd)
    except OSError as err:
        if isinstance(err, FileNotFoundError):
            raise
        try:
            link = stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if link:
            raise UntrustedInput("a symbolic link, not a file of its own") from None
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedInput("not a regular file")
        if info.st_nlink > 1:
            raise UntrustedInput(f"a file with {info.st_nlink} hard links (it is also somewhere else)")
        if info.st_size > max_bytes:
            raise UntrustedInput(f"{info.st_size} bytes, over the {max_bytes}-byte limit")
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(max_bytes + 1)
    finally:
        os.close(handle)
    if len(data) > max_bytes:  # grew while being read
        raise UntrustedInput(f"over the {max_bytes}-byte limit")
    return data


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (0 for a scalar), without parsing it.

    Brackets inside strings do not count; an unterminated string or unbalanced brackets are left to the
    parser to report. Linear in the text, and no recursion: safe on any input of bounded size.
    """
    depth = deepest = 0
    for bracket in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _no_constant(name: str) -> Any:
    raise UntrustedInput(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UntrustedInput(f"the number {text[:40]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise UntrustedInput(f"the key {name[:60]!r} appears twice in one object")
        out[name] = value
    return out


def load_json(data: bytes | str, *, max_depth: int) -> Any:
    """The JSON value in ``data`` (UTF-8), refused when it nests deeper than ``max_depth``, holds a number
    that is not finite, or repeats a key in one object. Raises :class:`UntrustedInput`."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    except UnicodeDecodeError as err:
        raise UntrustedInput(f"not UTF-8 text (byte {err.start})") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise UntrustedInput(f"nested {depth} levels deep, over the limit of {max_depth}")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise UntrustedInput(f"not valid JSON ({err.msg} at char {err.pos})") from None
    except RecursionError:  # cannot happen below max_depth; the last guard
        raise UntrustedInput("nested too deep to be read") from None
    except ValueError as err:  # an integer of more digits than Python converts, say
        if isinstance(err, UntrustedInput):
            raise
        raise UntrustedInput(f"not valid JSON ({' '.join(str(err).split())[:120]})") from None
