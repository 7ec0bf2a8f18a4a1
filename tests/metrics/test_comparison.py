"""Tests of harness.metrics.comparison: class-level paired tests from stored class values equal a
per-image paired bootstrap over classes; tied groups; ranks across benchmarks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import MetricError
from harness.metrics.bootstrap import bootstrap_samples
from harness.metrics.comparison import (
    ClassTable,
    RunClassValues,
    class_bootstrap,
    class_point_estimates,
    class_values,
    paired_class_tests,
    rank_matrix,
    stack_class_values,
    tied_groups_from_tests,
)
from harness.metrics.decomposition import Decomposition, point_estimate
from harness.records import ClassValues
from tests.metrics.decomposition_cases import decompositions


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


def _table(runs: list[Decomposition]) -> ClassTable:
    values = [class_values(r) for r in runs]
    assert all(v is not None for v in values)
    return stack_class_values(values)


def _reference_paired(
    a: Decomposition, b: Decomposition, *, n_boot: int, seed: int, level: float = 0.95
) -> dict[str, float]:
    """The per-image paired bootstrap over classes: both runs as two columns of one
    decomposition (the same class draws), then the documented interval and p-value."""
    joint = _joint([a, b])
    observed = point_estimate(joint)
    reps = bootstrap_samples(joint, scheme="classes", n_boot=n_boot, seed=seed)
    d = float(observed[0] - observed[1])
    diffs = reps[:, 0] - reps[:, 1]
    lo, hi = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2])
    other = int(np.sum(diffs <= 0)) if d > 0 else int(np.sum(diffs >= 0)) if d < 0 else 0
    p = 1.0 if d == 0 else min(1.0, 2 * (other + 1) / (n_boot + 1))
    return {"diff": d, "lo": float(lo), "hi": float(hi), "p_value": p}


def _reference_groups(
    names: list[str], estimates: list[float], p: np.ndarray, alpha: float, higher: bool
) -> list[list[str]]:
    """The leader rule by a plain loop over the sorted runs."""
    # sorted() is stable in both directions: equal estimates keep the given order.
    order = sorted(range(len(names)), key=lambda i: estimates[i], reverse=higher)
    groups: list[list[str]] = []
    leader = None
    for i in order:
        if leader is not None and p[leader, i] >= alpha:
            groups[-1].append(names[i])
        else:
            groups.append([names[i]])
            leader = i
    return groups


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
    tests = paired_class_tests(_table(runs), n_boot=300)
    for s in range(3):
        for t in range(3):
            if s == t:
                continue
            ref = _reference_paired(runs[s], runs[t], n_boot=300, seed=0)
            assert tests.diff[s, t] == pytest.approx(ref["diff"], abs=1e-12)
            assert tests.lo[s, t] == pytest.approx(ref["lo"], abs=1e-12)
            assert tests.hi[s, t] == pytest.approx(ref["hi"], abs=1e-12)
            assert tests.p_value[s, t] == pytest.approx(ref["p_value"])
    np.testing.assert_array_equal(np.diag(tests.p_value), 1.0)
    np.testing.assert_allclose(tests.p_value, tests.p_value.T)
    np.testing.assert_allclose(tests.diff, -tests.diff.T)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), higher=st.booleans())
def test_tied_groups_from_tests_follow_the_leader_rule(seed: int, higher: bool) -> None:
    runs = _runs(seed, "class_mean", n_runs=5)
    names = [f"r{i}" for i in range(5)]
    tests = paired_class_tests(_table(runs), n_boot=100, seed=3)
    got = tied_groups_from_tests(names, tests.estimates, tests.p_value, higher_is_better=higher)
    ref = _reference_groups(names, tests.estimates.tolist(), tests.p_value, 0.05, higher)
    assert got == ref
    # The p-values are those of the per-image paired bootstrap over classes.
    for i in range(1, 5):
        ref_p = _reference_paired(runs[0], runs[i], n_boot=100, seed=3)["p_value"]
        assert tests.p_value[0, i] == pytest.approx(ref_p)


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


def test_class_values_are_a_record_payload() -> None:
    d = Decomposition(values=[1.0, 0.0, 1.0], classes=[0, 0, 2], n_classes=3)
    values = class_values(d)
    assert values == RunClassValues(
        combine="class_mean", classes=(0, 2), counts=(2, 1), groups=(0, 0), means=(0.5, 1.0)
    )
    record = ClassValues.model_validate(values, from_attributes=True)
    assert record.model_dump() == {
        "combine": "class_mean",
        "classes": [0, 2],
        "counts": [2, 1],
        "groups": [0, 0],
        "means": [0.5, 1.0],
    }


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
    for setting in bench.spec.prediction_settings():
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


# --- paired tests between runs ---------------------------------------------------------------


def _one_class_table(*runs: Decomposition) -> ClassTable:
    return _table(list(runs))


def test_paired_identical_runs_p_is_one() -> None:
    y_true = np.random.default_rng(2).integers(0, 10, 500)
    values = (np.random.default_rng(3).random(500) < 0.7).astype(float)
    d = Decomposition(values=values, classes=y_true, n_classes=10)
    tests = paired_class_tests(_one_class_table(d, d), n_boot=300)
    assert tests.diff[0, 1] == 0.0 and tests.lo[0, 1] == 0.0 and tests.hi[0, 1] == 0.0
    assert tests.p_value[0, 1] == 1.0


def test_paired_clearly_different_runs_tiny_p() -> None:
    # Run b = run a minus 0.1 on every image, so on every class mean: every replicate difference
    # is exactly 0.1, no replicate is <= 0, so p = 2 * (0 + 1) / (999 + 1) = 0.002.
    rng = np.random.default_rng(3)
    values = 0.2 + 0.8 * rng.random(300)
    classes = rng.integers(0, 6, 300)
    a = Decomposition(values=values, classes=classes, n_classes=6)
    b = Decomposition(values=values - 0.1, classes=classes, n_classes=6)
    tests = paired_class_tests(_one_class_table(a, b), n_boot=999)
    assert tests.diff[0, 1] == pytest.approx(0.1)
    assert tests.lo[0, 1] == pytest.approx(0.1) and tests.hi[0, 1] == pytest.approx(0.1)
    assert tests.p_value[0, 1] == pytest.approx(0.002)
    assert tests.diff[1, 0] == pytest.approx(-0.1) and tests.p_value[1, 0] == pytest.approx(0.002)
    assert (tests.lo[1, 0], tests.hi[1, 0]) == (-tests.hi[0, 1], -tests.lo[0, 1])


def test_paired_p_value_formula_against_replicates() -> None:
    # Recompute the p-value from the runs' replicates with a loop.
    rng = np.random.default_rng(4)
    classes = rng.integers(0, 4, 80)
    a = Decomposition(values=(rng.random(80) < 0.6).astype(float), classes=classes, n_classes=4)
    b = Decomposition(values=(rng.random(80) < 0.5).astype(float), classes=classes, n_classes=4)
    table = _one_class_table(a, b)
    tests = paired_class_tests(table, n_boot=500, seed=6)
    reps = class_bootstrap(table, n_boot=500, seed=6)
    diffs = [r[0] - r[1] for r in reps]
    observed = point_estimate(a) - point_estimate(b)
    assert tests.diff[0, 1] == pytest.approx(observed)
    other = sum(1 for x in diffs if (x <= 0 if observed > 0 else x >= 0))
    assert tests.p_value[0, 1] == pytest.approx(min(1.0, 2 * (other + 1) / 501))
    assert tests.lo[0, 1] <= tests.diff[0, 1] <= tests.hi[0, 1]


@settings(max_examples=80, deadline=None)
@given(decompositions(), st.integers(0, 99))
def test_paired_properties(d: Decomposition, seed: int) -> None:
    if d.values.ndim != 1:
        return
    shifted = Decomposition(
        values=d.values[::-1].copy(),
        classes=d.classes,
        n_classes=d.n_classes,
        groups=d.groups,
        combine=d.combine,
    )
    tests = paired_class_tests(_one_class_table(d, shifted), n_boot=30, seed=seed)
    assert 0 < tests.p_value[0, 1] <= 1 and tests.lo[0, 1] <= tests.hi[0, 1]
    assert tests.diff[0, 1] == pytest.approx(-tests.diff[1, 0])
    assert tests.p_value[0, 1] == pytest.approx(tests.p_value[1, 0])
    same = paired_class_tests(_one_class_table(d, d), n_boot=10, seed=seed)
    assert same.p_value[0, 1] == 1.0


def test_paired_tests_level_error() -> None:
    table = _one_class_table(*_runs(0, "class_mean", n_runs=2))
    with pytest.raises(
        MetricError, match=r"Expected `level` to be a number in \(0, 1\), but got 2.0"
    ):
        paired_class_tests(table, level=2.0)


# --- tied groups ---------------------------------------------------------------------------------


def test_tied_groups_leader_rule() -> None:
    # a~b and b~c inseparable, a vs c separable: c is compared with the leader a (not with b),
    # so it starts a new group.
    p = np.array([[1.0, 0.4, 0.01], [0.4, 1.0, 0.3], [0.01, 0.3, 1.0]])
    assert tied_groups_from_tests(["a", "b", "c"], [0.9, 0.8, 0.7], p) == [["a", "b"], ["c"]]
    order = [2, 1, 0]  # the same runs given as c, b, a
    assert tied_groups_from_tests(["c", "b", "a"], [0.7, 0.8, 0.9], p[np.ix_(order, order)]) == [
        ["a", "b"],
        ["c"],
    ]


def test_tied_groups_lower_is_better_and_ties_keep_order() -> None:
    p = np.array([[1.0, 0.002], [0.002, 1.0]])
    # Lower is better: w (0.5) leads and r is separable from it.
    assert tied_groups_from_tests(["r", "w"], [1.0, 0.5], p, higher_is_better=False) == [
        ["w"],
        ["r"],
    ]
    # Equal estimates keep the given order and are inseparable (p = 1).
    p3 = np.array([[1.0, 1.0, 0.002], [1.0, 1.0, 0.002], [0.002, 0.002, 1.0]])
    assert tied_groups_from_tests(["x", "y", "z"], [1.0, 1.0, 0.5], p3) == [["x", "y"], ["z"]]
    assert tied_groups_from_tests(["solo"], [1.0], np.ones((1, 1))) == [["solo"]]


def test_error_tied_groups() -> None:
    with pytest.raises(
        MetricError, match=r"Expected distinct names and one estimate each, but got 2 names"
    ):
        tied_groups_from_tests(["a", "b"], [1.0], np.ones((2, 2)))
    with pytest.raises(
        MetricError, match=r"Expected `alpha` to be a number in \(0, 1\), but got 0.0"
    ):
        tied_groups_from_tests(["a"], [1.0], np.ones((1, 1)), alpha=0.0)


# --- rank matrix ---------------------------------------------------------------------------------


def reference_ranks(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Average ranks by counting: rank = 1 + #better + (#tied others) / 2."""
    out: dict[str, dict[str, float]] = {}
    for bench, row in scores.items():
        for name, value in row.items():
            better = sum(1 for v in row.values() if v > value)
            tied = sum(1 for v in row.values() if v == value) - 1
            out.setdefault(name, {})[bench] = 1 + better + tied / 2
    return out


# --- rank matrix -----------------------------------------------------------------------------


def test_rank_matrix_hand_example_with_tie_and_missing() -> None:
    scores = {
        "AWA2": {"A": 0.70, "B": 0.60, "C": 0.60},  # ranks A 1, B 2.5, C 2.5
        "CUB": {"A": 0.50, "B": 0.55, "C": 0.40},  # ranks B 1, A 2, C 3
        "SUN": {"A": 0.30, "B": 0.20},  # ranks A 1, B 2; C missing
    }
    r = rank_matrix(scores)
    # mean ranks: A (1 + 2 + 1) / 3 = 4/3, B (2.5 + 1 + 2) / 3 = 11/6, C (2.5 + 3) / 2 = 2.75
    assert r.submissions == ("A", "B", "C")
    assert r.benchmarks == ("AWA2", "CUB", "SUN")
    np.testing.assert_allclose(r.mean_rank, [4 / 3, 11 / 6, 2.75])
    np.testing.assert_array_equal(r.n_benchmarks, [3, 3, 2])
    np.testing.assert_array_equal(r.ranks, [[1, 2, 1], [2.5, 1, 2], [2.5, 3, np.nan]])
    # counts: A rank 1 twice, rank 2 once. B: rank 1 (CUB), rank 2 (SUN), AWA2 tie over
    # positions 2-3 -> +1/2 each. C: AWA2 tie -> 1/2, 1/2; CUB rank 3.
    np.testing.assert_allclose(r.counts, [[2, 1, 0], [1, 1.5, 0.5], [0, 0.5, 1.5]])
    assert r.missing == (("C", "SUN"),)
    assert r.as_dict()["missing"] == [["C", "SUN"]]


def test_rank_matrix_lower_is_better_reverses() -> None:
    scores = {"x": {"a": 1.0, "b": 2.0}}
    assert rank_matrix(scores).submissions == ("b", "a")
    assert rank_matrix(scores, higher_is_better=False).submissions == ("a", "b")


def test_rank_matrix_agrees_with_counting_reference() -> None:
    rng = np.random.default_rng(12)
    names = [f"s{i}" for i in range(6)]
    scores = {
        f"b{j}": {n: float(rng.integers(0, 4)) for n in names if rng.random() < 0.8}
        for j in range(7)
    }
    scores = {b: row for b, row in scores.items() if row}
    r = rank_matrix(scores)
    want = reference_ranks(scores)
    for s, name in enumerate(r.submissions):
        cells = want[name]
        assert r.mean_rank[s] == pytest.approx(sum(cells.values()) / len(cells))
        for b, bench in enumerate(r.benchmarks):
            if bench in cells:
                assert r.ranks[s, b] == pytest.approx(cells[bench])
            else:
                assert math.isnan(r.ranks[s, b])
        # each row of counts sums to the number of ranked benchmarks, and its weighted mean
        # position is the mean rank
        assert r.counts[s].sum() == pytest.approx(len(cells))
        positions = np.arange(1, len(names) + 1)[: r.counts.shape[1]]
        assert (r.counts[s] * positions).sum() / len(cells) == pytest.approx(r.mean_rank[s])
    # more benchmarks covered first, then the lower mean rank (a fair order under gaps)
    keys = [(-int(n), float(m)) for n, m in zip(r.n_benchmarks, r.mean_rank, strict=True)]
    assert keys == sorted(keys)


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        (
            {},
            r"Expected `scores` to be a non-empty mapping benchmark -> \{submission: score\}, but got \{\}",
        ),
        ([("x", {})], r"Expected `scores` to be a non-empty mapping"),
        (
            {"x": {}},
            r"Expected `scores\['x'\]` to map at least one submission to its score, but got \{\}",
        ),
        (
            {"x": {"a": float("nan")}},
            r"Expected `scores\['x'\]\['a'\]` to be a finite number, but got nan",
        ),
        (
            {"x": {"a": True}},
            r"Expected `scores\['x'\]\['a'\]` to be a finite number, but got True",
        ),
        (
            {"x": {"a": "0.5"}},
            r"Expected `scores\['x'\]\['a'\]` to be a finite number, but got '0.5'",
        ),
    ],
)
def test_error_rank_matrix(scores: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        rank_matrix(scores)  # type: ignore[arg-type]
