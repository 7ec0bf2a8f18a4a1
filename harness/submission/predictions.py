"""Prediction files: write and read predictions without pickle.

Contents: dense ``scores [n_test, n_candidates]``, or top-K ``topk_indices [n_test, K]`` (candidate
columns) with ``topk_scores [n_test, K]`` for huge label spaces. Formats: ``.safetensors`` (the
default: a JSON header and raw bytes, no code; top-K files are validated and scored in streamed
row chunks) and ``.npz`` loaded with ``allow_pickle=False``. A file carries the benchmark hash,
the setting and the hash of the column (candidate class) order it was made for; the reader
refuses a file made for another benchmark or class order, a wrong shape or dtype, NaN/inf,
out-of-range or repeated top-K entries (naming the first bad row).
Rows are in the frozen test order of the setting; columns in the spec's candidate order.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import PredictionError
from harness.hashing import array_sha256

FORMAT = "zsl-predictions/1"
FLOAT_DTYPES = (np.float16, np.float32, np.float64)


CHUNK_ROWS = 100_000


@dataclass(frozen=True)
class Predictions:
    """Checked predictions: dense ``scores``, or a top-K file read in row chunks."""

    benchmark_hash: str
    class_order_hash: str
    setting: str
    sha256: str
    scores: np.ndarray | None = None
    topk_path: Path | None = None
    n_rows: int = 0

    def topk_chunks(
        self, chunk_rows: int = CHUNK_ROWS
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first row, indices, scores) per chunk, each row sorted by decreasing score."""
        assert self.topk_path is not None
        for start, indices, scores in _iter_topk(self.topk_path, chunk_rows):
            yield start, *_sort_rows(indices, scores)


def write_predictions(
    path: Path,
    scores: np.ndarray | None = None,
    *,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
    topk_indices: np.ndarray | None = None,
    topk_scores: np.ndarray | None = None,
) -> Path:
    """Write dense ``scores`` (or ``topk_indices`` + ``topk_scores``) with the hashes they were
    made for; the format follows the suffix."""
    if scores is not None:
        tensors = {"scores": np.ascontiguousarray(scores)}
    elif topk_indices is not None and topk_scores is not None:
        tensors = {
            "topk_indices": np.ascontiguousarray(topk_indices),
            "topk_scores": np.ascontiguousarray(topk_scores),
        }
    else:
        raise PredictionError(f"{path}: give scores, or topk_indices and topk_scores")
    meta = {
        "format": FORMAT,
        "benchmark_hash": benchmark_hash,
        "class_order_hash": class_order_hash,
        "setting": setting,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, str(tmp), metadata=meta)
    elif path.suffix == ".npz":
        with tmp.open("wb") as handle:
            arrays = {**tensors, **{k: np.array(v) for k, v in meta.items()}}
            np.savez(handle, **arrays)  # type: ignore[arg-type]
    else:
        raise PredictionError(f"{path}: prediction files end in .safetensors or .npz")
    tmp.replace(path)
    return path


TENSORS = {"dense": ("scores",), "topk": ("topk_indices", "topk_scores")}


def _read_raw(path: Path, kind: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Dense tensors in memory; for top-K only the metadata (the tensors are streamed)."""
    if not path.is_file():
        raise PredictionError(f"{path}: prediction file not found")
    wanted = TENSORS[kind]
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="numpy") as handle:
                meta = dict(handle.metadata() or {})
                keys = sorted(handle.keys())
                if keys != sorted(wanted):
                    raise PredictionError(
                        f"{path}: expected tensors {list(wanted)} for {kind} predictions,"
                        f" found {keys}"
                    )
                if kind == "topk":
                    return {}, meta
                return {"scores": handle.get_tensor("scores")}, meta
        except SafetensorError as err:
            raise PredictionError(f"{path}: not a valid safetensors file ({err})") from None
    if path.suffix == ".npz":
        if kind == "topk":
            raise PredictionError(f"{path}: top-K predictions are read from .safetensors files")
        try:
            with np.load(path, allow_pickle=False) as archive:
                names = set(archive.files)
                if "scores" not in names:
                    raise PredictionError(f"{path}: no 'scores' array (found {sorted(names)})")
                meta = {k: str(archive[k][()]) for k in names - {"scores"}}
                return {"scores": archive["scores"]}, meta
        except ValueError as err:
            raise PredictionError(
                f"{path}: refused ({err}); object arrays and pickles are never loaded"
            ) from None
        except (OSError, zipfile.BadZipFile, EOFError) as err:
            raise PredictionError(f"{path}: not a valid .npz file ({err})") from None
    raise PredictionError(f"{path}: prediction files end in .safetensors or .npz")


def read_predictions(
    path: Path,
    *,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
    shape: tuple[int, int],
    topk: int | None = None,
) -> Predictions:
    """Read and check one prediction file for (benchmark, setting).

    ``shape`` is (n_test, n_candidates); ``topk`` is K for top-K files (None: dense).
    """
    tensors, meta = _read_raw(path, "dense" if topk is None else "topk")
    for key, expected in (
        ("benchmark_hash", benchmark_hash),
        ("class_order_hash", class_order_hash),
        ("setting", setting),
    ):
        got = meta.get(key)
        if got != expected:
            raise PredictionError(
                f"{path}: made for {key} {got!r}, but this run needs {expected!r}."
                " Regenerate the file from the current task bundle."
            )
    if topk is not None:
        return _check_topk(path, meta, shape, topk)
    scores = tensors["scores"]
    if scores.dtype.type not in FLOAT_DTYPES:
        raise PredictionError(f"{path}: scores must be float16/32/64; got dtype {scores.dtype}")
    if scores.ndim != 2 or tuple(scores.shape) != shape:
        raise PredictionError(
            f"{path}: scores must have shape (n_test, n_candidates) = {shape}; got {scores.shape}"
        )
    if not np.isfinite(scores.sum(dtype=np.float64)):
        bad_rows = np.flatnonzero(~np.isfinite(scores).all(axis=1))
        if len(bad_rows):
            row = int(bad_rows[0])
            col = int(np.flatnonzero(~np.isfinite(scores[row]))[0])
            raise PredictionError(
                f"{path}: scores contain NaN or inf: first at row {row}, column {col}"
                f" ({len(bad_rows)} bad row(s))"
            )
    return Predictions(
        benchmark_hash,
        class_order_hash,
        setting,
        array_sha256(scores),
        scores=scores,
        n_rows=shape[0],
    )


def _iter_topk(path: Path, chunk_rows: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        indices, scores = handle.get_slice("topk_indices"), handle.get_slice("topk_scores")
        n_rows = indices.get_shape()[0]
        for start in range(0, n_rows, chunk_rows):
            stop = min(start + chunk_rows, n_rows)
            yield start, indices[start:stop], scores[start:stop]


def _sort_rows(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order each row by decreasing score; equal scores keep the smaller column first."""
    order = np.lexsort((indices, -scores.astype(np.float64)), axis=1)
    return np.take_along_axis(indices, order, 1), np.take_along_axis(scores, order, 1)


def _check_topk(path: Path, meta: dict[str, str], shape: tuple[int, int], k: int) -> Predictions:
    """One streamed pass: shapes, dtypes, range, duplicates, finiteness; hash of the content."""
    from safetensors import safe_open

    n_rows, n_candidates = shape
    with safe_open(str(path), framework="numpy") as handle:
        got = {
            name: (handle.get_slice(name).get_shape(), handle.get_slice(name).get_dtype())
            for name in ("topk_indices", "topk_scores")
        }
    for name, (got_shape, _dtype) in got.items():
        if tuple(got_shape) != (n_rows, k):
            raise PredictionError(
                f"{path}: {name} must have shape (n_test, K) = {(n_rows, k)};"
                f" got {tuple(got_shape)}"
            )
    if not got["topk_indices"][1].startswith(("I", "U")):
        raise PredictionError(
            f"{path}: topk_indices must be integers; got {got['topk_indices'][1]}"
        )
    if got["topk_scores"][1] not in ("F16", "F32", "F64"):
        raise PredictionError(f"{path}: topk_scores must be floats; got {got['topk_scores'][1]}")
    digest = hashlib.sha256(f"topk;{n_rows};{k}".encode())
    for start, indices, scores in _iter_topk(path, CHUNK_ROWS):
        bad = (indices < 0) | (indices >= n_candidates)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            raise PredictionError(
                f"{path}: topk_indices out of range [0, {n_candidates}) first at row"
                f" {start + row}: {indices[row][bad[row]][0]}"
            )
        ordered = np.sort(indices, axis=1)
        dup = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if dup.any():
            row = int(np.flatnonzero(dup)[0])
            raise PredictionError(
                f"{path}: topk_indices repeat a candidate in row {start + row}"
                f" ({int(dup.sum())} row(s) in this chunk)"
            )
        finite = np.isfinite(scores).all(axis=1)
        if not finite.all():
            row = int(np.flatnonzero(~finite)[0])
            raise PredictionError(
                f"{path}: topk_scores contain NaN or inf: first at row {start + row}"
            )
        sorted_indices, sorted_scores = _sort_rows(indices.astype(np.int64), scores)
        digest.update(sorted_indices.tobytes())
        digest.update(sorted_scores.astype("<f4").tobytes())
    return Predictions(
        meta["benchmark_hash"],
        meta["class_order_hash"],
        meta["setting"],
        "sha256:" + digest.hexdigest(),
        topk_path=path,
        n_rows=n_rows,
    )
