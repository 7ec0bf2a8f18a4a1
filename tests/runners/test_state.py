"""A fitted state is read from the fit's run as hostile input (``harness.runners.state``).

``Model.save`` writes into a folder model code controls, so the harness takes from it only plain
data, checked by content, through descriptors that never follow a link, bounded, and copies it
into a folder of its own before any prediction pass sees it.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import RunnerError
from harness.runners.state import MAX_DEPTH, MAX_FILES, copy_state, take_state
from tests.hostile import pickled_object_array

LIMIT = 1 << 20


def _take(source: Path, tmp_path: Path, limit: int = LIMIT):  # type: ignore[no-untyped-def]
    return take_state(source, tmp_path / "kept", limit_bytes=limit, fit="main")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


def test_arrays_and_json_are_kept_read_only_and_hashed(state: Path, tmp_path: Path) -> None:
    np.save(state / "w.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    np.savez(state / "more.npz", a=np.ones(3), b=np.eye(2, dtype=np.float32))
    (state / "sub").mkdir()
    (state / "sub" / "config.json").write_text(json.dumps({"alpha": 0.1}))
    kept = _take(state, tmp_path)
    assert kept.n_files == 3 and kept.sha256.startswith("sha256:")
    assert (kept.path / "sub" / "config.json").read_text() == json.dumps({"alpha": 0.1})
    assert not os.access(kept.path / "w.npy", os.W_OK) or os.geteuid() == 0
    assert (kept.path / "w.npy").stat().st_mode & 0o222 == 0
    copy = copy_state(kept, tmp_path / "pass-1")
    np.testing.assert_array_equal(np.load(copy / "w.npy"), np.load(state / "w.npy"))
    assert (copy / "w.npy").stat().st_mode & 0o222 == 0 and copy.stat().st_mode & 0o222 == 0


def test_the_hash_is_of_the_content_not_of_how_the_zip_was_written(tmp_path: Path) -> None:
    """An .npz is hashed by its members' names and expanded bytes: the same arrays saved
    compressed or not, or by another zip writer (other time stamps), hash alike; other arrays
    do not."""
    arrays = {"w": np.arange(6.0), "b": np.eye(2, dtype=np.float32)}
    writers = {
        "plain": lambda path: np.savez(path, **arrays),
        "compressed": lambda path: np.savez_compressed(path, **arrays),
        "stamped": lambda path: _zip(path, {f"{k}.npy": _npy_bytes(v) for k, v in arrays.items()}),
        "other": lambda path: np.savez(path, w=np.arange(6.0) + 1, b=arrays["b"]),
    }
    hashes = {}
    for name, write in writers.items():
        folder = tmp_path / name
        folder.mkdir()
        write(folder / "state.npz")
        hashes[name] = _take(folder, tmp_path / f"kept-{name}").sha256
    assert hashes["plain"] == hashes["compressed"] == hashes["stamped"] != hashes["other"]


def _write_safetensors(path: Path, header: dict[str, object], data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def _zip(path: Path, members: dict[str, bytes]) -> None:
    """A zip of ``members``, deflated, each stamped with the time it was written."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, time.localtime()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype.hasobject)
    return buffer.getvalue()


HOSTILE = {
    "link-to-etc-shadow": (lambda d: (d / "w.npy").symlink_to("/etc/shadow"), r"link"),
    "fifo": (lambda d: os.mkfifo(d / "w.npy"), r"regular files and folders only"),
    "hard-link": (
        lambda d: (np.save(d / "a.npy", np.ones(2)), os.link(d / "a.npy", d / "b.npy")),
        r"regular files and folders only",
    ),
    "python-file": (lambda d: (d / "hook.py").write_text("import os"), r"not a state file"),
    "shared-library": (lambda d: (d / "lib.so").write_bytes(b"\x7fELF"), r"not a state file"),
    "pickle-named-npy": (
        lambda d: (d / "w.npy").write_bytes(b"\x80\x04K\x01."),
        r"not a valid \.npy state file",
    ),
    "object-array": (
        lambda d: (d / "w.npy").write_bytes(_npy_bytes(pickled_object_array(d / "marker"))),
        r"object array",
    ),
    "truncated-npy": (
        lambda d: (d / "w.npy").write_bytes(_npy_bytes(np.ones(100))[:-8]),
        r"its header says",
    ),
    "npz-with-a-script": (
        lambda d: _zip(d / "s.npz", {"w.npy": _npy_bytes(np.ones(2)), "run.py": b"x = 1"}),
        r"member 'run\.py' is not a \.npy",
    ),
    "npz-with-an-object-member": (
        lambda d: _zip(d / "s.npz", {"w.npy": _npy_bytes(pickled_object_array(d / "marker"))}),
        r"object array",
    ),
    "npz-bomb": (
        lambda d: _zip(d / "s.npz", {"w.npy": _npy_bytes(np.zeros(LIMIT // 4))}),
        r"expand past",
    ),
    "safetensors-overlap": (
        lambda d: _write_safetensors(
            d / "s.safetensors",
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            bytes(12),
        ),
        r"do not tile",
    ),
    "safetensors-short": (
        lambda d: _write_safetensors(
            d / "s.safetensors",
            {"a": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]}},
            bytes(8),
        ),
        r"does not match",
    ),
    "json-not-json": (lambda d: (d / "c.json").write_text("{alpha"), r"not a valid \.json"),
    "strange-name": (lambda d: (d / "a b.npy").write_bytes(b""), r"file name"),
    "nothing": (lambda d: None, r"save\(\) wrote nothing"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_states_are_refused_naming_the_file(case: str, state: Path, tmp_path: Path) -> None:
    make, message = HOSTILE[case]
    make(state)
    with pytest.raises(RunnerError, match=message) as info:
        _take(state, tmp_path)
    assert str(state) in str(info.value) and "\n" not in str(info.value)
    assert not (state / "marker").exists()  # nothing was unpickled


def test_bounds_on_size_files_and_depth(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    np.save(big / "w.npy", np.zeros(LIMIT // 8 + 16))
    with pytest.raises(RunnerError, match=r"passed its bound of .*resources\.memory_gb"):
        _take(big, tmp_path / "a")
    many = tmp_path / "many"
    many.mkdir()
    for i in range(MAX_FILES + 1):
        (many / f"{i}.json").write_text("0")
    with pytest.raises(RunnerError, match=rf"more than {MAX_FILES} files"):
        _take(many, tmp_path / "b")
    deep = tmp_path / "deep"
    path = deep
    for _ in range(MAX_DEPTH + 1):
        path = path / "d"
    path.mkdir(parents=True)
    (path / "x.json").write_text("0")
    with pytest.raises(RunnerError, match=r"nested too deep"):
        _take(deep, tmp_path / "c")


def test_a_state_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    np.save(real / "w.npy", np.ones(2))
    (tmp_path / "state").symlink_to(real)
    with pytest.raises(RunnerError, match=r"is not a folder"):
        _take(tmp_path / "state", tmp_path)
