"""Submission archives: unpack a ``.zip`` / ``.tar.gz`` package safely, then load it.

An archive comes from someone we do not trust, so every member is checked before a byte of it
is written: its name (no absolute path, no ``..``, no NUL or backslash, no duplicate), its type
(regular files and folders only: links, devices and FIFOs are refused), the number of members,
and the uncompressed size. Sizes are *counted while extracting*, never taken from headers alone:
an archive whose data exceeds ``max_bytes``, or ``max_ratio`` times the archive's size on disk
(a compression bomb), is refused at the member where the limit is crossed. Everything is
extracted into a temporary folder beside ``dest`` and renamed into place only when the whole
archive passed, so a refused archive leaves nothing half-written.

See docs/submission.md.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

from harness.core.errors import SubmissionError
from harness.core.tempdirs import discard_tree
from harness.submission.package import MANIFEST, Package, load_package

__all__ = [
    "CHUNK",
    "MAX_BYTES",
    "MiB",
    "open_package",
    "snapshot_package",
    "unpack_package",
]

MiB = 1024 * 1024
MAX_BYTES = 512 * MiB
MAX_MEMBERS = 10_000
MAX_RATIO = 100
#: below this many uncompressed bytes the ratio test does not apply (tiny text files compress
#: far better than 100:1 without being bombs)
RATIO_FLOOR = 1 * MiB
CHUNK = 1 * MiB
#: metadata members some archivers add; they are skipped, not extracted
SKIPPED_TOP = {"__MACOSX"}

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Budget:
    """Counts uncompressed bytes as they stream out and refuses past the limits."""

    def __init__(self, archive: Path, max_bytes: int, max_ratio: float) -> None:
        self.archive = archive
        self.compressed = max(archive.stat().st_size, 1)
        self.max_bytes = max_bytes
        self.max_ratio = max_ratio
        self.total = 0
        self.member = "(archive header)"

    def add(self, n: int) -> None:
        self.total += n
        if self.total > self.max_bytes:
            raise SubmissionError(
                f"{self.archive}: member '{self.member}': uncompressed contents exceed"
                f" {self.max_bytes} bytes; packages larger than that are refused"
            )
        if self.total > RATIO_FLOOR and self.total > self.max_ratio * self.compressed:
            raise SubmissionError(
                f"{self.archive}: member '{self.member}': uncompressed contents exceed"
                f" {self.max_ratio:g} x the archive's {self.compressed} bytes"
                " (a compression bomb?); refused"
            )


class _CountingReader(io.RawIOBase):
    """A read-only stream that charges every byte it returns to a :class:`_Budget`."""

    def __init__(self, inner: _Readable, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.budget.add(len(data))
        buffer[: len(data)] = data
        return len(data)


def _normalise(archive: Path, name: str, seen: set[str]) -> str | None:
    """Check one member name; return it normalised (None: a member to skip)."""
    if "\0" in name:
        raise SubmissionError(f"{archive}: member {name!r} has a NUL byte in its name; refused")
    if "\\" in name:
        raise SubmissionError(
            f"{archive}: member '{name}' has a backslash in its name; use '/' between folders"
        )
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise SubmissionError(
            f"{archive}: member '{name}' is an absolute path; members must be relative"
        )
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SubmissionError(f"{archive}: member '{name}' leaves the package ('..'); refused")
    if not parts or parts[0] in SKIPPED_TOP:
        return None
    clean = posixpath.join(*parts)
    if clean in seen:
        raise SubmissionError(f"{archive}: member '{name}' appears twice; refused")
    seen.add(clean)
    return clean


def _write_member(
    archive: Path, name: str, source: _Readable, target: Path, budget: _Budget, declared: int
) -> None:
    budget.member = name
    written = 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as out:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if written > declared:
                    raise SubmissionError(
                        f"{archive}: member '{name}' holds more data than its header declares"
                        f" ({declared} bytes); refused"
                    )
                out.write(chunk)
    except OSError as err:
        raise SubmissionError(f"{archive}: member '{name}' cannot be extracted ({err})") from None


def _zip_members(
    archive: Path, tmp: Path, max_members: int, budget: _Budget
) -> Iterator[tuple[str, int]]:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise SubmissionError(f"{archive}: not a readable zip archive ({err})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise SubmissionError(
                f"{archive}: {len(infos)} members, more than the limit of {max_members}"
            )
        seen: set[str] = set()
        declared = 0
        checked: list[tuple[str | None, zipfile.ZipInfo]] = []
        for info in infos:
            # zipfile cuts names at a NUL byte; the original name shows the trick
            name = _normalise(archive, info.orig_filename, seen)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise SubmissionError(
                    f"{archive}: member '{info.filename}' is a symbolic link; packages hold"
                    " only files and folders"
                )
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise SubmissionError(
                    f"{archive}: member '{info.filename}' is a device, FIFO or socket; refused"
                )
            declared += info.file_size
            if declared > budget.max_bytes:
                raise SubmissionError(
                    f"{archive}: member '{info.filename}': declared uncompressed size exceeds"
                    f" {budget.max_bytes} bytes; packages larger than that are refused"
                )
            if declared > RATIO_FLOOR and declared > budget.max_ratio * budget.compressed:
                raise SubmissionError(
                    f"{archive}: member '{info.filename}': declared uncompressed size exceeds"
                    f" {budget.max_ratio:g} x the archive's {budget.compressed} bytes"
                    " (a compression bomb?); refused"
                )
            checked.append((name, info))
        for name, info in checked:  # every header passed: now extract, counting bytes
            if name is None:
                continue
            if info.is_dir():
                (tmp / name).mkdir(parents=True, exist_ok=True)
                continue
            try:
                with zf.open(info) as source:
                    counted = _CountingReader(source, budget)
                    _write_member(
                        archive, info.filename, counted, tmp / name, budget, info.file_size
                    )
            except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError) as err:
                raise SubmissionError(
                    f"{archive}: member '{info.filename}' cannot be read ({err})"
                ) from None
            yield name, info.file_size


def _tar_members(
    archive: Path, tmp: Path, max_members: int, budget: _Budget
) -> Iterator[tuple[str, int]]:
    # Stream the decompressed tar through the byte budget: headers, pax records and data all
    # count, so a bomb is stopped however its headers lie.
    try:
        with (
            archive.open("rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as unzipped,
            tarfile.open(
                fileobj=cast(Any, io.BufferedReader(_CountingReader(unzipped, budget), CHUNK)),
                mode="r|",
            ) as tf,
        ):
            yield from _tar_extract(archive, tf, tmp, max_members, budget)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise SubmissionError(f"{archive}: not a readable .tar.gz archive ({err})") from None


def _tar_extract(
    archive: Path, tf: tarfile.TarFile, tmp: Path, max_members: int, budget: _Budget
) -> Iterator[tuple[str, int]]:
    seen: set[str] = set()
    count = 0
    for member in tf:
        count += 1
        if count > max_members:
            raise SubmissionError(
                f"{archive}: more than the limit of {max_members} members"
                f" (stopped at '{member.name}')"
            )
        name = _normalise(archive, member.name, seen)
        budget.member = member.name
        if member.issym() or member.islnk():
            kind = "symbolic" if member.issym() else "hard"
            raise SubmissionError(
                f"{archive}: member '{member.name}' is a {kind} link to"
                f" '{member.linkname}'; packages hold only files and folders"
            )
        if member.isdev() or member.isfifo():
            raise SubmissionError(f"{archive}: member '{member.name}' is a device or FIFO; refused")
        if not (member.isreg() or member.isdir()):
            raise SubmissionError(
                f"{archive}: member '{member.name}' is not a regular file or folder; refused"
            )
        if member.size > budget.max_bytes:
            raise SubmissionError(
                f"{archive}: member '{member.name}': declared uncompressed size exceeds"
                f" {budget.max_bytes} bytes; packages larger than that are refused"
            )
        if hasattr(tarfile, "data_filter"):  # the stdlib's checks, on top of ours
            try:
                tarfile.data_filter(member, str(tmp))
            except tarfile.FilterError as err:
                raise SubmissionError(
                    f"{archive}: member '{member.name}' refused ({err})"
                ) from None
        if name is None:
            continue
        if member.isdir():
            (tmp / name).mkdir(parents=True, exist_ok=True)
            continue
        source = tf.extractfile(member)
        assert source is not None  # regular files always have data
        _write_member(archive, member.name, source, tmp / name, budget, member.size)
        yield name, member.size


def _package_root(folder: Path) -> Path:
    """``folder`` if it holds the manifest, else its single top-level subfolder."""
    if (folder / MANIFEST).is_file():
        return folder
    entries = list(folder.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return folder


def unpack_package(
    path: Path,
    dest: Path,
    *,
    max_bytes: int = MAX_BYTES,
    max_members: int = MAX_MEMBERS,
    max_ratio: float = MAX_RATIO,
) -> Path:
    """Extract the package archive ``path`` into ``dest`` and return the package folder.

    See docs/submission.md, `unpack_package`.
    """
    path, dest = Path(path), Path(dest)
    if path.is_dir():
        return path
    if not path.is_file():
        raise SubmissionError(f"{path}: no such package folder or archive")
    lower = path.name.lower()
    if lower.endswith(".zip"):
        members = _zip_members
    elif lower.endswith((".tar.gz", ".tgz")):
        members = _tar_members
    else:
        raise SubmissionError(
            f"{path}: a package is a folder or a .zip, .tar.gz or .tgz archive of one"
        )
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        raise SubmissionError(f"{dest}: already exists; unpack into a new folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-unpacking-", dir=dest.parent))
    try:
        budget = _Budget(path, max_bytes, max_ratio)
        for _ in members(path, tmp, max_members, budget):
            pass
        if dest.exists():
            dest.rmdir()
        os.rename(tmp, dest)
    except BaseException:
        discard_tree(tmp)  # any tree the archive made; the refusal is what the caller sees
        raise
    return _package_root(dest)


def open_package(path: str | Path, workdir: str | Path) -> Package:
    """Load a package folder, or unpack a package archive under ``workdir`` and load it.

    The archive is unpacked (see :func:`unpack_package`) into a fresh folder inside
    ``workdir``, which the caller owns and cleans up.
    """
    path = Path(path)
    if path.is_dir():
        return load_package(path)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    stem = path.name
    for suffix in ARCHIVE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    holder = Path(tempfile.mkdtemp(prefix=f"{stem or 'package'}-", dir=workdir))
    return load_package(unpack_package(path, holder / "package"))


def snapshot_package(package: Package, dest: Path) -> Package:
    """A private copy of ``package`` at ``dest`` (a new folder), loaded from there.

    Every phase of a run runs from this copy and the record hashes it, so what ran is what is
    recorded: a package folder changed during the run (``model.py`` swapped between the fit and
    the prediction passes) changes nothing. Only the package's files are copied
    (:meth:`Package.files`: no links, no special files, nothing Python would run instead of the
    source), each opened without following links; the copy is read-only.
    """
    dest.mkdir(parents=True)
    for path in package.files():
        rel = path.relative_to(package.root)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            raise SubmissionError(f"{path}: cannot be read ({err.strerror})") from None
        with os.fdopen(fd, "rb") as source, open(target, "xb") as copy:
            if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                raise SubmissionError(f"{path}: changed into something not a file during the run")
            while block := source.read(1 << 20):
                copy.write(block)
        os.chmod(target, 0o444)
    return load_package(dest)
