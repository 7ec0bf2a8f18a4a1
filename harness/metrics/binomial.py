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

from harness.checks import FloatArray, check_integer, check_scalar

__all__ = ["clopper_pearson_lower", "clopper_pearson_lower_bounds"]


def clopper_pearson_lower_bounds(n: int, *, confidence: float = 0.95) -> FloatArray:
    r"""One-sided Clopper-Pearson lower bounds for every number of successes out of ``n``.

    Entry ``k`` is :math:`\underline{\theta}(k, n)` of :func:`clopper_pearson_lower`, for
    ``k = 0, ..., n``, computed in one vectorized call.

    >>> clopper_pearson_lower_bounds(2, confidence=0.75).round(4).tolist()
    [0.0, 0.134, 0.5]

    See docs/metrics/binomial.md, `clopper_pearson_lower_bounds`.
    """
    # scipy.stats costs ~0.5 s to import: only scoring pays it, not loading a spec.
    from scipy.stats import beta

    checked_n = check_integer(n, "n", low=1)
    checked_confidence = check_scalar(confidence, "confidence", low=0, high=1, closed="neither")
    k = np.arange(checked_n + 1, dtype=np.float64)
    lower = np.zeros(checked_n + 1, dtype=np.float64)
    lower[1:] = beta.ppf(1.0 - checked_confidence, k[1:], checked_n - k[1:] + 1.0)
    return lower


def clopper_pearson_lower(successes: int, n: int, *, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower confidence bound of a binomial proportion.

    0 for no success, else the (1 - confidence) quantile of Beta(k, n - k + 1): the proportion is
    at least this with probability ``confidence``.

    >>> round(clopper_pearson_lower(10, 10), 6), round(0.05 ** (1 / 10), 6)
    (0.741134, 0.741134)

    See docs/metrics/binomial.md, `clopper_pearson_lower`.
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
