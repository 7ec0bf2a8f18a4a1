r"""Hierarchical metrics over ranked predictions: pure numpy functions, ImageNet-21K scale.

Every function follows validate -> look up -> reduce: inputs go through
:mod:`harness.metrics._validation` (plus the private checks of this module for rankings, node
lists and ``ks``), the hierarchy queries are vectorized over images in row chunks of bounded
size, and the values reduce to means. Options are keyword-only.

Inputs
------
``y_true[i]`` is the candidate column of image i's true class. ``ranked[i, r]`` is the candidate
column that image i ranks at position ``r`` (0 = best); a row holds distinct columns. ``K`` (the
number of columns of ``ranked``) may be smaller than the number of candidates: top-K prediction
files give exactly that. ``candidate_nodes[c]`` is the :class:`~harness.hierarchy.Hierarchy`
node index of candidate column ``c``; distinct columns map to distinct nodes.

Tie policy (rank-based metrics)
-------------------------------
These metrics read ranks, never scores, and take ``ranked`` as given. :func:`ranked_from_scores`
derives it from dense scores by a stable descending sort: equal scores are ranked by the
*smaller column first*. This differs from the flat accuracies of :mod:`harness.metrics.flat`,
where ties count against the true class, so hp@1 equals the flat per-image top-1 accuracy only
when the top score is not tied.

Distances on the hierarchy
--------------------------
The hierarchy is a DAG, never assumed to be a tree.

* Hop distance :math:`d(a, b)`: fewest undirected (hypernym or hyponym) edges between ``a`` and
  ``b`` (DESIGN, "Hops"); used by hp@k.
* LCA height :math:`h(a, b)`: :meth:`~harness.hierarchy.Hierarchy.lca_height`, the minimum height
  over the common ancestors-or-self of ``a`` and ``b`` (height = longest path down to a leaf).
  Two nodes without a common ancestor (below disjoint roots) are treated as meeting at a virtual
  super-root of height :math:`H + 1`, where :math:`H` is the largest height of any root.
* Hierarchical distance :math:`\delta(t, p)` of a prediction ``p`` for a true class ``t``: 0 when
  ``p`` is ``t`` or one of its descendants, otherwise :math:`h(t, p)` (the cost of Deng et al.
  2010). Cost, mistake severity and average hierarchical distance all use it; on a tree whose
  candidates are leaves it is the "height of the LCA" of Bertinetto et al. 2020.

Scale
-----
hp@k needs the radius of each true class's hCorrectSet. They come from a multi-source,
level-by-level BFS of sparse boolean products, once per distinct true node, and are kept in an
:class:`HCorrectCache` shared by every call with the same hierarchy content, valid-label set and
``ks``, so a stream of image chunks computes them once.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from harness.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics._validation import (
    CHUNK_ELEMENTS,
    check_classes,
    check_k,
    check_scores,
    check_targets,
    chunk_rows,
)

__all__ = [
    "HCorrectCache",
    "HCorrectRadii",
    "average_hierarchical_distance_at_k",
    "hcorrect_radii",
    "hierarchical_cost",
    "hierarchical_precision_at_k",
    "hierarchical_retrieval_precision_at_k",
    "hop_distances_capped",
    "mistake_severity",
    "per_class_hierarchical_precision_at_k",
    "prediction_relations",
    "ranked_from_scores",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: Sources expanded together by one BFS: the first chunk holds ``_BFS_FIRST``; each later chunk
#: is sized from the previous one's peak live entries per source so that about
#: ``CHUNK_ELEMENTS`` node entries are live at once, growing at most 4x, up to ``_BFS_SOURCES``.
_BFS_FIRST = 64
_BFS_SOURCES = 4096

#: Relation codes of :func:`prediction_relations` (``per_image``).
RELATIONS = ("correct", "ancestor", "descendant", "unrelated")

# --------------------------------------------------------------------------- hierarchy facts


class _HierarchyFacts:
    """Derived data of one live :class:`Hierarchy` object that the metrics reuse."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self._ref = weakref.ref(hierarchy)

    def _hierarchy(self) -> Hierarchy:
        hierarchy = self._ref()
        assert hierarchy is not None  # the facts are dropped together with their hierarchy
        return hierarchy

    @cached_property
    def content_hash(self) -> str:
        return self._hierarchy().content_hash()

    @cached_property
    def adjacency(self) -> sp.csr_array:
        """Undirected adjacency (hypernym and hyponym edges), int32 csr ``[n, n]``."""
        hierarchy = self._hierarchy()
        parent, child = hierarchy.edges[:, 0], hierarchy.edges[:, 1]
        n = hierarchy.n_nodes
        data = np.ones(2 * parent.size, dtype=np.int32)
        matrix = sp.csr_array(
            (data, (np.concatenate([parent, child]), np.concatenate([child, parent]))),
            shape=(n, n),
        )
        matrix.sum_duplicates()
        matrix.data[:] = 1
        return matrix

    @cached_property
    def root_height(self) -> int:
        """:math:`H`, the largest height of a root."""
        hierarchy = self._hierarchy()
        return int(hierarchy.height[hierarchy.roots].max())


_FACTS: dict[int, _HierarchyFacts] = {}


def _facts(hierarchy: Hierarchy) -> _HierarchyFacts:
    """The memoized facts of ``hierarchy`` (dropped when the object is garbage collected)."""
    key = id(hierarchy)
    facts = _FACTS.get(key)
    if facts is None or facts._ref() is not hierarchy:
        facts = _HierarchyFacts(hierarchy)
        _FACTS[key] = facts
        weakref.finalize(hierarchy, _FACTS.pop, key, None)
    return facts


# --------------------------------------------------------------------------- private checks


def _check_hierarchy(hierarchy: Any) -> Hierarchy:
    if not isinstance(hierarchy, Hierarchy):
        raise MetricError(
            "Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got "
            f"{type(hierarchy).__name__}."
        )
    return hierarchy


def _int_vector(values: Any, name: str, what: str) -> IntArray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise MetricError(
            f"Expected `{name}` to be a 1D integer array of {what}, but got shape {array.shape}."
        )
    if array.size == 0 and array.dtype.kind not in "iu":
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise MetricError(
            f"Expected `{name}` to be a 1D integer array of {what}, but got dtype {array.dtype}."
        )
    return array.astype(np.int64, copy=False)


def _check_nodes(
    values: Any, hierarchy: Hierarchy, name: str, *, distinct: bool, allow_empty: bool
) -> IntArray:
    """A 1D array of node indices of ``hierarchy``; the first bad position is named."""
    nodes = _int_vector(values, name, "hierarchy node indices")
    if nodes.size == 0 and not allow_empty:
        raise MetricError(f"Expected `{name}` to hold at least one node index, but got 0.")
    bad = (nodes < 0) | (nodes >= hierarchy.n_nodes)
    if bad.any():
        position = int(np.argmax(bad))
        raise MetricError(
            f"Expected `{name}` to hold node indices in [0, {hierarchy.n_nodes}), but got "
            f"{name}[{position}] = {int(nodes[position])}. Map ids to indices with "
            "`hierarchy.indices(ids)`."
        )
    if distinct and nodes.size > 1:
        order = np.argsort(nodes, kind="stable")
        repeats = np.flatnonzero(nodes[order][1:] == nodes[order][:-1])
        if repeats.size:
            later = order[repeats + 1]
            position = int(later.min())
            first = int(np.flatnonzero(nodes == nodes[position])[0])
            raise MetricError(
                f"Expected `{name}` to hold distinct node indices, but {name}[{position}] = "
                f"{int(nodes[position])} repeats {name}[{first}]."
            )
    return nodes


def _check_candidate_nodes(candidate_nodes: Any, hierarchy: Hierarchy) -> IntArray:
    if candidate_nodes is None:
        raise MetricError(
            "Expected `candidate_nodes` to give the hierarchy node of every candidate column, "
            "but got None."
        )
    return _check_nodes(
        candidate_nodes, hierarchy, "candidate_nodes", distinct=True, allow_empty=False
    )


def _check_valid_nodes(
    valid_nodes: Any, hierarchy: Hierarchy, candidate_nodes: IntArray | None
) -> IntArray:
    """Sorted valid-label nodes; ``None`` means the candidates' nodes, which must be valid."""
    if valid_nodes is None:
        if candidate_nodes is None:
            raise MetricError("Expected `valid_nodes` to list the valid-label nodes, but got None.")
        return np.sort(candidate_nodes)
    valid = _check_nodes(valid_nodes, hierarchy, "valid_nodes", distinct=True, allow_empty=False)
    valid = np.sort(valid)
    if candidate_nodes is not None:
        inside = np.isin(candidate_nodes, valid)
        if not inside.all():
            column = int(np.argmin(inside))
            raise MetricError(
                "Expected `valid_nodes` to contain every candidate's node (a prediction is "
                f"always a valid label), but got candidate_nodes[{column}] = "
                f"{int(candidate_nodes[column])} outside it ({int((~inside).sum())} "
                "candidate(s) missing). Add the candidates' nodes to `valid_nodes`."
            )
    return valid


def _check_ks(ks: Any, n_candidates: int | None) -> tuple[int, ...]:
    """Distinct ``k`` values; each in ``[1, n_candidates]`` (only ``>= 1`` when None)."""
    items = [ks] if isinstance(ks, int | np.integer) else ks
    if isinstance(items, str) or not isinstance(items, Sequence | np.ndarray):
        raise MetricError(f"Expected `ks` to be a sequence of integers >= 1, but got {ks!r}.")
    values = list(items)
    if not values:
        raise MetricError("Expected `ks` to hold at least one k, but got an empty sequence.")
    checked: list[int] = []
    for position, k in enumerate(values):
        if n_candidates is None:
            if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
                raise MetricError(
                    f"Expected `ks` to hold integers >= 1, but got ks[{position}] = {k!r}."
                )
            value = int(k)
        else:
            value = check_k(k, n_candidates)
        if value in checked:
            raise MetricError(
                f"Expected `ks` to hold distinct values, but ks[{position}] = {value} repeats "
                f"ks[{checked.index(value)}]."
            )
        checked.append(value)
    return tuple(checked)


def _check_ranked(ranked: Any, n_images: int, n_candidates: int) -> IntArray:
    """A 2D ranking: one row per image, K >= 1 distinct candidate columns per row."""
    array = np.asarray(ranked)
    if array.ndim != 2:
        hint = " Use `ranked.reshape(-1, 1)` for top-1 columns." if array.ndim == 1 else ""
        raise MetricError(
            "Expected `ranked` to be a 2D integer array of shape (n_images, K), but got shape "
            f"{array.shape}.{hint}"
        )
    if array.dtype.kind not in "iu":
        raise MetricError(
            f"Expected `ranked` to hold integer candidate columns, but got dtype {array.dtype}. "
            "Derive it from scores with `ranked_from_scores`."
        )
    if array.shape[0] != n_images:
        raise MetricError(
            f"Expected `ranked` to have one row per image in `y_true` ({n_images} images), "
            f"but got {array.shape[0]} rows. Both must follow the frozen test order."
        )
    if array.shape[1] == 0:
        raise MetricError(
            f"Expected `ranked` to hold at least one ranked column, but got shape {array.shape}."
        )
    array = array.astype(np.int64, copy=False)
    bad = (array < 0) | (array >= n_candidates)
    if bad.any():
        row = int(np.argmax(bad.any(axis=1)))
        col = int(np.argmax(bad[row]))
        raise MetricError(
            f"Expected `ranked` to hold candidate columns in [0, {n_candidates}), but row {row} "
            f"holds {int(array[row, col])} (at rank {col})."
        )
    if array.shape[1] > 1:
        starts = chunk_rows(array.shape[0], array.shape[1])
        for start in starts:
            block = np.sort(array[start : start + starts.step], axis=1)
            repeated = (block[:, 1:] == block[:, :-1]).any(axis=1)
            if repeated.any():
                row = start + int(np.argmax(repeated))
                values, counts = np.unique(array[row], return_counts=True)
                raise MetricError(
                    f"Expected `ranked` to hold distinct candidate columns in each row, but row "
                    f"{row} repeats column {int(values[np.argmax(counts > 1)])}."
                )
    return array


def _check_top1(ranked_top1: Any, n_images: int, n_candidates: int) -> IntArray:
    """Top-1 columns: a 1D array, or the first column of a 2D ranking."""
    array = np.asarray(ranked_top1)
    if array.ndim == 2:
        return _check_ranked(array, n_images, n_candidates)[:, 0]
    if array.ndim != 1:
        raise MetricError(
            "Expected `ranked_top1` to be a 1D array of top-1 candidate columns (or a 2D "
            f"ranking), but got shape {array.shape}."
        )
    return _check_ranked(array.reshape(-1, 1), n_images, n_candidates)[:, 0]


def _check_common(
    y_true: Any, hierarchy: Any, candidate_nodes: Any
) -> tuple[Hierarchy, IntArray, IntArray]:
    checked_hierarchy = _check_hierarchy(hierarchy)
    nodes = _check_candidate_nodes(candidate_nodes, checked_hierarchy)
    checked_y = check_targets(y_true, nodes.shape[0])
    return checked_hierarchy, nodes, checked_y


# --------------------------------------------------------------------------- ranking


def ranked_from_scores(scores: npt.ArrayLike, k: int) -> IntArray:
    r"""The top-``k`` candidate columns of each image, best first; ties go to the smaller column.

    Row ``i`` lists the ``k`` columns that come first under the order "higher score first, then
    smaller column first":

    .. math::

        j \prec j' \iff s_{ij} > s_{ij'} \ \text{or}\ (s_{ij} = s_{ij'} \text{ and } j < j')

    Parameters
    ----------
    scores : array-like of float of shape (n_images, n_candidates)
        Finite scores, higher is better.
    k : int
        How many columns to keep, ``1 <= k <= n_candidates``.

    Returns
    -------
    ranked : ndarray of int64 of shape (n_images, k)

    Raises
    ------
    MetricError
        If ``scores`` is malformed (shape, dtype, NaN/inf) or ``k`` is not in
        ``[1, n_candidates]``.

    Notes
    -----
    This is the tie policy of every rank-based metric of this module (module docstring). The
    ``k``-th largest score is found with ``np.partition``; the columns above it are kept, and of
    the columns equal to it the smallest ones (a plain ``np.argpartition`` would pick tied
    columns in an unspecified order); a stable sort then orders the ``k`` columns. Rows are
    processed in chunks of bounded size.

    Examples
    --------
    Columns 1 and 2 tie at 0.9: column 1 comes first. Column 0 and 3 tie at 0.1 for the third
    place: column 0 wins it.

    >>> ranked_from_scores([[0.1, 0.9, 0.9, 0.1]], 3)
    array([[1, 2, 0]])
    """
    checked = check_scores(scores)
    n_images, n_candidates = checked.shape
    checked_k = check_k(k, n_candidates)
    out = np.empty((n_images, checked_k), dtype=np.int64)
    starts = chunk_rows(n_images, n_candidates)
    for start in starts:
        stop = min(start + starts.step, n_images)
        block = np.asarray(checked[start:stop])
        if checked_k < n_candidates:
            threshold = np.partition(block, n_candidates - checked_k, axis=1)[
                :, n_candidates - checked_k
            ]
            above = block > threshold[:, None]
            tied = block == threshold[:, None]
            needed = checked_k - above.sum(axis=1)
            take = above | (tied & (np.cumsum(tied, axis=1) <= needed[:, None]))
            columns = np.nonzero(take)[1].reshape(stop - start, checked_k)
        else:
            columns = np.broadcast_to(np.arange(n_candidates), (stop - start, n_candidates))
        values = np.take_along_axis(block, columns, axis=1)
        order = np.argsort(-values, axis=1, kind="stable")
        out[start:stop] = np.take_along_axis(columns, order, axis=1)
    return out


# --------------------------------------------------------------------------- BFS engine


class _Balls(NamedTuple):
    """One BFS over a chunk of sources: cumulative counts per level and the recorded entries."""

    cumulative: IntArray  # [s, levels]: weighted nodes within radius L, per source
    last_level: IntArray  # [s]: the largest level at which a source still found new nodes
    rows: IntArray  # recorded entries: source position,
    nodes: IntArray  # node,
    levels: IntArray  # and hop distance
    peak_per_source: float  # largest live frontier entries per active source over the levels


def _bfs(
    adjacency: sp.csr_array,
    sources: IntArray,
    *,
    weight: npt.NDArray[np.int64],
    stop_at: int | None,
    cap: int | None,
    record: BoolArray,
) -> _Balls:
    """Level-by-level BFS from every source at once (one sparse product per level).

    A source stops once its ball holds ``stop_at`` weighted nodes, once its frontier is empty
    (its component is exhausted), or at level ``cap``. The frontier of level L+1 is
    ``frontier_L @ A`` minus the frontiers of levels L and L-1: an undirected neighbour of a
    node at distance L is at distance L-1, L or L+1, so no other level needs subtracting.
    Nodes flagged in ``record`` are returned with their distance.
    """
    n = adjacency.shape[0]
    s = sources.size
    positions = np.arange(s, dtype=np.int64)
    ones = np.ones(s, dtype=np.int32)
    frontier = sp.csr_array((ones, (positions, sources)), shape=(s, n))
    previous = sp.csr_array((s, n), dtype=np.int32)
    active = positions
    cumulative = weight[sources].astype(np.int64)
    history = [cumulative.copy()]
    last_level = np.zeros(s, dtype=np.int64)
    keep0 = record[sources]
    rows, nodes, levels = [positions[keep0]], [sources[keep0]], [np.zeros(int(keep0.sum()))]
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
        reached = reached - reached.multiply(seen)
        reached.eliminate_zeros()
        peak = max(peak, (reached.nnz + seen.nnz) / active.size)
        counts = np.diff(reached.indptr)
        last_level[active[counts > 0]] = level
        cumulative[active] += reached @ weight
        history.append(cumulative.copy())
        owner = np.repeat(active, counts)
        wanted = record[reached.indices]
        rows.append(owner[wanted])
        nodes.append(reached.indices[wanted].astype(np.int64))
        levels.append(np.full(int(wanted.sum()), level))
        previous, frontier = frontier, reached
    return _Balls(
        cumulative=np.stack(history, axis=1),
        last_level=last_level,
        rows=np.concatenate(rows).astype(np.int64),
        nodes=np.concatenate(nodes).astype(np.int64),
        levels=np.concatenate(levels).astype(np.int64),
        peak_per_source=peak,
    )


def _bfs_chunks(
    adjacency: sp.csr_array,
    sources: IntArray,
    *,
    weight: npt.NDArray[np.int64],
    stop_at: int | None,
    cap: int | None,
    record: BoolArray,
) -> Iterator[tuple[int, _Balls]]:
    """:func:`_bfs` over chunks of ``sources`` sized to keep the live entries bounded.

    Yields ``(start, balls)`` with ``balls.rows`` relative to ``start``.
    """
    size = _BFS_FIRST
    start = 0
    while start < sources.size:
        chunk = sources[start : start + size]
        balls = _bfs(adjacency, chunk, weight=weight, stop_at=stop_at, cap=cap, record=record)
        yield start, balls
        start += chunk.size
        fit = int(CHUNK_ELEMENTS // balls.peak_per_source)
        size = max(1, min(4 * size, fit, _BFS_SOURCES))


class HCorrectRadii(NamedTuple):
    """Radii and sizes of hCorrectSets, one row per source node and one column per ``k``."""

    radii: IntArray
    """int64 ``[n_sources, len(ks)]``: :math:`R_k(t)`, the smallest radius whose ball holds
    ``>= k`` valid labels; for a short source, its eccentricity in its component."""
    sizes: IntArray
    """int64 ``[n_sources, len(ks)]``: :math:`|\\mathrm{hCorrectSet}_k(t)|`."""
    short: BoolArray
    """bool ``[n_sources, len(ks)]``: fewer than ``k`` valid labels are reachable at all (the set
    is then every reachable valid label); equals ``sizes < k``."""


def _radii_from_balls(balls: _Balls, ks: tuple[int, ...]) -> HCorrectRadii:
    cumulative = balls.cumulative
    n_levels = cumulative.shape[1]
    radii = np.empty((cumulative.shape[0], len(ks)), dtype=np.int64)
    sizes = np.empty_like(radii)
    for j, k in enumerate(ks):
        enough = cumulative >= k
        found = enough.any(axis=1)
        first = np.where(found, np.argmax(enough, axis=1), balls.last_level)
        radii[:, j] = first
        sizes[:, j] = cumulative[np.arange(cumulative.shape[0]), np.minimum(first, n_levels - 1)]
    return HCorrectRadii(radii, sizes, sizes < np.asarray(ks, dtype=np.int64))


def _valid_weight(n_nodes: int, valid: IntArray) -> npt.NDArray[np.int64]:
    weight = np.zeros(n_nodes, dtype=np.int64)
    weight[valid] = 1
    return weight


def hcorrect_radii(
    hierarchy: Hierarchy,
    sources: npt.ArrayLike,
    *,
    valid_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
) -> HCorrectRadii:
    r"""Radius and size of the DeViSE hCorrectSet of each source node, for each ``k``.

    The hCorrectSet of a true label :math:`t` grows by whole radii of undirected hops until it
    holds at least ``k`` valid labels:

    .. math::

        R_k(t) = \min\{R \ge 0 : |\{v \in V : d(t, v) \le R\}| \ge k\}, \qquad
        \mathrm{hCorrectSet}_k(t) = \{v \in V : d(t, v) \le R_k(t)\}

    with :math:`V` the valid labels. Nodes that are not valid are traversed but not counted.

    Parameters
    ----------
    hierarchy : Hierarchy
        The class hierarchy; hops follow its edges in both directions.
    sources : array-like of int of shape (n_sources,)
        Node indices of the true labels (repeats allowed).
    valid_nodes : array-like of int of shape (n_valid,)
        Distinct node indices of the valid labels.
    ks : int or sequence of int
        Distinct set sizes ``k >= 1``.

    Returns
    -------
    radii : HCorrectRadii
        Named tuple ``(radii, sizes, short)`` of arrays of shape ``(n_sources, len(ks))``:
        int64 radii :math:`R_k`, int64 sizes :math:`|\mathrm{hCorrectSet}_k|`, and bool
        ``short`` flags.

    Raises
    ------
    MetricError
        If ``hierarchy`` is not a Hierarchy, ``sources`` or ``valid_nodes`` are not 1D node
        indices in range (or ``valid_nodes`` is empty or repeats a node), or ``ks`` is empty,
        repeats a value or holds a value < 1.

    Notes
    -----
    Guard: when fewer than ``k`` valid labels are reachable from :math:`t` at all, the set is
    every reachable valid label, :math:`R_k(t)` is the eccentricity of :math:`t` in its
    component, and ``short`` is True (then ``sizes < k``). Computed by a multi-source BFS, one
    sparse product per level in chunks of sources, each source stopping once its ball holds
    ``max(ks)`` valid labels; the definition is that of Frome et al. [1]_ (appendix A.3).

    References
    ----------
    .. [1] A. Frome, G. S. Corrado, J. Shlens, S. Bengio, J. Dean, M. Ranzato, T. Mikolov,
       "DeViSE: A Deep Visual-Semantic Embedding Model", NIPS 2013, appendix A.3.

    Examples
    --------
    A tree entity -> {animal, vehicle}, animal -> {dog, cat}, vehicle -> {car}; the valid labels
    are the three leaves. From dog: radius 0 holds {dog} (1 label), radius 1 adds animal (not
    valid), radius 2 adds cat and entity, so 2 labels; radius 3 adds vehicle, radius 4 car: all
    3 labels. So k = 1, 2, 3 give radii 0, 2, 4; k = 4 is short (3 labels reachable, radius =
    eccentricity 4):

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> r = hcorrect_radii(h, [h.index("dog")], valid_nodes=h.indices(["dog", "cat", "car"]),
    ...                    ks=[1, 2, 3, 4])
    >>> r.radii.tolist(), r.sizes.tolist(), r.short.tolist()
    ([[0, 2, 4, 4]], [[1, 2, 3, 3]], [[False, False, False, True]])
    """
    checked_hierarchy = _check_hierarchy(hierarchy)
    checked_sources = _check_nodes(
        sources, checked_hierarchy, "sources", distinct=False, allow_empty=True
    )
    valid = _check_valid_nodes(valid_nodes, checked_hierarchy, None)
    checked_ks = _check_ks(ks, None)
    unique, inverse = np.unique(checked_sources, return_inverse=True)
    radii, sizes, short = _hcorrect_unique(checked_hierarchy, unique, valid, checked_ks)[:3]
    return HCorrectRadii(radii[inverse], sizes[inverse], short[inverse])


def _hcorrect_unique(
    hierarchy: Hierarchy, sources: IntArray, valid: IntArray, ks: tuple[int, ...]
) -> tuple[IntArray, IntArray, BoolArray, IntArray, IntArray, IntArray]:
    """Radii, sizes, short flags, and the ball entries (row, valid node, distance) per source."""
    adjacency = _facts(hierarchy).adjacency
    weight = _valid_weight(hierarchy.n_nodes, valid)
    record = weight.astype(bool)
    parts: list[tuple[IntArray, IntArray, BoolArray, IntArray, IntArray, IntArray]] = []
    for start, balls in _bfs_chunks(
        adjacency, sources, weight=weight, stop_at=max(ks), cap=None, record=record
    ):
        radii, sizes, short = _radii_from_balls(balls, ks)
        parts.append((radii, sizes, short, balls.rows + start, balls.nodes, balls.levels))
    if not parts:
        empty = np.zeros((0, len(ks)), dtype=np.int64)
        none = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.astype(bool), none, none.copy(), none.copy()
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
        np.concatenate([p[4] for p in parts]),
        np.concatenate([p[5] for p in parts]),
    )


def hop_distances_capped(
    hierarchy: Hierarchy, sources: npt.ArrayLike, targets: npt.ArrayLike, *, cap: int
) -> npt.NDArray[np.uint8]:
    r"""Undirected hop distances from ``sources`` to ``targets``, everything beyond ``cap`` as
    ``cap + 1``.

    .. math::

        D_{ij} = \min\big(d(s_i, t_j),\ \mathrm{cap} + 1\big)

    where :math:`d` is the undirected hop distance (:math:`\infty` between components).

    Parameters
    ----------
    hierarchy : Hierarchy
        The class hierarchy.
    sources : array-like of int of shape (n_sources,)
        Node indices to measure from (repeats allowed).
    targets : array-like of int of shape (n_targets,)
        Node indices to measure to (repeats allowed).
    cap : int
        Largest distance computed, ``0 <= cap <= 254``; the BFS stops there.

    Returns
    -------
    distances : ndarray of uint8 of shape (n_sources, n_targets)

    Raises
    ------
    MetricError
        If ``hierarchy`` is not a Hierarchy, ``sources`` or ``targets`` are not 1D node indices
        in range, or ``cap`` is not an integer in ``[0, 254]``.

    Notes
    -----
    A multi-source BFS of sparse products, chunked over sources so that about
    ``CHUNK_ELEMENTS`` node entries are live at once; the output itself is dense.

    Examples
    --------
    On the chain r - a - b plus r - c: from b, a is 1 hop, r 2, c 3 (reported as 3 = cap + 1
    with cap = 2):

    >>> h = Hierarchy(["r", "a", "b", "c"], [("r", "a"), ("a", "b"), ("r", "c")])
    >>> hop_distances_capped(h, [h.index("b")], h.indices(["a", "r", "c", "b"]), cap=2)
    array([[1, 2, 3, 0]], dtype=uint8)
    """
    checked_hierarchy = _check_hierarchy(hierarchy)
    checked_sources = _check_nodes(
        sources, checked_hierarchy, "sources", distinct=False, allow_empty=True
    )
    checked_targets = _check_nodes(
        targets, checked_hierarchy, "targets", distinct=False, allow_empty=True
    )
    if isinstance(cap, bool) or not isinstance(cap, int | np.integer) or not 0 <= cap <= 254:
        raise MetricError(f"Expected `cap` to be an integer in [0, 254], but got {cap!r}.")
    n = checked_hierarchy.n_nodes
    out = np.full((checked_sources.size, checked_targets.size), int(cap) + 1, dtype=np.uint8)
    if out.size == 0:
        return out
    column_of = np.full(n, -1, dtype=np.int64)
    unique_targets, target_inverse = np.unique(checked_targets, return_inverse=True)
    column_of[unique_targets] = np.arange(unique_targets.size)
    record = column_of >= 0
    unique_sources, source_inverse = np.unique(checked_sources, return_inverse=True)
    dense = np.full((unique_sources.size, unique_targets.size), int(cap) + 1, dtype=np.uint8)
    adjacency = _facts(checked_hierarchy).adjacency
    zero = np.zeros(n, dtype=np.int64)
    for start, balls in _bfs_chunks(
        adjacency, unique_sources, weight=zero, stop_at=None, cap=int(cap), record=record
    ):
        dense[balls.rows + start, column_of[balls.nodes]] = balls.levels
    out[:] = dense[source_inverse][:, target_inverse]
    return out


# --------------------------------------------------------------------------- hCorrect cache


def _array_hash(array: IntArray) -> str:
    return (
        "sha256:" + hashlib.sha256(np.ascontiguousarray(array, dtype="<i8").tobytes()).hexdigest()
    )


class HCorrectCache:
    """hCorrectSet radii and balls per true node, computed once and reused across calls.

    One cache serves one (hierarchy content, valid-label set, ``ks``) triple. :meth:`ensure`
    computes the radii of the nodes not seen before (a multi-source BFS over only those) and
    appends them; :meth:`distances` then looks up hop distances from true nodes to predicted
    nodes inside the balls. :meth:`shared` returns the process-wide instance for a triple, so
    that the functional API, called once per chunk of images, reuses earlier work.

    Parameters
    ----------
    hierarchy : Hierarchy
        The class hierarchy.
    valid_nodes : array-like of int of shape (n_valid,)
        Distinct node indices of the valid labels.
    ks : int or sequence of int
        Distinct set sizes ``k >= 1``; stored sorted.

    Attributes
    ----------
    key : tuple of (str, str, tuple of int)
        ``(hierarchy content hash, valid-set hash, sorted ks)``.

    Examples
    --------
    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> cache = HCorrectCache(h, valid_nodes=h.indices(["a", "b"]), ks=[1, 2])
    >>> cache.radii(h.indices(["a"])).radii.tolist(), cache.n_cached
    ([[0, 2]], 1)
    >>> cache.distances(h.indices(["a", "a"]), h.indices(["a", "b"])).tolist()
    [0, 2]
    """

    #: Number of shared caches kept (least recently used dropped first).
    max_shared = 8
    _shared: ClassVar[OrderedDict[tuple[str, str, tuple[int, ...]], HCorrectCache]] = OrderedDict()

    def __init__(
        self, hierarchy: Hierarchy, *, valid_nodes: npt.ArrayLike, ks: Sequence[int] | int
    ) -> None:
        self.hierarchy = _check_hierarchy(hierarchy)
        self.valid_nodes = _check_valid_nodes(valid_nodes, self.hierarchy, None)
        self.ks = tuple(sorted(_check_ks(ks, None)))
        self.key = (_facts(self.hierarchy).content_hash, _array_hash(self.valid_nodes), self.ks)
        n = self.hierarchy.n_nodes
        self._slot_of = np.full(n, -1, dtype=np.int64)
        self._radii = np.zeros((0, len(self.ks)), dtype=np.int64)
        self._sizes = np.zeros((0, len(self.ks)), dtype=np.int64)
        self._short = np.zeros((0, len(self.ks)), dtype=bool)
        self._keys = np.zeros(0, dtype=np.int64)  # slot * n_nodes + node, ascending
        self._levels = np.zeros(0, dtype=np.int64)

    @classmethod
    def shared(
        cls, hierarchy: Hierarchy, *, valid_nodes: npt.ArrayLike, ks: Sequence[int] | int
    ) -> HCorrectCache:
        """The process-wide cache for this triple, created on first use (LRU of ``max_shared``)."""
        checked_hierarchy = _check_hierarchy(hierarchy)
        valid = _check_valid_nodes(valid_nodes, checked_hierarchy, None)
        key = (
            _facts(checked_hierarchy).content_hash,
            _array_hash(valid),
            tuple(sorted(_check_ks(ks, None))),
        )
        cache = cls._shared.get(key)
        if cache is None:
            cache = cls(checked_hierarchy, valid_nodes=valid, ks=key[2])
            cls._shared[key] = cache
            while len(cls._shared) > cls.max_shared:
                cls._shared.popitem(last=False)
        cls._shared.move_to_end(key)
        return cache

    @classmethod
    def clear_shared(cls) -> None:
        """Drop every shared cache (for benchmarks and tests)."""
        cls._shared.clear()

    @property
    def n_cached(self) -> int:
        """Number of true nodes whose radii are cached."""
        return int(self._radii.shape[0])

    def ensure(self, nodes: npt.ArrayLike) -> None:
        """Compute and keep the radii and balls of the ``nodes`` not cached yet."""
        checked = _check_nodes(nodes, self.hierarchy, "nodes", distinct=False, allow_empty=True)
        missing = np.unique(checked[self._slot_of[checked] < 0])
        if missing.size == 0:
            return
        radii, sizes, short, rows, ball_nodes, levels = _hcorrect_unique(
            self.hierarchy, missing, self.valid_nodes, self.ks
        )
        base = self.n_cached
        self._slot_of[missing] = base + np.arange(missing.size)
        keys = (rows + base) * self.hierarchy.n_nodes + ball_nodes
        order = np.argsort(keys, kind="stable")
        self._keys = np.concatenate([self._keys, keys[order]])  # new slots sort after old ones
        self._levels = np.concatenate([self._levels, levels[order]])
        self._radii = np.concatenate([self._radii, radii])
        self._sizes = np.concatenate([self._sizes, sizes])
        self._short = np.concatenate([self._short, short])

    def radii(self, nodes: npt.ArrayLike) -> HCorrectRadii:
        """:class:`HCorrectRadii` of ``nodes`` (columns follow the sorted :attr:`ks`)."""
        checked = _check_nodes(nodes, self.hierarchy, "nodes", distinct=False, allow_empty=True)
        self.ensure(checked)
        slots = self._slot_of[checked]
        return HCorrectRadii(self._radii[slots], self._sizes[slots], self._short[slots])

    def distances(self, true_nodes: npt.ArrayLike, pred_nodes: npt.ArrayLike) -> IntArray:
        """Hop distance from each true node to the predicted node(s) of the same row.

        ``pred_nodes`` has shape ``(n,)`` or ``(n, K)``; the result has its shape. Valid
        predicted nodes within the true node's largest hCorrectSet (radius
        :math:`R_{\\max(ks)}`) get their hop distance; every other entry gets a value larger
        than any radius (``int64`` max).
        """
        true_checked = _check_nodes(
            true_nodes, self.hierarchy, "true_nodes", distinct=False, allow_empty=True
        )
        pred = np.asarray(pred_nodes)
        flat = _check_nodes(
            pred.reshape(-1), self.hierarchy, "pred_nodes", distinct=False, allow_empty=True
        )
        if pred.ndim not in (1, 2) or pred.shape[0] != true_checked.size:
            raise MetricError(
                "Expected `pred_nodes` to have shape (n,) or (n, K) with n = "
                f"{true_checked.size} (one row per true node), but got shape {pred.shape}."
            )
        pred_2d = flat.reshape(true_checked.size, -1)
        self.ensure(true_checked)
        return self._lookup(self._slot_of[true_checked], pred_2d).reshape(pred.shape)

    def _lookup(self, slots: IntArray, pred_nodes: IntArray) -> IntArray:
        """Distances for checked slots ``[n]`` and predicted nodes ``[n, K]``."""
        far = np.iinfo(np.int64).max
        if self._keys.size == 0:
            return np.full(pred_nodes.shape, far, dtype=np.int64)
        query = slots[:, None] * self.hierarchy.n_nodes + pred_nodes
        position = np.minimum(np.searchsorted(self._keys, query), self._keys.size - 1)
        found = self._keys[position] == query
        return np.where(found, self._levels[position], far)


# --------------------------------------------------------------------------- hp@k


def hierarchical_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    valid_nodes: npt.ArrayLike | None = None,
) -> dict[str, Any]:
    r"""Hierarchical precision at k (hp@k) of DeViSE, per image and averaged over images.

    With :math:`\hat{y}_{i,1..k}` the top-k predictions of image i and
    :math:`\mathrm{hCorrectSet}_k(t)` the valid labels within :math:`R_k(t)` undirected hops of
    the true label :math:`t` (see :func:`hcorrect_radii`):

    .. math::

        \mathrm{hp@k}_i = \frac{1}{k} \big|\{\, r \le k : \hat{y}_{i,r} \in
        \mathrm{hCorrectSet}_k(y_i) \}\big|, \qquad
        \mathrm{hp@k} = \frac{1}{n} \sum_{i=1}^{n} \mathrm{hp@k}_i

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked : array-like of int of shape (n_images, K)
        Candidate columns in rank order (best first), distinct within a row.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.
    ks : int or sequence of int
        Distinct ``k`` values, ``1 <= k <= n_candidates``.
    valid_nodes : array-like of int, default=None
        Node indices of the valid labels (those an hCorrectSet counts). None means the
        candidates' nodes. Must contain every candidate's node.

    Returns
    -------
    result : dict
        ``value``: ``{k: float in [0, 1]}``;
        ``mean_hcorrect_size``: ``{k: float}``, the mean over images of
        :math:`|\mathrm{hCorrectSet}_k(y_i)|` (as in DeViSE's Table 1);
        ``per_image``: float64 array ``(n_images, len(ks))``, hp@k of each image (columns in
        ``ks`` order);
        ``short_classes``: ``{k: list of int}``, the true candidate columns (among those in
        ``y_true``) with fewer than ``k`` valid labels reachable at all;
        ``ks`` (list of int), ``n_images`` (int), ``n_ranked`` (int, K).

    Raises
    ------
    MetricError
        If the inputs are malformed (shapes, dtypes, out-of-range or repeated columns or nodes,
        ``ranked`` rows not matching ``y_true``), ``ks`` is empty, repeats a value or holds a
        value outside ``[1, n_candidates]``, or a candidate's node is not a valid label.

    Notes
    -----
    * hp@1 equals the per-image top-1 accuracy of ``ranked`` (:math:`R_1(t) = 0`, since the true
      label is valid).
    * If ``K < k``, hp@k uses the K available predictions and still divides by k: missing
      predictions count as misses.
    * A whole radius is added at once, so an hCorrectSet may hold more than k labels
      (``mean_hcorrect_size`` reports how many); hp@k still counts only the top k predictions.
    * Short sets (fewer than k valid labels reachable, e.g. in a small component) hold every
      reachable valid label and are listed in ``short_classes``.
    * Radii are computed once per distinct true node and kept in the shared
      :class:`HCorrectCache`, so calling this on successive chunks of images is cheap after
      the first.
    * The mean runs over images, as in [1]_: frequent classes weigh more. On class-imbalanced
      splits use :func:`per_class_hierarchical_precision_at_k`, the mean over classes.

    References
    ----------
    .. [1] A. Frome, G. S. Corrado, J. Shlens, S. Bengio, J. Dean, M. Ranzato, T. Mikolov,
       "DeViSE: A Deep Visual-Semantic Embedding Model", NIPS 2013, appendix A.3.

    Examples
    --------
    Tree entity -> {animal, vehicle}, animal -> {dog, cat}, vehicle -> {car, bus}; candidates
    (and valid labels) are the four leaves. For true dog: hCorrectSet_1 = {dog};
    hCorrectSet_2 needs radius 2 = {dog, cat}. Image 0 (dog) ranks cat, dog: hp@1 = 0,
    hp@2 = 2/2. Image 1 (dog) ranks car, dog: hp@1 = 0, hp@2 = 1/2. Means 0 and 0.75:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car", "bus"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car"), ("vehicle", "bus")])
    >>> nodes = h.indices(["dog", "cat", "car", "bus"])
    >>> result = hierarchical_precision_at_k([0, 0], [[1, 0], [2, 0]], hierarchy=h,
    ...                                      candidate_nodes=nodes, ks=[1, 2])
    >>> result["value"], result["per_image"].tolist()
    ({1: 0.0, 2: 0.75}, [[0.0, 1.0], [0.0, 0.5]])
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    checked_ranked = _check_ranked(ranked, checked_y.shape[0], n_candidates)
    checked_ks = _check_ks(ks, n_candidates)
    valid = _check_valid_nodes(valid_nodes, checked_hierarchy, nodes)
    cache = HCorrectCache.shared(checked_hierarchy, valid_nodes=valid, ks=checked_ks)
    cache_column = [cache.ks.index(k) for k in checked_ks]

    n_images, n_ranked = checked_ranked.shape
    true_nodes = nodes[checked_y]
    cache.ensure(np.unique(true_nodes))
    slots = cache._slot_of[true_nodes]
    radii = cache._radii[:, cache_column]
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    starts = chunk_rows(n_images, n_ranked)
    for start in starts:
        stop = min(start + starts.step, n_images)
        block_slots = slots[start:stop]
        distance = cache._lookup(block_slots, nodes[checked_ranked[start:stop]])
        for j, k in enumerate(checked_ks):
            used = min(k, n_ranked)
            inside = distance[:, :used] <= radii[block_slots, j][:, None]
            per_image[start:stop, j] = inside.sum(axis=1) / k

    present_columns = np.unique(checked_y)
    present_slots = cache._slot_of[nodes[present_columns]]
    sizes = cache._sizes[:, cache_column]
    short = cache._short[:, cache_column]
    return {
        "value": {k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        "mean_hcorrect_size": {k: float(sizes[slots, j].mean()) for j, k in enumerate(checked_ks)},
        "per_image": per_image,
        "short_classes": {
            k: present_columns[short[present_slots, j]].tolist() for j, k in enumerate(checked_ks)
        },
        "ks": list(checked_ks),
        "n_images": int(n_images),
        "n_ranked": int(n_ranked),
    }


def per_class_hierarchical_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    classes: npt.ArrayLike,
    valid_nodes: npt.ArrayLike | None = None,
) -> dict[str, Any]:
    r"""hp@k averaged over classes: the mean over ``classes`` with images of their mean hp@k.

    With :math:`I_c` the images of class :math:`c`, :math:`C'` the listed classes that have
    images and :math:`\mathrm{hp@k}_i` as in :func:`hierarchical_precision_at_k`:

    .. math::

        \mathrm{hp@k}^{\mathrm{class}} = \frac{1}{|C'|} \sum_{c \in C'}
            \frac{1}{|I_c|} \sum_{i \in I_c} \mathrm{hp@k}_i

    Every class weighs the same, however many test images it has; the per-image mean of [1]_
    lets frequent classes dominate, which matters on class-imbalanced splits (ImageNet-21K).

    Parameters
    ----------
    y_true, ranked, hierarchy, candidate_nodes, ks, valid_nodes
        As in :func:`hierarchical_precision_at_k`.
    classes : array-like of int of shape (n_classes,)
        Distinct candidate columns to average over. Required; never inferred from ``y_true``.

    Returns
    -------
    result : dict
        ``value``: ``{k: float in [0, 1]}``, the mean over listed classes with images;
        ``per_class``: ``{k: list of float or None}`` aligned with ``classes`` (None without
        images); ``classes`` (list of int); ``excluded_classes`` (list of int, listed but
        without images); ``n_images`` (int, images of listed classes); ``per_image`` (as in
        :func:`hierarchical_precision_at_k`, every image); ``ks`` (list of int).

    Raises
    ------
    MetricError
        As :func:`hierarchical_precision_at_k`, and if ``classes`` is malformed or none of its
        classes has a test image.

    References
    ----------
    .. [1] A. Frome et al., "DeViSE: A Deep Visual-Semantic Embedding Model", NIPS 2013, A.3.

    Examples
    --------
    The tree of :func:`hierarchical_precision_at_k`. Two dog images rank (cat, dog) and (cat,
    dog): hp@2 = 1 each; one car image ranks (dog, cat): hp@2 = 0. Per image the mean is
    2/3; per class (dog 1, car 0) it is 1/2:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car", "bus"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car"), ("vehicle", "bus")])
    >>> nodes = h.indices(["dog", "cat", "car", "bus"])
    >>> ranked = [[1, 0], [1, 0], [0, 1]]
    >>> result = per_class_hierarchical_precision_at_k(
    ...     [0, 0, 2], ranked, hierarchy=h, candidate_nodes=nodes, ks=[2], classes=[0, 1, 2, 3])
    >>> result["value"], result["per_class"][2], result["excluded_classes"]
    ({2: 0.5}, [1.0, None, 0.0, None], [1, 3])
    """
    out = hierarchical_precision_at_k(
        y_true,
        ranked,
        hierarchy=hierarchy,
        candidate_nodes=candidate_nodes,
        ks=ks,
        valid_nodes=valid_nodes,
    )
    n_candidates = np.asarray(candidate_nodes).shape[0]
    checked_classes = check_classes(classes, n_candidates)
    checked_y = np.asarray(y_true, dtype=np.int64)
    totals = np.bincount(checked_y, minlength=n_candidates)[checked_classes]
    present = totals > 0
    if not present.any():
        raise MetricError(
            "Expected at least one test image whose true class is among `classes` "
            f"({checked_classes.shape[0]} classes), but none of the {checked_y.shape[0]} images "
            "is. The mean of per-class hp@k is undefined; check `classes` and `y_true`."
        )
    per_image = out["per_image"]
    value: dict[int, float] = {}
    per_class: dict[int, list[float | None]] = {}
    for j, k in enumerate(out["ks"]):
        sums = np.bincount(checked_y, weights=per_image[:, j], minlength=n_candidates)
        means = sums[checked_classes][present] / totals[present]
        listed: list[float | None] = [None] * checked_classes.shape[0]
        for position, mean in zip(np.flatnonzero(present).tolist(), means.tolist(), strict=True):
            listed[position] = float(mean)
        value[k] = float(np.mean(means))
        per_class[k] = listed
    return {
        "value": value,
        "per_class": per_class,
        "classes": checked_classes.tolist(),
        "excluded_classes": checked_classes[~present].tolist(),
        "n_images": int(totals.sum()),
        "per_image": per_image,
        "ks": out["ks"],
    }


# --------------------------------------------------------------------------- LCA distances


def _lca_distance(hierarchy: Hierarchy, a: IntArray, b: IntArray) -> IntArray:
    """LCA height of node pairs, ``H + 1`` where they share no ancestor (virtual super-root)."""
    height = hierarchy.lca_height(a, b)
    return np.where(height < 0, _facts(hierarchy).root_height + 1, height)


def _hierarchical_distance(hierarchy: Hierarchy, true: IntArray, pred: IntArray) -> IntArray:
    """Deng's cost: 0 if ``pred`` is ``true`` or below it, else the LCA distance."""
    below = hierarchy.is_ancestor_or_self(true, pred)
    return np.where(below, 0, _lca_distance(hierarchy, true, pred))


def _top1_distances(
    y_true: IntArray, top1: IntArray, hierarchy: Hierarchy, nodes: IntArray
) -> IntArray:
    out = np.empty(y_true.shape[0], dtype=np.int64)
    starts = chunk_rows(y_true.shape[0], 64)  # ~64 ancestor entries per pair at most, typically
    for start in starts:
        stop = min(start + starts.step, y_true.shape[0])
        out[start:stop] = _hierarchical_distance(
            hierarchy, nodes[y_true[start:stop]], nodes[top1[start:stop]]
        )
    return out


def hierarchical_cost(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    classes: npt.ArrayLike,
) -> dict[str, Any]:
    r"""Mean hierarchical cost of the top-1 predictions (Deng et al. 2010); lower is better.

    .. math::

        \mathrm{cost}(p, t) = \begin{cases}
            0 & \text{if } p = t \text{ or } p \text{ is a descendant of } t \\
            h(\mathrm{LCA}(p, t)) & \text{otherwise}
        \end{cases}, \qquad
        \mathrm{cost} = \frac{1}{|C'|} \sum_{c \in C'} \frac{1}{|I_c|}
            \sum_{i \in I_c} \mathrm{cost}(\hat{y}_i, c)

    with :math:`h` the height (longest path down to a leaf), :math:`I_c` the images of class
    :math:`c` and :math:`C'` the listed classes that have images.

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked_top1 : array-like of int of shape (n_images,) or (n_images, K)
        Top-1 candidate column of each image, or a ranking whose first column is used.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.
    classes : array-like of int of shape (n_classes,)
        Distinct candidate columns to average over. Required; never inferred from ``y_true``.

    Returns
    -------
    result : dict
        ``value`` (float >= 0): mean over listed classes with images of their mean cost;
        ``per_class`` (list of float or None, aligned with ``classes``; None without images);
        ``classes`` (list of int); ``excluded_classes`` (list of int, listed but without
        images); ``n_images`` (int, images of listed classes); ``per_image`` (int64 array
        ``(n_images,)``, the cost of every image).

    Raises
    ------
    MetricError
        If the inputs are malformed, or no listed class has a test image.

    Notes
    -----
    In a DAG, :math:`h(\mathrm{LCA})` is the minimum height over the common ancestors
    (:meth:`~harness.hierarchy.Hierarchy.lca_height`). Two nodes without a common ancestor cost
    :math:`H + 1` (a virtual super-root above the highest root, height :math:`H`). Predicting an
    ancestor :math:`a` of the true class costs :math:`h(a)`. On a tree whose candidates are
    leaves, the cost is 0 exactly for correct predictions and at least 1 otherwise. Defined in
    [1]_.

    References
    ----------
    .. [1] J. Deng, A. C. Berg, K. Li, L. Fei-Fei, "What does classifying more than 10,000
       image categories tell us?", ECCV 2010.

    Examples
    --------
    Tree entity -> {animal, vehicle}, animal -> {dog, cat}, vehicle -> {car}; heights: leaves 0,
    animal and vehicle 1, entity 2. Class dog: image 0 predicted dog (0), image 1 cat (LCA
    animal: 1) -> 1/2. Class car: image 2 predicted dog (LCA entity: 2) -> 2. Class cat has no
    image. Mean (0.5 + 2) / 2 = 1.25:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> result = hierarchical_cost([0, 0, 2], [0, 1, 0], hierarchy=h, candidate_nodes=nodes,
    ...                            classes=[0, 1, 2])
    >>> result["value"], result["per_class"], result["excluded_classes"]
    (1.25, [0.5, None, 2.0], [1])
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    top1 = _check_top1(ranked_top1, checked_y.shape[0], n_candidates)
    checked_classes = check_classes(classes, n_candidates)
    cost = _top1_distances(checked_y, top1, checked_hierarchy, nodes)
    sums = np.bincount(checked_y, weights=cost, minlength=n_candidates)
    totals = np.bincount(checked_y, minlength=n_candidates)
    class_totals = totals[checked_classes]
    present = class_totals > 0
    if not present.any():
        raise MetricError(
            "Expected at least one test image whose true class is among `classes` "
            f"({checked_classes.shape[0]} classes), but none of the {checked_y.shape[0]} images "
            "is. The mean of per-class costs is undefined; check `classes` and `y_true`."
        )
    means = sums[checked_classes][present] / class_totals[present]
    per_class: list[float | None] = [None] * checked_classes.shape[0]
    for position, mean in zip(np.flatnonzero(present).tolist(), means.tolist(), strict=True):
        per_class[position] = float(mean)
    return {
        "value": float(np.mean(means)),
        "per_class": per_class,
        "classes": checked_classes.tolist(),
        "excluded_classes": checked_classes[~present].tolist(),
        "n_images": int(class_totals.sum()),
        "per_image": cost,
    }


def mistake_severity(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> dict[str, Any]:
    r"""Mean hierarchical distance of the top-1 mistakes (Bertinetto et al. 2020); lower is better.

    .. math::

        M = \{i : \hat{y}_i \ne y_i\}, \qquad
        \mathrm{severity} = \frac{1}{|M|} \sum_{i \in M} \delta(y_i, \hat{y}_i)

    with :math:`\delta` the hierarchical distance of the module docstring (the cost of
    :func:`hierarchical_cost`: LCA height, 0 for a descendant of the true class).

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked_top1 : array-like of int of shape (n_images,) or (n_images, K)
        Top-1 candidate column of each image, or a ranking whose first column is used.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.

    Returns
    -------
    result : dict
        ``value`` (float >= 0, or None when there is no mistake: the mean is undefined);
        ``n_mistakes`` (int); ``n_images`` (int); ``per_image`` (int64 array ``(n_images,)``,
        :math:`\delta` of every image's top-1, 0 where correct); ``mistakes`` (bool array
        ``(n_images,)``).

    Raises
    ------
    MetricError
        If the inputs are malformed.

    Notes
    -----
    A mistake is any top-1 prediction other than the true class; a prediction below the true
    class is a mistake of distance 0. Averaged over images (as in [1]_), not per class.

    References
    ----------
    .. [1] L. Bertinetto, R. Mueller, K. Tertikas, S. Samangooei, N. A. Lord, "Making Better
       Mistakes: Leveraging Class Hierarchies with Deep Networks", CVPR 2020.

    Examples
    --------
    Same tree as :func:`hierarchical_cost`: image 0 correct (not a mistake), image 1 dog ->
    cat (1), image 2 car -> dog (2): severity (1 + 2) / 2 = 1.5:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> result = mistake_severity([0, 0, 2], [0, 1, 0], hierarchy=h, candidate_nodes=nodes)
    >>> result["value"], result["n_mistakes"], result["per_image"].tolist()
    (1.5, 2, [0, 1, 2])
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    top1 = _check_top1(ranked_top1, checked_y.shape[0], nodes.shape[0])
    distance = _top1_distances(checked_y, top1, checked_hierarchy, nodes)
    mistakes = top1 != checked_y
    n_mistakes = int(mistakes.sum())
    return {
        "value": float(distance[mistakes].mean()) if n_mistakes else None,
        "n_mistakes": n_mistakes,
        "n_images": int(checked_y.shape[0]),
        "per_image": distance,
        "mistakes": mistakes,
    }


def average_hierarchical_distance_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
) -> dict[str, Any]:
    r"""Average hierarchical distance of the top-k predictions (Bertinetto et al. 2020).

    .. math::

        \mathrm{AHD@k}_i = \frac{1}{k} \sum_{r=1}^{k} \delta(y_i, \hat{y}_{i,r}), \qquad
        \mathrm{AHD@k} = \frac{1}{n} \sum_{i=1}^{n} \mathrm{AHD@k}_i

    with :math:`\delta` the hierarchical distance of the module docstring. Lower is better.

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked : array-like of int of shape (n_images, K)
        Candidate columns in rank order (best first), distinct within a row.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.
    ks : int or sequence of int
        Distinct ``k`` values, ``1 <= k <= K`` (the distances of missing predictions are
        unknown, so ``k`` may not exceed the ranked columns).

    Returns
    -------
    result : dict
        ``value``: ``{k: float >= 0}``; ``per_image``: float64 array ``(n_images, len(ks))``;
        ``ks`` (list of int); ``n_images`` (int).

    Raises
    ------
    MetricError
        If the inputs are malformed or a ``k`` is outside ``[1, K]``.

    Notes
    -----
    The correct prediction, when among the top k, counts with distance 0, as in [1]_.

    References
    ----------
    .. [1] L. Bertinetto, R. Mueller, K. Tertikas, S. Samangooei, N. A. Lord, "Making Better
       Mistakes: Leveraging Class Hierarchies with Deep Networks", CVPR 2020.

    Examples
    --------
    Same tree as :func:`hierarchical_cost`: true dog ranked dog, cat, car: distances 0, 1, 2,
    so AHD@1 = 0, AHD@2 = 0.5, AHD@3 = 1:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> average_hierarchical_distance_at_k([0], [[0, 1, 2]], hierarchy=h,
    ...                                    candidate_nodes=nodes, ks=[1, 2, 3])["value"]
    {1: 0.0, 2: 0.5, 3: 1.0}
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    checked_ranked = _check_ranked(ranked, checked_y.shape[0], nodes.shape[0])
    n_images, n_ranked = checked_ranked.shape
    checked_ks = _check_ranked_ks(ks, n_ranked)
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    used = max(checked_ks)
    starts = chunk_rows(n_images, 64 * used)
    for start in starts:
        stop = min(start + starts.step, n_images)
        true = np.repeat(nodes[checked_y[start:stop]], used)
        pred = nodes[checked_ranked[start:stop, :used]].reshape(-1)
        distance = _hierarchical_distance(checked_hierarchy, true, pred).reshape(-1, used)
        cumulative = np.cumsum(distance, axis=1)
        for j, k in enumerate(checked_ks):
            per_image[start:stop, j] = cumulative[:, k - 1] / k
    return {
        "value": {k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        "per_image": per_image,
        "ks": list(checked_ks),
        "n_images": int(n_images),
    }


def _check_ranked_ks(ks: Any, n_ranked: int) -> tuple[int, ...]:
    checked = _check_ks(ks, None)
    for position, k in enumerate(checked):
        if k > n_ranked:
            raise MetricError(
                f"Expected `ks` to be at most the number of ranked columns K ({n_ranked}), but "
                f"got ks[{position}] = {k}. Rank at least {k} candidates per image."
            )
    return checked


# --------------------------------------------------------------------------- retrieval


def _similarity(distance: npt.NDArray[Any], root_height: int) -> FloatArray:
    """Deng's similarity :math:`1 - d / H` of LCA distances, clipped to [0, 1] (H = 0 -> 1)."""
    return np.clip(1.0 - distance / float(max(root_height, 1)), 0.0, 1.0)


def _ideal_similarity_sums(
    hierarchy: Hierarchy, sources: IntArray, candidate_nodes: IntArray, ks: tuple[int, ...]
) -> FloatArray:
    """Largest sum of similarities to each source over any ``k`` candidates, ``[m, len(ks)]``.

    :math:`N(h)`, the number of candidates whose LCA height with the source is at most ``h``,
    is the size of the union of the candidate sets below the source's ancestors of height
    ``<= h`` (a union, since a candidate may hang below several of them in a DAG): one sparse
    product per height level, over the sources that still have fewer than ``max(ks)``
    candidates. The ``N(h) - N(h - 1)`` candidates first reached at height ``h`` have
    similarity :math:`1 - h / H`, and the best ``k`` are taken in that order. Candidates sharing
    no ancestor with the source add 0. Row groups are sized so that about ``CHUNK_ELEMENTS``
    product entries are live at once.
    """
    m = sources.size
    root_height = _facts(hierarchy).root_height
    ancestors = hierarchy.ancestor_matrix
    below = sp.csr_array(ancestors[candidate_nodes].T.astype(np.int32))  # [n, C]
    below_counts = np.diff(below.indptr)
    rows = ancestors[sources]
    owner = np.repeat(np.arange(m, dtype=np.int64), np.diff(rows.indptr))
    nodes = rows.indices.astype(np.int64)
    heights = hierarchy.height[nodes]
    k_values = np.asarray(ks, dtype=np.int64)
    ideal = np.zeros((m, len(ks)), dtype=np.float64)
    found = np.zeros(m, dtype=np.int64)
    for h in np.unique(heights):
        active = np.flatnonzero(found < k_values.max())
        if active.size == 0:
            break
        selected = (found[owner] < k_values.max()) & (heights <= h)
        estimate = np.bincount(owner[selected], weights=below_counts[nodes[selected]], minlength=m)[
            active
        ]
        # Contiguous groups of active sources whose estimated product entries fit the budget.
        cumulative = np.cumsum(estimate)
        counts = np.zeros(active.size, dtype=np.int64)
        start = 0
        while start < active.size:
            done = cumulative[start - 1] if start else 0.0
            stop = int(np.searchsorted(cumulative, done + CHUNK_ELEMENTS, side="right"))
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
        gain = _similarity(np.asarray(h), root_height)
        before = np.minimum(found[active][:, None], k_values)
        after = np.minimum(counts[:, None], k_values)
        ideal[active] += (after - before) * gain
        found[active] = counts
    return ideal


def hierarchical_retrieval_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
) -> dict[str, Any]:
    r"""Hierarchical precision@k of a ranking (Deng, Berg, Fei-Fei 2011), per image, averaged.

    With the semantic similarity :math:`S(i, j) = 1 - h(\mathrm{LCA}(i, j)) / H` and
    :math:`H` the largest height of a root:

    .. math::

        \mathrm{hPrec@k}_i = \frac{\sum_{r=1}^{k} S(y_i, \hat{y}_{i,r})}
            {\max_{A \subseteq \mathcal{C},\, |A| = k} \sum_{c \in A} S(y_i, c)}, \qquad
        \mathrm{hPrec@k} = \frac{1}{n} \sum_{i=1}^{n} \mathrm{hPrec@k}_i

    The denominator is the best any ranking can reach: the sum of the k largest similarities
    to :math:`y_i` over all candidates :math:`\mathcal{C}`.

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked : array-like of int of shape (n_images, K)
        Candidate columns in rank order (best first), distinct within a row.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.
    ks : int or sequence of int
        Distinct ``k`` values, ``1 <= k <= n_candidates``.

    Returns
    -------
    result : dict
        ``value``: ``{k: float in [0, 1]}``; ``per_image``: float64 array
        ``(n_images, len(ks))``; ``ks`` (list of int); ``n_images`` (int); ``root_height``
        (int, :math:`H`).

    Raises
    ------
    MetricError
        If the inputs are malformed or a ``k`` is outside ``[1, n_candidates]``.

    Notes
    -----
    * :math:`h(\mathrm{LCA})` is the minimum height over common ancestors-or-self (a DAG). With
      several roots, :math:`H` is the largest root height; pairs without a common ancestor get
      similarity 0. :math:`S` is clipped to [0, 1], and with :math:`H = 0` (no edges)
      :math:`S(i, j) = [i = j]`.
    * If ``K < k``, the missing predictions add 0 similarity.
    * If every candidate has similarity 0 to the true class (possible only when it is the
      highest root), every ranking is ideal and the image scores 1.
    * The ideal sums are computed once per distinct true class without any dense
      ``classes x candidates`` matrix: for each height h, one sparse product counts the
      candidates whose LCA with the class has height at most h, until ``max(ks)`` are found.

    References
    ----------
    .. [1] J. Deng, A. C. Berg, L. Fei-Fei, "Hierarchical semantic indexing for large scale
       image retrieval", CVPR 2011; J. Deng, PhD thesis, Princeton University, 2012, ch. 5.

    Examples
    --------
    Tree entity -> {animal, vehicle}, animal -> {dog, cat}, vehicle -> {car}; H = 2.
    S(dog, dog) = 1, S(dog, cat) = 1 - 1/2 = 0.5, S(dog, car) = 1 - 2/2 = 0. True dog ranked
    car, cat: at k = 1, 0 / 1 = 0; at k = 2, (0 + 0.5) / (1 + 0.5) = 1/3:

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> result = hierarchical_retrieval_precision_at_k([0], [[2, 1]], hierarchy=h,
    ...                                                candidate_nodes=nodes, ks=[1, 2])
    >>> {k: round(v, 6) for k, v in result["value"].items()}
    {1: 0.0, 2: 0.333333}
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    checked_ranked = _check_ranked(ranked, checked_y.shape[0], n_candidates)
    checked_ks = _check_ks(ks, n_candidates)
    n_images, n_ranked = checked_ranked.shape
    root_height = _facts(checked_hierarchy).root_height
    sources, inverse = np.unique(nodes[checked_y], return_inverse=True)
    ideal = _ideal_similarity_sums(checked_hierarchy, sources, nodes, checked_ks)
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    used = min(max(checked_ks), n_ranked)
    starts = chunk_rows(n_images, 64 * used)
    for start in starts:
        stop = min(start + starts.step, n_images)
        true = np.repeat(nodes[checked_y[start:stop]], used)
        pred = nodes[checked_ranked[start:stop, :used]].reshape(-1)
        gained = _similarity(_lca_distance(checked_hierarchy, true, pred), root_height)
        cumulative = np.cumsum(gained.reshape(-1, used), axis=1)
        for j, k in enumerate(checked_ks):
            numerator = cumulative[:, min(k, used) - 1]
            denominator = ideal[inverse[start:stop], j]
            safe = np.where(denominator > 0, denominator, 1.0)
            per_image[start:stop, j] = np.where(
                denominator > 0, np.minimum(numerator / safe, 1.0), 1.0
            )
    return {
        "value": {k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        "per_image": per_image,
        "ks": list(checked_ks),
        "n_images": int(n_images),
        "root_height": int(root_height),
    }


# --------------------------------------------------------------------------- relations


def prediction_relations(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> dict[str, Any]:
    r"""Shares of top-1 predictions that are correct, an ancestor, a descendant, or unrelated.

    .. math::

        \mathrm{rel}_i = \begin{cases}
            \text{correct} & \hat{y}_i = y_i \\
            \text{ancestor} & \hat{y}_i \text{ is a proper ancestor of } y_i \\
            \text{descendant} & \hat{y}_i \text{ is a proper descendant of } y_i \\
            \text{unrelated} & \text{otherwise}
        \end{cases}

    and the interval of "semantically correct" accuracy
    :math:`[\,p_{\text{correct}},\ p_{\text{correct}} + p_{\text{ancestor}} +
    p_{\text{descendant}}\,]`.

    Parameters
    ----------
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    ranked_top1 : array-like of int of shape (n_images,) or (n_images, K)
        Top-1 candidate column of each image, or a ranking whose first column is used.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Distinct hierarchy node of each candidate column.

    Returns
    -------
    result : dict
        ``correct``, ``ancestor``, ``descendant``, ``unrelated``: shares (floats in [0, 1]
        summing to 1); ``counts``: the same as ints; ``semantic_accuracy_lower`` (the correct
        share: only the exact class counts) and ``semantic_accuracy_upper`` (correct + ancestor
        + descendant: any prediction on the true class's line of descent counts);
        ``n_images`` (int); ``per_image`` (int8 array ``(n_images,)``: 0 correct, 1 ancestor,
        2 descendant, 3 unrelated).

    Raises
    ------
    MetricError
        If the inputs are malformed.

    Notes
    -----
    Ancestry follows every path of the DAG (:meth:`~harness.hierarchy.Hierarchy.
    is_ancestor_or_self`). Hascoet et al. [1]_ show that on generic ImageNet classes many
    "errors" are hypernyms or hyponyms of the label, so plain accuracy lies between the two
    bounds' meanings; both bounds are reported.

    References
    ----------
    .. [1] T. Hascoet, Y. Ariki, T. Takiguchi, "On Zero-Shot Recognition of Generic Objects",
       CVPR 2019.

    Examples
    --------
    Chain animal -> dog -> puppy plus cat under animal. True dog predicted dog (correct),
    animal (ancestor), puppy (descendant), cat (unrelated): a quarter each, bounds 0.25 and
    0.75:

    >>> h = Hierarchy(["animal", "dog", "puppy", "cat"],
    ...               [("animal", "dog"), ("dog", "puppy"), ("animal", "cat")])
    >>> nodes = h.indices(["dog", "animal", "puppy", "cat"])
    >>> result = prediction_relations([0, 0, 0, 0], [0, 1, 2, 3], hierarchy=h,
    ...                               candidate_nodes=nodes)
    >>> result["counts"], result["semantic_accuracy_lower"], result["semantic_accuracy_upper"]
    ({'correct': 1, 'ancestor': 1, 'descendant': 1, 'unrelated': 1}, 0.25, 0.75)
    """
    checked_hierarchy, nodes, checked_y = _check_common(y_true, hierarchy, candidate_nodes)
    top1 = _check_top1(ranked_top1, checked_y.shape[0], nodes.shape[0])
    n_images = checked_y.shape[0]
    codes = np.full(n_images, 3, dtype=np.int8)
    starts = chunk_rows(n_images, 8)
    for start in starts:
        stop = min(start + starts.step, n_images)
        true, pred = nodes[checked_y[start:stop]], nodes[top1[start:stop]]
        block = codes[start:stop]
        block[checked_hierarchy.is_ancestor_or_self(true, pred)] = 2
        block[checked_hierarchy.is_ancestor_or_self(pred, true)] = 1
        block[true == pred] = 0
    counts = np.bincount(codes, minlength=4)
    shares = counts / n_images
    return {
        **{name: float(shares[code]) for code, name in enumerate(RELATIONS)},
        "counts": {name: int(counts[code]) for code, name in enumerate(RELATIONS)},
        "semantic_accuracy_lower": float(shares[0]),
        "semantic_accuracy_upper": float(counts[:3].sum() / n_images),
        "n_images": int(n_images),
        "per_image": codes,
    }
