"""Scores across benchmarks in one table, as GBU's Table III: a row per submission, a column group
per dataset.

Xian et al. (TPAMI 2019, Table III) print one row per method and, per dataset, its ZSL per-class
top-1 on the standard split (SS) and the proposed split (PS), then GZSL u / s / H. This module
builds such tables from the site model, one per *setting* and *split family*.

See docs/site.md.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

from harness.metrics import metrics
from harness.records import ScoreEntry
from harness.site import stats
from harness.site.csv_tables import RANK_HEADER, CsvCell, CsvTable, header_for
from harness.site.model import (
    SETTING_LABELS,
    UNCOUNTED_SUFFIX,
    Badge,
    BenchmarkPage,
    Column,
    SiteModel,
    Submission,
    data_badges,
    setting_key,
)
from harness.site.slugs import slug
from harness.site.text import format_value, interval_text, isolate_text

__all__ = [
    "cross_tables",
    "placement",
]

XLSA17_FAMILY = "xlsa17"
_XLSA17_ID = re.compile(r"xlsa17-(?P<dataset>[a-z0-9]+)-(?P<split>ss|ps)(?:-(?P<variant>val\d+))?")
#: GBU's column order (Table III), then any other dataset by name.
_GBU_ORDER = {"sun": 0, "cub": 1, "awa1": 2, "awa2": 3, "apy": 4}
_DATASET_LABELS = {"sun": "SUN", "cub": "CUB", "awa1": "AWA1", "awa2": "AWA2", "apy": "aPY"}
#: A GZSL group's columns, in GBU's order (Table III): the ``short_name`` of the metric
#: registered with it, which also gives the column's tooltip (``short_description``).
GBU_COLUMNS = ("u", "s", "H")


def gzsl_functions() -> dict[str, tuple[str, str]]:
    """A GZSL group's columns: function → (header, what it is), in :data:`GBU_COLUMNS`' order.

    >>> list(gzsl_functions().items())[0]
    ('gzsl_unseen_accuracy', ('u', "accuracy on the unseen classes' test images"))
    """
    short = {m.short_name: (name, m.short_description) for name, m in metrics.items()}
    return {short[s][0]: (s, short[s][1]) for s in GBU_COLUMNS if s in short}


@dataclass(frozen=True)
class Placement:
    """Where a benchmark sits among the cross-benchmark tables."""

    family: str  # "xlsa17", or the id up to its first "-"
    dataset: str  # xlsa17: "CUB"; else "" (the benchmark is its own group)
    split: str  # xlsa17: "SS", "PS", "PS val2"; else ""
    order: tuple[int, str, int, str]


def placement(benchmark: str) -> Placement:
    """The family, dataset and split of a benchmark id.

    >>> placement("xlsa17-cub-ps-val2")
    Placement(family='xlsa17', dataset='CUB', split='PS val2', order=(1, 'cub', 1, 'val2'))
    >>> placement("imagenet-goz").family, placement("demo").family
    ('imagenet', 'demo')
    """
    match = _XLSA17_ID.fullmatch(benchmark)
    if match is None:
        return Placement(benchmark.split("-", 1)[0], "", "", (len(_GBU_ORDER), benchmark, 0, ""))
    dataset, split, variant = match["dataset"], match["split"], match["variant"] or ""
    return Placement(
        family=XLSA17_FAMILY,
        dataset=_DATASET_LABELS.get(dataset, dataset.upper()),
        split=split.upper() + (f" {variant}" if variant else ""),
        order=(_GBU_ORDER.get(dataset, len(_GBU_ORDER)), dataset, int(split == "ps"), variant),
    )


@dataclass(frozen=True)
class CrossColumn:
    bench: BenchmarkPage
    column: Column
    entries: dict[str, ScoreEntry]  # the scores the table shows (BenchmarkPage.shown_entries)
    group: str  # the group header above it
    label: str  # its own header
    title: str  # its header's tooltip
    csv_name: str  # its CSV column: "<benchmark id> v<version> <metric>"
    best: frozenset[str]  # submission keys holding the column's best inductive score
    badges: list[Badge] = field(default_factory=list)  # its header's: the data of its runs


@dataclass(frozen=True)
class CrossGroup:
    label: str
    span: int
    badges: list[Badge] = field(default_factory=list)  # the data of its one benchmark's runs


@dataclass(frozen=True)
class CrossCell:
    text: str
    title: str
    sort: str
    best: bool
    uncounted: bool = False  # a run left out by default, shown because the reader opted in


@dataclass(frozen=True)
class CrossRow:
    sub: Submission
    transductive: bool
    n_covered: int  # benchmarks of the table with the row's primary score
    mean_rank: float | None  # over those (None: no primary score in the table)
    cells: list[CrossCell]


@dataclass(frozen=True)
class CrossTable:
    """One setting's table of one split family; ``id`` is its element id and file stem."""

    id: str
    family: str
    setting: str
    groups: list[CrossGroup]
    columns: list[CrossColumn]
    rows: list[CrossRow]
    n_benchmarks: int
    csv: CsvTable

    @property
    def setting_label(self) -> str:
        return SETTING_LABELS.get(self.setting, self.setting.upper())


def cross_tables(model: SiteModel, *, uncounted: bool = False) -> list[CrossTable]:
    """Every (family, setting) table, families by name (xlsa17 first), settings in site order,
    of the runs whose data count by default; with ``uncounted``, of every run (the ids and file
    names then end in ``-with-uncounted``)."""
    families: dict[str, list[BenchmarkPage]] = defaultdict(list)
    for bench in model.benchmarks:
        families[placement(bench.id).family].append(bench)
    tables = []
    for family in sorted(families, key=lambda f: (f != XLSA17_FAMILY, f)):
        benches = sorted(families[family], key=lambda b: (placement(b.id).order, b.version))
        settings = sorted({p.setting for b in benches for p in b.settings}, key=setting_key)
        for setting in settings:
            table = _table(model, family, setting, benches, uncounted)
            if table is not None:
                tables.append(table)
    return tables


def _columns_of(bench: BenchmarkPage, setting: str) -> list[tuple[Column, str, str]]:
    """The benchmark's columns in a table of ``setting``: (column, header, tooltip)."""
    plan = next((p for p in bench.settings if p.setting == setting), None)
    if plan is None:
        return []
    if setting == "gzsl":
        functions = gzsl_functions()
        newest: dict[str, Column] = {}
        for column in plan.columns:  # a metric's newest version comes first
            if column.function in functions:
                newest.setdefault(column.function, column)
        if newest:
            return [(newest[f], *functions[f]) for f in functions if f in newest]
    if plan.primary is None:
        return []
    return [(plan.primary, plan.primary.metric, "the benchmark's primary metric")]


def _table(
    model: SiteModel, family: str, setting: str, benches: list[BenchmarkPage], uncounted: bool
) -> CrossTable | None:
    versions: dict[str, int] = defaultdict(int)
    for bench in benches:
        versions[bench.id] += 1
    by_dataset = family == XLSA17_FAMILY and setting != "gzsl"
    columns: list[CrossColumn] = []
    primaries: list[tuple[dict[str, ScoreEntry], bool, str]] = []
    for bench in benches:
        place = placement(bench.id)
        version = f" v{bench.version}" if versions[bench.id] > 1 else ""
        plan = next((p for p in bench.settings if p.setting == setting), None)
        if plan is not None and plan.primary is not None:
            shown = bench.shown_entries(plan.primary, uncounted=uncounted)
            primaries.append((shown, plan.primary.higher_is_better, bench.label))
        for column, label, what in _columns_of(bench, setting):
            entries = bench.shown_entries(column, uncounted=uncounted)
            if not entries:
                continue
            if place.dataset and by_dataset:
                group, label = place.dataset, place.split + version
            elif place.dataset:
                group = f"{place.dataset} {place.split}{version}"
            else:
                group = bench.label
            unit = " (%)" if column.percent else ""
            columns.append(
                CrossColumn(
                    bench=bench,
                    column=column,
                    entries=entries,
                    group=group,
                    label=label,
                    title=f"{isolate_text(bench.id)} v{bench.version}: "
                    f"{isolate_text(column.metric)}{unit}, {what} "
                    f"({isolate_text(column.function)} v{isolate_text(column.version)})",
                    csv_name=f"{bench.id} v{bench.version} {column.metric}",
                    best=_best(column, entries, bench.transductive),
                    badges=_badges(bench, entries),
                )
            )
    if not columns:
        return None
    columns, groups = _place_badges(columns)
    keys = {k for c in columns for k in c.entries}
    transductive = {k for k in keys if model.submissions[k].transductive}
    rows = [
        *_rows(model, columns, primaries, sorted(keys - transductive), False),
        *_rows(model, columns, primaries, sorted(transductive), True),
    ]
    table_id = f"cross-{slug(setting)}-{slug(family)}" + (UNCOUNTED_SUFFIX if uncounted else "")
    n_benchmarks = len({(c.bench.id, c.bench.version) for c in columns})
    csv = CsvTable(
        filename=f"{table_id}.csv",
        header=(
            *RANK_HEADER,
            *(
                part
                for c in columns
                for part in (
                    *header_for([c.csv_name]),
                    f"{c.csv_name}_data",
                    f"{c.csv_name}_counted",
                )
            ),
        ),
        rows=[_csv_row(row, columns, n_benchmarks) for row in rows],
    )
    return CrossTable(
        id=table_id,
        family=family,
        setting=setting,
        groups=groups,
        columns=columns,
        rows=rows,
        n_benchmarks=n_benchmarks,
        csv=csv,
    )


def _badges(bench: BenchmarkPage, entries: dict[str, ScoreEntry]) -> list[Badge]:
    """The data badges of the runs of ``entries``, once (the newest run's first)."""
    found: dict[str, Badge] = {}
    for record in sorted(
        (bench.records[k] for k in entries), key=lambda r: r.created_at, reverse=True
    ):
        for badge in data_badges(record.benchmark):
            found.setdefault(badge.kind, badge)
    return list(found.values())


def _place_badges(columns: list[CrossColumn]) -> tuple[list[CrossColumn], list[CrossGroup]]:
    """The group headers over ``columns``; the data badges go on a group whose columns are all
    of one benchmark (GZSL u / s / H), else on each column (xlsa17's SS, PS, …)."""
    runs: list[list[CrossColumn]] = []
    for crossed in columns:
        if runs and runs[-1][0].group == crossed.group:
            runs[-1].append(crossed)
        else:
            runs.append([crossed])
    groups, placed = [], []
    for run in runs:
        one = len({id(c.bench) for c in run}) == 1
        groups.append(CrossGroup(run[0].group, len(run), run[0].badges if one else []))
        placed += [replace(c, badges=[]) if one else c for c in run]
    return placed, groups


def _best(
    column: Column, entries: dict[str, ScoreEntry], transductive: frozenset[str]
) -> frozenset[str]:
    """The inductive runs holding the best finite score of a benchmark's primary column (all
    of them on a tie). Other columns mark none: the GZSL s of a seen-only baseline is 100, and
    its u 0; the primary (H) is what says which run did best."""
    if not column.primary:
        return frozenset()
    values = {
        k: e.value for k, e in entries.items() if k not in transductive and math.isfinite(e.value)
    }
    if not values:
        return frozenset()
    best = max(values.values()) if column.higher_is_better else min(values.values())
    return frozenset(k for k, v in values.items() if v == best)


def _rows(
    model: SiteModel,
    columns: list[CrossColumn],
    primaries: list[tuple[dict[str, ScoreEntry], bool, str]],
    keys: list[str],
    transductive: bool,
) -> list[CrossRow]:
    """``keys``' rows in the site's ranking order on the family's primary scores (each
    benchmark's shown entries, its direction and its label)."""
    if not keys:
        return []
    wanted = set(keys)
    values: dict[str, dict[str, float]] = {}
    directions: dict[str, bool] = {}
    for entries, higher_is_better, label in primaries:
        row = {k: e.value for k, e in entries.items() if k in wanted and math.isfinite(e.value)}
        if row:
            values[label] = row
            directions[label] = higher_is_better
    ranks = stats.ranks_across(values, directions)
    ranked: list[str] = list(ranks["submissions"]) if ranks else []
    mean = {k: float(m) for k, m in zip(ranked, ranks["mean_rank"], strict=True)} if ranks else {}
    covered = (
        {k: int(n) for k, n in zip(ranked, ranks["n_benchmarks"], strict=True)} if ranks else {}
    )
    order = ranked + [k for k in keys if k not in mean]
    return [
        CrossRow(
            sub=model.submissions[key],
            transductive=transductive,
            n_covered=covered.get(key, 0),
            mean_rank=mean.get(key),
            cells=[_cell(c, key) for c in columns],
        )
        for key in order
    ]


def _cell(column: CrossColumn, key: str) -> CrossCell:
    entry = column.entries.get(key)
    if entry is None or not math.isfinite(entry.value):
        return CrossCell("—", "not scored", "", False)
    percent = column.column.percent
    best = key in column.best
    uncounted = key in column.bench.uncounted
    title = f"{isolate_text(column.bench.id)} v{column.bench.version}"
    title += f" {isolate_text(column.column.metric)}"
    if entry.interval is not None:
        bounds = interval_text(entry.interval.lo, entry.interval.hi, percent=percent)
        title += f"; {100 * entry.interval.level:g}% interval {bounds}"
    if best:
        title += "; best of the column (inductive submissions)"
    if uncounted:
        left_out = ", ".join(b.text for b in data_badges(column.bench.records[key].benchmark))
        title += f"; {left_out}: left out of this table by default"
    text = format_value(entry.value, percent=percent)
    return CrossCell(text, title, repr(entry.value), best, uncounted)


def _csv_row(row: CrossRow, columns: list[CrossColumn], n_benchmarks: int) -> tuple[CsvCell, ...]:
    cells: list[CsvCell] = [
        row.sub.name,
        row.sub.version,
        row.transductive,
        row.n_covered,
        n_benchmarks,
        row.mean_rank,
    ]
    for column in columns:
        entry = column.entries.get(row.sub.key)
        if entry is None:
            cells += [None, None, None, None, None]
            continue
        interval = entry.interval
        record = column.bench.records[row.sub.key]
        cells += [
            entry.value,
            interval.lo if interval else None,
            interval.hi if interval else None,
            "; ".join(b.text for b in data_badges(record.benchmark)),
            row.sub.key not in column.bench.uncounted,
        ]
    return tuple(cells)
