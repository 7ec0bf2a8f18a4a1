"""``results.json``: the site for machines -- every record, plus the ranks and groups computed.

See docs/site.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from harness import __version__ as harness_version
from harness.core.errors import HarnessError
from harness.records import RunRecord, run_key
from harness.results import standing
from harness.results.records_io import RECORD_FORMAT, describe_key
from harness.results.standing import Badge
from harness.site import stats
from harness.site.model import BenchmarkPage, RankMatrices, SiteModel, data_badges
from harness.site.reported import Beside, reported_beside

__all__ = ["FORMAT", "results_json"]

FORMAT = "zsl-leaderboard-results/3"


def record_line(record: RunRecord) -> str:
    """The record file's envelope as one line of canonical JSON (the id hashes the same text)."""
    try:
        canonical = json.dumps(
            record.model_dump(mode="json"),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except ValueError as err:
        raise HarnessError(
            f"run of {describe_key(run_key(record))} cannot be written to results.json: "
            f"{err}; records hold finite numbers only"
        ) from err
    digest = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return f'{{"format":"{RECORD_FORMAT}","id":"{digest}","record":{canonical}}}'


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def summary(model: SiteModel) -> dict[str, Any]:
    """Everything of ``results.json`` except the records."""
    benchmarks = []
    for bench in model.benchmarks:
        settings = []
        for plan in bench.settings:
            column = plan.primary
            ranking = []
            for key in plan.shown:
                sub = bench.records[key].submission
                entry = column.entries.get(key) if column is not None else None
                apart = key in bench.transductive
                ranking.append(
                    {
                        "submission": sub.name,
                        "version": sub.version,
                        "slug": key,
                        "transductive": apart,
                        "data": [b.text for b in data_badges(bench.records[key].benchmark)],
                        "counted": key not in bench.uncounted,
                        "rank": column.rank_of(key)[0] if column is not None else None,
                        "group": (plan.transductive_group_of if apart else plan.group_of).get(key),
                        "rank_combined": column.combined_ranks.get(key) if column else None,
                        "group_combined": plan.combined_group_of.get(key),
                        "value": _number(entry.value) if entry is not None else None,
                        "interval": [entry.interval.lo, entry.interval.hi]
                        if entry is not None and entry.interval is not None
                        else None,
                    }
                )
            settings.append(
                {
                    "setting": plan.setting,
                    "primary": {"metric": column.metric, "version": column.version}
                    if column is not None
                    else None,
                    "groups_tested": column is not None and column.tests is not None,
                    "ranking": ranking,
                    "groups": plan.groups,
                    "transductive_groups": plan.transductive_groups,
                    "combined_groups": plan.combined_groups,
                    "columns": [
                        {
                            "metric": c.metric,
                            "version": c.version,
                            "function": c.function,
                            "higher_is_better": c.higher_is_better,
                            "paired_tests": c.tests is not None,
                        }
                        for c in plan.columns
                    ],
                }
            )
        benchmarks.append(
            {
                "id": bench.id,
                "version": bench.version,
                "title": bench.title,
                "hash": bench.hash,
                "spec_hash": bench.spec_hash,
                "page": f"benchmarks/{bench.filename}",
                "data": _data(bench),
                "settings": settings,
                "reported": [_reported(bench, b) for b in reported_beside(bench, model.reported)],
            }
        )
    return {
        "format": FORMAT,
        "harness_version": harness_version,
        "tests": {
            "test": "class-level paired bootstrap (harness.metrics.comparison)",
            "alpha": stats.ALPHA,
            "n_boot": stats.N_BOOT,
            "seed": stats.SEED,
            "level": stats.LEVEL,
            "groups": "walking down the ranking, a run joins the current group when its test "
            "against the group's leader has p >= alpha, else it leads a new group",
        },
        "benchmarks": benchmarks,
        **_rank_keys(model.ranks),
        "left_out": [
            {
                "benchmark": item.bench.id,
                "version": item.bench.version,
                "why": item.why,
                "runs": list(item.keys),
            }
            for item in model.left_out
        ],
        "with_uncounted": _rank_keys(model.ranks_with_uncounted)
        if model.ranks_with_uncounted is not None
        else None,
        "submissions": [
            {
                "submission": s.name,
                "version": s.version,
                "slug": key,
                "page": f"submissions/{key}.html",
                "transductive": s.transductive,
            }
            for key, s in model.submissions.items()
        ],
    }


def _data(bench: BenchmarkPage) -> dict[str, Any]:
    """The benchmark's data badges (:func:`harness.results.standing.data_badges` of each run,
    once) and whether its runs count across benchmarks by default."""
    found: dict[str, Badge] = {}
    for record in bench.records.values():
        for badge in standing.data_badges(record.benchmark):
            found.setdefault(badge.key, badge)
    return {
        "badges": [
            {"key": b.key, "label": b.label, "title": b.title, "counted": b.counted}
            for b in sorted(found.values(), key=lambda b: b.key)
        ],
        "counted": not bench.uncounted,
    }


def _reported(bench: BenchmarkPage, item: Beside) -> dict[str, Any]:
    sub = bench.records[item.key].submission
    return {
        "submission": sub.name,
        "version": sub.version,
        "setting": item.column.setting,
        "metric": item.column.metric,
        "reported_percent": item.value.percent,
        "paper": item.value.paper,
        "short": item.value.short,
        "table": item.value.table,
        "transcribed_from": item.value.transcribed_from,
        "reproduced": _number(item.entry.value),
        "difference_pp": item.difference,
        "not_compared": item.why_not or None,
    }


def _rank_keys(ranks: RankMatrices) -> dict[str, Any]:
    return {
        "rank_matrices": _matrices(ranks.inductive),
        "rank_matrices_transductive": _matrices(ranks.transductive),
        "rank_matrices_combined": _matrices(ranks.combined),
    }


def _matrices(by_setting: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        setting: {
            "benchmarks": ranks["benchmarks"],
            "submissions": ranks["submissions"],
            "ranks": [[_number(v) for v in row] for row in ranks["ranks"].tolist()],
            "mean_rank": [float(v) for v in ranks["mean_rank"]],
            "n_benchmarks": [int(v) for v in ranks["n_benchmarks"]],
        }
        for setting, ranks in by_setting.items()
    }


def results_json(model: SiteModel) -> str:
    """The text of ``results.json``: the summary, then the records one per line."""
    head = json.dumps(summary(model), sort_keys=True, indent=1, ensure_ascii=False)
    records = sorted((r for bench in model.benchmarks for r in bench.records.values()), key=run_key)
    return "".join(
        (
            head[:-1].rstrip() + ',\n "records": [\n',
            ",\n".join(record_line(r) for r in records),
            "\n ]\n}\n",
        )
    )
