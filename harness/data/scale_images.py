"""The scale images: the prediction rows of the ``scale`` and ``scale_val`` settings.

Both fits score these images against the training classes, so that a value chosen on the
validation fit's scores can be carried to the main fit's in units of each fit's score scale
(the statistic and the carrying rule: :mod:`harness.metrics.score_scale`). Which images they
are is a property of the frozen benchmark, drawn here, data-side, so that data code never
imports the metrics (:attr:`harness.data.prepare.PreparedBenchmark.scale_rows` seeds the draw
from the benchmark hash). The settings' names are :data:`harness.records.SCALE_SETTINGS`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SCALE_IMAGES", "scale_rows"]

#: How many scale images at most (class-stratified: every training class before any twice).
SCALE_IMAGES = 2000


def scale_rows(images: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """The scale images among ``images`` (image indices, ``labels`` their classes), in a
    random order drawn from ``seed``: at most :data:`SCALE_IMAGES`, class-stratified (each
    class's k-th image is taken before any class's (k+1)-th)."""
    images = np.asarray(images, dtype=np.int64)
    labels = np.asarray(labels)
    key = np.random.Generator(np.random.PCG64(seed)).random(len(images))
    by_class = np.lexsort((key, labels))
    sorted_labels = labels[by_class]
    first = np.searchsorted(sorted_labels, sorted_labels, side="left")
    rank = np.empty(len(images), dtype=np.int64)
    rank[by_class] = np.arange(len(images)) - first
    chosen = np.lexsort((key, rank))[:SCALE_IMAGES]
    return images[chosen[np.argsort(key[chosen], kind="stable")]]
