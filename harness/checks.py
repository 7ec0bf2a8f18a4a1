"""The one place where the inputs of metrics and of split diagnostics are checked and normalised.

It lives outside :mod:`harness.metrics` so that data code (:mod:`harness.data.structure`) can
use it without importing that package, which registers every metric. Every public metric and
split-diagnostic function calls these helpers before it computes anything, and never checks an
array or a number by hand. Each helper converts its input, checks dtype, number of dimensions,
range and finiteness, and returns a clean value; each failure raises
:class:`~harness.core.errors.MetricError` in one stock phrasing -- *Expected `name` to be ..., but
got ...* -- that names the input, the first bad position or row where there is one, and how to fix
it. Every helper is told the input's name (``name=``), so a caller never rewrites a message.

See docs/checks.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy

__all__ = [
    "check_choice",
    "check_classes",
    "check_consistent_length",
    "check_hierarchy",
    "check_indices",
    "check_integer",
    "check_k",
    "check_ks",
    "check_nodes",
    "check_ranked",
    "check_real_rows",
    "check_scalar",
    "check_scores",
    "check_scores_and_targets",
    "check_seen",
    "check_targets",
    "check_top1",
    "check_valid_nodes",
    "check_vector",
]

#: Array types of checked inputs, shared by the metric modules.
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: Which bounds of a range belong to it (:func:`check_scalar`).
Closed = Literal["both", "left", "right", "neither"]

#: Largest number of score entries a helper touches at once when it scans row by row.
CHUNK_ELEMENTS = 1 << 22


def chunk_rows(n_rows: int, n_cols: int, divisor: int = 1) -> range:
    """Start rows of chunks holding at most ``CHUNK_ELEMENTS // divisor`` entries (at least one
    row each). The bound is read at each call: tests shrink it to force many chunks."""
    step = max(1, CHUNK_ELEMENTS // divisor // max(1, n_cols))
    return range(0, n_rows, step)


def row_chunks(n_rows: int, n_cols: int, divisor: int = 1) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of the row chunks of :func:`chunk_rows`, the last one cut at ``n_rows``."""
    starts = chunk_rows(n_rows, n_cols, divisor)
    for start in starts:
        yield start, min(start + starts.step, n_rows)


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
    array: npt.NDArray[np.int64], n_candidates: int, name: str, what: str, hint: str = ""
) -> None:
    bad = (array < 0) | (array >= n_candidates)
    if bad.any():
        position = int(np.argmax(bad))
        raise MetricError(
            f"Expected `{name}` to hold {what} in [0, {n_candidates}), but got "
            f"{name}[{position}] = {int(array[position])} "
            f"(first of {int(bad.sum())} out-of-range value(s)).{f' {hint}' if hint else ''}"
        )


def check_targets(
    y_true: npt.ArrayLike, n_candidates: int, name: str = "y_true"
) -> npt.NDArray[np.int64]:
    """Check the true-class columns of the test images.

    >>> check_targets([0, 2, 1], 3)
    array([0, 2, 1])
    >>> check_targets([0, 3], 3)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `y_true` to hold candidate column indices in [0, 3), but got y_true[1] = 3 (first of 1 out-of-range value(s)).

    See docs/checks.md, `check_targets`.
    """  # noqa: E501
    array = _integer_array(y_true, name, "candidate column indices, one per image")
    if array.size == 0:
        raise MetricError(f"Expected `{name}` to hold at least one image, but got 0 images.")
    _first_out_of_range(array, n_candidates, name, "candidate column indices")
    return array


def check_consistent_length(
    n_images: int, n_rows: int, *, name: str = "scores", targets_name: str = "y_true"
) -> None:
    """Refuse a matrix ``name`` whose number of rows differs from the images of ``targets_name``.

    Examples
    --------
    >>> check_consistent_length(3, 2)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `scores` to have one row per image in `y_true` (3 images), but got 2 rows. Both must list the images in the same order.
    """  # noqa: E501
    if n_images != n_rows:
        raise MetricError(
            f"Expected `{name}` to have one row per image in `{targets_name}` ({n_images} "
            f"images), but got {n_rows} rows. Both must list the images in the same order."
        )


def check_scores(
    scores: npt.ArrayLike, n_images: int | None = None, name: str = "scores"
) -> npt.NDArray[Any]:
    """Check a dense score matrix: 2D, real, finite, and one row per image.

    Integer scores are converted to float64; float scores keep their dtype (a memory-mapped
    float32 matrix is not copied). Finiteness is checked cheaply first (is the sum finite?) and
    only scanned row by row, in bounded chunks, to locate the first bad row.

    >>> check_scores([[0.5, 1.0]]).shape
    (1, 2)
    >>> check_scores([[0.5, 1.0], [float("nan"), 0.0]])
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `scores` to contain only finite values, but row 1 holds NaN (at column 0). Replace NaN/inf scores, e.g. with a very low finite score, before scoring.

    See docs/checks.md, `check_scores`.
    """  # noqa: E501
    array = np.asarray(scores)
    if array.ndim != 2:
        hint = (
            f" Use `{name}.reshape(1, -1)` for the {name} of a single image."
            if array.ndim == 1
            else ""
        )
        raise MetricError(
            f"Expected `{name}` to be a 2D array of shape (n_images, n_candidates), "
            f"but got shape {array.shape}.{hint}"
        )
    if array.dtype.kind in "iu":
        array = array.astype(np.float64)
    elif array.dtype.kind != "f":
        raise MetricError(
            f"Expected `{name}` to be a real-valued (float) array, but got dtype {array.dtype}."
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise MetricError(
            f"Expected `{name}` to have at least one image and one candidate, "
            f"but got shape {array.shape}."
        )
    if n_images is not None:
        check_consistent_length(n_images, array.shape[0], name=name)
    with np.errstate(over="ignore", invalid="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        # Either a NaN/inf entry, or a finite matrix whose sum overflowed: scan to tell.
        for start, stop in row_chunks(array.shape[0], array.shape[1]):
            finite = np.isfinite(array[start:stop])
            bad_rows = ~finite.all(axis=1)
            if bad_rows.any():
                row = int(np.argmax(bad_rows))
                col = int(np.argmin(finite[row]))
                value = float(array[start + row, col])
                raise MetricError(
                    f"Expected `{name}` to contain only finite values, but row "
                    f"{start + row} holds {_describe(value)} (at column {col}). Replace NaN/inf "
                    "scores, e.g. with a very low finite score, before scoring."
                )
    return array


def check_scores_and_targets(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    names: tuple[str, str] = ("y_true", "scores"),
) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
    """Check ``scores`` and ``y_true`` together; see :func:`check_scores`, :func:`check_targets`.

    ``names`` gives the two inputs' names in messages, ``(targets, scores)``.

    Returns
    -------
    y_true : ndarray of int64 of shape (n_images,)
    scores : ndarray of float of shape (n_images, n_candidates)
    """
    targets_name, scores_name = names
    checked_scores = check_scores(scores, name=scores_name)
    checked_targets = check_targets(y_true, checked_scores.shape[1], targets_name)
    check_consistent_length(
        checked_targets.shape[0],
        checked_scores.shape[0],
        name=scores_name,
        targets_name=targets_name,
    )
    return checked_targets, checked_scores


def check_classes(classes: npt.ArrayLike | None, n_candidates: int) -> npt.NDArray[np.int64]:
    """Check the candidate columns a per-class mean runs over.

    ``classes`` is required and is never inferred from ``y_true``: a class that has no test
    image must still be listed so that it can be reported as excluded.

    >>> check_classes([2, 0], 3)
    array([2, 0])
    >>> check_classes([0, 2, 0], 3)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `classes` to hold distinct candidate columns, but classes[2] = 0 repeats classes[0].

    See docs/checks.md, `check_classes`.
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
    harness.core.errors.MetricError: Expected `k` to be at most the number of candidates (3), but got k=5. Use 1 <= k <= 3.
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


def check_seen(
    seen: npt.ArrayLike | None, n_candidates: int | None, name: str = "seen"
) -> npt.NDArray[np.bool_]:
    """Check the GZSL seen mask: a 1D bool array over candidate columns with both kinds present.

    ``n_candidates`` is the number of candidate columns, or None when the mask itself defines it
    (e.g. a curve computed from per-image statistics, without a score matrix). ``name`` is the
    input's name in messages (e.g. ``"val_seen"``).

    Examples
    --------
    >>> check_seen([True, False, False], 3)
    array([ True, False, False])
    >>> check_seen([True, True], 2)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `seen` to mark at least one seen and one unseen candidate column, but got 2 seen and 0 unseen.
    """  # noqa: E501
    if seen is None:
        raise MetricError(
            f"Expected `{name}` to be a 1D bool array over candidate columns, but got None."
        )
    array = np.asarray(seen)
    if array.ndim != 1 or array.dtype.kind != "b":
        raise MetricError(
            f"Expected `{name}` to be a 1D bool array over candidate columns, but got shape "
            f"{array.shape} and dtype {array.dtype}. Convert a 0/1 mask with `.astype(bool)`."
        )
    n_columns = array.shape[0] if n_candidates is None else n_candidates
    if array.shape[0] != n_columns:
        raise MetricError(
            f"Expected `{name}` to have one entry per candidate column ({n_columns}), "
            f"but got {array.shape[0]}."
        )
    n_seen = int(array.sum())
    if n_seen == 0 or n_seen == n_columns:
        raise MetricError(
            f"Expected `{name}` to mark at least one seen and one unseen candidate column, "
            f"but got {n_seen} seen and {n_columns - n_seen} unseen."
        )
    return array


# -- scalars, choices, hierarchies and node lists --------------------------------------------------


def _number_text(value: float) -> str:
    """``0``, ``1``, ``21841`` for whole numbers, else the float's repr (``0.5``)."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def _bound_text(low: float | None, high: float | None, closed: Closed) -> str:
    """The range part of a scalar's description: `` in [0, 1]``, `` >= 0``, `` > 0``, ``""``."""
    low_in = closed in ("both", "left")
    high_in = closed in ("both", "right")
    if low is not None and high is not None:
        left, right = "[" if low_in else "(", "]" if high_in else ")"
        return f" in {left}{_number_text(low)}, {_number_text(high)}{right}"
    if low is not None:
        return f" {'>=' if low_in else '>'} {_number_text(low)}"
    if high is not None:
        return f" {'<=' if high_in else '<'} {_number_text(high)}"
    return ""


def check_scalar(
    value: Any,
    name: str,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    closed: Closed = "both",
    finite: bool = False,
    hint: str = "",
) -> float:
    """Check one number: its type (bool is refused), NaN, infinity, and its range.

    Every failure reads *Expected `name` to be <what>, but got <value>.*, where <what> is built
    from the options: ``an integer``, ``a finite number``, ``a number`` (with a range) or
    ``a real number`` (without one), then the range (`` in [0, 1]``, `` >= 0``, `` > 0``).

    See docs/checks.md, `check_scalar`.
    """
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if integer:
        noun = "an integer"
    elif finite:
        noun = "a finite number"
    else:
        noun = "a number" if low is not None or high is not None else "a real number"
    what = noun + _bound_text(low, high, closed)
    tail = f" {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise MetricError(f"Expected `{name}` to be {what}, but got {value!r}.{tail}")
    number: int | float = int(value) if integer else float(value)
    low_ok = low is None or (number >= low if closed in ("both", "left") else number > low)
    high_ok = high is None or (number <= high if closed in ("both", "right") else number < high)
    bad = math.isnan(number) or (finite and math.isinf(number)) or not (low_ok and high_ok)
    if bad:
        raise MetricError(f"Expected `{name}` to be {what}, but got {number!r}.{tail}")
    return float(number)


def check_integer(
    value: Any, name: str, *, low: int | None = None, high: int | None = None, hint: str = ""
) -> int:
    """:func:`check_scalar` for an integer in ``[low, high]``, returned as an ``int``.

    Examples
    --------
    >>> check_integer(3, "n_boot", low=1)
    3
    >>> check_integer(True, "n_boot", low=1)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `n_boot` to be an integer >= 1, but got True.
    """
    return int(check_scalar(value, name, integer=True, low=low, high=high, hint=hint))


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """Check that ``value`` is one of the strings ``choices``.

    Examples
    --------
    >>> check_choice("classes", "scheme", ("images_within_class", "classes"))
    'classes'
    >>> check_choice("images", "scheme", ("images_within_class", "classes"))
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `scheme` to be one of ['images_within_class', 'classes'], but got 'images'.
    """  # noqa: E501
    if not isinstance(value, str) or value not in choices:
        raise MetricError(f"Expected `{name}` to be one of {list(choices)}, but got {value!r}.")
    return value


def check_hierarchy(hierarchy: Any, name: str = "hierarchy") -> Hierarchy:
    """Check that ``hierarchy`` is a frozen :class:`~harness.hierarchy.Hierarchy`.

    Examples
    --------
    >>> check_hierarchy({})
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got dict.
    """  # noqa: E501
    if not isinstance(hierarchy, Hierarchy):
        raise MetricError(
            f"Expected `{name}` to be a harness.hierarchy.Hierarchy, but got "
            f"{type(hierarchy).__name__}."
        )
    return hierarchy


def check_nodes(
    values: Any,
    n_nodes: int,
    name: str,
    *,
    distinct: bool = True,
    allow_empty: bool = False,
) -> npt.NDArray[np.int64]:
    """Check a 1D array of hierarchy node indices in ``[0, n_nodes)``, distinct unless told not.

    >>> check_nodes([3, 1], 4, "candidate_nodes")
    array([3, 1])
    >>> check_nodes([3, 1, 3], 4, "candidate_nodes")
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `candidate_nodes` to hold distinct node indices, but candidate_nodes[2] = 3 repeats candidate_nodes[0].

    See docs/checks.md, `check_nodes`.
    """  # noqa: E501
    nodes = _integer_array(values, name, "hierarchy node indices")
    if nodes.size == 0 and not allow_empty:
        raise MetricError(f"Expected `{name}` to hold at least one node index, but got 0.")
    _first_out_of_range(
        nodes, n_nodes, name, "node indices", "Map ids to indices with `hierarchy.indices(ids)`."
    )
    if distinct and nodes.size > 1:
        order = np.argsort(nodes, kind="stable")
        repeats = np.flatnonzero(nodes[order][1:] == nodes[order][:-1])
        if repeats.size:
            position = int(order[repeats + 1].min())
            first = int(np.flatnonzero(nodes == nodes[position])[0])
            raise MetricError(
                f"Expected `{name}` to hold distinct node indices, but {name}[{position}] = "
                f"{int(nodes[position])} repeats {name}[{first}]."
            )
    return nodes


# -- per-entry vectors and rows of values ----------------------------------------------------------


def check_vector(
    values: Any,
    name: str,
    length: int | None = None,
    *,
    kind: Literal["bool", "real"],
    entry: str = "image",
    among: str = "`y_true`",
    allow_empty: bool = True,
    finite: bool = False,
    low: float | None = None,
    high: float | None = None,
) -> npt.NDArray[Any]:
    """Check a 1D array with one entry per image (or per column, class, interval, ...).

    >>> check_vector([True, False], "correct", 2, kind="bool")
    array([ True, False])
    >>> check_vector([0.5, float("nan")], "margin", 2, kind="real", finite=True)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `margin` to contain only finite values, but got margin[1] = nan.
    >>> check_vector([0.5, 1.5], "accuracy", kind="real", low=0, high=1)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `accuracy` to hold values in [0, 1], but got accuracy[1] = 1.5.

    See docs/checks.md, `check_vector`.
    """  # noqa: E501
    array = np.asarray(values)
    if array.size == 0 and array.dtype.kind not in "biuf":
        array = array.astype(bool if kind == "bool" else np.float64)  # `[]` arrives as float64
    kinds = "b" if kind == "bool" else "iuf"
    if array.ndim != 1 or array.dtype.kind not in kinds:
        hint = " Convert a 0/1 mask with `.astype(bool)`." if kind == "bool" else ""
        raise MetricError(
            f"Expected `{name}` to be a 1D {kind} array, one entry per {entry}, but got shape "
            f"{array.shape} and dtype {array.dtype}.{hint}"
        )
    if length is not None and array.shape[0] != length:
        raise MetricError(
            f"Expected `{name}` to have one entry per {entry} in {among} ({length} {entry}s), "
            f"but got {array.shape[0]}."
        )
    if not allow_empty and array.shape[0] == 0:
        raise MetricError(f"Expected `{name}` to hold at least one {entry}, but got 0.")
    if kind == "bool":
        return array
    array = array.astype(np.float64, copy=False)
    if finite:
        bad = ~np.isfinite(array)
        if bad.any():
            position = int(np.argmax(bad))
            raise MetricError(
                f"Expected `{name}` to contain only finite values, but got {name}[{position}] = "
                f"{float(array[position])!r}."
            )
    if low is not None or high is not None:
        bad = ~(
            (array >= (-np.inf if low is None else low))
            & (array <= (np.inf if high is None else high))
        )
        if bad.any():
            position = int(np.argmax(bad))
            raise MetricError(
                f"Expected `{name}` to hold values{_bound_text(low, high, 'both')}, but got "
                f"{name}[{position}] = {float(array[position])!r}."
            )
    return array


def check_real_rows(values: Any, name: str) -> npt.NDArray[np.float64]:
    """Check finite real values of shape ``(n,)`` or ``(n, m)``: one row per image or replicate.

    Examples
    --------
    >>> check_real_rows([[0.0, 1.0], [2.0, float("inf")]], "samples")
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `samples` to contain only finite values, but row 1 holds array([ 2., inf]).
    """  # noqa: E501
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise MetricError(
            f"Expected `{name}` to be a real-valued array, but got dtype {array.dtype}."
        )
    if array.ndim not in (1, 2) or (array.ndim == 2 and array.shape[1] == 0):
        raise MetricError(
            f"Expected `{name}` to have shape (n,) or (n, m) with m >= 1, "
            f"but got shape {array.shape}."
        )
    array = array.astype(np.float64, copy=False)
    finite = np.isfinite(array)
    if not finite.all():
        rows = finite if array.ndim == 1 else finite.all(axis=1)
        row = int(np.argmin(rows))
        raise MetricError(
            f"Expected `{name}` to contain only finite values, but row {row} holds {array[row]!r}."
        )
    return array


def check_indices(values: Any, name: str) -> npt.NDArray[np.int64]:
    """Check a set of indices with no known upper bound: 1D, integer, non-negative, distinct.

    For class or image index lists (e.g. the splits of a size table), where no candidate count
    bounds them.

    Examples
    --------
    >>> check_indices([4, 0, 7], "train_images")
    array([4, 0, 7])
    >>> check_indices([4, 0, 4], "train_images")
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `train_images` to hold distinct entries, but train_images[2] = 4 repeats train_images[0].
    """  # noqa: E501
    array = _integer_array(values, name, "indices")
    if array.size and int(array.min()) < 0:
        position = int(np.argmax(array < 0))
        raise MetricError(
            f"Expected `{name}` to hold non-negative indices, but got {name}[{position}] = "
            f"{int(array[position])}."
        )
    order = np.argsort(array, kind="stable")
    repeat = np.flatnonzero(array[order][1:] == array[order][:-1])
    if repeat.size:
        first, again = sorted((int(order[repeat[0]]), int(order[repeat[0] + 1])))
        raise MetricError(
            f"Expected `{name}` to hold distinct entries, but {name}[{again}] = "
            f"{int(array[again])} repeats {name}[{first}]."
        )
    return array


def check_ks(
    ks: Any, n_candidates: int | None = None, *, n_ranked: int | None = None
) -> tuple[int, ...]:
    """Check the distinct ``k`` values of a metric evaluated at several ``k``.

    Each must be an integer in ``[1, n_candidates]`` (only ``>= 1`` when ``n_candidates`` is
    None) and, with ``n_ranked``, at most the number of ranked columns ``K``. One integer is a
    sequence of one.

    Examples
    --------
    >>> check_ks([5, 1], 10)
    (5, 1)
    >>> check_ks([1, 2, 1], 10)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `ks` to hold distinct values, but ks[2] = 1 ...
    """
    items = [ks] if isinstance(ks, int | np.integer) else ks
    if isinstance(items, str) or not isinstance(items, Sequence | np.ndarray):
        raise MetricError(f"Expected `ks` to be a sequence of integers >= 1, but got {ks!r}.")
    values = list(items)
    if not values:
        raise MetricError("Expected `ks` to hold at least one k, but got an empty sequence.")
    checked: list[int] = []
    for position, k in enumerate(values):
        if n_candidates is None:
            if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
                raise MetricError(
                    f"Expected `ks` to hold integers >= 1, but got ks[{position}] = {k!r}."
                )
            value = int(k)
        else:
            value = check_k(k, n_candidates)
        if value in checked:
            raise MetricError(
                f"Expected `ks` to hold distinct values, but ks[{position}] = {value} repeats "
                f"ks[{checked.index(value)}]."
            )
        checked.append(value)
    for position, value in enumerate(checked):
        if n_ranked is not None and value > n_ranked:
            raise MetricError(
                f"Expected `ks` to be at most the number of ranked columns K ({n_ranked}), but "
                f"got ks[{position}] = {value}. Rank at least {value} candidates per image."
            )
    return tuple(checked)


def check_ranked(ranked: Any, n_images: int, n_candidates: int) -> npt.NDArray[np.int64]:
    """Check a ranking: one row per image, ``K >= 1`` distinct candidate columns per row.

    ``ranked[i, r]`` is the candidate column image i ranks at position ``r`` (0 = best). Rows
    are scanned for repeats in chunks of bounded size.

    Examples
    --------
    >>> check_ranked([[2, 0], [1, 2]], 2, 3)
    array([[2, 0],
           [1, 2]])
    >>> check_ranked([[2, 2]], 1, 3)
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `ranked` to hold distinct candidate columns in each row, but row 0 repeats column 2.
    """  # noqa: E501
    array = np.asarray(ranked)
    if array.ndim != 2:
        hint = " Use `ranked.reshape(-1, 1)` for top-1 columns." if array.ndim == 1 else ""
        raise MetricError(
            "Expected `ranked` to be a 2D integer array of shape (n_images, K), but got shape "
            f"{array.shape}.{hint}"
        )
    if array.dtype.kind not in "iu":
        raise MetricError(
            f"Expected `ranked` to hold integer candidate columns, but got dtype {array.dtype}. "
            "Derive it from scores with `ranked_from_scores`."
        )
    if array.shape[0] != n_images:
        raise MetricError(
            f"Expected `ranked` to have one row per image in `y_true` ({n_images} images), "
            f"but got {array.shape[0]} rows. Both must follow the frozen test order."
        )
    if array.shape[1] == 0:
        raise MetricError(
            f"Expected `ranked` to hold at least one ranked column, but got shape {array.shape}."
        )
    array = array.astype(np.int64, copy=False)
    bad = (array < 0) | (array >= n_candidates)
    if bad.any():
        row = int(np.argmax(bad.any(axis=1)))
        col = int(np.argmax(bad[row]))
        raise MetricError(
            f"Expected `ranked` to hold candidate columns in [0, {n_candidates}), but row {row} "
            f"holds {int(array[row, col])} (at rank {col})."
        )
    if array.shape[1] > 1:
        for start, stop in row_chunks(array.shape[0], array.shape[1]):
            block = np.sort(array[start:stop], axis=1)
            repeated = (block[:, 1:] == block[:, :-1]).any(axis=1)
            if repeated.any():
                row = start + int(np.argmax(repeated))
                values, counts = np.unique(array[row], return_counts=True)
                raise MetricError(
                    f"Expected `ranked` to hold distinct candidate columns in each row, but row "
                    f"{row} repeats column {int(values[np.argmax(counts > 1)])}."
                )
    return array


def check_top1(ranked_top1: Any, n_images: int, n_candidates: int) -> npt.NDArray[np.int64]:
    """Check top-1 candidate columns: a 1D array, or a 2D ranking whose first column is used.

    Examples
    --------
    >>> check_top1([[2, 0], [1, 2]], 2, 3)
    array([2, 1])
    """
    array = np.asarray(ranked_top1)
    if array.ndim == 2:
        return check_ranked(array, n_images, n_candidates)[:, 0]
    if array.ndim != 1:
        raise MetricError(
            "Expected `ranked_top1` to be a 1D array of top-1 candidate columns (or a 2D "
            f"ranking), but got shape {array.shape}."
        )
    return check_ranked(array.reshape(-1, 1), n_images, n_candidates)[:, 0]


def check_valid_nodes(
    valid_nodes: Any, n_nodes: int, candidate_nodes: npt.NDArray[np.int64] | None
) -> npt.NDArray[np.int64]:
    """Check the valid-label nodes of a hierarchical metric; return them sorted.

    Distinct node indices in ``[0, n_nodes)``, not empty, holding every candidate's node (a
    prediction is always a valid label). None means the candidates' nodes.

    Examples
    --------
    >>> check_valid_nodes(None, 5, np.array([4, 1]))
    array([1, 4])
    >>> check_valid_nodes([1, 3], 5, np.array([4, 1]))
    Traceback (most recent call last):
    ...
    harness.core.errors.MetricError: Expected `valid_nodes` to contain every candidate's node (a prediction is always a valid label), but got candidate_nodes[0] = 4 outside it (1 candidate(s) missing). Add the candidates' nodes to `valid_nodes`.
    """  # noqa: E501
    if valid_nodes is None:
        if candidate_nodes is None:
            raise MetricError("Expected `valid_nodes` to list the valid-label nodes, but got None.")
        return np.sort(candidate_nodes)
    valid = np.sort(check_nodes(valid_nodes, n_nodes, "valid_nodes"))
    if candidate_nodes is not None:
        inside = np.isin(candidate_nodes, valid)
        if not inside.all():
            column = int(np.argmin(inside))
            raise MetricError(
                "Expected `valid_nodes` to contain every candidate's node (a prediction is "
                f"always a valid label), but got candidate_nodes[{column}] = "
                f"{int(candidate_nodes[column])} outside it ({int((~inside).sum())} "
                "candidate(s) missing). Add the candidates' nodes to `valid_nodes`."
            )
    return valid
