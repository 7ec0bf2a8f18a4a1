"""The site's statistics: paired tests for every pair of runs, tied groups, rank matrices.

One call per table column (benchmark version, setting, metric, metric version) tests every pair
of the column's runs at once -- the benchmark page's groups and every comparison page read the
same arrays, so no test is ever repeated per page. The tests are the class-level paired bootstrap
of :mod:`harness.metrics.comparison` (the same class draws for every run: classes resampled
within their groups, ``n_boot`` replicates, fixed seed), all pairs of a column in one call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.metrics.comparison import (
    paired_class_tests,
    rank_matrix,
    stack_class_values,
    tied_groups_from_tests,
)

__all__ = ["ALPHA", "LEVEL", "N_BOOT", "SEED", "ColumnTests", "column_tests"]

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

    def subset(self, keys: Sequence[str]) -> ColumnTests | None:
        """The tests among ``keys`` only (those this column tested), in this column's order;
        None when none of them was tested. The tests themselves don't change: each is a pair's."""
        wanted = set(keys)
        index = [i for i, key in enumerate(self.keys) if key in wanted]
        if not index:
            return None
        if len(index) == len(self.keys):
            return self
        square = np.ix_(index, index)
        return ColumnTests(
            keys=tuple(self.keys[i] for i in index),
            estimates=self.estimates[index],
            diff=self.diff[square],
            lo=self.lo[square],
            hi=self.hi[square],
            p_value=self.p_value[square],
            n_classes=self.n_classes,
        )

    def groups(self, *, higher_is_better: bool) -> list[list[str]]:
        """Tied groups, best first (rule of :func:`tied_groups_from_tests`, alpha :data:`ALPHA`)."""
        return tied_groups_from_tests(
            self.keys, self.estimates, self.p_value, alpha=ALPHA, higher_is_better=higher_is_better
        )


def column_tests(keys: Sequence[str], values: Sequence[Any]) -> ColumnTests:
    """Test every pair of runs of a column from their class values (``ClassValues`` or dicts).

    Raises
    ------
    MetricError
        If the runs' class values don't line up (not scored on the same images).
    """
    table = stack_class_values(values)
    tests = paired_class_tests(table, n_boot=N_BOOT, seed=SEED, level=LEVEL)
    return ColumnTests(
        keys=tuple(keys),
        estimates=tests.estimates,
        diff=tests.diff,
        lo=tests.lo,
        hi=tests.hi,
        p_value=tests.p_value,
        n_classes=int(table.counts.shape[0]),
    )


def ranks_across(
    values: Mapping[str, Mapping[str, float]], higher_is_better: Mapping[str, bool]
) -> dict[str, Any] | None:
    """:func:`harness.metrics.comparison.rank_matrix` of primary scores whose directions differ.

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
    return rank_matrix(signed, higher_is_better=True).as_dict()
