"""Tests of harness.metrics.binomial: the Clopper-Pearson bound against scipy, and its errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from harness.core.errors import MetricError
from harness.metrics.binomial import clopper_pearson_lower, clopper_pearson_lower_bounds


@pytest.mark.parametrize(
    "k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (8, 10), (10, 10), (57, 60), (5950, 6000)]
)
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_clopper_pearson_lower_matches_scipy_binomtest(k: int, n: int, confidence: float) -> None:
    expected = binomtest(k, n, alternative="greater").proportion_ci(confidence, method="exact").low
    assert clopper_pearson_lower(k, n, confidence=confidence) == pytest.approx(
        expected, rel=1e-10, abs=1e-15
    )


def test_clopper_pearson_lower_all_successes() -> None:
    # theta^n = 1 - confidence at k = n: 0.05 ** (1 / 10) ~ 0.7411.
    assert clopper_pearson_lower(10, 10) == pytest.approx(0.05 ** (1 / 10))
    assert clopper_pearson_lower(0, 10) == 0.0


def test_clopper_pearson_errors() -> None:
    with pytest.raises(MetricError, match=r"Expected `n` to be an integer >= 1, but got 0"):
        clopper_pearson_lower(0, 0)
    with pytest.raises(
        MetricError,
        match=r"Expected `successes` to be an integer in \[0, 3\], but got 4\. They are counted among the n = 3 trials",
    ):
        clopper_pearson_lower(4, 3)
    with pytest.raises(
        MetricError, match=r"Expected `successes` to be an integer in \[0, 3\], but got -1"
    ):
        clopper_pearson_lower(-1, 3)
    with pytest.raises(
        MetricError, match=r"Expected `successes` to be an integer in \[0, 3\], but got 1.0"
    ):
        clopper_pearson_lower(1.0, 3)  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=r"Expected `n` to be an integer >= 1, but got True"):
        clopper_pearson_lower(1, True)


def test_lower_bounds_are_the_bound_of_every_count() -> None:
    bounds = clopper_pearson_lower_bounds(12, confidence=0.9)
    assert bounds.shape == (13,) and bounds[0] == 0.0
    assert np.all(np.diff(bounds) > 0)
    for k in range(13):
        assert bounds[k] == clopper_pearson_lower(k, 12, confidence=0.9)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, float("nan"), True])
def test_confidence_errors(confidence: Any) -> None:
    with pytest.raises(
        MetricError, match=r"Expected `confidence` to be a number in \(0, 1\), but got"
    ):
        clopper_pearson_lower(1, 2, confidence=confidence)
    with pytest.raises(
        MetricError, match=r"Expected `confidence` to be a number in \(0, 1\), but got"
    ):
        clopper_pearson_lower_bounds(2, confidence=confidence)
