"""The top-k curve that per_class_top_k_accuracy v2 keeps in its details (issue 14, item 4).

Each point must be the metric at that k computed on its own, and, independently, the mean over
classes of a brute-force per-image count (loops, no vectorised helper of the harness); top-K
lists must give the dense curve wherever they decide it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import MetricInput, metrics
from harness.metrics.flat import rivals_at_least, rivals_at_least_from_topk
from tests.metrics.test_common import make_input, params, to_topk

TOP_K = metrics.get("per_class_top_k_accuracy")


def _brute_force_curve(data: MetricInput, ks: list[int]) -> list[float]:
    """Per-class top-k accuracy by loops: an image is a hit at k when fewer than k other
    candidates score at least its true class's score."""
    assert data.scores is not None
    scores, y = np.asarray(data.scores), np.asarray(data.y_true)
    out = []
    for k in ks:
        per_class: dict[int, list[bool]] = {}
        for i in range(len(y)):
            rivals = sum(
                1 for j in range(scores.shape[1]) if j != y[i] and scores[i, j] >= scores[i, y[i]]
            )
            per_class.setdefault(int(y[i]), []).append(rivals < k)
        out.append(float(np.mean([np.mean(hits) for hits in per_class.values()])))
    return out


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    setting=st.sampled_from(["zsl", "gzsl"]),
    k=st.sampled_from([1, 2, 3, 5]),
)
def test_every_point_is_the_metric_at_its_k_and_the_brute_force_count(
    seed: int, setting: str, k: int
) -> None:
    data = make_input(setting, seed=seed, n_images=40)
    result = TOP_K(data, params(TOP_K, k=k))
    curve = result.details["curve"]
    ks = curve["k"]
    assert k in ks and ks == sorted(set(ks))
    assert all(c < data.n_candidates or c == k for c in ks)
    for c, value in zip(ks, curve["value"], strict=True):
        assert value == pytest.approx(TOP_K(data, params(TOP_K, k=c)).value, abs=1e-12)
    assert curve["value"] == pytest.approx(_brute_force_curve(data, ks), abs=1e-12)
    assert curve["value"][ks.index(k)] == pytest.approx(result.value, abs=1e-12)
    assert all(a <= b + 1e-12 for a, b in zip(curve["value"], curve["value"][1:], strict=False))


def test_the_curve_uses_the_default_ks_the_candidates_allow() -> None:
    small = make_input("zsl", seed=3, n_images=30)  # 8 candidates: k = 1, 2, 5
    assert small.n_candidates == 8
    assert TOP_K(small, params(TOP_K, k=1)).details["curve"]["k"] == [1, 2, 5]
    assert TOP_K(small, params(TOP_K, k=3)).details["curve"]["k"] == [1, 2, 3, 5]
    rng = np.random.default_rng(0)
    for n_candidates, expected in ((20, [1, 2, 5, 10]), (21, [1, 2, 5, 10, 20])):
        y = np.arange(40) % n_candidates
        wide = MetricInput(
            setting="zsl",
            y_true=y,
            scores=rng.normal(size=(40, n_candidates)),
            candidates=np.arange(n_candidates),
            seen=np.zeros(n_candidates, dtype=bool),
        )
        assert TOP_K(wide, params(TOP_K, k=1)).details["curve"]["k"] == expected


@pytest.mark.parametrize("setting", ["zsl", "gzsl"])
def test_top_k_lists_give_the_dense_curve_up_to_their_k(setting: str) -> None:
    dense = make_input(setting, seed=11, n_images=50)
    lists = to_topk(dense, k=3)
    from_lists = TOP_K(lists, params(TOP_K, k=1)).details["curve"]
    assert from_lists["k"] == [1, 2]  # K = 3 lists decide k <= 3; 3 is not a default k
    from_dense = TOP_K(dense, params(TOP_K, k=1)).details["curve"]
    assert from_lists["value"] == pytest.approx(from_dense["value"][:2], abs=1e-12)


def test_rivals_count_ties_against_and_an_unlisted_class_as_k() -> None:
    assert rivals_at_least([0, 1], [[0.5, 0.5, 0.1], [0.2, 0.9, 0.3]]).tolist() == [1, 0]
    indices = [[3, 7], [2, 4], [1, 5]]
    scores = [[0.9, 0.5], [0.8, 0.8], [0.7, 0.6]]
    assert rivals_at_least_from_topk([7, 4, 0], indices, scores).tolist() == [1, 1, 2]
