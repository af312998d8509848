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


# SQLite result codes (``sqlite_errorname``, Python 3.11+) that say a file or its disk failed, not the SQL:
# SQLITE_ERROR (a syntax error, no such table) is a bug and is not among them.
_SQLITE_STORAGE_CODES = (
    "SQLITE_IOERR",
    "SQLITE_FULL",
    "SQLITE_CANTOPEN",
    "SQLITE_READONLY",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_CORRUPT",
    "SQLITE_NOTADB",
    "SQLITE_PERM",
    "SQLITE_NOLFS",
    "SQLITE_PROTOCOL",
    "SQLITE_AUTH",
)
# The same failures by SQLite's message, for an error that carries no code (made by hand, older Pythons).
_SQLITE_STORAGE_MESSAGES = (
    "disk i/o error",
    "disk is full",
    "unable to open database",
    "database is locked",
    "readonly database",
    "not a database",
    "disk image is malformed",
    "database table is locked",
    "locking protocol",
)


def storage_failure(err: BaseException, chain: bool = True) -> bool:
    """Whether ``err`` (or, with ``chain``, what caused it) is a disk's or a file's failure, not a bug.

    A full disk (:func:`disk_full`), an ``OSError`` of the device (EIO, EROFS, EFBIG: a file size limit), or an SQLite error of the
    file (I/O error, full, cannot open, read-only, locked past the busy timeout, damaged). The CLI says
    these in one line naming the path; a constraint or syntax error of SQLite is still a bug.
    """
    import errno
    import sqlite3

    kinds = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG)
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in kinds:
            return True
        if isinstance(current, sqlite3.DatabaseError) and not isinstance(
            current, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)
        ):
            name = getattr(current, "sqlite_errorname", None)
            if (
                name.startswith(_SQLITE_STORAGE_CODES)
                if name
                else any(text in str(current).lower() for text in _SQLITE_STORAGE_MESSAGES)
            ):
                return True
        if not chain:
            return False
        current = current.__cause__ or current.__context__
    return disk_full(err) if chain else False


def failed_path(err: BaseException) -> str | None:
    """The file an ``OSError`` in ``err``'s chain names (its ``filename``), else None."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.filename is not None:
            return str(current.filename)
        current = current.__cause__ or current.__context__
    return None
