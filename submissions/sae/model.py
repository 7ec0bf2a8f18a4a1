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


def per_class_top1(scores: np.ndarray, y: np.ndarray) -> float:
    pred = scores.argmax(axis=1)
    return float(np.mean([np.mean(pred[y == c] == c) for c in np.unique(y)]))


class SAE:
    def __init__(self, grid: tuple[float, ...] = GRID) -> None:
        self.grid = grid

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = task.embedding.astype(np.float64)
        mean = task.train_features.mean(axis=0)
        x_train = preprocess(task.train_features, mean)
        x_val = preprocess(task.val_features, mean)
        va_pos = np.searchsorted(task.val_classes, task.val_labels)
        val_emb = normalise(emb[task.val_classes])
        results = []
        for lam in self.grid:
            w = solve(x_train, emb[task.train_labels], lam)
            acc = per_class_top1(normalise(x_val @ w.T) @ val_emb.T, va_pos)
            results.append((acc, lam))  # ties: prefer the larger lambda (stronger encoder term)
        self.val_accuracy_, self.lambda_ = max(results)
        x = np.concatenate([task.train_features, task.val_features])
        labels = np.concatenate([task.train_labels, task.val_labels])
        self.mean_ = x.mean(axis=0)
        self.w_ = solve(preprocess(x, self.mean_), emb[labels], self.lambda_)
        self.embedding_ = normalise(emb)

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        s_hat = normalise(preprocess(features, self.mean_) @ self.w_.T)
        return (s_hat @ self.embedding_[candidates].T).astype(np.float32)
