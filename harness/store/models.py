"""The store's tables: benchmarks, submissions, runs, their scores and the scores' curve points.

One :class:`RunRow` per (benchmark version, submission version): re-running the same package on
the same benchmark version updates that row and replaces its :class:`ScoreRow` set. The run row
keeps the package hash it was made with, because a submission row holds only the latest
metadata of ``name@version``. Dictionaries and lists live in JSON columns. A run's ``hidden``
flag (``zsl results hide``) is the store's, not the record's: a hidden run is kept but left out
of exports and the site.

See docs/store.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, DateTime, Text, UniqueConstraint, false, text
from sqlmodel import Field, SQLModel

__all__ = [
    "BenchmarkRow",
    "CurvePointRow",
    "RunRow",
    "ScoreRow",
    "SubmissionRow",
]


def _json_column() -> Any:
    return Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


def _json_or_null() -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=True))


class BenchmarkRow(SQLModel, table=True):
    """One frozen benchmark version; ``hash`` and ``spec_hash`` never change for a version."""

    __tablename__ = "zsl_benchmark"
    __table_args__ = (UniqueConstraint("benchmark", "version", name="uq_benchmark_version"),)

    id: int | None = Field(default=None, primary_key=True)
    benchmark: str = Field(index=True, description="benchmark id from the spec")
    version: int
    hash: str
    title: str
    spec_hash: str
    primary: dict[str, str] = _json_column()
    n_classes: int = 0
    n_seen: int = 0
    n_unseen: int = 0
    # The server default fills the column for benchmarks stored before it existed (0002).
    structure: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=Column(JSON, nullable=False, server_default=text("'{}'")),
        description="structure diagnostics of the split (BenchmarkInfo.structure)",
    )
    # 0005: benchmarks stored before it have none ('[]').
    test_classes: list[dict[str, Any]] = Field(
        default_factory=list,
        sa_column=Column(JSON, nullable=False, server_default=text("'[]'")),
        description="classes with test images, names and nearest training class "
        "(BenchmarkInfo.test_classes)",
    )
    # 0006: benchmarks stored before it have none (NULL), as benchmarks outside a family.
    family: str | None = Field(
        default=None, description="the family's main member id (BenchmarkInfo.family)"
    )
    family_member: str | None = Field(
        default=None, description="this benchmark's label in its family (e.g. 'val2')"
    )
    # 0007: NULL for benchmarks of features brought as files, and those stored before.
    provenance: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON, nullable=True),
        description="the harness-made feature set and class embeddings (BenchmarkInfo.provenance)",
    )
    # 0009: NULL for benchmarks stored before it ("source not recorded").
    raw_inputs: dict[str, Any] | None = Field(
        default=None,
        sa_column=Column(JSON, nullable=True),
        description="where the raw inputs came from (BenchmarkInfo.raw_inputs)",
    )
    experimental: bool = Field(
        default=False,
        sa_column=Column(Boolean, nullable=False, server_default=false()),
        description="the spec marks the benchmark experimental (BenchmarkInfo.experimental)",
    )


class SubmissionRow(SQLModel, table=True):
    """The latest metadata of one submission package version (``name@version``)."""

    __tablename__ = "zsl_submission"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_submission_version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    version: str
    kind: str
    package_hash: str = Field(description="hash of the package last saved under name@version")
    authors: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    paper: str | None = None
    url: str | None = None
    code: str | None = None  # 0005
    bibtex: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # 0005
    # 0005: the package's README (head kept); submissions stored before it have none.
    readme: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    description: str = ""
    declarations: dict[str, Any] = _json_column()


class RunRow(SQLModel, table=True):
    """A scored run of one submission version on one benchmark version."""

    __tablename__ = "zsl_run"
    __table_args__ = (
        UniqueConstraint("benchmark_id", "submission_id", name="uq_run_benchmark_submission"),
    )

    id: int | None = Field(default=None, primary_key=True)
    benchmark_id: int = Field(foreign_key="zsl_benchmark.id", index=True, ondelete="RESTRICT")
    submission_id: int = Field(foreign_key="zsl_submission.id", index=True, ondelete="RESTRICT")
    package_hash: str = Field(description="hash of the package this run was made with")
    predictions_hashes: dict[str, str] = _json_column()
    harness_version: str
    runner: str
    environment: dict[str, str] = _json_column()
    timings: dict[str, float] = _json_column()
    leakage: dict[str, Any] = _json_column()
    logs: dict[str, str] = _json_column()
    # 0005: runs stored before it exposed none ('{}').
    hyperparameters: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        sa_column=Column(JSON, nullable=False, server_default=text("'{}'")),
        description="fit -> the hyperparameters the model chose (RunRecord.hyperparameters)",
    )
    # 0008: runs stored before it kept none ('{}').
    model_state: dict[str, str] = Field(
        default_factory=dict,
        sa_column=Column(JSON, nullable=False, server_default=text("'{}'")),
        description="fit -> content hash of its saved state (RunRecord.model_state)",
    )
    created_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False),
        description="when the run was scored (RunRecord.created_at), UTC",
    )
    updated_at: datetime = Field(
        sa_column=Column(DateTime(timezone=True), nullable=False),
        description="when this row was last written, UTC",
    )
    # Not part of the record: a store-side flag (``zsl results hide``); 0004 adds it.
    hidden: bool = Field(
        default=False,
        sa_column=Column(Boolean, nullable=False, server_default=false()),
        description="left out of exports and the site, kept in the store (zsl results hide)",
    )


class ScoreRow(SQLModel, table=True):
    """One metric's result in one setting of a run; ``position`` keeps the record's order.

    ``details`` is the score's details without its curve when ``curve_layout`` is set: the curve
    is in :class:`CurvePointRow` and ``curve_layout``/``curve_meta`` say how to put it back.
    """

    __tablename__ = "zsl_score"
    __table_args__ = (
        UniqueConstraint("run_id", "setting", "metric", name="uq_score_run_setting_metric"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="zsl_run.id", index=True, ondelete="CASCADE")
    position: int
    setting: str
    metric: str
    function: str
    version: str
    value: float
    higher_is_better: bool = True
    details: dict[str, Any] = _json_column()
    interval: dict[str, Any] | None = _json_or_null()
    class_values: dict[str, Any] | None = _json_or_null()
    curve_layout: str | None = Field(
        default=None,
        description="'points' (the curve was a list of points) or 'columns' (a dict of "
        "equal-length lists); None when the score keeps no curve rows",
    )
    curve_x: str | None = Field(default=None, description="key of each point read into x")
    curve_y: str | None = Field(default=None, description="key of each point read into y")
    curve_meta: dict[str, Any] | None = _json_or_null()


class CurvePointRow(SQLModel, table=True):
    """One operating point of a score's curve, in curve order.

    ``point`` is the whole point as stored in the record; ``x`` and ``y`` repeat two of its
    numbers (named by the score's ``curve_x``/``curve_y``: DARTS accuracy and information gain,
    seen-unseen unseen and seen accuracy) and are NULL for points without them.
    """

    __tablename__ = "zsl_curve_point"
    __table_args__ = (
        UniqueConstraint("score_id", "position", name="uq_curve_point_score_position"),
    )

    id: int | None = Field(default=None, primary_key=True)
    score_id: int = Field(foreign_key="zsl_score.id", ondelete="CASCADE")
    position: int
    x: float | None = None
    y: float | None = None
    point: Any = Field(sa_column=Column(JSON, nullable=False))
