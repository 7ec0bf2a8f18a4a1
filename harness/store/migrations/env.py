"""Alembic's environment for the store: migrates the connection that harness.store hands in.

Alembic executes this file; importing it (pytest's doctest collection, mypy) does nothing.
"""

from alembic import context

from harness.store.migrations import run_environment

if getattr(context, "_proxy", None) is not None:  # set while Alembic runs an environment
    run_environment(context)
