"""What a fit phase leaves in its output folder, and how the harness reads it without trust.

The output folder is writable by model code for the whole phase, so everything in it is treated
as hostile input. The harness never follows a link out of it: every file is opened with
``O_NOFOLLOW`` relative to a directory descriptor of the folder (itself opened ``O_NOFOLLOW``),
must be a regular file with one link, is bounded in size, and is read through that descriptor
only. Every failure (a link, a fifo, a folder, a device, too big, unreadable, malformed) is a
:class:`RunnerError` naming the file, never a traceback; nothing of the run is stored then.

See docs/runners.md.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from harness.bundles import FITS
from harness.core.errors import RunnerError
from harness.hyperparameters import HyperparameterError, Hyperparameters, check_hyperparameters

__all__ = [
    "BLOCK_BYTES",
    "CHECK_JSON",
    "CHECK_JSON_LIMIT",
    "FLOATS",
    "STATE_DIR",
    "WORKER_JSON",
    "OutputDir",
    "read_worker_status",
    "worker_hyperparameters",
    "worker_timings",
]

WORKER_JSON = "worker.json"
STATE_DIR = "state"
WORKER_JSON_LIMIT = 1 << 20
#: What the worker's check mode writes (:mod:`harness.runners.entrypoint_check` reads it).
CHECK_JSON = "check.json"
CHECK_JSON_LIMIT = 256 * 1024
# An .npy header is at most a few hundred bytes (format 1.0 caps it at 64 KiB).
HEADER_LIMIT = 1 << 16
BLOCK_BYTES = 64 << 20
FLOATS = (np.dtype("<f2"), np.dtype("<f4"), np.dtype("<f8"))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


class OutputDir:
    """The run's output folder, opened once; files are read relative to it, links refused."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.fd = os.open(
                self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except OSError as err:
            raise RunnerError(
                f"{self.path}: cannot open the run's output folder ({err.strerror})"
            ) from None

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _open(self, name: str, limit: int) -> tuple[int, int]:
        """(fd, size) of the regular file ``name``, at most ``limit`` bytes; else RunnerError."""
        where = self.path / name
        if "/" in name or name in ("", ".", ".."):
            raise RunnerError(f"{where}: not a file name of the output folder")
        try:
            # O_NONBLOCK: opening a fifo must not wait for a writer; O_NOFOLLOW: a link fails.
            fd = os.open(
                name,
                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY,
                dir_fd=self.fd,
            )
        except FileNotFoundError:
            raise RunnerError(f"{where}: missing; the worker did not write it") from None
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.EMLINK):
                raise RunnerError(
                    f"{where}: is a symbolic link; the harness never follows links out of the"
                    " run's output folder"
                ) from None
            if err.errno == errno.ENXIO:
                raise RunnerError(f"{where}: is a socket or a fifo, not a file") from None
            raise RunnerError(f"{where}: cannot be opened ({err.strerror})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RunnerError(f"{where}: is {_kind(st.st_mode)}, not a file the worker wrote")
            if st.st_nlink != 1:
                raise RunnerError(
                    f"{where}: has {st.st_nlink} hard links; the worker writes each output once"
                )
            if st.st_size > limit:
                raise RunnerError(
                    f"{where}: holds {st.st_size} bytes, more than the {limit} its expected"
                    " content can take"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, st.st_size

    def _read(self, fd: int, size: int, where: Path) -> bytes:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = os.read(fd, min(size - len(data), BLOCK_BYTES))
            except OSError as err:
                raise RunnerError(f"{where}: cannot be read ({err.strerror})") from None
            if not chunk:
                raise RunnerError(f"{where}: ended after {len(data)} of {size} bytes")
            data += chunk
        return bytes(data)

    def copy_to(self, name: str, dest: Path, limit: int) -> Path:
        """Copy the regular file ``name`` (at most ``limit`` bytes) to ``dest``, a path of the
        harness, through the descriptor checked here (for a generator's prediction files)."""
        where = self.path / name
        fd, size = self._open(name, limit)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".tmp")
            with open(tmp, "wb") as handle:
                copied = 0
                while copied < size:
                    chunk = self._read(fd, min(BLOCK_BYTES, size - copied), where)
                    handle.write(chunk)
                    copied += len(chunk)
            tmp.replace(dest)
        finally:
            os.close(fd)
        return dest

    def read_json(self, name: str, limit: int = WORKER_JSON_LIMIT) -> dict[str, Any]:
        """A JSON object file of at most ``limit`` bytes."""
        where = self.path / name
        fd, size = self._open(name, limit)
        try:
            data = self._read(fd, size, where)
        finally:
            os.close(fd)
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise RunnerError(f"{where}: not valid JSON ({err})") from None
        if not isinstance(value, dict):
            raise RunnerError(f"{where}: must hold a JSON object")
        return value

    def array_blocks(
        self,
        name: str,
        *,
        shape: tuple[int, int],
        dtypes: tuple[np.dtype[Any], ...],
        block_bytes: int = BLOCK_BYTES,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) blocks of the 2-D ``.npy`` file ``name`` of exactly ``shape``.

        The header is checked (C order, one of ``dtypes``, ``shape``) and the file size must be
        the header plus the data, before any row is yielded.
        """
        where = self.path / name
        widest = max(d.itemsize for d in dtypes)
        fd, size = self._open(name, HEADER_LIMIT + shape[0] * shape[1] * widest)
        try:
            with os.fdopen(fd, "rb", closefd=False) as handle:
                try:
                    version = np.lib.format.read_magic(handle)
                    if version == (1, 0):
                        header = np.lib.format.read_array_header_1_0(handle)
                    elif version in ((2, 0), (3, 0)):
                        header = np.lib.format.read_array_header_2_0(handle)
                    else:
                        raise ValueError(f"unknown .npy version {version}")
                except ValueError as err:
                    raise RunnerError(f"{where}: not a valid .npy file ({err})") from None
                got_shape, fortran, dtype = header
                offset = handle.tell()
            if dtype not in dtypes or fortran or tuple(got_shape) != shape:
                raise RunnerError(
                    f"{where}: holds {dtype} {tuple(got_shape)}"
                    f"{' in Fortran order' if fortran else ''}; expected"
                    f" {' or '.join(str(d) for d in dtypes)} {shape}"
                )
            row_bytes = shape[1] * dtype.itemsize
            if size != offset + shape[0] * row_bytes:
                raise RunnerError(
                    f"{where}: {size} bytes where the header says {offset + shape[0] * row_bytes}"
                )
            os.lseek(fd, offset, os.SEEK_SET)
            step = max(1, block_bytes // max(1, row_bytes))
            for start in range(0, shape[0], step):
                rows = min(step, shape[0] - start)
                data = self._read(fd, rows * row_bytes, where)
                yield start, np.frombuffer(data, dtype=dtype).reshape(rows, shape[1])
        finally:
            os.close(fd)

    def read_array(
        self, name: str, *, shape: tuple[int, int], dtypes: tuple[np.dtype[Any], ...]
    ) -> np.ndarray:
        """The whole 2-D array (see :meth:`array_blocks` for what is checked)."""
        parts = [block for _, block in self.array_blocks(name, shape=shape, dtypes=dtypes)]
        if not parts:
            return np.empty(shape, dtype=dtypes[0])
        return np.concatenate(parts)


def read_worker_status(out: Path) -> dict[str, Any]:
    """``worker.json`` of a run, read safely (see :class:`OutputDir`)."""
    with OutputDir(out) as folder:
        return folder.read_json(WORKER_JSON)


#: Timing names a record keeps: each fit and its save, each setting's prediction pass, each
#: fit's inductive check (``fit_<fit>``, ``save_<fit>``, ``predict_<setting>``, ``check_<fit>``).
_TIMING_NAME = re.compile(r"(fit|save|predict|check)_[\w.-]{1,80}")


def worker_timings(status: dict[str, Any], out: Path) -> dict[str, float]:
    """The worker's step timings in seconds plus ``peak_rss_mib`` (the largest peak resident
    memory of the worker and its model processes, MiB), from a ``worker.json`` read by
    :func:`read_worker_status`, checked: names of the worker's steps, finite non-negative
    numbers (the file lies in a folder model code could write)."""
    where = out / WORKER_JSON
    value = status.get("timings", {})
    if not isinstance(value, dict) or len(value) > 200:
        raise RunnerError(f"{where}: 'timings' must be an object of at most 200 steps")
    timings: dict[str, float] = {}
    for name, seconds in value.items():
        if not (isinstance(name, str) and _TIMING_NAME.fullmatch(name)):
            raise RunnerError(f"{where}: 'timings' names an unknown step {str(name)[:40]!r}")
        timings[name] = _measure(seconds, f"{where}: timings[{name!r}]")
    if "peak_rss_mib" in status:
        timings["peak_rss_mib"] = _measure(status["peak_rss_mib"], f"{where}: 'peak_rss_mib'")
    return timings


def _measure(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RunnerError(f"{what} must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise RunnerError(f"{what} must be a finite number >= 0, not {value!r}")
    return round(float(value), 4)


def worker_hyperparameters(status: dict[str, Any], out: Path) -> dict[str, Hyperparameters]:
    """The hyperparameters the model exposed after each fit (``{fit: {name: value}}``), from a
    ``worker.json`` read by :func:`read_worker_status`, checked again here: the file lies in a
    folder model code could write (:mod:`harness.hyperparameters`)."""
    where = out / WORKER_JSON
    value = status.get("hyperparameters", {})
    if not isinstance(value, dict):
        raise RunnerError(f"{where}: 'hyperparameters' must be an object of fits")
    chosen: dict[str, Hyperparameters] = {}
    for fit, values in value.items():
        if fit not in FITS:
            raise RunnerError(
                f"{where}: 'hyperparameters' names the fit {str(fit)[:40]!r}; fits are "
                f"{', '.join(FITS)}"
            )
        try:
            checked = check_hyperparameters(values, f"hyperparameters[{fit!r}]")
        except HyperparameterError as err:
            raise RunnerError(f"{where}: {err}") from None
        if checked:
            chosen[fit] = checked
    return chosen
