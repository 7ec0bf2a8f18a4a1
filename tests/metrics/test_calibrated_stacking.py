"""Tests of harness.metrics.calibrated_stacking: calibrated stacking curve, AUSUC, gamma selection.

Calibration uses no hierarchy, so there is no DAG case here. The independent implementations are
(a) brute force through ``gzsl_accuracies`` on ``scores - gamma * seen`` and (b) plain Python
loops (``ref_*`` below) that re-derive the curve from scratch.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import asdict, fields
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.checks as validation
from harness.core.errors import MetricError
from harness.metrics.calibrated_stacking import (
    CalibratedAccuracies,
    SeenUnseenCurve,
    area_under_seen_unseen_curve,
    ausuc,
    ausuc_of_resamples,
    calibrated_harmonic_mean,
    calibrated_stacking_curve,
    calibrated_stacking_curve_from_margins,
    per_image_correct_at_gamma,
    select_gamma,
    stacking_margins,
)
from harness.metrics.flat import per_class_top_k_accuracy
from harness.metrics.gzsl import GzslAccuracies, gzsl_accuracies, harmonic_mean

INF = math.inf
CURVE_FIELDS = ("gamma", "seen_accuracy", "unseen_accuracy", "harmonic_mean")

# Worked example of docs/metrics/calibrated-stacking.md. Columns 0, 1 seen; column 2 unseen.
#   image 0: true 0, best seen 3, best unseen 0 -> margin 3,   right for gamma < 3
#   image 1: true 1, best seen 2, best unseen 1 -> margin 1,   right for gamma < 1
#   image 2: true 2, best seen 2, best unseen 1 -> margin 1,   right for gamma > 1
#   image 3: true 2, best seen 1, best unseen .5 -> margin .5, right for gamma > 0.5
# Seen acc = mean over classes 0, 1 (one image each); unseen acc = fraction of class 2's two.
#   (-inf, .5): S = (1 + 1)/2 = 1,  U = 0
#   (.5, 1):    S = 1,              U = 1/2   (image 3)
#   (1, 3):     S = (1 + 0)/2 = 1/2, U = 2/2 = 1 (image 1 off, image 2 on: same breakpoint)
#   (3, inf):   S = 0,              U = 1
Y = np.array([0, 1, 2, 2])
SCORES = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [2.0, 0.0, 1.0], [1.0, 0.0, 0.5]])
SEEN = np.array([True, True, False])


# --- plain-Python reference implementation -------------------------------------------------------


def ref_correct(y: int, row: list[float], seen: list[bool], gamma: float) -> bool:
    """Literal definition: subtract gamma from seen scores; right iff strictly above all others."""
    adjusted = [s - gamma if is_seen else s for s, is_seen in zip(row, seen, strict=True)]
    return all(adjusted[c] < adjusted[y] for c in range(len(row)) if c != y)


def ref_hits(
    y_true: list[int], scores: list[list[float]], seen: list[bool], gamma: float
) -> list[int]:
    hits = [0] * len(seen)
    for y, row in zip(y_true, scores, strict=True):
        if ref_correct(y, row, seen, gamma):
            hits[y] += 1
    return hits


def ref_accuracies(hits: list[int], y_true: list[int], seen: list[bool]) -> tuple[float, float]:
    totals = [0] * len(seen)
    for y in y_true:
        totals[y] += 1
    groups = []
    for want_seen in (True, False):
        per_class = [
            hits[c] / totals[c] for c in range(len(seen)) if seen[c] == want_seen and totals[c]
        ]
        groups.append(sum(per_class) / len(per_class))
    return groups[0], groups[1]


def ref_curve(
    y_true: list[int], scores: list[list[float]], seen: list[bool]
) -> tuple[list[float], list[tuple[float, float]]]:
    """Evaluate between every image's margin (all images), then merge equal neighbours."""
    margins = set()
    for row in scores:
        best_seen = max(s for s, is_seen in zip(row, seen, strict=True) if is_seen)
        best_unseen = max(s for s, is_seen in zip(row, seen, strict=True) if not is_seen)
        margins.add(best_seen - best_unseen)
    fine = sorted(margins)
    probes = [fine[0] - 1.0] + [(a + b) / 2 for a, b in itertools.pairwise(fine)] + [fine[-1] + 1.0]
    edges: list[float] = [-INF]
    values: list[tuple[float, float]] = []
    previous_hits = None
    for position, gamma in enumerate(probes):
        hits = ref_hits(y_true, scores, seen, gamma)
        if previous_hits is not None and hits != previous_hits:
            edges.append(fine[position - 1])
        if hits != previous_hits:
            values.append(ref_accuracies(hits, y_true, seen))
        previous_hits = hits
    edges.append(INF)
    return edges, values


def ref_area(values: list[tuple[float, float]]) -> float:
    area = 0.0
    for (s0, u0), (s1, u1) in itertools.pairwise(values):
        area += (u1 - u0) * (s0 + s1) / 2
    return area


def ref_select(edges: list[float], values: list[tuple[float, float]]) -> float:
    hs = [harmonic_mean(s, u) for s, u in values]
    best = max(hs)
    if best == 0.0:
        return 0.0
    chosen = None
    for j, h in enumerate(hs):
        if h < best * (1 - 1e-12):
            continue
        low, high = edges[j], edges[j + 1]
        distance = low if low >= 0 else (-high if high <= 0 else 0.0)
        if chosen is None or distance < chosen[0]:
            chosen = (distance, low / 2 + high / 2)
    assert chosen is not None
    return chosen[1]


def brute(y_true: np.ndarray, scores: np.ndarray, seen: np.ndarray, gamma: float) -> GzslAccuracies:
    """Independent evaluation: subtract gamma from seen columns, then plain GZSL accuracies."""
    return gzsl_accuracies(y_true, scores - gamma * seen, seen=seen)


def with_gamma(accuracies: GzslAccuracies, gamma: float) -> CalibratedAccuracies:
    return CalibratedAccuracies(**asdict(accuracies), gamma=gamma)


def random_problem(
    seed: int, n_images: int, n_candidates: int, *, integer: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    seen = rng.random(n_candidates) < 0.6
    seen[0], seen[-1] = True, False
    y_true = rng.integers(0, n_candidates, n_images)
    y_true[0], y_true[1] = 0, n_candidates - 1
    if integer:
        scores = rng.integers(-3, 4, (n_images, n_candidates)).astype(float)
    else:
        scores = rng.standard_normal((n_images, n_candidates))
        scores[np.arange(n_images), y_true] += 1.0  # informative scores
        scores += 0.7 * seen  # the usual seen-class bias
    return y_true, scores, seen


# --- hand-computed cases -------------------------------------------------------------------------


def test_calibrated_stacking_curve_worked_example() -> None:
    curve = calibrated_stacking_curve(Y, SCORES, seen=SEEN)
    assert [f.name for f in fields(curve)] == [*CURVE_FIELDS]
    np.testing.assert_array_equal(curve.gamma, [-INF, 0.5, 1.0, 3.0, INF])
    np.testing.assert_array_equal(curve.seen_accuracy, [1.0, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0, 0.5, 1.0, 1.0])
    # H = 2 * 1 * 0.5 / 1.5 = 2/3 on (0.5, 1); 2 * 0.5 * 1 / 1.5 = 2/3 on (1, 3).
    np.testing.assert_allclose(curve.harmonic_mean, [0.0, 2 / 3, 2 / 3, 0.0], rtol=1e-15)
    for key in CURVE_FIELDS:
        assert getattr(curve, key).dtype == np.float64


def test_ausuc_worked_example() -> None:
    # Points (U, S): (0, 1), (.5, 1), (1, .5), (1, 0).
    # Area = .5 * (1 + 1)/2 + .5 * (1 + .5)/2 + 0 * (.5 + 0)/2 = .5 + .375 = .875
    assert ausuc(Y, SCORES, seen=SEEN) == 0.875
    assert area_under_seen_unseen_curve(calibrated_stacking_curve(Y, SCORES, seen=SEEN)) == 0.875


def test_select_gamma_worked_example_tie_goes_to_interval_closest_to_zero() -> None:
    # H = 2/3 on (0.5, 1) and on (1, 3): (0.5, 1) is 0.5 from 0, (1, 3) is 1 away -> 0.75.
    assert select_gamma(Y, SCORES, val_seen=SEEN) == 0.75


def test_calibrated_harmonic_mean_worked_example() -> None:
    # gamma = 0: plain GZSL. Images 2, 3 predicted seen class 0 -> U = 0, H = 0.
    assert calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=0.0) == CalibratedAccuracies(
        seen=1.0, unseen=0.0, harmonic_mean=0.0, gamma=0.0
    )
    # gamma = 0.75 inside (0.5, 1): S = 1, U = 1/2, H = 2/3.
    result = calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=0.75)
    assert (result.seen, result.unseen) == (1.0, 0.5)
    assert result.harmonic_mean == pytest.approx(2 / 3, rel=1e-15)


def test_breakpoint_rule_images_at_their_margin_are_wrong() -> None:
    # gamma = 1 = margin of images 1 and 2: image 1's seen 2 - 1 = 1 ties unseen 1; image 2's
    # unseen 1 ties seen 2 - 1 = 1. Both wrong. S = (1 + 0)/2 = 0.5 (the value right of 1),
    # U = 1/2 (image 3 only; the value left of 1).
    np.testing.assert_array_equal(
        per_image_correct_at_gamma(Y, SCORES, seen=SEEN, gamma=1.0), [True, False, False, True]
    )
    result = calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=1.0)
    assert (result.seen, result.unseen) == (0.5, 0.5)
    # The literal definition agrees (all arithmetic here is exact).
    assert brute(Y, SCORES, SEEN, 1.0) == GzslAccuracies(seen=0.5, unseen=0.5, harmonic_mean=0.5)


def test_breakpoint_rule_on_every_breakpoint_of_a_random_integer_problem() -> None:
    # Integer scores: margins are integers, so scores - gamma is exact at every breakpoint.
    y_true, scores, seen = random_problem(3, 200, 7, integer=True)
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    gamma = curve.gamma
    assert gamma.shape[0] > 3
    for j in range(1, gamma.shape[0] - 1):
        at = calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=float(gamma[j]))
        assert at.seen == pytest.approx(curve.seen_accuracy[j], abs=1e-12)
        assert at.unseen == pytest.approx(curve.unseen_accuracy[j - 1], abs=1e-12)
        reference = brute(y_true, scores, seen, float(gamma[j]))
        assert at.seen == reference.seen
        assert at.unseen == reference.unseen


def test_per_image_correct_at_gamma_worked_example() -> None:
    # Right when: image 0 gamma < 3, image 1 gamma < 1, image 2 gamma > 1, image 3 gamma > .5.
    expected = {
        -INF: [True, True, False, False],
        0.0: [True, True, False, False],
        0.75: [True, True, False, True],
        2.0: [True, False, True, True],
        3.0: [False, False, True, True],  # image 0 at its margin: tie, wrong
        INF: [False, False, True, True],
    }
    for gamma, correct in expected.items():
        got = per_image_correct_at_gamma(Y, SCORES, seen=SEEN, gamma=gamma)
        assert got.dtype == bool and got.shape == (4,)
        np.testing.assert_array_equal(got, correct)


def test_infinite_gamma_gives_the_curve_ends() -> None:
    low = calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=-INF)
    high = calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=INF)
    assert (low.seen, low.unseen) == (1.0, 0.0)
    assert (high.seen, high.unseen) == (0.0, 1.0)


def test_tie_within_seen_group_never_correct_and_adds_no_breakpoint() -> None:
    # Image 1 (true seen class 1) ties seen class 0 at 2: wrong for every gamma, although its
    # margin 2 - 1 = 1 would otherwise be a breakpoint. Seen class 1 has accuracy 0 throughout.
    # Image 0: margin 3 - 0 = 3; image 2 (unseen): margin 1 - 0 = 1.
    #   (-inf, 1): S = (1 + 0)/2 = .5, U = 0; (1, 3): S = .5, U = 1; (3, inf): S = 0, U = 1.
    y_true = [0, 1, 2]
    scores = [[3.0, 1.0, 0.0], [2.0, 2.0, 1.0], [1.0, 0.0, 0.0]]
    curve = calibrated_stacking_curve(y_true, scores, seen=SEEN)
    np.testing.assert_array_equal(curve.gamma, [-INF, 1.0, 3.0, INF])
    np.testing.assert_array_equal(curve.seen_accuracy, [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0, 1.0, 1.0])
    _, group_correct = stacking_margins(y_true, scores, seen=SEEN)
    np.testing.assert_array_equal(group_correct, [True, False, True])


def test_tie_within_unseen_group_never_correct() -> None:
    # Columns 0 seen; 1, 2 unseen. Image 1 (true 2) ties unseen column 1 at 5: never right.
    # Image 0 (true 0): margin 4 - 0 = 4. Image 2 (true 1): margin 0 - 2 = -2.
    #   Unseen classes 1 (image 2) and 2 (image 1): U = (1 + 0)/2 = .5 at most.
    seen = [True, False, False]
    y_true = [0, 2, 1]
    scores = [[4.0, 0.0, -1.0], [1.0, 5.0, 5.0], [0.0, 2.0, 1.0]]
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    np.testing.assert_array_equal(curve.gamma, [-INF, -2.0, 4.0, INF])
    np.testing.assert_array_equal(curve.seen_accuracy, [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0, 0.5, 0.5])
    for gamma in (-100.0, 0.0, 100.0, INF):
        assert not per_image_correct_at_gamma(y_true, scores, seen=seen, gamma=gamma)[1]


def test_images_with_equal_margins_switch_together() -> None:
    # Three seen images of class 0 with margin 2 (3 - 1) switch off together: one breakpoint,
    # a drop of 3/3 for class 0. Classes: seen 0 (3 images), seen 1 (1 image, margin 5),
    # unseen 2 (2 images, margins 2 and -1).
    #   (-inf, -1): S = (3/3 + 1/1)/2 = 1, U = 0
    #   (-1, 2):    S = 1,                 U = 1/2
    #   (2, 5):     S = (0 + 1)/2 = .5,     U = 1
    #   (5, inf):   S = 0,                 U = 1
    y_true = [0, 0, 0, 1, 2, 2]
    scores = [
        [3.0, 0.0, 1.0],
        [3.0, 2.0, 1.0],
        [4.0, 0.0, 2.0],
        [0.0, 5.0, 0.0],
        [3.0, 0.0, 1.0],
        [0.0, 0.0, 1.0],
    ]
    curve = calibrated_stacking_curve(y_true, scores, seen=SEEN)
    np.testing.assert_array_equal(curve.gamma, [-INF, -1.0, 2.0, 5.0, INF])
    np.testing.assert_array_equal(curve.seen_accuracy, [1.0, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0, 0.5, 1.0, 1.0])
    # AUSUC: .5 * (1 + 1)/2 + .5 * (1 + .5)/2 + 0 = .875
    assert area_under_seen_unseen_curve(curve) == 0.875


def test_per_class_weights_and_empty_class_excluded() -> None:
    # Seen columns 0, 1, 3 (3 has no image: excluded); unseen column 2.
    # Class 0: images 0 (margin 2), 1 (margin 4), 2 (not group-correct: 0 < col 1).
    # Class 1: image 3 (margin 1). Class 2: image 4 (margin -1).
    #   (-inf, -1): S = (2/3 + 1)/2 = 5/6,  U = 0
    #   (-1, 1):    S = 5/6,                U = 1
    #   (1, 2):     S = (2/3 + 0)/2 = 1/3,  U = 1
    #   (2, 4):     S = (1/3 + 0)/2 = 1/6,  U = 1
    #   (4, inf):   S = 0,                  U = 1
    # AUSUC = (1 - 0) * (5/6 + 5/6)/2 = 5/6 (all later steps are vertical).
    seen = [True, True, False, True]
    y_true = [0, 0, 0, 1, 2]
    scores = [
        [3.0, 0.0, 1.0, -5.0],
        [5.0, 0.0, 1.0, -5.0],
        [0.0, 1.0, 0.0, -5.0],
        [0.0, 2.0, 1.0, -5.0],
        [1.0, 0.0, 2.0, -5.0],
    ]
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    np.testing.assert_array_equal(curve.gamma, [-INF, -1.0, 1.0, 2.0, 4.0, INF])
    np.testing.assert_allclose(curve.seen_accuracy, [5 / 6, 5 / 6, 1 / 3, 1 / 6, 0.0], rtol=1e-15)
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0, 1.0, 1.0, 1.0, 1.0])
    assert area_under_seen_unseen_curve(curve) == pytest.approx(5 / 6, rel=1e-15)
    for gamma in (-2.0, 0.0, 1.5, 3.0, 5.0):
        at = calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=gamma)
        expected = with_gamma(
            brute(np.array(y_true), np.array(scores), np.array(seen), gamma), gamma
        )
        assert asdict(at) == pytest.approx(asdict(expected))


def test_curve_ends_are_the_within_group_zsl_accuracies() -> None:
    y_true, scores, seen = random_problem(7, 400, 9)
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    seen_images = seen[y_true]
    seen_columns, unseen_columns = np.flatnonzero(seen), np.flatnonzero(~seen)
    # gamma -> -inf: only seen classes can win; seen images are ranked among seen columns.
    remap_seen = np.full(seen.shape[0], -1)
    remap_seen[seen_columns] = np.arange(seen_columns.shape[0])
    zsl_seen = per_class_top_k_accuracy(
        remap_seen[y_true[seen_images]],
        scores[seen_images][:, seen_columns],
        classes=np.arange(seen_columns.shape[0]),
    )
    remap_unseen = np.full(seen.shape[0], -1)
    remap_unseen[unseen_columns] = np.arange(unseen_columns.shape[0])
    zsl_unseen = per_class_top_k_accuracy(
        remap_unseen[y_true[~seen_images]],
        scores[~seen_images][:, unseen_columns],
        classes=np.arange(unseen_columns.shape[0]),
    )
    assert curve.seen_accuracy[0] == pytest.approx(zsl_seen, abs=1e-12)
    assert curve.unseen_accuracy[-1] == pytest.approx(zsl_unseen, abs=1e-12)
    assert curve.unseen_accuracy[0] == 0.0 and curve.seen_accuracy[-1] == 0.0


def test_no_group_correct_image_gives_a_single_interval() -> None:
    # Every image ties within its group: no breakpoint, S = U = 0 everywhere, AUSUC 0,
    # select_gamma has nothing to choose and returns 0.0.
    y_true = [0, 2]
    seen = [True, True, False, False]
    scores = [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 3.0]]
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    np.testing.assert_array_equal(curve.gamma, [-INF, INF])
    np.testing.assert_array_equal(curve.seen_accuracy, [0.0])
    np.testing.assert_array_equal(curve.unseen_accuracy, [0.0])
    assert area_under_seen_unseen_curve(curve) == 0.0
    assert select_gamma(y_true, scores, val_seen=seen) == 0.0


def test_select_gamma_prefers_interval_containing_zero() -> None:
    # Seen images of classes 0, 1 with margins 2, 4; unseen images of class 2 with margins
    # -3, -1 (two images).
    #   (-inf, -3): S = 1,  U = 0;   (-3, -1): S = 1, U = .5;  (-1, 2): S = 1, U = 1 (H = 1)
    #   (2, 4): S = .5, U = 1;       (4, inf): S = 0, U = 1
    # Best H = 1 on (-1, 2) only; it contains 0 -> midpoint 0.5.
    y_true = [0, 1, 2, 2]
    scores = [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, -1.0, 3.0], [0.0, -1.0, 1.0]]
    curve = calibrated_stacking_curve(y_true, scores, seen=SEEN)
    np.testing.assert_array_equal(curve.gamma, [-INF, -3.0, -1.0, 2.0, 4.0, INF])
    np.testing.assert_array_equal(curve.harmonic_mean, [0.0, 2 / 3, 1.0, 2 / 3, 0.0])
    assert select_gamma(y_true, scores, val_seen=SEEN) == 0.5


def test_select_gamma_tie_at_zero_breakpoint_takes_smaller_gamma() -> None:
    # image 0: true 0, [2, 0, 2]: margin 2 - 2 = 0, right for gamma < 0
    # image 1: true 1, [0, 3, 1]: margin 3 - 1 = 2, right for gamma < 2
    # image 2: true 2, [0, -1, 2]: margin 0 - 2 = -2, right for gamma > -2
    # image 3: true 2, [1, 0, 1]: margin 1 - 1 = 0, right for gamma > 0
    #   (-inf, -2): S = 1, U = 0;  (-2, 0): S = 1, U = .5 (H = 2/3)
    #   (0, 2): S = (0 + 1)/2 = .5, U = 1 (H = 2/3);  (2, inf): S = 0, U = 1
    # Both best intervals touch 0 (distance 0): the smaller gamma wins -> (-2 + 0)/2 = -1.
    y_true = [0, 1, 2, 2]
    scores = [[2.0, 0.0, 2.0], [0.0, 3.0, 1.0], [0.0, -1.0, 2.0], [1.0, 0.0, 1.0]]
    curve = calibrated_stacking_curve(y_true, scores, seen=SEEN)
    np.testing.assert_array_equal(curve.gamma, [-INF, -2.0, 0.0, 2.0, INF])
    np.testing.assert_array_equal(curve.harmonic_mean, [0.0, 2 / 3, 2 / 3, 0.0])
    assert select_gamma(y_true, scores, val_seen=SEEN) == -1.0


def test_select_gamma_transfers_to_a_different_test_candidate_set() -> None:
    # Validation: 6 training classes as "seen", 3 validation classes as "unseen".
    # Test: the same 6 training classes plus 4 test classes, a different candidate set.
    rng = np.random.default_rng(11)
    bias = 1.5

    def make(n_seen: int, n_unseen: int, n_images: int) -> tuple[np.ndarray, ...]:
        n_candidates = n_seen + n_unseen
        seen = np.arange(n_candidates) < n_seen
        y_true = rng.integers(0, n_candidates, n_images)
        scores = rng.standard_normal((n_images, n_candidates))
        scores[np.arange(n_images), y_true] += 2.0
        return y_true, scores + bias * seen, seen

    val_y, val_scores, val_seen = make(6, 3, 600)
    test_y, test_scores, test_seen = make(6, 4, 800)
    gamma = select_gamma(val_y, val_scores, val_seen=val_seen)
    assert 0.5 < gamma < 3.0  # roughly removes the +1.5 seen bias
    calibrated = calibrated_harmonic_mean(test_y, test_scores, seen=test_seen, gamma=gamma)
    plain = gzsl_accuracies(test_y, test_scores, seen=test_seen)
    assert calibrated.harmonic_mean > plain.harmonic_mean
    assert calibrated.gamma == gamma


def test_calibrated_harmonic_mean_at_zero_equals_gzsl_accuracies_exactly() -> None:
    for seed in range(5):
        y_true, scores, seen = random_problem(seed, 300, 8)
        for values in (scores, np.round(scores), scores.astype(np.float32)):
            got = calibrated_harmonic_mean(y_true, values, seen=seen, gamma=0.0)
            assert got == with_gamma(gzsl_accuracies(y_true, values, seen=seen), 0.0)


def test_curve_is_json_serializable() -> None:
    curve = calibrated_stacking_curve(Y, SCORES, seen=SEEN)
    record: dict[str, object] = {
        field.name: [float(v) for v in getattr(curve, field.name)] for field in fields(curve)
    }
    record["ausuc"] = area_under_seen_unseen_curve(curve)
    assert json.loads(json.dumps(record))["ausuc"] == 0.875
    # The two infinite ends only: a strict JSON writer stores gamma[1:-1].
    json.dumps([float(v) for v in curve.gamma[1:-1]], allow_nan=False)
    result = calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=0.75)
    json.dumps(asdict(result), allow_nan=False)


def test_chunked_rows_give_the_same_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    y_true, scores, seen = random_problem(5, 250, 6)
    whole = calibrated_stacking_curve(y_true, scores, seen=seen)
    monkeypatch.setattr(validation, "CHUNK_ELEMENTS", 13)  # two rows of 6 per chunk
    chunked = calibrated_stacking_curve(y_true, scores, seen=seen)
    for key in CURVE_FIELDS:
        np.testing.assert_array_equal(getattr(whole, key), getattr(chunked, key))


def test_float32_and_memmap_scores(tmp_path: Path) -> None:
    y_true, scores, seen = random_problem(6, 300, 7)
    path = tmp_path / "scores.npy"
    np.save(path, scores.astype(np.float32))
    mapped = np.load(path, mmap_mode="r")
    from_map = calibrated_stacking_curve(y_true, mapped, seen=seen)
    direct = calibrated_stacking_curve(y_true, scores.astype(np.float32), seen=seen)
    for key in CURVE_FIELDS:
        np.testing.assert_array_equal(getattr(from_map, key), getattr(direct, key))
    # float32 differences are exact in float64, so the margins equal the float64 computation.
    margin, _ = stacking_margins(y_true, mapped, seen=seen)
    s64 = np.asarray(mapped, dtype=np.float64)
    np.testing.assert_array_equal(margin, s64[:, seen].max(1) - s64[:, ~seen].max(1))


# --- agreement with the independent implementations on seeded random inputs ---------------------


@pytest.mark.parametrize(("seed", "integer"), [(0, False), (1, False), (2, True), (3, True)])
def test_curve_agrees_with_plain_python_reference(seed: int, integer: bool) -> None:
    y_true, scores, seen = random_problem(seed, 120, 6, integer=integer)
    edges, values = ref_curve(y_true.tolist(), scores.tolist(), seen.tolist())
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    np.testing.assert_array_equal(curve.gamma, edges)
    np.testing.assert_allclose(curve.seen_accuracy, [s for s, _ in values], atol=1e-12)
    np.testing.assert_allclose(curve.unseen_accuracy, [u for _, u in values], atol=1e-12)
    np.testing.assert_allclose(
        curve.harmonic_mean, [harmonic_mean(s, u) for s, u in values], atol=1e-12
    )
    assert ausuc(y_true, scores, seen=seen) == pytest.approx(ref_area(values), abs=1e-12)
    assert select_gamma(y_true, scores, val_seen=seen) == ref_select(edges, values)


@pytest.mark.parametrize("seed", range(4))
def test_curve_agrees_with_brute_force_at_random_gammas(seed: int) -> None:
    y_true, scores, seen = random_problem(seed, 500, 10)
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    breakpoints = curve.gamma[1:-1]
    rng = np.random.default_rng(100 + seed)
    gammas = rng.uniform(breakpoints[0] - 1, breakpoints[-1] + 1, 60)
    for gamma in gammas:
        if np.min(np.abs(breakpoints - gamma)) < 1e-9:
            continue
        j = int(np.searchsorted(curve.gamma, gamma)) - 1
        expected = brute(y_true, scores, seen, float(gamma))
        assert curve.seen_accuracy[j] == pytest.approx(expected.seen, abs=1e-12)
        assert curve.unseen_accuracy[j] == pytest.approx(expected.unseen, abs=1e-12)
        assert curve.harmonic_mean[j] == pytest.approx(expected.harmonic_mean, abs=1e-12)
        at = calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=float(gamma))
        assert at == with_gamma(expected, float(gamma))


def test_harmonic_mean_array_matches_gzsl_harmonic_mean_exactly() -> None:
    y_true, scores, seen = random_problem(9, 2000, 12)
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    for s, u, h in zip(
        curve.seen_accuracy, curve.unseen_accuracy, curve.harmonic_mean, strict=True
    ):
        assert h == harmonic_mean(float(s), float(u))


def test_resampling_from_margins_equals_recomputing_from_scores() -> None:
    y_true, scores, seen = random_problem(4, 400, 8)
    margin, group_correct = stacking_margins(y_true, scores, seen=seen)
    rng = np.random.default_rng(0)
    for _ in range(5):
        idx = rng.integers(0, y_true.shape[0], y_true.shape[0])
        fast = calibrated_stacking_curve_from_margins(
            y_true[idx], margin[idx], group_correct[idx], seen=seen
        )
        slow = calibrated_stacking_curve(y_true[idx], scores[idx], seen=seen)
        for key in CURVE_FIELDS:
            np.testing.assert_array_equal(getattr(fast, key), getattr(slow, key))


def _one_resample_at_a_time(
    y_true: np.ndarray,
    margin: np.ndarray,
    group_correct: np.ndarray,
    seen: np.ndarray,
    rows: np.ndarray,
) -> list[float]:
    """The bootstrap's replicates as they were computed before issue 28: one curve per row."""
    return [
        area_under_seen_unseen_curve(
            calibrated_stacking_curve_from_margins(
                y_true[idx], margin[idx], group_correct[idx], seen=seen
            )
        )
        for idx in rows
    ]


@pytest.mark.parametrize("integer", [False, True])  # integer scores: many equal margins
def test_ausuc_of_resamples_is_each_rows_ausuc_bit_for_bit(integer: bool) -> None:
    y_true, scores, seen = random_problem(5, 600, 9, integer=integer)
    margin, group_correct = stacking_margins(y_true, scores, seen=seen)
    rng = np.random.default_rng(1)
    # Within-class resamples (every class keeps its size) and free ones of other lengths; 150
    # rows of 600 images are three of the chunks `areas` works in.
    order = np.argsort(y_true, kind="stable")
    sizes = np.bincount(y_true, minlength=9)
    starts = np.cumsum(sizes) - sizes
    within = order[
        starts[y_true[order]] + (rng.random((150, 600)) * sizes[y_true[order]]).astype(int)
    ]
    free = rng.integers(0, 600, (30, 250))
    free[:, :2] = [0, 1]  # a seen and an unseen class in every row (y_true[0], y_true[1])
    for rows in (within, free, within[:1], np.arange(600)[None]):
        got = ausuc_of_resamples(y_true, margin, group_correct, seen=seen, index_rows=rows)
        expected = _one_resample_at_a_time(y_true, margin, group_correct, seen, rows)
        assert got.tolist() == expected  # exactly: the intervals in stored records depend on it


def test_ausuc_of_resamples_without_a_seen_class_fails_as_one_resample_does() -> None:
    margin, group_correct = stacking_margins(Y, SCORES, seen=SEEN)
    rows = np.array([[0, 1, 2, 3], [2, 3, 3, 2]])  # row 1: unseen images only
    with pytest.raises(MetricError) as batched:
        ausuc_of_resamples(Y, margin, group_correct, seen=SEEN, index_rows=rows)
    with pytest.raises(MetricError) as single:
        _one_resample_at_a_time(Y, margin, group_correct, SEEN, rows[1:])
    assert str(batched.value) == str(single.value)
    assert "the seen classes" in str(batched.value)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (np.array([0, 1, 2]), "2D integer array"),
        (np.array([[0.0, 1.0]]), "2D integer array"),
        (np.array([[0, 4]]), "in [0, 4)"),
        (np.array([[-1, 0]]), "in [0, 4)"),
    ],
)
def test_ausuc_of_resamples_refuses_bad_index_rows(rows: np.ndarray, message: str) -> None:
    margin, group_correct = stacking_margins(Y, SCORES, seen=SEEN)
    with pytest.raises(MetricError, match=re.escape(message)):
        ausuc_of_resamples(Y, margin, group_correct, seen=SEEN, index_rows=rows)


# --- properties ----------------------------------------------------------------------------------


@st.composite
def stacking_problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_candidates = draw(st.integers(2, 7))
    seen = draw(hnp.arrays(bool, n_candidates))
    seen[0], seen[-1] = True, False  # both kinds present
    n_images = draw(st.integers(2, 25))
    y_true = draw(hnp.arrays(np.int64, n_images, elements=st.integers(0, n_candidates - 1)))
    y_true[0], y_true[1] = 0, n_candidates - 1  # a seen and an unseen image
    # Multiples of 1/8: every difference and every scores - gamma at a breakpoint is exact,
    # and small integers make ties (within and across groups) and equal margins common.
    values = st.one_of(st.integers(-2, 2), st.integers(-64, 64).map(lambda v: v / 8))
    scores = draw(hnp.arrays(np.float64, (n_images, n_candidates), elements=values))
    return y_true, scores, seen


@settings(max_examples=200, deadline=None)
@given(stacking_problems(), st.lists(st.floats(-20, 20, allow_nan=False), max_size=8))
def test_curve_properties(
    problem: tuple[np.ndarray, np.ndarray, np.ndarray], random_gammas: list[float]
) -> None:
    y_true, scores, seen = problem
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    gamma, s, u, h = (
        getattr(curve, key)
        for key in ("gamma", "seen_accuracy", "unseen_accuracy", "harmonic_mean")
    )
    m = gamma.shape[0] - 2
    assert s.shape == u.shape == h.shape == (m + 1,)
    assert gamma[0] == -INF and gamma[-1] == INF and np.all(np.diff(gamma) > 0)
    assert np.all(np.diff(s) <= 0) and np.all(np.diff(u) >= 0)
    assert u[0] == 0.0 and s[-1] == 0.0
    assert np.all((s >= 0) & (s <= 1) & (u >= 0) & (u <= 1))
    assert np.all(h <= np.maximum(s, u)) and np.all(h >= np.minimum(s, u))
    # Consecutive intervals always differ (breakpoints are where the curve changes).
    assert np.all((np.diff(s) != 0) | (np.diff(u) != 0))
    area = area_under_seen_unseen_curve(curve)
    assert 0.0 <= area <= s[0] * u[-1] + 1e-15 <= 1.0 + 1e-15
    # Brute force inside every interval (midpoints, ends pushed out by 1) and at random gammas.
    finite = gamma[1:-1]
    probes = list(random_gammas)
    if m:
        probes += [finite[0] - 1.0, finite[-1] + 1.0, *((finite[:-1] + finite[1:]) / 2)]
    else:
        probes += [0.0]
    for g in probes:
        if m and np.min(np.abs(finite - g)) < 1e-9:
            continue
        j = int(np.searchsorted(gamma, g)) - 1
        expected = brute(y_true, scores, seen, g)
        assert s[j] == pytest.approx(expected.seen, abs=1e-12)
        assert u[j] == pytest.approx(expected.unseen, abs=1e-12)
        assert h[j] == pytest.approx(expected.harmonic_mean, abs=1e-12)
    # At a breakpoint: seen from the right, unseen from the left; the literal ties agree.
    for j in range(1, m + 1):
        expected = brute(y_true, scores, seen, float(gamma[j]))
        assert s[j] == pytest.approx(expected.seen, abs=1e-12)
        assert u[j - 1] == pytest.approx(expected.unseen, abs=1e-12)
    # gamma = 0 is plain GZSL, exactly.
    assert calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=0.0) == with_gamma(
        gzsl_accuracies(y_true, scores, seen=seen), 0.0
    )


@settings(max_examples=150, deadline=None)
@given(stacking_problems())
def test_select_gamma_properties(problem: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    y_true, scores, seen = problem
    curve = calibrated_stacking_curve(y_true, scores, seen=seen)
    gamma = select_gamma(y_true, scores, val_seen=seen)
    assert math.isfinite(gamma)
    best = float(curve.harmonic_mean.max())
    achieved = calibrated_harmonic_mean(y_true, scores, seen=seen, gamma=gamma).harmonic_mean
    assert achieved == pytest.approx(best, abs=1e-12)
    if best == 0.0:
        assert gamma == 0.0
    else:
        # Strictly inside a best interval, and no best interval is closer to 0.
        edges = curve.gamma
        j = int(np.searchsorted(edges, gamma)) - 1
        assert edges[j] < gamma < edges[j + 1]

        def distance(k: int) -> float:
            return float(max(edges[k], 0.0, -edges[k + 1]))

        best_intervals = np.flatnonzero(curve.harmonic_mean >= best * (1 - 1e-12))
        assert j in best_intervals
        assert distance(j) == min(distance(int(k)) for k in best_intervals)


@settings(max_examples=100, deadline=None)
@given(stacking_problems(), st.integers(0, 2**32 - 1))
def test_curve_invariant_under_image_and_column_permutations(
    problem: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int
) -> None:
    y_true, scores, seen = problem
    rng = np.random.default_rng(seed)
    rows = rng.permutation(y_true.shape[0])
    perm = rng.permutation(scores.shape[1])
    inverse = np.argsort(perm)
    a = calibrated_stacking_curve(y_true, scores, seen=seen)
    b = calibrated_stacking_curve(inverse[y_true[rows]], scores[rows][:, perm], seen=seen[perm])
    np.testing.assert_array_equal(a.gamma, b.gamma)
    for key in ("seen_accuracy", "unseen_accuracy", "harmonic_mean"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=20),
    st.lists(st.floats(0, 1), min_size=1, max_size=20),
)
def test_area_bounded_for_any_monotone_curve(
    seen_values: list[float], unseen_values: list[float]
) -> None:
    n = min(len(seen_values), len(unseen_values))
    s = np.sort(seen_values[:n])[::-1]
    u = np.sort(unseen_values[:n])
    curve = SeenUnseenCurve(
        gamma=np.arange(n + 1.0), seen_accuracy=s, unseen_accuracy=u, harmonic_mean=np.zeros(n)
    )
    area = area_under_seen_unseen_curve(curve)
    assert 0.0 <= area <= 1.0
    assert area <= s[0] * (u[-1] - u[0]) + 1e-12


# --- errors --------------------------------------------------------------------------------------


def test_error_curve_nan_scores_name_the_row() -> None:
    scores = SCORES.copy()
    scores[2, 1] = np.nan
    with pytest.raises(MetricError, match=r"row 2 holds NaN \(at column 1\)"):
        calibrated_stacking_curve(Y, scores, seen=SEEN)


def test_error_curve_y_true_out_of_range() -> None:
    with pytest.raises(MetricError, match=r"y_true\[1\] = 3"):
        calibrated_stacking_curve([0, 3, 2, 2], SCORES, seen=SEEN)


@pytest.mark.parametrize(
    ("seen", "match"),
    [
        ([True, True, True], r"at least one seen and one unseen .* got 3 seen and 0 unseen"),
        ([True, False], r"`seen` to have one entry per candidate column \(3\), but got 2"),
        ([1, 1, 0], r"`seen` to be a 1D bool array.*dtype int64"),
        (None, r"`seen` to be a 1D bool array over candidate columns, but got None"),
    ],
)
def test_error_curve_bad_seen(seen: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        calibrated_stacking_curve(Y, SCORES, seen=seen)  # type: ignore[arg-type]


def test_error_curve_no_unseen_image() -> None:
    with pytest.raises(
        MetricError, match=r"among the unseen classes \(1 classes\), but none of the 2"
    ):
        calibrated_stacking_curve(Y[:2], SCORES[:2], seen=SEEN)


def test_error_curve_no_seen_image() -> None:
    with pytest.raises(
        MetricError, match=r"among the seen classes \(2 classes\), but none of the 2"
    ):
        ausuc(Y[2:], SCORES[2:], seen=SEEN)


def test_error_margin_overflow() -> None:
    # 1e308 - (-1e308) overflows float64.
    with pytest.raises(MetricError, match=r"finite margin .* row 1 gives inf.*Rescale"):
        calibrated_stacking_curve([0, 1], [[1.0, 0.0], [1e308, -1e308]], seen=[True, False])


@pytest.mark.parametrize(
    ("y_true", "margin", "group_correct", "seen", "match"),
    [
        (
            [0, 2],
            [[1.0, 2.0]],
            [True, True],
            SEEN,
            r"`margin` to be a 1D real array.*shape \(1, 2\)",
        ),
        ([0, 2], ["a", "b"], [True, True], SEEN, r"`margin` to be a 1D real array.*dtype <U1"),
        (
            [0, 2],
            [1.0],
            [True, True],
            SEEN,
            r"`margin` to have one entry per image .* \(2 images\), but got 1",
        ),
        (
            [0, 2],
            [1.0, np.inf],
            [True, True],
            SEEN,
            r"`margin` to contain only finite values, but got margin\[1\] = inf",
        ),
        ([0, 2], [1.0, 2.0], [1, 0], SEEN, r"`group_correct` to be a 1D bool array.*dtype int64"),
        (
            [0, 2],
            [1.0, 2.0],
            [True],
            SEEN,
            r"`group_correct` to have one entry per image .* but got 1",
        ),
        ([0, 3], [1.0, 2.0], [True, True], SEEN, r"y_true\[1\] = 3"),
        (
            [0, 2],
            [1.0, 2.0],
            [True, True],
            [[True, False]],
            r"`seen` to be a 1D bool array.*shape \(1, 2\)",
        ),
        ([0, 1], [1.0, 2.0], [True, True], SEEN, r"among the unseen classes"),
    ],
)
def test_error_curve_from_margins(
    y_true: object, margin: object, group_correct: object, seen: object, match: str
) -> None:
    with pytest.raises(MetricError, match=match):
        calibrated_stacking_curve_from_margins(y_true, margin, group_correct, seen=seen)  # type: ignore[arg-type]


GOOD_CURVE = {
    "gamma": [-INF, 0.5, INF],
    "seen_accuracy": [1.0, 0.0],
    "unseen_accuracy": [0.0, 1.0],
    "harmonic_mean": [0.0, 0.0],
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"seen_accuracy": []}, r"`curve.seen_accuracy` to hold at least one interval, but got 0"),
        (
            {"unseen_accuracy": [[0.0, 1.0]]},
            r"`curve.unseen_accuracy` to be a 1D real array.* shape \(1, 2\)",
        ),
        (
            {"seen_accuracy": [1.5, 0.0]},
            r"`curve.seen_accuracy` to hold values in \[0, 1\], but got curve.seen_accuracy\[0\] = 1.5",
        ),
        ({"unseen_accuracy": [0.0, np.nan]}, r"curve.unseen_accuracy\[1\] = nan"),
        (
            {"seen_accuracy": [1.0, 0.5, 0.0]},
            r"`curve.unseen_accuracy` to have one entry per interval in `curve.seen_accuracy` \(3 intervals\), but got 2",
        ),
        (
            {"seen_accuracy": [0.0, 1.0]},
            r"`curve.seen_accuracy` to be non-increasing.*\[1\] = 1.0 after 0.0",
        ),
        ({"unseen_accuracy": [1.0, 0.0]}, r"`curve.unseen_accuracy` to be non-decreasing"),
        (
            {"gamma": [-INF, INF]},
            r"`curve.gamma` to hold the 3 edges of the 2 intervals, but got 2",
        ),
        (
            {"harmonic_mean": [0.0]},
            r"`curve.harmonic_mean` to have one entry per interval .* but got 1",
        ),
    ],
)
def test_error_bad_curve(change: dict[str, object], match: str) -> None:
    with pytest.raises(MetricError, match=match):
        SeenUnseenCurve(**{**GOOD_CURVE, **change})  # type: ignore[arg-type]


def test_curve_is_read_only_and_does_not_alias() -> None:
    seen = np.array([1.0, 0.0])
    curve = SeenUnseenCurve(**{**GOOD_CURVE, "seen_accuracy": seen})  # type: ignore[arg-type]
    assert not curve.seen_accuracy.flags.writeable and seen.flags.writeable
    assert curve.seen_accuracy is not seen


def test_error_area_not_a_curve() -> None:
    with pytest.raises(MetricError, match=r"`curve` to be a SeenUnseenCurve .* but got list"):
        area_under_seen_unseen_curve([0.0, 1.0])  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=r"`curve` to be a SeenUnseenCurve .* but got dict"):
        area_under_seen_unseen_curve(GOOD_CURVE)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("criterion", "match"),
    [
        ("seen_accuracy", r"`criterion` to be one of \['harmonic_mean'\], but got 'seen_accuracy'"),
        (None, r"`criterion` .* but got None"),
    ],
)
def test_error_select_gamma_bad_criterion(criterion: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        select_gamma(Y, SCORES, val_seen=SEEN, criterion=criterion)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("val_seen", "match"),
    [
        ([True, False], r"`val_seen` to have one entry per candidate column \(3\), but got 2"),
        ([True, True, True], r"`val_seen` to mark at least one seen and one unseen"),
        (None, r"`val_seen` to be a 1D bool array"),
    ],
)
def test_error_select_gamma_bad_val_seen(val_seen: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        select_gamma(Y, SCORES, val_seen=val_seen)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("gamma", "match"),
    [
        (float("nan"), r"`gamma` to be a real number, but got nan"),
        (True, r"`gamma` to be a real number, but got True"),
        ("0.5", r"`gamma` to be a real number, but got '0.5'"),
        (None, r"`gamma` to be a real number, but got None"),
    ],
)
def test_error_bad_gamma(gamma: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        calibrated_harmonic_mean(Y, SCORES, seen=SEEN, gamma=gamma)  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=match):
        per_image_correct_at_gamma(Y, SCORES, seen=SEEN, gamma=gamma)  # type: ignore[arg-type]


def test_error_calibrated_harmonic_mean_no_unseen_image() -> None:
    with pytest.raises(MetricError, match=r"among the unseen classes \(1 classes\)"):
        calibrated_harmonic_mean(Y[:2], SCORES[:2], seen=SEEN, gamma=0.5)


def test_error_stacking_margins_bad_scores_shape() -> None:
    with pytest.raises(MetricError, match=r"`scores` to be a 2D array .* shape \(3,\)"):
        stacking_margins([0], [1.0, 0.0, 0.0], seen=SEEN)


@settings(max_examples=150, deadline=None)
@given(stacking_problems(), st.data())
def test_ausuc_of_resamples_property(
    problem: tuple[np.ndarray, np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    """Any rows with a seen and an unseen image each: the one-row-at-a-time areas, exactly."""
    y_true, scores, seen = problem
    margin, group_correct = stacking_margins(y_true, scores, seen=seen)
    n = y_true.shape[0]
    width = data.draw(st.integers(2, 2 * n))
    rows = data.draw(
        hnp.arrays(np.int64, (data.draw(st.integers(1, 6)), width), elements=st.integers(0, n - 1))
    )
    rows[:, :2] = [0, 1]
    got = ausuc_of_resamples(y_true, margin, group_correct, seen=seen, index_rows=rows)
    assert got.tolist() == _one_resample_at_a_time(y_true, margin, group_correct, seen, rows)
