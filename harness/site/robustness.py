"""Robustness across validation splits (GBU Fig. 3) and the rank matrix over them (GBU Fig. 4).

Xian et al. (TPAMI 2019) run each method on the three validation splits of the proposed split of
every dataset (Fig. 3: how much the result depends on which classes validated the
hyperparameters), then count how often each method ranks j-th over all datasets × validation
splits (Fig. 4). Here a *benchmark family* is what the records say it is
(:attr:`harness.records.BenchmarkInfo.family`: the id of its main member, and ``family_member``,
each member's short label such as ``val2``), never guessed from ids. Only families with at least
two member benchmarks in the records are shown; without one the site has no robustness page.

See docs/site.md.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.records import ScoreEntry
from harness.site import stats
from harness.site.cross import placement
from harness.site.csv_tables import RANK_HEADER, CsvCell, CsvTable
from harness.site.model import (
    SETTING_LABELS,
    UNCOUNTED_SUFFIX,
    BenchmarkPage,
    Column,
    SiteModel,
    Submission,
    data_badges,
    setting_key,
    version_key,
)
from harness.site.slugs import slug
from harness.site.text import format_value, interval_text, isolate_text

__all__ = [
    "PAGE",
    "Family",
    "FamilyMember",
    "RankCounts",
    "RobustnessTable",
    "families",
    "rank_counts",
    "robustness_tables",
    "spread",
]

#: The page's file name (at the site's root).
PAGE = "robustness.html"
#: Shades of a rank-count cell: ``heat-1`` (lightest, a small count) to ``heat-SHADES`` (the
#: largest count of the matrix); a zero count has none (style.css's ColorBrewer Blues).
SHADES = 6


@dataclass(frozen=True)
class FamilyMember:
    """One benchmark (its newest version in the records) of a family."""

    bench: BenchmarkPage
    label: str  # the record's family_member ("val2"), else the benchmark id
    main: bool  # the family's main member (its id is the family's)


@dataclass(frozen=True)
class Family:
    id: str  # the main member's benchmark id
    members: tuple[FamilyMember, ...]  # by label (val1, val2, val3)

    @property
    def anchor(self) -> str:
        return f"family-{slug(self.id)}"

    @property
    def main(self) -> FamilyMember | None:
        return next((m for m in self.members if m.main), None)


def families(model: SiteModel) -> list[Family]:
    """The model's families with two members or more, in the across page's dataset order.

    A member is a benchmark id whose newest record names the family; of several versions of one
    member the newest is taken."""
    found: dict[str, dict[str, BenchmarkPage]] = defaultdict(dict)
    for bench in model.benchmarks:
        info = bench.latest.benchmark
        if info.family is None:
            continue
        label = info.family_member or bench.id
        held = found[info.family].get(label)
        if held is None or (held.version, held.id) < (bench.version, bench.id):
            found[info.family][label] = bench
    out = []
    for family_id, by_label in found.items():
        if len(by_label) < 2:
            continue
        members = tuple(
            FamilyMember(by_label[label], label, by_label[label].id == family_id)
            for label in sorted(by_label, key=version_key)
        )
        out.append(Family(family_id, members))
    return sorted(out, key=lambda f: (placement(f.id).order, f.id))


def spread(values: Sequence[float]) -> float | None:
    """The spread of a submission's member scores: max − min (None below two scores).

    >>> round(spread([0.5, 0.56, 0.53]), 6), spread([0.5])
    (0.06, None)
    """
    return max(values) - min(values) if len(values) >= 2 else None


# -- the robustness tables ---------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyGroup:
    """A family's column group in one setting's table: the members that have its metric."""

    family: Family
    members: tuple[FamilyMember, ...]
    columns: tuple[Column, ...]  # each member's primary column of the setting
    reference: Column  # the main member's (else the first member's): metric, unit, direction
    # each member's scores the table shows (BenchmarkPage.shown_entries of its column)
    entries: tuple[dict[str, ScoreEntry], ...] = ()

    @property
    def percent(self) -> bool:
        return self.reference.percent

    @property
    def main(self) -> int | None:
        """The position of the main member among ``members``."""
        return next((i for i, m in enumerate(self.members) if m.main), None)


@dataclass(frozen=True)
class MemberCell:
    text: str  # formatted score, or "—"
    title: str
    sort: str
    value: float | None
    uncounted: bool = False  # a run left out by default, shown because the reader opted in


@dataclass(frozen=True)
class FamilyCells:
    """One submission's cells in one family group."""

    members: tuple[MemberCell, ...]
    n_scored: int
    n_members: int
    mean: float | None  # over the scored members
    spread: float | None  # max − min over them (two at least)
    main: ScoreEntry | None  # the main member's score
    percent: bool

    @property
    def coverage(self) -> str:
        return f"{self.n_scored}/{self.n_members}"

    @property
    def mean_text(self) -> str:
        return format_value(self.mean, percent=self.percent)

    @property
    def spread_text(self) -> str:
        return format_value(self.spread, percent=self.percent)

    @property
    def main_text(self) -> str:
        return format_value(self.main.value if self.main else None, percent=self.percent)

    @property
    def main_interval(self) -> str:
        if self.main is None or self.main.interval is None:
            return ""
        return interval_text(self.main.interval.lo, self.main.interval.hi, percent=self.percent)


@dataclass(frozen=True)
class RobustnessRow:
    sub: Submission
    transductive: bool
    cells: tuple[FamilyCells, ...]  # one per group of the table


@dataclass(frozen=True)
class RobustnessTable:
    """One setting's table; ``id`` is its element id and CSV file stem."""

    id: str
    setting: str
    groups: tuple[FamilyGroup, ...]
    rows: tuple[RobustnessRow, ...]
    csv: CsvTable

    @property
    def setting_label(self) -> str:
        return SETTING_LABELS.get(self.setting, self.setting.upper())


def robustness_tables(
    model: SiteModel, found: Sequence[Family] | None = None, *, uncounted: bool = False
) -> list[RobustnessTable]:
    """A table per setting that some family member scores, in site order, of the runs whose
    data count by default; with ``uncounted``, of every run (ids end in ``-with-uncounted``)."""
    found = families(model) if found is None else found
    settings = sorted(
        {p.setting for f in found for m in f.members for p in m.bench.settings}, key=setting_key
    )
    tables = []
    for setting in settings:
        groups = tuple(g for f in found if (g := _group(f, setting, uncounted)) is not None)
        keys = {k for g in groups for e in g.entries for k in e}
        if not keys:
            continue
        order = _order(model, groups, keys)
        rows = tuple(
            RobustnessRow(
                sub=model.submissions[key],
                transductive=model.submissions[key].transductive,
                cells=tuple(_cells(g, key) for g in groups),
            )
            for key in order
        )
        table_id = f"robustness-{slug(setting)}" + (UNCOUNTED_SUFFIX if uncounted else "")
        tables.append(
            RobustnessTable(table_id, setting, groups, rows, _table_csv(table_id, groups, rows))
        )
    return tables


def _primary(bench: BenchmarkPage, setting: str) -> Column | None:
    plan = next((p for p in bench.settings if p.setting == setting), None)
    return plan.primary if plan is not None else None


def _group(family: Family, setting: str, uncounted: bool) -> FamilyGroup | None:
    primaries = [(m, _primary(m.bench, setting)) for m in family.members]
    present = [(m, c) for m, c in primaries if c is not None]
    if not present:
        return None
    reference = next((c for m, c in present if m.main), present[0][1])
    same = [
        (m, c)
        for m, c in present
        if (c.metric, c.function, c.version)
        == (reference.metric, reference.function, reference.version)
    ]
    entries = tuple(m.bench.shown_entries(c, uncounted=uncounted) for m, c in same)
    if not any(entries):  # every run left out by default: the family has no group
        return None
    return FamilyGroup(
        family=family,
        members=tuple(m for m, _ in same),
        columns=tuple(c for _, c in same),
        reference=reference,
        entries=entries,
    )


def _cells(group: FamilyGroup, key: str) -> FamilyCells:
    percent = group.percent
    members = []
    values = []
    main: ScoreEntry | None = None
    for member, column, shown in zip(group.members, group.columns, group.entries, strict=True):
        entry = shown.get(key)
        if entry is None or not math.isfinite(entry.value):
            members.append(
                MemberCell("—", f"not scored on {isolate_text(member.bench.label)}", "", None)
            )
            continue
        values.append(entry.value)
        if member.main:
            main = entry
        title = f"{isolate_text(member.bench.label)} {isolate_text(column.metric)}"
        if entry.interval is not None:
            bounds = interval_text(entry.interval.lo, entry.interval.hi, percent=percent)
            title += f"; {100 * entry.interval.level:g}% interval {bounds}"
        uncounted = key in member.bench.uncounted
        if uncounted:
            left_out = ", ".join(b.text for b in data_badges(member.bench.records[key].benchmark))
            title += f"; {left_out}: left out of this table by default"
        members.append(
            MemberCell(
                format_value(entry.value, percent=percent),
                title,
                repr(entry.value),
                entry.value,
                uncounted,
            )
        )
    return FamilyCells(
        members=tuple(members),
        n_scored=len(values),
        n_members=len(group.members),
        mean=sum(values) / len(values) if values else None,
        spread=spread(values),
        main=main,
        percent=percent,
    )


def _order(model: SiteModel, groups: Sequence[FamilyGroup], keys: set[str]) -> list[str]:
    """Inductive rows in the rank matrix's order, then transductive ones in theirs; a submission
    the matrix does not rank (no benchmark with a second score) after those of its kind."""
    benches = _members(groups)
    transductive = {k for k in keys if model.submissions[k].transductive}
    order: list[str] = []
    for pool in (sorted(keys - transductive), sorted(transductive)):
        ranks = _ranks(benches, set(pool))
        ranked = list(ranks["submissions"]) if ranks else []
        order += ranked + [k for k in pool if k not in ranked]
    return order


#: A member benchmark of a table: its page, its primary column, the scores the table shows.
Member = tuple[BenchmarkPage, Column, dict[str, ScoreEntry]]


def _members(groups: Sequence[FamilyGroup]) -> list[Member]:
    return [
        (m.bench, c, e)
        for g in groups
        for m, c, e in zip(g.members, g.columns, g.entries, strict=True)
    ]


def _ranks(benches: Sequence[Member], pool: set[str]) -> dict[str, Any] | None:
    """The site's rank matrix of ``pool`` over the benchmarks where two of them have a score."""
    values: dict[str, dict[str, float]] = {}
    directions: dict[str, bool] = {}
    for bench, column, entries in benches:
        row = {k: e.value for k, e in entries.items() if k in pool and math.isfinite(e.value)}
        if len(row) >= 2:
            values[bench.label] = row
            directions[bench.label] = column.higher_is_better
    ranks = stats.ranks_across(values, directions)
    if ranks is not None:
        ranks["benchmark_pages"] = [
            next(b for b, _, _ in benches if b.label == label) for label in ranks["benchmarks"]
        ]
    return ranks


def _table_csv(
    table_id: str, groups: Sequence[FamilyGroup], rows: Sequence[RobustnessRow]
) -> CsvTable:
    header: list[str] = ["submission", "version", "transductive"]
    for group in groups:
        for m in group.members:
            name = f"{group.family.id} {m.label}"
            header += [name, f"{name}_data", f"{name}_counted"]
        header += [
            f"{group.family.id} members_scored",
            f"{group.family.id} members",
            f"{group.family.id} mean",
            f"{group.family.id} spread",
            f"{group.family.id} main",
            f"{group.family.id} main_lo",
            f"{group.family.id} main_hi",
        ]
    lines = []
    for row in rows:
        cells: list[CsvCell] = [row.sub.name, row.sub.version, row.transductive]
        for group, family in zip(groups, row.cells, strict=True):
            for member, cell in zip(group.members, family.members, strict=True):
                record = member.bench.records.get(row.sub.key) if cell.value is not None else None
                cells += [
                    cell.value,
                    "; ".join(b.text for b in data_badges(record.benchmark)) if record else None,
                    (row.sub.key not in member.bench.uncounted) if record else None,
                ]
            interval = family.main.interval if family.main else None
            cells += [
                family.n_scored,
                family.n_members,
                family.mean,
                family.spread,
                family.main.value if family.main else None,
                interval.lo if interval else None,
                interval.hi if interval else None,
            ]
        lines.append(tuple(cells))
    return CsvTable(f"{table_id}.csv", tuple(header), lines)


# -- the rank matrix (GBU Fig. 4) ----------------------------------------------------------------


@dataclass(frozen=True)
class RankCountRow:
    sub: Submission
    n_covered: int  # benchmarks of the matrix with the submission's score
    mean_rank: float
    counts: tuple[float, ...]  # counts[j]: benchmarks where it ranks j + 1 (ties split)
    shades: tuple[int, ...]  # 0 (no count) or 1..SHADES, for the cell's heat-N class

    @property
    def count_texts(self) -> tuple[str, ...]:
        return tuple(f"{c:g}" for c in self.counts)


@dataclass(frozen=True)
class RankCounts:
    """How often each submission ranks j-th over the family member benchmarks of a setting."""

    id: str
    setting: str
    transductive: bool  # ranks transductive runs among themselves
    benchmarks: tuple[BenchmarkPage, ...]
    rows: tuple[RankCountRow, ...]
    csv: CsvTable

    @property
    def setting_label(self) -> str:
        return SETTING_LABELS.get(self.setting, self.setting.upper())

    @property
    def n_ranks(self) -> int:
        return len(self.rows)


def rank_counts(
    model: SiteModel, found: Sequence[Family] | None = None, *, uncounted: bool = False
) -> list[RankCounts]:
    """Per setting, the inductive runs' matrix, then the transductive runs' (where they exist),
    of the runs whose data count by default; with ``uncounted``, of every run."""
    found = families(model) if found is None else found
    settings = sorted(
        {p.setting for f in found for m in f.members for p in m.bench.settings}, key=setting_key
    )
    out = []
    for setting in settings:
        groups = [g for f in found if (g := _group(f, setting, uncounted)) is not None]
        benches = _members(groups)
        keys = {k for _, _, e in benches for k in e}
        transductive = {k for k in keys if model.submissions[k].transductive}
        for pool, apart in ((keys - transductive, False), (transductive, True)):
            ranks = _ranks(benches, pool)
            if ranks is not None:
                out.append(_rank_counts(model, setting, apart, ranks, uncounted))
    return out


def _rank_counts(
    model: SiteModel, setting: str, apart: bool, ranks: dict[str, Any], uncounted: bool
) -> RankCounts:
    counts = ranks["counts"]
    peak = max((float(c) for row in counts for c in row), default=0.0)
    rows = []
    for s, key in enumerate(ranks["submissions"]):
        row = tuple(float(c) for c in counts[s])
        rows.append(
            RankCountRow(
                sub=model.submissions[key],
                n_covered=int(ranks["n_benchmarks"][s]),
                mean_rank=float(ranks["mean_rank"][s]),
                counts=row,
                shades=tuple(_shade(c, peak) for c in row),
            )
        )
    table_id = f"rank-counts-{slug(setting)}" + ("-transductive" if apart else "")
    table_id += UNCOUNTED_SUFFIX if uncounted else ""
    benches: tuple[BenchmarkPage, ...] = tuple(ranks["benchmark_pages"])
    csv = CsvTable(
        f"{table_id}.csv",
        (*RANK_HEADER, *(f"rank_{j}" for j in range(1, len(rows) + 1))),
        [
            (r.sub.name, r.sub.version, apart, r.n_covered, len(benches), r.mean_rank, *r.counts)
            for r in rows
        ],
    )
    return RankCounts(table_id, setting, apart, benches, tuple(rows), csv)


def _shade(count: float, peak: float) -> int:
    """0 for no count, else 1..SHADES in proportion to the matrix's largest count.

    >>> [_shade(c, 4.0) for c in (0.0, 0.5, 2.0, 4.0)]
    [0, 1, 3, 6]
    """
    if count <= 0 or peak <= 0:
        return 0
    return max(1, math.ceil(SHADES * count / peak))
