"""The run record: everything a score needs to be reproduced, as one JSON-serializable object.

The scorer produces a :class:`RunRecord`; the store persists it; the site renders it. The record
binds the benchmark hash, the package hash, the prediction hashes, the harness and metric
versions, the runner, the environment and the timings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from harness.audit import LeakageAudit
from harness.identity import identity_text

__all__ = [
    "BenchmarkInfo",
    "ClassValues",
    "Interval",
    "RunKey",
    "RunRecord",
    "ScoreEntry",
    "Setting",
    "SubmissionInfo",
    "run_key",
]

Setting = Literal["zsl", "gzsl"]
#: A run's identity: benchmark id, benchmark version, submission name, submission version.
RunKey = tuple[str, int, str, str]


class Interval(BaseModel):
    """A bootstrap confidence interval of a score."""

    model_config = ConfigDict(extra="forbid")

    lo: float
    hi: float
    level: float = 0.95
    scheme: str = Field(description="'images_within_class' or 'classes'")
    n_boot: int
    method: str = Field("percentile", description="how the interval was read off the samples")


class ClassValues(BaseModel):
    """Per-class means of a score's per-image values: what a paired test between two runs needs.

    Runs of one benchmark version score the same images, so two records' class values line up
    class by class. Resampling classes (within their groups) with the same draws for every run
    gives the class-level paired bootstrap of :mod:`harness.metrics.comparison`; per-image values
    are not kept (a record would grow with the test set).
    """

    model_config = ConfigDict(extra="forbid")

    combine: Literal["class_mean", "image_mean", "harmonic_of_groups"]
    classes: list[int] = Field(description="candidate columns that have test images, ascending")
    counts: list[int] = Field(description="number of test images of each class")
    groups: list[int] = Field(description="group id of each class (GZSL: 0 seen, 1 unseen)")
    means: list[float] = Field(description="mean per-image value of each class")


class ScoreEntry(BaseModel):
    """One metric's result in one setting."""

    model_config = ConfigDict(extra="forbid")

    setting: Setting
    metric: str = Field(description="name as written in the spec, with parameters, e.g. 'top1'")
    function: str = Field(description="registry name of the metric function")
    version: str
    value: float
    higher_is_better: bool = True
    details: dict[str, Any] = Field(default_factory=dict)
    interval: Interval | None = None
    class_values: ClassValues | None = Field(
        None, description="per-class means for paired tests; None when the metric has none"
    )


class BenchmarkInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    version: int
    title: str
    hash: str
    spec_hash: str
    primary: dict[str, str] = Field(default_factory=dict, description="setting -> metric key")
    n_classes: int = 0
    n_seen: int = 0
    n_unseen: int = 0
    structure: dict[str, Any] = Field(
        default_factory=dict,
        description="structure diagnostics of the split in the hierarchy (structural ratio, "
        "hops from each test class to the nearest training class); empty without a hierarchy",
    )

    @field_validator("id")
    @classmethod
    def _one_spelling(cls, value: str) -> str:
        # An id names pages and record files: one NFC spelling, nothing invisible in it.
        return identity_text(value, "benchmark id")


class SubmissionInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    kind: Literal["predictions", "model"]
    package_hash: str
    authors: list[str] = Field(default_factory=list)
    paper: str | None = None
    url: str | None = None
    description: str = ""
    declarations: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name", "version")
    @classmethod
    def _one_spelling(cls, value: str, info: ValidationInfo) -> str:
        # The run's identity: "café" composed and decomposed is one submission, and a name may
        # not hide characters (bidi overrides, zero-width spaces) from the reader.
        return identity_text(value, f"submission {info.field_name}")

    @field_validator("authors")
    @classmethod
    def _authors_in_nfc(cls, value: list[str]) -> list[str]:
        return [identity_text(a, f"author {i + 1}", author=True) for i, a in enumerate(value)]


class RunRecord(BaseModel):
    """A scored run of one submission on one benchmark version."""

    model_config = ConfigDict(extra="forbid")

    benchmark: BenchmarkInfo
    submission: SubmissionInfo
    predictions_hashes: dict[str, str] = Field(description="setting -> sha256 of the scores")
    harness_version: str
    runner: str
    environment: dict[str, str] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict, description="step -> seconds")
    logs: dict[str, str] = Field(
        default_factory=dict,
        description="the runner's exit reason and the model's stdout/stderr (head and tail kept)",
    )
    leakage: LeakageAudit | None = Field(
        None,
        description="leakage audit of the test classes against the backbone's pre-training",
    )
    scores: list[ScoreEntry]
    created_at: datetime

    def score(self, setting: str, metric: str) -> ScoreEntry | None:
        for entry in self.scores:
            if entry.setting == setting and entry.metric == metric:
                return entry
        return None


def run_key(record: RunRecord) -> RunKey:
    """The run's identity (and the store's order): benchmark id and version, submission name and
    version. The store keeps one run per key; a record file is named by it."""
    return (
        record.benchmark.id,
        record.benchmark.version,
        record.submission.name,
        record.submission.version,
    )
