"""Bootstrap intervals of decomposed scores: resampling schemes, replicates, percentile intervals.

See docs/metrics/bootstrap.md.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    IntArray,
    check_choice,
    check_integer,
    check_real_rows,
    check_scalar,
    check_targets,
    row_chunks,
)
from harness.core.errors import MetricError
from harness.metrics.decomposition import Decomposition, _Layout, _reduce, point_estimate

__all__ = [
    "bootstrap_interval",
    "bootstrap_recompute",
    "bootstrap_samples",
    "class_weights",
    "confidence_interval",
]

Scheme = Literal["images_within_class", "classes"]
#: Allowed resampling schemes; the first is the default.
SCHEMES: tuple[str, ...] = ("images_within_class", "classes")


def _generator(seed: Any) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(check_integer(seed, "seed", low=0)))


def _level(level: Any) -> float:
    return check_scalar(level, "level", low=0, high=1, closed="neither")


def _uniform_index(
    rng: np.random.Generator, offsets: IntArray, sizes: IntArray, rows: int
) -> IntArray:
    """``offsets + floor(u * sizes)`` for ``u`` uniform in [0, 1), shape ``[rows, len(sizes)]``."""
    u = rng.random((rows, sizes.shape[0]))
    index = (u * sizes).astype(np.int64)
    np.minimum(index, sizes - 1, out=index)  # guards the (unreachable) u * n == n rounding case
    index += offsets
    return index


def _within_class_positions(rng: np.random.Generator, layout: _Layout, rows: int) -> IntArray:
    """``[rows, n]`` resampled positions: each position redrawn within its class."""
    cls = layout.position_class
    return _uniform_index(rng, layout.starts[cls], layout.sizes[cls], rows)


#: The ``"images_within_class"`` draws of at most this many positions (32 MB) are made once and
#: kept: every metric of a setting resamples the same test images with the same seed, so it draws
#: the same positions (most of a bootstrap's cost). Larger draws are made chunk by chunk.
SHARED_DRAWS_ELEMENTS = 1 << 22
_shared_draws: dict[tuple[int, int, bytes], IntArray] = {}  # the last two
_shared_draws_lock = threading.Lock()  # the site computes its columns' statistics in threads


def _within_class_draws(
    seed: int, layout: _Layout, n_boot: int, width: int
) -> Iterator[tuple[int, int, IntArray]]:
    """``(start, stop, positions [rows, n])`` of the ``"images_within_class"`` scheme, over the
    row chunks of ``row_chunks(n_boot, width)``. A generator seeded with ``seed`` fills them in
    order, so the draws do not depend on the chunks: made whole once, or chunk by chunk."""
    if n_boot * layout.n_images > SHARED_DRAWS_ELEMENTS:
        rng = _generator(seed)
        for start, stop in row_chunks(n_boot, width):
            yield start, stop, _within_class_positions(rng, layout, stop - start)
        return
    arrays = (layout.position_class, layout.starts, layout.sizes)
    key = (seed, n_boot, hashlib.sha256(b"".join(a.tobytes() for a in arrays)).digest())
    with _shared_draws_lock:
        positions = _shared_draws.get(key)
        if positions is None:
            positions = _within_class_positions(_generator(seed), layout, n_boot)
            positions.setflags(write=False)
            if len(_shared_draws) >= 2:
                del _shared_draws[next(iter(_shared_draws))]
            _shared_draws[key] = positions
    for start, stop in row_chunks(n_boot, width):
        yield start, stop, positions[start:stop]


def _class_draws(rng: np.random.Generator, layout: _Layout, rows: int) -> IntArray:
    """``[rows, P]`` present ranks: each class slot redrawn among the classes of its group."""
    group = np.repeat(np.arange(layout.group_sizes.shape[0]), layout.group_sizes)
    return _uniform_index(rng, layout.group_starts[group], layout.group_sizes[group], rows)


def _class_weight_chunks(
    rng: np.random.Generator, layout: _Layout, n_boot: int, width: int
) -> Iterator[tuple[int, int, IntArray]]:
    """The ``"classes"`` bootstrap's draws as class multiplicities, chunk by chunk:
    ``(start, stop, weights [rows, P])`` over the P present classes. Chunks consume ``rng`` in
    order, so the draws do not depend on ``width`` (the chunk size's guide)."""
    n_present = layout.n_present
    for start, stop in row_chunks(n_boot, width):
        rows = stop - start
        draws = _class_draws(rng, layout, rows)
        keys = (np.arange(rows)[:, None] * n_present + draws).ravel()
        yield start, stop, np.bincount(keys, minlength=rows * n_present).reshape(rows, n_present)


def class_weights(groups: npt.ArrayLike, *, n_boot: int = 1000, seed: int = 0) -> FloatArray:
    """The class multiplicities ``[n_boot, C]`` of the ``"classes"`` bootstrap: the draws of
    :func:`bootstrap_samples` for a decomposition with one row per class and these groups (same
    seed, same draws), so a curve area (:mod:`harness.metrics.comparison`) is resampled with the
    same class draws as every other column.

    >>> w = class_weights([0, 0, 1], n_boot=4, seed=1)
    >>> w.sum(axis=1).tolist(), w[:, 2].tolist()
    ([3.0, 3.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0])
    """
    group = np.asarray(groups, dtype=np.int64)
    n = group.shape[0]
    n_boot_ = check_integer(n_boot, "n_boot", low=1)
    one_per_class = Decomposition(
        values=np.zeros(n), classes=np.arange(n), n_classes=n, groups=group
    )
    layout = one_per_class._layout
    out = np.zeros((n_boot_, n))
    for start, stop, weights in _class_weight_chunks(_generator(seed), layout, n_boot_, n * 2):
        out[start:stop, layout.present] = weights
    return out


def _is_binary(values: FloatArray) -> bool:
    return values.ndim == 1 and bool(np.all((values == 0.0) | (values == 1.0)))


def bootstrap_samples(
    decomp: Decomposition,
    *,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
    binary_fast_path: bool = True,
) -> FloatArray:
    r"""Bootstrap replicates of a decomposition's value.

    Scheme ``"images_within_class"`` (default) resamples each class's images; ``"classes"``
    resamples whole classes within their groups, which is what class values kept in a record allow.

    See docs/metrics/bootstrap.md, `bootstrap_samples`.
    """
    scheme_ = check_choice(scheme, "scheme", SCHEMES)
    n_boot_ = check_integer(n_boot, "n_boot", low=1)
    seed_ = check_integer(seed, "seed", low=0)
    rng = _generator(seed_)
    layout = decomp._layout
    n_present = layout.n_present
    m = decomp._sorted_values.shape[1]
    out = np.empty((n_boot_, m), dtype=np.float64)
    if scheme_ == "classes":
        sums = decomp._class_sums[None]
        chunks = _class_weight_chunks(rng, layout, n_boot_, n_present * (m + 1))
        for start, stop, weights in chunks:
            out[start:stop] = _reduce(decomp, sums, weights.astype(np.float64))
        return decomp._shape_out(out)
    ones = np.ones((1, n_present))
    if binary_fast_path and _is_binary(decomp.values):
        hits = decomp._class_sums[:, 0]
        rate = hits / layout.sizes
        for start, stop in row_chunks(n_boot_, n_present):
            draws = rng.binomial(layout.sizes, rate, size=(stop - start, n_present))
            out[start:stop] = _reduce(decomp, draws[:, :, None].astype(np.float64), ones)
        return decomp._shape_out(out)
    n = layout.n_images
    scatter = decomp._scatter
    resamples = _within_class_draws(seed_, layout, n_boot_, max(n, n_present * m))
    for start, stop, positions in resamples:
        rows = stop - start
        keys = (positions * rows + np.arange(rows)[:, None]).ravel()
        counts = np.bincount(keys, minlength=n * rows).reshape(n, rows).astype(np.float64)
        sums = (scatter @ counts).reshape(n_present, m, rows).transpose(2, 0, 1)
        out[start:stop] = _reduce(decomp, sums, ones)
    return decomp._shape_out(out)


def bootstrap_recompute(
    fn: Callable[[IntArray], Any],
    y_true: npt.ArrayLike,
    *,
    n_classes: int,
    groups: npt.ArrayLike | None = None,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
    vectorized: bool = False,
) -> FloatArray:
    """Bootstrap replicates of any metric, by recomputing it on resampled image indices.

    For metrics that are not a :class:`Decomposition`: replicate ``b`` is ``fn(idx_b)``, image
    indices ``idx_b`` into the test set; ``vectorized`` ``fn`` maps ``[rows, n]`` index rows to
    one value per row (given one row at a time under ``"classes"``, whose rows differ in length).

    >>> values = np.array([0.0, 1.0, 2.0])
    >>> samples = bootstrap_recompute(lambda idx: values[idx].mean(), [0, 0, 0], n_classes=1,
    ...                               n_boot=50)
    >>> bool(np.all((samples >= 0) & (samples <= 2))), bool(np.allclose(samples * 3,
    ...                                                     np.round(samples * 3)))
    (True, True)

    See docs/metrics/bootstrap.md, `bootstrap_recompute`.
    """
    if not callable(fn):
        raise MetricError(f"Expected `fn` to be callable, but got {type(fn).__name__}.")
    n_classes_ = check_integer(n_classes, "n_classes", low=1)
    checked = check_targets(y_true, n_classes_)
    scheme_ = check_choice(scheme, "scheme", SCHEMES)
    n_boot_ = check_integer(n_boot, "n_boot", low=1)
    shape_check = Decomposition(
        values=np.zeros(checked.shape[0]),
        classes=checked,
        n_classes=n_classes_,
        groups=None if groups is None else np.asarray(groups),
    )
    layout = shape_check._layout
    seed_ = check_integer(seed, "seed", low=0)
    results: list[FloatArray] = []
    for start, chunk in _index_draws(seed_, layout, scheme_, n_boot_):
        for offset, value in enumerate(_replicates(fn, chunk, layout, scheme_, vectorized)):
            replicate = start + offset
            if value.ndim > 1 or (results and value.shape != results[0].shape):
                raise MetricError(
                    "Expected `fn` to return a float or a 1D array of fixed length, but "
                    f"replicate {replicate} returned shape {value.shape}."
                )
            if not np.all(np.isfinite(value)):
                raise MetricError(
                    f"Expected `fn` to return finite values, but replicate {replicate} "
                    f"returned {value.tolist()!r}."
                )
            results.append(value)
    return np.stack(results)


def _index_draws(
    seed: int, layout: _Layout, scheme: str, n_boot: int
) -> Iterator[tuple[int, IntArray]]:
    """:func:`bootstrap_recompute`'s draws chunk by chunk: ``(start, rows)``, each row the image
    indices of one replicate (``"images_within_class"``) or its class ranks (``"classes"``)."""
    if scheme == "images_within_class":
        for start, _, positions in _within_class_draws(seed, layout, n_boot, layout.n_images):
            yield start, layout.order[positions]
        return
    rng = _generator(seed)
    for start, stop in row_chunks(n_boot, layout.n_present):
        yield start, _class_draws(rng, layout, stop - start)


def _replicates(
    fn: Callable[[IntArray], Any], draws: IntArray, layout: _Layout, scheme: str, vectorized: bool
) -> Iterator[FloatArray]:
    """``fn``'s value of each replicate in ``draws`` (image indices, or class ranks)."""
    if scheme == "images_within_class" and vectorized:
        yield from _values_of_rows(fn, draws)
        return
    for draw in draws:
        indices = draw if scheme == "images_within_class" else _images_of(layout, draw)
        if vectorized:
            yield from _values_of_rows(fn, indices[None])
        else:
            yield np.asarray(fn(indices), dtype=np.float64)


def _values_of_rows(fn: Callable[[IntArray], Any], rows: IntArray) -> FloatArray:
    values = np.asarray(fn(rows), dtype=np.float64)
    if values.shape[:1] != rows.shape[:1]:
        raise MetricError(
            f"Expected `fn` to return one value per index row ({rows.shape[0]} rows), but got "
            f"shape {values.shape}."
        )
    return values


def _images_of(layout: _Layout, ranks: IntArray) -> IntArray:
    """All image indices of the present classes ``ranks`` (with repeats), slot by slot."""
    lengths = layout.sizes[ranks]
    owner = np.repeat(np.arange(ranks.shape[0]), lengths)
    offsets = np.cumsum(lengths) - lengths
    positions = layout.starts[ranks][owner] + np.arange(int(lengths.sum())) - offsets[owner]
    return layout.order[positions]


def confidence_interval(
    samples: npt.ArrayLike, level: float = 0.95
) -> tuple[float, float] | tuple[FloatArray, FloatArray]:
    r"""Percentile bootstrap interval: the :math:`(1 \mp \text{level}) / 2` quantiles.

    >>> confidence_interval(np.arange(101.0), level=0.5)
    (25.0, 75.0)

    See docs/metrics/bootstrap.md, `confidence_interval`.
    """
    array = check_real_rows(samples, "samples")
    if array.shape[0] == 0:
        raise MetricError("Expected `samples` to hold at least one replicate, but got 0.")
    level_ = _level(level)
    lo, hi = np.quantile(array, [(1.0 - level_) / 2.0, (1.0 + level_) / 2.0], axis=0)
    if array.ndim == 1:
        return float(lo), float(hi)
    return lo, hi


def _plain(value: float | FloatArray) -> float | tuple[float, ...]:
    if isinstance(value, np.ndarray) and value.ndim:
        return tuple(float(v) for v in value)
    return float(value)


@dataclass(frozen=True)
class BootstrapInterval:
    """A point estimate with its percentile bootstrap interval (:func:`bootstrap_interval`).

    Attributes
    ----------
    value, lo, hi : float, or tuple of m floats for a decomposition with m value columns
    scheme : str
        The resampling scheme.
    n_boot, seed : int
    level : float in (0, 1)
    excluded_classes : tuple of int
        Class columns without images (left out of every reduction).
    """

    value: float | tuple[float, ...]
    lo: float | tuple[float, ...]
    hi: float | tuple[float, ...]
    scheme: str
    n_boot: int
    seed: int
    level: float
    excluded_classes: tuple[int, ...]


def bootstrap_interval(
    decomp: Decomposition,
    *,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> BootstrapInterval:
    """Point estimate and percentile bootstrap interval of a decomposition.

    :func:`point_estimate` with the :func:`confidence_interval` of :func:`bootstrap_samples`.

    >>> d = Decomposition(values=[1, 1, 1], classes=[0, 1, 1], n_classes=2)
    >>> ci = bootstrap_interval(d, n_boot=100)
    >>> ci.value, ci.lo, ci.hi, ci.scheme
    (1.0, 1.0, 1.0, 'images_within_class')

    See docs/metrics/bootstrap.md, `bootstrap_interval`.
    """
    level_ = _level(level)
    value = point_estimate(decomp)
    samples = bootstrap_samples(decomp, scheme=scheme, n_boot=n_boot, seed=seed)
    lo, hi = confidence_interval(samples, level_)
    return BootstrapInterval(
        value=_plain(value),
        lo=_plain(lo),
        hi=_plain(hi),
        scheme=scheme,
        n_boot=int(n_boot),
        seed=int(seed),
        level=level_,
        excluded_classes=tuple(decomp.excluded_classes.tolist()),
    )
