"""The one base class of every user error: a problem with the user's input that they can fix.

``idbench.cli.main`` turns any :class:`IdbenchError` into ``idbench <command>: error: <message>`` and
exit code 2, without a traceback; anything else is a bug and keeps its traceback. Each subclass also
keeps the built-in base it had before (``ValueError``, ``FileExistsError``, ...), so callers that catch
those still do.

This module sits at the bottom of the layering (pyproject.toml's import-linter contract): it imports
nothing of idbench, so every package may import it.
"""

from __future__ import annotations


class IdbenchError(Exception):
    """A user error: the message names the file, row or id at fault and what would be accepted.

    An error that carries several problems sets ``problems`` (one line each); the CLI prints their
    count and then one problem a line.
    """


def disk_full(err: BaseException) -> bool:
    """Whether ``err``, or what caused it, is a full disk: ENOSPC or EDQUOT, or SQLite's "database or disk is full".

    Not the user's input, but nothing to show a traceback for either: the CLI says it in one line, and a
    worker puts its job back in the queue.
    """
    import errno
    import sqlite3

    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(current, sqlite3.OperationalError) and "disk is full" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False
