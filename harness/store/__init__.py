"""The run store: SQLModel tables behind a small service API of run records."""

from harness.store.db import create_tables, database_url, describe_url, make_engine
from harness.store.service import (
    StaleRunError,
    count_runs,
    delete_run,
    load_runs,
    open_store,
    save_run,
    save_runs,
)

__all__ = [
    "StaleRunError",
    "count_runs",
    "create_tables",
    "database_url",
    "delete_run",
    "describe_url",
    "load_runs",
    "make_engine",
    "open_store",
    "save_run",
    "save_runs",
]
