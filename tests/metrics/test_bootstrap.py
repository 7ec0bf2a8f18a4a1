"""Tests of harness.metrics.bootstrap: resampling schemes against plain loops, intervals, errors."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

import harness.checks as validation
import harness.metrics.bootstrap as bootstrap
from harness.core.errors import MetricError
from harness.metrics.bootstrap import (
    bootstrap_interval,
    bootstrap_recompute,
    bootstrap_samples,
    confidence_interval,
)
from harness.metrics.decomposition import Decomposition, point_estimate
from harness.metrics.flat import top_k_correct
from tests.metrics.decomposition_cases import TINY, decompositions, seeded_problem

# --- reference implementations (plain loops) ----------------------------------------------------


def reference_layout(classes: list[int], groups: list[int]) -> tuple[list[int], list[list[int]]]:
    """Present classes ordered by (group, class), and each one's images in index order."""
    present = sorted({c for c in classes}, key=lambda c: (groups[c], c))
    images = [[i for i, c in enumerate(classes) if c == k] for k in present]
    return present, images


def reference_reduce(
    class_lists: list[list[float]], class_groups: list[int], combine: str
) -> float:
    """Reduce resampled per-class value lists (one list per drawn class slot)."""
    if combine == "image_mean":
        flat = [v for values in class_lists for v in values]
        return sum(flat) / len(flat)
    means = [sum(values) / len(values) for values in class_lists]
    if combine == "class_mean":
        return sum(means) / len(means)
    group_means = []
    for g in sorted(set(class_groups)):
        members = [m for m, gg in zip(means, class_groups, strict=True) if gg == g]
        group_means.append(sum(members) / len(members))
    if min(group_means) == 0:
        return 0.0
    return len(group_means) / sum(1 / m for m in group_means)


def reference_within_class(
    values: list[float], classes: list[int], groups: list[int], combine: str, n_boot: int, seed: int
) -> list[float]:
    """The documented general path, one replicate and one position at a time."""
    rng = np.random.Generator(np.random.PCG64(seed))
    present, images = reference_layout(classes, groups)
    u = rng.random((n_boot, len(values)))  # row-major stream, positions in layout order
    out = []
    for b in range(n_boot):
        position = 0
        class_lists = []
        for members in images:
            drawn = []
            for _ in members:
                pick = math.floor(u[b, position] * len(members))
                drawn.append(values[members[pick]])
                position += 1
            class_lists.append(drawn)
        out.append(reference_reduce(class_lists, [groups[c] for c in present], combine))
    return out


def reference_classes(
    values: list[float], classes: list[int], groups: list[int], combine: str, n_boot: int, seed: int
) -> list[float]:
    """Classes redrawn within their group, slot by slot, all images of each drawn class kept."""
    rng = np.random.Generator(np.random.PCG64(seed))
    present, images = reference_layout(classes, groups)
    slot_groups = [groups[c] for c in present]
    u = rng.random((n_boot, len(present)))
    out = []
    for b in range(n_boot):
        class_lists = []
        drawn_groups = []
        for slot, g in enumerate(slot_groups):
            same = [k for k, gg in enumerate(slot_groups) if gg == g]
            k = same[math.floor(u[b, slot] * len(same))]
            class_lists.append([values[i] for i in images[k]])
            drawn_groups.append(g)
        out.append(reference_reduce(class_lists, drawn_groups, combine))
    return out


# --- bootstrap distributions ---------------------------------------------------------------------


def test_bootstrap_within_class_enumerated_distribution_general_path() -> None:
    # Class 0 values 0.2, 0.6: resampled mean 0.2 (1/4), 0.4 (1/2), 0.6 (1/4). Class 1 values
    # 1, 1: always 1. Class mean = (m0 + 1) / 2 in {0.6, 0.7, 0.8} with probs 1/4, 1/2, 1/4.
    d = Decomposition(values=[0.2, 0.6, 1.0, 1.0], classes=[0, 0, 1, 1], n_classes=2)
    samples = bootstrap_samples(d, n_boot=20000, seed=1)
    freq = Counter(np.round(samples, 12).tolist())
    assert set(freq) == {0.6, 0.7, 0.8}
    for value, p in ((0.6, 0.25), (0.7, 0.5), (0.8, 0.25)):
        assert freq[value] / 20000 == pytest.approx(p, abs=0.015)  # ~5 binomial SDs


def test_bootstrap_classes_scheme_enumerated_distribution() -> None:
    # Class means 1/2 and 1, one group: draws {c0, c0} -> 0.5 (1/4), {c0, c1} -> 0.75 (1/2),
    # {c1, c1} -> 1 (1/4).
    samples = bootstrap_samples(TINY, scheme="classes", n_boot=20000, seed=2)
    freq = Counter(samples.tolist())
    assert set(freq) == {0.5, 0.75, 1.0}
    for value, p in ((0.5, 0.25), (0.75, 0.5), (1.0, 0.25)):
        assert freq[value] / 20000 == pytest.approx(p, abs=0.015)


def test_bootstrap_classes_scheme_keeps_group_sizes() -> None:
    # Groups {0} and {1}: each group has one class, so resampling classes within groups can
    # only redraw the same classes: every replicate equals the point estimate.
    d = Decomposition(values=[0.0, 1.0, 1.0, 1.0], classes=[0, 0, 1, 1], n_classes=2, groups=[0, 1])
    assert np.all(bootstrap_samples(d, scheme="classes", n_boot=50) == 0.75)


def test_bootstrap_binary_fast_path_matches_general_path_statistically() -> None:
    rng = np.random.default_rng(7)
    classes = rng.integers(0, 6, 240)
    values = (rng.random(240) < 0.3 + 0.1 * classes).astype(float)
    d = Decomposition(values=values, classes=classes, n_classes=6)
    fast = bootstrap_samples(d, n_boot=4000, seed=11)
    slow = bootstrap_samples(d, n_boot=4000, seed=12, binary_fast_path=False)
    assert not np.array_equal(fast[:100], slow[:100])  # different draws ...
    assert ks_2samp(fast, slow).pvalue > 1e-3  # ... same distribution
    assert fast.std() == pytest.approx(slow.std(), rel=0.1)
    assert fast.mean() == pytest.approx(point_estimate(d), abs=0.005)


def test_bootstrap_binary_fast_path_hand_case() -> None:
    # TINY is 0/1: class 0 hits ~ Binomial(2, 1/2) -> 0, 1, 2 hits -> class mean 0, .5, 1;
    # class 1 ~ Binomial(2, 1) = 2 always. Same support as the general path.
    samples = bootstrap_samples(TINY, n_boot=4000, seed=3)
    freq = Counter(samples.tolist())
    assert set(freq) == {0.5, 0.75, 1.0}
    assert freq[0.75] / 4000 == pytest.approx(0.5, abs=0.03)


def test_bootstrap_general_path_equals_loop_reference() -> None:
    rng = np.random.default_rng(5)
    classes = rng.integers(0, 5, 40).tolist()
    values = rng.random(40).round(3).tolist()
    groups = [1, 0, 1, 0, 0]
    for combine in ("class_mean", "image_mean", "harmonic_of_groups"):
        d = Decomposition(
            values=values, classes=classes, n_classes=5, groups=groups, combine=combine
        )
        got = bootstrap_samples(d, n_boot=30, seed=9)
        want = reference_within_class(values, classes, groups, combine, 30, 9)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        got_classes = bootstrap_samples(d, scheme="classes", n_boot=30, seed=9)
        want_classes = reference_classes(values, classes, groups, combine, 30, 9)
        np.testing.assert_allclose(got_classes, want_classes, rtol=1e-12, atol=1e-12)


def test_bootstrap_chunking_does_not_change_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    d = Decomposition(values=rng.random((50, 2)), classes=rng.integers(0, 4, 50), n_classes=4)
    whole = bootstrap_samples(d, n_boot=40, seed=4)
    monkeypatch.setattr(validation, "CHUNK_ELEMENTS", 60)  # a few replicates per chunk
    np.testing.assert_array_equal(bootstrap_samples(d, n_boot=40, seed=4), whole)


def test_shared_draws_are_the_streamed_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draws small enough are made whole once and shared between metrics; they are the draws
    the generator gives chunk by chunk, replicate for replicate, in both bootstrap functions."""
    rng = np.random.default_rng(3)
    classes = rng.integers(0, 6, 70)
    d = Decomposition(values=rng.random((70, 2)), classes=classes, n_classes=6)
    values = rng.random(70)

    def mean(idx: np.ndarray) -> np.ndarray:
        return values[idx].mean(axis=-1)

    def both() -> tuple[np.ndarray, np.ndarray]:
        samples = bootstrap_samples(d, n_boot=45, seed=8)
        again = bootstrap_recompute(mean, classes, n_classes=6, n_boot=45, seed=8, vectorized=True)
        return samples, again

    made = []
    real = bootstrap._within_class_positions
    monkeypatch.setattr(
        bootstrap, "_within_class_positions", lambda *a: made.append(a[2]) or real(*a)
    )
    shared = both()
    assert made == [45]  # drawn once, whole, for both
    monkeypatch.setattr(bootstrap, "SHARED_DRAWS_ELEMENTS", 0)
    monkeypatch.setattr(validation, "CHUNK_ELEMENTS", 200)  # a few replicates per chunk
    streamed = both()
    assert len(made) > 3 and sum(made[1:]) == 2 * 45
    for got, want in zip(shared, streamed, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not any(a.flags.writeable for a in bootstrap._shared_draws.values())


def test_bootstrap_two_columns_resampled_together() -> None:
    # Column 1 = 3 * column 0, so every replicate keeps the ratio (one resample for both).
    rng = np.random.default_rng(1)
    v = rng.random(60)
    d = Decomposition(
        values=np.column_stack([v, 3 * v]), classes=rng.integers(0, 3, 60), n_classes=3
    )
    samples = bootstrap_samples(d, n_boot=100)
    assert samples.shape == (100, 2)
    np.testing.assert_allclose(samples[:, 1], 3 * samples[:, 0])


def test_bootstrap_is_deterministic_given_the_seed() -> None:
    y_true, scores, seen = seeded_problem(0, 200, 8)
    correct = top_k_correct(y_true, scores)
    for d in (
        Decomposition(values=correct, classes=y_true, n_classes=8),
        Decomposition.for_gzsl(correct, y_true, seen=seen),
    ):
        for scheme in ("images_within_class", "classes"):
            a = bootstrap_samples(d, scheme=scheme, n_boot=200, seed=42)
            b = bootstrap_samples(d, scheme=scheme, n_boot=200, seed=42)
            c = bootstrap_samples(d, scheme=scheme, n_boot=200, seed=43)
            np.testing.assert_array_equal(a, b)
            assert not np.array_equal(a, c)


def test_bootstrap_interval_contains_point_estimate_for_reasonable_data() -> None:
    y_true, scores, seen = seeded_problem(1, 2000, 10)
    correct = top_k_correct(y_true, scores)
    for d in (
        Decomposition(values=correct, classes=y_true, n_classes=10),
        Decomposition.for_gzsl(correct, y_true, seen=seen),
    ):
        for scheme in ("images_within_class", "classes"):
            ci = bootstrap_interval(d, scheme=scheme, n_boot=500, seed=0)
            assert ci.lo < ci.value < ci.hi
            assert ci.hi - ci.lo < 0.2
            assert ci.scheme == scheme and ci.n_boot == 500 and ci.level == 0.95
            json.dumps(asdict(ci))  # plain values throughout


def test_bootstrap_interval_two_columns_and_excluded_classes() -> None:
    values = np.column_stack([TINY.values, np.ones(4)])
    d = Decomposition(values=values, classes=[0, 0, 1, 1], n_classes=3)
    ci = bootstrap_interval(d, n_boot=200)
    # column 1 is constant: its interval is [1, 1]
    assert ci.value == (0.75, 1.0) and ci.lo[1] == 1.0 and ci.hi[1] == 1.0
    assert ci.excluded_classes == (2,)


def test_images_within_class_is_narrower_than_classes_on_heterogeneous_classes() -> None:
    # Classes differ a lot (means 0.1 ... 0.9) but each has many images: resampling images
    # barely moves the score, resampling classes moves it a lot.
    classes = np.repeat(np.arange(9), 200)
    values = (np.tile(np.arange(200), 9) < 20 * (np.arange(9).repeat(200) + 1)).astype(float)
    d = Decomposition(values=values, classes=classes, n_classes=9)
    within = bootstrap_samples(d, n_boot=500).std()
    between = bootstrap_samples(d, scheme="classes", n_boot=500).std()
    assert between > 3 * within


# --- confidence_interval ---------------------------------------------------------------------


def test_confidence_interval_percentiles() -> None:
    # 0..100: the 2.5% / 97.5% quantiles are 2.5 and 97.5 (linear interpolation).
    lo, hi = confidence_interval(np.arange(101.0))
    assert (lo, hi) == pytest.approx((2.5, 97.5))
    lo2, hi2 = confidence_interval(np.column_stack([np.arange(101.0), -np.arange(101.0)]), 0.5)
    np.testing.assert_allclose(lo2, [25.0, -75.0])
    np.testing.assert_allclose(hi2, [75.0, -25.0])


# --- bootstrap_recompute ---------------------------------------------------------------------


def test_recompute_reproduces_general_path_exactly() -> None:
    rng = np.random.default_rng(8)
    classes = rng.integers(0, 6, 90)
    values = rng.random(90)
    d = Decomposition(values=values, classes=classes, n_classes=6)

    def class_mean(indices: np.ndarray) -> float:
        resampled = classes[indices]
        return float(
            np.mean([values[indices][resampled == c].mean() for c in np.unique(resampled)])
        )

    got = bootstrap_recompute(class_mean, classes, n_classes=6, n_boot=60, seed=3)
    np.testing.assert_allclose(got, bootstrap_samples(d, n_boot=60, seed=3), rtol=1e-12)


def test_recompute_classes_scheme_repeats_whole_classes() -> None:
    rng = np.random.default_rng(9)
    classes = rng.integers(0, 5, 70)
    values = rng.random(70)
    groups = [0, 0, 1, 1, 1]
    seen_indices: list[np.ndarray] = []

    def image_mean(indices: np.ndarray) -> float:
        seen_indices.append(indices)
        return float(values[indices].mean())

    got = bootstrap_recompute(
        image_mean, classes, n_classes=5, groups=groups, scheme="classes", n_boot=40, seed=5
    )
    d = Decomposition(
        values=values, classes=classes, n_classes=5, groups=groups, combine="image_mean"
    )
    np.testing.assert_allclose(got, bootstrap_samples(d, scheme="classes", n_boot=40, seed=5))
    for indices in seen_indices:
        drawn = Counter(classes[indices].tolist())
        # every drawn class comes with all its images, a whole number of times
        for c, count in drawn.items():
            assert count % int((classes == c).sum()) == 0
        # group sizes kept: 2 class slots in group 0, 3 in group 1
        slots = {c: count // int((classes == c).sum()) for c, count in drawn.items()}
        assert sum(n for c, n in slots.items() if groups[c] == 0) == 2
        assert sum(n for c, n in slots.items() if groups[c] == 1) == 3


def test_recompute_vector_valued_fn() -> None:
    samples = bootstrap_recompute(
        lambda idx: np.array([len(idx), 1.0]), [0, 1, 1], n_classes=2, n_boot=5
    )
    # class sizes are kept: always 3 images
    np.testing.assert_array_equal(samples, [[3.0, 1.0]] * 5)


# --- properties (hypothesis) -----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(decompositions(), st.sampled_from(["images_within_class", "classes"]), st.integers(0, 99))
def test_bootstrap_properties(d: Decomposition, scheme: str, seed: int) -> None:
    samples = bootstrap_samples(d, scheme=scheme, n_boot=40, seed=seed)
    assert samples.shape == (40,) and np.all(np.isfinite(samples))
    low, high = float(d.values.min()), float(d.values.max())
    tol = 1e-12
    if d.combine == "harmonic_of_groups":
        # every group mean is in [low, high]; H is 0 or between the smallest and largest group
        # mean
        assert np.all((samples == 0) | ((samples >= low - tol) & (samples <= high + tol)))
    else:
        assert np.all((samples >= low - tol) & (samples <= high + tol))
    lo, hi = confidence_interval(samples)
    assert lo <= hi
    value = point_estimate(d)
    assert (value == 0 and d.combine == "harmonic_of_groups") or low - tol <= value <= high + tol
    np.testing.assert_array_equal(
        samples, bootstrap_samples(d, scheme=scheme, n_boot=40, seed=seed)
    )


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"scheme": "images"},
            r"Expected `scheme` to be one of \['images_within_class', 'classes'\], but got 'images'",
        ),
        ({"n_boot": 0}, r"Expected `n_boot` to be an integer >= 1, but got 0"),
        ({"n_boot": True}, r"Expected `n_boot` to be an integer >= 1, but got True"),
        ({"seed": -1}, r"Expected `seed` to be an integer >= 0, but got -1"),
        ({"seed": None}, r"Expected `seed` to be an integer >= 0, but got None"),
    ],
)
def test_error_bootstrap_options(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(MetricError, match=match):
        bootstrap_samples(TINY, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=match):
        bootstrap_interval(TINY, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=match):
        bootstrap_recompute(lambda idx: 0.0, [0, 1], n_classes=2, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("samples", "level", "match"),
    [
        (np.zeros(0), 0.95, r"Expected `samples` to hold at least one replicate, but got 0"),
        ([0.0, np.inf], 0.95, r"Expected `samples` to contain only finite values, but row 1"),
        ([0.0, 1.0], 1.0, r"Expected `level` to be a number in \(0, 1\), but got 1.0"),
        ([0.0, 1.0], "0.9", r"Expected `level` to be a number in \(0, 1\), but got '0.9'"),
        ([0.0, 1.0], float("nan"), r"Expected `level` to be a number in \(0, 1\), but got nan"),
    ],
)
def test_error_confidence_interval(samples: object, level: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        confidence_interval(samples, level)  # type: ignore[arg-type]


def test_error_bootstrap_interval_level() -> None:
    with pytest.raises(
        MetricError, match=r"Expected `level` to be a number in \(0, 1\), but got 0.0"
    ):
        bootstrap_interval(TINY, level=0.0)
    with pytest.raises(
        MetricError, match=r"Expected `level` to be a number in \(0, 1\), but got 2.0"
    ):
        bootstrap_interval(TINY, level=2.0)


def test_error_recompute() -> None:
    with pytest.raises(MetricError, match=r"Expected `fn` to be callable, but got float"):
        bootstrap_recompute(1.0, [0, 1], n_classes=2)  # type: ignore[arg-type]
    with pytest.raises(
        MetricError, match=r"Expected `fn` to return finite values, but replicate 0 returned nan"
    ):
        bootstrap_recompute(lambda idx: float("nan"), [0, 1], n_classes=2, n_boot=3)
    calls = iter(range(10))
    with pytest.raises(
        MetricError,
        match=r"Expected `fn` to return a float or a 1D array of fixed length, but replicate 1 returned shape \(2,\)",
    ):
        bootstrap_recompute(lambda idx: np.zeros(next(calls) + 1), [0, 1], n_classes=2, n_boot=3)
    with pytest.raises(MetricError, match=r"but replicate 0 returned shape \(1, 1\)"):
        bootstrap_recompute(lambda idx: np.zeros((1, 1)), [0, 1], n_classes=2, n_boot=3)
    with pytest.raises(
        MetricError,
        match=r"Expected `y_true` to hold candidate column indices in \[0, 2\), but got y_true\[1\] = 5",
    ):
        bootstrap_recompute(lambda idx: 0.0, [0, 5], n_classes=2)
    with pytest.raises(MetricError, match=r"Expected `n_classes` to be an integer >= 1, but got 0"):
        bootstrap_recompute(lambda idx: 0.0, [0, 1], n_classes=0)
    with pytest.raises(
        MetricError, match=r"Expected `groups` to have one entry per class \(2\), but got 3"
    ):
        bootstrap_recompute(lambda idx: 0.0, [0, 1], n_classes=2, groups=[0, 0, 1])
