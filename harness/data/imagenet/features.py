"""The user's ImageNet features: open and check their directory, gather a split's images.

The arrays stay memory-mapped; :func:`select_images` and :func:`gather_features` copy only
the rows a benchmark keeps, a bounded chunk at a time.

See docs/data.md.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from harness.core.errors import SpecError
from harness.core.home import zsl_home
from harness.hierarchy.class_sets import read_wnids

__all__ = [
    "EMBEDDINGS_FILE",
    "ENV_FEATURES_DIR",
    "FEATURES_FILE",
    "LABELS_FILE",
    "WNIDS_FILE",
    "IntArray",
    "embedding_file",
    "gather_features",
    "open_user_features",
    "select_images",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the user's feature directory when the spec gives none.
ENV_FEATURES_DIR = "ZSL_IMAGENET_FEATURES"

#: Bytes of feature rows copied per chunk (bounds this module's peak memory).
CHUNK_BYTES = 64 << 20
#: Labels read per chunk.
LABEL_CHUNK_ROWS = 1 << 22
#: Selected features larger than this are assembled in an anonymous file-backed map under
#: ``ZSL_HOME/tmp`` rather than in memory.
SPILL_BYTES = 1 << 30

IntArray = npt.NDArray[np.int64]


FEATURES_FILE = "features.npy"
LABELS_FILE = "labels.npy"
WNIDS_FILE = "wnids.txt"
EMBEDDINGS_FILE = "class_embeddings.npy"


def embedding_file(name: str, *, default: bool) -> str:
    """File name of a class embedding: ``class_embeddings.npy`` for the spec's default one,
    ``class_embeddings.<name>.npy`` for the others."""
    return EMBEDDINGS_FILE if default else f"class_embeddings.{name}.npy"


@dataclass
class UserFeatures:
    """The user's feature directory, opened and checked (arrays memory-mapped, read-only)."""

    directory: Path
    features: np.ndarray
    labels: np.ndarray
    wnids: tuple[str, ...]
    embeddings: dict[str, np.ndarray]

    @property
    def n_images(self) -> int:
        return int(self.features.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])


def _open_npy(file: Path, what: str) -> np.ndarray:
    if not file.is_file():
        raise SpecError(
            f"{file}: missing {what}; see specs/imagenet/README.md for the feature directory format"
        )
    try:
        array: np.ndarray = np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise SpecError(
            f"{file}: not a readable .npy array ({err}); save it with numpy.save and no"
            " object dtype"
        ) from None
    return array


def open_user_features(
    directory: str | os.PathLike[str], embeddings: Mapping[str, str] | None = None
) -> UserFeatures:
    """Open and check a user feature directory (see docs/data.md for the format).

    Parameters
    ----------
    directory : path
    embeddings : mapping of str to str, default=None
        Embedding name -> file name in ``directory``; ``None``: ``{"default":
        "class_embeddings.npy"}``.

    Raises
    ------
    SpecError
        Naming the file and what is wrong: missing, not ``.npy``, wrong dtype or shape,
        mismatched lengths.
    """
    root = Path(directory)
    if not root.is_dir():
        raise SpecError(
            f"feature directory {root} does not exist; set data.params.features_dir or"
            f" {ENV_FEATURES_DIR} to the directory holding {FEATURES_FILE}, {LABELS_FILE},"
            f" {WNIDS_FILE} and {EMBEDDINGS_FILE}"
        )
    features = _open_npy(root / FEATURES_FILE, "image features [N, D] float16/float32")
    if features.ndim != 2 or features.dtype not in (np.float16, np.float32):
        raise SpecError(
            f"{root / FEATURES_FILE}: expected a float16 or float32 array [N, D], got"
            f" {features.dtype} of shape {features.shape}"
        )
    labels = _open_npy(root / LABELS_FILE, "image labels [N] (integers indexing wnids.txt)")
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise SpecError(
            f"{root / LABELS_FILE}: expected a 1-D integer array, got {labels.dtype} of shape"
            f" {labels.shape}"
        )
    if labels.shape[0] != features.shape[0]:
        raise SpecError(
            f"{root}: {LABELS_FILE} has {labels.shape[0]} entries but {FEATURES_FILE} has"
            f" {features.shape[0]} rows; they must describe the same images in the same order"
        )
    wnids = read_wnids(root / WNIDS_FILE, what="class list wnids.txt")
    tables: dict[str, np.ndarray] = {}
    for name, filename in (embeddings or {"default": EMBEDDINGS_FILE}).items():
        table = _open_npy(root / filename, f"class embedding '{name}' [n_wnids, E]")
        if table.ndim != 2 or table.dtype.kind != "f" or table.shape[0] != len(wnids):
            raise SpecError(
                f"{root / filename}: expected a float array [{len(wnids)}, E] (one row per line"
                f" of {WNIDS_FILE}), got {table.dtype} of shape {table.shape}"
            )
        tables[name] = table
    return UserFeatures(root, features, labels, wnids, tables)


def select_images(labels: np.ndarray, lookup: IntArray, file: Path) -> tuple[IntArray, IntArray]:
    """Rows whose label maps to a class (``lookup[label] >= 0``) and those classes, in chunks."""
    rows, classes = [], []
    n_wnids = lookup.size
    for start in range(0, labels.shape[0], LABEL_CHUNK_ROWS):
        chunk = np.asarray(labels[start : start + LABEL_CHUNK_ROWS]).astype(np.int64)
        bad = np.flatnonzero((chunk < 0) | (chunk >= n_wnids))
        if bad.size:
            row = start + int(bad[0])
            raise SpecError(
                f"{file}: row {row} holds label {int(chunk[bad[0]])}, outside 0..{n_wnids - 1}"
                f" (labels index the lines of {WNIDS_FILE}); {bad.size} bad label(s) in rows"
                f" {start}..{start + chunk.size - 1}"
            )
        mapped = lookup[chunk]
        keep = np.flatnonzero(mapped >= 0)
        rows.append(start + keep)
        classes.append(mapped[keep])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rows).astype(np.int64), np.concatenate(classes).astype(np.int64)


def _output_array(n: int, dim: int) -> np.ndarray:
    """A float32 [n, dim] array: in memory, or a file-backed map whose file is already unlinked
    (Linux keeps the mapping valid; the space is freed when the array is)."""
    if n * dim * 4 <= SPILL_BYTES:
        return np.empty((n, dim), dtype=np.float32)
    folder = zsl_home() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="imagenet-features.", suffix=".npy", dir=folder)
    os.close(fd)
    out = np.lib.format.open_memmap(name, mode="w+", dtype=np.float32, shape=(n, dim))
    try:
        os.unlink(name)
    except OSError:  # a platform that cannot unlink an open file: leave it for the user
        logger.warning("could not remove the temporary feature file %s; delete it later", name)
    return out


def gather_features(
    features: np.ndarray, rows: IntArray, destination: IntArray, file: Path
) -> np.ndarray:
    """``out[destination[k]] = features[rows[k]]`` as float32, a bounded chunk at a time."""
    dim = features.shape[1]
    out = _output_array(rows.size, dim)
    step = max(1, CHUNK_BYTES // max(1, dim * features.dtype.itemsize))
    for start in range(0, rows.size, step):
        source = rows[start : start + step]
        block = np.asarray(features[source], dtype=np.float32)
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            row = int(source[np.argmin(finite)])
            raise SpecError(f"{file}: row {row} holds NaN or inf; features must be finite")
        out[destination[start : start + step]] = block
    return out
