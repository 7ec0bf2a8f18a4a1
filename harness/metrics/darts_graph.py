r"""The sub-DAG DARTS predicts over: the candidate leaves, all their ancestors, node rewards.

A node's reward is the information gain of answering it, :math:`\log_2 |Y|` minus the log of
the number of candidate leaves below-or-at it, counted as a *set* so that a leaf reached along
several paths (multiple parents) counts once. Columns are the candidate leaves first, then the
other nodes by hierarchy index, then a virtual root when no node covers every candidate; that
order is also the tie order of every prediction (``docs/metrics/darts.md``, "Graph").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from harness.checks import BoolArray, FloatArray, IntArray, check_hierarchy, check_nodes
from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class DartsGraph:
    """The sub-DAG DARTS predicts over: candidate leaves and all their ancestors.

    Build it with `darts_graph`. Column ``v`` of node posteriors is node ``nodes[v]``: first the
    candidate leaves in candidate order, then their ancestors, then a virtual root (node ``-1``)
    when no hierarchy node covers every candidate. ``leaf_matrix``, ``n_leaves``, ``rewards``,
    ``is_leaf`` and ``is_root`` describe the columns (docs/metrics/darts.md, `DartsGraph`).
    """

    nodes: IntArray
    leaf_matrix: sp.csr_array
    n_leaves: IntArray
    rewards: FloatArray
    is_leaf: BoolArray
    is_root: BoolArray

    @property
    def n_candidates(self) -> int:
        """Number of candidate leaves :math:`|Y|`."""
        return int(self.leaf_matrix.shape[0])

    @property
    def n_columns(self) -> int:
        """Number of nodes (columns) of the sub-DAG."""
        return int(self.nodes.shape[0])

    @property
    def max_reward(self) -> float:
        """:math:`\\log_2 |Y|`, the reward of a leaf."""
        return float(np.log2(self.n_candidates))


def first_true(mask: npt.ArrayLike) -> int:
    """Position of the first True of a 1D mask (the caller knows there is one)."""
    return int(np.argmax(mask))


def darts_graph(hierarchy: Hierarchy, candidate_nodes: npt.ArrayLike) -> DartsGraph:
    """The sub-DAG of the candidate leaves and their ancestors, with node rewards in bits.

    A node's reward is ``log2 |Y| - log2 |leaves(v)|``, the information its answer gives; the
    leaves are counted as a set, so a node reached along several paths (a DAG) counts each once.
    Candidates must be distinct, at least two, and none below another. The definitions, the checks
    and a worked example: docs/metrics/darts.md, `darts_graph` (Deng et al. 2012, Sec. 3).

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> darts_graph(h, h.indices(["a", "b"])).rewards.tolist()
    [1.0, 1.0, 0.0]
    """
    import scipy.sparse as sp  # ~0.2 s to import: loading a spec must not pay it

    checked = check_hierarchy(hierarchy)
    n_nodes = checked.n_nodes
    candidates = check_nodes(candidate_nodes, n_nodes, "candidate_nodes", allow_empty=True)
    if candidates.shape[0] < 2:
        raise MetricError(
            "Expected `candidate_nodes` to hold at least two candidate leaves (DARTS needs "
            f"log2|Y| > 0), but got {candidates.shape[0]}."
        )
    position_of = np.full(n_nodes, -1, dtype=np.int64)
    position_of[candidates] = np.arange(candidates.shape[0])
    ancestors = sp.csr_array(checked.ancestor_matrix[candidates])
    ancestors.sort_indices()
    indptr = np.asarray(ancestors.indptr, dtype=np.int64)
    indices = np.asarray(ancestors.indices, dtype=np.int64)
    # Each row holds the candidate itself; any other candidate in the row lies above it.
    n_candidates_above = np.add.reduceat((position_of[indices] >= 0).astype(np.int64), indptr[:-1])
    if (n_candidates_above > 1).any():
        below = first_true(n_candidates_above > 1)
        row = indices[indptr[below] : indptr[below + 1]]
        above = int(
            next(
                node
                for node in row.tolist()
                if position_of[node] >= 0 and node != candidates[below]
            )
        )
        ids = checked.node_ids
        raise MetricError(
            "Expected `candidate_nodes` to be leaf classes, none an ancestor of another, but "
            f"candidate_nodes[{below}] = {int(candidates[below])} "
            f"({str(ids[candidates[below]])!r}) lies below candidate_nodes"
            f"[{int(position_of[above])}] = {above} ({str(ids[above])!r})."
        )
    n_candidates = int(candidates.shape[0])
    others = np.setdiff1d(np.unique(indices), candidates)  # ascending node index
    nodes = np.concatenate([candidates, others])
    column_of = np.full(n_nodes, -1, dtype=np.int64)
    column_of[nodes] = np.arange(nodes.shape[0], dtype=np.int64)
    leaf_matrix = sp.csr_array(
        (np.ones(indices.shape[0]), column_of[indices], indptr),
        shape=(n_candidates, nodes.shape[0]),
    )
    n_leaves = np.bincount(column_of[indices], minlength=nodes.shape[0]).astype(np.int64)
    if not (n_leaves == n_candidates).any():
        nodes = np.append(nodes, -1)
        leaf_matrix = sp.csr_array(sp.hstack([leaf_matrix, np.ones((n_candidates, 1))]).tocsr())
        n_leaves = np.append(n_leaves, n_candidates)
    leaf_matrix.sort_indices()
    rewards = np.log2(float(n_candidates)) - np.log2(n_leaves.astype(np.float64))
    is_leaf = np.zeros(nodes.shape[0], dtype=bool)
    is_leaf[:n_candidates] = True
    arrays = {
        "nodes": nodes.astype(np.int64),
        "n_leaves": n_leaves,
        "rewards": rewards,
        "is_leaf": is_leaf,
        "is_root": n_leaves == n_candidates,
    }
    for array in arrays.values():
        array.flags.writeable = False
    return DartsGraph(leaf_matrix=leaf_matrix, **arrays)


def tie_order(rewards: FloatArray) -> IntArray:
    """Columns in tie-break order: larger reward (fewer leaves) first, then smaller column."""
    return np.lexsort((np.arange(rewards.shape[0]), -rewards)).astype(np.int64)
