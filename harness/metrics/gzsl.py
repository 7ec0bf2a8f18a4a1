r"""Generalized zero-shot learning (GZSL): seen accuracy, unseen accuracy and their harmonic mean.

The protocol of Xian et al. (TPAMI 2019, Sec. 4.3; docs/design.md, "Conventions"): test images
of seen and of unseen classes are classified over *all* candidates (seen :math:`\cup` unseen).
The seen accuracy is the per-class top-k accuracy averaged over the seen classes, computed on
the images whose true class is seen; the unseen accuracy likewise over the unseen classes; H is
their harmonic mean, 0 when either is 0. Both accuracies reduce from one set of per-class counts
(:func:`harness.metrics.flat.per_class_counts`) and follow the tie and empty-class policies of
:mod:`harness.metrics.flat`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.checks import check_k, check_scalar, check_scores_and_targets, check_seen
from harness.core.errors import MetricError
from harness.metrics.base import MetricInput, MetricResult, register_metric
from harness.metrics.flat import (
    PerClassAccuracy,
    TopKParams,
    class_counts_checked,
    reduce_per_class,
    top_k_correct,
    top_k_correct_checked,
)
from harness.metrics.registration import (
    class_ids,
    class_mean,
    gzsl_h,
    per_class_by_id,
    require_setting,
)

__all__ = [
    "GzslAccuracies",
    "GzslAccuracyDetails",
    "gzsl_accuracies",
    "gzsl_accuracies_details",
    "harmonic_mean",
]


@dataclass(frozen=True)
class GzslAccuracies:
    """GZSL seen accuracy, unseen accuracy and their harmonic mean H, floats in [0, 1]."""

    seen: float
    unseen: float
    harmonic_mean: float


@dataclass(frozen=True)
class GzslAccuracyDetails:
    """:class:`GzslAccuracies` with the per-class accuracies behind each mean.

    Attributes
    ----------
    seen, unseen : PerClassAccuracy
        The per-class top-k accuracy over the seen, resp. unseen, candidate columns (images of
        those classes only, all candidates ranked).
    harmonic_mean : float in [0, 1]
        H of ``seen.value`` and ``unseen.value``.
    k : int
    """

    seen: PerClassAccuracy
    unseen: PerClassAccuracy
    harmonic_mean: float
    k: int

    @property
    def accuracies(self) -> GzslAccuracies:
        """The three numbers alone."""
        return GzslAccuracies(self.seen.value, self.unseen.value, self.harmonic_mean)


def harmonic_mean(seen: float, unseen: float) -> float:
    """Harmonic mean H of the seen and unseen accuracies, 0 when either is 0.

    >>> round(harmonic_mean(0.5, 0.25), 6)
    0.333333
    >>> harmonic_mean(0.8, 0.0)
    0.0

    See docs/metrics/gzsl.md, `harmonic_mean`.
    """
    s = check_scalar(seen, "seen", low=0, high=1)
    u = check_scalar(unseen, "unseen", low=0, high=1)
    low, high = min(s, u), max(s, u)
    if low == 0.0:
        return 0.0
    h = 2.0 * low * (high / (low + high))  # symmetric in (s, u); cannot underflow to 0
    return min(max(h, low), high)


def gzsl_accuracies_details(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
    k: int = 1,
) -> GzslAccuracyDetails:
    """GZSL seen and unseen accuracies and H, with the per-class details of both.

    Same definitions as :func:`gzsl_accuracies`.

    >>> details = gzsl_accuracies_details([0, 1], [[1.0, 0.0], [0.0, 1.0]], seen=[True, False])
    >>> details.seen.classes, details.unseen.classes, details.harmonic_mean
    ((0,), (1,), 1.0)

    See docs/metrics/gzsl.md, `gzsl_accuracies_details`.
    """
    checked_y, checked_scores = check_scores_and_targets(y_true, scores)
    n_candidates = checked_scores.shape[1]
    seen_mask = check_seen(seen, n_candidates)
    checked_k = check_k(k, n_candidates)
    correct = top_k_correct_checked(checked_y, checked_scores, checked_k)
    hits, totals = class_counts_checked(checked_y, correct, n_candidates)
    seen_details = reduce_per_class(
        hits, totals, np.flatnonzero(seen_mask), k=checked_k, what="the seen classes"
    )
    unseen_details = reduce_per_class(
        hits, totals, np.flatnonzero(~seen_mask), k=checked_k, what="the unseen classes"
    )
    return GzslAccuracyDetails(
        seen=seen_details,
        unseen=unseen_details,
        harmonic_mean=harmonic_mean(seen_details.value, unseen_details.value),
        k=checked_k,
    )


def gzsl_accuracies(
    y_true: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    seen: npt.ArrayLike,
    k: int = 1,
) -> GzslAccuracies:
    r"""GZSL seen accuracy, unseen accuracy and their harmonic mean H.

    acc_S and acc_U are per-class top-k accuracies over the seen (unseen) classes with test
    images, every image ranked among all candidates; H = 2 acc_S acc_U / (acc_S + acc_U), 0 when
    either is 0.

    See docs/metrics/gzsl.md, `gzsl_accuracies`.
    """
    return gzsl_accuracies_details(y_true, scores, seen=seen, k=k).accuracies


# -- registrations: the registry's wrappers of the functions above --------------------------------


def _gzsl(
    data: MetricInput, params: TopKParams, name: str
) -> tuple[GzslAccuracyDetails, list[Any], np.ndarray]:
    require_setting(data, name, ("gzsl",))
    if data.scores is None:
        raise MetricError(f"Expected dense scores for metric '{name}', but got top-K predictions")
    details = gzsl_accuracies_details(data.y_true, data.scores, seen=data.seen, k=params.k)
    return details, class_ids(data), top_k_correct(data.y_true, data.scores, k=params.k)


#: Registers a GZSL top-k accuracy: dense scores only, averaged over classes.
_register_gzsl = partial(
    register_metric,
    version="1",
    params=TopKParams,
    settings=("gzsl",),
    inputs=("dense",),
    averaged_over="classes",
    group="gzsl",
)


def _gzsl_group(data: MetricInput, params: TopKParams, name: str, *, unseen: bool) -> MetricResult:
    """The seen (or unseen) accuracy, its per-class details and its class-mean decomposition."""
    details, ids, correct = _gzsl(data, params, name)
    group = details.unseen if unseen else details.seen
    image_seen = np.asarray(data.seen)[data.y_true]
    return MetricResult(
        group.value,
        {**per_class_by_id(group, ids), "k": details.k},
        class_mean(correct, data, ~image_seen if unseen else image_seen),
    )


@_register_gzsl(
    "gzsl_seen_accuracy",
    formula=(
        "acc_S = per-class top-k accuracy over the test_seen images, each ranked among all seen ∪ "
        "unseen candidates"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="seen classes only",
    short_name="s",
    short_description="accuracy on the seen classes' test images",
)
def _gzsl_seen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL seen accuracy: per-class top-k accuracy over seen classes, all candidates ranked."""
    return _gzsl_group(data, params, "gzsl_seen_accuracy", unseen=False)


@_register_gzsl(
    "gzsl_unseen_accuracy",
    formula=(
        "acc_U = per-class top-k accuracy over the test_unseen images, each ranked among all seen "
        "∪ unseen candidates"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="unseen classes only",
    short_name="u",
    short_description="accuracy on the unseen classes' test images",
    checked_against_chance=True,
    zero_for_seen_only=True,
)
def _gzsl_unseen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL unseen accuracy: per-class top-k accuracy over unseen classes, all candidates ranked."""
    return _gzsl_group(data, params, "gzsl_unseen_accuracy", unseen=True)


@_register_gzsl(
    "gzsl_harmonic_mean",
    formula="H = 2 · acc_S · acc_U / (acc_S + acc_U); 0 when either is 0",
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="harmonic mean of the seen and the unseen per-class means",
    short_name="H",
    short_description="harmonic mean of u and s",
    checked_against_chance=True,
    zero_for_seen_only=True,
)
def _gzsl_harmonic_mean(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL harmonic mean H of the seen and unseen accuracies (0 when either is 0)."""
    details, _, correct = _gzsl(data, params, "gzsl_harmonic_mean")
    decomposition = gzsl_h(correct, data)
    return MetricResult(
        details.harmonic_mean,
        {"seen": details.seen.value, "unseen": details.unseen.value, "k": details.k},
        decomposition,
    )
