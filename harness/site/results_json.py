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
from harness.results.records_io import RECORD_FORMAT, describe_key
from harness.site import stats
from harness.site.model import SiteModel

__all__ = ["FORMAT", "results_json"]

FORMAT = "zsl-leaderboard-results/2"


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
                "settings": settings,
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
        "rank_matrices": _matrices(model.rank_matrices),
        "rank_matrices_transductive": _matrices(model.transductive_rank_matrices),
        "rank_matrices_combined": _matrices(model.combined_rank_matrices),
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
