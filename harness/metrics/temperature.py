"""Temperature scaling: leaf posteriors from scores by a softmax whose temperature is fitted.

A model's scores are not posteriors. Metrics that need posteriors (DARTS,
:mod:`harness.metrics.darts`) turn dense scores into them with a softmax at a temperature
:math:`T`, fitted on *validation* predictions by minimising their negative log-likelihood
(Guo et al.), then applied to the test scores.

See docs/metrics/temperature.md.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    check_scalar,
    check_scores,
    check_scores_and_targets,
    row_chunks,
)
from harness.core.errors import MetricError

__all__ = ["fit_temperature", "softmax_posteriors"]


def softmax_posteriors(scores: npt.ArrayLike, temperature: float) -> FloatArray:
    """Leaf posteriors from dense scores by a softmax at a temperature.

    >>> softmax_posteriors([[0.0, float(np.log(3.0))]], 1.0).round(12).tolist()
    [[0.25, 0.75]]

    See docs/metrics/temperature.md, `softmax_posteriors`.
    """
    values = check_scores(scores)
    checked_t = check_scalar(temperature, "temperature", low=0, closed="neither", finite=True)
    out = np.empty(values.shape, dtype=np.float64)
    for start, stop in row_chunks(values.shape[0], values.shape[1]):
        block = np.asarray(values[start:stop], dtype=np.float64) / checked_t
        block -= block.max(axis=1, keepdims=True)
        np.exp(block, out=block)
        block /= block.sum(axis=1, keepdims=True)
        out[start:stop] = block
    return out


def fit_temperature(
    val_scores: npt.ArrayLike,
    val_y_true: npt.ArrayLike,
    *,
    bounds: tuple[float, float] = (1e-4, 1e4),
) -> float:
    """Temperature minimising the validation negative log-likelihood of the softmax.

    >>> t = fit_temperature([[1.0, 0.0]] * 4, [0, 0, 0, 1])
    >>> round(t, 5), round(1 / float(np.log(3.0)), 5)
    (0.91024, 0.91024)

    See docs/metrics/temperature.md, `fit_temperature`.
    """
    y, values = check_scores_and_targets(val_y_true, val_scores, names=("val_y_true", "val_scores"))
    if (
        not isinstance(bounds, tuple | list)
        or len(bounds) != 2
        or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
        or not (0.0 < float(bounds[0]) < float(bounds[1]) < math.inf)
    ):
        raise MetricError(
            f"Expected `bounds` to be (low, high) with 0 < low < high finite, but got {bounds!r}."
        )
    # scipy.optimize and scipy.special cost ~1 s to import: only fitting pays it, not loading a
    # spec.
    from scipy.optimize import minimize_scalar
    from scipy.special import logsumexp

    chunks = list(row_chunks(values.shape[0], values.shape[1]))

    def nll(log_t: float) -> float:
        inverse = math.exp(-log_t)
        total = 0.0
        for start, stop in chunks:
            block = np.asarray(values[start:stop], dtype=np.float64) * inverse
            true = block[np.arange(block.shape[0]), y[start:stop]]
            total += float(np.sum(logsumexp(block, axis=1) - true))
        return total / values.shape[0]

    result = minimize_scalar(
        nll,
        bounds=(math.log(bounds[0]), math.log(bounds[1])),
        method="bounded",
        options={"xatol": 1e-8},
    )
    return float(min(max(math.exp(float(result.x)), bounds[0]), bounds[1]))
