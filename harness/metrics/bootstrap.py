r"""Bootstrap intervals of decomposed scores: resampling schemes, replicates, percentile intervals.

Resampling schemes
------------------
``"images_within_class"`` (the DEFAULT) resamples the images of each class with replacement,
keeping every class size. The classes of a benchmark are its fixed design: they are chosen by
the benchmark authors, and a result is a statement about *these* classes. The test images are
the sample: another draw of images of the same classes would give another score. So the interval
answers "how much would the score move with other test images of the same classes?". Per class
the resample counts are multinomial; when the values are 0/1 (a single column), the class's
resampled number of hits is exactly Binomial(:math:`n_c`, :math:`\hat p_c`), one draw per class,
which is the fast path.

``"classes"`` resamples the classes with replacement within each group (keeping the number of
classes per group) and keeps all images of each drawn class: class multiplicities are
multinomial and the reduction becomes a weighted mean of per-class means. Use it to ask how much
the score depends on *which* classes a benchmark picked (the interval is much wider). The paired
class-level tests between stored runs (:mod:`harness.metrics.comparison`) use the same draws.

Classes without images are excluded (as in :mod:`harness.metrics.flat`) and reported by
:attr:`~harness.metrics.decomposition.Decomposition.excluded_classes`; they are never resampled.

Determinism
-----------
Every draw comes from ``np.random.Generator(np.random.PCG64(seed))``, so the same inputs and seed
give the same samples on every machine. In the general (non-binary) path, sample ``b`` resamples
image position ``p`` of class ``c`` (images sorted by group, then class, then index) as
``start_c + floor(u_bp * n_c)`` with ``u`` drawn as one row-major ``[n_boot, n_images]`` array of
uniform doubles (in row chunks; chunking does not change the stream). The ``"classes"`` scheme
draws ``[n_boot, n_present_classes]`` uniforms the same way, slot ``s`` of group ``g`` taking the
``floor(u * K_g)``-th class of that group. :func:`bootstrap_recompute` uses the same draws, so
with a reducing ``fn`` it reproduces :func:`bootstrap_samples` exactly (binary fast path off).
"""

from __future__ import annotations

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
from harness.errors import MetricError
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

    Scheme ``"images_within_class"`` (default): for each class :math:`c` with :math:`n_c`
    images, multinomial resample counts :math:`N_{bi}` with :math:`\sum_{i \in I_c} N_{bi} =
    n_c`, so the resampled class mean is :math:`\bar v^{*}_{bc} = \frac{1}{n_c} \sum_{i \in
    I_c} N_{bi} v_i`. Scheme ``"classes"``: within each group :math:`g` of :math:`K_g` classes,
    multinomial class multiplicities :math:`W_{bc}` with :math:`\sum_{c \in g} W_{bc} = K_g`,
    and the reduction weighs each class mean by :math:`W_{bc}`:

    .. math::

        \text{class\_mean}^{*}_b = \frac{\sum_c W_{bc} \bar v_c}{\sum_c W_{bc}}, \qquad
        \text{image\_mean}^{*}_b = \frac{\sum_c W_{bc}\, n_c \bar v_c}{\sum_c W_{bc}\, n_c}

    (and group-wise class means for the harmonic mean).

    Parameters
    ----------
    decomp : Decomposition
    scheme : {"images_within_class", "classes"}, default="images_within_class"
        What is resampled (module docstring).
    n_boot : int, default=1000
        Number of bootstrap replicates, >= 1.
    seed : int, default=0
        Seed of ``np.random.Generator(np.random.PCG64(seed))``; same seed, same samples.
    binary_fast_path : bool, default=True
        For 1D 0/1 values and ``"images_within_class"``, draw each class's resampled hits as
        Binomial(:math:`n_c`, :math:`\hat p_c`) (exact, ``n_boot x n_classes`` draws) instead
        of resampling every image. False forces the general path (same distribution, other
        draws).

    Returns
    -------
    samples : ndarray of float of shape (n_boot,) or (n_boot, m)
        One replicate per row; ``(n_boot, m)`` for 2D values.

    Raises
    ------
    MetricError
        On a bad ``scheme``, ``n_boot`` or ``seed``, or when the decomposition cannot be reduced
        (see :func:`point_estimate`).

    Notes
    -----
    Vectorized over images and replicates; replicates are produced in row chunks so that at most
    about ``CHUNK_ELEMENTS`` draws (and class sums) are held at once. A replicate of a
    class or image mean lies within ``[min(values), max(values)]``. Classes without images are
    excluded. The bootstrap itself is Efron's [1]_; the stratified (within-class) variant keeps
    the benchmark's class design fixed.

    References
    ----------
    .. [1] B. Efron, R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall, 1993,
       Ch. 6 and 13.

    Examples
    --------
    Class 0 has values 0 and 1, class 1 values 1 and 1. A resample of class 0 has mean 0, 1/2
    or 1 (with probabilities 1/4, 1/2, 1/4); class 1 always has mean 1. So every replicate of
    the class mean is (m0 + 1) / 2, one of 0.5, 0.75, 1:

    >>> d = Decomposition(values=[0, 1, 1, 1], classes=[0, 0, 1, 1], n_classes=2)
    >>> samples = bootstrap_samples(d, n_boot=200, seed=0)
    >>> samples.shape, sorted(set(samples.tolist()))
    ((200,), [0.5, 0.75, 1.0])
    """
    scheme_ = check_choice(scheme, "scheme", SCHEMES)
    n_boot_ = check_integer(n_boot, "n_boot", low=1)
    rng = _generator(seed)
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
    for start, stop in row_chunks(n_boot_, max(n, n_present * m)):
        rows = stop - start
        positions = _within_class_positions(rng, layout, rows)
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
) -> FloatArray:
    r"""Bootstrap replicates of any metric, by recomputing it on resampled image indices.

    The slow, general path for metrics that are not a :class:`Decomposition` (one call of
    ``fn`` per replicate). Replicate ``b`` calls ``fn(idx_b)`` where ``idx_b`` holds image
    indices into the test set:

    - ``"images_within_class"``: each class's images resampled with replacement (class sizes
      kept); ``idx_b`` is grouped by class;
    - ``"classes"``: classes resampled with replacement within each group, and all images of
      each drawn class taken; a class drawn twice has its images twice in ``idx_b``.

    Parameters
    ----------
    fn : callable
        ``fn(indices) -> float`` (or a 1D array of fixed length) recomputing the metric on the
        images ``indices`` (an int64 array, repeats allowed).
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    n_classes : int
        Number of classes (candidate columns).
    groups : array-like of int of shape (n_classes,), default=None
        Group id per class for the ``"classes"`` scheme; None: one group.
    scheme : {"images_within_class", "classes"}, default="images_within_class"
    n_boot : int, default=1000
    seed : int, default=0

    Returns
    -------
    samples : ndarray of float of shape (n_boot,) or (n_boot, m)

    Raises
    ------
    MetricError
        On malformed inputs or options, or when ``fn`` returns a non-finite value or a value of
        changing shape (naming the replicate).

    Notes
    -----
    The draws are those of :func:`bootstrap_samples` (general path), so a ``fn`` that reduces
    like a decomposition reproduces its samples exactly. Under ``"classes"`` a repeated class
    appears as repeated images: a class-mean ``fn`` that groups ``y_true[indices]`` by class
    counts it once, unlike the multiplicity weighting of :func:`bootstrap_samples`; an
    image-mean ``fn`` agrees with it.

    Examples
    --------
    The mean of the resampled images of a single class with values 0, 1, 2: every replicate is
    a mean of three draws from {0, 1, 2}, so it is a multiple of 1/3 in [0, 2]:

    >>> values = np.array([0.0, 1.0, 2.0])
    >>> samples = bootstrap_recompute(lambda idx: values[idx].mean(), [0, 0, 0], n_classes=1,
    ...                               n_boot=50)
    >>> bool(np.all((samples >= 0) & (samples <= 2))), bool(np.allclose(samples * 3,
    ...                                                     np.round(samples * 3)))
    (True, True)
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
    rng = _generator(seed)
    results: list[FloatArray] = []
    width = layout.n_images if scheme_ == "images_within_class" else layout.n_present
    for start, stop in row_chunks(n_boot_, width):
        if scheme_ == "images_within_class":
            chunk = layout.order[_within_class_positions(rng, layout, stop - start)]
        else:
            chunk = _class_draws(rng, layout, stop - start)
        for offset, row in enumerate(chunk):
            indices = row if scheme_ == "images_within_class" else _images_of(layout, row)
            value = np.asarray(fn(indices), dtype=np.float64)
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

    .. math::

        [\,\mathrm{lo}, \mathrm{hi}\,] = \big[\, q_{(1 - \ell)/2}(\theta^{*}),\;
        q_{(1 + \ell)/2}(\theta^{*}) \,\big]

    with :math:`q` numpy's default (linear) quantile over the replicates :math:`\theta^{*}`.

    Parameters
    ----------
    samples : array-like of float of shape (n_boot,) or (n_boot, m)
    level : float in (0, 1), default=0.95

    Returns
    -------
    lo, hi : floats, or arrays of shape (m,) for 2D samples
        ``lo <= hi``. The point estimate need not lie inside (percentile intervals of skewed
        statistics, e.g. near 0 or 1, can exclude it).

    Raises
    ------
    MetricError
        If ``samples`` is empty, not finite or not 1D/2D, or ``level`` is not in (0, 1).

    References
    ----------
    .. [1] B. Efron, R. J. Tibshirani, "An Introduction to the Bootstrap", 1993, Ch. 13.

    Examples
    --------
    The 50% interval of 0, 1, ..., 100 runs from the 25% to the 75% quantile:

    >>> confidence_interval(np.arange(101.0), level=0.5)
    (25.0, 75.0)
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

    Parameters
    ----------
    decomp, scheme, n_boot, seed
        As :func:`bootstrap_samples` (binary fast path on).
    level : float in (0, 1), default=0.95

    Returns
    -------
    interval : BootstrapInterval
        ``value``, ``lo``, ``hi`` (floats, or tuples of m floats for 2D values), ``scheme``,
        ``n_boot``, ``seed``, ``level`` and ``excluded_classes`` (class columns without
        images).

    Raises
    ------
    MetricError
        As :func:`bootstrap_samples` and :func:`confidence_interval`.

    Examples
    --------
    Every image correct: every replicate is 1, so is the interval:

    >>> d = Decomposition(values=[1, 1, 1], classes=[0, 1, 1], n_classes=2)
    >>> ci = bootstrap_interval(d, n_boot=100)
    >>> ci.value, ci.lo, ci.hi, ci.scheme
    (1.0, 1.0, 1.0, 'images_within_class')
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
