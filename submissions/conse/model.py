"""ConSE: "Zero-shot learning by convex combination of semantic embeddings" (Norouzi et al., 2014).

A softmax classifier over the seen classes (scikit-learn ``LogisticRegression``, multinomial,
L2, lbfgs) gives ``p(y | x)`` for each seen class ``y``. The image is embedded as the convex
combination of the class embeddings of its ``T`` most probable seen classes,

    f(x) = 1/Z sum_{t=1..T} p(y_t | x) s(y_t),      Z = sum_{t=1..T} p(y_t | x),

and each candidate class ``c`` is scored by ``cos(f(x), s(c))``. Class embeddings are
L2-normalised first. In GZSL the seen candidates are scored the same way (cosine to ``f(x)``).

Features are centred on the mean of the fitting images, L2-normalised per image and scaled to
unit variance per dimension (statistics from fitting images only). ``C`` in {0.01, 0.1, 1, 10}
and ``T`` in {1, 3, 5, 10} are chosen jointly by per-class top-1 on the validation images with
the validation classes as candidates, after fitting the classifier on the training classes
only; ties go to the smaller ``C``, then the larger ``T``. The classifier is then refitted on
training + validation images with the chosen ``C``.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

C_GRID = (0.01, 0.1, 1.0, 10.0)
T_GRID = (1, 3, 5, 10)


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


# >>> copied block "seen-classifier": keep byte-identical (tests/test_reference_packages.py)
def normalise(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    return rows / (np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12)


class SeenClassifier:
    """Multinomial logistic regression over the classes present in ``labels``."""

    def __init__(self, features: np.ndarray, labels: np.ndarray, c: float, seed: int) -> None:
        x = features.astype(np.float64)
        self.mean = x.mean(axis=0)
        x = normalise(x - self.mean)
        self.centre = x.mean(axis=0)
        self.scale = x.std(axis=0) + 1e-12
        self.classes = np.unique(labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.clf = LogisticRegression(C=c, max_iter=300, random_state=seed)
            self.clf.fit((x - self.centre) / self.scale, labels)

    def proba(self, features: np.ndarray) -> np.ndarray:
        """``p(y | x)`` ``[n, len(self.classes)]``, columns in ``self.classes`` order."""
        x = normalise(features.astype(np.float64) - self.mean)
        return self.clf.predict_proba((x - self.centre) / self.scale)

    def log_proba(self, features: np.ndarray) -> np.ndarray:
        """``log p(y | x)`` ``[n, len(self.classes)]``, columns in ``self.classes`` order."""
        x = normalise(features.astype(np.float64) - self.mean)
        return self.clf.predict_log_proba((x - self.centre) / self.scale)


# <<< copied block "seen-classifier"


def conse_scores(
    proba: np.ndarray, seen_emb: np.ndarray, cand_emb: np.ndarray, t: int
) -> np.ndarray:
    """Cosine between the top-``t`` convex combination and each candidate embedding."""
    t = min(t, proba.shape[1])
    top = np.argpartition(-proba, t - 1, axis=1)[:, :t]
    weights = np.zeros_like(proba)
    rows = np.arange(len(proba))[:, None]
    weights[rows, top] = proba[rows, top]
    weights /= weights.sum(axis=1, keepdims=True)
    return normalise(weights @ seen_emb) @ cand_emb.T


class ConSE:
    def __init__(self, c_grid: tuple[float, ...] = C_GRID, t_grid: tuple[int, ...] = T_GRID):
        self.c_grid = c_grid
        self.t_grid = t_grid

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = normalise(task.embedding)
        results = []
        for c in self.c_grid:
            clf = SeenClassifier(task.train_features, task.train_labels, c, task.seed)
            proba = clf.proba(task.val_features)
            for t in self.t_grid:
                scores = conse_scores(proba, emb[clf.classes], emb[task.val_classes], t)
                acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
                results.append((acc, -c, t))
        best = max(results)
        self.val_accuracy_, self.c_, self.t_ = best[0], -best[1], best[2]
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"C": self.c_, "T": self.t_}
        self.clf_ = SeenClassifier(
            np.concatenate([task.train_features, task.val_features]),
            np.concatenate([task.train_labels, task.val_labels]),
            self.c_,
            task.seed,
        )
        self.embedding_ = emb

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        proba = self.clf_.proba(features)
        seen_emb = self.embedding_[self.clf_.classes]
        return conse_scores(proba, seen_emb, self.embedding_[candidates], self.t_).astype(
            np.float32
        )
