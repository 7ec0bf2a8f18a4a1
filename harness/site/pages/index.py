"""index.html: every benchmark with its leaders, the submissions, and the rank matrices.

Leaders and rank matrices follow the ranking rule of the benchmark tables: transductive runs are
ranked apart, and a combined ranking of every run is offered only where some are transductive.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from jinja2 import Environment

from harness.site import figures
from harness.site.csv_tables import RANK_HEADER, CsvTable
from harness.site.model import (
    SETTING_LABELS,
    UNCOUNTED,
    UNCOUNTED_SUFFIX,
    BenchmarkPage,
    RankMatrices,
    SettingTable,
    SiteModel,
    setting_key,
)
from harness.site.pages.leakage import benchmark_leakage
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.shared import (
    FLAGS,
    Ranking,
    badge_texts,
    filter_flags,
    left_out_note,
    metric_markup,
    protocol_badges,
    rankings,
    score_interval,
)
from harness.site.slugs import slug
from harness.site.text import format_value


def index_page(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """The index page and the CSV files of its tables."""
    rows = []
    for bench in model.benchmarks:
        leaders = []
        for plan in bench.settings:
            inductive, transductive = rankings(plan)[:2]
            for ranking, kind in ((inductive, False), (transductive, True)):
                lead = _leader(bench, plan, ranking, transductive=kind)
                if lead is not None:
                    leaders.append(lead)
        rows.append(
            {
                "bench": bench,
                "info": bench.latest.benchmark,
                "data": bench.data_badges,
                "leakage": benchmark_leakage(bench),
                "protocol": protocol_badges(bench.records.values()),
                "leaders": leaders,
            }
        )
    rank_views, rank_tables = _rank_views(model.ranks, "")
    uncounted_views: list[dict[str, Any]] = []
    if model.ranks_with_uncounted is not None:
        uncounted_views, tables = _rank_views(model.ranks_with_uncounted, UNCOUNTED_SUFFIX)
        rank_tables += tables
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
                "flags": " ".join(b.flag for b in badges if b.flag in FLAGS),
                "search": sub.label.lower(),
            }
        )
    tables = [*_index_tables(model), *rank_tables]
    html = env.get_template("index.html").render(
        benchmarks=rows,
        submissions=subs,
        rank_views=rank_views,
        uncounted_views=uncounted_views,
        # a filter for runs on data left out by default only where a submission has some
        submission_flags=filter_flags(
            any(b.flag == UNCOUNTED for sub in model.submissions.values() for b in sub.badges)
        ),
        left_out=left_out_note(model.left_out),
        csv_files={"benchmarks": tables[0].filename, "submissions": tables[1].filename},
        root="",
        page_title="Leaderboard",
        **common,
    )
    yield PageFile("index.html", html)
    for table in tables:
        yield TableFile("", table)


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
                badge_texts(bench.data_badges),
                len(bench.records) - len(bench.uncounted),
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
                "data",
                "submissions_counted",
            ),
            list(benchmarks),
        ),
        CsvTable(
            "index-submissions.csv",
            ("submission", "version", "kind", "authors", "benchmarks", "badges"),
            list(subs),
        ),
    )


def _rank_views(ranks: RankMatrices, view: str) -> tuple[list[dict[str, Any]], list[CsvTable]]:
    """Per setting, its rank matrices (inductive, transductive, combined) as figures and table
    rows, and their CSV tables; ``view`` ends every id and file name ("" or
    :data:`UNCOUNTED_SUFFIX`: the matrices with the runs left out by default)."""
    settings = {*ranks.inductive, *ranks.transductive, *ranks.combined}
    views = []
    tables: list[CsvTable] = []
    for setting in sorted(settings, key=setting_key):
        apart = ranks.transductive.get(setting)
        main_view = _rank_view(ranks.inductive.get(setting), setting, "", view)
        apart_view = _rank_view(apart, setting, "transductive", view)
        # one ranking of every run: only worth offering when some are transductive
        combined_view = (
            _rank_view(ranks.combined.get(setting), setting, "combined", view) if apart else None
        )
        views.append(
            {
                "setting": setting,
                "id": f"ranks-{setting}{view}",
                "label": SETTING_LABELS.get(setting, setting),
                "main": main_view,
                "transductive": apart_view,
                "combined": combined_view,
            }
        )
        tables += [v["csv"] for v in (main_view, apart_view, combined_view) if v is not None]
    return views, tables


def _rank_view(
    ranks: dict[str, Any] | None, setting: str, which: str, view: str
) -> dict[str, Any] | None:
    """A rank matrix's figure and table rows; ``which`` is "", "transductive" or "combined"."""
    if ranks is None:
        return None
    suffix = (f"-{which}" if which else "") + view
    fig = figures.rank_figure(
        ranks, setting, lambda path: path, suffix=suffix, uncounted=bool(view)
    )
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
    heads = [{"bench": b, "badges": b.data_badges, "uncounted": bool(b.uncounted)} for b in benches]
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
        "benchmarks": heads,
        "rows": view_rows,
        "csv": csv,
    }


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
        "interval": score_interval(entry, column),
        "sub": bench.records[key].submission,
        "anchor": plan.anchors[key],
        "tied": tied,
        "tied_title": title,
        "transductive": transductive,
    }


pages.add(
    "index",
    Page(
        order=10,
        render=index_page,
        nav=(
            NavLink("Benchmarks", "index.html#benchmarks", order=10),
            NavLink("Submissions", "index.html#submissions", order=20),
            NavLink("Ranks", "index.html#ranks", order=30),
        ),
    ),
)
