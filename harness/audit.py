"""Leakage audit: which test classes did the feature backbone already see in pre-training?

Xian et al. (GBU, TPAMI 2018, Sec. 4.1) showed that the standard splits of AWA, aPY, CUB and SUN
put ImageNet-1K classes among the test classes while the ResNet-101 features were trained on
ImageNet-1K. This module computes that overlap from data, never from a hard-coded list, and
reports for every test class each way it meets the pre-training class set, on WordNet 3.0's
hypernym graph (instance hypernyms included).

See docs/audit.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.core.errors import HarnessError, HierarchyError, SpecError
from harness.core.hashing import file_sha256
from harness.hierarchy.class_maps import read_class_map_rows
from harness.hierarchy.class_sets import class_list_sha256, resolve_class_set
from harness.hierarchy.wordnet import first_lemma, hypernym_hops, open_wordnet

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from harness.data.prepare import PreparedBenchmark
    from harness.hierarchy.class_maps import ClassMapRow
    from harness.spec import Spec

__all__ = [
    "MATCHES",
    "AuditInputs",
    "AuditInputsMissing",
    "AuditStatus",
    "ClassAudit",
    "LeakageAudit",
    "Relation",
    "Relative",
    "benchmark_audit",
    "freeze_audit",
    "leakage_audit",
    "plan_audit",
    "pretrained_classes",
    "relation_meaning",
    "spec_audit",
    "unseen_classes_of",
]

WNID = re.compile(r"^n\d{8}$")
Match = Literal["exact", "descendants", "ancestors", "both"]
#: How many pre-training classes a record keeps per test class and relation (nearest first);
#: the counts are always complete.
RELATIVES_KEPT = 5


class Relation(StrEnum):
    """How a pre-training class relates to a test class (see docs/audit.md)."""

    SAME = "same"
    HYPONYM = "hyponym"
    HYPERNYM = "hypernym"
    SIBLING = "sibling"


#: The relations each ``audit.match`` counts as leakage.
MATCHES: dict[str, tuple[Relation, ...]] = {
    "exact": (Relation.SAME,),
    "descendants": (Relation.SAME, Relation.HYPONYM),
    "ancestors": (Relation.SAME, Relation.HYPERNYM),
    "both": (Relation.SAME, Relation.HYPONYM, Relation.HYPERNYM),
}
_ORDER = {relation: pos for pos, relation in enumerate(Relation)}


def _hops(n: int) -> str:
    return f"{n} WordNet hop" + ("" if n == 1 else "s")


def relation_meaning(relation: Relation, within: int) -> str:
    """What a relation says, in words a reader of the site or the CLI can check."""
    return {
        Relation.SAME: "same: a pre-training class is the test class",
        Relation.HYPONYM: (
            "hyponym: a pre-training class is a kind of the test class (the backbone saw"
            " instances of it)"
        ),
        Relation.HYPERNYM: (
            f"hypernym: a pre-training class contains the test class, within {_hops(within)}"
            " (the backbone saw the broader category)"
        ),
        Relation.SIBLING: (
            f"sibling: a pre-training class shares a hypernym with the test class, within"
            f" {_hops(within)} of both"
        ),
    }[relation]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Relative(_Frozen):
    """A pre-training class related to a test class.

    ``hops`` counts WordNet hypernym edges: 0 for ``same``; from the pre-training class up to
    the test class (``hyponym``) or from the test class up to it (``hypernym``); for a
    ``sibling``, up from the test class to the shared hypernym ``via`` plus down to it.
    """

    wordnet_id: str
    name: str
    relation: Relation
    hops: int = Field(ge=0)
    via: str | None = None


class ClassAudit(_Frozen):
    """One test class: its WordNet synset, how it got it, and its pre-training relatives.

    ``mapping``: ``id`` (the class id is a WordNet id), ``exact`` or ``broader`` (a row of the
    spec's ``audit.wordnet_map``), or ``none`` (not auditable). ``counts`` is complete;
    ``relatives`` keeps the nearest :data:`RELATIVES_KEPT` per relation.
    """

    class_id: str
    name: str = ""
    wordnet_id: str | None = None
    mapping: Literal["id", "exact", "broader", "none"]
    counts: dict[Relation, int] = Field(default_factory=dict)
    relatives: list[Relative] = Field(default_factory=list)

    @property
    def relations(self) -> frozenset[Relation]:
        return frozenset(r for r, n in self.counts.items() if n)

    @property
    def label(self) -> str:
        return self.name or self.class_id

    def relatives_by(self, relation: Relation) -> list[Relative]:
        return [r for r in self.relatives if r.relation == relation]


class AuditStatus(StrEnum):
    """Whether an audit holds relations, and if not, why (never read as clean)."""

    #: the test classes were related to the pre-training classes through WordNet
    AUDITED = "audited"
    #: the features were not pre-trained on a class set: nothing to relate
    NOT_APPLICABLE = "not applicable"
    #: the features were pre-trained on a web corpus (``pretrained_on: {web: ...}``): image-text
    #: pairs that no class list describes, so overlap can be neither counted nor ruled out
    NOT_AUDITABLE = "not auditable against a class list"
    #: frozen without an audit on purpose (``zsl data prepare --no-audit REASON``)
    NOT_AUDITED = "not audited"
    #: could not be made where the run was scored: runs of older harnesses (which audited at
    #: scoring time), and submissions whose declared backbone's class set was not readable there
    UNAVAILABLE = "unavailable"


class AuditInputs(_Frozen):
    """The identity of what an audit was computed from, recorded with it.

    Two audits of the same test classes can differ only if one of these differs, so a
    benchmark frozen on two machines either gets the same audit or shows why not.
    ``class_list_sha256`` is :func:`harness.hierarchy.class_sets.class_list_sha256` of the
    pre-training ids (order and file layout do not matter).
    """

    class_set: str
    n_pretrained: int = Field(ge=0)
    class_list_sha256: str | None = None
    wordnet_version: str | None = None
    wordnet_map_sha256: str | None = None


class LeakageAudit(_Frozen):
    """The audit of a benchmark's test classes against one pre-training class set.

    ``classes`` holds the test classes with at least one relation and those that could not be
    audited; the others are clean. ``status`` says whether there are relations at all; when it is
    ``not audited`` or ``unavailable``, ``error`` says why (the reason the maintainer gave, or
    what was missing where the run was scored): never read that as clean. ``inputs`` identifies
    what the audit was computed from (none in records of older harnesses).
    """

    source: str
    match: Match = "descendants"
    related_within: int = 1
    n_test: int = 0
    classes: list[ClassAudit] = Field(default_factory=list)
    error: str | None = None
    status: AuditStatus = AuditStatus.AUDITED
    inputs: AuditInputs | None = None

    @model_validator(mode="before")
    @classmethod
    def _status_of_older_records(cls, data: object) -> object:
        """Records of older harnesses carry no ``status``: derive it from what they hold."""
        if isinstance(data, dict) and "status" not in data:
            if data.get("error") is not None:
                status = AuditStatus.UNAVAILABLE
            elif data.get("source") in ("", "none"):
                status = AuditStatus.NOT_APPLICABLE
            else:
                status = AuditStatus.AUDITED
            data = {**data, "status": status}
        return data

    @property
    def audited(self) -> bool:
        """Whether the test classes were related to pre-training classes (counts mean something)."""
        return self.status == AuditStatus.AUDITED

    @property
    def counted(self) -> tuple[Relation, ...]:
        """The relations counted as leakage (``audit.match``)."""
        return MATCHES[self.match]

    @property
    def leaked(self) -> list[ClassAudit]:
        """Test classes with a counted relation: the badge's numerator."""
        counted = set(self.counted)
        return [c for c in self.classes if c.relations & counted]

    @property
    def n_overlap(self) -> int:
        return len(self.leaked)

    @property
    def not_auditable(self) -> list[ClassAudit]:
        return [c for c in self.classes if c.mapping == "none"]

    def with_relation(self, relation: Relation) -> list[ClassAudit]:
        return [c for c in self.classes if relation in c.relations]

    def rule(self) -> str:
        """What is counted and what each relation means (the badge's tooltip)."""
        counted = [relation_meaning(r, self.related_within) for r in self.counted]
        other = [
            relation_meaning(r, self.related_within) for r in Relation if r not in self.counted
        ]
        return (
            f"Leakage counts test classes related to the {self.source} pre-training classes"
            f" by: {'; '.join(counted)}. Reported, not counted: {'; '.join(other)}."
        )

    def summary(self) -> str:
        """One line: what is counted, then every relation's class count (or why there is none)."""
        if self.status == AuditStatus.NOT_APPLICABLE:
            return "not applicable: the features were not pre-trained on a class set"
        if self.status == AuditStatus.NOT_AUDITABLE:
            return (
                f"not auditable against a class list: the features were pre-trained on the web"
                f" corpus {self.source}, which no class list describes; the test classes may"
                " have been seen"
            )
        if self.status == AuditStatus.NOT_AUDITED:
            return f"not audited ({self.source}): frozen without a leakage audit: {self.error}"
        if self.error is not None:
            return f"leakage audit unavailable ({self.source}): {self.error}"
        counted = " or ".join(r.value for r in self.counted)
        parts = [
            f"{len(self.with_relation(r))} {r.value}" for r in Relation if self.with_relation(r)
        ]
        text = (
            f"{self.n_overlap} of {self.n_test} test classes seen in pre-training ({self.source};"
            f" counted: {counted}); relations: {', '.join(parts) or 'none'}"
        )
        if self.not_auditable:
            text += f"; {len(self.not_auditable)} not auditable (no WordNet synset)"
        return text

    def inputs_text(self) -> str:
        """What the audit was computed from, in one line (empty when not recorded)."""
        if self.inputs is None or self.status in (
            AuditStatus.NOT_APPLICABLE,
            AuditStatus.NOT_AUDITABLE,
        ):
            return ""
        given = self.inputs
        parts = [f"class set {given.class_set} ({given.n_pretrained} classes"]
        if given.class_list_sha256:
            parts[0] += f", list {given.class_list_sha256}"
        parts[0] += ")"
        if given.wordnet_version:
            parts.append(f"WordNet {given.wordnet_version}")
        if given.wordnet_map_sha256:
            parts.append(f"audit.wordnet_map {given.wordnet_map_sha256}")
        return "; ".join(parts)


def _wordnet() -> WordNetCorpusReader:

    return open_wordnet()


def leakage_audit(
    class_ids: Sequence[str],
    pretrained: frozenset[str],
    *,
    names: Mapping[str, str] | None = None,
    wordnet_map: Mapping[str, ClassMapRow] | None = None,
    match: Match = "descendants",
    related_within: int = 1,
    source: str = "",
    reader: WordNetCorpusReader | None = None,
) -> LeakageAudit:
    """Relate every test class to a pre-training class set.

    See docs/audit.md, `leakage_audit`.
    """
    if match not in MATCHES:
        raise HarnessError(f"leakage audit: match must be one of {sorted(MATCHES)}; got {match!r}")
    names = names or {}
    classes = sorted(set(class_ids))
    audit = LeakageAudit(
        source=source,
        match=match,
        related_within=related_within,
        n_test=len(classes),
        status=AuditStatus.AUDITED if pretrained else AuditStatus.NOT_APPLICABLE,
    )
    if not pretrained:  # nothing was pre-trained on: every class is clean, no WordNet needed
        return audit
    reader = reader if reader is not None else _wordnet()
    below = _pretrained_index(reader, pretrained)
    found = []
    for class_id in classes:
        name = names.get(class_id, "")
        row = wordnet_map.get(name) if wordnet_map is not None and name else None
        if WNID.match(class_id):
            synset, mapping = class_id, "id"
        elif row is not None:
            synset, mapping = row.wnid, ("broader" if row.broader else "exact")
        else:
            found.append(ClassAudit(class_id=class_id, name=name, mapping="none"))
            continue
        relatives = _relatives(
            reader, synset, mapping == "broader", pretrained, below, related_within
        )
        if relatives:
            found.append(_class_audit(reader, class_id, name, synset, mapping, relatives))
    return audit.model_copy(update={"classes": found})


def _pretrained_index(
    reader: WordNetCorpusReader, pretrained: Iterable[str]
) -> dict[str, list[tuple[str, int]]]:
    """Each hypernym of a pre-training class → the pre-training classes below it, with hops."""
    below: dict[str, list[tuple[str, int]]] = {}
    for wordnet_id in sorted(pretrained):
        try:
            hops = hypernym_hops(reader, wordnet_id)
        except HierarchyError as err:
            raise HarnessError(f"leakage audit: pre-training class {wordnet_id}: {err}") from None
        for above, down in hops.items():
            below.setdefault(above, []).append((wordnet_id, down))
    return below


def _relatives(
    reader: WordNetCorpusReader,
    synset: str,
    broader: bool,
    pretrained: frozenset[str],
    below: Mapping[str, list[tuple[str, int]]],
    within: int,
) -> dict[str, tuple[Relation, int, str | None]]:
    """Pre-training class → (relation, hops, shared hypernym) for one test class."""
    # A 'broader' class sits one hop below its synset, which it is not.
    up = {h: n + broader for h, n in hypernym_hops(reader, synset).items()}
    out: dict[str, tuple[Relation, int, str | None]] = {}
    if not broader:
        if synset in pretrained:
            out[synset] = (Relation.SAME, 0, None)
        for other, down in below.get(synset, ()):
            if down > 0:
                out[other] = (Relation.HYPONYM, down, None)
    for above, hops in up.items():
        if 0 < hops <= within and above in pretrained:
            out[above] = (Relation.HYPERNYM, hops, None)
    for above, hops in sorted(up.items(), key=lambda item: (item[1], item[0])):
        if not 0 < hops <= within:
            continue
        for other, down in below.get(above, ()):
            if not 0 < down <= within or other in up:  # too far, or an ancestor of the class
                continue
            known = out.get(other)
            if known is None or (known[0] == Relation.SIBLING and hops + down < known[1]):
                out[other] = (Relation.SIBLING, hops + down, above)
    return out


def _class_audit(
    reader: WordNetCorpusReader,
    class_id: str,
    name: str,
    synset: str,
    mapping: str,
    relatives: Mapping[str, tuple[Relation, int, str | None]],
) -> ClassAudit:

    ordered = sorted(relatives.items(), key=lambda kv: (_ORDER[kv[1][0]], kv[1][1], kv[0]))
    counts: dict[Relation, int] = {}
    kept = []
    for wordnet_id, (relation, hops, via) in ordered:
        counts[relation] = counts.get(relation, 0) + 1
        if counts[relation] <= RELATIVES_KEPT:
            kept.append(
                Relative(
                    wordnet_id=wordnet_id,
                    name=first_lemma(reader, wordnet_id),
                    relation=relation,
                    hops=hops,
                    via=via,
                )
            )
    return ClassAudit(
        class_id=class_id,
        name=name,
        wordnet_id=synset,
        mapping=mapping,
        counts=counts,
        relatives=kept,
    )


def pretrained_classes(
    class_set: str | None, wnids: list[str] | None, *, lists_dir: str | None = None
) -> frozenset[str]:
    """The WordNet ids of a named class set (``none`` is empty) or of an explicit list.

    ``lists_dir``: the ImageNet lists directory (a spec's ``data.params.lists_dir``); by default
    ``$ZSL_IMAGENET_DIR`` (:func:`harness.hierarchy.class_sets.resolve_class_set`).
    """
    if wnids is not None:
        return frozenset(wnids)
    if class_set in (None, "none"):
        return frozenset()

    return resolve_class_set(class_set, lists_dir)


def missing_inputs(problems: Sequence[str]) -> str:
    """Several missing inputs in one message, numbered; one as it is."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} inputs are missing: " + "; ".join(
        f"({i}) {problem}" for i, problem in enumerate(problems, 1)
    )


def _lists_dir(spec: Spec) -> str | None:
    value = spec.data.params.get("lists_dir")
    return value if isinstance(value, str) and value else None


def _wordnet_map(spec: Spec) -> dict[str, ClassMapRow] | None:
    """The spec's ``audit.wordnet_map`` rows by class name; a malformed map raises."""
    map_path = spec.audit_map_path()
    if map_path is None:
        return None

    return {row.name: row for row in read_class_map_rows(map_path)}


def spec_audit(
    spec: Spec,
    class_ids: Sequence[str],
    names: Mapping[str, str],
    *,
    class_set: str | None = None,
) -> LeakageAudit:
    """The leakage audit of ``class_ids`` under the spec's ``audit`` rule, made here and now.

    For what is not frozen with a benchmark: a submission that declares its own backbone's
    pre-training (``class_set`` overrides the spec's ``features.pretrained_on``) and
    ``zsl spec describe --release-only``. When the class set or WordNet cannot be read here, the
    audit is ``unavailable`` and carries the ``error`` rather than a guess; a malformed
    ``audit.wordnet_map`` is the spec's fault and raises.
    """
    pretrained_on = spec.features.pretrained_on
    name = class_set or pretrained_on.class_set
    source = name or "wnids"
    rule = spec.audit
    unavailable = LeakageAudit(
        source=source,
        match=rule.match,
        related_within=rule.related_within,
        n_test=len(set(class_ids)),
        status=AuditStatus.UNAVAILABLE,
    )
    if class_set is None and pretrained_on.web is not None:
        return unavailable.model_copy(
            update={"status": AuditStatus.NOT_AUDITABLE, "source": pretrained_on.web}
        )
    try:
        pretrained = pretrained_classes(
            name, None if class_set else pretrained_on.wnids, lists_dir=_lists_dir(spec)
        )
    except HarnessError as err:
        problems = [str(err)]
        try:  # say whether WordNet is missing too: the reader learns both at once
            _wordnet()
        except HierarchyError as also:
            problems.append(str(also))
        return unavailable.model_copy(update={"error": missing_inputs(problems)})
    if not pretrained:
        return unavailable.model_copy(
            update={"status": AuditStatus.NOT_APPLICABLE, "source": "none"}
        )
    wordnet_map = _wordnet_map(spec)
    try:
        return leakage_audit(
            class_ids,
            pretrained,
            names=names,
            wordnet_map=wordnet_map,
            match=rule.match,
            related_within=rule.related_within,
            source=source,
        )
    except HarnessError as err:
        if isinstance(err, HierarchyError):  # WordNet not installed here
            return unavailable.model_copy(update={"error": str(err)})
        raise


# -- the audit frozen with a benchmark -----------------------------------------------------------


class AuditInputsMissing(HarnessError):
    """A benchmark cannot be frozen with its leakage audit here: a class list or WordNet is
    missing. The message names what to provide, and how to freeze without an audit on purpose."""


@dataclass(frozen=True)
class AuditPlan:
    """What :func:`freeze_audit` will do, resolved before any data is read (so a freeze that
    must be refused is refused at once)."""

    status: AuditStatus
    source: str
    inputs: AuditInputs | None = None
    reason: str | None = None
    pretrained: frozenset[str] = frozenset()
    wordnet_map: Mapping[str, ClassMapRow] | None = None
    reader: WordNetCorpusReader | None = None


def no_audit_command(spec: Spec) -> str:
    """The command that freezes ``spec`` without a leakage audit, on purpose."""
    return f'zsl data prepare {spec.path} --no-audit "REASON"'


def plan_audit(spec: Spec, *, without_audit: str | None = None) -> AuditPlan:
    """Resolve the frozen audit's inputs: the pre-training class set, WordNet, the class map.

    ``without_audit``: freeze without an audit, recording this reason (``not audited``); it is
    ignored for features not pre-trained on a class set, which always record
    ``not applicable``, and for features pre-trained on a web corpus, which always record
    ``not auditable against a class list``, so a spec has one frozen form whatever is asked.

    Raises
    ------
    AuditInputsMissing
        If the class list or WordNet cannot be read here: naming what to set, and the command
        that freezes without an audit instead.
    HarnessError
        If ``without_audit`` is given but blank.
    """
    pretrained_on = spec.features.pretrained_on
    source = pretrained_on.class_set or "wnids"
    if pretrained_on.class_set == "none" or pretrained_on.wnids == []:
        return AuditPlan(
            AuditStatus.NOT_APPLICABLE, "none", AuditInputs(class_set="none", n_pretrained=0)
        )
    if pretrained_on.web is not None:  # no class list to relate the test classes to
        return AuditPlan(AuditStatus.NOT_AUDITABLE, pretrained_on.web)
    if without_audit is not None:
        reason = " ".join(without_audit.split())
        if not reason:
            raise HarnessError(
                "--no-audit needs a reason (recorded in the frozen benchmark and shown with every"
                ' run of it), e.g. --no-audit "ImageNet class lists not licensed here"'
            )
        return AuditPlan(AuditStatus.NOT_AUDITED, source, reason=reason)

    def refuse(problem: str) -> AuditInputsMissing:
        return AuditInputsMissing(
            f"{spec.benchmark} v{spec.version}: cannot freeze the benchmark with its leakage"
            f" audit (its test classes related, through WordNet 3.0, to the {source} classes"
            f" its features were pre-trained on): {problem}. The audit is frozen into the"
            " benchmark and its hash, so that every run of it carries the same one, wherever it"
            " is scored. Provide it and run again, or freeze without an audit on purpose:"
            f" `{no_audit_command(spec)}` (recorded as 'not audited: REASON'; that benchmark's"
            " hash differs from an audited freeze of the same spec)"
        )

    # Both inputs are looked for before refusing: a refusal names every one that is missing.
    problems: list[str] = []
    try:
        pretrained = pretrained_classes(
            pretrained_on.class_set, pretrained_on.wnids, lists_dir=_lists_dir(spec)
        )
    except HarnessError as err:
        problems.append(str(err))
    try:
        reader = _wordnet()
    except HierarchyError as err:
        problems.append(str(err))
    if problems:
        raise refuse(missing_inputs(problems))

    map_path = spec.audit_map_path()
    try:
        map_sha256 = file_sha256(map_path) if map_path is not None else None
    except OSError as err:
        raise SpecError(
            f"{spec.path}: cannot read audit.wordnet_map {map_path}: {err.strerror}"
        ) from None
    inputs = AuditInputs(
        class_set=source,
        n_pretrained=len(pretrained),
        class_list_sha256="sha256:" + class_list_sha256(pretrained),
        wordnet_version=str(reader.get_version()),
        wordnet_map_sha256=map_sha256,
    )
    return AuditPlan(
        AuditStatus.AUDITED,
        source,
        inputs,
        pretrained=pretrained,
        wordnet_map=_wordnet_map(spec),
        reader=reader,
    )


def freeze_audit(
    spec: Spec, plan: AuditPlan, class_ids: Sequence[str], names: Mapping[str, str]
) -> LeakageAudit:
    """The audit frozen with a benchmark: of its test classes ``class_ids``, as ``plan`` says."""
    rule = spec.audit
    base = LeakageAudit(
        source=plan.source,
        match=rule.match,
        related_within=rule.related_within,
        n_test=len(set(class_ids)),
        status=plan.status,
        inputs=plan.inputs,
        error=plan.reason,
    )
    if plan.status != AuditStatus.AUDITED:
        return base
    audit = leakage_audit(
        class_ids,
        plan.pretrained,
        names=names,
        wordnet_map=plan.wordnet_map,
        match=rule.match,
        related_within=rule.related_within,
        source=plan.source,
        reader=plan.reader,
    )
    return audit.model_copy(update={"inputs": plan.inputs})


def unseen_classes_of(bench: PreparedBenchmark) -> tuple[list[str], dict[str, str]]:
    """A prepared benchmark's unseen (test) class ids and every class's name."""
    ids = bench.class_ids
    unseen = ids[bench.array("splits/unseen_classes")].tolist()
    names = dict(zip(ids.tolist(), bench.array("class_names").tolist(), strict=True))
    return unseen, names


def benchmark_audit(
    spec: Spec, bench: PreparedBenchmark, *, class_set: str | None = None
) -> LeakageAudit:
    """The leakage audit a run of ``bench`` carries: the one frozen with the benchmark.

    Only a submission that declares another backbone (``class_set`` other than the spec's) is
    audited here, against that class set (:func:`spec_audit`).
    """
    frozen = bench.frozen.audit
    if class_set is None or class_set == spec.features.pretrained_on.class_set:
        return frozen
    unseen, names = unseen_classes_of(bench)
    return spec_audit(spec, unseen, names, class_set=class_set)
