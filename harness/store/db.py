"""Where the store lives and how to connect to it.

SQLite under ``ZSL_HOME`` by default; any SQLAlchemy URL through ``ZSL_DATABASE_URL``
(PostgreSQL in production: a plain ``postgresql://`` URL uses psycopg 2 when installed, else
psycopg 3, the ``postgres`` extra). Errors name the URL with its password hidden. SQLite
connections get write-ahead logging, enforced foreign keys and real transactions: SQLAlchemy,
not the ``sqlite3`` driver, emits ``BEGIN``, so reads inside a transaction are repeatable and
writers can ask for ``BEGIN IMMEDIATE`` (see :data:`SQLITE_BEGIN_OPTION`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import StaticPool

from harness.core.errors import HarnessError

__all__ = [
    "SQLITE_BEGIN_OPTION",
    "database_url",
    "describe_url",
    "make_engine",
    "one_line",
]

DATABASE_URL_ENV = "ZSL_DATABASE_URL"
HOME_ENV = "ZSL_HOME"
DEFAULT_HOME = Path("~/.cache/zsl-harness")
DATABASE_FILENAME = "zsl.sqlite3"

#: Execution option naming the SQLite ``BEGIN`` mode (``DEFERRED``, ``IMMEDIATE``, ``EXCLUSIVE``).
SQLITE_BEGIN_OPTION = "zsl_sqlite_begin"
_BEGIN_MODES = frozenset({"DEFERRED", "IMMEDIATE", "EXCLUSIVE"})

#: Seconds a SQLite connection waits for another writer's lock before "database is locked".
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Seconds a PostgreSQL connection attempt may take before it fails (unless the URL says).
CONNECT_TIMEOUT_S = 10
POSTGRES_EXTRA_HINT = "pip install 'zsl-harness[postgres]' (psycopg 3)"


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


def describe_url(url: str | URL) -> str:
    """``url`` as it may appear in messages and logs: the password replaced by ``***``.

    Works on strings that are not valid URLs too, so an error about a malformed URL can still
    name it.

    >>> describe_url("postgresql://zsl:s3cret@db.internal:5432/leaderboard")
    'postgresql://zsl:***@db.internal:5432/leaderboard'
    >>> describe_url("postgresql://zsl:s3cret@db:port/x")
    'postgresql://zsl:***@db:port/x'
    """
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not parseable: mask whatever sits between "user:" and "@"
        return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)


def one_line(message: object) -> str:
    """A driver's message (often several lines, tabs) on one line."""
    return " ".join(str(message).split())


def _is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _with_driver(url: URL) -> URL:
    """``postgresql://`` with the installed driver: psycopg 2 if present, else psycopg 3."""
    if url.drivername in ("postgres", "postgresql"):
        if importlib.util.find_spec("psycopg2") is not None:
            return url.set(drivername="postgresql+psycopg2")
        if importlib.util.find_spec("psycopg") is not None:
            return url.set(drivername="postgresql+psycopg")
        raise HarnessError(f"no PostgreSQL driver for {describe_url(url)}: {POSTGRES_EXTRA_HINT}")
    return url


def make_engine(url: str, **engine_kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and SQLAlchemy-managed transactions.

    An in-memory SQLite URL (``sqlite://``) uses one shared connection (``StaticPool``), so
    every session sees the same database. ``postgresql://`` (and ``postgres://``) picks the
    installed driver; PostgreSQL connection attempts time out after :data:`CONNECT_TIMEOUT_S`
    unless the URL sets ``connect_timeout``. ``engine_kwargs`` go to ``create_engine``. Nothing
    connects yet.

    Raises
    ------
    HarnessError
        ``url`` is not a database URL, names an unknown database, or its driver is missing;
        the message shows the URL without its password.
    """
    try:
        parsed = _with_driver(make_url(url))
    except HarnessError:
        raise
    except Exception as err:  # sqlalchemy.exc.ArgumentError, ValueError (e.g. a bad port)
        # The driver's text may quote the URL, password included: name it ourselves.
        raise HarnessError(
            f"not a database URL: {describe_url(url)!r}; check {DATABASE_URL_ENV}, e.g. "
            "sqlite:////path/to/zsl.sqlite3 or postgresql://user:password@host:5432/db"
        ) from err
    connect_args: dict[str, Any]
    if parsed.get_backend_name() != "sqlite":
        if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
            connect_args = {"connect_timeout": CONNECT_TIMEOUT_S}
            connect_args.update(engine_kwargs.pop("connect_args", {}))
            engine_kwargs["connect_args"] = connect_args
        return _create_engine(parsed, **engine_kwargs)

    connect_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
    connect_args.update(engine_kwargs.pop("connect_args", {}))
    if _is_sqlite_memory(parsed):
        engine_kwargs.setdefault("poolclass", StaticPool)
    engine = _create_engine(parsed, connect_args=connect_args, **engine_kwargs)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _create_engine(url: URL, **engine_kwargs: Any) -> Engine:
    try:
        return create_engine(url, **engine_kwargs)
    except sa_exc.NoSuchModuleError as err:
        raise HarnessError(
            f"unknown database {url.drivername!r} in {describe_url(url)}; the store supports "
            "sqlite:// and postgresql:// URLs"
        ) from err
    except ImportError as err:
        hint = POSTGRES_EXTRA_HINT if url.get_backend_name() == "postgresql" else "install it"
        raise HarnessError(
            f"the driver for {describe_url(url)} is not installed ({err}); {hint}"
        ) from err


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take BEGIN away from the driver (its legacy mode skips it before SELECT); _sqlite_on_begin
    # emits it instead. PRAGMAs run here, outside any transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        _use_wal(cursor)
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    # Switching a database to WAL takes an exclusive lock without waiting on the busy timeout:
    # processes opening a new database at once get "database is locked" and retry here. Once
    # switched, the mode is persistent and reading it is all later connections do.
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.1)


def _sqlite_on_begin(connection: Connection) -> None:
    mode = str(connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")).upper()
    if mode not in _BEGIN_MODES:
        raise ValueError(
            f"{SQLITE_BEGIN_OPTION} must be one of {sorted(_BEGIN_MODES)}; got {mode!r}"
        )
    connection.exec_driver_sql(f"BEGIN {mode}")
