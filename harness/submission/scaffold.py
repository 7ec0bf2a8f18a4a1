"""``zsl submission init``: write a working template package to start a submission from.

The template implements a simple, correct method — ridge regression from image features to the
class-embedding space, candidates scored by cosine similarity, the ridge strength chosen on the
validation classes only — so a new package validates and runs before its author changes a line.
``kind: model`` ships it as model code; ``kind: predictions`` ships the same model plus a generator
script that writes the prediction files from a task bundle, with a description and README of its
own (what the files are, who writes them, which commands make, check and score them).

Both Python files are real modules shipped with the harness (``harness/submission/template/``),
so ruff and mypy check them like the rest of the code; they are copied as they are, less the
lines that mark blocks shared with the reference packages (``# >>> copied block``: for this
project's own test that keeps the copies identical, nothing a submitter needs).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Literal

from harness.core.errors import SubmissionError

Kind = Literal["model", "predictions"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


#: The marker lines of a copied block (tests/test_reference_packages.py), whole lines.
_BLOCK_MARKER = re.compile(r'^# (>>>|<<<) copied block "[a-z0-9-]+".*\n', re.MULTILINE)


def template_text(name: str) -> str:
    """The template file ``name`` (``model.py`` or ``make_predictions.py``) as a new package
    gets it: without the marker lines of the blocks it shares with the reference packages."""
    text = (resources.files("harness.submission") / "template" / name).read_text(encoding="utf-8")
    return re.sub(r"\n{4,}", "\n\n\n", _BLOCK_MARKER.sub("", text))  # at most 2 blank lines


_MANIFEST_HEAD = """name: {name}
version: "0.1"
authors: [Your Name]
# Links (http or https URLs) and a BibTeX entry, shown on the submission page:
paper: null
code: null
# bibtex: |
#   @inproceedings{{key, title = {{...}}, author = {{...}}, year = {{2026}}}}
"""

DESCRIPTION_MODEL = """description: >-
  Ridge regression from features to class embeddings, scored by cosine similarity; the ridge
  strength is chosen on the validation classes. Replace with your method.
"""

DESCRIPTION_PREDICTIONS = """description: >-
  Prediction files, one per benchmark and setting, written by make_predictions.py from the
  benchmark's task bundle (it fits the example ridge regression of model.py). Replace the
  generator, or the files, with your method's predictions.
"""

_DECLARATIONS = """declarations:
  class_embedding: default
  features: benchmark
  extra_data: false
  transductive: false
"""

MANIFEST_MODEL = (
    _MANIFEST_HEAD
    + DESCRIPTION_MODEL
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
    + DESCRIPTION_PREDICTIONS
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
  training + validation images. Test classes are never looked at. `fit` exposes what it chose
  as `self.hyperparameters_ = {{"alpha": ...}}` (a flat dict of JSON scalars); the run record
  keeps it and the submission page shows it.
- **Paper**: none yet — put yours in `submission.yaml` (`paper:`) and here.

Replace the method, keep the protocol (`fit(task)`, `save(directory)`, the classmethod
`load(directory)`, `predict(features, candidates)`: fit and each prediction pass run apart, and
`load` rebuilds the fitted model from what `save` wrote), then:

```bash
zsl submission validate {path}
{run}
```
"""

README_PREDICTIONS = """# {name}

A prediction-file package made by `zsl submission init --kind predictions`: `zsl run` scores
the prediction files it holds and runs none of its code.

- **Files**: `predictions/<benchmark>.<setting>.safetensors` (the pattern `predictions.files`
  in `submission.yaml`), one per setting of the benchmark, the validation settings
  (`<setting>_val`) and the score-scale settings (`scale`, `scale_val`: each fit's scores on
  a fixed sample of training images over the training classes, the unit in which a value
  chosen on validation reaches the test scores) included. Each holds
  `scores [n_test, n_candidates]`: rows in the setting's frozen test order, columns in its
  candidate order, and the benchmark hash and class-order hash of the task bundle it was made
  from. A file made for other data, of the
  wrong shape, or holding NaN or inf is refused.
- **Generator**: `make_predictions.py BUNDLE_DIR OUT_DIR` writes the files from a benchmark's
  task bundle (no test labels); `zsl submission generate` runs it isolated, like model code,
  and copies what it wrote into `predictions/`. As shipped it fits the example method of
  `model.py`, ridge regression from the image features to the class embeddings scored by
  cosine similarity, once per fit (the validation settings from the training classes only).
- **Paper**: none yet — put yours in `submission.yaml` (`paper:`) and here.

Replace the generator with your method (keep its command line and the files it writes), or
put your own files in `predictions/` and drop `generator:` from `submission.yaml`; then:

```bash
zsl submission generate {path} --spec specs/demo.yaml
zsl submission validate {path} --spec specs/demo.yaml
zsl run {path} --spec specs/demo.yaml
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
        raise SubmissionError(f"{root}: already exists; choose another name or --out")
    root.mkdir(parents=True)
    manifest = MANIFEST_MODEL if kind == "model" else MANIFEST_PREDICTIONS
    (root / "submission.yaml").write_text(manifest.format(name=name), encoding="utf-8")
    if kind == "model":
        run = f"zsl run {root} --spec specs/demo.yaml"
        readme = README.format(name=name, kind=kind, path=root, run=run)
    else:
        (root / "make_predictions.py").write_text(
            template_text("make_predictions.py"), encoding="utf-8"
        )
        readme = README_PREDICTIONS.format(name=name, path=root)
    (root / "model.py").write_text(template_text("model.py"), encoding="utf-8")
    (root / "README.md").write_text(readme, encoding="utf-8")
    return root
