r"""DARTS predictions at one :math:`\lambda`: the node maximising (reward + :math:`\lambda`) times
its posterior, ties to the larger reward and then the smaller column.

A prediction is correct when it is the true leaf or one of its ancestors; its normalised gain is
its reward over :math:`\log_2 |Y|` when correct, 0 otherwise. Used by the curve on test, and by
the class-level comparison of stored runs (``docs/metrics/darts.md``, "Prediction and tie policy").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.checks import (
    BoolArray,
    FloatArray,
    IntArray,
    check_scalar,
    check_scores,
    check_vector,
    row_chunks,
)
from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics.darts_graph import DartsGraph, darts_graph, tie_order
from harness.metrics.darts_posteriors import (
    TopKPosteriors,
    check_posteriors,
    checked_labels,
    dense_leaf_matrix,
    negative_row,
    node_posteriors_block,
)


@dataclass(frozen=True)
class PredictionLevels:
    """Shares of DARTS predictions at a candidate leaf, an internal node and the root."""

    leaf: float
    internal: float
    root: float


def _lambda(lam: Any) -> float:
    return check_scalar(lam, "lam", low=0, finite=True)


def _predict_checked(
    node_block: FloatArray, rewards: FloatArray, order: IntArray, lam: float
) -> IntArray:
    values = (rewards[order] + lam) * node_block[:, order]
    return order[np.argmax(values, axis=1)]


def darts_predict(node_posteriors: npt.ArrayLike, rewards: npt.ArrayLike, lam: float) -> IntArray:
    """The DARTS prediction of every image at one lambda: ``argmax_v (r_v + lambda) p(v | x)``.

    Ties go to the larger reward (fewer candidate leaves), then to the smaller column (in a
    `DartsGraph`, candidate leaves come first), so the answer is the most specific one. Returns
    the predicted column of each image. The checks and a worked example of the tie policy:
    docs/metrics/darts.md, `darts_predict` (Deng et al. 2012, Eq. 5).

    >>> p = [[1.0, 0.625, 0.375]]  # columns root (r = 0), node (r = 1), leaf (r = 2)
    >>> [darts_predict(p, [0.0, 1.0, 2.0], lam).tolist() for lam in (0, 0.5, 1, 2)]
    [[2], [2], [1], [0]]
    """
    values = check_scores(node_posteriors, name="node_posteriors")
    reward_array = check_vector(
        rewards,
        "rewards",
        values.shape[1],
        kind="real",
        entry="column",
        among="`node_posteriors`",
        finite=True,
        low=0.0,
    )
    checked_lam = _lambda(lam)
    order = tie_order(reward_array)
    out = np.empty(values.shape[0], dtype=np.int64)
    for start, stop in row_chunks(values.shape[0], values.shape[1]):
        block = np.asarray(values[start:stop], dtype=np.float64)
        row = negative_row(block)
        if row is not None:
            raise MetricError(
                f"Expected `node_posteriors` to hold probabilities >= 0, but row {start + row} "
                f"holds {float(block[row].min())!r}."
            )
        out[start:stop] = _predict_checked(block, reward_array, order, checked_lam)
    return out


def correct_lookup(graph: DartsGraph, y_true: IntArray, columns: IntArray) -> BoolArray:
    """Whether candidate ``y_true[i]`` lies below-or-at column ``columns[i]`` (vectorized)."""
    matrix = graph.leaf_matrix
    rows = np.repeat(np.arange(graph.n_candidates, dtype=np.int64), np.diff(matrix.indptr))
    keys = rows * graph.n_columns + np.asarray(matrix.indices, dtype=np.int64)
    query = y_true * graph.n_columns + columns
    position = np.minimum(np.searchsorted(keys, query), keys.shape[0] - 1)
    return np.asarray(keys[position] == query)


def darts_per_image(
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    y_true: npt.ArrayLike,
    lam: float,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> tuple[BoolArray, FloatArray]:
    """Per-image hierarchical correctness and normalised information gain at one lambda.

    Their means are the per-image accuracy and gain of `darts_curve`, so a bootstrap resamples
    these two vectors. An image is correct when its prediction is its true leaf or an ancestor of
    it; its gain is the prediction's reward over ``log2 |Y|`` when correct, else 0. The formulas,
    parameters and a worked example: docs/metrics/darts.md, `darts_per_image`.

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> kw = dict(hierarchy=h, candidate_nodes=h.indices(["a", "b"]))
    >>> correct, gain = darts_per_image([[0.75, 0.25], [0.75, 0.25]], [0, 1], 0.0, **kw)
    >>> correct.tolist(), gain.tolist()
    ([True, False], [1.0, 0.0])
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    leaves = check_posteriors(test_posteriors, graph.n_candidates, "test_posteriors")
    labels = checked_labels(
        y_true, graph.n_candidates, "y_true", leaves.n_images, "test_posteriors"
    )
    columns = _predicted_columns(leaves, graph, _lambda(lam))
    correct = correct_lookup(graph, labels, columns)
    gain = np.where(correct, graph.rewards[columns] / graph.max_reward, 0.0)
    return correct, gain


def _predicted_columns(leaves: Any, graph: DartsGraph, lam: float) -> IntArray:
    dense_matrix = dense_leaf_matrix(graph)
    order = tie_order(graph.rewards)
    columns = np.empty(leaves.n_images, dtype=np.int64)
    for start, stop in leaves.blocks(graph.n_columns):
        block = node_posteriors_block(leaves.block(start, stop), graph, dense_matrix)
        columns[start:stop] = _predict_checked(block, graph.rewards, order, lam)
    return columns


def darts_prediction_levels(
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    lam: float,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> PredictionLevels:
    r"""Shares of DARTS predictions at a leaf, an internal node and the root at one :math:`\lambda`.

    The root is a node covering every candidate leaf (or the virtual root of :func:`darts_graph`).

    Leaves a, b (reward 1 bit) under root r (reward 0), lambda = 1.5: image 0 keeps leaf a
    (2.5 * .75 > 1.5 * 1), image 1 hedges to the root (2.5 * .5 < 1.5):

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> p = [[0.75, 0.25], [0.5, 0.5]]
    >>> darts_prediction_levels(p, 1.5, hierarchy=h, candidate_nodes=h.indices(["a", "b"]))
    PredictionLevels(leaf=0.5, internal=0.0, root=0.5)
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    leaves = check_posteriors(test_posteriors, graph.n_candidates, "test_posteriors")
    columns = _predicted_columns(leaves, graph, _lambda(lam))
    leaf, root = graph.is_leaf[columns], graph.is_root[columns]
    return PredictionLevels(
        leaf=float(np.mean(leaf)),
        internal=float(np.mean(~leaf & ~root)),
        root=float(np.mean(root)),
    )
