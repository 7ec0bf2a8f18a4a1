"""What several pages share: the rankings of a setting, labels, badges and the jinja2 environment.

Transductive runs are ranked apart (:mod:`harness.site.model`): :func:`rankings` gives a setting's
inductive, transductive and combined rankings, which the index's leaders and the benchmark
tables both follow. The environment's filters escape and isolate every submitted string.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from harness.core.hashing import short_hash
from harness.records import RunRecord, ScoreEntry
from harness.site import glossary
from harness.site.model import (
    UNCOUNTED,
    Badge,
    Column,
    LeftOut,
    SettingTable,
    Submission,
    record_badges,
)
from harness.site.pages.columns import column_title
from harness.site.text import interval_text, isolate, isolate_text

#: The filter bar's checkboxes on every table it filters.
FILTER_FLAGS = ("leakage", "transductive", "extra-data")
#: Badge flags a table row carries for the filter bar (``data-flags``): a bar offers the last,
#: hiding runs on data not counted across benchmarks, only where some rows have it.
FLAGS = (*FILTER_FLAGS, UNCOUNTED)


def filter_flags(uncounted: bool) -> tuple[str, ...]:
    """The filter bar's checkboxes: with ``uncounted``, one for runs whose data do not count."""
    return FLAGS if uncounted else FILTER_FLAGS


#: What an interval resamples, by the scheme a record names (:class:`harness.records.Interval`).
_RESAMPLED = {
    "images_within_class": "the test images, resampled within each class",
    "classes": "the classes",
}


@dataclass(frozen=True)
class LeftOutNote:
    """What a cross-benchmark view leaves out by default: runs, benchmarks and why."""

    n_runs: int
    n_benchmarks: int
    reasons: list[tuple[str, int]]  # (why, runs): a benchmark version's, or more for one

    @property
    def summary(self) -> str:
        """``3 runs on 2 benchmarks``."""
        runs = f"{self.n_runs} run{'s' if self.n_runs != 1 else ''}"
        return f"{runs} on {self.n_benchmarks} benchmark{'s' if self.n_benchmarks != 1 else ''}"


def left_out_note(items: Iterable[LeftOut]) -> LeftOutNote | None:
    """The note on what a view leaves out by default (None: nothing)."""
    found = list(items)
    if not found:
        return None
    return LeftOutNote(
        n_runs=sum(len(item.keys) for item in found),
        n_benchmarks=len({(item.bench.id, item.bench.version) for item in found}),
        reasons=[(item.why, len(item.keys)) for item in found],
    )


def badge_texts(badges: Iterable[Badge]) -> str:
    """Badges as one CSV cell: their texts, ``; ``-separated."""
    return "; ".join(b.text for b in badges)


def interval_note(columns: Iterable[Column], *, groups: bool) -> str:
    """One line on what a ranked table's intervals resample (from the schemes its records
    name) and, with ``groups``, what its groups do: classes, a stricter question."""
    schemes = sorted({e.interval.scheme for c in columns for e in c.entries.values() if e.interval})
    shown = " or ".join(_RESAMPLED.get(s, s) for s in schemes)
    text = f"Intervals: 95% bootstrap over {shown}" if shown else "No intervals in these records"
    if groups:
        return (
            f"{text}; groups: a paired bootstrap over the classes (within seen and unseen), "
            "which asks whether a difference holds for other classes."
        )
    return (
        f"{text}. Whether two scores differ beyond chance is the benchmark pages' group "
        "(a paired bootstrap over classes), not overlapping intervals."
    )


def direction(column: Column) -> Markup:
    """The better direction of a column as an arrow with its meaning in a tooltip."""
    if column.higher_is_better:
        return Markup('<span class="dir" title="higher is better">↑</span>')
    return Markup('<span class="dir" title="lower is better">↓</span>')


@dataclass(frozen=True)
class Ranking:
    """One ranking of a setting's runs: which rows, in which order, their ranks and groups."""

    keys: list[str]
    ranks: dict[str, int]
    groups: list[list[str]]
    group_of: dict[str, int]
    anchor_suffix: str = ""  # rows repeated from another table get other ids


def rankings(plan: SettingTable) -> tuple[Ranking, Ranking, Ranking]:
    """The inductive, transductive and combined rankings of a setting's runs."""
    column = plan.primary
    return (
        Ranking(plan.order, column.ranks if column else {}, plan.groups, plan.group_of),
        Ranking(
            plan.transductive,
            column.transductive_ranks if column else {},
            plan.transductive_groups,
            plan.transductive_group_of,
        ),
        Ranking(
            plan.combined,
            column.combined_ranks if column else {},
            plan.combined_groups,
            plan.combined_group_of,
            anchor_suffix="-all",
        ),
    )


def plain_label(sub: Submission) -> str:
    """``name version`` for text-only places (page titles, options), each part isolated."""
    return f"{isolate_text(sub.name)} {isolate_text(sub.version)}"


def score_interval(entry: ScoreEntry, column: Column) -> str:
    """A score's interval as the column prints it ("" when the record has none)."""
    if entry.interval is None:
        return ""
    return interval_text(entry.interval.lo, entry.interval.hi, percent=column.percent)


def protocol_badges(records: Iterable[RunRecord]) -> list[Badge]:
    """How many runs declare each protocol deviation (transductive, extra data), as badges."""
    counts: dict[str, int] = {}
    for record in records:
        for badge in record_badges(record):
            if badge.flag in ("transductive", "extra-data"):
                counts[badge.text] = counts.get(badge.text, 0) + 1
    return [
        Badge(f"{n} {text}", "info", f"{n} submission(s) declare: {text}")
        for text, n in sorted(counts.items())
    ]


def metric_markup(column: Column, *, unit: bool = True) -> Markup:
    """A column's label as markup, the metric's name (from the spec) isolated."""
    version = f" v{column.version}" if column.versioned else ""
    percent = " (%)" if unit and column.percent else ""
    return Markup(f"{isolate(column.metric)}{escape(version)}{percent}")


@lru_cache(maxsize=4096)  # called per header cell, with a few distinct links
def glossary_link(root: str, anchor: str, term: str = "") -> Markup:
    """A header's link to its glossary entry (``root``: the page's way back to the site root).

    Its visible "?" is the stylesheet's (``a.gloss::after``), so a header's text, its sort key
    and its CSV name stay the column's name; ``aria-label`` names the link for screen readers."""
    label = f"definition of {term}" if term else "definition"
    return Markup(
        '<a class="gloss" href="{}glossary.html#{}" title="{}" aria-label="{}"></a>'
    ).format(root, anchor, label, label)


def _metric_anchor(column: Column) -> str:
    return glossary.metric_anchor(column.function)


@cache
def environment() -> Environment:
    """The jinja2 environment of every page: autoescaping, strict, with the isolating filters."""
    env = Environment(
        loader=PackageLoader("harness.site", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["short_hash"] = short_hash
    env.filters["bdi"] = isolate
    env.filters["fsi"] = isolate_text
    env.filters["metric"] = metric_markup
    env.filters["column_title"] = column_title
    env.filters["metric_anchor"] = _metric_anchor
    env.filters["direction"] = direction
    env.globals["gloss"] = glossary_link
    env.globals["term_anchor"] = glossary.term_anchor
    env.globals["metric_anchor"] = glossary.metric_anchor
    return env


def write_page(path: Path, text: str) -> None:
    """Write a page as UTF-8 with ``\\n`` line ends on every platform."""
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
