"""SAE: "Semantic Autoencoder for Zero-Shot Learning" (Kodirov, Xiang & Gong, CVPR 2017).

A linear autoencoder whose code is the class embedding: the encoder ``W [k, d]`` maps a feature
to its class embedding and the tied decoder ``W^T`` maps it back,

    min_W ||X - W^T S||^2 + lambda ||W X - S||^2,

with ``X [d, N]`` the features and ``S [k, N]`` the class embedding of each image. Setting the
gradient to zero gives the Sylvester equation

    (S S^T) W + W (lambda X X^T) = (1 + lambda) S X^T,

solved in closed form with ``scipy.linalg.solve_sylvester``.

Prediction direction: **F -> S** (the encoder). A test feature is projected into the semantic
space, ``s_hat = W x``, and each candidate is scored by the cosine between ``s_hat`` and its class
embedding. (The paper also reports S -> F, decoding class embeddings into feature space; on the
demo both are close, and F -> S is the paper's default.)

Features are centred on the mean of the fitting images and L2-normalised per image, as in the
reference ESZSL submission; the mean comes from training images only. ``lambda`` is chosen on
the validation classes (fit on training classes, per-class top-1 on validation images with the
validation classes as candidates), then W is refitted on training + validation images.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import solve_sylvester

GRID = tuple(10.0**p for p in range(-2, 5))


def preprocess(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Centre on ``mean`` (from fitting images) and L2-normalise each row."""
    x = features.astype(np.float64) - mean
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)


def normalise(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    return rows / (np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12)


def solve(x: np.ndarray, s: np.ndarray, lam: float) -> np.ndarray:
    """Encoder ``W [k, d]`` for images ``x [N, d]`` with class embeddings ``s [N, k]``."""
    a = s.T @ s
    b = lam * (x.T @ x)
    c = (1.0 + lam) * (s.T @ x)
    return np.asarray(solve_sylvester(a, b, c))


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


class SAE:
    def __init__(self, grid: tuple[float, ...] = GRID) -> None:
        self.grid = grid

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = task.embedding.astype(np.float64)
        mean = task.train_features.mean(axis=0)
        x_train = preprocess(task.train_features, mean)
        x_val = preprocess(task.val_features, mean)
        val_emb = normalise(emb[task.val_classes])
        results = []
        for lam in self.grid:
            w = solve(x_train, emb[task.train_labels], lam)
            scores = normalise(x_val @ w.T) @ val_emb.T
            acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
            results.append((acc, lam))  # ties: prefer the larger lambda (stronger encoder term)
        self.val_accuracy_, self.lambda_ = max(results)
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"lambda": self.lambda_}
        x = np.concatenate([task.train_features, task.val_features])
        labels = np.concatenate([task.train_labels, task.val_labels])
        self.mean_ = x.mean(axis=0)
        self.w_ = solve(preprocess(x, self.mean_), emb[labels], self.lambda_)
        self.embedding_ = normalise(emb)

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        s_hat = normalise(preprocess(features, self.mean_) @ self.w_.T)
        return (s_hat @ self.embedding_[candidates].T).astype(np.float32)
