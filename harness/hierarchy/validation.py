"""The checks that make given node ids and edges a :class:`~harness.hierarchy.dag.Hierarchy`.

Node ids must be unique non-empty strings (names, one per id), every edge must name two known
nodes, with no self loop and no edge given twice, and the graph must be acyclic. Each refusal is
one message naming the offending position and ids (a cycle is printed parent before child), so
that a hierarchy file can be fixed from the message alone. The nodes come back sorted by id and
the edges as sorted index rows: the one canonical form behind equality and the content hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.core.errors import HierarchyError
from harness.hierarchy.csr import gather_rows

__all__ = ["checked_edges", "checked_nodes", "topological_levels"]

IntArray = npt.NDArray[np.int64]
StrArray = npt.NDArray[np.str_]


def checked_nodes(
    node_ids: Sequence[str] | npt.NDArray[Any], names: Sequence[str] | npt.NDArray[Any] | None
) -> tuple[StrArray, StrArray]:
    """The node ids sorted, and their names in the same order (the ids where ``names`` is None):
    ids non-empty, unique strings; one name per id."""
    ids = _str_array(node_ids, "node_ids")
    if ids.size == 0:
        raise HierarchyError("a hierarchy needs at least one node; node_ids is empty")
    empty = np.flatnonzero(ids == "")
    if empty.size:
        raise HierarchyError(f"node_ids[{empty[0]}] is an empty string; give every node an id")
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if dup.size:
        bad = str(sorted_ids[dup[0]])
        where = np.flatnonzero(ids == bad)
        raise HierarchyError(
            f"node id {bad!r} appears {where.size} times in node_ids (positions "
            f"{', '.join(map(str, where[:5]))}); node ids must be unique"
        )
    n = int(ids.size)
    if names is None:
        sorted_names = sorted_ids.copy()
    else:
        name_arr = _str_array(names, "names")
        if name_arr.size != n:
            raise HierarchyError(
                f"names has {name_arr.size} entries but node_ids has {n}; give one name "
                "per node id, in the same order"
            )
        sorted_names = name_arr[order]
    return sorted_ids, sorted_names


def checked_edges(
    sorted_ids: StrArray, edges: Sequence[tuple[str, str]] | npt.NDArray[Any]
) -> IntArray:
    """``(parent, child)`` index rows, sorted: both ends known, no self loop, no edge twice."""
    n = int(sorted_ids.size)
    pairs = _edge_id_array(edges)
    parent, child = _edge_indices(sorted_ids, pairs)
    loops = np.flatnonzero(parent == child)
    if loops.size:
        pos = int(loops[0])
        raise HierarchyError(f"{_pair(pairs, pos)} is a self loop; a node cannot be its own parent")
    keys = parent * n + child
    key_order = np.argsort(keys, kind="stable")
    sorted_keys = keys[key_order]
    dup = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if dup.size:
        first, again = int(key_order[dup[0]]), int(key_order[dup[0] + 1])
        raise HierarchyError(
            f"{_pair(pairs, again)} repeats edge {first}; each (parent, child) pair may appear once"
        )
    edge_arr = np.stack([parent[key_order], child[key_order]], axis=1).astype(np.int64)
    edge_arr = edge_arr.reshape(-1, 2)

    return edge_arr


def topological_levels(
    node_ids: StrArray, parents: tuple[IntArray, IntArray], children: tuple[IntArray, IntArray]
) -> IntArray:
    """Longest path from a root per node (Kahn's algorithm by layers); raise on a cycle, naming it.

    ``parents`` and ``children``: the ``(indptr, indices)`` CSR rows of each node's parents and
    children.
    """
    parent_indptr, parent_indices = parents
    child_indptr, child_indices = children
    n = int(node_ids.size)
    remaining = np.diff(parent_indptr).copy()
    level = np.full(n, -1, dtype=np.int64)
    frontier = np.flatnonzero(remaining == 0).astype(np.int64)
    depth = 0
    while frontier.size:
        level[frontier] = depth
        _, kids = gather_rows(child_indptr, child_indices, frontier)
        if kids.size == 0:
            break
        remaining -= np.bincount(kids, minlength=n)
        kids = np.unique(kids)
        frontier = kids[remaining[kids] == 0]
        depth += 1
    stuck = np.flatnonzero(level < 0)
    if stuck.size:
        cycle = _find_cycle(stuck, parent_indptr, parent_indices)
        names = " -> ".join(repr(str(node_ids[i])) for i in cycle)
        raise HierarchyError(
            f"the edges contain a cycle: {names} ({stuck.size} node(s) lie on or below "
            "cycles); a hierarchy must be acyclic, so drop one of these edges"
        )
    return level


def _find_cycle(stuck: IntArray, indptr: IntArray, indices: IntArray) -> list[int]:
    """One cycle among ``stuck`` nodes, each of which has a parent that is also stuck."""
    in_stuck = np.zeros(indptr.size - 1, dtype=bool)
    in_stuck[stuck] = True
    seen: dict[int, int] = {}
    path: list[int] = []
    node = int(stuck[0])
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        parents = indices[indptr[node] : indptr[node + 1]]
        node = int(parents[in_stuck[parents]][0])
    cycle = path[seen[node] :]
    cycle.reverse()  # parent before child
    return [*cycle, cycle[0]]


def _str_array(values: Any, what: str) -> StrArray:
    """Return ``values`` as a 1-D unicode array, refusing anything that is not a string."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise HierarchyError(f"{what} must be 1-D; got an array of shape {values.shape}")
        if values.dtype.kind == "U":
            return values.astype(str, copy=True)
        if values.dtype.kind != "O":
            raise HierarchyError(f"{what} must hold strings; got an array of dtype {values.dtype}")
        values = values.tolist()
    if isinstance(values, str):
        raise HierarchyError(f"{what} must be a sequence of strings, not one string {values!r}")
    items = list(values)
    for pos, item in enumerate(items):
        if not isinstance(item, str):
            raise HierarchyError(
                f"{what}[{pos}] must be a string; got {type(item).__name__} {item!r}"
            )
    if not items:
        return np.empty(0, dtype="<U1")
    return np.array(items, dtype=str)


def _edge_id_array(edges: Any) -> StrArray:
    """Return ``edges`` as a unicode array of shape ``[E, 2]`` of (parent id, child id)."""
    if isinstance(edges, np.ndarray):
        if edges.dtype.kind in "iub":
            raise HierarchyError(
                "edges hold integers; Hierarchy() takes (parent_id, child_id) string pairs. "
                "Use Hierarchy.from_arrays() for index edges."
            )
        if edges.size == 0:
            return np.empty((0, 2), dtype="<U1")
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise HierarchyError(
                f"edges must have shape [E, 2] (parent_id, child_id); got {edges.shape}"
            )
        if edges.dtype.kind == "U":
            return edges.astype(str, copy=True)
        edges = edges.tolist()
    pairs = list(edges)
    for pos, pair in enumerate(pairs):
        if (
            isinstance(pair, str)
            or not isinstance(pair, Sequence | np.ndarray)
            or len(pair) != 2
            or not all(isinstance(x, str) for x in pair)
        ):
            raise HierarchyError(
                f"edges[{pos}] must be a (parent_id, child_id) pair of strings; got {pair!r}"
            )
    if not pairs:
        return np.empty((0, 2), dtype="<U1")
    return np.array([(p, c) for p, c in pairs], dtype=str).reshape(-1, 2)


def _pair(pairs: StrArray, pos: int) -> str:
    return f"edge {pos} ({str(pairs[pos, 0])!r}, {str(pairs[pos, 1])!r})"


def _edge_indices(sorted_ids: StrArray, pairs: StrArray) -> tuple[IntArray, IntArray]:
    n = sorted_ids.size
    out = []
    for column in (0, 1):
        wanted = pairs[:, column]
        idx = np.searchsorted(sorted_ids, wanted)
        clipped = np.minimum(idx, n - 1)
        known = (idx < n) & (sorted_ids[clipped] == wanted)
        out.append((clipped.astype(np.int64), known))
    known_both = out[0][1] & out[1][1]
    if not known_both.all():
        bad_edges = np.flatnonzero(~known_both)
        pos = int(bad_edges[0])
        unknown = str(pairs[pos, 0] if not out[0][1][pos] else pairs[pos, 1])
        raise HierarchyError(
            f"{_pair(pairs, pos)} names {unknown!r}, which is "
            f"not in node_ids ({bad_edges.size} edge(s) name unknown nodes); add the node "
            "or drop the edge"
        )
    return out[0][0], out[1][0]
