"""The store as it was before migrations: benchmarks, submissions, runs, scores.

Exactly the tables ``SQLModel.metadata.create_all`` made from ``harness/store/models.py`` up to
this revision, so an unversioned store is stamped with it and upgraded from there.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "zsl_benchmark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("spec_hash", sa.String(), nullable=False),
        sa.Column("primary", sa.JSON(), nullable=False),
        sa.Column("n_classes", sa.Integer(), nullable=False),
        sa.Column("n_seen", sa.Integer(), nullable=False),
        sa.Column("n_unseen", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("benchmark", "version", name="uq_benchmark_version"),
    )
    op.create_index(
        op.f("ix_zsl_benchmark_benchmark"), "zsl_benchmark", ["benchmark"], unique=False
    )
    op.create_table(
        "zsl_submission",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("package_hash", sa.String(), nullable=False),
        sa.Column("authors", sa.JSON(), nullable=False),
        sa.Column("paper", sa.String(), nullable=True),
        sa.Column("url", sa.String(), nullable=True),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("declarations", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version", name="uq_submission_version"),
    )
    op.create_index(op.f("ix_zsl_submission_name"), "zsl_submission", ["name"], unique=False)
    op.create_table(
        "zsl_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("package_hash", sa.String(), nullable=False),
        sa.Column("predictions_hashes", sa.JSON(), nullable=False),
        sa.Column("harness_version", sa.String(), nullable=False),
        sa.Column("runner", sa.String(), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("timings", sa.JSON(), nullable=False),
        sa.Column("leakage", sa.JSON(), nullable=False),
        sa.Column("logs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["benchmark_id"], ["zsl_benchmark.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["submission_id"], ["zsl_submission.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("benchmark_id", "submission_id", name="uq_run_benchmark_submission"),
    )
    op.create_index(op.f("ix_zsl_run_benchmark_id"), "zsl_run", ["benchmark_id"], unique=False)
    op.create_index(op.f("ix_zsl_run_submission_id"), "zsl_run", ["submission_id"], unique=False)
    op.create_table(
        "zsl_score",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("setting", sa.String(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("function", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("higher_is_better", sa.Boolean(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("interval", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["zsl_run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "setting", "metric", name="uq_score_run_setting_metric"),
    )
    op.create_index(op.f("ix_zsl_score_run_id"), "zsl_score", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_zsl_score_run_id"), table_name="zsl_score")
    op.drop_table("zsl_score")
    op.drop_index(op.f("ix_zsl_run_submission_id"), table_name="zsl_run")
    op.drop_index(op.f("ix_zsl_run_benchmark_id"), table_name="zsl_run")
    op.drop_table("zsl_run")
    op.drop_index(op.f("ix_zsl_submission_name"), table_name="zsl_submission")
    op.drop_table("zsl_submission")
    op.drop_index(op.f("ix_zsl_benchmark_benchmark"), table_name="zsl_benchmark")
    op.drop_table("zsl_benchmark")
