"""What the literature reports for a method on a benchmark: data kept beside the reproductions.

``leaderboard/reported/*.yaml`` hold numbers papers print (GBU's Tables III and IV, say), each
file one paper and its values, each value with the table it is from and where it was
transcribed from. They are citations, never runs: the site shows one beside the harness's
reproduction of the same submission, benchmark, setting and metric, with the difference only
where the run used the verified release (:func:`harness.results.standing.is_verified_release`),
and never ranks them. Files are read as safe, bounded YAML (:mod:`harness.core.yamlio`) into
pydantic models; :func:`check_reported` checks them against the specs and the submissions.
Every problem names the file, the line and the key (``values[3].metric``).

See docs/site.md, "Reported values".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from harness.core import yamlio
from harness.core.errors import HarnessError
from harness.metrics import metrics
from harness.records import Setting
from harness.spec import MetricKey, Slug, Spec

__all__ = [
    "FORMAT",
    "ReportedError",
    "ReportedValue",
    "check_reported",
    "load_reported",
    "reported_in",
]

FORMAT = "zsl-reported/1"

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
HttpUrl = Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=500)]


class ReportedError(HarnessError):
    """A file of reported values is malformed, or names what does not exist."""


class ReportedEntry(BaseModel):
    """One number a paper reports, as its file lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    submission: Slug = Field(description="the submission of submissions/ that reproduces it")
    method: Text = Field(description="the method as the paper names it (DeViSE)")
    benchmark: Slug = Field(description="the benchmark id of the spec it was measured on")
    setting: Setting
    metric: MetricKey = Field(description="the spec's result key (top1, H)")
    percent: float = Field(ge=0.0, le=100.0, description="the value as printed, in percent")
    table: Text = Field(description="where in the paper: 'Table III'")
    transcribed_from: Text = Field(description="where the number was copied from")


class ReportedFile(BaseModel):
    """A file of ``leaderboard/reported/``: one paper and the values it reports."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["zsl-reported/1"]
    paper: Text = Field(description="the citation: authors, title, venue, year")
    short: ShortText = Field(description="the citation in a table cell: 'Xian et al. 2019'")
    url: HttpUrl | None = None
    values: list[ReportedEntry] = Field(min_length=1)


@dataclass(frozen=True)
class ReportedValue:
    """One reported value with its citation and its place (``file:line: values[i]``)."""

    submission: str
    method: str
    benchmark: str
    setting: str
    metric: str
    percent: float
    paper: str
    short: str
    url: str | None
    table: str
    transcribed_from: str
    where: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.submission, self.benchmark, self.setting, self.metric)

    @property
    def source(self) -> str:
        """``Xian et al. 2019, Table III``."""
        return f"{self.short}, {self.table}"


def load_reported(folder: Path) -> list[ReportedValue]:
    """Every value of the ``*.yaml`` files directly in ``folder``, files by name.

    Raises
    ------
    ReportedError
        ``folder`` is not a folder (or a symbolic link), a file is a link, not valid YAML, or
        not a valid file (every problem at once, each as ``file:line: key.path: message``), or
        two entries report the same submission, benchmark, setting and metric.
    """
    if folder.is_symlink() or not folder.is_dir():
        raise ReportedError(f"{folder}: not a folder of reported values (*.yaml)")
    found: list[ReportedValue] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.is_symlink():
            raise ReportedError(f"{path}: a symbolic link; commit the file itself")
        data, lines = yamlio.load_model_file(
            path, ReportedFile, error=ReportedError, what="file of reported values"
        )
        for i, entry in enumerate(data.values):
            line = yamlio.line_of(lines, ("values", i))
            found.append(
                ReportedValue(
                    **entry.model_dump(),
                    paper=data.paper,
                    short=data.short,
                    url=data.url,
                    where=f"{path}:{line}: values[{i}]",
                )
            )
    _check_unique(found)
    return found


def _check_unique(values: Iterable[ReportedValue]) -> None:
    first: dict[tuple[str, str, str, str], ReportedValue] = {}
    problems = []
    for value in values:
        seen = first.setdefault(value.key, value)
        if seen is not value:
            problems.append(
                f"{value.where}: reports {_describe(value)} again (first at {seen.where}); "
                "keep one entry per submission, benchmark, setting and metric"
            )
    if problems:
        raise ReportedError(_listed(problems))


def check_reported(
    values: Iterable[ReportedValue], *, specs: Iterable[Spec], submissions: Collection[str]
) -> None:
    """Check that each value names a submission of ``submissions`` and a benchmark of
    ``specs`` whose setting has the metric key, a proportion (values are percentages).

    Raises
    ------
    ReportedError
        Listing every problem as ``file:line: values[i].key: message``.
    """
    by_id: dict[str, Spec] = {}
    for declared_spec in specs:
        held = by_id.get(declared_spec.benchmark)
        if held is None or held.version < declared_spec.version:
            by_id[declared_spec.benchmark] = declared_spec
    problems = []
    for value in values:
        spec = by_id.get(value.benchmark)
        if value.submission not in submissions:
            known = ", ".join(sorted(submissions))
            problems.append(
                f"{value.where}.submission: no submission named {value.submission!r} "
                f"(submissions: {known})"
            )
        if spec is None:
            problems.append(
                f"{value.where}.benchmark: no spec declares benchmark {value.benchmark!r}"
            )
            continue
        if value.setting not in spec.settings:
            problems.append(
                f"{value.where}.setting: {spec.benchmark} has no setting {value.setting!r} "
                f"(its settings: {', '.join(spec.settings)})"
            )
            continue
        declared = {m.result_key: m.name for m in spec.metrics_for(value.setting)}
        function = declared.get(value.metric)
        if function is None:
            problems.append(
                f"{value.where}.metric: {spec.benchmark} ({value.setting}) has no metric "
                f"{value.metric!r} (its metrics: {', '.join(declared)})"
            )
        elif function in metrics and not metrics.get(function).percent:
            problems.append(
                f"{value.where}.metric: {value.metric!r} ({function}) is not a proportion; "
                "reported values are percentages"
            )
    if problems:
        raise ReportedError(_listed(problems))


def _describe(value: ReportedValue) -> str:
    return f"{value.submission} on {value.benchmark} {value.setting} {value.metric}"


def _listed(problems: list[str]) -> str:
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    return f"{count} in the reported values:\n  " + "\n  ".join(problems)


def reported_in(folder: Path) -> list[ReportedValue]:
    """:func:`load_reported` of ``folder``, or none when there is no such folder (a checkout
    without ``leaderboard/reported``, a results folder with nothing beside it)."""
    return load_reported(folder) if folder.exists() else []
