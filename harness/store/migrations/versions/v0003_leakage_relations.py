"""Leakage audits with relations: rewrite each stored run's ``leakage`` in the new shape.

Runs stored before carry the old audit, ``{overlap: [{class, name, via, by}], n_overlap,
n_test, n_not_wordnet, n_not_auditable, match, source}`` (or ``{error, source}``); the run
record now reads :class:`harness.audit.LeakageAudit` (``classes`` with per-relation counts and
relatives). The schema is unchanged; this revision moves data only.

What the old audit recorded converts exactly for ``match: exact`` (every shipped spec's): each
overlapping class becomes a ``same`` relation with the pre-training ids it listed. An audit made
with another ``match`` did not record which relation each id had, so it converts to an audit
whose ``error`` says to run the submission again; nothing is guessed. The classes the old audit
only counted as not auditable cannot be named and are dropped with that count.

See docs/store.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUN = sa.table("zsl_run", sa.column("id", sa.Integer), sa.column("leakage", sa.JSON))


def _audit(source: Any, match: str, n_test: Any, classes: list[Any], error: Any) -> dict[str, Any]:
    return {
        "source": str(source or ""),
        "match": match,
        "related_within": 1,
        "n_test": int(n_test or 0),
        "classes": classes,
        "error": None if error is None else str(error),
    }


def relations_from_overlaps(old: Any) -> Any:
    """The new audit for an old one (a new or empty audit is returned as it is)."""
    if not isinstance(old, dict) or not old or "classes" in old:
        return old
    source, n_test = old.get("source", ""), old.get("n_test", 0)
    if "error" in old:
        return _audit(source, "exact", n_test, [], old["error"])
    match = old.get("match", "exact")
    if match != "exact":
        return _audit(
            source,
            match if match in ("descendants", "ancestors", "both") else "exact",
            n_test,
            [],
            f"audited by an older harness with match {match!r}, which did not record each"
            " class's relation; run the submission again to audit it",
        )
    classes = []
    for row in old.get("overlap", []):
        by_id = row.get("by", "id") == "id"
        via = [str(v) for v in row.get("via", [])]
        name = str(row.get("name", ""))
        classes.append(
            {
                "class_id": str(row["class"]),
                "name": name,
                "wordnet_id": str(row["class"]) if by_id else (via[0] if via else None),
                "mapping": "id" if by_id else "exact",
                "counts": {"same": len(via)},
                "relatives": [
                    {"wordnet_id": v, "name": name, "relation": "same", "hops": 0, "via": None}
                    for v in via
                ],
            }
        )
    return _audit(source, "exact", n_test, classes, None)


def overlaps_from_relations(new: Any) -> Any:
    """The old audit for a new one (downgrade): the ``same`` relations as exact overlaps."""
    if not isinstance(new, dict) or not new or "classes" not in new:
        return new
    if new.get("error") is not None:
        return {"error": new["error"], "source": new.get("source", "")}
    overlap = [
        {
            "class": c["class_id"],
            "name": c.get("name", ""),
            "via": [r["wordnet_id"] for r in c.get("relatives", []) if r["relation"] == "same"],
            "by": "id" if c.get("mapping") == "id" else "name",
        }
        for c in new.get("classes", [])
        if c.get("counts", {}).get("same")
    ]
    return {
        "overlap": overlap,
        "n_overlap": len(overlap),
        "n_test": new.get("n_test", 0),
        "n_not_wordnet": 0,
        "n_not_auditable": sum(c.get("mapping") == "none" for c in new.get("classes", [])),
        "match": "exact",
        "source": new.get("source", ""),
    }


def _rewrite(convert: Any) -> None:
    bind = op.get_bind()
    for run_id, leakage in bind.execute(sa.select(_RUN.c.id, _RUN.c.leakage)).all():
        value = json.loads(leakage) if isinstance(leakage, str) else leakage
        converted = convert(value)
        if converted != value:
            bind.execute(_RUN.update().where(_RUN.c.id == run_id).values(leakage=converted))


def upgrade() -> None:
    _rewrite(relations_from_overlaps)


def downgrade() -> None:
    _rewrite(overlaps_from_relations)
