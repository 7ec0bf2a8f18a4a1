"""Run records for the store tests: the small one of most tests and big ones with curves.

Curves have the shapes the metrics produce (the registrations at the end of
``harness/metrics/darts.py`` and ``calibrated_stacking.py``): DARTS gives a list of points
(``target``, ``lambda``, ``accuracy``, ``info_gain``, ``share_*``), AUSUC a dict of equal-length
``seen``/``unseen`` lists plus ``n_points``. Values are spelled out or derived from
the arguments, so every record is reproducible from them (the concurrency test rebuilds a
record from the tag it finds in the store).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from harness.records import (
    BenchmarkInfo,
    ClassValues,
    Interval,
    RunRecord,
    ScoreEntry,
    SubmissionInfo,
)

T0 = datetime(2024, 5, 17, 12, 30, 15, 123456, tzinfo=UTC)

DARTS_TARGETS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)


def make_record(
    *,
    benchmark: str = "cub-demo",
    benchmark_version: int = 1,
    benchmark_hash: str = "sha256:" + "b" * 64,
    name: str = "ale",
    version: str = "1.0",
    package_hash: str = "sha256:" + "a" * 64,
    zsl_top1: float = 0.5,
    gzsl: tuple[float, float, float] | None = (0.6, 0.4, 0.48),
    created_at: datetime = T0,
    extra_scores: list[ScoreEntry] | None = None,
    structure: dict[str, Any] | None = None,
) -> RunRecord:
    """A run record with ZSL top-1/top-5 and (optionally) GZSL seen/unseen/H scores."""
    scores = [
        ScoreEntry(
            setting="zsl",
            metric="top1",
            function="top_k_accuracy_score",
            version="1",
            value=zsl_top1,
            details={"per_class": [zsl_top1, 1.0], "k": 1},
        ),
        ScoreEntry(
            setting="zsl",
            metric="top5",
            function="top_k_accuracy_score",
            version="1",
            value=min(1.0, zsl_top1 + 0.3),
        ),
    ]
    if gzsl is not None:
        for metric, value in zip(("seen", "unseen", "H"), gzsl, strict=True):
            scores.append(
                ScoreEntry(
                    setting="gzsl",
                    metric=metric,
                    function=f"gzsl_{metric}",
                    version="2",
                    value=value,
                )
            )
    scores.extend(extra_scores or [])
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=benchmark,
            version=benchmark_version,
            title="CUB-200 demo",
            hash=benchmark_hash,
            spec_hash="sha256:" + "c" * 64,
            primary={"zsl": "top1", "gzsl": "H"},
            n_classes=200,
            n_seen=150,
            n_unseen=50,
            structure=structure if structure is not None else {},
        ),
        submission=SubmissionInfo(
            name=name,
            version=version,
            kind="model",
            package_hash=package_hash,
            authors=["A. Author", "B. Author"],
            paper="https://example.org/paper",
            url=None,
            description="attribute label embedding",
            declarations={"class_embedding": "attributes", "transductive": False},
        ),
        predictions_hashes={"zsl": "sha256:" + "d" * 64, "gzsl": "sha256:" + "e" * 64},
        harness_version="0.1.0",
        runner="local",
        environment={"python": "3.11.7", "numpy": "1.26.4"},
        timings={"fit": 1.5, "predict": 0.25},
        scores=scores,
        created_at=created_at,
    )


def darts_points(shift: float = 0.0) -> list[dict[str, Any]]:
    """A DARTS curve as ``darts_area``/``darts_reward`` write it: one point per target."""
    points = []
    for i, target in enumerate(DARTS_TARGETS):
        accuracy = round(min(1.0, target + 0.02 + shift / 10), 6)
        leaf = round(1.0 - i / len(DARTS_TARGETS), 6)
        points.append(
            {
                "target": target,
                "lambda": round(i * 0.125 + shift, 6),
                "accuracy": accuracy,
                "info_gain": round(1.0 - accuracy * 0.9, 6),
                "share_leaf": leaf,
                "share_internal": round((1.0 - leaf) * 0.75, 6),
                "share_root": round((1.0 - leaf) * 0.25, 6),
            }
        )
    return points


def ausuc_curve(n: int, shift: float = 0.0) -> dict[str, Any]:
    """A seen-unseen curve as ``ausuc`` writes it: equal-length lists and the full length."""
    seen = [round(0.9 * (1 - i / max(n - 1, 1)) + shift / 100, 6) for i in range(n)]
    unseen = [round(0.8 * i / max(n - 1, 1), 6) for i in range(n)]
    return {"seen": seen, "unseen": unseen, "n_points": 10 * n + 3}


def class_values(n_classes: int, shift: float = 0.0) -> ClassValues:
    return ClassValues(
        combine="harmonic_of_groups",
        classes=list(range(0, 2 * n_classes, 2)),
        counts=[10 + i for i in range(n_classes)],
        groups=[i % 2 for i in range(n_classes)],
        means=[round((i + 1) / (n_classes + 1) + shift / 100, 6) for i in range(n_classes)],
    )


def curve_scores(tag: dict[str, Any], shift: float = 0.0, n_ausuc: int = 50) -> list[ScoreEntry]:
    """One DARTS area, one DARTS reward and one AUSUC score, each with its curve."""
    return [
        ScoreEntry(
            setting="zsl",
            metric="darts",
            function="darts_area",
            version="1",
            value=0.4 + shift / 10,
            details={
                "temperature": 1.5,
                "lambda_chosen_on": "validation",
                "curve": darts_points(shift),
                **tag,
            },
            interval=Interval(lo=0.35, hi=0.45, scheme="images_within_class", n_boot=200),
        ),
        ScoreEntry(
            setting="zsl",
            metric="darts@val90",
            function="darts_reward",
            version="1",
            value=0.3 + shift / 10,
            details={
                "temperature": None,
                "lambda_chosen_on": "validation",
                "curve": darts_points(shift + 0.5),
                "target": 0.9,
                "lambda": 0.75,
                "test_accuracy": 0.91,
                **tag,
            },
            class_values=class_values(6, shift),
        ),
        ScoreEntry(
            setting="gzsl",
            metric="AUSUC",
            function="ausuc",
            version="1",
            value=0.33 + shift / 10,
            details={"curve": ausuc_curve(n_ausuc, shift), **tag},
        ),
    ]


def big_record(
    *,
    benchmark: str = "awa2",
    name: str = "eszsl",
    version: str = "1.0",
    n_plain: int = 30,
    n_ausuc: int = 400,
    shift: float = 0.0,
    tag: dict[str, Any] | None = None,
) -> RunRecord:
    """A record with ``n_plain`` plain scores (intervals, class values) and three curves.

    ``tag`` goes into every score's details, so a test can tell which save each stored score
    came from; ``shift`` changes every value.
    """
    tag = dict(tag or {})
    plain = [
        ScoreEntry(
            setting="zsl" if i % 2 else "gzsl",
            metric=f"m{i:02d}",
            function="per_class_top_k_accuracy",
            version=str(1 + i % 3),
            value=round((i + 1) / (n_plain + 2) + shift / 100, 6),
            higher_is_better=i % 5 != 0,
            details={"k": i, "per_class": [round(i / 7, 6), 1.0], **tag},
            interval=(
                Interval(lo=0.1, hi=0.2 + i / 100, scheme="classes", n_boot=100 + i)
                if i % 3 == 0
                else None
            ),
            class_values=class_values(4, shift + i) if i % 4 == 0 else None,
        )
        for i in range(n_plain)
    ]
    record = make_record(
        benchmark=benchmark,
        name=name,
        version=version,
        zsl_top1=round(0.5 + shift / 100, 6),
        gzsl=None,
        extra_scores=curve_scores(tag, shift, n_ausuc) + plain,
        structure={"structural_ratio": 0.25, "hops": {"1": 10, "2": 3}},
    )
    for entry in record.scores:
        entry.details.update(tag)
    return record
