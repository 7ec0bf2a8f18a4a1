r"""The :math:`\lambda` search on validation: the smallest :math:`\lambda` (within the bisection's
precision) at which enough validation images are correct for a target's Clopper-Pearson bound.

Each image keeps only its *contenders*, the nodes that can win for some :math:`\lambda \ge 0`,
so one evaluation is a few passes over short lists and predicts exactly as the full argmax
(``docs/metrics/darts.md``, "Choosing λ" and "Speed and memory").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.checks import BoolArray, FloatArray, IntArray
from harness.metrics.darts_graph import DartsGraph, tie_order
from harness.metrics.darts_posteriors import (
    LeafPosteriors,
    dense_leaf_matrix,
    node_posteriors_block,
)
from harness.metrics.darts_prediction import correct_lookup

#: Fixed number of bisection steps of the lambda search.
BISECTION_STEPS = 40


# The lambda search stops doubling here (times max(r_max, 1)): beyond, r + lambda == lambda.
_LAMBDA_CAP = 2.0**60


@dataclass(frozen=True)
class _Bucket:
    """Rows with at most ``width`` contenders, padded to ``width`` (posterior -1, reward 0)."""

    rows: IntArray  # (m,)
    columns: IntArray  # (m, width)
    posteriors: FloatArray  # (m, width)
    rewards: FloatArray  # (m, width)
    correct: BoolArray  # (m, width)


class Contenders:
    """Per image, the nodes that can win for some lambda >= 0, in tie order.

    A column is kept when its posterior is strictly larger than that of every column before it
    in tie order: an earlier column with a posterior at least as large has a value at least as
    large for every lambda >= 0 (also after rounding, which is monotone) and wins ties, so the
    dropped columns never win and the prediction equals the full argmax to the bit. The first
    column in tie order is always kept, so no row is empty. Rows are grouped by their number of
    contenders into buckets of width 1, 2, 4, ... and padded, so that one evaluation is an
    ``argmax`` per bucket and the padding (value ``-lambda <= 0``, after every real entry) never
    wins; memory stays below twice the number of contenders.
    """

    def __init__(self, leaves: LeafPosteriors, y_true: IntArray, graph: DartsGraph) -> None:
        order = tie_order(graph.rewards)
        dense_matrix = dense_leaf_matrix(graph)
        parts_rows: list[IntArray] = []
        parts_cols: list[IntArray] = []
        parts_post: list[FloatArray] = []
        for start, stop in leaves.blocks(graph.n_columns):
            ordered = node_posteriors_block(leaves.block(start, stop), graph, dense_matrix)[
                :, order
            ]
            running = np.maximum.accumulate(ordered, axis=1)
            keep = np.empty(ordered.shape, dtype=bool)
            keep[:, 0] = True
            keep[:, 1:] = ordered[:, 1:] > running[:, :-1]
            rows, positions = np.nonzero(keep)  # row-major: rows ascending, tie order within
            parts_rows.append(rows.astype(np.int64) + start)
            parts_cols.append(order[positions])
            parts_post.append(ordered[rows, positions])
        rows = np.concatenate(parts_rows)
        columns = np.concatenate(parts_cols)
        posteriors = np.concatenate(parts_post)
        correct = correct_lookup(graph, y_true[rows], columns)
        n_images = leaves.n_images
        lengths = np.bincount(rows, minlength=n_images).astype(np.int64)
        starts = np.cumsum(lengths) - lengths
        rank = np.arange(rows.shape[0], dtype=np.int64) - starts[rows]  # position within row
        width_class = np.ceil(np.log2(lengths)).astype(np.int64)
        self.n_images = n_images
        self._hits: dict[float, int] = {}
        self.buckets: list[_Bucket] = []
        for klass in np.unique(width_class).tolist():
            width = 1 << klass
            bucket_rows = np.flatnonzero(width_class == klass)
            slot = np.full(n_images, -1, dtype=np.int64)
            slot[bucket_rows] = np.arange(bucket_rows.shape[0])
            entries = np.flatnonzero(width_class[rows] == klass)
            at = (slot[rows[entries]], rank[entries])
            shape = (bucket_rows.shape[0], width)
            bucket = _Bucket(
                rows=bucket_rows,
                columns=np.zeros(shape, dtype=np.int64),
                posteriors=np.full(shape, -1.0),
                rewards=np.zeros(shape),
                correct=np.zeros(shape, dtype=bool),
            )
            bucket.columns[at] = columns[entries]
            bucket.posteriors[at] = posteriors[entries]
            bucket.rewards[at] = graph.rewards[columns[entries]]
            bucket.correct[at] = correct[entries]
            self.buckets.append(bucket)

    def hits(self, lam: float) -> int:
        """Number of images whose prediction at ``lam`` is correct (memoised per lambda)."""
        if lam in self._hits:
            return self._hits[lam]
        total = 0
        for bucket in self.buckets:
            chosen = np.argmax((bucket.rewards + lam) * bucket.posteriors, axis=1)
            total += int(np.count_nonzero(np.take_along_axis(bucket.correct, chosen[:, None], 1)))
        self._hits[lam] = total
        return total

    def predict(self, lam: float) -> tuple[IntArray, BoolArray]:
        """Predicted column and its correctness for every image at ``lam``, in row order."""
        columns = np.empty(self.n_images, dtype=np.int64)
        correct = np.empty(self.n_images, dtype=bool)
        for bucket in self.buckets:
            chosen = np.argmax((bucket.rewards + lam) * bucket.posteriors, axis=1)[:, None]
            columns[bucket.rows] = np.take_along_axis(bucket.columns, chosen, 1)[:, 0]
            correct[bucket.rows] = np.take_along_axis(bucket.correct, chosen, 1)[:, 0]
        return columns, correct


def search_lambda(
    contenders: Contenders, needed: int, target: float, max_reward: float
) -> float | None:
    """Lambda at which at least ``needed`` validation images are correct, or None.

    The search of docs/metrics/darts.md, "Choosing λ"."""
    if contenders.hits(0.0) >= needed:
        return 0.0
    epsilon = 1.0 - target
    cap = _LAMBDA_CAP * max(max_reward, 1.0)
    low = 0.0
    high = max_reward * (1.0 - epsilon) / epsilon if epsilon > 0 else max_reward
    while contenders.hits(high) < needed:
        if high >= cap:
            return None
        low, high = high, 2.0 * high
    for _ in range(BISECTION_STEPS):
        middle = low + (high - low) / 2.0
        if contenders.hits(middle) >= needed:
            high = middle
        else:
            low = middle
    return high
