"""``results.json``: the site for machines -- every record, plus the ranks and groups computed.

Layout (format ``zsl-leaderboard-results/1``)::

    {"format": ..., "harness_version": ..., "tests": {how groups were tested},
     "benchmarks": [{"id", "version", "title", "hash", "page",
                     "settings": [{"setting", "primary": {"metric", "version"} | null,
                                   "ranking": [{"submission", "version", "rank", "group",
                                                "value", "interval"}],
                                   "groups": [[...]]}]}],
     "rank_matrices": {setting: {"benchmarks", "submissions", "ranks", "mean_rank",
                                 "n_benchmarks"}},
     "records": [record file, one per line]}

Each line of ``records`` is exactly a record file of :mod:`harness.results.records_io` (its
``format``/``id``/``record`` envelope, with the same content id) written compactly, so a record
can be cut out of the site and verified. Keys are sorted and the records are in a fixed order
(benchmark, version, submission, version): the same records give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from harness import __version__ as harness_version
from harness.errors import HarnessError
from harness.records import RunRecord
from harness.results.records_io import RECORD_FORMAT, describe_key, record_key
from harness.site import stats
from harness.site.model import SiteModel

__all__ = ["FORMAT", "record_line", "write_results_json"]

FORMAT = "zsl-leaderboard-results/1"


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
            f"run of {describe_key(record_key(record))} cannot be written to results.json: "
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
            for key in plan.order:
                sub = bench.records[key].submission
                entry = column.entries.get(key) if column is not None else None
                ranking.append(
                    {
                        "submission": sub.name,
                        "version": sub.version,
                        "slug": key,
                        "rank": column.ranks.get(key) if column is not None else None,
                        "group": plan.group_of.get(key),
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
    matrices = {}
    for setting, ranks in model.rank_matrices.items():
        matrices[setting] = {
            "benchmarks": ranks["benchmarks"],
            "submissions": ranks["submissions"],
            "ranks": [[_number(v) for v in row] for row in ranks["ranks"].tolist()],
            "mean_rank": [float(v) for v in ranks["mean_rank"]],
            "n_benchmarks": [int(v) for v in ranks["n_benchmarks"]],
        }
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
        "rank_matrices": matrices,
        "submissions": [
            {
                "submission": s.name,
                "version": s.version,
                "slug": key,
                "page": f"submissions/{key}.html",
            }
            for key, s in model.submissions.items()
        ],
    }


def write_results_json(model: SiteModel, path: Path) -> None:
    """Write ``results.json``: the summary, then the records one per line."""
    head = json.dumps(summary(model), sort_keys=True, indent=1, ensure_ascii=False)
    records = sorted(
        (r for bench in model.benchmarks for r in bench.records.values()), key=record_key
    )
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(head[:-1].rstrip() + ',\n "records": [\n')
        handle.write(",\n".join(record_line(r) for r in records))
        handle.write("\n ]\n}\n")
