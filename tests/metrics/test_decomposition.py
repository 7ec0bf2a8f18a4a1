"""Tests of harness.metrics.decomposition: point estimates of the three reductions, errors."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.errors import MetricError
from harness.metrics.bootstrap import bootstrap_samples
from harness.metrics.decomposition import Decomposition, concatenate, point_estimate
from harness.metrics.flat import per_class_top_k_accuracy, per_image_top_k_accuracy, top_k_correct
from harness.metrics.gzsl import gzsl_accuracies
from tests.metrics.decomposition_cases import TINY, seeded_problem

# --- point estimates -----------------------------------------------------------------------------


def test_point_estimate_hand_cases() -> None:
    # class_mean: class 0 -> (0 + 1) / 2 = 0.5, class 1 -> 1; (0.5 + 1) / 2 = 0.75.
    assert point_estimate(TINY) == 0.75
    # image_mean: 3 / 4.
    image = Decomposition(
        values=TINY.values, classes=TINY.classes, n_classes=2, combine="image_mean"
    )
    assert point_estimate(image) == 0.75
    # Unbalanced: class 0 has 3 images (1, 0, 0) -> 1/3, class 1 has (1) -> 1.
    # class mean (1/3 + 1) / 2 = 2/3; image mean 2/4 = 0.5.
    d = Decomposition(values=[1, 0, 0, 1], classes=[0, 0, 0, 1], n_classes=2)
    assert point_estimate(d) == pytest.approx(2 / 3)
    d_img = Decomposition(
        values=[1, 0, 0, 1], classes=[0, 0, 0, 1], n_classes=2, combine="image_mean"
    )
    assert point_estimate(d_img) == 0.5


def test_point_estimate_harmonic_of_groups_hand_case() -> None:
    # Group 0 = classes {0, 1}: means 1/2 and 1 -> 3/4. Group 1 = class {2}: mean 1/2.
    # H = 2 * 3/4 * 1/2 / (3/4 + 1/2) = 0.75 / 1.25 = 0.6.
    d = Decomposition(
        values=[0, 1, 1, 1, 0],
        classes=[0, 0, 1, 2, 2],
        n_classes=3,
        groups=[0, 0, 1],
        combine="harmonic_of_groups",
    )
    assert point_estimate(d) == pytest.approx(0.6)
    # Three groups with means 1/2, 1, 1/2 (classes 0, 1, 2): 3 / (2 + 1 + 2) = 0.6.
    d3 = Decomposition(
        values=[0, 1, 1, 1, 0],
        classes=[0, 0, 1, 2, 2],
        n_classes=3,
        groups=[5, 7, 9],
        combine="harmonic_of_groups",
    )
    assert point_estimate(d3) == pytest.approx(0.6)


def test_point_estimate_harmonic_zero_group_gives_zero() -> None:
    # Group 1 (class 1) has mean 0 -> H = 0 (as harness.metrics.gzsl.harmonic_mean).
    d = Decomposition.for_gzsl([1.0, 1.0, 0.0], [0, 0, 1], seen=[True, False])
    assert point_estimate(d) == 0.0


def test_point_estimate_two_columns_and_empty_class() -> None:
    # Column 0 as TINY (0.75); column 1 = 2 * column 0 -> 1.5. Class 2 has no image.
    values = np.column_stack([TINY.values, 2 * TINY.values])
    d = Decomposition(values=values, classes=[0, 0, 1, 1], n_classes=3)
    np.testing.assert_allclose(point_estimate(d), [0.75, 1.5])
    assert d.excluded_classes.tolist() == [2]
    assert d.n_images == 4 and d.n_columns == 2 and TINY.n_columns is None


def test_point_estimate_agrees_with_flat_and_gzsl() -> None:
    y_true, scores, seen = seeded_problem(3, 300, 12)
    for k in (1, 3):
        correct = top_k_correct(y_true, scores, k=k)
        d = Decomposition(values=correct, classes=y_true, n_classes=12)
        expected = per_class_top_k_accuracy(y_true, scores, classes=np.arange(12), k=k)
        assert point_estimate(d) == pytest.approx(expected, abs=1e-15)
        d_img = Decomposition(values=correct, classes=y_true, n_classes=12, combine="image_mean")
        assert point_estimate(d_img) == pytest.approx(per_image_top_k_accuracy(y_true, scores, k=k))
        h = gzsl_accuracies(y_true, scores, seen=seen, k=k).harmonic_mean
        assert point_estimate(Decomposition.for_gzsl(correct, y_true, seen=seen)) == pytest.approx(
            h, abs=1e-15
        )


def test_decomposition_freezes_a_copy() -> None:
    values = np.array([0.0, 1.0])
    d = Decomposition(values=values, classes=[0, 1], n_classes=2)
    values[0] = 5.0  # the caller's array stays writable and does not leak in
    assert point_estimate(d) == 0.5
    with pytest.raises(ValueError, match="read-only"):
        d.values[0] = 1.0


def test_concatenate_equals_one_decomposition() -> None:
    a = Decomposition(values=[0.0, 1.0], classes=[0, 1], n_classes=3)
    b = Decomposition(values=[1.0, 1.0], classes=[0, 1], n_classes=3)
    joined = concatenate([a, b])
    # class 0: (0 + 1) / 2; class 1: (1 + 1) / 2 -> (0.5 + 1) / 2
    assert point_estimate(joined) == 0.75
    assert joined.classes.tolist() == [0, 1, 0, 1]
    empty = Decomposition(values=np.zeros(0), classes=np.zeros(0, dtype=np.int64), n_classes=3)
    assert point_estimate(concatenate([empty, a])) == point_estimate(a)


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_classes": 0}, r"Expected `n_classes` to be an integer >= 1, but got 0"),
        ({"n_classes": 2.0}, r"Expected `n_classes` to be an integer >= 1, but got 2.0"),
        (
            {"combine": "mean"},
            r"Expected `combine` to be one of \['class_mean', .*\], but got 'mean'",
        ),
        ({"values": [0.0, np.nan]}, r"Expected `values` to contain only finite values, but row 1"),
        ({"values": [[[0.0]], [[1.0]]]}, r"Expected `values` to have shape \(n,\) or \(n, m\)"),
        (
            {"values": np.zeros((2, 0))},
            r"Expected `values` to have shape \(n,\) or \(n, m\) with m >= 1",
        ),
        ({"values": ["a", "b"]}, r"Expected `values` to be a real-valued array, but got dtype <U1"),
        ({"classes": [0.0, 1.0]}, r"Expected `classes` to be a 1D integer array .* dtype float64"),
        (
            {"classes": [0, 2]},
            r"Expected `classes` to hold class columns in \[0, 2\), but got classes\[1\] = 2",
        ),
        (
            {"classes": [0, 1, 1]},
            r"Expected `values` to have one row per image in `classes` \(3\), but got 2",
        ),
        ({"groups": [0]}, r"Expected `groups` to have one entry per class \(2\), but got 1"),
        (
            {"groups": [0, -1]},
            r"Expected `groups` to hold non-negative group ids, but got groups\[1\] = -1",
        ),
        (
            {"values": [0.5, -0.5], "combine": "harmonic_of_groups"},
            r"Expected `values` to be non-negative for combine='harmonic_of_groups', but row 1",
        ),
    ],
)
def test_error_decomposition_malformed(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"values": [0.0, 1.0], "classes": [0, 1], "n_classes": 2}
    with pytest.raises(MetricError, match=match):
        Decomposition(**{**base, **kwargs})  # type: ignore[arg-type]


def test_error_decomposition_without_images_or_with_an_empty_group() -> None:
    empty = Decomposition(values=np.zeros(0), classes=np.zeros(0, dtype=np.int64), n_classes=2)
    with pytest.raises(
        MetricError, match=r"Expected the decomposition to hold at least one image, but got 0"
    ):
        point_estimate(empty)
    no_unseen = Decomposition.for_gzsl([1.0, 0.0], [0, 0], seen=[True, False])
    with pytest.raises(
        MetricError, match=r"Expected every group to have a class with images .* group 1 has none"
    ):
        bootstrap_samples(no_unseen)
    with pytest.raises(MetricError, match=r"Expected `seen` to be a 1D bool array"):
        Decomposition.for_gzsl([1.0], [0], seen=[1, 0])


def test_error_concatenate() -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps` to be a non-empty sequence of Decomposition, but got \[\]",
    ):
        concatenate([])
    with pytest.raises(MetricError, match=r"but got \['Decomposition', 'int'\]"):
        concatenate([TINY, 3])  # type: ignore[list-item]
    wider = Decomposition(values=np.ones((4, 2)), classes=TINY.classes, n_classes=2)
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[1\]` to have values of shape \(n,\) like `decomps\[0\]`, but got \(4, 2\)",
    ):
        concatenate([TINY, wider])
    image = Decomposition(
        values=TINY.values, classes=TINY.classes, n_classes=2, combine="image_mean"
    )
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[1\]` to have the n_classes and combine of `decomps\[0\]`",
    ):
        concatenate([TINY, image])
