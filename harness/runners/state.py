"""A fitted model's state: read from the fit's sandbox without trust, kept, hashed, handed on.

``Model.save(directory)`` writes the state into ``OUT/state`` of the fit phase, a folder model
code could fill with anything, so :func:`take_state` reads it as hostile input: through
directory descriptors, never following a link, regular single-link files only, names of
:data:`NAME` only, at most :data:`MAX_FILES` files and :data:`MAX_DEPTH` folders deep, and the
whole at most the run's memory bound (a prediction pass has to load it). Only data formats are
accepted, checked by content, never by name alone.

See docs/runners.md.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from harness.core.errors import RunnerError

__all__ = [
    "MAX_DEPTH",
    "MAX_FILES",
    "NAME",
    "ModelState",
    "copy_state",
    "take_state",
]

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
SUFFIXES = (".npy", ".npz", ".safetensors", ".json")
MAX_FILES = 1000
MAX_DEPTH = 8
_BLOCK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SAFETENSORS_HEADER_LIMIT = 100 << 20
_SAFETENSORS_DTYPES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
SAVE_HINT = "save() writes arrays (.npy, .npz, .safetensors) and JSON only (harness.bundles.Model)"


@dataclass(frozen=True)
class ModelState:
    """A state as the harness keeps it: its folder (the harness's copy), content hash, size."""

    path: Path
    sha256: str
    n_files: int
    n_bytes: int


def take_state(source: Path, dest: Path, *, limit_bytes: int, fit: str) -> ModelState:
    """Check the state folder ``source`` (the fit's ``OUT/state``) and copy it into ``dest``
    (a new folder of the harness); :class:`RunnerError` naming the file on anything wrong."""
    where = f"the {fit} fit's state"
    try:
        root = os.open(source, _DIR_FLAGS)
    except FileNotFoundError:
        raise RunnerError(f"{where}: save() wrote no folder {source}") from None
    except OSError as err:
        raise RunnerError(f"{source}: {where} is not a folder ({err.strerror})") from None
    dest.mkdir(parents=True)
    entries: list[tuple[str, str]] = []  # (relative path, content hash)
    total = 0
    todo: list[tuple[int, str, int]] = [(root, "", 0)]
    try:
        while todo:
            fd, prefix, depth = todo.pop()
            names = sorted(os.listdir(fd))
            for name in names:
                rel = f"{prefix}{name}"
                st = _entry(fd, name, source / rel, where)
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 > MAX_DEPTH:
                        raise RunnerError(f"{source / rel}: {where} is nested too deep")
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    (dest / rel).mkdir()
                    todo.append((sub, f"{rel}/", depth + 1))
                    continue
                if len(entries) + 1 > MAX_FILES:
                    raise RunnerError(f"{source}: {where} holds more than {MAX_FILES} files")
                total += st.st_size
                if total > limit_bytes:
                    raise RunnerError(
                        f"{source}: {where} passed its bound of {limit_bytes / (1 << 30):.2f}"
                        " GiB (resources.memory_gb: a prediction pass must load it)"
                    )
                entries.append((rel, _take_file(fd, name, source / rel, dest / rel, limit_bytes)))
            os.close(fd)
    except OSError as err:
        raise _unreadable(err, source, where) from None
    finally:
        for fd, _, _ in todo:
            os.close(fd)
    if not entries:
        raise RunnerError(f"{source}: save() wrote nothing; {SAVE_HINT}")
    for folder, _, files in os.walk(dest):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
    return ModelState(dest, _content_hash(entries), len(entries), total)


def _content_hash(entries: list[tuple[str, str]]) -> str:
    """The state's hash: of its files' relative paths and content hashes, in path order."""
    digest = hashlib.sha256()
    for rel, content in sorted(entries):
        digest.update(f"{rel}\t{content}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def _unreadable(err: OSError, source: Path, where: str) -> RunnerError:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return RunnerError(f"{source}: {where} holds a link; the harness follows none")
    return RunnerError(f"{source}: {where} cannot be read ({err.strerror})")


def _entry(dir_fd: int, name: str, shown: Path, where: str) -> os.stat_result:
    """The entry ``name`` of a state folder, if the harness takes it: a folder, or a regular
    single-link file of a state suffix, under a plain name."""
    if not NAME.fullmatch(name):
        raise RunnerError(
            f"{shown}: {where} holds a file name the harness does not take (letters, digits,"
            " '_', '.', '-'; 128 characters at most)"
        )
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        return st
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        raise RunnerError(
            f"{shown}: {where} may hold regular files and folders only (no links, fifos or devices)"
        )
    if not name.endswith(SUFFIXES):
        raise RunnerError(
            f"{shown}: not a state file; {SAVE_HINT}, named *.npy, *.npz, *.safetensors or *.json"
        )
    return st


def _take_file(dir_fd: int, name: str, shown: Path, target: Path, limit: int) -> str:
    """Copy one state file to ``target``, checked by content; its content hash."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle, open(target, "xb") as out:
        digest = hashlib.sha256()
        while block := handle.read(_BLOCK):
            digest.update(block)
            out.write(block)
    try:
        if name.endswith(".npy"):
            with open(target, "rb") as handle:
                _check_npy(handle, target.stat().st_size)
            return digest.hexdigest()
        if name.endswith(".npz"):
            return _check_npz(target, limit)
        if name.endswith(".safetensors"):
            _check_safetensors(target)
            return digest.hexdigest()
        json.loads(target.read_bytes().decode("utf-8"))
        return digest.hexdigest()
    except (ValueError, OSError, zipfile.BadZipFile, struct.error, EOFError) as err:
        raise RunnerError(f"{shown}: not a valid {target.suffix} state file ({err})") from None


def _check_npy(handle: IO[bytes], size: int) -> None:
    """A ``.npy`` stream whose header describes a plain array of exactly ``size`` bytes."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    elif version in ((2, 0), (3, 0)):
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        raise ValueError(f"unknown .npy version {version}")
    if dtype.hasobject:
        raise ValueError("an object array (a pickle), which a state may not hold")
    expected = handle.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if expected != size:
        raise ValueError(f"its header says {expected} bytes, the file holds {size}")


def _check_npz(path: Path, limit: int) -> str:
    """Every member a ``.npy`` (bounded before expanding); the members' content hash."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if sum(m.file_size for m in members) > limit:
            raise ValueError("its members expand past the state's bound")
        for member in sorted(members, key=lambda m: m.filename):
            if not member.filename.endswith(".npy") or member.is_dir():
                raise ValueError(f"member {member.filename[:80]!r} is not a .npy array")
            with archive.open(member) as handle:
                _check_npy(handle, member.file_size)
            member_hash = hashlib.sha256()
            with archive.open(member) as handle:
                while block := handle.read(_BLOCK):
                    member_hash.update(block)
            digest.update(f"{member.filename}\t{member_hash.hexdigest()}\n".encode())
    return digest.hexdigest()


def _check_safetensors(path: Path) -> None:
    """The header's tensors tile the data after it exactly, with known dtypes."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > min(_SAFETENSORS_HEADER_LIMIT, size - 8):
            raise ValueError("its header length is out of range")
        header = json.loads(handle.read(length).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    spans = []
    for key, value in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(value, dict):
            raise ValueError(f"tensor {key[:80]!r} is not described by an object")
        width = _SAFETENSORS_DTYPES.get(value.get("dtype"))  # type: ignore[arg-type]
        shape, offsets = value.get("shape"), value.get("data_offsets")
        if width is None or not isinstance(shape, list) or not isinstance(offsets, list):
            raise ValueError(f"tensor {key[:80]!r} has no known dtype, shape and offsets")
        begin, end = offsets
        if int(np.prod(shape, dtype=np.int64)) * width != end - begin:
            raise ValueError(f"tensor {key[:80]!r}: its shape does not match its offsets")
        spans.append((begin, end))
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise ValueError("its tensors do not tile the data")
        position = end
    if 8 + length + position != size:
        raise ValueError("its data size does not match its header")


def copy_state(state: ModelState, dest: Path) -> Path:
    """A private read-only copy of ``state`` at ``dest`` (one per prediction pass: nothing a
    pass does to its copy, access times included, reaches another)."""
    shutil.copytree(state.path, dest)
    for folder, dirs, files in os.walk(dest):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o555)
    os.chmod(dest, 0o555)
    return dest
