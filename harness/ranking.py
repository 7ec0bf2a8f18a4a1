"""Leaderboard ranks: the one ranking rule that the site and the CI's leaderboard diff share.

A rank is a *competition* rank ("1, 2, 2, 4"): ties share the smallest rank, and the next
distinct value skips as many ranks as were tied. Only finite values are ranked. Which runs are
ranked together (one metric version, transductive runs apart) is the caller's choice of pool;
this module only ranks a pool. Pure, and imports nothing of the harness, so both
:mod:`harness.site.model` and :mod:`harness.ci.diff` use it without a cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

__all__ = ["competition_ranks"]

KeyT = TypeVar("KeyT", bound="SupportsRichComparison")


def competition_ranks(values: Mapping[KeyT, float], *, higher_is_better: bool) -> dict[KeyT, int]:
    """Competition ranks of ``values``: 1 is best, ties share the smallest rank (1, 2, 2, 4).

    >>> competition_ranks({"a": 0.9, "b": 0.7, "c": 0.7, "d": 0.5, "e": float("nan")},
    ...                   higher_is_better=True)
    {'a': 1, 'b': 2, 'c': 2, 'd': 4}
    >>> competition_ranks({"a": 3.0, "b": 1.0}, higher_is_better=False)
    {'b': 1, 'a': 2}

    See docs/metrics/comparison.md, `competition_ranks`.
    """
    sign = -1.0 if higher_is_better else 1.0
    ordered = sorted((sign * value, key) for key, value in values.items() if math.isfinite(value))
    ranks: dict[KeyT, int] = {}
    rank, previous = 0, None
    for position, (value, key) in enumerate(ordered, start=1):
        if value != previous:
            rank, previous = position, value
        ranks[key] = rank
    return ranks
