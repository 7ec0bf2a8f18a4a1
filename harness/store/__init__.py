"""The run store: SQLModel tables behind a small service API of run records."""

from harness.store.db import create_tables, database_url, describe_url, make_engine
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
