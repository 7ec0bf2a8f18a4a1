"""Scoring: frozen benchmark + checked predictions → score entries, through the metric registry.

The scorer runs in the harness process, outside any isolation; it is the only place where test
labels meet predictions.
"""

from __future__ import annotations

import numpy as np

from harness.data.prepare import Benchmark
from harness.errors import MetricError
from harness.metrics import MetricInput, metrics
from harness.records import ScoreEntry
from harness.submission.predictions import Predictions


def metric_input(bench: Benchmark, setting: str, scores: np.ndarray) -> MetricInput:
    """Align the test labels with the prediction columns of ``setting``."""
    columns = bench.columns(setting)
    labels = bench.a("labels")[bench.rows(setting)]
    column_of = np.full(len(bench.class_ids), -1, dtype=np.int64)
    column_of[columns] = np.arange(len(columns))
    y_true = column_of[labels]
    if (y_true < 0).any():
        raise MetricError(f"{bench.spec.benchmark}: a test image's class is not a candidate")
    seen = np.isin(columns, bench.seen_classes)
    return MetricInput(
        setting=setting,  # type: ignore[arg-type]
        y_true=y_true,
        scores=scores,
        candidates=bench.class_ids[columns],
        seen=seen,
        hierarchy=bench.hierarchy,
    )


def score(bench: Benchmark, predictions: dict[str, Predictions]) -> list[ScoreEntry]:
    """Every metric the spec declares, per setting, in spec order."""
    entries: list[ScoreEntry] = []
    for setting in bench.spec.settings:
        data = metric_input(bench, setting, predictions[setting].scores)
        for entry in bench.spec.metrics_for(setting):
            metric = metrics.get(entry.name)
            result = metric(data, metric.params.model_validate(entry.params))
            entries.append(
                ScoreEntry(
                    setting=setting,
                    metric=entry.result_key,
                    function=metric.name,
                    version=metric.version,
                    value=float(result.value),
                    higher_is_better=metric.higher_is_better,
                    details=result.details,
                )
            )
    return entries
