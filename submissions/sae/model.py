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

Prediction, both directions of the original code (Kodirov et al.'s ``awa_demo.m``), with the
encoder's rows L2-normalised first, ``W_n = NormalizeFea(W)`` (each row of W, one per semantic
dimension, to unit norm), as the original does in both directions:

* **F -> S** (the encoder): a test feature is projected into the semantic space,
  ``s_hat = W_n x``, and each candidate is scored by the cosine between ``s_hat`` and its class
  embedding;
* **S -> F** (the decoder): each candidate's class embedding is projected into the feature space,
  ``x_hat_c = W_n^T s_c``, and scored by the cosine between the test feature and ``x_hat_c``.

The paper reports both. Which one predicts, like lambda, is chosen on the validation classes
(ties: F -> S), and ``hyperparameters_`` names it (``"direction"``). Not followed: the original
demo also rescales each attribute over the test classes (``NormalizeFea(S')'``) and, in S -> F,
each projected feature dimension over the test classes; both make a class's score depend on
which other classes are candidates (the same class would score differently in ZSL and GZSL), so
class embeddings are L2-normalised per class only, which a cosine ignores.

Features are centred on the mean of the fitting images and L2-normalised per image, as in the
reference ESZSL submission (the original normalises each feature dimension of the training
images instead); the mean comes from training images only. ``lambda`` and the direction are
chosen on the validation classes (fit on training classes, per-class top-1 on validation images
with the validation classes as candidates), then W is refitted on training + validation images.
When the chosen lambda is an end of its grid, the grid grows past it (:func:`grid_search`, up to
3 values, 10x apart, per end); a choice still at an end after that is recorded
(``"lambda_at_grid_edge": true`` in ``hyperparameters_``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

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


# >>> copied block "grid-search": keep byte-identical (tests/test_reference_packages.py)
#: At most this many values are added past each end of a hyperparameter's grid (issue 27).
MAX_EXTENSIONS = 3


class Axis(NamedTuple):
    """One hyperparameter's grid for :func:`grid_search`: ``values``, ascending.

    A numeric grid of two or more values grows past an end the validation choice lands on, one
    geometric step of its own spacing at a time (``values[1] / values[0]`` below,
    ``values[-1] / values[-2]`` above; rounded to an integer on an ``integer`` axis, to 12
    significant digits otherwise), at most ``extensions`` (below, above) values per end, never
    outside ``[lowest, highest]``, the values the hyperparameter can take: an end there is the
    range's, not the grid's. A grid of one value (a fixed hyperparameter) or of strings (a
    choice between variants) never grows.
    """

    name: str
    values: tuple[Any, ...]
    lowest: float = 0.0
    highest: float = math.inf
    integer: bool = False
    extensions: tuple[int, int] = (MAX_EXTENSIONS, MAX_EXTENSIONS)

    def beyond(self, grid: list[Any], end: int) -> Any:
        """The next value past ``grid``'s low (``end`` 0) or high (-1) end; None where the grid
        cannot grow (fixed, strings, or the end of the range reached)."""
        if len(self.values) < 2 or isinstance(self.values[0], str):
            return None
        if (end == 0 and grid[0] <= self.lowest) or (end == -1 and grid[-1] >= self.highest):
            return None
        step = self.values[0] / self.values[1] if end == 0 else self.values[-1] / self.values[-2]
        value = min(max(grid[end] * step, self.lowest), self.highest)
        value = round(value) if self.integer else float(f"{value:.12g}")
        return None if value == grid[end] else value


class Search(NamedTuple):
    """What :func:`grid_search` found: the best ``point`` (one value per axis), its ``merit``,
    the ``grids`` searched (by axis name, ascending) and the axes whose choice is still at an
    end of its grid that is not the end of its range (``at_edge``)."""

    point: tuple[Any, ...]
    merit: Any
    grids: dict[str, tuple[Any, ...]]
    at_edge: tuple[str, ...]

    def edge_flags(self) -> dict[str, bool]:
        """``{"<name>_at_grid_edge": True}`` per axis in ``at_edge`` (for ``hyperparameters_``:
        the record then says the choice is at the edge of its grid); empty otherwise."""
        return {f"{name}_at_grid_edge": True for name in self.at_edge}


def grid_search(
    axes: tuple[Axis, ...], evaluate: Callable[[list[tuple[Any, ...]]], list[Any]]
) -> Search:
    """The point of the product of the ``axes``' grids with the greatest merit, each grid grown
    until the choice is inside it (issue 27).

    ``evaluate(points)`` gives one merit per point (a point: one value per axis, in ``axes``
    order), compared with ``max``: the validation score first, then the package's tie-breaks.
    Whenever the best point so far lies on an end of an axis's grid, that grid gains the next
    value past that end (:meth:`Axis.beyond`), and the new points of the product are evaluated;
    until the best point is inside every grid, at the end of an axis's range, or at an end that
    has grown ``extensions`` times. A choice inside the given grids costs one evaluation of
    those grids, in product order, and nothing else.
    """
    grids = [list(axis.values) for axis in axes]
    grown = [[0, 0] for _ in axes]
    merits: dict[tuple[Any, ...], Any] = {}
    points = list(itertools.product(*grids))
    while points:
        merits.update(zip(points, evaluate(points), strict=True))
        best = max(merits, key=merits.__getitem__)
        for axis, grid, count, chosen in zip(axes, grids, grown, best, strict=True):
            for side, end in enumerate((0, -1)):
                value = axis.beyond(grid, end)
                if chosen != grid[end] or value is None or count[side] >= axis.extensions[side]:
                    continue
                grid.insert(0 if end == 0 else len(grid), value)
                count[side] += 1
        points = [point for point in itertools.product(*grids) if point not in merits]
    best = max(merits, key=merits.__getitem__)
    at_edge = tuple(
        axis.name
        for axis, grid, value in zip(axes, grids, best, strict=True)
        if any(value == grid[end] and axis.beyond(grid, end) is not None for end in (0, -1))
    )
    searched = {axis.name: tuple(grid) for axis, grid in zip(axes, grids, strict=True)}
    return Search(best, merits[best], searched, at_edge)


# <<< copied block "grid-search"


GRID = tuple(10.0**p for p in range(-2, 5))
#: The prediction directions (:class:`SAE`), the first preferred on a tie.
DIRECTIONS = ("F->S", "S->F")


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


def encoder(fit: ClosedForm, lam: float) -> np.ndarray:
    """``W_n``: the encoder ``W(lambda)`` with each row L2-normalised (the original's
    ``NormalizeFea(W)``), what both directions predict with."""
    return normalise(fit.w(lam))


def direction_scores(
    direction: str, x: np.ndarray, w_n: np.ndarray, emb_n: np.ndarray
) -> np.ndarray:
    """Cosine scores ``[n, C]`` of images ``x [n, d]`` (preprocessed) against classes of
    L2-normalised embeddings ``emb_n [C, k]``: F -> S compares ``W_n x`` with ``s_c``, S -> F
    compares ``x`` with ``W_n^T s_c``."""
    if direction == "F->S":
        return normalise(x @ w_n.T) @ emb_n.T
    return normalise(x) @ normalise(emb_n @ w_n).T


class SAE:
    def __init__(
        self, grid: tuple[float, ...] = GRID, directions: tuple[str, ...] = DIRECTIONS
    ) -> None:
        unknown = sorted(set(directions) - set(DIRECTIONS))
        if unknown or not directions:
            raise ValueError(
                f"directions: expected some of {list(DIRECTIONS)}, got {list(directions)}"
            )
        self.grid = grid
        self.directions = directions

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
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

        def evaluate(points: list[tuple[Any, ...]]) -> list[Any]:
            """Per-class top-1 on the validation classes of each (direction, lambda)."""
            lams = list(dict.fromkeys(lam for _, lam in points))
            w_n = [encoder(fit, lam) for lam in lams]
            # Every lambda's W_n^T (F -> S) and decoded validation classes (S -> F) side by
            # side: one product each. The rows of x_val have unit norm: cosines as they are.
            codes = x_val @ np.hstack([w.T for w in w_n])
            decoded = x_val @ np.hstack([normalise(val_emb @ w).T for w in w_n])
            scores = {}
            for lam, code, dec in zip(
                lams,
                np.split(codes, len(lams), axis=1),
                np.split(decoded, len(lams), axis=1),
                strict=True,
            ):
                scores["F->S", lam], scores["S->F", lam] = normalise(code) @ val_emb.T, dec
            merits = []
            for direction, lam in points:
                acc = per_class_top1(
                    scores[direction, lam], task.val_labels, classes=task.val_classes
                )
                # ties: F -> S, then the larger lambda (stronger encoder term)
                merits.append((acc, direction == DIRECTIONS[0], lam))
            return merits

        search = grid_search(
            (Axis("direction", self.directions), Axis("lambda", self.grid)), evaluate
        )
        self.direction_, self.lambda_ = search.point
        self.val_accuracy_ = search.merit[0]
        self.grids_ = search.grids
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {
            "lambda": self.lambda_,
            "direction": self.direction_,
            **search.edge_flags(),
        }
        labels = np.concatenate([task.train_labels, task.val_labels])
        rows[:n_train], rows[n_train:] = task.train_features, task.val_features  # raw again
        # float32 accumulation, row by row: bit-identical to the float32 features' own mean
        self.mean_ = rows.mean(axis=0, dtype=np.float32)
        x = centre_and_normalise(rows, self.mean_)
        self.w_ = encoder(ClosedForm(x, emb[labels]), self.lambda_)
        self.embedding_ = normalise(emb)

    def save(self, directory: Path) -> None:
        arrays = {"mean": self.mean_, "w": self.w_, "embedding": self.embedding_}
        write_state(directory, {**arrays, "direction": np.asarray(self.direction_)})

    @classmethod
    def load(cls, directory: Path) -> SAE:
        state, model = read_state(directory), cls()
        model.mean_, model.w_, model.embedding_ = state["mean"], state["w"], state["embedding"]
        model.direction_ = str(state["direction"])
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        x = preprocess(features, self.mean_)
        scores = direction_scores(self.direction_, x, self.w_, self.embedding_[candidates])
        return scores.astype(np.float32)
