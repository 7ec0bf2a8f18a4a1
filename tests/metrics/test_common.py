"""Common tests for every metric in the ``harness.metrics`` registry.

Note to developers: a new registered metric is picked up here automatically, and
``test_every_registered_metric_is_classified`` fails until you add its name to ``ALL_METRICS``
and to every property set below that it satisfies (or, if it satisfies none, only to
``ALL_METRICS`` with a comment saying why). The invariance tests loop over those sets, so a new
metric gets its checks by joining the right sets, not by copying tests. Sets that mirror a
registration flag (``HIERARCHICAL``, ``NEEDS_VALIDATION``, ``CHUNKABLE``, ``DENSE_ONLY``,
``LOWER_IS_BETTER``, ``K_PARAM_METRICS``) are checked against the registry, and
``DECOMPOSABLE``/``RESAMPLABLE`` against what the metric returns. ``make_input`` provides the
fixed hierarchy below and validation predictions, so every registered metric can be computed.
Metric-specific values (hand-computed cases, references) belong in ``test_<family>.py``;
registry wrappers are tested in ``test_builtin.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics import Metric, MetricInput, MetricParams, MetricResult, darts, metrics
from harness.metrics.decomposition import point_estimate
from harness.metrics.gzsl import harmonic_mean

ALL_METRICS = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "hierarchical_precision_at_k",
    "per_class_hierarchical_precision_at_k",
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
    "prediction_relation_share",
    "ausuc",
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
    "darts_area",
    "darts_reward",
}

# Lower is better, values in [0, inf) (registered bounds (0, inf), higher_is_better False): mean
# LCA distances of predictions.
LOWER_IS_BETTER = {"hierarchical_cost", "mistake_severity", "average_hierarchical_distance_at_k"}

# Values lie in [0, 1] (and the registered bounds say so).
BOUNDED_01 = ALL_METRICS - LOWER_IS_BETTER

# Unchanged when candidate columns are permuted consistently with y_true, candidates, seen and
# candidate_nodes (scores without ties).
PERMUTATION_INVARIANT = set(ALL_METRICS)

# ... even with tied scores: ties count against the true class. The rank-based metrics
# (hierarchical, DARTS) break ties by the smaller column, so they are not in this set.
TIES_PERMUTATION_INVARIANT = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "ausuc",
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
}

# Unchanged when the test images (rows of scores and y_true) are permuted.
IMAGE_ORDER_INVARIANT = set(ALL_METRICS)

# Take a `k` parameter: k < 1 refused by the parameter model, MetricError when k is larger than
# the number of candidates, and the value at k = n_candidates does not depend on the scores.
K_PARAM_METRICS = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "hierarchical_precision_at_k",
    "per_class_hierarchical_precision_at_k",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
}

# Top-k accuracies: non-decreasing in k, 1.0 at k = n_candidates, and the message naming the
# number of candidates when k is larger. (hp@k and retrieval precision@k are not monotone in k.)
TOP_K_METRICS = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
}

# Details carry `per_class` keyed by candidate class id (None for a class without images) and
# `excluded_classes`.
PER_CLASS_METRICS = {"per_class_top_k_accuracy", "gzsl_seen_accuracy", "gzsl_unseen_accuracy"}

# Defined only in the GZSL setting (need seen and unseen candidates).
GZSL_ONLY_METRICS = {
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "ausuc",
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
}

# Registered with needs_hierarchy: MetricError without a hierarchy (or candidate nodes).
HIERARCHICAL = {
    "hierarchical_precision_at_k",
    "per_class_hierarchical_precision_at_k",
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
    "prediction_relation_share",
    "darts_area",
    "darts_reward",
}

# Registered with needs_validation: a parameter is chosen on `validation`, MetricError without.
NEEDS_VALIDATION = {
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
    "darts_area",
    "darts_reward",
}

# Registered as chunkable: streamed top-K chunks reduce through their decompositions.
CHUNKABLE = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "hierarchical_precision_at_k",
    "per_class_hierarchical_precision_at_k",
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
    "prediction_relation_share",
}

# Registered with inputs=("dense",): top-K predictions must be refused with a MetricError.
DENSE_ONLY = {
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "ausuc",
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
    "darts_area",
    "darts_reward",
}

# Return a per-image decomposition whose point estimate is the value.
DECOMPOSABLE = CHUNKABLE | {
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
    "darts_reward",
}

# Return a `resample` function (no decomposition); resample(all images) is the value.
RESAMPLABLE = {"ausuc", "darts_area"}

# Perfect predictions (test and validation) reach the best bound. mistake_severity is left out:
# it is undefined without a mistake (test_builtin.py checks that it says so).
ORACLE_BEST = ALL_METRICS - {"mistake_severity"}

# Rank-based metrics reading `MetricInput.ranked` (dense scores sorted there).
RANKED_FROM_SCORES = {
    "hierarchical_precision_at_k",
    "per_class_hierarchical_precision_at_k",
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
    "prediction_relation_share",
}

# Declared averaged over classes (`averaged_over="classes"`): each class with test images weighs
# the same, so the value does not change when a class's images are repeated. The others are
# averaged over images and weigh a class by its number of test images.
AVERAGED_OVER_CLASSES = {
    "per_class_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
    "per_class_hierarchical_precision_at_k",
    "hierarchical_cost",
    "ausuc",
    "calibrated_harmonic_mean",
    "calibrated_seen_accuracy",
    "calibrated_unseen_accuracy",
}
AVERAGED_OVER_IMAGES = ALL_METRICS - AVERAGED_OVER_CLASSES

PROPERTY_SETS = {
    "AVERAGED_OVER_CLASSES": AVERAGED_OVER_CLASSES,
    "AVERAGED_OVER_IMAGES": AVERAGED_OVER_IMAGES,
    "LOWER_IS_BETTER": LOWER_IS_BETTER,
    "BOUNDED_01": BOUNDED_01,
    "PERMUTATION_INVARIANT": PERMUTATION_INVARIANT,
    "TIES_PERMUTATION_INVARIANT": TIES_PERMUTATION_INVARIANT,
    "IMAGE_ORDER_INVARIANT": IMAGE_ORDER_INVARIANT,
    "K_PARAM_METRICS": K_PARAM_METRICS,
    "TOP_K_METRICS": TOP_K_METRICS,
    "PER_CLASS_METRICS": PER_CLASS_METRICS,
    "GZSL_ONLY_METRICS": GZSL_ONLY_METRICS,
    "HIERARCHICAL": HIERARCHICAL,
    "NEEDS_VALIDATION": NEEDS_VALIDATION,
    "CHUNKABLE": CHUNKABLE,
    "DENSE_ONLY": DENSE_ONLY,
    "DECOMPOSABLE": DECOMPOSABLE,
    "RESAMPLABLE": RESAMPLABLE,
    "ORACLE_BEST": ORACLE_BEST,
    "RANKED_FROM_SCORES": RANKED_FROM_SCORES,
}


def cases(subset: set[str]) -> list[str]:
    """Sorted metric names as test parameters."""
    return sorted(subset)


# --- inputs ---------------------------------------------------------------------------------------

SEEDS = [0, 1, 2]
N_CANDIDATES = 8
N_VAL_IMAGES = 60  # >= 29, so DARTS can certify a 0.9 accuracy on validation at 95% confidence

# Test candidates c0..c7 and validation-only classes v0..v3 are the leaves of a fixed DAG:
#
#   entity -> animal, artifact, plant
#   animal -> mammal, bird, pet         artifact -> vehicle, tool
#   mammal -> c0, c1, c2                vehicle  -> c4, c5, v1
#   pet    -> c2, c3                    tool     -> c6, v2
#   bird   -> c3, v0                    plant    -> c7, v3
#
# c2 (mammal, pet) and c3 (pet, bird) have two parents. Heights: leaves 0, mammal/pet/bird/
# vehicle/tool/plant 1, animal/artifact 2, entity 3.
TEST_LEAVES = [f"n{2084071 + j:08d}" for j in range(N_CANDIDATES)]
VAL_LEAVES = [f"n{2085000 + j:08d}" for j in range(4)]
C = dict(zip([f"c{j}" for j in range(N_CANDIDATES)], TEST_LEAVES, strict=True))
V = dict(zip([f"v{j}" for j in range(4)], VAL_LEAVES, strict=True))
CHILDREN = {
    "entity": ["animal", "artifact", "plant"],
    "animal": ["mammal", "bird", "pet"],
    "artifact": ["vehicle", "tool"],
    "mammal": [C["c0"], C["c1"], C["c2"]],
    "pet": [C["c2"], C["c3"]],
    "bird": [C["c3"], V["v0"]],
    "vehicle": [C["c4"], C["c5"], V["v1"]],
    "tool": [C["c6"], V["v2"]],
    "plant": [C["c7"], V["v3"]],
}
EDGES = [(parent, child) for parent, kids in CHILDREN.items() for child in kids]
HIERARCHY = Hierarchy(sorted({node for edge in EDGES for node in edge}), EDGES, source="test")


def _scores(rng: np.random.Generator, y_true: np.ndarray, n_columns: int, ties: bool) -> np.ndarray:
    scores = rng.standard_normal((len(y_true), n_columns))
    scores[np.arange(len(y_true)), y_true] += 1.0
    return np.round(scores) if ties else scores


def make_validation(setting: str, *, seed: int, ties: bool = False) -> MetricInput:
    """Validation predictions over a different candidate set, every column with images.

    zsl: the validation-only leaves v0..v3. gzsl: the seen test candidates c0..c3 (seen) and
    v0..v3 (playing the unseen role), as in the validation split of the validation fit.
    """
    rng = np.random.default_rng([seed, 1])
    ids = (TEST_LEAVES[: N_CANDIDATES // 2] if setting == "gzsl" else []) + VAL_LEAVES
    y_true = rng.choice(len(ids), N_VAL_IMAGES)
    y_true[: len(ids)] = np.arange(len(ids))
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y_true,
        scores=_scores(rng, y_true, len(ids), ties),
        candidates=np.array(ids),
        seen=np.isin(ids, TEST_LEAVES),
        hierarchy=HIERARCHY,
        candidate_nodes=HIERARCHY.indices(ids),
        score_scale=1.0,  # both fits in the same units (harness.metrics.score_scale)
    )


def make_input(
    setting: str,
    *,
    seed: int,
    n_images: int = 60,
    ties: bool = False,
    empty_ends: bool = False,
    int_ids: bool = False,
    hierarchy: bool = True,
    validation: bool = True,
) -> MetricInput:
    """Seeded inputs; in gzsl the first half of the columns is seen, in zsl none is.

    With ``empty_ends`` the first and the last column (one seen, one unseen in gzsl) have no
    test image; every other column has at least one. With ``hierarchy`` the candidates are the
    leaves c0..c7 of ``HIERARCHY`` (``candidate_nodes`` set; with ``int_ids`` the class ids are
    integers but the nodes stay those leaves); with ``validation`` the input carries
    :func:`make_validation` predictions.
    """
    rng = np.random.default_rng(seed)
    with_images = np.arange(1, N_CANDIDATES - 1) if empty_ends else np.arange(N_CANDIDATES)
    y_true = rng.choice(with_images, n_images)
    y_true[: len(with_images)] = with_images
    scores = _scores(rng, y_true, N_CANDIDATES, ties)
    seen = np.zeros(N_CANDIDATES, dtype=bool)
    if setting == "gzsl":
        seen[: N_CANDIDATES // 2] = True
    candidates = np.arange(100, 100 + N_CANDIDATES) if int_ids else np.array(TEST_LEAVES)
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y_true,
        scores=scores,
        candidates=candidates,
        seen=seen,
        hierarchy=HIERARCHY if hierarchy else None,
        candidate_nodes=HIERARCHY.indices(TEST_LEAVES) if hierarchy else None,
        validation=make_validation(setting, seed=seed, ties=ties) if validation else None,
        score_scale=1.0 if validation else None,
    )


def inputs_for(metric: Metric, **kwargs: Any) -> list[MetricInput]:
    return [make_input(setting, **kwargs) for setting in sorted(metric.settings)]


def replace(data: MetricInput, **changes: Any) -> MetricInput:
    return dataclasses.replace(data, **changes)


def to_topk(data: MetricInput, k: int | None = None) -> MetricInput:
    """The top-``k`` (default: all) columns of the dense scores, best first, ties -> smaller column."""
    assert data.scores is not None
    k = data.scores.shape[1] if k is None else k
    order = np.argsort(-data.scores, axis=1, kind="stable")[:, :k]
    return replace(
        data,
        scores=None,
        topk_indices=order,
        topk_scores=np.take_along_axis(data.scores, order, axis=1),
    )


def oracle(data: MetricInput, margin: float = 10.0) -> MetricInput:
    """``data`` with scores (test and validation) that rank the true class first by ``margin``."""
    rng = np.random.default_rng(5)

    def perfect(part: MetricInput) -> np.ndarray:
        assert part.scores is not None
        scores = rng.standard_normal(part.scores.shape)
        scores[np.arange(len(part.y_true)), part.y_true] += margin
        return scores

    validation = data.validation
    if validation is not None:
        validation = replace(validation, scores=perfect(validation))
    return replace(data, scores=perfect(data), validation=validation)


def params(metric: Metric, **values: Any) -> MetricParams:
    return metric.params(**values)


def public(details: dict[str, Any]) -> dict[str, Any]:
    """Details without the scorer's private keys (as the scorer stores them)."""
    return {k: v for k, v in details.items() if not k.startswith("_")}


# --- classification -------------------------------------------------------------------------------


def test_every_registered_metric_is_classified() -> None:
    assert set(metrics) == ALL_METRICS
    for name, subset in PROPERTY_SETS.items():
        assert subset <= ALL_METRICS, f"{name} names unregistered metrics"


def test_classification_agrees_with_registered_flags() -> None:
    registered = {name: metrics.get(name) for name in ALL_METRICS}
    assert {n for n, m in registered.items() if m.needs_hierarchy} == HIERARCHICAL
    assert {n for n, m in registered.items() if m.needs_validation} == NEEDS_VALIDATION
    assert {n for n, m in registered.items() if m.chunkable} == CHUNKABLE
    assert {n for n, m in registered.items() if m.inputs == {"dense"}} == DENSE_ONLY
    assert {n for n, m in registered.items() if not m.higher_is_better} == LOWER_IS_BETTER
    assert {n for n, m in registered.items() if "k" in m.params.model_fields} == K_PARAM_METRICS
    assert {n for n, m in registered.items() if m.averaged_over == "classes"} == (
        AVERAGED_OVER_CLASSES
    )
    assert {n for n, m in registered.items() if m.averaged_over == "images"} == (
        AVERAGED_OVER_IMAGES
    )
    assert all(m.inputs in ({"dense"}, {"dense", "topk"}) for m in registered.values())
    # Set relations the scorer and the tests below rely on.
    assert CHUNKABLE <= DECOMPOSABLE  # streamed chunks are reduced through decompositions
    assert DECOMPOSABLE | RESAMPLABLE == ALL_METRICS  # every metric gets an interval
    assert not DECOMPOSABLE & RESAMPLABLE
    assert TIES_PERMUTATION_INVARIANT <= PERMUTATION_INVARIANT
    assert TOP_K_METRICS <= K_PARAM_METRICS
    assert BOUNDED_01 | LOWER_IS_BETTER == ALL_METRICS
    assert RANKED_FROM_SCORES <= HIERARCHICAL & CHUNKABLE


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_returned_decomposition_and_resample_match_classification(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        result = metric(data)
        assert (result.decomposition is not None) == (name in DECOMPOSABLE)
        assert (result.resample is not None) == (name in RESAMPLABLE)


@pytest.mark.parametrize("name", sorted(DECOMPOSABLE))
def test_decomposition_reduces_over_the_declared_unit(name: str) -> None:
    # A per-image decomposition is reduced by its `combine`: an image mean for metrics averaged
    # over images, a class mean (or the harmonic mean of two class means) for the others.
    metric = metrics.get(name)
    combine = {"images": {"image_mean"}, "classes": {"class_mean", "harmonic_of_groups"}}
    for data in inputs_for(metric, seed=0):
        decomposition = metric(data).decomposition
        assert decomposition is not None
        assert decomposition.combine in combine[metric.averaged_over], decomposition.combine


def _repeat_class(data: MetricInput, column: int, times: int = 3) -> MetricInput:
    """``data`` with every test image of candidate ``column`` repeated ``times`` times."""
    assert data.scores is not None
    rows = np.flatnonzero(data.y_true == column)
    keep = np.concatenate([np.arange(len(data.y_true)), np.repeat(rows, times - 1)])
    return replace(data, y_true=data.y_true[keep], scores=data.scores[keep])


@pytest.mark.parametrize("name", cases(AVERAGED_OVER_CLASSES))
def test_class_averaged_metric_ignores_how_many_images_a_class_has(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=1):
        value = metric(data).value
        for column in np.unique(data.y_true).tolist():
            repeated = metric(_repeat_class(data, column)).value
            assert repeated == pytest.approx(value, abs=1e-12), (data.setting, column)


@pytest.mark.parametrize("name", cases(AVERAGED_OVER_IMAGES))
def test_image_averaged_metric_weighs_a_class_by_its_images(name: str) -> None:
    # Repeating one class's images moves an image mean towards that class's mean: for some
    # class of these inputs the value changes (a class-averaged metric would never move).
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=1):
        value = metric(data).value
        moved = [
            abs(metric(_repeat_class(data, column)).value - value) > 1e-9
            for column in np.unique(data.y_true).tolist()
        ]
        assert any(moved), data.setting


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_metadata(name: str) -> None:
    metric = metrics.get(name)
    assert isinstance(metric, Metric)
    assert metric.name == name
    assert isinstance(metric.version, str) and metric.version
    assert isinstance(metric.description, str) and metric.description
    assert metric.description != name  # the compute function has a docstring
    assert issubclass(metric.params, MetricParams)
    metric.params()  # every parameter has a default
    assert metric.settings and metric.settings <= {"zsl", "gzsl"}
    assert (metric.settings == {"gzsl"}) == (name in GZSL_ONLY_METRICS)
    assert isinstance(metric.higher_is_better, bool)
    assert metric.averaged_over in ("images", "classes")
    unit = "test images" if metric.averaged_over == "images" else "classes with test images"
    assert metric.averaging.startswith(f"mean over {unit}")
    low, high = metric.bounds
    assert low < high
    if name in BOUNDED_01:
        assert (low, high) == (0.0, 1.0)
        assert metric.higher_is_better
    else:
        assert (low, high) == (0.0, math.inf)
        assert not metric.higher_is_better


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_params_reject_unknown_keys(name: str) -> None:
    model: type[BaseModel] = metrics.get(name).params
    with pytest.raises(ValidationError, match="bogus"):
        model.model_validate({"bogus": 1})


@pytest.mark.parametrize("name", sorted(K_PARAM_METRICS))
def test_top_k_params_reject_k_below_one(name: str) -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        metrics.get(name).params.model_validate({"k": 0})


# --- values -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("empty_ends", [False, True])
def test_metric_result_is_finite_bounded_and_json_serializable(
    name: str, seed: int, ties: bool, empty_ends: bool
) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=ties, empty_ends=empty_ends):
        result = metric(data)
        assert isinstance(result, MetricResult)
        assert type(result.value) is float
        assert math.isfinite(result.value)
        low, high = metric.bounds
        assert low <= result.value <= high
        details = public(result.details)
        text = json.dumps({"value": result.value, "details": details}, allow_nan=False)
        assert json.loads(text)["details"] == details  # only JSON types, no tuples
        # The only private key is the scorer's `_aux`: per-image arrays, averaged over chunks.
        assert set(result.details) - set(details) <= {"_aux"}
        for values in result.details.get("_aux", {}).values():
            assert np.shape(values) == data.y_true.shape


@pytest.mark.parametrize("name", sorted(DECOMPOSABLE))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("empty_ends", [False, True])
def test_decomposition_point_estimate_is_the_value(
    name: str, seed: int, ties: bool, empty_ends: bool
) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=ties, empty_ends=empty_ends):
        result = metric(data)
        assert result.decomposition is not None
        assert result.decomposition.n_classes == data.n_candidates
        assert result.decomposition.n_images <= len(data.y_true)
        estimate = point_estimate(result.decomposition)
        assert isinstance(estimate, float)
        assert estimate == pytest.approx(result.value, rel=0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(RESAMPLABLE))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("empty_ends", [False, True])
def test_resample_of_every_image_is_the_value(
    name: str, seed: int, ties: bool, empty_ends: bool
) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=ties, empty_ends=empty_ends):
        result = metric(data)
        assert result.resample is not None
        n = len(data.y_true)
        # One value per index row; a resample is recomputed on the images it names, in any
        # order, and rows of one call do not affect each other.
        rng = np.random.default_rng(seed)
        rows = np.stack([np.arange(n), rng.permutation(n), rng.integers(0, n, n)])
        values = result.resample(rows)
        assert values.shape == (3,)
        assert values[:2] == pytest.approx([result.value] * 2, rel=0, abs=1e-12)
        assert [float(result.resample(row[None])[0]) for row in rows] == values.tolist()


@pytest.mark.parametrize("seed", SEEDS)
def test_darts_area_resamples_are_the_per_replicate_means_bit_for_bit(seed: int) -> None:
    """The replicates as computed before issue 28 (one resample at a time, a 1D mean per
    point): the intervals stored in records must not move."""
    metric = metrics.get("darts_area")
    # 20,000 images: sums of more than one pairwise block (numpy's blocks are 128 and 8,192).
    for data in [
        *inputs_for(metric, seed=seed, ties=True),
        make_input("zsl", seed=seed, n_images=20_000),
    ]:
        result = metric(data)
        assert result.resample is not None
        targets = darts._darts(data, metric.params(), "darts_area").targets
        n = len(data.y_true)
        rows = np.random.default_rng(seed).integers(0, n, (8, n))
        expected = [
            darts.accuracy_specificity_area(
                [(float(t.correct[idx].mean()), float(t.gain[idx].mean())) for t in targets]
            )
            for idx in rows
        ]
        assert result.resample(rows).tolist() == expected


@pytest.mark.parametrize("name", cases(ORACLE_BEST))
def test_perfect_predictions_reach_the_best_bound(name: str) -> None:
    metric = metrics.get(name)
    low, high = metric.bounds
    for seed in SEEDS:
        for data in inputs_for(metric, seed=seed, empty_ends=True):
            best = high if metric.higher_is_better else low
            assert metric(oracle(data)).value == pytest.approx(best, rel=0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(PER_CLASS_METRICS))
@pytest.mark.parametrize("int_ids", [False, True])
def test_per_class_details_keyed_by_class_id(name: str, int_ids: bool) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0, empty_ends=True, int_ids=int_ids):
        details = metric(data).details
        ids = data.candidates.tolist()
        assert set(details["per_class"]) <= {str(i) for i in ids}
        # Columns 0 and -1 have no image: each is reported (with None) where it is averaged over.
        empty = [i for i in (ids[0], ids[-1]) if str(i) in details["per_class"]]
        assert empty
        assert details["excluded_classes"] == empty
        assert all(type(i) is type(ids[0]) for i in details["excluded_classes"])
        assert [i for i, v in details["per_class"].items() if v is None] == [str(i) for i in empty]
        values = [v for v in details["per_class"].values() if v is not None]
        assert metric(data).value == pytest.approx(float(np.mean(values)))


# --- invariances ----------------------------------------------------------------------------------


def param_variants(metric: Metric) -> list[MetricParams]:
    if metric.name in K_PARAM_METRICS:
        return [params(metric, k=k) for k in (1, 3)]
    return [params(metric)]


@pytest.mark.parametrize(
    ("name", "ties"),
    [(name, False) for name in sorted(PERMUTATION_INVARIANT)]
    + [(name, True) for name in sorted(TIES_PERMUTATION_INVARIANT)],
)
@pytest.mark.parametrize("seed", SEEDS)
def test_metric_invariant_under_candidate_permutation(name: str, ties: bool, seed: int) -> None:
    metric = metrics.get(name)
    perm = np.random.default_rng(seed + 10).permutation(N_CANDIDATES)
    inverse = np.argsort(perm)
    for data in inputs_for(metric, seed=seed, ties=ties, empty_ends=True):
        assert data.scores is not None and data.candidate_nodes is not None
        permuted = replace(
            data,
            y_true=inverse[data.y_true],
            scores=data.scores[:, perm],
            candidates=data.candidates[perm],
            seen=data.seen[perm],
            candidate_nodes=data.candidate_nodes[perm],
        )
        for values in param_variants(metric):
            before = metric(data, values)
            after = metric(permuted, values)
            assert after.value == pytest.approx(before.value, rel=1e-12, abs=1e-15)
            if name in PER_CLASS_METRICS:  # keyed by class id, so comparable across orders
                assert after.details["per_class"] == pytest.approx(before.details["per_class"])
                assert set(after.details["excluded_classes"]) == set(
                    before.details["excluded_classes"]
                )


@pytest.mark.parametrize("name", sorted(IMAGE_ORDER_INVARIANT))
@pytest.mark.parametrize("seed", SEEDS)
def test_metric_invariant_under_image_permutation(name: str, seed: int) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=True):
        assert data.scores is not None
        rows = np.random.default_rng(seed + 20).permutation(len(data.y_true))
        shuffled = replace(data, y_true=data.y_true[rows], scores=data.scores[rows])
        assert metric(shuffled).value == pytest.approx(metric(data).value, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", sorted(NEEDS_VALIDATION))
@pytest.mark.parametrize("seed", SEEDS)
def test_metric_invariant_under_validation_image_permutation(name: str, seed: int) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=True):
        val = data.validation
        assert val is not None and val.scores is not None
        rows = np.random.default_rng(seed + 30).permutation(len(val.y_true))
        shuffled = replace(val, y_true=val.y_true[rows], scores=val.scores[rows])
        after = metric(replace(data, validation=shuffled)).value
        assert after == pytest.approx(metric(data).value, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", sorted(TOP_K_METRICS))
@pytest.mark.parametrize("seed", SEEDS)
def test_top_k_metric_non_decreasing_in_k_and_perfect_at_n_candidates(name: str, seed: int) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=True):
        values = [metric(data, params(metric, k=k)).value for k in range(1, N_CANDIDATES + 1)]
        assert all(a <= b for a, b in itertools.pairwise(values))
        assert values[-1] == 1.0
        assert metric(data, params(metric, k=2)).details["k"] == 2


@pytest.mark.parametrize("name", sorted(K_PARAM_METRICS))
@pytest.mark.parametrize("seed", SEEDS)
def test_k_metric_at_n_candidates_does_not_depend_on_the_scores(name: str, seed: int) -> None:
    # At k = n_candidates every candidate is predicted: only the labels (and hierarchy) count.
    metric = metrics.get(name)
    every = params(metric, k=N_CANDIDATES)
    for data in inputs_for(metric, seed=seed):
        assert data.scores is not None
        other = np.random.default_rng(seed + 40).standard_normal(data.scores.shape)
        expected = metric(data, every).value
        assert metric(replace(data, scores=other), every).value == pytest.approx(
            expected, rel=1e-12, abs=1e-15
        )
        assert metric(replace(data, scores=-data.scores), every).value == pytest.approx(
            expected, rel=1e-12, abs=1e-15
        )


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TOP_K_METRICS))
def test_top_k_metric_k_larger_than_candidates_raises(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        with pytest.raises(
            MetricError,
            match=rf"`k` to be at most the number of candidates \({N_CANDIDATES}\), "
            rf"but got k={N_CANDIDATES + 1}",
        ):
            metric(data, params(metric, k=N_CANDIDATES + 1))


@pytest.mark.parametrize("name", sorted(K_PARAM_METRICS))
def test_k_metric_k_larger_than_candidates_raises(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        for k in (N_CANDIDATES + 1, 1000):
            with pytest.raises(
                MetricError,
                match=rf"to be at most the number of .*\({N_CANDIDATES}\), but got (k=|ks\[0\] = ){k}\b",
            ):
                metric(data, params(metric, k=k))


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_nan_scores_raise_naming_the_row(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        assert data.scores is not None
        scores = data.scores.copy()
        scores[7, 2] = np.nan
        with pytest.raises(MetricError, match=r"`scores`.*row 7 holds NaN"):
            metric(replace(data, scores=scores))


@pytest.mark.parametrize("name", sorted(NEEDS_VALIDATION))
def test_metric_nan_validation_scores_raise_naming_the_row(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        assert data.validation is not None and data.validation.scores is not None
        scores = data.validation.scores.copy()
        scores[3, 1] = np.inf
        with pytest.raises(MetricError, match=r"scores`.*row 3 holds inf"):
            metric(replace(data, validation=replace(data.validation, scores=scores)))


@pytest.mark.parametrize("name", cases(ALL_METRICS))
def test_metric_1d_scores_raise(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        assert data.scores is not None
        with pytest.raises(MetricError, match=r"2D array .* but got shape \(60,\)"):
            metric(replace(data, scores=data.scores[:, 0]))


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_scores_with_a_missing_row_raise(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        assert data.scores is not None
        with pytest.raises(MetricError, match=r"one row per image in `y_true` \(60 images\)"):
            metric(replace(data, scores=data.scores[:-1]))


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_y_true_out_of_range_raises(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        y_true = data.y_true.copy()
        y_true[5] = N_CANDIDATES
        with pytest.raises(MetricError, match=rf"y_true\[5\] = {N_CANDIDATES}"):
            metric(replace(data, y_true=y_true))


@pytest.mark.parametrize(
    "name",
    cases(PER_CLASS_METRICS),
)
def test_metric_wrong_candidates_length_raises(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        with pytest.raises(MetricError, match=r"`candidates` to list one class id per score"):
            metric(replace(data, candidates=data.candidates[:-1]))


@pytest.mark.parametrize("name", sorted(GZSL_ONLY_METRICS))
def test_gzsl_metric_refuses_zsl_setting(name: str) -> None:
    metric = metrics.get(name)
    with pytest.raises(MetricError, match=r"one of \['gzsl'\] .* but got 'zsl'"):
        metric(make_input("zsl", seed=0))


@pytest.mark.parametrize("name", sorted(NEEDS_VALIDATION))
def test_metric_needing_validation_raises_without_it(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        with pytest.raises(MetricError, match=rf"validation predictions for metric '{name}'"):
            metric(replace(data, validation=None))
        assert data.validation is not None
        with pytest.raises(MetricError, match=rf"validation predictions for metric '{name}'"):
            metric(replace(data, validation=to_topk(data.validation)))


@pytest.mark.parametrize("name", sorted(ALL_METRICS - NEEDS_VALIDATION))
def test_metric_not_needing_validation_ignores_it(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        assert metric(replace(data, validation=None)).value == metric(data).value


@pytest.mark.parametrize("name", sorted(HIERARCHICAL))
def test_hierarchical_metric_raises_without_hierarchy(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        for missing in ({"hierarchy": None}, {"candidate_nodes": None}):
            with pytest.raises(MetricError, match=rf"a hierarchy for metric '{name}'"):
                metric(replace(data, **missing))


@pytest.mark.parametrize("name", sorted(ALL_METRICS - HIERARCHICAL))
def test_metric_without_hierarchy_ignores_it(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        plain = make_input(data.setting, seed=0, hierarchy=False)
        assert metric(plain).value == metric(data).value


@pytest.mark.parametrize(
    "name",
    cases(DENSE_ONLY),
)
def test_dense_only_metric_refuses_top_k_input(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        with pytest.raises(MetricError, match=r"dense"):
            metric(to_topk(data))


@pytest.mark.parametrize("name", sorted(ALL_METRICS - DENSE_ONLY))
def test_top_k_capable_metric_accepts_top_k_input(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        result = metric(to_topk(data))
        assert math.isfinite(result.value)


# --- metric-specific consistency ----------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_gzsl_harmonic_mean_consistent_with_seen_and_unseen(seed: int) -> None:
    data = make_input("gzsl", seed=seed, ties=True)
    seen = metrics.get("gzsl_seen_accuracy")(data).value
    unseen = metrics.get("gzsl_unseen_accuracy")(data).value
    result = metrics.get("gzsl_harmonic_mean")(data)
    assert result.value == harmonic_mean(seen, unseen)
    assert result.details == {"seen": seen, "unseen": unseen, "k": 1}
