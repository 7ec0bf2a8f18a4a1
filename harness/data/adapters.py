"""Data adapters: one per raw source, each turning files (or a generator) into a RawBenchmark.

An adapter is registered by name (the spec's ``data.adapter``) and declares its parameter model,
so a spec's ``data.params`` is validated like any other key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from harness.core.registry import Registry
from harness.data.sources import RawSource

if TYPE_CHECKING:
    from harness.hierarchy import Hierarchy
    from harness.spec import Spec

__all__ = [
    "SPLIT_CLASS_KEYS",
    "SPLIT_IMAGE_KEYS",
    "Adapter",
    "RawBenchmark",
    "adapters",
    "hold_out_per_class",
    "split_by_class",
]

SPLIT_CLASS_KEYS = ("train_classes", "val_classes", "unseen_classes")
SPLIT_IMAGE_KEYS = ("train_images", "val_images", "test_seen_images", "test_unseen_images")


@dataclass
class RawBenchmark:
    """What an adapter hands to ``prepare``: plain arrays, checked there, then frozen.

    ``labels[i]`` indexes ``class_ids``; split class sets index ``class_ids``; split image sets
    index the rows of ``features``. ``source``: where the inputs came from (frozen into the
    manifest and every record of the benchmark's runs).
    """

    source: RawSource
    features: np.ndarray
    labels: np.ndarray
    class_ids: np.ndarray
    class_names: np.ndarray
    embeddings: dict[str, np.ndarray]
    splits: dict[str, np.ndarray]
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    hierarchy: Hierarchy | None = None  # for specs with `hierarchy.source: adapter`


class Adapter(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def params(self) -> type[BaseModel]: ...

    def load(self, spec: Spec, params: Any) -> RawBenchmark: ...

    def sources(self, spec: Spec, params: Any) -> Mapping[str, Path] | None:
        """The files ``load`` would read now (as ``RawSource.files``), found without reading
        or downloading them; None when finding them needs a download."""
        ...


adapters: Registry[Adapter] = Registry("data adapter")


def hold_out_per_class(
    labels: np.ndarray, classes: Iterable[int], fraction: float, draw: np.ndarray
) -> np.ndarray:
    """A mask of ``round(fraction * n)`` images of each of ``classes`` (those of smallest
    ``draw``), none of a class where that would be none or all of its images."""
    held_out = np.zeros(len(labels), bool)
    for c in classes:
        members = np.flatnonzero(labels == c)
        n_out = round(fraction * len(members))
        if 0 < n_out < len(members):
            held_out[members[np.argsort(draw[members], kind="stable")[:n_out]]] = True
    return held_out


def split_by_class(
    labels: np.ndarray,
    train: np.ndarray,
    val: np.ndarray,
    unseen: np.ndarray,
    held_out: np.ndarray,
) -> dict[str, np.ndarray]:
    """The protocol's splits (int64) from its class sets and the held-out seen images: held-out
    images of seen classes are ``test_seen``, the others train or validate by their class;
    every image of an unseen class is ``test_unseen``."""
    seen = np.concatenate([train, val])
    splits = {
        "train_classes": train,
        "val_classes": val,
        "unseen_classes": unseen,
        "train_images": np.flatnonzero(np.isin(labels, train) & ~held_out),
        "val_images": np.flatnonzero(np.isin(labels, val) & ~held_out),
        "test_seen_images": np.flatnonzero(np.isin(labels, seen) & held_out),
        "test_unseen_images": np.flatnonzero(np.isin(labels, unseen)),
    }
    return {key: value.astype(np.int64) for key, value in splits.items()}
