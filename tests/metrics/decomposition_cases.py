"""Shared test inputs of the decomposition, bootstrap and comparison tests (not collected)."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import strategies as st

from harness.metrics.decomposition import Decomposition

# Two classes, two images each. Class 0 values 0 and 1 (mean 1/2), class 1 values 1 and 1.
TINY = Decomposition(values=[0.0, 1.0, 1.0, 1.0], classes=[0, 0, 1, 1], n_classes=2)


def seeded_problem(
    seed: int, n_images: int, n_candidates: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded scores with the true class boosted, and a seen mask with both kinds."""
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, n_candidates, n_images)
    scores = rng.standard_normal((n_images, n_candidates))
    scores[np.arange(n_images), y_true] += 1.0
    seen = np.zeros(n_candidates, dtype=bool)
    seen[: n_candidates // 2] = True
    return y_true, scores, seen


@st.composite
def decompositions(draw: st.DrawFn) -> Decomposition:
    n_classes = draw(st.integers(1, 5))
    n = draw(st.integers(1, 25))
    classes = draw(hnp.arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    binary = draw(st.booleans())
    elements = st.sampled_from([0.0, 1.0]) if binary else st.floats(0, 1, width=32)
    values = draw(hnp.arrays(np.float64, n, elements=elements))
    groups = draw(hnp.arrays(np.int64, n_classes, elements=st.integers(0, 1)))
    combine = draw(st.sampled_from(["class_mean", "image_mean", "harmonic_of_groups"]))
    if combine == "harmonic_of_groups":
        present_groups = {int(groups[c]) for c in np.unique(classes)}
        if present_groups != {int(g) for g in groups}:
            groups = np.zeros(n_classes, dtype=np.int64)
    return Decomposition(
        values=values, classes=classes, n_classes=n_classes, groups=groups, combine=combine
    )
