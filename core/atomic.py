"""Write a folder completely or not at all: stage it beside the target, fsync, then swap it in by renames.

Every writer of an output folder (built benchmark, submission template, baseline, scoring results,
alignment study, tiny models, stored submissions) goes through :func:`atomic_directory`, so a crash
or an error leaves either the old folder or the new one, never a half-written one, and the old folder
is never deleted before the new one is in place.

Bottom of the layering: it imports only :mod:`idbench.errors`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from idbench.errors import IdbenchError


class OutputExistsError(IdbenchError, FileExistsError):
    """The output folder exists and the caller did not ask to replace it."""


STAGING_MARK = ".staging-"  # a staging holder is <parent>/.<name>.staging-XXXX
OWNER_FILE = ".owner"  # in the holder: "<host> <pid>" of the writer, so a sweep knows a dead writer's folder
STALE_AFTER_S = 24 * 3600  # a holder whose writer cannot be checked (another host, no owner) is left this long


@contextlib.contextmanager
def atomic_directory(
    target: str | os.PathLike, overwrite: bool = False, *, keep_existing: bool = False
) -> Iterator[Path]:
    """Yield an empty staging folder; when the body returns, it becomes ``target`` in one rename.

    The staging folder is ``<parent>/.<name>.staging-XXXX/<name>``: on the target's file system (so
    the rename is atomic) and already carrying the final name (some writers record it). When the body
    returns, every file and folder in it is fsynced, then:

    - ``target`` absent: staging is renamed to ``target``;
    - ``target`` present and ``overwrite``: ``target`` is renamed to a backup beside the staging
      folder, staging to ``target``, and only then is the backup removed. If the second rename fails,
      the backup is renamed back, so the old folder stays readable at ``target``;
    - ``target`` present and ``keep_existing`` (content-addressed folders that a concurrent writer may
      have made with the same content): the existing folder is kept and the staged copy dropped;
    - otherwise :class:`OutputExistsError` (raised before the body runs, too).

    An exception in the body removes the staging folder and leaves ``target`` untouched. If the
    process dies between the two renames, or putting the backup back fails, the old folder is left in
    ``<parent>/.<name>.staging-XXXX/<name>.old``, never deleted.

    Example::

        with atomic_directory(out, overwrite=args.overwrite) as staging:
            (staging / "results.json").write_text(text)
    """
    target = Path(target)
    if target.exists() and not (overwrite or keep_existing):
        raise OutputExistsError(f"{target} already exists; pass --overwrite to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING_MARK}", dir=target.parent))
    staging = holder / target.name
    backup = holder / f"{target.name}.old"
    try:
        (holder / OWNER_FILE).write_text(f"{socket.gethostname()} {os.getpid()}\n", encoding="utf-8")
        staging.mkdir()
        yield staging
        _fsync_tree(staging)
        _swap_in(staging, target, backup, overwrite, keep_existing)
    except BaseException:
        # The backup is still there only if it could not be put back: it is the old folder, keep it.
        shutil.rmtree(staging if backup.exists() else holder, ignore_errors=True)
        raise
    shutil.rmtree(holder, ignore_errors=True)  # the staging folder is gone (renamed); this drops the backup


# A temporary file is named after its target (so that a rerun can find what a killed writer left), cut to
# this many bytes of the name: with the dot, the random part and ".tmp" it stays within a file system's 255.
TEMPORARY_STEM_BYTES = 200


def temporary_stem(name: str) -> str:
    """The part of ``name`` a temporary file's name holds: the name itself, or its hash when it is long."""
    if len(name.encode("utf-8", "surrogateescape")) <= TEMPORARY_STEM_BYTES:
        return name
    return "h" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], object], *, durable: bool = True) -> None:
    """Write one file completely or not at all: ``write`` fills a hidden temporary beside it
    (``.<name>.<random>.tmp``, :func:`temporary_stem`), fsynced, then renamed over ``path``. Readers see
    the old file or the new one, never a part.

    ``durable=False`` skips the fsync, for a cache whose entry lost in a crash is just computed again
    (the judge's answers: an fsync per answer costs more than the rare answer asked twice)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{temporary_stem(path.name)}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | os.PathLike, text: str, *, durable: bool = True) -> None:
    """:func:`write_atomically` of ``text`` in UTF-8."""
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")), durable=durable)


def _swap_in(staging: Path, target: Path, backup: Path, overwrite: bool, keep_existing: bool) -> None:
    """Rename ``staging`` to ``target`` as :func:`atomic_directory` describes."""
    if not target.exists():
        try:
            os.rename(staging, target)
        except OSError:
            # A rename onto an existing non-empty folder fails: another writer made it meanwhile.
            if not target.is_dir():
                raise
        else:
            _fsync_folder(target.parent)
            return
    # The target exists: from before (overwrite or keep_existing were checked then) or made meanwhile.
    if keep_existing:
        return  # the same content is already in place; the staged copy goes with the staging folder
    if not overwrite:
        raise OutputExistsError(f"{target} already exists; pass --overwrite to replace it")
    os.rename(target, backup)
    try:
        os.rename(staging, target)
    except BaseException as error:
        try:
            os.rename(backup, target)  # put the old folder back
        except BaseException:
            raise OSError(f"could not replace {target} nor put the old folder back; it is kept in {backup}") from error
        raise
    _fsync_folder(target.parent)


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder``, then every folder (children before parents)."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    os.fsync(handle.fileno())
        _fsync_folder(Path(root))


def _fsync_folder(folder: Path) -> None:
    """fsync a folder's entry list, so the renames in it survive a power cut."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _writer_is_gone(holder: Path, now: float, stale_after_s: float) -> bool:
    """Whether nobody writes ``holder`` any more: its writer was on this host and its process is gone,
    or (another host, or a holder from before owners were recorded) it is older than ``stale_after_s``."""
    try:
        host, pid = (holder / OWNER_FILE).read_text(encoding="utf-8").split()
        if host == socket.gethostname():
            os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
            return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, under another user
    except (OSError, ValueError):
        pass  # no readable owner: judge by age
    try:
        return now - holder.stat().st_mtime > stale_after_s
    except OSError:
        return False


def sweep_staging(root: str | os.PathLike, depth: int = 2, stale_after_s: float = STALE_AFTER_S) -> list[str]:
    """Clean the staging folders that writers killed mid-write (``kill -9``, a power cut) left under
    ``root`` and up to ``depth`` folder levels below it; returns one line per folder handled.

    A holder whose writer is gone (:func:`_writer_is_gone`) is removed. If it still holds the backup of
    a target that is now missing (the writer died between its two renames), the backup is renamed back
    to the target first: the old folder is never lost. Holders of live writers are left alone. The walk
    does not enter staging folders, hidden folders or anything deeper than ``depth``.
    """
    root, now, done = Path(root), time.time(), []
    level = [root]
    for _ in range(depth + 1):
        below = []
        for parent in level:
            try:
                entries = list(os.scandir(parent))
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                name = entry.name
                if name.startswith(".") and STAGING_MARK in name:
                    holder = Path(entry.path)
                    if _writer_is_gone(holder, now, stale_after_s):
                        done.append(_clear_holder(holder, name[1:].rsplit(STAGING_MARK, 1)[0]))
                elif not name.startswith("."):
                    below.append(Path(entry.path))
        level = below
    return done


def _clear_holder(holder: Path, name: str) -> str:
    backup, target = holder / f"{name}.old", holder.parent / name
    if backup.is_dir() and not target.exists():
        os.rename(backup, target)
        _fsync_folder(holder.parent)
        shutil.rmtree(holder, ignore_errors=True)
        return f"restored {target} from a write that was interrupted between its renames"
    shutil.rmtree(holder, ignore_errors=True)
    return f"removed {holder.name}, left by an interrupted write, in {holder.parent}"
