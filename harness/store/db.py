"""Where the store lives and how to connect to it.

SQLite under ``ZSL_HOME`` by default; any SQLAlchemy URL through ``ZSL_DATABASE_URL``
(PostgreSQL in production). SQLite connections get write-ahead logging, enforced foreign keys
and real transactions: SQLAlchemy, not the ``sqlite3`` driver, emits ``BEGIN``, so reads inside
a transaction are repeatable and writers can ask for ``BEGIN IMMEDIATE`` (see
:data:`SQLITE_BEGIN_OPTION`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import Connection
from sqlalchemy.pool import StaticPool
from sqlmodel import SQLModel

from harness.errors import HarnessError

# Importing the models registers their tables on SQLModel.metadata.
from harness.store import models as _models  # noqa: F401

DATABASE_URL_ENV = "ZSL_DATABASE_URL"
HOME_ENV = "ZSL_HOME"
DEFAULT_HOME = Path("~/.cache/zsl-harness")
DATABASE_FILENAME = "zsl.sqlite3"

#: Execution option naming the SQLite ``BEGIN`` mode (``DEFERRED``, ``IMMEDIATE``, ``EXCLUSIVE``).
SQLITE_BEGIN_OPTION = "zsl_sqlite_begin"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})


def home_dir() -> Path:
    """``ZSL_HOME`` if set, else ``~/.cache/zsl-harness``, expanded (not created)."""
    raw = os.environ.get(HOME_ENV, "").strip()
    return (Path(raw) if raw else DEFAULT_HOME).expanduser()


def database_url(zsl_home: Path | None = None) -> str:
    """The store's SQLAlchemy URL.

    ``ZSL_DATABASE_URL`` wins when set. Otherwise ``sqlite:///<home>/zsl.sqlite3``, where home is
    ``zsl_home`` if given, else ``ZSL_HOME``, else ``~/.cache/zsl-harness``; the directory is
    created.

    Raises
    ------
    HarnessError
        The directory can't be created, naming the variables that move the store elsewhere.
    """
    url = os.environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        return url
    home = (zsl_home if zsl_home is not None else home_dir()).expanduser().absolute()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        reason = "permission denied" if isinstance(err, PermissionError) else str(err)
        raise HarnessError(
            f"cannot create the store directory {home} ({reason}); set {HOME_ENV} to a "
            f"writable directory, or {DATABASE_URL_ENV} to a database URL"
        ) from err
    return f"sqlite:///{(home / DATABASE_FILENAME).as_posix()}"


def _is_sqlite_memory(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def make_engine(url: str, **engine_kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and SQLAlchemy-managed transactions.

    An in-memory SQLite URL (``sqlite://``) uses one shared connection (``StaticPool``), so
    every session sees the same database. ``engine_kwargs`` go to ``create_engine``.
    """
    try:
        parsed = make_url(url)
    except Exception as err:  # sqlalchemy.exc.ArgumentError, ValueError
        raise HarnessError(
            f"not a database URL: {url!r} ({err}); check {DATABASE_URL_ENV}, e.g. "
            "sqlite:////path/to/zsl.sqlite3 or postgresql://user@host/db"
        ) from err
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, **engine_kwargs)

    connect_args = {"check_same_thread": False, "timeout": 30.0}
    connect_args.update(engine_kwargs.pop("connect_args", {}))
    if _is_sqlite_memory(url):
        engine_kwargs.setdefault("poolclass", StaticPool)
    engine = create_engine(url, connect_args=connect_args, **engine_kwargs)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take BEGIN away from the driver (its legacy mode skips it before SELECT); _sqlite_on_begin
    # emits it instead. PRAGMAs run here, outside any transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    mode = str(connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")).upper()
    if mode not in _BEGIN_MODES:
        raise ValueError(
            f"{SQLITE_BEGIN_OPTION} must be one of {sorted(_BEGIN_MODES)}; got {mode!r}"
        )
    connection.exec_driver_sql(f"BEGIN {mode}")


def create_tables(engine: Engine) -> None:
    """Create every store table that does not exist yet (idempotent)."""
    SQLModel.metadata.create_all(engine)
