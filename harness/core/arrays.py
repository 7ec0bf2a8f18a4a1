"""Content-verified array files: one ``.npy`` per artifact, checked against its manifest entry.

An :class:`ArtifactEntry` records an array's shape, dtype and the sha256 of its *content*
(:func:`harness.core.hashing.array_sha256`). :func:`load_verified` reads the file back
(memory-mapped read-only when large) and refuses any mismatch with the file, the expected and
actual values and what to do. Frozen benchmarks (:mod:`harness.data.artifacts`) and feature
sets (:mod:`harness.features.sets`) both store their arrays this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.core.errors import IntegrityError
from harness.core.hashing import array_sha256

__all__ = ["MMAP_THRESHOLD_BYTES", "ArtifactEntry", "artifact_path", "load_verified"]

MMAP_THRESHOLD_BYTES = 64 << 20


@dataclass(frozen=True)
class ArtifactEntry:
    shape: tuple[int, ...]
    dtype: str
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "sha256": self.sha256}


def load_verified(path: Path, entry: ArtifactEntry, name: str, *, remedy: str) -> np.ndarray:
    """Load one ``.npy`` artifact (memory-mapped read-only when large) and check its shape, dtype
    and content hash against ``entry``; a mismatch is an :class:`IntegrityError` ending in
    ``remedy`` (what the user does about it)."""
    expected_bytes = int(np.prod(entry.shape, dtype=np.int64)) * np.dtype(entry.dtype).itemsize
    mmap: Literal["r"] | None = "r" if expected_bytes >= MMAP_THRESHOLD_BYTES else None
    try:
        array = np.load(path, allow_pickle=False, mmap_mode=mmap)
    except FileNotFoundError:
        raise IntegrityError(f"{path}: artifact file is missing. {remedy}") from None
    except (ValueError, OSError, EOFError) as err:
        raise IntegrityError(
            f"{path}: artifact file is truncated or corrupt ({err}). {remedy}"
        ) from None
    problem = None
    if tuple(array.shape) != entry.shape:
        problem = f"shape {tuple(array.shape)} instead of {entry.shape}"
    elif array.dtype.str != entry.dtype:
        problem = f"dtype {array.dtype.str} instead of {entry.dtype}"
    else:
        actual = array_sha256(array)
        if actual != entry.sha256:
            problem = f"content hash {actual} instead of {entry.sha256}"
    if problem is not None:
        raise IntegrityError(
            f"{path}: artifact {name!r} does not match the manifest: {problem}. The file was"
            f" modified or damaged after freezing. {remedy}"
        )
    if mmap is None:
        array.setflags(write=False)
    return array


def artifact_path(root: Path, name: str) -> Path:
    if name.startswith("/") or ".." in name.split("/") or not name:
        raise ValueError(f"bad artifact name {name!r}")
    return root.joinpath(*name.split("/")).with_suffix(".npy")
