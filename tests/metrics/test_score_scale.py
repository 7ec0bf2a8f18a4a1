"""Tests of harness.metrics.score_scale, harness.data.scale_images and of carrying validation-chosen values between fits.

Calibrated stacking's gamma and DARTS's softmax temperature are chosen on the validation fit's
scores and applied to the main fit's in units of each fit's score scale. So rescaling one fit's
scores affinely (test or validation scores together with that fit's scale-image scores) must
leave every calibrated accuracy, AUSUC and DARTS value unchanged; only the carried parameters
move, by the rescaling factor. Checked on the functions (:func:`score_scale`, :func:`scale_rows`,
:func:`carried`), on the registered metrics, and end to end through the pipeline.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.core.errors import MetricError
from harness.data import scale_images as scale_images_module
from harness.data.prepare import load_benchmark
from harness.data.scale_images import SCALE_IMAGES, scale_rows
from harness.hierarchy import Hierarchy
from harness.metrics import MetricInput, MetricResult, metrics
from harness.metrics.calibrated_stacking import calibrated_harmonic_mean
from harness.metrics.score_scale import carried, score_scale
from harness.pipeline import generate_prediction_files, run_submission
from harness.records import SCALE_SETTINGS, RunRecord
from harness.spec import load_spec
from harness.submission.package import load_package
from harness.submission.predictions import read_predictions, write_predictions
from tests.conftest import SPECS, SUBMISSIONS

DEMO = SPECS / "demo.yaml"

# --- score_scale ----------------------------------------------------------------------------------


def test_score_scale_hand_computed() -> None:
    # Row 0: [1, 2, 3] has mean 2 and (population) variance (1 + 0 + 1) / 3 = 2/3.
    # Row 1: [0, 0, 6] has mean 2 and variance (4 + 4 + 16) / 3 = 8. The scale is their mean.
    scores = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    assert score_scale(scores) == pytest.approx((math.sqrt(2 / 3) + math.sqrt(8)) / 2, rel=1e-15)
    assert score_scale(np.array([[0.0, 2.0], [1.0, 1.0]])) == 0.5
    # float32 and integer scores are measured in float64 and give a Python float.
    assert isinstance(score_scale(scores.astype(np.float32)), float)
    assert score_scale(scores.astype(np.float32)) == pytest.approx(score_scale(scores), rel=1e-7)
    assert score_scale(np.array([[1, 2, 3], [0, 0, 6]])) == score_scale(scores)


@settings(deadline=None, max_examples=200)
@given(
    scores=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=5),
        elements=st.floats(-100, 100, allow_nan=False, allow_infinity=False),
    ),
    a=st.floats(1e-3, 1e3),
    b=st.floats(-100, 100),
)
def test_score_scale_is_affine_equivariant(scores: np.ndarray, a: float, b: float) -> None:
    # Rounding of a * s + b is relative to the entries' magnitude, not to their spread.
    tolerance = 1e-12 * (abs(b) + a * float(np.abs(scores).max()) + 1.0)
    assert score_scale(a * scores + b) == pytest.approx(
        a * score_scale(scores), rel=1e-9, abs=tolerance
    )


def test_score_scale_stays_finite_for_huge_finite_scores() -> None:
    """Squaring 1e160 overflows; the spread of finite scores must not (else no unit)."""
    assert score_scale(np.array([[1e160, -1e160]])) == pytest.approx(1e160, rel=1e-12)
    assert score_scale(np.array([[1e308, -1e308], [-1e308, 1e308]])) == pytest.approx(1e308)


def test_score_scale_is_zero_for_constant_rows() -> None:
    assert score_scale(np.array([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0], [0.0, 0.0, 0.0]])) == 0.0
    assert score_scale(np.full((4, 7), 7.5)) == 0.0
    assert score_scale(np.array([[3.0], [-1.0]])) == 0.0  # one candidate: no spread


@pytest.mark.parametrize(
    ("bad", "described"), [(math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf")]
)
def test_score_scale_refuses_non_finite_scores(bad: float, described: str) -> None:
    scores = np.zeros((3, 4))
    scores[1, 2] = bad
    with pytest.raises(
        MetricError,
        match=rf"Expected `scores` to contain only finite values, but row 1 holds {described}"
        r" \(at column 2\)",
    ):
        score_scale(scores)


def test_score_scale_refuses_malformed_scores() -> None:
    with pytest.raises(MetricError, match=r"Expected `scores` to be a 2D array"):
        score_scale(np.zeros(3))
    with pytest.raises(MetricError, match=r"at least one image and one candidate"):
        score_scale(np.zeros((0, 3)))


# --- scale_rows -----------------------------------------------------------------------------------


def _stratified(chosen_labels: np.ndarray, labels: np.ndarray) -> bool:
    """Whether the chosen images are a prefix in (k-th image of its class) order: no class has
    a (k+1)-th image chosen while another class that has a k-th image lacks it."""
    sizes = {c: int(np.sum(labels == c)) for c in np.unique(labels)}
    counts = {c: int(np.sum(chosen_labels == c)) for c in sizes}
    most = max(counts.values())
    return all(counts[c] >= min(sizes[c], most - 1) for c in sizes)


def test_scale_rows_are_a_class_stratified_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    # Three classes of 5, 2 and 9 images, with image indices that are not 0..n-1 and labels in
    # no particular order.
    labels = np.array([7] * 5 + [3] * 2 + [11] * 9)
    labels = labels[np.random.default_rng(0).permutation(len(labels))]
    images = 1000 + 3 * np.arange(len(labels))
    label_of = dict(zip(images.tolist(), labels.tolist(), strict=True))
    for n in range(1, len(images) + 3):
        monkeypatch.setattr(scale_images_module, "SCALE_IMAGES", n)
        for seed in range(5):
            out = scale_rows(images, labels, seed)
            assert out.dtype == np.int64
            assert len(out) == min(n, len(images))
            assert len(set(out.tolist())) == len(out)  # no repeats
            assert set(out.tolist()) <= set(images.tolist())
            chosen = np.array([label_of[i] for i in out.tolist()])
            assert _stratified(chosen, labels), (n, seed, chosen)
    # 7 images: two of each class (6), then one more from a class with a third.
    monkeypatch.setattr(scale_images_module, "SCALE_IMAGES", 7)
    chosen = np.array([label_of[i] for i in scale_rows(images, labels, 0).tolist()])
    counts = sorted(int(np.sum(chosen == c)) for c in (3, 7, 11))
    assert counts == [2, 2, 3]
    assert int(np.sum(chosen == 3)) == 2  # the class of 2 images cannot give the third


@settings(deadline=None, max_examples=100)
@given(
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=5),
    cap=st.integers(1, 30),
    seed=st.integers(0, 2**63 - 1),
)
def test_scale_rows_stratification_property(sizes: list[int], cap: int, seed: int) -> None:
    labels = np.repeat(np.arange(len(sizes)) * 5, sizes)
    labels = labels[np.random.default_rng(seed % 1000).permutation(len(labels))]
    images = np.arange(len(labels)) * 2 + 1
    with mock.patch.object(scale_images_module, "SCALE_IMAGES", cap):
        out = scale_rows(images, labels, seed)
    assert len(out) == min(cap, len(images))
    assert len(np.unique(out)) == len(out)
    assert np.isin(out, images).all()
    assert _stratified(labels[(out - 1) // 2], labels)


def test_scale_rows_take_every_image_below_the_cap() -> None:
    labels = np.array([0, 1, 1, 2, 2, 2])
    images = np.array([5, 9, 2, 40, 41, 17])
    out = scale_rows(images, labels, 1)
    assert sorted(out.tolist()) == sorted(images.tolist())
    assert len(images) <= SCALE_IMAGES


def test_scale_rows_are_capped_at_scale_images() -> None:
    labels = np.arange(SCALE_IMAGES + 500) % 7
    images = np.arange(SCALE_IMAGES + 500)
    out = scale_rows(images, labels, 3)
    assert len(out) == SCALE_IMAGES
    counts = np.bincount(labels[out], minlength=7)
    assert counts.max() - counts.min() <= 1


def test_scale_rows_are_deterministic_for_a_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale_images_module, "SCALE_IMAGES", 12)
    labels = np.repeat([0, 1, 2], [10, 25, 15])
    images = np.arange(len(labels)) + 100
    first = scale_rows(images, labels, 42)
    assert np.array_equal(scale_rows(images, labels, 42), first)
    assert np.array_equal(scale_rows(images.copy(), labels.copy(), 42), first)
    others = [scale_rows(images, labels, seed) for seed in (43, 2**40, 0)]
    assert all(not np.array_equal(other, first) for other in others)
    assert all(set(other.tolist()) != set(first.tolist()) for other in others)


def test_scale_settings_are_the_main_then_the_validation_fit() -> None:
    assert SCALE_SETTINGS == ("scale", "scale_val")
    spec = load_spec(DEMO)
    assert spec.fit_settings("main")[-1] == "scale"
    assert spec.fit_settings("validation")[-1] == "scale_val"


# --- carried --------------------------------------------------------------------------------------


def test_carried_is_the_ratio_of_the_scales() -> None:
    assert carried(0.2, chosen_scale=2.0, applied_scale=0.5) == pytest.approx(0.05, rel=1e-15)
    assert carried(3.0, chosen_scale=1.0, applied_scale=10.0) == 30.0
    assert carried(-1.5, chosen_scale=4.0, applied_scale=4.0) == -1.5
    assert carried(0.0, chosen_scale=1.0, applied_scale=7.0) == 0.0
    assert carried(2.0, chosen_scale=0.1, applied_scale=0.1 / 20) == pytest.approx(0.1, rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_carried_is_unchanged_without_a_unit(bad: float) -> None:
    assert carried(0.7, chosen_scale=bad, applied_scale=2.0) == 0.7
    assert carried(0.7, chosen_scale=2.0, applied_scale=bad) == 0.7
    assert carried(0.7, chosen_scale=bad, applied_scale=bad) == 0.7


# --- registered metrics: rescaling one fit changes nothing -----------------------------------------

# Classes, as in the harness's splits: the seen classes are the training classes s0..s2 (which
# the validation fit trains on) and the validation classes s3..s5 (which it does not); u0..u3
# are unseen. Validation (GZSL): s0..s5, s3..s5 playing unseen; validation (ZSL): s3..s5. The
# scale images are training-class images scored against s0..s2 by both fits.
SEEN = [f"s{j}" for j in range(6)]
UNSEEN = [f"u{j}" for j in range(4)]
TRAIN, VAL = SEEN[:3], SEEN[3:]
CHILDREN = {
    "entity": ["animal", "artifact"],
    "animal": ["mammal", "bird"],
    "artifact": ["vehicle", "tool"],
    "mammal": ["s0", "s3", "u0"],
    "bird": ["s1", "s4", "u1"],
    "vehicle": ["s2", "u2"],
    "tool": ["s5", "u3"],
}
EDGES = [(parent, child) for parent, kids in CHILDREN.items() for child in kids]
HIERARCHY = Hierarchy(sorted({node for edge in EDGES for node in edge}), EDGES, source="test")

CALIBRATED = ["calibrated_harmonic_mean", "calibrated_seen_accuracy", "calibrated_unseen_accuracy"]
DARTS = ["darts_area", "darts_reward"]
# Details that are parameters in one fit's units: they move with a rescaling (the others don't).
CARRIED_KEYS = {"gamma", "gamma_validation", "score_scale", "score_scale_validation"}
TEMPERATURE_KEYS = {"temperature", "test_temperature"}
#: (a, b): a fit's scores become a * scores + b.
AFFINES = [(10.0, 0.0), (1.0, 3.0), (0.1, 5.0)]


def _model_scores(
    rng: np.random.Generator, y_true: np.ndarray, seen: np.ndarray, *, bias: float
) -> np.ndarray:
    """A model's scores: noise, +2 on the true class, +``bias`` on seen columns."""
    scores = rng.normal(0.0, 1.0, (len(y_true), len(seen)))
    scores[np.arange(len(y_true)), y_true] += 2.0
    return scores + bias * seen


def _labels(rng: np.random.Generator, n_classes: int, n: int) -> np.ndarray:
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class has images
    return y


def _input(
    setting: str, ids: list[str], seen: np.ndarray, y: np.ndarray, s: np.ndarray
) -> MetricInput:
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y,
        scores=s,
        candidates=np.array(ids),
        seen=seen,
        hierarchy=HIERARCHY,
        candidate_nodes=HIERARCHY.indices(ids),
    )


@dataclass(frozen=True)
class Problem:
    """Both fits' predictions for one setting: the main fit's test scores and scale-image
    scores, the validation fit's validation scores and scale-image scores."""

    test: MetricInput
    validation: MetricInput
    scale: np.ndarray  # main fit, scale images x training classes
    scale_val: np.ndarray  # validation fit, the same images and classes

    def input(
        self, main: tuple[float, float] = (1.0, 0.0), val: tuple[float, float] = (1.0, 0.0)
    ) -> MetricInput:
        """The metric input after rescaling each fit (its scores and scale-image scores alike);
        each fit's score scale computed from its scale-image scores, as harness.scoring does."""
        (a, b), (c, d) = main, val
        assert self.test.scores is not None and self.validation.scores is not None
        validation = replace(
            self.validation,
            scores=c * self.validation.scores + d,
            score_scale=score_scale(c * self.scale_val + d),
        )
        return replace(
            self.test,
            scores=a * self.test.scores + b,
            score_scale=score_scale(a * self.scale + b),
            validation=validation,
        )


def _scale_images(seed: int, n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Both fits' scores on the same training-class images (different models: different noise)."""
    rng = np.random.default_rng([seed, 3])
    y = _labels(rng, len(TRAIN), n)
    train = np.ones(len(TRAIN), dtype=bool)
    return _model_scores(rng, y, train, bias=0.0), 0.8 * _model_scores(rng, y, train, bias=0.0)


def gzsl_problem(seed: int, *, seen_bias: float = 2.0) -> Problem:
    """6 seen + 4 unseen test candidates, 200 test images scored with a seen bias; 150
    validation images over s0..s5 (s3..s5 playing unseen) with the same bias."""
    rng = np.random.default_rng([seed, 1])
    ids = SEEN + UNSEEN
    seen = np.isin(ids, SEEN)
    y = _labels(rng, len(ids), 200)
    test = _input("gzsl", ids, seen, y, _model_scores(rng, y, seen, bias=seen_bias))
    val_seen = np.isin(SEEN, TRAIN)
    y_val = _labels(rng, len(SEEN), 150)
    val_scores = _model_scores(rng, y_val, val_seen, bias=seen_bias)
    validation = _input("gzsl", SEEN, val_seen, y_val, val_scores)
    return Problem(test, validation, *_scale_images(seed))


def zsl_problem(seed: int) -> Problem:
    """ZSL, as the demo spec scores DARTS: 120 test images over u0..u3, 150 validation images
    over the validation classes s3..s5."""
    rng = np.random.default_rng([seed, 2])
    none = np.zeros(len(UNSEEN), dtype=bool)
    y = _labels(rng, len(UNSEEN), 120)
    test = _input("zsl", UNSEEN, none, y, _model_scores(rng, y, none, bias=0.0))
    y_val = _labels(rng, len(VAL), 150)
    val_none = np.zeros(len(VAL), dtype=bool)
    validation = _input("zsl", VAL, val_none, y_val, _model_scores(rng, y_val, val_none, bias=0.0))
    return Problem(test, validation, *_scale_images(seed))


def _compute(name: str, data: MetricInput) -> MetricResult:
    metric = metrics.get(name)
    return metric(data, metric.params())


def _decomposition_values(result: MetricResult) -> np.ndarray:
    assert result.decomposition is not None
    return np.asarray(result.decomposition.values)


def _assert_same_calibrated(name: str, base: MetricResult, moved: MetricResult) -> None:
    assert moved.value == base.value, name
    assert {k: v for k, v in moved.details.items() if k not in CARRIED_KEYS} == {
        k: v for k, v in base.details.items() if k not in CARRIED_KEYS
    }
    # The same test images are right: the same per-image decomposition (paired tests, intervals).
    assert np.array_equal(_decomposition_values(moved), _decomposition_values(base))


def _darts_view(details: dict[str, Any]) -> dict[str, Any]:
    """DARTS details without the temperatures (in a fit's units) and the curve's lambdas (in
    posterior units: compared apart, to a tolerance when the validation fit is rescaled)."""
    out = {k: v for k, v in details.items() if k not in TEMPERATURE_KEYS | {"lambda", "curve"}}
    out["curve"] = [{k: v for k, v in p.items() if k != "lambda"} for p in details["curve"]]
    return out


def _lambdas(details: dict[str, Any]) -> list[float]:
    return [p["lambda"] for p in details["curve"]] + (
        [details["lambda"]] if "lambda" in details else []
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_problems_are_not_trivial(seed: int) -> None:
    # The rescaling tests below are only worth something if gamma is far from 0 and the
    # calibrated accuracies are strictly between 0 and 1.
    data = gzsl_problem(seed).input()
    h = _compute("calibrated_harmonic_mean", data)
    assert h.details["gamma"] > 0.5
    assert 0.2 < h.details["seen"] < 0.95 and 0.2 < h.details["unseen"] < 0.95
    reward = _compute("darts_reward", zsl_problem(seed).input())
    assert reward.details["test_temperature"] != reward.details["temperature"]
    assert 0 < reward.value < 1


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("a", "b"), AFFINES)
def test_rescaling_the_main_fit_leaves_calibrated_metrics_unchanged(
    seed: int, a: float, b: float
) -> None:
    problem = gzsl_problem(seed)
    for name in CALIBRATED:
        base = _compute(name, problem.input())
        moved = _compute(name, problem.input(main=(a, b)))
        _assert_same_calibrated(name, base, moved)
        # The validation fit is untouched: its gamma and scale are the same numbers.
        assert moved.details["gamma_validation"] == base.details["gamma_validation"]
        assert moved.details["score_scale_validation"] == base.details["score_scale_validation"]
        assert moved.details["score_scale"] == pytest.approx(a * base.details["score_scale"])
        assert moved.details["gamma"] == pytest.approx(a * base.details["gamma"], rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("a", "b"), AFFINES)
def test_rescaling_the_validation_fit_leaves_calibrated_metrics_unchanged(
    seed: int, a: float, b: float
) -> None:
    problem = gzsl_problem(seed)
    for name in CALIBRATED:
        base = _compute(name, problem.input())
        moved = _compute(name, problem.input(val=(a, b)))
        _assert_same_calibrated(name, base, moved)
        assert moved.details["score_scale"] == base.details["score_scale"]
        assert moved.details["score_scale_validation"] == pytest.approx(
            a * base.details["score_scale_validation"], rel=1e-9
        )
        assert moved.details["gamma_validation"] == pytest.approx(
            a * base.details["gamma_validation"], rel=1e-9
        )
        assert moved.details["gamma"] == pytest.approx(base.details["gamma"], rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("fit", ["main", "val"])
@pytest.mark.parametrize(("a", "b"), AFFINES)
def test_rescaling_one_fit_leaves_ausuc_unchanged(seed: int, fit: str, a: float, b: float) -> None:
    # AUSUC sweeps every gamma on the test scores: nothing is carried, nothing may move.
    problem = gzsl_problem(seed)
    base = _compute("ausuc", problem.input())
    rescaled = problem.input(main=(a, b)) if fit == "main" else problem.input(val=(a, b))
    moved = _compute("ausuc", rescaled)
    assert moved.value == pytest.approx(base.value, rel=1e-12)
    assert moved.details == base.details  # the curve's points
    assert moved.class_values is not None
    assert moved.class_values == base.class_values  # per-class shares of the curve's points


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("a", "b"), AFFINES)
def test_rescaling_the_main_fit_leaves_darts_unchanged(seed: int, a: float, b: float) -> None:
    problem = zsl_problem(seed)
    for name in DARTS:
        base = _compute(name, problem.input())
        moved = _compute(name, problem.input(main=(a, b)))
        assert moved.value == pytest.approx(base.value, rel=1e-9), name
        assert _darts_view(moved.details) == _darts_view(base.details)
        # lambda is chosen on the (untouched) validation fit: the same numbers.
        assert _lambdas(moved.details) == _lambdas(base.details)
        assert moved.details["temperature"] == base.details["temperature"]
        assert moved.details["test_temperature"] == pytest.approx(
            a * base.details["test_temperature"], rel=1e-9
        )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("a", "b"), AFFINES)
def test_rescaling_the_validation_fit_leaves_darts_unchanged(seed: int, a: float, b: float) -> None:
    problem = zsl_problem(seed)
    for name in DARTS:
        base = _compute(name, problem.input())
        moved = _compute(name, problem.input(val=(a, b)))
        assert moved.value == pytest.approx(base.value, rel=1e-9), name
        assert _darts_view(moved.details) == _darts_view(base.details)
        # The temperature is fitted by a bounded Brent search to 1e-8 in log T
        # (harness.metrics.temperature), so on rescaled validation scores it is a * T only to
        # about 1e-8, and so are the posteriors and the lambdas searched on them.
        assert moved.details["temperature"] == pytest.approx(
            a * base.details["temperature"], rel=1e-7
        )
        assert moved.details["test_temperature"] == pytest.approx(
            base.details["test_temperature"], rel=1e-7
        )
        assert _lambdas(moved.details) == pytest.approx(_lambdas(base.details), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_main_fit_with_smaller_scores_keeps_its_calibrated_accuracies(seed: int) -> None:
    # The reported bug: the main fit is the validation-like model with scores 20 times smaller
    # (ESZSL with a stronger regulariser). gamma in the validation fit's units exceeds every
    # seen-over-unseen margin of the main fit: calibrated seen accuracy 0.
    problem = gzsl_problem(seed, seen_bias=2.0)
    unscaled = problem.input()
    small = problem.input(main=(1 / 20, 0.0))
    assert small.scores is not None
    gamma_validation = _compute("calibrated_harmonic_mean", small).details["gamma_validation"]
    uncarried = calibrated_harmonic_mean(
        small.y_true, small.scores, seen=small.seen, gamma=gamma_validation
    )
    assert uncarried.seen == 0.0  # the bug's symptom, had gamma not been carried

    seen = _compute("calibrated_seen_accuracy", small)
    assert seen.value > 0.2
    h_small = _compute("calibrated_harmonic_mean", small)
    h_unscaled = _compute("calibrated_harmonic_mean", unscaled)
    assert h_small.value == pytest.approx(h_unscaled.value, rel=1e-9)
    assert h_small.value > 0
    assert h_small.details["seen"] == h_unscaled.details["seen"] == seen.value
    assert h_small.details["unseen"] == h_unscaled.details["unseen"]
    assert h_small.details["gamma"] == pytest.approx(h_unscaled.details["gamma"] / 20, rel=1e-9)


@pytest.mark.parametrize("name", CALIBRATED + DARTS)
def test_metrics_carrying_a_value_need_both_scales(name: str) -> None:
    problem = gzsl_problem(0) if name in CALIBRATED else zsl_problem(0)
    data = problem.input()
    assert data.validation is not None
    for missing in (
        replace(data, score_scale=None),
        replace(data, validation=replace(data.validation, score_scale=None)),
    ):
        with pytest.raises(MetricError, match=r"Expected both fits' score scales for metric"):
            _compute(name, missing)


# --- end to end: a prediction-file package, its main fit's files rescaled --------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite3'}"


def _entry_details(record: RunRecord, setting: str, metric: str) -> tuple[float, dict[str, Any]]:
    entry = record.score(setting, metric)
    assert entry is not None, (setting, metric)
    return float(entry.value), entry.details


@dataclass(frozen=True)
class _File:
    """One prediction file of the main fit as the generator wrote it."""

    path: Path
    setting: str
    benchmark_hash: str
    class_order_hash: str
    scores: np.ndarray


def _rescale(files: list[_File], a: float, b: float) -> None:
    """Rewrite the main fit's prediction files as a * scores + b in float64 (which the reader
    accepts), keeping their hashes and setting. A float32 score times 10 or plus 3 is exact in
    float64 (24 + 4 mantissa bits; 3 + x for |x| >= 2**-27), so rounding makes or breaks no
    tie between scores."""
    for file in files:
        write_predictions(
            file.path,
            a * file.scores.astype(np.float64) + b,
            benchmark_hash=file.benchmark_hash,
            class_order_hash=file.class_order_hash,
            setting=file.setting,
        )


@pytest.mark.slow
def test_rescaling_the_main_fits_prediction_files_changes_no_calibrated_score(
    tmp_path: Path, db: str
) -> None:
    package_dir = tmp_path / "nearest-seen-class-transfer"
    shutil.copytree(
        SUBMISSIONS / "nearest-seen-class-transfer",
        package_dir,
        ignore=shutil.ignore_patterns("__pycache__", "predictions"),
    )
    spec = load_spec(DEMO)
    bench = load_benchmark(spec)
    package = load_package(package_dir)
    generate_prediction_files(package, bench)
    base = run_submission(package_dir, DEMO, database_url=db, quiet=True)

    main_settings = spec.fit_settings("main")
    assert main_settings == ["zsl", "gzsl", "scale"]
    files = []
    for setting in main_settings:
        path = package.prediction_path(spec.benchmark, setting)
        read = read_predictions(
            path,
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
            shape=(len(bench.rows(setting)), len(bench.columns(setting))),
        )
        assert read.scores is not None and read.scores.dtype == np.float32
        files.append(
            _File(path, setting, read.benchmark_hash, read.class_order_hash, read.scores.copy())
        )

    base_ch, base_ch_details = _entry_details(base, "gzsl", "cH")
    assert {"gamma_validation", "score_scale", "score_scale_validation"} <= set(base_ch_details)
    assert base_ch_details["score_scale"] > 0 and base_ch_details["score_scale_validation"] > 0
    assert 0 < base_ch_details["seen"] < 1 and 0 < base_ch_details["unseen"] < 1
    assert "curve" in _entry_details(base, "gzsl", "AUSUC")[1]

    for a, b in [(10.0, 0.0), (1.0, 3.0)]:
        _rescale(files, a, b)
        moved = run_submission(package_dir, DEMO, database_url=db, quiet=True)
        assert moved.predictions_hashes != base.predictions_hashes  # the files did change
        ch, ch_details = _entry_details(moved, "gzsl", "cH")
        assert ch == base_ch, (a, b)
        for key in ("seen", "unseen", "harmonic_mean", "gamma_chosen_on"):
            assert ch_details[key] == base_ch_details[key], (a, b, key)
        assert ch_details["gamma_validation"] == base_ch_details["gamma_validation"]
        assert ch_details["score_scale_validation"] == base_ch_details["score_scale_validation"]
        assert ch_details["score_scale"] == pytest.approx(a * base_ch_details["score_scale"])
        assert ch_details["gamma"] == pytest.approx(a * base_ch_details["gamma"], rel=1e-9)
        assert ch_details["gamma"] == pytest.approx(
            ch_details["gamma_validation"]
            * ch_details["score_scale"]
            / ch_details["score_scale_validation"],
            rel=1e-12,
        )
        # AUSUC (value and curve) and the uncalibrated H: nothing carried, nothing moves.
        for key in ("AUSUC", "H"):
            value, details = _entry_details(moved, "gzsl", key)
            base_value, base_details = _entry_details(base, "gzsl", key)
            assert value == pytest.approx(base_value, rel=1e-12), (a, b, key)
            assert details == base_details, (a, b, key)
        # DARTS: lambda from the untouched validation fit, the temperature carried.
        for key in ("darts", "darts@val90"):
            value, details = _entry_details(moved, "zsl", key)
            base_value, base_details = _entry_details(base, "zsl", key)
            assert value == pytest.approx(base_value, rel=1e-12), (a, b, key)
            assert _darts_view(details) == _darts_view(base_details), (a, b, key)
            assert _lambdas(details) == _lambdas(base_details)
            assert details["temperature"] == base_details["temperature"]
            assert details["test_temperature"] == pytest.approx(
                a * base_details["test_temperature"], rel=1e-9
            )
    # The record says how gamma reached the main fit: chosen on validation, then carried.
    for record in (base, moved):
        _, details = _entry_details(record, "gzsl", "cH")
        assert details["gamma"] == pytest.approx(
            details["gamma_validation"]
            * details["score_scale"]
            / details["score_scale_validation"],
            rel=1e-12,
        )
