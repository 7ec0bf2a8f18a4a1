"""DAP: direct attribute prediction (Lampert, Nickisch & Harmeling, CVPR 2009; TPAMI 2014).

Choices (the benchmark's class embedding plays the role of the attribute table):

* **Binary attributes.** Continuous attributes are binarised at their mean over the classes
  being fitted (training classes while tuning, training + validation classes for the final
  fit); every class, seen or not, is binarised with those same thresholds. Attributes that are
  constant over the fitted classes carry no information and are dropped.
* **Attribute classifiers.** One scikit-learn ``LogisticRegression`` (L2, lbfgs) per attribute,
  trained on every fitting image with the binarised attribute of its class as the label.
  Features are centred on the mean of the fitting images and L2-normalised per image, then
  scaled to unit variance per dimension (statistics from fitting images only).
* **Class score** (Lampert et al. 2014, Eq. 2 with a uniform class prior):

      score(x, c) = sum_m [ log p(a_m = a_m^c | x) - log p(a_m = a_m^c) ]

  where ``p(a_m)`` is the attribute prior, the empirical mean of the binarised attribute over
  the fitted classes, and probabilities are clipped to ``[1e-6, 1 - 1e-6]``.
* **Hyperparameter.** ``C`` in {1e-4, 1e-3, 0.01, 0.1, 1} (shared by all attributes) is chosen by
  per-class top-1 on the validation images with the validation classes as candidates, after
  fitting on the training classes only; ties go to the smaller ``C``. The chosen ``C`` is then
  refitted on training + validation images.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

GRID = (0.0001, 0.001, 0.01, 0.1, 1.0)
EPS = 1e-6


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


class _Standardiser:
    def __init__(self, features: np.ndarray) -> None:
        x = features.astype(np.float64)
        self.mean = x.mean(axis=0)
        x = self._unit(x)
        self.centre = x.mean(axis=0)
        self.scale = x.std(axis=0) + 1e-12

    def _unit(self, x: np.ndarray) -> np.ndarray:
        x = x - self.mean
        return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return (self._unit(features.astype(np.float64)) - self.centre) / self.scale


class _AttributeModel:
    """Per-attribute logistic regressions fitted on the images of ``classes``."""

    def __init__(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        embedding: np.ndarray,
        classes: np.ndarray,
        c: float,
        seed: int,
    ) -> None:
        self.threshold = embedding[classes].mean(axis=0)
        binary = embedding > self.threshold  # [n_classes, n_attributes]
        fitted = binary[classes]
        self.keep = np.flatnonzero(fitted.any(axis=0) & ~fitted.all(axis=0))
        self.binary = binary[:, self.keep]
        self.prior = np.clip(fitted[:, self.keep].mean(axis=0), EPS, 1 - EPS)
        self.standardise = _Standardiser(features)
        x = self.standardise(features)
        y = self.binary[labels]  # [n_images, n_kept]
        self.coef = np.zeros((x.shape[1], len(self.keep)))
        self.intercept = np.zeros(len(self.keep))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for j in range(len(self.keep)):
                clf = LogisticRegression(C=c, max_iter=200, random_state=seed)
                clf.fit(x, y[:, j])
                self.coef[:, j] = clf.coef_[0]
                self.intercept[j] = clf.intercept_[0]

    def scores(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        logits = self.standardise(features) @ self.coef + self.intercept
        p = np.clip(1.0 / (1.0 + np.exp(-logits)), EPS, 1 - EPS)  # p(a_m = 1 | x)
        sig = self.binary[candidates].astype(np.float64)  # [n_candidates, n_kept]
        log_p1, log_p0 = np.log(p), np.log1p(-p)
        likelihood = log_p1 @ sig.T + log_p0 @ (1.0 - sig).T
        prior = sig @ np.log(self.prior) + (1.0 - sig) @ np.log1p(-self.prior)
        return likelihood - prior


class DAP:
    def __init__(self, grid: tuple[float, ...] = GRID) -> None:
        self.grid = grid

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = task.embedding.astype(np.float64)
        results = []
        for c in self.grid:
            model = _AttributeModel(
                task.train_features, task.train_labels, emb, task.train_classes, c, task.seed
            )
            scores = model.scores(task.val_features, task.val_classes)
            acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
            results.append((acc, -c))  # ties: prefer the smaller C (stronger regularisation)
        best = max(results)
        self.val_accuracy_, self.c_ = best[0], -best[1]
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"C": self.c_}
        seen = np.union1d(task.train_classes, task.val_classes)
        self.model_ = _AttributeModel(
            np.concatenate([task.train_features, task.val_features]),
            np.concatenate([task.train_labels, task.val_labels]),
            emb,
            seen,
            self.c_,
            task.seed,
        )

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return self.model_.scores(features, candidates).astype(np.float32)
