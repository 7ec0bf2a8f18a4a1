"""DAP: direct attribute prediction (Lampert, Nickisch & Harmeling, CVPR 2009; TPAMI 2014).

Choices (the benchmark's class embedding plays the role of the attribute table):

* **Binary attributes.** Continuous attributes are binarised at their mean over the classes
  being fitted (training classes while tuning, training + validation classes for the final
  fit); every class, seen or not, is binarised with those same thresholds. Attributes that are
  constant over the fitted classes carry no information and are dropped.
* **Attribute classifiers.** One L2 logistic regression per attribute, trained on every fitting
  image with the binarised attribute of its class as the label: scikit-learn's
  ``LogisticRegression(C, max_iter=200)`` fit (lbfgs), reproduced run for run. Features are
  centred on the mean of the fitting images and L2-normalised per image, then scaled to unit
  variance per dimension (statistics from fitting images only).
* **How it is computed (issue 15).** Until 602e80c each (attribute, ``C``) was its own
  scikit-learn fit, a matrix-vector product with the features per evaluation (582 s on
  AWA2-size). Now every fit is the same L-BFGS-B run, from zero with scikit-learn's objective
  (mean log-loss + ``||w||² / (2 C n)``, intercept free) and stopping rule (largest gradient
  entry <= 1e-4, or 200 iterations), but the runs go in lockstep (:func:`fit_in_lockstep`):
  each round evaluates up to ``WAVE`` runs with one wide product ``x @ W`` and one
  ``R.T @ x``; the ``C`` grid shares one standardisation. No warm start and no tighter
  tolerance: these fits stop at the tolerance well before the optimum (up to 3e-2 from it in
  probability on AWA2-size), so a different start or solver would change the result.
  Measured against the previous code (tests/test_dap_method.py): the same iterations per run,
  the same chosen ``C``, attribute probabilities within 3e-8, the same top-1 and H.
* **Class score** (Lampert et al. 2014, Eq. 2 with a uniform class prior):

      score(x, c) = sum_m [ log p(a_m = a_m^c | x) - log p(a_m = a_m^c) ]

  where ``p(a_m)`` is the attribute prior, the empirical mean of the binarised attribute over
  the fitted classes, and probabilities are clipped to ``[1e-6, 1 - 1e-6]``.
* **Hyperparameter.** ``C`` in {1e-4, 1e-3, 0.01, 0.1, 1} (shared by all attributes) is chosen by
  per-class top-1 on the validation images with the validation classes as candidates, after
  fitting on the training classes only; ties go to the smaller ``C``. The chosen ``C`` is then
  refitted on training + validation images. A choice at an end of the grid grows it past that
  end (:func:`grid_search`: 10x apart, up to 3 values per end; each new ``C`` is one more set of
  attribute fits on the same standardisation); one still at an end is recorded
  (``"C_at_grid_edge": true`` in ``hyperparameters_``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import _lbfgsb


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


GRID = (0.0001, 0.001, 0.01, 0.1, 1.0)
EPS = 1e-6  # probability clipping
WAVE = 96  # L-BFGS-B runs in progress at once: each round's products have <= WAVE columns


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
    """Centre on the fitting mean, L2-normalise per image, scale each dimension to unit variance
    (statistics from the fitting images only); float64, as the scikit-learn fits had them."""

    def __init__(self, mean: np.ndarray, centre: np.ndarray, scale: np.ndarray) -> None:
        self.mean, self.centre, self.scale = mean, centre, scale

    @classmethod
    def fit(cls, *parts: np.ndarray) -> tuple[_Standardiser, np.ndarray]:
        """The standardiser of the images of ``parts`` (stacked) and those images standardised
        by it, computed in place in one float64 array: no other copy of the features (the
        sandbox caps the address space)."""
        x = np.empty((sum(len(part) for part in parts), parts[0].shape[1]))
        start = 0
        for part in parts:
            x[start : start + len(part)] = part
            start += len(part)
        mean = x.mean(axis=0)
        _unit(x, mean)
        centre = x.mean(axis=0)
        x -= centre
        scale = np.sqrt(np.einsum("ij,ij->j", x, x) / len(x)) + 1e-12  # x.std(0), no copy
        x /= scale
        return cls(mean, centre, scale), x

    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = _unit(features.astype(np.float64), self.mean)
        x -= self.centre
        x /= self.scale
        return x


def _unit(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``x`` centred on ``mean`` and L2-normalised per row, in place."""
    x -= mean
    x /= np.sqrt(np.einsum("ij,ij->i", x, x))[:, None] + 1e-12
    return x


def binary_loss_gradients(
    x: np.ndarray, targets: np.ndarray, points: list[tuple[np.ndarray, int, float]]
) -> list[tuple[float, np.ndarray]]:
    """scikit-learn's binary logistic objective and its gradient at each ``(params, m, l2)``.

    The objective of ``LogisticRegression(C)`` (lbfgs) as scikit-learn minimises it:
    ``mean_i [log(1 + exp(z_i)) - y_i z_i] + l2/2 ||w||²`` with ``z = x w + b``,
    ``y = targets[:, m]`` and ``l2 = 1 / (C n)`` (the same minimiser as
    ``C sum_i loss_i + ||w||²/2``; the intercept is not penalised). ``params`` is ``[w; b]``
    ``[d + 1]``. One pair of products with ``x`` serves every point (the whole cost: one wide
    product runs far faster per column than a matrix-vector product each). Everything is
    float64: float32 products are twice as fast, but their rounding changes the L-BFGS path and
    so where it stops.
    """
    n, d = x.shape
    w = np.stack([params for params, _, _ in points], axis=1)  # [d + 1, runs]
    m = [attribute for _, attribute, _ in points]
    # (W.T @ x.T).T and (R.T @ x).T: faster than x @ W and x.T @ R (OpenBLAS, narrow W, R)
    logits = (w[:d].T @ x.T).T + w[d]
    y = targets[:, m]
    # Overflow-free with one exp (np.logaddexp and np.exp of it cost as much as a product):
    # log(1 + exp(z)) = log1p(exp(-|z|)) + max(z, 0); sigmoid(z) = 1 / (1 + exp(-z)) for
    # z >= 0, exp(z) / (1 + exp(z)) otherwise.
    tail = np.exp(-np.abs(logits))
    losses = (np.log1p(tail) + np.maximum(logits, 0.0) - y * logits).sum(axis=0) / n
    residual = np.where(logits >= 0.0, 1.0, tail) / (1.0 + tail)
    # The labels are constant per class, so x.T @ y could be computed once; but subtracting
    # it from x.T @ sigmoid cancels digits near the optimum, and so changes the L-BFGS path.
    residual -= y
    residual /= n  # d mean-loss / d z
    products = (residual.T @ x).T  # [d, runs]
    grads = np.empty((len(points), d + 1))
    grads[:, :d] = products.T
    grads[:, d] = residual.sum(axis=0)
    out = []
    for k, (params, _, l2) in enumerate(points):
        grads[k, :d] += l2 * params[:d]
        penalty = 0.5 * l2 * float(params[:d] @ params[:d])
        out.append((float(losses[k]) + penalty, grads[k]))
    return out


class LbfgsbRun:
    """One L-BFGS-B minimisation from zero, driven step by step: scipy's own L-BFGS-B routine
    (``scipy.optimize._lbfgsb.setulb``, which asks its caller for each evaluation) under the
    loop of ``scipy.optimize.minimize(method="L-BFGS-B")`` (scipy 1.15+), so each run is
    exactly the run ``minimize`` makes; the caller evaluates many runs together.
    """

    MAXCOR = 10  # minimize's default, as scikit-learn leaves it
    MAXFUN = 15000

    def __init__(self, n: int, max_iter: int, tol: float) -> None:
        m = self.MAXCOR
        self.max_iter, self.tol = max_iter, tol
        self.x = np.zeros(n)
        self.f: float | np.ndarray = np.array(0.0)
        self.g = np.zeros(n)
        self.bound = np.zeros(n)  # no bounds (nbd = 0)
        self.nbd = np.zeros(n, np.int32)
        self.wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m)
        self.iwa = np.zeros(3 * n, np.int32)
        self.task = np.zeros(2, np.int32)
        self.ln_task = np.zeros(2, np.int32)
        self.lsave = np.zeros(4, np.int32)
        self.isave = np.zeros(44, np.int32)
        self.dsave = np.zeros(29)
        self.nit = self.nfev = 0
        self.wants_evaluation = self._advance()

    def tell(self, f: float, g: np.ndarray) -> None:
        """The objective and gradient at ``self.x``; runs on to the next evaluation or the end."""
        self.f, self.g = f, g
        self.nfev += 1
        self.wants_evaluation = self._advance()

    def _advance(self) -> bool:
        """True when the run asks for an evaluation at ``self.x``, False when it has stopped."""
        while True:
            self.g = self.g.astype(np.float64)
            _lbfgsb.setulb(
                self.MAXCOR, self.x, self.bound, self.bound, self.nbd, self.f, self.g,
                64.0, self.tol, self.wa, self.iwa, self.task, self.lsave, self.isave,
                self.dsave, 50, self.ln_task,
            )  # fmt: skip
            if self.task[0] == 3:  # FG: evaluate at x
                return True
            if self.task[0] != 1:  # converged, stopped or failed
                return False
            self.nit += 1  # NEW_X: an iteration done
            if self.nit >= self.max_iter:
                self.task[:] = 5, 504
            elif self.nfev > self.MAXFUN:
                self.task[:] = 5, 502


def fit_in_lockstep(
    x: np.ndarray, targets: np.ndarray, runs: list[tuple[int, float]], max_iter: int, tol: float
) -> list[LbfgsbRun]:
    """scikit-learn's lbfgs fit of each ``(attribute, l2)`` of ``runs``, the runs in lockstep.

    Each run is exactly scikit-learn's run for that attribute and ``C`` (from zero, its own
    evaluations only, scikit-learn's options: ``gtol = tol``, ``ftol = 64 eps``, ``maxls = 50``,
    ``max_iter``); only the products with ``x`` are shared: each round evaluates every run in
    progress with one :func:`binary_loss_gradients`. At most ``WAVE`` runs are in progress (their
    L-BFGS memory is 0.4 MB each at 2,048-d); a run that ends hands its place to the next, so
    the products stay wide. Which runs share a round depends only on how many evaluations each
    needs, so the result is deterministic.
    """
    d = x.shape[1]
    done: list[LbfgsbRun | None] = [None] * len(runs)
    pending = list(range(len(runs)))[::-1]
    active: dict[int, LbfgsbRun] = {}

    def start_next() -> None:
        while pending and len(active) < WAVE:
            k = pending.pop()
            run = LbfgsbRun(d + 1, max_iter, tol)
            if run.wants_evaluation:
                active[k] = run
            else:
                done[k] = run

    start_next()
    while active:
        keys = sorted(active)
        points = [(active[k].x.copy(), *runs[k]) for k in keys]
        for k, (f, g) in zip(keys, binary_loss_gradients(x, targets, points), strict=True):
            active[k].tell(f, g)
            if not active[k].wants_evaluation:
                done[k] = active.pop(k)
        start_next()
    assert all(run is not None for run in done)
    return done  # type: ignore[return-value]


class _AttributeModel:
    """Attribute classifiers fitted on the images of ``classes``, one set per ``C`` of ``cs``.

    ``features`` are the fitting images in parts (training, validation), ``labels`` theirs.

    Binarisation, the kept attributes, the prior and the standardisation depend on the fitted
    classes and images only, never on ``C``, so the whole grid shares them; every
    ``(attribute, C)`` logistic regression is then one run of :func:`fit_in_lockstep`.
    """

    MAX_ITER = 200  # scikit-learn's LogisticRegression(max_iter=200) of the previous code
    TOL = 1e-4  # its default tol

    def __init__(
        self,
        features: tuple[np.ndarray, ...],
        labels: np.ndarray,
        embedding: np.ndarray,
        classes: np.ndarray,
        cs: tuple[float, ...],
    ) -> None:
        self.threshold = embedding[classes].mean(axis=0)
        binary = embedding > self.threshold  # [n_classes, n_attributes]
        fitted = binary[classes]
        self.keep = np.flatnonzero(fitted.any(axis=0) & ~fitted.all(axis=0))
        self.binary = binary[:, self.keep]
        self.prior = np.clip(fitted[:, self.keep].mean(axis=0), EPS, 1 - EPS)
        self.standardise, x = _Standardiser.fit(*features)
        # An image's label is its class's binarised attribute: one row of the class table.
        targets = self.binary[labels].astype(np.float64)  # [n_images, n_kept]
        present = targets.any(axis=0) & ~targets.all(axis=0)
        if not present.all():
            m = int(self.keep[np.flatnonzero(~present)[0]])
            raise ValueError(
                f"labels: attribute {m} takes one value on every fitting image (classes"
                f" {classes.tolist()[:10]}... have no image?); a classifier needs both values"
            )
        # Largest C first: its runs take the most iterations, so they start first and the
        # short runs fill the last rounds.
        order = sorted(cs, reverse=True)
        kept = len(self.keep)
        runs = [(m, 1.0 / (c * len(labels))) for c in order for m in range(kept)]
        fits = fit_in_lockstep(x, targets, runs, self.MAX_ITER, self.TOL)
        d = x.shape[1]
        self.coefs: dict[float, np.ndarray] = {}
        self.intercepts: dict[float, np.ndarray] = {}
        self.n_iter: dict[float, list[int]] = {}  # L-BFGS-B iterations per kept attribute
        for i, c in enumerate(order):
            of_c = fits[i * kept : (i + 1) * kept]
            params = np.stack([fit.x for fit in of_c], axis=1).reshape(d + 1, kept)
            self.coefs[c], self.intercepts[c] = params[:d], params[d]
            self.n_iter[c] = [int(fit.nit) for fit in of_c]

    def state(self, c: float) -> dict[str, np.ndarray]:
        """What :meth:`scores` needs for ``C = c``, as named arrays (``DAP.save``)."""
        return {
            "mean": self.standardise.mean,
            "centre": self.standardise.centre,
            "scale": self.standardise.scale,
            "binary": self.binary,
            "prior": self.prior,
            "coef": self.coefs[c],
            "intercept": self.intercepts[c],
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], c: float) -> _AttributeModel:
        """The model :meth:`state` describes, ready to score with ``C = c`` (not to refit)."""
        model = cls.__new__(cls)
        model.standardise = _Standardiser(state["mean"], state["centre"], state["scale"])
        model.binary, model.prior = state["binary"], state["prior"]
        model.coefs, model.intercepts = {c: state["coef"]}, {c: state["intercept"]}
        return model

    def attribute_proba(self, features: np.ndarray, c: float) -> np.ndarray:
        """``p(a_m = 1 | x)`` ``[n, n_kept]`` from the classifiers of ``C = c``, clipped."""
        logits = self.standardise(features) @ self.coefs[c] + self.intercepts[c]
        return np.clip(1.0 / (1.0 + np.exp(-logits)), EPS, 1 - EPS)

    def scores(self, features: np.ndarray, candidates: np.ndarray, c: float) -> np.ndarray:
        p = self.attribute_proba(features, c)
        sig = self.binary[candidates].astype(np.float64)  # [n_candidates, n_kept]
        log_p1, log_p0 = np.log(p), np.log1p(-p)
        likelihood = log_p1 @ sig.T + log_p0 @ (1.0 - sig).T
        prior = sig @ np.log(self.prior) + (1.0 - sig) @ np.log1p(-self.prior)
        return likelihood - prior


class DAP:
    def __init__(self, grid: tuple[float, ...] = GRID) -> None:
        self.grid = tuple(sorted(grid))

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        emb = task.embedding.astype(np.float64)
        tuning: dict[float, _AttributeModel] = {}

        def evaluate(points: list[tuple[Any, ...]]) -> list[Any]:
            """Per-class top-1 on the validation classes of each (C,)."""
            cs = tuple(c for (c,) in points)
            model = _AttributeModel(
                (task.train_features,), task.train_labels, emb, task.train_classes, cs
            )
            tuning.update(dict.fromkeys(cs, model))
            merits = []
            for c in cs:
                scores = tuning[c].scores(task.val_features, task.val_classes, c)
                acc = per_class_top1(scores, task.val_labels, classes=task.val_classes)
                merits.append((acc, -c))  # ties: prefer the smaller C (stronger regularisation)
            return merits

        search = grid_search((Axis("C", self.grid),), evaluate)
        (self.c_,) = search.point
        self.val_accuracy_ = search.merit[0]
        self.grids_ = search.grids
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"C": self.c_, **search.edge_flags()}
        seen = np.union1d(task.train_classes, task.val_classes)
        self.model_ = _AttributeModel(
            (task.train_features, task.val_features),
            np.concatenate([task.train_labels, task.val_labels]),
            emb,
            seen,
            (self.c_,),
        )

    def save(self, directory: Path) -> None:
        write_state(directory, {**self.model_.state(self.c_), "c": np.asarray(self.c_)})

    @classmethod
    def load(cls, directory: Path) -> DAP:
        state, model = read_state(directory), cls()
        model.c_ = float(state["c"])
        model.model_ = _AttributeModel.from_state(state, model.c_)
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return self.model_.scores(features, candidates, self.c_).astype(np.float32)
