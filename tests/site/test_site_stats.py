"""The site's statistics: one run alone, groups by the leader rule, ranks across benchmarks."""

from __future__ import annotations

import pytest

from harness.core.errors import MetricError
from harness.metrics.comparison import paired_class_tests, stack_class_values
from harness.site.stats import column_tests, ranks_across


def test_a_single_run_has_no_pairs() -> None:
    table = stack_class_values(
        [
            {
                "combine": "class_mean",
                "classes": [0, 1],
                "counts": [1, 1],
                "groups": [0, 0],
                "means": [1.0, 0.0],
            }
        ]
    )
    tests = paired_class_tests(table)
    assert tests.estimates.tolist() == [0.5] and tests.p_value.tolist() == [[1.0]]


def test_column_tests_groups_by_the_leader_rule() -> None:
    # a, b identical; c right on none of the 10 classes a gets right: p = 2/1001 against a
    right, wrong = [1.0] * 10, [0.0] * 10
    values = [
        {
            "combine": "class_mean",
            "classes": list(range(10)),
            "counts": [3] * 10,
            "groups": [0] * 10,
            "means": m,
        }
        for m in (wrong, right, right)
    ]
    tests = column_tests(["c", "a", "b"], values)
    assert tests.p_value[1, 0] == pytest.approx(2 / 1001)
    assert tests.groups(higher_is_better=True) == [["a", "b"], ["c"]]
    assert tests.groups(higher_is_better=False) == [["c"], ["a", "b"]]
    assert tests.position("b") == 2 and tests.position("zz") is None
    misaligned = [dict(values[0]), {**values[1], "classes": list(range(1, 11))}]
    with pytest.raises(MetricError, match="same classes"):
        column_tests(["c", "a"], misaligned)


def test_ranks_across_benchmarks_of_both_directions() -> None:
    ranks = ranks_across(
        {"x": {"a": 0.9, "b": 0.5}, "err": {"a": 0.3, "b": 0.1}},
        {"x": True, "err": False},
    )
    assert ranks is not None
    # a best on x, b best on the lower-is-better one: both mean rank 1.5
    assert ranks["submissions"] == ["a", "b"] and ranks["mean_rank"].tolist() == [1.5, 1.5]
    assert ranks["ranks"].tolist() == [[1.0, 2.0], [2.0, 1.0]]
    assert ranks_across({}, {}) is None
