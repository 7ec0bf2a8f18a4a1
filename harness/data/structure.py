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

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.checks import (
    FloatArray,
    IntArray,
    check_hierarchy,
    check_indices,
    check_nodes,
)
from harness.errors import MetricError
from harness.hierarchy import Hierarchy

__all__ = [
    "RELATIONS",
    "SplitSize",
    "SplitSizes",
    "StructuralRatio",
    "mutual_exclusivity_violations",
    "nearest_training_classes",
    "split_sizes",
    "structural_ratio",
]


#: Split names of :func:`split_sizes`, in table order.
SPLITS = ("train", "val", "test_seen", "test_unseen")


@dataclass(frozen=True, eq=False)
class StructuralRatio:
    """The structural ratio of a split and what it was computed from (:func:`structural_ratio`).

    Attributes
    ----------
    value : float >= 0
        :math:`R`, the mean ratio over the included test classes.
    test_nodes : ndarray of int64 of shape (n_test,)
        The test classes' nodes, as given.
    numerator, denominator : ndarray of float64 of shape (n_test,)
        Per test class, the hops to the nearest training class and to the nearest other test
        class (``inf`` where none is connected).
    ratio : ndarray of float64 of shape (n_test,)
        Their quotient; NaN for an excluded test class.
    infinite_denominator, zero_denominator, infinite_numerator : ndarray of int64
        The nodes of the excluded test classes, by reason.
    n_included : int
        Number of test classes the mean runs over.
    """

    value: float
    test_nodes: IntArray
    numerator: FloatArray
    denominator: FloatArray
    ratio: FloatArray
    infinite_denominator: IntArray
    zero_denominator: IntArray
    infinite_numerator: IntArray
    n_included: int


@dataclass(frozen=True)
class SplitSize:
    """Size of one split: its classes, and its images (None when not counted)."""

    classes: int
    images: int | None


@dataclass(frozen=True)
class SplitSizes:
    """A size table of a benchmark's splits (:func:`split_sizes`).

    Attributes
    ----------
    splits : dict of str to SplitSize
        The splits given, in the order train, val, test_seen, test_unseen.
    class_overlap, image_overlap : dict of str to int
        ``{"a&b": n}`` for every pair of given splits (class lists, resp. image lists), in the
        same order.
    n_classes : int
        Size of the union of the class lists.
    n_images : int or None
        Size of the union of the image lists; None when no image list is given.
    """

    splits: dict[str, SplitSize]
    class_overlap: dict[str, int]
    image_overlap: dict[str, int]
    n_classes: int
    n_images: int | None


def structural_ratio(
    hierarchy: Hierarchy, train_nodes: npt.ArrayLike, test_nodes: npt.ArrayLike
) -> StructuralRatio:
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
    ratio : StructuralRatio
        ``value`` (:math:`R`), the two minima per test class (``numerator``, ``denominator``;
        ``inf`` where no training class, resp. no other test class, is connected), their
        quotient ``ratio`` (NaN for excluded classes), the excluded test classes' nodes by
        reason (``infinite_denominator``, ``zero_denominator``, ``infinite_numerator``) and
        ``n_included``.

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
    infinite numerator (no training class in its component). Distances come from the
    hierarchy's hop queries: one search from all training classes at once
    (:meth:`~harness.hierarchy.Hierarchy.nearest_hops`), and one per test class that stops at
    the first level reaching another test class
    (:meth:`~harness.hierarchy.Hierarchy.nearest_other_hops`): about a tenth of a second for the
    500 GOZ test classes on the ImageNet-21K is-a graph (74k nodes), and under a fifth for all
    20,844 of its candidates. Multiple parents are just more edges.
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
    >>> result.numerator.tolist(), result.denominator.tolist()
    ([2.0, 3.0], [3.0, 3.0])
    >>> round(result.value, 12)
    0.833333333333
    """
    graph = check_hierarchy(hierarchy)
    train = check_nodes(train_nodes, graph.n_nodes, "train_nodes")
    test = check_nodes(test_nodes, graph.n_nodes, "test_nodes")
    shared = np.flatnonzero(np.isin(test, train))
    if shared.size:
        position = int(shared[0])
        raise MetricError(
            "Expected `train_nodes` and `test_nodes` to be disjoint, but test_nodes"
            f"[{position}] = {int(test[position])} ({graph.node_ids[test[position]]}) is also a "
            f"training class ({shared.size} shared)."
        )
    numerator = graph.nearest_hops(train)[test]
    denominator = graph.nearest_other_hops(test)
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
    return StructuralRatio(
        value=float(np.mean(ratio[included])),
        test_nodes=test,
        numerator=numerator,
        denominator=denominator,
        ratio=ratio,
        infinite_denominator=test[infinite_den],
        zero_denominator=test[zero_den],
        infinite_numerator=test[infinite_num],
        n_included=int(included.sum()),
    )


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
    Vectorized: :meth:`~harness.hierarchy.Hierarchy.ancestor_pairs` reads the off-diagonal
    entries of the reflexive ancestor matrix restricted to ``nodes``.

    References
    ----------
    .. [1] T. Hascoet et al., "On Zero-Shot Recognition of Generic Objects", CVPR 2019.

    Examples
    --------
    ``dog`` has parents ``animal`` and ``pet``; the split {animal, dog, cat} has animal above
    dog and cat; ``pet`` is not in the split:

    >>> h = Hierarchy(["animal", "pet", "dog", "cat"],
    ...               [("animal", "dog"), ("animal", "cat"), ("pet", "dog")])
    >>> mutual_exclusivity_violations(h, h.indices(["animal", "dog", "cat"]))
    [('animal', 'cat'), ('animal', 'dog')]
    """
    graph = check_hierarchy(hierarchy)
    checked = check_nodes(nodes, graph.n_nodes, "nodes", allow_empty=True)
    below, above = graph.ancestor_pairs(checked)
    ids = graph.node_ids
    descendants = ids[checked[below]]
    ancestors = ids[checked[above]]
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
) -> SplitSizes:
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
    sizes : SplitSizes
        ``splits``: ``{name: SplitSize(classes, images)}`` for the splits given, in the order
        train, val, test_seen, test_unseen (``images`` None when not given); ``class_overlap``
        and ``image_overlap``: ``{"a&b": int}`` for every pair of given splits (class lists,
        resp. image lists), in the same order; ``n_classes`` and ``n_images``: sizes of the
        unions (``n_images`` None when no image list is given).

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
    >>> table.splits["train"], table.splits["test_seen"]
    (SplitSize(classes=3, images=4), SplitSize(classes=2, images=None))
    >>> table.class_overlap
    {'train&test_seen': 2, 'train&test_unseen': 0, 'test_seen&test_unseen': 0}
    >>> table.n_classes, table.n_images
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
        classes[split] = check_indices(given_classes[split], f"{split}_classes")
        if given_images[split] is not None:
            images[split] = check_indices(given_images[split], f"{split}_images")
    names = list(classes)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    image_names = list(images)
    image_pairs = [(a, b) for i, a in enumerate(image_names) for b in image_names[i + 1 :]]
    return SplitSizes(
        splits={
            split: SplitSize(
                classes=int(classes[split].size),
                images=int(images[split].size) if split in images else None,
            )
            for split in names
        },
        class_overlap={
            f"{a}&{b}": int(np.intersect1d(classes[a], classes[b]).size) for a, b in pairs
        },
        image_overlap={
            f"{a}&{b}": int(np.intersect1d(images[a], images[b]).size) for a, b in image_pairs
        },
        n_classes=int(np.unique(np.concatenate(list(classes.values()))).size),
        n_images=(int(np.unique(np.concatenate(list(images.values()))).size) if images else None),
    )


#: What the nearest training class is to a test class (:func:`nearest_training_classes`).
RELATIONS = ("parent", "child", "sibling", "ancestor", "descendant", "relative", "unconnected")


@dataclass(frozen=True, eq=False)
class NearestTraining:
    """Per test class, its nearest training class in the hierarchy and how they are related.

    Attributes
    ----------
    test_nodes : ndarray of int64 of shape (n_test,)
        The test classes' nodes, as given.
    nearest : ndarray of int64 of shape (n_test,)
        Node of the nearest training class; -1 where none is connected.
    hops : ndarray of float64 of shape (n_test,)
        Hops to it; ``inf`` where none is connected.
    relation : list of str
        One of :data:`RELATIONS` per test class: the training class is its ``parent``,
        ``child``, ``sibling`` (they share a parent), ``ancestor`` or ``descendant`` (two or more
        hops up, resp. down), a ``relative`` (joined through a common ancestor or a common
        child, not a sibling), or ``unconnected``.
    """

    test_nodes: IntArray
    nearest: IntArray
    hops: FloatArray
    relation: list[str]


def nearest_training_classes(
    hierarchy: Hierarchy, train_nodes: npt.ArrayLike, test_nodes: npt.ArrayLike
) -> NearestTraining:
    r"""For each test class, the nearest training class and its relation in the hierarchy.

    The nearest training class of a test class :math:`c` is
    :math:`\operatorname{argmin}_{c' \in \mathcal{T}_r} d(c, c')` with :math:`d` the
    undirected hop distance (the numerator of :func:`structural_ratio`); ties go to the
    training class given first in ``train_nodes``.

    Parameters
    ----------
    hierarchy : Hierarchy
    train_nodes : array-like of int of shape (n_train,)
        Distinct node indices of the training classes; their order breaks ties.
    test_nodes : array-like of int of shape (n_test,)
        Distinct node indices of the test classes (a training class among them: see Notes).

    Returns
    -------
    nearest : NearestTraining

    Raises
    ------
    MetricError
        If a node list is malformed (not 1D int, empty, out of range, repeated).

    Notes
    -----
    Existing queries only: :meth:`~harness.hierarchy.Hierarchy.nearest_hops` gives each test
    class's distance; :meth:`~harness.hierarchy.Hierarchy.hop_distance` (from the test classes
    to the training classes, one search per distance, capped at it) which training class is at
    that distance; :meth:`~harness.hierarchy.Hierarchy.is_ancestor_or_self` the direction; and
    :meth:`~harness.hierarchy.Hierarchy.parents` whether two classes 2 hops apart are siblings.
    About 0.35 s for the 500 GOZ test classes against the 1,000 ILSVRC classes on the 74k-node
    ImageNet is-a graph. A test class that is a training class too (GZSL's seen test classes)
    gets itself, 0 hops and the relation ``"relative"``; callers label those classes themselves.

    Examples
    --------
    Edges ``r -> a -> {a1, a2}``, ``r -> b -> b1`` and ``z`` alone; train ``a1`` and ``b``:

    >>> h = Hierarchy(["r", "a", "b", "a1", "a2", "b1", "z"],
    ...               [("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1")])
    >>> near = nearest_training_classes(h, h.indices(["a1", "b"]), h.indices(["a2", "b1", "z"]))
    >>> h.node_ids[near.nearest[:2]].tolist(), near.hops.tolist(), near.relation
    (['a1', 'b'], [2.0, 1.0, inf], ['sibling', 'parent', 'unconnected'])
    """
    graph = check_hierarchy(hierarchy)
    train = check_nodes(train_nodes, graph.n_nodes, "train_nodes")
    test = check_nodes(test_nodes, graph.n_nodes, "test_nodes")
    hops = graph.nearest_hops(train)[test]
    finite = np.isfinite(hops)
    nearest = np.full(test.shape[0], -1, dtype=np.int64)
    # One capped search per distance: a class 3 hops from training never searches 13 deep.
    for radius in np.unique(hops[finite]).astype(int).tolist():
        rows = np.flatnonzero(hops == radius)
        distances = graph.hop_distance(test[rows], radius, targets=train)
        nearest[rows] = train[np.argmin(distances, axis=1)]
    relation = []
    for node, near, hop in zip(test.tolist(), nearest.tolist(), hops.tolist(), strict=True):
        if near < 0:
            relation.append("unconnected")
        elif near != node and bool(graph.is_ancestor_or_self(near, node)):
            relation.append("parent" if hop == 1 else "ancestor")
        elif near != node and bool(graph.is_ancestor_or_self(node, near)):
            relation.append("child" if hop == 1 else "descendant")
        elif hop == 2 and np.intersect1d(graph.parents(node), graph.parents(near)).size:
            relation.append("sibling")
        else:
            relation.append("relative")
    return NearestTraining(test_nodes=test, nearest=nearest, hops=hops, relation=relation)
