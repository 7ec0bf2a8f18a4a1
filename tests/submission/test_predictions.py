"""Prediction files: round trips, and each refusal names the problem (and the first bad row)."""

from __future__ import annotations

import struct
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import PredictionError
from harness.submission.predictions import read_predictions, write_predictions
from tests import hostile

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
    with pytest.raises(PredictionError) as info:
        _read(path)
    assert str(info.value) == (
        f"{path}: setting zsl, row 2, column 1: score nan is not finite (2 row(s) hold NaN or"
        " inf); scores must be finite numbers (rows in the setting's frozen test order, columns"
        " in its candidate order)"
    )
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
    with pytest.raises(PredictionError) as info:
        _read(tmp_path / "missing.safetensors")
    assert str(info.value) == (
        f"{tmp_path / 'missing.safetensors'}: prediction file not found; a predictions"
        " package's generator writes its files: `zsl submission generate PACKAGE --spec SPEC`"
    )
    with pytest.raises(PredictionError) as info:  # named as the caller names it
        _read(tmp_path / "missing.safetensors", name="predictions/demo.zsl.safetensors")
    assert str(info.value).startswith("predictions/demo.zsl.safetensors: prediction file not")


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
            r"setting zsl, row 2, column 0: topk_scores holds nan, which is not finite \(place 0"
            r" of the row's top-5 list\)",
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


# --- prediction files that cost more to read than they are worth -----------------------------
# Attack (issue 10, item 5): a 2.1 MB .npz with an extra 2 GiB all-zero member was accepted and
# cost 2.2 GiB to read. Rule: only the members the contract names are read; an unknown or
# repeated member is refused unread; every member's declared size and its .npy header are
# checked against the expected shape before any array data is inflated.

MAX_PEAK = 64 * 1024 * 1024
ALLOWED = "scores.npy, format.npy, benchmark_hash.npy, class_order_hash.npy, setting.npy"
PICKLE = (
    "refused (Object arrays cannot be loaded when allow_pickle=False);"
    " object arrays and pickles are never loaded"
)
SCORES = np.zeros((4, 3), np.float32)
NPY_HEADER = len(hostile.npy_bytes(SCORES)) - SCORES.nbytes  # 128 bytes


def _honest() -> list[tuple[str, np.ndarray]]:
    return [("scores.npy", SCORES), *hostile.meta_members(META)]


def _raw_meta() -> list[tuple[str, bytes]]:
    return [(name, hostile.npy_bytes(array)) for name, array in hostile.meta_members(META)]


def _refused_small(path: Path, shape: tuple[int, int] = (4, 3)) -> str:
    """Read ``path`` (which must be refused) under tracemalloc; the message, peak checked."""
    tracemalloc.start()
    try:
        with pytest.raises(PredictionError) as info:
            _read(path, shape=shape)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK, f"refused, but only after allocating {peak / 2**20:.0f} MiB"
    return str(info.value)


@pytest.mark.slow
def test_npz_with_a_2_gib_extra_member_is_refused_unread(tmp_path: Path) -> None:
    path = hostile.npz_with_zero_member(tmp_path / "p.npz", _honest(), "padding.npy", 2 << 30)
    assert path.stat().st_size < 16 * 1024 * 1024  # a few MB on disk
    start = time.perf_counter()
    message = _refused_small(path)
    assert time.perf_counter() - start < 5
    assert message == (
        f"{path}: unexpected member(s) 'padding.npy'; a .npz prediction file holds only"
        f" {ALLOWED}; refused"
    )


def _scores_member_of(n_bytes: int) -> Callable[[Path], Path]:
    return lambda p: hostile.npz_with_zero_member(
        p, hostile.meta_members(META), "scores.npy", n_bytes
    )


def _lying_header(rows: int) -> Callable[[Path], Path]:
    """scores.npy whose .npy header says (4, 3) while ``rows`` rows of data follow."""
    data = hostile.npy_bytes(np.zeros((rows, 3), np.float32), header_shape=(4, 3))
    return lambda p: hostile.npz_raw(p, [("scores.npy", data), *_raw_meta()])


def _understated(p: Path) -> Path:
    """scores.npy of 400 rows whose zip headers claim the 176 bytes of 4 rows."""
    _lying_header(400)(p)
    return hostile.understate_member_size(p, "scores.npy", NPY_HEADER + SCORES.nbytes)


def _bare_npy(p: Path) -> Path:
    p.write_bytes(hostile.npy_bytes(SCORES))
    return p


def _bzip2(p: Path) -> Path:
    with zipfile.ZipFile(p, "w", zipfile.ZIP_BZIP2) as zf:
        for name, array in _honest():
            zf.writestr(name, hostile.npy_bytes(array))
    return p


NPZ_CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "extra-tiny-member": (
        lambda p: hostile.npz_members(p, [*_honest(), ("notes.npy", np.array("hi"))]),
        f"unexpected member(s) 'notes.npy'; a .npz prediction file holds only {ALLOWED}; refused",
    ),
    "scores-twice": (
        lambda p: hostile.npz_members(p, [*_honest(), ("scores.npy", np.ones((4, 3), np.float32))]),
        "member 'scores.npy' appears twice; refused",
    ),
    "pickled-scores": (
        lambda p: hostile.npz_members(
            p, [("scores.npy", hostile.pickled_object_array(p.with_name("pwned")))]
        ),
        PICKLE,
    ),
    "pickled-metadata": (
        lambda p: hostile.npz_members(
            p,
            [
                ("scores.npy", SCORES),
                ("setting.npy", hostile.pickled_object_array(p.with_name("pwned"))),
            ],
        ),
        PICKLE,
    ),
    "scores-declares-64-mib": (
        _scores_member_of(64 << 20),
        f"member 'scores.npy' declares {(64 << 20) + NPY_HEADER} bytes uncompressed, more than"
        f" it can hold ({16 * 1024 + 4 * 3 * 8} bytes); refused",
    ),
    "header-says-4-rows-holds-5": (
        _lying_header(5),
        f"member 'scores.npy' holds {NPY_HEADER + 5 * 12} bytes, but its .npy header describes"
        f" {NPY_HEADER + 4 * 12} (shape (4, 3), dtype float32); refused",
    ),
    "header-says-4-rows-holds-400": (
        _lying_header(400),
        f"member 'scores.npy' holds {NPY_HEADER + 400 * 12} bytes, but its .npy header describes"
        f" {NPY_HEADER + 4 * 12} (shape (4, 3), dtype float32); refused",
    ),
    "zip-header-understates": (
        _understated,
        "not a valid .npz file (Bad CRC-32 for file 'scores.npy')",
    ),
    "header-claims-huge-shape": (
        lambda p: hostile.npz_raw(
            p,
            [("scores.npy", hostile.npy_bytes(SCORES, header_shape=(10**9, 10**9))), *_raw_meta()],
        ),
        f"member 'scores.npy' holds {NPY_HEADER + 48} bytes, but its .npy header describes"
        f" {NPY_HEADER + 4 * 10**18} (shape (1000000000, 1000000000), dtype float32); refused",
    ),
    "bzip2-member": (
        _bzip2,
        "member 'scores.npy' uses zip compression method 12; only stored and deflated members"
        " (what numpy.savez and savez_compressed write) are read",
    ),
    "metadata-not-a-string": (
        lambda p: hostile.npz_members(
            p, [("scores.npy", SCORES), ("setting.npy", np.zeros(3, np.float32))]
        ),
        "member 'setting.npy' must hold one string; got dtype float32, shape (3,)",
    ),
    "not-a-zip": (
        _bare_npy,
        "not a valid .npz file (File is not a zip file)",
    ),
}


@pytest.mark.parametrize("case", sorted(NPZ_CASES))
def test_hostile_npz_is_refused_before_its_data_is_read(tmp_path: Path, case: str) -> None:
    build, message = NPZ_CASES[case]
    path = build(tmp_path / "p.npz")
    assert _refused_small(path) == f"{path}: {message}"
    assert not (tmp_path / "pwned").exists()


def test_npz_in_fortran_order_and_compressed_still_reads(tmp_path: Path) -> None:
    scores = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = hostile.npz_members(
        tmp_path / "p.npz",
        [("scores.npy", np.asfortranarray(scores)), *hostile.meta_members(META)],
        compression=zipfile.ZIP_DEFLATED,
    )
    np.testing.assert_array_equal(_read(path).scores, scores)


def test_safetensors_sizes_are_bounded_before_reading(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    padded = tmp_path / "header.safetensors"
    save_file({"scores": SCORES}, str(padded), metadata={**META, "pad": "x" * 100_000})
    header = struct.unpack("<Q", padded.read_bytes()[:8])[0]
    assert header > 100_000
    assert _refused_small(padded) == (
        f"{padded}: not a valid safetensors file (its header claims {header} bytes, more than"
        " the 65536 a prediction file needs)"
    )
    big = tmp_path / "big.safetensors"
    save_file({"scores": np.zeros((40_000, 3), np.float32)}, str(big), metadata=META)
    limit = 8 + struct.unpack("<Q", big.read_bytes()[:8])[0] + 4 * 3 * 8
    assert _refused_small(big) == (
        f"{big}: {big.stat().st_size} bytes, more than dense predictions for shape (4, 3) can"
        f" take ({limit}); refused"
    )
    wrong = tmp_path / "wrong.safetensors"
    save_file({"scores": np.zeros((5, 3), np.float32)}, str(wrong), metadata=META)
    assert _refused_small(wrong) == (
        f"{wrong}: scores must have shape (n_test, n_candidates) = (4, 3); got (5, 3)"
    )


# --- top-K lists cut from dense scores: a tie at the cut is refused --------------------------


def _reference_top_k(row: list[float], k: int) -> tuple[list[int], bool]:
    """A plain sort: columns by (score descending, column ascending); and whether the k-th and
    (k+1)-th scores tie (a straddling tie)."""
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))
    straddles = k < len(row) and row[order[k - 1]] == row[order[k]]
    return order[:k], straddles


@pytest.mark.parametrize("seed", range(6))
def test_top_k_from_scores_agrees_with_a_plain_sort_and_refuses_straddling_ties(
    seed: int,
) -> None:
    from harness.submission.predictions import top_k_from_scores

    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, size=(40, 9)).astype(np.float32)  # many ties
    for k in range(1, 11):
        expected = [_reference_top_k(row, k) for row in scores.tolist()]
        bad = [i for i, (_, straddles) in enumerate(expected) if straddles]
        if bad:
            with pytest.raises(PredictionError, match=rf"top-{k} lists: row {bad[0]}'s "):
                top_k_from_scores(scores, k)
            keep = np.setdiff1d(np.arange(len(scores)), bad)
        else:
            keep = np.arange(len(scores))
        indices, top = top_k_from_scores(scores[keep], k)
        assert indices.dtype == np.int64 and top.dtype == np.float32
        assert indices.tolist() == [expected[i][0] for i in keep.tolist()]
        np.testing.assert_array_equal(top, np.take_along_axis(scores[keep], indices, 1))


def test_top_k_lists_without_a_straddling_tie_score_like_dense() -> None:
    # The rule's point: a strict cut makes the flat accuracy from top-K lists (ties inside
    # the list included) equal to the dense one, for every k <= K.
    from harness.metrics.flat import top_k_correct, top_k_correct_from_topk
    from harness.submission.predictions import top_k_from_scores

    rng = np.random.default_rng(4)
    scores = rng.integers(0, 5, size=(300, 8)).astype(np.float64)
    y = rng.integers(0, 8, size=300)
    big_k = 4
    ok = np.array([not _reference_top_k(row, big_k)[1] for row in scores.tolist()])
    assert ok.sum() > 50 and (~ok).sum() > 50  # both kinds of rows occur
    indices, top = top_k_from_scores(scores[ok], big_k)
    for k in range(1, big_k + 1):
        dense = top_k_correct(y[ok], scores[ok], k=k)
        assert (top_k_correct_from_topk(y[ok], indices, top, k=k) == dense).all(), k
    # A straddling tie would have made the list-based answer differ from the dense one:
    # the dense rule counts the unlisted tied class against a true class listed K-th.
    row = np.array([[3.0, 2.0, 1.0, 1.0]])
    assert not top_k_correct([2], row, k=3)[0]
    assert top_k_correct_from_topk([2], np.array([[0, 1, 2]]), row[:, :3], k=3)[0]


def test_write_predictions_cuts_dense_scores_and_refuses_a_tie_at_the_cut(
    tmp_path: Path,
) -> None:
    # Row 2 ties 0.4 and 0.4 inside a top-2 list (fine) and across a top-1 cut (refused).
    scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.7], [0.4, 0.4, 0.1], [0.6, 0.5, 0.2]])
    path = write_predictions(tmp_path / "p.safetensors", scores, **META, top_k=2)
    got = _read(path, topk=2)
    rows = [(i.tolist(), s.tolist()) for _, i, s in got.topk_chunks()]
    assert rows == [
        ([[1, 2], [2, 0], [0, 1], [0, 1]], [[0.9, 0.5], [0.7, 0.3], [0.4, 0.4], [0.6, 0.5]])
    ]
    with pytest.raises(
        PredictionError,
        match=r"p1\.safetensors: top-1 lists: row 2's 1st and 2nd best scores tie \(0\.4\)",
    ):
        write_predictions(tmp_path / "p1.safetensors", scores, **META, top_k=1)
    assert not (tmp_path / "p1.safetensors").exists()
    with pytest.raises(PredictionError, match=r"top_k cuts dense scores; give scores only"):
        write_predictions(
            tmp_path / "p2.safetensors",
            topk_indices=np.zeros((1, 1), np.int64),
            topk_scores=np.zeros((1, 1)),
            **META,
            top_k=1,
        )


def test_worker_cut_refuses_a_tie_at_the_cut_and_keeps_ties_inside() -> None:
    from harness.worker.phases import _top_k

    scores = np.array([[0.5, 0.5, 0.1, 0.9]], dtype="<f4")
    indices, top = _top_k(scores, 3)  # 0.9, then the 0.5 tie inside the list
    assert indices.dtype == np.dtype("<i8")
    assert indices.tolist() == [[3, 0, 1]]
    np.testing.assert_array_equal(top, scores[:, [3, 0, 1]])
    with pytest.raises(PredictionError, match=r"top-2 lists: row 0's 2nd and 3rd best scores tie"):
        _top_k(scores, 2)
    assert _top_k(scores, 10)[0].tolist() == [[3, 0, 1, 2]]  # K >= C: no cut


_WRITE_ONCE = """
import sys
from pathlib import Path
import numpy as np
from harness.submission.predictions import write_predictions
write_predictions(
    Path(sys.argv[1]), np.arange(12, dtype=np.float32).reshape(3, 4),
    benchmark_hash="sha256:" + "a" * 64, class_order_hash="sha256:" + "b" * 64, setting="zsl",
)
"""


def test_safetensors_files_are_byte_identical_across_processes(tmp_path: Path) -> None:
    """safetensors orders its metadata by a per-process hash map; the files must not change
    with it (a prediction-file package is hashed with its files)."""
    import subprocess
    import sys

    paths = [tmp_path / f"run{i}.safetensors" for i in range(4)]
    for path in paths:
        subprocess.run([sys.executable, "-c", _WRITE_ONCE, str(path)], check=True)
    first = paths[0].read_bytes()
    assert all(p.read_bytes() == first for p in paths[1:])
    (length,) = struct.unpack("<Q", first[:8])
    header = first[8 : 8 + length].decode()
    assert (
        header.index('"benchmark_hash"')
        < header.index('"class_order_hash"')
        < header.index('"format"')
        < header.index('"setting"')
    )
    read = read_predictions(
        paths[0],
        benchmark_hash="sha256:" + "a" * 64,
        class_order_hash="sha256:" + "b" * 64,
        setting="zsl",
        shape=(3, 4),
    )
    assert read.scores is not None and read.scores[2, 3] == 11
