"""Flat (hierarchy-free) top-k accuracy: pure numpy functions over dense scores.

Every function follows validate -> count -> reduce: inputs go through
:mod:`harness.checks`, :func:`top_k_correct` decides which images are correct,
:func:`per_class_counts` turns that into per-class hit and image counts (the stored statistic),
and the accuracies reduce from those counts. Options are keyword-only. Accuracy means the mean of
per-class accuracies unless the name says ``per_image``.

See docs/metrics/flat.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from harness.checks import (
    _describe,
    _integer_array,
    check_classes,
    check_integer,
    check_k,
    check_scores_and_targets,
    check_targets,
    check_vector,
    row_chunks,
)
from harness.core.errors import MetricError
from harness.metrics.base import MetricInput, MetricParams, MetricResult, register_metric
from harness.metrics.decomposition import point_estimate
from harness.metrics.registration import (
    class_ids,
    class_mean,
    curve_ks,
    image_mean,
    per_class_by_id,
)

__all__ = [
    "PerClassAccuracy",
    "per_class_counts",
    "per_class_top_k_accuracy",
    "per_class_top_k_accuracy_details",
    "per_image_top_k_accuracy",
    "rivals_at_least",
    "rivals_at_least_from_topk",
    "top_k_correct",
    "top_k_correct_from_topk",
]


@dataclass(frozen=True)
class PerClassAccuracy:
    """A mean of per-class accuracies with what it ran over (see :func:`per_class_top_k_accuracy`).

    See docs/metrics/flat.md, `PerClassAccuracy`.
    """

    value: float
    per_class: tuple[float | None, ...]
    classes: tuple[int, ...]
    excluded_classes: tuple[int, ...]
    n_images: int
    k: int


def rivals_at_least_checked(
    y_true: npt.NDArray[np.int64], scores: npt.NDArray[Any]
) -> npt.NDArray[np.int64]:
    """Per image, how many *other* candidates score at least as high as its true class, on
    already-checked inputs, in row chunks of bounded size.

    Image i is top-k correct exactly when this count is below k (ties count against), so one
    pass gives the correctness at every k (:func:`top_k_correct_checked`, a top-k curve).
    """
    n_images, n_candidates = scores.shape
    rivals = np.empty(n_images, dtype=np.int64)
    for start, stop in row_chunks(n_images, n_candidates):
        block = np.asarray(scores[start:stop])
        true_scores = block[np.arange(stop - start), y_true[start:stop]]
        # Candidates scoring >= the true class, minus the true class itself (scores are finite).
        rivals[start:stop] = np.count_nonzero(block >= true_scores[:, None], axis=1) - 1
    return rivals


def rivals_at_least(y_true: npt.ArrayLike, scores: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """:func:`rivals_at_least_checked` after checking the inputs as :func:`top_k_correct` does.

    >>> rivals_at_least([0, 1], [[0.5, 0.5, 0.1], [0.2, 0.9, 0.3]])
    array([1, 0])
    """
    checked_y, checked_scores = check_scores_and_targets(y_true, scores)
    return rivals_at_least_checked(checked_y, checked_scores)


def top_k_correct_checked(
    y_true: npt.NDArray[np.int64], scores: npt.NDArray[Any], k: int
) -> npt.NDArray[np.bool_]:
    """:func:`top_k_correct` on already-checked inputs, in row chunks of bounded size.

    For sibling metric modules that validate once and reduce several ways (e.g. GZSL).
    """
    return rivals_at_least_checked(y_true, scores) < k


def top_k_correct(
    y_true: npt.ArrayLike, scores: npt.ArrayLike, *, k: int = 1
) -> npt.NDArray[np.bool_]:
    """Which images have their true class among the top ``k`` candidates, ties counting against.

    >>> scores = [[0.5, 0.5, 0.1], [0.2, 0.9, 0.9]]
    >>> top_k_correct([0, 1], scores, k=1)
    array([False, False])
    >>> top_k_correct([0, 1], scores, k=2)
    array([ True,  True])

    See docs/metrics/flat.md, `top_k_correct`.
    """
    checked_y, checked_scores = check_scores_and_targets(y_true, scores)
    checked_k = check_k(k, checked_scores.shape[1])
    return top_k_correct_checked(checked_y, checked_scores, checked_k)


def top_k_correct_from_topk(
    y_true: npt.ArrayLike,
    topk_indices: npt.ArrayLike,
    topk_scores: npt.ArrayLike,
    *,
    k: int = 1,
) -> npt.NDArray[np.bool_]:
    """:func:`top_k_correct` from top-K predictions, with the same tie policy.

    Image i is correct at k if its true class is among its K listed candidates and fewer than k
    *other* listed candidates score at least as high. A true class missing from the list is
    wrong at every ``k <= K``; ``k > K`` cannot be decided and is refused.

    >>> idx = [[3, 7], [2, 4], [1, 5]]
    >>> sc = [[0.9, 0.5], [0.8, 0.8], [0.7, 0.6]]
    >>> top_k_correct_from_topk([7, 4, 0], idx, sc, k=1)
    array([False, False, False])
    >>> top_k_correct_from_topk([7, 4, 0], idx, sc, k=2)
    array([ True,  True, False])

    See docs/metrics/flat.md, `top_k_correct_from_topk`.
    """
    indices = np.asarray(topk_indices)
    scores = np.asarray(topk_scores)
    if indices.ndim != 2 or scores.shape != indices.shape:
        raise MetricError(
            "Expected `topk_indices` and `topk_scores` to be 2D arrays of one shape (n_images, K),"
            f" but got shapes {indices.shape} and {scores.shape}."
        )
    if indices.dtype.kind not in "iu":
        raise MetricError(
            f"Expected `topk_indices` to be an integer array, but got dtype {indices.dtype}."
        )
    if scores.dtype.kind not in "iuf":
        raise MetricError(
            f"Expected `topk_scores` to be a real-valued array, but got dtype {scores.dtype}."
        )
    finite = np.isfinite(scores)
    if not finite.all():
        row = int(np.argmin(finite.all(axis=1)))
        col = int(np.argmin(finite[row]))
        raise MetricError(
            f"Expected `topk_scores` to contain only finite values, but row {row} holds "
            f"{_describe(float(scores[row, col]))} (at position {col}). A non-finite score makes"
            " every comparison false, so the row would count as correct; replace it, e.g. with a"
            " very low finite score, or leave the class out of the list."
        )
    y = _integer_array(y_true, "y_true", "candidate column indices, one per image")
    if y.shape != (indices.shape[0],):
        raise MetricError(
            f"Expected `y_true` to have shape ({indices.shape[0]},), but got shape {y.shape}."
        )
    big_k = indices.shape[1]
    k = check_integer(
        k,
        "k",
        low=1,
        high=big_k,
        hint=(
            f"Top-K predictions list K={big_k} candidates per image; a larger k cannot be decided."
        ),
    )
    return _rivals_in_list(y, indices, scores) < k


def rivals_at_least_from_topk(
    y_true: npt.ArrayLike, topk_indices: npt.ArrayLike, topk_scores: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """:func:`rivals_at_least` from top-K predictions (inputs checked as
    :func:`top_k_correct_from_topk` checks them): K for an image whose true class is not listed,
    so it is wrong at every decidable k (``k <= K``).

    >>> rivals_at_least_from_topk([7, 4, 0], [[3, 7], [2, 4], [1, 5]], [[0.9, 0.5], [0.8, 0.8],
    ...                                                                 [0.7, 0.6]])
    array([1, 1, 2])
    """
    indices = np.asarray(topk_indices)
    # The checks of top_k_correct_from_topk, at the one k every list decides.
    top_k_correct_from_topk(y_true, indices, topk_scores, k=1)
    y = np.asarray(y_true, dtype=np.int64)  # checked just above
    return _rivals_in_list(y, indices, np.asarray(topk_scores))


def _rivals_in_list(
    y: npt.NDArray[Any], indices: npt.NDArray[Any], scores: npt.NDArray[Any]
) -> npt.NDArray[np.int64]:
    """Listed rivals scoring at least the true class; K where the true class is not listed."""
    hit = indices == y[:, None]
    listed = hit.any(axis=1)
    true_score = np.where(listed, (scores * hit).sum(axis=1), np.inf)
    rivals = np.count_nonzero(scores >= true_score[:, None], axis=1) - 1
    return np.where(listed, rivals, indices.shape[1]).astype(np.int64)


def per_class_counts(
    y_true: npt.ArrayLike, correct: npt.ArrayLike, *, n_classes: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per-class numbers of correct images and of images.

    >>> hits, totals = per_class_counts([0, 1, 0], [True, True, False], n_classes=3)
    >>> hits, totals
    (array([1, 1, 0]), array([2, 1, 0]))

    See docs/metrics/flat.md, `per_class_counts`.
    """
    checked_y = check_targets(y_true, n_classes)
    mask = check_vector(correct, "correct", checked_y.shape[0], kind="bool")
    return class_counts_checked(checked_y, mask, n_classes)


def class_counts_checked(
    y_true: npt.NDArray[np.int64], correct: npt.NDArray[np.bool_], n_classes: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`per_class_counts` on already-checked inputs."""
    hits = np.bincount(y_true[correct], minlength=n_classes).astype(np.int64, copy=False)
    totals = np.bincount(y_true, minlength=n_classes).astype(np.int64, copy=False)
    return hits, totals


def count_classes_with_images(
    totals: npt.NDArray[np.int64],
    classes: npt.NDArray[np.int64],
    what: str = "`classes`",
    values: str = "accuracies",
) -> int:
    """How many of ``classes`` have test images; an error naming ``what`` when none has.

    ``totals[c]`` is the number of test images of column c (checked inputs only). A mean over
    ``classes`` of per-class ``values`` is undefined when none of them has an image.
    """
    present = int(np.count_nonzero(totals[classes]))
    if present == 0:
        raise MetricError(
            f"Expected at least one test image whose true class is among {what} "
            f"({classes.shape[0]} classes), but none of the {int(totals.sum())} images is. "
            f"The mean of per-class {values} is undefined; check `classes` and `y_true`."
        )
    return present


def mean_of_class_means(
    sums: npt.NDArray[Any],
    totals: npt.NDArray[np.int64],
    classes: npt.NDArray[np.int64],
    *,
    what: str = "`classes`",
    values: str = "accuracies",
) -> tuple[float, tuple[float | None, ...], npt.NDArray[np.bool_]]:
    """Mean over ``classes`` with images of their means ``sums[c] / totals[c]``.

    Checked inputs only: ``sums[c]`` and ``totals[c]`` are the sum of a per-image value and the
    number of test images of column c. Returns the mean, each listed class's mean (None without
    images) and which listed classes have images; raises as :func:`count_classes_with_images`
    when none has.
    """
    count_classes_with_images(totals, classes, what, values)
    class_totals = totals[classes]
    present = class_totals > 0
    means = sums[classes][present] / class_totals[present]
    per_class: list[float | None] = [None] * classes.shape[0]
    for position, mean in zip(np.flatnonzero(present).tolist(), means.tolist(), strict=True):
        per_class[position] = float(mean)
    return float(np.mean(means)), tuple(per_class), present


def reduce_per_class(
    hits: npt.NDArray[np.int64],
    totals: npt.NDArray[np.int64],
    classes: npt.NDArray[np.int64],
    *,
    k: int,
    what: str = "`classes`",
) -> PerClassAccuracy:
    """Mean of per-class accuracies over ``classes`` with images; the shared reduce step.

    Checked inputs only. ``what`` names the class list in the error raised when none of its
    classes has an image.
    """
    value, per_class, present = mean_of_class_means(hits, totals, classes, what=what)
    return PerClassAccuracy(
        value=value,
        per_class=per_class,
        classes=tuple(classes.tolist()),
        excluded_classes=tuple(classes[~present].tolist()),
        n_images=int(totals[classes].sum()),
        k=k,
    )


def per_class_top_k_accuracy_details(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    classes: npt.ArrayLike,
    k: int = 1,
) -> PerClassAccuracy:
    """Per-class top-k accuracy with its per-class values and excluded classes.

    Same definition as :func:`per_class_top_k_accuracy`; see there for the formula.

    >>> scores = [[0.9, 0.1, 0.0], [0.8, 0.2, 0.0], [0.3, 0.7, 0.0]]
    >>> details = per_class_top_k_accuracy_details([0, 1, 1], scores, classes=[0, 1, 2])
    >>> details.value, details.per_class, details.excluded_classes
    (0.75, (1.0, 0.5, None), (2,))

    See docs/metrics/flat.md, `per_class_top_k_accuracy_details`.
    """
    checked_y, checked_scores = check_scores_and_targets(y_true, scores)
    n_candidates = checked_scores.shape[1]
    checked_classes = check_classes(classes, n_candidates)
    checked_k = check_k(k, n_candidates)
    correct = top_k_correct_checked(checked_y, checked_scores, checked_k)
    hits, totals = class_counts_checked(checked_y, correct, n_candidates)
    return reduce_per_class(hits, totals, checked_classes, k=checked_k)


def per_class_top_k_accuracy(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    classes: npt.ArrayLike,
    k: int = 1,
) -> float:
    """Mean over ``classes`` of per-class top-k accuracy (the ZSL accuracy of Xian et al.).

    >>> y_true = [0, 1, 1]
    >>> scores = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]]
    >>> per_class_top_k_accuracy(y_true, scores, classes=[0, 1])
    0.75
    >>> per_class_top_k_accuracy(y_true, scores, classes=[0, 1], k=2)
    1.0

    See docs/metrics/flat.md, `per_class_top_k_accuracy`.
    """
    return per_class_top_k_accuracy_details(y_true, scores, classes=classes, k=k).value


def per_image_top_k_accuracy(y_true: npt.ArrayLike, scores: npt.ArrayLike, *, k: int = 1) -> float:
    """Fraction of images whose true class is among the top ``k`` candidates (not per-class).

    >>> per_image_top_k_accuracy([0, 1, 1, 1], [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0, 1]])
    0.75

    See docs/metrics/flat.md, `per_image_top_k_accuracy`.
    """
    return float(np.mean(top_k_correct(y_true, scores, k=k)))


# -- registrations: the registry's wrappers of the functions above --------------------------------


class TopKParams(MetricParams):
    """Parameters of the top-k accuracies: how many top candidates count."""

    k: int = Field(1, ge=1, description="How many top-scoring candidates count as a hit.")


def _correct(data: MetricInput, k: int) -> np.ndarray:
    """Top-k correctness per image from dense scores or top-K lists (one tie policy)."""
    if data.scores is not None:
        return top_k_correct(data.y_true, data.scores, k=k)
    assert data.topk_indices is not None and data.topk_scores is not None
    return top_k_correct_from_topk(data.y_true, data.topk_indices, data.topk_scores, k=k)


def _rivals(data: MetricInput) -> np.ndarray:
    """Per image, the other candidates scoring at least its true class: top-k correct at every k
    in one pass (``_rivals(data) < k`` is :func:`_correct`)."""
    if data.scores is not None:
        return rivals_at_least(data.y_true, data.scores)
    assert data.topk_indices is not None and data.topk_scores is not None
    return rivals_at_least_from_topk(data.y_true, data.topk_indices, data.topk_scores)


@register_metric(
    "per_class_top_k_accuracy",
    formula=(
        "acc@k = (1/|C|) Σ_{c∈C} (1/|I_c|) Σ_{i∈I_c} [y_i ∈ top_k(i)]; C: candidate classes with "
        "test images, I_c: test images of class c, top_k(i): the k highest-scoring candidates of "
        "image i"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    version="2",  # 2: details hold the top-k curve at CURVE_KS (the site draws it)
    params=TopKParams,
    averaged_over="classes",
    group="flat",
    figure="top_k_curve",
    checked_against_chance=True,
)
def _per_class_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Mean over candidate classes with test images of per-class top-k accuracy."""
    ids = class_ids(data)
    correct = _correct(data, params.k)
    decomposition = class_mean(correct, data)
    rivals = _rivals(data)
    ks = curve_ks(data, params.k)
    curve = [float(np.asarray(point_estimate(class_mean(rivals < k, data)))) for k in ks]
    details: dict[str, Any] = {"k": params.k, "curve": {"k": ks, "value": curve}}
    if data.scores is not None:
        per_class = per_class_top_k_accuracy_details(
            data.y_true, data.scores, classes=np.arange(data.n_candidates), k=params.k
        )
        details.update(per_class_by_id(per_class, ids))
        value = float(per_class.value)
    else:
        value = float(np.asarray(point_estimate(decomposition)))
    return MetricResult(value, details, decomposition)


@register_metric(
    "per_image_top_k_accuracy",
    formula="acc@k = (1/N) Σ_i [y_i ∈ top_k(i)] over the N test images",
    reference=(
        "Standard flat hit@k, as reported beside hp@k in Frome et al.: DeViSE: A Deep "
        "Visual-Semantic Embedding Model, NeurIPS 2013 (appendix A.3)"
    ),
    version="1",
    params=TopKParams,
    averaged_over="images",
    group="flat",
)
def _per_image_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Fraction of test images whose true class is among the top k candidates (per image)."""
    correct = _correct(data, params.k)
    return MetricResult(
        float(np.mean(correct)),
        {"k": params.k, "n_images": int(correct.shape[0]), "n_correct": int(correct.sum())},
        image_mean(correct, data),
    )
