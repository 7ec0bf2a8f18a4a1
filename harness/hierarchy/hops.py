"""Undirected hop distances on a frozen hierarchy: the one breadth-first search of the harness.

A *hop* is one edge traversed in either direction. Every hop query (here, called by the
:class:`~harness.hierarchy.Hierarchy` methods of the same names, and :class:`HopBalls`) runs
:func:`bfs` on the cached undirected adjacency; docs/hierarchy.md ("Hops") derives the search.

>>> from harness.hierarchy import Hierarchy
>>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
...                ("animal", "cat"), ("vehicle", "car")])
>>> balls = h.hop_balls(h.indices(["dog", "cat", "car"]), ks=[1, 2, 3, 4])
>>> balls.radii(h.indices(["dog"]))
BallRadii(radii=array([[0, 2, 4, 4]]), sizes=array([[1, 2, 3, 3]]), short=array([[False, False, False,  True]]))
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from harness.core.errors import HierarchyError

# scipy.sparse costs ~0.2 s to import: the functions that use it import it, so that loading a
# spec (or zsl --help) does not pay for it.
if TYPE_CHECKING:
    import scipy.sparse as sp

    from harness.hierarchy.dag import Hierarchy

__all__ = [
    "CHUNK_ENTRIES",
    "BallRadii",
    "HopBalls",
    "Search",
    "ball_search",
    "bfs",
    "bfs_chunks",
    "hop_distance",
    "nearest_hops",
    "nearest_other_hops",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: About how many node entries a chunked search keeps live at once (bounds peak memory).
CHUNK_ENTRIES = 1 << 22
_FIRST_SOURCES = 64
_MAX_SOURCES = 4096


class Search(NamedTuple):
    """One search over rows of start sets: cumulative weights per level and recorded entries."""

    cumulative: IntArray
    """int64 ``[rows, levels]``: weight of the nodes within radius L, per row (zeros unweighted)."""
    last_level: IntArray
    """int64 ``[rows]``: the largest level at which a row still reached new nodes."""
    rows: IntArray
    """int64: the row of each recorded entry,"""
    nodes: IntArray
    """its node,"""
    levels: IntArray
    """and its hop distance from the row's start set."""
    peak_per_row: float
    """Largest live frontier entries per active row over the levels (sizes the next chunk)."""


def bfs(
    adjacency: sp.csr_array,
    starts: sp.csr_array,
    *,
    record: BoolArray | None = None,
    weight: IntArray | None = None,
    stop_at: int | None = None,
    cap: int | None = None,
) -> Search:
    """Level-by-level BFS of every row of ``starts`` at once (one sparse product per level).

    Row ``r`` of ``starts`` marks the start set of search ``r`` on the undirected ``adjacency``.
    ``record`` picks the nodes whose distances are returned, ``weight`` the node weights summed per
    row and level, ``stop_at`` the weight at which a row stops, ``cap`` the largest level searched.
    Why no visited set is needed: docs/hierarchy.md, "Hops"; the parameters: `bfs`.
    """
    import scipy.sparse as sp

    n = adjacency.shape[0]
    s = starts.shape[0]
    frontier = sp.csr_array(starts, dtype=np.int32)
    previous = sp.csr_array((s, n), dtype=np.int32)
    active = np.arange(s, dtype=np.int64)
    weights = np.zeros(n, dtype=np.int64) if weight is None else weight
    cumulative = np.asarray(frontier @ weights, dtype=np.int64)
    history = [cumulative.copy()]
    last_level = np.zeros(s, dtype=np.int64)
    rows: list[IntArray] = []
    nodes: list[IntArray] = []
    levels: list[IntArray] = []

    def keep(found: sp.csr_array, owners: IntArray, level: int) -> None:
        if record is None:
            rows.append(owners)
            nodes.append(found.indices.astype(np.int64))
        else:
            wanted = record[found.indices]
            rows.append(owners[wanted])
            nodes.append(found.indices[wanted].astype(np.int64))
        levels.append(np.full(rows[-1].size, level, dtype=np.int64))

    keep(frontier, np.repeat(active, np.diff(frontier.indptr)), 0)
    level = 0
    peak = 1.0
    while True:
        going = np.diff(frontier.indptr) > 0
        if stop_at is not None:
            going &= cumulative[active] < stop_at
        if not going.all():
            selected = np.flatnonzero(going)
            frontier, previous, active = frontier[selected], previous[selected], active[selected]
        if active.size == 0 or (cap is not None and level >= cap):
            break
        level += 1
        reached = frontier @ adjacency
        reached.data[:] = 1
        seen = frontier + previous
        # reached minus seen: 1 where only reached, 0 where both, -1 where only seen.
        reached = reached - seen
        reached.data[reached.data < 0] = 0
        reached.eliminate_zeros()
        peak = max(peak, (reached.nnz + seen.nnz) / active.size)
        counts = np.diff(reached.indptr)
        last_level[active[counts > 0]] = level
        if weight is not None:
            cumulative[active] += reached @ weights
        history.append(cumulative.copy())
        keep(reached, np.repeat(active, counts), level)
        previous, frontier = frontier, reached
    return Search(
        cumulative=np.stack(history, axis=1),
        last_level=last_level,
        rows=np.concatenate(rows),
        nodes=np.concatenate(nodes),
        levels=np.concatenate(levels),
        peak_per_row=peak,
    )


def bfs_chunks(
    adjacency: sp.csr_array,
    sources: IntArray,
    *,
    record: BoolArray | None = None,
    weight: IntArray | None = None,
    stop_at: int | None = None,
    cap: int | None = None,
) -> Iterator[tuple[int, Search]]:
    """:func:`bfs` from each of ``sources`` alone, over chunks sized to bound the live entries.

    Yields ``(start, search)`` with ``search.rows`` relative to ``start`` (the position in
    ``sources`` of the chunk's first source).
    """
    import scipy.sparse as sp

    n = adjacency.shape[0]
    size = _FIRST_SOURCES
    start = 0
    while start < sources.size:
        chunk = sources[start : start + size]
        rows = np.arange(chunk.size, dtype=np.int64)
        starts = sp.csr_array(
            (np.ones(chunk.size, dtype=np.int32), (rows, chunk)), shape=(chunk.size, n)
        )
        search = bfs(adjacency, starts, record=record, weight=weight, stop_at=stop_at, cap=cap)
        yield start, search
        start += chunk.size
        fit = int(CHUNK_ENTRIES // search.peak_per_row)
        size = max(1, min(4 * size, fit, _MAX_SOURCES))


@dataclass(frozen=True, eq=False)
class BallRadii:
    """Radii and sizes of hop balls, one row per source node and one column per ``k``.

    Attributes
    ----------
    radii : ndarray of int64 of shape (n_sources, n_ks)
        :math:`R_k(t)`, the smallest radius whose ball around ``t`` holds ``>= k`` valid nodes;
        for a short ball, the eccentricity of ``t`` in its component.
    sizes : ndarray of int64 of shape (n_sources, n_ks)
        How many valid nodes the ball of radius :math:`R_k(t)` holds.
    short : ndarray of bool of shape (n_sources, n_ks)
        Fewer than ``k`` valid nodes are reachable from ``t`` at all (the ball then holds every
        reachable valid node); equals ``sizes < k``.
    """

    radii: IntArray
    sizes: IntArray
    short: BoolArray


def _radii(search: Search, ks: tuple[int, ...]) -> BallRadii:
    cumulative = search.cumulative
    n_levels = cumulative.shape[1]
    radii = np.empty((cumulative.shape[0], len(ks)), dtype=np.int64)
    sizes = np.empty_like(radii)
    for j, k in enumerate(ks):
        enough = cumulative >= k
        found = enough.any(axis=1)
        first = np.where(found, np.argmax(enough, axis=1), search.last_level)
        radii[:, j] = first
        sizes[:, j] = cumulative[np.arange(cumulative.shape[0]), np.minimum(first, n_levels - 1)]
    return BallRadii(radii, sizes, sizes < np.asarray(ks, dtype=np.int64))


def ball_search(
    adjacency: sp.csr_array, sources: IntArray, valid: IntArray, ks: tuple[int, ...]
) -> tuple[BallRadii, IntArray, IntArray, IntArray]:
    """Ball radii of distinct ``sources`` and the valid nodes inside each largest ball.

    Returns ``(radii, rows, nodes, levels)``: the radii per source and ``ks``, and for every
    valid node a source's search reached, the source's position, the node and its distance.
    """
    n = adjacency.shape[0]
    weight = np.zeros(n, dtype=np.int64)
    weight[valid] = 1
    record = weight.astype(bool)
    parts: list[tuple[BallRadii, IntArray, IntArray, IntArray]] = []
    for start, search in bfs_chunks(
        adjacency, sources, record=record, weight=weight, stop_at=max(ks)
    ):
        parts.append((_radii(search, ks), search.rows + start, search.nodes, search.levels))
    if not parts:
        empty = np.zeros((0, len(ks)), dtype=np.int64)
        none = np.zeros(0, dtype=np.int64)
        return BallRadii(empty, empty.copy(), empty.astype(bool)), none, none.copy(), none.copy()
    radii = BallRadii(
        np.concatenate([p[0].radii for p in parts]),
        np.concatenate([p[0].sizes for p in parts]),
        np.concatenate([p[0].short for p in parts]),
    )
    return (
        radii,
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
    )


# ------------------------------------------------------------------ hop queries


def _radius(radius: Any, what: str = "radius") -> int | None:
    if radius is not None and (
        isinstance(radius, bool) or not isinstance(radius, int | np.integer) or radius < 0
    ):
        raise HierarchyError(f"{what} must be a non-negative int or None; got {radius!r}")
    return None if radius is None else int(radius)


def _sources(hierarchy: Hierarchy, sources: Any) -> IntArray:
    src = np.atleast_1d(hierarchy._index_array(sources, "sources"))
    if src.ndim != 1:
        raise HierarchyError(f"sources must be 1-D; got shape {src.shape}")
    return src


def hop_distance(
    hierarchy: Hierarchy, sources: Any, radius: int | None = None, *, targets: Any = None
) -> FloatArray:
    """Hop distances from each source to every node or to ``targets``
    (:meth:`Hierarchy.hop_distance`): one chunked search from the distinct sources, only the
    target columns stored."""
    src = _sources(hierarchy, sources)
    cap = _radius(radius)
    if targets is None:
        column_of = np.arange(hierarchy.n_nodes, dtype=np.int64)
        n_columns, target_inverse = hierarchy.n_nodes, None
    else:
        tgt = hierarchy._index_array(targets, "targets")
        if tgt.ndim != 1:
            raise HierarchyError(f"targets must be 1-D; got shape {tgt.shape}")
        unique_targets, target_inverse = np.unique(tgt, return_inverse=True)
        column_of = np.full(hierarchy.n_nodes, -1, dtype=np.int64)
        column_of[unique_targets] = np.arange(unique_targets.size)
        n_columns = unique_targets.size
    unique_sources, source_inverse = np.unique(src, return_inverse=True)
    dense = np.full((unique_sources.size, n_columns), np.inf)
    if dense.size:
        for start, search in bfs_chunks(
            hierarchy.adjacency,
            unique_sources,
            record=None if targets is None else column_of >= 0,
            cap=cap,
        ):
            dense[search.rows + start, column_of[search.nodes]] = search.levels
    if not np.array_equal(unique_sources, src):
        dense = dense[source_inverse]
    return dense if target_inverse is None else dense[:, target_inverse]


def nearest_hops(hierarchy: Hierarchy, sources: Any, radius: int | None = None) -> FloatArray:
    """Hop distance from every node to the nearest source (:meth:`Hierarchy.nearest_hops`): one
    search from all sources at once (a virtual node joined to each), whatever their number."""
    import scipy.sparse as sp  # ~0.2 s to import: loading a spec must not pay it

    src = np.unique(hierarchy._index_array(sources, "sources").reshape(-1))
    cap = _radius(radius)
    dist = np.full(hierarchy.n_nodes, np.inf)
    if src.size:
        starts = sp.csr_array(
            (np.ones(src.size, dtype=np.int32), (np.zeros(src.size, dtype=np.int64), src)),
            shape=(1, hierarchy.n_nodes),
        )
        search = bfs(hierarchy.adjacency, starts, cap=cap)
        dist[search.nodes] = search.levels
    return dist


def nearest_other_hops(hierarchy: Hierarchy, nodes: Any) -> FloatArray:
    """Hop distance from each of the distinct ``nodes`` to the nearest other one
    (:meth:`Hierarchy.nearest_other_hops`): each search stops at the first level reaching
    another."""
    idx = _sources(hierarchy, nodes)
    unique, inverse = np.unique(idx, return_inverse=True)
    if unique.size != idx.size:
        raise HierarchyError("nodes must be distinct")
    radii = ball_search(hierarchy.adjacency, unique, unique, (2,))[0]
    out = np.where(radii.short[:, 0], np.inf, radii.radii[:, 0].astype(np.float64))
    return out[inverse]


def _read_only(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    view = array.view()
    view.flags.writeable = False
    return view


class HopBalls:
    """Hop balls around source nodes, each grown by whole radii until it holds ``k`` valid nodes.

    This is the hCorrectSet of DeViSE (Frome et al. 2013, A.3) when the valid nodes are the valid
    labels. A ball is searched once per source node, the first time a query names it, and kept, so
    that a stream of queries (one per chunk of images) searches each node once. Get one from
    `Hierarchy.hop_balls`, which keeps it with the hierarchy; node arguments are its node indices.
    The radius formula and the attributes: docs/hierarchy.md, `HopBalls`.
    """

    def __init__(self, hierarchy: Hierarchy, valid_nodes: IntArray, ks: tuple[int, ...]) -> None:
        self._hierarchy = hierarchy
        self.valid_nodes = valid_nodes
        self.ks = ks
        self._slot_of = np.full(hierarchy.n_nodes, -1, dtype=np.int64)
        self._radii = np.zeros((0, len(ks)), dtype=np.int64)
        self._sizes = np.zeros((0, len(ks)), dtype=np.int64)
        self._short = np.zeros((0, len(ks)), dtype=bool)
        self._keys = np.zeros(0, dtype=np.int64)  # slot * n_nodes + node, ascending
        self._levels = np.zeros(0, dtype=np.int64)

    @property
    def n_cached(self) -> int:
        """Number of source nodes whose balls are kept."""
        return int(self._radii.shape[0])

    def ensure(self, nodes: npt.ArrayLike) -> None:
        """Search and keep the balls of the ``nodes`` not kept yet."""
        checked = self._hierarchy._index_array(nodes, "nodes").reshape(-1)
        missing = np.unique(checked[self._slot_of[checked] < 0])
        if missing.size == 0:
            return
        radii, rows, ball_nodes, levels = ball_search(
            self._hierarchy.adjacency, missing, self.valid_nodes, self.ks
        )
        base = self.n_cached
        self._slot_of[missing] = base + np.arange(missing.size)
        keys = (rows + base) * self._hierarchy.n_nodes + ball_nodes
        order = np.argsort(keys, kind="stable")
        self._keys = np.concatenate([self._keys, keys[order]])  # new slots sort after old ones
        self._levels = np.concatenate([self._levels, levels[order]])
        self._radii = np.concatenate([self._radii, radii.radii])
        self._sizes = np.concatenate([self._sizes, radii.sizes])
        self._short = np.concatenate([self._short, radii.short])

    def slots(self, nodes: npt.ArrayLike) -> IntArray:
        """The row of each of ``nodes`` in :meth:`table` (searching the new ones first)."""
        checked = self._hierarchy._index_array(nodes, "nodes")
        self.ensure(checked)
        return self._slot_of[checked]

    def table(self) -> BallRadii:
        """The radii of every kept ball, one row per slot (see :meth:`slots`); read-only views."""
        return BallRadii(_read_only(self._radii), _read_only(self._sizes), _read_only(self._short))

    def radii(self, nodes: npt.ArrayLike) -> BallRadii:
        """:class:`BallRadii` of ``nodes`` (1D; repeats allowed)."""
        slots = self.slots(nodes)
        return BallRadii(self._radii[slots], self._sizes[slots], self._short[slots])

    def distances(self, true_nodes: npt.ArrayLike, pred_nodes: npt.ArrayLike) -> IntArray:
        """Hop distance from each source node to the node(s) of the same row of ``pred_nodes``.

        ``pred_nodes`` has shape ``(n,)`` or ``(n, K)``; the result has its shape. Valid nodes
        within the source's largest ball (radius :math:`R_{\\max(ks)}`) get their hop distance;
        every other entry gets a value larger than any radius (``int64`` max).
        """
        slots = self.slots(true_nodes)
        pred = self._hierarchy._index_array(pred_nodes, "pred_nodes")
        if slots.ndim != 1 or pred.ndim not in (1, 2) or pred.shape[0] != slots.size:
            raise HierarchyError(
                "pred_nodes must have shape (n,) or (n, K) with n = "
                f"{slots.size} (one row per true node); got shape {pred.shape}"
            )
        return self.lookup(slots, pred.reshape(slots.size, -1)).reshape(pred.shape)

    def lookup(self, slots: IntArray, pred_nodes: IntArray) -> IntArray:
        """:meth:`distances` for slots ``[n]`` (from :meth:`slots`) and nodes ``[n, K]``."""
        far = np.iinfo(np.int64).max
        if self._keys.size == 0:
            return np.full(pred_nodes.shape, far, dtype=np.int64)
        query = slots[:, None] * self._hierarchy.n_nodes + pred_nodes
        position = np.minimum(np.searchsorted(self._keys, query), self._keys.size - 1)
        found = self._keys[position] == query
        return np.where(found, self._levels[position], far)
