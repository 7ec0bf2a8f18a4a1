"""Hierarchical metrics over ranked predictions: pure numpy functions, ImageNet-21K scale.

Every function follows validate -> look up -> reduce: inputs go through
:mod:`harness.checks`, the hierarchy's graph queries (hop balls, ancestry, LCA
heights: :class:`~harness.hierarchy.Hierarchy`) are vectorized over images in row chunks of
bounded size, and the values reduce to means. Each function returns a frozen dataclass. Options
are keyword-only.

See docs/metrics/hierarchical.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt
from pydantic import Field

from harness.checks import (
    BoolArray,
    FloatArray,
    IntArray,
    check_choice,
    check_classes,
    check_hierarchy,
    check_k,
    check_ks,
    check_nodes,
    check_ranked,
    check_scores,
    check_targets,
    check_top1,
    check_valid_nodes,
    row_chunks,
)
from harness.hierarchy import LCA_DISTANCES, BallRadii, Hierarchy, LcaDistance
from harness.metrics.base import MetricInput, MetricParams, MetricResult, register_metric
from harness.metrics.decomposition import Decomposition
from harness.metrics.flat import mean_of_class_means
from harness.metrics.registration import class_mean, curve_ks, hierarchy_of, image_mean

__all__ = [
    "LCA_DISTANCES",
    "RELATIONS",
    "average_hierarchical_distance_at_k",
    "hcorrect_radii",
    "hierarchical_cost",
    "hierarchical_precision_at_k",
    "hierarchical_retrieval_precision_at_k",
    "mistake_severity",
    "per_class_hierarchical_precision_at_k",
    "prediction_relations",
    "ranked_from_scores",
]


#: Relation codes of :func:`prediction_relations` (``per_image``), in order of precedence: a class
#: that is both (a DAG allows it) takes the first, e.g. a parent that shares another parent.
RELATIONS = ("correct", "ancestor", "descendant", "sibling", "unrelated")

# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class HierarchicalPrecision:
    """hp@k per image and averaged over images (:func:`hierarchical_precision_at_k`).

    See docs/metrics/hierarchical.md, `HierarchicalPrecision`.
    """

    values: dict[int, float]
    mean_hcorrect_size: dict[int, float]
    per_image: FloatArray
    short_classes: dict[int, tuple[int, ...]]
    ks: tuple[int, ...]
    n_images: int
    n_ranked: int


@dataclass(frozen=True, eq=False)
class PerClassHierarchicalPrecision:
    """hp@k averaged over classes (:func:`per_class_hierarchical_precision_at_k`).

    See docs/metrics/hierarchical.md, `PerClassHierarchicalPrecision`.
    """

    values: dict[int, float]
    per_class: dict[int, tuple[float | None, ...]]
    classes: tuple[int, ...]
    excluded_classes: tuple[int, ...]
    n_images: int
    per_image: FloatArray
    ks: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class HierarchicalRetrievalPrecision:
    """Deng's hierarchical precision@k (:func:`hierarchical_retrieval_precision_at_k`).

    Attributes
    ----------
    values : dict of int to float
        ``{k: hPrec@k}``, each in [0, 1].
    per_image : ndarray of float64 of shape (n_images, len(ks))
    ks : tuple of int
    n_images : int
    root_height : int
        :math:`H`, the largest height of a root (also the max leaf depth).
    lca_distance : {"lca_height", "max_leaf_depth_minus_lca_depth"}
        The LCA distance :math:`d` of the similarity :math:`1 - d / H`
        (docs/metrics/hierarchical.md).
    """

    values: dict[int, float]
    per_image: FloatArray
    ks: tuple[int, ...]
    n_images: int
    root_height: int
    lca_distance: LcaDistance = "lca_height"


@dataclass(frozen=True, eq=False)
class PredictionRelations:
    """Shares of top-1 predictions by relation to the true class (:func:`prediction_relations`).

    See docs/metrics/hierarchical.md, `PredictionRelations`.
    """

    correct: float
    ancestor: float
    descendant: float
    sibling: float
    unrelated: float
    counts: dict[str, int]
    semantic_accuracy_lower: float
    semantic_accuracy_upper: float
    n_images: int
    per_image: npt.NDArray[np.int8]


@dataclass(frozen=True, eq=False)
class HierarchicalCost:
    """Mean hierarchical cost of top-1 predictions over classes (:func:`hierarchical_cost`).

    See docs/metrics/hierarchical.md, `HierarchicalCost`.
    """

    value: float
    per_class: tuple[float | None, ...]
    classes: tuple[int, ...]
    excluded_classes: tuple[int, ...]
    n_images: int
    per_image: IntArray
    lca_distance: LcaDistance = "lca_height"


@dataclass(frozen=True, eq=False)
class MistakeSeverity:
    r"""Mean hierarchical distance of the top-1 mistakes (:func:`mistake_severity`).

    Attributes
    ----------
    value : float >= 0, or None
        The mean over mistakes; None when there is no mistake (the mean is undefined).
    n_mistakes : int
    n_images : int
    per_image : ndarray of int64 of shape (n_images,)
        The hierarchical distance of every image's top-1 prediction, 0 where correct.
    mistakes : ndarray of bool of shape (n_images,)
    lca_distance : {"lca_height", "max_leaf_depth_minus_lca_depth"}
        The LCA distance of :math:`\delta` (docs/metrics/hierarchical.md).
    """

    value: float | None
    n_mistakes: int
    n_images: int
    per_image: IntArray
    mistakes: BoolArray
    lca_distance: LcaDistance = "lca_height"


@dataclass(frozen=True, eq=False)
class AverageHierarchicalDistance:
    r"""AHD@k per image and averaged (:func:`average_hierarchical_distance_at_k`).

    Attributes
    ----------
    values : dict of int to float
        ``{k: AHD@k}``, each >= 0.
    per_image : ndarray of float64 of shape (n_images, len(ks))
    ks : tuple of int
    n_images : int
    lca_distance : {"lca_height", "max_leaf_depth_minus_lca_depth"}
        The LCA distance of :math:`\delta` (docs/metrics/hierarchical.md).
    """

    values: dict[int, float]
    per_image: FloatArray
    ks: tuple[int, ...]
    n_images: int
    lca_distance: LcaDistance = "lca_height"


# --------------------------------------------------------------------------- shared steps


def _checked_inputs(
    y_true: Any, hierarchy: Any, candidate_nodes: Any
) -> tuple[Hierarchy, IntArray, IntArray]:
    """The hierarchy, the candidates' nodes and ``y_true``, checked."""
    checked_hierarchy = check_hierarchy(hierarchy)
    nodes = check_nodes(candidate_nodes, checked_hierarchy.n_nodes, "candidate_nodes")
    checked_y = check_targets(y_true, nodes.shape[0])
    return checked_hierarchy, nodes, checked_y


def _class_means(
    per_image: npt.NDArray[Any],
    y_true: IntArray,
    classes: IntArray,
    n_candidates: int,
    what: str,
) -> tuple[float, tuple[float | None, ...], BoolArray, int]:
    """Mean over ``classes`` with images of each class's mean of ``per_image``.

    Returns the mean, each listed class's mean (None without images), which listed classes
    have images, and how many images they have. ``what`` names the values in the error raised
    when no listed class has an image.
    """
    totals = np.bincount(y_true, minlength=n_candidates)
    sums = np.bincount(y_true, weights=per_image, minlength=n_candidates)
    value, per_class, present = mean_of_class_means(sums, totals, classes, values=what)
    return value, per_class, present, int(totals[classes].sum())


# --------------------------------------------------------------------------- ranking


def ranked_from_scores(scores: npt.ArrayLike, k: int) -> IntArray:
    """The top-``k`` candidate columns of each image, best first; ties go to the smaller column.

    Row ``i`` lists the ``k`` columns that come first under the order "higher score first, then
    smaller column first".

    >>> ranked_from_scores([[0.1, 0.9, 0.9, 0.1]], 3)
    array([[1, 2, 0]])

    See docs/metrics/hierarchical.md, `ranked_from_scores`.
    """
    checked = check_scores(scores)
    n_images, n_candidates = checked.shape
    checked_k = check_k(k, n_candidates)
    out = np.empty((n_images, checked_k), dtype=np.int64)
    for start, stop in row_chunks(n_images, n_candidates):
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


# --------------------------------------------------------------------------- hCorrectSets


def hcorrect_radii(
    hierarchy: Hierarchy,
    sources: npt.ArrayLike,
    *,
    valid_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
) -> BallRadii:
    """Radius and size of the DeViSE hCorrectSet of each source node, for each ``k``.

    The hCorrectSet of a true label :math:`t` grows by whole radii of undirected hops until it
    holds at least ``k`` valid labels.

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> r = hcorrect_radii(h, [h.index("dog")], valid_nodes=h.indices(["dog", "cat", "car"]),
    ...                    ks=[1, 2, 3, 4])
    >>> r.radii.tolist(), r.sizes.tolist(), r.short.tolist()
    ([[0, 2, 4, 4]], [[1, 2, 3, 3]], [[False, False, False, True]])

    See docs/metrics/hierarchical.md, `hcorrect_radii`.
    """
    checked_hierarchy = check_hierarchy(hierarchy)
    checked_sources = check_nodes(
        sources, checked_hierarchy.n_nodes, "sources", distinct=False, allow_empty=True
    )
    valid = check_valid_nodes(valid_nodes, checked_hierarchy.n_nodes, None)
    checked_ks = check_ks(ks)
    balls = checked_hierarchy.hop_balls(valid, checked_ks)
    columns = [balls.ks.index(k) for k in checked_ks]
    radii = balls.radii(checked_sources)
    return BallRadii(radii.radii[:, columns], radii.sizes[:, columns], radii.short[:, columns])


# --------------------------------------------------------------------------- hp@k


def hierarchical_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    valid_nodes: npt.ArrayLike | None = None,
) -> HierarchicalPrecision:
    r"""Hierarchical precision at k (hp@k) of DeViSE, per image and averaged over images.

    hp@k of an image is the share of its top k predictions that lie in the hCorrectSet of its true
    label (:func:`hcorrect_radii`); the value is the mean over images.

    See docs/metrics/hierarchical.md, `hierarchical_precision_at_k`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    checked_ranked = check_ranked(ranked, checked_y.shape[0], n_candidates)
    checked_ks = check_ks(ks, n_candidates)
    valid = check_valid_nodes(valid_nodes, checked_hierarchy.n_nodes, nodes)
    balls = checked_hierarchy.hop_balls(valid, checked_ks)
    columns = [balls.ks.index(k) for k in checked_ks]

    n_images, n_ranked = checked_ranked.shape
    true_nodes = nodes[checked_y]
    slots = balls.slots(true_nodes)
    table = balls.table()
    radii = table.radii[:, columns]
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    for start, stop in row_chunks(n_images, n_ranked):
        block_slots = slots[start:stop]
        distance = balls.lookup(block_slots, nodes[checked_ranked[start:stop]])
        for j, k in enumerate(checked_ks):
            used = min(k, n_ranked)
            inside = distance[:, :used] <= radii[block_slots, j][:, None]
            per_image[start:stop, j] = inside.sum(axis=1) / k

    present_columns = np.unique(checked_y)
    present_slots = balls.slots(nodes[present_columns])
    sizes = table.sizes[:, columns]
    short = table.short[:, columns]
    return HierarchicalPrecision(
        values={k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        mean_hcorrect_size={k: float(sizes[slots, j].mean()) for j, k in enumerate(checked_ks)},
        per_image=per_image,
        short_classes={
            k: tuple(present_columns[short[present_slots, j]].tolist())
            for j, k in enumerate(checked_ks)
        },
        ks=checked_ks,
        n_images=int(n_images),
        n_ranked=int(n_ranked),
    )


def per_class_hierarchical_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    classes: npt.ArrayLike,
    valid_nodes: npt.ArrayLike | None = None,
) -> PerClassHierarchicalPrecision:
    r"""hp@k averaged over classes: the mean over ``classes`` with images of their mean hp@k.

    Every class weighs the same, however many test images it has: the per-image mean lets
    frequent classes dominate, which matters on class-imbalanced splits (ImageNet-21K).

    See docs/metrics/hierarchical.md, `per_class_hierarchical_precision_at_k`.
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
    values: dict[int, float] = {}
    per_class: dict[int, tuple[float | None, ...]] = {}
    present = np.zeros(0, dtype=bool)
    n_images = 0
    for j, k in enumerate(out.ks):
        values[k], per_class[k], present, n_images = _class_means(
            out.per_image[:, j], checked_y, checked_classes, n_candidates, "hp@k"
        )
    return PerClassHierarchicalPrecision(
        values=values,
        per_class=per_class,
        classes=tuple(checked_classes.tolist()),
        excluded_classes=tuple(checked_classes[~present].tolist()),
        n_images=n_images,
        per_image=out.per_image,
        ks=out.ks,
    )


# --------------------------------------------------------------------------- LCA distances


def _check_lca_distance(lca_distance: Any) -> LcaDistance:
    """The ``lca_distance`` option, one of :data:`LCA_DISTANCES` (MetricError naming them)."""
    check_choice(lca_distance, "lca_distance", LCA_DISTANCES)
    return cast(LcaDistance, lca_distance)


def _lca_distance(
    hierarchy: Hierarchy, a: IntArray, b: IntArray, lca_distance: LcaDistance
) -> IntArray:
    """LCA distance of node pairs, ``H + 1`` where they share no ancestor (virtual super-root).

    Under ``"max_leaf_depth_minus_lca_depth"`` the super-root sits one level above the roots, at
    depth -1, so the distance is again :math:`D + 1 = H + 1`.
    """
    distance = hierarchy.lca_distance(a, b, lca_distance)
    return np.where(distance < 0, hierarchy.root_height + 1, distance)


def _hierarchical_distance(
    hierarchy: Hierarchy, true: IntArray, pred: IntArray, lca_distance: LcaDistance
) -> IntArray:
    r""":math:`\delta`: 0 if ``pred`` is ``true`` or below it, else the LCA distance."""
    below = hierarchy.is_ancestor_or_self(true, pred)
    return np.where(below, 0, _lca_distance(hierarchy, true, pred, lca_distance))


def _top1_distances(
    y_true: IntArray,
    top1: IntArray,
    hierarchy: Hierarchy,
    nodes: IntArray,
    lca_distance: LcaDistance,
) -> IntArray:
    out = np.empty(y_true.shape[0], dtype=np.int64)
    # ~64 ancestor entries per pair at most, typically
    for start, stop in row_chunks(y_true.shape[0], 64):
        out[start:stop] = _hierarchical_distance(
            hierarchy, nodes[y_true[start:stop]], nodes[top1[start:stop]], lca_distance
        )
    return out


def hierarchical_cost(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    classes: npt.ArrayLike,
    lca_distance: LcaDistance = "lca_height",
) -> HierarchicalCost:
    """Mean hierarchical cost of the top-1 predictions (Deng et al. 2010); lower is better.

    A prediction costs 0 when it is the true class or a descendant of it, else the LCA distance
    ``lca_distance`` between them (by default the LCA's height); the value is a mean over classes.

    See docs/metrics/hierarchical.md, `hierarchical_cost`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    top1 = check_top1(ranked_top1, checked_y.shape[0], n_candidates)
    checked_classes = check_classes(classes, n_candidates)
    distance = _check_lca_distance(lca_distance)
    cost = _top1_distances(checked_y, top1, checked_hierarchy, nodes, distance)
    value, per_class, present, n_images = _class_means(
        cost, checked_y, checked_classes, n_candidates, "costs"
    )
    return HierarchicalCost(
        value=value,
        per_class=per_class,
        classes=tuple(checked_classes.tolist()),
        excluded_classes=tuple(checked_classes[~present].tolist()),
        n_images=n_images,
        per_image=cost,
        lca_distance=distance,
    )


def mistake_severity(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    lca_distance: LcaDistance = "lca_height",
) -> MistakeSeverity:
    """Mean hierarchical distance of the top-1 mistakes (Bertinetto et al. 2020); lower is better.

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> result = mistake_severity([0, 0, 2], [0, 1, 0], hierarchy=h, candidate_nodes=nodes)
    >>> result.value, result.n_mistakes, result.per_image.tolist()
    (1.5, 2, [0, 1, 2])

    See docs/metrics/hierarchical.md, `mistake_severity`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    top1 = check_top1(ranked_top1, checked_y.shape[0], nodes.shape[0])
    kind = _check_lca_distance(lca_distance)
    distance = _top1_distances(checked_y, top1, checked_hierarchy, nodes, kind)
    mistakes = top1 != checked_y
    n_mistakes = int(mistakes.sum())
    return MistakeSeverity(
        value=float(distance[mistakes].mean()) if n_mistakes else None,
        n_mistakes=n_mistakes,
        n_images=int(checked_y.shape[0]),
        per_image=distance,
        mistakes=mistakes,
        lca_distance=kind,
    )


def average_hierarchical_distance_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    lca_distance: LcaDistance = "lca_height",
) -> AverageHierarchicalDistance:
    """Average hierarchical distance of the top-k predictions (Bertinetto et al. 2020).

    >>> h = Hierarchy(["entity", "animal", "vehicle", "dog", "cat", "car"],
    ...               [("entity", "animal"), ("entity", "vehicle"), ("animal", "dog"),
    ...                ("animal", "cat"), ("vehicle", "car")])
    >>> nodes = h.indices(["dog", "cat", "car"])
    >>> average_hierarchical_distance_at_k([0], [[0, 1, 2]], hierarchy=h,
    ...                                    candidate_nodes=nodes, ks=[1, 2, 3]).values
    {1: 0.0, 2: 0.5, 3: 1.0}

    See docs/metrics/hierarchical.md, `average_hierarchical_distance_at_k`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    checked_ranked = check_ranked(ranked, checked_y.shape[0], nodes.shape[0])
    n_images, n_ranked = checked_ranked.shape
    checked_ks = check_ks(ks, n_ranked=n_ranked)
    kind = _check_lca_distance(lca_distance)
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    used = max(checked_ks)
    for start, stop in row_chunks(n_images, 64 * used):
        true = np.repeat(nodes[checked_y[start:stop]], used)
        pred = nodes[checked_ranked[start:stop, :used]].reshape(-1)
        distance = _hierarchical_distance(checked_hierarchy, true, pred, kind).reshape(-1, used)
        cumulative = np.cumsum(distance, axis=1)
        for j, k in enumerate(checked_ks):
            per_image[start:stop, j] = cumulative[:, k - 1] / k
    return AverageHierarchicalDistance(
        values={k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        per_image=per_image,
        ks=checked_ks,
        n_images=int(n_images),
        lca_distance=kind,
    )


# --------------------------------------------------------------------------- retrieval


def _similarity(distance: npt.NDArray[Any], root_height: int) -> FloatArray:
    """Deng's similarity :math:`1 - d / H` of LCA distances, clipped to [0, 1] (H = 0 -> 1)."""
    return np.clip(1.0 - distance / float(max(root_height, 1)), 0.0, 1.0)


def _ideal_similarity_sums(
    hierarchy: Hierarchy,
    sources: IntArray,
    candidate_nodes: IntArray,
    ks: tuple[int, ...],
    lca_distance: LcaDistance,
) -> FloatArray:
    """Largest sum of similarities to each source over any ``k`` candidates, ``[m, len(ks)]``.

    With :math:`N(h)` the number of candidates whose LCA distance with the source is at most
    ``h`` (:meth:`~harness.hierarchy.Hierarchy.lca_distance_counts`, counted until ``max(ks)``
    are found), the ``N(h) - N(h - 1)`` candidates first reached at distance ``h`` have
    similarity :math:`1 - h / H`, and the best ``k`` are taken in that order. Candidates sharing
    no ancestor with the source add 0.
    """
    k_values = np.asarray(ks, dtype=np.int64)
    heights, counts = hierarchy.lca_distance_counts(
        sources, candidate_nodes, limit=int(k_values.max()), kind=lca_distance
    )
    ideal = np.zeros((sources.size, len(ks)), dtype=np.float64)
    found = np.zeros(sources.size, dtype=np.int64)
    for j, h in enumerate(heights):
        gain = _similarity(np.asarray(h), hierarchy.root_height)
        before = np.minimum(found[:, None], k_values)
        after = np.minimum(counts[:, j][:, None], k_values)
        ideal += (after - before) * gain
        found = counts[:, j]
    return ideal


def hierarchical_retrieval_precision_at_k(
    y_true: npt.ArrayLike,
    ranked: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    ks: Sequence[int] | int,
    lca_distance: LcaDistance = "lca_height",
) -> HierarchicalRetrievalPrecision:
    r"""Hierarchical precision@k of a ranking (Deng, Berg, Fei-Fei 2011), per image, averaged.

    With the similarity S(i, j) = 1 - d(i, j) / H, an image's value is the summed similarity of its
    top k to the true class, over the best sum any ranking of the candidates could reach.

    See docs/metrics/hierarchical.md, `hierarchical_retrieval_precision_at_k`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    n_candidates = nodes.shape[0]
    checked_ranked = check_ranked(ranked, checked_y.shape[0], n_candidates)
    checked_ks = check_ks(ks, n_candidates)
    kind = _check_lca_distance(lca_distance)
    n_images, n_ranked = checked_ranked.shape
    root_height = checked_hierarchy.root_height
    sources, inverse = np.unique(nodes[checked_y], return_inverse=True)
    ideal = _ideal_similarity_sums(checked_hierarchy, sources, nodes, checked_ks, kind)
    per_image = np.empty((n_images, len(checked_ks)), dtype=np.float64)
    used = min(max(checked_ks), n_ranked)
    for start, stop in row_chunks(n_images, 64 * used):
        true = np.repeat(nodes[checked_y[start:stop]], used)
        pred = nodes[checked_ranked[start:stop, :used]].reshape(-1)
        gained = _similarity(_lca_distance(checked_hierarchy, true, pred, kind), root_height)
        cumulative = np.cumsum(gained.reshape(-1, used), axis=1)
        for j, k in enumerate(checked_ks):
            numerator = cumulative[:, min(k, used) - 1]
            denominator = ideal[inverse[start:stop], j]
            safe = np.where(denominator > 0, denominator, 1.0)
            per_image[start:stop, j] = np.where(
                denominator > 0, np.minimum(numerator / safe, 1.0), 1.0
            )
    return HierarchicalRetrievalPrecision(
        values={k: float(per_image[:, j].mean()) for j, k in enumerate(checked_ks)},
        per_image=per_image,
        ks=checked_ks,
        n_images=int(n_images),
        root_height=int(root_height),
        lca_distance=kind,
    )


# --------------------------------------------------------------------------- relations


def prediction_relations(
    y_true: npt.ArrayLike,
    ranked_top1: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> PredictionRelations:
    """Shares of top-1 predictions that are correct, an ancestor, a descendant, a sibling (a
    shared parent), or unrelated; a class that is two of them counts as the first (RELATIONS).

    >>> h = Hierarchy(["animal", "dog", "puppy", "cat", "car"],
    ...               [("animal", "dog"), ("dog", "puppy"), ("animal", "cat")])
    >>> nodes = h.indices(["dog", "animal", "puppy", "cat", "car"])
    >>> result = prediction_relations([0] * 5, [0, 1, 2, 3, 4], hierarchy=h, candidate_nodes=nodes)
    >>> result.counts
    {'correct': 1, 'ancestor': 1, 'descendant': 1, 'sibling': 1, 'unrelated': 1}

    See docs/metrics/hierarchical.md, `prediction_relations`.
    """
    checked_hierarchy, nodes, checked_y = _checked_inputs(y_true, hierarchy, candidate_nodes)
    top1 = check_top1(ranked_top1, checked_y.shape[0], nodes.shape[0])
    n_images = checked_y.shape[0]
    codes = np.full(n_images, RELATIONS.index("unrelated"), dtype=np.int8)
    for start, stop in row_chunks(n_images, 8):
        true, pred = nodes[checked_y[start:stop]], nodes[top1[start:stop]]
        block = codes[start:stop]
        # Assigned from the last relation to the first, so the first that holds wins.
        block[checked_hierarchy.shares_a_parent(true, pred)] = 3
        block[checked_hierarchy.is_ancestor_or_self(true, pred)] = 2
        block[checked_hierarchy.is_ancestor_or_self(pred, true)] = 1
        block[true == pred] = 0
    counts = np.bincount(codes, minlength=len(RELATIONS))
    shares = counts / n_images
    return PredictionRelations(
        correct=float(shares[0]),
        ancestor=float(shares[1]),
        descendant=float(shares[2]),
        sibling=float(shares[3]),
        unrelated=float(shares[4]),
        counts={name: int(counts[code]) for code, name in enumerate(RELATIONS)},
        semantic_accuracy_lower=float(shares[0]),
        semantic_accuracy_upper=float(counts[:3].sum() / n_images),
        n_images=int(n_images),
        per_image=codes,
    )


# -- registrations: the registry's wrappers of the functions above --------------------------------


class HierarchicalKParams(MetricParams):
    k: int = Field(1, ge=1, le=1000, description="Number of top predictions considered.")


class LcaDistanceParams(MetricParams):
    """Parameters of the metrics built on a distance through the lowest common ancestor."""

    lca_distance: LcaDistance = Field(
        "lca_height",
        description=(
            "the distance between the true and the predicted class through their lowest common"
            " ancestor (LCA), in hierarchy levels. lca_height (default): the LCA's height, the"
            " longest path from it down to one of its own leaves (Deng et al. 2010)."
            " max_leaf_depth_minus_lca_depth: the hierarchy's max leaf depth minus the LCA's"
            " depth (longest path from a root), the 'height of the LCA' of Bertinetto et al."
            " 2020, Making Better Mistakes; compare with their numbers only under this one."
            " The two differ wherever leaves lie at different depths"
        ),
    )


class HierarchicalKDistanceParams(LcaDistanceParams, HierarchicalKParams):
    """Parameters of the top-k metrics built on an LCA distance: ``k`` and which distance."""


class HPrecisionParams(HierarchicalKParams):
    valid: Literal["candidates", "hierarchy"] = Field(
        "candidates",
        description="labels counted in hCorrectSet: the candidate classes, or every hierarchy node",
    )


class RelationParams(MetricParams):
    relation: Literal[
        "correct", "ancestor", "descendant", "sibling", "unrelated", "semantic_upper"
    ] = Field(
        "semantic_upper",
        description="which share of top-1 predictions; sibling: a class sharing a parent with"
        " the true class; semantic_upper = correct + ancestor + descendant",
    )


def _aux(n: int, **means: float) -> dict[str, np.ndarray]:
    """Chunk means as per-image arrays, so streamed chunks average them image-weighted."""
    return {name: np.full(n, value) for name, value in means.items()}


Out = TypeVar("Out")
AtK = TypeVar("AtK", AverageHierarchicalDistance, HierarchicalRetrievalPrecision)


def _on_ranked(fn: Callable[..., Out], data: MetricInput, k: int, name: str, **options: Any) -> Out:
    """Call the hierarchical function ``fn`` on the top-``k`` ranking of metric ``name``'s input."""
    hierarchy, nodes = hierarchy_of(data, name)
    return fn(data.y_true, data.ranked(k), hierarchy=hierarchy, candidate_nodes=nodes, **options)


def _distance_details(params: LcaDistanceParams) -> dict[str, Any]:
    """``{"lca_distance": ...}`` unless it is the default LCA height: a result without the key
    used the LCA height, as every record made before the parameter existed did (so theirs and
    the default's details stay identical)."""
    return {} if params.lca_distance == "lca_height" else {"lca_distance": params.lca_distance}


def _at_k(
    fn: Callable[..., AtK], data: MetricInput, params: HierarchicalKDistanceParams
) -> tuple[AtK, MetricResult]:
    """Run a per-k hierarchical function at ``params.k`` under ``params.lca_distance``; value,
    {k, lca_distance unless the default}, per-image image-mean."""
    k = params.k
    out = _on_ranked(fn, data, k, fn.__name__, ks=[k], lca_distance=params.lca_distance)
    per_image = out.per_image[:, 0]
    details = {"k": k, **_distance_details(params)}
    return out, MetricResult(float(out.values[k]), details, image_mean(per_image, data))


def _hp(
    fn: Callable[..., Out],
    data: MetricInput,
    params: HPrecisionParams,
    ks: list[int] | None = None,
    **options: Any,
) -> Out:
    """Run an hp@k function at ``ks`` (default ``[params.k]``) over the valid labels
    ``params.valid`` names."""
    hierarchy, _ = hierarchy_of(data, fn.__name__)
    valid = None if params.valid == "candidates" else np.arange(hierarchy.n_nodes)
    ks = ks or [params.k]
    return _on_ranked(fn, data, max(ks), fn.__name__, ks=ks, valid_nodes=valid, **options)


@register_metric(
    "hierarchical_precision_at_k",
    formula=(
        "hp@k = (1/N) Σ_i |{r ≤ k : ŷ_{i,r} ∈ hCorrectSet_k(y_i)}| / k; hCorrectSet_k(y): the "
        "valid labels within the smallest hop radius of y that holds at least k of them"
    ),
    reference=(
        "Frome et al.: DeViSE: A Deep Visual-Semantic Embedding Model, NeurIPS 2013 (appendix A.3)"
    ),
    version="2",  # 2: details hold the hp@k curve at CURVE_KS (the site draws it)
    params=HPrecisionParams,
    needs_hierarchy=True,
    averaged_over="images",
    averaging_note="as in DeViSE; per_class_hierarchical_precision_at_k weighs classes equally",
    group="hierarchical",
    figure="hp_at_k_curve",
)
def _hierarchical_precision_at_k(data: MetricInput, params: HPrecisionParams) -> MetricResult:
    """DeViSE hierarchical precision hp@k, averaged over images (Frome et al. 2013, A.3)."""
    ks = curve_ks(data, params.k)
    out = _hp(hierarchical_precision_at_k, data, params, ks)
    per_image = out.per_image[:, ks.index(params.k)]
    size = float(out.mean_hcorrect_size[params.k])
    details = {
        "k": params.k,
        "valid": params.valid,
        "mean_hcorrect_size": size,
        "n_short_classes": len(out.short_classes[params.k]),
        "curve": {"k": ks, "value": [float(out.values[c]) for c in ks]},
        "_aux": _aux(len(per_image), mean_hcorrect_size=size),
    }
    return MetricResult(float(out.values[params.k]), details, image_mean(per_image, data))


@register_metric(
    "per_class_hierarchical_precision_at_k",
    formula=(
        "class-hp@k = (1/|C|) Σ_{c∈C} mean_{i∈I_c} hp@k_i (hp@k_i as in "
        "hierarchical_precision_at_k)"
    ),
    reference=(
        "Frome et al.: DeViSE: A Deep Visual-Semantic Embedding Model, NeurIPS 2013 (appendix A.3)"
    ),
    version="1",
    params=HPrecisionParams,
    needs_hierarchy=True,
    averaged_over="classes",
    averaging_note="each class's mean hp@k, then the mean of those",
    group="hierarchical",
)
def _per_class_hierarchical_precision_at_k(
    data: MetricInput, params: HPrecisionParams
) -> MetricResult:
    """DeViSE hp@k averaged over classes: the mean over classes of each class's mean hp@k."""
    out = _hp(
        per_class_hierarchical_precision_at_k, data, params, classes=np.arange(data.n_candidates)
    )
    per_image = out.per_image[:, 0]
    details = {
        "k": params.k,
        "valid": params.valid,
        "n_images": out.n_images,
        "n_excluded_classes": len(out.excluded_classes),
    }
    return MetricResult(float(out.values[params.k]), details, class_mean(per_image, data))


#: Registers a hierarchical distance: needs the hierarchy, >= 0, lower is better.
_register_distance = partial(
    register_metric,
    version="1",
    needs_hierarchy=True,
    higher_is_better=False,
    bounds=(0.0, float("inf")),
    group="hierarchical",
)


def _lca_formula(a: str, b: str) -> str:
    """How the glossary formulas of the distance metrics define ``d(a, b)``."""
    lca = f"LCA({a}, {b})"
    return (
        f"d({a}, {b}): the LCA distance the parameter lca_distance names, in hierarchy levels: "
        f"by default h({lca}), the LCA's height (longest path down to one of its own leaves, "
        f"Deng et al.); or the hierarchy's max leaf depth − depth({lca}), depth = longest path "
        "from a root (the height of the LCA of Bertinetto et al., Making Better Mistakes, CVPR "
        "2020)"
    )


@_register_distance(
    "hierarchical_cost",
    formula=(
        "hcost = (1/|C|) Σ_{c∈C} mean_{i∈I_c} cost(ŷ_i, c); cost(p, t) = 0 if p = t or p descends "
        f"from t, else d(t, p); {_lca_formula('t', 'p')}"
    ),
    reference=(
        "Deng, Berg, Li, Fei-Fei: What Does Classifying More Than 10,000 Image Categories Tell "
        "Us?, ECCV 2010"
    ),
    averaged_over="classes",
    averaging_note="each class's mean cost, then the mean of those",
    params=LcaDistanceParams,
)
def _hierarchical_cost(data: MetricInput, params: LcaDistanceParams) -> MetricResult:
    """Deng et al. hierarchical cost (LCA distance of mistakes), per class, then over classes."""
    out = _on_ranked(
        hierarchical_cost,
        data,
        1,
        "hierarchical_cost",
        classes=np.arange(data.n_candidates),
        lca_distance=params.lca_distance,
    )
    return MetricResult(
        out.value,
        {
            "n_images": out.n_images,
            "n_excluded_classes": len(out.excluded_classes),
            **_distance_details(params),
        },
        class_mean(out.per_image, data),
    )


@_register_distance(
    "mistake_severity",
    formula=(
        "severity = mean over the images whose top-1 prediction ŷ_i is wrong of d(y_i, ŷ_i) (0 "
        f"when ŷ_i descends from y_i); {_lca_formula('y_i', 'ŷ_i')}"
    ),
    reference=(
        "Bertinetto et al.: Making Better Mistakes: Leveraging Class Hierarchies with Deep "
        "Networks, CVPR 2020"
    ),
    version="2",  # 2: class values as a ratio over every image (paired tests between runs)
    averaged_over="images",
    averaging_note="only images whose top-1 prediction is wrong",
    params=LcaDistanceParams,
)
def _mistake_severity(data: MetricInput, params: LcaDistanceParams) -> MetricResult:
    """Mean LCA distance of top-1 mistakes only (Bertinetto et al. 2020)."""
    out = _on_ranked(
        mistake_severity, data, 1, "mistake_severity", lca_distance=params.lca_distance
    )
    # Runs make their mistakes on different images, so their paired tests need a summary over
    # every image: per image the cost (0 when correct) and whether it is a mistake; severity is
    # the ratio of their means.
    ratio = Decomposition(
        values=np.stack([out.per_image, out.mistakes], axis=1).astype(np.float64),
        classes=np.asarray(data.y_true),
        n_classes=data.n_candidates,
        combine="image_mean",
    )
    details = {"n_mistakes": out.n_mistakes, "n_images": out.n_images, **_distance_details(params)}
    if out.value is None:  # no mistake has a severity: report 0 rather than stop the run
        return MetricResult(0.0, details, ratio=ratio)
    return MetricResult(
        out.value, details, image_mean(out.per_image, data, out.mistakes), ratio=ratio
    )


@_register_distance(
    "average_hierarchical_distance_at_k",
    formula=(
        "AHD@k = (1/N) Σ_i (1/k) Σ_{r≤k} d(y_i, ŷ_{i,r}) (0 for the true class or a descendant); "
        f"{_lca_formula('y_i', 'ŷ')}"
    ),
    reference=(
        "Bertinetto et al.: Making Better Mistakes: Leveraging Class Hierarchies with Deep "
        "Networks, CVPR 2020"
    ),
    averaged_over="images",
    averaging_note="each image counts the mean distance of its top k predictions",
    params=HierarchicalKDistanceParams,
)
def _average_hierarchical_distance_at_k(
    data: MetricInput, params: HierarchicalKDistanceParams
) -> MetricResult:
    """Mean LCA distance between the truth and each top-k prediction (Bertinetto et al.)."""
    return _at_k(average_hierarchical_distance_at_k, data, params)[1]


@register_metric(
    "hierarchical_retrieval_precision_at_k",
    formula=(
        "hPrec@k = (1/N) Σ_i Σ_{r≤k} S(y_i, ŷ_{i,r}) / max_{|A|=k} Σ_{c∈A} S(y_i, c); S(a, b) = 1 "
        f"− d(a, b) / h(root), h(root) = max leaf depth; {_lca_formula('a', 'b')}"
    ),
    reference=(
        "Deng, Berg, Fei-Fei: Hierarchical Semantic Indexing for Large Scale Image Retrieval, CVPR "
        "2011"
    ),
    version="1",
    averaged_over="images",
    params=HierarchicalKDistanceParams,
    needs_hierarchy=True,
    group="hierarchical",
)
def _hierarchical_retrieval_precision_at_k(
    data: MetricInput, params: HierarchicalKDistanceParams
) -> MetricResult:
    """Ranking precision@k under similarity 1 - d(LCA)/h(root), relative to the best (Deng)."""
    out, result = _at_k(hierarchical_retrieval_precision_at_k, data, params)
    result.details["root_height"] = out.root_height
    return result


@register_metric(
    "prediction_relation_share",
    formula=(
        "share = (1/N) Σ_i [relation(ŷ_i, y_i) = r]; relation ∈ correct, ancestor, descendant, "
        "sibling (a shared parent), unrelated (the top-1 prediction against the true class in the "
        "hierarchy; the first that holds); semantic_upper = correct + ancestor + descendant"
    ),
    reference=(
        "A structural-bias diagnostic after Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: "
        "Optimizing Accuracy-Specificity Trade-offs in Large Scale Visual Recognition, CVPR 2012 "
        "(predicting ancestors) and Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A "
        "Comprehensive Evaluation of the Good, the Bad and the Ugly, TPAMI 2019"
    ),
    version="2",
    params=RelationParams,
    needs_hierarchy=True,
    averaged_over="images",
    group="hierarchical",
    figure="relation_shares",
)
def _prediction_relation_share(data: MetricInput, params: RelationParams) -> MetricResult:
    """Share of top-1 predictions by relation: correct, ancestor, descendant, sibling, unrelated.

    v2 tells siblings apart; a v1 record's ``unrelated`` holds them too."""
    out = _on_ranked(prediction_relations, data, 1, "prediction_relation_share")
    codes = out.per_image
    wanted = (
        codes <= RELATIONS.index("descendant")
        if params.relation == "semantic_upper"
        else codes == RELATIONS.index(params.relation)
    )
    shares = {name: float(getattr(out, name)) for name in RELATIONS}
    details: dict[str, Any] = {
        "relation": params.relation,
        **shares,
        "semantic_accuracy_lower": out.semantic_accuracy_lower,
        "semantic_accuracy_upper": out.semantic_accuracy_upper,
        "_aux": _aux(len(codes), **shares),
    }
    return MetricResult(float(wanted.mean()), details, image_mean(wanted, data))
