"""Run records for the site tests: small hand-made ones, hostile ones, and the benchmark's.

``make_record`` builds a record from ``{metric: value}`` per setting, with optional per-class
values (so a test can hand-compute what the paired tests must find). ``synthetic_records`` are
the realistic records of ``bench/site_scale.py`` (curves, intervals, class values, leakage,
declarations), scaled down.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from harness.audit import LeakageAudit
from harness.records import (
    BenchmarkInfo,
    ClassValues,
    Interval,
    RunRecord,
    ScoreEntry,
    SubmissionInfo,
)
from tests.conftest import REPO

T0 = datetime(2024, 5, 17, 12, 0, tzinfo=UTC)
XSS_NAME = "<script>alert(1)</script>"
XSS_DESCRIPTION = '<img src=x onerror="alert(2)"> & more'


def make_record(
    name: str,
    *,
    zsl: dict[str, float] | None = None,
    gzsl: dict[str, float] | None = None,
    version: str = "1.0",
    benchmark: str = "cub-demo",
    benchmark_version: int = 1,
    benchmark_hash: str = "sha256:" + "b" * 64,
    primary: dict[str, str] | None = None,
    lower_is_better: frozenset[str] = frozenset(),
    kind: str = "model",
    paper: str | None = "https://arxiv.org/abs/1503.08677",
    url: str | None = None,
    description: str = "",
    minutes: int = 0,
    class_means: dict[str, list[float]] | None = None,
    metric_versions: dict[str, str] | None = None,
    declarations: dict[str, Any] | None = None,
    leakage: LeakageAudit | None = None,
    logs: dict[str, str] | None = None,
    interval: float | None = None,
    functions: dict[str, str] | None = None,
    family: str | None = None,
    family_member: str | None = None,
) -> RunRecord:
    """A record whose scores are given as {metric: value} per setting.

    ``class_means[metric]`` gives that metric's per-class means (one image per class, all in
    group 0, reduced by class mean); ``interval`` adds ``value ± interval`` to every score;
    ``functions[metric]`` names a metric's function (default ``<metric>_score``).
    """
    functions = functions or {}
    class_means = class_means or {}
    versions = metric_versions or {}
    scores = []
    for setting, values in (("zsl", zsl or {}), ("gzsl", gzsl or {})):
        for metric, value in values.items():
            means = class_means.get(f"{setting}/{metric}", class_means.get(metric))
            scores.append(
                ScoreEntry(
                    setting=setting,
                    metric=metric,
                    function=functions.get(metric, f"{metric}_score"),
                    version=versions.get(metric, "1"),
                    value=value,
                    higher_is_better=metric not in lower_is_better,
                    interval=Interval(
                        lo=value - interval,
                        hi=value + interval,
                        scheme="images_within_class",
                        n_boot=1000,
                    )
                    if interval is not None
                    else None,
                    class_values=ClassValues(
                        combine="class_mean",
                        classes=list(range(len(means))),
                        counts=[1] * len(means),
                        groups=[0] * len(means),
                        means=means,
                    )
                    if means is not None
                    else None,
                )
            )
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=benchmark,
            version=benchmark_version,
            title=f"{benchmark.upper()} demo",
            hash=benchmark_hash,
            spec_hash="sha256:" + "c" * 64,
            primary=primary if primary is not None else {"zsl": "top1", "gzsl": "H"},
            n_classes=200,
            n_seen=150,
            n_unseen=50,
            family=family,
            family_member=family_member,
        ),
        submission=SubmissionInfo.model_validate(
            {
                "name": name,
                "version": version,
                "kind": kind,
                "package_hash": "sha256:" + "a" * 64,
                "authors": ["A. Author"],
                "paper": paper,
                "url": url,
                "description": description,
                "declarations": declarations
                if declarations is not None
                else {"class_embedding": "attributes", "transductive": False},
            }
        ),
        predictions_hashes={"zsl": "sha256:" + "d" * 64, "gzsl": "sha256:" + "e" * 64},
        harness_version="0.1.0",
        runner="local",
        environment={"python": "3.11.7"},
        timings={"fit": 1.25},
        logs=logs if logs is not None else {"reason": "ok", "stdout": "", "stderr": ""},
        leakage=leakage,
        scores=scores,
        created_at=T0 + timedelta(minutes=minutes),
    )


def sample_records() -> list[RunRecord]:
    """Three submissions on cub-demo (one hostile) and one on awa2."""
    return [
        make_record(
            "ale",
            zsl={"top1": 0.5512, "top5": 0.8},
            gzsl={"seen": 0.6, "unseen": 0.3, "H": 0.4},
        ),
        make_record(
            XSS_NAME,
            version="<b>2</b>",
            zsl={"top1": 0.6234, "top5": 0.9},
            gzsl={"seen": 0.7, "unseen": 0.2, "H": 0.311},
            paper="javascript:alert(1)",
            url="JaVaScRiPt:alert(document.cookie)",
            description=XSS_DESCRIPTION,
            kind="predictions",
            minutes=5,
        ),
        make_record(
            "devise",
            zsl={"top1": 0.4, "top5": 0.7},
            gzsl={"seen": 0.55, "unseen": 0.45, "H": 0.495},
            paper=None,
            url="http://example.org/devise",
            minutes=10,
        ),
        make_record("sje", benchmark="awa2", zsl={"top1": 0.611}),
    ]


def _site_scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("site_scale", REPO / "bench" / "site_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic_records(n_submissions: int = 4, n_benchmarks: int = 2) -> list[RunRecord]:
    """The benchmark's realistic records (bench/site_scale.py), scaled down."""
    records: list[RunRecord] = _site_scale().make_records(n_submissions, n_benchmarks)
    return records


def hostile_copy(record: RunRecord, name: str = XSS_NAME) -> RunRecord:
    """``record``'s scores under a hostile submission: markup name, script URL, HTML text."""
    sub = record.submission.model_copy(
        update={
            "name": name,
            "version": '1"><svg onload=alert(3)>',
            "paper": "javascript:alert(1)",
            "url": " javascript:alert(document.domain)",
            "description": XSS_DESCRIPTION,
            "authors": ["<b>Mallory</b>"],
            "declarations": {"transductive": True, "<i>key</i>": "<script>x</script>"},
        }
    )
    return record.model_copy(
        update={
            "submission": sub,
            "logs": {"reason": "ok", "stdout": "<script>alert(4)</script>\n", "stderr": ""},
        }
    )
