"""LCA distances between the nodes of a :class:`~harness.hierarchy.dag.Hierarchy`.

Two distances through the common ancestors-or-self of two nodes (:data:`LCA_DISTANCES`): Deng
et al.'s LCA height, and Bertinetto et al.'s max leaf depth minus the LCA's depth; both ``-1``
for two nodes that share no ancestor. Their definitions, and why the DAG needs them stated with
care, are in ``docs/hierarchy.md``. The :class:`Hierarchy` methods of the same names are the
entry points; the vectorized algorithms live here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from harness.core.errors import HierarchyError
from harness.hierarchy.csr import gather_rows
from harness.hierarchy.hops import CHUNK_ENTRIES

if TYPE_CHECKING:
    from harness.hierarchy.dag import Hierarchy

__all__ = [
    "LCA_DISTANCES",
    "LcaDistance",
    "lca_distance",
    "lca_distance_counts",
    "lca_distance_matrix",
]

#: The names of the LCA distances (``docs/hierarchy.md``, "LCA distances"): Deng et al.'s LCA
#: height, and Bertinetto et al.'s max leaf depth minus the LCA's depth.
LcaDistance = Literal["lca_height", "max_leaf_depth_minus_lca_depth"]
#: Every :data:`LcaDistance`, the first (the LCA height) being the default wherever one is chosen.
LCA_DISTANCES: tuple[LcaDistance, ...] = get_args(LcaDistance)

IntArray = npt.NDArray[np.int64]


def lca_distance(
    hierarchy: Hierarchy, a: Any, b: Any, kind: LcaDistance = "lca_height"
) -> IntArray:
    """The LCA distance ``kind`` of ``a`` and ``b``, elementwise (:meth:`Hierarchy.lca_distance`).

    The ancestor rows of ``a`` are gathered in chunks of about :data:`CHUNK_ENTRIES` entries and
    each entry tested for membership in the rows of ``b`` (a search in the sorted ancestor keys);
    the minimum level over the common entries is the distance.
    """
    level = hierarchy.lca_levels(kind)
    aa, bb = np.broadcast_arrays(hierarchy._index_array(a, "a"), hierarchy._index_array(b, "b"))
    shape = aa.shape
    flat_a = aa.reshape(-1).astype(np.int64)
    flat_b = bb.reshape(-1).astype(np.int64)
    out = np.full(flat_a.size, -1, dtype=np.int64)
    if flat_a.size == 0:
        return out.reshape(shape)
    matrix = hierarchy.ancestor_matrix
    indptr = matrix.indptr.astype(np.int64)
    keys = hierarchy._ancestor_keys
    sentinel = np.iinfo(np.int64).max
    lengths = np.diff(indptr)[flat_a]
    cum = np.cumsum(lengths)
    start = 0
    while start < flat_a.size:
        done = int(cum[start - 1]) if start else 0
        stop = int(np.searchsorted(cum, done + CHUNK_ENTRIES, side="right"))
        stop = max(stop, start + 1)
        owner, anc = gather_rows(indptr, matrix.indices, flat_a[start:stop])
        query = flat_b[start:stop][owner] * hierarchy.n_nodes + anc
        pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
        common = keys[pos] == query
        h = np.where(common, level[anc], sentinel)
        seg = np.concatenate([[0], np.cumsum(lengths[start:stop])[:-1]])
        best = np.minimum.reduceat(h, seg)  # every row holds at least the node itself
        out[start:stop] = np.where(best == sentinel, -1, best)
        start = stop
    return out.reshape(shape)


def lca_distance_matrix(
    hierarchy: Hierarchy, idx: Any, kind: LcaDistance = "lca_height"
) -> IntArray:
    """Pairwise LCA distances of ``idx`` (:meth:`Hierarchy.lca_distance_matrix`).

    By level: for each value ``v`` of :meth:`Hierarchy.lca_levels` in ascending order, one sparse
    product finds the pairs that share an ancestor-or-self at level ``v``; the first ``v`` that
    appears is the answer.
    """
    level = hierarchy.lca_levels(kind)
    rows = hierarchy._index_array(idx, "idx")
    if rows.ndim != 1:
        raise HierarchyError(f"idx must be 1-D; got shape {rows.shape}")
    m = rows.size
    out = np.full((m, m), -1, dtype=np.int64)
    if m == 0:
        return out
    sub = hierarchy.ancestor_matrix[rows].astype(np.int32)
    used = np.unique(sub.indices)
    sub = sub[:, used].tocsc()
    levels = level[used]
    chunk = max(1, CHUNK_ENTRIES // max(m, 1))
    for v in np.unique(levels):
        cols = np.flatnonzero(levels == v)
        part = sub[:, cols].tocsr()
        part_t = part.T.tocsr()
        for s in range(0, m, chunk):
            block = out[s : s + chunk]
            shared = (part[s : s + chunk] @ part_t).toarray() > 0
            block[(block < 0) & shared] = v
    return out


def lca_distance_counts(
    hierarchy: Hierarchy,
    sources: Any,
    targets: Any,
    *,
    limit: int,
    kind: LcaDistance = "lca_height",
) -> tuple[IntArray, IntArray]:
    """Targets within each LCA distance of each source (:meth:`Hierarchy.lca_distance_counts`).

    The count at level ``v`` is the size of the union of the target sets below the source's
    ancestors-or-self of level ``<= v``: one sparse product per level, over the sources whose count
    is still below ``limit``, in row groups of about :data:`CHUNK_ENTRIES` product entries. No
    dense ``sources x targets`` matrix is built.
    """
    import scipy.sparse as sp  # ~0.2 s to import: loading a spec (or zsl --help) must not pay it

    level = hierarchy.lca_levels(kind)
    src = hierarchy._index_array(sources, "sources")
    tgt = hierarchy._index_array(targets, "targets")
    if src.ndim != 1 or tgt.ndim != 1:
        raise HierarchyError(
            f"sources and targets must be 1-D; got shapes {src.shape} and {tgt.shape}"
        )
    m = src.size
    ancestors = hierarchy.ancestor_matrix
    below = sp.csr_array(ancestors[tgt].T.astype(np.int32))  # [n, t]
    below_counts = np.diff(below.indptr)
    rows = ancestors[src]
    owner = np.repeat(np.arange(m, dtype=np.int64), np.diff(rows.indptr))
    nodes = rows.indices.astype(np.int64)
    levels = level[nodes]
    found = np.zeros(m, dtype=np.int64)
    reached: list[int] = []
    columns: list[IntArray] = []
    for v in np.unique(levels):
        active = np.flatnonzero(found < limit)
        if active.size == 0:
            break
        selected = (found[owner] < limit) & (levels <= v)
        estimate = np.bincount(owner[selected], weights=below_counts[nodes[selected]], minlength=m)[
            active
        ]
        # Contiguous groups of active sources whose estimated product entries fit the budget.
        cumulative = np.cumsum(estimate)
        counts = np.zeros(active.size, dtype=np.int64)
        start = 0
        while start < active.size:
            done = cumulative[start - 1] if start else 0.0
            stop = int(np.searchsorted(cumulative, done + CHUNK_ENTRIES, side="right"))
            stop = max(stop, start + 1)
            group = active[start:stop]
            lo, hi = np.searchsorted(owner, [group[0], group[-1] + 1])
            take = np.flatnonzero(selected[lo:hi]) + lo
            pick = sp.csr_array(
                (
                    np.ones(take.size, dtype=np.int32),
                    (np.searchsorted(group, owner[take]), nodes[take]),
                ),
                shape=(group.size, hierarchy.n_nodes),
            )
            counts[start:stop] = np.diff((pick @ below).indptr)
            start = stop
        found[active] = counts
        reached.append(int(v))
        columns.append(found.copy())
    if not columns:
        return np.zeros(0, dtype=np.int64), np.zeros((m, 0), dtype=np.int64)
    return np.asarray(reached, dtype=np.int64), np.stack(columns, axis=1)
