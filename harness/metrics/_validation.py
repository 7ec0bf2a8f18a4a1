"""The one place where metric inputs are checked and normalised.

Every public metric function calls these helpers before it computes anything, and never checks an
array by hand. Each helper converts its input, checks dtype, number of dimensions, range and
finiteness, and returns a clean array; each failure raises :class:`~harness.errors.MetricError`
in one stock phrasing -- *Expected `name` to be ..., but got ...* -- that names the input, the
first bad position or row where there is one, and how to fix it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import MetricError

__all__ = [
    "check_classes",
    "check_k",
    "check_scores",
    "check_scores_and_targets",
    "check_seen",
    "check_targets",
]

#: Largest number of score entries a helper touches at once when it scans row by row.
CHUNK_ELEMENTS = 1 << 22


def chunk_rows(n_rows: int, n_cols: int) -> range:
    """Start rows of chunks holding at most ``CHUNK_ELEMENTS`` entries (at least one row each)."""
    step = max(1, CHUNK_ELEMENTS // max(1, n_cols))
    return range(0, n_rows, step)


def _describe(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "inf" if value > 0 else "-inf"


def _integer_array(values: Any, name: str, what: str) -> npt.NDArray[np.int64]:
    """``values`` as a 1D int64 array, or a MetricError naming ``name``."""
    if values is None:
        raise MetricError(f"Expected `{name}` to be a 1D integer array of {what}, but got None.")
    array = np.asarray(values)
    if array.ndim != 1:
        hint = " Flatten it with `.ravel()` if it holds one value per entry." if array.ndim else ""
        raise MetricError(
            f"Expected `{name}` to be a 1D integer array of {what}, "
            f"but got shape {array.shape}.{hint}"
        )
    if array.size == 0 and array.dtype.kind not in "iu":
        array = array.astype(np.int64)  # `[]` arrives as float64; the emptiness check follows
    if array.dtype.kind not in "iu":
        raise MetricError(
            f"Expected `{name}` to be a 1D integer array of {what}, but got dtype "
            f"{array.dtype}. Convert it with `.astype(np.int64)` after checking its values."
        )
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise MetricError(f"Expected `{name}` to fit in int64, but got {int(array.max())}.")
    return array.astype(np.int64, copy=False)


def _first_out_of_range(
    array: npt.NDArray[np.int64], n_candidates: int, name: str, what: str
) -> None:
    bad = (array < 0) | (array >= n_candidates)
    if bad.any():
        position = int(np.argmax(bad))
        raise MetricError(
            f"Expected `{name}` to hold {what} in [0, {n_candidates}), but got "
            f"{name}[{position}] = {int(array[position])} "
            f"(first of {int(bad.sum())} out-of-range value(s))."
        )


def check_targets(y_true: npt.ArrayLike, n_candidates: int) -> npt.NDArray[np.int64]:
    """Check the true-class columns of the test images.

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        ``y_true[i]`` is the candidate column of image i's true class.
    n_candidates : int
        Number of candidate columns of the scores.

    Returns
    -------
    ndarray of int64 of shape (n_images,)

    Raises
    ------
    MetricError
        If ``y_true`` is not 1D, not integer, empty, or holds a value outside
        ``[0, n_candidates)`` (the message names the first bad position).

    Examples
    --------
    >>> check_targets([0, 2, 1], 3)
    array([0, 2, 1])
    >>> check_targets([0, 3], 3)
    Traceback (most recent call last):
    ...
    harness.errors.MetricError: Expected `y_true` to hold candidate column indices in [0, 3), but got y_true[1] = 3 (first of 1 out-of-range value(s)).
    """  # noqa: E501
    array = _integer_array(y_true, "y_true", "candidate column indices, one per image")
    if array.size == 0:
        raise MetricError("Expected `y_true` to hold at least one image, but got 0 images.")
    _first_out_of_range(array, n_candidates, "y_true", "candidate column indices")
    return array


def _check_consistent_length(n_images: int, n_rows: int) -> None:
    if n_images != n_rows:
        raise MetricError(
            f"Expected `scores` to have one row per image in `y_true` ({n_images} images), "
            f"but got {n_rows} rows. Both must follow the frozen test order."
        )


def check_scores(scores: npt.ArrayLike, n_images: int | None = None) -> npt.NDArray[Any]:
    """Check a dense score matrix: 2D, real, finite, and one row per image.

    Integer scores are converted to float64; float scores keep their dtype (a memory-mapped
    float32 matrix is not copied). Finiteness is checked cheaply first (is the sum finite?) and
    only scanned row by row, in bounded chunks, to locate the first bad row.

    Parameters
    ----------
    scores : array-like of shape (n_images, n_candidates)
        ``scores[i, j]`` is the score of candidate column j for image i; higher is better.
    n_images : int, default=None
        Expected number of rows (the length of ``y_true``); not checked when None.

    Returns
    -------
    ndarray of float of shape (n_images, n_candidates)

    Raises
    ------
    MetricError
        If ``scores`` is not a non-empty 2D real array, has the wrong number of rows, or holds
        NaN or inf (the message names the first such row and column).

    Examples
    --------
    >>> check_scores([[0.5, 1.0]]).shape
    (1, 2)
    >>> check_scores([[0.5, 1.0], [float("nan"), 0.0]])
    Traceback (most recent call last):
    ...
    harness.errors.MetricError: Expected `scores` to contain only finite values, but row 1 holds NaN (at column 0). Replace NaN/inf scores, e.g. with a very low finite score, before scoring.
    """  # noqa: E501
    array = np.asarray(scores)
    if array.ndim != 2:
        hint = (
            " Use `scores.reshape(1, -1)` for the scores of a single image."
            if array.ndim == 1
            else ""
        )
        raise MetricError(
            "Expected `scores` to be a 2D array of shape (n_images, n_candidates), "
            f"but got shape {array.shape}.{hint}"
        )
    if array.dtype.kind in "iu":
        array = array.astype(np.float64)
    elif array.dtype.kind != "f":
        raise MetricError(
            f"Expected `scores` to be a real-valued (float) array, but got dtype {array.dtype}."
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise MetricError(
            "Expected `scores` to have at least one image and one candidate, "
            f"but got shape {array.shape}."
        )
    if n_images is not None:
        _check_consistent_length(n_images, array.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        # Either a NaN/inf entry, or a finite matrix whose sum overflowed: scan to tell.
        starts = chunk_rows(array.shape[0], array.shape[1])
        for start in starts:
            finite = np.isfinite(array[start : start + starts.step])
            bad_rows = ~finite.all(axis=1)
            if bad_rows.any():
                row = int(np.argmax(bad_rows))
                col = int(np.argmin(finite[row]))
                value = float(array[start + row, col])
                raise MetricError(
                    "Expected `scores` to contain only finite values, but row "
                    f"{start + row} holds {_describe(value)} (at column {col}). Replace NaN/inf "
                    "scores, e.g. with a very low finite score, before scoring."
                )
    return array


def check_scores_and_targets(
    y_true: npt.ArrayLike, scores: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
    """Check ``scores`` and ``y_true`` together; see :func:`check_scores`, :func:`check_targets`.

    Returns
    -------
    y_true : ndarray of int64 of shape (n_images,)
    scores : ndarray of float of shape (n_images, n_candidates)
    """
    checked_scores = check_scores(scores)
    checked_targets = check_targets(y_true, checked_scores.shape[1])
    _check_consistent_length(checked_targets.shape[0], checked_scores.shape[0])
    return checked_targets, checked_scores


def check_classes(classes: npt.ArrayLike | None, n_candidates: int) -> npt.NDArray[np.int64]:
    """Check the candidate columns a per-class mean runs over.

    ``classes`` is required and is never inferred from ``y_true``: a class that has no test
    image must still be listed so that it can be reported as excluded.

    Parameters
    ----------
    classes : array-like of int of shape (n_classes,)
        Distinct candidate column indices.
    n_candidates : int
        Number of candidate columns of the scores.

    Returns
    -------
    ndarray of int64 of shape (n_classes,)

    Raises
    ------
    MetricError
        If ``classes`` is None, empty, not 1D integer, out of range or holds a duplicate.

    Examples
    --------
    >>> check_classes([2, 0], 3)
    array([2, 0])
    >>> check_classes([0, 2, 0], 3)
    Traceback (most recent call last):
    ...
    harness.errors.MetricError: Expected `classes` to hold distinct candidate columns, but classes[2] = 0 repeats classes[0].
    """  # noqa: E501
    if classes is None:
        raise MetricError(
            "Expected `classes` to list the candidate columns to average over, but got None. "
            "Pass `classes=np.arange(n_candidates)` to average over every candidate column."
        )
    array = _integer_array(classes, "classes", "candidate column indices")
    if array.size == 0:
        raise MetricError("Expected `classes` to list at least one candidate column, but got 0.")
    _first_out_of_range(array, n_candidates, "classes", "candidate column indices")
    first_seen: dict[int, int] = {}
    for position, column in enumerate(array.tolist()):
        if column in first_seen:
            raise MetricError(
                "Expected `classes` to hold distinct candidate columns, but "
                f"classes[{position}] = {column} repeats classes[{first_seen[column]}]."
            )
        first_seen[column] = position
    return array


def check_k(k: Any, n_candidates: int) -> int:
    """Check the ``k`` of a top-k metric: an integer in ``[1, n_candidates]``.

    Examples
    --------
    >>> check_k(2, 3)
    2
    >>> check_k(5, 3)
    Traceback (most recent call last):
    ...
    harness.errors.MetricError: Expected `k` to be at most the number of candidates (3), but got k=5. Use 1 <= k <= 3.
    """  # noqa: E501
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise MetricError(f"Expected `k` to be an integer >= 1, but got {k!r}.")
    if k < 1:
        raise MetricError(f"Expected `k` to be an integer >= 1, but got k={int(k)}.")
    if k > n_candidates:
        raise MetricError(
            f"Expected `k` to be at most the number of candidates ({n_candidates}), "
            f"but got k={int(k)}. Use 1 <= k <= {n_candidates}."
        )
    return int(k)


def check_seen(seen: npt.ArrayLike | None, n_candidates: int) -> npt.NDArray[np.bool_]:
    """Check the GZSL seen mask: a 1D bool array over candidate columns with both kinds present.

    Examples
    --------
    >>> check_seen([True, False, False], 3)
    array([ True, False, False])
    >>> check_seen([True, True], 2)
    Traceback (most recent call last):
    ...
    harness.errors.MetricError: Expected `seen` to mark at least one seen and one unseen candidate column, but got 2 seen and 0 unseen.
    """  # noqa: E501
    if seen is None:
        raise MetricError(
            "Expected `seen` to be a 1D bool array over candidate columns, but got None."
        )
    array = np.asarray(seen)
    if array.ndim != 1 or array.dtype.kind != "b":
        raise MetricError(
            "Expected `seen` to be a 1D bool array over candidate columns, but got shape "
            f"{array.shape} and dtype {array.dtype}. Convert a 0/1 mask with `.astype(bool)`."
        )
    if array.shape[0] != n_candidates:
        raise MetricError(
            f"Expected `seen` to have one entry per candidate column ({n_candidates}), "
            f"but got {array.shape[0]}."
        )
    n_seen = int(array.sum())
    if n_seen == 0 or n_seen == n_candidates:
        raise MetricError(
            "Expected `seen` to mark at least one seen and one unseen candidate column, "
            f"but got {n_seen} seen and {n_candidates - n_seen} unseen."
        )
    return array
