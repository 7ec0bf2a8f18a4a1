"""The byte protocol between the harness and a prediction pass: one pipe each way.

The harness (:mod:`harness.runners.judge`) is the only party that holds the test images; a
prediction pass (``python -m harness.worker.phases predict``, inside a sandbox or container) gets
them
one chunk at a time and must answer a chunk before it is sent the next, so what a model has seen
when it scores an image is exactly what the harness chose to send it.

See docs/runners.md.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

__all__ = [
    "CODES",
    "DENSE",
    "DTYPES",
    "MESSAGE_LIMIT",
    "MODEL_ERROR",
    "OK",
    "OP_PREDICT",
    "OP_QUIT",
    "PROTOCOL",
    "READY",
    "REPLY",
    "REQUEST",
    "TOPK",
    "Closed",
    "nonfinite_message",
    "read_exact",
    "read_into",
    "read_json",
    "send_error",
    "send_json",
    "write_all",
]

REQUEST = struct.Struct("<BxxxIQQ8s")
REPLY = struct.Struct("<BBBxIQQ")
OP_QUIT, OP_PREDICT = 0, 1
OK, MODEL_ERROR, PROTOCOL, READY = 0, 1, 2, 3
DENSE, TOPK = 0, 1
DTYPES = {1: np.dtype("<f2"), 2: np.dtype("<f4"), 3: np.dtype("<f8")}
CODES = {d: c for c, d in DTYPES.items()}
MESSAGE_LIMIT = 16_384
CONTROL_LIMIT = 64 << 20  # a control message lists every candidate of every setting


class Closed(Exception):
    """The other end of a pipe went away."""


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        try:
            sent = os.write(fd, view)
        except (BrokenPipeError, ConnectionResetError):
            raise Closed from None
        view = view[sent:]


def read_into(fd: int, buffer: memoryview) -> None:
    view = buffer.cast("B")
    while view:
        try:
            got = os.readv(fd, [view])
        except ConnectionResetError:
            raise Closed from None
        if got == 0:
            raise Closed
        view = view[got:]


def read_exact(fd: int, size: int) -> bytes:
    data = bytearray(size)
    read_into(fd, memoryview(data))
    return bytes(data)


def send_json(fd: int, value: dict[str, Any]) -> None:
    data = json.dumps(value).encode()
    write_all(fd, struct.pack("<Q", len(data)) + data)


def read_json(fd: int, limit: int = CONTROL_LIMIT) -> dict[str, Any]:
    """One control message; ValueError when it is longer than ``limit`` or not a JSON object."""
    (size,) = struct.unpack("<Q", read_exact(fd, 8))
    if size > limit:
        raise ValueError(f"a {size}-byte control message (at most {limit})")
    try:
        value = json.loads(read_exact(fd, size))
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ValueError("a malformed control message")
    return value


def send_error(fd: int, status: int, message: str, location: str | None = None) -> None:
    """An error reply: ``status`` and the JSON object ``{"message", "location"}``."""
    payload = {"message": message[:4000], "location": None if location is None else location[:500]}
    data = json.dumps(payload).encode("utf-8", "replace")[:MESSAGE_LIMIT]
    write_all(fd, REPLY.pack(status, 0, 0, len(data), 0, 0) + data)


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
