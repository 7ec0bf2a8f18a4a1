"""Metrics: the functional API (one module per family) and the registry the scorer reads.

Families, pure numpy functions: ``flat`` (top-k accuracy), ``gzsl`` (seen, unseen, H),
``calibrated_stacking`` (AUSUC, calibrated H), ``hierarchical`` (hp@k, hierarchical cost,
mistake severity, ...), ``darts`` (accuracy-specificity, with its ``darts_*`` steps). Supports:
``temperature``, ``score_scale``, ``binomial``, ``decomposition``, ``bootstrap``,
``comparison``. Each family module ends with its registrations; importing this package
registers every built-in metric. Split diagnostics live data-side (:mod:`harness.data.structure`).
See docs/metrics/overview.md.

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
