"""The one worker entrypoint: ``python -m harness.worker BUNDLE PACKAGE ENTRYPOINT OUT``.

It runs inside whatever isolation a runner sets up, reads a *model bundle* (no test labels, and
nothing saying which test image belongs to which setting: see :mod:`harness.tasks`) and writes,
per setting, the model's scores for every test row of its fit plus ``worker.json`` (status,
timings of each fit, prediction pass and check, ``peak_rss_mib``: :func:`peak_rss_mib`, which
inductive check ran) into OUT; the harness picks each setting's rows afterwards
(:mod:`harness.runners.outputs`). Exit codes: 0 success, 3 model error, 4 protocol violation;
a failure's ``message`` says what was being done (``fit() raised …``, ``predict(), setting zsl,
row 3, column 2: score nan is not finite …``) and ``location`` the package file and line it
comes from (the last traceback frame inside the package, or where ``predict`` or the class is
defined), which every runner shows (:mod:`harness.runners.failure`).

Progress: each fit, each setting's prediction pass and the inductive check's second pass are
reported as they start and end, one ``zsl-progress: {json}`` line on stderr per event, which the
runner passes on to the user (:mod:`harness.runners.progress`).

Check mode, ``python -m harness.worker --check PACKAGE ENTRYPOINT OUT`` (``zsl submission
validate``, :mod:`harness.runners.entrypoint_check`): no bundle, no data; a forked process
imports the entrypoint, builds ``Class()`` and checks that ``fit`` and ``predict`` accept what
the worker passes (:func:`entrypoint_problems`); the worker writes the findings, each with its
package file and line, to ``OUT/check.json`` (:func:`check`).

Processes. The worker process itself never runs model code. Per fit (the validation fit, then
the main fit) it forks a *fit process*, which imports the model class, builds a fresh model and
fits it; predictions are then served to the worker over pipes, one request per row chunk, so the
worker decides which images each ``predict`` call sees. Every setting's calls see the same
images: all rows of the fit's ``test/features.npy``.

The test images. The worker sends each chunk's feature rows over the pipe: no process that runs
model code holds the fit's test features. The main fit's are not in the bundle at all (task.json
``"test_features": "descriptor"``, see :mod:`harness.tasks`): the runner hands the worker an open
read-only descriptor (``--test-features-fd N``). The worker makes itself non-dumpable first (a
same-user model cannot open ``/proc/<worker>/fd/N`` nor read its memory), makes N
non-inheritable, closes it in every fit process right after ``fork`` (before any model code is
imported), and maps the file only after the main fit process was forked, so that process's
copy of the worker's memory never held it. Containers cannot pass descriptors: there the runner
binds the file and passes ``--test-features-path``, which model code can read too (the record
says ``"test_features": "file"``).

The inductive check (``--inductive-check``; default: from the package's ``submission.yaml``).
Unless a package declares ``declarations.transductive: true``, a score must depend only on its
own image, not on the other images of its batch. The worker predicts every image in two passes:

- the *canonical* pass, whose scores are the run's result: rows in an order fixed by their
  content (a hash of the feature bytes: it says nothing about class or setting, and a rerun
  batches every image the same way, so results are bit-identical run to run), cut into chunks
  whose sizes are drawn from a seeded generator;
- the *check* pass: a secret random order and chunk sizes from the same distribution, with the
  settings' chunks interleaved at random;

and compares them: any score further apart than float noise (``RTOL`` relative plus ``ATOL``
times the setting's score scale, at least a few ulps of the returned dtype; top-K settings
compare their top-K indices and scores, ties at the K-th place allowed) refuses the run with a
protocol violation naming the declaration to make.

``isolated`` (CPU jobs): each pass runs in its own process forked from the fitted model right
after ``fit``, so a cache or running statistic built in one pass does not exist in the other.
The fit process exits (its threads with it) as soon as both are forked; the worker kills every
other process the model left (it is their subreaper), keeps the waiting pass stopped and checks
that it was not scheduled nor signalled meanwhile, and refuses a pass that changed anything in
the writable folders or this user's System V IPC objects. Inside each pass process the seal of
:mod:`harness.worker_guard` closes inherited descriptors, blocks file writes, restores default
signal handlers and refuses inherited shared memory and extra threads.

``in-process`` (GPU jobs, ``resources.gpus > 0``; CUDA does not survive ``fork``): both passes
run one after the other in the fit process. This only catches batch statistics: a model that
caches per-image scores across calls passes it. The record says which check ran.

``skip`` (declared transductive): one pass, each setting's images in one call (top-K settings in
row chunks bounded by memory).

Top-K settings keep each row's K best scores; a row whose K-th and (K+1)-th scores are exactly
equal is refused as a model error naming the row (the list would depend on which tied class it
kept: :func:`harness.submission.predictions.top_k_from_scores`).

What the check cannot see: a model that reads the test features itself (where they are a file it
can read: a bundle without ``"test_features": "descriptor"``, the ``container`` runner, a
``local`` run as root) can compute statistics over all test images that no partition changes;
and model code that rewrites the worker's own functions during ``fit`` runs
in the forked pass processes too and can skip their seal (what the worker checks from outside
still holds then).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import inspect
import json
import os
import re
import resource
import secrets
import shutil
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from harness import worker_guard as guard
from harness.hyperparameters import ATTRIBUTE as HYPERPARAMETERS
from harness.hyperparameters import (
    HyperparameterError,
    Hyperparameters,
    check_hyperparameters,
    model_hyperparameters,
)
from harness.runners.outputs import WORKER_JSON, raw_names
from harness.runners.progress import event_line
from harness.submission.predictions import top_k_from_scores
from harness.tasks import Bundle, Model

EXIT_MODEL_ERROR = 3
EXIT_PROTOCOL = 4


def _load_model_class(package: Path, entrypoint: str) -> type:
    """The model class, imported from the package's .py source only: never from byte-code or
    extension modules, and nothing is cached into the package (see harness.submission.loader)."""
    from harness.submission.loader import load_model_class

    return load_model_class(package, entrypoint)


MODES = ("isolated", "in-process", "skip")
CHECK_LABELS = {
    "isolated": "isolated",
    "in-process": "in-process",
    "skip": "skipped: declared transductive",
}
# One predict call holds at most this many scores (rows x candidates): the dense matrix of a
# huge label space never exists at once, and top-K settings keep only the K best per row.
TOPK_CHUNK_CELLS = 50_000_000
# Float noise allowed between the two passes (BLAS kernels differ with the batch size).
RTOL = 1e-4
ATOL = 1e-5
MESSAGE_LIMIT = 16_384
CONTROL_LIMIT = 1 << 20
WAIT_S = 30.0

# Pipe protocol. Request (worker -> pass process): op, setting index, row count, feature
# columns, feature dtype (numpy dtype string), then the rows' features. Reply: status, kind,
# dtype code, message length, rows, columns, then the message or the arrays (top-K: int64
# indices, then scores).
REQUEST = struct.Struct("<BxxxIQQ8s")
REPLY = struct.Struct("<BBBxIQQ")
OP_QUIT, OP_PREDICT = 0, 1
OK, MODEL_ERROR, PROTOCOL, READY = 0, 1, 2, 3
DENSE, TOPK = 0, 1
DTYPES = {1: np.dtype("<f2"), 2: np.dtype("<f4"), 3: np.dtype("<f8")}
CODES = {d: c for c, d in DTYPES.items()}


class Violation(Exception):
    """Ends the run with ``code`` (model error or protocol violation) and ``message``;
    ``location`` is the package file and line it comes from (:func:`raised_at`,
    :func:`defined_at`), when known."""

    def __init__(self, code: int, message: str, location: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.location = location


class _Closed(Exception):
    """The other end of a pipe went away."""


# --- pipes -------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        try:
            sent = os.write(fd, view)
        except (BrokenPipeError, ConnectionResetError):
            raise _Closed from None
        view = view[sent:]


def _read_into(fd: int, buffer: memoryview) -> None:
    view = buffer.cast("B")
    while view:
        got = os.readv(fd, [view])
        if got == 0:
            raise _Closed
        view = view[got:]


def _read_exact(fd: int, size: int) -> bytes:
    data = bytearray(size)
    _read_into(fd, memoryview(data))
    return bytes(data)


def _send_json(fd: int, value: dict[str, Any]) -> None:
    data = json.dumps(value).encode()
    _write_all(fd, struct.pack("<Q", len(data)) + data)


def _read_json(fd: int) -> dict[str, Any]:
    (size,) = struct.unpack("<Q", _read_exact(fd, 8))
    if size > CONTROL_LIMIT:
        raise Violation(EXIT_PROTOCOL, f"the fit process sent a {size}-byte control message")
    try:
        value = json.loads(_read_exact(fd, size))
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise Violation(EXIT_PROTOCOL, "the fit process sent a malformed control message")
    return value


def _send_error(fd: int, status: int, message: str, location: str | None = None) -> None:
    """An error reply: a JSON object ``{"message", "location"}`` (see :meth:`_Server._error`)."""
    payload = {"message": message[:4000], "location": None if location is None else location[:500]}
    data = json.dumps(payload).encode("utf-8", "replace")[:MESSAGE_LIMIT]
    _write_all(fd, REPLY.pack(status, 0, 0, len(data), 0, 0) + data)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _progress(
    phase: str, fit: str, state: str, *, setting: str | None = None, seconds: float | None = None
) -> None:
    """One progress event on stderr, one write (atomic on a pipe), for the runner to show
    while the run goes on (:mod:`harness.runners.progress`). Never fails the run: a duration
    the fit process reported out of range is simply not sent."""
    try:
        line = event_line(phase, fit, state, setting=setting, seconds=seconds)
    except ValueError:
        return
    _flush()
    with contextlib.suppress(OSError):
        os.write(2, line)


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:4000]


# --- where in the package a failure comes from -------------------------------------------


def _in_package(filename: str | None, root: str) -> str | None:
    """``filename`` relative to the package folder ``root`` (resolved), or None outside it."""
    if not filename or filename.startswith("<"):  # <string>, <frozen importlib._bootstrap>
        return None
    full = os.path.realpath(filename)
    if not full.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return Path(os.path.relpath(full, root)).as_posix()


def raised_at(err: BaseException, package: Path) -> str | None:
    """``FILE:LINE, in FUNCTION`` of the last traceback frame of ``err`` inside ``package`` (the
    model's own line that failed, even when the exception comes from a library it called);
    ``FILE:LINE`` of a syntax error in one of its files; None when no frame is in the package."""
    root = os.path.realpath(package)
    if isinstance(err, SyntaxError):
        rel = _in_package(err.filename, root)
        if rel is not None and err.lineno is not None:
            return f"{rel}:{err.lineno}"
    found = None
    for frame in traceback.extract_tb(err.__traceback__):
        rel = _in_package(frame.filename, root)
        if rel is not None:
            found = f"{rel}:{frame.lineno}, in {frame.name}"
    return found


def defined_at(obj: Any, what: str, package: Path) -> str | None:
    """``FILE:LINE, where WHAT is defined`` for a function or class of the package, else None."""
    try:
        target = getattr(obj, "__func__", obj)
        if callable(target) and not isinstance(target, type):
            target = inspect.unwrap(target)
        filename = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except Exception:  # model objects may answer attribute lookups in any way
        return None
    rel = _in_package(filename, os.path.realpath(package))
    return None if rel is None else f"{rel}:{max(line, 1)}, where {what} is defined"


def nonfinite_message(
    setting: str, scores: np.ndarray, columns: np.ndarray | None = None
) -> str | None:
    """Why the scores one ``predict`` call returned for ``setting`` are refused (NaN or inf),
    naming the first bad row and column of that call; None when every score is finite.

    ``columns`` (top-K answers): the candidate column of each kept score.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isfinite(scores.sum(dtype=np.float64)):
            return None
    bad = ~np.isfinite(scores)
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    place = int(np.flatnonzero(bad[row])[0])
    column = place if columns is None else int(columns[row, place])
    value = scores[row, place].item()
    return (
        f"predict(), setting {setting}, row {row}, column {column}: score {value} is not"
        f" finite ({int(bad.sum())} of the {scores.shape[0]} x {scores.shape[1]} scores of"
        " that call are NaN or inf); predict must return finite scores (rows are the"
        " call's features, columns its candidates)"
    )


# --- what one fit predicts ---------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    name: str
    index: int
    candidates: np.ndarray
    keep: int | None  # K of a top-K setting (at most the number of candidates); None: dense
    cap: int  # rows per predict call at most

    @property
    def width(self) -> int:
        return len(self.candidates) if self.keep is None else self.keep


def _settings(bundle: Bundle, fit: str) -> list[_Setting]:
    fmt = bundle.info.get("predictions", {"format": "dense"})
    found = []
    for index, name in enumerate(bundle.settings_of(fit)):
        candidates = bundle.candidates(name)
        # Top-K benchmarks (huge label spaces) keep the K best per row; validation is dense.
        keep = None
        if fmt["format"] == "topk" and not name.endswith("_val"):
            keep = min(int(fmt["k"]), len(candidates))
        cap = max(1, TOPK_CHUNK_CELLS // max(1, len(candidates)))
        found.append(_Setting(name, index, candidates, keep, cap))
    return found


_MULTIPLIERS = np.random.default_rng(20240601).integers(
    1, 2**63, size=(2, 4096), dtype=np.uint64
) | np.uint64(1)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _row_keys(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 64-bit hashes of each row's bytes (exact, vectorised; not cryptographic)."""
    n = len(x)
    keys = (np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64))
    if n == 0:
        return keys
    width = int(np.prod(x.shape[1:], dtype=np.int64)) * x.dtype.itemsize
    words = max(1, -(-width // 8))
    multipliers = _MULTIPLIERS
    if words > multipliers.shape[1]:
        multipliers = np.random.default_rng(20240601).integers(
            1, 2**63, size=(2, words), dtype=np.uint64
        ) | np.uint64(1)
    step = max(1, (32 << 20) // max(1, words * 8))
    for lo in range(0, n, step):
        block = np.ascontiguousarray(x[lo : lo + step]).view(np.uint8).reshape(-1, width)
        if width % 8:
            pad = np.zeros((len(block), words * 8 - width), dtype=np.uint8)
            block = np.concatenate([block, pad], axis=1)
        w = block.view("<u8")
        for key, mult in zip(keys, multipliers, strict=True):
            h = (w * mult[:words]).sum(axis=1, dtype=np.uint64)
            h ^= h >> np.uint64(31)
            h *= _MIX
            h ^= h >> np.uint64(29)
            key[lo : lo + len(block)] = h
    return keys


def canonical_order(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` ordered by a hash of their bytes: fixed by content, blind to class."""
    first, second = _row_keys(x)
    return np.lexsort((np.arange(len(x)), second, first))


def chunk_sizes(n: int, cap: int, rng: np.random.Generator) -> list[int]:
    """Sizes summing to ``n``: each in [m/2, m] with m = min(cap, ceil(n/3)), so a pass of
    three or more images always has several chunks of varying sizes."""
    if n <= 0:
        return []
    most = max(1, min(cap, -(-n // 3)))
    sizes: list[int] = []
    left = n
    while left > 0:
        size = min(left, int(rng.integers(max(1, most // 2), most + 1)))
        sizes.append(size)
        left -= size
    return sizes


def _split(order: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    return np.split(order, np.cumsum(sizes)[:-1]) if sizes else []


Plan = list[tuple[_Setting, np.ndarray]]


def canonical_plan(settings: list[_Setting], order: np.ndarray, *, whole: bool = False) -> Plan:
    """The result pass: settings one after the other, chunks of the content order.

    ``whole`` (transductive models): each setting's images in one call, or in ``cap``-row
    chunks where one call would hold too many scores.
    """
    plan: Plan = []
    n = len(order)
    for s in settings:
        if whole:
            sizes = [min(s.cap, n - lo) for lo in range(0, n, s.cap)]
        else:
            sizes = chunk_sizes(n, s.cap, np.random.default_rng([n, s.cap, 1]))
        plan += [(s, chunk) for chunk in _split(order, sizes)]
    return plan


def check_plan(settings: list[_Setting], n: int, rng: np.random.Generator) -> Plan:
    """The check pass: a random order and random chunk sizes per setting, calls interleaved."""
    plan: Plan = []
    for s in settings:
        plan += [(s, c) for c in _split(rng.permutation(n), chunk_sizes(n, s.cap, rng))]
    return [plan[i] for i in rng.permutation(len(plan))]


# --- comparing the passes ----------------------------------------------------------------


def _tolerance(dtype: np.dtype[Any], scale: float) -> tuple[float, float]:
    eps = float(np.finfo(dtype).eps)
    return max(RTOL, 4 * eps), max(ATOL, 4 * eps) * scale


def _scale(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def _dense_mismatch(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """(rows that differ, largest |a - b| per row) beyond ``atol + rtol * |a|``."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore"):
        delta = np.where(close, 0.0, np.abs(a64 - b64))
    largest: np.ndarray = np.nan_to_num(delta, nan=np.inf).max(axis=1, initial=0.0)
    return np.asarray(~close.all(axis=1)), largest


def _sorted_topk(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((indices, -scores.astype(np.float64)), axis=1)
    return np.take_along_axis(indices, order, 1), np.take_along_axis(
        scores.astype(np.float64), order, 1
    )


def _topk_mismatch(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose top-K lists disagree beyond float noise, and the largest score change.

    Agreement: the sorted scores match; a column in both lists has matching scores; a column
    in one list only scores within tolerance of the other list's K-th score (a near tie at the
    cut, which float noise may break either way).
    """
    ai, asc = _sorted_topk(*a)
    bi, bsc = _sorted_topk(*b)
    n, k = ai.shape
    if k == 0:
        return np.zeros(n, dtype=bool), np.zeros(n)
    with np.errstate(invalid="ignore"):
        tol = atol + rtol * np.maximum(np.abs(asc), np.abs(bsc))
        diff = np.abs(asc - bsc)
        same_nan = np.isnan(asc) & np.isnan(bsc)
        bad = ((diff > tol) | np.isnan(diff)) & ~same_nan
        # Pair up the columns of both lists by sorting them together.
        cols = np.concatenate([ai, bi], axis=1)
        vals = np.concatenate([asc, bsc], axis=1)
        side = np.concatenate([np.zeros_like(ai), np.ones_like(bi)], axis=1)
        order = np.argsort(cols, axis=1, kind="stable")
        cols, vals, side = (np.take_along_axis(v, order, 1) for v in (cols, vals, side))
        pair = cols[:, 1:] == cols[:, :-1]
        pair_tol = atol + rtol * np.maximum(np.abs(vals[:, 1:]), np.abs(vals[:, :-1]))
        pair_bad = pair & (np.abs(vals[:, 1:] - vals[:, :-1]) > pair_tol)
        paired = np.zeros_like(cols, dtype=bool)
        paired[:, 1:] |= pair
        paired[:, :-1] |= pair
        kth = np.where(side == 0, bsc[:, -1:], asc[:, -1:])
        lone_bad = ~paired & (vals > kth + atol + rtol * np.abs(kth))
        # The largest change per row: of a sorted score, of a column in both lists, or of a
        # column in one list only above the other's cut.
        changes = [
            np.where(bad, diff, 0.0),
            np.where(pair_bad, np.abs(vals[:, 1:] - vals[:, :-1]), 0.0),
            np.where(lone_bad, vals - kth, 0.0),
        ]
    rows = bad.any(axis=1) | pair_bad.any(axis=1) | lone_bad.any(axis=1)
    delta = np.max([np.nan_to_num(c, nan=np.inf).max(axis=1) for c in changes], axis=0)
    return np.asarray(rows), np.asarray(delta)


@dataclass
class _Outputs:
    """One setting's canonical outputs, all rows of the fit in bundle order."""

    setting: _Setting
    arrays: tuple[np.ndarray, ...]

    def scores(self) -> np.ndarray:
        return self.arrays[-1]


@dataclass
class _Check:
    """What the check pass found."""

    n: int
    differs: np.ndarray
    first: tuple[int, str, float, str] | None = None  # row, setting, |change|, tolerance

    def add(self, s: _Setting, rows: np.ndarray, bad: np.ndarray, delta: np.ndarray,
            tol: str) -> None:  # fmt: skip
        if not bad.any():
            return
        self.differs[rows[bad]] = True
        row = int(rows[bad].min())
        if self.first is None or row < self.first[0]:
            at = int(np.flatnonzero(rows == row)[0])
            self.first = (row, s.name, float(delta[at]), tol)

    def verdict(self) -> None:
        if self.first is None:
            return
        row, setting, delta, tol = self.first
        count = int(self.differs.sum())
        raise Violation(
            EXIT_PROTOCOL,
            f"predict is not inductive: the scores of {count} of {self.n} test images changed"
            " with the other images of their batch (first: row"
            f" {row} of the fit's test/features.npy, setting '{setting}', a change of"
            f" {delta:.3g} where float noise allows {tol}). A model whose scores for an"
            " image depend on other test images (batch statistics, caches or running means"
            " across calls) is transductive: declare `declarations.transductive: true` in"
            " submission.yaml, or score each image on its own",
        )


# --- the worker side of a pass -----------------------------------------------------------


@dataclass
class _Server:
    """A process that answers predict requests: a pass process, or the fit process itself."""

    pid: int
    request: int  # write end
    reply: int  # read end
    reaper: guard.Reaper
    what: str = "prediction process"
    # The fit's test features (worker side): each request carries its rows' features.
    features: np.ndarray | None = None

    def close(self) -> None:
        for fd in (self.request, self.reply):
            with contextlib.suppress(OSError):
                os.close(fd)

    def died(self) -> Violation:
        """Why the process stopped answering, as the run's verdict."""
        status = self.reaper.wait(self.pid, timeout_s=5.0)
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            if sig == signal.SIGXFSZ:
                return Violation(
                    EXIT_PROTOCOL,
                    f"the {self.what} was killed by signal SIGXFSZ: predict wrote to a file,"
                    " which the inductive check forbids (a file could carry scores from one"
                    " pass to the other); write files in fit only, or declare"
                    " `declarations.transductive: true` in submission.yaml",
                )
            return Violation(EXIT_MODEL_ERROR, f"the {self.what} was killed by signal {name}")
        if status is not None and os.WIFEXITED(status):
            return Violation(
                EXIT_MODEL_ERROR,
                f"the {self.what} exited with code {os.WEXITSTATUS(status)} before it answered"
                " (sys.exit or os._exit in predict?)",
            )
        return Violation(EXIT_MODEL_ERROR, f"the {self.what} stopped answering")

    def expect_ready(self) -> None:
        try:
            head = REPLY.unpack(_read_exact(self.reply, REPLY.size))
            if head[0] == READY:
                return
            self._error(head)
        except _Closed:
            raise self.died() from None
        raise Violation(EXIT_PROTOCOL, f"the {self.what} answered out of protocol")

    def _error(self, head: tuple[int, ...]) -> None:
        status, _kind, _code, length, _rows, _cols = head
        if status in (MODEL_ERROR, PROTOCOL) and length <= MESSAGE_LIMIT:
            text = _read_exact(self.reply, length).decode("utf-8", "replace")
            code = EXIT_MODEL_ERROR if status == MODEL_ERROR else EXIT_PROTOCOL
            try:
                payload = json.loads(text)
            except ValueError:
                payload = None
            if not isinstance(payload, dict):  # not what _send_error writes: the text as it is
                raise Violation(code, text)
            location = payload.get("location")
            raise Violation(
                code,
                str(payload.get("message", "")),
                location if isinstance(location, str) else None,
            )

    def predict(self, s: _Setting, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """Ask for one chunk and read the answer, checked against what was asked."""
        try:
            assert self.features is not None
            x = np.ascontiguousarray(self.features[rows])
            ask = REQUEST.pack(OP_PREDICT, s.index, len(rows), x.shape[1], x.dtype.str.encode())
            _write_all(self.request, ask)
            _write_all(self.request, memoryview(x.data))
            head = REPLY.unpack(_read_exact(self.reply, REPLY.size))
            if head[0] != OK:
                self._error(head)
                raise Violation(EXIT_PROTOCOL, f"the {self.what} answered out of protocol")
            _status, kind, code, _length, n, width = head
            if kind != (DENSE if s.keep is None else TOPK) or code not in DTYPES:
                raise Violation(EXIT_PROTOCOL, f"the {self.what} answered out of protocol")
            if (n, width) != (len(rows), s.width):
                raise Violation(
                    EXIT_PROTOCOL,
                    f"the {self.what} answered {(n, width)} for setting '{s.name}'; expected"
                    f" {(len(rows), s.width)}",
                )
            dtypes = [DTYPES[code]] if s.keep is None else [np.dtype("<i8"), DTYPES[code]]
            arrays = [np.empty((int(n), int(width)), dtype=dtype) for dtype in dtypes]
            for array in arrays:
                _read_into(self.reply, memoryview(array.data))
            # The pass process checks this too, naming the model's line; this check holds
            # even for a model that rewrote the worker's code in its own process.
            problem = nonfinite_message(s.name, arrays[-1], None if s.keep is None else arrays[0])
            if problem is not None:
                raise Violation(EXIT_MODEL_ERROR, problem)
            return tuple(arrays)
        except _Closed:
            raise self.died() from None

    def quit(self) -> None:
        with contextlib.suppress(_Closed):
            _write_all(self.request, REQUEST.pack(OP_QUIT, 0, 0, 0, b""))


def _canonical_pass(
    server: _Server,
    settings: list[_Setting],
    plan: Plan,
    n: int,
    timings: dict[str, float],
    *,
    fit: str,
) -> dict[str, _Outputs]:
    """Run the result pass; every setting's outputs cover all ``n`` rows (none: empty).
    Each setting's calls come one after the other: its start and end are progress events."""
    parts: dict[str, list[tuple[np.ndarray, tuple[np.ndarray, ...]]]] = {}
    current: str | None = None
    for s, rows in plan:
        if s.name != current:
            if current is not None:
                done_s = timings[f"predict_{current}"]
                _progress("predict", fit, "done", setting=current, seconds=done_s)
            current = s.name
            _progress("predict", fit, "start", setting=current)
        start = time.perf_counter()
        parts.setdefault(s.name, []).append((rows, server.predict(s, rows)))
        key = f"predict_{s.name}"
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - start
    if current is not None:
        _progress("predict", fit, "done", setting=current, seconds=timings[f"predict_{current}"])
    outputs: dict[str, _Outputs] = {}
    for s in settings:
        chunks = parts.get(s.name, [])
        kinds: list[np.dtype[Any]] = [np.dtype("<f4")]
        if s.keep is not None:
            kinds.insert(0, np.dtype("<i8"))
        arrays = []
        for i, default in enumerate(kinds):
            dtype: np.dtype[Any] = (
                np.result_type(*(c[1][i].dtype for c in chunks)) if chunks else default
            )
            array = np.empty((n, s.width), dtype=dtype)
            for rows, got in chunks:
                array[rows] = got[i]
            arrays.append(array)
        outputs[s.name] = _Outputs(s, tuple(arrays))
    return outputs


def _check_pass(
    server: _Server, plan: Plan, canon: dict[str, _Outputs], n: int, *, fit: str
) -> None:
    _progress("check", fit, "start")
    began = time.perf_counter()
    check = _Check(n, np.zeros(n, dtype=bool))
    tolerances = {}
    for name, out in canon.items():
        tolerances[name] = _tolerance(out.scores().dtype, _scale(out.scores()))
    for s, rows in plan:
        got = server.predict(s, rows)
        rtol, atol = tolerances[s.name]
        mine = canon[s.name].arrays
        if s.keep is None:
            bad, delta = _dense_mismatch(mine[0][rows], got[0], rtol, atol)
        else:
            bad, delta = _topk_mismatch(
                (mine[0][rows], mine[1][rows]), (got[0], got[1]), rtol, atol
            )
        check.add(s, rows, bad, delta, f"{atol:.3g} + {rtol:.3g} x |score|")
    _progress("check", fit, "done", seconds=time.perf_counter() - began)
    check.verdict()


# --- the fit process and the pass processes ----------------------------------------------


@dataclass
class _Job:
    bundle: Bundle
    package: Path
    entrypoint: str
    out: Path
    seed: int
    mode: str
    roots: list[Path]
    reaper: guard.Reaper = field(default_factory=guard.Reaper)
    # The main fit's test features when the bundle does not hold them: an inherited descriptor
    # (never in a process that runs model code), or a path (containers).
    test_fd: int | None = None
    test_path: Path | None = None
    # fit -> what the model exposed after that fit (harness.hyperparameters); to worker.json
    hyperparameters: dict[str, Hyperparameters] = field(default_factory=dict)

    def close_test_fd(self) -> None:
        """In a forked fit process, before anything else: drop the test features descriptor."""
        if self.test_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.test_fd)

    def test_features(self, fit: str) -> np.ndarray:
        """The fit's test features, read-only: from the bundle, or the runner's descriptor or
        path. Call it in the worker only, after the fit process was forked."""
        if not self.bundle.supplied_test_features(fit):
            return self.bundle.test_features(fit)
        if self.test_fd is not None:
            with os.fdopen(os.dup(self.test_fd), "rb") as handle:
                return _map_npy(handle)
        if self.test_path is not None:
            return np.load(self.test_path, allow_pickle=False, mmap_mode="r")
        raise Violation(
            EXIT_PROTOCOL,
            "the bundle's test features come from the runner (task.json test_features:"
            " descriptor), and the worker got neither --test-features-fd nor"
            " --test-features-path",
        )


def _map_npy(handle: Any) -> np.ndarray:
    """A read-only memory map of the ``.npy`` file open as ``handle`` (a descriptor, no path)."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
    if dtype.hasobject:
        raise Violation(EXIT_PROTOCOL, "the test features file holds objects")
    offset = handle.tell()
    if fortran:
        return np.memmap(handle, dtype=dtype, mode="r", offset=offset, shape=shape, order="F")
    return np.memmap(handle, dtype=dtype, mode="r", offset=offset, shape=shape, order="C")


def _serve(
    model: Model, job: _Job, fit: str, request: int, reply: int, seal: bool, where: str | None
) -> NoReturn:
    """Answer predict requests until told to quit; never returns. ``where``: the line of the
    package defining ``predict``, for refusals that no exception places."""
    try:
        if seal:
            try:
                guard.seal_pass_process({0, 1, 2, request, reply}, job.roots)
            except (guard.GuardError, OSError) as err:
                _send_error(reply, PROTOCOL, str(err))
                raise _Closed from None
        _write_all(reply, REPLY.pack(READY, 0, 0, 0, 0, 0))
        settings = _settings(job.bundle, fit)
        while True:
            op, index, n, cols, dtype = REQUEST.unpack(_read_exact(request, REQUEST.size))
            if op != OP_PREDICT:
                break
            features = np.empty((n, cols), dtype=np.dtype(dtype.rstrip(b"\0").decode()))
            _read_into(request, memoryview(features.data))
            _answer(model, features, settings[index], reply, job, where)
    except _Closed:
        pass
    except BaseException:  # the worker side reports it; keep the traceback for the log
        traceback.print_exc()
    _flush()
    os._exit(0)


def _answer(
    model: Model, features: np.ndarray, s: _Setting, reply: int, job: _Job, where: str | None
) -> None:
    """Call ``predict`` on one chunk and send its answer, or why it is refused with the line of
    the package it comes from: the failing line for an exception, else ``where`` (the line
    that defines ``predict``)."""
    expected = (len(features), len(s.candidates))
    try:
        scores = np.asarray(model.predict(features, s.candidates))
    except BaseException as err:  # the model's failure is data for the run record
        traceback.print_exc()
        message = f"predict() raised {_short(err)} (setting {s.name})"
        _send_error(reply, MODEL_ERROR, message, raised_at(err, job.package) or where)
        return
    try:
        if scores.shape != expected:
            _send_error(
                reply,
                PROTOCOL,
                f"predict returned shape {scores.shape} for setting '{s.name}'; expected"
                f" (n_test, n_candidates) = {expected}",
                where,
            )
            return
        if scores.dtype.kind != "f":
            scores = scores.astype(np.float32)
        elif scores.dtype.newbyteorder("<") not in CODES:
            scores = scores.astype(np.float64)
        scores = np.ascontiguousarray(scores, dtype=scores.dtype.newbyteorder("<"))
        problem = nonfinite_message(s.name, scores)
        if problem is not None:
            _send_error(reply, MODEL_ERROR, problem, where)
            return
        arrays = [scores] if s.keep is None else list(_top_k(scores, s.keep))
    except BaseException as err:  # scores the worker cannot use: the model's failure too
        traceback.print_exc()
        _send_error(reply, MODEL_ERROR, f"predict(), setting {s.name}: {_short(err)}", where)
        return
    code = CODES[arrays[-1].dtype]
    head = REPLY.pack(OK, DENSE if s.keep is None else TOPK, code, 0, expected[0], s.width)
    _write_all(reply, head)
    for array in arrays:
        _write_all(reply, memoryview(np.ascontiguousarray(array).data))


def _top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns per row, best first (ties: smaller column first); a row whose
    k-th and (k+1)-th scores tie is refused (harness.submission.predictions.top_k_from_scores)."""
    indices, top = top_k_from_scores(scores, k)
    return indices.astype("<i8"), top


def _fit_process(
    job: _Job, fit: str, control: int, ends: list[tuple[int, int]]
) -> None:  # fmt: skip
    """Fit a fresh model, then serve (in-process, skip) or fork the two pass processes.

    A failure is reported with what was being done (``fit() raised …``) and the line of the
    package it comes from (:func:`raised_at`; a missing method: the class's definition)."""
    from harness.errors import SubmissionError

    step = f"importing {job.entrypoint.split(':')[0]}"
    try:
        np.random.seed(job.seed % (2**32))
        model_class = _load_model_class(job.package, job.entrypoint)
        step = f"{model_class.__name__}()"
        model = model_class()
        missing = [m for m in ("fit", "predict") if not callable(getattr(model, m, None))]
        if missing or not isinstance(model, Model):
            names = " and ".join(f"no {m}() method" for m in missing) or "not the protocol"
            message = (
                f"{job.entrypoint} has {names}; a model class defines fit(task) and"
                " predict(features, candidates)"
            )
            where = defined_at(model_class, model_class.__name__, job.package)
            _send_json(
                control,
                {"ok": False, "code": EXIT_PROTOCOL, "message": message, "location": where},
            )
            return
        where_predict = defined_at(
            getattr(type(model), "predict", None) or model.predict, "predict", job.package
        )
        step = "fit()"
        start = time.perf_counter()
        model.fit(job.bundle.train_task(seed=job.seed, fit=fit))
        fit_s = time.perf_counter() - start
        step = f"reading {model_class.__name__}.{HYPERPARAMETERS}"
        try:  # what the model chose (harness.hyperparameters), for the run record
            chosen = model_hyperparameters(model)
        except HyperparameterError as err:
            where = defined_at(model_class, model_class.__name__, job.package)
            message = f"after fit(): {err}"[:4000]
            report = {"ok": False, "code": EXIT_PROTOCOL, "message": message, "location": where}
            _send_json(control, report)
            return
    except BaseException as err:  # the model's failure is data for the run record
        traceback.print_exc()
        # The loader's refusals name the entrypoint themselves.
        message = (
            _short(err) if isinstance(err, SubmissionError) else f"{step} raised {_short(err)}"
        )
        report = {"ok": False, "code": EXIT_MODEL_ERROR, "message": message[:4000]}
        report["location"] = raised_at(err, job.package)
        _send_json(control, report)
        return
    _flush()
    if job.mode == "isolated":
        pids = []
        for request, reply in ends:
            pid = os.fork()
            if pid == 0:
                _serve(model, job, fit, request, reply, True, where_predict)
            pids.append(pid)
        # This process ends now, and the threads the model started in fit end with it.
        _send_json(
            control, {"ok": True, "fit_s": fit_s, "servers": pids, "hyperparameters": chosen}
        )
        return
    _send_json(
        control,
        {"ok": True, "fit_s": fit_s, "servers": [os.getpid()], "hyperparameters": chosen},
    )
    os.close(control)
    _serve(model, job, fit, *ends[0], False, where_predict)


def _run_fit(job: _Job, fit: str, timings: dict[str, float]) -> dict[str, _Outputs]:
    settings = _settings(job.bundle, fit)
    n_servers = 2 if job.mode == "isolated" else 1
    control_r, control_w = os.pipe()
    pipes = [(os.pipe(), os.pipe()) for _ in range(n_servers)]
    _progress("fit", fit, "start")
    _flush()
    pid = os.fork()
    if pid == 0:  # the fit process
        job.close_test_fd()  # first: model code never holds the test features descriptor
        try:
            os.close(control_r)
            for (_rq_r, rq_w), (rp_r, _rp_w) in pipes:
                os.close(rq_w)
                os.close(rp_r)
            _fit_process(job, fit, control_w, [(rq[0], rp[1]) for rq, rp in pipes])
        except BaseException:
            traceback.print_exc()
        finally:
            _flush()
            os._exit(0)
    os.close(control_w)
    for (rq_r, _rq_w), (_rp_r, rp_w) in pipes:
        os.close(rq_r)
        os.close(rp_w)
    fit_process = _Server(pid, -1, -1, job.reaper, what="fit process")
    servers: list[_Server] = []
    try:
        # Only now, in the worker: the fit process's copy of this process never held them.
        features = job.test_features(fit)
        if features.ndim != 2:
            raise Violation(EXIT_PROTOCOL, f"the {fit} fit's test features are not 2-D")
        order = canonical_order(features)
        pids = _fit_report(job, fit_process, control_r, n_servers, timings, fit)
        what = "prediction pass process" if job.mode == "isolated" else "fit process"
        servers = [
            _Server(p, rq[1], rp[0], job.reaper, what, features)
            for p, (rq, rp) in zip(pids, pipes, strict=True)
        ]
        if job.mode == "isolated":
            return _isolated_passes(job, fit_process, servers, settings, order, timings, fit)
        return _in_process_passes(job, servers[0], settings, order, timings, fit)
    finally:
        for server in servers:
            server.close()
        if not servers:  # the pipes were never handed to a server
            for (_rq_r, rq_w), (rp_r, _rp_w) in pipes:
                for fd in (rq_w, rp_r):
                    with contextlib.suppress(OSError):
                        os.close(fd)
        job.reaper.sweep()


def _fit_report(
    job: _Job,
    fit_process: _Server,
    control_r: int,
    n_servers: int,
    timings: dict[str, float],
    fit: str,
) -> list[int]:
    """Read the fit process's report (closing ``control_r``): its fit time, and the pids of the
    processes that serve the prediction passes, checked."""
    try:
        report = _read_json(control_r)
    except (_Closed, struct.error):
        raise fit_process.died() from None
    finally:
        os.close(control_r)
    if not report.get("ok"):
        code = report.get("code")
        location = report.get("location")
        raise Violation(
            code if code in (EXIT_MODEL_ERROR, EXIT_PROTOCOL) else EXIT_MODEL_ERROR,
            str(report.get("message", "fit failed"))[:MESSAGE_LIMIT],
            location[:500] if isinstance(location, str) else None,
        )
    try:
        timings[f"fit_{fit}"] = float(report["fit_s"])
        pids = [int(p) for p in report["servers"]]
    except (KeyError, TypeError, ValueError):
        raise Violation(EXIT_PROTOCOL, "the fit process sent a malformed report") from None
    try:  # checked again here: the fit process runs model code
        chosen = check_hyperparameters(report.get("hyperparameters", {}), HYPERPARAMETERS)
    except HyperparameterError as err:
        raise Violation(EXIT_PROTOCOL, f"after fit(): {err}") from None
    if chosen:
        job.hyperparameters[fit] = chosen
    # The fit process is model code: it may name no process but its own children (or
    # itself), or the worker would stop and kill whatever pid it was told.
    if job.mode == "isolated":
        me = os.getpid()
        wrong = any(p == fit_process.pid or not guard.is_descendant(p, me) for p in pids)
        wrong = wrong or len(set(pids)) != n_servers
    else:
        wrong = pids != [fit_process.pid]
    if wrong:
        raise Violation(EXIT_PROTOCOL, "the fit process reported the wrong pass processes")
    _progress("fit", fit, "done", seconds=timings[f"fit_{fit}"])
    return pids


def _unchanged(job: _Job, before: dict[str, guard.Entry], when: str) -> None:
    changed = guard.changes(before, guard.snapshot(job.roots))
    if changed:
        raise Violation(
            EXIT_PROTOCOL,
            f"{when} changed {', '.join(changed)}: while predicting, a model may not write"
            " files or shared state (it could carry scores from one pass to the other); write"
            " them in fit, or declare `declarations.transductive: true` in submission.yaml",
        )


def _isolated_passes(
    job: _Job,
    fit_process: _Server,
    servers: list[_Server],
    settings: list[_Setting],
    order: np.ndarray,
    timings: dict[str, float],
    fit: str,
) -> dict[str, _Outputs]:
    if job.reaper.wait(fit_process.pid, timeout_s=WAIT_S) is None:
        raise Violation(EXIT_PROTOCOL, "the fit process did not end after forking its passes")
    for server in servers:
        server.expect_ready()
    for server in servers:
        guard.stop(server.pid)
    # Nothing the model started may outlive the fit: a helper process could hold a cache.
    job.reaper.sweep(keep={s.pid for s in servers})
    before = guard.snapshot(job.roots)
    pick = secrets.randbelow(2)
    canon_server, check_server = servers[pick], servers[1 - pick]
    waiting = guard.sched_count(check_server.pid)

    os.kill(canon_server.pid, signal.SIGCONT)
    outputs = _canonical_pass(
        canon_server, settings, canonical_plan(settings, order), len(order), timings, fit=fit
    )
    canon_server.quit()
    if job.reaper.wait(canon_server.pid, timeout_s=WAIT_S) is None:
        raise Violation(EXIT_PROTOCOL, "the first prediction pass process did not end")
    job.reaper.sweep(keep={check_server.pid})
    _unchanged(job, before, "the first prediction pass")
    if (
        not guard.is_stopped(check_server.pid)
        or guard.sched_count(check_server.pid) != waiting
        or guard.pending_signals(check_server.pid)
    ):
        raise Violation(
            EXIT_PROTOCOL,
            "the waiting prediction pass process was woken or signalled while the other pass"
            " ran: the two passes must not communicate",
        )

    start = time.perf_counter()
    os.kill(check_server.pid, signal.SIGCONT)
    rng = np.random.default_rng(secrets.randbits(128))
    _check_pass(check_server, check_plan(settings, len(order), rng), outputs, len(order), fit=fit)
    timings[f"check_{fit}"] = time.perf_counter() - start
    check_server.quit()
    job.reaper.wait(check_server.pid, timeout_s=WAIT_S)
    job.reaper.sweep()
    _unchanged(job, before, "the second prediction pass")
    return outputs


def _in_process_passes(
    job: _Job,
    server: _Server,
    settings: list[_Setting],
    order: np.ndarray,
    timings: dict[str, float],
    fit: str,
) -> dict[str, _Outputs]:
    server.expect_ready()
    if job.mode == "skip":
        plan = canonical_plan(settings, order, whole=True)
        outputs = _canonical_pass(server, settings, plan, len(order), timings, fit=fit)
    else:
        before = guard.snapshot(job.roots)
        plan = canonical_plan(settings, order)
        outputs = _canonical_pass(server, settings, plan, len(order), timings, fit=fit)
        _unchanged(job, before, "the first prediction pass")
        start = time.perf_counter()
        rng = np.random.default_rng(secrets.randbits(128))
        _check_pass(server, check_plan(settings, len(order), rng), outputs, len(order), fit=fit)
        timings[f"check_{fit}"] = time.perf_counter() - start
        _unchanged(job, before, "the second prediction pass")
    server.quit()
    job.reaper.wait(server.pid, timeout_s=WAIT_S)
    return outputs


# --- the worker process ------------------------------------------------------------------


def declared_mode(package: Path) -> str:
    """The inductive check a package's manifest calls for (used when the runner passed none)."""
    from harness.errors import SubmissionError
    from harness.submission.package import load_package

    try:
        manifest = load_package(package).manifest
    except SubmissionError:
        return "isolated"
    if manifest.declarations.transductive:
        return "skip"
    return "in-process" if manifest.resources.gpus > 0 else "isolated"


def _isolation_available() -> bool:
    return Path("/proc/self/status").is_file() and guard.become_subreaper()


class _OutDir:
    """The output folder, written through a directory descriptor: no link is ever followed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def planted(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def clear(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return
        except (IsADirectoryError, PermissionError):
            shutil.rmtree(name, dir_fd=self.fd)

    def write(self, name: str, writer: Callable[[Any], None]) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as handle:
            writer(handle)


def _save_npy(handle: Any, *, array: np.ndarray) -> None:
    np.save(handle, array, allow_pickle=False)


def _output_arrays(outputs: dict[str, _Outputs]) -> Iterator[tuple[str, np.ndarray]]:
    for name, out in outputs.items():
        yield from zip(raw_names(name, out.setting.keep is not None), out.arrays, strict=True)


def peak_rss_mib() -> float:
    """The largest peak resident memory, in MiB, of this process and of every model process it
    waited for (fit and prediction pass processes end before the worker writes ``worker.json``;
    orphaned pass processes are reaped here too, as their subreaper): the run's memory high-water
    mark as the record shows it. Linux reports ``ru_maxrss`` in KiB."""
    kib = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return round(kib / 1024, 1)


def run(
    bundle_dir: Path,
    package: Path,
    entrypoint: str,
    out: Path,
    seed: int,
    inductive_check: str | None = None,
    *,
    test_features_fd: int | None = None,
    test_features_path: Path | None = None,
) -> int:
    if test_features_fd is not None:
        # Before anything else: a same-user process cannot open /proc/<worker>/fd/N nor read
        # this process's memory, and no child inherits the descriptor through exec.
        undumpable = guard.set_undumpable()
        os.set_inheritable(test_features_fd, False)
    status: dict[str, object] = {}
    timings: dict[str, float] = {}
    status["timings"] = timings
    out.mkdir(parents=True, exist_ok=True)
    folder = _OutDir(out)

    def finish(code: int, message: str = "", location: str | None = None) -> int:
        # location: the package file and line the failure comes from (None: not known)
        status.update(exit_code=code, message=message, location=location)
        status["peak_rss_mib"] = peak_rss_mib()
        if code:
            print(f"worker: {message}", file=sys.stderr)
            print(f"worker: at {location or 'no line of the package'}", file=sys.stderr)
        data = (json.dumps(status, indent=1, sort_keys=True) + "\n").encode()
        folder.clear(WORKER_JSON)  # on failure only: a success refused planted entries first
        folder.write(WORKER_JSON, lambda handle: handle.write(data))
        return code

    mode = inductive_check or declared_mode(package)
    if mode not in MODES:
        return finish(EXIT_PROTOCOL, f"unknown inductive check '{mode}'; one of {MODES}")
    label = CHECK_LABELS[mode]
    if mode == "isolated" and not _isolation_available():
        mode, label = "in-process", "in-process (no /proc or subreaper here to isolate passes)"
    status["inductive_check"] = label
    if test_features_fd is not None:
        status["test_features"] = "descriptor" if undumpable else "descriptor (worker dumpable)"
    else:
        status["test_features"] = "file" if test_features_path is not None else "bundle"
    # The worker itself: no model process may read or write its memory, and no POSIX message
    # queue (which outlives processes and shows in no folder) can be made by the model.
    guard.set_undumpable()
    guard.forbid_message_queues()
    reaper = guard.Reaper()
    try:
        bundle = Bundle(bundle_dir)
        if bundle.has_row_files:
            print(
                "worker: warning: this is a generator bundle; it says which test images belong"
                " to which setting, which model code must not see (harness.tasks)",
                file=sys.stderr,
            )
        job = _Job(
            bundle,
            package,
            entrypoint,
            out,
            seed,
            mode,
            guard.writable_roots(out),
            reaper,
            test_fd=test_features_fd,
            test_path=test_features_path,
        )
        outputs: dict[str, _Outputs] = {}
        # A fresh fit process per fit: the validation fit (training classes only) must not
        # leak into the main fit, and vice versa.
        for fit in bundle.fits:
            outputs.update(_run_fit(job, fit, timings))
        status["hyperparameters"] = job.hyperparameters
        reaper.sweep()
        # Every model process is gone: what the harness reads is written now, by this process,
        # and a name the model planted (a link to /etc/shadow, say) is refused, not followed.
        for name in [name for name, _ in _output_arrays(outputs)] + [WORKER_JSON]:
            if folder.planted(name):
                raise Violation(
                    EXIT_PROTOCOL,
                    f"{out / name}: model code created this file; the name is reserved for the"
                    " worker's outputs, which the harness reads",
                )
        for name, array in _output_arrays(outputs):
            folder.write(name, functools.partial(_save_npy, array=array))
    except Violation as err:
        reaper.sweep()
        return finish(err.code, err.message, err.location)
    except guard.GuardError as err:
        reaper.sweep()
        return finish(EXIT_PROTOCOL, str(err))
    except Exception as err:
        traceback.print_exc()
        reaper.sweep()
        return finish(EXIT_MODEL_ERROR, f"worker error: {_short(err)}", raised_at(err, package))
    return finish(0)


# --- check mode: the entrypoint alone, no data (``zsl submission validate``) --------------

#: What the worker passes to each protocol method besides ``self`` (:class:`harness.tasks.Model`).
PROTOCOL_CALLS = (("fit", ("task",)), ("predict", ("features", "candidates")))
#: Problems one check reports at most (the rest would repeat the same mistake).
CHECK_PROBLEMS = 20


def _place(location: str | None) -> tuple[str | None, int | None]:
    """(file, line) of a :func:`raised_at` / :func:`defined_at` location ``FILE:LINE[, …]``."""
    if location is None:
        return None, None
    head = location.split(", ", 1)[0]
    file, _, line = head.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else (head, None)


def _problem(
    message: str, location: str | None = None, *, file: str | None = None, line: int | None = None
) -> dict[str, Any]:
    """One finding of the check: the package file and line it is about, and what is wrong."""
    where_file, where_line = _place(location)
    return {
        "file": file or where_file,
        "line": line if line is not None else where_line,
        "message": message[:4000],
    }


def _closest(name: str, names: list[str]) -> str | None:
    """The name ``name`` was probably meant to be: a close spelling, else one that contains it
    or is contained in it, ignoring case (``Ridge`` for ``RidgeToEmbedding``)."""
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    lower = name.lower()
    within = [n for n in names if lower in n.lower() or n.lower() in lower]
    return within[0] if len(within) == 1 else None


def _did_you_mean(close: str | None) -> str:
    return f"; did you mean '{close}'?" if close else ""


def _package_modules(package: Path) -> list[str]:
    """The importable top-level names of the package: ``.py`` files and folders with one."""
    names = {p.stem for p in package.glob("*.py") if p.stem.isidentifier()}
    names |= {p.parent.name for p in package.glob("*/__init__.py") if p.parent.name.isidentifier()}
    return sorted(names)


def _source_of(module_name: str, package: Path) -> str | None:
    """The package file of a dotted module name (``a/b.py`` or ``a/b/__init__.py``), if any."""
    base = package.joinpath(*module_name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(package).as_posix()
    return None


def _classes_by_line(module: Any) -> list[tuple[int, str]]:
    """(line, name) of each class the module itself defines (not the ones it imports)."""
    found = []
    for name, value in list(vars(module).items()):
        if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
            try:
                line = inspect.getsourcelines(value)[1]
            except Exception:  # a class built at run time has no source lines
                line = 1
            found.append((line, name))
    return sorted(found)


def _name_line(package: Path, source: str | None, name: str) -> int:
    """The first line of ``source`` that binds ``name`` at top level (``name =``, ``def name``,
    ``class name``, ``import … as name``), else 1."""
    if source is None:
        return 1
    word = re.escape(name)
    binds = re.compile(rf"^(?:(?:async\s+)?def\s+|class\s+)?{word}\s*[=(:]|^.*\bas\s+{word}\b")
    try:
        text = (package / source).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    for number, line in enumerate(text.splitlines(), start=1):
        if binds.match(line):
            return number
    return 1


def entrypoint_problems(package: Path, entrypoint: str) -> list[dict[str, Any]]:
    """What keeps ``entrypoint`` from running as a model, without data: the module imports (from
    the package's source), the name is a class, ``Class()`` builds it, and its ``fit`` and
    ``predict`` accept the arguments the worker passes (``inspect.signature``). Runs model code:
    call it in a process that may run it (:func:`check`)."""
    from harness.errors import SubmissionError
    from harness.submission.loader import check_entrypoint, import_entrypoint_module

    manifest = "submission.yaml"
    try:
        module_name, class_name = check_entrypoint(entrypoint)
    except SubmissionError as err:
        return [_problem(str(err), file=manifest)]
    source = _source_of(module_name, package)
    if source is None:
        modules = _package_modules(package)
        listing = f"its modules: {', '.join(modules)}" if modules else "it has no .py module"
        return [
            _problem(
                f"entrypoint '{entrypoint}': no module '{module_name}' in the package;"
                f" {listing}{_did_you_mean(_closest(module_name, modules))}",
                file=manifest,
            )
        ]
    try:
        module = import_entrypoint_module(package, entrypoint)
    except SubmissionError as err:
        return [_problem(str(err).replace(str(package), "the package"), file=manifest)]
    except BaseException as err:  # the module's own failure: its line
        traceback.print_exc()
        return [
            _problem(
                f"importing module '{module_name}' raised {_short(err)}",
                raised_at(err, package),
                file=source,
            )
        ]
    missing = object()
    try:
        found = getattr(module, class_name, missing)
    except BaseException as err:  # a module __getattr__ may raise anything
        return [
            _problem(
                f"looking up '{class_name}' in module '{module_name}' raised {_short(err)}",
                raised_at(err, package),
                file=source,
            )
        ]
    if found is missing:
        classes = _classes_by_line(module)
        names = [name for _, name in classes]
        close = _closest(class_name, names)
        # The line of the class it probably means; the module's first line without one.
        line = next((at for at, name in classes if name == close), 1)
        defines = f"the module defines: {', '.join(names)}" if names else "it defines no class"
        return [
            _problem(
                f"entrypoint '{class_name}' not found in module '{module_name}'; {defines}"
                + _did_you_mean(close),
                file=source,
                line=line,
            )
        ]
    if not isinstance(found, type):
        kind = "a function" if inspect.isroutine(found) else f"a {type(found).__name__} object"
        return [
            _problem(
                f"entrypoint '{class_name}' in module '{module_name}' is {kind}, not a class;"
                " the entrypoint names the model class, which the worker builds as Class() and"
                " whose fit(task) and predict(features, candidates) it calls",
                file=source,
                line=_name_line(package, source, class_name),
            )
        ]
    class_at = defined_at(found, class_name, package)
    try:
        model = found()
    except BaseException as err:  # the constructor's failure: its line, else the class's
        traceback.print_exc()
        return [
            _problem(
                f"{class_name}() raised {_short(err)}; the worker builds the model with no"
                " arguments (give every __init__ parameter a default)",
                raised_at(err, package)
                or defined_at(getattr(found, "__init__", None), "__init__", package)
                or class_at,
                file=source,
            )
        ]
    problems = []
    for name, args in PROTOCOL_CALLS:
        try:
            method = getattr(model, name, None)
        except BaseException as err:  # a property or __getattr__ of the model's
            problems.append(_problem(f"{class_name}.{name} raised {_short(err)}", class_at))
            continue
        if not callable(method):
            problems.append(
                _problem(
                    f"class '{class_name}' has no {name}() method; a model class defines"
                    " fit(task) and predict(features, candidates)",
                    class_at,
                    file=source,
                )
            )
            continue
        try:
            signature = inspect.signature(method)
        except Exception:  # not introspectable (a builtin, a C extension): the run will tell
            continue
        try:
            signature.bind(*args)
        except TypeError as err:
            at = defined_at(getattr(type(model), name, method), name, package) or class_at
            problems.append(
                _problem(
                    f"{class_name}.{name}{signature} cannot be called as"
                    f" {name}({', '.join(args)}), as the worker calls it: {err}",
                    at,
                    file=source,
                )
            )
    return problems


def _checked_problems(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The check process's findings, re-checked: it ran model code."""
    found = report.get("problems")
    if not isinstance(found, list):
        raise Violation(EXIT_PROTOCOL, "the check process sent a malformed report")
    problems = []
    for item in found[:CHECK_PROBLEMS]:
        if not isinstance(item, dict) or not isinstance(item.get("message"), str):
            raise Violation(EXIT_PROTOCOL, "the check process sent a malformed report")
        file, line = item.get("file"), item.get("line")
        problems.append(
            {
                "file": file[:500] if isinstance(file, str) else None,
                "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
                "message": item["message"][:4000],
            }
        )
    return problems


def check(package: Path, entrypoint: str, out: Path) -> int:
    """Check mode: write ``check.json`` (``{"entrypoint", "problems": [{file, line, message}]}``,
    see :func:`entrypoint_problems`) into ``out``; exit 0 once it is written, problems or not.

    Like a fit, the model code runs in a forked process, never in this one, which writes the
    findings only after every process the model started is gone (a file the model planted under
    the reserved name is refused, not trusted)."""
    from harness.runners.entrypoint_check import CHECK_JSON

    out.mkdir(parents=True, exist_ok=True)
    folder = _OutDir(out)
    guard.set_undumpable()
    guard.become_subreaper()
    reaper = guard.Reaper()
    control_r, control_w = os.pipe()
    _flush()
    pid = os.fork()
    if pid == 0:  # the check process: runs model code
        try:
            os.close(control_r)
            _send_json(control_w, {"problems": entrypoint_problems(package, entrypoint)})
        except BaseException:
            traceback.print_exc()
        finally:
            _flush()
            os._exit(0)
    os.close(control_w)
    try:
        problems = _checked_problems(_read_json(control_r))
    except (_Closed, struct.error):
        status = reaper.wait(pid, timeout_s=5.0)
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            how = f"was killed by signal {name}"
        elif status is not None and os.WIFEXITED(status):
            how = f"exited with code {os.WEXITSTATUS(status)} (sys.exit or os._exit at import?)"
        else:
            how = "stopped answering"
        problems = [_problem(f"the process importing {entrypoint} {how} before it reported")]
    except Violation as err:
        problems = [_problem(err.message)]
    finally:
        os.close(control_r)
    reaper.wait(pid, timeout_s=WAIT_S)
    reaper.sweep()
    if folder.planted(CHECK_JSON):
        folder.clear(CHECK_JSON)
        problems.append(
            _problem(
                f"model code created {CHECK_JSON} in the output folder; the name is reserved"
                " for the worker's findings"
            )
        )
    data = json.dumps({"entrypoint": entrypoint, "problems": problems}, indent=1) + "\n"
    folder.write(CHECK_JSON, lambda handle: handle.write(data.encode()))
    return 0


def main(argv: list[str] | None = None) -> int:
    if "--test-features-fd" in (sys.argv[1:] if argv is None else argv):
        guard.set_undumpable()  # before parsing anything; run() checks it again
    if (sys.argv[1:] if argv is None else argv)[:1] == ["--check"]:
        return _check_main(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m harness.worker", description=__doc__)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("package", type=Path)
    parser.add_argument("entrypoint")
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--inductive-check",
        choices=MODES,
        default=None,
        help="isolated (CPU), in-process (GPU) or skip (declared transductive); default: from"
        " the package's submission.yaml",
    )
    test = parser.add_mutually_exclusive_group()
    test.add_argument(
        "--test-features-fd",
        type=int,
        default=None,
        help="an open read-only descriptor of the main fit's test features (.npy), for a bundle"
        " that does not hold them",
    )
    test.add_argument(
        "--test-features-path",
        type=Path,
        default=None,
        help="the path of that file, where the runner cannot pass a descriptor (containers)",
    )
    args = parser.parse_args(argv)
    return run(
        args.bundle,
        args.package,
        args.entrypoint,
        args.out,
        args.seed,
        args.inductive_check,
        test_features_fd=args.test_features_fd,
        test_features_path=args.test_features_path,
    )


def _check_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.worker --check",
        description="import a package's entrypoint and check it against the model protocol,"
        " without data; findings go to OUT/check.json",
    )
    parser.add_argument("--check", action="store_true", required=True)
    parser.add_argument("package", type=Path)
    parser.add_argument("entrypoint")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    return check(args.package, args.entrypoint, args.out)


if __name__ == "__main__":
    sys.exit(main())
