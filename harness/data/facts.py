"""What a run record says about its benchmark's split, computed once per prepared benchmark.

:func:`structure_summary` (the split's structure diagnostics in the hierarchy) and
:func:`test_classes` (every tested class, its columns, its nearest training class) depend on
the frozen data and the spec's settings only, yet every run record holds them. So
:func:`benchmark_facts` computes them once, when the benchmark is frozen (or on first use of
one frozen without them), and keeps them next to the frozen benchmark, in :data:`FACTS`: a
file outside its manifest, so the benchmark hash neither covers nor changes with it. The file
names what it was computed from (benchmark hash, spec hash, harness version,
:data:`FACTS_FORMAT`); one made from anything else (another spec of the same data, an older
harness) is computed again and replaced, never used.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

import harness
from harness.core.atomic import write_bytes_atomic
from harness.core.errors import HarnessError
from harness.data.structure import (
    StructuralRatio,
    mutual_exclusivity_violations,
    nearest_training_classes,
    structural_ratio,
)
from harness.hierarchy import Hierarchy
from harness.records import ScoredClass

if TYPE_CHECKING:
    from harness.data.prepare import PreparedBenchmark

__all__ = [
    "FACTS",
    "FACTS_FORMAT",
    "BenchmarkFacts",
    "benchmark_facts",
    "exclusivity_entry",
    "ratio_entry",
    "structure_summary",
    "test_classes",
    "verify_facts",
]

#: The file, in the frozen benchmark's folder, that keeps its facts.
FACTS = "facts.json"
#: Bump when what :func:`structure_summary` or :func:`test_classes` compute changes: a facts
#: file of another format is computed again.
FACTS_FORMAT = "zsl-benchmark-facts/1"

_CLASSES = TypeAdapter(list[ScoredClass])


@dataclass(frozen=True)
class BenchmarkFacts:
    """A prepared benchmark's facts, as a run record keeps them (``BenchmarkInfo.structure``,
    ``BenchmarkInfo.test_classes``)."""

    structure: dict[str, Any]
    test_classes: list[ScoredClass]


def _key(bench: PreparedBenchmark) -> dict[str, str]:
    """What a :data:`FACTS` file must name to be ``bench``'s."""
    return {
        "format": FACTS_FORMAT,
        "benchmark_hash": bench.hash,
        "spec_hash": bench.spec.spec_hash(),
        "harness_version": harness.__version__,
    }


def _stored_text(bench: PreparedBenchmark, facts: BenchmarkFacts) -> str:
    return json.dumps(
        {
            "key": _key(bench),
            "structure": facts.structure,
            "test_classes": _CLASSES.dump_python(facts.test_classes, mode="json"),
        },
        sort_keys=True,
    )


def _write(bench: PreparedBenchmark, facts: BenchmarkFacts) -> None:
    with suppress(OSError):  # a read-only ZSL_HOME: the facts stay right, computed per run
        write_bytes_atomic(
            bench.frozen.root / FACTS,
            _stored_text(bench, facts).encode("utf-8"),
            make_parents=False,
        )


def benchmark_facts(bench: PreparedBenchmark) -> BenchmarkFacts:
    """``bench``'s facts: read from its :data:`FACTS` file when that was computed from this very
    benchmark, spec and harness; else computed and the file (re)written atomically (a folder
    that cannot be written keeps none: the facts are computed each time then)."""
    try:
        stored = json.loads((bench.frozen.root / FACTS).read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("key") == _key(bench):
            return BenchmarkFacts(
                dict(stored["structure"]), _CLASSES.validate_python(stored["test_classes"])
            )
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        pass  # missing, unreadable or malformed: computed again below
    facts = BenchmarkFacts(structure_summary(bench), test_classes(bench))
    _write(bench, facts)
    return facts


def verify_facts(bench: PreparedBenchmark) -> bool:
    """Compute ``bench``'s facts afresh and compare them with its :data:`FACTS` file, which is
    outside the manifest's hash (``zsl data verify``): True when the file holds exactly them;
    else False, and the file is replaced by the fresh facts."""
    facts = BenchmarkFacts(structure_summary(bench), test_classes(bench))
    path = bench.frozen.root / FACTS
    try:
        same = path.read_text(encoding="utf-8") == _stored_text(bench, facts)
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        _write(bench, facts)
    return same


def structure_summary(bench: PreparedBenchmark) -> dict[str, Any]:
    """The split's structure diagnostics in the hierarchy; empty without a hierarchy.

    ``structural_ratio`` (value, classes included and excluded, or the error), ``hops_to_train``
    (histogram: hops from each unseen class to its nearest training class, "inf" when none is
    connected) and ``mutual_exclusivity_violations`` (ancestor/descendant pairs among the unseen
    classes, and how many among all test classes). Stored with every run (the site draws it).
    """
    hierarchy = bench.hierarchy
    if hierarchy is None:
        return {}
    a = bench.array
    out: dict[str, Any] = {}
    seen = hierarchy.indices(bench.class_ids[bench.seen_classes])
    unseen = hierarchy.indices(bench.class_ids[a("splits/unseen_classes")])
    try:
        ratio = structural_ratio(hierarchy, seen, unseen)
        out["structural_ratio"] = ratio_entry(ratio)
        hops = ratio.numerator
        labels = np.where(np.isfinite(hops), hops, -1).astype(int)
        values, counts = np.unique(labels, return_counts=True)
        out["hops_to_train"] = {
            ("inf" if v < 0 else str(v)): int(c)
            for v, c in zip(values.tolist(), counts.tolist(), strict=True)
        }
    except HarnessError as err:
        out["structural_ratio"] = {"error": str(err)}
    out["mutual_exclusivity_violations"] = exclusivity_entry(hierarchy, seen, unseen)
    return out


def test_classes(bench: PreparedBenchmark) -> list[ScoredClass]:
    """Every class with test images in a test setting, in class order: its id and name, its
    prediction column in each setting, and for an unseen class (with a hierarchy) the nearest
    training class, the hops to it and their relation
    (:func:`harness.data.structure.nearest_training_classes`; training classes are the seen
    classes, as in :func:`structure_summary`). A run record keeps them, so the site can name
    the per-class bars of a score and say how near each class is to what the model trained on.
    """
    labels = bench.array("labels")
    names = bench.array("class_names")
    unseen = set(bench.array("splits/unseen_classes").tolist())
    columns: dict[int, dict[str, int]] = {}
    for setting in bench.spec.settings:
        candidates = bench.columns(setting)
        position = {int(c): i for i, c in enumerate(candidates.tolist())}
        for cls in np.unique(labels[bench.rows(setting)]).tolist():
            columns.setdefault(int(cls), {})[setting] = position[int(cls)]
    near: dict[int, tuple[int, float, str]] = {}
    hierarchy = bench.hierarchy
    tested_unseen = sorted(c for c in columns if c in unseen)
    if hierarchy is not None and tested_unseen:
        ids = bench.class_ids
        found = nearest_training_classes(
            hierarchy,
            hierarchy.indices(ids[bench.seen_classes]),
            hierarchy.indices(ids[tested_unseen]),
        )
        for cls, node, hops, relation in zip(
            tested_unseen,
            found.nearest.tolist(),
            found.hops.tolist(),
            found.relation,
            strict=True,
        ):
            near[cls] = (node, hops, relation)
    out = []
    for cls in sorted(columns):
        entry = ScoredClass(
            id=str(bench.class_ids[cls]),
            name=str(names[cls]),
            unseen=cls in unseen,
            columns=columns[cls],
        )
        if cls in near:
            assert hierarchy is not None
            node, hops, relation = near[cls]
            if node >= 0:
                entry.nearest = str(hierarchy.node_ids[node])
                entry.nearest_name = _class_name(bench, entry.nearest, hierarchy, node)
                entry.hops = int(hops)
            entry.relation = relation
        out.append(entry)
    return out


def _class_name(bench: PreparedBenchmark, class_id: str, hierarchy: Hierarchy, node: int) -> str:
    """A training class's name as the benchmark names it (else as its hierarchy node does)."""
    match = np.flatnonzero(bench.class_ids == class_id)
    if match.size:
        return str(bench.array("class_names")[match[0]])
    return str(hierarchy.names[node])


def ratio_entry(ratio: StructuralRatio) -> dict[str, Any]:
    """The stored form of a structural ratio: value, classes included and excluded."""
    return {
        "value": ratio.value,
        "n_included": ratio.n_included,
        "excluded": len(ratio.test_nodes) - ratio.n_included,
    }


def exclusivity_entry(hierarchy: Hierarchy, seen: np.ndarray, unseen: np.ndarray) -> dict[str, Any]:
    """Ancestor/descendant pairs among the unseen classes, and how many among all of them."""
    return {
        "unseen": [list(p) for p in mutual_exclusivity_violations(hierarchy, unseen)],
        "all": len(mutual_exclusivity_violations(hierarchy, np.concatenate([seen, unseen]))),
    }
