"""Tests of harness.metrics.flat: hand-computed cases, sklearn references, properties, errors."""

from __future__ import annotations

import itertools
import math
from random import Random

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import recall_score, top_k_accuracy_score

from harness import checks
from harness.core.errors import MetricError
from harness.metrics.flat import (
    PerClassAccuracy,
    per_class_counts,
    per_class_top_k_accuracy,
    per_class_top_k_accuracy_details,
    per_image_top_k_accuracy,
    top_k_correct,
)

# Three images, two classes. argmax per row: 0, 0, 1.
# Class 0: image 0 correct -> 1/1. Class 1: image 1 wrong, image 2 correct -> 1/2.
Y_SMALL = np.array([0, 1, 1])
S_SMALL = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])


def make_prediction(seed: int, n_images: int, n_candidates: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded, tie-free inputs where the true class is boosted (so accuracies are not ~1/m)."""
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, n_candidates, n_images)
    scores = rng.standard_normal((n_images, n_candidates))
    scores[np.arange(n_images), y_true] += 1.0
    assert all(len(np.unique(row)) == n_candidates for row in scores)  # no ties
    return y_true, scores


def reference_top_k_correct(y_true: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The tie policy written as a loop: fewer than k OTHER candidates score >= the true one."""
    out = []
    for i, y in enumerate(y_true):
        others = [j for j in range(scores.shape[1]) if j != y and scores[i, j] >= scores[i, y]]
        out.append(len(others) < k)
    return np.array(out, dtype=bool)


# --- hand-computed cases -------------------------------------------------------------------------


def test_per_class_top_k_accuracy_small_case() -> None:
    # (1/1 + 1/2) / 2 = 0.75
    assert per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=[0, 1]) == 0.75


def test_per_image_top_k_accuracy_small_case() -> None:
    # images 0 and 2 correct out of 3 -> 2/3 (differs from the per-class 0.75)
    assert per_image_top_k_accuracy(Y_SMALL, S_SMALL) == pytest.approx(2 / 3)


def test_top_k_correct_tie_at_top_1_counts_against_true_class() -> None:
    # Row 0: true col 0 = 0.5 ties col 1 = 0.5 -> 1 other >= -> 1 < 1 is False at k=1.
    # Row 1: true col 2 = 0.9 ties col 1 = 0.9 -> also wrong at k=1 (column order is irrelevant).
    scores = np.array([[0.5, 0.5, 0.1], [0.2, 0.9, 0.9]])
    assert top_k_correct([0, 2], scores, k=1).tolist() == [False, False]
    # At k=2: 1 < 2 -> both correct.
    assert top_k_correct([0, 2], scores, k=2).tolist() == [True, True]


def test_top_k_correct_tie_inside_k_is_fine() -> None:
    # True col 1 = 0.5; others >= 0.5: col 0 (0.9) and col 2 (0.5, tied) -> 2 others.
    scores = np.array([[0.9, 0.5, 0.5, 0.1]])
    assert top_k_correct([1], scores, k=2).tolist() == [False]  # 2 < 2 is False
    assert top_k_correct([1], scores, k=3).tolist() == [True]  # 2 < 3
    # Without the tie (col 2 = 0.4) only col 0 is >= -> 1 < 2 -> correct at k=2.
    assert top_k_correct([1], np.array([[0.9, 0.5, 0.4, 0.1]]), k=2).tolist() == [True]


def test_top_k_correct_all_tied_row() -> None:
    # Every candidate ties: 2 others >= the true one -> correct only at k=3.
    scores = np.ones((1, 3))
    assert [top_k_correct([1], scores, k=k)[0] for k in (1, 2, 3)] == [False, False, True]


def test_per_class_top_k_accuracy_tie_policy_hand_case() -> None:
    # Class 0: image 0 tied at top with col 1 -> wrong at k=1; image 1 clear -> right: 1/2.
    # Class 1: image 2 clear -> 1/1. Mean at k=1: (0.5 + 1) / 2 = 0.75; at k=2: 1.0.
    y_true = [0, 0, 1]
    scores = [[0.4, 0.4, 0.2], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1]]
    assert per_class_top_k_accuracy(y_true, scores, classes=[0, 1]) == 0.75
    assert per_class_top_k_accuracy(y_true, scores, classes=[0, 1], k=2) == 1.0


def test_per_class_top_k_accuracy_empty_class_excluded_and_reported() -> None:
    # Column 2 is a candidate with no test image. Mean over classes 0 and 1 only:
    # (1 + 0.5) / 2 = 0.75, not (1 + 0.5 + 0) / 3 = 0.5 and not NaN.
    scores = np.column_stack([S_SMALL, np.zeros(3)])
    details = per_class_top_k_accuracy_details(Y_SMALL, scores, classes=[0, 1, 2])
    assert details == PerClassAccuracy(
        value=0.75,
        per_class=(1.0, 0.5, None),
        classes=(0, 1, 2),
        excluded_classes=(2,),
        n_images=3,
        k=1,
    )
    assert per_class_top_k_accuracy(Y_SMALL, scores, classes=[0, 1, 2]) == 0.75


def test_per_class_top_k_accuracy_sklearn_counts_empty_class_as_zero() -> None:
    # Documents the difference: recall_score includes the empty label as 0 -> (1 + 0.5 + 0) / 3.
    scores = np.column_stack([S_SMALL, np.zeros(3)])
    y_pred = scores.argmax(axis=1)
    sk = recall_score(Y_SMALL, y_pred, average="macro", labels=[0, 1, 2], zero_division=0)
    assert sk == pytest.approx(0.5)
    assert per_class_top_k_accuracy(Y_SMALL, scores, classes=[0, 1, 2]) == 0.75


def test_per_class_top_k_accuracy_classes_subset_and_order() -> None:
    # classes=[1]: only class 1 (1/2); images of class 0 do not count.
    details = per_class_top_k_accuracy_details(Y_SMALL, S_SMALL, classes=[1])
    assert details.value == 0.5
    assert details.n_images == 2
    # per_class follows the order of `classes`.
    details = per_class_top_k_accuracy_details(Y_SMALL, S_SMALL, classes=[1, 0])
    assert details.per_class == (0.5, 1.0)
    assert details.value == 0.75


def test_per_class_top_k_accuracy_classes_not_inferred_from_y_true() -> None:
    # Classes listed but absent from y_true are excluded, not silently dropped from the report.
    y_true = [0, 0]
    scores = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    details = per_class_top_k_accuracy_details(y_true, scores, classes=[0, 1, 2])
    assert details.value == 0.5  # class 0: 1/2
    assert details.excluded_classes == (1, 2)
    assert details.per_class == (0.5, None, None)


def test_top_k_at_k_equal_n_candidates_is_perfect() -> None:
    # k = n_candidates = 2: at most 1 other candidate can be >= -> 1 < 2 always.
    assert per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=[0, 1], k=2) == 1.0
    assert per_image_top_k_accuracy(Y_SMALL, S_SMALL, k=2) == 1.0
    assert top_k_correct([0], [[0.0]], k=1).tolist() == [True]  # a single candidate


def test_per_class_counts_hand_case() -> None:
    # Class 0: images 0, 2 (one correct). Class 1: image 1 (correct). Class 2: none.
    hits, totals = per_class_counts([0, 1, 0], [True, True, False], n_classes=3)
    assert hits.tolist() == [1, 1, 0]
    assert totals.tolist() == [2, 1, 0]
    assert hits.dtype == np.int64 and totals.dtype == np.int64


def test_functions_return_python_floats() -> None:
    assert type(per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=[0, 1])) is float
    assert type(per_image_top_k_accuracy(Y_SMALL, S_SMALL)) is float


def test_scores_dtypes_and_memmap(tmp_path: object) -> None:
    expected = per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=[0, 1])
    ints = (S_SMALL * 10).astype(np.int32)
    assert per_class_top_k_accuracy(Y_SMALL, ints, classes=[0, 1]) == expected
    f32 = S_SMALL.astype(np.float32)
    assert per_class_top_k_accuracy(Y_SMALL, f32, classes=[0, 1]) == expected
    path = f"{tmp_path}/scores.npy"
    np.save(path, f32)
    mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    assert per_class_top_k_accuracy(Y_SMALL, mapped, classes=[0, 1]) == expected
    assert per_class_top_k_accuracy(Y_SMALL.astype(np.uint8), S_SMALL, classes=[0, 1]) == expected


def test_finite_scores_whose_sum_overflows_are_accepted() -> None:
    # The cheap check (sum is finite?) fails here, the row scan finds no NaN/inf.
    scores = np.array([[1e308, 1e308], [1e308, -1.0]])
    assert per_image_top_k_accuracy([0, 0], scores) == 0.5  # row 0 tied -> wrong; row 1 right


def test_top_k_correct_chunking_matches_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    y_true, scores = make_prediction(3, 101, 7)
    scores = np.round(scores)  # many ties
    expected = {k: top_k_correct(y_true, scores, k=k) for k in range(1, 8)}
    for chunk in (1, 7, 15, 50):  # 1 row per chunk, exactly one row, 2 rows, 7 rows
        monkeypatch.setattr(checks, "CHUNK_ELEMENTS", chunk)
        for k in range(1, 8):
            np.testing.assert_array_equal(top_k_correct(y_true, scores, k=k), expected[k])
        bad = scores.copy()
        bad[57, 3] = np.inf
        with pytest.raises(MetricError, match=r"row 57 holds inf \(at column 3\)"):
            top_k_correct(y_true, bad)


# --- agreement with scikit-learn ---------------------------------------------------------------


@pytest.mark.parametrize(("n_images", "n_candidates"), [(1, 3), (10, 3), (50, 7), (400, 20)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_class_top_1_matches_sklearn_macro_recall(
    n_images: int, n_candidates: int, seed: int
) -> None:
    y_true, scores = make_prediction(seed, n_images, n_candidates)
    y_pred = scores.argmax(axis=1)
    present = np.unique(y_true)
    rng = np.random.default_rng(seed + 100)
    subset = rng.choice(present, size=max(1, len(present) // 2), replace=False)
    for classes in (present, subset):
        expected = recall_score(y_true, y_pred, average="macro", labels=classes)
        assert per_class_top_k_accuracy(y_true, scores, classes=classes) == pytest.approx(
            expected, abs=1e-12
        )


@pytest.mark.parametrize(("n_images", "n_candidates"), [(1, 3), (10, 3), (50, 7), (400, 20)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_image_top_k_matches_sklearn_top_k_accuracy(
    n_images: int, n_candidates: int, seed: int
) -> None:
    y_true, scores = make_prediction(seed, n_images, n_candidates)
    labels = np.arange(n_candidates)
    for k in range(1, n_candidates):  # sklearn warns at k >= n_classes
        expected = top_k_accuracy_score(y_true, scores, k=k, labels=labels)
        assert per_image_top_k_accuracy(y_true, scores, k=k) == pytest.approx(expected, abs=1e-12)


# --- properties ----------------------------------------------------------------------------------

score_values = st.one_of(
    st.integers(-2, 2).map(float),  # frequent ties
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n_candidates = draw(st.integers(1, 8))
    n_images = draw(st.integers(1, 25))
    y_true = draw(hnp.arrays(np.int64, n_images, elements=st.integers(0, n_candidates - 1)))
    scores = draw(hnp.arrays(np.float64, (n_images, n_candidates), elements=score_values))
    return y_true, scores


@settings(max_examples=150, deadline=None)
@given(problems())
def test_top_k_correct_matches_reference_loop(problem: tuple[np.ndarray, np.ndarray]) -> None:
    y_true, scores = problem
    for k in range(1, scores.shape[1] + 1):
        np.testing.assert_array_equal(
            top_k_correct(y_true, scores, k=k), reference_top_k_correct(y_true, scores, k)
        )


@settings(max_examples=150, deadline=None)
@given(problems())
def test_per_class_top_k_accuracy_monotone_bounded_and_perfect_at_n_candidates(
    problem: tuple[np.ndarray, np.ndarray],
) -> None:
    y_true, scores = problem
    n_candidates = scores.shape[1]
    classes = np.arange(n_candidates)
    values = [
        per_class_top_k_accuracy(y_true, scores, classes=classes, k=k)
        for k in range(1, n_candidates + 1)
    ]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b for a, b in itertools.pairwise(values))
    assert values[-1] == 1.0
    per_image = [per_image_top_k_accuracy(y_true, scores, k=k) for k in range(1, n_candidates + 1)]
    assert all(a <= b for a, b in itertools.pairwise(per_image))
    assert per_image[-1] == 1.0


@settings(max_examples=150, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_per_class_top_k_accuracy_invariant_under_column_permutation(
    problem: tuple[np.ndarray, np.ndarray], random: Random
) -> None:
    y_true, scores = problem
    n_candidates = scores.shape[1]
    perm = np.array(random.sample(range(n_candidates), n_candidates))
    inverse = np.argsort(perm)  # old column c is new column inverse[c]
    classes = np.arange(n_candidates)
    for k in range(1, n_candidates + 1):
        before = per_class_top_k_accuracy_details(y_true, scores, classes=classes, k=k)
        after = per_class_top_k_accuracy_details(
            inverse[y_true], scores[:, perm], classes=inverse[classes], k=k
        )
        assert math.isclose(before.value, after.value, rel_tol=1e-12, abs_tol=1e-15)
        assert before.per_class == after.per_class  # aligned with `classes`
        # Permuting images changes nothing either.
        rows = np.array(random.sample(range(len(y_true)), len(y_true)))
        shuffled = per_class_top_k_accuracy(y_true[rows], scores[rows], classes=classes, k=k)
        assert math.isclose(before.value, shuffled, rel_tol=1e-12, abs_tol=1e-15)


# --- errors --------------------------------------------------------------------------------------


def test_error_nan_scores_name_the_row() -> None:
    scores = S_SMALL.copy()
    scores[2, 1] = np.nan
    with pytest.raises(MetricError, match=r"`scores`.*finite.*row 2 holds NaN \(at column 1\)"):
        per_class_top_k_accuracy(Y_SMALL, scores, classes=[0, 1])
    scores[1, 0] = -np.inf
    with pytest.raises(MetricError, match=r"row 1 holds -inf \(at column 0\)"):
        per_image_top_k_accuracy(Y_SMALL, scores)


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        (
            np.zeros(3),
            r"Expected `scores` to be a 2D array of shape \(n_images, n_candidates\), "
            r"but got shape \(3,\)\. Use `scores.reshape\(1, -1\)`",
        ),
        (np.zeros((3, 2, 1)), r"2D array .* but got shape \(3, 2, 1\)"),
        (np.zeros((3, 0)), r"at least one image and one candidate, but got shape \(3, 0\)"),
        (np.zeros((2, 2)), r"one row per image in `y_true` \(3 images\), but got 2 rows"),
        (np.zeros((3, 2), dtype=bool), r"`scores` to be a real-valued \(float\) array.*bool"),
        (np.zeros((3, 2), dtype=complex), r"real-valued .* complex128"),
    ],
)
def test_error_bad_scores_shape_or_dtype(scores: np.ndarray, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        per_class_top_k_accuracy(Y_SMALL, scores, classes=[0, 1])


@pytest.mark.parametrize(
    ("y_true", "match"),
    [
        (
            [0, 2, 1],
            r"`y_true` to hold candidate column indices in \[0, 2\), but got y_true\[1\] = 2",
        ),
        ([0, -1, 5], r"y_true\[1\] = -1 \(first of 2 out-of-range value"),
        ([0.0, 1.0, 1.0], r"`y_true` to be a 1D integer array.*dtype float64.*astype"),
        ([[0, 1, 1]], r"`y_true` to be a 1D integer array.*shape \(1, 3\)"),
        ([True, False, True], r"dtype bool"),
        (None, r"`y_true`.*but got None"),
    ],
)
def test_error_bad_y_true(y_true: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        per_class_top_k_accuracy(y_true, S_SMALL, classes=[0, 1])  # type: ignore[arg-type]


def test_error_empty_y_true() -> None:
    with pytest.raises(MetricError, match=r"at least one image"):
        per_image_top_k_accuracy([], np.zeros((0, 2)))


@pytest.mark.parametrize("k", [3, 10])
def test_error_k_too_big_names_k_and_candidate_count(k: int) -> None:
    match = rf"`k` to be at most the number of candidates \(2\), but got k={k}"
    with pytest.raises(MetricError, match=match):
        per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=[0, 1], k=k)
    with pytest.raises(MetricError, match=match):
        per_image_top_k_accuracy(Y_SMALL, S_SMALL, k=k)
    with pytest.raises(MetricError, match=match):
        top_k_correct(Y_SMALL, S_SMALL, k=k)


@pytest.mark.parametrize(
    ("k", "match"), [(0, r"k=0"), (-1, r"k=-1"), (1.0, r"1\.0"), (True, r"True")]
)
def test_error_k_not_a_positive_integer(k: object, match: str) -> None:
    with pytest.raises(MetricError, match=rf"`k` to be an integer >= 1, but got {match}\."):
        per_image_top_k_accuracy(Y_SMALL, S_SMALL, k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("classes", "match"),
    [
        (None, r"`classes` to list the candidate columns.*got None.*np\.arange\(n_candidates\)"),
        ([], r"`classes` to list at least one candidate column, but got 0"),
        ([0, 1, 0], r"distinct candidate columns, but classes\[2\] = 0 repeats classes\[0\]"),
        (
            [0, 2],
            r"`classes` to hold candidate column indices in \[0, 2\), but got classes\[1\] = 2",
        ),
        ([[0, 1]], r"`classes` to be a 1D integer array.*shape \(1, 2\)"),
        ([0.0, 1.0], r"`classes` to be a 1D integer array.*float64"),
    ],
)
def test_error_bad_classes(classes: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        per_class_top_k_accuracy(Y_SMALL, S_SMALL, classes=classes)  # type: ignore[arg-type]


def test_error_classes_is_required() -> None:
    with pytest.raises(TypeError, match="classes"):
        per_class_top_k_accuracy(Y_SMALL, S_SMALL)  # type: ignore[call-arg]


def test_error_no_image_in_any_listed_class() -> None:
    scores = np.column_stack([S_SMALL, np.zeros((3, 2))])
    with pytest.raises(
        MetricError,
        match=r"at least one test image whose true class is among `classes` \(2 classes\), "
        r"but none of the 3 images is",
    ):
        per_class_top_k_accuracy(Y_SMALL, scores, classes=[2, 3])


@pytest.mark.parametrize(
    ("correct", "match"),
    [
        ([1, 0, 1], r"`correct` to be a 1D bool array.*int64"),
        (
            [True, False],
            r"`correct` to have one entry per image in `y_true` \(3 images\), but got 2",
        ),
    ],
)
def test_error_per_class_counts_bad_correct(correct: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        per_class_counts(Y_SMALL, correct, n_classes=2)  # type: ignore[arg-type]


def test_error_per_class_counts_y_true_out_of_range() -> None:
    with pytest.raises(MetricError, match=r"y_true\[1\] = 1"):
        per_class_counts(Y_SMALL, [True, True, True], n_classes=1)


def test_top_k_correct_from_topk_ties_missing_and_k_larger_than_K() -> None:
    from harness.metrics.flat import top_k_correct_from_topk

    idx = np.array([[3, 7, 1], [2, 4, 0], [1, 5, 6], [9, 8, 3]])
    sc = np.array([[0.9, 0.5, 0.1], [0.8, 0.8, 0.2], [0.7, 0.6, 0.5], [0.4, 0.4, 0.4]])
    y = np.array([7, 4, 0, 3])
    # image 0: true 7 second -> wrong at 1, right at 2; image 1: true 4 tied with 2 at the top
    # (one other >=) -> wrong at 1, right at 2; image 2: true 0 not listed -> never right;
    # image 3: true 3 tied with two others -> 2 others >= -> right only at k = 3.
    assert top_k_correct_from_topk(y, idx, sc, k=1).tolist() == [False, False, False, False]
    assert top_k_correct_from_topk(y, idx, sc, k=2).tolist() == [True, True, False, False]
    assert top_k_correct_from_topk(y, idx, sc, k=3).tolist() == [True, True, False, True]
    # Same answers as the dense rule when every column is listed.
    dense = np.full((4, 10), -1.0)
    np.put_along_axis(dense, idx, sc, axis=1)
    dense[2, 0] = -2.0  # the unlisted true class scores below every listed one
    for k in (1, 2, 3):
        got = top_k_correct_from_topk(y, idx, sc, k=k)
        assert (got == top_k_correct(y, dense, k=k)).all()
    with pytest.raises(
        MetricError,
        match=r"Expected `k` to be an integer in \[1, 3\], but got 4\. Top-K predictions list K=3 candidates per image",
    ):
        top_k_correct_from_topk(y, idx, sc, k=4)
    with pytest.raises(MetricError, match=r"one shape \(n_images, K\)"):
        top_k_correct_from_topk(y, idx, sc[:, :2], k=1)


@pytest.mark.parametrize(("bad", "shown"), [(np.nan, "NaN"), (-np.inf, "-inf"), (np.inf, "inf")])
def test_top_k_correct_from_topk_refuses_non_finite_scores_naming_the_row(
    bad: float, shown: str
) -> None:
    # Row 2 lists class 4 with a non-finite score above its true class 5 (0.3). Without the
    # check, bad * 0 makes the true score NaN, every comparison false, and the row counts as
    # correct at k = 1, even when class 4 scores +inf.
    from harness.metrics.flat import top_k_correct_from_topk

    idx = np.array([[0, 1], [2, 3], [4, 5]])
    sc = np.array([[0.9, 0.1], [0.8, 0.2], [bad, 0.3]])
    with pytest.raises(
        MetricError,
        match=rf"Expected `topk_scores` to contain only finite values, but row 2 holds {shown} "
        r"\(at position 0\)",
    ):
        top_k_correct_from_topk([0, 3, 5], idx, sc, k=1)
    sc[2] = [0.3, bad]  # the true class's own score is the bad one
    with pytest.raises(MetricError, match=rf"but row 2 holds {shown} \(at position 1\)"):
        top_k_correct_from_topk([0, 3, 5], idx, sc, k=2)


def test_top_k_correct_from_topk_refuses_non_integer_inputs() -> None:
    from harness.metrics.flat import top_k_correct_from_topk

    with pytest.raises(MetricError, match=r"Expected `topk_indices` to be an integer array"):
        top_k_correct_from_topk([0], np.array([[0.0, 1.0]]), np.array([[0.5, 0.4]]), k=1)
    with pytest.raises(MetricError, match=r"Expected `y_true` to be a 1D integer array"):
        top_k_correct_from_topk([0.0], np.array([[0, 1]]), np.array([[0.5, 0.4]]), k=1)
    with pytest.raises(MetricError, match=r"Expected `topk_scores` to be a real-valued array"):
        top_k_correct_from_topk([0], np.array([[0, 1]]), np.array([["a", "b"]]), k=1)
