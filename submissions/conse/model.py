"""ConSE: "Zero-shot learning by convex combination of semantic embeddings" (Norouzi et al., 2014).

A softmax classifier over the seen classes (multinomial logistic regression, L2: the objective
and the lbfgs run of scikit-learn's ``LogisticRegression``, reproduced step for step by the
copied ``SeenClassifier`` below, see README) gives ``p(y | x)`` for each seen class ``y``. The
image is embedded as the convex combination of the class embeddings of its ``T`` most probable
seen classes,

    f(x) = 1/Z sum_{t=1..T} p(y_t | x) s(y_t),      Z = sum_{t=1..T} p(y_t | x),

and each candidate class ``c`` is scored by ``cos(f(x), s(c))``. Class embeddings are
L2-normalised first. In GZSL the seen candidates are scored the same way (cosine to ``f(x)``).

Features are centred on the mean of the fitting images, L2-normalised per image and scaled to
unit variance per dimension (statistics from fitting images only). ``C`` in {0.01, 0.1, 1, 10}
and ``T`` in {1, 3, 5, 10} are chosen jointly by per-class top-1 on the validation images with
the validation classes as candidates, after fitting the classifier on the training classes
only; ties go to the smaller ``C``, then the larger ``T``. The ``C`` grid shares one
standardisation of the features, and each ``T`` takes a prefix of one ranking of the seen
classes. The classifier is then refitted on training + validation images with the chosen ``C``.
A choice at an end of its grid grows that grid past it (:func:`grid_search`: ``C`` 10x apart,
``T`` 2x apart, up to 3 values per end; ``T`` stops at 1 and at the number of training classes,
the ends of its range); one still at an end is recorded (``"C_at_grid_edge": true`` or
``"T_at_grid_edge": true`` in ``hyperparameters_``).
"""

from __future__ import annotations

import itertools
import math
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.optimize


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
ROWS_PER_BLOCK = 256  # images standardised at a time: float64 temporaries of 4 MiB at 2,048-d
EPS = float(np.finfo(np.float64).eps)


def normalise(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)  # a new array is returned either way
    return rows / (np.linalg.norm(rows, axis=1, keepdims=True) + 1e-12)


class Standardiser:
    """Centre on the fitting mean, L2-normalise per image, scale each dimension to unit variance.

    Statistics come from the fitting images only. The standardised features are float64, as the
    previous scikit-learn fits had them, written in one pass ``ROWS_PER_BLOCK`` images at a time
    with no other copy of the feature matrix.
    """

    def __init__(self, mean: np.ndarray, centre: np.ndarray, scale: np.ndarray) -> None:
        self.mean, self.centre, self.scale = mean, centre, scale

    @classmethod
    def fit(cls, features: np.ndarray) -> tuple[Standardiser, np.ndarray]:
        """The standardiser of ``features`` and ``features`` standardised by it, in one pass."""
        n, d = features.shape
        mean = features.mean(axis=0, dtype=np.float64)
        unit = np.empty((n, d))
        total, squares = np.zeros(d), np.zeros(d)
        for start in range(0, n, ROWS_PER_BLOCK):
            rows = normalise(features[start : start + ROWS_PER_BLOCK] - mean)
            total += rows.sum(axis=0)
            squares += np.einsum("ij,ij->j", rows, rows)
            unit[start : start + ROWS_PER_BLOCK] = rows
        centre = total / n
        scaler = cls(mean, centre, np.sqrt(np.maximum(squares / n - centre**2, 0.0)) + 1e-12)
        return scaler, scaler._scaled(unit)

    def _scaled(self, unit: np.ndarray) -> np.ndarray:
        unit -= self.centre
        unit /= self.scale
        return unit

    def __call__(self, features: np.ndarray) -> np.ndarray:
        unit = np.empty(features.shape)
        for start in range(0, len(features), ROWS_PER_BLOCK):
            unit[start : start + ROWS_PER_BLOCK] = normalise(
                features[start : start + ROWS_PER_BLOCK] - self.mean
            )
        return self._scaled(unit)


def softmax_loss_gradients(
    x: np.ndarray, y: np.ndarray, points: list[tuple[np.ndarray, float]]
) -> list[tuple[float, np.ndarray]]:
    """scikit-learn's objective ``mean_i -log p(y_i | x_i) + l2/2 ||W||²`` and its gradient at
    each ``(params, l2)`` of ``points``, with one pair of products with ``x`` for all of them
    (the whole cost; one wide product runs faster per column than several narrow ones).

    ``params`` is ``[W; b]`` ``[d + 1, k]`` flattened (scikit-learn's order), with ``k`` free
    logit columns (``k`` = 1 for two classes: the other logit is 0, scikit-learn's binomial
    loss). Everything is float64: float32 products would be twice as fast, but their rounding
    changes the L-BFGS path and so where it stops (up to 1e-2 in probability on a 64-d fixture).
    """
    n, d = x.shape
    ws = [params.reshape(d + 1, -1) for params, _ in points]
    ends = np.cumsum([w.shape[1] for w in ws])
    # (W.T @ x.T).T and (R.T @ x).T: faster than x @ W and x.T @ R (OpenBLAS, narrow W, R)
    all_logits = np.split((np.hstack([w[:d] for w in ws]).T @ x.T).T, ends[:-1], axis=1)
    rows = np.arange(n)
    losses, residuals = [], []
    for w, logits in zip(ws, all_logits, strict=True):
        logits = logits + w[d]
        if w.shape[1] == 1:
            logits = np.hstack([np.zeros_like(logits), logits])
        top = logits.max(axis=1, keepdims=True)
        exp = np.exp(logits - top)
        total = exp.sum(axis=1, keepdims=True)
        losses.append(float(np.mean(np.log(total[:, 0]) + top[:, 0] - logits[rows, y])))
        residual = exp / total  # d loss / d logits = (p(c | x) - [c == y]) / n
        residual[rows, y] -= 1.0
        residual /= n
        residuals.append(residual[:, 1:] if w.shape[1] == 1 else residual)
    products = np.split((np.hstack(residuals).T @ x).T, ends[:-1], axis=1)
    out = []
    for w, (_, l2), loss, residual, product in zip(
        ws, points, losses, residuals, products, strict=True
    ):
        grad = np.empty_like(w)
        grad[:d] = product + l2 * w[:d]
        grad[d] = residual.sum(axis=0)
        out.append((loss + 0.5 * l2 * float(np.sum(w[:d] ** 2)), grad.ravel()))
    return out


class Lockstep:
    """One L-BFGS-B run per ``l2`` on the same ``x``, each in its own thread, in lockstep.

    Each run is exactly the run it would be alone (it sees only its own evaluations); only the
    products are shared: an evaluation waits until every unfinished run has asked for one, and
    :func:`softmax_loss_gradients` computes them together. Which runs share a round depends
    only on how many evaluations each needs, so the result is deterministic.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, free: int, l2s: list[float]) -> None:
        self.x, self.y, self.free, self.l2s = x, y, free, l2s
        self.cond = threading.Condition()
        self.running = set(range(len(l2s)))
        self.asked: dict[int, np.ndarray] = {}
        self.answers: dict[int, tuple[float, np.ndarray] | BaseException] = {}
        self.results: dict[int, scipy.optimize.OptimizeResult] = {}
        self.errors: dict[int, BaseException] = {}

    def run(self, max_iter: int, tol: float) -> list[scipy.optimize.OptimizeResult]:
        threads = [
            threading.Thread(target=self._minimize, args=(run, max_iter, tol))
            for run in range(len(self.l2s))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.errors:
            raise self.errors[min(self.errors)]
        return [self.results[run] for run in range(len(self.l2s))]

    def _minimize(self, run: int, max_iter: int, tol: float) -> None:
        try:
            self.results[run] = scipy.optimize.minimize(
                self._evaluate,
                np.zeros((self.x.shape[1] + 1) * self.free),
                args=(run,),
                method="L-BFGS-B",
                jac=True,
                options={"maxiter": max_iter, "maxls": 50, "gtol": tol, "ftol": 64 * EPS},
            )
        except BaseException as err:  # re-raised by run(), in the caller's thread
            self.errors[run] = err
        finally:
            with self.cond:
                self.running.discard(run)
                self._round()

    def _evaluate(self, params: np.ndarray, run: int) -> tuple[float, np.ndarray]:
        with self.cond:
            self.asked[run] = params
            self._round()
            self.cond.wait_for(lambda: run in self.answers)
            answer = self.answers.pop(run)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _round(self) -> None:
        """Answer every asked evaluation once every running run has asked (lock held)."""
        if not self.asked or self.asked.keys() != self.running:
            return
        runs = sorted(self.asked)
        answers: list[tuple[float, np.ndarray] | BaseException]
        try:
            points = [(self.asked[run], self.l2s[run]) for run in runs]
            answers = list(softmax_loss_gradients(self.x, self.y, points))
        except Exception as err:  # every waiting run raises it
            answers = [err] * len(runs)
        self.answers.update(zip(runs, answers, strict=True))
        self.asked.clear()
        self.cond.notify_all()


class SeenClassifier:
    """Multinomial logistic regression over the classes present in ``labels``, fitted as
    scikit-learn's ``LogisticRegression(C=c, max_iter=300)`` (lbfgs, L2, unpenalised intercept)
    fits it: the same objective, L-BFGS-B from zero with the same stopping rule (largest
    gradient entry <= 1e-4, or max_iter). :meth:`fit_grid` fits every ``C`` of a grid on one
    standardisation of the features, the runs in lockstep (:class:`Lockstep`).
    """

    MAX_ITER = 300
    TOL = 1e-4
    #: What the runs in lockstep may hold together: L-BFGS-B's history and one round's logits,
    #: probabilities and residuals (:meth:`run_bytes`). The package's 2 GiB address-space limit
    #: also holds the features, the libraries and each thread's stack: on SUN (645 classes,
    #: ~0.5 GB a run) the runs go one at a time, on AWA2 (40 classes, ~50 MB) all at once.
    LOCKSTEP_BYTES = 640 * 2**20

    def __init__(
        self,
        scaler: Standardiser,
        classes: np.ndarray,
        c: float,
        fitted: scipy.optimize.OptimizeResult,
    ) -> None:
        self.scaler, self.classes, self.c, self.n_iter = scaler, classes, c, int(fitted.nit)
        params = fitted.x.reshape(len(scaler.mean) + 1, -1)
        self.coef, self.intercept = params[:-1], params[-1]

    @classmethod
    def fit_grid(
        cls, features: np.ndarray, labels: np.ndarray, c_grid: tuple[float, ...]
    ) -> list[SeenClassifier]:
        """One classifier per ``C`` of ``c_grid``, all on one standardisation of ``features``.

        Each run starts from zero, never warm-started from a neighbouring ``C``: these fits
        stop at the gradient tolerance well before the optimum, so the point reached depends
        on the start (README).
        """
        classes, y = np.unique(labels, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"labels: the seen-class classifier needs images of at least 2 classes,"
                f" got {len(classes)} ({classes.tolist()})"
            )
        scaler, x = Standardiser.fit(features)
        free = len(classes) if len(classes) > 2 else 1
        l2s = [1.0 / (c * len(y)) for c in c_grid]
        # Waves of as many runs as LOCKSTEP_BYTES holds; each run is the same in any wave.
        wave = max(1, cls.LOCKSTEP_BYTES // cls.run_bytes(*x.shape, free))
        fits = []
        for start in range(0, len(l2s), wave):
            fits += Lockstep(x, y, free, l2s[start : start + wave]).run(cls.MAX_ITER, cls.TOL)
        return [cls(scaler, classes, c, fitted) for c, fitted in zip(c_grid, fits, strict=True)]

    @staticmethod
    def run_bytes(n: int, d: int, free: int) -> int:
        """The memory of one run in lockstep on ``n`` images of ``d`` features with ``free``
        logit columns: L-BFGS-B's work arrays (``(2 m + 5) p`` floats for ``p`` parameters,
        history ``m`` = 10) and five ``n x free`` float64 arrays per round."""
        params = (d + 1) * free
        return 8 * (25 * params + 5 * n * free)

    def state(self) -> dict[str, np.ndarray]:
        """What :meth:`proba` needs, as named arrays (the package's ``save``)."""
        return {
            "scaler_mean": self.scaler.mean,
            "scaler_centre": self.scaler.centre,
            "scaler_scale": self.scaler.scale,
            "classes": self.classes,
            "coef": self.coef,
            "intercept": self.intercept,
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> SeenClassifier:
        """The classifier :meth:`state` describes, ready to :meth:`proba` (not to refit)."""
        clf = cls.__new__(cls)
        clf.scaler = Standardiser(
            state["scaler_mean"], state["scaler_centre"], state["scaler_scale"]
        )
        clf.classes, clf.coef, clf.intercept = state["classes"], state["coef"], state["intercept"]
        return clf

    def log_proba(self, features: np.ndarray) -> np.ndarray:
        """``log p(y | x)`` ``[n, len(self.classes)]``, columns in ``self.classes`` order."""
        logits = self.scaler(features) @ self.coef + self.intercept
        if logits.shape[1] == 1:
            logits = np.hstack([np.zeros_like(logits), logits])
        top = logits.max(axis=1, keepdims=True)
        return logits - (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)

    def proba(self, features: np.ndarray) -> np.ndarray:
        """``p(y | x)`` ``[n, len(self.classes)]``, columns in ``self.classes`` order."""
        return np.exp(self.log_proba(features))


# <<< copied block "seen-classifier"


def top_classes(proba: np.ndarray, t: int) -> np.ndarray:
    """Column indices of each row's ``t`` most probable seen classes, most probable first."""
    return np.argsort(-proba, axis=1, kind="stable")[:, :t]


def conse_scores(
    proba: np.ndarray, top: np.ndarray, seen_emb: np.ndarray, cand_emb: np.ndarray, t: int
) -> np.ndarray:
    """Cosine between the top-``t`` convex combination and each candidate embedding.

    ``top`` is :func:`top_classes` of ``proba`` for some ``t`` or more: every ``T`` of the grid
    takes its prefix, so the classes are ranked once.
    """
    rows = np.arange(len(proba))[:, None]
    top = top[:, :t]
    weights = np.zeros_like(proba)
    weights[rows, top] = proba[rows, top]
    weights /= weights.sum(axis=1, keepdims=True)
    return normalise(weights @ seen_emb) @ cand_emb.T


class ConSE:
    def __init__(self, c_grid: tuple[float, ...] = C_GRID, t_grid: tuple[int, ...] = T_GRID):
        self.c_grid = tuple(sorted(c_grid))
        self.t_grid = tuple(sorted(t_grid))

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        emb = normalise(task.embedding)
        # Per C: the classifier's classes, its validation probabilities and their ranking.
        fitted: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}

        def evaluate(points: list[tuple[Any, ...]]) -> list[Any]:
            """Per-class top-1 on the validation classes of each (C, T)."""
            cs = [c for c in dict.fromkeys(c for c, _ in points) if c not in fitted]
            if cs:
                grid = SeenClassifier.fit_grid(task.train_features, task.train_labels, tuple(cs))
                for clf in grid:
                    fitted[clf.c] = clf.classes, clf.proba(task.val_features), None
            merits = []
            for c, t in points:
                classes, proba, top = fitted[c]
                if top is None or top.shape[1] < min(t, proba.shape[1]):
                    # ranked once per C (per round), as far as its largest T
                    top = top_classes(proba, max(u for other, u in points if other == c))
                    fitted[c] = classes, proba, top
                scores = conse_scores(proba, top, emb[classes], emb[task.val_classes], t)
                acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
                merits.append((acc, -c, t))  # ties: the smaller C, then the larger T
            return merits

        n_classes = len(np.unique(task.train_labels))
        axes = (
            Axis("C", self.c_grid),
            Axis("T", self.t_grid, lowest=1, highest=n_classes, integer=True),
        )
        search = grid_search(axes, evaluate)
        self.c_, self.t_ = search.point
        self.val_accuracy_ = search.merit[0]
        self.grids_ = search.grids
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"C": self.c_, "T": self.t_, **search.edge_flags()}
        self.clf_ = SeenClassifier.fit_grid(
            np.concatenate([task.train_features, task.val_features]),
            np.concatenate([task.train_labels, task.val_labels]),
            (self.c_,),
        )[0]
        self.embedding_ = emb

    def save(self, directory: Path) -> None:
        arrays = {**self.clf_.state(), "t": np.asarray(self.t_), "embedding": self.embedding_}
        write_state(directory, arrays)

    @classmethod
    def load(cls, directory: Path) -> ConSE:
        state, model = read_state(directory), cls()
        model.clf_ = SeenClassifier.from_state(state)
        model.t_, model.embedding_ = int(state["t"]), state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        proba = self.clf_.proba(features)
        seen_emb = self.embedding_[self.clf_.classes]
        top = top_classes(proba, self.t_)
        scores = conse_scores(proba, top, seen_emb, self.embedding_[candidates], self.t_)
        return scores.astype(np.float32)
