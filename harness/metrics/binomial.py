r"""Exact confidence bounds of a binomial proportion (Clopper-Pearson).

DARTS (:mod:`harness.metrics.darts`) chooses its :math:`\lambda` so that the accuracy reached on
validation images holds with a stated confidence: the one-sided Clopper-Pearson lower bound of
the number of correct images must reach the target. The bound is exact (conservative): its
coverage is at least the confidence level for every true proportion.

References
----------
.. [1] C. J. Clopper, E. S. Pearson, "The use of confidence or fiducial limits illustrated in the
   case of the binomial", Biometrika 26(4), 1934.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta

from harness.checks import FloatArray, check_integer, check_scalar

__all__ = ["clopper_pearson_lower", "clopper_pearson_lower_bounds"]


def clopper_pearson_lower_bounds(n: int, *, confidence: float = 0.95) -> FloatArray:
    r"""One-sided Clopper-Pearson lower bounds for every number of successes out of ``n``.

    Entry ``k`` is :math:`\underline{\theta}(k, n)` of :func:`clopper_pearson_lower`, for
    ``k = 0, ..., n``, computed in one vectorized call.

    Parameters
    ----------
    n, confidence
        As :func:`clopper_pearson_lower`.

    Returns
    -------
    lower : ndarray of float64 of shape (n + 1,)
        Non-decreasing in k, from exactly 0 at k = 0 to below 1 at k = n.

    Raises
    ------
    MetricError
        If ``n`` is not an integer >= 1 or ``confidence`` is not in (0, 1).

    Examples
    --------
    >>> clopper_pearson_lower_bounds(2, confidence=0.75).round(4).tolist()
    [0.0, 0.134, 0.5]
    """
    checked_n = check_integer(n, "n", low=1)
    checked_confidence = check_scalar(confidence, "confidence", low=0, high=1, closed="neither")
    k = np.arange(checked_n + 1, dtype=np.float64)
    lower = np.zeros(checked_n + 1, dtype=np.float64)
    lower[1:] = beta.ppf(1.0 - checked_confidence, k[1:], checked_n - k[1:] + 1.0)
    return lower


def clopper_pearson_lower(successes: int, n: int, *, confidence: float = 0.95) -> float:
    r"""One-sided Clopper-Pearson lower confidence bound of a binomial proportion.

    .. math::

        \underline{\theta}(k, n) = \begin{cases}
            0 & k = 0 \\
            B^{-1}(1 - \mathrm{confidence};\; k,\; n - k + 1) & k > 0
        \end{cases}

    with :math:`B^{-1}(q; a, b)` the quantile of the Beta(a, b) distribution: the proportion
    :math:`\theta` is at least :math:`\underline{\theta}` with probability ``confidence``.

    Parameters
    ----------
    successes : int
        Number of successes :math:`k`, ``0 <= k <= n``.
    n : int
        Number of trials, at least 1.
    confidence : float, default=0.95
        One-sided confidence level in (0, 1).

    Returns
    -------
    lower : float in [0, 1)

    Raises
    ------
    MetricError
        If ``n`` < 1, ``successes`` is outside ``[0, n]``, either is not an integer, or
        ``confidence`` is not in (0, 1).

    Notes
    -----
    Equals ``scipy.stats.binomtest(k, n, alternative="greater").proportion_ci(confidence,
    method="exact").low``. It is exact (conservative): the coverage is at least ``confidence``
    for every true proportion.

    References
    ----------
    .. [1] C. J. Clopper, E. S. Pearson, "The use of confidence or fiducial limits illustrated in
       the case of the binomial", Biometrika 26(4), 1934.

    Examples
    --------
    With every one of 10 trials a success the bound solves :math:`\theta^{10} = 0.05`:

    >>> round(clopper_pearson_lower(10, 10), 6), round(0.05 ** (1 / 10), 6)
    (0.741134, 0.741134)
    """
    checked_confidence = check_scalar(confidence, "confidence", low=0, high=1, closed="neither")
    checked_n = check_integer(n, "n", low=1)
    checked_successes = check_integer(
        successes,
        "successes",
        low=0,
        high=checked_n,
        hint=f"They are counted among the n = {checked_n} trials.",
    )
    bounds = clopper_pearson_lower_bounds(checked_n, confidence=checked_confidence)
    return float(bounds[checked_successes])
