"""ESZSL: "An embarrassingly simple approach to zero-shot learning" (Romera-Paredes & Torr, 2015).

A bilinear compatibility ``score(x, c) = x^T V s_c`` between image features ``x`` and class
embeddings ``s_c``, with the closed-form solution

    V = (X^T X + gamma I)^-1  X^T Y S  (S^T S + lambda I)^-1

where ``Y`` holds +1 for the true class and -1 elsewhere. ``gamma`` and ``lambda`` are chosen on
the validation classes only (train on training classes, per-class top-1 on validation classes
among validation candidates), then V is refitted on training + validation images.

Features are centred on the mean of the fitting images and L2-normalised per image before the
solve (the bilinear form has no bias term, so uncentred non-negative features waste capacity on
the offset); the mean comes from training images only, never from test images.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np

GRID = tuple(10.0**p for p in range(-3, 4))


def solve(
    features: np.ndarray, labels: np.ndarray, embeddings: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    """Closed-form V for images ``features [n, d]`` of classes ``labels`` (rows of embeddings)."""
    x = features.astype(np.float64)
    s = embeddings.astype(np.float64)
    y = -np.ones((len(labels), len(s)))
    y[np.arange(len(labels)), labels] = 1.0
    left = np.linalg.solve(x.T @ x + gamma * np.eye(x.shape[1]), x.T @ y @ s)
    return np.linalg.solve((s.T @ s + lam * np.eye(s.shape[1])).T, left.T).T


def preprocess(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Centre on ``mean`` (from fitting images) and L2-normalise each row."""
    x = features.astype(np.float64) - mean
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)


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


class ESZSL:
    def __init__(self, grid: tuple[float, ...] = GRID) -> None:
        self.grid = grid

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = task.embedding
        train_cls, val_cls = task.train_classes, task.val_classes
        # Relabel to positions within each class subset.
        tr_pos = np.searchsorted(train_cls, task.train_labels)
        mean = task.train_features.mean(axis=0)
        x_train = preprocess(task.train_features, mean)
        x_val = preprocess(task.val_features, mean)
        results = []
        for gamma, lam in itertools.product(self.grid, self.grid):
            v = solve(x_train, tr_pos, emb[train_cls], gamma, lam)
            acc = per_class_top1(x_val @ v @ emb[val_cls].T, task.val_labels, classes=val_cls)
            results.append((acc, -gamma, -lam))  # ties: prefer stronger regularisation
        best = max(results)
        self.gamma_, self.lambda_ = -best[1], -best[2]
        self.val_accuracy_ = best[0]
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"gamma": self.gamma_, "lambda": self.lambda_}
        seen = np.union1d(train_cls, val_cls)
        x = np.concatenate([task.train_features, task.val_features])
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        self.mean_ = x.mean(axis=0)
        self.v_ = solve(preprocess(x, self.mean_), y, emb[seen], self.gamma_, self.lambda_)
        self.embedding_ = emb

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        x = preprocess(features, self.mean_)
        return (x @ self.v_ @ self.embedding_[candidates].T).astype(np.float32)
