"""``zsl submission init``: write a working template package to start a submission from.

The template implements a simple, correct method — ridge regression from image features to the
class-embedding space, candidates scored by cosine similarity, the ridge strength chosen on the
validation classes only — so a new package validates and runs before its author changes a line.
``kind: model`` ships it as model code; ``kind: predictions`` ships the same model plus a generator
script that writes the prediction files from a task bundle.

Both Python files are real modules shipped with the harness (``harness/submission/template/``),
so ruff and mypy check them like the rest of the code; they are copied as they are.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Literal

from harness.errors import SubmissionError

Kind = Literal["model", "predictions"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def template_text(name: str) -> str:
    """The text of the template file ``name`` (``model.py`` or ``make_predictions.py``)."""
    return (resources.files("harness.submission") / "template" / name).read_text(encoding="utf-8")


_MANIFEST_HEAD = """name: {name}
version: "0.1"
authors: [Your Name]
paper: null
description: >-
  Ridge regression from features to class embeddings, scored by cosine similarity; the ridge
  strength is chosen on the validation classes. Replace with your method.
"""

_DECLARATIONS = """declarations:
  class_embedding: default
  features: benchmark
  extra_data: false
  transductive: false
"""

MANIFEST_MODEL = (
    _MANIFEST_HEAD
    + """kind: model
model:
  entrypoint: model:RidgeToEmbedding
resources:
  gpus: 0
  memory_gb: 2
  time_s: 600
"""
    + _DECLARATIONS
    + "seed: 0\n"
)

MANIFEST_PREDICTIONS = (
    _MANIFEST_HEAD
    + """kind: predictions
predictions:
  files: predictions/{{benchmark}}.{{setting}}.safetensors
  generator: make_predictions.py
"""
    + _DECLARATIONS
)

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
    manifest = MANIFEST_MODEL if kind == "model" else MANIFEST_PREDICTIONS
    (root / "submission.yaml").write_text(manifest.format(name=name), encoding="utf-8")
    if kind == "model":
        run = f"zsl run {root} --spec specs/demo.yaml"
    else:
        (root / "make_predictions.py").write_text(
            template_text("make_predictions.py"), encoding="utf-8"
        )
        run = (
            f"zsl submission generate {root} --spec specs/demo.yaml\n"
            f"zsl run {root} --spec specs/demo.yaml"
        )
    (root / "model.py").write_text(template_text("model.py"), encoding="utf-8")
    (root / "README.md").write_text(
        README.format(name=name, kind=kind, path=root, run=run), encoding="utf-8"
    )
    return root
