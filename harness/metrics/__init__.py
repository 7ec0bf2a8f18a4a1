"""Metrics: the functional API (one module per family) and the registry the scorer reads.

Families, pure numpy functions: ``flat`` (top-k accuracy), ``gzsl`` (seen, unseen, H),
``calibrated_stacking`` (AUSUC, calibrated H), ``hierarchical`` (hp@k, hierarchical cost,
mistake severity, ...), ``darts`` (accuracy-specificity, with its ``darts_*`` steps). Supports:
``temperature``, ``score_scale``, ``binomial``, ``decomposition``, ``bootstrap``,
``comparison``. Each family module ends with its registrations. Importing this package imports
no family: :data:`FAMILIES` names the family modules, imported when :data:`metrics` is first
read (a name looked up, tested or listed). See docs/metrics/overview.md.

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

#: The family modules: each registers its built-in metrics (``register_metric`` beside each
#: function), all imported the first time :data:`metrics` is read.
FAMILIES = (
    "harness.metrics.flat",
    "harness.metrics.gzsl",
    "harness.metrics.calibrated_stacking",
    "harness.metrics.hierarchical",
    "harness.metrics.darts",
)
metrics.add_modules(*FAMILIES)

__all__ = [
    "FAMILIES",
    "Metric",
    "MetricInput",
    "MetricParams",
    "MetricResult",
    "metrics",
    "register_metric",
]
