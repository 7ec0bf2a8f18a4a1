"""The run store: SQLModel tables behind a small service API of run records.

SQLAlchemy, SQLModel and Alembic take ~0.3 s to import, so nothing is imported here until a name
of this module is used (PEP 562, :func:`harness.core.lazy.lazy_attributes`): callers keep
``from harness import store`` at the top of their module and a process that stores nothing never
loads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.lazy import lazy_attributes

# mypy reads the names here; at run time lazy_attributes imports each at its first use (so mypy
# never sees the __getattr__, and a misspelt name is a type error). Ruff cannot see the names
# exported: hence the noqa.
if TYPE_CHECKING:
    from harness.store.db import database_url, describe_url, make_engine  # noqa: F401
    from harness.store.migrations import create_tables  # noqa: F401
    from harness.store.service import (  # noqa: F401
        ChangedPackageError,
        ReplacedRun,
        StaleRunError,
        StoredRun,
        UnknownRunError,
        changed_packages,
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
else:
    __getattr__, __dir__, __all__ = lazy_attributes(
        __name__,
        {
            "harness.store.db": ("database_url", "describe_url", "make_engine"),
            "harness.store.migrations": ("create_tables",),
            "harness.store.service": (
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
            ),
        },
    )
