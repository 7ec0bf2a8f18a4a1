"""Save and load run records: the only code that opens store sessions.

A :class:`~harness.records.RunRecord` goes in and comes back out equal; the rows of
:mod:`harness.store.models` stay inside this module. :func:`save_run` (and :func:`save_runs`
for several records) is one transaction: it upserts the benchmark, the submission and the run,
then replaces the run's scores and their curve points, so a failure or a killed process
anywhere leaves the store as it was. Concurrent writers neither lose nor duplicate rows: SQLite
writers queue on ``BEGIN IMMEDIATE``; on PostgreSQL new rows go in with ``ON CONFLICT DO
NOTHING``, the run row is locked before its scores are replaced, and a deadlock is retried.

:func:`save_run_reporting` also returns the run a save replaced (runner, date, primary
scores), which :func:`save_run` replaces silently. :func:`list_runs`, :func:`delete_runs` and
:func:`set_hidden` manage stored runs (``zsl results list``/``delete``/``hide``/``unhide``);
a hidden run stays stored but :func:`load_runs` leaves it out unless asked.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, Table, func, insert
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, delete, select

from harness.audit import LeakageAudit
from harness.core.errors import HarnessError, IntegrityError
from harness.core.hashing import short_hash
from harness.core.identity import check_new_identities
from harness.records import BenchmarkInfo, RunKey, RunRecord, ScoreEntry, SubmissionInfo, run_key
from harness.store.curves import join_curve, split_curve
from harness.store.db import SQLITE_BEGIN_OPTION, database_url, describe_url, make_engine, one_line
from harness.store.migrations import upgrade
from harness.store.models import BenchmarkRow, CurvePointRow, RunRow, ScoreRow, SubmissionRow

__all__ = [
    "ChangedPackageError",
    "ReplacedRun",
    "StaleRunError",
    "StoredRun",
    "UnknownRunError",
    "changed_packages",
    "count_runs",
    "delete_run",
    "delete_runs",
    "list_runs",
    "load_runs",
    "open_store",
    "primary_values",
    "save_run",
    "save_run_reporting",
    "save_runs",
    "set_hidden",
]

#: How often a save is tried: again after a concurrent writer won a race the database reports
#: (a unique key inserted first where ON CONFLICT is unavailable, a PostgreSQL deadlock).
SAVE_ATTEMPTS = 5

# PostgreSQL SQLSTATEs after which the whole transaction may simply run again.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected


def open_store(url: str | None = None) -> Engine:
    """An engine on ``url`` (default :func:`~harness.store.db.database_url`), schema migrated.

    The store is brought to the newest schema (:func:`harness.store.migrations.upgrade`),
    including a store made before migrations existed; many processes may open it at once.

    Raises
    ------
    HarnessError
        The URL is malformed, its driver is missing, or the database cannot be reached, logged
        into or written: one line naming the URL without its password.
    """
    url = url or database_url()
    engine = make_engine(url)
    with _store_errors(engine, "open"):
        upgrade(engine)
    return engine


class StaleRunError(HarnessError):
    """A run changed in the store between loading it and saving its re-scored record."""


class UnknownRunError(HarnessError):
    """A run named for deleting, hiding or unhiding is not in the store."""


class ChangedPackageError(HarnessError):
    """A run would replace the stored run of its key (benchmark version, submission name and
    version) made from another package hash: changed files under an unchanged version, which
    ``zsl run`` refuses before running unless ``--replace`` (:func:`changed_packages`)."""

    @classmethod
    def of(cls, key: RunKey, stored: str, given: str) -> ChangedPackageError:
        """The refusal for ``key``, stored from package hash ``stored``, run from ``given``."""
        benchmark, benchmark_version, name, version = key
        return cls(
            f"the stored run of {name}@{version} on {benchmark} v{benchmark_version} was made"
            f" from package {short_hash(stored)}; this package (same name and version) hashes"
            f" to {short_hash(given)}: its files changed. Bump `version` in submission.yaml to"
            " keep both runs, or pass --replace to overwrite the stored run"
        )


@dataclass(frozen=True)
class StoredRun:
    """A stored run as ``zsl results list`` shows it: the record, and whether it is hidden."""

    record: RunRecord
    hidden: bool

    @property
    def key(self) -> RunKey:
        return run_key(self.record)


@dataclass(frozen=True)
class ReplacedRun:
    """What a save replaced: the stored run of the same key as it was before the save.

    ``primary``: setting -> value of the primary metric (of the *new* record's benchmark
    primary mapping) as stored before, for the settings the old run had a score of.
    """

    key: RunKey
    runner: str
    created_at: datetime
    primary: dict[str, float]
    hidden: bool
    package_hash: str


def primary_values(record: RunRecord) -> dict[str, float]:
    """Setting -> value of the benchmark's primary metric in ``record``, in score order."""
    return {
        entry.setting: entry.value
        for entry in record.scores
        if record.benchmark.primary.get(entry.setting) == entry.metric
    }


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
        The record holds a non-finite or duplicate score, or JSON that is not portable; or the
        store cannot be written.
    """
    return save_runs(engine, [record])[0]


def save_run_reporting(
    engine: Engine, record: RunRecord, *, refuse_changed_package: bool = False
) -> tuple[int, ReplacedRun | None]:
    """:func:`save_run`, and what it replaced: the stored run of the same key, or None.

    The run key (:func:`harness.records.run_key`) does not hold the runner: a run made in
    another runner replaces the stored one, and so does one with another package hash unless
    ``refuse_changed_package`` (:class:`ChangedPackageError`, checked under the run's row lock:
    nothing is written). Callers say what was replaced (``zsl run`` does, on stderr). A hidden
    run stays hidden when replaced.
    """
    replaced: list[ReplacedRun] = []
    run_id = _save_all(
        engine,
        [record],
        only_unchanged=False,
        replaced=replaced,
        refuse_changed_package=refuse_changed_package,
    )[0]
    return run_id, (replaced[0] if replaced else None)


def changed_packages(
    engine: Engine, package_hashes: Mapping[RunKey, str]
) -> dict[RunKey, ChangedPackageError]:
    """The runs of ``package_hashes`` (run key -> the package hash a run of it would store)
    that the store holds from another package hash, each with the error that refuses it: what
    ``zsl run`` checks before anything runs (docs/guides/store.md)."""
    refused = {}
    with _store_errors(engine, "read"), Session(engine) as session:
        for key, given in package_hashes.items():
            run_id = _run_id_of(session, key)
            row = None if run_id is None else session.get(RunRow, run_id)
            if row is not None and row.package_hash != given:
                refused[key] = ChangedPackageError.of(key, row.package_hash, given)
    return refused


def save_runs(
    engine: Engine, records: Sequence[RunRecord], *, only_unchanged: bool = False
) -> list[int]:
    """Store several records in ONE transaction and return their run ids, in order.

    All or nothing: if any record is refused, none is written. Each record is saved as
    :func:`save_run` saves it.

    With ``only_unchanged`` (re-scoring), each run must already be stored *as the run the record
    was made from*: same package hash, prediction hashes and creation time, checked under the
    run's row lock. A run re-made by ``zsl run`` since it was loaded is never overwritten with
    the old run's predictions; the whole save is refused instead (:class:`StaleRunError`).

    See docs/store.md, `save_runs`.
    """
    return _save_all(engine, records, only_unchanged=only_unchanged, replaced=None)


def _save_all(
    engine: Engine,
    records: Sequence[RunRecord],
    *,
    only_unchanged: bool,
    replaced: list[ReplacedRun] | None,
    refuse_changed_package: bool = False,
) -> list[int]:
    first_of: dict[RunKey, int] = {}
    for index, record in enumerate(records):
        _check_record(record)
        key = run_key(record)
        if key in first_of:
            raise HarnessError(
                f"records {first_of[key]} and {index} are both the {_what(record)}; save each "
                "run once"
            )
        first_of[key] = index
    if not records:
        return []
    # Rows are locked in one order (the store's), which keeps deadlocks between batches rare;
    # PostgreSQL breaks any that remain, and the save runs again.
    order = sorted(range(len(records)), key=lambda i: run_key(records[i]))
    with _store_errors(engine, "write to"):
        for attempt in range(1, SAVE_ATTEMPTS + 1):
            found: list[ReplacedRun] = []
            try:
                ids = _save_once(
                    engine,
                    [records[i] for i in order],
                    only_unchanged,
                    found,
                    refuse_changed_package,
                )
                break
            except sa_exc.DBAPIError as err:
                if attempt == SAVE_ATTEMPTS or not _is_retryable(err):
                    raise
    if replaced is not None:
        replaced.extend(found)
    by_index = dict(zip(order, ids, strict=True))
    return [by_index[i] for i in range(len(records))]


def delete_run(
    engine: Engine,
    *,
    benchmark: str,
    benchmark_version: int,
    submission: str,
    submission_version: str,
) -> bool:
    """Delete one run with its scores and curve points; True if it existed.

    The benchmark and submission rows stay (other runs may share them; they hold no results).
    """
    writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    key: RunKey = (benchmark, benchmark_version, submission, submission_version)
    with _store_errors(engine, "write to"), Session(writer) as session, session.begin():
        run_id = _run_id_of(session, key)
        if run_id is None:
            return False
        _delete_scores(session, run_id)
        session.exec(delete(RunRow).where(col(RunRow.id) == run_id))
    return True


def _run_id_of(session: Session, key: RunKey) -> int | None:
    benchmark, benchmark_version, submission, submission_version = key
    return session.exec(
        select(RunRow.id)
        .join(BenchmarkRow, col(RunRow.benchmark_id) == col(BenchmarkRow.id))
        .join(SubmissionRow, col(RunRow.submission_id) == col(SubmissionRow.id))
        .where(
            BenchmarkRow.benchmark == benchmark,
            BenchmarkRow.version == benchmark_version,
            SubmissionRow.name == submission,
            SubmissionRow.version == submission_version,
        )
    ).first()


def _run_ids(session: Session, keys: Sequence[RunKey]) -> list[int]:
    """The ids of the runs ``keys``, in order; every one must be stored."""
    ids = []
    for key in keys:
        run_id = _run_id_of(session, key)
        if run_id is None:
            benchmark, benchmark_version, submission, submission_version = key
            raise UnknownRunError(
                f"no stored run of {submission}@{submission_version} on {benchmark} "
                f"v{benchmark_version} (it was deleted meanwhile?); nothing was changed"
            )
        ids.append(run_id)
    return ids


def delete_runs(engine: Engine, keys: Sequence[RunKey]) -> None:
    """Delete the runs ``keys`` (with their scores and curve points) in ONE transaction.

    All or nothing: when any of them is not stored, nothing is deleted.

    Raises
    ------
    UnknownRunError
        A run of ``keys`` is not stored (naming it); nothing was deleted.
    """
    writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    with _store_errors(engine, "write to"), Session(writer) as session, session.begin():
        for run_id in _run_ids(session, keys):
            _delete_scores(session, run_id)
            session.exec(delete(RunRow).where(col(RunRow.id) == run_id))


def set_hidden(engine: Engine, keys: Sequence[RunKey], hidden: bool) -> list[RunKey]:
    """Hide (or show again) the runs ``keys`` in ONE transaction; the keys whose flag changed.

    A hidden run stays in the store but :func:`load_runs` leaves it out unless asked, so
    exports (``zsl results export``) and the site leave it out too.

    Raises
    ------
    UnknownRunError
        A run of ``keys`` is not stored (naming it); nothing was changed.
    """
    writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    changed = []
    with _store_errors(engine, "write to"), Session(writer) as session, session.begin():
        for key, run_id in zip(keys, _run_ids(session, keys), strict=True):
            row = session.get(RunRow, run_id)
            assert row is not None
            if bool(row.hidden) != hidden:
                row.hidden = hidden
                session.add(row)
                changed.append(key)
    return changed


def load_runs(
    engine: Engine, *, benchmark: str | None = None, include_hidden: bool = False
) -> list[RunRecord]:
    """Every stored run (of ``benchmark`` only, if given) as records.

    Sorted by benchmark id, benchmark version, submission name and submission version; each
    record's scores keep the order they were saved in, their curves the shape they had. All
    of it is read from one snapshot of the store. Hidden runs (``zsl results hide``) are left
    out unless ``include_hidden``: exports and the site read the store through here.
    """
    return [
        stored.record
        for stored in list_runs(engine, benchmark=benchmark, include_hidden=include_hidden)
    ]


def list_runs(
    engine: Engine,
    *,
    benchmark: str | None = None,
    submission: str | None = None,
    include_hidden: bool = True,
) -> list[StoredRun]:
    """The stored runs (of ``benchmark`` and ``submission`` name only, if given), hidden ones
    included unless ``include_hidden`` is False, each with its hidden flag; in
    :func:`load_runs`'s order, from one snapshot."""
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
    points_stmt = (
        select(col(CurvePointRow.score_id), col(CurvePointRow.point))
        .join(ScoreRow, col(CurvePointRow.score_id) == col(ScoreRow.id))
        .join(RunRow, col(ScoreRow.run_id) == col(RunRow.id))
        .join(BenchmarkRow, col(RunRow.benchmark_id) == col(BenchmarkRow.id))
        .order_by(col(CurvePointRow.score_id), col(CurvePointRow.position))
    )
    if benchmark is not None:
        runs_stmt = runs_stmt.where(BenchmarkRow.benchmark == benchmark)
        scores_stmt = scores_stmt.where(BenchmarkRow.benchmark == benchmark)
        points_stmt = points_stmt.where(BenchmarkRow.benchmark == benchmark)
    if submission is not None:
        by_submission = col(RunRow.submission_id) == col(SubmissionRow.id)
        runs_stmt = runs_stmt.where(SubmissionRow.name == submission)
        scores_stmt = scores_stmt.join(SubmissionRow, by_submission).where(
            SubmissionRow.name == submission
        )
        points_stmt = points_stmt.join(SubmissionRow, by_submission).where(
            SubmissionRow.name == submission
        )
    if not include_hidden:
        runs_stmt = runs_stmt.where(col(RunRow.hidden).is_(False))
        scores_stmt = scores_stmt.where(col(RunRow.hidden).is_(False))
        points_stmt = points_stmt.where(col(RunRow.hidden).is_(False))

    with _store_errors(engine, "read"), Session(_snapshot(engine)) as session, session.begin():
        rows = session.exec(runs_stmt).all()
        points: dict[int, list[Any]] = defaultdict(list)
        for score_id, point in session.exec(points_stmt):
            points[score_id].append(point)
        scores: dict[int, list[ScoreEntry]] = defaultdict(list)
        for score in session.exec(scores_stmt):
            scores[score.run_id].append(_score_entry(score, points.get(_id(score), [])))
        stored = [
            StoredRun(_record(run, bench, sub, scores.get(_id(run), [])), bool(run.hidden))
            for run, bench, sub in rows
        ]
    # Sort here, not in SQL: string collation differs between SQLite and PostgreSQL.
    stored.sort(key=lambda s: run_key(s.record))
    return stored


def count_runs(engine: Engine, *, hidden: bool | None = None) -> int:
    """How many runs the store holds (only the hidden ones, or only the others, if given)."""
    query = select(func.count()).select_from(RunRow)
    if hidden is not None:
        query = query.where(col(RunRow.hidden).is_(hidden))
    with _store_errors(engine, "read"), Session(engine) as session:
        return int(session.exec(query).one())


# -- saving -------------------------------------------------------------------------------------


def _save_once(
    engine: Engine,
    records: Sequence[RunRecord],
    only_unchanged: bool = False,
    replaced: list[ReplacedRun] | None = None,
    refuse_changed_package: bool = False,
) -> list[int]:
    # BEGIN IMMEDIATE on SQLite takes the write lock before our first SELECT, so concurrent
    # writers queue on the busy timeout instead of failing on a stale read.
    writer = engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    run_ids = []
    with Session(writer) as session, session.begin():
        # Under the writer lock: a look-alike of a stored name ("ESZSL", "\u0435szsl") is refused.
        check_new_identities(
            records,
            session.exec(select(SubmissionRow.name).distinct()).all(),
            session.exec(select(BenchmarkRow.benchmark).distinct()).all(),
        )
        for record in records:
            bench = _upsert_benchmark(session, record.benchmark)
            sub = _upsert_submission(session, record.submission)
            run = _upsert_run(
                session,
                record,
                benchmark_id=_id(bench),
                submission_id=_id(sub),
                only_unchanged=only_unchanged,
                replaced=replaced,
                refuse_changed_package=refuse_changed_package,
            )
            _replace_scores(session, _id(run), record.scores)
            run_ids.append(_id(run))
    return run_ids


def _insert_if_missing(session: Session, model: type[SQLModel], values: dict[str, Any]) -> bool:
    """INSERT a row unless its unique key exists (or is being inserted by a concurrent writer,
    whose commit PostgreSQL waits for); a plain INSERT on other databases. True if inserted."""
    table = _table(model)
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        statement: Any = postgresql.insert(table).values(values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(table).values(values).on_conflict_do_nothing()
    else:  # a concurrent duplicate raises IntegrityError: save_runs tries again
        statement = insert(table).values(values)
    return bool(session.connection().execute(statement).rowcount)


def _upsert_benchmark(session: Session, info: BenchmarkInfo) -> BenchmarkRow:
    query = select(BenchmarkRow).where(
        BenchmarkRow.benchmark == info.id, BenchmarkRow.version == info.version
    )
    row = session.exec(query).first()
    # What a later run may update; the hashes are fixed by the first run and checked below.
    values: dict[str, Any] = {
        "title": info.title,
        "primary": dict(info.primary),
        "n_classes": info.n_classes,
        "n_seen": info.n_seen,
        "n_unseen": info.n_unseen,
        "structure": dict(info.structure),
        "test_classes": [c.model_dump(mode="json") for c in info.test_classes],
        "family": info.family,
        "family_member": info.family_member,
        "provenance": _provenance_json(info),
        "raw_inputs": None if info.raw_inputs is None else info.raw_inputs.model_dump(mode="json"),
        "experimental": info.experimental,
    }
    if row is None:
        identity = {"benchmark": info.id, "version": info.version}
        hashes = {"hash": info.hash, "spec_hash": info.spec_hash}
        _insert_if_missing(session, BenchmarkRow, {**identity, **hashes, **values})
        row = session.exec(query).one()
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
    # Unchanged values issue no UPDATE, so writers of one benchmark do not lock its row.
    for field, value in values.items():
        setattr(row, field, value)
    session.add(row)
    session.flush()
    return row


def _provenance_json(info: BenchmarkInfo) -> dict[str, Any] | None:
    return None if info.provenance is None else info.provenance.model_dump(mode="json")


def _upsert_submission(session: Session, info: SubmissionInfo) -> SubmissionRow:
    query = select(SubmissionRow).where(
        SubmissionRow.name == info.name, SubmissionRow.version == info.version
    )
    row = session.exec(query).first()
    values = {
        "kind": info.kind,
        "package_hash": info.package_hash,
        "authors": list(info.authors),
        "paper": info.paper,
        "url": info.url,
        "code": info.code,
        "bibtex": info.bibtex,
        "readme": info.readme,
        "description": info.description,
        "declarations": dict(info.declarations),
    }
    if row is None:
        _insert_if_missing(
            session, SubmissionRow, {"name": info.name, "version": info.version, **values}
        )
        row = session.exec(query).one()
    for field, value in values.items():
        setattr(row, field, value)
    session.add(row)
    session.flush()
    return row


def _upsert_run(
    session: Session,
    record: RunRecord,
    *,
    benchmark_id: int,
    submission_id: int,
    only_unchanged: bool = False,
    replaced: list[ReplacedRun] | None = None,
    refuse_changed_package: bool = False,
) -> RunRow:
    now = datetime.now(UTC)
    # FOR UPDATE (PostgreSQL; SQLite's writer lock covers it): a concurrent save of the same
    # run waits here, then replaces the scores this one commits, never mixes with them.
    query = (
        select(RunRow)
        .where(RunRow.benchmark_id == benchmark_id, RunRow.submission_id == submission_id)
        .with_for_update()
    )
    values = {
        "package_hash": record.submission.package_hash,
        "predictions_hashes": dict(record.predictions_hashes),
        "harness_version": record.harness_version,
        "runner": record.runner,
        "environment": dict(record.environment),
        "timings": dict(record.timings),
        "leakage": record.leakage.model_dump(mode="json") if record.leakage else {},
        "logs": dict(record.logs),
        "hyperparameters": {fit: dict(v) for fit, v in record.hyperparameters.items()},
        "model_state": dict(record.model_state),
        "created_at": _to_utc(record.created_at),
        "updated_at": now,
    }
    row = session.exec(query).first()
    if only_unchanged:
        _check_unchanged(row, record)
    # Checked before the run too; here again under the row lock, for a run of a changed package
    # stored by another process meanwhile (or by an earlier run of the same matrix).
    given = record.submission.package_hash
    if refuse_changed_package and row is not None and row.package_hash != given:
        raise ChangedPackageError.of(run_key(record), row.package_hash, given)
    if row is not None and replaced is not None:
        replaced.append(_replaced(session, row, record))
    if row is None:
        inserted = _insert_if_missing(
            session,
            RunRow,
            {"benchmark_id": benchmark_id, "submission_id": submission_id, **values},
        )
        row = session.exec(query).one()
        if inserted:  # written with these values already
            return row
    for field, value in values.items():
        setattr(row, field, value)
    session.add(row)
    session.flush()
    return row


def _replaced(session: Session, row: RunRow, record: RunRecord) -> ReplacedRun:
    """The stored run ``row`` as ``record`` is about to replace it."""
    before = {
        (setting, metric): value
        for setting, metric, value in session.exec(
            select(ScoreRow.setting, ScoreRow.metric, ScoreRow.value).where(
                ScoreRow.run_id == _id(row)
            )
        )
    }
    primary = {
        setting: before[(setting, metric)]
        for setting, metric in record.benchmark.primary.items()
        if (setting, metric) in before
    }
    return ReplacedRun(
        key=run_key(record),
        runner=row.runner,
        created_at=_to_utc(row.created_at),
        primary=primary,
        hidden=bool(row.hidden),
        package_hash=row.package_hash,
    )


def _check_unchanged(row: RunRow | None, record: RunRecord) -> None:
    """Refuse to replace a run that is no longer the one ``record`` was made from."""
    if row is None:
        raise StaleRunError(f"the {_what(record)} is no longer stored; nothing was saved")
    stored = (row.package_hash, dict(row.predictions_hashes), _to_utc(row.created_at))
    given = (
        record.submission.package_hash,
        dict(record.predictions_hashes),
        _to_utc(record.created_at),
    )
    if stored != given:
        raise StaleRunError(
            f"the {_what(record)} was stored again (run at {stored[2].isoformat()}) after it was "
            "loaded for re-scoring; nothing was saved: run the command again"
        )


def _delete_scores(session: Session, run_id: int) -> None:
    # Curve points go explicitly, not only by ON DELETE CASCADE: a SQLite connection opened
    # without PRAGMA foreign_keys (another tool) would leave them behind.
    score_ids = select(ScoreRow.id).where(col(ScoreRow.run_id) == run_id)
    session.exec(delete(CurvePointRow).where(col(CurvePointRow.score_id).in_(score_ids)))
    session.exec(delete(ScoreRow).where(col(ScoreRow.run_id) == run_id))


def _replace_scores(session: Session, run_id: int, scores: list[ScoreEntry]) -> None:
    _delete_scores(session, run_id)
    if not scores:
        return
    splits = [split_curve(dict(entry.details)) for entry in scores]
    rows = [
        {
            "run_id": run_id,
            "position": position,
            "setting": entry.setting,
            "metric": entry.metric,
            "function": entry.function,
            "version": entry.version,
            "value": entry.value,
            "higher_is_better": entry.higher_is_better,
            "details": split.details,
            "interval": entry.interval.model_dump(mode="json") if entry.interval else None,
            "class_values": (
                entry.class_values.model_dump(mode="json") if entry.class_values else None
            ),
            "curve_layout": split.layout,
            "curve_x": split.x_key,
            "curve_y": split.y_key,
            "curve_meta": split.meta,
        }
        for position, (entry, split) in enumerate(zip(scores, splits, strict=True))
    ]
    # One executemany, then the ids by position: portable, and one statement each on SQLite
    # (where INSERT ... RETURNING in parameter order falls back to a statement per row).
    score_table = _table(ScoreRow)
    connection = session.connection()
    connection.execute(insert(score_table), rows)
    id_of: dict[int, int] = {
        position: score_id
        for position, score_id in connection.execute(
            select(score_table.c.position, score_table.c.id).where(score_table.c.run_id == run_id)
        )
    }
    score_ids = [id_of[position] for position in range(len(rows))]
    points = [
        {"score_id": score_id, "position": position, "x": x, "y": y, "point": point}
        for score_id, split in zip(score_ids, splits, strict=True)
        for position, point in enumerate(split.points)
        for x, y in [split.xy(point)]
    ]
    if points:
        connection.execute(insert(_table(CurvePointRow)), points)


def _check_record(record: RunRecord) -> None:
    """Refuse what the database would mangle or reject, with a message naming the entry."""
    where = _what(record)
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
        if entry.class_values is not None:
            _check_json(
                entry.class_values.model_dump(mode="json"),
                f"{where}: class values of {entry.setting}/{entry.metric}",
            )
    for name in ("environment", "timings", "predictions_hashes", "logs", "model_state"):
        _check_json(getattr(record, name), f"{where}: {name}")
    if record.leakage is not None:
        _check_json(record.leakage.model_dump(mode="json"), f"{where}: leakage")
    _check_json(record.submission.declarations, f"{where}: submission declarations")
    _check_json(record.benchmark.structure, f"{where}: benchmark structure")
    _check_json(record.hyperparameters, f"{where}: hyperparameters")


def _check_json(value: Any, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise HarnessError(
            f"{what} is not portable JSON ({err}); use finite numbers, strings, lists and dicts"
        ) from err


def _is_retryable(err: sa_exc.DBAPIError) -> bool:
    if isinstance(err, sa_exc.IntegrityError):
        return True
    sqlstate = getattr(err.orig, "sqlstate", None) or getattr(err.orig, "pgcode", None)
    return sqlstate in _RETRY_SQLSTATES


# -- loading ------------------------------------------------------------------------------------


def _snapshot(engine: Engine) -> Engine:
    """An engine whose transactions read one snapshot: PostgreSQL's default (READ COMMITTED)
    gives each statement its own; SQLite's read transactions already are one."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="REPEATABLE READ")
    return engine


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
            structure=dict(bench.structure or {}),
            test_classes=list(bench.test_classes or []),
            family=bench.family,
            family_member=bench.family_member,
            provenance=bench.provenance,
            raw_inputs=bench.raw_inputs,
            experimental=bench.experimental,
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
                "code": sub.code,
                "bibtex": sub.bibtex,
                "readme": sub.readme or "",
                "description": sub.description,
                "declarations": dict(sub.declarations),
            }
        ),
        predictions_hashes=dict(run.predictions_hashes),
        harness_version=run.harness_version,
        runner=run.runner,
        environment=dict(run.environment),
        timings=dict(run.timings),
        leakage=LeakageAudit.model_validate(run.leakage) if run.leakage else None,
        logs=dict(run.logs or {}),
        hyperparameters=dict(run.hyperparameters or {}),
        model_state=dict(run.model_state or {}),
        scores=scores,
        created_at=_to_utc(run.created_at),
    )


def _score_entry(row: ScoreRow, points: list[Any]) -> ScoreEntry:
    return ScoreEntry.model_validate(
        {
            "setting": row.setting,
            "metric": row.metric,
            "function": row.function,
            "version": row.version,
            "value": row.value,
            "higher_is_better": row.higher_is_better,
            "details": join_curve(dict(row.details), row.curve_layout, row.curve_meta, points),
            "interval": row.interval,
            "class_values": row.class_values,
        }
    )


# -- helpers ------------------------------------------------------------------------------------


@contextmanager
def _store_errors(engine: Engine, doing: str) -> Iterator[None]:
    """A database that cannot be reached, logged into or written becomes one HarnessError line
    naming the store without its password."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as err:
        raise HarnessError(
            f"cannot {doing} the store at {describe_url(engine.url)}: {one_line(err.orig)}; "
            "check ZSL_DATABASE_URL (server, user, password, database) or ZSL_HOME"
        ) from err


def _what(record: RunRecord) -> str:
    return (
        f"run of {record.submission.name}@{record.submission.version} on "
        f"{record.benchmark.id} v{record.benchmark.version}"
    )


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


def _to_utc(moment: datetime) -> datetime:
    """Aware UTC; a naive datetime is read as UTC (SQLite returns every datetime naive)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _id(row: BenchmarkRow | SubmissionRow | RunRow | ScoreRow) -> int:
    if row.id is None:  # pragma: no cover - flush() assigns ids
        raise AssertionError(f"{type(row).__name__} has no id after flush")
    return row.id
