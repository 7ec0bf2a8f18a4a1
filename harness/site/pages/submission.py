"""submissions/<name>@<version>.html: a submission's metadata, every score, per-class bars,
hyperparameters, hashes, logs (written as text files under ``logs/``) and its comparisons.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment

from harness.records import ClassValues, RunRecord, ScoredClass
from harness.results import standing
from harness.site.csv_tables import CsvCell, CsvTable
from harness.site.model import BenchmarkPage, SiteModel, Submission, data_badges, record_badges
from harness.site.pages.columns import column_title, darts_reached
from harness.site.pages.page import Page, PageFile, SiteFile, TableFile, pages
from harness.site.pages.pair import comparable_pairs
from harness.site.pages.shared import (
    badge_texts,
    direction,
    interval_note,
    metric_markup,
    plain_label,
    score_interval,
)
from harness.site.reported import reported_beside
from harness.site.slugs import pair_slug
from harness.site.text import Link, format_value, isolate_text, safe_href


def submission_page(
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
        badges = data_badges(record.benchmark)
        beside = {
            (b.column.setting, b.column.metric, b.column.version): b
            for b in reported_beside(bench, model.reported, key=sub.key)
        }
        columns_shown = []
        for plan in bench.settings:
            for column in plan.columns:
                entry = column.entries.get(sub.key)
                if entry is None:
                    continue
                columns_shown.append(column)
                reported = beside.get((plan.setting, column.metric, column.version))
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
                        badge_texts(badges),
                        sub.key not in bench.uncounted,
                        reported.value.percent if reported else None,
                        reported.value.source if reported else None,
                        reported.difference if reported else None,
                    )
                )
                rows.append(
                    {
                        "setting": plan.label,
                        "metric": metric_markup(column, unit=False),
                        "direction": direction(column),
                        "metric_title": column_title(column),
                        "reported": reported,
                        "reached": darts_reached(entry),
                        "primary": column.primary,
                        "value": format_value(entry.value, percent=column.percent)
                        + ("%" if column.percent else ""),
                        "interval": score_interval(entry, column),
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
                "badges": [*badges, *record_badges(record)],
                "left_out": standing.excluded_why(record.benchmark),
                "rows": rows,
                "has_reported": bool(beside),
                "interval_note": interval_note(columns_shown, groups=True),
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
            "data",
            "counted_across_benchmarks",
            "reported_percent",
            "reported_in",
            "difference_pp",
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
        page_title=plain_label(sub),
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


def run_logs(model: SiteModel, sub: Submission) -> tuple[dict[str, str], list[PageFile]]:
    """Each run's logs as UTF-8 text, ``logs/<submission>/<benchmark>-v<n>.txt``: {stem: path}
    and the files."""
    out = {}
    files = []
    benches = {(b.id, b.version): b for b in model.benchmarks}
    for record in sub.records:
        if not any(record.logs.values()):
            continue
        bench = benches[(record.benchmark.id, record.benchmark.version)]
        # Submitted parts between FSI and PDI: a text file has no elements to isolate them.
        lines = [
            f"{plain_label(sub)} on {isolate_text(bench.id)} v{bench.version}, "
            f"scored {record.created_at.isoformat()}",
            f"runner: {isolate_text(record.runner)}; "
            f"harness {isolate_text(record.harness_version)}",
            "",
        ]
        for name, text in sorted(record.logs.items(), key=lambda kv: (kv[0] != "reason", kv[0])):
            lines += [f"== {name} ==", text.rstrip("\n"), ""]
        path = f"logs/{sub.key}/{bench.stem}.txt"
        # A byte-order mark makes browsers read the file as UTF-8 even from file://.
        files.append(PageFile(path, "\ufeff" + "\n".join(lines)))
        out[bench.stem] = path
    return out, files


def submission_pages(
    env: Environment, model: SiteModel, common: dict[str, Any]
) -> Iterator[SiteFile]:
    """Every submission's page with its CSV, and its runs' logs."""
    pairs = comparable_pairs(model)
    template = env.get_template("submission.html")
    for sub in model.submissions.values():
        logs, log_files = run_logs(model, sub)
        yield from log_files
        html, csv = submission_page(template, model, sub, logs, pairs, common)
        yield PageFile(f"submissions/{sub.filename}", html)
        yield TableFile("submissions", csv)


pages.add("submission", Page(order=50, render=submission_pages, folders=("submissions", "logs")))
