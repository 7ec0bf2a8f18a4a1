"""``zsl submission init``: write a working template package to start a submission from.

The template implements a simple, correct method — ridge regression from image features to the
class-embedding space, candidates scored by cosine similarity, the ridge strength chosen on the
validation classes only — so a new package validates and runs before its author changes a line.
``kind: model`` ships it as model code; ``kind: predictions`` ships the same model plus a generator
script that writes the prediction files from a task bundle.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from harness.errors import SubmissionError

Kind = Literal["model", "predictions"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

MODEL_PY = '''"""Ridge regression from features to class embeddings, scored by cosine similarity.

``fit`` centres and L2-normalises the features (mean of the fitting images only), then solves
``W = (X^T X + alpha I)^-1 X^T S[y]``, mapping each image onto its class's embedding. ``predict``
scores each candidate by the cosine between ``x W`` and the candidate's embedding.
``alpha`` is chosen on the validation classes (fit on training classes, per-class top-1 on
validation images among validation classes), then W is refitted on training + validation images.
Test classes are never looked at.
"""

from __future__ import annotations

import numpy as np

ALPHAS = tuple(10.0**p for p in range(-2, 4))


def _normalise(features: np.ndarray, mean: np.ndarray) -> np.ndarray:
    x = features.astype(np.float64) - mean
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)


def _unit(embeddings: np.ndarray) -> np.ndarray:
    s = embeddings.astype(np.float64)
    return s / (np.linalg.norm(s, axis=1, keepdims=True) + 1e-12)


def _ridge(x: np.ndarray, targets: np.ndarray, alpha: float) -> np.ndarray:
    return np.linalg.solve(x.T @ x + alpha * np.eye(x.shape[1]), x.T @ targets)


def _per_class_top1(scores: np.ndarray, labels: np.ndarray, classes: np.ndarray) -> float:
    predicted = classes[scores.argmax(axis=1)]
    return float(np.mean([np.mean(predicted[labels == c] == c) for c in np.unique(labels)]))


class RidgeToEmbedding:
    """The model protocol: ``fit(task)`` then ``predict(features, candidates) -> scores``."""

    def __init__(self, alphas: tuple[float, ...] = ALPHAS) -> None:
        self.alphas = alphas

    def fit(self, task) -> None:  # task: harness.tasks.TrainTask
        emb = _unit(task.embedding)
        mean = task.train_features.mean(axis=0)
        x_train = _normalise(task.train_features, mean)
        x_val = _normalise(task.val_features, mean)
        best = None
        for alpha in self.alphas:
            w = _ridge(x_train, emb[task.train_labels], alpha)
            scores = _unit(x_val @ w) @ emb[task.val_classes].T
            accuracy = _per_class_top1(scores, task.val_labels, task.val_classes)
            if best is None or accuracy > best[0]:  # ties keep the weaker regularisation
                best = (accuracy, alpha)
        assert best is not None
        self.val_accuracy_, self.alpha_ = best
        x = np.concatenate([task.train_features, task.val_features])
        y = np.concatenate([task.train_labels, task.val_labels])
        self.mean_ = x.mean(axis=0)
        self.w_ = _ridge(_normalise(x, self.mean_), emb[y], self.alpha_)
        self.embedding_ = emb

    def predict(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        projected = _unit(_normalise(features, self.mean_) @ self.w_)
        return (projected @ self.embedding_[candidates].T).astype(np.float32)
'''

GENERATOR_PY = '''"""Write this package's prediction files from a task bundle.

Usage: python make_predictions.py BUNDLE_DIR OUT_DIR  (run by `zsl submission generate`)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model import RidgeToEmbedding  # noqa: E402

from harness.submission.predictions import write_predictions  # noqa: E402
from harness.tasks import Bundle  # noqa: E402


def main(bundle_dir: str, out_dir: str) -> None:
    bundle = Bundle(Path(bundle_dir))
    # The calibration fit (training classes only) predicts the validation settings.
    for fit, settings in (("main", bundle.settings), ("calibration", bundle.validation_settings)):
        if not settings:
            continue
        model = RidgeToEmbedding()
        model.fit(bundle.train_task(fit=fit))
        for setting in settings:
            features, candidates = bundle.test(setting)
            write_predictions(
                Path(out_dir) / f"{setting}.safetensors",
                model.predict(features, candidates),
                benchmark_hash=bundle.info["benchmark_hash"],
                class_order_hash=bundle.info["class_order_hashes"][setting],
                setting=setting,
            )


if __name__ == "__main__":
    main(*sys.argv[1:3])
'''

MANIFEST_MODEL = """name: {name}
version: "0.1"
authors: [Your Name]
paper: null
description: >-
  Ridge regression from features to class embeddings, scored by cosine similarity; the ridge
  strength is chosen on the validation classes. Replace with your method.
kind: model
model:
  entrypoint: model:RidgeToEmbedding
resources:
  gpus: 0
  memory_gb: 2
  time_s: 600
declarations:
  class_embedding: default
  features: benchmark
  extra_data: false
  transductive: false
seed: 0
"""

MANIFEST_PREDICTIONS = """name: {name}
version: "0.1"
authors: [Your Name]
paper: null
description: >-
  Ridge regression from features to class embeddings, scored by cosine similarity; the ridge
  strength is chosen on the validation classes. Replace with your method.
kind: predictions
predictions:
  files: predictions/{{benchmark}}.{{setting}}.safetensors
  generator: make_predictions.py
declarations:
  class_embedding: default
  features: benchmark
  extra_data: false
  transductive: false
"""

README = """# {name}

A submission package made by `zsl submission init` (kind: {kind}).

- **Method**: ridge regression from the (centred, L2-normalised) image features to the class
  embeddings; each candidate class is scored by the cosine between the projected image and its
  embedding (`model.py`, class `RidgeToEmbedding`).
- **Hyperparameters**: the ridge strength α ∈ {{10⁻², …, 10³}} is chosen by per-class top-1 on
  the validation classes (fit on the training classes only), then the model is refitted on
  training + validation images. Test classes are never looked at.
- **Paper**: none yet — put yours in `submission.yaml` (`paper:`) and here.

Replace the method, keep the protocol (`fit(task)`, `predict(features, candidates)`), then:

```bash
zsl submission validate {path}
{run}
```
"""


def write_template(name: str, directory: Path, *, kind: Kind = "model") -> Path:
    """Write a template package ``directory/name`` and return its folder.

    Raises
    ------
    SubmissionError
        If ``name`` is not a valid package name or the folder already exists.
    """
    if not _NAME.fullmatch(name) or len(name) > 64:
        raise SubmissionError(
            f"{name!r}: a package name is letters, digits, '.', '_' or '-' (at most 64),"
            " starting with a letter or digit"
        )
    if kind not in ("model", "predictions"):
        raise SubmissionError(f"kind {kind!r}: choose 'model' or 'predictions'")
    root = Path(directory) / name
    if root.exists():
        raise SubmissionError(f"{root}: already exists; choose another name or --dir")
    root.mkdir(parents=True)
    if kind == "model":
        (root / "submission.yaml").write_text(MANIFEST_MODEL.format(name=name), encoding="utf-8")
        run = f"zsl run {root} --spec specs/demo.yaml"
    else:
        (root / "submission.yaml").write_text(
            MANIFEST_PREDICTIONS.format(name=name), encoding="utf-8"
        )
        (root / "make_predictions.py").write_text(GENERATOR_PY, encoding="utf-8")
        run = (
            f"zsl submission generate {root} --spec specs/demo.yaml\n"
            f"zsl run {root} --spec specs/demo.yaml"
        )
    (root / "model.py").write_text(MODEL_PY, encoding="utf-8")
    (root / "README.md").write_text(
        README.format(name=name, kind=kind, path=root, run=run), encoding="utf-8"
    )
    return root
