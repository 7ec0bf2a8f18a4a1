r"""DARTS: the accuracy-specificity trade-off of hierarchical predictions (Deng et al., CVPR 2012).

A classifier that may answer with any node of the class hierarchy -- "dog", or more safely
"canine", or "animal" -- trades specificity for accuracy. DARTS ("Dual Accuracy Reward Trade-off
Search") picks, per image, the node that maximises a Lagrangian of reward and accuracy, and tunes
the Lagrange multiplier :math:`\lambda` on validation so that a required accuracy is met.

Graph
-----
The leaf classes :math:`Y` are the candidate columns; ``candidate_nodes[j]`` is column j's
hierarchy node. DARTS works on the sub-DAG of those nodes and all their ancestors; its columns
(the :class:`DartsGraph`) are first the candidate leaves, column j for candidate column j, then
the other nodes in ascending hierarchy index. Write
:math:`\mathrm{leaves}(v)` for the *set* of candidate leaves below-or-at :math:`v`, so a node
reached from a leaf along several paths (multiple parents are normal) counts that leaf once:

.. math::

    p(v \mid x) = \sum_{y \in \mathrm{leaves}(v)} p(y \mid x), \qquad
    r_v = \log_2 |Y| - \log_2 |\mathrm{leaves}(v)|

(information gain in bits: a leaf earns :math:`\log_2 |Y|`, a node covering every leaf 0). In
matrix form ``node_posteriors = leaf_posteriors @ L`` with ``L [C, V]`` the candidate-leaf to
ancestor-or-self indicator. A *root* is a node covering every candidate leaf. When no hierarchy
node does (the candidates hang below several roots), a virtual root is appended as the last
column, with node index ``-1``.

Candidate nodes must form an antichain (no candidate is an ancestor of another): DARTS rewards
leaves, and a candidate above another would be a "leaf" that is also a coarser answer.

Posteriors
----------
Dense posteriors ``[n, C]`` must be non-negative with rows summing to 1 within ``1e-4``. Top-K
posteriors (:class:`TopKPosteriors`) give the probabilities of K candidates per image; the mass
outside them, :math:`1 - \sum_k q_{ik}`, is unknown and goes to the root only, because it
supports no more specific node. That is conservative: a node's posterior is never overstated.
Either way, a root's posterior is exactly 1, rows whose mass exceeds 1 (within the tolerance)
are scaled down to 1, and node posteriors are clipped to ``[0, 1]``. A dense row and the same
row given as top-K with K = C give the same node posteriors, to the bit. Scores that are not
posteriors become posteriors by temperature scaling [3]_ (:mod:`harness.metrics.temperature`),
the temperature fitted on validation.

Prediction and tie policy
-------------------------

.. math::

    f_\lambda(x) = \operatorname*{arg\,max}_{v} \; (r_v + \lambda)\, p(v \mid x),
    \qquad \lambda \ge 0

Ties go to the node with fewer candidate leaves (the larger reward), then to the smaller
column: a candidate leaf before any other node (a leaf and a single-child parent above it have
the same leaf set, and the leaf is the answer meant), candidate leaves by candidate column,
other nodes by hierarchy index, the virtual root last. A prediction is *correct* when
it is the true leaf or one of its ancestors, i.e. when the true leaf is in
:math:`\mathrm{leaves}(f_\lambda(x))`; its *information gain* is :math:`r_{f_\lambda(x)}` when
correct and 0 otherwise, and the *normalised* gain divides by :math:`\log_2 |Y|` (1 means the
correct leaf). At :math:`\lambda = 0` the prediction is :math:`\arg\max_v r_v p(v \mid x)`, the
most specific answer; as :math:`\lambda \to \infty` it becomes the most specific node holding the
whole posterior mass (the root unless a node's posterior is exactly 1).

Monotonicity in :math:`\lambda`
-------------------------------
Deng et al. show that accuracy is non-decreasing in :math:`\lambda` *in expectation under the
model's own posteriors*. What holds per image is weaker: for :math:`\lambda_1 < \lambda_2`,
comparing the two optimality conditions gives

.. math::

    p(f_{\lambda_2}(x) \mid x) \ge p(f_{\lambda_1}(x) \mid x), \qquad
    r_{f_{\lambda_2}(x)} \le r_{f_{\lambda_1}(x)} ,

so the model's own confidence in its answer, :math:`\frac1n \sum_i p(f_\lambda(x_i) \mid x_i)`,
never decreases. The *empirical* hierarchical accuracy on labelled images need not be monotone,
even on a tree: an image whose true leaf ``a`` is predicted at :math:`\lambda = 0` can be
predicted as a heavier sibling subtree ``B`` (not an ancestor of ``a``) for a larger
:math:`\lambda` before the root takes over (``tests/metrics/test_darts.py`` has such a case). For a
calibrated model the validation accuracy is nearly monotone, and the search below relies on that
only for *minimality*: the :math:`\lambda` it returns always satisfies the accuracy guarantee on
validation.

Choosing :math:`\lambda` (validation only)
------------------------------------------
For each target accuracy :math:`1 - \epsilon`, let :math:`k` be the number of validation images
correct at :math:`\lambda` and :math:`n` their number. The guarantee holds at :math:`\lambda` when
the one-sided Clopper-Pearson lower bound [2]_ at level ``confidence``
(:mod:`harness.metrics.binomial`) reaches the target:

.. math::

    \underline{\theta}(k, n) = B^{-1}(1 - \mathrm{confidence};\, k,\, n - k + 1) \ge 1 - \epsilon

(:math:`B^{-1}` the Beta quantile, :math:`\underline{\theta}(0, n) = 0`). The search:

1. if the guarantee holds at :math:`\lambda = 0`, take 0 (so a target of 0 always gives 0);
2. otherwise start from the bound of Deng et al.,
   :math:`\bar\lambda = (r_{\max}(1 - \epsilon) - r_{\mathrm{root}}) / \epsilon` with
   :math:`r_{\max} = \log_2 |Y|` and :math:`r_{\mathrm{root}} = 0`, which suffices for calibrated
   posteriors; while the guarantee fails there, double :math:`\bar\lambda` (over-confident models
   need more), up to :math:`2^{60} \max(r_{\max}, 1)`, where every prediction has reached its
   limit. If it never holds, the target is *not achieved*;
3. bisect ``BISECTION_STEPS`` (40) times between the last :math:`\lambda` that failed and the
   first that held, keeping the upper end, and return it: a :math:`\lambda` at which the guarantee
   holds on validation, within :math:`2^{-40}` of the bracket from the smallest such
   :math:`\lambda` when validation accuracy is monotone.

A target the lower bound cannot reach with :math:`n` images (e.g. 1.0, since
:math:`\underline{\theta}(n, n) = (1 - \mathrm{confidence})^{1/n} < 1`) is not achieved.

What is guaranteed, and where: the target holds on the *validation* images, by construction.
In the harness those are the validation classes of the validation fit, disjoint from the test
classes, and the chosen :math:`\lambda` is then applied to the test posteriors: the accuracy it
reaches on test is measured (``per_image_accuracy`` of each point; ``test_accuracy`` of the
registered ``darts_reward``), never promised, and may fall below the target when the test
classes are harder or the posteriors are calibrated differently there.

Per-image and per-class
-----------------------
The guarantee is a statement about a random image, so DARTS is a per-image metric: the curve's
``per_image_accuracy`` and ``per_image_info_gain`` (and ``area``, ``reward_at_90``) are means
over test images, as in the paper. Each point also reports the project's default, the mean over
candidate classes with test images (``per_class_accuracy``, ``per_class_info_gain``); candidate
classes without test images are excluded and listed.

Speed and memory
----------------
Rows are processed in chunks of bounded size. For the curve, each image keeps only the nodes that
can win for some :math:`\lambda \ge 0` -- those whose posterior is strictly larger than that of
every node preceding them in tie order -- which predicts exactly as the full argmax (to the bit)
and makes each validation evaluation a few passes over a short list per image.

References
----------
.. [1] J. Deng, J. Krause, A. C. Berg, L. Fei-Fei, "Hedging Your Bets: Optimizing
   Accuracy-Specificity Trade-offs in Large Scale Visual Recognition", CVPR 2012.
.. [2] C. J. Clopper, E. S. Pearson, "The use of confidence or fiducial limits illustrated in the
   case of the binomial", Biometrika 26(4), 1934.
.. [3] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern Neural Networks",
   ICML 2017 (temperature scaling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from pydantic import Field

from harness.checks import (
    BoolArray,
    FloatArray,
    IntArray,
    check_consistent_length,
    check_hierarchy,
    check_nodes,
    check_scalar,
    check_scores,
    check_targets,
    check_vector,
    row_chunks,
)
from harness.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics.base import MetricInput, MetricParams, MetricResult, register_metric
from harness.metrics.binomial import clopper_pearson_lower_bounds
from harness.metrics.registration import fit_scales, hierarchy_of, image_mean, validation_of
from harness.metrics.score_scale import carried
from harness.metrics.temperature import fit_temperature, softmax_posteriors

__all__ = [
    "BISECTION_STEPS",
    "DEFAULT_TARGETS",
    "SUM_TOLERANCE",
    "DartsCurve",
    "DartsGraph",
    "DartsPoint",
    "PredictionLevels",
    "TopKPosteriors",
    "accuracy_specificity_area",
    "accuracy_specificity_areas",
    "darts_curve",
    "darts_graph",
    "darts_node_posteriors",
    "darts_per_image",
    "darts_predict",
    "darts_prediction_levels",
]


#: Accuracy targets of the default curve, from no guarantee to 99%.
DEFAULT_TARGETS: tuple[float, ...] = (
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99,
)  # fmt: skip
#: Fixed number of bisection steps of the lambda search.
BISECTION_STEPS = 40
#: How far a posterior row's sum may exceed 1 (and, for dense rows, fall short of it).
SUM_TOLERANCE = 1e-4
# Largest leaf matrix (entries) multiplied as a dense array; larger ones stay sparse.
_DENSE_LEAF_MATRIX_LIMIT = 1 << 22
# The lambda search stops doubling here (times max(r_max, 1)): beyond, r + lambda == lambda.
_LAMBDA_CAP = 2.0**60


# ------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class TopKPosteriors:
    """Posteriors of K candidates per image; the rest of the mass is unknown.

    Attributes
    ----------
    indices : array-like of int of shape (n_images, K)
        Candidate columns, distinct within a row (their order does not matter).
    probs : array-like of float of shape (n_images, K)
        Their posterior probabilities, non-negative, each row summing to at most
        ``1 + SUM_TOLERANCE``. The remaining mass goes to the root (module docstring).
    """

    indices: npt.ArrayLike
    probs: npt.ArrayLike


@dataclass(frozen=True, eq=False)
class DartsGraph:
    """The sub-DAG DARTS predicts over: candidate leaves and all their ancestors.

    Build it with :func:`darts_graph`. Column ``v`` of node posteriors is node ``nodes[v]``.

    Attributes
    ----------
    nodes : ndarray of int64 of shape (n_columns,)
        Hierarchy node index of each column: first ``candidate_nodes`` (column j is candidate
        column j), then the other nodes in ascending index, then ``-1`` for a virtual root,
        present only when no hierarchy node covers every candidate.
    leaf_matrix : scipy.sparse.csr_array of float64 of shape (n_candidates, n_columns)
        ``leaf_matrix[j, v] = 1`` when candidate column j's node is column v's node or below it.
    n_leaves : ndarray of int64 of shape (n_columns,)
        Number of candidate leaves below-or-at each column (the column sums of ``leaf_matrix``).
    rewards : ndarray of float64 of shape (n_columns,)
        :math:`r_v = \\log_2 C - \\log_2 n_v` in bits, in ``[0, log2 C]``.
    is_leaf, is_root : ndarray of bool of shape (n_columns,)
        Columns of candidate leaves, and of nodes covering every candidate (at least one).
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


@dataclass(frozen=True)
class DartsPoint:
    """One target accuracy of :func:`darts_curve`: the validated lambda and what it does on test.

    Every field but ``target`` and ``achieved`` is None for a target not achieved.

    Attributes
    ----------
    target : float
        The accuracy the lambda must reach on validation (with the curve's confidence).
    achieved : bool
        Whether some lambda up to the search cap reaches it.
    lam : float or None
        The lambda chosen on validation.
    val_accuracy, val_lower_bound : float or None
        Its per-image accuracy on validation and the Clopper-Pearson lower bound of that.
    per_image_accuracy, per_image_info_gain : float or None
        On test: means over images of hierarchical correctness and normalised information gain.
    per_class_accuracy, per_class_info_gain : float or None
        On test: the same as means over candidate classes with test images.
    share_leaf, share_internal, share_root : float or None
        On test: the shares of predictions at candidate leaves, internal nodes and the root
        (summing to 1).
    """

    target: float
    achieved: bool
    lam: float | None = None
    val_accuracy: float | None = None
    val_lower_bound: float | None = None
    per_image_accuracy: float | None = None
    per_image_info_gain: float | None = None
    per_class_accuracy: float | None = None
    per_class_info_gain: float | None = None
    share_leaf: float | None = None
    share_internal: float | None = None
    share_root: float | None = None


@dataclass(frozen=True)
class DartsCurve:
    r"""The DARTS accuracy-specificity curve on test, one :class:`DartsPoint` per target.

    Attributes
    ----------
    points : tuple of DartsPoint
        In the order of the targets.
    area : float in [0, 1]
        :func:`accuracy_specificity_area` of the achieved points.
    reward_at_90 : float or None
        ``per_image_info_gain`` of the 0.9 target; None when 0.9 is not a target or not achieved.
    n_val, n_test, n_candidates, n_nodes : int
        Validation and test images, candidate leaves, columns of the graph.
    max_reward_bits : float
        :math:`\log_2 |Y|`.
    confidence : float
        One-sided confidence level of the validation guarantee.
    bisection_steps : int
    excluded_classes : tuple of int
        Candidate columns without test images.
    """

    points: tuple[DartsPoint, ...]
    area: float
    reward_at_90: float | None
    n_val: int
    n_test: int
    n_candidates: int
    n_nodes: int
    max_reward_bits: float
    confidence: float
    bisection_steps: int
    excluded_classes: tuple[int, ...]

    def point(self, target: float) -> DartsPoint | None:
        """The point of ``target`` (within 1e-12), None when it is not one of the targets."""
        return next((p for p in self.points if abs(p.target - target) < 1e-12), None)


@dataclass(frozen=True)
class PredictionLevels:
    """Shares of DARTS predictions at a candidate leaf, an internal node and the root."""

    leaf: float
    internal: float
    root: float


def _first_row(mask: npt.ArrayLike) -> int:
    """Position of the first True of a 1D mask (the caller knows there is one)."""
    return int(np.argmax(mask))


def _lambda(lam: Any) -> float:
    return check_scalar(lam, "lam", low=0, finite=True)


def _target_grid(targets: Any) -> tuple[float, ...]:
    """The curve's targets: a non-empty sequence of distinct accuracies in [0, 1]."""
    if isinstance(targets, str | bytes) or not isinstance(targets, Sequence | np.ndarray):
        raise MetricError(
            f"Expected `targets` to be a sequence of accuracies in [0, 1], but got {targets!r}."
        )
    values: list[float] = []
    for position, target in enumerate(list(targets)):
        value = check_scalar(target, f"targets[{position}]", low=0, high=1)
        if value in values:
            raise MetricError(
                f"Expected `targets` to hold distinct accuracies, but targets[{position}] = "
                f"{value!r} repeats targets[{values.index(value)}]."
            )
        values.append(value)
    if not values:
        raise MetricError("Expected `targets` to hold at least one accuracy, but got none.")
    return tuple(values)


# ------------------------------------------------------------------ the graph


def darts_graph(hierarchy: Hierarchy, candidate_nodes: npt.ArrayLike) -> DartsGraph:
    r"""The sub-DAG of the candidate leaves and their ancestors, with node rewards.

    .. math::

        r_v = \log_2 |Y| - \log_2 |\mathrm{leaves}(v)|

    where :math:`\mathrm{leaves}(v)` is the set of candidate leaves below-or-at :math:`v`.

    Parameters
    ----------
    hierarchy : Hierarchy
        The frozen class hierarchy (a DAG; multiple parents allowed).
    candidate_nodes : array-like of int of shape (n_candidates,)
        Hierarchy node index of each candidate column: distinct, at least two, and none an
        ancestor of another.

    Returns
    -------
    graph : DartsGraph
        Columns are the candidate nodes in candidate order, then their ancestors in ascending
        node index (then a virtual root, node ``-1``, when no node covers every candidate).

    Raises
    ------
    MetricError
        If ``hierarchy`` is not a :class:`~harness.hierarchy.Hierarchy`, or ``candidate_nodes``
        is not a 1D integer array of at least two distinct node indices in range, or one
        candidate lies below another (the message names both).

    Notes
    -----
    Built from :attr:`Hierarchy.ancestor_matrix` (cached on the hierarchy), so a node reachable
    from a leaf along several paths lists that leaf once.

    References
    ----------
    .. [1] J. Deng, J. Krause, A. C. Berg, L. Fei-Fei, "Hedging Your Bets: Optimizing
       Accuracy-Specificity Trade-offs in Large Scale Visual Recognition", CVPR 2012, Sec. 3.

    Examples
    --------
    "dog" has two parents, "pet" and "canine"; the four candidates give
    :math:`\log_2 4 = 2` bits per leaf, 1 bit for the two-leaf nodes and 0 for the root:

    >>> h = Hierarchy(
    ...     ["animal", "pet", "canine", "cat", "dog", "wolf", "fish"],
    ...     [("animal", "pet"), ("animal", "canine"), ("animal", "fish"), ("pet", "cat"),
    ...      ("pet", "dog"), ("canine", "dog"), ("canine", "wolf")],
    ... )
    >>> graph = darts_graph(h, h.indices(["cat", "dog", "wolf", "fish"]))
    >>> h.node_ids[graph.nodes].tolist()
    ['cat', 'dog', 'wolf', 'fish', 'animal', 'canine', 'pet']
    >>> graph.n_leaves.tolist(), graph.rewards.tolist()
    ([1, 1, 1, 1, 4, 2, 2], [2.0, 2.0, 2.0, 2.0, 0.0, 1.0, 1.0])
    """
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
        below = _first_row(n_candidates_above > 1)
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


def _tie_order(rewards: FloatArray) -> IntArray:
    """Columns in tie-break order: larger reward (fewer leaves) first, then smaller column."""
    return np.lexsort((np.arange(rewards.shape[0]), -rewards)).astype(np.int64)


# ------------------------------------------------------------------ posteriors


class _LeafPosteriors:
    """Checked leaf posteriors (dense or top-K), handed out as dense row blocks."""

    def __init__(
        self,
        n_candidates: int,
        dense: npt.NDArray[Any] | None = None,
        topk: tuple[IntArray, npt.NDArray[Any]] | None = None,
    ) -> None:
        self.n_candidates = n_candidates
        self.dense = dense
        self.topk = topk
        source = dense if dense is not None else topk[0] if topk is not None else None
        assert source is not None
        self.n_images = int(source.shape[0])

    def block(self, start: int, stop: int) -> FloatArray:
        """Leaf posteriors of rows ``start:stop`` as float64 ``[m, C]``, mass capped at 1."""
        if self.dense is not None:
            values = np.array(self.dense[start:stop], dtype=np.float64)
        else:
            assert self.topk is not None
            indices, probs = self.topk
            values = np.zeros((stop - start, self.n_candidates), dtype=np.float64)
            rows = np.repeat(np.arange(stop - start), indices.shape[1])
            values[rows, indices[start:stop].ravel()] = probs[start:stop].ravel()
        sums = values.sum(axis=1)
        over = sums > 1.0
        if over.any():
            values[over] /= sums[over, None]
        return values

    def blocks(self, width: int) -> list[tuple[int, int]]:
        return list(row_chunks(self.n_images, max(width, self.n_candidates)))


def _negative_row(block: FloatArray) -> int | None:
    """The first row of ``block`` holding a negative entry, or None."""
    negative = (block < 0).any(axis=1)
    return _first_row(negative) if negative.any() else None


def _check_nonnegative_and_sums(values: npt.NDArray[Any], name: str, *, dense: bool) -> None:
    for start, stop in row_chunks(values.shape[0], values.shape[1]):
        block = np.asarray(values[start:stop], dtype=np.float64)
        row = _negative_row(block)
        if row is not None:
            column = _first_row(block[row] < 0)
            raise MetricError(
                f"Expected `{name}` to hold probabilities >= 0, but row {start + row} holds "
                f"{float(block[row, column])!r} (at column {column})."
            )
        sums = block.sum(axis=1)
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE if dense else sums > 1.0 + SUM_TOLERANCE
        if bad.any():
            row = _first_row(bad)
            rule = "sum to 1" if dense else "sum to at most 1"
            raise MetricError(
                f"Expected each row of `{name}` to {rule} (within {SUM_TOLERANCE}), but row "
                f"{start + row} sums to {float(sums[row])!r}. Turn scores into posteriors with "
                "softmax_posteriors()."
            )


def _check_posteriors(posteriors: Any, n_candidates: int, name: str) -> _LeafPosteriors:
    if isinstance(posteriors, TopKPosteriors):
        return _check_topk(posteriors, n_candidates, name)
    values = check_scores(posteriors, name=name)
    if values.shape[1] != n_candidates:
        raise MetricError(
            f"Expected `{name}` to have one column per candidate ({n_candidates}), but got "
            f"{values.shape[1]} columns."
        )
    _check_nonnegative_and_sums(values, name, dense=True)
    return _LeafPosteriors(n_candidates, dense=values)


def _check_topk(posteriors: TopKPosteriors, n_candidates: int, name: str) -> _LeafPosteriors:
    indices_name, probs_name = f"{name}.indices", f"{name}.probs"
    indices = np.asarray(posteriors.indices)
    if indices.ndim != 2 or indices.dtype.kind not in "iu" or 0 in indices.shape:
        raise MetricError(
            f"Expected `{indices_name}` to be a non-empty 2D integer array of shape "
            f"(n_images, K), but got shape {indices.shape} and dtype {indices.dtype}."
        )
    indices = indices.astype(np.int64, copy=False)
    if indices.shape[1] > n_candidates:
        raise MetricError(
            f"Expected `{indices_name}` to have at most one column per candidate "
            f"({n_candidates}), but got K = {indices.shape[1]}."
        )
    probs = check_scores(posteriors.probs, name=probs_name)
    if probs.shape != indices.shape:
        raise MetricError(
            f"Expected `{probs_name}` to have the shape of `{indices_name}` {indices.shape}, "
            f"but got {probs.shape}."
        )
    out_of_range = ((indices < 0) | (indices >= n_candidates)).any(axis=1)
    if out_of_range.any():
        row = _first_row(out_of_range)
        raise MetricError(
            f"Expected `{indices_name}` to hold candidate columns in [0, {n_candidates}), but "
            f"row {row} holds {indices[row].tolist()}."
        )
    for start, stop in row_chunks(indices.shape[0], indices.shape[1]):
        ordered = np.sort(indices[start:stop], axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
        if repeats.any():
            row = _first_row(repeats)
            column = int(ordered[row, 1:][ordered[row, 1:] == ordered[row, :-1]][0])
            raise MetricError(
                f"Expected `{indices_name}` to hold distinct candidate columns in each row, but "
                f"row {start + row} repeats column {column}."
            )
    _check_nonnegative_and_sums(probs, probs_name, dense=False)
    return _LeafPosteriors(n_candidates, topk=(indices, probs))


def _node_block(
    leaves: FloatArray, graph: DartsGraph, dense_matrix: FloatArray | None
) -> FloatArray:
    """Node posteriors ``[m, V]`` of a block of leaf posteriors ``[m, C]``."""
    if dense_matrix is not None:
        nodes = leaves @ dense_matrix
    else:
        nodes = np.asarray(graph.leaf_matrix.T @ leaves.T).T
    np.clip(nodes, 0.0, 1.0, out=nodes)
    nodes[:, graph.is_root] = 1.0
    return np.ascontiguousarray(nodes)


def _dense_leaf_matrix(graph: DartsGraph) -> FloatArray | None:
    """``leaf_matrix`` as a dense array when small (a faster product), else None."""
    if graph.n_candidates * graph.n_columns <= _DENSE_LEAF_MATRIX_LIMIT:
        return np.asarray(graph.leaf_matrix.toarray(), dtype=np.float64)
    return None


def _checked_y(y_true: Any, n_candidates: int, name: str, n_rows: int, rows_name: str) -> IntArray:
    checked = check_targets(y_true, n_candidates, name)
    check_consistent_length(checked.shape[0], n_rows, name=rows_name, targets_name=name)
    return checked


def darts_node_posteriors(
    posteriors: npt.ArrayLike | TopKPosteriors, graph: DartsGraph
) -> FloatArray:
    r"""Posterior of every node of the DARTS graph: the mass of its candidate leaves.

    .. math::

        p(v \mid x_i) = \sum_{y \in \mathrm{leaves}(v)} p(y \mid x_i), \qquad
        p(\mathrm{root} \mid x_i) = 1

    Parameters
    ----------
    posteriors : array-like of shape (n_images, n_candidates) or TopKPosteriors
        Dense leaf posteriors (rows sum to 1 within ``SUM_TOLERANCE``), or top-K posteriors
        whose missing mass goes to the root.
    graph : DartsGraph
        From :func:`darts_graph`.

    Returns
    -------
    node_posteriors : ndarray of float64 of shape (n_images, n_columns)
        In ``[0, 1]``; root columns are exactly 1.

    Raises
    ------
    MetricError
        If the posteriors are malformed: not 2D, non-finite, negative, a dense row not summing to
        1 or a top-K row summing to more than 1 (within the tolerance), the wrong number of
        columns, or top-K indices out of range or repeated in a row.

    Notes
    -----
    This materialises ``[n_images, n_columns]``; :func:`darts_curve` and
    :func:`darts_per_image` work in row chunks instead.

    Examples
    --------
    With the graph of :func:`darts_graph` (columns cat, dog, wolf, fish, animal, canine, pet),
    "canine" = dog + wolf = 0.375 + 0.25 and "pet" = cat + dog = 0.125 + 0.375, while "animal"
    holds 1, not 1.375: dog is reached through both parents but counted once.

    >>> h = Hierarchy(
    ...     ["animal", "pet", "canine", "cat", "dog", "wolf", "fish"],
    ...     [("animal", "pet"), ("animal", "canine"), ("animal", "fish"), ("pet", "cat"),
    ...      ("pet", "dog"), ("canine", "dog"), ("canine", "wolf")],
    ... )
    >>> graph = darts_graph(h, h.indices(["cat", "dog", "wolf", "fish"]))
    >>> darts_node_posteriors([[0.125, 0.375, 0.25, 0.25]], graph).tolist()
    [[0.125, 0.375, 0.25, 0.25, 1.0, 0.625, 0.5]]
    """
    if not isinstance(graph, DartsGraph):
        raise MetricError(
            f"Expected `graph` to be a DartsGraph from darts_graph(), but got "
            f"{type(graph).__name__}."
        )
    leaves = _check_posteriors(posteriors, graph.n_candidates, "posteriors")
    dense_matrix = _dense_leaf_matrix(graph)
    out = np.empty((leaves.n_images, graph.n_columns), dtype=np.float64)
    for start, stop in leaves.blocks(graph.n_columns):
        out[start:stop] = _node_block(leaves.block(start, stop), graph, dense_matrix)
    return out


# ------------------------------------------------------------------ prediction


def _predict_checked(
    node_block: FloatArray, rewards: FloatArray, order: IntArray, lam: float
) -> IntArray:
    values = (rewards[order] + lam) * node_block[:, order]
    return order[np.argmax(values, axis=1)]


def darts_predict(node_posteriors: npt.ArrayLike, rewards: npt.ArrayLike, lam: float) -> IntArray:
    r"""The DARTS prediction of every image at one :math:`\lambda`.

    .. math::

        f_\lambda(x_i) = \operatorname*{arg\,max}_v \; (r_v + \lambda)\, p(v \mid x_i)

    Ties go to the larger reward (fewer candidate leaves), then to the smaller column (in a
    :class:`DartsGraph`, candidate leaves come first).

    Parameters
    ----------
    node_posteriors : array-like of float of shape (n_images, n_columns)
        Node posteriors, e.g. from :func:`darts_node_posteriors`; finite and non-negative.
    rewards : array-like of float of shape (n_columns,)
        Node rewards (:attr:`DartsGraph.rewards`); finite and non-negative.
    lam : float
        The Lagrange multiplier :math:`\lambda \ge 0`.

    Returns
    -------
    columns : ndarray of int64 of shape (n_images,)
        Predicted column of each image; ``graph.nodes[columns]`` are hierarchy node indices.

    Raises
    ------
    MetricError
        If ``node_posteriors`` is not a non-empty 2D finite non-negative array, ``rewards`` is not
        a 1D finite non-negative array with one entry per column, or ``lam`` is not a finite
        number >= 0.

    Notes
    -----
    Rows are processed in chunks of bounded size.

    References
    ----------
    .. [1] J. Deng et al., "Hedging Your Bets", CVPR 2012, Eq. 5; in full at :func:`darts_graph`.

    Examples
    --------
    Columns root (r = 0), node (r = 1), leaf (r = 2); posteriors 1, 0.625, 0.375. At
    :math:`\lambda = 0` the leaf wins (0.75 > 0.625 > 0). At 0.5 leaf and node tie at
    2.5 * 0.375 = 1.5 * 0.625 = 0.9375 and the leaf, with fewer leaves, wins. At 1 the node wins
    (1.25 > 1.125 > 1); at 2 the root (2 > 1.875 > 1.5):

    >>> p = [[1.0, 0.625, 0.375]]
    >>> [darts_predict(p, [0.0, 1.0, 2.0], lam).tolist() for lam in (0, 0.5, 1, 2)]
    [[2], [2], [1], [0]]
    """
    values = check_scores(node_posteriors, name="node_posteriors")
    reward_array = check_vector(
        rewards,
        "rewards",
        values.shape[1],
        kind="real",
        entry="column",
        among="`node_posteriors`",
        finite=True,
        low=0.0,
    )
    checked_lam = _lambda(lam)
    order = _tie_order(reward_array)
    out = np.empty(values.shape[0], dtype=np.int64)
    for start, stop in row_chunks(values.shape[0], values.shape[1]):
        block = np.asarray(values[start:stop], dtype=np.float64)
        row = _negative_row(block)
        if row is not None:
            raise MetricError(
                f"Expected `node_posteriors` to hold probabilities >= 0, but row {start + row} "
                f"holds {float(block[row].min())!r}."
            )
        out[start:stop] = _predict_checked(block, reward_array, order, checked_lam)
    return out


def _correct_lookup(graph: DartsGraph, y_true: IntArray, columns: IntArray) -> BoolArray:
    """Whether candidate ``y_true[i]`` lies below-or-at column ``columns[i]`` (vectorized)."""
    matrix = graph.leaf_matrix
    rows = np.repeat(np.arange(graph.n_candidates, dtype=np.int64), np.diff(matrix.indptr))
    keys = rows * graph.n_columns + np.asarray(matrix.indices, dtype=np.int64)
    query = y_true * graph.n_columns + columns
    position = np.minimum(np.searchsorted(keys, query), keys.shape[0] - 1)
    return np.asarray(keys[position] == query)


def darts_per_image(
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    y_true: npt.ArrayLike,
    lam: float,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> tuple[BoolArray, FloatArray]:
    r"""Per-image hierarchical correctness and normalised information gain at one :math:`\lambda`.

    .. math::

        \mathrm{correct}_i = [\, y_i \in \mathrm{leaves}(f_\lambda(x_i)) \,], \qquad
        \mathrm{gain}_i = \mathrm{correct}_i \, \frac{r_{f_\lambda(x_i)}}{\log_2 |Y|}

    Their means are the per-image hierarchical accuracy and normalised information gain of
    :func:`darts_curve`, so a bootstrap resamples these two vectors.

    Parameters
    ----------
    test_posteriors : array-like of shape (n_images, n_candidates) or TopKPosteriors
        Leaf posteriors (see :func:`darts_node_posteriors`).
    y_true : array-like of int of shape (n_images,)
        Candidate column of each image's true class.
    lam : float
        :math:`\lambda \ge 0`, e.g. a point's ``lambda`` from :func:`darts_curve`.
    hierarchy : Hierarchy
        The class hierarchy.
    candidate_nodes : array-like of int of shape (n_candidates,)
        Hierarchy node of each candidate column (see :func:`darts_graph`).

    Returns
    -------
    correct : ndarray of bool of shape (n_images,)
    gain : ndarray of float64 of shape (n_images,)
        Normalised information gain in ``[0, 1]`` (bits divided by :math:`\log_2 |Y|`), 0 where
        the prediction is wrong.

    Raises
    ------
    MetricError
        If the hierarchy, candidate nodes, posteriors, ``y_true`` or ``lam`` are malformed (see
        :func:`darts_graph`, :func:`darts_node_posteriors`, :func:`darts_predict`).

    Examples
    --------
    Two leaves a, b under root r (1 bit per leaf). Image 0 (true a, p_a = 0.75) is predicted a
    at :math:`\lambda = 0` (gain 1) and the root at 4 (4 > 5 * 0.75, gain 0); image 1 (true b,
    p_b = 0.25) is predicted a (wrong) at 0 and the root (right) at 4:

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> p = [[0.75, 0.25], [0.75, 0.25]]
    >>> kw = dict(hierarchy=h, candidate_nodes=h.indices(["a", "b"]))
    >>> correct, gain = darts_per_image(p, [0, 1], 0.0, **kw)
    >>> correct.tolist(), gain.tolist()
    ([True, False], [1.0, 0.0])
    >>> correct, gain = darts_per_image(p, [0, 1], 4.0, **kw)
    >>> correct.tolist(), gain.tolist()
    ([True, True], [0.0, 0.0])
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    leaves = _check_posteriors(test_posteriors, graph.n_candidates, "test_posteriors")
    checked_y = _checked_y(y_true, graph.n_candidates, "y_true", leaves.n_images, "test_posteriors")
    columns = _predicted_columns(leaves, graph, _lambda(lam))
    correct = _correct_lookup(graph, checked_y, columns)
    gain = np.where(correct, graph.rewards[columns] / graph.max_reward, 0.0)
    return correct, gain


def _predicted_columns(leaves: Any, graph: DartsGraph, lam: float) -> IntArray:
    dense_matrix = _dense_leaf_matrix(graph)
    order = _tie_order(graph.rewards)
    columns = np.empty(leaves.n_images, dtype=np.int64)
    for start, stop in leaves.blocks(graph.n_columns):
        block = _node_block(leaves.block(start, stop), graph, dense_matrix)
        columns[start:stop] = _predict_checked(block, graph.rewards, order, lam)
    return columns


def darts_prediction_levels(
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    lam: float,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
) -> PredictionLevels:
    r"""Shares of DARTS predictions at a leaf, an internal node and the root at one :math:`\lambda`.

    The root is a node covering every candidate leaf (or the virtual root of :func:`darts_graph`).

    Leaves a, b (reward 1 bit) under root r (reward 0), lambda = 1.5: image 0 keeps leaf a
    (2.5 * .75 > 1.5 * 1), image 1 hedges to the root (2.5 * .5 < 1.5):

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> p = [[0.75, 0.25], [0.5, 0.5]]
    >>> darts_prediction_levels(p, 1.5, hierarchy=h, candidate_nodes=h.indices(["a", "b"]))
    PredictionLevels(leaf=0.5, internal=0.0, root=0.5)
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    leaves = _check_posteriors(test_posteriors, graph.n_candidates, "test_posteriors")
    columns = _predicted_columns(leaves, graph, _lambda(lam))
    leaf, root = graph.is_leaf[columns], graph.is_root[columns]
    return PredictionLevels(
        leaf=float(np.mean(leaf)),
        internal=float(np.mean(~leaf & ~root)),
        root=float(np.mean(root)),
    )


# ------------------------------------------------------------------ the lambda search


@dataclass(frozen=True)
class _Bucket:
    """Rows with at most ``width`` contenders, padded to ``width`` (posterior -1, reward 0)."""

    rows: IntArray  # (m,)
    columns: IntArray  # (m, width)
    posteriors: FloatArray  # (m, width)
    rewards: FloatArray  # (m, width)
    correct: BoolArray  # (m, width)


class _Contenders:
    """Per image, the nodes that can win for some lambda >= 0, in tie order.

    A column is kept when its posterior is strictly larger than that of every column before it
    in tie order: an earlier column with a posterior at least as large has a value at least as
    large for every lambda >= 0 (also after rounding, which is monotone) and wins ties, so the
    dropped columns never win and the prediction equals the full argmax to the bit. The first
    column in tie order is always kept, so no row is empty. Rows are grouped by their number of
    contenders into buckets of width 1, 2, 4, ... and padded, so that one evaluation is an
    ``argmax`` per bucket and the padding (value ``-lambda <= 0``, after every real entry) never
    wins; memory stays below twice the number of contenders.
    """

    def __init__(self, leaves: _LeafPosteriors, y_true: IntArray, graph: DartsGraph) -> None:
        order = _tie_order(graph.rewards)
        dense_matrix = _dense_leaf_matrix(graph)
        parts_rows: list[IntArray] = []
        parts_cols: list[IntArray] = []
        parts_post: list[FloatArray] = []
        for start, stop in leaves.blocks(graph.n_columns):
            ordered = _node_block(leaves.block(start, stop), graph, dense_matrix)[:, order]
            running = np.maximum.accumulate(ordered, axis=1)
            keep = np.empty(ordered.shape, dtype=bool)
            keep[:, 0] = True
            keep[:, 1:] = ordered[:, 1:] > running[:, :-1]
            rows, positions = np.nonzero(keep)  # row-major: rows ascending, tie order within
            parts_rows.append(rows.astype(np.int64) + start)
            parts_cols.append(order[positions])
            parts_post.append(ordered[rows, positions])
        rows = np.concatenate(parts_rows)
        columns = np.concatenate(parts_cols)
        posteriors = np.concatenate(parts_post)
        correct = _correct_lookup(graph, y_true[rows], columns)
        n_images = leaves.n_images
        lengths = np.bincount(rows, minlength=n_images).astype(np.int64)
        starts = np.cumsum(lengths) - lengths
        rank = np.arange(rows.shape[0], dtype=np.int64) - starts[rows]  # position within row
        width_class = np.ceil(np.log2(lengths)).astype(np.int64)
        self.n_images = n_images
        self._hits: dict[float, int] = {}
        self.buckets: list[_Bucket] = []
        for klass in np.unique(width_class).tolist():
            width = 1 << klass
            bucket_rows = np.flatnonzero(width_class == klass)
            slot = np.full(n_images, -1, dtype=np.int64)
            slot[bucket_rows] = np.arange(bucket_rows.shape[0])
            entries = np.flatnonzero(width_class[rows] == klass)
            at = (slot[rows[entries]], rank[entries])
            shape = (bucket_rows.shape[0], width)
            bucket = _Bucket(
                rows=bucket_rows,
                columns=np.zeros(shape, dtype=np.int64),
                posteriors=np.full(shape, -1.0),
                rewards=np.zeros(shape),
                correct=np.zeros(shape, dtype=bool),
            )
            bucket.columns[at] = columns[entries]
            bucket.posteriors[at] = posteriors[entries]
            bucket.rewards[at] = graph.rewards[columns[entries]]
            bucket.correct[at] = correct[entries]
            self.buckets.append(bucket)

    def hits(self, lam: float) -> int:
        """Number of images whose prediction at ``lam`` is correct (memoised per lambda)."""
        if lam in self._hits:
            return self._hits[lam]
        total = 0
        for bucket in self.buckets:
            chosen = np.argmax((bucket.rewards + lam) * bucket.posteriors, axis=1)
            total += int(np.count_nonzero(np.take_along_axis(bucket.correct, chosen[:, None], 1)))
        self._hits[lam] = total
        return total

    def predict(self, lam: float) -> tuple[IntArray, BoolArray]:
        """Predicted column and its correctness for every image at ``lam``, in row order."""
        columns = np.empty(self.n_images, dtype=np.int64)
        correct = np.empty(self.n_images, dtype=bool)
        for bucket in self.buckets:
            chosen = np.argmax((bucket.rewards + lam) * bucket.posteriors, axis=1)[:, None]
            columns[bucket.rows] = np.take_along_axis(bucket.columns, chosen, 1)[:, 0]
            correct[bucket.rows] = np.take_along_axis(bucket.correct, chosen, 1)[:, 0]
        return columns, correct


def _search_lambda(
    contenders: _Contenders, needed: int, target: float, max_reward: float
) -> float | None:
    """Lambda at which at least ``needed`` validation images are correct, or None (module doc)."""
    if contenders.hits(0.0) >= needed:
        return 0.0
    epsilon = 1.0 - target
    cap = _LAMBDA_CAP * max(max_reward, 1.0)
    low = 0.0
    high = max_reward * (1.0 - epsilon) / epsilon if epsilon > 0 else max_reward
    while contenders.hits(high) < needed:
        if high >= cap:
            return None
        low, high = high, 2.0 * high
    for _ in range(BISECTION_STEPS):
        middle = low + (high - low) / 2.0
        if contenders.hits(middle) >= needed:
            high = middle
        else:
            low = middle
    return high


def _mean_over_classes(values: FloatArray, y_true: IntArray, totals: IntArray) -> float:
    sums = np.bincount(y_true, weights=values, minlength=totals.shape[0])
    present = totals > 0
    return float(np.mean(sums[present] / totals[present]))


def accuracy_specificity_area(points: Sequence[tuple[float, float]]) -> float:
    r"""Area under the accuracy-specificity curve: :math:`\int_0^1 g^*(x)\,dx` with
    :math:`g^*(x) = \max\{g_p : a_p \ge x\}` over the achieved (accuracy, gain) points.

    The best normalised information gain achievable with an accuracy of at least x (0 beyond the
    highest achieved accuracy): a step envelope, so the area lies in [0, 1], is 1 for a
    classifier that always names the correct leaf, and never rewards a missing point.

    Gain .9 up to accuracy .8, then .5 up to .95, then 0 up to 1: .8 * .9 + .15 * .5 = .795.

    >>> accuracy_specificity_area([(0.8, 0.9), (0.95, 0.5), (1.0, 0.0)])
    0.795
    """
    if not points:
        return 0.0
    ordered = sorted(points)
    area, previous = 0.0, 0.0
    for i, (accuracy, _) in enumerate(ordered):
        best = max(gain for _, gain in ordered[i:])
        area += (accuracy - previous) * best
        previous = accuracy
    return round(area, 12)


def accuracy_specificity_areas(accuracy: npt.ArrayLike, gain: npt.ArrayLike) -> FloatArray:
    """:func:`accuracy_specificity_area` of many curves at once: row b holds the points
    ``(accuracy[b, p], gain[b, p])`` (the class-level bootstrap recomputes one curve per draw).

    >>> accuracy_specificity_areas([[0.8, 0.95, 1.0], [1.0, 0.8, 0.95]],
    ...                            [[0.9, 0.5, 0.0], [0.0, 0.9, 0.5]]).tolist()
    [0.795, 0.795]
    """
    acc = np.atleast_2d(np.asarray(accuracy, dtype=np.float64))
    gains = np.atleast_2d(np.asarray(gain, dtype=np.float64))
    if acc.shape != gains.shape:
        raise MetricError(
            f"Expected `accuracy` and `gain` of one shape, but got {acc.shape} and {gains.shape}."
        )
    if acc.shape[1] == 0:
        return np.zeros(acc.shape[0])
    order = np.lexsort((gains, acc), axis=1)  # by accuracy, then gain, as sorted(points)
    acc = np.take_along_axis(acc, order, axis=1)
    gains = np.take_along_axis(gains, order, axis=1)
    best = np.maximum.accumulate(gains[:, ::-1], axis=1)[:, ::-1]  # max gain from here on
    steps = np.diff(acc, axis=1, prepend=0.0)
    return np.asarray(np.round((steps * best).sum(axis=1), 12), dtype=np.float64)


def darts_curve(
    val_posteriors: npt.ArrayLike | TopKPosteriors,
    val_y_true: npt.ArrayLike,
    test_posteriors: npt.ArrayLike | TopKPosteriors,
    test_y_true: npt.ArrayLike,
    *,
    hierarchy: Hierarchy,
    candidate_nodes: npt.ArrayLike,
    targets: Sequence[float] = DEFAULT_TARGETS,
    confidence: float = 0.95,
) -> DartsCurve:
    r"""The DARTS accuracy-specificity curve: a validated :math:`\lambda` per target, on test.

    For each target accuracy :math:`1 - \epsilon`, :math:`\lambda` is searched on the
    validation posteriors so that the one-sided Clopper-Pearson lower bound of the validation
    hierarchical accuracy reaches the target (module docstring, "Choosing lambda"). On test,
    with :math:`f = f_\lambda`:

    .. math::

        \mathrm{acc} = \frac1n \sum_i [\, y_i \in \mathrm{leaves}(f(x_i)) \,], \qquad
        \mathrm{gain} = \frac1n \sum_i [\, y_i \in \mathrm{leaves}(f(x_i)) \,]
            \frac{r_{f(x_i)}}{\log_2 |Y|}

    and ``area`` is :func:`accuracy_specificity_area` of the achieved points
    :math:`(\mathrm{acc}_t, \mathrm{gain}_t)`: the integral over accuracy x in [0, 1] of the
    best gain achieved with an accuracy of at least x (1 = always the correct leaf).

    Parameters
    ----------
    val_posteriors : array-like of shape (n_val, n_candidates) or TopKPosteriors
        Validation leaf posteriors (dense rows sum to 1; top-K missing mass goes to the root).
    val_y_true : array-like of int of shape (n_val,)
        Candidate column of each validation image's true class.
    test_posteriors : array-like of shape (n_test, n_candidates) or TopKPosteriors
        Test leaf posteriors, same candidate columns.
    test_y_true : array-like of int of shape (n_test,)
        Candidate column of each test image's true class.
    hierarchy : Hierarchy
        The class hierarchy (a DAG).
    candidate_nodes : array-like of int of shape (n_candidates,)
        Hierarchy node of each candidate column (see :func:`darts_graph`).
    targets : sequence of float, default=DEFAULT_TARGETS
        Distinct target accuracies in [0, 1]; points come out in this order.
    confidence : float, default=0.95
        One-sided confidence level of the validation guarantee, in (0, 1).

    Returns
    -------
    curve : DartsCurve
        ``points``: one :class:`DartsPoint` per target with ``target``; ``achieved`` (bool);
        ``lam``; ``val_accuracy`` (per image) and ``val_lower_bound``; on test
        ``per_image_accuracy``,
        ``per_image_info_gain``, ``per_class_accuracy``, ``per_class_info_gain`` (means over
        candidate classes with test images) and the shares of predictions at candidate leaves,
        internal nodes and the root, ``share_leaf`` + ``share_internal`` + ``share_root`` = 1.
        Every value but ``target`` and ``achieved`` is None for a target not achieved.
        ``area`` (float in [0, 1]): :func:`accuracy_specificity_area` of the achieved points.
        ``reward_at_90``: ``per_image_info_gain`` of the 0.9 target, None when 0.9 is not a
        target or not achieved. Also ``n_val``, ``n_test``, ``n_candidates``, ``n_nodes``
        (columns of the graph), ``max_reward_bits`` (:math:`\log_2 |Y|`), ``confidence``,
        ``bisection_steps`` and ``excluded_classes`` (candidate columns without test images).
        Plain Python values throughout.

    Raises
    ------
    MetricError
        If any input is malformed (see :func:`darts_graph`, :func:`darts_node_posteriors`), a
        label is out of range, the posteriors and labels disagree in length, ``targets`` is
        empty or holds a repeated value or one outside [0, 1], or ``confidence`` is not in
        (0, 1).

    Notes
    -----
    :math:`\lambda` is chosen on validation only; test labels are used for scoring alone. A
    target is not achieved when the lower bound cannot reach it with ``n_val`` images (1.0 never
    can) or no :math:`\lambda` up to the search cap reaches it (e.g. a node other than the root
    holds posterior exactly 1 for validation images it gets wrong). The search relies on the
    validation accuracy being monotone in :math:`\lambda` for minimality only; per image it need
    not be (module docstring).

    References
    ----------
    .. [1] J. Deng, J. Krause, A. C. Berg, L. Fei-Fei, "Hedging Your Bets: Optimizing
    .. [1] J. Deng et al., "Hedging Your Bets", CVPR 2012, Sec. 4-5; in full at :func:`darts_graph`.
    Examples
    --------
    Two leaves a, b under root r. At target 0 :math:`\lambda = 0` and each image gets its
    argmax leaf: image 0 (true a, p_a = 0.75) right, image 1 (true b) wrong, so accuracy and
    gain are 1/2, all predictions at leaves:

    >>> h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    >>> p = [[0.75, 0.25], [0.75, 0.25]]
    >>> curve = darts_curve(p, [0, 1], p, [0, 1], hierarchy=h,
    ...                     candidate_nodes=h.indices(["a", "b"]), targets=[0.0])
    >>> point = curve.points[0]
    >>> point.lam, point.per_image_accuracy, point.per_image_info_gain
    (0.0, 0.5, 0.5)
    >>> point.share_leaf, point.share_root, curve.area  # 0.5 * 0.5
    (1.0, 0.0, 0.25)
    """
    graph = darts_graph(hierarchy, candidate_nodes)
    n_candidates = graph.n_candidates
    checked_targets = _target_grid(targets)
    checked_confidence = check_scalar(confidence, "confidence", low=0, high=1, closed="neither")
    val = _check_posteriors(val_posteriors, n_candidates, "val_posteriors")
    val_y = _checked_y(val_y_true, n_candidates, "val_y_true", val.n_images, "val_posteriors")
    test = _check_posteriors(test_posteriors, n_candidates, "test_posteriors")
    test_y = _checked_y(test_y_true, n_candidates, "test_y_true", test.n_images, "test_posteriors")

    val_contenders = _Contenders(val, val_y, graph)
    test_contenders = _Contenders(test, test_y, graph)
    lower = clopper_pearson_lower_bounds(val.n_images, confidence=checked_confidence)
    totals = np.bincount(test_y, minlength=n_candidates).astype(np.int64)
    max_reward = graph.max_reward
    points: list[DartsPoint] = []
    for target in checked_targets:
        reachable = lower >= target
        lam = None
        if reachable.any():
            lam = _search_lambda(val_contenders, _first_row(reachable), target, max_reward)
        if lam is None:
            points.append(DartsPoint(target=target, achieved=False))
            continue
        val_hits = val_contenders.hits(lam)
        columns, correct = test_contenders.predict(lam)
        gain = np.where(correct, graph.rewards[columns] / max_reward, 0.0)
        root = graph.is_root[columns]
        leaf = graph.is_leaf[columns]
        points.append(
            DartsPoint(
                target=target,
                achieved=True,
                lam=float(lam),
                val_accuracy=val_hits / val.n_images,
                val_lower_bound=float(lower[val_hits]),
                per_image_accuracy=float(np.mean(correct)),
                per_image_info_gain=float(np.mean(gain)),
                per_class_accuracy=_mean_over_classes(correct.astype(np.float64), test_y, totals),
                per_class_info_gain=_mean_over_classes(gain, test_y, totals),
                share_leaf=float(np.mean(leaf)),
                share_internal=float(np.mean(~leaf & ~root)),
                share_root=float(np.mean(root)),
            )
        )

    achieved = [
        (p.per_image_accuracy, p.per_image_info_gain)
        for p in points
        if p.per_image_accuracy is not None and p.per_image_info_gain is not None
    ]
    area = accuracy_specificity_area(achieved)
    at_90 = [p for p in points if math.isclose(p.target, 0.9, rel_tol=0.0, abs_tol=1e-12)]
    return DartsCurve(
        points=tuple(points),
        area=area,
        reward_at_90=at_90[0].per_image_info_gain if at_90 else None,
        n_val=val.n_images,
        n_test=test.n_images,
        n_candidates=n_candidates,
        n_nodes=graph.n_columns,
        max_reward_bits=max_reward,
        confidence=checked_confidence,
        bisection_steps=BISECTION_STEPS,
        excluded_classes=tuple(np.flatnonzero(totals == 0).tolist()),
    )


# -- registrations: the registry's wrappers of the functions above --------------------------------


class DartsParams(MetricParams):
    posterior: Literal["softmax", "as_is"] = Field(
        "softmax",
        description="softmax: scores -> posteriors with a temperature fitted on validation"
        " (negative log-likelihood); as_is: the scores already are posteriors",
    )
    target: float = Field(
        0.9,
        gt=0,
        lt=1,
        description="darts_reward: accuracy that lambda must reach on the validation classes"
        " (95% Clopper-Pearson lower bound); test accuracy is reported, not guaranteed",
    )


@dataclass(frozen=True)
class _DartsTarget:
    """One achieved target: its lambda (chosen on validation) and what it does per test image."""

    target: float
    lam: float
    correct: np.ndarray
    gain: np.ndarray
    levels: PredictionLevels


@dataclass(frozen=True)
class _DartsRun:
    temperature: float | None  # fitted on the validation fit's scores
    test_temperature: float | None  # the same, in the main fit's score units
    targets: tuple[_DartsTarget, ...]
    val_curve: DartsCurve


def _darts(data: MetricInput, params: DartsParams, name: str) -> _DartsRun:
    hierarchy, nodes = hierarchy_of(data, name)
    val = validation_of(data, name)
    assert data.scores is not None and val.scores is not None
    temperature = test_temperature = None
    if params.posterior == "softmax":
        # The temperature is a score unit: chosen on the validation fit, it reaches the main
        # fit's scores in units of each fit's score scale (harness.metrics.score_scale).
        scale_val, scale = fit_scales(data, val, name)
        temperature = fit_temperature(val.scores, val.y_true)
        test_temperature = carried(temperature, chosen_scale=scale_val, applied_scale=scale)
        val_post = softmax_posteriors(val.scores, temperature)
        test_post = softmax_posteriors(data.scores, test_temperature)
    else:
        val_post, test_post = val.scores, data.scores
    val_nodes = hierarchy_of(val, name)[1]
    targets = tuple(sorted({*DEFAULT_TARGETS, params.target}))
    # lambda is searched on validation predictions, whose candidates (validation classes) differ
    # from the test candidates: the search runs on the validation graph, the evaluation on test.
    val_curve = darts_curve(
        val_post,
        val.y_true,
        val_post,
        val.y_true,
        hierarchy=hierarchy,
        candidate_nodes=val_nodes,
        targets=targets,
    )
    lambdas = [(p.target, p.lam) for p in val_curve.points if p.lam is not None]
    per_target = []
    for target, lam in lambdas:
        correct, gain = darts_per_image(
            test_post, data.y_true, lam, hierarchy=hierarchy, candidate_nodes=nodes
        )
        levels = darts_prediction_levels(test_post, lam, hierarchy=hierarchy, candidate_nodes=nodes)
        per_target.append(_DartsTarget(target, lam, correct, gain, levels))
    return _DartsRun(temperature, test_temperature, tuple(per_target), val_curve)


def _darts_details(out: _DartsRun) -> dict[str, Any]:
    return {
        "temperature": out.temperature,
        "test_temperature": out.test_temperature,
        "lambda_chosen_on": "validation",
        "curve": [
            {
                "target": t.target,
                "lambda": t.lam,
                "accuracy": float(t.correct.mean()),
                "info_gain": float(t.gain.mean()),
                "share_leaf": t.levels.leaf,
                "share_internal": t.levels.internal,
                "share_root": t.levels.root,
            }
            for t in out.targets
        ],
    }


#: Registers a DARTS metric: dense scores, hierarchy and validation predictions, one pass.
_register_darts = partial(
    register_metric,
    version="2",  # 2: the softmax temperature reaches the main fit in its score units
    averaged_over="images",
    params=DartsParams,
    inputs=("dense",),
    needs_hierarchy=True,
    needs_validation=True,
    chunkable=False,
    group="darts",
)


def _resampling_groups(data: MetricInput) -> np.ndarray | None:
    """Groups the class-level bootstrap resamples within: seen and unseen classes in GZSL (as
    the H decomposition's), one group in ZSL (as every class-mean decomposition's)."""
    if data.setting != "gzsl":
        return None
    return (~np.asarray(data.seen, dtype=bool)).astype(np.int64)


@_register_darts(
    "darts_area",
    formula=(
        "area = ∫_0^1 g*(x) dx, g*(x) = max{gain_p : accuracy_p ≥ x} over the curve's points; each "
        "point: predict the deepest node whose posterior-weighted reward (gain + λ) is highest, λ "
        "chosen on validation for a target accuracy; gain = normalised information gain, 1 − "
        "log(#leaves under the prediction)/log(#classes) when correct, 0 when wrong"
    ),
    reference=(
        "Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: Optimizing Accuracy-Specificity "
        "Trade-offs in Large Scale Visual Recognition, CVPR 2012"
    ),
    # 2: per-class hits and gains on the curve's points (paired tests); 3: the softmax
    # temperature reaches the main fit in its score units
    version="3",
    averaging_note="a curve point's accuracy and gain; its lambda is chosen on validation",
    figure="darts_curve",
)
def _dartsaccuracy_specificity_area(data: MetricInput, params: DartsParams) -> MetricResult:
    """Area under the DARTS accuracy-information gain curve (Deng et al. 2012), lambda on val."""
    # here, not at the top: harness.metrics.comparison imports this module
    from harness.metrics.comparison import darts_class_values

    out = _darts(data, params, "darts_area")

    def resample(idx: np.ndarray) -> float:
        return accuracy_specificity_area(
            [(float(t.correct[idx].mean()), float(t.gain[idx].mean())) for t in out.targets]
        )

    value = accuracy_specificity_area(
        [(float(t.correct.mean()), float(t.gain.mean())) for t in out.targets]
    )
    n_points = len(out.targets)
    summary = darts_class_values(
        data.y_true,
        np.asarray([t.correct for t in out.targets]).reshape(n_points, -1),
        np.asarray([t.gain for t in out.targets]).reshape(n_points, -1),
        n_classes=data.n_candidates,
        groups=_resampling_groups(data),
    )
    return MetricResult(value, _darts_details(out), resample=resample, class_values=summary)


@_register_darts(
    "darts_reward",
    formula=(
        "the mean normalised information gain on the test images at the λ with which the "
        "validation images reach `target` accuracy (95 % lower confidence bound)"
    ),
    reference=(
        "Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: Optimizing Accuracy-Specificity "
        "Trade-offs in Large Scale Visual Recognition, CVPR 2012"
    ),
    averaging_note=(
        "the target accuracy holds on validation images only; the test accuracy reached is"
        " stored (test_accuracy) and shown beside the reward"
    ),
    figure="darts_operating_point",
)
def _darts_reward(data: MetricInput, params: DartsParams) -> MetricResult:
    """DARTS normalised information gain on test at an accuracy target met on validation only.

    lambda is the one at which the validation images reach ``target`` accuracy (with 95%
    confidence); applied to the test images it reaches ``test_accuracy``, which may fall below
    the target: the details say which, and the site shows it beside the reward.
    """
    out = _darts(data, params, "darts_reward")
    match = [t for t in out.targets if abs(t.target - params.target) < 1e-12]
    val_point = out.val_curve.point(params.target)
    if not match or val_point is None:
        raise MetricError(
            f"Expected the validation target accuracy {params.target} to be reachable on the"
            " validation images, but no lambda achieves it"
        )
    chosen = match[0]
    assert val_point.val_accuracy is not None and val_point.val_lower_bound is not None
    test_accuracy = float(chosen.correct.mean())
    details = {
        **_darts_details(out),
        "target": params.target,
        "target_on": "validation",
        "lambda": chosen.lam,
        "val_accuracy": float(val_point.val_accuracy),
        "val_lower_bound": float(val_point.val_lower_bound),
        "confidence": float(out.val_curve.confidence),
        "test_accuracy": test_accuracy,
        "test_reaches_target": test_accuracy >= params.target,
    }
    return MetricResult(float(chosen.gain.mean()), details, image_mean(chosen.gain, data))
