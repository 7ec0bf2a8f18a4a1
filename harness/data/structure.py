r"""Split diagnostics: how a benchmark's class splits sit in its hierarchy.

These functions describe a benchmark, not a submission: how close the test classes are to the
training classes compared with each other (:func:`structural_ratio`), whether a split holds
classes that are not mutually exclusive (:func:`mutual_exclusivity_violations`), and how large
each split is (:func:`split_sizes`). Hascoet et al. (CVPR 2019) show that on ImageNet-21K
benchmarks such structure -- test classes that are near-duplicates, parents or children of
training classes, or of each other -- explains much of the reported accuracy; their GOZ
benchmark is built to control it.

Distances are hops: undirected hypernym/hyponym edges of the frozen hierarchy (docs/design.md,
"Conventions"), so a class and its parent are 1 apart, two siblings 2 apart, whatever the number
of parents a node has. Nodes are given as hierarchy node *indices*
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
from harness.core.errors import MetricError
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

    See docs/metrics/structure.md, `StructuralRatio`.
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

    R is the mean over test classes of (hops to the nearest training class) / (hops to the
    nearest other test class): below 1, test classes sit next to training classes.

    >>> h = Hierarchy(["r", "a", "b", "a1", "a2"],
    ...               [("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2")])
    >>> result = structural_ratio(h, h.indices(["a1"]), h.indices(["a2", "b"]))
    >>> result.numerator.tolist(), result.denominator.tolist()
    ([2.0, 3.0], [3.0, 3.0])
    >>> round(result.value, 12)
    0.833333333333

    See docs/metrics/structure.md, `structural_ratio`.
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
    """Pairs of classes of one split where one class is an ancestor of the other.

    >>> h = Hierarchy(["animal", "pet", "dog", "cat"],
    ...               [("animal", "dog"), ("animal", "cat"), ("pet", "dog")])
    >>> mutual_exclusivity_violations(h, h.indices(["animal", "dog", "cat"]))
    [('animal', 'cat'), ('animal', 'dog')]

    See docs/metrics/structure.md, `mutual_exclusivity_violations`.
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

    >>> table = split_sizes(train_classes=[0, 1, 2], test_unseen_classes=[3],
    ...                     test_seen_classes=[1, 2], train_images=[0, 1, 2, 3],
    ...                     test_unseen_images=[7, 8])
    >>> table.splits["train"], table.splits["test_seen"]
    (SplitSize(classes=3, images=4), SplitSize(classes=2, images=None))
    >>> table.class_overlap
    {'train&test_seen': 2, 'train&test_unseen': 0, 'test_seen&test_unseen': 0}
    >>> table.n_classes, table.n_images
    (4, 6)

    See docs/metrics/structure.md, `split_sizes`.
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

    See docs/metrics/structure.md, `NearestTraining`.
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

    >>> h = Hierarchy(["r", "a", "b", "a1", "a2", "b1", "z"],
    ...               [("r", "a"), ("r", "b"), ("a", "a1"), ("a", "a2"), ("b", "b1")])
    >>> near = nearest_training_classes(h, h.indices(["a1", "b"]), h.indices(["a2", "b1", "z"]))
    >>> h.node_ids[near.nearest[:2]].tolist(), near.hops.tolist(), near.relation
    (['a1', 'b'], [2.0, 1.0, inf], ['sibling', 'parent', 'unconnected'])

    See docs/metrics/structure.md, `nearest_training_classes`.
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
        elif hop == 2 and bool(graph.shares_a_parent(node, near)):
            relation.append("sibling")
        else:
            relation.append("relative")
    return NearestTraining(test_nodes=test, nearest=nearest, hops=hops, relation=relation)
