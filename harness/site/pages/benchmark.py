"""benchmarks/<id>-v<version>.html: a benchmark version's score tables, groups and charts.

A setting has up to three tables: the inductive runs, the transductive runs with their own ranks,
and, shown only on request (the ``#combined-<setting>`` anchor without the script, a checkbox
with it), every run in one ranking. Each table is also written as CSV beside the page. The
column chooser groups score columns by their metric's registered group.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jinja2 import Environment

from harness.features.backbones import open_clip_arch
from harness.records import BenchmarkInfo, RunRecord, ScoreEntry
from harness.results.reported import ReportedValue
from harness.site import figures, stats
from harness.site.csv_tables import CsvCell, CsvTable, header_for
from harness.site.model import (
    Badge,
    BenchmarkPage,
    Column,
    LeftOut,
    SettingTable,
    SiteModel,
    data_badges,
    record_badges,
    registered_metric,
)
from harness.site.pages.columns import darts_reached, is_operating_point
from harness.site.pages.leakage import benchmark_leakage, leakage_note
from harness.site.pages.page import Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.shared import (
    FLAGS,
    Ranking,
    badge_texts,
    filter_flags,
    interval_note,
    left_out_note,
    protocol_badges,
    rankings,
    score_interval,
)
from harness.site.reported import Beside, reported_beside
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
    shown: bool  # shown whole by default (with the script; without it every column shows)
    lead: str = ""  # the chooser entry's lead column, shown even when the group is unchecked
    leads: int = 0  # a header's columns that stay when its group is unchecked (0 or 1)


def group_leads(columns: list[Column]) -> list[bool]:
    """Whether each column leads its group, which an unchecked group still shows: the primary
    metric's column, else the group's first (the spec lists a benchmark's metrics in order,
    so its main hierarchical metric comes first)."""
    ids = [column_group(c.function) for c in columns]
    lead: dict[str, int] = {}
    for i, (group, column) in enumerate(zip(ids, columns, strict=True)):
        if group not in lead or (column.primary and not columns[lead[group]].primary):
            lead[group] = i
    return [lead[group] == i for i, group in enumerate(ids)]


def column_groups(columns: list[Column]) -> tuple[list[ColumnGroup], list[ColumnGroup]]:
    """The group header cells over ``columns`` and the chooser's entries, each with whether
    the group is shown whole by default: all are, until more than :data:`MAX_DEFAULT_COLUMNS`
    score columns would show; then groups are hidden in the order of ``_HIDE_FIRST``, except
    the primary metric's and DARTS, each down to its lead column (:func:`group_leads`)."""
    ids = [column_group(c.function) for c in columns]
    counts = {g: ids.count(g) for g in COLUMN_GROUPS if g in ids}
    keep = {column_group(c.function) for c in columns if c.primary} | {"darts"}
    hidden: set[str] = set()
    for group in _HIDE_FIRST:
        shown = sum(1 if g in hidden else n for g, n in counts.items())
        if shown <= MAX_DEFAULT_COLUMNS:
            break
        if group in counts and group not in keep:
            hidden.add(group)
    is_lead = group_leads(columns)
    header: list[ColumnGroup] = []
    for group, lead in zip(ids, is_lead, strict=True):
        if header and header[-1].id == group:
            last = header[-1]
            header[-1] = replace(last, span=last.span + 1, leads=last.leads + lead)
        else:
            shown = group not in hidden
            header.append(ColumnGroup(group, COLUMN_GROUPS[group], 1, shown, leads=int(lead)))
    leads = {
        g: columns[i].metric for i, (g, lead) in enumerate(zip(ids, is_lead, strict=True)) if lead
    }
    chooser = [
        ColumnGroup(g, COLUMN_GROUPS[g], n, g not in hidden, leads[g]) for g, n in counts.items()
    ]
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
    column_leads: list[bool]  # whether each column leads its group (shown when unchecked)
    header_groups: list[ColumnGroup]  # the header row over the score columns
    chooser: list[ColumnGroup]  # one entry per group (no chooser with a single group)
    csv_files: dict[str, str]  # table id -> its CSV file name (beside the page)
    interval_note: str  # what the intervals and the groups resample, in one line
    reported: list[Beside]  # what papers report beside the runs' scores
    flags: tuple[str, ...]  # the filter bar's checkboxes

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
    template: Any,
    bench: BenchmarkPage,
    common: dict[str, Any],
    reported: Sequence[ReportedValue] = (),
    left_out: Sequence[LeftOut] = (),
) -> tuple[str, list[CsvTable]]:
    """The page and the CSV file of each of its score tables (and of the reported values);
    ``left_out``: the model's :class:`LeftOut` items of this benchmark."""
    views = []
    tables: list[CsvTable] = []
    beside = reported_beside(bench, reported)
    # Runs whose data differ from the rest's carry their own data badges, and a filter.
    mixed = len({_data_kinds(r) for r in bench.records.values()}) > 1
    flags = filter_flags(mixed and bool(bench.uncounted))
    for plan in bench.settings:
        inductive, transductive, combined = rankings(plan)
        combined_rows = _rows(bench, plan, combined, mixed) if plan.transductive else []
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
        side = [b for b in beside if b.column.setting == plan.setting]
        if side:
            table = _reported_csv(f"{bench.stem}-{slug(plan.setting)}-reported.csv", bench, side)
            csv_files[f"reported-{plan.setting}"] = table.filename
            tables.append(table)
        header, chooser = column_groups(plan.columns)
        views.append(
            SettingView(
                plan=plan,
                rows=_rows(bench, plan, inductive, mixed),
                transductive_rows=_rows(bench, plan, transductive, mixed),
                combined_rows=combined_rows,
                figures=figures.setting_figures(bench, plan, lambda path: path),
                groups_note=_groups_note(plan),
                column_groups=[column_group(c.function) for c in plan.columns],
                column_leads=group_leads(plan.columns),
                header_groups=header,
                chooser=chooser if len(chooser) > 1 else [],
                csv_files=csv_files,
                interval_note=interval_note(plan.columns, groups=plan.primary is not None),
                reported=side,
                flags=flags,
            )
        )
    info = bench.latest.benchmark
    html = template.render(
        bench=bench,
        info=info,
        data_badges=bench.data_badges,
        counted=not bench.uncounted,
        left_out=left_out_note(left_out),
        synthetic=any(b.kind == "data-synthetic" for b in bench.data_badges),
        leakage=benchmark_leakage(bench),
        leakage_note=leakage_note(bench),
        image_arch=_image_arch(info),
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


def _image_arch(info: BenchmarkInfo) -> str | None:
    """The open_clip architecture whose image tower made the benchmark's features, if one did."""
    provenance = info.provenance
    if provenance is None or provenance.features is None:
        return None
    return open_clip_arch(provenance.features.backbone)


def benchmark_pages(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> Iterator[SiteFile]:
    """Every benchmark version's page, with the CSV files of its tables beside it."""
    template = env.get_template("benchmark.html")
    for bench in model.benchmarks:
        left_out = model.left_out_of([bench])
        html, tables = benchmark_page(template, bench, common, model.reported, left_out)
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
            badge_texts(data_badges(bench.records[key].benchmark)),
            key not in bench.uncounted,
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
    header = (
        "rank",
        "group",
        "submission",
        "version",
        "transductive",
        "data",
        "counted_across_benchmarks",
        *header_for(names),
    )
    return CsvTable(filename, header, rows)


def _reported_csv(filename: str, bench: BenchmarkPage, side: list[Beside]) -> CsvTable:
    """The reported values beside the runs, as data: the run, the value and its source, the
    run's score and interval, and the difference (empty where it is not compared)."""
    rows: list[tuple[CsvCell, ...]] = []
    for item in side:
        sub, interval = bench.records[item.key].submission, item.entry.interval
        rows.append(
            (
                sub.name,
                sub.version,
                item.column.setting,
                item.column.metric,
                item.value.percent,
                item.value.paper,
                item.value.table,
                item.value.transcribed_from,
                100 * item.entry.value if item.column.percent else item.entry.value,
                (100 * interval.lo if item.column.percent else interval.lo) if interval else None,
                (100 * interval.hi if item.column.percent else interval.hi) if interval else None,
                item.difference,
                item.why_not,
            )
        )
    header = (
        "submission",
        "version",
        "setting",
        "metric",
        "reported_percent",
        "paper",
        "table",
        "transcribed_from",
        "reproduced",
        "reproduced_lo",
        "reproduced_hi",
        "difference_pp",
        "not_compared",
    )
    return CsvTable(filename, header, rows)


def _data_kinds(record: RunRecord) -> tuple[str, ...]:
    return tuple(b.kind for b in data_badges(record.benchmark))


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


def _rows(bench: BenchmarkPage, plan: SettingTable, ranking: Ranking, mixed: bool) -> list[Row]:
    """The rows of ``ranking``; with ``mixed`` (runs on differing data), each row carries its
    run's data badges (else the page's header shows them once)."""
    rows = []
    seen_groups: set[int] = set()
    for key in ranking.keys:
        record = bench.records[key]
        sub = record.submission
        badges = (data_badges(record.benchmark) if mixed else []) + record_badges(record)
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
