"""idbench.atomic.atomic_directory: the new folder appears whole or not at all; the old one is never lost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from idbench import atomic
from idbench.atomic import OutputExistsError, atomic_directory
from idbench.errors import IdbenchError

pytestmark: list = []  # the fast tier, but for the tests marked one by one below


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _read(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p != folder)


def test_a_new_folder_appears_with_its_files_and_nothing_beside_it(tmp_path):
    out = tmp_path / "out"
    with atomic_directory(out) as staging:
        assert staging.name == "out" and staging.parent.parent == tmp_path  # a sibling, with the final name
        assert not out.exists()  # nothing visible before the body is done
        _write(staging, {"a.txt": "A", "sub/b.txt": "B"})
    assert _read(out) == {"a.txt": "A", "sub/b.txt": "B"}
    assert _siblings(out) == []


def test_an_existing_folder_is_refused_without_overwrite_and_replaced_with_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _write(out, {"old.txt": "old"})
    with pytest.raises(OutputExistsError, match="already exists; pass --overwrite"):
        with atomic_directory(out):
            pytest.fail("the body must not run")
    assert _read(out) == {"old.txt": "old"}
    with atomic_directory(out, overwrite=True) as staging:
        _write(staging, {"new.txt": "new"})
    assert _read(out) == {"new.txt": "new"}  # replaced, not merged
    assert _siblings(out) == []  # the backup of the old folder is gone


def test_output_exists_is_a_user_error_and_still_a_file_exists_error():
    assert issubclass(OutputExistsError, IdbenchError) and issubclass(OutputExistsError, FileExistsError)


def test_an_error_in_the_body_leaves_the_old_folder_and_no_staging_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _write(out, {"old.txt": "old"})
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(out, overwrite=True) as staging:
            _write(staging, {"half.txt": "half"})
            raise RuntimeError("boom")
    assert _read(out) == {"old.txt": "old"}
    assert _siblings(out) == []
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "fresh") as staging:
            _write(staging, {"half.txt": "half"})
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _failing_rename(monkeypatch, fail_when):
    """Make os.rename (as the helper calls it) raise OSError on the calls for which fail_when(src, dst) holds."""
    real = os.rename
    calls = []

    def rename(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if fail_when(Path(src), Path(dst)):
            raise OSError("injected crash")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    return calls


def test_a_crash_between_moving_the_old_folder_aside_and_moving_the_new_one_in_restores_the_old(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    _write(out, {"results.json": "previous"})
    # The second rename (staging -> out) fails: the old folder has been moved aside by then.
    calls = _failing_rename(monkeypatch, lambda src, dst: dst == out and src.name == "out")
    with pytest.raises(OSError, match="injected crash"):
        with atomic_directory(out, overwrite=True) as staging:
            _write(staging, {"results.json": "new"})
    assert calls[0] == ("out", "out.old")  # the old folder really was moved aside first
    assert _read(out) == {"results.json": "previous"}
    assert _siblings(out) == []


def test_if_the_old_folder_cannot_be_put_back_it_is_kept_not_deleted(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    _write(out, {"results.json": "previous"})
    # Every rename into out fails (the new folder, then the old one put back).
    _failing_rename(monkeypatch, lambda src, dst: dst == out)
    with pytest.raises(OSError, match="nor put the old folder back; it is kept in"):
        with atomic_directory(out, overwrite=True) as staging:
            _write(staging, {"results.json": "new"})
    assert not out.exists()
    (holder,) = tmp_path.iterdir()  # .out.staging-XXXX, holding the old folder and its writer's record
    assert sorted(p.name for p in holder.iterdir()) == [".owner", "out.old"]
    assert _read(holder / "out.old") == {"results.json": "previous"}


def test_a_folder_made_meanwhile_is_kept_with_keep_existing(tmp_path):
    out = tmp_path / "digest"
    with atomic_directory(out, keep_existing=True) as staging:
        _write(staging, {"f": "mine"})
        out.mkdir()  # a concurrent writer of the same content-addressed folder wins the race
        _write(out, {"f": "theirs"})
    assert _read(out) == {"f": "theirs"}
    assert _siblings(out) == []


def test_a_folder_made_meanwhile_is_not_clobbered_without_overwrite(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutputExistsError):
        with atomic_directory(out) as staging:
            _write(staging, {"f": "mine"})
            out.mkdir()
            _write(out, {"f": "theirs"})
    assert _read(out) == {"f": "theirs"}
    assert _siblings(out) == []


def test_every_file_and_folder_is_fsynced_before_the_swap(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    real_rename = os.rename

    def rename(src, dst):
        # By the time the staging folder is renamed in, its files and folders are on disk.
        assert {str(Path(src) / "a.txt"), str(Path(src) / "sub" / "b.txt"), str(Path(src) / "sub"), str(src)} <= set(
            synced
        )
        real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    with atomic_directory(tmp_path / "out") as staging:
        _write(staging, {"a.txt": "A", "sub/b.txt": "B"})
    assert str(tmp_path) in synced  # the parent's entry list, after the rename


def _holder(parent: Path, name: str, owner: str | None) -> Path:
    """A staging holder as atomic_directory leaves it when its writer is killed (kill -9)."""
    holder = parent / f".{name}.staging-abc123"
    (holder / name).mkdir(parents=True)
    (holder / name / "half.json").write_text("{")
    if owner is not None:
        (holder / ".owner").write_text(owner)
    return holder


@pytest.mark.e2e
def test_a_sweep_removes_what_a_killed_writer_left_and_restores_a_lost_target(tmp_path):
    import socket
    import subprocess
    import sys

    from idbench.atomic import sweep_staging

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # a process that has exited
    host = socket.gethostname()
    results = tmp_path / "results" / "7"
    results.mkdir(parents=True)
    killed = _holder(results, "3", f"{host} {dead_pid}")
    # Killed between its renames: the old folder is only in the backup, the target is gone.
    between = _holder(results, "4", f"{host} {dead_pid}")
    (between / "4.old").mkdir()
    (between / "4.old" / "aggregates.json").write_text('{"old": true}')
    live = _holder(results, "5", f"{host} {os.getpid()}")  # this test's own process: a live writer
    elsewhere = _holder(results, "6", "another-host 1")  # cannot be checked: left until stale
    done = sweep_staging(tmp_path)
    assert not killed.exists() and not between.exists()
    assert (results / "4" / "aggregates.json").read_text() == '{"old": true}'
    assert live.exists() and elsewhere.exists() and len(done) == 2
    assert any(
        "restored" in line and line.endswith("4 from a write that was interrupted between its renames") for line in done
    )
    assert sweep_staging(tmp_path, stale_after_s=-1) and not elsewhere.exists()  # old enough: removed


def test_a_finished_write_leaves_no_holder_and_the_sweep_does_not_go_deeper_than_asked(tmp_path):
    from idbench.atomic import atomic_directory, sweep_staging

    with atomic_directory(tmp_path / "out") as staging:
        (staging / "a.txt").write_text("a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    holder = _holder(deep, "x", None)
    assert sweep_staging(tmp_path, depth=2, stale_after_s=-1) == [] and holder.exists()
    assert len(sweep_staging(tmp_path, depth=3, stale_after_s=-1)) == 1 and not holder.exists()
