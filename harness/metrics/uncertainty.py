r"""Uncertainty of benchmark scores: bootstrap intervals, paired comparisons, ranks.

Decompositions
--------------
Every scalar metric of this engine is a reduction of *per-image values* grouped by the image's
true class (a :class:`Decomposition`):

- ``"class_mean"``: the mean over classes of the per-class mean of the values (per-class top-k
  accuracy, hierarchical precision, ...);
- ``"image_mean"``: the plain mean over images (the ``per_image`` metrics);
- ``"harmonic_of_groups"``: the class mean within each group of classes (e.g. 0 = seen,
  1 = unseen), then the harmonic mean of the group means (GZSL H).

Several scalars over the same images (hp@k for five k, say) share one decomposition with a value
*column* per scalar, so they are resampled together.

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
the score depends on *which* classes a benchmark picked (the interval is much wider).

Classes without images are excluded (as in :mod:`harness.metrics.flat`) and reported by
:attr:`Decomposition.excluded_classes`; they are never resampled.

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

Comparisons and ranks
---------------------
:func:`paired_bootstrap` compares two runs on the same images with the *same* resample applied
to both; :func:`tied_groups` turns paired tests into leaderboard brackets; :func:`rank_matrix`
gives the Friedman-style rank matrix of Xian et al. (GBU, Fig. 4) across benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.stats import rankdata

from harness.errors import MetricError
from harness.metrics._validation import (
    CHUNK_ELEMENTS,
    _first_out_of_range,
    _integer_array,
    check_targets,
)

__all__ = [
    "COMBINES",
    "SCHEMES",
    "Combine",
    "Decomposition",
    "Scheme",
    "bootstrap_interval",
    "bootstrap_recompute",
    "bootstrap_samples",
    "concatenate",
    "confidence_interval",
    "leader_groups",
    "paired_bootstrap",
    "point_estimate",
    "rank_matrix",
    "tied_groups",
]

Combine = Literal["class_mean", "image_mean", "harmonic_of_groups"]
Scheme = Literal["images_within_class", "classes"]
#: Allowed values of :attr:`Decomposition.combine`.
COMBINES: tuple[str, ...] = ("class_mean", "image_mean", "harmonic_of_groups")
#: Allowed resampling schemes; the first is the default.
SCHEMES: tuple[str, ...] = ("images_within_class", "classes")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# ------------------------------------------------------------------------------ option checks


def _check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise MetricError(f"Expected `{name}` to be one of {list(choices)}, but got {value!r}.")
    return value


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise MetricError(f"Expected `{name}` to be an integer >= {minimum}, but got {value!r}.")
    return int(value)


def _check_fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise MetricError(f"Expected `{name}` to be a number in (0, 1), but got {value!r}.")
    number = float(value)
    if not 0.0 < number < 1.0:  # also refuses NaN
        raise MetricError(f"Expected `{name}` to be a number in (0, 1), but got {number!r}.")
    return number


def _check_finite_values(values: Any, name: str) -> FloatArray:
    """``values`` as a finite float64 array of 1 or 2 dimensions (rows are images/samples)."""
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


def _generator(seed: Any) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(_check_int(seed, "seed", 0)))


# ------------------------------------------------------------------------------ decomposition


@dataclass(frozen=True)
class _Layout:
    """Images and classes arranged for resampling (present classes only).

    Present classes (those with images) are ordered by group, then class id; images by that
    class order, then image index. ``order[p]`` is the image at position ``p``.
    """

    order: IntArray  # [n] image index at each position
    present: IntArray  # [P] class ids with >= 1 image, by (group, class)
    sizes: IntArray  # [P] images per present class
    starts: IntArray  # [P] first position of each present class
    position_class: IntArray  # [n] present rank of the class at each position
    group_labels: IntArray  # [G] distinct group ids over all n_classes classes
    group_sizes: IntArray  # [G] present classes per group
    group_starts: IntArray  # [G] first present rank of each group

    @property
    def n_images(self) -> int:
        return int(self.order.shape[0])

    @property
    def n_present(self) -> int:
        return int(self.present.shape[0])


def _build_layout(classes: IntArray, n_classes: int, groups: IntArray) -> _Layout:
    labels, dense = np.unique(groups, return_inverse=True)
    dense = dense.astype(np.int64)
    totals = np.bincount(classes, minlength=n_classes)
    class_order = np.lexsort((np.arange(n_classes), dense))
    present = class_order[totals[class_order] > 0].astype(np.int64)
    rank = np.full(n_classes, -1, dtype=np.int64)
    rank[present] = np.arange(present.shape[0])
    image_rank = rank[classes]
    order = np.argsort(image_rank, kind="stable").astype(np.int64)
    sizes = totals[present].astype(np.int64)
    group_sizes = np.bincount(dense[present], minlength=labels.shape[0]).astype(np.int64)
    return _Layout(
        order=order,
        present=present,
        sizes=sizes,
        starts=np.cumsum(sizes) - sizes,
        position_class=image_rank[order],
        group_labels=labels.astype(np.int64),
        group_sizes=group_sizes,
        group_starts=np.cumsum(group_sizes) - group_sizes,
    )


@dataclass(frozen=True, eq=False)
class Decomposition:
    r"""A scalar (or ``m`` scalars) written as a reduction of per-image values by true class.

    With :math:`I_c` the images of class :math:`c`, :math:`C'` the classes with images, and
    :math:`C'_g` those of group :math:`g` (:math:`G` groups):

    .. math::

        \bar v_c = \frac{1}{|I_c|} \sum_{i \in I_c} v_i, \quad
        \text{class\_mean} = \frac{1}{|C'|} \sum_{c \in C'} \bar v_c, \quad
        \text{image\_mean} = \frac{1}{n} \sum_{i} v_i, \quad
        \text{harmonic\_of\_groups} = \frac{G}{\sum_g 1 / \bar v_{C'_g}}

    where :math:`\bar v_{C'_g}` is the class mean over :math:`C'_g`, and the harmonic mean is 0
    when any group mean is 0 (for two groups this is GZSL's H).

    Parameters
    ----------
    values : array-like of float of shape (n_images,) or (n_images, m)
        Per-image values (e.g. 0/1 correctness, or hierarchical precision); one column per
        scalar. Finite; non-negative for ``"harmonic_of_groups"``.
    classes : array-like of int of shape (n_images,)
        Candidate column of each image's true class, in ``[0, n_classes)``.
    n_classes : int
        Number of classes (candidate columns).
    groups : array-like of int of shape (n_classes,), default=None
        Non-negative group id per class (e.g. 0 = seen, 1 = unseen); None puts every class in
        group 0. The ``"classes"`` scheme resamples within groups.
    combine : {"class_mean", "image_mean", "harmonic_of_groups"}, default="class_mean"
        How the values reduce to the scalar.

    Raises
    ------
    MetricError
        On malformed inputs (shapes, dtypes, non-finite values, classes out of range, negative
        group ids, an unknown ``combine``). A decomposition may hold no image (a streamed chunk);
        the reductions then raise.

    Examples
    --------
    Class 0 has values 1 and 0 (mean 0.5), class 1 has value 1; class 2 has no image:

    >>> d = Decomposition(values=[1.0, 0.0, 1.0], classes=[0, 0, 1], n_classes=3)
    >>> point_estimate(d), d.excluded_classes.tolist()
    (0.75, [2])
    """

    values: npt.NDArray[np.float64]
    classes: npt.NDArray[np.int64]
    n_classes: int
    groups: npt.NDArray[np.int64] | None = None
    combine: Combine = "class_mean"

    def __post_init__(self) -> None:
        n_classes = _check_int(self.n_classes, "n_classes", 1)
        combine = _check_choice(self.combine, "combine", COMBINES)
        values = np.asarray(self.values)
        if values.size == 0 and values.dtype.kind not in "biuf":
            values = values.astype(np.float64)
        values = _check_finite_values(values, "values")
        classes = _integer_array(self.classes, "classes", "true-class columns, one per image")
        _first_out_of_range(classes, n_classes, "classes", "class columns")
        if classes.shape[0] != values.shape[0]:
            raise MetricError(
                f"Expected `values` to have one row per image in `classes` ({classes.shape[0]}),"
                f" but got {values.shape[0]} rows."
            )
        if self.groups is None:
            groups = np.zeros(n_classes, dtype=np.int64)
        else:
            groups = _integer_array(self.groups, "groups", "group ids, one per class")
            if groups.shape[0] != n_classes:
                raise MetricError(
                    f"Expected `groups` to have one entry per class ({n_classes}), "
                    f"but got {groups.shape[0]}."
                )
            if groups.size and int(groups.min()) < 0:
                position = int(np.argmax(groups < 0))
                raise MetricError(
                    f"Expected `groups` to hold non-negative group ids, but got "
                    f"groups[{position}] = {int(groups[position])}."
                )
        if combine == "harmonic_of_groups" and values.size and float(values.min()) < 0:
            row = int(np.argmax(values.min(axis=1) < 0 if values.ndim == 2 else values < 0))
            raise MetricError(
                "Expected `values` to be non-negative for combine='harmonic_of_groups', "
                f"but row {row} holds {values[row]!r}."
            )
        for name, array in (("values", values), ("classes", classes), ("groups", groups)):
            frozen = np.array(array, copy=True)  # never alias (or freeze) the caller's array
            frozen.flags.writeable = False
            object.__setattr__(self, name, frozen)
        object.__setattr__(self, "n_classes", n_classes)

    @classmethod
    def for_gzsl(
        cls, values: npt.ArrayLike, classes: npt.ArrayLike, *, seen: npt.ArrayLike
    ) -> Decomposition:
        """The GZSL H decomposition: group 0 = seen columns, group 1 = unseen columns.

        Examples
        --------
        Seen class 0: 1/2; unseen class 1: 1/1; H = 2 * 0.5 * 1 / 1.5 = 2/3:

        >>> d = Decomposition.for_gzsl([1, 0, 1], [0, 0, 1], seen=[True, False])
        >>> round(point_estimate(d), 12)
        0.666666666667
        """
        mask = np.asarray(seen)
        if mask.ndim != 1 or mask.dtype.kind != "b":
            raise MetricError(
                "Expected `seen` to be a 1D bool array over candidate columns, but got shape "
                f"{mask.shape} and dtype {mask.dtype}."
            )
        return cls(
            values=np.asarray(values),
            classes=np.asarray(classes),
            n_classes=int(mask.shape[0]),
            groups=(~mask).astype(np.int64),
            combine="harmonic_of_groups",
        )

    @property
    def n_images(self) -> int:
        """Number of images (rows of ``values``)."""
        return int(self.values.shape[0])

    @property
    def n_columns(self) -> int | None:
        """``m`` for 2D values, None for 1D values (one scalar)."""
        return int(self.values.shape[1]) if self.values.ndim == 2 else None

    @property
    def excluded_classes(self) -> IntArray:
        """Classes without any image, ascending: excluded from every reduction."""
        counts = np.bincount(self.classes, minlength=self.n_classes)
        return np.flatnonzero(counts == 0).astype(np.int64)

    @cached_property
    def _layout(self) -> _Layout:
        if self.n_images == 0:
            raise MetricError(
                "Expected the decomposition to hold at least one image, but got 0 images."
            )
        assert self.groups is not None  # set by __post_init__
        layout = _build_layout(self.classes, self.n_classes, self.groups)
        if self.combine == "harmonic_of_groups":
            empty = np.flatnonzero(layout.group_sizes == 0)
            if empty.size:
                raise MetricError(
                    "Expected every group to have a class with images for "
                    f"combine='harmonic_of_groups', but group {int(layout.group_labels[empty[0]])}"
                    " has none. The harmonic mean is undefined; check `groups` and `classes`."
                )
        return layout

    @cached_property
    def _sorted_values(self) -> FloatArray:
        """Values as ``[n, m]`` in layout order."""
        values = self.values if self.values.ndim == 2 else self.values[:, None]
        return np.ascontiguousarray(values[self._layout.order])

    @cached_property
    def _class_sums(self) -> FloatArray:
        """``[P, m]`` per present class sums of the values."""
        return np.add.reduceat(self._sorted_values, self._layout.starts, axis=0)

    @cached_property
    def _scatter(self) -> sp.csr_array:
        """``[P * m, n]``: row ``c * m + j`` holds column j of class c's values at its positions."""
        layout = self._layout
        n, m = self._sorted_values.shape
        rows = (layout.position_class[:, None] * m + np.arange(m)[None, :]).ravel()
        cols = np.repeat(np.arange(n), m)
        return sp.csr_array(
            (self._sorted_values.ravel(), (rows, cols)), shape=(layout.n_present * m, n)
        )

    def _shape_out(self, samples: FloatArray) -> FloatArray:
        """``[b, m]`` → ``[b]`` for 1D values."""
        return samples if self.values.ndim == 2 else samples[:, 0]


def concatenate(decomps: Sequence[Decomposition]) -> Decomposition:
    """Join decompositions of disjoint image sets (e.g. streamed row chunks) into one.

    All parts must share ``n_classes``, ``groups``, ``combine`` and the number of value columns.

    Examples
    --------
    >>> a = Decomposition(values=[1.0], classes=[0], n_classes=2)
    >>> b = Decomposition(values=[0.0, 1.0], classes=[1, 1], n_classes=2)
    >>> point_estimate(concatenate([a, b]))  # (1 + 0.5) / 2
    0.75
    """
    parts = list(decomps)
    if not parts or not all(isinstance(p, Decomposition) for p in parts):
        raise MetricError(
            "Expected `decomps` to be a non-empty sequence of Decomposition, "
            f"but got {[type(p).__name__ for p in parts]}."
        )
    first = parts[0]
    for position, part in enumerate(parts[1:], start=1):
        _check_same_design(first, part, "decomps[0]", f"decomps[{position}]")
        if part.values.shape[1:] != first.values.shape[1:]:
            raise MetricError(
                f"Expected `decomps[{position}]` to have values of shape (n,)"
                f"{'' if first.values.ndim == 1 else ' + ' + str(first.values.shape[1:])} like "
                f"`decomps[0]`, but got {part.values.shape}."
            )
    return Decomposition(
        values=np.concatenate([p.values for p in parts]),
        classes=np.concatenate([p.classes for p in parts]),
        n_classes=first.n_classes,
        groups=first.groups,
        combine=first.combine,
    )


def _check_same_design(a: Decomposition, b: Decomposition, name_a: str, name_b: str) -> None:
    if a.n_classes != b.n_classes or a.combine != b.combine:
        raise MetricError(
            f"Expected `{name_b}` to have the n_classes and combine of `{name_a}` "
            f"({a.n_classes}, {a.combine!r}), but got ({b.n_classes}, {b.combine!r})."
        )
    if not np.array_equal(np.asarray(a.groups), np.asarray(b.groups)):
        raise MetricError(f"Expected `{name_b}` to have the groups of `{name_a}`, but they differ.")


# ------------------------------------------------------------------------------ reductions


def _harmonic(group_means: FloatArray) -> FloatArray:
    """Harmonic mean over axis 0 (the groups); 0 where any group mean is 0."""
    n_groups = group_means.shape[0]
    if n_groups == 1:
        return group_means[0]
    low = group_means.min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if n_groups == 2:  # the expression of harness.metrics.gzsl.harmonic_mean
            high = group_means.max(axis=0)
            h = np.clip(2.0 * low * (high / (low + high)), low, high)
        else:
            h = n_groups / (1.0 / group_means).sum(axis=0)
    return np.where(low > 0, h, 0.0)


def _reduce(
    decomp: Decomposition, sums: FloatArray, weights: FloatArray
) -> npt.NDArray[np.float64]:
    """Reduce class sums ``[b|1, P, m]`` with class multiplicities ``[b|1, P]`` to ``[b, m]``."""
    layout = decomp._layout
    sizes = layout.sizes.astype(np.float64)
    w = weights[:, :, None]
    if decomp.combine == "image_mean":
        result: FloatArray = (w * sums).sum(axis=1) / (weights @ sizes)[:, None]
        return result
    means = sums / sizes[None, :, None]
    if decomp.combine == "class_mean":
        result = (w * means).sum(axis=1) / weights.sum(axis=1)[:, None]
        return result
    group_means = []
    for start, size in zip(layout.group_starts.tolist(), layout.group_sizes.tolist(), strict=True):
        part = slice(start, start + size)
        group_means.append(
            (w[:, part] * means[:, part]).sum(axis=1) / weights[:, part].sum(axis=1)[:, None]
        )
    b = max(sums.shape[0], weights.shape[0])
    return _harmonic(np.stack([np.broadcast_to(g, (b, g.shape[1])) for g in group_means]))


def point_estimate(decomp: Decomposition) -> float | FloatArray:
    r"""The value of a decomposition: a float for 1D values, an array ``[m]`` for 2D values.

    See :class:`Decomposition` for the three reductions.

    Parameters
    ----------
    decomp : Decomposition

    Returns
    -------
    value : float or ndarray of float of shape (m,)

    Raises
    ------
    MetricError
        If the decomposition holds no image, or (``"harmonic_of_groups"``) a group has no class
        with images.

    Examples
    --------
    Images of class 0: 1, 0 (mean 1/2); class 1: 1 (mean 1). Class mean (1/2 + 1) / 2 = 0.75,
    image mean 2/3:

    >>> d = Decomposition(values=[1, 0, 1], classes=[0, 0, 1], n_classes=2)
    >>> point_estimate(d)
    0.75
    >>> d2 = Decomposition(values=[1, 0, 1], classes=[0, 0, 1], n_classes=2, combine="image_mean")
    >>> round(point_estimate(d2), 12)
    0.666666666667
    """
    layout = decomp._layout
    value = _reduce(decomp, decomp._class_sums[None], np.ones((1, layout.n_present)))[0]
    if decomp.values.ndim == 1:
        return float(value[0])
    return value


# ------------------------------------------------------------------------------ resampling


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


def _row_chunks(n_rows: int, width: int) -> Iterator[tuple[int, int]]:
    step = max(1, CHUNK_ELEMENTS // max(1, width))
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


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
    scheme_ = _check_choice(scheme, "scheme", SCHEMES)
    n_boot_ = _check_int(n_boot, "n_boot", 1)
    rng = _generator(seed)
    layout = decomp._layout
    n_present = layout.n_present
    m = decomp._sorted_values.shape[1]
    out = np.empty((n_boot_, m), dtype=np.float64)
    if scheme_ == "classes":
        sums = decomp._class_sums[None]
        for start, stop in _row_chunks(n_boot_, n_present * (m + 1)):
            rows = stop - start
            draws = _class_draws(rng, layout, rows)
            keys = (np.arange(rows)[:, None] * n_present + draws).ravel()
            weights = np.bincount(keys, minlength=rows * n_present).reshape(rows, n_present)
            out[start:stop] = _reduce(decomp, sums, weights.astype(np.float64))
        return decomp._shape_out(out)
    ones = np.ones((1, n_present))
    if binary_fast_path and _is_binary(decomp.values):
        hits = decomp._class_sums[:, 0]
        rate = hits / layout.sizes
        for start, stop in _row_chunks(n_boot_, n_present):
            draws = rng.binomial(layout.sizes, rate, size=(stop - start, n_present))
            out[start:stop] = _reduce(decomp, draws[:, :, None].astype(np.float64), ones)
        return decomp._shape_out(out)
    n = layout.n_images
    scatter = decomp._scatter
    for start, stop in _row_chunks(n_boot_, max(n, n_present * m)):
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
    n_classes_ = _check_int(n_classes, "n_classes", 1)
    checked = check_targets(y_true, n_classes_)
    scheme_ = _check_choice(scheme, "scheme", SCHEMES)
    n_boot_ = _check_int(n_boot, "n_boot", 1)
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
    for start, stop in _row_chunks(n_boot_, width):
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
    array = _check_finite_values(samples, "samples")
    if array.shape[0] == 0:
        raise MetricError("Expected `samples` to hold at least one replicate, but got 0.")
    level_ = _check_fraction(level, "level")
    lo, hi = np.quantile(array, [(1.0 - level_) / 2.0, (1.0 + level_) / 2.0], axis=0)
    if array.ndim == 1:
        return float(lo), float(hi)
    return lo, hi


def _jsonable(value: float | FloatArray) -> float | list[float]:
    if isinstance(value, np.ndarray) and value.ndim:
        return [float(v) for v in value]
    return float(value)


def bootstrap_interval(
    decomp: Decomposition,
    *,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Point estimate and percentile bootstrap interval of a decomposition.

    :func:`point_estimate` with the :func:`confidence_interval` of :func:`bootstrap_samples`.

    Parameters
    ----------
    decomp, scheme, n_boot, seed
        As :func:`bootstrap_samples` (binary fast path on).
    level : float in (0, 1), default=0.95

    Returns
    -------
    interval : dict
        ``value``, ``lo``, ``hi`` (floats, or lists of m floats for 2D values), ``scheme``,
        ``n_boot``, ``seed``, ``level`` and ``excluded_classes`` (list of class columns without
        images). JSON-serializable as is.

    Raises
    ------
    MetricError
        As :func:`bootstrap_samples` and :func:`confidence_interval`.

    Examples
    --------
    Every image correct: every replicate is 1, so is the interval:

    >>> d = Decomposition(values=[1, 1, 1], classes=[0, 1, 1], n_classes=2)
    >>> ci = bootstrap_interval(d, n_boot=100)
    >>> ci["value"], ci["lo"], ci["hi"], ci["scheme"]
    (1.0, 1.0, 1.0, 'images_within_class')
    """
    level_ = _check_fraction(level, "level")
    value = point_estimate(decomp)
    samples = bootstrap_samples(decomp, scheme=scheme, n_boot=n_boot, seed=seed)
    lo, hi = confidence_interval(samples, level_)
    return {
        "value": _jsonable(value),
        "lo": _jsonable(lo),
        "hi": _jsonable(hi),
        "scheme": scheme,
        "n_boot": int(n_boot),
        "seed": int(seed),
        "level": level_,
        "excluded_classes": decomp.excluded_classes.tolist(),
    }


# ------------------------------------------------------------------------------ comparisons


def _paired_samples(
    decomp_a: Decomposition,
    decomp_b: Decomposition,
    scheme: Scheme,
    n_boot: int,
    seed: int,
) -> tuple[FloatArray, FloatArray]:
    """Observed differences ``[m]`` and replicate differences ``[n_boot, m]`` (a minus b)."""
    _check_same_design(decomp_a, decomp_b, "decomp_a", "decomp_b")
    if decomp_a.values.shape != decomp_b.values.shape or not np.array_equal(
        decomp_a.classes, decomp_b.classes
    ):
        raise MetricError(
            "Expected `decomp_b` to score the same images as `decomp_a` (same `classes`, "
            f"values of the same shape), but got shapes {decomp_a.values.shape} and "
            f"{decomp_b.values.shape} with "
            f"{'equal' if np.array_equal(decomp_a.classes, decomp_b.classes) else 'different'}"
            " classes."
        )
    a = decomp_a.values if decomp_a.values.ndim == 2 else decomp_a.values[:, None]
    b = decomp_b.values if decomp_b.values.ndim == 2 else decomp_b.values[:, None]
    m = a.shape[1]
    joint = Decomposition(
        values=np.concatenate([a, b], axis=1),
        classes=decomp_a.classes,
        n_classes=decomp_a.n_classes,
        groups=decomp_a.groups,
        combine=decomp_a.combine,
    )
    observed = np.atleast_1d(np.asarray(point_estimate(joint)))
    samples = bootstrap_samples(joint, scheme=scheme, n_boot=n_boot, seed=seed)
    return observed[:m] - observed[m:], samples[:, :m] - samples[:, m:]


def _p_values(observed: FloatArray, diffs: FloatArray) -> FloatArray:
    n_boot = diffs.shape[0]
    other_side = np.where(
        observed > 0, (diffs <= 0).sum(axis=0), np.where(observed < 0, (diffs >= 0).sum(axis=0), 0)
    )
    p = np.minimum(1.0, 2.0 * (other_side + 1) / (n_boot + 1))
    return np.where(observed == 0, 1.0, p)


def paired_bootstrap(
    decomp_a: Decomposition,
    decomp_b: Decomposition,
    *,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    r"""Paired bootstrap comparison of two runs scored on the same images.

    Both runs get the *same* resample in every replicate (their values are resampled as two
    columns of one decomposition), so the spread of the difference reflects only where the runs
    disagree. With observed difference :math:`D = \theta_a - \theta_b` and replicate
    differences :math:`D^{*}_1, \dots, D^{*}_B`:

    .. math::

        p = \min\Big(1,\; 2\, \frac{1 + \#\{b : D^{*}_b \text{ on the other side of } 0\}}
            {B + 1}\Big)

    where "the other side" is :math:`D^{*}_b \le 0` when :math:`D > 0` and
    :math:`D^{*}_b \ge 0` when :math:`D < 0`; :math:`p = 1` when :math:`D = 0`.

    Parameters
    ----------
    decomp_a, decomp_b : Decomposition
        The two runs: same ``classes`` (same images, same order), ``n_classes``, ``groups``,
        ``combine`` and value shape.
    scheme, n_boot, seed
        As :func:`bootstrap_samples` (the general path: the binary fast path cannot pair).
    level : float in (0, 1), default=0.95
        Level of the percentile interval of the difference.

    Returns
    -------
    comparison : dict
        ``diff`` (:math:`D`), ``lo`` and ``hi`` (percentile interval of :math:`D^{*}`),
        ``p_value`` (two-sided, in (0, 1]) -- floats, or lists of m floats for 2D values --
        and ``scheme``, ``n_boot``, ``seed``, ``level``.

    Raises
    ------
    MetricError
        If the two decompositions do not describe the same images and reduction, or on bad
        options.

    Notes
    -----
    The +1 correction keeps the p-value away from 0: with :math:`B` replicates the smallest
    reportable value is :math:`2 / (B + 1)`. See [1]_ for the paired bootstrap test in system
    comparison.

    References
    ----------
    .. [1] T. Berg-Kirkpatrick, D. Burkett, D. Klein, "An Empirical Investigation of Statistical
       Significance in NLP", EMNLP 2012.

    Examples
    --------
    Two identical runs: every replicate difference is 0, so D = 0 and p = 1:

    >>> d = Decomposition(values=[1, 0, 1, 1], classes=[0, 0, 1, 1], n_classes=2)
    >>> result = paired_bootstrap(d, d, n_boot=100)
    >>> result["diff"], result["lo"], result["hi"], result["p_value"]
    (0.0, 0.0, 0.0, 1.0)
    """
    level_ = _check_fraction(level, "level")
    scheme_ = _check_choice(scheme, "scheme", SCHEMES)
    observed, diffs = _paired_samples(decomp_a, decomp_b, scheme, n_boot, seed)
    lo, hi = np.quantile(diffs, [(1.0 - level_) / 2.0, (1.0 + level_) / 2.0], axis=0)
    p = _p_values(observed, diffs)
    one = decomp_a.values.ndim == 1

    def out(x: FloatArray) -> float | list[float]:
        return float(x[0]) if one else [float(v) for v in x]

    return {
        "diff": out(observed),
        "lo": out(lo),
        "hi": out(hi),
        "p_value": out(p),
        "scheme": scheme_,
        "n_boot": int(n_boot),
        "seed": int(seed),
        "level": level_,
    }


def tied_groups(
    names: Sequence[str],
    decomps: Sequence[Decomposition],
    *,
    alpha: float = 0.05,
    higher_is_better: bool = True,
    scheme: Scheme = "images_within_class",
    n_boot: int = 1000,
    seed: int = 0,
) -> list[list[str]]:
    """Leaderboard brackets: consecutive submissions not separable from their group's leader.

    Rule: sort the submissions by point estimate, best first (stable: equal estimates keep the
    given order). The first submission leads the first group. Walking down the order, each
    submission is compared with the leader of the current group by :func:`paired_bootstrap`
    (same ``scheme``, ``n_boot`` and ``seed`` for every pair); it joins that group when the
    difference is not significant (``p_value >= alpha``), and otherwise starts a new group that
    it leads. So groups are disjoint, ordered best first, each sorted best first, and every
    member is inseparable from its group's leader (not necessarily from every other member).

    Parameters
    ----------
    names : sequence of str
        Distinct submission names.
    decomps : sequence of Decomposition
        One per name, all scoring the same images with 1D values.
    alpha : float in (0, 1), default=0.05
        Significance level of each paired test.
    higher_is_better : bool, default=True
        False sorts ascending (an error or a loss).
    scheme, n_boot, seed
        As :func:`paired_bootstrap`.

    Returns
    -------
    groups : list of list of str

    Raises
    ------
    MetricError
        On mismatched or duplicate names, decompositions with 2D values or different images, or
        bad options.

    Examples
    --------
    ``a`` and ``b`` are identical (p = 1: same group); ``c`` gets every image wrong where ``a``
    gets every image right (every replicate difference is 1, so p = 2 / 101 < 0.05):

    >>> right = Decomposition(values=[1] * 6, classes=[0, 0, 0, 1, 1, 1], n_classes=2)
    >>> wrong = Decomposition(values=[0] * 6, classes=[0, 0, 0, 1, 1, 1], n_classes=2)
    >>> tied_groups(["c", "a", "b"], [wrong, right, right], n_boot=100)
    [['a', 'b'], ['c']]
    """
    names_ = list(names)
    parts = list(decomps)
    if not names_ or len(names_) != len(parts):
        raise MetricError(
            "Expected `names` and `decomps` to be non-empty and of equal length, but got "
            f"{len(names_)} names and {len(parts)} decompositions."
        )
    seen: dict[str, int] = {}
    for position, name in enumerate(names_):
        if not isinstance(name, str):
            raise MetricError(f"Expected `names[{position}]` to be a str, but got {name!r}.")
        if name in seen:
            raise MetricError(
                f"Expected `names` to be distinct, but names[{position}] = {name!r} repeats "
                f"names[{seen[name]}]."
            )
        seen[name] = position
    for position, part in enumerate(parts):
        if not isinstance(part, Decomposition) or part.values.ndim != 1:
            got = (
                f"values of shape {part.values.shape}"
                if isinstance(part, Decomposition)
                else type(part).__name__
            )
            raise MetricError(
                f"Expected `decomps[{position}]` to be a Decomposition with 1D values, "
                f"but got {got}."
            )
    alpha_ = _check_fraction(alpha, "alpha")

    def p_value(leader: int, i: int) -> float:
        test = paired_bootstrap(parts[leader], parts[i], scheme=scheme, n_boot=n_boot, seed=seed)
        return float(test["p_value"])

    estimates = [float(point_estimate(part)) for part in parts]
    return leader_groups(names_, estimates, p_value, alpha_, higher_is_better)


def leader_groups(
    names: Sequence[str],
    estimates: Sequence[float],
    p_value: Callable[[int, int], float],
    alpha: float,
    higher_is_better: bool,
) -> list[list[str]]:
    """The bracket rule of :func:`tied_groups`, given ``p_value(leader, i)`` of a paired test.

    Sort best first (stable); the best leads the first group; walking down, a submission joins
    the current group when ``p_value(leader, i) >= alpha``, else it leads a new group.
    """
    sign = 1.0 if higher_is_better else -1.0
    order = sorted(range(len(names)), key=lambda i: -sign * estimates[i])
    groups: list[list[str]] = []
    leader = -1
    for i in order:
        if leader >= 0 and p_value(leader, i) >= alpha:
            groups[-1].append(names[i])
            continue
        groups.append([names[i]])
        leader = i
    return groups


# ------------------------------------------------------------------------------ ranks


def rank_matrix(
    scores: Mapping[str, Mapping[str, float]], *, higher_is_better: bool = True
) -> dict[str, Any]:
    r"""Friedman-style ranks of submissions across benchmarks (the GBU rank matrix).

    On each benchmark the submissions scored there are ranked 1 (best) to :math:`S_b`, ties
    getting their average rank (``scipy.stats.rankdata(method="average")``). With
    :math:`B_s` the benchmarks that scored submission :math:`s`:

    .. math::

        \bar r_s = \frac{1}{|B_s|} \sum_{b \in B_s} r_{sb}, \qquad
        \mathrm{counts}_{s, r} = \sum_{b \in B_s} \frac{[\, r^{\min}_{sb} \le r + 1 \le
            r^{\max}_{sb} \,]}{r^{\max}_{sb} - r^{\min}_{sb} + 1}

    where :math:`r^{\min}, r^{\max}` are the first and last positions of :math:`s`'s tie block:
    a submission tied over positions 1 and 2 adds 1/2 to each (an untied one adds 1 to its own
    position), so each row sums to :math:`|B_s|` and the count-weighted mean position is
    :math:`\bar r_s`.

    Parameters
    ----------
    scores : mapping of str to mapping of str to float
        ``scores[benchmark][submission]``: the (finite) primary score. A submission absent from
        a benchmark is a *missing cell*: it is not ranked there, and its mean rank runs over the
        benchmarks that scored it (which flatters submissions that skipped hard benchmarks; the
        ``n_benchmarks`` output says how many cells each mean covers).
    higher_is_better : bool, default=True

    Returns
    -------
    ranks : dict
        ``submissions`` (list of str, by mean rank then name), ``benchmarks`` (list of str, as
        given), ``ranks`` (float array [S, B], NaN for a missing cell), ``mean_rank`` (float
        array [S]), ``n_benchmarks`` (int array [S]), ``counts`` (float array [S, S]:
        ``counts[s, r]`` = number of benchmarks where s has rank r + 1, ties split), and
        ``missing`` (list of [submission, benchmark]).

    Raises
    ------
    MetricError
        If ``scores`` is empty, a benchmark scores no submission, or a score is not a finite
        number.

    References
    ----------
    .. [1] Y. Xian, C. H. Lampert, B. Schiele, Z. Akata, "Zero-Shot Learning -- A Comprehensive
       Evaluation of the Good, the Bad and the Ugly", IEEE TPAMI 41(9), 2019, Fig. 4.

    Examples
    --------
    On "x", a beats b and c (tied); on "y", b beats a; c is missing on "y". Ranks: a (1, 2), b
    (2.5, 1), c (2.5, -). Mean ranks a 1.5, b 1.75, c 2.5:

    >>> r = rank_matrix({"x": {"a": 0.9, "b": 0.5, "c": 0.5}, "y": {"a": 0.4, "b": 0.6}})
    >>> r["submissions"], r["mean_rank"].tolist()
    (['a', 'b', 'c'], [1.5, 1.75, 2.5])
    >>> r["counts"].tolist()
    [[1.0, 1.0, 0.0], [1.0, 0.5, 0.5], [0.0, 0.5, 0.5]]
    """
    if not isinstance(scores, Mapping) or not scores:
        raise MetricError(
            "Expected `scores` to be a non-empty mapping benchmark -> {submission: score}, "
            f"but got {scores!r}."
        )
    benchmarks = list(scores)
    columns: list[dict[str, float]] = []
    for benchmark in benchmarks:
        row = scores[benchmark]
        if not isinstance(row, Mapping) or not row:
            raise MetricError(
                f"Expected `scores[{benchmark!r}]` to map at least one submission to its score, "
                f"but got {row!r}."
            )
        column: dict[str, float] = {}
        for submission, value in row.items():
            bad = isinstance(value, bool) or not isinstance(
                value, int | float | np.integer | np.floating
            )
            if bad or not math.isfinite(float(value)):
                raise MetricError(
                    f"Expected `scores[{benchmark!r}][{submission!r}]` to be a finite number, "
                    f"but got {value!r}."
                )
            column[str(submission)] = float(value)
        columns.append(column)
    names = sorted({name for column in columns for name in column})
    index = {name: i for i, name in enumerate(names)}
    n_sub, n_bench = len(names), len(benchmarks)
    ranks = np.full((n_sub, n_bench), np.nan)
    counts = np.zeros((n_sub, n_sub))
    sign = -1.0 if higher_is_better else 1.0
    for b, column in enumerate(columns):
        rows = np.array([index[name] for name in column])
        keys = sign * np.array(list(column.values()))
        ranks[rows, b] = rankdata(keys, method="average")
        low = rankdata(keys, method="min").astype(np.int64)
        high = rankdata(keys, method="max").astype(np.int64)
        for row, lo, hi in zip(rows.tolist(), low.tolist(), high.tolist(), strict=True):
            counts[row, lo - 1 : hi] += 1.0 / (hi - lo + 1)
    present = ~np.isnan(ranks)
    n_benchmarks = present.sum(axis=1).astype(np.int64)
    mean_rank = np.where(present, ranks, 0.0).sum(axis=1) / n_benchmarks
    order = sorted(range(n_sub), key=lambda s: (float(mean_rank[s]), names[s]))
    missing = [
        [names[s], benchmarks[b]] for s in order for b in range(n_bench) if not present[s, b]
    ]
    return {
        "submissions": [names[s] for s in order],
        "benchmarks": benchmarks,
        "ranks": ranks[order],
        "mean_rank": mean_rank[order],
        "n_benchmarks": n_benchmarks[order],
        "counts": counts[order],
        "missing": missing,
    }
