"""CLIP zero-shot with the prompt-template set chosen on the validation classes.

The benchmark may carry several clip-text class embeddings of one CLIP model, one per set of
prompt templates (``photo``: "a photo of a {}."; ``imagenet-80``: the 80 ImageNet templates of
Radford et al., ICML 2021, averaged per class). ``fit`` scores the validation images against
the validation classes with each set, exactly as CLIP zero-shot scores test images
(``logit_scale * cos(x, t_c)``), and keeps the set of the highest per-class top-1 (ties: the
benchmark's default embedding, then the first listed); ``predict`` is CLIP zero-shot with it.

Validation classes only choose between given sets: no weight is fitted to any feature (no
linear probe, no prompt tuning), no training image is read, no test class's embedding decides.
Which set won, its validation accuracy and how many sets were compared are in
``hyperparameters_``. ``logit_scale`` is CLIP's (clip-zero-shot's model.py says where it comes
from); it changes no choice and no score of the harness.
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


# >>> copied block "clip-logits": keep byte-identical (tests/test_reference_packages.py)
#: CLIP's logit scale as the OpenAI and open_clip releases ship it: exp(logit_scale) = 100, the
#: clip its training puts on the learned temperature (Radford et al. 2021, Sec. 2.5).
LOGIT_SCALE = 100.0


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x`` in float64, each row divided by its L2 norm (a row of zeros stays zeros: its
    cosines are 0, never NaN)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    return x / np.where(norms > 0.0, norms, 1.0)


def check_same_width(feature_dim: int, text: np.ndarray) -> None:
    """Refuse image features and class text embeddings of different widths (ValueError): they
    cannot be one CLIP model's, whose two towers share one embedding space."""
    if feature_dim != text.shape[1]:
        raise ValueError(
            f"features: {feature_dim}-d image features, but the clip-text class embedding is"
            f" {text.shape[1]}-d; image and text embeddings must come from one CLIP model"
        )


def clip_logits(features: np.ndarray, unit_text: np.ndarray, logit_scale: float) -> np.ndarray:
    """CLIP's zero-shot logits ``logit_scale * cos(x_i, t_c)`` [n, C] (float32) of image
    ``features`` [n, d] against the L2-normalised class text embeddings ``unit_text`` [C, d]."""
    check_same_width(features.shape[1], unit_text)
    return (logit_scale * (unit_rows(features) @ unit_text.T)).astype(np.float32)


def check_logit_scale(value: float) -> float:
    """``value`` as a float if it is a finite positive number (a ValueError otherwise)."""
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"logit_scale: expected a finite positive number, got {value!r}")
    return float(value)


# <<< copied block "clip-logits"


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


class CLIPTemplateSelection:
    """CLIP zero-shot with the template set of the best validation top-1 (module docstring)."""

    def __init__(self, logit_scale: float = LOGIT_SCALE) -> None:
        self.logit_scale = check_logit_scale(logit_scale)

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        # Every clip-text embedding of the benchmark (the declaration gives the TrainTask those
        # only), in the spec's order; the validation classes are the only candidates.
        listed = list(task.class_embeddings)
        val_cls = task.val_classes
        self.val_accuracies_ = {}
        for name in listed:
            text = unit_rows(task.class_embeddings[name])
            scores = clip_logits(task.val_features, text[val_cls], self.logit_scale)
            self.val_accuracies_[name] = per_class_top1(scores, task.val_labels, classes=val_cls)

        def merit(name: str) -> tuple[float, bool, int]:
            return (self.val_accuracies_[name], name == task.default_embedding, -listed.index(name))

        self.template_set_ = max(listed, key=merit)
        self.text_ = unit_rows(task.class_embeddings[self.template_set_])
        # Shown on the submission page (harness.hyperparameters): what validation chose.
        self.hyperparameters_ = {
            "template_set": self.template_set_,
            "val_accuracy": self.val_accuracies_[self.template_set_],
            "template_sets_compared": len(listed),
            "logit_scale": self.logit_scale,
        }

    def save(self, directory: Path) -> None:
        write_state(
            directory,
            {
                "text": self.text_,
                "logit_scale": np.asarray(self.logit_scale),
                "template_set": np.asarray(self.template_set_),
            },
        )

    @classmethod
    def load(cls, directory: Path) -> CLIPTemplateSelection:
        state = read_state(directory)
        model = cls(logit_scale=float(state["logit_scale"]))
        model.text_, model.template_set_ = state["text"], str(state["template_set"])
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return clip_logits(features, self.text_[candidates], self.logit_scale)
