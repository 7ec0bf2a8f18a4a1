"""Prediction files: round trips, and each refusal names the problem (and the first bad row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import PredictionError
from harness.submission.predictions import read_predictions, write_predictions

META = {"benchmark_hash": "sha256:b", "class_order_hash": "sha256:c", "setting": "zsl"}


def _read(path: Path, shape: tuple[int, int] = (4, 3), **over: str):  # type: ignore[no-untyped-def]
    kwargs = {**META, **over}
    return read_predictions(path, shape=shape, **kwargs)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    scores = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = write_predictions(tmp_path / f"p{suffix}", scores, **META)
    got = _read(path)
    np.testing.assert_array_equal(got.scores, scores)
    assert got.sha256.startswith("sha256:")


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_refusals(tmp_path: Path, suffix: str) -> None:
    scores = np.zeros((4, 3), np.float32)
    path = write_predictions(tmp_path / f"p{suffix}", scores, **META)
    with pytest.raises(
        PredictionError, match=r"made for benchmark_hash 'sha256:b', but this run needs 'sha256:X'"
    ):
        _read(path, benchmark_hash="sha256:X")
    with pytest.raises(PredictionError, match="made for class_order_hash"):
        _read(path, class_order_hash="sha256:other-order")
    with pytest.raises(PredictionError, match="made for setting 'zsl'"):
        _read(path, setting="gzsl")
    with pytest.raises(
        PredictionError, match=r"shape \(n_test, n_candidates\) = \(5, 3\); got \(4, 3\)"
    ):
        _read(path, shape=(5, 3))
    bad = scores.copy()
    bad[2, 1] = np.nan
    bad[3, 0] = np.inf
    write_predictions(path, bad, **META)
    with pytest.raises(
        PredictionError, match=r"NaN or inf: first at row 2, column 1 \(2 bad row\(s\)\)"
    ):
        _read(path)
    write_predictions(path, scores.astype(np.int32), **META)
    with pytest.raises(PredictionError, match="must be float16/32/64; got dtype int32"):
        _read(path)


def test_pickle_npz_and_garbage_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.npz"
    np.savez(path, scores=np.array([object()], dtype=object), benchmark_hash="sha256:b")
    with pytest.raises(PredictionError, match="object arrays and pickles are never loaded"):
        _read(path)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\xff" * 64)
    with pytest.raises(PredictionError, match="not a valid safetensors file"):
        _read(junk)
    (tmp_path / "x.pkl").write_bytes(b"")
    with pytest.raises(PredictionError, match=r"end in \.safetensors or \.npz"):
        _read(tmp_path / "x.pkl")
    with pytest.raises(PredictionError, match="prediction file not found"):
        _read(tmp_path / "missing.safetensors")
