"""Code the reference packages share is copied, marked, and kept byte-identical.

Each reference package stays self-contained: it is what is hashed and scored, so it cannot
import a helper from another package or from the harness. The code several packages share is
therefore copied, between the lines

    # >>> copied block "NAME": keep byte-identical (tests/test_reference_packages.py)
    # <<< copied block "NAME"

and these tests hold every copy of a block to the same bytes: a fix made in one copy fails here
until it is copied to all (which changes those packages' hashes, so their records are re-made).
The submission template (``harness/submission/template/model.py``) carries the per-class top-1
block too, so new packages start from the same rule (STYLE §7.3: the class list is explicit).
"""

from __future__ import annotations

import difflib
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import recall_score

from harness.submission.template.model import per_class_top1
from tests.conftest import REPO, SUBMISSIONS

TEMPLATE = REPO / "harness" / "submission" / "template" / "model.py"
BEGIN = re.compile(r'^# >>> copied block "(?P<name>[a-z0-9-]+)"')
END = re.compile(r'^# <<< copied block "(?P<name>[a-z0-9-]+)"$')

# block -> the packages ("template": the submission template) that carry a copy of it
EXPECTED = {
    "bilinear": {"ale", "devise", "sje"},
    "clip-logits": {"clip-template-selection", "clip-zero-shot"},
    "grid-search": {
        "ale", "cada-vae", "conse", "dap", "devise", "eszsl", "f-clswgan", "flat-seen-classifier",
        "sae", "sje", "trivial-hierarchy",
    },
    "per-class-top1": {
        "ale", "cada-vae", "clip-template-selection", "conse", "dap", "devise", "eszsl",
        "f-clswgan", "sae", "sje", "trivial-hierarchy", "template",
    },
    "seen-classifier": {"conse", "flat-seen-classifier", "trivial-hierarchy"},
    "nearest-seen": {"flat-seen-classifier", "trivial-hierarchy"},
    "psd-eigh": {"eszsl", "sae"},
    "state-files": {
        "ale", "cada-vae", "clip-template-selection", "clip-zero-shot", "conse", "dap", "devise",
        "eszsl", "f-clswgan", "flat-seen-classifier", "sae", "sje", "trivial-hierarchy",
        "template",
    },
}  # fmt: skip


def _sources() -> dict[str, Path]:
    found = {p.parent.name: p for p in sorted(SUBMISSIONS.glob("*/model.py"))}
    return {**found, "template": TEMPLATE}


def copied_blocks(path: Path) -> dict[str, str]:
    """``{name: text}`` of the copied blocks in ``path``, begin and end lines included."""
    blocks: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(True), 1):
        begin, end = BEGIN.match(line), END.match(line)
        where = f"{path.relative_to(REPO)}:{number}"
        if "copied block" in line and not (begin or end):
            raise AssertionError(f"{where}: malformed copied-block marker {line.strip()!r}")
        if begin:
            assert name is None, f"{where}: block {begin['name']!r} opens inside {name!r}"
            assert begin["name"] not in blocks, f"{where}: block {begin['name']!r} twice"
            name, lines = begin["name"], []
        if name is not None:
            lines.append(line)
        if end:
            assert end["name"] == name, f"{where}: end of {end['name']!r} closes {name!r}"
            blocks[name] = "".join(lines)
            name = None
    assert name is None, f"{path.relative_to(REPO)}: block {name!r} never ends"
    return blocks


def _all_blocks() -> dict[str, dict[str, str]]:
    """``{block: {package: text}}`` over every reference package and the template."""
    found: dict[str, dict[str, str]] = {}
    for package, path in _sources().items():
        for name, text in copied_blocks(path).items():
            found.setdefault(name, {})[package] = text
    return found


def test_the_copied_blocks_are_where_expected() -> None:
    found = {name: set(copies) for name, copies in _all_blocks().items()}
    assert found == EXPECTED


@pytest.mark.parametrize("block", sorted(EXPECTED))
def test_every_copy_of_a_block_is_byte_identical(block: str) -> None:
    copies = _all_blocks()[block]
    first = min(copies)
    for package, text in sorted(copies.items()):
        if text != copies[first]:
            diff = "".join(
                difflib.unified_diff(
                    copies[first].splitlines(True),
                    text.splitlines(True),
                    f"{first}/model.py",
                    f"{package}/model.py",
                )
            )
            pytest.fail(f"copied block {block!r} differs; copy the fix to every copy:\n{diff}")


def test_per_class_accuracy_is_computed_only_in_the_shared_block() -> None:
    # A package-local variant (classes taken from the labels, say) would escape the tests below.
    for package, path in _sources().items():
        text = path.read_text(encoding="utf-8")
        inside = copied_blocks(path).get("per-class-top1", "")
        outside = text.replace(inside, "")
        assert not re.search(r"def \w*per_class", outside), package
        assert "np.unique(y)" not in outside and "np.unique(labels)]" not in outside, package


# -- the shared per-class top-1 ----------------------------------------------------------------


def _unique_labels_formula(scores: np.ndarray, positions: np.ndarray) -> float:
    """What the packages computed before the class list was explicit (classes from labels)."""
    pred = scores.argmax(axis=1)
    return float(np.mean([np.mean(pred[positions == c] == c) for c in np.unique(positions)]))


@pytest.mark.parametrize("seed", range(20))
def test_per_class_top1_is_the_macro_recall_over_present_classes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_classes, n = int(rng.integers(2, 30)), int(rng.integers(1, 200))
    classes = np.sort(rng.choice(1000, size=n_classes, replace=False))
    positions = rng.integers(0, n_classes, size=n)
    scores = rng.normal(size=(n, n_classes)).astype(np.float32 if seed % 2 else np.float64)
    if seed % 3 == 0:
        scores = np.round(scores)  # ties: argmax takes the first column, as before
    labels = classes[positions]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # classes without images are expected
        value = per_class_top1(scores, labels, classes=classes)
    predicted = classes[scores.argmax(axis=1)]
    present = np.unique(labels)
    expected = recall_score(labels, predicted, labels=present, average="macro", zero_division=0)
    assert value == pytest.approx(expected, abs=1e-12)
    # bit-identical to the former formula, so no validation choice and no score changed
    assert value == _unique_labels_formula(scores, positions)


def test_a_listed_class_without_images_is_left_out_and_named() -> None:
    classes = np.array([7, 3, 9])  # any order: column j scores classes[j]
    labels = np.array([7, 7, 9])
    scores = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.warns(
        RuntimeWarning, match=r"leaves out 1 listed class\(es\) with no image: \[3\]"
    ):
        value = per_class_top1(scores, labels, classes=classes)
    assert value == 0.75  # class 7: 1/2, class 9: 1/1; class 3 is neither 0 nor NaN


@pytest.mark.parametrize(
    ("scores", "labels", "classes", "message"),
    [
        ([[0.0, np.nan], [1.0, 0.0]], [1, 2], [1, 2], r"^scores: expected finite values, got NaN or inf in row 0$"),
        ([[0.0, 1.0], [1.0, np.inf]], [1, 2], [1, 2], r"in row 1$"),
        ([[0.0, 1.0], [1.0, 0.0]], [1, 5], [1, 2], r"^labels: 1 image\(s\) of classes not in `classes`, e.g. 5$"),
        ([[0.0, 1.0, 2.0]], [1], [1, 2], r"^scores: expected shape \(n_images, n_classes\) = \(1, 2\)"),
        (np.zeros((0, 2)), [], [1, 2], r"^labels: no image of any listed class; per-class top-1 is undefined$"),
        (np.zeros((1, 0)), [1], [], r"with at least one class, got \(1, 0\)$"),
    ],
)  # fmt: skip
def test_per_class_top1_refuses_what_it_cannot_score(
    scores: object, labels: list[int], classes: list[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        per_class_top1(
            np.asarray(scores, dtype=np.float64),
            np.asarray(labels, dtype=np.int64),
            classes=np.asarray(classes, dtype=np.int64),
        )
