"""Tests of harness.metrics.gzsl: hand-computed GZSL cases, harmonic mean properties, errors."""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import MetricError
from harness.metrics.flat import PerClassAccuracy, per_class_top_k_accuracy
from harness.metrics.gzsl import (
    GzslAccuracies,
    gzsl_accuracies,
    gzsl_accuracies_details,
    harmonic_mean,
)

# Columns 0, 1 seen; column 2 unseen. argmax per row: 0, 0, 1, 0, 2.
# Seen class 0: image 0 right (1/1). Seen class 1: image 1 wrong, image 2 right (1/2).
#   seen = (1 + 1/2) / 2 = 0.75
# Unseen class 2: image 3 predicted as seen class 0 (wrong), image 4 right: unseen = 1/2.
# H = 2 * 0.75 * 0.5 / (0.75 + 0.5) = 0.75 / 1.25 = 0.6
Y = np.array([0, 1, 1, 2, 2])
SCORES = np.array(
    [
        [0.9, 0.1, 0.0],
        [0.6, 0.3, 0.1],
        [0.1, 0.8, 0.1],
        [0.5, 0.1, 0.4],
        [0.1, 0.2, 0.7],
    ]
)
SEEN = np.array([True, True, False])


# --- hand-computed cases -------------------------------------------------------------------------


def test_gzsl_accuracies_normal_case() -> None:
    result = gzsl_accuracies(Y, SCORES, seen=SEEN)
    assert result.seen == 0.75
    assert result.unseen == 0.5
    assert result.harmonic_mean == pytest.approx(0.6, abs=1e-15)
    assert isinstance(result, GzslAccuracies)


def test_gzsl_predicts_over_all_candidates() -> None:
    # Restricted to the unseen column only (ZSL), image 3 would be right: unseen acc 1.0.
    # Over seen ∪ unseen it is predicted as seen class 0: GZSL unseen acc 0.5.
    zsl = per_class_top_k_accuracy(Y[3:] - 2, SCORES[3:, 2:], classes=[0])
    assert zsl == 1.0
    assert gzsl_accuracies(Y, SCORES, seen=SEEN).unseen == 0.5


def test_gzsl_accuracies_at_k_2() -> None:
    # Image 1 (true 1): only col 0 >= 0.3 -> 1 < 2, right. Image 3 (true 2): only col 0 >= 0.4
    # -> right. Every image right: seen = unseen = H = 1.
    assert gzsl_accuracies(Y, SCORES, seen=SEEN, k=2) == GzslAccuracies(
        seen=1.0, unseen=1.0, harmonic_mean=1.0
    )


def test_gzsl_accuracies_k_equals_n_candidates() -> None:
    assert gzsl_accuracies(Y, np.zeros_like(SCORES), seen=SEEN, k=3).harmonic_mean == 1.0
    # ...while all-tied scores are wrong for every image at k=1 (ties count against).
    assert gzsl_accuracies(Y, np.zeros_like(SCORES), seen=SEEN, k=1).harmonic_mean == 0.0


def test_gzsl_zero_seen_accuracy_gives_h_zero() -> None:
    # Both seen images are predicted as unseen class 2; the unseen image is right.
    # seen = 0, unseen = 1 -> H = 0 (not 0/0, not the arithmetic mean 0.5).
    y_true = [0, 1, 2]
    scores = [[0.1, 0.0, 0.9], [0.0, 0.1, 0.9], [0.0, 0.1, 0.9]]
    assert gzsl_accuracies(y_true, scores, seen=SEEN) == GzslAccuracies(
        seen=0.0, unseen=1.0, harmonic_mean=0.0
    )


def test_gzsl_zero_unseen_accuracy_gives_h_zero() -> None:
    # The usual seen-class bias: both unseen images are predicted as seen classes.
    # seen = (1 + 1) / 2 = 1, unseen = 0 -> H = 0.
    y_true = [0, 1, 2, 2]
    scores = [[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.9, 0.1, 0.8], [0.1, 0.9, 0.8]]
    assert gzsl_accuracies(y_true, scores, seen=SEEN) == GzslAccuracies(
        seen=1.0, unseen=0.0, harmonic_mean=0.0
    )


def test_gzsl_tie_between_seen_and_unseen_counts_against() -> None:
    # Unseen image tied between seen col 0 and its true col 2 -> wrong; unseen = 0, H = 0.
    y_true = [0, 2]
    scores = [[1.0, 0.0, 0.0], [0.5, 0.0, 0.5]]
    assert gzsl_accuracies(y_true, scores, seen=SEEN).unseen == 0.0


def test_gzsl_empty_seen_class_excluded_and_reported() -> None:
    # Add seen column 3 with no test image: seen mean still over classes 0 and 1 -> 0.75.
    scores = np.column_stack([SCORES, np.full(5, -1.0)])
    seen = np.array([True, True, False, True])
    details = gzsl_accuracies_details(Y, scores, seen=seen)
    assert details.seen == PerClassAccuracy(
        value=0.75,
        per_class=(1.0, 0.5, None),
        classes=(0, 1, 3),
        excluded_classes=(3,),
        n_images=3,
        k=1,
    )
    assert details.unseen == PerClassAccuracy(
        value=0.5, per_class=(0.5,), classes=(2,), excluded_classes=(), n_images=2, k=1
    )
    assert details.k == 1
    assert details.accuracies == gzsl_accuracies(Y, scores, seen=seen)


def test_gzsl_seen_equals_per_class_accuracy_over_seen_columns() -> None:
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 10, 300)
    scores = rng.standard_normal((300, 10))
    seen = np.arange(10) < 6
    for k in (1, 3):
        result = gzsl_accuracies(y_true, scores, seen=seen, k=k)
        s = per_class_top_k_accuracy(y_true, scores, classes=np.flatnonzero(seen), k=k)
        u = per_class_top_k_accuracy(y_true, scores, classes=np.flatnonzero(~seen), k=k)
        assert result.seen == s
        assert result.unseen == u
        assert result.harmonic_mean == pytest.approx(2 * s * u / (s + u))


@pytest.mark.parametrize(
    ("seen", "unseen", "expected"),
    [
        (0.5, 0.25, 1 / 3),  # 2 * 0.5 * 0.25 / 0.75 = 0.25 / 0.75
        (0.75, 0.5, 0.6),  # 0.75 / 1.25
        (1.0, 1.0, 1.0),
        (0.6, 0.6, 0.6),  # equal inputs give exactly that input
        (0.5, 0.0, 0.0),
        (0.0, 0.5, 0.0),
        (0.0, 0.0, 0.0),  # defined as 0, not 0/0
        (1, 0, 0.0),  # ints accepted
        (np.float32(0.5), np.float64(0.5), 0.5),
    ],
)
def test_harmonic_mean_hand_values(seen: float, unseen: float, expected: float) -> None:
    h = harmonic_mean(seen, unseen)
    assert type(h) is float
    assert h == pytest.approx(expected, abs=1e-15)


# --- properties ----------------------------------------------------------------------------------

accuracies = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=500)
@given(accuracies, accuracies)
def test_harmonic_mean_between_min_and_max(s: float, u: float) -> None:
    h = harmonic_mean(s, u)
    assert min(s, u) <= h <= max(s, u)
    assert (h == 0.0) == (min(s, u) == 0.0)
    assert h == harmonic_mean(u, s)  # symmetric, exactly
    assert h <= (s + u) / 2 * (1 + 1e-15)  # H <= arithmetic mean
    if s == u:
        assert h == s


@st.composite
def gzsl_problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_candidates = draw(st.integers(2, 7))
    seen = draw(hnp.arrays(bool, n_candidates))
    seen[0], seen[-1] = True, False  # both kinds present
    n_images = draw(st.integers(2, 25))
    y_true = draw(hnp.arrays(np.int64, n_images, elements=st.integers(0, n_candidates - 1)))
    y_true[0], y_true[1] = 0, n_candidates - 1  # a seen and an unseen image
    values = st.one_of(st.integers(-2, 2).map(float), st.floats(-1e3, 1e3, allow_nan=False))
    scores = draw(hnp.arrays(np.float64, (n_images, n_candidates), elements=values))
    return y_true, scores, seen


@settings(max_examples=150, deadline=None)
@given(gzsl_problems())
def test_gzsl_accuracies_properties(problem: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    y_true, scores, seen = problem
    previous = None
    for k in range(1, scores.shape[1] + 1):
        result = gzsl_accuracies(y_true, scores, seen=seen, k=k)
        s, u, h = result.seen, result.unseen, result.harmonic_mean
        assert 0.0 <= min(s, u) <= h <= max(s, u) <= 1.0
        assert (h == 0.0) == (min(s, u) == 0.0)
        if previous is not None:  # non-decreasing in k
            assert previous.seen <= s and previous.unseen <= u
        previous = result
    assert previous == GzslAccuracies(seen=1.0, unseen=1.0, harmonic_mean=1.0)
    # Permuting candidate columns consistently with y_true and seen changes nothing.
    perm = np.arange(scores.shape[1])[::-1]
    inverse = np.argsort(perm)
    for k in (1, 2):
        a = gzsl_accuracies(y_true, scores, seen=seen, k=k)
        b = gzsl_accuracies(inverse[y_true], scores[:, perm], seen=seen[perm], k=k)
        for key in ("seen", "unseen", "harmonic_mean"):
            assert math.isclose(getattr(a, key), getattr(b, key), rel_tol=1e-12, abs_tol=1e-15)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seen", "unseen", "match"),
    [
        (1.5, 0.2, r"Expected `seen` to be a number in \[0, 1\], but got 1\.5"),
        (-0.1, 0.2, r"`seen` .* but got -0\.1"),
        (0.2, float("nan"), r"`unseen` to be a number in \[0, 1\], but got nan"),
        (0.2, float("inf"), r"`unseen` .* but got inf"),
        ("0.5", 0.2, r"`seen` .* but got '0\.5'"),
        (True, 0.2, r"`seen` .* but got True"),
        (0.2, None, r"`unseen` .* but got None"),
    ],
)
def test_error_harmonic_mean_bad_input(seen: object, unseen: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        harmonic_mean(seen, unseen)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seen", "match"),
    [
        ([True, True, True], r"at least one seen and one unseen .* got 3 seen and 0 unseen"),
        ([False, False, False], r"got 0 seen and 3 unseen"),
        ([True, False], r"`seen` to have one entry per candidate column \(3\), but got 2"),
        ([1, 1, 0], r"`seen` to be a 1D bool array .* dtype int64.*astype\(bool\)"),
        ([[True, True, False]], r"`seen` to be a 1D bool array .* shape \(1, 3\)"),
        (None, r"`seen` to be a 1D bool array over candidate columns, but got None"),
    ],
)
def test_error_gzsl_bad_seen_mask(seen: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        gzsl_accuracies(Y, SCORES, seen=seen)  # type: ignore[arg-type]


def test_error_gzsl_no_seen_test_image() -> None:
    with pytest.raises(
        MetricError, match=r"true class is among the seen classes \(2 classes\), but none of the 2"
    ):
        gzsl_accuracies(Y[3:], SCORES[3:], seen=SEEN)


def test_error_gzsl_no_unseen_test_image() -> None:
    with pytest.raises(MetricError, match=r"among the unseen classes \(1 classes\)"):
        gzsl_accuracies(Y[:3], SCORES[:3], seen=SEEN)


def test_error_gzsl_nan_scores_name_the_row() -> None:
    scores = SCORES.copy()
    scores[4, 2] = np.nan
    with pytest.raises(MetricError, match=r"row 4 holds NaN \(at column 2\)"):
        gzsl_accuracies(Y, scores, seen=SEEN)


def test_error_gzsl_k_too_big() -> None:
    with pytest.raises(MetricError, match=r"number of candidates \(3\), but got k=4"):
        gzsl_accuracies(Y, SCORES, seen=SEEN, k=4)


def test_error_gzsl_y_true_out_of_range() -> None:
    with pytest.raises(MetricError, match=r"y_true\[0\] = 3"):
        gzsl_accuracies([3, 0, 1, 2, 2], SCORES, seen=SEEN)
