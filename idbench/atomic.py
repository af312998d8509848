"""Write a folder completely or not at all: stage it beside the target, fsync, then swap it in by renames.

Every writer of an output folder (built benchmark, submission template, baseline, scoring results,
alignment study, tiny models, stored submissions) goes through :func:`atomic_directory`, so a crash
or an error leaves either the old folder or the new one, never a half-written one, and the old folder
is never deleted before the new one is in place.

Bottom of the layering: it imports only :mod:`idbench.errors`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from idbench.errors import IdbenchError


class OutputExistsError(IdbenchError, FileExistsError):
    """The output folder exists and the caller did not ask to replace it."""


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, overwrite: bool = False, *, keep_existing: bool = False) -> Iterator[Path]:
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
    holder = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
    staging = holder / target.name
    backup = holder / f"{target.name}.old"
    try:
        staging.mkdir()
        yield staging
        _fsync_tree(staging)
        _swap_in(staging, target, backup, overwrite, keep_existing)
    except BaseException:
        # The backup is still there only if it could not be put back: it is the old folder, keep it.
        shutil.rmtree(staging if backup.exists() else holder, ignore_errors=True)
        raise
    shutil.rmtree(holder, ignore_errors=True)  # the staging folder is gone (renamed); this drops the backup


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
