"""The built-in demo: deterministic, protocol-clean splits, features that follow the hierarchy."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from harness.core.hashing import array_sha256
from harness.data.demo import DemoParams, generate
from harness.data.prepare import load_benchmark, prepare
from harness.hierarchy import Hierarchy
from harness.spec import load_spec
from tests.conftest import SPECS


def _generate(seed: int = 0):  # type: ignore[no-untyped-def]
    hierarchy = Hierarchy.load_json(SPECS / "demo" / "hierarchy.json")
    return generate(hierarchy, DemoParams(seed=seed), feature_dim=128, embedding_dim=64)


def test_generation_is_bit_identical() -> None:
    a, b = _generate(), _generate()
    assert array_sha256(a.features) == array_sha256(b.features)
    assert array_sha256(a.embeddings["attributes"]) == array_sha256(b.embeddings["attributes"])
    for key in a.splits:
        np.testing.assert_array_equal(a.splits[key], b.splits[key])
    assert array_sha256(_generate(seed=1).features) != array_sha256(a.features)


def test_frozen_hash_matches_the_pinned_checksum() -> None:
    # The spec pins the hash of the generated data: this is the cross-machine determinism check.
    spec = load_spec(SPECS / "demo.yaml")
    assert spec.data.checksum is not None
    assert prepare(spec).hash == spec.data.checksum


def test_splits_follow_the_protocol() -> None:
    bench = load_benchmark(load_spec(SPECS / "demo.yaml"))
    a = bench.array
    train, val, unseen = (
        a("splits/train_classes"),
        a("splits/val_classes"),
        a("splits/unseen_classes"),
    )
    assert len(unseen) == 20 and len(val) == 16 and len(train) == len(bench.class_ids) - 36
    assert not set(train) & set(val) and not (set(train) | set(val)) & set(unseen)
    labels = a("labels")
    images = {
        k: a(f"splits/{k}")
        for k in ("train_images", "val_images", "test_seen_images", "test_unseen_images")
    }
    together = np.concatenate(list(images.values()))
    assert len(np.unique(together)) == len(together) == len(labels)
    assert set(labels[images["train_images"]]) == set(train)
    assert set(labels[images["val_images"]]) == set(val)
    assert set(labels[images["test_seen_images"]]) == set(train) | set(val)
    assert set(labels[images["test_unseen_images"]]) == set(unseen)
    # GZSL rows interleave seen and unseen images (no order leak).
    is_unseen = np.isin(labels[bench.rows("gzsl")], unseen)
    assert 0 < is_unseen[: len(is_unseen) // 2].mean() < 1
    assert set(bench.columns("zsl")) == set(unseen)
    assert len(bench.columns("gzsl")) == len(bench.class_ids)


def test_near_classes_have_near_features_and_embeddings() -> None:
    raw = _generate()
    hierarchy = Hierarchy.load_json(SPECS / "demo" / "hierarchy.json")
    n = len(raw.class_ids)
    means = np.stack([raw.features[raw.labels == c].mean(axis=0) for c in range(n)])
    emb = raw.embeddings["attributes"]
    idx = hierarchy.indices(raw.class_ids)
    hops = hierarchy.hop_distance(idx)[:, idx]  # latents diffuse along edges: variance ~ hops
    iu = np.triu_indices(n, 1)
    feat_dist = np.linalg.norm(means[:, None] - means[None], axis=-1)[iu]
    emb_dist = np.linalg.norm(emb[:, None] - emb[None], axis=-1)[iu]
    assert spearmanr(hops[iu], feat_dist).statistic > 0.4
    assert spearmanr(hops[iu], emb_dist).statistic > 0.25
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert (raw.features >= 0).all()
