"""Task bundles: what model code may see, written as plain ``.npy`` files, never test labels.

A bundle is a directory::

    task.json                      benchmark, hashes, settings, class ids, embedding names
    train/features.npy labels.npy  training images of training classes (labels: class indices)
    val/features.npy labels.npy    validation images of validation classes (disjoint classes)
    classes/ids.npy names.npy      every class of the benchmark, in benchmark order
    classes/train.npy val.npy      class index sets
    embeddings/<name>.npy          class embeddings, one row per class
    hierarchy/*.npy                the frozen hierarchy (if any)
    test/features.npy              test images of every setting, no labels
    test/<setting>/rows.npy        which rows of test/features.npy, in prediction-file order
    test/<setting>/candidates.npy  the candidate class indices, in prediction-column order

The harness writes it; the worker reads it. Test labels stay in the frozen benchmark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from harness.errors import RunnerError
from harness.hierarchy import Hierarchy

if TYPE_CHECKING:
    from harness.data.prepare import Benchmark

BUNDLE_FORMAT = "zsl-bundle/1"


@dataclass(frozen=True)
class TrainTask:
    """What ``Model.fit`` receives.

    Tune hyperparameters by training on ``train_*`` and scoring on ``val_*`` (disjoint classes,
    so validation mimics zero-shot transfer), then refit on both. Class indices refer to rows of
    ``class_embeddings[...]`` and ``class_ids``.
    """

    train_features: np.ndarray
    train_labels: np.ndarray
    val_features: np.ndarray
    val_labels: np.ndarray
    train_classes: np.ndarray
    val_classes: np.ndarray
    class_ids: np.ndarray
    class_names: np.ndarray
    class_embeddings: dict[str, np.ndarray]
    default_embedding: str
    hierarchy: Hierarchy | None
    seed: int

    @property
    def embedding(self) -> np.ndarray:
        """The default class embedding table ``[n_classes, dim]``."""
        return self.class_embeddings[self.default_embedding]

    @property
    def seen_classes(self) -> np.ndarray:
        return np.union1d(self.train_classes, self.val_classes)


@runtime_checkable
class Model(Protocol):
    """The model protocol of DESIGN: fit on a TrainTask, score test features per candidate."""

    def fit(self, task: TrainTask) -> None: ...

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray: ...


def _save(root: Path, name: str, array: np.ndarray) -> None:
    path = root / f"{name}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)


def write_bundle(bench: Benchmark, out: Path) -> Path:
    """Write the public task bundle of ``bench`` into the empty directory ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise RunnerError(f"{out}: a task bundle is written into an empty directory")
    a = bench.a
    features, labels = a("features"), a("labels")
    for part, key in (("train", "train_images"), ("val", "val_images")):
        idx = a(f"splits/{key}")
        _save(out, f"{part}/features", features[idx])
        _save(out, f"{part}/labels", labels[idx])
    _save(out, "classes/ids", a("class_ids"))
    _save(out, "classes/names", a("class_names"))
    _save(out, "classes/train", a("splits/train_classes"))
    _save(out, "classes/val", a("splits/val_classes"))
    for emb in bench.spec.class_embeddings:
        _save(out, f"embeddings/{emb.name}", a(f"embeddings/{emb.name}"))
    if bench.hierarchy is not None:
        for key, value in bench.hierarchy.to_arrays().items():
            _save(out, f"hierarchy/{key}", value)
    settings = list(bench.spec.settings)
    test_images = np.unique(np.concatenate([bench.rows(s) for s in settings]))
    _save(out, "test/features", features[test_images])
    for setting in settings:
        _save(out, f"test/{setting}/rows", np.searchsorted(test_images, bench.rows(setting)))
        _save(out, f"test/{setting}/candidates", bench.columns(setting))
    task = {
        "format": BUNDLE_FORMAT,
        "benchmark": bench.spec.benchmark,
        "version": bench.spec.version,
        "benchmark_hash": bench.hash,
        "settings": settings,
        "class_order_hashes": {s: bench.class_order_hash(s) for s in settings},
        "embeddings": [e.name for e in bench.spec.class_embeddings],
        "default_embedding": bench.spec.default_embedding,
        "has_hierarchy": bench.hierarchy is not None,
    }
    (out / "task.json").write_text(json.dumps(task, indent=1, sort_keys=True) + "\n")
    return out


class Bundle:
    """Read side of a task bundle (used by the worker and by prediction generators)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        try:
            self.info: dict[str, Any] = json.loads((self.root / "task.json").read_text())
        except (OSError, ValueError) as err:
            raise RunnerError(f"{self.root}: not a task bundle ({err})") from None
        if self.info.get("format") != BUNDLE_FORMAT:
            raise RunnerError(f"{self.root}/task.json: not a '{BUNDLE_FORMAT}' bundle")

    def load(self, name: str) -> np.ndarray:
        return np.load(self.root / f"{name}.npy", allow_pickle=False)

    @property
    def settings(self) -> list[str]:
        return list(self.info["settings"])

    def train_task(self, seed: int = 0) -> TrainTask:
        hierarchy = None
        if self.info["has_hierarchy"]:
            hierarchy = Hierarchy.from_arrays(
                {k: self.load(f"hierarchy/{k}") for k in ("node_ids", "names", "edges")}
            )
        return TrainTask(
            train_features=self.load("train/features"),
            train_labels=self.load("train/labels"),
            val_features=self.load("val/features"),
            val_labels=self.load("val/labels"),
            train_classes=self.load("classes/train"),
            val_classes=self.load("classes/val"),
            class_ids=self.load("classes/ids"),
            class_names=self.load("classes/names"),
            class_embeddings={n: self.load(f"embeddings/{n}") for n in self.info["embeddings"]},
            default_embedding=self.info["default_embedding"],
            hierarchy=hierarchy,
            seed=seed,
        )

    def test(self, setting: str) -> tuple[np.ndarray, np.ndarray]:
        """(features in prediction-row order, candidate class indices in column order)."""
        features = np.load(self.root / "test" / "features.npy", allow_pickle=False, mmap_mode="r")
        rows = self.load(f"test/{setting}/rows")
        return np.asarray(features[rows]), self.load(f"test/{setting}/candidates")
