"""CLIP zero-shot classification on frozen features (Radford et al., ICML 2021, Sec. 3.1.2).

A vision-language model scores an image against each class by the cosine between its image
embedding and the class's text embedding (the text tower applied to prompts such as "a photo of
a {class}.", averaged over the prompt templates and L2-normalised), times the model's learned
logit scale:

    score(x, c) = logit_scale * cos(x, t_c)

Nothing is learned here: ``fit`` reads no training image; it keeps the benchmark's clip-text
class embeddings (``declarations.class_embedding: clip-text``: the TrainTask holds only those,
its ``default_embedding`` the one used), L2-normalised. The image features must be the same
CLIP model's image embeddings: an image and a text tower of different models share no space.

``logit_scale`` is CLIP's learned temperature, exp(t) with t initialised to log(1 / 0.07) and
clipped at 100 in training (the paper, Sec. 2.5); the OpenAI and open_clip releases end at the
clip, 100 (= 1 / 0.01). Read yours as ``model.logit_scale.exp()`` and pass it when it differs.
It moves no score of the harness (every metric is rank-based or fits its own scale or
temperature on validation); with it the prediction files are CLIP's own logits.
"""

from __future__ import annotations

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


class CLIPZeroShot:
    """``logit_scale * cos(x, t_c)`` over the candidates: see the module docstring."""

    def __init__(self, logit_scale: float = LOGIT_SCALE) -> None:
        self.logit_scale = check_logit_scale(logit_scale)

    def fit(self, task) -> None:  # task: harness.bundles.TrainTask
        # The prompt embeddings of every class, normalised once; no image is read (only the
        # width of the training features, to refuse embeddings of another model early).
        self.text_ = unit_rows(task.embedding)
        check_same_width(task.train_features.shape[1], self.text_)
        self.template_set_ = task.default_embedding
        # Shown on the submission page (harness.hyperparameters): nothing was chosen.
        self.hyperparameters_ = {
            "logit_scale": self.logit_scale,
            "template_set": self.template_set_,
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
    def load(cls, directory: Path) -> CLIPZeroShot:
        state = read_state(directory)
        model = cls(logit_scale=float(state["logit_scale"]))
        model.text_, model.template_set_ = state["text"], str(state["template_set"])
        return model

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return clip_logits(features, self.text_[candidates], self.logit_scale)
