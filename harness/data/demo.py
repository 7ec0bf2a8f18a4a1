"""The built-in demo benchmark: real WordNet mammals, synthetic features from a stated model.

See docs/data.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.random import PCG64, Generator
from pydantic import BaseModel, ConfigDict, Field

from harness.core.errors import SpecError
from harness.data.adapters import RawBenchmark, adapters
from harness.data.sources import RawSource
from harness.hierarchy import Hierarchy

if TYPE_CHECKING:
    from harness.spec import Spec

__all__ = [
    "DemoParams",
    "generate",
]


class DemoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(0, ge=0)
    latent_dim: int = Field(32, gt=0)
    images_per_class: tuple[int, int] = (40, 80)
    edge_noise: float = Field(1.0, gt=0)
    embedding_noise: float = Field(0.6, ge=0)
    idiosyncrasy: float = Field(0.7, ge=0)
    image_noise: float = Field(2.0, ge=0)
    n_unseen: int = Field(20, gt=0)
    n_val: int = Field(16, gt=0)
    test_seen_fraction: float = Field(0.2, gt=0, lt=1)


def _normal(rng: Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Approximately standard normal draws using additions only (bit-identical everywhere)."""
    total = rng.random(shape)
    for _ in range(11):
        total = total + rng.random(shape)
    return total - 6.0


def _matmul_rows(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``z @ w`` as a fixed-order sum of elementwise products (no BLAS, no SIMD reductions)."""
    out = z[:, 0:1] * w[0:1, :]
    for k in range(1, z.shape[1]):
        out = out + z[:, k : k + 1] * w[k : k + 1, :]
    return out


def _l2_normalize_rows(a: np.ndarray) -> np.ndarray:
    sq = a[:, 0] * a[:, 0]
    for j in range(1, a.shape[1]):
        sq = sq + a[:, j] * a[:, j]
    return a / np.sqrt(sq)[:, None]


def generate(
    hierarchy: Hierarchy,
    params: DemoParams,
    *,
    feature_dim: int,
    embedding_dim: int,
    embedding_name: str = "attributes",
) -> RawBenchmark:
    """Generate the demo arrays from ``hierarchy`` (see docs/data.md)."""
    rng = Generator(PCG64(params.seed))
    latent = params.latent_dim

    # Latents along the DAG, parents before children.
    z = np.zeros((hierarchy.n_nodes, latent))
    noise = _normal(rng, (hierarchy.n_nodes, latent)) * params.edge_noise
    for v in hierarchy.topological_order:
        parents = hierarchy.parents(int(v))
        base = np.zeros(latent)
        for p in parents:
            base = base + z[p]
        if len(parents):
            base = base / len(parents)
        z[v] = base + noise[v]

    leaves = np.sort(hierarchy.leaves)
    class_ids = hierarchy.node_ids[leaves]
    order = np.argsort(class_ids, kind="stable")
    leaves, class_ids = leaves[order], class_ids[order]
    n_classes = len(leaves)
    z_c = z[leaves]

    b_embed = _normal(rng, (latent, embedding_dim)) / np.sqrt(latent)
    embedding = _matmul_rows(z_c, b_embed)
    embedding = embedding + params.embedding_noise * _normal(rng, embedding.shape)
    embedding = _l2_normalize_rows(embedding)

    w_vis = _normal(rng, (latent, feature_dim)) / np.sqrt(latent)
    bias = _normal(rng, (1, feature_dim))
    idio = params.idiosyncrasy * _normal(rng, z_c.shape)
    prototypes = _matmul_rows(z_c + idio, w_vis) + bias

    low, high = params.images_per_class
    if not 1 <= low <= high:
        raise SpecError(f"data.params.images_per_class must be 1 <= low <= high; got {low, high}")
    counts = rng.integers(low, high + 1, size=n_classes)
    labels = np.repeat(np.arange(n_classes), counts)
    shuffle = np.argsort(rng.random(len(labels)), kind="stable")
    labels = labels[shuffle]
    features = prototypes[labels] + params.image_noise * _normal(rng, (len(labels), feature_dim))
    features = np.maximum(features, 0.0)

    # Splits.
    if params.n_unseen + params.n_val >= n_classes:
        raise SpecError(
            f"data.params: n_unseen + n_val = {params.n_unseen + params.n_val} leaves no training"
            f" class among the {n_classes} leaves of the hierarchy"
        )
    class_perm = np.argsort(rng.random(n_classes), kind="stable")
    unseen = np.sort(class_perm[: params.n_unseen])
    val = np.sort(class_perm[params.n_unseen : params.n_unseen + params.n_val])
    train = np.sort(class_perm[params.n_unseen + params.n_val :])
    seen_mask = np.ones(n_classes, bool)
    seen_mask[unseen] = False

    held_out = np.zeros(len(labels), bool)
    draw = rng.random(len(labels))
    for c in np.flatnonzero(seen_mask):
        members = np.flatnonzero(labels == c)
        n_test = max(1, round(params.test_seen_fraction * len(members)))
        held_out[members[np.argsort(draw[members], kind="stable")[:n_test]]] = True
    image_class_is = {
        "train": np.isin(labels, train),
        "val": np.isin(labels, val),
        "unseen": np.isin(labels, unseen),
    }
    splits = {
        "train_classes": train.astype(np.int64),
        "val_classes": val.astype(np.int64),
        "unseen_classes": unseen.astype(np.int64),
        "train_images": np.flatnonzero(image_class_is["train"] & ~held_out).astype(np.int64),
        "val_images": np.flatnonzero(image_class_is["val"] & ~held_out).astype(np.int64),
        "test_seen_images": np.flatnonzero(~image_class_is["unseen"] & held_out).astype(np.int64),
        "test_unseen_images": np.flatnonzero(image_class_is["unseen"]).astype(np.int64),
    }
    return RawBenchmark(
        source=GENERATED,
        features=features.astype(np.float32),
        labels=labels.astype(np.int64),
        class_ids=class_ids.astype(str),
        class_names=hierarchy.names[leaves].astype(str),
        embeddings={embedding_name: embedding.astype(np.float32)},
        splits=splits,
        meta={"generator": "harness.data.demo", "params": params.model_dump(mode="json")},
    )


#: The demo's inputs: the spec's hierarchy and seed, and this generator (no files of its own).
GENERATED = RawSource(
    "generated", "generated by the harness's demo generator from the spec's hierarchy and seed"
)


class DemoAdapter:
    """Adapter ``demo``: generates the built-in benchmark from the spec's frozen hierarchy."""

    name = "demo"
    params = DemoParams

    def load(self, spec: Spec, params: DemoParams) -> RawBenchmark:
        path = spec.hierarchy_path()
        if path is None:
            raise SpecError(f"{spec.path}: the demo adapter needs 'hierarchy.file'")
        if len(spec.class_embeddings) != 1:
            raise SpecError(
                f"{spec.path}: class_embeddings: the demo generates one embedding;"
                f" got {len(spec.class_embeddings)}"
            )
        return generate(
            Hierarchy.load_json(path),
            params,
            feature_dim=spec.features.dim,
            embedding_dim=spec.class_embeddings[0].dim,
            embedding_name=spec.class_embeddings[0].name,
        )

    def sources(self, spec: Spec, params: DemoParams) -> dict[str, Path]:
        return {}  # the hierarchy file is part of the spec's data hash


adapters.add("demo", DemoAdapter())
