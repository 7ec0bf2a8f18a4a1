"""Save and load run records: the only code that opens store sessions.

A :class:`~harness.records.RunRecord` goes in and comes back out; the rows of
:mod:`harness.store.models` stay inside this module. :func:`save_run` is one transaction: it
upserts the benchmark, the submission and the run, then replaces the run's scores, so a failure
anywhere leaves the store as it was.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, func
from sqlalchemy import exc as sa_exc
from sqlmodel import Session, col, delete, select

from harness.errors import HarnessError, IntegrityError
from harness.records import BenchmarkInfo, RunRecord, ScoreEntry, SubmissionInfo
from harness.store.db import SQLITE_BEGIN_OPTION, create_tables, database_url, make_engine
from harness.store.models import BenchmarkRow, RunRow, ScoreRow, SubmissionRow

#: How often :func:`save_run` tries when a concurrent writer inserted the same row first.
SAVE_ATTEMPTS = 3


def open_store(url: str | None = None) -> Engine:
    """An engine on ``url`` (default :func:`~harness.store.db.database_url`) with tables created."""
    url = url or database_url()
    engine = make_engine(url)
    try:
        create_tables(engine)
    except sa_exc.OperationalError as err:
        raise HarnessError(
            f"cannot open the store at {_describe(engine)}: {err.orig}; check ZSL_DATABASE_URL "
            "or ZSL_HOME"
        ) from err
    return engine


def save_run(engine: Engine, record: RunRecord) -> int:
    """Store ``record`` and return its run id.

    The run is keyed by (benchmark id and version, submission name and version): saving the same
    pair again updates that run and replaces all its scores. Everything happens in one
    transaction; on any error nothing is written.

    Raises
    ------
    IntegrityError
        The benchmark version is already stored with a different data or spec hash.
    HarnessError
        The record holds a non-finite or duplicate score, or JSON that is not portable.
    """
    _check_record(record)
    for attempt in range(1, SAVE_ATTEMPTS + 1):
        try:
            return _save_once(engine, record)
        except sa_exc.IntegrityError:
            # Another writer inserted the same benchmark/submission/run between our SELECT and
            # INSERT (possible on PostgreSQL; SQLite writers are serialized by BEGIN IMMEDIATE).
            # The record itself was checked above, so a fresh transaction will find its rows.
            if attempt == SAVE_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def load_runs(engine: Engine, *, benchmark: str | None = None) -> list[RunRecord]:
    """Every stored run (of ``benchmark`` only, if given) as records.

    Sorted by benchmark id, benchmark version, submission name and submission version; each
    record's scores keep the order they were saved in.
    """
    runs_stmt = (
        select(RunRow, BenchmarkRow, SubmissionRow)
        .join(BenchmarkRow, col(RunRow.benchmark_id) == col(BenchmarkRow.id))
        .join(SubmissionRow, col(RunRow.submission_id) == col(SubmissionRow.id))
    )
    scores_stmt = (
        select(ScoreRow)
        .join(RunRow, col(ScoreRow.run_id) == col(RunRow.id))
        .join(BenchmarkRow, col(RunRow.benchmark_id) == col(BenchmarkRow.id))
        .order_by(col(ScoreRow.run_id), col(ScoreRow.position))
    )
    if benchmark is not None:
        runs_stmt = runs_stmt.where(BenchmarkRow.benchmark == benchmark)
        scores_stmt = scores_stmt.where(BenchmarkRow.benchmark == benchmark)

    with Session(engine) as session, session.begin():  # one snapshot for both queries
        rows = session.exec(runs_stmt).all()
        scores: dict[int, list[ScoreEntry]] = defaultdict(list)
        for score in session.exec(scores_stmt):
            scores[score.run_id].append(_score_entry(score))
        records = [_record(run, bench, sub, scores.get(_id(run), [])) for run, bench, sub in rows]
    # Sort here, not in SQL: string collation differs between SQLite and PostgreSQL.
    records.sort(key=record_sort_key)
    return records


def count_runs(engine: Engine) -> int:
    """How many runs the store holds."""
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(RunRow)).one())


def record_sort_key(record: RunRecord) -> tuple[str, int, str, str]:
    """The store's order: benchmark id, benchmark version, submission name, submission version."""
    return (
        record.benchmark.id,
        record.benchmark.version,
        record.submission.name,
        record.submission.version,
    )


# -- saving -------------------------------------------------------------------------------------


def _save_once(engine: Engine, record: RunRecord) -> int:
    # BEGIN IMMEDIATE on SQLite takes the write lock before our first SELECT, so concurrent
    # writers queue on the busy timeout instead of failing on a stale read.
    writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    try:
        with Session(writer) as session, session.begin():
            bench = _upsert_benchmark(session, record.benchmark)
            sub = _upsert_submission(session, record.submission)
            run = _upsert_run(session, record, benchmark_id=_id(bench), submission_id=_id(sub))
            run_id = _id(run)
            _replace_scores(session, run_id, record.scores)
    except sa_exc.OperationalError as err:
        raise HarnessError(
            f"cannot write to the store at {_describe(engine)}: {err.orig}; check "
            "ZSL_DATABASE_URL or ZSL_HOME, and that the tables exist (open_store creates them)"
        ) from err
    return run_id


def _upsert_benchmark(session: Session, info: BenchmarkInfo) -> BenchmarkRow:
    row = session.exec(
        select(BenchmarkRow).where(
            BenchmarkRow.benchmark == info.id, BenchmarkRow.version == info.version
        )
    ).first()
    if row is None:
        row = BenchmarkRow(
            benchmark=info.id,
            version=info.version,
            hash=info.hash,
            title=info.title,
            spec_hash=info.spec_hash,
        )
    else:
        for field, stored, given in (
            ("hash", row.hash, info.hash),
            ("spec hash", row.spec_hash, info.spec_hash),
        ):
            if stored != given:
                raise IntegrityError(
                    f"benchmark {info.id!r} v{info.version} is stored with {field} {stored}, "
                    f"but this run was scored against {given}; a changed benchmark needs a new "
                    "version in its spec (or score the run against the frozen benchmark)"
                )
    row.title = info.title
    row.primary = dict(info.primary)
    row.n_classes = info.n_classes
    row.n_seen = info.n_seen
    row.n_unseen = info.n_unseen
    session.add(row)
    session.flush()
    return row


def _upsert_submission(session: Session, info: SubmissionInfo) -> SubmissionRow:
    row = session.exec(
        select(SubmissionRow).where(
            SubmissionRow.name == info.name, SubmissionRow.version == info.version
        )
    ).first()
    if row is None:
        row = SubmissionRow(
            name=info.name, version=info.version, kind=info.kind, package_hash=info.package_hash
        )
    row.kind = info.kind
    row.package_hash = info.package_hash
    row.authors = list(info.authors)
    row.paper = info.paper
    row.url = info.url
    row.description = info.description
    row.declarations = dict(info.declarations)
    session.add(row)
    session.flush()
    return row


def _upsert_run(
    session: Session, record: RunRecord, *, benchmark_id: int, submission_id: int
) -> RunRow:
    now = datetime.now(UTC)
    row = session.exec(
        select(RunRow).where(
            RunRow.benchmark_id == benchmark_id, RunRow.submission_id == submission_id
        )
    ).first()
    if row is None:
        row = RunRow(
            benchmark_id=benchmark_id,
            submission_id=submission_id,
            package_hash=record.submission.package_hash,
            harness_version=record.harness_version,
            runner=record.runner,
            created_at=_to_utc(record.created_at),
            updated_at=now,
        )
    row.package_hash = record.submission.package_hash
    row.predictions_hashes = dict(record.predictions_hashes)
    row.harness_version = record.harness_version
    row.runner = record.runner
    row.environment = dict(record.environment)
    row.timings = dict(record.timings)
    row.leakage = dict(record.leakage)
    row.logs = dict(record.logs)
    row.created_at = _to_utc(record.created_at)
    row.updated_at = now
    session.add(row)
    session.flush()
    return row


def _replace_scores(session: Session, run_id: int, scores: list[ScoreEntry]) -> None:
    session.exec(delete(ScoreRow).where(col(ScoreRow.run_id) == run_id))
    for position, entry in enumerate(scores):
        session.add(
            ScoreRow(
                run_id=run_id,
                position=position,
                setting=entry.setting,
                metric=entry.metric,
                function=entry.function,
                version=entry.version,
                value=entry.value,
                higher_is_better=entry.higher_is_better,
                details=dict(entry.details),
                interval=entry.interval.model_dump(mode="json") if entry.interval else None,
            )
        )
    session.flush()


def _check_record(record: RunRecord) -> None:
    """Refuse what the database would mangle or reject, with a message naming the entry."""
    where = (
        f"run of {record.submission.name}@{record.submission.version} on "
        f"{record.benchmark.id} v{record.benchmark.version}"
    )
    seen: set[tuple[str, str]] = set()
    for entry in record.scores:
        key = (entry.setting, entry.metric)
        if key in seen:
            raise HarnessError(
                f"{where} has two scores for {entry.setting}/{entry.metric}; each (setting, "
                "metric) may appear once"
            )
        seen.add(key)
        if not math.isfinite(entry.value):
            raise HarnessError(
                f"{where}: score {entry.setting}/{entry.metric} is {entry.value}; the store "
                "keeps finite values only (the metric should raise instead)"
            )
        _check_json(entry.details, f"{where}: details of {entry.setting}/{entry.metric}")
    for name in ("environment", "timings", "predictions_hashes", "logs", "leakage"):
        _check_json(getattr(record, name), f"{where}: {name}")
    _check_json(record.submission.declarations, f"{where}: submission declarations")


def _check_json(value: Any, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise HarnessError(
            f"{what} is not portable JSON ({err}); use finite numbers, strings, lists and dicts"
        ) from err


# -- loading ------------------------------------------------------------------------------------


def _record(
    run: RunRow, bench: BenchmarkRow, sub: SubmissionRow, scores: list[ScoreEntry]
) -> RunRecord:
    return RunRecord(
        benchmark=BenchmarkInfo(
            id=bench.benchmark,
            version=bench.version,
            title=bench.title,
            hash=bench.hash,
            spec_hash=bench.spec_hash,
            primary=dict(bench.primary),
            n_classes=bench.n_classes,
            n_seen=bench.n_seen,
            n_unseen=bench.n_unseen,
        ),
        submission=SubmissionInfo.model_validate(
            {
                "name": sub.name,
                "version": sub.version,
                "kind": sub.kind,
                "package_hash": run.package_hash,  # the package this run was made with
                "authors": list(sub.authors),
                "paper": sub.paper,
                "url": sub.url,
                "description": sub.description,
                "declarations": dict(sub.declarations),
            }
        ),
        predictions_hashes=dict(run.predictions_hashes),
        harness_version=run.harness_version,
        runner=run.runner,
        environment=dict(run.environment),
        timings=dict(run.timings),
        leakage=dict(run.leakage or {}),
        logs=dict(run.logs or {}),
        scores=scores,
        created_at=_to_utc(run.created_at),
    )


def _score_entry(row: ScoreRow) -> ScoreEntry:
    return ScoreEntry.model_validate(
        {
            "setting": row.setting,
            "metric": row.metric,
            "function": row.function,
            "version": row.version,
            "value": row.value,
            "higher_is_better": row.higher_is_better,
            "details": dict(row.details),
            "interval": row.interval,
        }
    )


# -- helpers ------------------------------------------------------------------------------------


def _to_utc(moment: datetime) -> datetime:
    """Aware UTC; a naive datetime is read as UTC (SQLite returns every datetime naive)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _id(row: BenchmarkRow | SubmissionRow | RunRow) -> int:
    if row.id is None:  # pragma: no cover - flush() assigns ids
        raise AssertionError(f"{type(row).__name__} has no id after flush")
    return row.id


def _describe(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
