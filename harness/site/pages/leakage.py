"""A benchmark's leakage badge and note, from the audit of its own features: how many test
classes the features' backbone saw in pre-training (the index and the benchmark page show it).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.audit import AuditStatus, LeakageAudit, Relation
from harness.site.model import BenchmarkPage


@dataclass(frozen=True)
class Leakage:
    """The benchmark's leakage badge: test classes its feature backbone saw in pre-training.

    ``classes``: one line per counted class, its relations and the pre-training classes
    responsible; ``title``: the badge's tooltip (what is counted and what each relation means).
    """

    badge: str
    source: str
    classes: tuple[str, ...]
    title: str
    unavailable: bool = False


def _benchmark_audit(bench: BenchmarkPage) -> LeakageAudit | None:
    """The audit of the benchmark's own features: the one frozen with the benchmark, which every
    run without a declared backbone carries (the newest such run's, for older records)."""
    records = sorted(bench.records.values(), key=lambda r: r.created_at)
    own = [r for r in records if not r.submission.declarations.get("backbone_pretrained_on")]
    audits = [r.leakage for r in (own or records) if r.leakage is not None]
    return audits[-1] if audits else None


def _audit_provenance(audit: LeakageAudit) -> str:
    """Where the audit comes from: its frozen inputs, or the scoring of an older record."""
    if audit.inputs is None:
        return "audited when the run was scored (a record of an older harness)"
    inputs = audit.inputs_text()
    return "audited when the benchmark was frozen" + (f", from {inputs}" if inputs else "")


def leakage_note(bench: BenchmarkPage) -> str:
    """What the page says when the audit counted no leakage (or there is no audit)."""
    audit = _benchmark_audit(bench)
    if audit is None:
        return "not audited: these records carry no leakage audit"
    if audit.status == AuditStatus.NOT_APPLICABLE:
        return "not applicable: the benchmark's features were not pre-trained on a class set"
    if not audit.audited:
        return audit.summary()
    counted = " or ".join(r.value for r in audit.counted)
    note = (
        f"none: no test class is related ({counted}) to the {audit.source} classes the"
        " features' backbone was pre-trained on"
    )
    others = [r for r in Relation if r not in audit.counted and audit.with_relation(r)]
    if others:
        note += "; reported, not counted: " + ", ".join(
            f"{len(audit.with_relation(r))} {r.value}" for r in others
        )
    return f"{note} ({_audit_provenance(audit)})"


def benchmark_leakage(bench: BenchmarkPage) -> Leakage | None:
    """The leakage badge from the audit of the benchmark's own features, if any."""
    audit = _benchmark_audit(bench)
    if audit is None or audit.status == AuditStatus.NOT_APPLICABLE:
        return None
    if audit.status == AuditStatus.NOT_AUDITABLE:  # web pre-training: never "no overlap"
        return Leakage(audit.status.value, audit.source, (), audit.summary(), unavailable=True)
    if audit.status == AuditStatus.NOT_AUDITED:
        return Leakage(
            "not audited",
            audit.source,
            (),
            f"frozen without a leakage audit: {audit.error}",
            unavailable=True,
        )
    if audit.error is not None:
        return Leakage("leakage audit unavailable", audit.source, (), audit.error, unavailable=True)
    if audit.n_overlap == 0:
        return None
    counted = set(audit.counted)
    classes = tuple(
        f"{entry.label} ({entry.class_id}): "
        + "; ".join(
            f"{relation.value} "
            + ", ".join(r.name for r in entry.relatives_by(relation)[:5])
            + (f" and {entry.counts[relation] - 5} more" if entry.counts[relation] > 5 else "")
            for relation in Relation
            if relation in entry.relations
        )
        for entry in audit.classes
        if entry.relations & counted
    )
    badge = f"leakage: {audit.n_overlap} of {audit.n_test} test classes seen in pre-training"
    return Leakage(badge, audit.source, classes, f"{audit.rule()} ({_audit_provenance(audit)})")
