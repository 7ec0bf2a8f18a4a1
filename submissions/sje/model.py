"""SJE: "Evaluation of Output Embeddings for Fine-Grained Image Classification" (Akata, Reed,
Walter, Lee, Schiele, CVPR 2015).

Structured joint embedding: bilinear ``F(x, c) = theta(x)^T W phi(c)`` (features standardised on
the fitting images, class embeddings L2-normalised) trained with the structured SVM loss on the
most violating class, ``max(0, max_j [Delta(y, j) + F(x, j)] - F(x, y))`` with
``Delta(y, j) = 1`` for ``j != y`` and 0 otherwise. Learning rate and epochs are chosen on the
validation classes, then W is refitted on training + validation.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
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


LEARNING_RATES = (1e-3, 1e-2)
EPOCHS = (10, 30)
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
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _normalise(embeddings: np.ndarray) -> np.ndarray:
    e = embeddings.astype(np.float32)
    return e / (np.linalg.norm(e, axis=1, keepdims=True) + 1e-12)


class _Bilinear:
    """F(x, c) = theta(x)^T W phi(c), W learned with Adam on minibatches of the fitting images."""

    def __init__(
        self,
        learning_rates: tuple[float, ...] = LEARNING_RATES,
        epochs: tuple[int, ...] = EPOCHS,
    ) -> None:
        self.learning_rates = learning_rates
        self.epochs = tuple(sorted(epochs))

    @staticmethod
    def loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _train(
        self,
        x: np.ndarray,
        y: np.ndarray,
        emb: np.ndarray,
        lr: float,
        seed: int,
        checkpoints: tuple[int, ...],
    ) -> dict[int, np.ndarray]:
        """Train W; return a copy of W after each epoch count in ``checkpoints``."""
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
        out: dict[int, np.ndarray] = {}
        for epoch in range(1, max(checkpoints) + 1):
            order = torch.randperm(len(x), generator=gen).to(device)
            for start in range(0, len(x), BATCH):
                idx = order[start : start + BATCH]
                scores = xt[idx] @ w @ et.T
                loss = self.loss(scores, yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if epoch in checkpoints:
                out[epoch] = w.detach().cpu().numpy().copy()
        return out

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = _normalise(task.embedding)
        train_cls, val_cls = task.train_classes, task.val_classes
        mean = task.train_features.mean(axis=0)
        std = task.train_features.std(axis=0) + 1e-6
        x_train = ((task.train_features - mean) / std).astype(np.float32)
        x_val = ((task.val_features - mean) / std).astype(np.float32)
        tr_pos = np.searchsorted(train_cls, task.train_labels)
        results = []
        for lr in self.learning_rates:
            ws = self._train(x_train, tr_pos, emb[train_cls], lr, task.seed, self.epochs)
            for epochs, w in ws.items():
                scores = x_val @ w @ emb[val_cls].T
                acc = per_class_top1(scores, task.val_labels, classes=val_cls)
                results.append((acc, -epochs, -lr))  # ties: fewer epochs, smaller lr
        best = max(results)
        self.val_accuracy_, self.epochs_, self.lr_ = best[0], -best[1], -best[2]
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {"epochs": self.epochs_, "learning_rate": self.lr_}
        seen = np.union1d(train_cls, val_cls)
        x = np.concatenate([task.train_features, task.val_features])
        y = np.searchsorted(seen, np.concatenate([task.train_labels, task.val_labels]))
        self.mean_ = x.mean(axis=0)
        self.std_ = x.std(axis=0) + 1e-6
        xs = ((x - self.mean_) / self.std_).astype(np.float32)
        self.w_ = self._train(xs, y, emb[seen], self.lr_, task.seed, (self.epochs_,))[self.epochs_]
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
        true = scores.gather(1, labels[:, None])
        delta = torch.ones_like(scores).scatter(1, labels[:, None], 0.0)
        # j = y contributes Delta = 0, so the max is >= F(x, y) and the hinge is >= 0.
        return ((delta + scores).max(dim=1).values - true[:, 0]).clamp(min=0.0).mean()
