"""Schema migrations of the store (Alembic): bring any store, new or old, to the newest schema.

:func:`upgrade` is what :func:`harness.store.open_store` runs. It is cheap when the store is
current (one read of the version table) and otherwise serialized across processes: on
PostgreSQL under a transaction-scoped advisory lock, on SQLite inside ``BEGIN IMMEDIATE``, and
in one transaction with the migrations themselves (both databases have transactional DDL), so
concurrent first opens of an empty database neither fail nor half-create it. A store made
before migrations existed (the four tables of revision 0001, no version table) is stamped
0001 first, then upgraded with its data. How to add a migration: ``README.md`` next to this
file.
"""

from __future__ import annotations

import functools
import zlib
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from harness.core.errors import HarnessError
from harness.store import models  # noqa: F401  (registers the tables on the metadata)
from harness.store.db import SQLITE_BEGIN_OPTION, describe_url

__all__ = [
    "BASELINE",
    "LEGACY_TABLES",
    "MIGRATIONS_DIR",
    "VERSION_TABLE",
    "alembic_config",
    "create_tables",
    "current_revision",
    "head_revision",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent

#: Alembic's version table, named for this project so it can share a database with others.
VERSION_TABLE = "zsl_alembic_version"

#: The schema of stores made before migrations: what an unversioned store is stamped with.
BASELINE = "0001"
LEGACY_TABLES = ("zsl_benchmark", "zsl_submission", "zsl_run", "zsl_score")

# PostgreSQL advisory locks take a bigint key; one fixed key for "migrating the zsl store".
_ADVISORY_LOCK_KEY = zlib.crc32(b"zsl-harness store migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, built in code (no ``alembic.ini``); ``connection`` is the one
    ``env.py`` migrates."""
    config = Config()
    # ConfigParser interpolates '%': a path holding one must escape it.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("file_template", "v%%(rev)s_%%(slug)s")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision id (the schema of :mod:`harness.store.models`)."""
    head = _script().get_current_head()
    if head is None:  # pragma: no cover - the package ships its revisions
        raise HarnessError(f"no migrations found in {MIGRATIONS_DIR}; reinstall zsl-harness")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database on ``connection`` is at; None when it has no version table."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the store on ``engine`` to ``revision`` (default: the newest), keeping its data.

    Safe to call from many processes at once; a store already at the newest revision is only
    read.

    Raises
    ------
    HarnessError
        The database holds some of the store's tables but not all of them, and no version
        table: it is not a store this package made (or it was damaged).
    sqlalchemy.exc.OperationalError
        The database cannot be reached or written (``open_store`` turns it into one line).
    """
    if revision == "head":
        with engine.connect() as connection:
            if current_revision(connection) == head_revision():
                return
    # The lock is taken before reading the version again: whoever waited finds it current.
    with engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"}).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY}
            )
        _stamp_unversioned(connection)
        command.upgrade(alembic_config(connection), revision)


def create_tables(engine: Engine) -> None:
    """Bring the store's schema to the newest revision (idempotent): :func:`upgrade`."""
    upgrade(engine)


def _stamp_unversioned(connection: Connection) -> None:
    """Stamp a store made before migrations (its tables, no version table) with 0001."""
    inspector = inspect(connection)
    if inspector.has_table(VERSION_TABLE):
        return
    present = [name for name in LEGACY_TABLES if inspector.has_table(name)]
    if not present:
        return  # an empty database: the migrations create everything
    missing = [name for name in LEGACY_TABLES if name not in present]
    if missing:
        raise HarnessError(
            f"the database at {describe_url(connection.engine.url)} has the store tables "
            f"{', '.join(present)} but not {', '.join(missing)}, and no {VERSION_TABLE} "
            "table: it was not made by zsl-harness or is damaged; restore it or point "
            "ZSL_DATABASE_URL at another database"
        )
    command.stamp(alembic_config(connection), BASELINE)


def run_environment(context: Any) -> None:
    """What ``env.py`` does when Alembic runs it: migrate the connection handed in."""
    from sqlmodel import SQLModel

    connection = context.config.attributes.get("connection")
    if connection is None:
        raise HarnessError(
            "the store's migrations run on a connection from harness.store: use open_store(), "
            "harness.store.migrations.upgrade() or `python -m harness.store.migrations`, not "
            "the alembic command"
        )
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        # Plain ALTERs, never batch "copy the table" ops: see README.md (SQLite would drop
        # tables that other rows reference).
        render_as_batch=False,
        render_item=_render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """Autogenerate writes SQLModel's string type as plain ``sa.String()``."""
    from sqlmodel.sql.sqltypes import AutoString

    if type_ == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    return False
