"""Class-level comparisons from stored class values ≡ the per-image bootstrap over classes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import MetricError
from harness.metrics.comparison import (
    class_bootstrap,
    class_point_estimates,
    class_values,
    paired_class_tests,
    stack_class_values,
    tied_groups_from_tests,
)
from harness.metrics.uncertainty import (
    Decomposition,
    bootstrap_samples,
    paired_bootstrap,
    point_estimate,
    tied_groups,
)
from harness.records import ClassValues


def _runs(seed: int, combine: str, n_runs: int = 3, n_images: int = 60, n_classes: int = 7):
    """Per-image decompositions of several runs on the same images (one class has no image)."""
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, n_classes - 1, size=n_images)  # class n_classes-1 stays empty
    classes[: n_classes - 1] = np.arange(n_classes - 1)  # every other class has an image
    groups = np.arange(n_classes) % 2 if combine == "harmonic_of_groups" else None
    runs = []
    for _ in range(n_runs):
        values = rng.random(n_images) if combine == "image_mean" else rng.integers(0, 2, n_images)
        runs.append(
            Decomposition(
                values=values.astype(float),
                classes=classes,
                n_classes=n_classes,
                groups=groups,
                combine=combine,  # type: ignore[arg-type]
            )
        )
    return runs


def _joint(runs: list[Decomposition]) -> Decomposition:
    first = runs[0]
    return Decomposition(
        values=np.stack([r.values for r in runs], axis=1),
        classes=first.classes,
        n_classes=first.n_classes,
        groups=first.groups,
        combine=first.combine,
    )


@pytest.mark.parametrize("combine", ["class_mean", "image_mean", "harmonic_of_groups"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_bootstrap_equals_per_image_bootstrap_over_classes(combine: str, seed: int) -> None:
    runs = _runs(seed, combine)
    table = stack_class_values([class_values(r) for r in runs])
    joint = _joint(runs)
    expected = bootstrap_samples(joint, scheme="classes", n_boot=200, seed=seed)
    got = class_bootstrap(table, n_boot=200, seed=seed)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(class_point_estimates(table), point_estimate(joint), rtol=1e-12)


@pytest.mark.parametrize("combine", ["class_mean", "image_mean", "harmonic_of_groups"])
def test_paired_tests_equal_paired_bootstrap_over_classes(combine: str) -> None:
    runs = _runs(7, combine)
    tests = paired_class_tests(stack_class_values([class_values(r) for r in runs]), n_boot=300)
    for s in range(3):
        for t in range(3):
            if s == t:
                continue
            ref = paired_bootstrap(runs[s], runs[t], scheme="classes", n_boot=300, seed=0)
            assert tests["diff"][s, t] == pytest.approx(ref["diff"], abs=1e-12)
            assert tests["lo"][s, t] == pytest.approx(ref["lo"], abs=1e-12)
            assert tests["hi"][s, t] == pytest.approx(ref["hi"], abs=1e-12)
            assert tests["p_value"][s, t] == pytest.approx(ref["p_value"])
    np.testing.assert_array_equal(np.diag(tests["p_value"]), 1.0)
    np.testing.assert_allclose(tests["p_value"], tests["p_value"].T)
    np.testing.assert_allclose(tests["diff"], -tests["diff"].T)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), higher=st.booleans())
def test_tied_groups_from_tests_match_tied_groups(seed: int, higher: bool) -> None:
    runs = _runs(seed, "class_mean", n_runs=5)
    names = [f"r{i}" for i in range(5)]
    table = stack_class_values([class_values(r) for r in runs])
    tests = paired_class_tests(table, n_boot=100, seed=3)
    got = tied_groups_from_tests(
        names, tests["estimates"], tests["p_value"], higher_is_better=higher
    )
    ref = tied_groups(names, runs, higher_is_better=higher, scheme="classes", n_boot=100, seed=3)
    assert got == ref


def test_image_mean_hand_computed() -> None:
    # Class 0: 3 images, mean 1/3 (one hit); class 1: 1 image, hit. Image mean = 2/4.
    table = stack_class_values(
        [
            ClassValues(
                combine="image_mean", classes=[0, 1], counts=[3, 1], groups=[0, 0], means=[1 / 3, 1]
            )
        ]
    )
    assert class_point_estimates(table).tolist() == pytest.approx([0.5])
    # Every replicate is a weighted mix of the two classes: between 1/3 and 1.
    samples = class_bootstrap(table, n_boot=500, seed=1)
    assert samples.min() >= 1 / 3 - 1e-12 and samples.max() <= 1 + 1e-12
    assert {round(v, 9) for v in samples[:, 0]} <= {round(1 / 3, 9), 0.5, 1.0}


def test_class_values_of_two_dimensional_decomposition_is_none() -> None:
    d = Decomposition(values=np.ones((2, 2)), classes=[0, 1], n_classes=2)
    assert class_values(d) is None


@pytest.mark.parametrize(
    ("field", "change", "message"),
    [
        ("classes", [0, 2], "same classes"),
        ("counts", [2, 2], "same counts"),
        ("groups", [0, 1], "same groups"),
        ("combine", "image_mean", "reduce by 'class_mean'"),
        ("means", [0.5], "2 finite numbers"),
        ("means", [0.5, float("nan")], "finite"),
    ],
)
def test_stack_refuses_runs_that_do_not_line_up(field: str, change: object, message: str) -> None:
    base = {"combine": "class_mean", "classes": [0, 1], "counts": [2, 1], "groups": [0, 0]}
    other = {**base, "means": [0.5, 1.0], field: change}
    with pytest.raises(MetricError, match=rf"values\[1\].*{message}|{message}.*values\[1\]"):
        stack_class_values([{**base, "means": [0.5, 1.0]}, other])


def test_stack_refuses_empty_and_tied_groups_validate() -> None:
    with pytest.raises(MetricError, match="at least one"):
        stack_class_values([])
    with pytest.raises(MetricError, match="distinct names"):
        tied_groups_from_tests(["a", "a"], [1.0, 0.5], np.ones((2, 2)))
    with pytest.raises(MetricError, match="p_values of shape"):
        tied_groups_from_tests(["a", "b"], [1.0, 0.5], np.ones((3, 3)))


def test_scored_entries_carry_class_values_that_reproduce_the_score() -> None:
    """End to end on the demo: each stored class-value payload recomputes its entry's value."""
    from harness.data.prepare import load_benchmark
    from harness.scoring import score
    from harness.spec import load_spec
    from harness.submission.predictions import Predictions
    from tests.conftest import SPECS

    bench = load_benchmark(load_spec(SPECS / "demo.yaml"))
    rng = np.random.default_rng(0)
    predictions = {}
    for setting in [*bench.spec.settings, *bench.spec.validation_settings()]:
        shape = (len(bench.rows(setting)), len(bench.columns(setting)))
        predictions[setting] = Predictions(
            benchmark_hash=bench.hash,
            class_order_hash=bench.class_order_hash(setting),
            setting=setting,
            sha256="x",
            scores=rng.random(shape),
        )
    entries = score(bench, predictions)
    with_values = [e for e in entries if e.class_values is not None]
    assert {e.metric for e in with_values} >= {"top1", "hp@2", "seen", "unseen", "H"}
    for entry in with_values:
        table = stack_class_values([entry.class_values])
        assert class_point_estimates(table)[0] == pytest.approx(entry.value, abs=1e-9), entry.metric
