"""The run store: SQLModel tables behind a small service API of run records.

SQLAlchemy, SQLModel and Alembic take ~0.3 s to import, so nothing is imported here until a name
of this module is used (PEP 562): callers keep ``from harness import store`` at the top of their
module and a process that stores nothing never loads them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.store.db import database_url, describe_url, make_engine
    from harness.store.migrations import create_tables
    from harness.store.service import (
        ReplacedRun,
        StaleRunError,
        StoredRun,
        UnknownRunError,
        count_runs,
        delete_run,
        delete_runs,
        list_runs,
        load_runs,
        open_store,
        primary_values,
        save_run,
        save_run_reporting,
        save_runs,
        set_hidden,
    )

__all__ = [
    "ReplacedRun",
    "StaleRunError",
    "StoredRun",
    "UnknownRunError",
    "count_runs",
    "create_tables",
    "database_url",
    "delete_run",
    "delete_runs",
    "describe_url",
    "list_runs",
    "load_runs",
    "make_engine",
    "open_store",
    "primary_values",
    "save_run",
    "save_run_reporting",
    "save_runs",
    "set_hidden",
]

#: The submodule that defines each public name.
_FROM = {
    **dict.fromkeys(("database_url", "describe_url", "make_engine"), "db"),
    "create_tables": "migrations",
    **dict.fromkeys(
        (
            "ReplacedRun",
            "StaleRunError",
            "StoredRun",
            "UnknownRunError",
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
        ),
        "service",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module 'harness.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"harness.store.{_FROM[name]}"), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
