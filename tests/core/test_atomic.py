"""Atomic writes: all or nothing, shared permissions, one clear error."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.core.atomic import write_bytes_atomic, write_text_atomic
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
