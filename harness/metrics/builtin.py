"""The built-in metrics, registered by name: thin wrappers from :class:`MetricInput` to the
functional API, each returning a JSON-serializable :class:`MetricResult` with a per-image
decomposition (for bootstrap intervals and streamed top-K scoring) or a resampling function.

Registration is explicit (this module is imported by :mod:`harness.metrics`); a wrapper never
computes anything the functional API does not, it only selects inputs and shapes outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import Field

from harness.errors import MetricError
from harness.hierarchy import Hierarchy, LcaDistance
from harness.metrics.base import (
    MetricInput,
    MetricParams,
    MetricResult,
    register_metric,
)
from harness.metrics.calibrated_stacking import (
    CalibratedAccuracies,
    SeenUnseenCurve,
    area_under_seen_unseen_curve,
    calibrated_harmonic_mean,
    calibrated_stacking_curve_from_margins,
    per_image_correct_at_gamma,
    select_gamma,
    stacking_margins,
)
from harness.metrics.comparison import darts_class_values, seen_unseen_class_values
from harness.metrics.darts import (
    DEFAULT_TARGETS,
    DartsCurve,
    PredictionLevels,
    accuracy_specificity_area,
    darts_curve,
    darts_per_image,
    darts_prediction_levels,
)
from harness.metrics.decomposition import Decomposition, point_estimate
from harness.metrics.flat import (
    PerClassAccuracy,
    per_class_top_k_accuracy_details,
    rivals_at_least,
    rivals_at_least_from_topk,
    top_k_correct,
    top_k_correct_from_topk,
)
from harness.metrics.gzsl import GzslAccuracyDetails, gzsl_accuracies_details
from harness.metrics.hierarchical import (
    RELATIONS,
    AverageHierarchicalDistance,
    HierarchicalRetrievalPrecision,
    average_hierarchical_distance_at_k,
    hierarchical_cost,
    hierarchical_precision_at_k,
    hierarchical_retrieval_precision_at_k,
    mistake_severity,
    per_class_hierarchical_precision_at_k,
    prediction_relations,
)
from harness.metrics.score_scale import carried
from harness.metrics.temperature import fit_temperature, softmax_posteriors


class TopKParams(MetricParams):
    """Parameters of the top-k accuracies: how many top candidates count."""

    k: int = Field(1, ge=1, description="How many top-scoring candidates count as a hit.")


# -- shared helpers -------------------------------------------------------------------------------


def _class_ids(data: MetricInput) -> list[Any]:
    candidates = np.asarray(data.candidates)
    scores = data.scores
    n = scores.shape[1] if scores is not None and np.ndim(scores) == 2 else candidates.shape[0]
    if candidates.ndim != 1 or candidates.shape[0] != n:
        raise MetricError(
            f"Expected `candidates` to list one class id per score column ({n}), "
            f"but got shape {candidates.shape}."
        )
    return candidates.tolist()


def _require_setting(data: MetricInput, name: str, settings: tuple[str, ...]) -> None:
    if data.setting not in settings:
        raise MetricError(
            f"Expected setting to be one of {list(settings)} for metric '{name}', "
            f"but got '{data.setting}'."
        )


def _per_class_by_id(details: PerClassAccuracy, ids: list[Any]) -> dict[str, Any]:
    """A per-class accuracy's record details, keyed by candidate class ids, not columns."""
    return {
        "per_class": {
            str(ids[column]): value
            for column, value in zip(details.classes, details.per_class, strict=True)
        },
        "excluded_classes": [ids[column] for column in details.excluded_classes],
        "n_images": details.n_images,
    }


def _correct(data: MetricInput, k: int) -> np.ndarray:
    """Top-k correctness per image from dense scores or top-K lists (one tie policy)."""
    if data.scores is not None:
        return top_k_correct(data.y_true, data.scores, k=k)
    assert data.topk_indices is not None and data.topk_scores is not None
    return top_k_correct_from_topk(data.y_true, data.topk_indices, data.topk_scores, k=k)


def _rivals(data: MetricInput) -> np.ndarray:
    """Per image, the other candidates scoring at least its true class: top-k correct at every k
    in one pass (``_rivals(data) < k`` is :func:`_correct`)."""
    if data.scores is not None:
        return rivals_at_least(data.y_true, data.scores)
    assert data.topk_indices is not None and data.topk_scores is not None
    return rivals_at_least_from_topk(data.y_true, data.topk_indices, data.topk_scores)


def _mean(
    values: np.ndarray,
    data: MetricInput,
    mask: np.ndarray | None = None,
    *,
    combine: Literal["class_mean", "image_mean"],
) -> Decomposition:
    """The decomposition of a mean of per-image ``values`` (those under ``mask``, if given)."""
    keep = slice(None) if mask is None else mask
    return Decomposition(
        values=np.asarray(values, dtype=np.float64)[keep],
        classes=np.asarray(data.y_true)[keep],
        n_classes=data.n_candidates,
        combine=combine,
    )


def _class_mean(
    values: np.ndarray, data: MetricInput, mask: np.ndarray | None = None
) -> Decomposition:
    return _mean(values, data, mask, combine="class_mean")


def _image_mean(
    values: np.ndarray, data: MetricInput, mask: np.ndarray | None = None
) -> Decomposition:
    return _mean(values, data, mask, combine="image_mean")


# -- flat -----------------------------------------------------------------------------------------


@register_metric(
    "per_class_top_k_accuracy",
    formula=(
        "acc@k = (1/|C|) Σ_{c∈C} (1/|I_c|) Σ_{i∈I_c} [y_i ∈ top_k(i)]; C: candidate classes with "
        "test images, I_c: test images of class c, top_k(i): the k highest-scoring candidates of "
        "image i"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    version="2",  # 2: details hold the top-k curve at CURVE_KS (the site draws it)
    params=TopKParams,
    averaged_over="classes",
    group="flat",
    figure="top_k_curve",
    checked_against_chance=True,
)
def _per_class_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Mean over candidate classes with test images of per-class top-k accuracy."""
    ids = _class_ids(data)
    correct = _correct(data, params.k)
    decomposition = _class_mean(correct, data)
    rivals = _rivals(data)
    ks = curve_ks(data, params.k)
    curve = [float(np.asarray(point_estimate(_class_mean(rivals < k, data)))) for k in ks]
    details: dict[str, Any] = {"k": params.k, "curve": {"k": ks, "value": curve}}
    if data.scores is not None:
        per_class = per_class_top_k_accuracy_details(
            data.y_true, data.scores, classes=np.arange(data.n_candidates), k=params.k
        )
        details.update(_per_class_by_id(per_class, ids))
        value = float(per_class.value)
    else:
        value = float(np.asarray(point_estimate(decomposition)))
    return MetricResult(value, details, decomposition)


@register_metric(
    "per_image_top_k_accuracy",
    formula="acc@k = (1/N) Σ_i [y_i ∈ top_k(i)] over the N test images",
    reference=(
        "Standard flat hit@k, as reported beside hp@k in Frome et al.: DeViSE: A Deep "
        "Visual-Semantic Embedding Model, NeurIPS 2013 (appendix A.3)"
    ),
    version="1",
    params=TopKParams,
    averaged_over="images",
    group="flat",
)
def _per_image_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Fraction of test images whose true class is among the top k candidates (per image)."""
    correct = _correct(data, params.k)
    return MetricResult(
        float(np.mean(correct)),
        {"k": params.k, "n_images": int(correct.shape[0]), "n_correct": int(correct.sum())},
        _image_mean(correct, data),
    )


# -- GZSL -----------------------------------------------------------------------------------------


def _gzsl(
    data: MetricInput, params: TopKParams, name: str
) -> tuple[GzslAccuracyDetails, list[Any], np.ndarray]:
    _require_setting(data, name, ("gzsl",))
    if data.scores is None:
        raise MetricError(f"Expected dense scores for metric '{name}', but got top-K predictions")
    details = gzsl_accuracies_details(data.y_true, data.scores, seen=data.seen, k=params.k)
    return details, _class_ids(data), _correct(data, params.k)


def _gzsl_h(correct: np.ndarray, data: MetricInput) -> Decomposition:
    """H as the harmonic mean of the seen and the unseen per-class means of ``correct``."""
    return Decomposition.for_gzsl(
        correct.astype(np.float64), np.asarray(data.y_true), seen=np.asarray(data.seen, dtype=bool)
    )


#: Registers a GZSL top-k accuracy: dense scores only, averaged over classes.
_register_gzsl = partial(
    register_metric,
    version="1",
    params=TopKParams,
    settings=("gzsl",),
    inputs=("dense",),
    averaged_over="classes",
    group="gzsl",
)


def _gzsl_group(data: MetricInput, params: TopKParams, name: str, *, unseen: bool) -> MetricResult:
    """The seen (or unseen) accuracy, its per-class details and its class-mean decomposition."""
    details, ids, correct = _gzsl(data, params, name)
    group = details.unseen if unseen else details.seen
    image_seen = np.asarray(data.seen)[data.y_true]
    return MetricResult(
        group.value,
        {**_per_class_by_id(group, ids), "k": details.k},
        _class_mean(correct, data, ~image_seen if unseen else image_seen),
    )


@_register_gzsl(
    "gzsl_seen_accuracy",
    formula=(
        "acc_S = per-class top-k accuracy over the test_seen images, each ranked among all seen ∪ "
        "unseen candidates"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="seen classes only",
    short_name="s",
    short_description="accuracy on the seen classes' test images",
)
def _gzsl_seen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL seen accuracy: per-class top-k accuracy over seen classes, all candidates ranked."""
    return _gzsl_group(data, params, "gzsl_seen_accuracy", unseen=False)


@_register_gzsl(
    "gzsl_unseen_accuracy",
    formula=(
        "acc_U = per-class top-k accuracy over the test_unseen images, each ranked among all seen "
        "∪ unseen candidates"
    ),
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="unseen classes only",
    short_name="u",
    short_description="accuracy on the unseen classes' test images",
    checked_against_chance=True,
)
def _gzsl_unseen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL unseen accuracy: per-class top-k accuracy over unseen classes, all candidates ranked."""
    return _gzsl_group(data, params, "gzsl_unseen_accuracy", unseen=True)


@_register_gzsl(
    "gzsl_harmonic_mean",
    formula="H = 2 · acc_S · acc_U / (acc_S + acc_U); 0 when either is 0",
    reference=(
        "Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A Comprehensive Evaluation of the "
        "Good, the Bad and the Ugly, TPAMI 2019"
    ),
    averaging_note="harmonic mean of the seen and the unseen per-class means",
    short_name="H",
    short_description="harmonic mean of u and s",
    checked_against_chance=True,
)
def _gzsl_harmonic_mean(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL harmonic mean H of the seen and unseen accuracies (0 when either is 0)."""
    details, _, correct = _gzsl(data, params, "gzsl_harmonic_mean")
    decomposition = _gzsl_h(correct, data)
    return MetricResult(
        details.harmonic_mean,
        {"seen": details.seen.value, "unseen": details.unseen.value, "k": details.k},
        decomposition,
    )


# -- hierarchical ---------------------------------------------------------------------------------


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
    relation: Literal["correct", "ancestor", "descendant", "unrelated", "semantic_upper"] = Field(
        "semantic_upper",
        description="which share of top-1 predictions;"
        " semantic_upper = correct + ancestor + descendant",
    )


def _hier(data: MetricInput, name: str) -> tuple[Hierarchy, np.ndarray]:
    if data.hierarchy is None or data.candidate_nodes is None:
        raise MetricError(f"Expected a hierarchy for metric '{name}', but the benchmark has none")
    return data.hierarchy, np.asarray(data.candidate_nodes)


def _aux(n: int, **means: float) -> dict[str, np.ndarray]:
    """Chunk means as per-image arrays, so streamed chunks average them image-weighted."""
    return {name: np.full(n, value) for name, value in means.items()}


Out = TypeVar("Out")
AtK = TypeVar("AtK", AverageHierarchicalDistance, HierarchicalRetrievalPrecision)


def _on_ranked(fn: Callable[..., Out], data: MetricInput, k: int, name: str, **options: Any) -> Out:
    """Call the hierarchical function ``fn`` on the top-``k`` ranking of metric ``name``'s input."""
    hierarchy, nodes = _hier(data, name)
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
    return out, MetricResult(float(out.values[k]), details, _image_mean(per_image, data))


#: The k of the top-k and hp@k curves a run's details hold (and the site draws), where the
#: candidates (and a top-K file's K) allow: the one or two k a spec scores make a line, not a
#: curve.
CURVE_KS = (1, 2, 5, 10, 20)


def curve_ks(data: MetricInput, k: int) -> list[int]:
    """:data:`CURVE_KS` below the number of candidates (ranking every candidate puts all of them
    in the top k: hp@k is then 1 whatever the scores) and up to K of top-K predictions, and
    ``k``."""
    n, K = data.n_candidates, None
    if data.topk_indices is not None:
        K = int(np.shape(data.topk_indices)[1])
    return sorted({k, *(c for c in CURVE_KS if c < n and (K is None or c <= K))})


def _hp(
    fn: Callable[..., Out],
    data: MetricInput,
    params: HPrecisionParams,
    ks: list[int] | None = None,
    **options: Any,
) -> Out:
    """Run an hp@k function at ``ks`` (default ``[params.k]``) over the valid labels
    ``params.valid`` names."""
    hierarchy, _ = _hier(data, fn.__name__)
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
    return MetricResult(float(out.values[params.k]), details, _image_mean(per_image, data))


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
    return MetricResult(float(out.values[params.k]), details, _class_mean(per_image, data))


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
        _class_mean(out.per_image, data),
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
        out.value, details, _image_mean(out.per_image, data, out.mistakes), ratio=ratio
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
        "unrelated (the top-1 prediction against the true class in the hierarchy); semantic_upper "
        "= correct + ancestor + descendant"
    ),
    reference=(
        "A structural-bias diagnostic after Deng, Krause, Berg, Fei-Fei: Hedging Your Bets: "
        "Optimizing Accuracy-Specificity Trade-offs in Large Scale Visual Recognition, CVPR 2012 "
        "(predicting ancestors) and Xian, Lampert, Schiele, Akata: Zero-Shot Learning — A "
        "Comprehensive Evaluation of the Good, the Bad and the Ugly, TPAMI 2019"
    ),
    version="1",
    params=RelationParams,
    needs_hierarchy=True,
    averaged_over="images",
    group="hierarchical",
    figure="relation_shares",
)
def _prediction_relation_share(data: MetricInput, params: RelationParams) -> MetricResult:
    """Share of top-1 predictions that are correct / an ancestor / a descendant / unrelated."""
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
    return MetricResult(float(wanted.mean()), details, _image_mean(wanted, data))


# -- calibrated stacking (GZSL, gamma chosen on validation predictions) ----------------------------

CURVE_POINTS = 400


def _validation(data: MetricInput, name: str) -> MetricInput:
    if data.validation is None or data.validation.scores is None:
        raise MetricError(
            f"Expected validation predictions for metric '{name}', but got none; the bundle's"
            " validation fit provides them"
        )
    return data.validation


def _fit_scales(data: MetricInput, val: MetricInput, name: str) -> tuple[float, float]:
    """(validation fit's, main fit's) score scale, which carry a value chosen on the validation
    fit's scores to the main fit's (:mod:`harness.metrics.score_scale`)."""
    if val.score_scale is None or data.score_scale is None:
        raise MetricError(
            f"Expected both fits' score scales for metric '{name}' (their predictions on the"
            " scale images: settings 'scale' and 'scale_val'), but got none"
        )
    return val.score_scale, data.score_scale


def _thin(curve: SeenUnseenCurve) -> dict[str, Any]:
    """The curve's operating points for plotting, at most CURVE_POINTS of them (ends kept)."""
    seen, unseen = curve.seen_accuracy, curve.unseen_accuracy
    keep = np.unique(
        np.linspace(0, len(seen) - 1, min(len(seen), CURVE_POINTS)).round().astype(int)
    )
    return {
        "seen": [round(float(v), 6) for v in seen[keep]],
        "unseen": [round(float(v), 6) for v in unseen[keep]],
        "n_points": len(seen),
    }


@register_metric(
    "ausuc",
    formula=(
        "AUSUC = ∫ acc_S d acc_U along the seen–unseen curve traced by predicting argmax_c (s_ic − "
        "γ·[c seen]) as γ sweeps the real line"
    ),
    reference=(
        "Chao, Changpinyo, Gong, Sha: An Empirical Study and Analysis of Generalized Zero-Shot "
        "Learning for Object Recognition in the Wild, ECCV 2016"
    ),
    version="2",  # 2: per-class hits on the curve's points (paired tests between runs)
    averaged_over="classes",
    averaging_note="the curve traces the seen and the unseen per-class means",
    group="gzsl",
    figure="seen_unseen_curve",
    params=MetricParams,
    settings=("gzsl",),
    inputs=("dense",),
    chunkable=False,
)
def _ausuc(data: MetricInput, params: MetricParams) -> MetricResult:
    """Area under the seen-unseen accuracy curve of calibrated stacking (Chao et al. 2016)."""
    _require_setting(data, "ausuc", ("gzsl",))
    assert data.scores is not None
    seen = np.asarray(data.seen, dtype=bool)
    margin, group_correct = stacking_margins(data.y_true, data.scores, seen=seen)
    curve = calibrated_stacking_curve_from_margins(data.y_true, margin, group_correct, seen=seen)
    y_true = np.asarray(data.y_true)

    def resample(idx: np.ndarray) -> float:
        return area_under_seen_unseen_curve(
            calibrated_stacking_curve_from_margins(
                y_true[idx], margin[idx], group_correct[idx], seen=seen
            )
        )

    return MetricResult(
        area_under_seen_unseen_curve(curve),
        {"curve": _thin(curve)},
        resample=resample,
        class_values=seen_unseen_class_values(y_true, margin, group_correct, seen=seen),
    )


@dataclass(frozen=True)
class _Calibrated:
    accuracies: CalibratedAccuracies
    correct: np.ndarray  # per test image, at the applied gamma
    gamma_validation: float  # chosen on the validation fit's scores, in its units
    gamma: float  # the same gamma in the main fit's units, applied to its test scores
    scale_validation: float
    scale: float


def _calibrated(data: MetricInput, name: str) -> _Calibrated:
    _require_setting(data, name, ("gzsl",))
    val = _validation(data, name)
    assert data.scores is not None and val.scores is not None
    scale_val, scale = _fit_scales(data, val, name)
    chosen = select_gamma(val.y_true, val.scores, val_seen=val.seen)
    gamma = carried(chosen, chosen_scale=scale_val, applied_scale=scale)
    out = calibrated_harmonic_mean(data.y_true, data.scores, seen=data.seen, gamma=gamma)
    correct = per_image_correct_at_gamma(data.y_true, data.scores, seen=data.seen, gamma=gamma)
    return _Calibrated(out, correct, chosen, gamma, scale_val, scale)


#: The paper calibrated stacking and AUSUC come from (their glossary reference).
CHAO_2016 = (
    "Chao, Changpinyo, Gong, Sha: An Empirical Study and Analysis of Generalized Zero-Shot"
    " Learning for Object Recognition in the Wild, ECCV 2016"
)


def _register_calibrated(key: str, name: str, doc: str, formula: str) -> None:
    def compute(data: MetricInput, params: MetricParams) -> MetricResult:
        run = _calibrated(data, name)
        out, correct = run.accuracies, run.correct
        image_seen = np.asarray(data.seen, dtype=bool)[data.y_true]
        if key == "harmonic_mean":
            decomposition = _gzsl_h(correct, data)
        else:
            decomposition = _class_mean(correct, data, image_seen if key == "seen" else ~image_seen)
        details = {
            "gamma": run.gamma,
            "seen": float(out.seen),
            "unseen": float(out.unseen),
            "harmonic_mean": float(out.harmonic_mean),
            "gamma_chosen_on": "validation",
            "gamma_validation": run.gamma_validation,
            "score_scale": run.scale,
            "score_scale_validation": run.scale_validation,
        }
        return MetricResult(float(getattr(out, key)), details, decomposition)

    compute.__doc__ = doc
    register_metric(
        name,
        version="2",  # 2: gamma reaches the main fit in units of each fit's score scale
        averaged_over="classes",
        group="gzsl",
        formula=formula,
        reference=CHAO_2016,
        averaging_note=(
            "harmonic mean of the seen and the unseen per-class means"
            if key == "harmonic_mean"
            else f"{key} classes only"
        ),
        settings=("gzsl",),
        inputs=("dense",),
        needs_validation=True,
        chunkable=False,
    )(compute)


_register_calibrated(
    "harmonic_mean",
    "calibrated_harmonic_mean",
    "GZSL H after calibrated stacking with gamma chosen on validation predictions (Chao et al.).",
    "H(γ*), γ* = argmax_γ H on the validation predictions; test images predict"
    " argmax_c (s_ic − γ*·(σ_main/σ_val)·[c seen]), σ a fit's score scale on the scale images",
)
_register_calibrated(
    "seen",
    "calibrated_seen_accuracy",
    "GZSL seen accuracy after calibrated stacking with gamma chosen on validation predictions.",
    "acc_S(γ*·σ_main/σ_val), γ* = argmax_γ H on the validation predictions, σ a fit's score"
    " scale on the scale images",
)
_register_calibrated(
    "unseen",
    "calibrated_unseen_accuracy",
    "GZSL unseen accuracy after calibrated stacking with gamma chosen on validation predictions.",
    "acc_U(γ*·σ_main/σ_val), γ* = argmax_γ H on the validation predictions, σ a fit's score"
    " scale on the scale images",
)


# -- DARTS (accuracy-specificity trade-off, lambda chosen on validation predictions) --------------


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
    hierarchy, nodes = _hier(data, name)
    val = _validation(data, name)
    assert data.scores is not None and val.scores is not None
    temperature = test_temperature = None
    if params.posterior == "softmax":
        # The temperature is a score unit: chosen on the validation fit, it reaches the main
        # fit's scores in units of each fit's score scale (harness.metrics.score_scale).
        scale_val, scale = _fit_scales(data, val, name)
        temperature = fit_temperature(val.scores, val.y_true)
        test_temperature = carried(temperature, chosen_scale=scale_val, applied_scale=scale)
        val_post = softmax_posteriors(val.scores, temperature)
        test_post = softmax_posteriors(data.scores, test_temperature)
    else:
        val_post, test_post = val.scores, data.scores
    val_nodes = _hier(val, name)[1]
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
    return MetricResult(float(chosen.gain.mean()), details, _image_mean(chosen.gain, data))
