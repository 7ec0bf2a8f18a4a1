"""Harness-made features: the provenance of a benchmark's feature set and class embeddings.

- ``zsl_benchmark.provenance``: JSON (``BenchmarkInfo.provenance``): the feature set's hash,
  backbone, layer, weights sha256, preprocessing, and each class-embedding set's hash and text
  model; NULL for benchmarks of features brought as files and those stored before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("zsl_benchmark", sa.Column("provenance", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    op.drop_column("zsl_benchmark", "provenance")
