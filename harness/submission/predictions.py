"""Prediction files: write and read ``scores [n_test, n_candidates]`` without pickle.

Formats: ``.safetensors`` (the default: a JSON header and raw bytes, no code) and ``.npz``/``.npy``
loaded with ``allow_pickle=False``. A file carries the benchmark hash, the setting and the hash of
the column (candidate class) order it was made for; the reader refuses a file made for another
benchmark or class order, a wrong shape or dtype, and NaN/inf (naming the first bad row).
Rows are in the frozen test order of the setting; columns in the spec's candidate order.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import PredictionError
from harness.hashing import array_sha256

FORMAT = "zsl-predictions/1"
FLOAT_DTYPES = (np.float16, np.float32, np.float64)


@dataclass(frozen=True)
class Predictions:
    scores: np.ndarray
    benchmark_hash: str
    class_order_hash: str
    setting: str

    @property
    def sha256(self) -> str:
        return array_sha256(self.scores)


def write_predictions(
    path: Path,
    scores: np.ndarray,
    *,
    benchmark_hash: str,
    class_order_hash: str,
    setting: str,
) -> Path:
    """Write ``scores`` with the hashes it was made for (format chosen by the suffix)."""
    scores = np.ascontiguousarray(scores)
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

        save_file({"scores": scores}, str(tmp), metadata=meta)
    elif path.suffix == ".npz":
        with tmp.open("wb") as handle:
            arrays = {"scores": scores, **{k: np.array(v) for k, v in meta.items()}}
            np.savez(handle, **arrays)  # type: ignore[arg-type]
    else:
        raise PredictionError(f"{path}: prediction files end in .safetensors or .npz")
    tmp.replace(path)
    return path


def _read_raw(path: Path) -> tuple[np.ndarray, dict[str, str]]:
    if not path.is_file():
        raise PredictionError(f"{path}: prediction file not found")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="numpy") as handle:
                meta = dict(handle.metadata() or {})
                keys = list(handle.keys())
                if keys != ["scores"]:
                    raise PredictionError(f"{path}: expected one tensor 'scores', found {keys}")
                return handle.get_tensor("scores"), meta
        except SafetensorError as err:
            raise PredictionError(f"{path}: not a valid safetensors file ({err})") from None
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as archive:
                names = set(archive.files)
                if "scores" not in names:
                    raise PredictionError(f"{path}: no 'scores' array (found {sorted(names)})")
                meta = {k: str(archive[k][()]) for k in names - {"scores"}}
                return archive["scores"], meta
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
) -> Predictions:
    """Read and check one prediction file for (benchmark, setting)."""
    scores, meta = _read_raw(path)
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
    return Predictions(scores, benchmark_hash, class_order_hash, setting)
