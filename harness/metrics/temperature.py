r"""Temperature scaling: leaf posteriors from scores by a softmax whose temperature is fitted.

A model's scores are not posteriors. Metrics that need posteriors (DARTS,
:mod:`harness.metrics.darts`) turn dense scores into them with a softmax at a temperature
:math:`T`, fitted on *validation* predictions by minimising their negative log-likelihood
(Guo et al.), then applied to the test scores:

.. math::

    p(c \mid x_i) = \frac{\exp(s_{ic} / T)}{\sum_{c'} \exp(s_{ic'} / T)}

:math:`T` is in score units. When the validation and the test predictions come from two fits
(the harness's validation and main fits), the registered DARTS metrics apply
:math:`T \sigma_{\mathrm{main}} / \sigma_{\mathrm{val}}` to the test scores, each
:math:`\sigma` the fit's score scale (:mod:`harness.metrics.score_scale`).

References
----------
.. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern Neural Networks",
   ICML 2017 (temperature scaling).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

from harness.checks import (
    FloatArray,
    check_scalar,
    check_scores,
    check_scores_and_targets,
    row_chunks,
)
from harness.errors import MetricError

__all__ = ["fit_temperature", "softmax_posteriors"]


def softmax_posteriors(scores: npt.ArrayLike, temperature: float) -> FloatArray:
    r"""Leaf posteriors from dense scores by a softmax at a temperature.

    .. math::

        p(c \mid x_i) = \frac{\exp(s_{ic} / T)}{\sum_{c'} \exp(s_{ic'} / T)}

    Parameters
    ----------
    scores : array-like of float of shape (n_images, n_candidates)
        Finite scores, higher is better.
    temperature : float
        :math:`T > 0`, e.g. from :func:`fit_temperature` on validation.

    Returns
    -------
    posteriors : ndarray of float64 of shape (n_images, n_candidates)
        Rows sum to 1.

    Raises
    ------
    MetricError
        If ``scores`` is malformed (see :func:`harness.checks.check_scores`) or
        ``temperature`` is not a finite number > 0.

    Notes
    -----
    Computed with the row maximum subtracted (no overflow), in row chunks. Top-K scores have no
    softmax: the scores outside the top K are unknown, so their mass cannot be estimated.

    Examples
    --------
    :math:`e^{\ln 3} / (e^0 + e^{\ln 3}) = 3/4`:

    >>> softmax_posteriors([[0.0, float(np.log(3.0))]], 1.0).round(12).tolist()
    [[0.25, 0.75]]
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
    r"""Temperature minimising the validation negative log-likelihood of the softmax.

    .. math::

        \hat T = \operatorname*{arg\,min}_{T \in [T_{lo}, T_{hi}]} \; \frac1n \sum_i
            \Big( \log \sum_c e^{s_{ic}/T} - s_{i y_i} / T \Big)

    Parameters
    ----------
    val_scores : array-like of float of shape (n_val, n_candidates)
        Finite validation scores, higher is better.
    val_y_true : array-like of int of shape (n_val,)
        Candidate column of each validation image's true class.
    bounds : (float, float), default=(1e-4, 1e4)
        Search interval of :math:`T`, ``0 < low < high`` (finite).

    Returns
    -------
    temperature : float
        Within ``bounds``.

    Raises
    ------
    MetricError
        If the scores or labels are malformed or ``bounds`` is not ``0 < low < high`` finite.

    Notes
    -----
    The NLL is convex in :math:`1/T`, hence unimodal in :math:`\log T`, so the bounded Brent
    search of ``scipy.optimize.minimize_scalar`` over :math:`\log T` finds its minimum (up to an
    absolute tolerance of 1e-8 in :math:`\log T`). When validation is separated with a margin the
    NLL keeps falling as :math:`T \to 0` until it rounds to 0; a temperature in that flat
    region (or the lower bound) is returned, and the posteriors are then one-hot. Fit on validation
    only; apply to test with :func:`softmax_posteriors`.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern Neural
       Networks", ICML 2017, Sec. 4.2.

    Examples
    --------
    Every image scores class 0 one unit above class 1, and 3 of 4 images are class 0, so the
    NLL is minimised where :math:`\sigma(1/T) = 3/4`, i.e. :math:`T = 1 / \ln 3`:

    >>> t = fit_temperature([[1.0, 0.0]] * 4, [0, 0, 0, 1])
    >>> round(t, 5), round(1 / float(np.log(3.0)), 5)
    (0.91024, 0.91024)
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
