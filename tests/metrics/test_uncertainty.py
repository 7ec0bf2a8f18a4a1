"""Tests of harness.metrics.uncertainty: decompositions, bootstrap, paired tests, ranks."""

from __future__ import annotations

import json
import math
from collections import Counter

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from harness.errors import MetricError
from harness.metrics.flat import per_class_top_k_accuracy, per_image_top_k_accuracy, top_k_correct
from harness.metrics.gzsl import gzsl_accuracies
from harness.metrics.uncertainty import (
    Decomposition,
    bootstrap_interval,
    bootstrap_recompute,
    bootstrap_samples,
    concatenate,
    confidence_interval,
    paired_bootstrap,
    point_estimate,
    rank_matrix,
    tied_groups,
)

# Two classes, two images each. Class 0 values 0 and 1 (mean 1/2), class 1 values 1 and 1.
TINY = Decomposition(values=[0.0, 1.0, 1.0, 1.0], classes=[0, 0, 1, 1], n_classes=2)


def seeded_problem(
    seed: int, n_images: int, n_candidates: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded scores with the true class boosted, and a seen mask with both kinds."""
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, n_candidates, n_images)
    scores = rng.standard_normal((n_images, n_candidates))
    scores[np.arange(n_images), y_true] += 1.0
    seen = np.zeros(n_candidates, dtype=bool)
    seen[: n_candidates // 2] = True
    return y_true, scores, seen


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


def reference_ranks(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Average ranks by counting: rank = 1 + #better + (#tied others) / 2."""
    out: dict[str, dict[str, float]] = {}
    for bench, row in scores.items():
        for name, value in row.items():
            better = sum(1 for v in row.values() if v > value)
            tied = sum(1 for v in row.values() if v == value) - 1
            out.setdefault(name, {})[bench] = 1 + better + tied / 2
    return out


# --- point estimates -----------------------------------------------------------------------------


def test_point_estimate_hand_cases() -> None:
    # class_mean: class 0 -> (0 + 1) / 2 = 0.5, class 1 -> 1; (0.5 + 1) / 2 = 0.75.
    assert point_estimate(TINY) == 0.75
    # image_mean: 3 / 4.
    image = Decomposition(
        values=TINY.values, classes=TINY.classes, n_classes=2, combine="image_mean"
    )
    assert point_estimate(image) == 0.75
    # Unbalanced: class 0 has 3 images (1, 0, 0) -> 1/3, class 1 has (1) -> 1.
    # class mean (1/3 + 1) / 2 = 2/3; image mean 2/4 = 0.5.
    d = Decomposition(values=[1, 0, 0, 1], classes=[0, 0, 0, 1], n_classes=2)
    assert point_estimate(d) == pytest.approx(2 / 3)
    d_img = Decomposition(
        values=[1, 0, 0, 1], classes=[0, 0, 0, 1], n_classes=2, combine="image_mean"
    )
    assert point_estimate(d_img) == 0.5


def test_point_estimate_harmonic_of_groups_hand_case() -> None:
    # Group 0 = classes {0, 1}: means 1/2 and 1 -> 3/4. Group 1 = class {2}: mean 1/2.
    # H = 2 * 3/4 * 1/2 / (3/4 + 1/2) = 0.75 / 1.25 = 0.6.
    d = Decomposition(
        values=[0, 1, 1, 1, 0],
        classes=[0, 0, 1, 2, 2],
        n_classes=3,
        groups=[0, 0, 1],
        combine="harmonic_of_groups",
    )
    assert point_estimate(d) == pytest.approx(0.6)
    # Three groups with means 1/2, 1, 1/2 (classes 0, 1, 2): 3 / (2 + 1 + 2) = 0.6.
    d3 = Decomposition(
        values=[0, 1, 1, 1, 0],
        classes=[0, 0, 1, 2, 2],
        n_classes=3,
        groups=[5, 7, 9],
        combine="harmonic_of_groups",
    )
    assert point_estimate(d3) == pytest.approx(0.6)


def test_point_estimate_harmonic_zero_group_gives_zero() -> None:
    # Group 1 (class 1) has mean 0 -> H = 0 (as harness.metrics.gzsl.harmonic_mean).
    d = Decomposition.for_gzsl([1.0, 1.0, 0.0], [0, 0, 1], seen=[True, False])
    assert point_estimate(d) == 0.0


def test_point_estimate_two_columns_and_empty_class() -> None:
    # Column 0 as TINY (0.75); column 1 = 2 * column 0 -> 1.5. Class 2 has no image.
    values = np.column_stack([TINY.values, 2 * TINY.values])
    d = Decomposition(values=values, classes=[0, 0, 1, 1], n_classes=3)
    np.testing.assert_allclose(point_estimate(d), [0.75, 1.5])
    assert d.excluded_classes.tolist() == [2]
    assert d.n_images == 4 and d.n_columns == 2 and TINY.n_columns is None


def test_point_estimate_agrees_with_flat_and_gzsl() -> None:
    y_true, scores, seen = seeded_problem(3, 300, 12)
    for k in (1, 3):
        correct = top_k_correct(y_true, scores, k=k)
        d = Decomposition(values=correct, classes=y_true, n_classes=12)
        expected = per_class_top_k_accuracy(y_true, scores, classes=np.arange(12), k=k)
        assert point_estimate(d) == pytest.approx(expected, abs=1e-15)
        d_img = Decomposition(values=correct, classes=y_true, n_classes=12, combine="image_mean")
        assert point_estimate(d_img) == pytest.approx(per_image_top_k_accuracy(y_true, scores, k=k))
        h = gzsl_accuracies(y_true, scores, seen=seen, k=k)["harmonic_mean"]
        assert point_estimate(Decomposition.for_gzsl(correct, y_true, seen=seen)) == pytest.approx(
            h, abs=1e-15
        )


def test_decomposition_freezes_a_copy() -> None:
    values = np.array([0.0, 1.0])
    d = Decomposition(values=values, classes=[0, 1], n_classes=2)
    values[0] = 5.0  # the caller's array stays writable and does not leak in
    assert point_estimate(d) == 0.5
    with pytest.raises(ValueError, match="read-only"):
        d.values[0] = 1.0


def test_concatenate_equals_one_decomposition() -> None:
    a = Decomposition(values=[0.0, 1.0], classes=[0, 1], n_classes=3)
    b = Decomposition(values=[1.0, 1.0], classes=[0, 1], n_classes=3)
    joined = concatenate([a, b])
    # class 0: (0 + 1) / 2; class 1: (1 + 1) / 2 -> (0.5 + 1) / 2
    assert point_estimate(joined) == 0.75
    assert joined.classes.tolist() == [0, 1, 0, 1]
    empty = Decomposition(values=np.zeros(0), classes=np.zeros(0, dtype=np.int64), n_classes=3)
    assert point_estimate(concatenate([empty, a])) == point_estimate(a)


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
    import harness.metrics.uncertainty as unc

    rng = np.random.default_rng(0)
    d = Decomposition(values=rng.random((50, 2)), classes=rng.integers(0, 4, 50), n_classes=4)
    whole = bootstrap_samples(d, n_boot=40, seed=4)
    monkeypatch.setattr(unc, "CHUNK_ELEMENTS", 60)  # a few replicates per chunk
    np.testing.assert_array_equal(bootstrap_samples(d, n_boot=40, seed=4), whole)


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
            assert ci["lo"] < ci["value"] < ci["hi"]
            assert ci["hi"] - ci["lo"] < 0.2
            assert ci["scheme"] == scheme and ci["n_boot"] == 500 and ci["level"] == 0.95
            json.dumps(ci)  # JSON-ready as returned


def test_bootstrap_interval_two_columns_and_excluded_classes() -> None:
    values = np.column_stack([TINY.values, np.ones(4)])
    d = Decomposition(values=values, classes=[0, 0, 1, 1], n_classes=3)
    ci = bootstrap_interval(d, n_boot=200)
    # column 1 is constant: its interval is [1, 1]
    assert ci["value"] == [0.75, 1.0] and ci["lo"][1] == 1.0 and ci["hi"][1] == 1.0
    assert ci["excluded_classes"] == [2]


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


# --- paired comparison -----------------------------------------------------------------------


def test_paired_identical_runs_p_is_one() -> None:
    y_true, scores, _ = seeded_problem(2, 500, 10)
    d = Decomposition(values=top_k_correct(y_true, scores), classes=y_true, n_classes=10)
    for scheme in ("images_within_class", "classes"):
        result = paired_bootstrap(d, d, scheme=scheme, n_boot=300)
        assert result["diff"] == 0.0 and result["lo"] == 0.0 and result["hi"] == 0.0
        assert result["p_value"] == 1.0


def test_paired_clearly_different_runs_tiny_p() -> None:
    # Run b = run a minus 0.1 on every image: every replicate difference is exactly 0.1,
    # no replicate is <= 0, so p = 2 * (0 + 1) / (999 + 1) = 0.002.
    rng = np.random.default_rng(3)
    values = 0.2 + 0.8 * rng.random(300)
    classes = rng.integers(0, 6, 300)
    a = Decomposition(values=values, classes=classes, n_classes=6)
    b = Decomposition(values=values - 0.1, classes=classes, n_classes=6)
    result = paired_bootstrap(a, b, n_boot=999)
    assert result["diff"] == pytest.approx(0.1)
    assert result["lo"] == pytest.approx(0.1) and result["hi"] == pytest.approx(0.1)
    assert result["p_value"] == pytest.approx(0.002)
    swapped = paired_bootstrap(b, a, n_boot=999)
    assert swapped["diff"] == pytest.approx(-0.1) and swapped["p_value"] == pytest.approx(0.002)


def test_paired_p_value_formula_against_replicates() -> None:
    # Recompute the p-value from the joint replicates with a loop.
    rng = np.random.default_rng(4)
    classes = rng.integers(0, 4, 80)
    va = (rng.random(80) < 0.6).astype(float)
    vb = (rng.random(80) < 0.5).astype(float)
    a = Decomposition(values=va, classes=classes, n_classes=4)
    b = Decomposition(values=vb, classes=classes, n_classes=4)
    result = paired_bootstrap(a, b, n_boot=500, seed=6)
    joint = Decomposition(values=np.column_stack([va, vb]), classes=classes, n_classes=4)
    reps = bootstrap_samples(joint, n_boot=500, seed=6)
    diffs = [r[0] - r[1] for r in reps]
    observed = point_estimate(a) - point_estimate(b)
    assert result["diff"] == pytest.approx(observed)
    other = sum(1 for x in diffs if (x <= 0 if observed > 0 else x >= 0))
    assert result["p_value"] == pytest.approx(min(1.0, 2 * (other + 1) / 501))
    assert result["lo"] <= result["diff"] <= result["hi"]


def test_paired_two_columns() -> None:
    rng = np.random.default_rng(2)
    classes = rng.integers(0, 3, 60)
    v = rng.random((60, 2))
    a = Decomposition(values=v, classes=classes, n_classes=3)
    result = paired_bootstrap(a, a, n_boot=50)
    assert result["diff"] == [0.0, 0.0] and result["p_value"] == [1.0, 1.0]


# --- tied groups -----------------------------------------------------------------------------


def _runs_with_errors(n_errors: int) -> Decomposition:
    """100 + 100 images in two classes; the first n_errors images (class 0) are wrong."""
    values = np.ones(200)
    values[:n_errors] = 0.0
    return Decomposition(values=values, classes=np.repeat([0, 1], 100), n_classes=2)


def test_tied_groups_leader_rule() -> None:
    a, b, c = _runs_with_errors(0), _runs_with_errors(3), _runs_with_errors(6)
    # Premise, from the paired tests themselves: a~b and b~c inseparable, a vs c separable.
    p_ab = paired_bootstrap(a, b, n_boot=1000)["p_value"]
    p_bc = paired_bootstrap(b, c, n_boot=1000)["p_value"]
    p_ac = paired_bootstrap(a, c, n_boot=1000)["p_value"]
    assert p_ab >= 0.05 and p_bc >= 0.05 and p_ac < 0.05
    # c is compared with the leader a (not with b): it starts a new group.
    assert tied_groups(["c", "b", "a"], [c, b, a]) == [["a", "b"], ["c"]]


def test_tied_groups_lower_is_better_and_ties_keep_order() -> None:
    # right: class means 1, 1 -> 1. wrong: class 0 all wrong -> (0 + 1) / 2 = 0.5. Every
    # replicate difference is 0.5 (class 0 differs on every image), so p = 2 / 1001.
    right, wrong = _runs_with_errors(0), _runs_with_errors(100)
    # Lower is better: wrong (0.5) leads and right is separable from it.
    assert tied_groups(["r", "w"], [right, wrong], higher_is_better=False) == [["w"], ["r"]]
    # Equal estimates keep the given order and are inseparable (p = 1).
    assert tied_groups(["x", "y", "z"], [right, right, wrong]) == [["x", "y"], ["z"]]
    assert tied_groups(["solo"], [right]) == [["solo"]]


# --- rank matrix -----------------------------------------------------------------------------


def test_rank_matrix_hand_example_with_tie_and_missing() -> None:
    scores = {
        "AWA2": {"A": 0.70, "B": 0.60, "C": 0.60},  # ranks A 1, B 2.5, C 2.5
        "CUB": {"A": 0.50, "B": 0.55, "C": 0.40},  # ranks B 1, A 2, C 3
        "SUN": {"A": 0.30, "B": 0.20},  # ranks A 1, B 2; C missing
    }
    r = rank_matrix(scores)
    # mean ranks: A (1 + 2 + 1) / 3 = 4/3, B (2.5 + 1 + 2) / 3 = 11/6, C (2.5 + 3) / 2 = 2.75
    assert r["submissions"] == ["A", "B", "C"]
    assert r["benchmarks"] == ["AWA2", "CUB", "SUN"]
    np.testing.assert_allclose(r["mean_rank"], [4 / 3, 11 / 6, 2.75])
    np.testing.assert_array_equal(r["n_benchmarks"], [3, 3, 2])
    np.testing.assert_array_equal(r["ranks"], [[1, 2, 1], [2.5, 1, 2], [2.5, 3, np.nan]])
    # counts: A rank 1 twice, rank 2 once. B: rank 1 (CUB), rank 2 (SUN), AWA2 tie over
    # positions 2-3 -> +1/2 each. C: AWA2 tie -> 1/2, 1/2; CUB rank 3.
    np.testing.assert_allclose(r["counts"], [[2, 1, 0], [1, 1.5, 0.5], [0, 0.5, 1.5]])
    assert r["missing"] == [["C", "SUN"]]


def test_rank_matrix_lower_is_better_reverses() -> None:
    scores = {"x": {"a": 1.0, "b": 2.0}}
    assert rank_matrix(scores)["submissions"] == ["b", "a"]
    assert rank_matrix(scores, higher_is_better=False)["submissions"] == ["a", "b"]


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
    for s, name in enumerate(r["submissions"]):
        cells = want[name]
        assert r["mean_rank"][s] == pytest.approx(sum(cells.values()) / len(cells))
        for b, bench in enumerate(r["benchmarks"]):
            if bench in cells:
                assert r["ranks"][s, b] == pytest.approx(cells[bench])
            else:
                assert math.isnan(r["ranks"][s, b])
        # each row of counts sums to the number of ranked benchmarks, and its weighted mean
        # position is the mean rank
        assert r["counts"][s].sum() == pytest.approx(len(cells))
        positions = np.arange(1, len(names) + 1)[: r["counts"].shape[1]]
        assert (r["counts"][s] * positions).sum() / len(cells) == pytest.approx(r["mean_rank"][s])
    assert list(r["mean_rank"]) == sorted(r["mean_rank"])


# --- properties (hypothesis) -----------------------------------------------------------------


@st.composite
def decompositions(draw: st.DrawFn) -> Decomposition:
    n_classes = draw(st.integers(1, 5))
    n = draw(st.integers(1, 25))
    classes = draw(hnp.arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    binary = draw(st.booleans())
    elements = st.sampled_from([0.0, 1.0]) if binary else st.floats(0, 1, width=32)
    values = draw(hnp.arrays(np.float64, n, elements=elements))
    groups = draw(hnp.arrays(np.int64, n_classes, elements=st.integers(0, 1)))
    combine = draw(st.sampled_from(["class_mean", "image_mean", "harmonic_of_groups"]))
    if combine == "harmonic_of_groups":
        present_groups = {int(groups[c]) for c in np.unique(classes)}
        if present_groups != {int(g) for g in groups}:
            groups = np.zeros(n_classes, dtype=np.int64)
    return Decomposition(
        values=values, classes=classes, n_classes=n_classes, groups=groups, combine=combine
    )


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


@settings(max_examples=80, deadline=None)
@given(decompositions(), st.integers(0, 99))
def test_paired_properties(d: Decomposition, seed: int) -> None:
    shifted = Decomposition(
        values=d.values[::-1].copy(),
        classes=d.classes,
        n_classes=d.n_classes,
        groups=d.groups,
        combine=d.combine,
    )
    ab = paired_bootstrap(d, shifted, n_boot=30, seed=seed)
    ba = paired_bootstrap(shifted, d, n_boot=30, seed=seed)
    assert 0 < ab["p_value"] <= 1 and ab["lo"] <= ab["hi"]
    assert ab["diff"] == pytest.approx(-ba["diff"]) and ab["p_value"] == pytest.approx(
        ba["p_value"]
    )
    assert paired_bootstrap(d, d, n_boot=10, seed=seed)["p_value"] == 1.0


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_classes": 0}, r"Expected `n_classes` to be an integer >= 1, but got 0"),
        ({"n_classes": 2.0}, r"Expected `n_classes` to be an integer >= 1, but got 2.0"),
        (
            {"combine": "mean"},
            r"Expected `combine` to be one of \['class_mean', .*\], but got 'mean'",
        ),
        ({"values": [0.0, np.nan]}, r"Expected `values` to contain only finite values, but row 1"),
        ({"values": [[[0.0]], [[1.0]]]}, r"Expected `values` to have shape \(n,\) or \(n, m\)"),
        (
            {"values": np.zeros((2, 0))},
            r"Expected `values` to have shape \(n,\) or \(n, m\) with m >= 1",
        ),
        ({"values": ["a", "b"]}, r"Expected `values` to be a real-valued array, but got dtype <U1"),
        ({"classes": [0.0, 1.0]}, r"Expected `classes` to be a 1D integer array .* dtype float64"),
        (
            {"classes": [0, 2]},
            r"Expected `classes` to hold class columns in \[0, 2\), but got classes\[1\] = 2",
        ),
        (
            {"classes": [0, 1, 1]},
            r"Expected `values` to have one row per image in `classes` \(3\), but got 2",
        ),
        ({"groups": [0]}, r"Expected `groups` to have one entry per class \(2\), but got 1"),
        (
            {"groups": [0, -1]},
            r"Expected `groups` to hold non-negative group ids, but got groups\[1\] = -1",
        ),
        (
            {"values": [0.5, -0.5], "combine": "harmonic_of_groups"},
            r"Expected `values` to be non-negative for combine='harmonic_of_groups', but row 1",
        ),
    ],
)
def test_error_decomposition_malformed(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"values": [0.0, 1.0], "classes": [0, 1], "n_classes": 2}
    with pytest.raises(MetricError, match=match):
        Decomposition(**{**base, **kwargs})  # type: ignore[arg-type]


def test_error_decomposition_without_images_or_with_an_empty_group() -> None:
    empty = Decomposition(values=np.zeros(0), classes=np.zeros(0, dtype=np.int64), n_classes=2)
    with pytest.raises(
        MetricError, match=r"Expected the decomposition to hold at least one image, but got 0"
    ):
        point_estimate(empty)
    no_unseen = Decomposition.for_gzsl([1.0, 0.0], [0, 0], seen=[True, False])
    with pytest.raises(
        MetricError, match=r"Expected every group to have a class with images .* group 1 has none"
    ):
        bootstrap_samples(no_unseen)
    with pytest.raises(MetricError, match=r"Expected `seen` to be a 1D bool array"):
        Decomposition.for_gzsl([1.0], [0], seen=[1, 0])


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
        paired_bootstrap(TINY, TINY, **kwargs)  # type: ignore[arg-type]
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
        paired_bootstrap(TINY, TINY, level=2.0)


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


def test_error_paired_mismatch() -> None:
    other_classes = Decomposition(values=TINY.values, classes=[0, 1, 0, 1], n_classes=2)
    with pytest.raises(
        MetricError,
        match=r"Expected `decomp_b` to score the same images as `decomp_a` .* different classes",
    ):
        paired_bootstrap(TINY, other_classes)
    wider = Decomposition(values=np.ones((4, 2)), classes=TINY.classes, n_classes=2)
    with pytest.raises(MetricError, match=r"got shapes \(4,\) and \(4, 2\) with equal classes"):
        paired_bootstrap(TINY, wider)
    more_classes = Decomposition(values=TINY.values, classes=TINY.classes, n_classes=3)
    with pytest.raises(
        MetricError,
        match=r"Expected `decomp_b` to have the n_classes and combine of `decomp_a` \(2, 'class_mean'\), but got \(3, 'class_mean'\)",
    ):
        paired_bootstrap(TINY, more_classes)
    regrouped = Decomposition(values=TINY.values, classes=TINY.classes, n_classes=2, groups=[0, 1])
    with pytest.raises(
        MetricError, match=r"Expected `decomp_b` to have the groups of `decomp_a`, but they differ"
    ):
        paired_bootstrap(TINY, regrouped)


def test_error_concatenate() -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps` to be a non-empty sequence of Decomposition, but got \[\]",
    ):
        concatenate([])
    with pytest.raises(MetricError, match=r"but got \['Decomposition', 'int'\]"):
        concatenate([TINY, 3])  # type: ignore[list-item]
    wider = Decomposition(values=np.ones((4, 2)), classes=TINY.classes, n_classes=2)
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[1\]` to have values of shape \(n,\) like `decomps\[0\]`, but got \(4, 2\)",
    ):
        concatenate([TINY, wider])
    image = Decomposition(
        values=TINY.values, classes=TINY.classes, n_classes=2, combine="image_mean"
    )
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[1\]` to have the n_classes and combine of `decomps\[0\]`",
    ):
        concatenate([TINY, image])


def test_error_tied_groups() -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected `names` and `decomps` to be non-empty and of equal length, but got 2 names and 1",
    ):
        tied_groups(["a", "b"], [TINY])
    with pytest.raises(
        MetricError, match=r"Expected `names` and `decomps` to be non-empty .* got 0 names and 0"
    ):
        tied_groups([], [])
    with pytest.raises(
        MetricError,
        match=r"Expected `names` to be distinct, but names\[1\] = 'a' repeats names\[0\]",
    ):
        tied_groups(["a", "a"], [TINY, TINY])
    with pytest.raises(MetricError, match=r"Expected `names\[0\]` to be a str, but got 1"):
        tied_groups([1], [TINY])  # type: ignore[list-item]
    wide = Decomposition(values=np.ones((4, 2)), classes=TINY.classes, n_classes=2)
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[1\]` to be a Decomposition with 1D values, but got values of shape \(4, 2\)",
    ):
        tied_groups(["a", "b"], [TINY, wide])
    with pytest.raises(
        MetricError,
        match=r"Expected `decomps\[0\]` to be a Decomposition with 1D values, but got list",
    ):
        tied_groups(["a"], [[1.0]])  # type: ignore[list-item]
    with pytest.raises(
        MetricError, match=r"Expected `alpha` to be a number in \(0, 1\), but got 0.0"
    ):
        tied_groups(["a"], [TINY], alpha=0.0)


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
