"""Atomic writes: all or nothing, shared permissions, one clear error."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.core.atomic import directory_atomic, write_bytes_atomic, write_text_atomic
from harness.core.errors import HarnessError


def test_writes_replace_the_file_and_leave_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    write_text_atomic(target, "one\n")
    write_text_atomic(target, "twö\n")
    assert target.read_bytes() == "twö\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.bin"
    write_bytes_atomic(target, b"old")

    def broken(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("harness.core.atomic.os.replace", broken)
    with pytest.raises(HarnessError, match=r"cannot write .*a\.bin: disk full"):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_missing_folder_without_make_parents_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="cannot write"):
        write_text_atomic(tmp_path / "missing" / "x.txt", "x", make_parents=False)


def test_a_folder_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    dest = tmp_path / "deep" / "out"
    with directory_atomic(dest, mode=0o755) as work:
        assert work.parent == dest.parent and not dest.exists()
        (work / "a.txt").write_text("a")
    assert (dest / "a.txt").read_text() == "a" and dest.stat().st_mode & 0o777 == 0o755
    # An error inside the block: nothing is left, and the exception is the caller's.
    failed = tmp_path / "failed"
    with pytest.raises(ValueError, match="boom"), directory_atomic(failed) as work:
        (work / "half.txt").write_text("half")
        raise ValueError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]
    # A destination that gained files meanwhile is not replaced.
    taken = tmp_path / "taken"
    with pytest.raises(OSError), directory_atomic(taken) as work:
        (work / "new.txt").write_text("new")
        taken.mkdir()
        (taken / "old.txt").write_text("old")
    assert sorted(p.name for p in taken.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "taken"]
