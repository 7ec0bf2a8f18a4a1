"""Tests of harness.metrics.temperature: softmax at a temperature, fitting it, and their errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from harness.core.errors import MetricError
from harness.metrics.temperature import fit_temperature, softmax_posteriors


def test_softmax_posteriors_hand_computed_and_shift_invariant() -> None:
    # e^0 : e^ln3 = 1 : 3 -> (.25, .75); at T = 2, e^0 : e^(ln 9 / 2) = 1 : 3 as well.
    np.testing.assert_allclose(softmax_posteriors([[0.0, math.log(3)]], 1.0), [[0.25, 0.75]])
    np.testing.assert_allclose(softmax_posteriors([[0.0, math.log(9)]], 2.0), [[0.25, 0.75]])
    scores = np.random.default_rng(0).standard_normal((7, 5)) * 50
    out = softmax_posteriors(scores, 0.5)
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    np.testing.assert_allclose(softmax_posteriors(scores + 1000.0, 0.5), out)  # no overflow


def test_fit_temperature_recovers_the_generating_temperature() -> None:
    rng = np.random.default_rng(5)
    scores = rng.standard_normal((20000, 6)) * 3
    true_t = 2.5
    probs = softmax_posteriors(scores, true_t)
    y = (probs.cumsum(axis=1) > rng.random((20000, 1))).argmax(axis=1)
    fitted = fit_temperature(scores, y)
    assert fitted == pytest.approx(true_t, rel=0.05)
    # Equivariant: scaling the scores by 10 scales the temperature by 10.
    assert fit_temperature(scores * 10, y) == pytest.approx(10 * fitted, rel=1e-5)


def test_fit_temperature_returns_the_lower_bound_for_separable_scores() -> None:
    # Always right by a margin of 1: the NLL log(1 + exp(-1/T)) falls as T -> 0 and rounds to 0
    # below T ~ 1/37; the search stops in that flat region, where the posteriors are one-hot.
    scores = [[1.0, 0.0], [0.0, 1.0]]
    t = fit_temperature(scores, [0, 1], bounds=(0.01, 10.0))
    assert 0.01 <= t < 1 / 30
    np.testing.assert_allclose(softmax_posteriors(scores, t), [[1.0, 0.0], [0.0, 1.0]], atol=1e-12)
    # With the whole interval above the flat region, the lower bound is the minimum.
    assert fit_temperature(scores, [0, 1], bounds=(0.1, 10.0)) == pytest.approx(0.1, rel=1e-6)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("inf"), float("nan"), "1", None])
def test_softmax_temperature_errors(temperature: Any) -> None:
    with pytest.raises(
        MetricError, match=r"Expected `temperature` to be a finite number > 0, but got"
    ):
        softmax_posteriors([[0.0, 1.0]], temperature)


def test_softmax_and_fit_temperature_input_errors() -> None:
    with pytest.raises(
        MetricError, match=r"Expected `scores` to contain only finite values, but row 0 holds NaN"
    ):
        softmax_posteriors([[0.0, float("nan")]], 1.0)
    with pytest.raises(
        MetricError,
        match=r"Expected `val_scores` to contain only finite values, but row 1 holds inf",
    ):
        fit_temperature([[0.0, 1.0], [float("inf"), 0.0]], [0, 1])
    with pytest.raises(
        MetricError,
        match=r"Expected `val_y_true` to hold candidate column indices in \[0, 2\), but got val_y_true\[1\] = 2",
    ):
        fit_temperature([[0.0, 1.0], [1.0, 0.0]], [0, 2])
    with pytest.raises(
        MetricError,
        match=r"Expected `val_scores` to have one row per image in `val_y_true` \(1 images\), but got 2 rows",
    ):
        fit_temperature([[0.0, 1.0], [1.0, 0.0]], [0])
    for bounds in ((0.0, 1.0), (2.0, 1.0), (1.0, float("inf")), (1.0,), "ab", (True, 2.0)):
        with pytest.raises(
            MetricError,
            match=r"Expected `bounds` to be \(low, high\) with 0 < low < high finite, but got",
        ):
            fit_temperature([[0.0, 1.0]], [0], bounds=bounds)  # type: ignore[arg-type]
