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


def _topk(tmp_path: Path, indices: np.ndarray, scores: np.ndarray) -> Path:
    return write_predictions(
        tmp_path / "t.safetensors", topk_indices=indices, topk_scores=scores, **META
    )


def test_topk_round_trip_sorts_rows_and_streams(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    indices = np.stack([rng.permutation(50)[:5] for _ in range(23)])
    scores = rng.standard_normal((23, 5)).astype(np.float32)
    scores[0, 3] = scores[0, 1]  # a tie: the smaller column must come first
    path = _topk(tmp_path, indices, scores)
    got = read_predictions(path, **META, shape=(23, 50), topk=5)
    assert got.scores is None and got.n_rows == 23
    chunks = list(got.topk_chunks(chunk_rows=7))
    assert [start for start, _, _ in chunks] == [0, 7, 14, 21]
    idx = np.concatenate([c[1] for c in chunks])
    sc = np.concatenate([c[2] for c in chunks])
    assert (np.diff(sc, axis=1) <= 0).all()  # best first
    for row in range(23):  # same (index, score) pairs, reordered
        assert dict(zip(idx[row].tolist(), sc[row].tolist(), strict=True)) == dict(
            zip(indices[row].tolist(), scores[row].tolist(), strict=True)
        )
    tie = [i for i in idx[0] if i in (indices[0, 1], indices[0, 3])]
    assert tie == sorted(tie)
    # the content hash does not depend on the order inside a row
    shuffled = _topk(tmp_path, indices[:, ::-1].copy(), scores[:, ::-1].copy())
    assert read_predictions(shuffled, **META, shape=(23, 50), topk=5).sha256 == got.sha256


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda i, s: i.__setitem__((4, 2), 50), r"out of range \[0, 50\) first at row 4: 50"),
        (lambda i, s: i.__setitem__((6, 1), -1), r"out of range \[0, 50\) first at row 6: -1"),
        (lambda i, s: i.__setitem__((9, 3), i[9, 0]), r"repeat a candidate in row 9"),
        (
            lambda i, s: s.__setitem__((2, 0), np.nan),
            r"topk_scores contain NaN or inf: first at row 2",
        ),
    ],
)
def test_topk_refusals_name_the_first_bad_row(tmp_path: Path, mutate, pattern: str) -> None:  # type: ignore[no-untyped-def]
    indices = np.tile(np.arange(5), (12, 1))
    scores = np.tile(np.linspace(1, 0, 5, dtype=np.float32), (12, 1))
    mutate(indices, scores)
    path = _topk(tmp_path, indices, scores)
    with pytest.raises(PredictionError, match=pattern):
        read_predictions(path, **META, shape=(12, 50), topk=5)


def test_topk_wrong_k_dtype_and_kind(tmp_path: Path) -> None:
    indices = np.tile(np.arange(5), (3, 1))
    scores = np.ones((3, 5), np.float32)
    path = _topk(tmp_path, indices, scores)
    with pytest.raises(
        PredictionError, match=r"topk_indices must have shape \(n_test, K\) = \(3, 4\)"
    ):
        read_predictions(path, **META, shape=(3, 50), topk=4)
    with pytest.raises(
        PredictionError, match=r"expected tensors \['scores'\] for dense predictions"
    ):
        read_predictions(path, **META, shape=(3, 50))
    floats = _topk(tmp_path, indices.astype(np.float32), scores)
    with pytest.raises(PredictionError, match="topk_indices must be integers"):
        read_predictions(floats, **META, shape=(3, 50), topk=5)
    with pytest.raises(PredictionError, match="give scores, or topk_indices and topk_scores"):
        write_predictions(tmp_path / "x.safetensors", **META)
