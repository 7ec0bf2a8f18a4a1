"""Decompositions: a benchmark score written as a reduction of per-image values by true class.

Every scalar metric of this engine is a reduction of *per-image values* grouped by the image's
true class (a :class:`Decomposition`).

See docs/metrics/decomposition.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    IntArray,
    _first_out_of_range,
    _integer_array,
    check_choice,
    check_integer,
    check_real_rows,
    check_vector,
)
from harness.core.errors import MetricError

# scipy.sparse costs ~0.2 s to import: the functions that use it import it, so that loading a
# spec (or zsl --help) does not pay for it.
if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["COMBINES", "Decomposition", "concatenate", "point_estimate"]

Combine = Literal["class_mean", "image_mean", "harmonic_of_groups"]
#: Allowed values of :attr:`Decomposition.combine`.
COMBINES: tuple[str, ...] = ("class_mean", "image_mean", "harmonic_of_groups")


# ------------------------------------------------------------------------------ layout


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
    """A scalar (or ``m`` scalars) written as a reduction of per-image values by true class.

    Three reductions: the mean of class means (``class_mean``), the mean over images
    (``image_mean``), and the harmonic mean of group class means (``harmonic_of_groups``, GZSL's
    H). Classes without images are left out and reported.

    >>> d = Decomposition(values=[1.0, 0.0, 1.0], classes=[0, 0, 1], n_classes=3)
    >>> point_estimate(d), d.excluded_classes.tolist()
    (0.75, [2])

    See docs/metrics/decomposition.md, `Decomposition`.
    """

    values: npt.NDArray[np.float64]
    classes: npt.NDArray[np.int64]
    n_classes: int
    groups: npt.NDArray[np.int64] | None = None
    combine: Combine = "class_mean"

    def __post_init__(self) -> None:
        n_classes = check_integer(self.n_classes, "n_classes", low=1)
        combine = check_choice(self.combine, "combine", COMBINES)
        values = np.asarray(self.values)
        if values.size == 0 and values.dtype.kind not in "biuf":
            values = values.astype(np.float64)
        values = check_real_rows(values, "values")
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
        mask = check_vector(seen, "seen", kind="bool", entry="candidate column")
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
        import scipy.sparse as sp

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
    """The value of a decomposition: a float for 1D values, an array ``[m]`` for 2D values.

    See :class:`Decomposition` for the three reductions.

    >>> d = Decomposition(values=[1, 0, 1], classes=[0, 0, 1], n_classes=2)
    >>> point_estimate(d)
    0.75
    >>> d2 = Decomposition(values=[1, 0, 1], classes=[0, 0, 1], n_classes=2, combine="image_mean")
    >>> round(point_estimate(d2), 12)
    0.666666666667

    See docs/metrics/decomposition.md, `point_estimate`.
    """
    layout = decomp._layout
    value = _reduce(decomp, decomp._class_sums[None], np.ones((1, layout.n_present)))[0]
    if decomp.values.ndim == 1:
        return float(value[0])
    return value
