"""Content hashes: ``sha256:<hex>`` of what an array holds, not of how it was saved.

Two copies of the same data saved with different ``.npy`` header padding, byte order or memory
layout hash the same, because the hash covers a canonical header (little-endian dtype and shape)
followed by the C-ordered little-endian bytes, read in chunks so memory-mapped arrays stream.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CHUNK_BYTES",
    "array_sha256",
    "file_sha256",
    "json_sha256",
    "short_hash",
    "strings_sha256",
]

CHUNK_BYTES = 1 << 24


def canonical_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The little-endian version of ``dtype`` (byte order is storage, not content)."""
    return dtype.newbyteorder("<") if dtype.byteorder not in ("|", "=", "<") else dtype


def array_sha256(array: np.ndarray) -> str:
    """Content hash of an array.

    >>> a = np.arange(3, dtype="<i4")
    >>> array_sha256(a) == array_sha256(a.astype(">i4"))
    True
    >>> array_sha256(a) == array_sha256(a.astype("<i8"))
    False
    """
    if array.dtype.hasobject:
        raise TypeError("object arrays have no content hash; they are never stored")
    dtype = canonical_dtype(array.dtype)
    digest = hashlib.sha256()
    digest.update(f"dtype={dtype.str};shape={tuple(int(s) for s in array.shape)}\n".encode())
    if array.ndim == 0 or array.shape[0] == 0:
        digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
    else:
        row_bytes = max(1, array[0].nbytes)
        rows = max(1, CHUNK_BYTES // row_bytes)
        for start in range(0, array.shape[0], rows):
            block = np.ascontiguousarray(array[start : start + rows], dtype=dtype)
            digest.update(block.data.cast("B"))
    return "sha256:" + digest.hexdigest()


def json_sha256(payload: Any) -> str:
    """Hash of canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def strings_sha256(values: Any) -> str:
    """Hash of an ordered list of ids (class order, row order)."""
    return json_sha256([str(v) for v in values])


def short_hash(value: str, length: int = 12) -> str:
    """The first ``length`` characters of a hash's digest, without its ``alg:`` prefix.

    >>> short_hash("sha256:0123456789abcdef0123")
    '0123456789ab'
    """
    return value.partition(":")[2][:length] if ":" in value else value[:length]
