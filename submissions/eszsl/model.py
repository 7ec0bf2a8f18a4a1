"""ESZSL: "An embarrassingly simple approach to zero-shot learning" (Romera-Paredes & Torr, 2015).

A bilinear compatibility ``score(x, c) = x^T V s_c`` between image features ``x`` and class
embeddings ``s_c``, with the closed-form solution

    V = (X^T X + gamma I)^-1  X^T Y S  (S^T S + lambda I)^-1

where ``Y`` holds +1 for the true class and -1 elsewhere. ``gamma`` and ``lambda`` are chosen on
the validation classes only (train on training classes, per-class top-1 on validation classes
among validation candidates), then V is refitted on training + validation images. When a chosen
value is an end of its grid, that grid grows past it (:func:`grid_search`, up to 3 values, 10x
apart, per end); a choice still at an end after that is recorded (``"gamma_at_grid_edge": true``
or ``"lambda_at_grid_edge": true`` in ``hyperparameters_``).

Preprocessing (the constructor's ``preprocessing``, recorded in ``hyperparameters_``):

* ``"centre-l2"`` (the default, the paper's): features are centred on the mean of the fitting
  images and L2-normalised per image before the solve (the bilinear form has no bias term, so
  uncentred non-negative features waste capacity on the offset), and ``Y`` is in {-1, +1}; the
  mean comes from training images only, never from test images.
* ``"raw-01"`` (public re-implementations'): the features as they are and ``Y`` in {0, 1}
  (``Y S`` has the rows ``s_y``).

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


GRID = tuple(10.0**p for p in range(-3, 4))
#: The preprocessings (module docstring), the default first.
PREPROCESSING = ("centre-l2", "raw-01")


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
    x: np.ndarray, labels: np.ndarray, s: np.ndarray, signed: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X^T X``, ``X^T Y S`` and ``S^T S`` for images ``x [n, d]`` of classes ``labels`` (rows
    of ``s``). ``Y`` in {-1, +1} (``signed``): row i of ``Y S`` is ``2 s_y - sum_c s_c``; in
    {0, 1}: ``s_y``. The n x C matrix ``Y`` is never made."""
    s = s.astype(np.float64)
    ys = 2.0 * s[labels] - s.sum(axis=0) if signed else s[labels]
    return x.T @ x, x.T @ ys, s.T @ s  # x.T @ x: one BLAS call (numpy uses syrk for it)


def solve(
    x: np.ndarray,
    labels: np.ndarray,
    s: np.ndarray,
    gamma: float,
    lam: float,
    signed: bool = True,
) -> np.ndarray:
    """V for one (gamma, lambda): two linear solves, cheaper than :class:`ClosedForm`'s
    eigendecompositions when only one pair is wanted (the refit)."""
    xtx, xtys, sts = normal_terms(x, labels, s, signed)
    xtx[np.diag_indices_from(xtx)] += gamma
    left = np.linalg.solve(xtx, xtys)
    return np.linalg.solve((sts + lam * np.eye(len(sts))).T, left.T).T


class ClosedForm:
    """``V(gamma, lambda)`` for every pair of a grid, from one fit's normal terms.

    The eigendecompositions of ``X^T X`` and ``S^T S`` are made once, here; each grid point
    then costs an element-wise division of a d x k matrix.
    """

    def __init__(
        self, x: np.ndarray, labels: np.ndarray, s: np.ndarray, signed: bool = True
    ) -> None:
        xtx, xtys, sts = normal_terms(x, labels, s, signed)
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
    def __init__(self, grid: tuple[float, ...] = GRID, preprocessing: str = "centre-l2") -> None:
        if preprocessing not in PREPROCESSING:
            raise ValueError(
                f"preprocessing: expected one of {list(PREPROCESSING)}, got {preprocessing!r}"
            )
        self.grid = grid
        self.preprocessing = preprocessing

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        emb = task.embedding
        train_cls, val_cls = task.train_classes, task.val_classes
        signed = self.preprocessing == "centre-l2"
        # Relabel to positions within each class subset.
        tr_pos = np.searchsorted(train_cls, task.train_labels)
        # One float64 copy of the fitting images serves the tuning and the refit: a fresh
        # AWA2-size array costs ~0.9 s of page faults, more than the arithmetic on it.
        n_train = len(task.train_features)
        rows = np.concatenate([task.train_features, task.val_features], dtype=np.float64)
        x_train, x_val = rows[:n_train], rows[n_train:]
        if signed:
            mean = task.train_features.mean(axis=0)
            x_train = centre_and_normalise(x_train, mean)
            x_val = centre_and_normalise(x_val, mean)
        fit = ClosedForm(x_train, tr_pos, emb[train_cls], signed)
        val_emb_q = emb[val_cls].astype(np.float64) @ fit.q  # S_val Q  [C_val, k]

        def evaluate(pairs: list[tuple[Any, ...]]) -> list[Any]:
            """Per-class top-1 on the validation classes of each (gamma, lambda)."""
            # V S_val^T of every pair side by side [d, pairs x C_val]: one product scores all.
            v_val = fit.u @ np.hstack([fit.rotated(*pair) @ val_emb_q.T for pair in pairs])
            scores = (x_val @ v_val).reshape(len(x_val), len(pairs), len(val_cls))
            results = []
            for (gamma, lam), pair_scores in zip(pairs, scores.transpose(1, 0, 2), strict=True):
                acc = per_class_top1(pair_scores, task.val_labels, classes=val_cls)
                results.append((acc, -gamma, -lam))  # ties: the smaller gamma, then lambda
            return results

        search = grid_search((Axis("gamma", self.grid), Axis("lambda", self.grid)), evaluate)
        self.gamma_, self.lambda_ = search.point
        self.val_accuracy_ = search.merit[0]
        self.grids_ = search.grids
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {
            "gamma": self.gamma_,
            "lambda": self.lambda_,
            "preprocessing": self.preprocessing,
            **search.edge_flags(),
        }
        seen = np.union1d(train_cls, val_cls)
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        rows[:n_train], rows[n_train:] = task.train_features, task.val_features  # raw again
        self.mean_: np.ndarray | None = None
        if signed:
            # float32 accumulation, row by row: bit-identical to the float32 features' own mean
            self.mean_ = rows.mean(axis=0, dtype=np.float32)
            rows = centre_and_normalise(rows, self.mean_)
        self.v_ = solve(rows, y, emb[seen], self.gamma_, self.lambda_, signed)
        self.embedding_ = emb

    def save(self, directory: Path) -> None:
        arrays = {"v": self.v_, "embedding": self.embedding_}
        if self.mean_ is not None:
            arrays["mean"] = self.mean_
        write_state(directory, {**arrays, "preprocessing": np.asarray(self.preprocessing)})

    @classmethod
    def load(cls, directory: Path) -> ESZSL:
        state = read_state(directory)
        model = cls(preprocessing=str(state["preprocessing"]))
        model.mean_, model.v_, model.embedding_ = state.get("mean"), state["v"], state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        raw = self.mean_ is None  # "raw-01": the features as they are
        x = features.astype(np.float64) if raw else preprocess(features, self.mean_)
        return (x @ self.v_ @ self.embedding_[candidates].T).astype(np.float32)
