"""DARTS's inputs: leaf posteriors (dense, or top-K with the rest of the mass unknown), checked
once, and the node posteriors made from them in row blocks of bounded size.

The mass a top-K row leaves out goes to the root only, so a node's posterior is never
overstated; a dense row and the same row as top-K with K = C give the same node posteriors, to
the bit (``docs/metrics/darts.md``, "Posteriors").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    IntArray,
    check_consistent_length,
    check_scores,
    check_targets,
    row_chunks,
)
from harness.core.errors import MetricError
from harness.metrics.darts_graph import DartsGraph, first_true

#: How far a posterior row's sum may exceed 1 (and, for dense rows, fall short of it).
SUM_TOLERANCE = 1e-4
# Largest leaf matrix (entries) multiplied as a dense array; larger ones stay sparse.
_DENSE_LEAF_MATRIX_LIMIT = 1 << 22


@dataclass(frozen=True)
class TopKPosteriors:
    """Posteriors of K candidates per image; the rest of the mass is unknown.

    Attributes
    ----------
    indices : array-like of int of shape (n_images, K)
        Candidate columns, distinct within a row (their order does not matter).
    probs : array-like of float of shape (n_images, K)
        Their posterior probabilities, non-negative, each row summing to at most
        ``1 + SUM_TOLERANCE``. The remaining mass goes to the root (``docs/metrics/darts.md``).
    """

    indices: npt.ArrayLike
    probs: npt.ArrayLike


class LeafPosteriors:
    """Checked leaf posteriors (dense or top-K), handed out as dense row blocks."""

    def __init__(
        self,
        n_candidates: int,
        dense: npt.NDArray[Any] | None = None,
        topk: tuple[IntArray, npt.NDArray[Any]] | None = None,
    ) -> None:
        self.n_candidates = n_candidates
        self.dense = dense
        self.topk = topk
        source = dense if dense is not None else topk[0] if topk is not None else None
        assert source is not None
        self.n_images = int(source.shape[0])

    def block(self, start: int, stop: int) -> FloatArray:
        """Leaf posteriors of rows ``start:stop`` as float64 ``[m, C]``, mass capped at 1."""
        if self.dense is not None:
            values = np.array(self.dense[start:stop], dtype=np.float64)
        else:
            assert self.topk is not None
            indices, probs = self.topk
            values = np.zeros((stop - start, self.n_candidates), dtype=np.float64)
            rows = np.repeat(np.arange(stop - start), indices.shape[1])
            values[rows, indices[start:stop].ravel()] = probs[start:stop].ravel()
        sums = values.sum(axis=1)
        over = sums > 1.0
        if over.any():
            values[over] /= sums[over, None]
        return values

    def blocks(self, width: int) -> list[tuple[int, int]]:
        return list(row_chunks(self.n_images, max(width, self.n_candidates)))


def negative_row(block: FloatArray) -> int | None:
    """The first row of ``block`` holding a negative entry, or None."""
    negative = (block < 0).any(axis=1)
    return first_true(negative) if negative.any() else None


def _check_nonnegative_and_sums(values: npt.NDArray[Any], name: str, *, dense: bool) -> None:
    for start, stop in row_chunks(values.shape[0], values.shape[1]):
        block = np.asarray(values[start:stop], dtype=np.float64)
        row = negative_row(block)
        if row is not None:
            column = first_true(block[row] < 0)
            raise MetricError(
                f"Expected `{name}` to hold probabilities >= 0, but row {start + row} holds "
                f"{float(block[row, column])!r} (at column {column})."
            )
        sums = block.sum(axis=1)
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE if dense else sums > 1.0 + SUM_TOLERANCE
        if bad.any():
            row = first_true(bad)
            rule = "sum to 1" if dense else "sum to at most 1"
            raise MetricError(
                f"Expected each row of `{name}` to {rule} (within {SUM_TOLERANCE}), but row "
                f"{start + row} sums to {float(sums[row])!r}. Turn scores into posteriors with "
                "softmax_posteriors()."
            )


def check_posteriors(posteriors: Any, n_candidates: int, name: str) -> LeafPosteriors:
    if isinstance(posteriors, TopKPosteriors):
        return _check_topk(posteriors, n_candidates, name)
    values = check_scores(posteriors, name=name)
    if values.shape[1] != n_candidates:
        raise MetricError(
            f"Expected `{name}` to have one column per candidate ({n_candidates}), but got "
            f"{values.shape[1]} columns."
        )
    _check_nonnegative_and_sums(values, name, dense=True)
    return LeafPosteriors(n_candidates, dense=values)


def _check_topk(posteriors: TopKPosteriors, n_candidates: int, name: str) -> LeafPosteriors:
    indices_name, probs_name = f"{name}.indices", f"{name}.probs"
    indices = np.asarray(posteriors.indices)
    if indices.ndim != 2 or indices.dtype.kind not in "iu" or 0 in indices.shape:
        raise MetricError(
            f"Expected `{indices_name}` to be a non-empty 2D integer array of shape "
            f"(n_images, K), but got shape {indices.shape} and dtype {indices.dtype}."
        )
    indices = indices.astype(np.int64, copy=False)
    if indices.shape[1] > n_candidates:
        raise MetricError(
            f"Expected `{indices_name}` to have at most one column per candidate "
            f"({n_candidates}), but got K = {indices.shape[1]}."
        )
    probs = check_scores(posteriors.probs, name=probs_name)
    if probs.shape != indices.shape:
        raise MetricError(
            f"Expected `{probs_name}` to have the shape of `{indices_name}` {indices.shape}, "
            f"but got {probs.shape}."
        )
    out_of_range = ((indices < 0) | (indices >= n_candidates)).any(axis=1)
    if out_of_range.any():
        row = first_true(out_of_range)
        raise MetricError(
            f"Expected `{indices_name}` to hold candidate columns in [0, {n_candidates}), but "
            f"row {row} holds {indices[row].tolist()}."
        )
    for start, stop in row_chunks(indices.shape[0], indices.shape[1]):
        ordered = np.sort(indices[start:stop], axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if repeats.any():
            row = first_true(repeats)
            column = int(ordered[row, 1:][ordered[row, 1:] == ordered[row, :-1]][0])
            raise MetricError(
                f"Expected `{indices_name}` to hold distinct candidate columns in each row, but "
                f"row {start + row} repeats column {column}."
            )
    _check_nonnegative_and_sums(probs, probs_name, dense=False)
    return LeafPosteriors(n_candidates, topk=(indices, probs))


def node_posteriors_block(
    leaves: FloatArray, graph: DartsGraph, dense_matrix: FloatArray | None
) -> FloatArray:
    """Node posteriors ``[m, V]`` of a block of leaf posteriors ``[m, C]``."""
    if dense_matrix is not None:
        nodes = leaves @ dense_matrix
    else:
        nodes = np.asarray(graph.leaf_matrix.T @ leaves.T).T
    np.clip(nodes, 0.0, 1.0, out=nodes)
    nodes[:, graph.is_root] = 1.0
    return np.ascontiguousarray(nodes)


def dense_leaf_matrix(graph: DartsGraph) -> FloatArray | None:
    """``leaf_matrix`` as a dense array when small (a faster product), else None."""
    if graph.n_candidates * graph.n_columns <= _DENSE_LEAF_MATRIX_LIMIT:
        return np.asarray(graph.leaf_matrix.toarray(), dtype=np.float64)
    return None


def checked_labels(
    y_true: Any, n_candidates: int, name: str, n_rows: int, rows_name: str
) -> IntArray:
    checked = check_targets(y_true, n_candidates, name)
    check_consistent_length(checked.shape[0], n_rows, name=rows_name, targets_name=name)
    return checked


def darts_node_posteriors(
    posteriors: npt.ArrayLike | TopKPosteriors, graph: DartsGraph
) -> FloatArray:
    """Posterior of every node of the DARTS graph: the mass of its candidate leaves.

    Dense posteriors, or top-K posteriors whose missing mass goes to the root only (it supports no
    more specific node, so no node is overstated); root columns are exactly 1. This materialises
    ``[n_images, n_columns]``; `darts_curve` and `darts_per_image` work in row chunks instead.
    The rules, the checks and a worked example: docs/metrics/darts.md, `darts_node_posteriors`.
    """
    if not isinstance(graph, DartsGraph):
        raise MetricError(
            f"Expected `graph` to be a DartsGraph from darts_graph(), but got "
            f"{type(graph).__name__}."
        )
    leaves = check_posteriors(posteriors, graph.n_candidates, "posteriors")
    dense_matrix = dense_leaf_matrix(graph)
    out = np.empty((leaves.n_images, graph.n_columns), dtype=np.float64)
    for start, stop in leaves.blocks(graph.n_columns):
        out[start:stop] = node_posteriors_block(leaves.block(start, stop), graph, dense_matrix)
    return out
