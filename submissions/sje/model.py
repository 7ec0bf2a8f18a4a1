"""SJE: "Evaluation of Output Embeddings for Fine-Grained Image Classification" (Akata, Reed,
Walter, Lee, Schiele, CVPR 2015).

Structured joint embedding: bilinear ``F(x, c) = theta(x)^T W phi(c)`` (features standardised on
the fitting images, class embeddings L2-normalised) trained with the structured SVM loss on the
most violating class, ``max(0, max_j [Delta(y, j) + F(x, j)] - F(x, y))`` with
``Delta(y, j) = 1`` for ``j != y`` and 0 otherwise. Learning rate and epochs are chosen on the
validation classes, then W is refitted on training + validation. A choice at an end of its grid
grows that grid past it (:func:`grid_search`: learning rates 10x apart, up to 3 per end; epochs
3x apart, down to 1 and up to 90); one still at an end is recorded
(``"learning_rate_at_grid_edge": true`` or ``"epochs_at_grid_edge": true``).
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    # Imported where training needs it: a prediction pass runs numpy only and does not pay
    # torch's import (about 2 s of CPU in each fresh process).
    import torch


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


LEARNING_RATES = (1e-3, 1e-2)
EPOCHS = (10, 30)
#: Values added below and above the epoch grid at most (below: 3, then 1, then the range ends;
#: above: 90, as one more would cost 270 epochs per learning rate).
EPOCH_EXTENSIONS = (MAX_EXTENSIONS, 1)
BATCH = 256


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


# >>> copied block "bilinear": keep byte-identical (tests/test_reference_packages.py)
def _setup(seed: int) -> torch.device:
    """Bit-identical runs: fixed seed, deterministic kernels, one CPU thread. The device is the
    GPU when the runner shows one (its ``CUDA_VISIBLE_DEVICES``), else the CPU; deterministic
    cuBLAS needs its workspace setting before the first GPU matrix product."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _normalise(embeddings: np.ndarray) -> np.ndarray:
    e = embeddings.astype(np.float32)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-12)


class _Runs:
    """The training runs of one fit, one per learning rate, each continued for as many epochs as
    the grid asks: W after ``e`` epochs is the same whether its run stopped there or went on
    (the same seed, the same steps), so a grown epoch grid costs only the epochs it adds. W at
    fewer epochs than a run has passed comes from a new run of that learning rate."""

    def __init__(self, train: Callable[[float], Iterator[torch.Tensor]]) -> None:
        self.train = train
        self.runs: dict[float, tuple[Iterator[torch.Tensor], list[int]]] = {}

    def weights(self, lr: float, epochs: list[int]) -> dict[int, np.ndarray]:
        """A copy of W after each epoch count of ``epochs``, trained at ``lr``."""
        out: dict[int, np.ndarray] = {}
        run = self.runs.get(lr)
        passed = run[1][0] if run is not None else 0
        early = sorted(e for e in set(epochs) if e <= passed)
        if early:
            self._advance(self.train(lr), [0], early, out)
        late = sorted(e for e in set(epochs) if e > passed)
        if late:
            run = self.runs.setdefault(lr, (self.train(lr), [0]))
            self._advance(*run, late, out)
        return out

    @staticmethod
    def _advance(
        run: Iterator[torch.Tensor], position: list[int], wanted: list[int], out: dict
    ) -> None:
        for epochs in wanted:
            while position[0] < epochs:
                w = next(run)
                position[0] += 1
            out[epochs] = w.cpu().numpy().copy()


class _Bilinear:
    """F(x, c) = theta(x)^T W phi(c), W learned with Adam on minibatches of the fitting images."""

    def __init__(
        self,
        learning_rates: tuple[float, ...] = LEARNING_RATES,
        epochs: tuple[int, ...] = EPOCHS,
    ) -> None:
        self.learning_rates = tuple(sorted(learning_rates))
        self.epochs = tuple(sorted(epochs))

    @staticmethod
    def loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _train(
        self, x: np.ndarray, y: np.ndarray, emb: np.ndarray, lr: float, seed: int
    ) -> Iterator[torch.Tensor]:
        """W after each epoch (1, 2, ...) of one training run, for as long as it is asked."""
        import torch

        device = _setup(seed)
        gen = torch.Generator().manual_seed(seed)
        xt = torch.from_numpy(x).to(device)
        yt = torch.from_numpy(y.astype(np.int64)).to(device)
        et = torch.from_numpy(emb).to(device)
        # Drawn on the CPU (``gen`` is a CPU generator): the same start on every device.
        w = torch.zeros(x.shape[1], emb.shape[1])
        torch.nn.init.normal_(w, std=1.0 / np.sqrt(x.shape[1]), generator=gen)
        w = w.to(device).requires_grad_(True)
        opt = torch.optim.Adam([w], lr=lr)
        while True:
            order = torch.randperm(len(x), generator=gen).to(device)
            for start in range(0, len(x), BATCH):
                idx = order[start : start + BATCH]
                scores = xt[idx] @ w @ et.T
                loss = self.loss(scores, yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            yield w.detach()

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        emb = _normalise(task.embedding)
        train_cls, val_cls = task.train_classes, task.val_classes
        mean = task.train_features.mean(axis=0)
        std = task.train_features.std(axis=0) + 1e-6
        x_train = ((task.train_features - mean) / std).astype(np.float32)
        x_val = ((task.val_features - mean) / std).astype(np.float32)
        tr_pos = np.searchsorted(train_cls, task.train_labels)
        runs = _Runs(lambda lr: self._train(x_train, tr_pos, emb[train_cls], lr, task.seed))

        def evaluate(points: list[tuple[Any, ...]]) -> list[Any]:
            """Per-class top-1 on the validation classes of each (learning rate, epochs)."""
            weights = {
                lr: runs.weights(lr, [epochs for rate, epochs in points if rate == lr])
                for lr in dict.fromkeys(lr for lr, _ in points)
            }
            merits = []
            for lr, epochs in points:
                scores = x_val @ weights[lr][epochs] @ emb[val_cls].T
                # A run that diverged (at a grown learning rate) ranks below any other.
                finite = np.isfinite(scores).all()
                acc = per_class_top1(scores, task.val_labels, classes=val_cls) if finite else -1.0
                merits.append((acc, -epochs, -lr))  # ties: fewer epochs, smaller lr
            return merits

        axes = (
            Axis("learning_rate", self.learning_rates),
            Axis("epochs", self.epochs, lowest=1, integer=True, extensions=EPOCH_EXTENSIONS),
        )
        search = grid_search(axes, evaluate)
        self.lr_, self.epochs_ = search.point
        self.val_accuracy_ = search.merit[0]
        self.grids_ = search.grids
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {
            "epochs": self.epochs_,
            "learning_rate": self.lr_,
            **search.edge_flags(),
        }
        seen = np.union1d(train_cls, val_cls)
        x = np.concatenate([task.train_features, task.val_features])
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        self.mean_ = x.mean(axis=0)
        self.std_ = x.std(axis=0) + 1e-6
        xs = ((x - self.mean_) / self.std_).astype(np.float32)
        refit = _Runs(lambda lr: self._train(xs, y, emb[seen], lr, task.seed))
        self.w_ = refit.weights(self.lr_, [self.epochs_])[self.epochs_]
        self.embedding_ = emb

    def save(self, directory: Path) -> None:
        arrays = {"mean": self.mean_, "std": self.std_, "w": self.w_, "embedding": self.embedding_}
        write_state(directory, arrays)

    @classmethod
    def load(cls, directory: Path) -> _Bilinear:
        state, model = read_state(directory), cls()
        model.mean_, model.std_, model.w_ = state["mean"], state["std"], state["w"]
        model.embedding_ = state["embedding"]
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        x = ((features - self.mean_) / self.std_).astype(np.float32)
        return (x @ self.w_ @ self.embedding_[candidates].T).astype(np.float32)


# <<< copied block "bilinear"


class SJE(_Bilinear):
    @staticmethod
    def loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Structured hinge on the most violating class, averaged over images."""
        import torch

        true = scores.gather(1, labels[:, None])
        delta = torch.ones_like(scores).scatter(1, labels[:, None], 0.0)
        # j = y contributes Delta = 0, so the max is >= F(x, y) and the hinge is >= 0.
        return ((delta + scores).max(dim=1).values - true[:, 0]).clamp(min=0.0).mean()
