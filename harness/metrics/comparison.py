"""Comparing runs: class-level paired bootstrap, tied groups, and ranks across benchmarks.

A run record cannot keep every image's value (it would grow with the test set), so each score
with a :class:`~harness.metrics.decomposition.Decomposition` keeps its *class values*: for every
class with test images, its image count, its group and the mean of its per-image values
(:class:`harness.records.ClassValues`). That is exactly what the ``"classes"`` resampling scheme
of :mod:`harness.metrics.bootstrap` needs, so runs of one benchmark version can be compared long
after they were scored.

See docs/metrics/comparison.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    IntArray,
    check_scalar,
)
from harness.core.errors import MetricError
from harness.metrics.bootstrap import bootstrap_samples, class_weights
from harness.metrics.darts import accuracy_specificity_areas
from harness.metrics.decomposition import COMBINES, Decomposition, point_estimate

__all__ = [
    "CURVE_CELLS",
    "ClassTable",
    "RunClassValues",
    "class_bootstrap",
    "class_point_estimates",
    "class_values",
    "curve_points",
    "darts_class_values",
    "paired_class_tests",
    "rank_matrix",
    "ratio_class_values",
    "seen_unseen_class_values",
    "stack_class_values",
    "tied_groups_from_tests",
]


#: Reductions of class values beyond a decomposition's: a ratio of two image means (mistake
#: severity), the DARTS accuracy-gain area and the seen-unseen area (AUSUC) from curve points.
CURVE_COMBINES: tuple[str, ...] = ("darts_area", "seen_unseen_area")
ALL_COMBINES: tuple[str, ...] = (*COMBINES, "ratio_of_means", *CURVE_COMBINES)
#: Budget of kept (class, point) cells of a curve: a record's curve class values hold at most
#: this many hits (and as many gains for DARTS), so they grow with the classes, not the images.
#: SUN's 717 GZSL classes keep 45 AUSUC points.
CURVE_CELLS = 32768
#: AUSUC keeps at most this many points (a curve with fewer intervals keeps them all: exact)...
MAX_CURVE_POINTS = 128
#: ...and at least this many, whatever the number of classes.
MIN_CURVE_POINTS = 16


#: Decimals a DARTS class's mean information gain keeps in a record (the area moves by less
#: than 1e-10).
GAIN_DECIMALS = 10


@dataclass(frozen=True)
class RunClassCurve:
    """The fields of :class:`harness.records.ClassCurve`: a text row per class of its hits at
    each point (images correct there) and, for DARTS, of their mean information gain; and the
    number of points of the full curve."""

    hits: tuple[str, ...]
    gains: tuple[str, ...] | None
    n_points: int


def _hits_rows(hits: IntArray) -> tuple[str, ...]:
    return tuple(" ".join(str(int(v)) for v in row) for row in hits)


def _gain_rows(gains: FloatArray) -> tuple[str, ...]:
    def text(value: float) -> str:
        return f"{value:.{GAIN_DECIMALS}f}".rstrip("0").rstrip(".") or "0"

    return tuple(" ".join(text(float(v)) for v in row) for row in gains)


def _rows(rows: Any, where: str) -> FloatArray:
    """Text rows of numbers (a record's: one space between numbers) as a ``[rows, points]``
    array; MetricError if ragged or not numbers.

    Parsed in one pass by NumPy: a site parses every run's curve rows (AUSUC: up to 128 numbers
    per class), millions of numbers that ``float()`` one by one would take seconds over."""
    texts = [str(row) for row in rows]
    widths = {text.count(" ") + 1 if text else 0 for text in texts}
    if len(widths) > 1:
        raise MetricError(f"Expected {where} to hold one row per class of equal length.")
    width = widths.pop() if widths else 0
    try:
        flat = np.array(" ".join(texts).split(), dtype=np.float64)
    except ValueError as error:
        raise MetricError(f"Expected {where} to hold rows of numbers: {error}.") from error
    if flat.size != len(texts) * width:
        raise MetricError(
            f"Expected {where} to hold rows of numbers separated by single spaces, one row per "
            "class of equal length."
        )
    return flat.reshape(len(texts), width)


@dataclass(frozen=True)
class RunClassValues:
    """The per-class summary a run record keeps of a score (:func:`class_values`,
    :func:`ratio_class_values`, :func:`darts_class_values`, :func:`seen_unseen_class_values`).

    The fields of :class:`harness.records.ClassValues` (build one with
    ``ClassValues.model_validate(values, from_attributes=True)``).

    See docs/metrics/comparison.md, `RunClassValues`.
    """

    combine: str
    classes: tuple[int, ...]
    counts: tuple[int, ...]
    groups: tuple[int, ...]
    means: tuple[float, ...]
    denominators: tuple[float, ...] | None = None
    curve: RunClassCurve | None = None


def class_values(decomp: Decomposition) -> RunClassValues | None:
    """The per-class summary a record keeps of ``decomp`` (None for 2D values).

    Returns
    -------
    values : RunClassValues or None
        ``combine``; ``classes`` (columns with images, ascending), ``counts``, ``groups`` and
        ``means`` (one per class) -- the fields of :class:`harness.records.ClassValues`.

    Examples
    --------
    >>> d = Decomposition(values=[1.0, 0.0, 1.0], classes=[0, 0, 2], n_classes=3)
    >>> v = class_values(d)
    >>> v.classes, v.counts, v.groups, v.means
    ((0, 2), (2, 1), (0, 0), (0.5, 1.0))
    """
    if decomp.values.ndim != 1:
        return None
    counts = np.bincount(decomp.classes, minlength=decomp.n_classes)
    sums = np.bincount(decomp.classes, weights=decomp.values, minlength=decomp.n_classes)
    present = np.flatnonzero(counts)
    assert decomp.groups is not None  # __post_init__ fills it
    return RunClassValues(
        combine=decomp.combine,
        classes=tuple(present.tolist()),
        counts=tuple(counts[present].tolist()),
        groups=tuple(decomp.groups[present].tolist()),
        means=tuple((sums[present] / counts[present]).tolist()),
    )


def ratio_class_values(decomp: Decomposition) -> RunClassValues:
    """The summary of a ratio of two image means: ``decomp`` holds a numerator and a
    denominator column per image (mistake severity: the cost of each mistake, 0 for a correct
    image, and 1 for a mistake), over *every* image, so runs line up class by class.

    >>> d = Decomposition(values=[[2, 1], [0, 0], [1, 1], [3, 1]], classes=[0, 0, 1, 1],
    ...                   n_classes=2, combine="image_mean")
    >>> v = ratio_class_values(d)
    >>> v.means, v.denominators
    ((1.0, 2.0), (0.5, 1.0))
    >>> float(class_point_estimates(stack_class_values([v]))[0])
    2.0

    See docs/metrics/comparison.md, `ratio_class_values`.
    """
    if decomp.values.ndim != 2 or decomp.values.shape[1] != 2:
        raise MetricError(
            "Expected a ratio's decomposition to hold two value columns (numerator, "
            f"denominator), but got values of shape {decomp.values.shape}."
        )
    counts = np.bincount(decomp.classes, minlength=decomp.n_classes)
    present = np.flatnonzero(counts)
    assert decomp.groups is not None  # __post_init__ fills it
    means = [
        np.bincount(decomp.classes, weights=decomp.values[:, j], minlength=decomp.n_classes)[
            present
        ]
        / counts[present]
        for j in (0, 1)
    ]
    return RunClassValues(
        combine="ratio_of_means",
        classes=tuple(present.tolist()),
        counts=tuple(counts[present].tolist()),
        groups=tuple(decomp.groups[present].tolist()),
        means=tuple(means[0].tolist()),
        denominators=tuple(means[1].tolist()),
    )


def darts_class_values(
    y_true: npt.ArrayLike,
    correct: npt.ArrayLike,
    gain: npt.ArrayLike,
    *,
    n_classes: int,
    groups: npt.ArrayLike | None = None,
) -> RunClassValues | None:
    r"""The summary of a DARTS area: per class and per curve point (one per reached target), the
    images correct there and their mean normalised information gain.

    A point's accuracy and gain are image means, so a class draw with multiplicities
    :math:`W_c` recomputes them as :math:`\sum_c W_c h_{cp} / \sum_c W_c n_c` and
    :math:`\sum_c W_c n_c \bar g_{cp} / \sum_c W_c n_c`, then the area
    (:func:`harness.metrics.darts.accuracy_specificity_areas`).

    See docs/metrics/comparison.md, `darts_class_values`.
    """
    y = np.asarray(y_true, dtype=np.int64)
    hit = np.asarray(correct, dtype=np.float64).reshape(-1, y.shape[0])
    gains = np.asarray(gain, dtype=np.float64).reshape(-1, y.shape[0])
    counts = np.bincount(y, minlength=n_classes)
    present = np.flatnonzero(counts)
    if present.shape[0] * hit.shape[0] > CURVE_CELLS:
        return None
    group = np.zeros(n_classes, np.int64) if groups is None else np.asarray(groups, np.int64)
    hits = np.stack(
        [np.bincount(y, weights=row, minlength=n_classes)[present] for row in hit], axis=1
    ).reshape(present.shape[0], hit.shape[0])
    mean_gain = (
        np.stack(
            [np.bincount(y, weights=row, minlength=n_classes)[present] for row in gains], axis=1
        ).reshape(present.shape[0], hit.shape[0])
        / counts[present][:, None]
    )
    return RunClassValues(
        combine="darts_area",
        classes=tuple(present.tolist()),
        counts=tuple(counts[present].tolist()),
        groups=tuple(group[present].tolist()),
        means=(),
        curve=RunClassCurve(
            hits=_hits_rows(np.rint(hits).astype(np.int64)),
            gains=_gain_rows(mean_gain),
            n_points=int(hit.shape[0]),
        ),
    )


def curve_points(n_classes: int, n_intervals: int) -> IntArray:
    """The kept intervals of a seen-unseen curve with ``n_intervals`` intervals: all of them
    when they fit, else evenly spaced indices (both ends kept), at most
    ``clip(CURVE_CELLS // n_classes, MIN_CURVE_POINTS, MAX_CURVE_POINTS)`` of them.

    >>> curve_points(100, 5).tolist()
    [0, 1, 2, 3, 4]
    >>> curve_points(717, 2197).shape
    (45,)
    """
    budget = min(MAX_CURVE_POINTS, max(MIN_CURVE_POINTS, CURVE_CELLS // max(n_classes, 1)))
    if n_intervals <= budget:
        return np.arange(n_intervals, dtype=np.int64)
    return np.unique(np.linspace(0, n_intervals - 1, budget).round().astype(np.int64))


def seen_unseen_class_values(
    y_true: npt.ArrayLike,
    margin: npt.ArrayLike,
    group_correct: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
) -> RunClassValues:
    r"""The summary of AUSUC: per class, the images correct on each kept interval of the
    calibrated-stacking curve (:func:`curve_points`).

    On interval j of the curve (between the j-th and (j+1)-th distinct margin of group-correct
    images, :func:`harness.metrics.calibrated_stacking.calibrated_stacking_curve`), a
    group-correct seen image with margin :math:`b_k` is right when :math:`j \le k`, an unseen
    one when :math:`j \ge k + 1`. The seen (unseen) accuracy of a point is the class mean of
    ``hits / counts`` over the seen (unseen) classes, so a class draw recomputes every point and
    the trapezoid area; with every interval kept it is the metric's AUSUC exactly, with a
    subsample the area of the chord through the kept points.

    See docs/metrics/comparison.md, `seen_unseen_class_values`.
    """
    seen_mask = np.asarray(seen, dtype=bool)
    n_classes = seen_mask.shape[0]
    y = np.asarray(y_true, dtype=np.int64)
    margins = np.asarray(margin, dtype=np.float64)
    eligible = np.flatnonzero(np.asarray(group_correct, dtype=bool))
    counts = np.bincount(y, minlength=n_classes)
    present = np.flatnonzero(counts)
    rank = np.full(n_classes, -1, dtype=np.int64)
    rank[present] = np.arange(present.shape[0])
    breakpoints, k = np.unique(margins[eligible], return_inverse=True)
    kept = curve_points(present.shape[0], breakpoints.shape[0] + 1)
    n_kept = kept.shape[0]
    cls = rank[y[eligible]]
    image_seen = seen_mask[y[eligible]]
    # A seen image is right on the kept points p < first kept index past k; an unseen one on
    # p >= first kept index >= k + 1: one +1 / -1 pair per image, summed along the points.
    stop = np.searchsorted(kept, k, side="right")
    start = np.searchsorted(kept, k + 1, side="left")
    steps = np.zeros((present.shape[0], n_kept + 1), dtype=np.int64)
    np.add.at(steps, (cls[image_seen], 0), 1)
    np.add.at(steps, (cls[image_seen], stop[image_seen]), -1)
    np.add.at(steps, (cls[~image_seen], start[~image_seen]), 1)
    hits = np.cumsum(steps, axis=1)[:, :n_kept]
    return RunClassValues(
        combine="seen_unseen_area",
        classes=tuple(present.tolist()),
        counts=tuple(counts[present].tolist()),
        groups=tuple((~seen_mask[present]).astype(np.int64).tolist()),
        means=(),
        curve=RunClassCurve(
            hits=_hits_rows(hits),
            gains=None,
            n_points=int(breakpoints.shape[0] + 1),
        ),
    )


@dataclass(frozen=True)
class CurveTable:
    """One run's curve class values as arrays: ``hits[c, p]`` and DARTS ``gains[c, p]``."""

    hits: FloatArray  # [C, P]
    gains: FloatArray | None  # [C, P]


@dataclass(frozen=True)
class ClassTable:
    """Class values of S runs on the same classes: ``means[s, c]`` for run s and class c
    (``ratio_of_means``: also ``denominators[s, c]``; the curve areas: ``curves[s]``)."""

    means: FloatArray  # [S, C]
    counts: IntArray  # [C]
    groups: IntArray  # [C]
    combine: str
    denominators: FloatArray | None = None  # [S, C]
    curves: tuple[CurveTable, ...] = ()

    @property
    def n_runs(self) -> int:
        return int(self.means.shape[0])


def _field(value: Any, name: str) -> Any:
    return value[name] if isinstance(value, Mapping) else getattr(value, name)


def stack_class_values(values: Sequence[Any]) -> ClassTable:
    """Line up the class values of several runs (``ClassValues`` models, their dicts, or
    :class:`RunClassValues`).

    Raises
    ------
    MetricError
        If ``values`` is empty, or a run's classes, counts, groups or reduction differ from the
        first run's (they were not scored on the same images), or its summaries are malformed
        (wrong lengths, non-finite numbers, hits outside ``[0, count]``), naming the run's
        position.
    """
    if not values:
        raise MetricError("Expected at least one run's class values, but got none.")
    first = values[0]
    classes = np.asarray(_field(first, "classes"), dtype=np.int64)
    counts = np.asarray(_field(first, "counts"), dtype=np.int64)
    groups = np.asarray(_field(first, "groups"), dtype=np.int64)
    combine = str(_field(first, "combine"))
    if combine not in ALL_COMBINES:
        raise MetricError(f"Expected `combine` in {ALL_COMBINES}, but values[0] has {combine!r}.")
    if not (classes.shape == counts.shape == groups.shape) or classes.ndim != 1 or not classes.size:
        raise MetricError(
            "Expected values[0] to hold equally long, non-empty classes, counts and groups, but "
            f"got {classes.shape[0]}, {counts.shape[0]} and {groups.shape[0]} entries."
        )
    if int(counts.min()) < 1:
        raise MetricError("Expected values[0] to list only classes with images (counts >= 1).")
    if combine == "seen_unseen_area" and set(groups.tolist()) != {0, 1}:
        raise MetricError(
            "Expected values[0] of a seen-unseen area to have seen (0) and unseen (1) classes, "
            f"but its groups are {sorted(set(groups.tolist()))}."
        )
    rows, denominators, curves = [], [], []
    for position, value in enumerate(values):
        for name, expected in (("classes", classes), ("counts", counts), ("groups", groups)):
            got = np.asarray(_field(value, name), dtype=np.int64)
            if not np.array_equal(got, expected):
                raise MetricError(
                    f"Expected values[{position}] to have the same {name} as values[0] (runs "
                    "scored on the same images of one benchmark version), but they differ."
                )
        if str(_field(value, "combine")) != combine:
            raise MetricError(
                f"Expected values[{position}] to reduce by {combine!r} like values[0], but got "
                f"{_field(value, 'combine')!r}."
            )
        if combine in CURVE_COMBINES:
            curves.append(_curve_table(_field(value, "curve"), counts, combine, position))
            continue
        rows.append(_finite_row(_field(value, "means"), classes.shape[0], position, "means"))
        if combine == "ratio_of_means":
            row = _finite_row(
                _field(value, "denominators"), classes.shape[0], position, "denominators"
            )
            if float(row.min()) < 0:
                raise MetricError(
                    f"Expected values[{position}].denominators to be non-negative, but one is "
                    f"{float(row.min())}."
                )
            denominators.append(row)
    n_runs = len(values)
    return ClassTable(
        means=np.stack(rows) if rows else np.zeros((n_runs, 0)),
        counts=counts,
        groups=groups,
        combine=combine,
        denominators=np.stack(denominators) if denominators else None,
        curves=tuple(curves),
    )


def _finite_row(value: Any, n: int, position: int, name: str) -> FloatArray:
    row = np.asarray([] if value is None else value, dtype=np.float64)
    if row.shape != (n,) or not np.all(np.isfinite(row)):
        raise MetricError(
            f"Expected values[{position}].{name} to hold {n} finite numbers, but got "
            f"{row.shape[0] if row.ndim else 0} (or a non-finite one)."
        )
    return row


def _curve_table(curve: Any, counts: IntArray, combine: str, position: int) -> CurveTable:
    """One run's curve class values as checked arrays (a record is untrusted input)."""
    where = f"values[{position}].curve"
    if curve is None:
        raise MetricError(f"Expected {where} for combine={combine!r}, but it is missing.")
    hits = _rows(_field(curve, "hits"), f"{where}.hits")
    gains_field = _field(curve, "gains")
    gains = None if gains_field is None else _rows(gains_field, f"{where}.gains")
    n = counts.shape[0]
    if hits.shape[0] != n:
        raise MetricError(
            f"Expected {where}.hits to hold one row of points per class ({n}), but got "
            f"{hits.shape[0]} rows."
        )
    if combine == "seen_unseen_area" and hits.shape[1] < 1:
        raise MetricError(f"Expected {where}.hits to hold at least one point per class.")
    if not np.all(np.isfinite(hits)) or np.any(hits < 0) or np.any(hits > counts[:, None]):
        raise MetricError(f"Expected {where}.hits to lie within [0, the class's images].")
    if combine == "darts_area":
        if gains is None or gains.shape != hits.shape:
            raise MetricError(
                f"Expected {where}.gains to have the shape of its hits {hits.shape}, but got "
                f"{None if gains is None else gains.shape}."
            )
        if not np.all(np.isfinite(gains)) or np.any(gains < 0) or np.any(gains > 1):
            raise MetricError(f"Expected {where}.gains to lie within [0, 1].")
    return CurveTable(hits=hits, gains=gains)


def _per_class_decomposition(table: ClassTable) -> tuple[Decomposition, Callable[..., FloatArray]]:
    """One row per class: resampling it over classes equals resampling the runs' images."""
    n = table.counts.shape[0]
    if table.combine in ("image_mean", "ratio_of_means"):
        # Under class weights w: sum w n a / sum w n b is the ratio of two class means (b = 1
        # for an image mean).
        counts = table.counts[:, None].astype(np.float64)
        below = counts if table.denominators is None else table.denominators.T * counts
        values = np.concatenate([table.means.T * counts, below], axis=1)
        decomp = Decomposition(
            values=values, classes=np.arange(n), n_classes=n, groups=table.groups
        )
        n_below = below.shape[1]

        def finish(out: FloatArray) -> FloatArray:
            above, under = out[..., :-n_below], out[..., -n_below:]
            # A ratio with nothing below (no mistake in the drawn classes) is 0, as the metric
            # reports for a run without mistakes.
            ratio = np.divide(above, under, out=np.zeros_like(above), where=under > 0)
            return np.asarray(ratio, dtype=np.float64)

        return decomp, finish
    decomp = Decomposition(
        values=table.means.T,
        classes=np.arange(n),
        n_classes=n,
        groups=table.groups,
        combine=table.combine,  # type: ignore[arg-type]
    )
    return decomp, lambda out: np.asarray(out, dtype=np.float64)


def _curve_areas(table: ClassTable, weights: FloatArray) -> FloatArray:
    """Each run's curve area ``[B, S]`` under class multiplicities ``weights [B, C]``.

    The runs' per-class curve columns are stacked side by side, so each quantity of every run
    is one matrix product with the weights (runs have their own number of points)."""
    counts = table.counts.astype(np.float64)
    out = np.empty((weights.shape[0], len(table.curves)))
    widths = [curve.hits.shape[1] for curve in table.curves]
    bounds = np.cumsum([0, *widths])
    if table.combine == "darts_area":
        images = (weights @ counts)[:, None]
        accuracy = (weights @ np.hstack([curve.hits for curve in table.curves])) / images
        gains = []
        for curve in table.curves:
            assert curve.gains is not None  # checked by _curve_table
            gains.append(curve.gains * counts[:, None])
        gain = (weights @ np.hstack(gains)) / images
        for s in range(len(table.curves)):
            part = slice(bounds[s], bounds[s + 1])
            out[:, s] = accuracy_specificity_areas(accuracy[:, part], gain[:, part])
        return out
    seen = table.groups == 0
    rate = np.hstack([curve.hits for curve in table.curves]) / counts[:, None]
    group_acc = []
    for mask in (seen, ~seen):
        w = weights[:, mask]
        group_acc.append((w @ rate[mask]) / w.sum(axis=1)[:, None])
    seen_all, unseen_all = group_acc
    for s in range(len(table.curves)):
        part = slice(bounds[s], bounds[s + 1])
        seen_acc, unseen_acc = seen_all[:, part], unseen_all[:, part]
        # the trapezoid rule of harness.metrics.calibrated_stacking.area_under_seen_unseen_curve
        heights = (seen_acc[:, 1:] + seen_acc[:, :-1]) / 2.0
        out[:, s] = (np.diff(unseen_acc, axis=1) * heights).sum(axis=1)
    return out


def class_point_estimates(table: ClassTable) -> FloatArray:
    """Each run's score ``[S]``, recomputed from its class values.

    Examples
    --------
    >>> t = stack_class_values([{"combine": "image_mean", "classes": [0, 1], "counts": [3, 1],
    ...                          "groups": [0, 0], "means": [1 / 3, 1.0]}])
    >>> class_point_estimates(t).tolist()
    [0.5]
    """
    if table.combine in CURVE_COMBINES:
        return _curve_areas(table, np.ones((1, table.counts.shape[0])))[0]
    decomp, finish = _per_class_decomposition(table)
    return finish(np.atleast_1d(np.asarray(point_estimate(decomp))))


def class_bootstrap(table: ClassTable, *, n_boot: int = 1000, seed: int = 0) -> FloatArray:
    """Replicates ``[n_boot, S]``: classes resampled within groups, the same draws for every run."""
    if table.combine in CURVE_COMBINES:
        return _curve_areas(table, class_weights(table.groups, n_boot=n_boot, seed=seed))
    decomp, finish = _per_class_decomposition(table)
    samples = bootstrap_samples(decomp, scheme="classes", n_boot=n_boot, seed=seed)
    return finish(samples.reshape(n_boot, -1))


@dataclass(frozen=True, eq=False)
class PairedTests:
    """Paired tests between every two runs (:func:`paired_class_tests`); ``[s, t]`` is s minus t.

    Attributes
    ----------
    estimates : ndarray of float64 of shape (S,)
        Each run's score, recomputed from its class values.
    diff, lo, hi : ndarray of float64 of shape (S, S)
        The observed differences (antisymmetric) and the percentile interval of the replicate
        differences (``[t, s]`` mirrors ``[s, t]``).
    p_value : ndarray of float64 of shape (S, S)
        Two-sided p-values, symmetric, 1 on the diagonal.
    """

    estimates: FloatArray
    diff: FloatArray
    lo: FloatArray
    hi: FloatArray
    p_value: FloatArray


def paired_class_tests(
    table: ClassTable, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PairedTests:
    r"""Paired class-level bootstrap tests between every two runs.

    Every run gets the *same* class draws in every replicate, so the spread of a difference
    reflects only where the runs disagree.

    Entry ``[s, t]`` holds the observed difference of runs s and t, the percentile interval of its
    replicates and a two-sided bootstrap p-value.

    See docs/metrics/comparison.md, `paired_class_tests`.
    """
    level = check_scalar(level, "level", low=0, high=1, closed="neither")
    estimates = class_point_estimates(table)
    n = table.n_runs
    diff = estimates[:, None] - estimates[None, :]
    lo = np.zeros((n, n))
    hi = np.zeros((n, n))
    p_value = np.ones((n, n))
    if n > 1:
        replicates = np.ascontiguousarray(class_bootstrap(table, n_boot=n_boot, seed=seed).T)
        first, second = np.triu_indices(n, 1)
        diffs = replicates[first] - replicates[second]  # [pairs, n_boot], one row per pair
        # Sorted rows make each quantile a cheap selection (the same order statistics).
        diffs.sort(axis=1)
        q_lo, q_hi = np.quantile(diffs, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=1)
        observed = diff[first, second]
        other = np.where(
            observed > 0,
            (diffs <= 0).sum(axis=1),
            np.where(observed < 0, (diffs >= 0).sum(axis=1), 0),
        )
        p = np.where(observed == 0, 1.0, np.minimum(1.0, 2.0 * (other + 1) / (n_boot + 1)))
        lo[first, second], hi[first, second] = q_lo, q_hi
        # [t, s] is the negated replicates of [s, t]: its interval is the mirrored one.
        lo[second, first], hi[second, first] = -q_hi, -q_lo
        p_value[first, second] = p_value[second, first] = p
    return PairedTests(estimates=estimates, diff=diff, lo=lo, hi=hi, p_value=p_value)


def tied_groups_from_tests(
    names: Sequence[str],
    estimates: Sequence[float] | FloatArray,
    p_values: FloatArray,
    *,
    alpha: float = 0.05,
    higher_is_better: bool = True,
) -> list[list[str]]:
    """Leaderboard brackets from precomputed paired tests: runs not separable from their leader.

    Rule: sort the runs by estimate, best first (stable: equal estimates keep the given order).
    The first run leads the first group. Walking down the order, a run joins the current group
    when its test against the group's leader is not significant (``p_values[leader, run] >=
    alpha``), and otherwise starts a new group that it leads. So groups are disjoint, ordered
    best first, each sorted best first, and every member is inseparable from its group's leader
    (not necessarily from every other member).

    Examples
    --------
    >>> p = np.array([[1, .5, .01], [.5, 1, .2], [.01, .2, 1]])
    >>> tied_groups_from_tests(["a", "b", "c"], [0.9, 0.8, 0.7], p)
    [['a', 'b'], ['c']]
    """
    names_ = list(names)
    est = np.asarray(estimates, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    if len(set(names_)) != len(names_) or est.shape != (len(names_),):
        raise MetricError(
            f"Expected distinct names and one estimate each, but got {len(names_)} names "
            f"({len(set(names_))} distinct) and estimates of shape {est.shape}."
        )
    if p.shape != (len(names_), len(names_)):
        raise MetricError(
            f"Expected p_values of shape ({len(names_)}, {len(names_)}), but got {p.shape}."
        )
    checked_alpha = check_scalar(alpha, "alpha", low=0, high=1, closed="neither")
    sign = 1.0 if higher_is_better else -1.0
    order = sorted(range(len(names_)), key=lambda i: -sign * float(est[i]))
    groups: list[list[str]] = []
    leader = -1
    for i in order:
        if leader >= 0 and float(p[leader, i]) >= checked_alpha:
            groups[-1].append(names_[i])
            continue
        groups.append([names_[i]])
        leader = i
    return groups


# ------------------------------------------------------------------------------ ranks


@dataclass(frozen=True, eq=False)
class RankMatrix:
    """Ranks of submissions across benchmarks (:func:`rank_matrix`), rows in leaderboard order:
    more benchmarks covered first, then by mean rank over the covered ones, then by name.

    See docs/metrics/comparison.md, `RankMatrix`.
    """

    submissions: tuple[str, ...]
    benchmarks: tuple[str, ...]
    ranks: FloatArray
    mean_rank: FloatArray
    n_benchmarks: IntArray
    counts: FloatArray
    missing: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict of lists and arrays (``missing`` as [submission, benchmark])."""
        return {
            "submissions": list(self.submissions),
            "benchmarks": list(self.benchmarks),
            "ranks": self.ranks,
            "mean_rank": self.mean_rank,
            "n_benchmarks": self.n_benchmarks,
            "counts": self.counts,
            "missing": [list(cell) for cell in self.missing],
        }


def rank_matrix(
    scores: Mapping[str, Mapping[str, float]], *, higher_is_better: bool = True
) -> RankMatrix:
    """Friedman-style ranks of submissions across benchmarks (the GBU rank matrix).

    On each benchmark the submissions scored there are ranked 1 (best) to :math:`S_b`, ties
    getting their average rank (``scipy.stats.rankdata(method="average")``). A submission's mean
    rank runs over the benchmarks that scored it, and its row counts how often it took each
    position (a tie block shares its positions).

    See docs/metrics/comparison.md, `rank_matrix`.
    """
    # scipy.stats costs ~0.5 s to import: only ranking pays it, not loading a spec.
    from scipy.stats import rankdata

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
            column[str(submission)] = check_scalar(
                value, f"scores[{benchmark!r}][{submission!r}]", finite=True
            )
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
    # Coverage first (see Notes): a mean over fewer benchmarks never outranks one over more.
    order = sorted(
        range(n_sub), key=lambda s: (-int(n_benchmarks[s]), float(mean_rank[s]), names[s])
    )
    missing = tuple(
        (names[s], benchmarks[b]) for s in order for b in range(n_bench) if not present[s, b]
    )
    return RankMatrix(
        submissions=tuple(names[s] for s in order),
        benchmarks=tuple(benchmarks),
        ranks=ranks[order],
        mean_rank=mean_rank[order],
        n_benchmarks=n_benchmarks[order],
        counts=counts[order],
        missing=missing,
    )
