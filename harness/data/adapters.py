"""Data adapters: one per raw source, each turning files (or a generator) into a RawBenchmark.

An adapter is registered by name (the spec's ``data.adapter``) and declares its parameter model,
so a spec's ``data.params`` is validated like any other key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from harness.registry import Registry

if TYPE_CHECKING:
    from harness.hierarchy import Hierarchy
    from harness.spec import Spec

__all__ = [
    "SPLIT_CLASS_KEYS",
    "SPLIT_IMAGE_KEYS",
    "Adapter",
    "RawBenchmark",
    "adapters",
]

SPLIT_CLASS_KEYS = ("train_classes", "val_classes", "unseen_classes")
SPLIT_IMAGE_KEYS = ("train_images", "val_images", "test_seen_images", "test_unseen_images")


@dataclass
class RawBenchmark:
    """What an adapter hands to ``prepare``: plain arrays, checked there, then frozen.

    ``labels[i]`` indexes ``class_ids``; split class sets index ``class_ids``; split image sets
    index the rows of ``features``.
    """

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


adapters: Registry[Adapter] = Registry("data adapter")
