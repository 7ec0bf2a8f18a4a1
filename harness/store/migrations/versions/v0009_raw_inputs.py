"""Where a benchmark's raw inputs came from, and experimental benchmarks.

- ``zsl_benchmark.raw_inputs``: JSON (``BenchmarkInfo.raw_inputs``): origin (release,
  synthetic, generated, own), whether it was verified against a pinned checksum, how, and the
  source files' sha256; NULL for benchmarks stored before ("source not recorded").
- ``zsl_benchmark.experimental``: the spec marks the benchmark experimental; false before.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("zsl_benchmark", sa.Column("raw_inputs", sa.JSON(), nullable=True))
    op.add_column(
        "zsl_benchmark",
        sa.Column("experimental", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    op.drop_column("zsl_benchmark", "experimental")
    op.drop_column("zsl_benchmark", "raw_inputs")
