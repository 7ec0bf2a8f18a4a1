"""Hidden runs: ``zsl_run.hidden``, a store-side flag set by ``zsl results hide``.

A hidden run stays in the store (scores, curves, archived predictions) but is left out of
``load_runs`` by default, hence out of ``zsl results export`` and the site; ``zsl results
unhide`` brings it back. The flag is not part of the run record. Runs stored before are
visible (``false``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "zsl_run",
        sa.Column("hidden", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop zsl_run, which SQLite refuses
    # while scores reference it.
    op.drop_column("zsl_run", "hidden")
