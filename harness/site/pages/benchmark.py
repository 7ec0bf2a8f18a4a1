"""benchmarks/<id>-v<version>.html: a benchmark version's score tables, groups and charts.

A setting has up to three tables: the inductive runs, the transductive runs with their own ranks,
and, shown only on request (the ``#combined-<setting>`` anchor without the script, a checkbox
with it), every run in one ranking. Each table is also written as CSV beside the page. The
column chooser groups score columns by their metric's registered group.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment

from harness.records import ScoreEntry
from harness.site import figures, stats
from harness.site.csv_tables import CsvCell, CsvTable, header_for
from harness.site.model import (
    Badge,
    BenchmarkPage,
    Column,
    SettingTable,
    SiteModel,
    record_badges,
    registered_metric,
)
from harness.site.pages.columns import darts_reached, is_operating_point
from harness.site.pages.leakage import benchmark_leakage, leakage_note
from harness.site.pages.page import Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.shared import FLAGS, Ranking, protocol_badges, rankings, score_interval
from harness.site.slugs import slug
from harness.site.text import format_value, isolate_text


@dataclass(frozen=True)
class Cell:
    text: str
    interval: str
    sort: str
    title: str
    primary: bool
    note: str = ""  # a second line under the score (DARTS reward: the test accuracy reached)
    note_title: str = ""
    note_warn: bool = False  # the note reports something below what the score's name promises


@dataclass(frozen=True)
class Row:
    anchor: str
    name: str
    version: str
    kind: str
    filename: str
    search: str
    flags: str
    badges: list[Badge]
    rank: str
    rank_sort: str
    group: str
    group_sort: str
    group_title: str
    group_class: str
    cells: list[Cell]
    predictions: str | None


#: A column's group is its metric's registered ``group``
#: (:data:`harness.metrics.base.METRIC_GROUPS`), "other" for a function the registry lacks.
COLUMN_GROUPS = {
    "flat": "flat",
    "hierarchical": "hierarchical",
    "darts": "DARTS",
    "gzsl": "GZSL",
    "other": "other",
}
#: Groups the column chooser hides first, while a table shows more score columns than
#: :data:`MAX_DEFAULT_COLUMNS` (never the primary metric's group, never DARTS).
_HIDE_FIRST = ("hierarchical", "other", "gzsl", "flat")
#: Score columns shown by default: with the rank, group and name columns, this many fit a
#: 1,280 px window without scrolling (the widest, a DARTS reward with its note, ~210 px).
MAX_DEFAULT_COLUMNS = 6


def column_group(function: str) -> str:
    """The chooser group of a metric function: its registered ``group`` ("other" for one this
    harness doesn't know).

    >>> column_group("darts_area"), column_group("hierarchical_cost"), column_group("x")
    ('darts', 'hierarchical', 'other')
    """
    metric = registered_metric(function)
    return metric.group if metric is not None else "other"


@dataclass(frozen=True)
class ColumnGroup:
    """A run of adjacent columns of one group (the header above them), or a chooser entry."""

    id: str
    label: str
    span: int  # adjacent columns (header) or all of the group's columns (chooser)
    shown: bool  # shown by default (with the script; without it every column shows)


def column_groups(columns: list[Column]) -> tuple[list[ColumnGroup], list[ColumnGroup]]:
    """The group header cells over ``columns`` and the chooser's entries, each with whether
    the group is shown by default: all are, until more than :data:`MAX_DEFAULT_COLUMNS` score
    columns would show; then groups are hidden in the order of ``_HIDE_FIRST``, except the
    primary metric's and DARTS."""
    ids = [column_group(c.function) for c in columns]
    counts = {g: ids.count(g) for g in COLUMN_GROUPS if g in ids}
    keep = {column_group(c.function) for c in columns if c.primary} | {"darts"}
    hidden: set[str] = set()
    for group in _HIDE_FIRST:
        if sum(n for g, n in counts.items() if g not in hidden) <= MAX_DEFAULT_COLUMNS:
            break
        if group in counts and group not in keep:
            hidden.add(group)
    header: list[ColumnGroup] = []
    for group in ids:
        if header and header[-1].id == group:
            last = header[-1]
            header[-1] = ColumnGroup(last.id, last.label, last.span + 1, last.shown)
        else:
            header.append(ColumnGroup(group, COLUMN_GROUPS[group], 1, group not in hidden))
    chooser = [ColumnGroup(g, COLUMN_GROUPS[g], n, g not in hidden) for g, n in counts.items()]
    return header, chooser


@dataclass(frozen=True)
class SettingView:
    plan: SettingTable
    rows: list[Row]  # the inductive runs, ranked among themselves
    transductive_rows: list[Row]  # the transductive runs, ranked among themselves
    combined_rows: list[Row]  # every run in one ranking (empty: nothing to combine)
    figures: list[figures.Figure]
    groups_note: str
    column_groups: list[str]  # each column's group id, in column order
    header_groups: list[ColumnGroup]  # the header row over the score columns
    chooser: list[ColumnGroup]  # one entry per group (no chooser with a single group)
    csv_files: dict[str, str]  # table id -> its CSV file name (beside the page)

    @property
    def table_ids(self) -> str:
        """The ids of the setting's tables, for the filter bar (space-separated)."""
        setting = self.plan.setting
        ids = [f"table-{setting}"]
        if self.transductive_rows:
            ids.append(f"table-{setting}-transductive")
        if self.combined_rows:
            ids.append(f"table-{setting}-combined")
        return " ".join(ids)


def benchmark_page(
    template: Any, bench: BenchmarkPage, common: dict[str, Any]
) -> tuple[str, list[CsvTable]]:
    """The page and the CSV file of each of its score tables."""
    views = []
    tables: list[CsvTable] = []
    for plan in bench.settings:
        inductive, transductive, combined = rankings(plan)
        combined_rows = _rows(bench, plan, combined) if plan.transductive else []
        csv_files: dict[str, str] = {}
        for ranking, suffix, shown in (
            (inductive, "", bool(plan.order) or not plan.transductive),  # as the page shows
            (transductive, "-transductive", bool(plan.transductive)),
            (combined, "-combined", bool(combined_rows)),
        ):
            if not shown:
                continue
            table = _score_csv(
                f"{bench.stem}-{slug(plan.setting)}{suffix}.csv", bench, plan, ranking
            )
            csv_files[f"table-{plan.setting}{suffix}"] = table.filename
            tables.append(table)
        header, chooser = column_groups(plan.columns)
        views.append(
            SettingView(
                plan=plan,
                rows=_rows(bench, plan, inductive),
                transductive_rows=_rows(bench, plan, transductive),
                combined_rows=combined_rows,
                figures=figures.setting_figures(bench, plan, lambda path: path),
                groups_note=_groups_note(plan),
                column_groups=[column_group(c.function) for c in plan.columns],
                header_groups=header,
                chooser=chooser if len(chooser) > 1 else [],
                csv_files=csv_files,
            )
        )
    html = template.render(
        bench=bench,
        info=bench.latest.benchmark,
        leakage=benchmark_leakage(bench),
        leakage_note=leakage_note(bench),
        protocol=protocol_badges(bench.records.values()),
        settings=views,
        structure_facts=figures.structure_facts(bench),
        structure_figures=figures.benchmark_figures(bench),
        has_darts_reward=any(
            is_operating_point(c.function) for plan in bench.settings for c in plan.columns
        ),
        n_boot=stats.N_BOOT,
        alpha=stats.ALPHA,
        root="../",
        page_title=f"{isolate_text(bench.title)} v{bench.version}",
        **common,
    )
    return html, tables


def benchmark_pages(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> Iterator[SiteFile]:
    """Every benchmark version's page, with the CSV files of its tables beside it."""
    template = env.get_template("benchmark.html")
    for bench in model.benchmarks:
        html, tables = benchmark_page(template, bench, common)
        yield PageFile(f"benchmarks/{bench.filename}", html)
        for table in tables:
            yield TableFile("benchmarks", table)


def _score_csv(
    filename: str, bench: BenchmarkPage, plan: SettingTable, ranking: Ranking
) -> CsvTable:
    """A score table as data: rank, group, submission, then each column's value and interval."""
    names = [f"{c.metric} v{c.version}" if c.versioned else c.metric for c in plan.columns]
    rows: list[tuple[CsvCell, ...]] = []
    for key in ranking.keys:
        sub = bench.records[key].submission
        cells: list[CsvCell] = [
            ranking.ranks.get(key),
            ranking.group_of.get(key),
            sub.name,
            sub.version,
            key in bench.transductive,
        ]
        for column in plan.columns:
            entry = column.entries.get(key)
            interval = entry.interval if entry is not None else None
            cells += [
                entry.value if entry is not None else None,
                interval.lo if interval else None,
                interval.hi if interval else None,
            ]
        rows.append(tuple(cells))
    header = ("rank", "group", "submission", "version", "transductive", *header_for(names))
    return CsvTable(filename, header, rows)


def _groups_note(plan: SettingTable) -> str:
    if plan.primary is None:
        return ""
    if plan.primary.tests is None:
        return (
            f"No groups of tied submissions: {plan.primary.no_tests} "
            f"for {plan.primary.label}. Re-score the runs (zsl results rescore) to add them."
        )
    grouped = plan.group_of.keys() | plan.transductive_group_of.keys()
    missing = [k for k in plan.shown if k in plan.primary.entries and k not in grouped]
    if missing:
        return (
            f"{len(missing)} run(s) have no per-class values for {plan.primary.label} and stay "
            "out of the groups (re-score them with zsl results rescore)."
        )
    return ""


def _rows(bench: BenchmarkPage, plan: SettingTable, ranking: Ranking) -> list[Row]:
    rows = []
    seen_groups: set[int] = set()
    for key in ranking.keys:
        record = bench.records[key]
        sub = record.submission
        badges = record_badges(record)
        rank = ranking.ranks.get(key)
        group = ranking.group_of.get(key)
        group_title = ""
        if group is not None:
            members, n = ranking.groups[group - 1], len(ranking.groups)
            group_title = (
                f"group {group} of {n}, led by {plan.isolated[members[0]]}"
                if len(members) > 1
                else f"group {group} of {n}: separable from every other group leader"
            )
        cells = [_cell(column.entries.get(key), column) for column in plan.columns]
        # A group's first row gets a rule above it (in rank order: groups are contiguous there).
        starts = group is not None and group > 1 and group not in seen_groups
        if group is not None:
            seen_groups.add(group)
        rows.append(
            Row(
                anchor=plan.anchors[key] + ranking.anchor_suffix,
                name=sub.name,
                version=sub.version,
                kind=sub.kind,
                filename=f"{key}.html",
                search=plan.labels[key].lower(),
                flags=" ".join(b.flag for b in badges if b.flag in FLAGS),
                badges=badges,
                rank=str(rank) if rank is not None else "—",
                rank_sort=str(rank) if rank is not None else "",
                group=str(group) if group is not None else "—",
                group_sort=str(group) if group is not None else "",
                group_title=group_title,
                group_class=_group_class(group, starts),
                cells=cells,
                predictions=record.predictions_hashes.get(plan.setting),
            )
        )
    return rows


def _group_class(group: int | None, starts: bool) -> str:
    if group is None:
        return ""
    return f"group-{'odd' if group % 2 else 'even'}" + (" group-start" if starts else "")


def _cell(entry: ScoreEntry | None, column: Column) -> Cell:
    if entry is None:
        return Cell("—", "", "", "not scored with this metric version", column.primary)
    title = ""
    if entry.interval is not None:
        title = (
            f"{100 * entry.interval.level:g}% bootstrap interval"
            f" ({entry.interval.scheme}, {entry.interval.n_boot} samples)"
        )
    finite = math.isfinite(entry.value)
    reached = darts_reached(entry)
    return Cell(
        text=format_value(entry.value, percent=column.percent),
        interval=score_interval(entry, column),
        sort=repr(float(entry.value)) if finite else "",
        title=title,
        primary=column.primary,
        note=reached.note if reached else "",
        note_title=reached.title if reached else "",
        note_warn=reached.below if reached else False,
    )


pages.add("benchmark", Page(order=40, render=benchmark_pages, folders=("benchmarks",)))
