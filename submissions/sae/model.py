"""SAE: "Semantic Autoencoder for Zero-Shot Learning" (Kodirov, Xiang & Gong, CVPR 2017).

A linear autoencoder whose code is the class embedding: the encoder ``W [k, d]`` maps a feature
to its class embedding and the tied decoder ``W^T`` maps it back,

    min_W ||X - W^T S||^2 + lambda ||W X - S||^2,

with ``X [d, N]`` the features and ``S [k, N]`` the class embedding of each image. Setting the
gradient to zero gives the Sylvester equation

    (S S^T) W + W (lambda X X^T) = (1 + lambda) S X^T,

solved in closed form (:class:`ClosedForm`). With the eigendecompositions
``S S^T = P diag(alpha) P^T`` and ``X X^T = U diag(a) U^T``, made once per fit and shared by
every lambda, the equation is diagonal in those bases:

    W = P [ (1 + lambda) (P^T S X^T U) / (alpha_i + lambda a_j) ] U^T.

This is what ``scipy.linalg.solve_sylvester(S S^T, lambda X X^T, (1 + lambda) S X^T)`` solves
(the previous code called it once per lambda), without a Schur decomposition of the d x d matrix
per lambda. Where ``alpha_i + lambda a_j`` is 0 (a direction that neither the class embeddings
nor the features span; ``S S^T`` has rank <= the number of classes, below k on most datasets, and
``X X^T`` is rank-deficient when d exceeds the images) both sides of the equation vanish and W
takes 0 there: the minimum-norm solution, where solve_sylvester would return round-off.

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
from pathlib import Path

import numpy as np


# >>> copied block "state-files": keep byte-identical (tests/test_reference_packages.py)
def write_state(directory: Path, arrays: dict[str, np.ndarray]) -> None:
    """The fitted state, named arrays in one ``state.npz`` (``Model.save``: data, never code)."""
    np.savez(directory / "state.npz", **arrays)  # type: ignore[arg-type]


def read_state(directory: Path) -> dict[str, np.ndarray]:
    """The arrays :func:`write_state` wrote, read whole (``allow_pickle=False``: no object)."""
    with np.load(directory / "state.npz", allow_pickle=False) as saved:
        return {name: saved[name] for name in saved.files}


# <<< copied block "state-files"


GRID = tuple(10.0**p for p in range(-2, 5))


def preprocess(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Centre on ``mean`` (from fitting images) and L2-normalise each row, in a float64 copy."""
    return centre_and_normalise(features.astype(np.float64), mean)


def centre_and_normalise(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """:func:`preprocess` in place on float64 rows ``x`` (returned)."""
    x -= mean
    x /= np.sqrt(np.einsum("ij,ij->i", x, x))[:, None] + 1e-12  # no n x d temporary
    return x


def normalise(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    return rows / (np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12)


# >>> copied block "psd-eigh": keep byte-identical (tests/test_reference_packages.py)
def psd_eigh(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric positive semi-definite matrix.

    Eigenvalues at the round-off level of ``gram`` (below ``dim * eps * largest``, negative ones
    included) are exactly 0: they are zero in exact arithmetic, and a 1e-13 left there would be
    divided by in the closed forms.
    """
    values, vectors = np.linalg.eigh(gram)
    floor = len(values) * np.finfo(np.float64).eps * max(float(values[-1]), 0.0)
    return np.where(values > floor, values, 0.0), vectors


# <<< copied block "psd-eigh"


class ClosedForm:
    """Encoder ``W(lambda) [k, d]`` for images ``x [N, d]`` with class embeddings ``s [N, k]``.

    The eigendecompositions of ``s^T s`` (the paper's S S^T) and ``x^T x`` (X X^T) are made
    once, here; each lambda then costs an element-wise division and two products.
    """

    def __init__(self, x: np.ndarray, s: np.ndarray) -> None:
        self.alpha, self.p = psd_eigh(s.T @ s)
        self.a, self.u = psd_eigh(x.T @ x)  # one BLAS call (numpy uses syrk for x.T @ x)
        self.core = (s @ self.p).T @ x @ self.u  # P^T S X^T U  [k, d]

    def w(self, lam: float) -> np.ndarray:
        denominator = np.add.outer(self.alpha, lam * self.a)
        rotated = np.zeros_like(self.core)  # stays 0 where both eigenvalues are 0
        np.divide((1.0 + lam) * self.core, denominator, out=rotated, where=denominator > 0)
        return self.p @ rotated @ self.u.T


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
        # One float64 copy of the fitting images serves the tuning and the refit: a fresh
        # AWA2-size array costs ~0.9 s of page faults, more than the arithmetic on it.
        n_train = len(task.train_features)
        rows = np.concatenate([task.train_features, task.val_features], dtype=np.float64)
        mean = task.train_features.mean(axis=0)
        x_train = centre_and_normalise(rows[:n_train], mean)
        x_val = centre_and_normalise(rows[n_train:], mean)
        val_emb = normalise(emb[task.val_classes])
        fit = ClosedForm(x_train, emb[task.train_labels])
        # W^T of every lambda side by side [d, lambdas x k]: one product encodes them all.
        codes = x_val @ np.hstack([fit.w(lam).T for lam in self.grid])
        codes = codes.reshape(len(x_val), len(self.grid), -1).transpose(1, 0, 2)
        results = []
        for lam, lam_codes in zip(self.grid, codes, strict=True):
            scores = normalise(lam_codes) @ val_emb.T
            acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
            results.append((acc, lam))  # ties: prefer the larger lambda (stronger encoder term)
        self.val_accuracy_, self.lambda_ = max(results)
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"lambda": self.lambda_}
        labels = np.concatenate([task.train_labels, task.val_labels])
        rows[:n_train], rows[n_train:] = task.train_features, task.val_features  # raw again
        # float32 accumulation, row by row: bit-identical to the float32 features' own mean
        self.mean_ = rows.mean(axis=0, dtype=np.float32)
        x = centre_and_normalise(rows, self.mean_)
        self.w_ = ClosedForm(x, emb[labels]).w(self.lambda_)
        self.embedding_ = normalise(emb)

    def save(self, directory: Path) -> None:
        write_state(directory, {"mean": self.mean_, "w": self.w_, "embedding": self.embedding_})

    @classmethod
    def load(cls, directory: Path) -> SAE:
        state, model = read_state(directory), cls()
        model.mean_, model.w_, model.embedding_ = state["mean"], state["w"], state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        s_hat = normalise(preprocess(features, self.mean_) @ self.w_.T)
        return (s_hat @ self.embedding_[candidates].T).astype(np.float32)
