r"""DARTS: the accuracy-specificity trade-off of hierarchical predictions (Deng et al., CVPR 2012).

A classifier that may answer with any node of the class hierarchy ("dog", or more safely
"canine") trades specificity for accuracy. :func:`darts_curve` chooses, per target accuracy, the
Lagrange multiplier :math:`\lambda` on validation (the target's Clopper-Pearson lower bound must
hold there) and reports what that :math:`\lambda` does on test: accuracy, information gain, and
the area under the accuracy-specificity curve. The target holds on validation by construction;
the test accuracy it reaches is measured, never promised. This module ends with the
registrations of ``darts_area`` and ``darts_reward``.

The steps live in :mod:`~harness.metrics.darts_graph` (sub-DAG and rewards),
:mod:`~harness.metrics.darts_posteriors`, :mod:`~harness.metrics.darts_prediction` and
:mod:`~harness.metrics.darts_search` (the :math:`\lambda` search). The mathematics (rewards,
tie policy, monotonicity, the search, the area) is in ``docs/metrics/darts.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from harness.checks import FloatArray, IntArray, check_scalar, row_chunks
from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics.base import MetricInput, MetricParams, MetricResult, register_metric
from harness.metrics.binomial import clopper_pearson_lower_bounds
from harness.metrics.darts_graph import darts_graph, first_true
from harness.metrics.darts_posteriors import TopKPosteriors, check_posteriors, checked_labels
from harness.metrics.darts_prediction import (
    PredictionLevels,
    darts_per_image,
    darts_prediction_levels,
)
from harness.metrics.darts_search import BISECTION_STEPS, Contenders, search_lambda
from harness.metrics.registration import fit_scales, hierarchy_of, image_mean, validation_of
from harness.metrics.score_scale import carried
from harness.metrics.temperature import fit_temperature, softmax_posteriors

#: Accuracy targets of the default curve, from no guarantee to 99%.
DEFAULT_TARGETS: tuple[float, ...] = (
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99,
)  # fmt: skip


@dataclass(frozen=True)
class DartsPoint:
    """One target accuracy of `darts_curve`: the validated lambda and what it does on test.

    Holds the lambda chosen on validation, its validation accuracy and Clopper-Pearson lower bound,
    and on test the per-image and per-class accuracy and information gain and the shares of
    predictions at leaves, internal nodes and the root. Every field but ``target`` and ``achieved``
    is None for a target not achieved. Each field: docs/metrics/darts.md, `DartsCurve` and
    `DartsPoint`.
    """

    target: float
    achieved: bool
    lam: float | None = None
    val_accuracy: float | None = None
    val_lower_bound: float | None = None
    per_image_accuracy: float | None = None
    per_image_info_gain: float | None = None
    per_class_accuracy: float | None = None
    per_class_info_gain: float | None = None
    share_leaf: float | None = None
    share_internal: float | None = None
    share_root: float | None = None


@dataclass(frozen=True)
class DartsCurve:
    """The DARTS accuracy-specificity curve on test, one `DartsPoint` per target.

    Besides the points: ``area`` (`accuracy_specificity_area` of the achieved points),
    ``reward_at_90``, the counts of images, candidates and graph columns, and the settings the
    curve was computed with, so a record says how it was made. Each field: docs/metrics/darts.md,
    `DartsCurve` and `DartsPoint`.
    """

    points: tuple[DartsPoint, ...]
    area: float
    reward_at_90: float | None
    n_val: int
    n_test: int
    n_candidates: int
    n_nodes: int
    max_reward_bits: float
    confidence: float
    bisection_steps: int
    excluded_classes: tuple[int, ...]

    def point(self, target: float) -> DartsPoint | None:
        """The point of ``target`` (within 1e-12), None when it is not one of the targets."""
        return next((p for p in self.points if abs(p.target - target) < 1e-12), None)


def _target_grid(targets: Any) -> tuple[float, ...]:
    """The curve's targets: a non-empty sequence of distinct accuracies in [0, 1]."""
    if isinstance(targets, str | bytes) or not isinstance(targets, Sequence | np.ndarray):
        raise MetricError(
            f"Expected `targets` to be a sequence of accuracies in [0, 1], but got {targets!r}."
        )
    values: list[float] = []
    for position, target in enumerate(list(targets)):
        value = check_scalar(target, f"targets[{position}]", low=0, high=1)
        if value in values:
            raise MetricError(
                f"Expected `targets` to hold distinct accuracies, but targets[{position}] = "
                f"{value!r} repeats targets[{values.index(value)}]."
            )
        values.append(value)
    if not values:
        raise MetricError("Expected `targets` to hold at least one accuracy, but got none.")
    return tuple(values)


def _mean_over_classes(values: FloatArray, y_true: IntArray, totals: IntArray) -> float:
    sums = np.bincount(y_true, weights=values, minlength=totals.shape[0])
    present = totals > 0
    return float(np.mean(sums[present] / totals[present]))


def accuracy_specificity_area(points: Sequence[tuple[float, float]]) -> float:
    r"""Area under the accuracy-specificity curve: :math:`\int_0^1 g^*(x)\,dx` with
    :math:`g^*(x) = \max\{g_p : a_p \ge x\}` over the achieved (accuracy, gain) points.

    The best normalised information gain achievable with an accuracy of at least x (0 beyond the
    highest achieved accuracy): a step envelope, so the area lies in [0, 1], is 1 for a
    classifier that always names the correct leaf, and never rewards a missing point.

    Gain .9 up to accuracy .8, then .5 up to .95, then 0 up to 1: .8 * .9 + .15 * .5 = .795.

    >>> accuracy_specificity_area([(0.8, 0.9), (0.95, 0.5), (1.0, 0.0)])
    0.795
    """
    if not points:
        return 0.0
    ordered = sorted(points)
    area, previous = 0.0, 0.0
    for i, (accuracy, _) in enumerate(ordered):
        best = max(gain for _, gain in ordered[i:])
        area += (accuracy - previous) * best
        previous = accuracy
    return round(area, 12)


def accuracy_specificity_areas(accuracy: npt.ArrayLike, gain: npt.ArrayLike) -> FloatArray:
    """:func:`accuracy_specificity_area` of many curves at once: row b holds the points
    ``(accuracy[b, p], gain[b, p])`` (the class-level bootstrap recomputes one curve per draw).

    >>> accuracy_specificity_areas([[0.8, 0.95, 1.0], [1.0, 0.8, 0.95]],
    ...                            [[0.9, 0.5, 0.0], [0.0, 0.9, 0.5]]).tolist()
    [0.795, 0.795]
    """
    acc = np.atleast_2d(np.asarray(accuracy, dtype=np.float64))
    gains = np.atleast_2d(np.asarray(gain, dtype=np.float64))
    if acc.shape != gains.shape:
        raise MetricError(
            f"Expected `accuracy` and `gain` of one shape, but got {acc.shape} and {gains.shape}."
        )
    if acc.shape[1] == 0:
        return np.zeros(acc.shape[0])
    order = np.lexsort((gains, acc), axis=1)  # by accuracy, then gain, as sorted(points)
    acc = np.take_along_axis(acc, order, axis=1)
    gains = np.take_along_axis(gains, order, axis=1)
    best = np.maximum.accumulate(gains[:, ::-1], axis=1)[:, ::-1]  # max gain from here on
    steps = np.diff(acc, axis=1, prepend=0.0)
    return np.asarray(np.round((steps * best).sum(axis=1), 12), dtype=np.float64)


def darts_curve(
    val_posteriors: npt.ArrayLike | TopKPosteriors,
    val_y_true: npt.ArrayLike,
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    test_y_true: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    targets: Sequence[float] = DEFAULT_TARGETS,
    confidence: float = 0.95,
) -> DartsCurve:
    """The DARTS accuracy-specificity curve: a validated lambda per target accuracy, scored on test.

    For each target, lambda is searched on the validation posteriors until the Clopper-Pearson
    lower bound of the validation accuracy reaches it; it is then applied to the test posteriors,
    whose labels are used for scoring alone, so the guarantee is measured on test, never promised.
    The maths, the parameters and a worked example: docs/metrics/darts.md, `darts_curve`.

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> p = [[0.75, 0.25], [0.75, 0.25]]
    >>> curve = darts_curve(p, [0, 1], p, [0, 1], hierarchy=h,
    ...                     candidate_nodes=h.indices(["a", "b"]), targets=[0.0])
    >>> curve.points[0].per_image_accuracy, curve.area
    (0.5, 0.25)
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    n_candidates = graph.n_candidates
    checked_targets = _target_grid(targets)
    checked_confidence = check_scalar(confidence, "confidence", low=0, high=1, closed="neither")
    val = check_posteriors(val_posteriors, n_candidates, "val_posteriors")
    val_y = checked_labels(val_y_true, n_candidates, "val_y_true", val.n_images, "val_posteriors")
    test = check_posteriors(test_posteriors, n_candidates, "test_posteriors")
    test_y = checked_labels(
        test_y_true, n_candidates, "test_y_true", test.n_images, "test_posteriors"
    )

    val_contenders = Contenders(val, val_y, graph)
    test_contenders = Contenders(test, test_y, graph)
    lower = clopper_pearson_lower_bounds(val.n_images, confidence=checked_confidence)
    totals = np.bincount(test_y, minlength=n_candidates).astype(np.int64)
    max_reward = graph.max_reward
    points: list[DartsPoint] = []
    for target in checked_targets:
        reachable = lower >= target
        lam = None
        if reachable.any():
            lam = search_lambda(val_contenders, first_true(reachable), target, max_reward)
        if lam is None:
            points.append(DartsPoint(target=target, achieved=False))
            continue
        val_hits = val_contenders.hits(lam)
        columns, correct = test_contenders.predict(lam)
        gain = np.where(correct, graph.rewards[columns] / max_reward, 0.0)
        root = graph.is_root[columns]
        leaf = graph.is_leaf[columns]
        points.append(
            DartsPoint(
                target=target,
                achieved=True,
                lam=float(lam),
                val_accuracy=val_hits / val.n_images,
                val_lower_bound=float(lower[val_hits]),
                per_image_accuracy=float(np.mean(correct)),
                per_image_info_gain=float(np.mean(gain)),
                per_class_accuracy=_mean_over_classes(correct.astype(np.float64), test_y, totals),
                per_class_info_gain=_mean_over_classes(gain, test_y, totals),
                share_leaf=float(np.mean(leaf)),
                share_internal=float(np.mean(~leaf & ~root)),
                share_root=float(np.mean(root)),
            )
        )

    achieved = [
        (p.per_image_accuracy, p.per_image_info_gain)
        for p in points
        if p.per_image_accuracy is not None and p.per_image_info_gain is not None
    ]
    area = accuracy_specificity_area(achieved)
    at_90 = [p for p in points if math.isclose(p.target, 0.9, rel_tol=0.0, abs_tol=1e-12)]
    return DartsCurve(
        points=tuple(points),
        area=area,
        reward_at_90=at_90[0].per_image_info_gain if at_90 else None,
        n_val=val.n_images,
        n_test=test.n_images,
        n_candidates=n_candidates,
        n_nodes=graph.n_columns,
        max_reward_bits=max_reward,
        confidence=checked_confidence,
        bisection_steps=BISECTION_STEPS,
        excluded_classes=tuple(np.flatnonzero(totals == 0).tolist()),
    )


# -- registrations: the registry's wrappers of the functions above --------------------------------


class DartsParams(MetricParams):
    posterior: Literal["softmax", "as_is"] = Field(
        "softmax",
        description="softmax: scores -> posteriors with a temperature fitted on validation"
        " (negative log-likelihood); as_is: the scores already are posteriors",
    )
    target: float = Field(
        0.9,
        gt=0,
        lt=1,
        description="darts_reward: accuracy that lambda must reach on the validation classes"
        " (95% Clopper-Pearson lower bound); test accuracy is reported, not guaranteed",
    )


@dataclass(frozen=True)
class _DartsTarget:
    """One achieved target: its lambda (chosen on validation) and what it does per test image."""

    target: float
    lam: float
    correct: np.ndarray
    gain: np.ndarray
    levels: PredictionLevels


@dataclass(frozen=True)
class _DartsRun:
    temperature: float | None  # fitted on the validation fit's scores
    test_temperature: float | None  # the same, in the main fit's score units
    targets: tuple[_DartsTarget, ...]
    val_curve: DartsCurve


def _darts(data: MetricInput, params: DartsParams, name: str) -> _DartsRun:
    hierarchy, nodes = hierarchy_of(data, name)
    val = validation_of(data, name)
    assert data.scores is not None and val.scores is not None
    temperature = test_temperature = None
    if params.posterior == "softmax":
        # The temperature is a score unit: chosen on the validation fit, it reaches the main
        # fit's scores in units of each fit's score scale (harness.metrics.score_scale).
        scale_val, scale = fit_scales(data, val, name)
        temperature = fit_temperature(val.scores, val.y_true)
        test_temperature = carried(temperature, chosen_scale=scale_val, applied_scale=scale)
        val_post = softmax_posteriors(val.scores, temperature)
        test_post = softmax_posteriors(data.scores, test_temperature)
    else:
        val_post, test_post = val.scores, data.scores
    val_nodes = hierarchy_of(val, name)[1]
    targets = tuple(sorted({*DEFAULT_TARGETS, params.target}))
    # lambda is searched on validation predictions, whose candidates (validation classes) differ
    # from the test candidates: the search runs on the validation graph, the evaluation on test.
    val_curve = darts_curve(
        val_post,
        val.y_true,
        val_post,
        val.y_true,
        hierarchy=hierarchy,
        candidate_nodes=val_nodes,
        targets=targets,
    )
    lambdas = [(p.target, p.lam) for p in val_curve.points if p.lam is not None]
    per_target = []
    for target, lam in lambdas:
        correct, gain = darts_per_image(
            test_post, data.y_true, lam, hierarchy=hierarchy, candidate_nodes=nodes
        )
        levels = darts_prediction_levels(test_post, lam, hierarchy=hierarchy, candidate_nodes=nodes)
        per_target.append(_DartsTarget(target, lam, correct, gain, levels))
    return _DartsRun(temperature, test_temperature, tuple(per_target), val_curve)


def _darts_details(out: _DartsRun) -> dict[str, Any]:
    return {
        "temperature": out.temperature,
        "test_temperature": out.test_temperature,
        "lambda_chosen_on": "validation",
        "curve": [
            {
                "target": t.target,
                "lambda": t.lam,
                "accuracy": float(t.correct.mean()),
                "info_gain": float(t.gain.mean()),
                "share_leaf": t.levels.leaf,
                "share_internal": t.levels.internal,
                "share_root": t.levels.root,
            }
            for t in out.targets
        ],
    }


#: Registers a DARTS metric: dense scores, hierarchy and validation predictions, one pass.
_register_darts = partial(
    register_metric,
    version="2",  # 2: the softmax temperature reaches the main fit in its score units
    averaged_over="images",
    params=DartsParams,
    inputs=("dense",),
    needs_hierarchy=True,
    needs_validation=True,
    chunkable=False,
    group="darts",
)


def _resampling_groups(data: MetricInput) -> np.ndarray | None:
    """Groups the class-level bootstrap resamples within: seen and unseen classes in GZSL (as
    the H decomposition's), one group in ZSL (as every class-mean decomposition's)."""
    if data.setting != "gzsl":
        return None
    return (~np.asarray(data.seen, dtype=bool)).astype(np.int64)


@_register_darts(
    "darts_area",
    formula=(
        "area = ∫_0^1 g*(x) dx, g*(x) = max{gain_p : accuracy_p ≥ x} over the curve's points; each "
        "point: predict the deepest node whose posterior-weighted reward (gain + λ) is highest, λ "
        "chosen on validation for a target accuracy; gain = normalised information gain, 1 − "
        "log(#leaves under the prediction)/log(#classes) when correct, 0 when wrong"
    ),
    reference=(
        "Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: Optimizing Accuracy-Specificity "
        "Trade-offs in Large Scale Visual Recognition, CVPR 2012"
    ),
    # 2: per-class hits and gains on the curve's points (paired tests); 3: the softmax
    # temperature reaches the main fit in its score units
    version="3",
    averaging_note="a curve point's accuracy and gain; its lambda is chosen on validation",
    figure="darts_curve",
)
def _dartsaccuracy_specificity_area(data: MetricInput, params: DartsParams) -> MetricResult:
    """Area under the DARTS accuracy-information gain curve (Deng et al. 2012), lambda on val."""
    # here, not at the top: harness.metrics.comparison imports this module
    from harness.metrics.comparison import darts_class_values

    out = _darts(data, params, "darts_area")

    def resample(index_rows: np.ndarray) -> FloatArray:
        areas = np.zeros(len(index_rows))
        width = max(1, len(out.targets)) * index_rows.shape[1]
        for start, stop in row_chunks(len(index_rows), width):
            rows = index_rows[start:stop]
            # Each row reduced along a C-contiguous [rows, n] block: the same pairwise sum as
            # the 1D mean of one resample (a [points, rows, n] fancy index is not C-ordered).
            accuracy = [t.correct[rows].mean(axis=1).tolist() for t in out.targets]
            gain = [t.gain[rows].mean(axis=1).tolist() for t in out.targets]
            for i in range(stop - start):
                points = [(a[i], g[i]) for a, g in zip(accuracy, gain, strict=True)]
                areas[start + i] = accuracy_specificity_area(points)
        return areas

    value = accuracy_specificity_area(
        [(float(t.correct.mean()), float(t.gain.mean())) for t in out.targets]
    )
    n_points = len(out.targets)
    summary = darts_class_values(
        data.y_true,
        np.asarray([t.correct for t in out.targets]).reshape(n_points, -1),
        np.asarray([t.gain for t in out.targets]).reshape(n_points, -1),
        n_classes=data.n_candidates,
        groups=_resampling_groups(data),
    )
    return MetricResult(value, _darts_details(out), resample=resample, class_values=summary)


@_register_darts(
    "darts_reward",
    formula=(
        "the mean normalised information gain on the test images at the λ with which the "
        "validation images reach `target` accuracy (95 % lower confidence bound)"
    ),
    reference=(
        "Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: Optimizing Accuracy-Specificity "
        "Trade-offs in Large Scale Visual Recognition, CVPR 2012"
    ),
    averaging_note=(
        "the target accuracy holds on validation images only; the test accuracy reached is"
        " stored (test_accuracy) and shown beside the reward"
    ),
    figure="darts_operating_point",
)
def _darts_reward(data: MetricInput, params: DartsParams) -> MetricResult:
    """DARTS normalised information gain on test at an accuracy target met on validation only.

    lambda is the one at which the validation images reach ``target`` accuracy (with 95%
    confidence); applied to the test images it reaches ``test_accuracy``, which may fall below
    the target: the details say which, and the site shows it beside the reward.
    """
    out = _darts(data, params, "darts_reward")
    match = [t for t in out.targets if abs(t.target - params.target) < 1e-12]
    val_point = out.val_curve.point(params.target)
    if not match or val_point is None:
        raise MetricError(
            f"Expected the validation target accuracy {params.target} to be reachable on the"
            " validation images, but no lambda achieves it"
        )
    chosen = match[0]
    assert val_point.val_accuracy is not None and val_point.val_lower_bound is not None
    test_accuracy = float(chosen.correct.mean())
    details = {
        **_darts_details(out),
        "target": params.target,
        "target_on": "validation",
        "lambda": chosen.lam,
        "val_accuracy": float(val_point.val_accuracy),
        "val_lower_bound": float(val_point.val_lower_bound),
        "confidence": float(out.val_curve.confidence),
        "test_accuracy": test_accuracy,
        "test_reaches_target": test_accuracy >= params.target,
    }
    return MetricResult(float(chosen.gain.mean()), details, image_mean(chosen.gain, data))
