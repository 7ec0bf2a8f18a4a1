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
    calibration/...                only when a metric needs validation predictions: the same
                                   layout (train/, val/, classes/, test/) for the calibration
                                   fit, whose prediction settings are ``<setting>_val``

The harness writes it; the worker reads it. Test labels stay in the frozen benchmark.

Why a calibration fit: calibrated stacking and DARTS choose a parameter on *validation*
predictions, which must come from a model that never saw the validation classes. The worker
therefore fits a second, fresh model on training classes only (split into its own train/val
classes for tuning) and predicts validation-class images (``zsl_val``) and held-out
training-class images plus validation-class images (``gzsl_val``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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


def _write_fit(
    bench: Benchmark,
    root: Path,
    *,
    images: dict[str, np.ndarray],
    classes: dict[str, np.ndarray],
    settings: Sequence[str],
) -> None:
    """One fit's part of a bundle: train/val images and labels, class sets, prediction rows."""
    features, labels = bench.a("features"), bench.a("labels")
    for part, idx in images.items():
        _save(root, f"{part}/features", features[idx])
        _save(root, f"{part}/labels", labels[idx])
    for part, idx in classes.items():
        _save(root, f"classes/{part}", idx)
    predict_images = np.unique(np.concatenate([bench.rows(s) for s in settings]))
    _save(root, "test/features", features[predict_images])
    for setting in settings:
        _save(root, f"test/{setting}/rows", np.searchsorted(predict_images, bench.rows(setting)))
        _save(root, f"test/{setting}/candidates", bench.columns(setting))


def write_bundle(bench: Benchmark, out: Path, *, calibration: bool | None = None) -> Path:
    """Write the public task bundle of ``bench`` into the empty directory ``out``.

    ``calibration`` (default: whether a spec metric needs validation predictions) adds the
    calibration fit and its ``<setting>_val`` prediction settings.
    """
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise RunnerError(f"{out}: a task bundle is written into an empty directory")
    a = bench.a
    settings = list(bench.spec.settings)
    _write_fit(
        bench,
        out,
        images={"train": a("splits/train_images"), "val": a("splits/val_images")},
        classes={"train": a("splits/train_classes"), "val": a("splits/val_classes")},
        settings=settings,
    )
    if calibration is None:
        calibration = bool(bench.spec.validation_settings())
    val_settings = [f"{s}_val" for s in settings] if calibration else []
    if val_settings:
        labels, fit = a("labels"), a("splits/cal_fit_images")
        cal_train, cal_val = a("splits/cal_train_classes"), a("splits/cal_val_classes")
        _write_fit(
            bench,
            out / "calibration",
            images={
                "train": fit[np.isin(labels[fit], cal_train)],
                "val": fit[np.isin(labels[fit], cal_val)],
            },
            classes={"train": cal_train, "val": cal_val},
            settings=val_settings,
        )
    _save(out, "classes/ids", a("class_ids"))
    _save(out, "classes/names", a("class_names"))
    for emb in bench.spec.class_embeddings:
        _save(out, f"embeddings/{emb.name}", a(f"embeddings/{emb.name}"))
    if bench.hierarchy is not None:
        for key, value in bench.hierarchy.to_arrays().items():
            _save(out, f"hierarchy/{key}", value)
    task = {
        "format": BUNDLE_FORMAT,
        "benchmark": bench.spec.benchmark,
        "version": bench.spec.version,
        "benchmark_hash": bench.hash,
        "settings": settings,
        "validation_settings": val_settings,
        "predictions": bench.spec.predictions.model_dump(mode="json"),
        "class_order_hashes": {s: bench.class_order_hash(s) for s in settings + val_settings},
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

    @property
    def validation_settings(self) -> list[str]:
        return list(self.info.get("validation_settings", []))

    def _fit_root(self, setting_or_fit: str) -> str:
        return (
            "calibration/"
            if setting_or_fit.endswith("_val") or setting_or_fit == "calibration"
            else ""
        )

    def train_task(self, seed: int = 0, fit: str = "main") -> TrainTask:
        """The TrainTask of the ``main`` fit or the ``calibration`` fit (training classes only)."""
        r = self._fit_root(fit)
        hierarchy = None
        if self.info["has_hierarchy"]:
            hierarchy = Hierarchy.from_arrays(
                {k: self.load(f"hierarchy/{k}") for k in ("node_ids", "names", "edges")}
            )
        return TrainTask(
            train_features=self.load(f"{r}train/features"),
            train_labels=self.load(f"{r}train/labels"),
            val_features=self.load(f"{r}val/features"),
            val_labels=self.load(f"{r}val/labels"),
            train_classes=self.load(f"{r}classes/train"),
            val_classes=self.load(f"{r}classes/val"),
            class_ids=self.load("classes/ids"),
            class_names=self.load("classes/names"),
            class_embeddings={n: self.load(f"embeddings/{n}") for n in self.info["embeddings"]},
            default_embedding=self.info["default_embedding"],
            hierarchy=hierarchy,
            seed=seed,
        )

    def test(self, setting: str) -> tuple[np.ndarray, np.ndarray]:
        """(features in prediction-row order, candidate class indices in column order)."""
        r = self._fit_root(setting)
        path = self.root / f"{r}test" / "features.npy"
        features = np.load(path, allow_pickle=False, mmap_mode="r")
        rows = self.load(f"{r}test/{setting}/rows")
        return np.asarray(features[rows]), self.load(f"{r}test/{setting}/candidates")
