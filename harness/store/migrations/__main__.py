"""``python -m harness.store.migrations``: write a new revision, or check models against them.

``revision -m MESSAGE`` upgrades a temporary SQLite store to the newest revision, compares it
with :mod:`harness.store.models` and writes ``versions/v<NNNN>_<slug>.py`` with the difference
(to be read and edited). ``check`` exits 1 while models and revisions differ.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

from harness.store import models  # noqa: F401  (registers the tables on the metadata)
from harness.store.db import make_engine
from harness.store.migrations import (
    MIGRATIONS_DIR,
    VERSION_TABLE,
    alembic_config,
    head_revision,
    upgrade,
)


def _next_revision() -> str:
    numbers = [int(p.name[1:5]) for p in (MIGRATIONS_DIR / "versions").glob("v[0-9]*.py")]
    return f"{max(numbers, default=0) + 1:04d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.store.migrations")
    sub = parser.add_subparsers(dest="command", required=True)
    revision = sub.add_parser("revision", help="write the next revision from the models")
    revision.add_argument("-m", "--message", required=True, help="what the revision changes")
    sub.add_parser("check", help="exit 1 while the models differ from the newest revision")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="zsl-migrations-") as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'head.sqlite3'}")
        upgrade(engine)
        with engine.begin() as connection:
            if args.command == "check":
                context = MigrationContext.configure(
                    connection, opts={"version_table": VERSION_TABLE, "compare_type": True}
                )
                diff = compare_metadata(context, SQLModel.metadata)
                for item in diff:
                    print(item)
                print(f"models {'differ from' if diff else 'match'} revision {head_revision()}")
                return 1 if diff else 0
            script = command.revision(
                alembic_config(connection),
                message=args.message,
                autogenerate=True,
                rev_id=_next_revision(),
            )
        engine.dispose()
    for made in script if isinstance(script, list) else [script]:
        if made is not None:
            print(f"wrote {made.path}; read it, edit it, then run the store tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
