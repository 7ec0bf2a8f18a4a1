r"""Calibrated stacking for GZSL: the exact seen-unseen accuracy curve, AUSUC and choosing gamma.

Calibrated stacking (Chao et al., ECCV 2016) counters the bias of GZSL models towards seen
classes by subtracting a constant :math:`\gamma` from every seen-class score before the argmax.

See docs/metrics/calibrated-stacking.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.checks import (
    BoolArray,
    FloatArray,
    IntArray,
    check_choice,
    check_scalar,
    check_scores_and_targets,
    check_seen,
    check_targets,
    check_vector,
    row_chunks,
)
from harness.core.errors import MetricError
from harness.metrics.base import MetricInput, MetricParams, MetricResult, register_metric
from harness.metrics.comparison import seen_unseen_class_values
from harness.metrics.flat import class_counts_checked, count_classes_with_images, reduce_per_class
from harness.metrics.gzsl import GzslAccuracies, harmonic_mean
from harness.metrics.registration import (
    class_mean,
    fit_scales,
    gzsl_h,
    require_setting,
    validation_of,
)
from harness.metrics.score_scale import carried

__all__ = [
    "CalibratedAccuracies",
    "SeenUnseenCurve",
    "area_under_seen_unseen_curve",
    "ausuc",
    "ausuc_of_resamples",
    "calibrated_harmonic_mean",
    "calibrated_stacking_curve",
    "calibrated_stacking_curve_from_margins",
    "per_image_correct_at_gamma",
    "select_gamma",
    "stacking_margins",
]


#: Validation H values within this relative distance of the best count as ties in
#: :func:`select_gamma`, so that rounding in the cumulative sums cannot decide a tie.
H_TIE_RTOL = 1e-12

_CRITERIA = ("harmonic_mean",)


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SeenUnseenCurve:
    """The seen-unseen accuracy curve of calibrated stacking: one value per open gamma interval.

    Built by :func:`calibrated_stacking_curve`; a curve built by hand is checked on construction
    (so :func:`area_under_seen_unseen_curve` may trust it). The arrays are read-only float64
    copies.

    See docs/metrics/calibrated-stacking.md, `SeenUnseenCurve`.
    """

    gamma: FloatArray
    seen_accuracy: FloatArray
    unseen_accuracy: FloatArray
    harmonic_mean: FloatArray

    def __post_init__(self) -> None:
        seen = check_vector(
            self.seen_accuracy,
            "curve.seen_accuracy",
            kind="real",
            entry="interval",
            allow_empty=False,
            low=0.0,
            high=1.0,
        )
        n = seen.shape[0]
        unseen = check_vector(
            self.unseen_accuracy,
            "curve.unseen_accuracy",
            n,
            kind="real",
            entry="interval",
            among="`curve.seen_accuracy`",
            low=0.0,
            high=1.0,
        )
        for key, array, rises in (
            ("seen_accuracy", seen, False),
            ("unseen_accuracy", unseen, True),
        ):
            steps = np.diff(array)
            bad = steps < 0.0 if rises else steps > 0.0
            if bad.any():
                position = int(np.argmax(bad)) + 1
                direction = "non-decreasing" if rises else "non-increasing"
                raise MetricError(
                    f"Expected `curve.{key}` to be {direction} in gamma, but got "
                    f"curve.{key}[{position}] = {array[position]} after {array[position - 1]}."
                )
        harmonic = check_vector(
            self.harmonic_mean,
            "curve.harmonic_mean",
            n,
            kind="real",
            entry="interval",
            among="`curve.seen_accuracy`",
        )
        gamma = check_vector(self.gamma, "curve.gamma", kind="real")
        if gamma.shape[0] != n + 1:
            raise MetricError(
                f"Expected `curve.gamma` to hold the {n + 1} edges of the {n} intervals, but got "
                f"{gamma.shape[0]} values."
            )
        for key, array in (
            ("gamma", gamma),
            ("seen_accuracy", seen),
            ("unseen_accuracy", unseen),
            ("harmonic_mean", harmonic),
        ):
            frozen = np.array(array, dtype=np.float64)  # never alias (or freeze) the caller's
            frozen.flags.writeable = False
            object.__setattr__(self, key, frozen)


@dataclass(frozen=True)
class CalibratedAccuracies(GzslAccuracies):
    """GZSL accuracies after calibrated stacking, and the ``gamma`` that gave them."""

    gamma: float


# --- private helpers -----------------------------------------------------------------------------


def _first_bad(mask: BoolArray) -> int:
    return int(np.argmax(mask))


def _checked_margins(
    y_true: Any, scores: Any, seen: Any, names: tuple[str, str, str] = ("y_true", "scores", "seen")
) -> tuple[npt.NDArray[np.int64], BoolArray, FloatArray, BoolArray]:
    """Check the inputs (named ``names`` in messages), then :func:`stacking_margins`.

    Returns the checked ``y_true`` and ``seen`` with the margins and group-correctness.
    """
    checked_y, checked_scores = check_scores_and_targets(y_true, scores, names=names[:2])
    seen_mask = check_seen(seen, checked_scores.shape[1], names[2])
    margin, group_correct = _margins_checked(checked_y, checked_scores, seen_mask)
    return checked_y, seen_mask, margin, group_correct


def _margins_checked(
    y_true: npt.NDArray[np.int64], scores: npt.NDArray[Any], seen: BoolArray
) -> tuple[FloatArray, BoolArray]:
    """:func:`stacking_margins` on checked inputs, in row chunks of bounded size."""
    n_images, n_candidates = scores.shape
    seen_columns = np.flatnonzero(seen)
    unseen_columns = np.flatnonzero(~seen)
    margin = np.empty(n_images, dtype=np.float64)
    group_correct = np.empty(n_images, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for start, stop in row_chunks(n_images, n_candidates):
            block = np.asarray(scores[start:stop])
            rows = np.arange(stop - start)
            targets = y_true[start:stop]
            true_scores = block[rows, targets]
            image_seen = seen[targets]
            best_seen = block[:, seen_columns].max(axis=1).astype(np.float64)
            best_unseen = block[:, unseen_columns].max(axis=1).astype(np.float64)
            margin[start:stop] = best_seen - best_unseen
            # Columns of the image's own group scoring >= its true class, the true class included.
            same_group = seen[None, :] == image_seen[:, None]
            at_least = np.count_nonzero((block >= true_scores[:, None]) & same_group, axis=1)
            group_correct[start:stop] = at_least == 1
    finite = np.isfinite(margin)
    if not finite.all():
        row = _first_bad(~finite)
        raise MetricError(
            "Expected `scores` to give a finite margin (best seen score minus best unseen score) "
            f"in float64 for every row, but row {row} gives {margin[row]}. Rescale the scores, "
            "e.g. divide them by their largest magnitude."
        )
    return margin, group_correct


def _correct_checked(
    y_true: npt.NDArray[np.int64],
    margin: FloatArray,
    group_correct: BoolArray,
    seen: BoolArray,
    gamma: float,
) -> BoolArray:
    """Per-image correctness at ``gamma`` from the margin decomposition.

    See docs/metrics/calibrated-stacking.md.
    """
    image_seen = seen[y_true]
    wins = np.where(image_seen, gamma < margin, gamma > margin)
    result: BoolArray = group_correct & wins
    return result


def _harmonic_mean_array(seen: FloatArray, unseen: FloatArray) -> FloatArray:
    """:func:`harness.metrics.gzsl.harmonic_mean` elementwise, with the same formula."""
    low = np.minimum(seen, unseen)
    high = np.maximum(seen, unseen)
    positive = low > 0.0
    h = np.zeros_like(low)
    np.divide(high, low + high, out=h, where=positive)
    h = 2.0 * low * h
    result: FloatArray = np.minimum(np.maximum(h, low), high)
    result[~positive] = 0.0
    return result


# --- public API ----------------------------------------------------------------------------------


def stacking_margins(
    y_true: npt.ArrayLike, scores: npt.ArrayLike, *, seen: npt.ArrayLike
) -> tuple[FloatArray, BoolArray]:
    """Per-image margins and group-correctness: the sufficient statistics of calibrated stacking.

    >>> margin, group_correct = stacking_margins(
    ...     [0, 1], [[3.0, 1.0, 0.0], [2.0, 2.0, 1.0]], seen=[True, True, False]
    ... )
    >>> margin, group_correct
    (array([3., 1.]), array([ True, False]))

    See docs/metrics/calibrated-stacking.md, `stacking_margins`.
    """
    _, _, margin, group_correct = _checked_margins(y_true, scores, seen)
    return margin, group_correct


def _checked_margin_statistics(
    y_true: npt.ArrayLike, margin: npt.ArrayLike, group_correct: npt.ArrayLike, seen: npt.ArrayLike
) -> tuple[IntArray, BoolArray, FloatArray, BoolArray]:
    """The inputs of :func:`calibrated_stacking_curve_from_margins`, checked: ``(y_true, seen,
    margin, group_correct)``."""
    seen_mask = check_seen(seen, None)
    checked_y = check_targets(y_true, seen_mask.shape[0])
    n_images = checked_y.shape[0]
    margins = check_vector(margin, "margin", n_images, kind="real", finite=True)
    correct = check_vector(group_correct, "group_correct", n_images, kind="bool")
    return checked_y, seen_mask, margins, correct


def calibrated_stacking_curve_from_margins(
    y_true: npt.ArrayLike,
    margin: npt.ArrayLike,
    group_correct: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
) -> SeenUnseenCurve:
    """:func:`calibrated_stacking_curve` from the per-image statistics of :func:`stacking_margins`.

    The fast path for resampling: index ``y_true``, ``margin`` and ``group_correct`` with the
    same image indices and call this; the cost is one sort of the group-correct margins.

    >>> curve = calibrated_stacking_curve_from_margins(
    ...     [0, 1, 2, 2], [3.0, 1.0, 1.0, 0.5], [True] * 4, seen=[True, True, False]
    ... )
    >>> curve.gamma, curve.seen_accuracy
    (array([-inf,  0.5,  1. ,  3. ,  inf]), array([1. , 1. , 0.5, 0. ]))

    See docs/metrics/calibrated-stacking.md, `calibrated_stacking_curve_from_margins`.
    """
    checked_y, seen_mask, margins, correct = _checked_margin_statistics(
        y_true, margin, group_correct, seen
    )
    n_candidates = seen_mask.shape[0]

    totals = np.bincount(checked_y, minlength=n_candidates)
    n_seen_classes = count_classes_with_images(
        totals, np.flatnonzero(seen_mask), "the seen classes"
    )
    n_unseen_classes = count_classes_with_images(
        totals, np.flatnonzero(~seen_mask), "the unseen classes"
    )

    # Each group-correct image moves its class's accuracy by 1 / n_class at its margin: down for
    # a seen image (right below the margin), up for an unseen one (right above it).
    eligible = np.flatnonzero(correct)
    eligible_y = checked_y[eligible]
    weights = 1.0 / totals[eligible_y]
    image_seen = seen_mask[eligible_y]
    breakpoints, inverse = np.unique(margins[eligible], return_inverse=True)
    n_breaks = breakpoints.shape[0]
    seen_drop = np.bincount(inverse, weights=np.where(image_seen, weights, 0.0), minlength=n_breaks)
    unseen_gain = np.bincount(
        inverse, weights=np.where(image_seen, 0.0, weights), minlength=n_breaks
    )

    # Interval j lies between breakpoints j-1 and j. Seen: the drops still to come (a suffix
    # sum, exactly 0 on the last interval); unseen: the gains so far (exactly 0 on the first).
    # Cumulative sums of non-negative terms are monotone in floating point too.
    seen_accuracy = np.zeros(n_breaks + 1)
    seen_accuracy[:n_breaks] = np.cumsum(seen_drop[::-1])[::-1] / n_seen_classes
    unseen_accuracy = np.zeros(n_breaks + 1)
    unseen_accuracy[1:] = np.cumsum(unseen_gain) / n_unseen_classes
    np.minimum(seen_accuracy, 1.0, out=seen_accuracy)
    np.minimum(unseen_accuracy, 1.0, out=unseen_accuracy)
    return SeenUnseenCurve(
        gamma=np.concatenate(([-np.inf], breakpoints, [np.inf])),
        seen_accuracy=seen_accuracy,
        unseen_accuracy=unseen_accuracy,
        harmonic_mean=_harmonic_mean_array(seen_accuracy, unseen_accuracy),
    )


def calibrated_stacking_curve(
    y_true: npt.ArrayLike, scores: npt.ArrayLike, *, seen: npt.ArrayLike
) -> SeenUnseenCurve:
    r"""The exact seen-unseen accuracy curve of calibrated stacking over every :math:`\gamma`.

    The curve is constant between breakpoints (the distinct margins of group-correct images), so one
    value per open interval describes it exactly, not sampled on a grid.

    See docs/metrics/calibrated-stacking.md, `calibrated_stacking_curve`.
    """
    checked_y, seen_mask, margin, group_correct = _checked_margins(y_true, scores, seen)
    return calibrated_stacking_curve_from_margins(checked_y, margin, group_correct, seen=seen_mask)


def area_under_seen_unseen_curve(curve: SeenUnseenCurve) -> float:
    r"""Area under the seen-unseen accuracy curve (AUSUC) of calibrated stacking.

    The curve's points (unseen accuracy, seen accuracy), from gamma = -inf to +inf, joined by
    straight segments: the trapezoid rule over them.

    See docs/metrics/calibrated-stacking.md, `area_under_seen_unseen_curve`.
    """
    if not isinstance(curve, SeenUnseenCurve):
        raise MetricError(
            "Expected `curve` to be a SeenUnseenCurve (from `calibrated_stacking_curve`), "
            f"but got {type(curve).__name__}."
        )
    return _trapezoid_area(curve.seen_accuracy, curve.unseen_accuracy)


def _trapezoid_area(seen: FloatArray, unseen: FloatArray) -> float:
    """The trapezoid rule over the points (unseen[i], seen[i]), clipped to [0, 1]."""
    area = float(np.sum(np.diff(unseen) * (seen[:-1] + seen[1:])) / 2.0)
    return min(max(area, 0.0), 1.0)


def ausuc_of_resamples(
    y_true: npt.ArrayLike,
    margin: npt.ArrayLike,
    group_correct: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
    index_rows: npt.ArrayLike,
) -> FloatArray:
    """The AUSUC of many resamples of the test images at once (the bootstrap's replicates).

    Row b of ``index_rows`` names the images of resample b (repeats allowed); value b is, bit
    for bit, the area under :func:`calibrated_stacking_curve_from_margins` of ``y_true``,
    ``margin`` and ``group_correct`` indexed by that row. The margins are ranked once for all
    rows; a row's breakpoints are the ranks it holds, and its per-breakpoint sums are taken in
    the row's order (``np.bincount``), as the one-resample function takes them.

    See docs/metrics/calibrated-stacking.md, `ausuc_of_resamples`.

    >>> rows = [[0, 1, 2, 3], [0, 0, 2, 2]]
    >>> ausuc_of_resamples([0, 1, 2, 2], [3.0, 1.0, 1.0, 0.5], [True] * 4,
    ...                    seen=[True, True, False], index_rows=rows).tolist()
    [0.875, 1.0]
    """
    return _RankedMargins.of(y_true, margin, group_correct, seen).areas(index_rows)


@dataclass(frozen=True)
class _RankedMargins:
    """The checked inputs of :func:`ausuc_of_resamples` with the margins ranked, made once for
    every call of :meth:`areas` (a bootstrap calls it per chunk, or per replicate under
    ``"classes"``)."""

    y_true: IntArray
    seen: BoolArray
    correct: BoolArray
    image_rank: IntArray  # rank of each group-correct image's margin among all of them
    n_breaks: int

    @classmethod
    def of(
        cls,
        y_true: npt.ArrayLike,
        margin: npt.ArrayLike,
        group_correct: npt.ArrayLike,
        seen: npt.ArrayLike,
    ) -> _RankedMargins:
        checked_y, seen_mask, margins, correct = _checked_margin_statistics(
            y_true, margin, group_correct, seen
        )
        breakpoints, rank = np.unique(margins[correct], return_inverse=True)
        image_rank = np.zeros(checked_y.shape[0], dtype=np.int64)
        image_rank[correct] = rank
        return cls(checked_y, seen_mask, correct, image_rank, int(breakpoints.shape[0]))

    def areas(self, index_rows: npt.ArrayLike) -> FloatArray:
        """:func:`ausuc_of_resamples` of these inputs for ``index_rows``."""
        checked_y, seen_mask, correct = self.y_true, self.seen, self.correct
        n_candidates, n_images, n_breaks = seen_mask.shape[0], checked_y.shape[0], self.n_breaks
        rows = np.asarray(index_rows)
        if rows.ndim != 2 or not np.issubdtype(rows.dtype, np.integer):
            raise MetricError(
                "Expected `index_rows` to be a 2D integer array (one resample per row), but got "
                f"{rows.dtype} of shape {rows.shape}."
            )
        if rows.size and (rows.min() < 0 or rows.max() >= n_images):
            raise MetricError(
                f"Expected `index_rows` to hold image indices in [0, {n_images}), but got values"
                f" in [{int(rows.min())}, {int(rows.max())}]."
            )
        seen_classes, unseen_classes = np.flatnonzero(seen_mask), np.flatnonzero(~seen_mask)
        out = np.empty(rows.shape[0])
        # Small chunks (1/64 of the usual): every row is computed on its own, so the chunking
        # changes no bit, and a bootstrap's one call then works in a few MB that the allocator
        # reuses instead of some 100 MB of fresh pages (on the demo 0.13 s instead of 0.5 s).
        width = n_breaks + n_candidates + rows.shape[1]
        for start, stop in row_chunks(rows.shape[0], width, divisor=64):
            chunk = rows[start:stop]
            m = stop - start
            y = checked_y[chunk]
            totals = np.bincount(
                (np.arange(m)[:, None] * n_candidates + y).ravel(), minlength=m * n_candidates
            ).reshape(m, n_candidates)
            n_seen = np.count_nonzero(totals[:, seen_classes], axis=1)
            n_unseen = np.count_nonzero(totals[:, unseen_classes], axis=1)
            for b in np.flatnonzero((n_seen == 0) | (n_unseen == 0))[:1]:  # one-resample error
                count_classes_with_images(totals[b], seen_classes, "the seen classes")
                count_classes_with_images(totals[b], unseen_classes, "the unseen classes")
            row, position = np.nonzero(correct[chunk])  # row-major: each row's images in order
            eligible_y = y[row, position]
            weights = 1.0 / totals[row, eligible_y]
            image_seen = seen_mask[eligible_y]
            keys = row * n_breaks + self.image_rank[chunk[row, position]]
            size = m * n_breaks
            present = (np.bincount(keys, minlength=size) > 0).reshape(m, n_breaks)
            seen_drop = np.bincount(
                keys, weights=np.where(image_seen, weights, 0.0), minlength=size
            )
            unseen_gain = np.bincount(
                keys, weights=np.where(image_seen, 0.0, weights), minlength=size
            )
            # Suffix and prefix sums over all breakpoints: the ones a row lacks add exact zeros.
            seen_drop_last_first = seen_drop.reshape(m, n_breaks)[:, ::-1]
            seen_after = np.cumsum(seen_drop_last_first, axis=1)[:, ::-1] / n_seen[:, None]
            unseen_gain_by_row = unseen_gain.reshape(m, n_breaks)
            unseen_before = np.cumsum(unseen_gain_by_row, axis=1) / n_unseen[:, None]
            np.minimum(seen_after, 1.0, out=seen_after)
            np.minimum(unseen_before, 1.0, out=unseen_before)
            for b in range(m):
                keep = present[b]
                seen_accuracy = np.zeros(int(keep.sum()) + 1)
                seen_accuracy[:-1] = seen_after[b, keep]
                unseen_accuracy = np.zeros_like(seen_accuracy)
                unseen_accuracy[1:] = unseen_before[b, keep]
                out[start + b] = _trapezoid_area(seen_accuracy, unseen_accuracy)
        return out


def ausuc(y_true: npt.ArrayLike, scores: npt.ArrayLike, *, seen: npt.ArrayLike) -> float:
    """AUSUC of dense scores: the area under their :func:`calibrated_stacking_curve`.

    >>> ausuc([0, 1, 2, 2], [[3, 1, 0], [0, 2, 1], [2, 0, 1], [1, 0, 0.5]],
    ...       seen=[True, True, False])
    0.875

    See docs/metrics/calibrated-stacking.md, `ausuc`.
    """
    return area_under_seen_unseen_curve(calibrated_stacking_curve(y_true, scores, seen=seen))


def select_gamma(
    val_y_true: npt.ArrayLike,
    val_scores: npt.ArrayLike,
    *,
    val_seen: npt.ArrayLike,
    criterion: str = "harmonic_mean",
) -> float:
    r"""Choose the calibration :math:`\gamma` on validation predictions (never on test).

    >>> select_gamma([0, 1, 2, 2], [[3, 1, 0], [0, 2, 1], [2, 0, 1], [1, 0, 0.5]],
    ...              val_seen=[True, True, False])
    0.75

    See docs/metrics/calibrated-stacking.md, `select_gamma`.
    """
    checked_criterion = check_choice(criterion, "criterion", _CRITERIA)
    checked_y, seen_mask, margin, group_correct = _checked_margins(
        val_y_true, val_scores, val_seen, names=("val_y_true", "val_scores", "val_seen")
    )
    curve = calibrated_stacking_curve_from_margins(checked_y, margin, group_correct, seen=seen_mask)
    values = getattr(curve, checked_criterion)
    best_value = float(values.max())
    if best_value <= 0.0:
        return 0.0
    best = np.flatnonzero(values >= best_value * (1.0 - H_TIE_RTOL))
    low = curve.gamma[best]
    high = curve.gamma[best + 1]
    distance = np.where(low >= 0.0, low, np.where(high <= 0.0, -high, 0.0))
    choice = int(np.argmin(distance))  # first of the closest: the smaller gamma
    return float(low[choice] / 2.0 + high[choice] / 2.0)


def per_image_correct_at_gamma(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
    gamma: float,
) -> BoolArray:
    r"""Which images are right after subtracting :math:`\gamma` from every seen-class score.

    >>> scores = [[3.0, 1.0, 0.0], [2.0, 0.0, 1.0]]
    >>> per_image_correct_at_gamma([0, 2], scores, seen=[True, True, False], gamma=1.0)
    array([ True, False])
    >>> per_image_correct_at_gamma([0, 2], scores, seen=[True, True, False], gamma=1.5)
    array([ True,  True])

    See docs/metrics/calibrated-stacking.md, `per_image_correct_at_gamma`.
    """
    checked_gamma = check_scalar(gamma, "gamma")
    checked_y, seen_mask, margin, group_correct = _checked_margins(y_true, scores, seen)
    return _correct_checked(checked_y, margin, group_correct, seen_mask, checked_gamma)


def calibrated_harmonic_mean(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
    gamma: float,
) -> CalibratedAccuracies:
    """GZSL seen accuracy, unseen accuracy and H after calibrated stacking with a given gamma.

    >>> y_true = [0, 1, 2, 2]
    >>> scores = [[3, 1, 0], [0, 2, 1], [2, 0, 1], [1, 0, 0.5]]
    >>> seen = [True, True, False]
    >>> calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=0.0)
    CalibratedAccuracies(seen=1.0, unseen=0.0, harmonic_mean=0.0, gamma=0.0)
    >>> result = calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=0.75)
    >>> result.seen, result.unseen, round(result.harmonic_mean, 6)
    (1.0, 0.5, 0.666667)

    See docs/metrics/calibrated-stacking.md, `calibrated_harmonic_mean`.
    """
    checked_gamma = check_scalar(gamma, "gamma")
    checked_y, seen_mask, margin, group_correct = _checked_margins(y_true, scores, seen)
    correct = _correct_checked(checked_y, margin, group_correct, seen_mask, checked_gamma)
    hits, totals = class_counts_checked(checked_y, correct, seen_mask.shape[0])
    seen_value = reduce_per_class(
        hits, totals, np.flatnonzero(seen_mask), k=1, what="the seen classes"
    ).value
    unseen_value = reduce_per_class(
        hits, totals, np.flatnonzero(~seen_mask), k=1, what="the unseen classes"
    ).value
    return CalibratedAccuracies(
        seen=seen_value,
        unseen=unseen_value,
        harmonic_mean=harmonic_mean(seen_value, unseen_value),
        gamma=checked_gamma,
    )


# -- registrations: the registry's wrappers of the functions above --------------------------------


CURVE_POINTS = 400


def _thin(curve: SeenUnseenCurve) -> dict[str, Any]:
    """The curve's operating points for plotting, at most CURVE_POINTS of them (ends kept)."""
    seen, unseen = curve.seen_accuracy, curve.unseen_accuracy
    keep = np.unique(
        np.linspace(0, len(seen) - 1, min(len(seen), CURVE_POINTS)).round().astype(int)
    )
    return {
        "seen": [round(float(v), 6) for v in seen[keep]],
        "unseen": [round(float(v), 6) for v in unseen[keep]],
        "n_points": len(seen),
    }


@register_metric(
    "ausuc",
    formula=(
        "AUSUC = ∫ acc_S d acc_U along the seen–unseen curve traced by predicting argmax_c (s_ic − "
        "γ·[c seen]) as γ sweeps the real line"
    ),
    reference=(
        "Chao, Changpinyo, Gong, Sha: An Empirical Study and Analysis of Generalized Zero-Shot "
        "Learning for Object Recognition in the Wild, ECCV 2016"
    ),
    version="2",  # 2: per-class hits on the curve's points (paired tests between runs)
    averaged_over="classes",
    averaging_note="the curve traces the seen and the unseen per-class means",
    group="gzsl",
    figure="seen_unseen_curve",
    params=MetricParams,
    settings=("gzsl",),
    inputs=("dense",),
    chunkable=False,
)
def _ausuc(data: MetricInput, params: MetricParams) -> MetricResult:
    """Area under the seen-unseen accuracy curve of calibrated stacking (Chao et al. 2016)."""
    require_setting(data, "ausuc", ("gzsl",))
    assert data.scores is not None
    seen = np.asarray(data.seen, dtype=bool)
    margin, group_correct = stacking_margins(data.y_true, data.scores, seen=seen)
    curve = calibrated_stacking_curve_from_margins(data.y_true, margin, group_correct, seen=seen)
    y_true = np.asarray(data.y_true)

    return MetricResult(
        area_under_seen_unseen_curve(curve),
        {"curve": _thin(curve)},
        resample=_RankedMargins.of(y_true, margin, group_correct, seen).areas,
        class_values=seen_unseen_class_values(y_true, margin, group_correct, seen=seen),
    )


@dataclass(frozen=True)
class _Calibrated:
    accuracies: CalibratedAccuracies
    correct: np.ndarray  # per test image, at the applied gamma
    gamma_validation: float  # chosen on the validation fit's scores, in its units
    gamma: float  # the same gamma in the main fit's units, applied to its test scores
    scale_validation: float
    scale: float


def _calibrated(data: MetricInput, name: str) -> _Calibrated:
    require_setting(data, name, ("gzsl",))
    val = validation_of(data, name)
    assert data.scores is not None and val.scores is not None
    scale_val, scale = fit_scales(data, val, name)
    chosen = select_gamma(val.y_true, val.scores, val_seen=val.seen)
    gamma = carried(chosen, chosen_scale=scale_val, applied_scale=scale)
    out = calibrated_harmonic_mean(data.y_true, data.scores, seen=data.seen, gamma=gamma)
    correct = per_image_correct_at_gamma(data.y_true, data.scores, seen=data.seen, gamma=gamma)
    return _Calibrated(out, correct, chosen, gamma, scale_val, scale)


#: The paper calibrated stacking and AUSUC come from (their glossary reference).
CHAO_2016 = (
    "Chao, Changpinyo, Gong, Sha: An Empirical Study and Analysis of Generalized Zero-Shot"
    " Learning for Object Recognition in the Wild, ECCV 2016"
)


def _register_calibrated(key: str, name: str, doc: str, formula: str) -> None:
    def compute(data: MetricInput, params: MetricParams) -> MetricResult:
        run = _calibrated(data, name)
        out, correct = run.accuracies, run.correct
        image_seen = np.asarray(data.seen, dtype=bool)[data.y_true]
        if key == "harmonic_mean":
            decomposition = gzsl_h(correct, data)
        else:
            decomposition = class_mean(correct, data, image_seen if key == "seen" else ~image_seen)
        details = {
            "gamma": run.gamma,
            "seen": float(out.seen),
            "unseen": float(out.unseen),
            "harmonic_mean": float(out.harmonic_mean),
            "gamma_chosen_on": "validation",
            "gamma_validation": run.gamma_validation,
            "score_scale": run.scale,
            "score_scale_validation": run.scale_validation,
        }
        return MetricResult(float(getattr(out, key)), details, decomposition)

    compute.__doc__ = doc
    register_metric(
        name,
        version="2",  # 2: gamma reaches the main fit in units of each fit's score scale
        averaged_over="classes",
        group="gzsl",
        formula=formula,
        reference=CHAO_2016,
        averaging_note=(
            "harmonic mean of the seen and the unseen per-class means"
            if key == "harmonic_mean"
            else f"{key} classes only"
        ),
        settings=("gzsl",),
        inputs=("dense",),
        needs_validation=True,
        chunkable=False,
    )(compute)


_register_calibrated(
    "harmonic_mean",
    "calibrated_harmonic_mean",
    "GZSL H after calibrated stacking with gamma chosen on validation predictions (Chao et al.).",
    "H(γ*), γ* = argmax_γ H on the validation predictions; test images predict"
    " argmax_c (s_ic − γ*·(σ_main/σ_val)·[c seen]), σ a fit's score scale on the scale images",
)
_register_calibrated(
    "seen",
    "calibrated_seen_accuracy",
    "GZSL seen accuracy after calibrated stacking with gamma chosen on validation predictions.",
    "acc_S(γ*·σ_main/σ_val), γ* = argmax_γ H on the validation predictions, σ a fit's score"
    " scale on the scale images",
)
_register_calibrated(
    "unseen",
    "calibrated_unseen_accuracy",
    "GZSL unseen accuracy after calibrated stacking with gamma chosen on validation predictions.",
    "acc_U(γ*·σ_main/σ_val), γ* = argmax_γ H on the validation predictions, σ a fit's score"
    " scale on the scale images",
)
