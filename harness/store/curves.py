"""Split a score's curve into point rows for the store, and put it back together on load.

Metrics hand their curve over in ``details["curve"]`` in one of two shapes.

See docs/store.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["join_curve", "split_curve"]

CURVE_KEY = "curve"

#: ``(x key, y key)`` pairs read into a point's ``x`` and ``y``; the first pair every point has
#: wins. DARTS: accuracy against information gain (specificity). Calibrated stacking: unseen
#: against seen accuracy, the axes of Chao et al.'s seen-unseen curve. Top-k and hp@k: the
#: value at each k.
AXES: tuple[tuple[str, str], ...] = (
    ("accuracy", "info_gain"),
    ("unseen", "seen"),
    ("k", "value"),
)

Layout = Literal["points", "columns"]


@dataclass(frozen=True)
class SplitCurve:
    """A score's details taken apart: what stays in the details column and the curve's rows.

    ``layout`` is None when the details hold no curve the store splits; then ``details`` is the
    original dict and ``points`` is empty.
    """

    details: dict[str, Any]
    layout: Layout | None = None
    x_key: str | None = None
    y_key: str | None = None
    meta: dict[str, Any] | None = None
    points: list[Any] = field(default_factory=list)

    def xy(self, point: Any) -> tuple[float | None, float | None]:
        """The point's ``x`` and ``y`` as floats, None where the point has no such number."""
        if self.x_key is None or self.y_key is None or not isinstance(point, dict):
            return None, None
        return _number(point.get(self.x_key)), _number(point.get(self.y_key))


def split_curve(details: dict[str, Any]) -> SplitCurve:
    """Take ``details["curve"]`` out of ``details`` as a list of points.

    Examples
    --------
    >>> split = split_curve({"curve": {"seen": [0.9, 0.1], "unseen": [0.0, 0.8], "n_points": 2}})
    >>> split.layout, split.details, split.points[1], split.xy(split.points[1])
    ('columns', {}, {'seen': 0.1, 'unseen': 0.8}, (0.8, 0.1))
    >>> join_curve(split.details, split.layout, split.meta, split.points) == {
    ...     "curve": {"seen": [0.9, 0.1], "unseen": [0.0, 0.8], "n_points": 2}}
    True
    """
    if CURVE_KEY not in details:
        return SplitCurve(details=details)
    curve = details[CURVE_KEY]
    rest = {key: value for key, value in details.items() if key != CURVE_KEY}
    at = list(details).index(CURVE_KEY)
    if isinstance(curve, list | tuple):
        points = list(curve)
        return _with_axes(SplitCurve(rest, "points", meta={"at": at}, points=points))
    if isinstance(curve, dict):
        columns = [key for key, value in curve.items() if isinstance(value, list | tuple)]
        lengths = {len(curve[key]) for key in columns}
        if columns and len(lengths) == 1:
            n = lengths.pop()
            points = [{key: curve[key][i] for key in columns} for i in range(n)]
            meta = {
                "at": at,
                "order": list(curve),
                "extra": {key: value for key, value in curve.items() if key not in columns},
            }
            return _with_axes(SplitCurve(rest, "columns", meta=meta, points=points))
    return SplitCurve(details=details)  # a shape the store does not split: kept as it is


def join_curve(
    details: dict[str, Any], layout: str | None, meta: dict[str, Any] | None, points: list[Any]
) -> dict[str, Any]:
    """The details with their curve back in place: the inverse of :func:`split_curve`."""
    if layout is None:
        return dict(details)
    meta = meta or {}
    if layout == "points":
        curve: Any = list(points)
    elif layout == "columns":
        extra = dict(meta.get("extra", {}))
        order = list(meta.get("order", []))
        curve = {
            key: extra[key] if key in extra else [point[key] for point in points] for key in order
        }
    else:
        raise ValueError(f"unknown curve layout {layout!r}; expected 'points' or 'columns'")
    items = list(details.items())
    at = min(int(meta.get("at", len(items))), len(items))
    return dict([*items[:at], (CURVE_KEY, curve), *items[at:]])


def _with_axes(split: SplitCurve) -> SplitCurve:
    for x_key, y_key in AXES:
        if split.points and all(
            isinstance(point, dict) and x_key in point and y_key in point for point in split.points
        ):
            return SplitCurve(split.details, split.layout, x_key, y_key, split.meta, split.points)
    return split


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
