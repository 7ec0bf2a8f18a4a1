"""Metrics: the functional API (one module per family) and the registry the scorer reads.

Families, pure numpy functions: ``flat`` (top-k accuracy), ``gzsl`` (seen, unseen, H),
``calibrated_stacking`` (AUSUC, calibrated H), ``hierarchical`` (hp@k, hierarchical cost,
mistake severity, ...), ``darts`` (accuracy-specificity, with its ``darts_*`` steps). Supports:
``temperature``, ``score_scale``, ``binomial``, ``decomposition``, ``bootstrap``,
``comparison``. Each family module ends with its registrations. Importing this package imports
no family: :data:`FAMILIES` names each built-in metric's family module, a lazy entry of
:data:`metrics` imported when the metric is first looked up. See docs/metrics/overview.md.

>>> "per_class_top_k_accuracy" in metrics and "hierarchical_precision_at_k" in metrics
True
"""

from __future__ import annotations

from harness.metrics.base import (
    Metric,
    MetricInput,
    MetricParams,
    MetricResult,
    metrics,
    register_metric,
)

#: Each family module and the built-in metrics it registers, in the registry as lazy entries.
FAMILIES: dict[str, tuple[str, ...]] = {
    "harness.metrics.flat": ("per_class_top_k_accuracy", "per_image_top_k_accuracy"),
    "harness.metrics.gzsl": ("gzsl_harmonic_mean", "gzsl_seen_accuracy", "gzsl_unseen_accuracy"),
    "harness.metrics.calibrated_stacking": (
        "ausuc",
        "calibrated_harmonic_mean",
        "calibrated_seen_accuracy",
        "calibrated_unseen_accuracy",
    ),
    "harness.metrics.hierarchical": (
        "average_hierarchical_distance_at_k",
        "hierarchical_cost",
        "hierarchical_precision_at_k",
        "hierarchical_retrieval_precision_at_k",
        "mistake_severity",
        "per_class_hierarchical_precision_at_k",
        "prediction_relation_share",
    ),
    "harness.metrics.darts": ("darts_area", "darts_reward"),
}
for _module, _names in FAMILIES.items():
    for _name in _names:
        metrics.add_lazy(_name, _module)

__all__ = [
    "FAMILIES",
    "Metric",
    "MetricInput",
    "MetricParams",
    "MetricResult",
    "metrics",
    "register_metric",
]
