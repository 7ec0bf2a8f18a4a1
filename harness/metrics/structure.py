r"""Split diagnostics: how a benchmark's class splits sit in its hierarchy.

These functions describe a benchmark, not a submission: how close the test classes are to the
training classes compared with each other (:func:`structural_ratio`), whether a split holds
classes that are not mutually exclusive (:func:`mutual_exclusivity_violations`), and how large
each split is (:func:`split_sizes`). Hascoet et al. (CVPR 2019) show that on ImageNet-21K
benchmarks such structure -- test classes that are near-duplicates, parents or children of
training classes, or of each other -- explains much of the reported accuracy; their GOZ
benchmark is built to control it.

Distances are hops: undirected hypernym/hyponym edges of the frozen hierarchy (DESIGN
"Conventions"), so a class and its parent are 1 apart, two siblings 2 apart, whatever the
number of parents a node has. Nodes are given as hierarchy node *indices*
(:meth:`harness.hierarchy.Hierarchy.indices` turns ids into indices).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse.csgraph import dijkstra

from harness.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics._validation import _first_out_of_range, _integer_array

__all__ = ["mutual_exclusivity_violations", "split_sizes", "structural_ratio"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: Split names of :func:`split_sizes`, in table order.
SPLITS = ("train", "val", "test_seen", "test_unseen")


def _check_hierarchy(hierarchy: Any) -> Hierarchy:
    if not isinstance(hierarchy, Hierarchy):
        raise MetricError(
            f"Expected `hierarchy` to be a Hierarchy, but got {type(hierarchy).__name__}."
        )
    return hierarchy


def _distinct(array: IntArray, name: str) -> None:
    """Raise naming the first repeated entry of ``array``."""
    order = np.argsort(array, kind="stable")
    repeat = np.flatnonzero(array[order][1:] == array[order][:-1])
    if repeat.size:
        first, again = sorted((int(order[repeat[0]]), int(order[repeat[0] + 1])))
        raise MetricError(
            f"Expected `{name}` to hold distinct entries, but {name}[{again}] = "
            f"{int(array[again])} repeats {name}[{first}]."
        )


def _check_nodes(values: Any, name: str, n_nodes: int, *, allow_empty: bool = False) -> IntArray:
    """Distinct hierarchy node indices as a 1D int64 array."""
    array = _integer_array(values, name, "hierarchy node indices")
    if array.size == 0 and not allow_empty:
        raise MetricError(f"Expected `{name}` to hold at least one node, but got 0.")
    _first_out_of_range(array, n_nodes, name, "hierarchy node indices")
    _distinct(array, name)
    return array


def _nearest_source(
    hierarchy: Hierarchy, sources: IntArray
) -> tuple[FloatArray, npt.NDArray[np.int32]]:
    """Hop distance from the nearest of ``sources`` to every node, and which source that is.

    One multi-source breadth-first search; ``inf`` and ``-9999`` where no source is reachable.
    """
    dist, _, nearest = dijkstra(
        hierarchy._child_graph(),
        directed=False,
        indices=sources,
        unweighted=True,
        min_only=True,
        return_predecessors=True,
    )
    return np.asarray(dist, dtype=np.float64), np.asarray(nearest)


def _nearest_other(hierarchy: Hierarchy, sources: IntArray) -> FloatArray:
    """For each source, the hop distance to the nearest *other* source (``inf`` if none).

    Voronoi argument: label every node v with its nearest source sigma(v), at distance delta(v)
    (one multi-source search). For source ``s`` the answer is the minimum of
    delta(u) + 1 + delta(v) over edges (u, v), both orientations, with sigma(u) = s != sigma(v).
    Each such term is the length of a walk from ``s`` to another source, so it is
    at least the answer; and along a shortest path from ``s`` to its nearest other source
    ``t``, the first edge leaving ``s``'s region gives a term of at most that path's length.
    Ties between equidistant sources may be labelled either way without changing the result.
    """
    dist, nearest = _nearest_source(hierarchy, sources)
    best = np.full(hierarchy.n_nodes, np.inf)
    edges = hierarchy.edges
    for u, v in ((edges[:, 0], edges[:, 1]), (edges[:, 1], edges[:, 0])):
        cross = (nearest[u] >= 0) & (nearest[v] >= 0) & (nearest[u] != nearest[v])
        np.minimum.at(best, nearest[u][cross], dist[u][cross] + 1.0 + dist[v][cross])
    result: FloatArray = best[sources]
    return result


def structural_ratio(
    hierarchy: Hierarchy, train_nodes: npt.ArrayLike, test_nodes: npt.ArrayLike
) -> dict[str, Any]:
    r"""How close test classes are to training classes, relative to each other.

    With :math:`d` the undirected hop distance in the hierarchy, :math:`\mathcal{T}_r` the
    training and :math:`\mathcal{T}_e` the test classes:

    .. math::

        R = \frac{1}{|\mathcal{T}'_e|} \sum_{c \in \mathcal{T}'_e}
            \frac{\min_{c' \in \mathcal{T}_r} d(c, c')}
                 {\min_{c'' \in \mathcal{T}_e,\, c'' \ne c} d(c, c'')}

    where :math:`\mathcal{T}'_e` keeps the test classes whose ratio is finite and defined.
    :math:`R < 1`: test classes are typically nearer to a training class than to another test
    class (e.g. test classes are children or siblings of training classes); :math:`R > 1`:
    the test classes form their own region of the hierarchy.

    Parameters
    ----------
    hierarchy : Hierarchy
    train_nodes : array-like of int of shape (n_train,)
        Distinct node indices of the training classes.
    test_nodes : array-like of int of shape (n_test,)
        Distinct node indices of the test classes, disjoint from ``train_nodes``.

    Returns
    -------
    ratio : dict
        ``value`` (float >= 0): :math:`R`;
        ``test_nodes`` (int array [n_test]): as given;
        ``numerator``, ``denominator`` (float arrays [n_test]): the two minima per test class
        (``inf`` where no training class, resp. no other test class, is connected);
        ``ratio`` (float array [n_test]): their quotient, NaN for excluded classes;
        ``infinite_denominator``, ``zero_denominator``, ``infinite_numerator`` (lists of node
        indices): the excluded test classes, by reason;
        ``n_included`` (int).

    Raises
    ------
    MetricError
        If the node lists are malformed (not 1D int, empty, out of range, repeated), share a
        node, or no test class has a defined ratio (e.g. a single test class).

    Notes
    -----
    Excluded, and reported, are test classes whose ratio is not a finite number: an infinite
    denominator (no other test class in its connected component, so the ratio would be 0 or
    undefined), a zero denominator (impossible for distinct nodes, checked anyway) and an
    infinite numerator (no training class in its component). Distances come from two
    multi-source breadth-first searches over the whole graph (nearest training class, and
    nearest other test class by the Voronoi argument of the source code), so the cost is
    :math:`O(\text{nodes} + \text{edges})` whatever the number of classes: about a tenth of a
    second on the ImageNet-21K is-a graph (74k nodes). Multiple parents are just more edges.
    The question the ratio asks comes from [1]_; the formula is this harness's.

    References
    ----------
    .. [1] T. Hascoet, Y. Ariki, T. Takiguchi, "On Zero-Shot Recognition of Generic Objects",
       CVPR 2019.

    Examples
    --------
    Edges ``r -> a -> {a1, a2}`` and ``r -> b``; train ``a1``, test ``a2`` and ``b``. ``a2`` is
    2 hops from a1 (a2-a-a1) and 3 from b (a2-a-r-b): 2/3; ``b`` is 3 hops from a1 and 3 from
    a2: 3/3. R = (2/3 + 1) / 2 = 5/6:

    >>> h = Hierarchy(["r", "a", "b", "a1", "a2"],
    ...               [("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2")])
    >>> result = structural_ratio(h, h.indices(["a1"]), h.indices(["a2", "b"]))
    >>> result["numerator"].tolist(), result["denominator"].tolist()
    ([2.0, 3.0], [3.0, 3.0])
    >>> round(result["value"], 12)
    0.833333333333
    """
    graph = _check_hierarchy(hierarchy)
    train = _check_nodes(train_nodes, "train_nodes", graph.n_nodes)
    test = _check_nodes(test_nodes, "test_nodes", graph.n_nodes)
    shared = np.flatnonzero(np.isin(test, train))
    if shared.size:
        position = int(shared[0])
        raise MetricError(
            "Expected `train_nodes` and `test_nodes` to be disjoint, but test_nodes"
            f"[{position}] = {int(test[position])} ({graph.node_ids[test[position]]}) is also a "
            f"training class ({shared.size} shared)."
        )
    numerator = _nearest_source(graph, train)[0][test]
    denominator = _nearest_other(graph, test)
    infinite_den = np.isinf(denominator)
    zero_den = denominator == 0
    infinite_num = np.isinf(numerator)
    included = ~(infinite_den | zero_den | infinite_num)
    ratio = np.full(test.shape[0], np.nan)
    ratio[included] = numerator[included] / denominator[included]
    if not included.any():
        raise MetricError(
            "Expected at least one test class with a training class and another test class "
            f"connected to it, but none of the {test.shape[0]} test classes has both. The "
            "structural ratio is undefined; it needs two or more connected test classes."
        )
    return {
        "value": float(np.mean(ratio[included])),
        "test_nodes": test,
        "numerator": numerator,
        "denominator": denominator,
        "ratio": ratio,
        "infinite_denominator": test[infinite_den].tolist(),
        "zero_denominator": test[zero_den].tolist(),
        "infinite_numerator": test[infinite_num].tolist(),
        "n_included": int(included.sum()),
    }


def mutual_exclusivity_violations(
    hierarchy: Hierarchy, nodes: npt.ArrayLike
) -> list[tuple[str, str]]:
    r"""Pairs of classes of one split where one class is an ancestor of the other.

    .. math::

        V = \{\, (a, b) \in S \times S : a \ne b,\ a \text{ is an ancestor of } b \,\}

    A flat classifier over :math:`S` treats its classes as mutually exclusive; when ``dog`` and
    ``poodle`` are both classes, every poodle image is also a dog, and no answer is both right
    and exclusive [1]_.

    Parameters
    ----------
    hierarchy : Hierarchy
    nodes : array-like of int of shape (n_classes,)
        Distinct node indices of the classes of one split.

    Returns
    -------
    violations : list of (str, str)
        ``(ancestor_id, descendant_id)`` pairs sorted by ancestor id, then descendant id; empty
        when the split is mutually exclusive. In a DAG a descendant may have several ancestors
        in the split: each pair is listed.

    Raises
    ------
    MetricError
        If ``nodes`` is malformed (not 1D int, out of range, repeated).

    Notes
    -----
    Vectorized: the rows and columns of ``nodes`` are sliced out of the reflexive
    :attr:`~harness.hierarchy.Hierarchy.ancestor_matrix` and its off-diagonal entries read.

    References
    ----------
    .. [1] T. Hascoet, Y. Ariki, T. Takiguchi, "On Zero-Shot Recognition of Generic Objects",
       CVPR 2019.

    Examples
    --------
    ``dog`` has parents ``animal`` and ``pet``; the split {animal, dog, cat} has animal above
    dog and cat; ``pet`` is not in the split:

    >>> h = Hierarchy(["animal", "pet", "dog", "cat"],
    ...               [("animal", "dog"), ("animal", "cat"), ("pet", "dog")])
    >>> mutual_exclusivity_violations(h, h.indices(["animal", "dog", "cat"]))
    [('animal', 'cat'), ('animal', 'dog')]
    """
    graph = _check_hierarchy(hierarchy)
    checked = _check_nodes(nodes, "nodes", graph.n_nodes, allow_empty=True)
    if checked.size < 2:
        return []
    sub = graph.ancestor_matrix[checked][:, checked].tocoo()
    off_diagonal = sub.row != sub.col
    ids = graph.node_ids
    descendants = ids[checked[sub.row[off_diagonal]]]
    ancestors = ids[checked[sub.col[off_diagonal]]]
    return sorted(zip(ancestors.tolist(), descendants.tolist(), strict=True))


def split_sizes(
    *,
    train_classes: npt.ArrayLike,
    test_unseen_classes: npt.ArrayLike,
    val_classes: npt.ArrayLike | None = None,
    test_seen_classes: npt.ArrayLike | None = None,
    train_images: npt.ArrayLike | None = None,
    val_images: npt.ArrayLike | None = None,
    test_seen_images: npt.ArrayLike | None = None,
    test_unseen_images: npt.ArrayLike | None = None,
) -> dict[str, Any]:
    """A size table of a benchmark's splits, with the overlaps between them.

    Parameters
    ----------
    train_classes, test_unseen_classes : array-like of int
        Distinct class indices of the training and unseen test classes.
    val_classes, test_seen_classes : array-like of int, default=None
        Distinct class indices of the validation and seen test classes; None: no such split.
    train_images, val_images, test_seen_images, test_unseen_images : array-like of int, \
default=None
        Distinct image indices of each split; None: not counted.

    Returns
    -------
    sizes : dict
        ``splits``: ``{name: {"classes": int, "images": int or None}}`` for the splits given, in
        the order train, val, test_seen, test_unseen; ``class_overlap`` and ``image_overlap``:
        ``{"a&b": int}`` for every pair of given splits (class lists, resp. image lists), in the
        same order; ``n_classes`` and ``n_images``: sizes of the unions (``n_images`` None when
        no image list is given).

    Raises
    ------
    MetricError
        If a list is not a 1D integer array, holds a negative value or a repeat (naming the
        split and position), or images are given for a split without classes.

    Notes
    -----
    The table reports and does not judge: DESIGN requires train and val classes to be disjoint
    (``class_overlap["train&val"] == 0``), test_seen classes are training classes by
    construction in GZSL, and test_unseen classes must overlap neither; a reviewer reads the
    overlaps. Compare with Table 1 of [1]_ for the xlsa17 splits.

    References
    ----------
    .. [1] Y. Xian, C. H. Lampert, B. Schiele, Z. Akata, "Zero-Shot Learning -- A Comprehensive
       Evaluation of the Good, the Bad and the Ugly", IEEE TPAMI 41(9), 2019, Table 1.

    Examples
    --------
    >>> table = split_sizes(train_classes=[0, 1, 2], test_unseen_classes=[3],
    ...                     test_seen_classes=[1, 2], train_images=[0, 1, 2, 3],
    ...                     test_unseen_images=[7, 8])
    >>> table["splits"]["train"], table["splits"]["test_seen"]
    ({'classes': 3, 'images': 4}, {'classes': 2, 'images': None})
    >>> table["class_overlap"]
    {'train&test_seen': 2, 'train&test_unseen': 0, 'test_seen&test_unseen': 0}
    >>> table["n_classes"], table["n_images"]
    (4, 6)
    """
    given_classes = {
        "train": train_classes,
        "val": val_classes,
        "test_seen": test_seen_classes,
        "test_unseen": test_unseen_classes,
    }
    given_images = {
        "train": train_images,
        "val": val_images,
        "test_seen": test_seen_images,
        "test_unseen": test_unseen_images,
    }
    classes: dict[str, IntArray] = {}
    images: dict[str, IntArray] = {}
    for split in SPLITS:
        if given_classes[split] is None:
            if given_images[split] is not None:
                raise MetricError(
                    f"Expected `{split}_classes` with `{split}_images`, but got images for a "
                    "split without classes."
                )
            continue
        classes[split] = _check_indices(given_classes[split], f"{split}_classes")
        if given_images[split] is not None:
            images[split] = _check_indices(given_images[split], f"{split}_images")
    names = list(classes)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    image_names = list(images)
    image_pairs = [(a, b) for i, a in enumerate(image_names) for b in image_names[i + 1 :]]
    return {
        "splits": {
            split: {
                "classes": int(classes[split].size),
                "images": int(images[split].size) if split in images else None,
            }
            for split in names
        },
        "class_overlap": {
            f"{a}&{b}": int(np.intersect1d(classes[a], classes[b]).size) for a, b in pairs
        },
        "image_overlap": {
            f"{a}&{b}": int(np.intersect1d(images[a], images[b]).size) for a, b in image_pairs
        },
        "n_classes": int(np.unique(np.concatenate(list(classes.values()))).size),
        "n_images": (
            int(np.unique(np.concatenate(list(images.values()))).size) if images else None
        ),
    }


def _check_indices(values: Any, name: str) -> IntArray:
    array = _integer_array(values, name, "indices")
    if array.size and int(array.min()) < 0:
        position = int(np.argmax(array < 0))
        raise MetricError(
            f"Expected `{name}` to hold non-negative indices, but got {name}[{position}] = "
            f"{int(array[position])}."
        )
    _distinct(array, name)
    return array
