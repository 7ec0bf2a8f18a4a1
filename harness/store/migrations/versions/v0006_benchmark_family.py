"""Benchmark families: the validation variants of one dataset and split (GBU Fig. 3).

- ``zsl_benchmark.family``: the benchmark id of the family's main member
  (``BenchmarkInfo.family``); NULL for benchmarks outside a family and those stored before;
- ``zsl_benchmark.family_member``: the benchmark's short label in its family, e.g. ``val2``
  (``BenchmarkInfo.family_member``); NULL likewise.

Rows stored before load as records without a family, as they were.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("zsl_benchmark", sa.Column("family", sa.String(), nullable=True))
    op.add_column("zsl_benchmark", sa.Column("family_member", sa.String(), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    op.drop_column("zsl_benchmark", "family_member")
    op.drop_column("zsl_benchmark", "family")
