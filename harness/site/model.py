"""Records → the site's model: benchmarks, their table columns, ranks, tied groups, submissions.

Everything a page shows is decided here, once, before anything is written: which runs share a
table (one benchmark version), which scores share a column (one setting, metric key and metric
*version*: scores of different metric versions never share a column), the rank order, the tied
groups and the paired tests of every column (:mod:`harness.site.stats`), each submission's slug
and badges. The records are checked on the way (one benchmark version, one hash; one run per
submission version; no two identities that read alike, :mod:`harness.core.identity`).

Transductive runs (``declarations["transductive"]`` true: they used the unlabelled test images)
are ranked apart: every ranking, tied group and rank matrix exists three times -- among the
inductive runs (what a page shows first), among the transductive runs (their own section), and
over all runs together (what a reader opts in to); each rank matrix once without the runs whose
data do not count by default (:func:`harness.results.standing.counted_by_default`), once with.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from hashlib import sha256
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError, IntegrityError, MetricError
from harness.core.identity import check_distinct_identities
from harness.metrics import metrics
from harness.ranking import competition_ranks
from harness.records import BenchmarkInfo, RunRecord, ScoreEntry
from harness.results import standing
from harness.results.reported import ReportedValue
from harness.site import stats
from harness.site.slugs import submission_slug
from harness.site.text import isolate_text

if TYPE_CHECKING:
    from harness.metrics.base import Metric

__all__ = [
    "Badge",
    "BenchmarkPage",
    "Column",
    "LeftOut",
    "RankMatrices",
    "SettingTable",
    "SiteModel",
    "Submission",
    "data_badges",
    "functions_drawn_as",
    "is_transductive",
    "plan_site",
    "registered_metric",
]

SETTING_ORDER = {"zsl": 0, "gzsl": 1, "transductive": 2}
SETTING_LABELS = {"zsl": "ZSL", "gzsl": "GZSL", "transductive": "Transductive"}
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TRUE_WORDS = frozenset({"true", "yes", "1"})
_FALSE_WORDS = frozenset({"", "false", "no", "0", "none", "null"})


@dataclass(frozen=True)
class Badge:
    """A protocol or leakage mark; ``flag`` names the filter that hides it (or "")."""

    text: str
    kind: str  # css class suffix: warn, info
    title: str = ""
    flag: str = ""


@dataclass
class Submission:
    """One submission version across benchmarks; ``records`` sorted by benchmark."""

    key: str
    name: str
    version: str
    records: list[RunRecord] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def filename(self) -> str:
        return f"{self.key}.html"

    @property
    def latest(self) -> RunRecord:
        return max(self.records, key=lambda r: r.created_at)

    @property
    def transductive(self) -> bool:
        """Whether any of its runs declares itself transductive."""
        return any(is_transductive(r) for r in self.records)

    @property
    def badges(self) -> list[Badge]:
        """Every protocol or leakage badge of any of its runs, once, after the badges of data
        that stay out of the cross-benchmark tables by default (a run on synthetic data, …):
        which run is which, its benchmark's badges say."""
        seen: dict[str, Badge] = {}
        for record in self.records:
            for badge in data_badges(record.benchmark):
                if badge.flag == UNCOUNTED:
                    seen.setdefault(badge.kind, badge)
        for record in self.records:
            for badge in record_badges(record):
                seen.setdefault(badge.flag or badge.text, badge)
        return list(seen.values())


@dataclass
class Column:
    """Scores of one setting, metric key and metric version on one benchmark version."""

    setting: str
    metric: str
    version: str
    function: str
    higher_is_better: bool
    percent: bool
    primary: bool
    versioned: bool  # other versions of this metric share the table: label with the version
    entries: dict[str, ScoreEntry]  # submission key -> score
    ranks: dict[str, int] = field(default_factory=dict)  # inductive runs, among themselves
    transductive_ranks: dict[str, int] = field(default_factory=dict)  # among themselves
    combined_ranks: dict[str, int] = field(default_factory=dict)  # every run together
    tests: stats.ColumnTests | None = None
    no_tests: str = ""  # why there are no paired tests

    @property
    def label(self) -> str:
        name = f"{self.metric} v{self.version}" if self.versioned else self.metric
        return f"{name} (%)" if self.percent else name

    @property
    def id(self) -> str:
        return f"{self.setting}/{self.metric}/v{self.version}"

    def rank_of(self, key: str) -> tuple[int | None, int]:
        """``key``'s rank among the runs of its kind (inductive or transductive), and how many
        runs of that kind this column ranks."""
        pool = self.transductive_ranks if key in self.transductive_ranks else self.ranks
        return pool.get(key), len(pool)


@dataclass
class SettingTable:
    """One setting's table on a benchmark page."""

    setting: str
    columns: list[Column]
    primary: Column | None
    order: list[str]  # inductive runs' keys, rank order (rows without the primary score last)
    transductive: list[str] = field(default_factory=list)  # transductive runs', rank order
    combined: list[str] = field(default_factory=list)  # every run's, one rank order
    groups: list[list[str]] = field(default_factory=list)  # of the inductive runs
    group_of: dict[str, int] = field(default_factory=dict)  # key -> 1-based group
    transductive_groups: list[list[str]] = field(default_factory=list)
    transductive_group_of: dict[str, int] = field(default_factory=dict)
    combined_groups: list[list[str]] = field(default_factory=list)
    combined_group_of: dict[str, int] = field(default_factory=dict)
    mixed_versions: list[str] = field(default_factory=list)  # metrics with several versions
    labels: dict[str, str] = field(default_factory=dict)  # key -> "name version"
    # key -> "name version" for text-only places: each part isolated (harness.site.text)
    isolated: dict[str, str] = field(default_factory=dict)
    anchors: dict[str, str] = field(default_factory=dict)  # key -> row id on the page

    @property
    def label(self) -> str:
        return SETTING_LABELS.get(self.setting, self.setting.upper())

    @property
    def shown(self) -> list[str]:
        """Every key as the page lists them apart: inductive runs, then transductive ones."""
        return self.order + self.transductive


@dataclass
class BenchmarkPage:
    """One benchmark version: its runs by submission key and its tables."""

    id: str
    version: int
    title: str
    filename: str
    hash: str
    spec_hash: str
    records: dict[str, RunRecord]
    settings: list[SettingTable] = field(default_factory=list)
    transductive: frozenset[str] = frozenset()  # keys of the runs that declare it
    # keys of the runs whose data stay out of the cross-benchmark tables by default
    uncounted: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return f"{self.id} v{self.version}"

    @property
    def data_badges(self) -> list[Badge]:
        """The badges of the benchmark's data, once, the newest run's first (runs recorded
        at different times may differ: one before the source was recorded, say)."""
        found: dict[str, Badge] = {}
        for record in sorted(self.records.values(), key=lambda r: r.created_at, reverse=True):
            for badge in data_badges(record.benchmark):
                found.setdefault(badge.kind, badge)
        return list(found.values())

    @property
    def uncounted_badges(self) -> list[Badge]:
        """The badges that keep some of its runs out of the cross-benchmark tables."""
        return [b for b in self.data_badges if b.flag == UNCOUNTED]

    def shown_entries(self, column: Column, *, uncounted: bool) -> dict[str, ScoreEntry]:
        """``column``'s scores that a cross-benchmark table shows: every run's with
        ``uncounted`` (the reader opted in), else those of runs whose data count by default."""
        if uncounted or not self.uncounted:
            return column.entries
        return {k: e for k, e in column.entries.items() if k not in self.uncounted}

    @property
    def stem(self) -> str:
        return self.filename.removesuffix(".html")

    @property
    def latest(self) -> RunRecord:
        return max(self.records.values(), key=lambda r: r.created_at)


@dataclass(frozen=True)
class RankMatrices:
    """Per setting, :func:`harness.metrics.comparison.rank_matrix` output (plus the pages of
    its benchmarks and submissions) of the inductive runs, the transductive runs, and all."""

    inductive: dict[str, dict[str, Any]]
    transductive: dict[str, dict[str, Any]]
    combined: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class LeftOut:
    """Runs of one benchmark version left out of the cross-benchmark tables by default, and
    why (:func:`harness.results.standing.excluded_why`)."""

    bench: BenchmarkPage
    why: str
    keys: tuple[str, ...]


@dataclass
class SiteModel:
    benchmarks: list[BenchmarkPage]
    submissions: dict[str, Submission]  # by key, sorted by name then version
    ranks: RankMatrices  # of the runs whose data count by default
    # every run, those left out by default included; None when none is left out
    ranks_with_uncounted: RankMatrices | None = None
    left_out: list[LeftOut] = field(default_factory=list)
    # what papers report (harness.results.reported), shown beside the runs, never ranked
    reported: tuple[ReportedValue, ...] = ()

    def left_out_of(self, benchmarks: Iterable[BenchmarkPage]) -> list[LeftOut]:
        """What is left out by default of a table over ``benchmarks``."""
        wanted = {id(b) for b in benchmarks}
        return [item for item in self.left_out if id(item.bench) in wanted]


def plan_site(records: Sequence[RunRecord], reported: Sequence[ReportedValue] = ()) -> SiteModel:
    """Check, group and rank ``records``; compute every column's paired tests and groups.
    ``reported`` (values papers report) are kept to be shown beside the runs.

    Raises
    ------
    IntegrityError
        Records of one benchmark version disagree on its hash or spec hash.
    HarnessError
        Two records share a benchmark version and submission version, two benchmark ids would
        share a page, or two names (ids) read alike (:func:`harness.core.identity.check_distinct_
        identities`).
    """
    check_distinct_identities(records)
    submissions: dict[str, Submission] = {}
    names: dict[str, tuple[str, str]] = {}
    for record in sorted(records, key=_submission_order):
        info = record.submission
        slug = submission_slug(info.name, info.version)
        if names.get(slug, (info.name, info.version)) != (info.name, info.version):
            raise HarnessError(  # pragma: no cover - 48-bit digests of distinct names
                f"submissions {names[slug]} and {(info.name, info.version)} share a page name"
            )
        names[slug] = (info.name, info.version)
        entry = submissions.setdefault(slug, Submission(slug, info.name, info.version))
        entry.records.append(record)

    groups: dict[tuple[str, int], list[RunRecord]] = defaultdict(list)
    for record in records:
        groups[(record.benchmark.id, record.benchmark.version)].append(record)
    benchmarks: list[BenchmarkPage] = []
    filenames: dict[str, tuple[str, int]] = {}
    for bench_key in sorted(groups):
        bench = _plan_benchmark(groups[bench_key])
        if bench.filename in filenames:  # pragma: no cover - page_filename makes names unique
            raise HarnessError(
                f"benchmarks {filenames[bench.filename]} and {bench_key} share a page"
            )
        filenames[bench.filename] = bench_key
        benchmarks.append(bench)
    _test_columns([c for b in benchmarks for s in b.settings for c in s.columns])
    for bench in benchmarks:
        for plan in bench.settings:
            _group(plan)
    for submission in submissions.values():
        submission.records.sort(key=lambda r: (r.benchmark.id, r.benchmark.version))
    left_out = [item for bench in benchmarks for item in _left_out(bench)]
    return SiteModel(
        benchmarks=benchmarks,
        submissions=submissions,
        ranks=_rank_views(benchmarks, submissions, uncounted=False),
        ranks_with_uncounted=_rank_views(benchmarks, submissions, uncounted=True)
        if left_out
        else None,
        left_out=left_out,
        reported=tuple(reported),
    )


def page_filename(benchmark: str, version: int) -> str:
    """``<id>-v<version>.html``; an id unsafe in a file name gets a slug plus a digest.

    >>> page_filename("awa2", 1), page_filename("../x y", 2)
    ('awa2-v1.html', 'x-y-46c740c6-v2.html')
    """
    if _SAFE_ID.fullmatch(benchmark):
        stem = benchmark
    else:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", benchmark).strip(".-")[:40] or "benchmark"
        stem = f"{slug}-{sha256(benchmark.encode()).hexdigest()[:8]}"
    return f"{stem}-v{version}.html"


def setting_key(setting: str) -> tuple[int, str]:
    return (SETTING_ORDER.get(setting, len(SETTING_ORDER)), setting)


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Natural order of metric versions: '2' < '10', '1.2' < '1.10'.

    >>> sorted(["10", "2", "1.10", "1.2"], key=version_key)
    ['1.2', '1.10', '2', '10']
    """
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"[.\-_]", version)
    )


def truthy(value: Any) -> bool:
    """Whether a declaration says yes: ``True``, a yes-word, or any other non-empty text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)


def is_transductive(record: RunRecord) -> bool:
    """Whether the run declares it used the unlabelled test images (ranked apart)."""
    return truthy(record.submission.declarations.get("transductive", False))


#: The flag of a data badge whose runs stay out of the cross-benchmark tables by default.
UNCOUNTED = "uncounted"
#: The end of every id and file name of a view with those runs included (the index's rank
#: matrices, the across and robustness pages).
UNCOUNTED_SUFFIX = "-with-uncounted"


def data_badges(info: BenchmarkInfo) -> list[Badge]:
    """The badges of a benchmark's data (:func:`harness.results.standing.data_badges`: where
    its raw inputs came from, experimental) as the site shows them: kind ``data-<key>``, and the
    flag :data:`UNCOUNTED` on a badge that keeps the runs out of the cross-benchmark tables."""
    return [
        Badge(b.label, f"data-{b.key}", b.title, "" if b.counted else UNCOUNTED)
        for b in standing.data_badges(info)
    ]


def record_badges(record: RunRecord) -> list[Badge]:
    """Leakage and protocol badges of one run, from its audit and the submitted declarations."""
    badges: list[Badge] = []
    audit = record.leakage
    if audit is not None and audit.status == "not audited":  # frozen so, on purpose
        badges.append(
            Badge("not audited", "muted", f"frozen without a leakage audit: {audit.error}")
        )
    elif audit is not None and audit.status == "not auditable against a class list":
        badges.append(Badge(audit.status.value, "muted", audit.summary()))
    elif audit is not None and audit.error is not None:
        badges.append(Badge("leakage audit unavailable", "muted", audit.error))
    elif audit is not None and audit.n_overlap > 0:
        n, total = audit.n_overlap, audit.n_test
        badges.append(
            Badge(
                f"leakage {n}/{total}",
                "warn",
                f"{n} of {total} test classes were seen by the backbone ({audit.source}). "
                + audit.rule(),
                "leakage",
            )
        )
    declared = record.submission.declarations
    if is_transductive(record):
        badges.append(
            Badge(
                "transductive",
                "info",
                "uses the unlabelled test images: ranked apart from inductive submissions",
                "transductive",
            )
        )
    extra = declared.get("extra_data", False)
    if truthy(extra):
        detail = extra if isinstance(extra, str) and extra.lower() not in _TRUE_WORDS else ""
        badges.append(
            Badge(
                "extra data",
                "info",
                f"trained with data beyond the benchmark's{': ' + detail if detail else ''}",
                "extra-data",
            )
        )
    features = declared.get("features")
    if isinstance(features, str) and features not in ("", "benchmark"):
        badges.append(Badge("own features", "info", f"features: {features}", "features"))
    return badges


# -- planning ---------------------------------------------------------------------------------


def _submission_order(record: RunRecord) -> tuple[str, str]:
    return (record.submission.name, record.submission.version)


def _plan_benchmark(records: list[RunRecord]) -> BenchmarkPage:
    records = sorted(records, key=_submission_order)
    first = records[0].benchmark
    for record in records:
        for what, given, expected in (
            ("hash", record.benchmark.hash, first.hash),
            ("spec hash", record.benchmark.spec_hash, first.spec_hash),
        ):
            if given != expected:
                raise IntegrityError(
                    f"runs on benchmark {first.id!r} v{first.version} disagree on its {what} "
                    f"({expected} vs {given}); runs on different data can't share a table"
                )
    for before, after in pairwise(records):
        if _submission_order(before) == _submission_order(after):
            raise HarnessError(
                f"two runs of {after.submission.name}@{after.submission.version} on "
                f"{first.id} v{first.version}; keep one record per submission version"
            )
    by_key = {submission_slug(*_submission_order(r)): r for r in records}
    # Descriptive fields (title, primary metrics) come from the newest run.
    info = max(records, key=lambda r: r.created_at).benchmark
    bench = BenchmarkPage(
        id=info.id,
        version=info.version,
        title=info.title,
        filename=page_filename(info.id, info.version),
        hash=info.hash,
        spec_hash=info.spec_hash,
        records=by_key,
        transductive=frozenset(k for k, r in by_key.items() if is_transductive(r)),
        uncounted=frozenset(
            k for k, r in by_key.items() if not standing.counted_by_default(r.benchmark)
        ),
    )
    newest_first = sorted(by_key.items(), key=lambda kv: kv[1].created_at, reverse=True)
    settings = sorted({e.setting for r in records for e in r.scores}, key=setting_key)
    used: set[str] = set()
    for setting in settings:
        plan = _plan_setting(setting, info.primary.get(setting), newest_first, bench.transductive)
        for key in plan.shown:
            sub = by_key[key].submission
            plan.labels[key] = f"{sub.name} {sub.version}"
            plan.isolated[key] = f"{isolate_text(sub.name)} {isolate_text(sub.version)}"
            # A submission's permalink is its row in the first table that lists it (the
            # combined ranking repeats rows: those get their own ids on the page).
            plan.anchors[key] = f"sub-{key}" if key not in used else f"sub-{key}-{setting}"
            used.add(key)
        bench.settings.append(plan)
    return bench


def _plan_setting(
    setting: str,
    primary: str | None,
    newest_first: list[tuple[str, RunRecord]],
    transductive: frozenset[str],
) -> SettingTable:
    # Metrics in the order the newest run lists them (its spec's order), then any others.
    found: dict[str, dict[str, dict[str, ScoreEntry]]] = {}  # metric -> version -> key -> entry
    for key, record in newest_first:
        for entry in record.scores:
            if entry.setting == setting:
                found.setdefault(entry.metric, {}).setdefault(entry.version, {})[key] = entry
    metrics = list(found)
    if primary in found:
        metrics.remove(primary)
        metrics.insert(0, primary)
    columns: list[Column] = []
    for metric in metrics:
        versions = sorted(found[metric], key=version_key, reverse=True)  # newest version first
        for version in versions:
            entries = dict(sorted(found[metric][version].items()))
            columns.append(
                _plan_column(setting, metric, version, entries, metric == primary, transductive)
            )
            columns[-1].versioned = len(versions) > 1
            columns[-1].primary = metric == primary and version == versions[0]
    primary_column = next((c for c in columns if c.primary), None)
    keys = sorted({key for c in columns for key in c.entries})
    ranks = primary_column.ranks if primary_column else {}
    apart = primary_column.transductive_ranks if primary_column else {}
    combined = primary_column.combined_ranks if primary_column else {}
    plan = SettingTable(
        setting=setting,
        columns=columns,
        primary=primary_column,
        order=_rank_order([k for k in keys if k not in transductive], ranks),
        transductive=_rank_order([k for k in keys if k in transductive], apart),
        combined=_rank_order(keys, combined),
        mixed_versions=[m for m in metrics if len(found[m]) > 1],
    )
    return plan


def _group(plan: SettingTable) -> None:
    """Tied groups from the primary column's tests (none without them), for each ranking:
    a transductive leader never leads the inductive runs' first group."""
    column = plan.primary
    if column is None or column.tests is None:
        return
    tests, better = column.tests, column.higher_is_better
    plan.groups = _groups_among(tests, plan.order, better)
    plan.transductive_groups = _groups_among(tests, plan.transductive, better)
    plan.combined_groups = _groups_among(tests, plan.combined, better)
    plan.group_of = _group_numbers(plan.groups)
    plan.transductive_group_of = _group_numbers(plan.transductive_groups)
    plan.combined_group_of = _group_numbers(plan.combined_groups)


def _groups_among(tests: stats.ColumnTests, keys: list[str], better: bool) -> list[list[str]]:
    among = tests.subset(keys)
    return among.groups(higher_is_better=better) if among is not None else []


def _group_numbers(groups: list[list[str]]) -> dict[str, int]:
    return {key: i for i, group in enumerate(groups, start=1) for key in group}


def _plan_column(
    setting: str,
    metric: str,
    version: str,
    entries: dict[str, ScoreEntry],
    primary: bool,
    transductive: frozenset[str] = frozenset(),
) -> Column:
    some = next(iter(entries.values()))
    column = Column(
        setting=setting,
        metric=metric,
        version=version,
        function=some.function,
        higher_is_better=some.higher_is_better,
        percent=_percent_unit(some.function, entries.values()),
        primary=primary,
        versioned=False,
        entries=entries,
    )
    values = {k: e.value for k, e in entries.items()}
    inductive = {k: v for k, v in values.items() if k not in transductive}
    apart = {k: v for k, v in values.items() if k in transductive}
    better = some.higher_is_better
    column.ranks = competition_ranks(inductive, higher_is_better=better)
    column.transductive_ranks = competition_ranks(apart, higher_is_better=better)
    column.combined_ranks = competition_ranks(values, higher_is_better=better)
    return column


def _test_columns(columns: list[Column]) -> None:
    """Every column's paired tests, in threads: the work is numpy's, which releases the GIL."""

    def run(column: Column) -> None:
        values = {k: e.class_values for k, e in column.entries.items() if e.class_values}
        if len(values) < 2:
            column.no_tests = (
                "no per-class values in these records"
                if not values
                else "only one run has per-class values"
            )
            return
        try:
            column.tests = stats.column_tests(list(values), list(values.values()))
        except MetricError:
            # e.g. mistake severity v1: each run's values cover its own mistakes' classes; or a
            # record's values are malformed (records are untrusted input)
            column.no_tests = "the runs' per-class values cover different classes or are malformed"

    workers = min(4, os.cpu_count() or 1)
    if workers == 1 or len(columns) < 2:
        for column in columns:
            run(column)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(run, columns):  # results are None; this re-raises any error
            pass


def registered_metric(function: str) -> Metric | None:
    """The registration of a record's metric ``function``: what the site knows of a metric
    (group, figure, header, unit) it reads from there. None for a function this harness does
    not register (a removed metric's old records), which the site shows without those facts."""
    return metrics.get(function) if function in metrics else None


def functions_drawn_as(*kinds: str) -> tuple[str, ...]:
    """The registered metric functions whose details the site draws as one of ``kinds``
    (:data:`harness.metrics.base.FIGURE_KINDS`): in the order of ``kinds``, then by name."""
    return tuple(
        name for kind in kinds for name, metric in metrics.items() if metric.figure == kind
    )


def _percent_unit(function: str, entries: Iterable[ScoreEntry]) -> bool:
    """Whether a column shows percentages: from the metric's registered bounds, so adding a run
    never changes a column's unit (hcost stays a number of levels when every run's cost happens
    to be below 1). A metric this harness does not register has no definition to ask: its
    values decide (all of them in [0, 1])."""
    metric = registered_metric(function)
    if metric is not None:
        return metric.percent
    return all(_in_unit_interval(e) for e in entries)


def _in_unit_interval(entry: ScoreEntry) -> bool:
    bounds = (entry.interval.lo, entry.interval.hi) if entry.interval else ()
    return all(0.0 <= v <= 1.0 for v in (entry.value, *bounds))


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def _rank_order(keys: Iterable[str], ranks: dict[str, int]) -> list[str]:
    """Ranked rows first (by rank, then key: name then version), the rest by key."""
    return sorted(keys, key=lambda k: (k not in ranks, ranks.get(k, 0), k))


def _left_out(bench: BenchmarkPage) -> list[LeftOut]:
    """The benchmark's runs left out by default, by reason (one, unless its runs disagree)."""
    why: dict[str, list[str]] = defaultdict(list)
    for key in sorted(bench.uncounted):
        reason = standing.excluded_why(bench.records[key].benchmark)
        why[reason or ""].append(key)
    return [LeftOut(bench, reason, tuple(keys)) for reason, keys in sorted(why.items())]


def _rank_views(
    benchmarks: list[BenchmarkPage], submissions: dict[str, Submission], *, uncounted: bool
) -> RankMatrices:
    return RankMatrices(
        *(
            _rank_matrices(benchmarks, submissions, runs, uncounted=uncounted)
            for runs in ("inductive", "transductive", "combined")
        )
    )


def _rank_matrices(
    benchmarks: list[BenchmarkPage],
    submissions: dict[str, Submission],
    runs: str,
    *,
    uncounted: bool,
) -> dict[str, dict[str, Any]]:
    """Per setting, the ranks of submissions on every benchmark by its primary column: of the
    ``runs`` "inductive", "transductive" or "combined" (every run), those whose data count by
    default unless ``uncounted``; a cell whose run is of the other kind is empty."""
    out: dict[str, dict[str, Any]] = {}
    settings = sorted({s.setting for b in benchmarks for s in b.settings}, key=setting_key)
    for setting in settings:
        values: dict[str, dict[str, float]] = {}
        directions: dict[str, bool] = {}
        labels: dict[str, BenchmarkPage] = {}
        for bench in benchmarks:
            plan = next((s for s in bench.settings if s.setting == setting), None)
            if plan is None or plan.primary is None:
                continue
            column = plan.primary
            row = {
                k: e.value
                for k, e in bench.shown_entries(column, uncounted=uncounted).items()
                if _finite(e.value)
                and (runs == "combined" or (k in bench.transductive) == (runs == "transductive"))
            }
            if row:
                values[bench.label] = row
                directions[bench.label] = column.higher_is_better
                labels[bench.label] = bench
        ranks = stats.ranks_across(values, directions)
        if ranks is None:
            continue
        ranks["benchmark_pages"] = [labels[b] for b in ranks["benchmarks"]]
        ranks["submission_refs"] = [submissions[k] for k in ranks["submissions"]]
        out[setting] = ranks
    return out
