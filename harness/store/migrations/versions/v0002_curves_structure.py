"""Curve points, per-class values of scores and structure diagnostics of benchmarks.

- ``zsl_curve_point``: one row per operating point of a score's curve (see
  ``harness/store/curves.py``), removed with its score;
- ``zsl_score``: ``class_values`` (per-class means for paired tests) and how the score's curve
  was split (``curve_layout``, ``curve_x``, ``curve_y``, ``curve_meta``); existing scores keep
  their curves inside ``details`` (layout NULL) and load as before;
- ``zsl_benchmark.structure``: ``{}`` for benchmarks stored before.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "zsl_benchmark",
        sa.Column("structure", sa.JSON(), server_default=sa.text("'{}'"), nullable=False),
    )
    op.add_column("zsl_score", sa.Column("class_values", sa.JSON(), nullable=True))
    op.add_column("zsl_score", sa.Column("curve_layout", sa.String(), nullable=True))
    op.add_column("zsl_score", sa.Column("curve_x", sa.String(), nullable=True))
    op.add_column("zsl_score", sa.Column("curve_y", sa.String(), nullable=True))
    op.add_column("zsl_score", sa.Column("curve_meta", sa.JSON(), nullable=True))
    op.create_table(
        "zsl_curve_point",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("score_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("x", sa.Float(), nullable=True),
        sa.Column("y", sa.Float(), nullable=True),
        sa.Column("point", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["score_id"], ["zsl_score.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("score_id", "position", name="uq_curve_point_score_position"),
    )


def downgrade() -> None:
    op.drop_table("zsl_curve_point")
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop zsl_benchmark, which SQLite
    # refuses while runs reference it.
    for name in ("curve_meta", "curve_y", "curve_x", "curve_layout", "class_values"):
        op.drop_column("zsl_score", name)
    op.drop_column("zsl_benchmark", "structure")
