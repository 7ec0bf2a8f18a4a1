"""The run store: SQLModel tables behind a small service API of run records."""

from harness.store.db import create_tables, database_url, make_engine
from harness.store.service import count_runs, load_runs, open_store, record_sort_key, save_run

__all__ = [
    "count_runs",
    "create_tables",
    "database_url",
    "load_runs",
    "make_engine",
    "open_store",
    "record_sort_key",
    "save_run",
]
