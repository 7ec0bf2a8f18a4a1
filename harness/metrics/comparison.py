r"""Comparing stored runs: class-level paired bootstrap, tied groups, from per-class means.

A run record cannot keep every image's value (it would grow with the test set), so each score
with a :class:`~harness.metrics.uncertainty.Decomposition` keeps its *class values*: for every
class with test images, its image count, its group and the mean of its per-image values
(:class:`harness.records.ClassValues`). That is exactly what the ``"classes"`` resampling scheme
of :mod:`harness.metrics.uncertainty` needs, so runs of one benchmark version can be compared long
after they were scored:

- every run gets the *same* class draws in every replicate (a paired bootstrap over classes);
- the three reductions are reproduced exactly: ``class_mean`` and ``harmonic_of_groups`` from the
  class means, ``image_mean`` as the ratio of two class means (:math:`n_c \bar v_c` over
  :math:`n_c`) under the same draws.

The draws are those of :func:`~harness.metrics.uncertainty.bootstrap_samples` with
``scheme="classes"`` (same seed → same draws), so the samples here equal what that function gives
on the runs' per-image decompositions (tested). Resampling classes asks whether a difference
would hold for other classes of the same kind — for zero-shot learning, where the test classes
are the sample that matters, a conservative and relevant question; it is wider than the
images-within-class intervals printed beside each score.

Functional API: :func:`class_values` (decomposition → record payload), :func:`stack_class_values`
(records of one benchmark → :class:`ClassTable`), :func:`class_point_estimates`,
:func:`class_bootstrap`, :func:`paired_class_tests`, :func:`tied_groups_from_tests`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import MetricError
from harness.metrics.uncertainty import (
    COMBINES,
    Decomposition,
    bootstrap_samples,
    leader_groups,
    point_estimate,
)

__all__ = [
    "ClassTable",
    "class_bootstrap",
    "class_point_estimates",
    "class_values",
    "paired_class_tests",
    "stack_class_values",
    "tied_groups_from_tests",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def class_values(decomp: Decomposition) -> dict[str, Any] | None:
    """The per-class summary a record keeps of ``decomp`` (None for 2D values).

    Returns
    -------
    values : dict or None
        ``combine``; ``classes`` (columns with images, ascending), ``counts``, ``groups`` and
        ``means`` (one per class) -- the fields of :class:`harness.records.ClassValues`.

    Examples
    --------
    >>> d = Decomposition(values=[1.0, 0.0, 1.0], classes=[0, 0, 2], n_classes=3)
    >>> v = class_values(d)
    >>> v["classes"], v["counts"], v["groups"], v["means"]
    ([0, 2], [2, 1], [0, 0], [0.5, 1.0])
    """
    if decomp.values.ndim != 1:
        return None
    counts = np.bincount(decomp.classes, minlength=decomp.n_classes)
    sums = np.bincount(decomp.classes, weights=decomp.values, minlength=decomp.n_classes)
    present = np.flatnonzero(counts)
    assert decomp.groups is not None  # __post_init__ fills it
    return {
        "combine": decomp.combine,
        "classes": present.tolist(),
        "counts": counts[present].tolist(),
        "groups": decomp.groups[present].tolist(),
        "means": (sums[present] / counts[present]).tolist(),
    }


@dataclass(frozen=True)
class ClassTable:
    """Class values of S runs on the same classes: ``means[s, c]`` for run s and class c."""

    means: FloatArray  # [S, C]
    counts: IntArray  # [C]
    groups: IntArray  # [C]
    combine: str

    @property
    def n_runs(self) -> int:
        return int(self.means.shape[0])


def _field(value: Any, name: str) -> Any:
    return value[name] if isinstance(value, Mapping) else getattr(value, name)


def stack_class_values(values: Sequence[Any]) -> ClassTable:
    """Line up the class values of several runs (``ClassValues`` models or their dicts).

    Raises
    ------
    MetricError
        If ``values`` is empty, or a run's classes, counts, groups or reduction differ from the
        first run's (they were not scored on the same images), naming the run's position.
    """
    if not values:
        raise MetricError("Expected at least one run's class values, but got none.")
    first = values[0]
    classes = np.asarray(_field(first, "classes"), dtype=np.int64)
    counts = np.asarray(_field(first, "counts"), dtype=np.int64)
    groups = np.asarray(_field(first, "groups"), dtype=np.int64)
    combine = str(_field(first, "combine"))
    if combine not in COMBINES:
        raise MetricError(f"Expected `combine` in {COMBINES}, but values[0] has {combine!r}.")
    if not (classes.shape == counts.shape == groups.shape) or classes.ndim != 1 or not classes.size:
        raise MetricError(
            "Expected values[0] to hold equally long, non-empty classes, counts and groups, but "
            f"got {classes.shape[0]}, {counts.shape[0]} and {groups.shape[0]} entries."
        )
    if int(counts.min()) < 1:
        raise MetricError("Expected values[0] to list only classes with images (counts >= 1).")
    rows = []
    for position, value in enumerate(values):
        for name, expected in (("classes", classes), ("counts", counts), ("groups", groups)):
            got = np.asarray(_field(value, name), dtype=np.int64)
            if not np.array_equal(got, expected):
                raise MetricError(
                    f"Expected values[{position}] to have the same {name} as values[0] (runs "
                    "scored on the same images of one benchmark version), but they differ."
                )
        if str(_field(value, "combine")) != combine:
            raise MetricError(
                f"Expected values[{position}] to reduce by {combine!r} like values[0], but got "
                f"{_field(value, 'combine')!r}."
            )
        means = np.asarray(_field(value, "means"), dtype=np.float64)
        if means.shape != classes.shape or not np.all(np.isfinite(means)):
            raise MetricError(
                f"Expected values[{position}].means to hold {classes.shape[0]} finite numbers, "
                f"but got {means.shape[0]} (or a non-finite one)."
            )
        rows.append(means)
    return ClassTable(means=np.stack(rows), counts=counts, groups=groups, combine=combine)


def _per_class_decomposition(table: ClassTable) -> tuple[Decomposition, Callable[..., FloatArray]]:
    """One row per class: resampling it over classes equals resampling the runs' images."""
    n = table.counts.shape[0]
    if table.combine == "image_mean":
        # Under class weights w: sum w n m / sum w n is the ratio of two class means.
        weighted = table.means.T * table.counts[:, None]
        values = np.concatenate([weighted, table.counts[:, None].astype(np.float64)], axis=1)
        decomp = Decomposition(
            values=values, classes=np.arange(n), n_classes=n, groups=table.groups
        )

        def finish(out: FloatArray) -> FloatArray:
            return np.asarray(out[..., :-1] / out[..., -1:], dtype=np.float64)

        return decomp, finish
    decomp = Decomposition(
        values=table.means.T,
        classes=np.arange(n),
        n_classes=n,
        groups=table.groups,
        combine=table.combine,  # type: ignore[arg-type]
    )
    return decomp, lambda out: np.asarray(out, dtype=np.float64)


def class_point_estimates(table: ClassTable) -> FloatArray:
    """Each run's score ``[S]``, recomputed from its class values.

    Examples
    --------
    >>> t = stack_class_values([{"combine": "image_mean", "classes": [0, 1], "counts": [3, 1],
    ...                          "groups": [0, 0], "means": [1 / 3, 1.0]}])
    >>> class_point_estimates(t).tolist()
    [0.5]
    """
    decomp, finish = _per_class_decomposition(table)
    return finish(np.atleast_1d(np.asarray(point_estimate(decomp))))


def class_bootstrap(table: ClassTable, *, n_boot: int = 1000, seed: int = 0) -> FloatArray:
    """Replicates ``[n_boot, S]``: classes resampled within groups, the same draws for every run."""
    decomp, finish = _per_class_decomposition(table)
    samples = bootstrap_samples(decomp, scheme="classes", n_boot=n_boot, seed=seed)
    return finish(samples.reshape(n_boot, -1))


def paired_class_tests(
    table: ClassTable, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, FloatArray]:
    r"""Paired class-level bootstrap tests between every two runs.

    Entry ``[s, t]`` compares run s with run t: the observed difference
    :math:`D = \theta_s - \theta_t`, the percentile interval of the replicate differences, and
    the two-sided p-value of :func:`harness.metrics.uncertainty.paired_bootstrap`
    (:math:`\min(1, 2 (1 + \#\text{other side}) / (B + 1))`, 1 when :math:`D = 0`).

    Returns
    -------
    tests : dict
        ``estimates`` [S]; ``diff``, ``lo``, ``hi``, ``p_value`` [S, S] (antisymmetric
        differences, symmetric p-values, p = 1 on the diagonal).

    Examples
    --------
    Run 0 is right on every class, run 1 on none: every replicate difference is 1.

    >>> t = stack_class_values([
    ...     {"combine": "class_mean", "classes": [0, 1, 2], "counts": [1, 1, 1],
    ...      "groups": [0, 0, 0], "means": m} for m in ([1, 1, 1], [0, 0, 0])])
    >>> tests = paired_class_tests(t, n_boot=99)
    >>> [float(tests[k][0, 1]) for k in ("diff", "lo", "hi", "p_value")]
    [1.0, 1.0, 1.0, 0.02]
    >>> float(tests["p_value"][1, 0])
    0.02
    """
    if not 0.0 < level < 1.0:
        raise MetricError(f"Expected `level` in (0, 1), but got {level!r}.")
    estimates = class_point_estimates(table)
    n = table.n_runs
    diff = estimates[:, None] - estimates[None, :]
    lo = np.zeros((n, n))
    hi = np.zeros((n, n))
    p_value = np.ones((n, n))
    if n > 1:
        replicates = np.ascontiguousarray(class_bootstrap(table, n_boot=n_boot, seed=seed).T)
        first, second = np.triu_indices(n, 1)
        diffs = replicates[first] - replicates[second]  # [pairs, n_boot], one row per pair
        # Sorted rows make each quantile a cheap selection (the same order statistics).
        diffs.sort(axis=1)
        q_lo, q_hi = np.quantile(diffs, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=1)
        observed = diff[first, second]
        other = np.where(
            observed > 0,
            (diffs <= 0).sum(axis=1),
            np.where(observed < 0, (diffs >= 0).sum(axis=1), 0),
        )
        p = np.where(observed == 0, 1.0, np.minimum(1.0, 2.0 * (other + 1) / (n_boot + 1)))
        lo[first, second], hi[first, second] = q_lo, q_hi
        # [t, s] is the negated replicates of [s, t]: its interval is the mirrored one.
        lo[second, first], hi[second, first] = -q_hi, -q_lo
        p_value[first, second] = p_value[second, first] = p
    return {"estimates": estimates, "diff": diff, "lo": lo, "hi": hi, "p_value": p_value}


def tied_groups_from_tests(
    names: Sequence[str],
    estimates: Sequence[float] | FloatArray,
    p_values: FloatArray,
    *,
    alpha: float = 0.05,
    higher_is_better: bool = True,
) -> list[list[str]]:
    """Leaderboard brackets from precomputed paired tests.

    The rule of :func:`harness.metrics.uncertainty.tied_groups`: sort best first (stable), the
    best leads the first group; walking down, a run joins the current group when its test
    against the group's leader is not significant (``p >= alpha``), else it leads a new group.

    Examples
    --------
    >>> p = np.array([[1, .5, .01], [.5, 1, .2], [.01, .2, 1]])
    >>> tied_groups_from_tests(["a", "b", "c"], [0.9, 0.8, 0.7], p)
    [['a', 'b'], ['c']]
    """
    names_ = list(names)
    est = np.asarray(estimates, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    if len(set(names_)) != len(names_) or est.shape != (len(names_),):
        raise MetricError(
            f"Expected distinct names and one estimate each, but got {len(names_)} names "
            f"({len(set(names_))} distinct) and estimates of shape {est.shape}."
        )
    if p.shape != (len(names_), len(names_)):
        raise MetricError(
            f"Expected p_values of shape ({len(names_)}, {len(names_)}), but got {p.shape}."
        )
    if not 0.0 < alpha < 1.0:
        raise MetricError(f"Expected `alpha` in (0, 1), but got {alpha!r}.")
    return leader_groups(
        names_, est.tolist(), lambda leader, i: float(p[leader, i]), alpha, higher_is_better
    )
