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

How it is computed (:class:`ClosedForm`): one symmetric eigendecomposition each of
``X^T X = U diag(a) U^T`` and ``S^T S = Q diag(b) Q^T`` serves every (gamma, lambda) pair,

    V = U [ (U^T X^T Y S Q) / ((a_i + gamma) (b_j + lambda)) ] Q^T,

which is the formula above with both inverses diagonal in those bases. ``Y S`` has the rows
``2 s_y - sum_c s_c``, so the n x C matrix of +-1 is never built. Everything stays float64: a
float32 Gram matrix would move V by ~1e-7 times the condition number ``(a_max + gamma) / gamma``,
far beyond float tolerance at the grid's small gammas. Validation scores are multiplied in the
cheap order, ``X_val [U (core_1 Q^T S_val^T), ..., U (core_49 Q^T S_val^T)]``: d x k x C and
d x d x C per pair, then one n_val x d x 49 C product. The refit (one pair) uses two linear
solves, cheaper than an eigendecomposition for a single pair.
"""

from __future__ import annotations

import itertools
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


GRID = tuple(10.0**p for p in range(-3, 4))


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


def normal_terms(
    x: np.ndarray, labels: np.ndarray, s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X^T X``, ``X^T Y S`` and ``S^T S`` for images ``x [n, d]`` of classes ``labels`` (rows
    of ``s``). Row i of ``Y S`` is ``2 s_y - sum_c s_c``: the n x C matrix of +-1 is never made."""
    s = s.astype(np.float64)
    ys = 2.0 * s[labels] - s.sum(axis=0)
    return x.T @ x, x.T @ ys, s.T @ s  # x.T @ x: one BLAS call (numpy uses syrk for it)


def solve(x: np.ndarray, labels: np.ndarray, s: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """V for one (gamma, lambda): two linear solves, cheaper than :class:`ClosedForm`'s
    eigendecompositions when only one pair is wanted (the refit)."""
    xtx, xtys, sts = normal_terms(x, labels, s)
    xtx[np.diag_indices_from(xtx)] += gamma
    left = np.linalg.solve(xtx, xtys)
    return np.linalg.solve((sts + lam * np.eye(len(sts))).T, left.T).T


class ClosedForm:
    """``V(gamma, lambda)`` for every pair of a grid, from one fit's normal terms.

    The eigendecompositions of ``X^T X`` and ``S^T S`` are made once, here; each grid point
    then costs an element-wise division of a d x k matrix.
    """

    def __init__(self, x: np.ndarray, labels: np.ndarray, s: np.ndarray) -> None:
        xtx, xtys, sts = normal_terms(x, labels, s)
        self.a, self.u = psd_eigh(xtx)
        self.b, self.q = psd_eigh(sts)
        self.core = self.u.T @ xtys @ self.q  # U^T X^T Y S Q  [d, k]

    def rotated(self, gamma: float, lam: float) -> np.ndarray:
        """``U^T V Q``: V in the eigenbases, where both inverses are diagonal."""
        return self.core / np.outer(self.a + gamma, self.b + lam)

    def v(self, gamma: float, lam: float) -> np.ndarray:
        return self.u @ self.rotated(gamma, lam) @ self.q.T


def preprocess(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Centre on ``mean`` (from fitting images) and L2-normalise each row, in a float64 copy."""
    return centre_and_normalise(features.astype(np.float64), mean)


def centre_and_normalise(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """:func:`preprocess` in place on float64 rows ``x`` (returned)."""
    x -= mean
    x /= np.sqrt(np.einsum("ij,ij->i", x, x))[:, None] + 1e-12  # no n x d temporary
    return x


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
        # One float64 copy of the fitting images serves the tuning and the refit: a fresh
        # AWA2-size array costs ~0.9 s of page faults, more than the arithmetic on it.
        n_train = len(task.train_features)
        rows = np.concatenate([task.train_features, task.val_features], dtype=np.float64)
        mean = task.train_features.mean(axis=0)
        x_train = centre_and_normalise(rows[:n_train], mean)
        x_val = centre_and_normalise(rows[n_train:], mean)
        fit = ClosedForm(x_train, tr_pos, emb[train_cls])
        pairs = list(itertools.product(self.grid, self.grid))
        val_emb_q = emb[val_cls].astype(np.float64) @ fit.q  # S_val Q  [C_val, k]
        # V S_val^T of every pair side by side [d, pairs x C_val]: one product scores them all.
        v_val = fit.u @ np.hstack([fit.rotated(*pair) @ val_emb_q.T for pair in pairs])
        scores = (x_val @ v_val).reshape(len(x_val), len(pairs), len(val_cls))
        results = []
        for (gamma, lam), pair_scores in zip(pairs, scores.transpose(1, 0, 2), strict=True):
            acc = per_class_top1(pair_scores, task.val_labels, classes=val_cls)
            results.append((acc, -gamma, -lam))  # ties: the smaller gamma, then the smaller lambda
        best = max(results)
        self.gamma_, self.lambda_ = -best[1], -best[2]
        self.val_accuracy_ = best[0]
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"gamma": self.gamma_, "lambda": self.lambda_}
        seen = np.union1d(train_cls, val_cls)
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        rows[:n_train], rows[n_train:] = task.train_features, task.val_features  # raw again
        # float32 accumulation, row by row: bit-identical to the float32 features' own mean
        self.mean_ = rows.mean(axis=0, dtype=np.float32)
        x = centre_and_normalise(rows, self.mean_)
        self.v_ = solve(x, y, emb[seen], self.gamma_, self.lambda_)
        self.embedding_ = emb

    def save(self, directory: Path) -> None:
        write_state(directory, {"mean": self.mean_, "v": self.v_, "embedding": self.embedding_})

    @classmethod
    def load(cls, directory: Path) -> ESZSL:
        state, model = read_state(directory), cls()
        model.mean_, model.v_, model.embedding_ = state["mean"], state["v"], state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        x = preprocess(features, self.mean_)
        return (x @ self.v_ @ self.embedding_[candidates].T).astype(np.float32)
