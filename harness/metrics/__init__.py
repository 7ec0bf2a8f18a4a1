"""Metrics: the functional API (one module per family) and the registry the scorer reads.

Families (pure numpy functions, documented where they live):

- :mod:`~harness.metrics.flat` — per-class and per-image top-k accuracy (one tie policy);
- :mod:`~harness.metrics.gzsl` — GZSL seen/unseen accuracy and their harmonic mean H;
- :mod:`~harness.metrics.calibrated_stacking` — calibrated stacking (Chao et al.): exact
  seen-unseen curve, AUSUC, H at a gamma chosen on validation predictions;
- :mod:`~harness.metrics.hierarchical` — hp@k (DeViSE, per image; and per class), hierarchical
  cost, mistake severity, average hierarchical distance@k, hierarchical retrieval precision@k,
  relation breakdown;
- :mod:`~harness.metrics.darts` — DARTS accuracy-specificity trade-off (lambda meets its target
  on validation; the test accuracy it reaches is reported, not guaranteed); its steps in
  ``darts_graph``, ``darts_posteriors``, ``darts_prediction`` and ``darts_search``.

Split diagnostics (structural ratio, mutual exclusivity, nearest training classes, size tables)
describe a benchmark, not a submission: they live data-side, in :mod:`harness.data.structure`,
and every input check in :mod:`harness.checks`, so that data code never imports this package
(importing any of its modules registers every metric).

Their supports, one job each:

- :mod:`harness.checks` (outside this package) — every input check, one stock message naming
  the input;
- :mod:`~harness.metrics.temperature` — temperature scaling: softmax posteriors from scores, the
  temperature fitted on validation (used by DARTS);
- :mod:`~harness.metrics.score_scale` — each fit's score scale, the unit in which a value chosen
  on the validation fit (calibrated stacking's gamma, DARTS's temperature) reaches the main fit
  (the scale images it is measured on are drawn data-side, :mod:`harness.data.scale_images`);
- :mod:`~harness.metrics.binomial` — the Clopper-Pearson bound of DARTS's validation guarantee;
- :mod:`~harness.metrics.decomposition` — a score as a reduction of per-image values by class;
- :mod:`~harness.metrics.bootstrap` — bootstrap intervals of decomposed (or recomputed) scores;
- :mod:`~harness.metrics.comparison` — paired class-level tests between stored runs, tied groups,
  ranks across benchmarks.

Functions that report more than a number (``*_details``, curves, intervals, tests) return frozen
dataclasses; the registered wrappers turn them into the JSON details of a run record.

Each family module ends with its registrations (wrappers from a :class:`MetricInput` to its
functions); what they share lives in :mod:`~harness.metrics.registration`. Importing this package
imports every family, so registers the built-in metrics in :data:`metrics` by explicit import,
no plugin discovery. Each declares what its value is a mean over (``averaged_over``: test images
or classes with test images).

>>> "per_class_top_k_accuracy" in metrics and "hierarchical_precision_at_k" in metrics
True
"""

from __future__ import annotations

# Importing a family module registers its metrics (flat and gzsl: imported below as well).
from harness.metrics import calibrated_stacking as _calibrated_stacking  # noqa: F401
from harness.metrics import darts as _darts  # noqa: F401
from harness.metrics import hierarchical as _hierarchical  # noqa: F401
from harness.metrics.base import (
    Metric,
    MetricInput,
    MetricParams,
    MetricResult,
    metrics,
    register_metric,
)
from harness.metrics.flat import (
    PerClassAccuracy,
    TopKParams,
    per_class_counts,
    per_class_top_k_accuracy,
    per_class_top_k_accuracy_details,
    per_image_top_k_accuracy,
    top_k_correct,
    top_k_correct_from_topk,
)
from harness.metrics.gzsl import (
    GzslAccuracies,
    GzslAccuracyDetails,
    gzsl_accuracies,
    gzsl_accuracies_details,
    harmonic_mean,
)

__all__ = [
    "GzslAccuracies",
    "GzslAccuracyDetails",
    "Metric",
    "MetricInput",
    "MetricParams",
    "MetricResult",
    "PerClassAccuracy",
    "TopKParams",
    "gzsl_accuracies",
    "gzsl_accuracies_details",
    "harmonic_mean",
    "metrics",
    "per_class_counts",
    "per_class_top_k_accuracy",
    "per_class_top_k_accuracy_details",
    "per_image_top_k_accuracy",
    "register_metric",
    "top_k_correct",
    "top_k_correct_from_topk",
]
