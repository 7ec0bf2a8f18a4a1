"""compare.html and compare/<a>--<b>.html: paired tests between two submissions.

Every tested column is prepared once (labels escaped, scores formatted, CSV text rendered) and
read by each pair page: a site of many submissions has a quadratic number of pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment
from markupsafe import Markup, escape

from harness.site import stats
from harness.site.csv_tables import CsvLines, csv_line, csv_number
from harness.site.model import Badge, BenchmarkPage, SiteModel, Submission, data_badges
from harness.site.pages.columns import Reached, column_title, darts_reached
from harness.site.pages.page import NavLink, Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.shared import direction, metric_markup, plain_label
from harness.site.slugs import pair_slug
from harness.site.text import format_diff, format_p, format_value, isolate


def comparable_pairs(model: SiteModel) -> list[tuple[Submission, Submission]]:
    """Every two submissions that ran a common benchmark, in key order."""
    ran: dict[str, set[tuple[str, int]]] = {
        key: {(r.benchmark.id, r.benchmark.version) for r in sub.records}
        for key, sub in model.submissions.items()
    }
    subs = list(model.submissions.values())
    return [(a, b) for i, a in enumerate(subs) for b in subs[i + 1 :] if ran[a.key] & ran[b.key]]


def compare_page(
    env: Environment,
    model: SiteModel,
    pairs: list[tuple[Submission, Submission]],
    common: dict[str, Any],
) -> str:
    """compare.html: the picker of two submissions and the list of every pair page."""
    return env.get_template("compare.html").render(
        options=[
            (sub, plain_label(sub) + (" (transductive)" if sub.transductive else ""))
            for sub in model.submissions.values()
        ],
        pairs=[(a, b, f"compare/{pair_slug(a.key, b.key)}.html") for a, b in pairs],
        root="",
        page_title="Compare",
        **common,
    )


def compare_pages(env: Environment, model: SiteModel, common: dict[str, Any]) -> Iterator[SiteFile]:
    """compare.html, then every comparable pair's page with its CSV under ``compare/``."""
    pairs = comparable_pairs(model)
    yield PageFile("compare.html", compare_page(env, model, pairs, common))
    template = env.get_template("pair.html")
    columns = pair_columns(model)
    for a, b in pairs:
        html, csv = pair_page(template, model, columns, a, b, common)
        yield PageFile(f"compare/{pair_slug(a.key, b.key)}.html", html)
        yield TableFile("compare", csv)


@dataclass
class PairColumn:
    """One tested column, prepared once for every pair page: labels escaped, scores formatted."""

    setting: str
    metric: Markup
    direction: Markup  # the better direction's arrow
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


def pair_columns(
    model: SiteModel,
) -> tuple[dict[tuple[str, int], list[PairColumn]], dict[tuple[str, int], Markup]]:
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
                    PairColumn(
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
                        direction=direction(column),
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


def pair_page(
    template: Any,
    model: SiteModel,
    prepared: tuple[dict[tuple[str, int], list[PairColumn]], dict[tuple[str, int], Markup]],
    a: Submission,
    b: Submission,
    common: dict[str, Any],
) -> tuple[str, CsvLines]:
    """The pair's page and its tests as one CSV (a row per test, every common benchmark)."""
    columns, untested = prepared
    blocks = []
    csv_rows: list[str] = []
    counts = {"A": 0, "B": 0, "tied": 0}
    # The verdict cell and CSV value of each outcome: the better submission's name, "tied".
    names = {"A": _name_markup(a), "B": _name_markup(b)}
    in_csv = {"A": csv_line((a.label,)), "B": csv_line((b.label,)), "tied": "tied"}
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
            verdict, row = _pair_row(column, i, j, names)
            counts[verdict] += 1
            rows.append(row)
            tested = ",".join(csv_number(m[i][j]) for m in column.matrices)
            csv_rows.append(
                f"{column.csv_prefix},{column.csv_scores[i]},{column.csv_scores[j]},"
                f"{tested},{in_csv[verdict]}"
            )
        found: dict[str, Badge] = {}
        for key in (a.key, b.key):
            for badge in data_badges(bench.records[key].benchmark):
                found.setdefault(badge.kind, badge)
        blocks.append(
            {
                "bench": bench,
                "data": list(found.values()),
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
            page_title=f"{plain_label(a)} vs {plain_label(b)}",
            **common,
        )
    )
    return html, csv


def _reached_html(column: PairColumn, i: int) -> Markup:
    """A DARTS reward's test accuracy under its score on a pair page (empty for others)."""
    reached = column.reached[i] if i < len(column.reached) else None
    if reached is None:
        return Markup()
    return Markup('<span class="reached{}" title="{}">{}</span>').format(
        " below" if reached.below else "", reached.title, reached.note
    )


def _name_markup(sub: Submission) -> Markup:
    """A submission's name and version in a cell of a pair page, each part isolated."""
    return Markup('{} <span class="muted">{}</span>').format(
        isolate(sub.name), isolate(sub.version)
    )


def _pair_row(column: PairColumn, i: int, j: int, names: dict[str, Markup]) -> tuple[str, str]:
    """The verdict ("A", "B" or "tied") and the table row, whose verdict cell names the better
    submission (``names``; markup: the label and the names are escaped already)."""
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
        f'<tr{attrs}><td title="{escape(column.title)}">{column.metric} {column.direction}</td>'
        f"<td>{column.scores[i]}{_reached_html(column, i)}</td>"
        f"<td>{column.scores[j]}{_reached_html(column, j)}</td>"
        f"<td>{format_diff(diff, percent=percent)}</td>"
        f"<td>{lo} to {hi}</td><td>{format_p(p)}</td>"
        + (
            '<td class="tied">tied</td></tr>'
            if verdict == "tied"
            else f"<td>{names[verdict]}</td></tr>"
        )
    )
    return verdict, row


pages.add(
    "compare",
    Page(
        order=60,
        render=compare_pages,
        nav=(NavLink("Compare", "compare.html", order=60),),
        folders=("compare",),
    ),
)
