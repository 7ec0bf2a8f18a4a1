"""Paired tests for the scores that are not a mean of per-image values: the DARTS area, AUSUC
and mistake severity.

Their records keep per-class summaries (:class:`harness.records.ClassValues` kinds
``darts_area``, ``seen_unseen_area`` and ``ratio_of_means``). The tests check, against the metric
functions and against brute-force recomputations on per-image data written here:

1. the value recomputed from the summaries is the metric's value (random cases);
2. for a fixed class draw, the value recomputed from the summaries is the metric recomputed from
   scratch on the per-image data of the drawn classes (each class as often as it was drawn);
3. a pair of runs with a real difference is significant, identical runs are not;
4. a record with the summaries round-trips through the store and the record files, and older
   records without them load and say why they are not tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.core.errors import MetricError
from harness.metrics import metrics
from harness.metrics.base import MetricInput
from harness.metrics.bootstrap import bootstrap_samples, class_weights
from harness.metrics.calibrated_stacking import (
    area_under_seen_unseen_curve,
    calibrated_stacking_curve,
    calibrated_stacking_curve_from_margins,
    stacking_margins,
)
from harness.metrics.comparison import (
    CURVE_CELLS,
    class_bootstrap,
    class_point_estimates,
    curve_points,
    darts_class_values,
    seen_unseen_class_values,
    stack_class_values,
)
from harness.metrics.darts import accuracy_specificity_area
from harness.metrics.darts_prediction import darts_per_image
from harness.metrics.decomposition import Decomposition
from harness.metrics.hierarchical import mistake_severity
from harness.records import ClassCurve, ClassValues, ScoreEntry
from harness.results.records_io import dump_record, load_record
from harness.scoring import _class_values
from harness.site import build_site
from harness.site.model import plan_site
from harness.site.stats import column_tests
from harness.store import load_runs, open_store, save_run
from tests.metrics.test_common import make_input, replace
from tests.site_records import make_record

DRAWS = 6  # class draws checked against the brute force per case


def _posteriors(rng: np.random.Generator, y: np.ndarray, c: int, sharp: float) -> np.ndarray:
    """Dirichlet rows with ``sharp`` extra mass on the true column, normalised."""
    rows = rng.dirichlet(np.ones(c), size=len(y))
    rows[np.arange(len(y)), y] += sharp
    return rows / rows.sum(axis=1, keepdims=True)


def darts_input(seed: int, sharp: float, setting: str = "zsl", n_images: int = 60) -> MetricInput:
    """Posterior predictions on the shared 8-leaf hierarchy, validation informative enough for
    the DARTS targets to be reached there."""
    rng = np.random.default_rng(seed)
    data = make_input(setting, seed=seed, n_images=n_images)
    val = data.validation
    assert val is not None
    return replace(
        data,
        scores=_posteriors(rng, data.y_true, len(data.candidates), sharp),
        validation=replace(val, scores=_posteriors(rng, val.y_true, len(val.candidates), 0.5)),
    )


def score(name: str, data: MetricInput, **params: object) -> tuple[float, ClassValues, object]:
    metric = metrics.get(name)
    result = metric(data, metric.params.model_validate(params))
    values = _class_values(result)
    assert values is not None
    return result.value, values, result


# -- per-image data of a class draw (the brute force) ------------------------------------------


def drawn_images(y_true: np.ndarray, classes: list[int], weights: np.ndarray) -> np.ndarray:
    """Image indices of the drawn classes, each class's images repeated as often as drawn."""
    parts = [
        np.tile(np.flatnonzero(y_true == c), int(w)) for c, w in zip(classes, weights, strict=True)
    ]
    return np.concatenate(parts).astype(np.int64)


def draws_of(values: ClassValues, n_boot: int = DRAWS, seed: int = 3) -> tuple[np.ndarray, ...]:
    """A few class draws and the summaries' value under each (run 0 of ``class_bootstrap``)."""
    table = stack_class_values([values])
    replicates = class_bootstrap(table, n_boot=n_boot, seed=seed)[:, 0]
    return class_weights(values.groups, n_boot=n_boot, seed=seed), replicates


# -- 1. the point estimate from the summaries is the metric's value ----------------------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), sharp=st.floats(0.0, 2.0), gzsl=st.booleans())
def test_darts_area_from_class_values_is_the_metric(seed: int, sharp: float, gzsl: bool) -> None:
    data = darts_input(seed, sharp, "gzsl" if gzsl else "zsl")
    value, values, _ = score("darts_area", data, posterior="as_is")
    assert values.combine == "darts_area" and values.curve is not None
    # gains keep 10 decimals in a record: the area moves by less than 1e-10
    assert class_point_estimates(stack_class_values([values]))[0] == pytest.approx(value, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_images=st.integers(8, 200))
def test_ausuc_from_class_values_is_the_metric(seed: int, n_images: int) -> None:
    data = make_input("gzsl", seed=seed, n_images=n_images)
    value, values, _ = score("ausuc", data)
    assert values.curve is not None
    # 8 classes keep up to 128 intervals: all of them below 127 images, a subsample above
    n_points = values.curve.n_points
    kept = len(values.curve.hits[0].split())
    estimate = class_point_estimates(stack_class_values([values]))[0]
    if kept == n_points:
        assert estimate == pytest.approx(value, abs=1e-12)
    else:  # subsampled: the chord through the kept points of the exact curve
        assert kept == len(curve_points(len(values.classes), n_points))
        curve = calibrated_stacking_curve(data.y_true, data.scores, seen=data.seen)
        index = curve_points(len(values.classes), n_points)
        u, s = curve.unseen_accuracy[index], curve.seen_accuracy[index]
        assert estimate == pytest.approx(float(np.sum(np.diff(u) * (s[1:] + s[:-1]) / 2)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_images=st.integers(8, 120))
def test_severity_from_class_values_is_the_metric(seed: int, n_images: int) -> None:
    data = make_input("zsl", seed=seed, n_images=n_images)
    value, values, _ = score("mistake_severity", data)
    assert values.combine == "ratio_of_means"
    # every class with images, whatever the run's mistakes: runs line up class by class
    assert values.counts == np.bincount(data.y_true)[values.classes].tolist()
    assert class_point_estimates(stack_class_values([values]))[0] == pytest.approx(value)


def test_severity_without_mistakes_is_0_from_class_values_too() -> None:
    data = make_input("zsl", seed=1)
    perfect = replace(data, scores=np.eye(len(data.candidates))[data.y_true])
    value, values, _ = score("mistake_severity", perfect)
    assert value == 0.0 and values.denominators is not None and sum(values.denominators) == 0
    assert class_point_estimates(stack_class_values([values])).tolist() == [0.0]


# -- 2. a fixed class draw: summaries versus a recomputation on the drawn images ----------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
def test_darts_area_of_a_class_draw_is_the_area_of_the_drawn_images(
    seed: int, setting: str
) -> None:
    data = darts_input(seed, 0.4, setting)
    _, values, result = score("darts_area", data, posterior="as_is")
    lambdas = [p["lambda"] for p in result.details["curve"]]  # type: ignore[attr-defined]
    assert len(values.curve.hits[0].split()) == len(lambdas) >= 2  # type: ignore[union-attr]
    per_image = [
        darts_per_image(
            data.scores,
            data.y_true,
            lam,
            hierarchy=data.hierarchy,
            candidate_nodes=data.candidate_nodes,
        )
        for lam in lambdas
    ]
    weights, replicates = draws_of(values)
    for w, replicate in zip(weights, replicates, strict=True):
        images = drawn_images(data.y_true, values.classes, w)
        brute = accuracy_specificity_area(
            [(float(c[images].mean()), float(g[images].mean())) for c, g in per_image]
        )
        assert replicate == pytest.approx(brute, abs=1e-9)


def _relabelled(
    y_true: np.ndarray, seen: np.ndarray, classes: list[int], weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The drawn images with every copy of a class as a class of its own (AUSUC is a class
    mean within seen and unseen): image indices, their new labels, the new seen mask."""
    images, labels, new_seen = [], [], []
    for c, w in zip(classes, weights, strict=True):
        for _ in range(int(w)):
            members = np.flatnonzero(y_true == c)
            images.append(members)
            labels.append(np.full(members.shape[0], len(new_seen)))
            new_seen.append(bool(seen[c]))
    return np.concatenate(images), np.concatenate(labels), np.asarray(new_seen)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ausuc_of_a_class_draw_is_the_ausuc_of_the_drawn_images(seed: int) -> None:
    data = make_input("gzsl", seed=seed, n_images=90)
    _, values, _ = score("ausuc", data)
    assert values.curve is not None and len(values.curve.hits[0].split()) == values.curve.n_points
    margin, group_correct = stacking_margins(data.y_true, data.scores, seen=data.seen)
    weights, replicates = draws_of(values)
    for w, replicate in zip(weights, replicates, strict=True):
        images, labels, seen = _relabelled(data.y_true, data.seen, values.classes, w)
        curve = calibrated_stacking_curve_from_margins(
            labels, margin[images], group_correct[images], seen=seen
        )
        assert replicate == pytest.approx(area_under_seen_unseen_curve(curve), abs=1e-12)


def _accuracy_at(
    gamma: float, y: np.ndarray, margin: np.ndarray, right: np.ndarray, seen: np.ndarray
) -> tuple[float, float]:
    """Seen and unseen class-mean accuracy of calibrated stacking at one gamma, image by image."""
    image_seen = seen[y]
    correct = right & np.where(image_seen, gamma < margin, gamma > margin)
    per_class = np.array([correct[y == c].mean() for c in range(seen.shape[0])])
    return float(per_class[seen].mean()), float(per_class[~seen].mean())


def test_subsampled_ausuc_of_a_class_draw_is_the_chord_through_the_kept_points() -> None:
    # 1,500 images of 8 classes: about 1,000 intervals, of which 128 are kept.
    data = make_input("gzsl", seed=5, n_images=1500)
    margin, right = stacking_margins(data.y_true, data.scores, seen=data.seen)
    values = ClassValues.model_validate(
        seen_unseen_class_values(data.y_true, margin, right, seen=data.seen), from_attributes=True
    )
    assert values.curve is not None
    n_points = values.curve.n_points
    kept = curve_points(len(values.classes), n_points)
    assert len(values.curve.hits[0].split()) == len(kept) == 128 < n_points
    breaks = np.unique(margin[right])
    edges = np.concatenate(([breaks[0] - 1.0], breaks, [breaks[-1] + 1.0]))
    gammas = (edges[kept] + edges[kept + 1]) / 2  # inside each kept interval
    weights, replicates = draws_of(values)
    for w, replicate in zip(weights, replicates, strict=True):
        images, labels, seen = _relabelled(data.y_true, data.seen, values.classes, w)
        points = [_accuracy_at(g, labels, margin[images], right[images], seen) for g in gammas]
        s, u = np.array(points).T
        assert replicate == pytest.approx(float(np.sum(np.diff(u) * (s[1:] + s[:-1]) / 2)))
    # and the chord is close to the exact AUSUC
    exact = area_under_seen_unseen_curve(
        calibrated_stacking_curve_from_margins(data.y_true, margin, right, seen=data.seen)
    )
    estimate = class_point_estimates(stack_class_values([values]))[0]
    assert abs(estimate - exact) < 2e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_severity_of_a_class_draw_is_the_severity_of_the_drawn_images(seed: int) -> None:
    data = make_input("zsl", seed=seed, n_images=80)
    _, values, _ = score("mistake_severity", data)
    ranked = data.ranked(1)
    weights, replicates = draws_of(values)
    for w, replicate in zip(weights, replicates, strict=True):
        images = drawn_images(data.y_true, values.classes, w)
        brute = mistake_severity(
            data.y_true[images],
            ranked[images],
            hierarchy=data.hierarchy,
            candidate_nodes=data.candidate_nodes,
        ).value
        assert replicate == pytest.approx(0.0 if brute is None else brute)


def test_curve_draws_are_the_draws_of_every_other_column() -> None:
    # An image mean's class bootstrap (bootstrap_samples) and class_weights see the same draws.
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 5, 30)
    groups = (np.arange(30) >= 20).astype(np.int64)
    means = rng.random(30)
    decomp = Decomposition(
        values=np.stack([means * counts, counts], axis=1),
        classes=np.arange(30),
        n_classes=30,
        groups=groups,
        combine="class_mean",
    )
    samples = bootstrap_samples(decomp, scheme="classes", n_boot=50, seed=7)
    weights = class_weights(groups, n_boot=50, seed=7)
    expected = weights @ np.stack([means * counts, counts], axis=1) / 30
    np.testing.assert_allclose(samples, expected, rtol=1e-12)


# -- 3. paired tests -----------------------------------------------------------------------------


def near_or_far_mistakes(near: bool) -> MetricInput:
    """Half the images wrong, each to its nearest (or farthest) other leaf in the hierarchy."""
    data = make_input("zsl", seed=4, n_images=200)
    n = len(data.candidates)
    pairs = np.array([(i, j) for i in range(n) for j in range(n)])
    cost = (
        mistake_severity(
            pairs[:, 0],
            pairs[:, 1:],
            hierarchy=data.hierarchy,
            candidate_nodes=data.candidate_nodes,
        )
        .per_image.reshape(n, n)
        .astype(np.float64)
    )
    np.fill_diagonal(cost, np.inf if near else -np.inf)
    wrong_to = cost.argmin(axis=1) if near else cost.argmax(axis=1)
    predicted = np.where(np.arange(200) % 2 == 0, data.y_true, wrong_to[data.y_true])
    return replace(data, scores=np.eye(n)[predicted])


@pytest.mark.parametrize("name", ["darts_area", "ausuc", "mistake_severity"])
def test_a_real_difference_is_significant_and_identical_runs_are_not(name: str) -> None:
    def make(good: bool) -> MetricInput:
        setting = "gzsl" if name == "ausuc" else "zsl"
        data = darts_input(11, 0.0, setting, n_images=200)
        rng = np.random.default_rng(1 if good else 2)
        assert data.scores is not None
        if good:  # most images right, the rest wrong
            sharp = np.eye(len(data.candidates))[data.y_true] * 3.0
            scores = data.scores + sharp * (rng.random(len(data.y_true)) < 0.9)[:, None]
        else:  # chance
            scores = data.scores
        return replace(data, scores=scores / scores.sum(axis=1, keepdims=True))

    if name == "mistake_severity":  # a real difference in how far the mistakes go
        make = near_or_far_mistakes
    params = {"posterior": "as_is"} if name == "darts_area" else {}
    good = score(name, make(True), **params)[1]
    bad = score(name, make(False), **params)[1]
    tests = column_tests(["good", "bad"], [good, bad])
    better = 1.0 if metrics.get(name).higher_is_better else -1.0
    assert better * tests.diff[0, 1] > 0
    assert tests.p_value[0, 1] < 0.01
    assert tests.lo[0, 1] * tests.hi[0, 1] > 0  # the interval excludes 0
    same = column_tests(["a", "b"], [good, good])
    assert same.diff[0, 1] == 0.0 and same.p_value[0, 1] == 1.0
    assert same.lo[0, 1] == same.hi[0, 1] == 0.0


def test_runs_with_different_curve_points_pair_up() -> None:
    # Each run has its own lambdas (and may reach other targets): only the classes must match.
    a = darts_class_values([0, 1, 1], [[1, 0, 1]], [[0.5, 0.0, 0.2]], n_classes=2)
    b = darts_class_values([0, 1, 1], [[1, 1, 1], [0, 1, 0]], [[0.1] * 3, [0, 0.9, 0]], n_classes=2)
    assert a is not None and b is not None
    estimates = class_point_estimates(stack_class_values([a, b]))
    assert estimates.tolist() == pytest.approx(
        [
            accuracy_specificity_area([(2 / 3, 0.7 / 3)]),
            accuracy_specificity_area([(1.0, 0.1), (1 / 3, 0.3)]),
        ]
    )


def test_darts_class_values_are_left_out_beyond_the_cell_budget() -> None:
    n = CURVE_CELLS // 13 + 1
    y = np.arange(n)
    assert darts_class_values(y, np.ones((13, n)), np.zeros((13, n)), n_classes=n) is None


def test_curve_points_bound_the_record_of_a_717_class_benchmark() -> None:
    kept = curve_points(717, 4021)  # SUN GZSL: 4,020 test images
    assert kept.shape == (45,) and kept[0] == 0 and kept[-1] == 4020
    assert 717 * kept.shape[0] <= CURVE_CELLS
    assert curve_points(21_000, 50_000).shape == (16,)  # the floor for huge label spaces


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"curve": None}, "curve for combine='darts_area', but it is missing"),
        ({"hits": ["9", "0"]}, "hits to lie within"),
        ({"gains": ["0.5", "1.5"]}, "gains to lie within"),
        ({"gains": ["0.5 0.1", "0.5 0.1"]}, "gains to have the shape of its hits"),
        ({"hits": ["1", "0 1"]}, "hits to hold one row per class of equal length"),
        ({"hits": ["1", "x"]}, "hits to hold rows of numbers"),
        ({"hits": ["1 0", " 1 0"]}, "hits to hold one row per class of equal length"),
        ({"hits": ["1  0", "1 0 0"]}, "hits to hold rows of numbers separated by single spaces"),
        ({"hits": ["1"]}, "one row of points per class"),
    ],
)
def test_malformed_curve_class_values_are_refused(change: dict, message: str) -> None:
    values = {
        "combine": "darts_area",
        "classes": [0, 1],
        "counts": [1, 2],
        "groups": [0, 0],
        "means": [],
        "curve": {"hits": ["1", "0"], "gains": ["0.5", "0"], "n_points": 1},
    }
    if "curve" in change:
        values["curve"] = None
    else:
        values["curve"] = {**values["curve"], **change}  # type: ignore[dict-item]
    with pytest.raises(MetricError, match=message):
        stack_class_values([values])


def test_a_record_refuses_curve_rows_that_are_not_numbers() -> None:
    with pytest.raises(ValidationError, match=r"hits\.1"):
        ClassCurve(hits=["1 2", "1;2"], n_points=2)


# -- 4. records: the store and the record files --------------------------------------------------


def scored_record(name: str, sharp: float) -> object:
    zsl = darts_input(3, sharp, "zsl")
    gzsl = make_input("gzsl", seed=3)
    scores = []
    for setting, data, metric, key, params in (
        ("zsl", zsl, "darts_area", "darts", {"posterior": "as_is"}),
        ("zsl", zsl, "mistake_severity", "severity", {}),
        ("gzsl", gzsl, "ausuc", "AUSUC", {}),
    ):
        value, values, _ = score(metric, data, **params)
        scores.append(
            ScoreEntry(
                setting=setting,  # type: ignore[arg-type]
                metric=key,
                function=metric,
                version=metrics.get(metric).version,
                value=value,
                higher_is_better=metrics.get(metric).higher_is_better,
                class_values=values,
            )
        )
    record = make_record(name, zsl={}, primary={"zsl": "darts"})
    return record.model_copy(update={"scores": scores})


def test_curve_class_values_round_trip_through_the_store(db: str) -> None:
    record = scored_record("alpha", 0.3)
    engine = open_store(db)
    try:
        save_run(engine, record)  # type: ignore[arg-type]
        loaded = load_runs(engine)[0]
    finally:
        engine.dispose()
    assert loaded == record
    for entry in loaded.scores:
        assert entry.class_values is not None
        assert entry.class_values.combine in ("darts_area", "ratio_of_means", "seen_unseen_area")
        table = stack_class_values([entry.class_values])
        assert class_point_estimates(table)[0] == pytest.approx(entry.value, abs=1e-9)


def test_curve_class_values_round_trip_through_record_files() -> None:
    record = scored_record("alpha", 0.3)
    text = dump_record(record)  # type: ignore[arg-type]
    assert load_record(text, "alpha.json") == record
    payload = json.loads(text)
    # The mean reductions' class values keep their old layout: no empty new fields.
    top = ClassValues(combine="class_mean", classes=[0], counts=[1], groups=[0], means=[1.0])
    assert set(top.model_dump(mode="json")) == {"combine", "classes", "counts", "groups", "means"}
    assert "curve" in json.dumps(payload)


def test_records_without_curve_class_values_say_why_they_are_not_tested() -> None:
    old = [
        make_record(
            n, zsl={"darts": v}, primary={"zsl": "darts"}, functions={"darts": "darts_area"}
        )
        for n, v in (("old-a", 0.5), ("old-b", 0.6))
    ]
    new = [scored_record(n, s) for n, s in (("new-a", 0.3), ("new-b", 1.5))]
    site = plan_site([*old, *new])  # type: ignore[list-item]
    columns = {
        (c.setting, c.metric, c.version): c
        for b in site.benchmarks
        for s in b.settings
        for c in s.columns
    }
    old_column = columns[("zsl", "darts", "1")]
    assert old_column.tests is None
    assert old_column.no_tests == "no per-class values in these records"
    for key in (("zsl", "darts", "3"), ("zsl", "severity", "2"), ("gzsl", "AUSUC", "2")):
        assert columns[key].tests is not None, key
        assert columns[key].tests.keys == ("new-a@1.0", "new-b@1.0")  # type: ignore[union-attr]


def test_the_pair_page_names_each_untested_metric_with_its_reason(tmp_path: Path) -> None:
    old = [
        make_record(
            n, zsl={"darts": v}, primary={"zsl": "darts"}, functions={"darts": "darts_area"}
        )
        for n, v in (("old-a", 0.5), ("old-b", 0.6))
    ]
    build_site(old, tmp_path / "site")
    text = (tmp_path / "site" / "compare" / "old-a@1.0--old-b@1.0.html").read_text("utf-8")
    assert (
        "Not tested: ZSL <bdi>darts</bdi> (no per-class values in these records). Records scored "
        "before a metric kept per-class values get them when re-scored (zsl results rescore)."
    ) in " ".join(text.split())


def test_malformed_class_values_in_a_record_leave_the_column_untested() -> None:
    records = [scored_record(n, s) for n, s in (("new-a", 0.3), ("new-b", 1.5))]
    broken = records[1].model_copy(deep=True)  # type: ignore[attr-defined]
    darts = next(s for s in broken.scores if s.metric == "darts")
    assert darts.class_values is not None and darts.class_values.curve is not None
    darts.class_values.curve.hits[0] = " ".join(
        ["999"] * len(darts.class_values.curve.hits[0].split())
    )
    site = plan_site([records[0], broken])  # type: ignore[list-item]
    column = next(
        c for b in site.benchmarks for s in b.settings for c in s.columns if c.metric == "darts"
    )
    assert column.tests is None
    assert column.no_tests == "the runs' per-class values cover different classes or are malformed"
