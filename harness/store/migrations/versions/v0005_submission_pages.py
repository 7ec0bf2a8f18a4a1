"""What submission pages show: class names and nearest training classes, the hyperparameters a
model chose, and links, BibTeX and README of a submission.

- ``zsl_benchmark.test_classes``: the classes with test images (``BenchmarkInfo.test_classes``);
  ``[]`` for benchmarks stored before;
- ``zsl_run.hyperparameters``: ``{fit: {name: value}}`` (``RunRecord.hyperparameters``); ``{}``
  for runs stored before;
- ``zsl_submission.code``, ``bibtex`` (NULL before) and ``readme`` (``''`` before).

Rows stored before load as records without these fields, as they were.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "zsl_benchmark",
        sa.Column("test_classes", sa.JSON(), server_default=sa.text("'[]'"), nullable=False),
    )
    op.add_column(
        "zsl_run",
        sa.Column("hyperparameters", sa.JSON(), server_default=sa.text("'{}'"), nullable=False),
    )
    op.add_column("zsl_submission", sa.Column("code", sa.String(), nullable=True))
    op.add_column("zsl_submission", sa.Column("bibtex", sa.Text(), nullable=True))
    op.add_column(
        "zsl_submission", sa.Column("readme", sa.Text(), server_default="", nullable=False)
    )


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    for name in ("readme", "bibtex", "code"):
        op.drop_column("zsl_submission", name)
    op.drop_column("zsl_run", "hyperparameters")
    op.drop_column("zsl_benchmark", "test_classes")
