"""``zsl spec describe``: what a prepared benchmark is made of, and what is wrong with it.

Sizes (classes and images per split, as GBU Table I reports them), the adapter's own notes
(e.g. xlsa17 release overlaps), the hierarchy, the split's structure diagnostics (Hascoet et
al.: structural ratio, mutual-exclusivity violations) and the leakage audit.
"""

from __future__ import annotations

from typing import Any

from harness.audit import benchmark_audit, spec_audit
from harness.core.errors import HarnessError
from harness.data.adapters import adapters
from harness.data.facts import exclusivity_entry, ratio_entry
from harness.data.prepare import PreparedBenchmark
from harness.data.structure import structural_ratio
from harness.hierarchy import Hierarchy
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
        out.update(bench.facts.structure)
    out["leakage"] = benchmark_audit(spec, bench)
    return out


def describe_release(spec: Spec) -> dict[str, Any]:
    """Sizes from the raw split files alone, for adapters that can (``describe_release``)."""
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
        result["structural_ratio"] = ratio_entry(structural_ratio(hierarchy, seen, unseen))
        result["mutual_exclusivity_violations"] = exclusivity_entry(hierarchy, seen, unseen)
    if ids is not None:
        result["leakage"] = spec_audit(spec, ids, dict(zip(ids, names or ids, strict=True)))
    return result
