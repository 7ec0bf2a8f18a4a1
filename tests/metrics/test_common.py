"""Common tests for every metric in the ``harness.metrics`` registry.

Note to developers: a new registered metric is picked up here automatically, and
``test_every_registered_metric_is_classified`` fails until you add its name to ``ALL_METRICS``
and to every property set below that it satisfies (or, if it satisfies none, only to
``ALL_METRICS`` with a comment saying why). The invariance tests loop over those sets, so a new
metric gets its checks by joining the right sets, not by copying tests. Metric-specific values
(hand-computed cases, references) belong in ``test_<family>.py``.
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

from harness.errors import MetricError
from harness.metrics import Metric, MetricInput, MetricParams, MetricResult, harmonic_mean, metrics

ALL_METRICS = {
    "per_class_top_k_accuracy",
    "per_image_top_k_accuracy",
    "gzsl_seen_accuracy",
    "gzsl_unseen_accuracy",
    "gzsl_harmonic_mean",
}

# Values lie in [0, 1] (and the registered bounds say so).
BOUNDED_01 = set(ALL_METRICS)

# Unchanged when candidate columns are permuted consistently with y_true, candidates and seen.
PERMUTATION_INVARIANT = set(ALL_METRICS)

# Unchanged when the test images (rows of scores and y_true) are permuted.
IMAGE_ORDER_INVARIANT = set(ALL_METRICS)

# Take a `k` parameter: non-decreasing in k, 1.0 at k = n_candidates, MetricError when k is
# larger than the number of candidates.
TOP_K_METRICS = set(ALL_METRICS)

# Details carry `per_class` keyed by candidate class id (None for a class without images) and
# `excluded_classes`.
PER_CLASS_METRICS = {"per_class_top_k_accuracy", "gzsl_seen_accuracy", "gzsl_unseen_accuracy"}

# Defined only in the GZSL setting (need seen and unseen candidates).
GZSL_ONLY_METRICS = {"gzsl_seen_accuracy", "gzsl_unseen_accuracy", "gzsl_harmonic_mean"}

SEEDS = [0, 1, 2]
N_CANDIDATES = 8


def make_input(
    setting: str,
    *,
    seed: int,
    n_images: int = 60,
    n_candidates: int = N_CANDIDATES,
    ties: bool = False,
    empty_ends: bool = False,
    int_ids: bool = False,
) -> MetricInput:
    """Seeded inputs; in gzsl the first half of the columns is seen, in zsl none is.

    With ``empty_ends`` the first and the last column (one seen, one unseen in gzsl) have no
    test image; every other column has at least one.
    """
    rng = np.random.default_rng(seed)
    with_images = np.arange(1, n_candidates - 1) if empty_ends else np.arange(n_candidates)
    y_true = rng.choice(with_images, n_images)
    y_true[: len(with_images)] = with_images
    scores = rng.standard_normal((n_images, n_candidates))
    scores[np.arange(n_images), y_true] += 1.0
    if ties:
        scores = np.round(scores)
    seen = np.zeros(n_candidates, dtype=bool)
    if setting == "gzsl":
        seen[: n_candidates // 2] = True
    candidates = (
        np.arange(100, 100 + n_candidates)
        if int_ids
        else np.array([f"n{2084071 + j:08d}" for j in range(n_candidates)])
    )
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y_true,
        scores=scores,
        candidates=candidates,
        seen=seen,
    )


def inputs_for(metric: Metric, **kwargs: Any) -> list[MetricInput]:
    return [make_input(setting, **kwargs) for setting in sorted(metric.settings)]


def replace(data: MetricInput, **changes: Any) -> MetricInput:
    return dataclasses.replace(data, **changes)


def params(metric: Metric, **values: Any) -> MetricParams:
    return metric.params(**values)


def test_every_registered_metric_is_classified() -> None:
    assert set(metrics) == ALL_METRICS
    for name, subset in {
        "BOUNDED_01": BOUNDED_01,
        "PERMUTATION_INVARIANT": PERMUTATION_INVARIANT,
        "IMAGE_ORDER_INVARIANT": IMAGE_ORDER_INVARIANT,
        "TOP_K_METRICS": TOP_K_METRICS,
        "PER_CLASS_METRICS": PER_CLASS_METRICS,
        "GZSL_ONLY_METRICS": GZSL_ONLY_METRICS,
    }.items():
        assert subset <= ALL_METRICS, f"{name} names unregistered metrics"


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
    low, high = metric.bounds
    assert low < high


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_params_reject_unknown_keys(name: str) -> None:
    model: type[BaseModel] = metrics.get(name).params
    with pytest.raises(ValidationError, match="bogus"):
        model.model_validate({"bogus": 1})


@pytest.mark.parametrize("name", sorted(TOP_K_METRICS))
def test_top_k_params_reject_k_below_one(name: str) -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        metrics.get(name).params.model_validate({"k": 0})


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
        if name in BOUNDED_01:
            assert (low, high) == (0.0, 1.0)
        text = json.dumps({"value": result.value, "details": result.details}, allow_nan=False)
        assert json.loads(text)["details"] == result.details  # only JSON types, no tuples


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


@pytest.mark.parametrize("name", sorted(PERMUTATION_INVARIANT))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
def test_metric_invariant_under_candidate_permutation(name: str, seed: int, ties: bool) -> None:
    metric = metrics.get(name)
    perm = np.random.default_rng(seed + 10).permutation(N_CANDIDATES)
    inverse = np.argsort(perm)
    for data in inputs_for(metric, seed=seed, ties=ties, empty_ends=True):
        permuted = replace(
            data,
            y_true=inverse[data.y_true],
            scores=data.scores[:, perm],
            candidates=data.candidates[perm],
            seen=data.seen[perm],
        )
        for k in (1, 3):
            before = metric(data, params(metric, k=k))
            after = metric(permuted, params(metric, k=k))
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
        rows = np.random.default_rng(seed + 20).permutation(len(data.y_true))
        shuffled = replace(data, y_true=data.y_true[rows], scores=data.scores[rows])
        assert metric(shuffled).value == pytest.approx(metric(data).value, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", sorted(TOP_K_METRICS))
@pytest.mark.parametrize("seed", SEEDS)
def test_top_k_metric_non_decreasing_in_k_and_perfect_at_n_candidates(name: str, seed: int) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=seed, ties=True):
        values = [metric(data, params(metric, k=k)).value for k in range(1, N_CANDIDATES + 1)]
        assert all(a <= b for a, b in itertools.pairwise(values))
        assert values[-1] == 1.0
        assert metric(data, params(metric, k=2)).details["k"] == 2


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


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_nan_scores_raise_naming_the_row(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        scores = data.scores.copy()
        scores[7, 2] = np.nan
        with pytest.raises(MetricError, match=r"`scores`.*row 7 holds NaN"):
            metric(replace(data, scores=scores))


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_wrong_scores_shape_raises(name: str) -> None:
    metric = metrics.get(name)
    for data in inputs_for(metric, seed=0):
        with pytest.raises(MetricError, match=r"2D array .* but got shape \(60,\)"):
            metric(replace(data, scores=data.scores[:, 0]))
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


@pytest.mark.parametrize("name", sorted(PER_CLASS_METRICS))
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


@pytest.mark.parametrize("seed", SEEDS)
def test_gzsl_harmonic_mean_consistent_with_seen_and_unseen(seed: int) -> None:
    data = make_input("gzsl", seed=seed, ties=True)
    seen = metrics.get("gzsl_seen_accuracy")(data).value
    unseen = metrics.get("gzsl_unseen_accuracy")(data).value
    result = metrics.get("gzsl_harmonic_mean")(data)
    assert result.value == harmonic_mean(seen, unseen)
    assert result.details == {"seen": seen, "unseen": unseen, "k": 1}
