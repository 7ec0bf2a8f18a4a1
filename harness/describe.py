"""``zsl spec describe``: what a prepared benchmark is made of, and what is wrong with it.

Sizes (classes and images per split, as GBU Table I reports them), the adapter's own notes
(e.g. xlsa17 release overlaps), the hierarchy, the split's structure diagnostics (Hascoet et
al.: structural ratio, mutual-exclusivity violations) and the leakage audit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.audit import benchmark_audit, spec_audit
from harness.data.prepare import PreparedBenchmark
from harness.data.structure import (
    StructuralRatio,
    mutual_exclusivity_violations,
    nearest_training_classes,
    structural_ratio,
)
from harness.errors import HarnessError
from harness.hierarchy import Hierarchy
from harness.records import ScoredClass
from harness.spec import Spec


def describe_benchmark(spec: Spec, bench: PreparedBenchmark) -> dict[str, Any]:
    a = bench.array
    sizes = {
        key: len(a(f"splits/{key}"))
        for key in (
            "train_classes",
            "val_classes",
            "unseen_classes",
            "train_images",
            "val_images",
            "test_seen_images",
            "test_unseen_images",
        )
    }
    sizes["trainval_images"] = sizes["train_images"] + sizes["val_images"]
    out: dict[str, Any] = {
        "benchmark": spec.benchmark,
        "version": spec.version,
        "hash": bench.hash,
        "features": {"name": spec.features.name, "dim": int(a("features").shape[1])},
        "embeddings": {
            e.name: int(a(f"embeddings/{e.name}").shape[1]) for e in spec.class_embeddings
        },
        "n_classes": len(bench.class_ids),
        "n_images": len(a("labels")),
        "sizes": sizes,
        "adapter": {k: v for k, v in bench.frozen.meta.items() if k != "params"},
    }
    hierarchy = bench.hierarchy
    if hierarchy is not None:
        out["hierarchy"] = {
            k: v for k, v in hierarchy.summary().items() if k not in ("source", "content_hash")
        }
        out.update(structure_summary(bench))
    out["leakage"] = benchmark_audit(spec, bench)
    return out


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
        out["structural_ratio"] = _ratio_entry(ratio)
        hops = ratio.numerator
        labels = np.where(np.isfinite(hops), hops, -1).astype(int)
        values, counts = np.unique(labels, return_counts=True)
        out["hops_to_train"] = {
            ("inf" if v < 0 else str(v)): int(c)
            for v, c in zip(values.tolist(), counts.tolist(), strict=True)
        }
    except HarnessError as err:
        out["structural_ratio"] = {"error": str(err)}
    out["mutual_exclusivity_violations"] = _exclusivity_entry(hierarchy, seen, unseen)
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


def _ratio_entry(ratio: StructuralRatio) -> dict[str, Any]:
    """The stored form of a structural ratio: value, classes included and excluded."""
    return {
        "value": ratio.value,
        "n_included": ratio.n_included,
        "excluded": len(ratio.test_nodes) - ratio.n_included,
    }


def _exclusivity_entry(
    hierarchy: Hierarchy, seen: np.ndarray, unseen: np.ndarray
) -> dict[str, Any]:
    """Ancestor/descendant pairs among the unseen classes, and how many among all of them."""
    return {
        "unseen": [list(p) for p in mutual_exclusivity_violations(hierarchy, unseen)],
        "all": len(mutual_exclusivity_violations(hierarchy, np.concatenate([seen, unseen]))),
    }


def describe_release(spec: Spec) -> dict[str, Any]:
    """Sizes from the raw split files alone, for adapters that can (``describe_release``)."""
    from harness.data.adapters import adapters

    adapter = adapters.get(spec.data.adapter)
    describe = getattr(adapter, "describe_release", None)
    if describe is None:
        raise HarnessError(
            f"adapter '{spec.data.adapter}' cannot describe its release without preparing it;"
            " run `zsl spec describe` without --release-only"
        )
    params = adapter.params.model_validate(spec.data.params)
    result: dict[str, Any] = describe(spec, params)
    ids, names = result.pop("test_class_ids", None), result.pop("test_class_names", None)
    seen_ids = result.pop("seen_class_ids", None)
    hierarchy_path = spec.hierarchy_path()
    if ids is not None and seen_ids is not None and hierarchy_path is not None:
        hierarchy = Hierarchy.load_json(hierarchy_path)
        unseen, seen = hierarchy.indices(ids), hierarchy.indices(seen_ids)
        result["structural_ratio"] = _ratio_entry(structural_ratio(hierarchy, seen, unseen))
        result["mutual_exclusivity_violations"] = _exclusivity_entry(hierarchy, seen, unseen)
    if ids is not None:
        result["leakage"] = spec_audit(spec, ids, dict(zip(ids, names or ids, strict=True)))
    return result
