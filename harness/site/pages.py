"""The site model → HTML pages, log files and ``results.json`` in a (temporary) folder.

One function per page kind prepares the rows its template prints (formatted numbers, sort keys,
badges, links) and renders it with jinja2's autoescaping: every submitted string reaches the page
escaped and isolated (the ``bdi`` and ``fsi`` filters, :func:`harness.site.text.isolate`), and a
submitted URL becomes a link only through :func:`harness.site.text.safe_href`. Pages link each
other with relative URLs only, so the folder works from ``file://`` and from any static host.

Transductive runs are ranked apart (:mod:`harness.site.model`): a benchmark table lists the
inductive runs, a second one the transductive runs with their own ranks, and a third, shown only
on request (the ``#combined-<setting>`` anchor without the script, a checkbox with it), every run
in one ranking. The index's leaders and rank matrices follow the same rule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from harness import __version__ as harness_version
from harness.audit import AuditStatus, LeakageAudit, Relation
from harness.records import ClassValues, RunRecord, ScoredClass, ScoreEntry
from harness.site import cross, figures, glossary, robustness, stats
from harness.site.csv_tables import (
    RANK_HEADER,
    CsvCell,
    CsvLines,
    CsvTable,
    csv_line,
    csv_number,
    header_for,
    write_csv,
)
from harness.site.model import (
    SETTING_LABELS,
    Badge,
    BenchmarkPage,
    Column,
    SettingTable,
    SiteModel,
    Submission,
    record_badges,
    registered_metric,
    setting_key,
)
from harness.site.results_json import write_results_json
from harness.site.slugs import pair_slug, slug
from harness.site.text import (
    Link,
    format_diff,
    format_p,
    format_value,
    interval_text,
    isolate,
    isolate_text,
    safe_href,
    short_hash,
)

__all__ = ["CSP", "STATIC_FILES", "render_site"]

#: The Content-Security-Policy of every page: the site's own script and stylesheet, inline SVG,
#: nothing else (no inline script or style, no plugins, no forms posting anywhere).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'"
)
#: Files copied from the package's ``static/`` folder.
STATIC_FILES = ("style.css", "site.js")
_FLAGS = ("leakage", "transductive", "extra-data")


# -- rows -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leakage:
    """The benchmark's leakage badge: test classes its feature backbone saw in pre-training.

    ``classes``: one line per counted class, its relations and the pre-training classes
    responsible; ``title``: the badge's tooltip (what is counted and what each relation means).
    """

    badge: str
    source: str
    classes: tuple[str, ...]
    title: str
    unavailable: bool = False


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


@dataclass(frozen=True)
class Ranking:
    """One ranking of a setting's runs: which rows, in which order, their ranks and groups."""

    keys: list[str]
    ranks: dict[str, int]
    groups: list[list[str]]
    group_of: dict[str, int]
    anchor_suffix: str = ""  # rows repeated from another table get other ids


#: Column groups of a score table, in the chooser's order: id (a CSS class suffix) → label.
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


def render_site(model: SiteModel, site: Path) -> None:
    """Write every page of ``model`` into the empty folder ``site``."""
    env = _environment()
    n_records = sum(len(b.records) for b in model.benchmarks)
    common = {"harness_version": harness_version, "csp": CSP, "n_records": n_records}
    # Benchmark families (validation variants, GBU Fig. 3): the robustness page and the links to
    # it exist only when some family has two members scored; otherwise every page is as before.
    families = robustness.families(model)
    common["robustness_links"] = {
        member.bench.filename: family for family in families for member in family.members
    }
    for folder in ("benchmarks", "submissions", "compare", "logs", "static"):
        (site / folder).mkdir()
    for name in STATIC_FILES:
        data = resources.files("harness.site").joinpath("static", name).read_bytes()
        (site / "static" / name).write_bytes(data)

    html, tables = _index(env, model, common)
    _write(site / "index.html", html)
    for table in tables:
        write_csv(site, table)
    across = cross.cross_tables(model)
    _write(
        site / "across.html",
        env.get_template("across.html").render(
            tables=across, root="", page_title="Across benchmarks", **common
        ),
    )
    for cross_table in across:
        write_csv(site, cross_table.csv)
    if families:
        robustness_tables = robustness.robustness_tables(model, families)
        rank_counts = robustness.rank_counts(model, families)
        _write(
            site / robustness.PAGE,
            env.get_template("robustness.html").render(
                families=families,
                tables=robustness_tables,
                matrices=rank_counts,
                root="",
                page_title="Robustness across validation splits",
                **common,
            ),
        )
        for robustness_csv in [t.csv for t in robustness_tables] + [r.csv for r in rank_counts]:
            write_csv(site, robustness_csv)
    template = env.get_template("benchmark.html")
    for bench in model.benchmarks:
        html, tables = _benchmark(template, bench, common)
        _write(site / "benchmarks" / bench.filename, html)
        for table in tables:
            write_csv(site / "benchmarks", table)
    pairs = _pairs(model)
    template = env.get_template("submission.html")
    for sub in model.submissions.values():
        logs = _write_logs(site, model, sub)
        html, csv = _submission(template, model, sub, logs, pairs, common)
        _write(site / "submissions" / sub.filename, html)
        write_csv(site / "submissions", csv)
    compare = env.get_template("compare.html").render(
        options=[
            (sub, _plain_label(sub) + (" (transductive)" if sub.transductive else ""))
            for sub in model.submissions.values()
        ],
        pairs=[(a, b, f"compare/{pair_slug(a.key, b.key)}.html") for a, b in pairs],
        root="",
        page_title="Compare",
        **common,
    )
    _write(site / "compare.html", compare)
    template = env.get_template("pair.html")
    columns = _pair_columns(model)
    for a, b in pairs:
        html, pair_csv = _pair(template, model, columns, a, b, common)
        _write(site / "compare" / f"{pair_slug(a.key, b.key)}.html", html)
        write_csv(site / "compare", pair_csv)
    write_results_json(model, site / "results.json")
    _write(site / "glossary.html", _glossary(env, model, common))


# -- index ----------------------------------------------------------------------------------


def _index(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> tuple[str, list[CsvTable]]:
    """The index page and the CSV files of its tables."""
    rows = []
    for bench in model.benchmarks:
        leaders = []
        for plan in bench.settings:
            inductive, transductive = _rankings(plan)[:2]
            for ranking, kind in ((inductive, False), (transductive, True)):
                lead = _leader(bench, plan, ranking, transductive=kind)
                if lead is not None:
                    leaders.append(lead)
        rows.append(
            {
                "bench": bench,
                "info": bench.latest.benchmark,
                "leakage": benchmark_leakage(bench),
                "protocol": _protocol_badges(bench.records.values()),
                "leaders": leaders,
            }
        )
    settings = {
        *model.rank_matrices,
        *model.transductive_rank_matrices,
        *model.combined_rank_matrices,
    }
    rank_views = []
    rank_tables: list[CsvTable] = []
    for setting in sorted(settings, key=setting_key):
        apart = model.transductive_rank_matrices.get(setting)
        everyone = model.combined_rank_matrices.get(setting)
        main_view = _rank_view(model.rank_matrices.get(setting), setting, "")
        apart_view = _rank_view(apart, setting, "transductive")
        # one ranking of every run: only worth offering when some are transductive
        combined_view = _rank_view(everyone, setting, "combined") if apart else None
        rank_views.append(
            {
                "setting": setting,
                "label": SETTING_LABELS.get(setting, setting),
                "main": main_view,
                "transductive": apart_view,
                "combined": combined_view,
            }
        )
        views = (main_view, apart_view, combined_view)
        rank_tables += [view["csv"] for view in views if view is not None]
    subs = []
    for sub in model.submissions.values():
        info = sub.latest.submission
        badges = sub.badges
        subs.append(
            {
                "sub": sub,
                "kind": info.kind,
                "authors": info.authors,
                "badges": badges,
                "flags": " ".join(b.flag for b in badges if b.flag in _FLAGS),
                "search": sub.label.lower(),
            }
        )
    tables = [*_index_tables(model), *rank_tables]
    html = env.get_template("index.html").render(
        benchmarks=rows,
        submissions=subs,
        rank_views=rank_views,
        csv_files={"benchmarks": tables[0].filename, "submissions": tables[1].filename},
        root="",
        page_title="Leaderboard",
        **common,
    )
    return html, tables


def _index_tables(model: SiteModel) -> tuple[CsvTable, CsvTable]:
    """The index's benchmark and submission tables as data."""
    benchmarks = []
    for bench in model.benchmarks:
        info = bench.latest.benchmark
        known = bool(info.n_classes)  # 0: not recorded (the page shows —)
        benchmarks.append(
            (
                bench.id,
                bench.version,
                bench.title,
                bench.hash,
                info.n_classes if known else None,
                info.n_seen if known else None,
                info.n_unseen if known else None,
                len(bench.records),
            )
        )
    subs = [
        (
            sub.name,
            sub.version,
            sub.latest.submission.kind,
            "; ".join(sub.latest.submission.authors),
            len(sub.records),
            "; ".join(b.text for b in sub.badges),
        )
        for sub in model.submissions.values()
    ]
    return (
        CsvTable(
            "index-benchmarks.csv",
            (
                "benchmark",
                "version",
                "title",
                "hash",
                "classes",
                "seen_classes",
                "unseen_classes",
                "submissions",
            ),
            list(benchmarks),
        ),
        CsvTable(
            "index-submissions.csv",
            ("submission", "version", "kind", "authors", "benchmarks", "badges"),
            list(subs),
        ),
    )


def _plain_label(sub: Submission) -> str:
    """``name version`` for text-only places (page titles, options), each part isolated."""
    return f"{isolate_text(sub.name)} {isolate_text(sub.version)}"


def _rank_view(ranks: dict[str, Any] | None, setting: str, which: str) -> dict[str, Any] | None:
    """A rank matrix's figure and table rows; ``which`` is "", "transductive" or "combined"."""
    if ranks is None:
        return None
    suffix = f"-{which}" if which else ""
    fig = figures.rank_figure(ranks, setting, lambda path: path, suffix=suffix)
    view_rows = []
    for s, sub in enumerate(ranks["submission_refs"]):
        cells = []
        for value in ranks["ranks"][s]:
            finite = math.isfinite(float(value))
            cells.append((f"{value:g}" if finite else "—", f"{value:g}" if finite else ""))
        mean = float(ranks["mean_rank"][s])
        view_rows.append(
            {
                "sub": sub,
                "badges": [b for b in sub.badges if b.flag == "transductive"],
                "mean": f"{mean:.2f}",
                "mean_sort": repr(mean),
                "n": int(ranks["n_benchmarks"][s]),
                "coverage": f"{int(ranks['n_benchmarks'][s])}/{len(ranks['benchmarks'])}",
                "cells": cells,
            }
        )
    benches: list[BenchmarkPage] = ranks["benchmark_pages"]
    csv = CsvTable(
        f"index-ranks-{slug(setting)}{suffix}.csv",
        (*RANK_HEADER, *(f"{b.id} v{b.version}" for b in benches)),
        [
            (
                sub.name,
                sub.version,
                sub.transductive,
                int(ranks["n_benchmarks"][s]),
                len(benches),
                float(ranks["mean_rank"][s]),
                *(float(v) for v in ranks["ranks"][s]),  # a missing cell (NaN) is empty
            )
            for s, sub in enumerate(ranks["submission_refs"])
        ],
    )
    return {
        "id": f"ranks-{setting}{suffix}",
        "table_id": f"table-ranks-{setting}{suffix}",
        "figure": fig,
        "benchmarks": benches,
        "rows": view_rows,
        "csv": csv,
    }


def _rankings(plan: SettingTable) -> tuple[Ranking, Ranking, Ranking]:
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


def _leader(
    bench: BenchmarkPage, plan: SettingTable, ranking: Ranking, *, transductive: bool
) -> dict[str, Any] | None:
    column = plan.primary
    if column is None or not ranking.keys or ranking.keys[0] not in ranking.ranks:
        return None
    key = ranking.keys[0]
    entry = column.entries[key]
    unit = "%" if column.percent else ""
    group = next((g for g in ranking.groups if key in g), None)
    tied, title = "", ""
    if group is not None and len(group) > 1:
        tied = f"tied with {len(group) - 1} other{'s' if len(group) > 2 else ''}"
        title = "not separable by a paired test: " + ", ".join(plan.isolated[k] for k in group[1:])
    return {
        "setting": plan.label,
        "metric": metric_markup(column, unit=False),
        "value": format_value(entry.value, percent=column.percent) + unit,
        "interval": _interval(entry, column),
        "sub": bench.records[key].submission,
        "anchor": plan.anchors[key],
        "tied": tied,
        "tied_title": title,
        "transductive": transductive,
    }


# -- benchmark pages ------------------------------------------------------------------------


def _benchmark(
    template: Any, bench: BenchmarkPage, common: dict[str, Any]
) -> tuple[str, list[CsvTable]]:
    """The page and the CSV file of each of its score tables."""
    views = []
    tables: list[CsvTable] = []
    for plan in bench.settings:
        inductive, transductive, combined = _rankings(plan)
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
        protocol=_protocol_badges(bench.records.values()),
        settings=views,
        structure_facts=figures.structure_facts(bench),
        structure_figures=figures.benchmark_figures(bench),
        has_darts_reward=any(
            _operating_point(c.function) for plan in bench.settings for c in plan.columns
        ),
        n_boot=stats.N_BOOT,
        alpha=stats.ALPHA,
        root="../",
        page_title=f"{isolate_text(bench.title)} v{bench.version}",
        **common,
    )
    return html, tables


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
                flags=" ".join(b.flag for b in badges if b.flag in _FLAGS),
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
        interval=_interval(entry, column),
        sort=repr(float(entry.value)) if finite else "",
        title=title,
        primary=column.primary,
        note=reached.note if reached else "",
        note_title=reached.title if reached else "",
        note_warn=reached.below if reached else False,
    )


# -- what a column holds --------------------------------------------------------------------


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


def _operating_point(function: str) -> bool:
    """Whether ``function`` is a DARTS reward at a target accuracy, whose details hold the
    accuracy it reached on test (its registered figure)."""
    metric = registered_metric(function)
    return metric is not None and metric.figure == "darts_operating_point"


def darts_reached(entry: ScoreEntry) -> Reached | None:
    """The operating point of a ``darts_reward`` score (a metric registered with figure
    ``darts_operating_point``), from its details (None otherwise)."""
    if not _operating_point(entry.function):
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
    if _operating_point(column.function):
        targets = sorted(
            {r.target for e in column.entries.values() if (r := darts_reached(e)) is not None}
        )
        named = " / ".join(_percent(t) for t in targets) or "the target"
        parts.append(
            f"λ chosen so that the validation classes reach {named} accuracy; not guaranteed "
            "on the test classes (the accuracy reached on test is shown under each score)"
        )
    return "; ".join(parts)


def _interval(entry: ScoreEntry, column: Column) -> str:
    if entry.interval is None:
        return ""
    return interval_text(entry.interval.lo, entry.interval.hi, percent=column.percent)


def _benchmark_audit(bench: BenchmarkPage) -> LeakageAudit | None:
    """The audit of the benchmark's own features: the one frozen with the benchmark, which every
    run without a declared backbone carries (the newest such run's, for older records)."""
    records = sorted(bench.records.values(), key=lambda r: r.created_at)
    own = [r for r in records if not r.submission.declarations.get("backbone_pretrained_on")]
    audits = [r.leakage for r in (own or records) if r.leakage is not None]
    return audits[-1] if audits else None


def _audit_provenance(audit: LeakageAudit) -> str:
    """Where the audit comes from: its frozen inputs, or the scoring of an older record."""
    if audit.inputs is None:
        return "audited when the run was scored (a record of an older harness)"
    inputs = audit.inputs_text()
    return "audited when the benchmark was frozen" + (f", from {inputs}" if inputs else "")


def leakage_note(bench: BenchmarkPage) -> str:
    """What the page says when the audit counted no leakage (or there is no audit)."""
    audit = _benchmark_audit(bench)
    if audit is None:
        return "not audited: these records carry no leakage audit"
    if audit.status == AuditStatus.NOT_APPLICABLE:
        return "not applicable: the benchmark's features were not pre-trained on a class set"
    if not audit.audited:
        return audit.summary()
    counted = " or ".join(r.value for r in audit.counted)
    note = (
        f"none: no test class is related ({counted}) to the {audit.source} classes the"
        " features' backbone was pre-trained on"
    )
    others = [r for r in Relation if r not in audit.counted and audit.with_relation(r)]
    if others:
        note += "; reported, not counted: " + ", ".join(
            f"{len(audit.with_relation(r))} {r.value}" for r in others
        )
    return f"{note} ({_audit_provenance(audit)})"


def benchmark_leakage(bench: BenchmarkPage) -> Leakage | None:
    """The leakage badge from the audit of the benchmark's own features, if any."""
    audit = _benchmark_audit(bench)
    if audit is None or audit.status == AuditStatus.NOT_APPLICABLE:
        return None
    if audit.status == AuditStatus.NOT_AUDITED:
        return Leakage(
            "not audited",
            audit.source,
            (),
            f"frozen without a leakage audit: {audit.error}",
            unavailable=True,
        )
    if audit.error is not None:
        return Leakage("leakage audit unavailable", audit.source, (), audit.error, unavailable=True)
    if audit.n_overlap == 0:
        return None
    counted = set(audit.counted)
    classes = tuple(
        f"{entry.label} ({entry.class_id}): "
        + "; ".join(
            f"{relation.value} "
            + ", ".join(r.name for r in entry.relatives_by(relation)[:5])
            + (f" and {entry.counts[relation] - 5} more" if entry.counts[relation] > 5 else "")
            for relation in Relation
            if relation in entry.relations
        )
        for entry in audit.classes
        if entry.relations & counted
    )
    badge = f"leakage: {audit.n_overlap} of {audit.n_test} test classes seen in pre-training"
    return Leakage(badge, audit.source, classes, f"{audit.rule()} ({_audit_provenance(audit)})")


def _protocol_badges(records: Iterable[RunRecord]) -> list[Badge]:
    counts: dict[str, int] = {}
    for record in records:
        for badge in record_badges(record):
            if badge.flag in ("transductive", "extra-data"):
                counts[badge.text] = counts.get(badge.text, 0) + 1
    return [
        Badge(f"{n} {text}", "info", f"{n} submission(s) declare: {text}")
        for text, n in sorted(counts.items())
    ]


# -- submission pages -----------------------------------------------------------------------


def _submission(
    template: Any,
    model: SiteModel,
    sub: Submission,
    logs: dict[str, str],
    pairs: list[tuple[Submission, Submission]],
    common: dict[str, Any],
) -> tuple[str, CsvTable]:
    """The submission's page and one CSV of every score on it (one row per table row)."""
    info = sub.latest.submission
    benches = {(b.id, b.version): b for b in model.benchmarks}
    results = []
    csv_rows: list[tuple[CsvCell, ...]] = []
    for record in sub.records:
        bench = benches[(record.benchmark.id, record.benchmark.version)]
        rows = []
        anchor = f"sub-{sub.key}"
        for plan in bench.settings:
            for column in plan.columns:
                entry = column.entries.get(sub.key)
                if entry is None:
                    continue
                rank, n_ranked = column.rank_of(sub.key)
                apart = sub.key in bench.transductive
                group_of, groups = (
                    (plan.transductive_group_of, plan.transductive_groups)
                    if apart
                    else (plan.group_of, plan.groups)
                )
                group = group_of.get(sub.key) if column.primary else None
                # ranked among runs of its kind; the ranking of all runs together too, where
                # the column has both kinds
                mixed = bool(column.transductive_ranks) and bool(column.ranks)
                overall = column.combined_ranks.get(sub.key)
                csv_rows.append(
                    (
                        bench.id,
                        bench.version,
                        plan.setting,
                        column.metric,
                        column.function,
                        column.version,
                        column.primary,
                        entry.value,
                        entry.interval.lo if entry.interval else None,
                        entry.interval.hi if entry.interval else None,
                        rank,
                        n_ranked if rank else None,
                        group,
                    )
                )
                rows.append(
                    {
                        "setting": plan.label,
                        "metric": metric_markup(column, unit=False),
                        "metric_title": column_title(column),
                        "reached": darts_reached(entry),
                        "primary": column.primary,
                        "value": format_value(entry.value, percent=column.percent)
                        + ("%" if column.percent else ""),
                        "interval": _interval(entry, column),
                        "rank": f"{rank} of {n_ranked}{' transductive' if apart else ''}"
                        if rank
                        else "—",
                        "rank_all": f"{overall} of {len(column.combined_ranks)} all together"
                        if mixed and overall
                        else "",
                        "group": f"{group} of {len(groups)}" if group else "—",
                        "function": column.function,
                        "version": column.version,
                    }
                )
        log = logs.get(bench.stem)
        results.append(
            {
                "bench": bench,
                "record": record,
                "anchor": anchor,
                "badges": record_badges(record),
                "rows": rows,
                "created": record.created_at.isoformat(timespec="seconds"),
                "predictions": sorted(record.predictions_hashes.items()),
                "environment": _pairs_text(record.environment),
                "timings": [
                    (k, f"{v:.0f} MiB" if k == "peak_rss_mib" else f"{v:.2f} s")
                    for k, v in sorted(record.timings.items())
                ],
                "log": log,
                "class_bars": _class_bars(bench, sub, record),
                "hyperparameters": _hyperparameter_rows(record),
            }
        )
    others = [
        (b if a.key == sub.key else a, f"compare/{pair_slug(a.key, b.key)}.html")
        for a, b in pairs
        if sub.key in (a.key, b.key)
    ]
    csv = CsvTable(
        f"{sub.key}.csv",
        (
            "benchmark",
            "benchmark_version",
            "setting",
            "metric",
            "function",
            "metric_version",
            "primary",
            "value",
            "lo",
            "hi",
            "rank",
            "ranked",
            "group",
        ),
        csv_rows,
    )
    html = template.render(
        sub=sub,
        info=info,
        csv_file=csv.filename,
        paper=Link(info.paper, safe_href(info.paper)) if info.paper else None,
        url=Link(info.url, safe_href(info.url)) if info.url else None,
        code=Link(info.code, safe_href(info.code)) if info.code else None,
        bar_width=_BAR_WIDTH,
        package_hashes=sorted({r.submission.package_hash for r in sub.records}),
        declarations=_pairs_text(info.declarations),
        results=results,
        pairs=others,
        root="../",
        page_title=_plain_label(sub),
        **common,
    )
    return html, csv


#: Width in pixels of a per-class bar at 100 %.
_BAR_WIDTH = 160


@dataclass(frozen=True)
class ClassBar:
    """One class of a per-class bar chart on a submission page."""

    name: str
    class_id: str
    value: str  # formatted like the score
    width: float  # bar length in pixels (0 to _BAR_WIDTH)
    count: int  # test images of the class
    group: str  # "seen" / "unseen" in GZSL; "" otherwise
    nearest: str  # the nearest training class and the relation, or why there is none


def _bars_of(values: ClassValues | None) -> bool:
    """Whether class values hold each class's own score (not a ratio's or a curve's parts)."""
    return values is not None and values.per_class_scores


def _class_bars(bench: BenchmarkPage, sub: Submission, record: RunRecord) -> list[dict[str, Any]]:
    """Per setting, the per-class values of its primary score (else of its first score that
    keeps them), best first (ties: by name), each named, with its test images and the nearest
    training class (:attr:`harness.records.BenchmarkInfo.test_classes`). Records from before
    class names were kept name a class by its column."""
    by_column: dict[str, dict[int, ScoredClass]] = {}
    for scored in record.benchmark.test_classes:
        for setting, column in scored.columns.items():
            by_column.setdefault(setting, {})[column] = scored
    out = []
    for plan in bench.settings:
        columns = [c for c in plan.columns if c.entries.get(sub.key) is not None]
        chosen = [c for c in columns if c.primary] + [c for c in columns if not c.primary]
        picked = next((c for c in chosen if _bars_of(c.entries[sub.key].class_values)), None)
        if picked is None:
            continue
        values = picked.entries[sub.key].class_values
        assert values is not None
        named = by_column.get(plan.setting, {})
        gzsl = len(set(values.groups)) > 1
        bars = []
        for column, count, group, mean in zip(
            values.classes, values.counts, values.groups, values.means, strict=True
        ):
            cls = named.get(column)
            fraction = min(max(mean, 0.0), 1.0) if picked.percent else 0.0
            bars.append(
                ClassBar(
                    name=cls.name if cls else f"column {column}",
                    class_id=cls.id if cls else "",
                    value=format_value(mean, percent=picked.percent)
                    + ("%" if picked.percent else ""),
                    width=round(fraction * _BAR_WIDTH, 1),
                    count=count,
                    group=("unseen" if group else "seen") if gzsl else "",
                    nearest=_nearest_text(cls),
                )
            )
        order = sorted(
            range(len(bars)),
            key=lambda i: (-values.means[i], bars[i].name.casefold(), values.classes[i]),
        )
        # What one bar is: a class's value of the metric itself, or (H, image means) the
        # per-class values the score is made from.
        what = {
            "class_mean": picked.metric,
            "harmonic_of_groups": f"accuracy behind {picked.metric} (seen and unseen groups)",
            "image_mean": f"mean of {picked.metric}",
        }[values.combine]
        out.append(
            {
                "setting": plan.label,
                "metric": picked.metric,
                "what": what,
                "column": "accuracy" if values.combine == "harmonic_of_groups" else picked.metric,
                "percent": picked.percent,
                "bars": [bars[i] for i in order],
                "named": bool(named),
                "id": f"classes-{bench.stem}-{plan.setting}",
            }
        )
    return out


def _nearest_text(cls: ScoredClass | None) -> str:
    """``"Persian cat: sibling, 2 hops"``; what the record does not know, said as such."""
    if cls is None:
        return "not recorded"
    if not cls.unseen:
        return "a training class"
    if cls.relation is None:
        return "no hierarchy"
    if cls.nearest is None or cls.hops is None:
        return "no training class connected"
    hops = f"{cls.hops} hop{'s' if cls.hops != 1 else ''}"
    return f"{cls.nearest_name or cls.nearest}: {cls.relation}, {hops}"


def _hyperparameter_rows(record: RunRecord) -> list[tuple[str, str, str]]:
    """``(fit, name, value)`` of what the model chose, main fit first, names sorted."""
    order = {"main": 0, "validation": 1}
    return [
        (fit, name, _scalar_text(value))
        for fit in sorted(record.hyperparameters, key=lambda f: (order.get(f, 2), f))
        for name, value in sorted(record.hyperparameters[fit].items())
    ]


def _scalar_text(value: Any) -> str:
    """A hyperparameter as text: floats to 6 significant digits, JSON spelling otherwise."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else json.dumps(value)


def _pairs_text(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (key, value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        for key, value in sorted(mapping.items())
    ]


def _write_logs(site: Path, model: SiteModel, sub: Submission) -> dict[str, str]:
    """Each run's logs as UTF-8 text, ``logs/<submission>/<benchmark>-v<n>.txt``; {stem: path}."""
    out = {}
    benches = {(b.id, b.version): b for b in model.benchmarks}
    for record in sub.records:
        if not any(record.logs.values()):
            continue
        bench = benches[(record.benchmark.id, record.benchmark.version)]
        folder = site / "logs" / sub.key
        folder.mkdir(exist_ok=True)
        # Submitted parts between FSI and PDI: a text file has no elements to isolate them.
        lines = [
            f"{_plain_label(sub)} on {isolate_text(bench.id)} v{bench.version}, "
            f"scored {record.created_at.isoformat()}",
            f"runner: {isolate_text(record.runner)}; "
            f"harness {isolate_text(record.harness_version)}",
            "",
        ]
        for name, text in sorted(record.logs.items(), key=lambda kv: (kv[0] != "reason", kv[0])):
            lines += [f"== {name} ==", text.rstrip("\n"), ""]
        # A byte-order mark makes browsers read the file as UTF-8 even from file://.
        path = folder / f"{bench.stem}.txt"
        path.write_text("\ufeff" + "\n".join(lines), encoding="utf-8", newline="\n")
        out[bench.stem] = f"logs/{sub.key}/{bench.stem}.txt"
    return out


# -- comparison pages -----------------------------------------------------------------------


def _pairs(model: SiteModel) -> list[tuple[Submission, Submission]]:
    """Every two submissions that ran a common benchmark, in key order."""
    ran: dict[str, set[tuple[str, int]]] = {
        key: {(r.benchmark.id, r.benchmark.version) for r in sub.records}
        for key, sub in model.submissions.items()
    }
    subs = list(model.submissions.values())
    return [(a, b) for i, a in enumerate(subs) for b in subs[i + 1 :] if ran[a.key] & ran[b.key]]


@dataclass
class _PairColumn:
    """One tested column, prepared once for every pair page: labels escaped, scores formatted."""

    setting: str
    metric: Markup
    primary: bool
    percent: bool
    higher_is_better: bool
    tests: stats.ColumnTests
    index: dict[str, int]
    scores: list[str]
    title: str = ""  # the header tooltip: function, direction, averaging
    reached: list[Reached | None] = field(default_factory=list)  # DARTS reward, per test key
    # The CSV's fixed cells (benchmark, version, setting, metric) as CSV text, and each run's
    # score as CSV text: rendered once per column, not once per pair page.
    csv_prefix: str = ""
    csv_scores: list[str] = field(default_factory=list)
    # tests.diff / lo / hi / p_value as nested lists: a pair page reads 4 of their cells
    matrices: tuple[list[list[float]], ...] = ()


def _pair_columns(
    model: SiteModel,
) -> tuple[dict[tuple[str, int], list[_PairColumn]], dict[tuple[str, int], Markup]]:
    """Per benchmark, the tested columns, and a sentence naming the untested ones."""
    out = {}
    untested: dict[tuple[str, int], Markup] = {}
    for bench in model.benchmarks:
        columns = []
        skipped = []
        for plan in bench.settings:
            for column in plan.columns:
                if column.tests is None:
                    skipped.append(
                        Markup("{} {} ({})").format(
                            plan.label, metric_markup(column, unit=False), column.no_tests
                        )
                    )
                    continue
                columns.append(
                    _PairColumn(
                        csv_prefix=csv_line(
                            (
                                bench.id,
                                bench.version,
                                plan.setting,
                                f"{column.metric} v{column.version}"
                                if column.versioned
                                else column.metric,
                            )
                        ),
                        csv_scores=[csv_number(v) for v in column.tests.estimates.tolist()],
                        matrices=tuple(
                            m.tolist()
                            for m in (
                                column.tests.diff,
                                column.tests.lo,
                                column.tests.hi,
                                column.tests.p_value,
                            )
                        ),
                        setting=plan.label,
                        metric=metric_markup(column),
                        primary=column.primary,
                        percent=column.percent,
                        higher_is_better=column.higher_is_better,
                        tests=column.tests,
                        index={k: i for i, k in enumerate(column.tests.keys)},
                        scores=[
                            format_value(float(v), percent=column.percent)
                            for v in column.tests.estimates
                        ],
                        title=column_title(column),
                        reached=[
                            darts_reached(column.entries[k]) if k in column.entries else None
                            for k in column.tests.keys
                        ],
                    )
                )
        out[(bench.id, bench.version)] = columns
        if skipped:
            untested[(bench.id, bench.version)] = Markup(
                "Not tested: {}. Records scored before a metric kept per-class values get them "
                "when re-scored (zsl results rescore)."
            ).format(Markup("; ").join(skipped))
    return out, untested


def _pair(
    template: Any,
    model: SiteModel,
    prepared: tuple[dict[tuple[str, int], list[_PairColumn]], dict[tuple[str, int], Markup]],
    a: Submission,
    b: Submission,
    common: dict[str, Any],
) -> tuple[str, CsvLines]:
    """The pair's page and its tests as one CSV (a row per test, every common benchmark)."""
    columns, untested = prepared
    blocks = []
    csv_rows: list[str] = []
    counts = {"A": 0, "B": 0, "tied": 0}
    only_a: list[BenchmarkPage] = []
    only_b: list[BenchmarkPage] = []
    for bench in model.benchmarks:
        in_a, in_b = a.key in bench.records, b.key in bench.records
        if in_a != in_b:
            (only_a if in_a else only_b).append(bench)
        if not (in_a and in_b):
            continue
        rows = []
        setting = ""
        for column in columns[(bench.id, bench.version)]:
            i, j = column.index.get(a.key), column.index.get(b.key)
            if i is None or j is None:
                continue
            if column.setting != setting:
                setting = column.setting
                rows.append(
                    f'<tr class="setting-row"><th scope="rowgroup" colspan="7">'
                    f"{escape(setting)}</th></tr>"
                )
            verdict, row = _pair_row(column, i, j)
            counts[verdict] += 1
            rows.append(row)
            tested = ",".join(csv_number(m[i][j]) for m in column.matrices)
            csv_rows.append(
                f"{column.csv_prefix},{column.csv_scores[i]},{column.csv_scores[j]},"
                f"{tested},{verdict}"
            )
        blocks.append(
            {
                "bench": bench,
                "rows": Markup("\n".join(rows)),
                "untested": untested.get((bench.id, bench.version), Markup()),
            }
        )
    csv = CsvLines(
        f"{pair_slug(a.key, b.key)}.csv",
        (
            "benchmark",
            "benchmark_version",
            "setting",
            "metric",
            "a",
            "b",
            "a_minus_b",
            "lo",
            "hi",
            "p",
            "better",
        ),
        csv_rows,
    )
    html = str(
        template.render(
            a=a,
            b=b,
            csv_file=csv.filename,
            blocks=blocks,
            n_a=counts["A"],
            n_b=counts["B"],
            n_tied=counts["tied"],
            n_tests=sum(counts.values()),
            only_a=only_a,
            only_b=only_b,
            n_boot=stats.N_BOOT,
            alpha=stats.ALPHA,
            root="../",
            page_title=f"{_plain_label(a)} vs {_plain_label(b)}",
            **common,
        )
    )
    return html, csv


def metric_markup(column: Column, *, unit: bool = True) -> Markup:
    """A column's label as markup, the metric's name (from the spec) isolated."""
    version = f" v{column.version}" if column.versioned else ""
    percent = " (%)" if unit and column.percent else ""
    return Markup(f"{isolate(column.metric)}{escape(version)}{percent}")


def _reached_html(column: _PairColumn, i: int) -> Markup:
    """A DARTS reward's test accuracy under its score on a pair page (empty for others)."""
    reached = column.reached[i] if i < len(column.reached) else None
    if reached is None:
        return Markup()
    return Markup('<span class="reached{}" title="{}">{}</span>').format(
        " below" if reached.below else "", reached.title, reached.note
    )


def _pair_row(column: _PairColumn, i: int, j: int) -> tuple[str, str]:
    """The verdict and the table row (markup: the only text, the label, is escaped already)."""
    diffs, los, his, p_values = column.matrices  # lists: no numpy scalar per cell
    diff = diffs[i][j]
    p = p_values[i][j]
    verdict = "tied"
    if p < stats.ALPHA and diff != 0:
        verdict = "A" if (diff > 0) == column.higher_is_better else "B"
    percent = column.percent
    lo = format_diff(los[i][j], percent=percent, unit=False)
    hi = format_diff(his[i][j], percent=percent, unit=False)
    attrs = ' class="primary-row"' if column.primary else ""
    row = (
        f'<tr{attrs}><td title="{escape(column.title)}">{column.metric}</td>'
        f"<td>{column.scores[i]}{_reached_html(column, i)}</td>"
        f"<td>{column.scores[j]}{_reached_html(column, j)}</td>"
        f"<td>{format_diff(diff, percent=percent)}</td>"
        f"<td>{lo} to {hi}</td><td>{format_p(p)}</td>"
        + ('<td class="tied">tied</td></tr>' if verdict == "tied" else f"<td>{verdict}</td></tr>")
    )
    return verdict, row


# -- glossary -------------------------------------------------------------------------------


def _glossary(env: Environment, model: SiteModel, common: dict[str, Any]) -> str:
    """glossary.html: every registered metric, every metric function the records name, and
    the table terms (:mod:`harness.site.glossary`)."""
    functions: dict[str, set[str]] = {}
    for bench in model.benchmarks:
        for plan in bench.settings:
            for column in plan.columns:
                functions.setdefault(column.function, set()).add(column.metric)
    metric_entries, terms = glossary.glossary_entries(functions)
    return env.get_template("glossary.html").render(
        metric_entries=metric_entries, terms=terms, root="", page_title="Glossary", **common
    )


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


# -- rendering ------------------------------------------------------------------------------


@cache
def _environment() -> Environment:
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
    env.globals["gloss"] = glossary_link
    env.globals["term_anchor"] = glossary.term_anchor
    env.globals["metric_anchor"] = glossary.metric_anchor
    return env


def _write(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
