"""What the literature reports, beside the harness's reproduction of it (docs/site.md).

A reported value (:mod:`harness.results.reported`: a paper's number for a submission, benchmark,
setting and metric) is shown next to each run of that submission on that benchmark that has the
metric: the paper and table it comes from, the run's score, and their difference. The difference
is given only where the run used the verified release of the dataset
(:func:`harness.results.standing.is_verified_release`); elsewhere the reported number stands
alone, with a note saying why. Reported values never enter a ranking, a group or a rank matrix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from harness.records import ScoreEntry
from harness.results.reported import ReportedValue
from harness.results.standing import is_verified_release
from harness.site.model import BenchmarkPage, Column, data_badges
from harness.site.text import Link, format_value, safe_href

__all__ = ["Beside", "reported_beside"]


@dataclass(frozen=True)
class Beside:
    """A reported value beside one run's score of the same metric."""

    value: ReportedValue
    key: str  # the run's submission key
    column: Column
    entry: ScoreEntry
    difference: float | None  # reproduced − reported, percentage points; None: not compared
    why_not: str  # why there is no difference ("" when there is one)

    @property
    def link(self) -> Link | None:
        """The paper's link (http(s) only, :func:`harness.site.text.safe_href`)."""
        url = self.value.url
        return Link("paper", safe_href(url)) if url else None

    @property
    def reported_text(self) -> str:
        return f"{self.value.percent:.1f}%"

    @property
    def reproduced_text(self) -> str:
        unit = "%" if self.column.percent else ""
        return format_value(self.entry.value, percent=self.column.percent) + unit

    @property
    def difference_text(self) -> str:
        """``+1.3 pp`` (reproduced minus reported), or ""."""
        if self.difference is None:
            return ""
        shown = round(self.difference, 1)
        sign = "+" if shown > 0 else "−" if shown < 0 else "±"
        return f"{sign}{abs(shown):.1f} pp"


def reported_beside(
    bench: BenchmarkPage, values: Iterable[ReportedValue], *, key: str | None = None
) -> list[Beside]:
    """Every reported value with a run on ``bench`` to stand beside (of ``key`` only, when
    given), in the order of the benchmark's settings and columns, then of the submissions."""
    wanted: dict[tuple[str, str, str], ReportedValue] = {
        (v.submission, v.setting, v.metric): v for v in values if v.benchmark == bench.id
    }
    if not wanted:
        return []
    out = []
    for plan in bench.settings:
        taken: set[tuple[str, str]] = set()  # (run, metric): a metric's newest version only
        for column in plan.columns:  # a metric's newest version comes first
            for run, entry in column.entries.items():
                if (key is not None and run != key) or (run, column.metric) in taken:
                    continue
                taken.add((run, column.metric))
                name = bench.records[run].submission.name
                value = wanted.get((name, plan.setting, column.metric))
                if value is not None:
                    out.append(_beside(bench, value, run, column, entry))
    return out


def _beside(
    bench: BenchmarkPage, value: ReportedValue, run: str, column: Column, entry: ScoreEntry
) -> Beside:
    info = bench.records[run].benchmark
    if not is_verified_release(info):
        data = ", ".join(b.text for b in data_badges(info))
        why = f"not compared: the run did not use the verified release ({data})"
        return Beside(value, run, column, entry, None, why)
    if not column.percent or not math.isfinite(entry.value):
        why = "not compared: the score is not a percentage"
        return Beside(value, run, column, entry, None, why)
    return Beside(value, run, column, entry, 100 * entry.value - value.percent, "")
