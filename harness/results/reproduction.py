"""Does a fresh run reproduce a committed record? The result compared, exactly or within a
tolerance for another platform's rounding.

See docs/results.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.records import RunKey, RunRecord, result_payload, run_key

__all__ = [
    "CURVE_FIELDS",
    "SCORE_TOLERANCE",
    "Leaf",
    "compare_reproduction",
    "leaf_differences",
    "result_differences",
]

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_@+-]*")

#: Where a score keeps its curve's points (under ``scores[i]``): the sampled curve in the
#: details (AUSUC's seen/unseen accuracies, DARTS's points) and each class's share of every point
#: (:class:`harness.records.ClassCurve`).
CURVE_FIELDS = (("details", "curve"), ("class_values", "curve"))

#: How far a score of a fresh run on another platform may be from the committed one:
#: ``|fresh - committed| <= SCORE_TOLERANCE * max(1, |committed|)`` (absolute for scores in
#: [0, 1], relative beyond, e.g. mistake severity or a DARTS lambda). Why 1e-5: another CPU (or
#: BLAS build) rounds the models' matrix products differently, so the predictions differ in their
#: last bits (float32: 6e-8 relative) and with them the prediction hashes and the values derived
#: from score *positions* rather than decisions: a DARTS lambda found by bisection moved by 4e-6
#: relative, a calibrated-stacking gamma by 4e-7 (ALE on the demo, torch's generic CPU kernels
#: against its AVX2 ones). A changed *decision* moves a score far more: one image of a class
#: with n images changes a per-class accuracy by 1 / (n x number of classes), 1e-4 or more on
#: any benchmark with under 10^4 test images per class and classes.
SCORE_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Leaf:
    """One place where two records' results differ: its path as text
    (``scores[0].class_values.means[3]``) and as parts, and the two JSON values (``_ABSENT``
    where a key is missing on one side)."""

    path: str
    parts: tuple[str | int, ...]
    committed: object
    fresh: object


_ABSENT = object()


def leaf_differences(committed: RunRecord, fresh: RunRecord) -> list[Leaf]:
    """Every differing leaf of the two results (:func:`~harness.records.result_payload`), in
    document order. Leaves compare as JSON text, so ``1`` differs from ``1.0`` and ``true``; a
    list of another length is one leaf; a key on one side only is one leaf."""
    found: list[Leaf] = []
    # Iterative: a record's details may nest as deep as JSON allowed, beyond Python's recursion.
    stack: list[tuple[str, tuple[str | int, ...], object, object]] = [
        ("", (), result_payload(committed), result_payload(fresh))
    ]
    while stack:
        path, parts, one, two = stack.pop()
        if isinstance(one, dict) and isinstance(two, dict):
            for key in sorted(one.keys() | two.keys(), reverse=True):
                sub = f"{path}.{key}" if path else key
                if not _PLAIN_KEY.fullmatch(key):
                    sub = f"{path}[{json.dumps(key, ensure_ascii=False)}]"
                if key not in one or key not in two:
                    found.append(
                        Leaf(sub, (*parts, key), one.get(key, _ABSENT), two.get(key, _ABSENT))
                    )
                else:
                    stack.append((sub, (*parts, key), one[key], two[key]))
        elif isinstance(one, list) and isinstance(two, list) and len(one) == len(two):
            pairs = list(enumerate(zip(one, two, strict=True)))
            stack.extend((f"{path}[{i}]", (*parts, i), x, y) for i, (x, y) in reversed(pairs))
        elif json.dumps(one, sort_keys=True) != json.dumps(two, sort_keys=True):
            found.append(Leaf(path or "(record)", parts, one, two))
    return found


@dataclass(frozen=True)
class FieldDifference:
    """A field of a fresh run's result that differs from the committed record's.

    ``setting`` and ``metric`` name the score the field belongs to (None outside ``scores``);
    ``committed`` and ``fresh`` are the JSON values (None where the field is missing on that
    side); ``within_tolerance`` says whether the difference is one a run on another platform may
    make (:func:`result_differences`)."""

    field: str
    committed: object
    fresh: object
    setting: str | None = None
    metric: str | None = None
    within_tolerance: bool = False

    def describe(self, run: str, tolerance: float = SCORE_TOLERANCE) -> str:
        """``run: setting metric: field: committed X, new Y (|Δ| D > tolerance T)``, one line."""
        score = f"{self.setting} {self.metric}: " if self.setting is not None else ""
        text = (
            f"{run}: {score}{self.field}: committed {_json_text(self.committed)}, "
            f"new {_json_text(self.fresh)}"
        )
        delta = _float_delta(self.committed, self.fresh)
        if delta is not None and self.setting is not None:
            bound = _bound(self.committed, tolerance)
            relation = "<=" if self.within_tolerance else ">"
            text += f" (|Δ| {delta:.3g} {relation} tolerance {bound:.3g})"
        return text


def _value_within(committed: RunRecord, fresh: RunRecord, index: int, tolerance: float) -> bool:
    """Whether the ``index``-th scores of both records are the same metric with values within
    tolerance."""
    if index >= len(committed.scores) or index >= len(fresh.scores):
        return False
    one, two = committed.scores[index], fresh.scores[index]
    if (one.setting, one.metric, one.version) != (two.setting, two.metric, two.version):
        return False
    return abs(one.value - two.value) <= _bound(one.value, tolerance)


def _bound(committed: object, tolerance: float) -> float:
    """The largest difference allowed from the number ``committed``: absolute below 1,
    relative above."""
    assert isinstance(committed, int | float)
    return tolerance * max(1.0, abs(float(committed)))


def _json_text(value: object) -> str:
    if value is None:
        return "(missing)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _float_delta(one: object, two: object) -> float | None:
    """``|one - two|`` when both are JSON numbers and one is a float (not a bool, not two ints:
    counts and parameters such as ``k`` compare exactly); else None."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (one, two))
    if not numbers or not (isinstance(one, float) or isinstance(two, float)):
        return None
    return abs(float(one) - float(two))  # type: ignore[arg-type]


def result_differences(
    committed: RunRecord, fresh: RunRecord, *, tolerance: float = SCORE_TOLERANCE
) -> list[FieldDifference]:
    """Every field where ``fresh`` gives another result than ``committed``, each marked within
    tolerance or not, in document order; empty when the results are identical.

    What a run on another platform may change (``within_tolerance``): the prediction hashes and
    the fitted states' hashes (a float kernel of another CPU moves a weight by an ulp);
    a floating-point number anywhere under ``scores`` (value, interval, details, class values)
    by at most ``tolerance * max(1, |committed|)`` (:data:`SCORE_TOLERANCE`); and anything in a
    score's curve points (:data:`CURVE_FIELDS`) while its value stays within tolerance. A curve
    is a step function sampled at its breakpoints: two margins that tie on one CPU and split on
    another add a breakpoint, which shifts every sampled point after it (and the per-class hits
    at those points) while the area moves by rounding only (measured: AUSUC 1e-16, 1978 against
    1977 points). Every other field, and integers, texts and lengths elsewhere under ``scores``,
    must be identical: the benchmark and its hash, the package and its hash, metric names and
    versions, the harness version.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    found = []
    for leaf in leaf_differences(committed, fresh):
        one = None if leaf.committed is _ABSENT else leaf.committed
        two = None if leaf.fresh is _ABSENT else leaf.fresh
        setting = metric = None
        within = False
        if leaf.parts[:1] in (("predictions_hashes",), ("model_state",)):
            within = leaf.committed is not _ABSENT and leaf.fresh is not _ABSENT
        elif leaf.parts[:1] == ("scores",) and len(leaf.parts) > 1:
            index = leaf.parts[1]
            if isinstance(index, int) and index < len(committed.scores):
                setting = committed.scores[index].setting
                metric = committed.scores[index].metric
            delta = _float_delta(one, two)
            within = delta is not None and delta <= _bound(one, tolerance)
            if leaf.parts[2:4] in CURVE_FIELDS and isinstance(index, int):
                within = within or _value_within(committed, fresh, index, tolerance)
        found.append(FieldDifference(leaf.path, one, two, setting, metric, within))
    return found


@dataclass
class Reproduction:
    """Fresh runs compared with committed records (:func:`compare_reproduction`).

    ``identical``: same result to the bit; ``within``: runs whose differences are all within
    tolerance, with them; ``beyond``: runs with a difference beyond it, with every difference;
    ``not_rerun``: committed runs with no fresh run; ``not_committed``: fresh runs with no
    committed record."""

    tolerance: float
    identical: list[RunKey] = field(default_factory=list)
    within: dict[RunKey, list[FieldDifference]] = field(default_factory=dict)
    beyond: dict[RunKey, list[FieldDifference]] = field(default_factory=dict)
    not_rerun: list[RunKey] = field(default_factory=list)
    not_committed: list[RunKey] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every compared run reproduced its committed result within tolerance."""
        return not self.beyond


def compare_reproduction(
    committed: Iterable[RunRecord],
    fresh: Iterable[RunRecord],
    *,
    tolerance: float = SCORE_TOLERANCE,
) -> Reproduction:
    """Compare every fresh run with the committed record of the same run (:func:`run_key`)
    through :func:`result_differences`."""
    old = {run_key(record): record for record in committed}
    new = {run_key(record): record for record in fresh}
    report = Reproduction(tolerance)
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            report.not_rerun.append(key)
        elif key not in old:
            report.not_committed.append(key)
        else:
            found = result_differences(old[key], new[key], tolerance=tolerance)
            if not found:
                report.identical.append(key)
            elif all(d.within_tolerance for d in found):
                report.within[key] = found
            else:
                report.beyond[key] = found
    return report
