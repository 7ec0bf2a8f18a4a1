"""Fit and predict as separate runs: the hash of each fit's saved state.

- ``zsl_run.model_state``: ``{fit: "sha256:..."}`` (``RunRecord.model_state``), the content hash
  of the state each fit saved and every prediction pass loaded; ``{}`` for runs stored before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "zsl_run",
        sa.Column("model_state", sa.JSON(), server_default=sa.text("'{}'"), nullable=False),
    )


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    op.drop_column("zsl_run", "model_state")
