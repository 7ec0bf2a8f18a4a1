"""The site's statistics: paired tests for every pair of runs, tied groups, rank matrices.

One call per table column (benchmark version, setting, metric, metric version) tests every pair
of the column's runs at once -- the benchmark page's groups and every comparison page read the
same arrays, so no test is ever repeated per page. The tests are the class-level paired bootstrap
of :mod:`harness.metrics.comparison` (the same class draws for every run: classes resampled
within their groups, ``n_boot`` replicates, fixed seed); :func:`all_pair_tests` only arranges the
work so the differences of all pairs are one contiguous array.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.metrics.comparison import (
    ClassTable,
    class_bootstrap,
    class_point_estimates,
    stack_class_values,
    tied_groups_from_tests,
)
from harness.metrics.uncertainty import rank_matrix

__all__ = ["ALPHA", "LEVEL", "N_BOOT", "SEED", "ColumnTests", "all_pair_tests", "column_tests"]

FloatArray = npt.NDArray[np.float64]

#: Significance level of each paired test; the group rule and the comparison pages use it.
ALPHA = 0.05
#: Replicates of the class-level bootstrap.
N_BOOT = 1000
#: Seed of the class draws (the same draws for every run of a column).
SEED = 0
#: Level of the intervals of differences.
LEVEL = 0.95


@dataclass(frozen=True)
class ColumnTests:
    """Paired tests between every two runs of one column; entry ``[s, t]`` is run s minus run t."""

    keys: tuple[str, ...]
    estimates: FloatArray  # [S], recomputed from the class values
    diff: FloatArray  # [S, S]
    lo: FloatArray  # [S, S]
    hi: FloatArray  # [S, S]
    p_value: FloatArray  # [S, S]
    n_classes: int

    def position(self, key: str) -> int | None:
        try:
            return self.keys.index(key)
        except ValueError:
            return None

    def groups(self, *, higher_is_better: bool) -> list[list[str]]:
        """Tied groups, best first (rule of :func:`tied_groups_from_tests`, alpha :data:`ALPHA`)."""
        return tied_groups_from_tests(
            self.keys, self.estimates, self.p_value, alpha=ALPHA, higher_is_better=higher_is_better
        )


def all_pair_tests(
    table: ClassTable, *, n_boot: int = N_BOOT, seed: int = SEED, level: float = LEVEL
) -> dict[str, FloatArray]:
    """:func:`harness.metrics.comparison.paired_class_tests`, arranged for many runs.

    The same replicates, differences, percentile intervals and p-values; the upper triangle's
    pairs are stacked into one ``[pairs, n_boot]`` array (contiguous along the replicates, so each
    quantile is one partition of a row) and mirrored: ``diff`` is antisymmetric, ``p_value``
    symmetric and ``[t, s]``'s interval is ``[-hi[s, t], -lo[s, t]]`` (equal to the percentile of
    the negated replicates up to rounding of the interpolation weight).

    Returns
    -------
    tests : dict
        ``estimates`` [S]; ``diff``, ``lo``, ``hi``, ``p_value`` [S, S].
    """
    estimates = class_point_estimates(table)
    n = table.n_runs
    diff = estimates[:, None] - estimates[None, :]
    lo = np.zeros((n, n))
    hi = np.zeros((n, n))
    p_value = np.ones((n, n))
    if n > 1:
        replicates = np.ascontiguousarray(class_bootstrap(table, n_boot=n_boot, seed=seed).T)
        first, second = np.triu_indices(n, 1)
        diffs = replicates[first] - replicates[second]  # [pairs, n_boot]
        # Sorting first (vectorized) makes the quantiles' selection trivial: twice as fast as
        # np.quantile's partition on the raw rows, and the same values (order statistics).
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
        lo[second, first], hi[second, first] = -q_hi, -q_lo
        p_value[first, second] = p_value[second, first] = p
    return {"estimates": estimates, "diff": diff, "lo": lo, "hi": hi, "p_value": p_value}


def column_tests(keys: Sequence[str], values: Sequence[Any]) -> ColumnTests:
    """Test every pair of runs of a column from their class values (``ClassValues`` or dicts).

    Raises
    ------
    MetricError
        If the runs' class values don't line up (not scored on the same images).
    """
    table = stack_class_values(values)
    tests = all_pair_tests(table)
    return ColumnTests(
        keys=tuple(keys),
        estimates=tests["estimates"],
        diff=tests["diff"],
        lo=tests["lo"],
        hi=tests["hi"],
        p_value=tests["p_value"],
        n_classes=int(table.counts.shape[0]),
    )


def ranks_across(
    values: Mapping[str, Mapping[str, float]], higher_is_better: Mapping[str, bool]
) -> dict[str, Any] | None:
    """:func:`harness.metrics.uncertainty.rank_matrix` of primary scores whose directions differ.

    ``values[benchmark][submission]``; a lower-is-better benchmark is negated first so that every
    benchmark ranks its best submission 1. None when no benchmark has a score.
    """
    signed = {
        bench: {sub: v if higher_is_better[bench] else -v for sub, v in row.items()}
        for bench, row in values.items()
        if row
    }
    if not signed:
        return None
    return rank_matrix(signed, higher_is_better=True)
