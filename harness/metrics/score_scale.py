r"""Carrying a score threshold from one fit to another: each fit's own score scale.

Calibrated stacking's :math:`\gamma` and DARTS's softmax temperature are chosen on the
*validation* fit's predictions and applied to the *main* fit's. The two fits are separate
models, often with different hyperparameters, and a score's unit follows them: ESZSL's scores
shrink as its regulariser grows, so a :math:`\gamma` in the validation fit's units can exceed
every seen-over-unseen margin of the main fit (calibrated seen accuracy 0). Nothing in the
literature's definition says which unit :math:`\gamma` is in; on one model it does not matter.

The rule (the harness's, stated in the glossary): a value chosen on the validation fit's scores
is expressed in units of that fit's **score scale** and applied to the main fit in units of its
own.

See docs/metrics/score-scale.md.
"""

from __future__ import annotations

import math

import numpy as np

from harness.checks import check_scores

__all__ = ["carried", "score_scale"]


def score_scale(scores: np.ndarray) -> float:
    """A fit's score scale: the mean over images (rows) of the standard deviation of an
    image's scores across the candidate classes (columns).

    Equivariant to a per-fit affine rescaling: ``score_scale(a * s + b) == a * score_scale(s)``
    for ``a > 0``. 0 when every image scores every class alike.

    >>> score_scale(np.array([[0.0, 2.0], [1.0, 1.0]]))
    0.5
    >>> score_scale(10 * np.array([[0.0, 2.0], [1.0, 1.0]]) + 3)
    5.0
    """
    rows = np.asarray(check_scores(scores), dtype=np.float64)
    # Each row divided by its largest magnitude first: finite scores near 1e155 would overflow
    # when squared, and the spread must stay finite for every finite input.
    largest = np.abs(rows).max(axis=1)
    unit = np.where(largest > 0, largest, 1.0)
    spread = (rows / unit[:, None]).std(axis=1) * unit
    return float((spread / len(spread)).sum())


def carried(value: float, *, chosen_scale: float, applied_scale: float) -> float:
    """``value``, chosen on a fit whose score scale is ``chosen_scale``, in the units of a fit
    whose scale is ``applied_scale``: ``value × applied_scale / chosen_scale``. Unchanged when
    either scale is 0 or not finite (a fit whose scores have no spread has no unit to convert).

    >>> carried(0.2, chosen_scale=2.0, applied_scale=0.5)
    0.05
    """
    if not (math.isfinite(chosen_scale) and math.isfinite(applied_scale)):
        return value
    if chosen_scale <= 0 or applied_scale <= 0:
        return value
    return value * applied_scale / chosen_scale
