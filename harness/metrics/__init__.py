"""Metrics: the functional API and the registry of built-in metrics the scorer looks up by name.

Importing this package registers the built-in metrics in :data:`metrics` by explicit import (no
plugin discovery). Each registered compute function receives a :class:`MetricInput` and its
validated parameters, calls the pure functions of :mod:`harness.metrics.flat` /
:mod:`harness.metrics.gzsl`, and returns a :class:`MetricResult` whose ``details`` are
JSON-serializable (Python floats, ints, strings, lists; None for a class without test images).

Registered metrics (all version "1", parameters :class:`TopKParams`):

- ``per_class_top_k_accuracy`` (zsl, gzsl): mean per-class top-k accuracy over every candidate
  column that has test images;
- ``per_image_top_k_accuracy`` (zsl, gzsl): fraction of test images correct at k;
- ``gzsl_seen_accuracy``, ``gzsl_unseen_accuracy``, ``gzsl_harmonic_mean`` (gzsl only): the
  GZSL protocol of Xian et al. (seen and unseen accuracies over all candidates, and H).

>>> sorted(metrics)  # doctest: +NORMALIZE_WHITESPACE
['gzsl_harmonic_mean', 'gzsl_seen_accuracy', 'gzsl_unseen_accuracy',
 'per_class_top_k_accuracy', 'per_image_top_k_accuracy']
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from harness.errors import MetricError
from harness.metrics.base import (
    Metric,
    MetricInput,
    MetricParams,
    MetricResult,
    metrics,
    register_metric,
)
from harness.metrics.flat import (
    per_class_counts,
    per_class_top_k_accuracy,
    per_class_top_k_accuracy_details,
    per_image_top_k_accuracy,
    top_k_correct,
)
from harness.metrics.gzsl import gzsl_accuracies, gzsl_accuracies_details, harmonic_mean

__all__ = [
    "Metric",
    "MetricInput",
    "MetricParams",
    "MetricResult",
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
]


class TopKParams(MetricParams):
    """Parameters of the top-k accuracies: how many top candidates count."""

    k: int = Field(1, ge=1, description="How many top-scoring candidates count as a hit.")


def _class_ids(data: MetricInput, n_candidates: int) -> list[Any]:
    """The candidate class ids as JSON scalars, one per score column."""
    candidates = np.asarray(data.candidates)
    if candidates.ndim != 1 or candidates.shape[0] != n_candidates:
        raise MetricError(
            f"Expected `candidates` to list one class id per score column ({n_candidates}), "
            f"but got shape {candidates.shape}."
        )
    return candidates.tolist()


def _require_setting(data: MetricInput, name: str, settings: tuple[str, ...]) -> None:
    if data.setting not in settings:
        raise MetricError(
            f"Expected setting to be one of {list(settings)} for metric '{name}', "
            f"but got '{data.setting}'."
        )


def _per_class_by_id(details: dict[str, Any], ids: list[Any]) -> dict[str, Any]:
    """Re-key a per-class details dict from column indices to candidate class ids."""
    return {
        "per_class": {
            str(ids[column]): value
            for column, value in zip(details["classes"], details["per_class"], strict=True)
        },
        "excluded_classes": [ids[column] for column in details["excluded_classes"]],
        "n_images": details["n_images"],
    }


@register_metric("per_class_top_k_accuracy", version="1", params=TopKParams)
def _per_class_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Mean over candidate classes with test images of per-class top-k accuracy."""
    scores = np.asarray(data.scores)
    n_candidates = scores.shape[1] if scores.ndim == 2 else 0
    details = per_class_top_k_accuracy_details(
        data.y_true, scores, classes=np.arange(n_candidates), k=params.k
    )
    ids = _class_ids(data, n_candidates)
    return MetricResult(details["value"], {**_per_class_by_id(details, ids), "k": details["k"]})


@register_metric("per_image_top_k_accuracy", version="1", params=TopKParams)
def _per_image_top_k_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """Fraction of test images whose true class is among the top k candidates (per image)."""
    correct = top_k_correct(data.y_true, data.scores, k=params.k)
    return MetricResult(
        float(np.mean(correct)),
        {"k": params.k, "n_images": int(correct.shape[0]), "n_correct": int(correct.sum())},
    )


def _gzsl(data: MetricInput, params: TopKParams, name: str) -> dict[str, Any]:
    _require_setting(data, name, ("gzsl",))
    details = gzsl_accuracies_details(data.y_true, data.scores, seen=data.seen, k=params.k)
    ids = _class_ids(data, np.asarray(data.seen).shape[0])
    details["seen_details"] = _per_class_by_id(details["seen_details"], ids)
    details["unseen_details"] = _per_class_by_id(details["unseen_details"], ids)
    return details


@register_metric("gzsl_seen_accuracy", version="1", params=TopKParams, settings=("gzsl",))
def _gzsl_seen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL seen accuracy: per-class top-k accuracy over seen classes, all candidates ranked."""
    details = _gzsl(data, params, "gzsl_seen_accuracy")
    return MetricResult(details["seen"], {**details["seen_details"], "k": details["k"]})


@register_metric("gzsl_unseen_accuracy", version="1", params=TopKParams, settings=("gzsl",))
def _gzsl_unseen_accuracy(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL unseen accuracy: per-class top-k accuracy over unseen classes, all candidates ranked."""
    details = _gzsl(data, params, "gzsl_unseen_accuracy")
    return MetricResult(details["unseen"], {**details["unseen_details"], "k": details["k"]})


@register_metric("gzsl_harmonic_mean", version="1", params=TopKParams, settings=("gzsl",))
def _gzsl_harmonic_mean(data: MetricInput, params: TopKParams) -> MetricResult:
    """GZSL harmonic mean H of the seen and unseen accuracies (0 when either is 0)."""
    details = _gzsl(data, params, "gzsl_harmonic_mean")
    return MetricResult(
        details["harmonic_mean"],
        {"seen": details["seen"], "unseen": details["unseen"], "k": details["k"]},
    )
