"""Tests of the registered wrappers, each family module's last section (registry-wide: test_common).

Streaming equivalence (top-K = dense, chunks reduce to the whole), calibration and DARTS
parameters chosen on validation only, a hand-computed relation share on the fixed DAG of
``test_common``, and hp@1 against the flat top-1 accuracy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from harness.core.errors import MetricError
from harness.metrics import Metric, MetricInput, MetricParams, metrics
from harness.metrics.calibrated_stacking import calibrated_harmonic_mean, select_gamma
from harness.metrics.decomposition import concatenate, point_estimate
from harness.metrics.temperature import fit_temperature
from tests.metrics.test_common import (
    CHUNKABLE,
    DENSE_ONLY,
    HIERARCHY,
    N_CANDIDATES,
    SEEDS,
    TEST_LEAVES,
    C,
    make_input,
    make_validation,
    params,
    replace,
    to_topk,
)
from tests.metrics.test_darts import Reference

STREAMABLE = CHUNKABLE - DENSE_ONLY  # chunkable and accepting top-K: what the scorer streams
CALIBRATED = ["calibrated_harmonic_mean", "calibrated_seen_accuracy", "calibrated_unseen_accuracy"]


def variants(metric: Metric) -> list[MetricParams]:
    """The default parameters and every non-default choice of each parameter."""
    fields = metric.params.model_fields
    out = [metric.params()]
    if "k" in fields:
        out += [params(metric, k=k) for k in (2, N_CANDIDATES)]
    if "valid" in fields:
        out.append(params(metric, valid="hierarchy"))
    if "relation" in fields:
        out += [
            params(metric, relation=r)
            for r in ("correct", "ancestor", "descendant", "sibling", "unrelated", "semantic_upper")
        ]
    return out


def rows_of(data: MetricInput, rows: np.ndarray) -> MetricInput:
    """The chunk of ``data`` holding ``rows`` (dense or top-K, same candidates)."""

    def take(array: np.ndarray | None) -> np.ndarray | None:
        return None if array is None else array[rows]

    return replace(
        data,
        y_true=data.y_true[rows],
        scores=take(data.scores),
        topk_indices=take(data.topk_indices),
        topk_scores=take(data.topk_scores),
    )


# --- (a) streaming equivalence --------------------------------------------------------------------


def test_to_topk_ranks_ties_to_the_smaller_column() -> None:
    data = replace(
        make_input("zsl", seed=0),
        scores=np.array([[0.0, 2.0, 2.0, 1.0, 2.0, 0.0, 0.0, 0.0]]),
        y_true=np.array([3]),
    )
    top = to_topk(data)
    assert top.topk_indices is not None and top.topk_scores is not None
    assert top.topk_indices.tolist() == [[1, 2, 4, 3, 0, 5, 6, 7]]
    assert top.topk_scores.tolist() == [[2.0, 2.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0]]


@pytest.mark.parametrize("name", sorted(STREAMABLE))
@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
def test_top_k_with_every_candidate_equals_dense(
    name: str, setting: str, seed: int, ties: bool
) -> None:
    metric = metrics.get(name)
    dense = make_input(setting, seed=seed, ties=ties, empty_ends=seed == 1)  # and empty classes
    top = to_topk(dense)
    for values in variants(metric):
        on_dense, on_top = metric(dense, values), metric(top, values)
        assert on_top.value == pytest.approx(on_dense.value, rel=0, abs=1e-12)
        assert on_top.decomposition is not None and on_dense.decomposition is not None
        assert np.array_equal(on_top.decomposition.values, on_dense.decomposition.values)
        assert np.array_equal(on_top.decomposition.classes, on_dense.decomposition.classes)


@pytest.mark.parametrize("name", sorted(STREAMABLE))
@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
@pytest.mark.parametrize("seed", SEEDS)
def test_top_3_equals_dense_for_k_up_to_3(name: str, setting: str, seed: int) -> None:
    # Without ties, a top-K file decides every k <= K as the dense scores do.
    metric = metrics.get(name)
    dense = make_input(setting, seed=seed)
    top = to_topk(dense, k=3)
    for values in variants(metric):
        if getattr(values, "k", 1) > 3:
            continue
        expected = metric(dense, values).value
        assert metric(top, values).value == pytest.approx(expected, rel=0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(STREAMABLE))
@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
def test_three_top_k_chunks_reduce_to_the_whole_value(
    name: str, setting: str, seed: int, ties: bool
) -> None:
    metric = metrics.get(name)
    dense = make_input(setting, seed=seed, ties=ties, empty_ends=seed == 1)
    top = to_topk(dense)
    chunks = np.array_split(np.arange(len(dense.y_true)), 3)
    for values in variants(metric):
        whole = metric(dense, values)
        parts = [metric(rows_of(top, rows), values) for rows in chunks]
        decompositions = [p.decomposition for p in parts]
        assert all(d is not None for d in decompositions)
        streamed = point_estimate(concatenate([d for d in decompositions if d is not None]))
        assert streamed == pytest.approx(whole.value, rel=0, abs=1e-12)
        # Chunk means of `_aux` averaged image-weighted, as the scorer does, give the whole one.
        for key, per_image in whole.details.get("_aux", {}).items():
            joined = np.concatenate([np.asarray(p.details["_aux"][key]) for p in parts])
            assert joined.shape == per_image.shape
            assert float(np.mean(joined)) == pytest.approx(whole.details[key], rel=0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(CHUNKABLE & DENSE_ONLY))
@pytest.mark.parametrize("seed", SEEDS)
def test_three_dense_chunks_reduce_to_the_whole_value(name: str, seed: int) -> None:
    metric = metrics.get(name)
    dense = make_input("gzsl", seed=seed, ties=True)
    for values in variants(metric):
        whole = metric(dense, values)
        parts = [metric(rows_of(dense, rows), values) for rows in np.array_split(np.arange(60), 3)]
        decompositions = [p.decomposition for p in parts if p.decomposition is not None]
        assert len(decompositions) == 3
        streamed = point_estimate(concatenate(decompositions))
        assert streamed == pytest.approx(whole.value, rel=0, abs=1e-12)


# --- (b) calibrated stacking: gamma from validation only -----------------------------------------


def _other_scores(data: MetricInput, seed: int) -> np.ndarray:
    assert data.scores is not None
    rng = np.random.default_rng([seed, 99])
    scores = rng.standard_normal(data.scores.shape)
    scores[np.arange(len(data.y_true)), data.y_true] += rng.uniform(0.0, 3.0)
    return scores


@pytest.mark.parametrize("name", CALIBRATED)
@pytest.mark.parametrize("seed", SEEDS)
def test_calibrated_gamma_is_chosen_on_validation_not_test(name: str, seed: int) -> None:
    metric = metrics.get(name)
    data = make_input("gzsl", seed=seed)
    val = data.validation
    assert val is not None and val.scores is not None
    result = metric(data)
    gamma = result.details["gamma"]
    assert result.details["gamma_chosen_on"] == "validation"
    assert gamma == select_gamma(val.y_true, val.scores, val_seen=val.seen)
    # Any other test scores (or labels): the same gamma, and the value at that gamma.
    for other in range(3):
        test = replace(data, scores=_other_scores(data, other))
        assert test.scores is not None
        moved = metric(test)
        assert moved.details["gamma"] == gamma
        expected = calibrated_harmonic_mean(test.y_true, test.scores, seen=test.seen, gamma=gamma)
        key = name.removeprefix("calibrated_").removesuffix("_accuracy")
        assert moved.value == getattr(expected, key)
    relabeled = replace(data, y_true=np.roll(data.y_true, 1))
    assert metric(relabeled).details["gamma"] == gamma
    # Other validation scores move gamma.
    gammas = {
        metric(replace(data, validation=replace(val, scores=_other_scores(val, other)))).details[
            "gamma"
        ]
        for other in range(3)
    }
    assert gammas - {gamma}


# --- (c) DARTS: temperature and lambda from validation only --------------------------------------


@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
@pytest.mark.parametrize("seed", SEEDS)
def test_darts_reward_lambda_is_chosen_on_validation_not_test(setting: str, seed: int) -> None:
    metric = metrics.get("darts_reward")
    data = make_input(setting, seed=seed)
    val = data.validation
    assert val is not None and val.scores is not None
    details = metric(data).details
    assert details["lambda_chosen_on"] == "validation"
    assert details["temperature"] == fit_temperature(val.scores, val.y_true)
    lambdas = [point["lambda"] for point in details["curve"]]
    assert details["lambda"] == lambdas[[p["target"] for p in details["curve"]].index(0.9)]
    for other in range(3):
        moved = metric(replace(data, scores=_other_scores(data, other))).details
        assert moved["lambda"] == details["lambda"]
        assert moved["temperature"] == details["temperature"]
        assert [point["lambda"] for point in moved["curve"]] == lambdas
    changed = {
        metric(replace(data, validation=replace(val, scores=_other_scores(val, other)))).details[
            "lambda"
        ]
        for other in range(3)
    }
    assert changed - {details["lambda"]}


@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
def test_darts_lambda_does_not_depend_on_test_labels(setting: str) -> None:
    data = make_input(setting, seed=0)
    relabeled = replace(data, y_true=np.roll(data.y_true, 3))
    for name in ("darts_area", "darts_reward"):
        metric = metrics.get(name)
        before, after = metric(data).details, metric(relabeled).details
        assert [p["lambda"] for p in after["curve"]] == [p["lambda"] for p in before["curve"]]


def test_darts_reward_unreachable_target_raises() -> None:
    # 60 validation images cannot certify 0.99 at 95% confidence: 0.05 ** (1 / 60) < 0.99.
    metric = metrics.get("darts_reward")
    with pytest.raises(
        MetricError,
        match=r"validation target accuracy 0.99 to be reachable on the validation images",
    ):
        metric(make_input("zsl", seed=0), params(metric, target=0.99))


def _posteriors(rng: np.random.Generator, y: np.ndarray, c: int, sharp: float) -> np.ndarray:
    """Dirichlet rows; ``sharp`` > 0 adds mass to the true column, < 0 to the next column."""
    rows = rng.dirichlet(np.ones(c), size=len(y))
    target = y if sharp > 0 else (y + 1) % c
    rows[np.arange(len(y)), target] += abs(sharp)
    return rows / rows.sum(axis=1, keepdims=True)


def _reference_reward(data: MetricInput, target: float) -> dict[str, float]:
    """darts_reward recomputed with the plain-loop DARTS of test_darts: lambda searched on the
    validation graph (its own candidates), then applied on the test graph."""
    val = data.validation
    assert val is not None and val.scores is not None and data.scores is not None
    on_val = Reference(HIERARCHY, HIERARCHY.indices(list(val.candidates)).tolist())
    on_test = Reference(HIERARCHY, HIERARCHY.indices(list(data.candidates)).tolist())
    n = len(val.y_true)
    lows = [
        binomtest(k, n, alternative="greater").proportion_ci(0.95, method="exact").low
        for k in range(n + 1)
    ]
    needed = next(k for k in range(n + 1) if lows[k] >= target)
    val_nodes = [on_val.node_posteriors(list(row)) for row in val.scores]
    lam = on_val.search(val_nodes, val.y_true.tolist(), needed, target)
    assert lam is not None
    correct, gain = [], []
    for row, y in zip(data.scores, data.y_true.tolist(), strict=True):
        v = on_test.predict(on_test.node_posteriors(list(row)), lam)
        correct.append(y in on_test.sets[v])
        gain.append(on_test.rewards[v] / on_test.rmax if correct[-1] else 0.0)
    return {
        "lambda": lam,
        "val_accuracy": on_val.hits(val_nodes, val.y_true.tolist(), lam) / n,
        "test_accuracy": sum(correct) / len(correct),
        "value": sum(gain) / len(gain),
    }


@pytest.mark.parametrize(
    ("test_sharp", "reaches"),
    [(3.0, True), (-3.0, False)],  # test as easy as validation, or confidently wrong
)
def test_darts_reward_reports_the_test_accuracy_its_validation_lambda_reaches(
    test_sharp: float, reaches: bool
) -> None:
    # Validation posteriors put extra mass on the true leaf, so lambda meets 90% there; the
    # test posteriors are as good (the target holds on test too) or put it on a wrong leaf
    # (the same lambda reaches far less than 90% on test: nothing guarantees it there).
    rng = np.random.default_rng(3)
    data = make_input("zsl", seed=0)
    val = data.validation
    assert val is not None
    val_scores = _posteriors(rng, val.y_true, len(val.candidates), 3.0)
    test_scores = _posteriors(rng, data.y_true, N_CANDIDATES, test_sharp)
    data = replace(data, scores=test_scores, validation=replace(val, scores=val_scores))
    metric = metrics.get("darts_reward")
    result = metric(data, params(metric, posterior="as_is", target=0.9))
    expected = _reference_reward(data, 0.9)
    details = result.details
    assert details["target"] == 0.9 and details["target_on"] == "validation"
    assert details["lambda"] == pytest.approx(expected["lambda"], rel=1e-12)
    assert details["val_accuracy"] == pytest.approx(expected["val_accuracy"])
    assert details["val_lower_bound"] >= 0.9
    assert details["test_accuracy"] == pytest.approx(expected["test_accuracy"])
    assert result.value == pytest.approx(expected["value"])
    assert details["test_reaches_target"] is (details["test_accuracy"] >= 0.9)
    assert details["test_reaches_target"] is reaches
    # The curve point of the target is the same operating point.
    point = next(p for p in details["curve"] if p["target"] == 0.9)
    assert (point["accuracy"], point["info_gain"]) == (details["test_accuracy"], result.value)


# --- (d) prediction relation share, by hand -------------------------------------------------------

# Candidates mixing leaves and inner nodes of the fixed DAG (no antichain needed here):
RELATION_CANDIDATES = [C["c2"], "pet", "mammal", "animal", C["c3"], C["c6"]]
C2, PET, MAMMAL, ANIMAL, C3, C6 = range(6)
# (true column, top-1 column, relation), reasons from the DAG in test_common:
RELATION_CASES = [
    (C2, C2, "correct"),
    (C2, PET, "ancestor"),  # pet -> c2 (c2's second parent)
    (C2, MAMMAL, "ancestor"),  # mammal -> c2
    (C2, ANIMAL, "ancestor"),  # animal -> mammal -> c2 and animal -> pet -> c2
    (C3, ANIMAL, "ancestor"),  # animal -> pet -> c3 and animal -> bird -> c3
    (PET, C3, "descendant"),  # pet -> c3
    (PET, C2, "descendant"),  # pet -> c2
    (ANIMAL, MAMMAL, "descendant"),  # animal -> mammal
    (MAMMAL, PET, "sibling"),  # both under animal
    (C2, C3, "sibling"),  # both under pet (c2's second parent, c3's first)
    (MAMMAL, C3, "unrelated"),  # c3's parents are pet and bird: mammal's nephew, not its sibling
    (C6, C2, "unrelated"),  # artifact -> tool -> c6 vs animal -> ... -> c2
    (ANIMAL, C6, "unrelated"),  # c6 lies under artifact
]
# 13 images: correct 1, ancestor 4, descendant 3, sibling 2, unrelated 3;
# semantic_upper = (1 + 4 + 3) / 13 = 8/13 (a sibling is a mistake).
RELATION_EXPECTED = {
    "correct": 1 / 13,
    "ancestor": 4 / 13,
    "descendant": 3 / 13,
    "sibling": 2 / 13,
    "unrelated": 3 / 13,
    "semantic_upper": 8 / 13,
}
SHARES = ("correct", "ancestor", "descendant", "sibling", "unrelated")


@pytest.mark.parametrize("as_topk", [False, True])
def test_prediction_relation_share_hand_computed(as_topk: bool) -> None:
    y_true = np.array([case[0] for case in RELATION_CASES])
    scores = np.zeros((len(RELATION_CASES), len(RELATION_CANDIDATES)))
    scores[np.arange(len(RELATION_CASES)), [case[1] for case in RELATION_CASES]] = 1.0
    data = MetricInput(
        setting="zsl",
        y_true=y_true,
        scores=scores,
        candidates=np.array(RELATION_CANDIDATES),
        seen=np.zeros(len(RELATION_CANDIDATES), dtype=bool),
        hierarchy=HIERARCHY,
        candidate_nodes=HIERARCHY.indices(RELATION_CANDIDATES),
    )
    if as_topk:
        data = to_topk(data, k=2)
    metric = metrics.get("prediction_relation_share")
    for relation, expected in RELATION_EXPECTED.items():
        result = metric(data, params(metric, relation=relation))
        assert result.value == pytest.approx(expected, rel=0, abs=1e-15)
        assert result.details["relation"] == relation
    details = metric(data).details
    for relation in SHARES:
        assert details[relation] == pytest.approx(RELATION_EXPECTED[relation], abs=1e-15)
    assert details["semantic_accuracy_lower"] == pytest.approx(1 / 13, abs=1e-15)
    assert details["semantic_accuracy_upper"] == pytest.approx(8 / 13, abs=1e-15)
    # Per image, through the decomposition: image i counts for the relation of case i.
    for relation in SHARES:
        decomposition = metric(data, params(metric, relation=relation)).decomposition
        assert decomposition is not None
        expected_hits = [float(case[2] == relation) for case in RELATION_CASES]
        assert decomposition.values.tolist() == expected_hits


def test_prediction_relation_share_on_leaf_candidates_is_top1_accuracy() -> None:
    # The test candidates are leaves: no prediction is an ancestor or descendant of another.
    metric = metrics.get("prediction_relation_share")
    accuracy = metrics.get("per_image_top_k_accuracy")
    for seed in SEEDS:
        data = make_input("zsl", seed=seed)
        details = metric(data).details
        assert details["ancestor"] == details["descendant"] == 0.0
        assert metric(data).value == accuracy(data).value


# --- (e) hp@1 is the top-1 accuracy ---------------------------------------------------------------


def _random_input(seed: int, n_images: int, setting: str, ties: bool) -> MetricInput:
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, N_CANDIDATES, n_images)
    scores = rng.standard_normal((n_images, N_CANDIDATES))
    scores[np.arange(n_images), y_true] += rng.uniform(0.0, 2.0)
    if ties:
        scores = np.round(scores)
    seen = np.arange(N_CANDIDATES) < (N_CANDIDATES // 2 if setting == "gzsl" else 0)
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y_true,
        scores=scores,
        candidates=np.array(TEST_LEAVES),
        seen=seen,
        hierarchy=HIERARCHY,
        candidate_nodes=HIERARCHY.indices(TEST_LEAVES),
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_images=st.integers(1, 50),
    setting=st.sampled_from(["zsl", "gzsl"]),
    valid=st.sampled_from(["candidates", "hierarchy"]),
    as_topk=st.booleans(),
)
def test_hp_at_1_equals_per_image_top_1_accuracy(
    seed: int, n_images: int, setting: str, valid: str, as_topk: bool
) -> None:
    data = _random_input(seed, n_images, setting, ties=False)  # continuous: no tied top score
    if as_topk:
        data = to_topk(data, k=3)
    hp = metrics.get("hierarchical_precision_at_k")
    accuracy = metrics.get("per_image_top_k_accuracy")
    assert (
        hp(data, params(hp, k=1, valid=valid)).value == accuracy(data, params(accuracy, k=1)).value
    )


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_images=st.integers(1, 50))
def test_hp_at_1_at_least_per_image_top_1_accuracy_with_ties(seed: int, n_images: int) -> None:
    # Tied top scores count against the true class in the flat accuracy, while the ranking puts
    # the smaller column first: hp@1 can only be higher.
    data = _random_input(seed, n_images, "zsl", ties=True)
    hp = metrics.get("hierarchical_precision_at_k")(data).value
    assert hp >= metrics.get("per_image_top_k_accuracy")(data).value


@pytest.mark.parametrize("as_topk", [False, True])
@pytest.mark.parametrize("valid", ["candidates", "hierarchy"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_per_class_hp_at_k_is_the_class_mean_of_the_per_image_values(
    k: int, valid: str, as_topk: bool
) -> None:
    # The same per-image hp@k values, grouped by true class in a dict: the per-class metric is
    # the mean of the class means; on these class-imbalanced inputs it differs from the
    # per-image mean.
    data = make_input("zsl", seed=2, n_images=40)
    if as_topk:
        data = to_topk(data, k=5)
    per_image = metrics.get("hierarchical_precision_at_k")
    per_class = metrics.get("per_class_hierarchical_precision_at_k")
    image_result = per_image(data, params(per_image, k=k, valid=valid))
    class_result = per_class(data, params(per_class, k=k, valid=valid))
    assert image_result.decomposition is not None
    groups: dict[int, list[float]] = {}
    for y, value in zip(
        data.y_true.tolist(), image_result.decomposition.values.tolist(), strict=True
    ):
        groups.setdefault(y, []).append(value)
    means = [sum(v) / len(v) for v in groups.values()]
    assert class_result.value == pytest.approx(sum(means) / len(means), abs=1e-12)
    assert class_result.value != pytest.approx(image_result.value, abs=1e-9)
    assert class_result.details["k"] == k and class_result.details["valid"] == valid
    assert class_result.details["n_images"] == 40


# --- other wrappers -------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
def test_mistake_severity_without_mistakes_is_zero(setting: str) -> None:
    data = make_input(setting, seed=0)
    assert data.scores is not None
    perfect = data.scores.copy()
    perfect[np.arange(len(data.y_true)), data.y_true] += 100.0
    result = metrics.get("mistake_severity")(replace(data, scores=perfect))
    assert result.value == 0.0 and result.details["n_mistakes"] == 0
    assert result.decomposition is None  # nothing to resample


@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
def test_validation_has_its_own_candidates(setting: str) -> None:
    # The fixture the registry tests rely on: validation classes differ from the test ones,
    # are leaves of the same DAG, and (gzsl) hold both seen and unseen images.
    val = make_validation(setting, seed=0)
    test = make_input(setting, seed=0)
    assert set(val.candidates.tolist()) != set(test.candidates.tolist())
    assert val.candidate_nodes is not None
    assert set(val.candidate_nodes.tolist()) <= set(HIERARCHY.leaves.tolist())
    image_seen = val.seen[val.y_true]
    assert image_seen.any() == (setting == "gzsl")
    assert (~image_seen).any()
