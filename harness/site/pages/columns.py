"""What a score column holds beyond its value: its header tooltip and a DARTS reward's
operating point (the validation target met and the accuracy the same λ reached on test).

Shared by the benchmark, submission and comparison pages, which show the same note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.records import ScoreEntry
from harness.site.model import Column, registered_metric
from harness.site.text import isolate_text


@dataclass(frozen=True)
class Reached:
    """A DARTS reward's operating point: the target met on validation, the accuracy on test."""

    target: float
    test_accuracy: float
    val_accuracy: float | None
    confidence: float | None

    @property
    def below(self) -> bool:
        return self.test_accuracy < self.target

    @property
    def note(self) -> str:
        """``test acc 87.5% < 90% val target`` (below) or ``test acc 94.1%, val target 90%``."""
        test, target = _percent(self.test_accuracy), _percent(self.target)
        if self.below:
            return f"test acc {test} < {target} val target"
        return f"test acc {test}, val target {target}"

    @property
    def title(self) -> str:
        level = f"{_percent(self.confidence)} " if self.confidence is not None else ""
        val = (
            f"; validation accuracy {_percent(self.val_accuracy)}"
            if self.val_accuracy is not None
            else ""
        )
        verdict = (
            "below the target: the target holds on the validation classes only"
            if self.below
            else "at or above the target, which is not guaranteed on test"
        )
        return (
            f"λ was chosen on the validation classes so that their accuracy reaches "
            f"{_percent(self.target)} ({level}lower confidence bound{val}). The same λ reached "
            f"{_percent(self.test_accuracy)} accuracy on the test images: {verdict}."
        )


def is_operating_point(function: str) -> bool:
    """Whether ``function`` is a DARTS reward at a target accuracy, whose details hold the
    accuracy it reached on test (its registered figure)."""
    metric = registered_metric(function)
    return metric is not None and metric.figure == "darts_operating_point"


def darts_reached(entry: ScoreEntry) -> Reached | None:
    """The operating point of a ``darts_reward`` score (a metric registered with figure
    ``darts_operating_point``), from its details (None otherwise)."""
    if not is_operating_point(entry.function):
        return None
    details = entry.details
    target, test = _real(details.get("target")), _real(details.get("test_accuracy"))
    if target is None or test is None:
        return None
    return Reached(
        target, test, _real(details.get("val_accuracy")), _real(details.get("confidence"))
    )


def _real(value: Any) -> float | None:
    """``value`` as a finite float, or None (a detail may be missing or malformed)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%".replace(".0%", "%")


def column_title(column: Column) -> str:
    """A column header's tooltip: the metric function and version, its direction, what it
    averages over (from the metric registry), and for a DARTS reward what is guaranteed."""
    direction = "higher" if column.higher_is_better else "lower"
    parts = [f"{isolate_text(column.function)} v{isolate_text(column.version)}"]
    parts.append(f"{direction} is better")
    metric = registered_metric(column.function)
    if metric is not None:
        parts.append(metric.averaging)
    else:
        parts.append("averaging unit unknown: this harness does not register the metric")
    if is_operating_point(column.function):
        targets = sorted(
            {r.target for e in column.entries.values() if (r := darts_reached(e)) is not None}
        )
        named = " / ".join(_percent(t) for t in targets) or "the target"
        parts.append(
            f"λ chosen so that the validation classes reach {named} accuracy; not guaranteed "
            "on the test classes (the accuracy reached on test is shown under each score)"
        )
    return "; ".join(parts)
