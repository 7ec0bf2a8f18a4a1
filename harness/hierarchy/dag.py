"""Frozen class hierarchies: :class:`Hierarchy`, a directed acyclic graph of classes.

A :class:`Hierarchy` is immutable once built. It is a DAG, never assumed to be a tree: WordNet
gives many synsets two or more hypernyms (``dog.n.01`` is both a canine and a domestic animal),
and every query is defined for that case. This module holds the graph itself: its storage
(sparse rows of parents and children), lookups, structure, depth and height, and ancestry. Every
other query is a method here too, so that importers use one object, while its algorithm lives
with its kind: the checks of a new graph in :mod:`harness.hierarchy.validation`, LCA distances
in :mod:`harness.hierarchy.lca`, hop distances in :mod:`harness.hierarchy.hops`, the JSON and
array forms in :mod:`harness.hierarchy.forms`. Derived arrays are computed on first use and
cached on the instance. The terms (depth, max_depth, height, max leaf depth, the two LCA
distances, hops) are defined in ``docs/hierarchy.md``.
"""

from __future__ import annotations

import hashlib
import operator
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from harness.core.errors import HierarchyError
from harness.hierarchy import forms, hops, lca
from harness.hierarchy.csr import gather_rows
from harness.hierarchy.hops import HopBalls
from harness.hierarchy.lca import LCA_DISTANCES, LcaDistance
from harness.hierarchy.validation import checked_edges, checked_nodes, topological_levels

# scipy.sparse costs ~0.2 s to import: the functions that use it import it, so that loading a
# spec (or zsl --help) does not pay for it.
if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["Hierarchy"]


IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
StrArray = npt.NDArray[np.str_]

#: Hop-ball indexes kept per hierarchy (least recently used dropped first).
_MAX_HOP_BALLS = 8


def _readonly(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.flags.writeable = False
    return array


def _reach(indptr: IntArray, indices: IntArray, start: IntArray, n: int) -> IntArray:
    """Directed BFS along CSR rows (children, or parents) from ``start``: the fewest edges to
    every node, ``-1`` where it is not reached."""
    level = np.full(n, -1, dtype=np.int64)
    frontier = np.unique(start)
    depth = 0
    while frontier.size:
        level[frontier] = depth
        _, following = gather_rows(indptr, indices, frontier)
        following = np.unique(following)
        frontier = following[level[following] < 0]
        depth += 1
    return level


class Hierarchy:
    """A frozen directed acyclic graph of classes, queried by node index.

    Built from unique node ids (stored sorted), ``(parent_id, child_id)`` edges, optional names and
    a provenance ``source``; a duplicate id, unknown end, self loop, repeated edge or cycle raises a
    `HierarchyError` that names it. Every graph query (structure, ancestry, levels, LCA distances,
    hops) is a method here, so importers hold one object. The parameters and the list of queries:
    docs/hierarchy.md, `Hierarchy`.

    >>> h = Hierarchy(["b", "a"], [("a", "b")], names=["bee", "ay"], source="toy")
    >>> h.node_ids.tolist(), h.names.tolist(), h.edges.tolist()
    (['a', 'b'], ['ay', 'bee'], [[0, 1]])
    """

    def __init__(
        self,
        node_ids: Sequence[str] | npt.NDArray[Any],
        edges: Sequence[tuple[str, str]] | npt.NDArray[Any],
        names: Sequence[str] | npt.NDArray[Any] | None = None,
        *,
        source: str = "",
    ) -> None:
        if not isinstance(source, str):
            raise HierarchyError(f"source must be a string; got {type(source).__name__}")
        sorted_ids, sorted_names = checked_nodes(node_ids, names)
        edge_arr = checked_edges(sorted_ids, edges)
        n = int(sorted_ids.size)

        self._node_ids: StrArray = _readonly(sorted_ids)
        self._names: StrArray = _readonly(sorted_names)
        self._edges: IntArray = _readonly(edge_arr)
        self._n = n
        self._source = source
        p, c = edge_arr[:, 0], edge_arr[:, 1]
        self._child_indptr: IntArray = np.concatenate(
            [[0], np.cumsum(np.bincount(p, minlength=n))]
        ).astype(np.int64)
        self._child_indices: IntArray = _readonly(c.copy())
        by_child = np.lexsort((p, c))
        self._parent_indptr: IntArray = np.concatenate(
            [[0], np.cumsum(np.bincount(c, minlength=n))]
        ).astype(np.int64)
        self._parent_indices: IntArray = _readonly(p[by_child].copy())
        self._level: IntArray = _readonly(
            topological_levels(
                self._node_ids,
                (self._parent_indptr, self._parent_indices),
                (self._child_indptr, self._child_indices),
            )
        )

    # ------------------------------------------------------------------ basic attributes

    @property
    def node_ids(self) -> StrArray:
        """Node ids, sorted (read-only unicode array of shape ``(n_nodes,)``)."""
        return self._node_ids

    @property
    def names(self) -> StrArray:
        """Node names aligned with :attr:`node_ids` (read-only unicode array)."""
        return self._names

    @property
    def edges(self) -> IntArray:
        """``(parent_index, child_index)`` rows, sorted (read-only int64 array ``[E, 2]``)."""
        return self._edges

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self._n

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return int(self._edges.shape[0])

    @property
    def source(self) -> str:
        """Provenance string given at construction."""
        return self._source

    def __repr__(self) -> str:
        return f"Hierarchy(n_nodes={self._n}, n_edges={self.n_edges}, source={self._source!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hierarchy):
            return NotImplemented
        return (
            self._source == other._source
            and np.array_equal(self._node_ids, other._node_ids)
            and np.array_equal(self._names, other._names)
            and np.array_equal(self._edges, other._edges)
        )

    def __hash__(self) -> int:
        return hash(self.content_hash())

    # ------------------------------------------------------------------ lookups

    def index(self, node_id: str) -> int:
        """Index of one node id (its position in `node_ids`); `HierarchyError` if not a node.

        >>> Hierarchy(["x", "a"], []).index("x")
        1
        """
        return int(self.indices([node_id])[0])

    def indices(self, ids: Sequence[str] | npt.NDArray[Any]) -> IntArray:
        """Indices of many node ids, in their shape (``searchsorted`` on the sorted ids).

        An unknown id raises a `HierarchyError` naming the first one, its position and how many are
        unknown (docs/hierarchy.md, `index`, `indices`).

        >>> Hierarchy(["c", "a", "b"], []).indices(["b", "c"]).tolist()
        [1, 2]
        """
        arr = np.asarray(ids)
        if arr.size == 0:
            return np.zeros(arr.shape, dtype=np.int64)
        if arr.dtype.kind not in "UO":
            raise HierarchyError(f"ids must be strings; got an array of dtype {arr.dtype}")
        arr = arr.astype(str)
        flat = arr.reshape(-1)
        idx = np.searchsorted(self._node_ids, flat)
        clipped = np.minimum(idx, self._n - 1)
        known = (idx < self._n) & (self._node_ids[clipped] == flat)
        if not known.all():
            bad = np.flatnonzero(~known)
            raise HierarchyError(
                f"{bad.size} of {flat.size} ids are not nodes of this hierarchy; the first is "
                f"{str(flat[bad[0]])!r} at position {int(bad[0])}. Check the class list "
                f"against the hierarchy (source: {self._source or 'unknown'})"
            )
        return clipped.astype(np.int64).reshape(arr.shape)

    def _node(self, i: Any, what: str = "i") -> int:
        if isinstance(i, bool | np.bool_):
            raise HierarchyError(f"{what} must be a node index (int); got bool {i!r}")
        try:
            value = operator.index(i)
        except TypeError:
            raise HierarchyError(
                f"{what} must be a node index (int); got {type(i).__name__} {i!r}"
            ) from None
        if not 0 <= value < self._n:
            raise HierarchyError(
                f"{what}={value} is out of range; node indices run from 0 to {self._n - 1}"
            )
        return value

    def _index_array(self, x: Any, what: str) -> IntArray:
        arr = np.asarray(x)
        if arr.size == 0:
            return np.zeros(arr.shape, dtype=np.int64)
        if arr.dtype.kind not in "iu":
            raise HierarchyError(
                f"{what} must hold node indices (integers); got dtype {arr.dtype}. Use "
                "Hierarchy.indices() to turn ids into indices"
            )
        bad = np.flatnonzero(((arr < 0) | (arr >= self._n)).reshape(-1))
        if bad.size:
            raise HierarchyError(
                f"{what} holds {bad.size} index(es) out of range 0..{self._n - 1}; the first is "
                f"{int(arr.reshape(-1)[bad[0]])} at flat position {int(bad[0])}"
            )
        return arr.astype(np.int64, copy=False)

    def parents(self, i: int) -> IntArray:
        """Indices of the parents of node ``i``, ascending (read-only).

        Examples
        --------
        >>> h = Hierarchy(["a", "b", "c"], [("a", "c"), ("b", "c")])
        >>> h.parents(2).tolist(), h.parents(0).tolist()
        ([0, 1], [])
        """
        k = self._node(i)
        return self._parent_indices[self._parent_indptr[k] : self._parent_indptr[k + 1]]

    def children(self, i: int) -> IntArray:
        """Indices of the children of node ``i``, ascending (read-only)."""
        k = self._node(i)
        return self._child_indices[self._child_indptr[k] : self._child_indptr[k + 1]]

    @cached_property
    def roots(self) -> IntArray:
        """Indices of the nodes without a parent, ascending."""
        return _readonly(np.flatnonzero(np.diff(self._parent_indptr) == 0).astype(np.int64))

    @cached_property
    def leaves(self) -> IntArray:
        """Indices of the nodes without a child, ascending."""
        return _readonly(np.flatnonzero(np.diff(self._child_indptr) == 0).astype(np.int64))

    @cached_property
    def topological_order(self) -> IntArray:
        """All node indices, parents before children (by :attr:`max_depth`, then index)."""
        return _readonly(np.argsort(self._level, kind="stable").astype(np.int64))

    # ------------------------------------------------------------------ depth and height

    @cached_property
    def depth(self) -> IntArray:
        """Shortest number of edges from any root down to each node (roots: 0).

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("a", "b"), ("r", "b")])
        >>> h.node_ids.tolist(), h.depth.tolist(), h.max_depth.tolist()
        (['a', 'b', 'r'], [1, 1, 0], [1, 2, 0])
        """
        return _readonly(_reach(self._child_indptr, self._child_indices, self.roots, self._n))

    @property
    def max_depth(self) -> IntArray:
        """Longest number of edges from any root down to each node (its topological level)."""
        return self._level

    @cached_property
    def height(self) -> IntArray:
        """Longest number of edges from each node down to a leaf (leaves: 0)."""
        height = np.zeros(self._n, dtype=np.int64)
        p, c = self._edges[:, 0], self._edges[:, 1]
        parent_level = self._level[p]
        order = np.argsort(parent_level, kind="stable")
        p, c, parent_level = p[order], c[order], parent_level[order]
        bounds = np.searchsorted(parent_level, np.arange(int(self._level.max()) + 2))
        # Every child sits on a deeper level than its parent, so walking levels bottom-up sees
        # each child's final height before its parents use it.
        for lvl in range(int(self._level.max()) - 1, -1, -1):
            s, e = bounds[lvl], bounds[lvl + 1]
            if s < e:
                np.maximum.at(height, p[s:e], height[c[s:e]] + 1)
        return _readonly(height)

    @cached_property
    def root_height(self) -> int:
        """:math:`H`, the largest :attr:`height` of a root (of any node): the hierarchy's height.

        Examples
        --------
        >>> Hierarchy(["r", "a", "b", "z"], [("r", "a"), ("a", "b")]).root_height
        2
        """
        return int(self.height[self.roots].max())

    @cached_property
    def max_leaf_depth(self) -> int:
        """The largest :attr:`max_depth` of a leaf: the longest root-to-leaf path, in edges.

        It equals :attr:`root_height`, since a longest path of the DAG runs from a root to a leaf;
        Bertinetto et al.'s distance (:meth:`lca_distance`) measures from this level.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.max_leaf_depth, h.root_height
        (2, 2)
        """
        return int(self._level[self.leaves].max())

    @cached_property
    def levels_above_deepest_leaf(self) -> IntArray:
        """``max_leaf_depth - max_depth`` per node: how far above the deepest leaf level it sits.

        Bertinetto et al.'s height of a node (read-only int64 array of shape ``(n_nodes,)``). At
        least :attr:`height` (a root-to-node path followed by a node-to-leaf path is a
        root-to-leaf path), and equal to it exactly where a longest root-to-leaf path runs
        through the node (in a tree: where the node's deepest leaf lies at the deepest level).

        Examples
        --------
        The leaf ``c`` sits one level above the deepest leaf ``b`` (height 0, but 1 here):

        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.node_ids.tolist(), h.levels_above_deepest_leaf.tolist(), h.height.tolist()
        (['a', 'b', 'c', 'r'], [1, 0, 1, 2], [1, 0, 0, 2])
        """
        return _readonly(self.max_leaf_depth - self._level)

    def lca_levels(self, kind: LcaDistance) -> IntArray:
        """The per-node level whose minimum over common ancestors-or-self is the distance ``kind``.

        :attr:`height` for ``"lca_height"``, :attr:`levels_above_deepest_leaf` for
        ``"max_leaf_depth_minus_lca_depth"`` (read-only; both cached).

        Raises
        ------
        HierarchyError
            If ``kind`` is not one of :data:`LCA_DISTANCES`.
        """
        if kind == "lca_height":
            return self.height
        if kind == "max_leaf_depth_minus_lca_depth":
            return self.levels_above_deepest_leaf
        raise HierarchyError(
            f"Expected the LCA distance `kind` to be one of {list(LCA_DISTANCES)}, but got {kind!r}"
        )

    # ------------------------------------------------------------------ ancestry

    @cached_property
    def ancestor_matrix(self) -> sp.csr_array:
        """Reflexive ancestor relation, ``csr_array`` of bool ``[n, n]``.

        Row ``i`` marks ``i`` and every ancestor of ``i`` (columns sorted). Built level by level
        in topological order: a level's rows are the node itself OR'd with its parents' rows,
        one sparse product per level.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("a", "b")])
        >>> h.ancestor_matrix.toarray().astype(int).tolist()
        [[1, 0, 1], [1, 1, 1], [0, 0, 1]]
        """
        import scipy.sparse as sp

        n = self._n
        order = self.topological_order
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n, dtype=np.int64)
        levels = self._level[order]
        bounds = np.searchsorted(levels, np.arange(int(levels.max()) + 2))

        indptr = np.zeros(n + 1, dtype=np.int64)
        capacity = max(4 * n, 1024)
        indices = np.empty(capacity, dtype=np.int64)
        ones = np.ones(capacity, dtype=np.int32)
        first = int(bounds[1])
        indices[:first] = order[:first]  # roots: only themselves
        indptr[1 : first + 1] = np.arange(1, first + 1)
        nnz = first
        for lvl in range(1, len(bounds) - 1):
            s, e = int(bounds[lvl]), int(bounds[lvl + 1])
            nodes = order[s:e]
            owner, parent = gather_rows(self._parent_indptr, self._parent_indices, nodes)
            pick = sp.csr_array(
                (np.ones(owner.size, dtype=np.int32), (owner, position[parent])), shape=(e - s, s)
            )
            above = sp.csr_array((ones[:nnz], indices[:nnz], indptr[: s + 1]), shape=(s, n))
            rows = pick @ above
            rows = rows + sp.csr_array(
                (np.ones(e - s, dtype=np.int32), (np.arange(e - s), nodes)), shape=(e - s, n)
            )
            rows.sum_duplicates()
            rows.sort_indices()
            add = int(rows.nnz)
            if nnz + add > capacity:
                capacity = max(2 * capacity, nnz + add)
                indices = np.resize(indices, capacity)
                ones = np.ones(capacity, dtype=np.int32)
            indices[nnz : nnz + add] = rows.indices
            indptr[s + 1 : e + 1] = nnz + np.asarray(rows.indptr[1:], dtype=np.int64)
            nnz += add
        by_position = sp.csr_array(
            (np.ones(nnz, dtype=bool), indices[:nnz].copy(), indptr), shape=(n, n)
        )
        matrix = by_position[position]
        matrix.sort_indices()
        return matrix

    @cached_property
    def descendant_matrix(self) -> sp.csr_array:
        """Reflexive descendant relation: the transpose of :attr:`ancestor_matrix` (csr, bool)."""
        matrix = self.ancestor_matrix.T.tocsr()
        matrix.sort_indices()
        return matrix

    @cached_property
    def _ancestor_keys(self) -> IntArray:
        """``row * n + col`` for every entry of the ancestor matrix, ascending."""
        a = self.ancestor_matrix
        rows = np.repeat(np.arange(self._n, dtype=np.int64), np.diff(a.indptr))
        return _readonly(rows * self._n + a.indices.astype(np.int64))

    def ancestors(self, i: int) -> IntArray:
        """Indices of all ancestors of node ``i`` (excluding ``i``), ascending.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("a", "b")])
        >>> h.ancestors(h.index("b")).tolist()
        [0, 2]
        """
        k = self._node(i)
        a = self.ancestor_matrix
        row = np.asarray(a.indices[a.indptr[k] : a.indptr[k + 1]], dtype=np.int64)
        return row[row != k]

    def descendants(self, i: int) -> IntArray:
        """Indices of all descendants of node ``i`` (excluding ``i``), ascending."""
        k = self._node(i)
        d = self.descendant_matrix
        row = np.asarray(d.indices[d.indptr[k] : d.indptr[k + 1]], dtype=np.int64)
        return row[row != k]

    def ancestor_pairs(self, idx: Any) -> tuple[IntArray, IntArray]:
        """Pairs of the distinct nodes ``idx`` where one is a proper ancestor of the other.

        Returns positions ``below, above`` in ``idx``: ``idx[above[j]]`` is an ancestor of
        ``idx[below[j]]``. Vectorized: the rows and columns of ``idx`` are sliced out of
        `ancestor_matrix` and its off-diagonal entries read. The order and an example:
        docs/hierarchy.md, `is_ancestor_or_self`, `ancestor_pairs`.
        """
        rows = self._index_array(idx, "idx")
        if rows.ndim != 1:
            raise HierarchyError(f"idx must be 1-D; got shape {rows.shape}")
        if rows.size < 2:
            none = np.zeros(0, dtype=np.int64)
            return none, none.copy()
        sub = self.ancestor_matrix[rows][:, rows].tocoo()
        off = sub.row != sub.col
        return sub.row[off].astype(np.int64), sub.col[off].astype(np.int64)

    def restrict_to_ancestors(self, idx: Any) -> Hierarchy:
        """The sub-DAG of the ancestors-or-self of the nodes ``idx``, with every edge among them.

        Every parent of a kept node is kept, so the result answers ancestor queries for ``idx``
        exactly as this hierarchy does. Its :attr:`source` says how it was cut.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.restrict_to_ancestors(h.indices(["b"])).node_ids.tolist()
        ['a', 'b', 'r']
        """
        start = self._index_array(idx, "idx").reshape(-1)
        keep = _reach(self._parent_indptr, self._parent_indices, start, self._n) >= 0
        kept_edges = self._edges[keep[self._edges[:, 1]]]
        return Hierarchy(
            self._node_ids[keep],
            self._node_ids[kept_edges],
            self._names[keep],
            source=f"{self._source}; ancestors-or-self of {start.size} classes",
        )

    def is_ancestor_or_self(self, a: Any, b: Any) -> BoolArray:
        """Whether ``a`` is ``b`` or an ancestor of ``b``, elementwise (indices, broadcast).

        >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("a", "b")])
        >>> h.is_ancestor_or_self(2, [0, 1, 2]).tolist()
        [True, True, True]
        >>> h.is_ancestor_or_self([0, 1], 2).tolist()
        [False, False]
        """
        aa, bb = np.broadcast_arrays(self._index_array(a, "a"), self._index_array(b, "b"))
        query = bb.astype(np.int64) * self._n + aa
        keys = self._ancestor_keys
        pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
        return np.asarray(keys[pos] == query)

    @cached_property
    def _edge_keys(self) -> IntArray:
        """``parent * n + child`` for every edge, ascending."""
        edges = self.edges.astype(np.int64)
        return _readonly(np.sort(edges[:, 0] * self._n + edges[:, 1]))

    def shares_a_parent(self, a: Any, b: Any) -> BoolArray:
        """Whether ``a[i]`` and ``b[i]`` have a parent in common (siblings in the DAG, through
        any of their parents; a node and itself too, unless it is a root), elementwise.

        >>> h = Hierarchy(["r", "pet", "dog", "cat", "rat"],
        ...               [("r", "pet"), ("r", "dog"), ("pet", "dog"), ("pet", "cat"),
        ...                ("dog", "rat")])
        >>> a, b = h.indices(["dog", "dog", "dog", "cat"]), h.indices(["cat", "pet", "rat", "pet"])
        >>> h.shares_a_parent(a, b).tolist()  # pet; r; rat is dog's child; pet is cat's parent
        [True, True, False, False]
        """
        aa, bb = np.broadcast_arrays(self._index_array(a, "a"), self._index_array(b, "b"))
        flat_a, flat_b = aa.reshape(-1), bb.reshape(-1)
        owner, parent = gather_rows(self._parent_indptr, self._parent_indices, flat_a)
        keys = self._edge_keys
        if keys.size == 0:
            return np.zeros(aa.shape, dtype=bool)
        # Each parent of a[i] is looked up as an edge to b[i].
        query = parent * self._n + flat_b[owner]
        found = keys[np.minimum(np.searchsorted(keys, query), keys.size - 1)] == query
        return (np.bincount(owner[found], minlength=flat_a.size) > 0).reshape(aa.shape)

    def lca_distance(self, a: Any, b: Any, kind: LcaDistance = "lca_height") -> IntArray:
        """The LCA distance ``kind`` of ``a`` and ``b``, elementwise (``-1``: no common ancestor).

        The minimum of `lca_levels` over the common ancestors-or-self: the LCA height
        (``"lca_height"``, Deng et al. 2010), or the max leaf depth minus the largest `max_depth` of
        a common ancestor-or-self (``"max_leaf_depth_minus_lca_depth"``, Bertinetto et al. 2020).
        Both are defined for a DAG. The definitions, the vectorized algorithm and a worked example
        on a DAG: docs/hierarchy.md, "LCA distances" and `lca_distance`, `lca_height`.
        """
        return lca.lca_distance(self, a, b, kind)

    def lca_height(self, a: Any, b: Any) -> IntArray:
        """Height of a lowest common ancestor of ``a`` and ``b``, elementwise (``-1``: none).

        The minimum `height` over the common ancestors-or-self: `lca_distance` of kind
        ``"lca_height"``.

        >>> h = Hierarchy(["r", "a", "b", "c", "z"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> i = h.indices(["b", "c", "a", "z"])
        >>> h.lca_height(i[0], i).tolist()  # b with b, c, a, z
        [0, 2, 1, -1]
        """
        return self.lca_distance(a, b, "lca_height")

    def lca_distance_matrix(self, idx: Any, kind: LcaDistance = "lca_height") -> IntArray:
        """Pairwise `lca_distance` ``kind`` of the nodes ``idx``, symmetric int64 ``[m, m]``.

        Computed by level: for each value ``v`` of `lca_levels` in ascending order, one sparse
        product finds the pairs that share an ancestor-or-self at level ``v``; the first ``v`` that
        appears is the answer, so no pair is visited twice. ``-1`` where two nodes share no
        ancestor. An example: docs/hierarchy.md, `lca_distance_matrix`.

        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.lca_distance_matrix(h.indices(["b", "c"]), "max_leaf_depth_minus_lca_depth").tolist()
        [[0, 2], [2, 1]]
        """
        return lca.lca_distance_matrix(self, idx, kind)

    def lca_height_matrix(self, idx: Any) -> IntArray:
        """Pairwise :meth:`lca_height` of the nodes ``idx``, an int64 array ``[m, m]``.

        :meth:`lca_distance_matrix` of kind ``"lca_height"``: ``-1`` where two nodes share no
        ancestor.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.lca_height_matrix(h.indices(["b", "c"])).tolist()
        [[0, 2], [2, 0]]
        """
        return self.lca_distance_matrix(idx, "lca_height")

    def lca_distance_counts(
        self, sources: Any, targets: Any, *, limit: int, kind: LcaDistance = "lca_height"
    ) -> tuple[IntArray, IntArray]:
        """How many ``targets`` lie within LCA distance ``v`` of each source, per ``v``.

        Returns the distinct levels of the sources' ancestors-or-self (ascending, up to the first at
        which every source has reached ``limit``) and ``counts[i, j]``, the targets within
        ``levels[j]`` of source ``i`` (frozen once it reaches ``limit``). It takes one sparse
        product per level in bounded row groups and never builds a dense ``sources x targets``
        matrix, so it scales to ImageNet. The definition, parameters and a worked example on a DAG:
        docs/hierarchy.md, `lca_distance_counts`.
        """
        return lca.lca_distance_counts(self, sources, targets, limit=limit, kind=kind)

    def lca_height_counts(
        self, sources: Any, targets: Any, *, limit: int
    ) -> tuple[IntArray, IntArray]:
        """How many ``targets`` meet each source at an LCA height of at most ``h``, per height.

        :meth:`lca_distance_counts` of kind ``"lca_height"``: returns the distinct heights of the
        sources' ancestors-or-self (ascending, up to the first at which every source has reached
        ``limit``) and ``counts[i, j]``, the number of targets ``t`` with ``0 <=
        lca_height(s_i, t) <= heights[j]`` (frozen once source ``i`` reaches ``limit``).

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> heights, counts = h.lca_height_counts(h.indices(["b"]), h.indices(["b", "c"]), limit=2)
        >>> heights.tolist(), counts.tolist()
        ([0, 1, 2], [[1, 1, 2]])
        """
        return self.lca_distance_counts(sources, targets, limit=limit, kind="lca_height")

    # ------------------------------------------------------------------ hops

    @cached_property
    def adjacency(self) -> sp.csr_array:
        """Undirected adjacency (hypernym and hyponym edges), int32 ``csr_array`` ``[n, n]``.

        Examples
        --------
        >>> Hierarchy(["r", "a"], [("r", "a")]).adjacency.toarray().tolist()
        [[0, 1], [1, 0]]
        """
        import scipy.sparse as sp

        parent, child = self._edges[:, 0], self._edges[:, 1]
        data = np.ones(2 * parent.size, dtype=np.int32)
        matrix = sp.csr_array(
            (data, (np.concatenate([parent, child]), np.concatenate([child, parent]))),
            shape=(self._n, self._n),
        )
        matrix.sum_duplicates()
        matrix.data[:] = 1
        return matrix

    def hop_distance(
        self, sources: Any, radius: int | None = None, *, targets: Any = None
    ) -> FloatArray:
        """Undirected hop distances from each of ``sources`` to every node (or to ``targets``).

        Float64 ``[k, n_nodes]`` (or ``[k, t]``), ``inf`` beyond ``radius`` or where unreachable.
        Only the ``targets`` columns are stored, so many sources stay cheap on a large graph
        (docs/hierarchy.md, `hop_distance`, `nearest_hops`).

        >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.hop_distance([h.index("b")]).tolist()
        [[1.0, 0.0, 3.0, 2.0]]
        >>> h.hop_distance([h.index("b")], radius=1).tolist()
        [[1.0, 0.0, inf, inf]]
        """
        return hops.hop_distance(self, sources, radius, targets=targets)

    def nearest_hops(self, sources: Any, radius: int | None = None) -> FloatArray:
        """Undirected hop distance from every node to the *nearest* of ``sources``.

        One search from all sources at once (a virtual node joined to each), whatever their number:
        a few milliseconds for the 1,000 ILSVRC classes on the 74k-node ImageNet is-a graph. 0 at
        sources, ``inf`` beyond ``radius`` or where no source is reachable.

        >>> h = Hierarchy(["r", "a", "b", "c", "z"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.nearest_hops(h.indices(["b", "c"])).tolist()
        [1.0, 0.0, 0.0, 1.0, inf]
        """
        return hops.nearest_hops(self, sources, radius)

    def nearest_other_hops(self, nodes: Any) -> FloatArray:
        """For each of the distinct ``nodes``, the hop distance to the nearest *other* of them.

        Each node's search stops at the first level that reaches another node of the set
        (its hop ball holding two of them); ``inf`` where no other node of the set is
        connected.

        Examples
        --------
        >>> h = Hierarchy(["r", "a", "b", "c", "z"], [("r", "a"), ("a", "b"), ("r", "c")])
        >>> h.nearest_other_hops(h.indices(["b", "c", "z"])).tolist()
        [3.0, 3.0, inf]
        """
        return hops.nearest_other_hops(self, nodes)

    def hop_balls(self, valid_nodes: Any, ks: Sequence[int] | int) -> HopBalls:
        """The `HopBalls` of these valid nodes and ball sizes ``ks``, kept with the hierarchy.

        The last few (valid set, ``ks``) pairs are kept, so that every query with the same valid
        nodes and sizes -- one per chunk of images -- reuses the balls already searched. Valid
        nodes must be distinct and not empty, sizes distinct and ``>= 1``; anything else raises a
        `HierarchyError` (docs/hierarchy.md, `hop_balls`).
        """
        valid = np.sort(self._index_array(valid_nodes, "valid_nodes").reshape(-1))
        if valid.size == 0:
            raise HierarchyError("valid_nodes must hold at least one node")
        if np.any(valid[1:] == valid[:-1]):
            raise HierarchyError("valid_nodes must be distinct")
        values = [ks] if isinstance(ks, int | np.integer) else list(ks)
        if not values or any(
            isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1 for k in values
        ):
            raise HierarchyError(f"ks must be distinct integers >= 1; got {ks!r}")
        sizes = tuple(sorted(int(k) for k in values))
        if len(set(sizes)) != len(sizes):
            raise HierarchyError(f"ks must be distinct integers >= 1; got {ks!r}")
        digest = hashlib.sha256(np.ascontiguousarray(valid, dtype="<i8").tobytes()).hexdigest()
        key = (digest, sizes)
        kept = self._hop_balls
        balls = kept.get(key)
        if balls is None:
            balls = HopBalls(self, valid, sizes)
            kept[key] = balls
            while len(kept) > _MAX_HOP_BALLS:
                kept.popitem(last=False)
        kept.move_to_end(key)
        return balls

    @cached_property
    def _hop_balls(self) -> OrderedDict[tuple[str, tuple[int, ...]], HopBalls]:
        return OrderedDict()

    # ------------------------------------------------------------------ stored forms

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form: ``{"format", "source", "nodes", "edges"}`` (see :meth:`save_json`).

        Examples
        --------
        >>> Hierarchy(["b", "a"], [("a", "b")]).to_dict()["edges"]
        [['a', 'b']]
        """
        return forms.to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Hierarchy:
        """Build a hierarchy from :meth:`to_dict` output, validating its shape.

        Raises
        ------
        HierarchyError
            On a missing or unknown key, a wrong format tag, or a malformed node or edge.
        """
        return cls._from_dict(d, "hierarchy")

    @classmethod
    def _from_dict(cls, d: Any, where: str) -> Hierarchy:
        ids, edges, names, source = forms.parse_dict(d, where)
        try:
            return cls(ids, edges, names, source=source)
        except HierarchyError as err:
            raise HierarchyError(f"{where}: {err}") from None

    def to_json(self) -> str:
        """The file text written by :meth:`save_json` (indent 1, sorted keys, final newline)."""
        return forms.to_json(self)

    def save_json(self, path: str | os.PathLike[str]) -> None:
        """Write the hierarchy as JSON, atomically (temporary file, then rename).

        The format is ``{"format": "zsl-hierarchy/1", "source": str, "nodes": [{"id", "name"},
        ...] sorted by id, "edges": [[parent_id, child_id], ...] sorted}``, indented by one space
        with sorted keys and a final newline, so that diffs review well.
        """
        forms.save_json(self, path)

    @classmethod
    def load_json(cls, path: str | os.PathLike[str]) -> Hierarchy:
        """Read a file written by :meth:`save_json`; errors name the file and the problem."""
        source = Path(path)
        return cls._from_dict(forms.read_json(source), str(source))

    def to_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Plain arrays (no object dtype, safe for ``np.save`` without pickle).

        Returns
        -------
        dict
            ``node_ids`` and ``names`` (unicode, sorted by id) and ``edges`` (int64 ``[E, 2]``
            of parent and child indices).
        """
        return forms.to_arrays(self)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, npt.NDArray[Any]], source: str = "") -> Hierarchy:
        """Rebuild a hierarchy from :meth:`to_arrays` output (``edges`` index ``node_ids``).

        Examples
        --------
        >>> h = Hierarchy(["b", "a"], [("a", "b")])
        >>> Hierarchy.from_arrays(h.to_arrays()) == h
        True
        """
        ids, edges, names = forms.parse_arrays(arrays)
        return cls(ids, edges, names, source=source)

    def content_hash(self) -> str:
        """``"sha256:<hex>"`` of the canonical JSON of the format, nodes and edges.

        :attr:`source` is provenance and is left out, so the same graph built by another tool
        version hashes the same.
        """
        return forms.content_hash(self)

    def summary(self) -> dict[str, Any]:
        """Counts that describe the graph.

        Returns
        -------
        dict
            ``source``, ``nodes``, ``edges``, ``roots``, ``leaves``, ``multi_parent_nodes``
            (nodes with two or more parents), ``max_depth`` (longest root-to-node path) and
            ``content_hash``.
        """
        return {
            "source": self._source,
            "nodes": self._n,
            "edges": self.n_edges,
            "roots": int(self.roots.size),
            "leaves": int(self.leaves.size),
            "multi_parent_nodes": int((np.diff(self._parent_indptr) > 1).sum()),
            "max_depth": int(self._level.max()),
            "content_hash": self.content_hash(),
        }
