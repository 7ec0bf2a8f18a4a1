"""Ridge regression from features to class embeddings, scored by cosine similarity.

``fit`` centres and L2-normalises the features (mean of the fitting images only), then solves
``W = (X^T X + alpha I)^-1 X^T S[y]``, mapping each image onto its class's embedding. ``predict``
scores each candidate by the cosine between ``x W`` and the candidate's embedding.
``alpha`` is chosen on the validation classes (fit on training classes, per-class top-1 on
validation images among validation classes), then W is refitted on training + validation images.
Test classes are never looked at.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # for the annotation only: nothing of the harness is imported at run time
    from harness.bundles import TrainTask


# >>> copied block "state-files": keep byte-identical (tests/test_reference_packages.py)
def write_state(directory: Path, arrays: dict[str, np.ndarray]) -> None:
    """The fitted state, named arrays in one ``state.npz`` (``Model.save``: data, never code)."""
    np.savez(directory / "state.npz", **arrays)  # type: ignore[arg-type]


def read_state(directory: Path) -> dict[str, np.ndarray]:
    """The arrays :func:`write_state` wrote, read whole (``allow_pickle=False``: no object)."""
    with np.load(directory / "state.npz", allow_pickle=False) as saved:
        return {name: saved[name] for name in saved.files}


# <<< copied block "state-files"


ALPHAS = tuple(10.0**p for p in range(-2, 4))


def _normalise(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    x = features.astype(np.float64) - mean
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)


def _unit(embeddings: np.ndarray) -> np.ndarray:
    s = embeddings.astype(np.float64)
    return s / (np.linalg.norm(s, axis=1, keepdims=True) + 1e-12)


def _ridge(x: np.ndarray, targets: np.ndarray, alpha: float) -> np.ndarray:
    return np.linalg.solve(x.T @ x + alpha * np.eye(x.shape[1]), x.T @ targets)


# >>> copied block "per-class-top1": keep byte-identical (tests/test_reference_packages.py)
def per_class_top1(scores: np.ndarray, labels: np.ndarray, *, classes: np.ndarray) -> float:
    """Mean over the listed ``classes`` of the top-1 accuracy of each class's images.

    ``scores [n, len(classes)]`` has one column per entry of ``classes`` (class ids, in that
    order); ``labels [n]`` are the images' class ids. The class list is explicit, never taken
    from ``labels``: a listed class with no image is left out of the mean and named in a
    warning, never counted as 0. Raises ``ValueError`` on non-finite scores, on a label outside
    ``classes`` and when no listed class has an image (the mean would divide by zero).
    """
    if scores.shape != (len(labels), len(classes)) or not len(classes):
        raise ValueError(
            f"scores: expected shape (n_images, n_classes) = {(len(labels), len(classes))}"
            f" with at least one class, got {scores.shape}"
        )
    if not np.isfinite(scores).all():
        row = int(np.flatnonzero(~np.isfinite(scores).all(axis=1))[0])
        raise ValueError(f"scores: expected finite values, got NaN or inf in row {row}")
    order = np.argsort(classes, kind="stable")
    pos = order[np.searchsorted(classes, labels, sorter=order).clip(max=len(classes) - 1)]
    if (classes[pos] != labels).any():
        bad = labels[classes[pos] != labels]
        raise ValueError(f"labels: {len(bad)} image(s) of classes not in `classes`, e.g. {bad[0]}")
    counts = np.bincount(pos, minlength=len(classes))
    if not counts.any():
        raise ValueError("labels: no image of any listed class; per-class top-1 is undefined")
    if not counts.all():
        empty = classes[counts == 0]
        warnings.warn(
            f"per-class top-1 leaves out {len(empty)} listed class(es) with no image:"
            f" {empty[:10].tolist()}",
            RuntimeWarning,
            stacklevel=2,
        )
    hits = np.bincount(pos, weights=scores.argmax(axis=1) == pos, minlength=len(classes))
    return float(np.mean(hits[counts > 0] / counts[counts > 0]))


# <<< copied block "per-class-top1"


class RidgeToEmbedding:
    """The model protocol: ``fit(task)`` then ``predict(features, candidates) -> scores``."""

    def __init__(self, alphas: tuple[float, ...] = ALPHAS) -> None:
        self.alphas = alphas

    def fit(self, task: TrainTask) -> None:
        emb = _unit(task.embedding)
        mean = task.train_features.mean(axis=0)
        x_train = _normalise(task.train_features, mean)
        x_val = _normalise(task.val_features, mean)
        best: tuple[float, float] | None = None
        for alpha in self.alphas:
            w = _ridge(x_train, emb[task.train_labels], alpha)
            scores = _unit(x_val @ w) @ emb[task.val_classes].T
            accuracy = per_class_top1(scores, task.val_labels, classes=task.val_classes)
            if best is None or accuracy > best[0]:  # ties keep the weaker regularisation
                best = (accuracy, alpha)
        assert best is not None
        self.val_accuracy_, self.alpha_ = best
        # Optional: what fit chose, a flat dict of JSON scalars (str, int, float, bool, None);
        # the run record keeps it and the submission page shows it.
        self.hyperparameters_ = {"alpha": self.alpha_}
        x = np.concatenate([task.train_features, task.val_features])
        y = np.concatenate([task.train_labels, task.val_labels])
        self.mean_ = x.mean(axis=0)
        self.w_ = _ridge(_normalise(x, self.mean_), emb[y], self.alpha_)
        self.embedding_ = emb

    # fit runs in a sandbox of its own; each prediction pass in a fresh one that rebuilds the
    # model from what save wrote (arrays and JSON only: harness.bundles.Model).
    def save(self, directory: Path) -> None:
        write_state(directory, {"mean": self.mean_, "w": self.w_, "embedding": self.embedding_})

    @classmethod
    def load(cls, directory: Path) -> RidgeToEmbedding:
        state, model = read_state(directory), cls()
        model.mean_, model.w_, model.embedding_ = state["mean"], state["w"], state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        projected = _unit(_normalise(features, self.mean_) @ self.w_)
        return (projected @ self.embedding_[candidates].T).astype(np.float32)
