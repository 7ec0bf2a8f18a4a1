"""Scoring: frozen benchmark + checked predictions → score entries with intervals.

The scorer runs in the harness process, outside any isolation; it is the only place where test
labels meet predictions. For each setting it builds the metric input (dense scores in one piece,
or top-K predictions streamed in row chunks), attaches the validation fit's validation
predictions where a metric needs them, calls every metric the spec declares through the
registry, and attaches a bootstrap interval to every scalar (spec ``uncertainty``).

See docs/scoring.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core.errors import MetricError
from harness.data.prepare import PreparedBenchmark
from harness.metrics import Metric, MetricInput, MetricParams, MetricResult, metrics
from harness.metrics.bootstrap import bootstrap_interval, bootstrap_recompute, confidence_interval
from harness.metrics.comparison import RunClassValues, class_values, ratio_class_values
from harness.metrics.decomposition import concatenate, point_estimate
from harness.metrics.score_scale import score_scale
from harness.records import BenchmarkInfo, ClassValues, Interval, RunRecord, ScoreEntry
from harness.spec import MetricSpec, Uncertainty
from harness.submission.predictions import CHUNK_ROWS, Predictions


def _y_true(bench: PreparedBenchmark, setting: str) -> np.ndarray:
    columns = bench.columns(setting)
    column_of = np.full(len(bench.class_ids), -1, dtype=np.int64)
    column_of[columns] = np.arange(len(columns))
    y_true = column_of[bench.array("labels")[bench.rows(setting)]]
    if (y_true < 0).any():
        raise MetricError(
            f"{bench.spec.benchmark}/{setting}: a test image's class is not a candidate"
        )
    return y_true


def _candidate_nodes(bench: PreparedBenchmark, setting: str) -> np.ndarray | None:
    if bench.hierarchy is None:
        return None
    return bench.hierarchy.indices(bench.class_ids[bench.columns(setting)])


def metric_input(
    bench: PreparedBenchmark,
    setting: str,
    scores: np.ndarray | None,
    *,
    rows: slice | None = None,
    topk: tuple[np.ndarray, np.ndarray] | None = None,
    validation: MetricInput | None = None,
    score_scale: float | None = None,
) -> MetricInput:
    """Align the test labels with the prediction columns of ``setting`` (optionally a row chunk)."""
    columns = bench.columns(setting)
    y_true = _y_true(bench, setting)
    if rows is not None:
        y_true = y_true[rows]
    return MetricInput(
        setting=setting.removesuffix("_val"),  # type: ignore[arg-type]
        y_true=y_true,
        scores=scores,
        candidates=bench.class_ids[columns],
        seen=np.isin(columns, bench.seen_for(setting)),
        hierarchy=bench.hierarchy,
        topk_indices=None if topk is None else topk[0],
        topk_scores=None if topk is None else topk[1],
        candidate_nodes=_candidate_nodes(bench, setting),
        validation=validation,
        score_scale=score_scale,
    )


def _chunks(
    bench: PreparedBenchmark,
    setting: str,
    predictions: Predictions,
    validation: MetricInput | None,
    score_scale: float | None,
) -> Iterator[MetricInput]:
    if predictions.scores is not None:
        yield metric_input(
            bench, setting, predictions.scores, validation=validation, score_scale=score_scale
        )
        return
    for start, indices, scores in predictions.topk_chunks(CHUNK_ROWS):
        rows = slice(start, start + len(indices))
        yield metric_input(
            bench,
            setting,
            None,
            rows=rows,
            topk=(indices, scores),
            validation=validation,
            score_scale=score_scale,
        )


@dataclass
class _Accumulator:
    """Per-chunk results of one metric entry, reduced once at the end."""

    metric: Metric
    entry: MetricSpec
    params: MetricParams  # the entry's parameters, as the spec parsed them at load
    results: list[MetricResult]

    def final(self) -> MetricResult:
        if len(self.results) == 1:
            return self.results[0]
        parts = [r.decomposition for r in self.results]
        if any(p is None for p in parts):
            raise MetricError(
                f"metric '{self.metric.name}' has no per-image decomposition; it cannot be"
                " scored over streamed chunks"
            )
        combined = concatenate([p for p in parts if p is not None])
        details: dict[str, Any] = {"n_images": int(combined.values.shape[0]), "streamed": True}
        # The parameters a metric records in its details (k, lca_distance, ...) are the same in
        # every chunk: they stay, so a streamed record says what it was computed with.
        first = self.results[0].details
        for name in self.metric.params.model_fields:
            if name in first and all(
                name in r.details and r.details[name] == first[name] for r in self.results
            ):
                details[name] = first[name]
        aux_names = set().union(*(r.details.get("_aux", {}).keys() for r in self.results))
        for name in sorted(aux_names):
            arrays = [np.asarray(r.details["_aux"][name]) for r in self.results]
            details[name] = float(np.mean(np.concatenate(arrays)))
        ratios = [r.ratio for r in self.results if r.ratio is not None]
        ratio = concatenate(ratios) if len(ratios) == len(self.results) else None
        return MetricResult(
            float(np.asarray(point_estimate(combined))), details, combined, ratio=ratio
        )


def _interval(unc: Uncertainty, result: MetricResult, data: MetricInput | None) -> Interval | None:
    """Bootstrap interval from the decomposition, else by recomputation on resampled images."""
    if unc.n_boot == 0:
        return None
    if result.decomposition is not None:
        ci = bootstrap_interval(
            result.decomposition,
            scheme=unc.scheme,
            n_boot=unc.n_boot,
            seed=unc.seed,
            level=unc.level,
        )
        lo, hi = float(np.asarray(ci.lo)), float(np.asarray(ci.hi))
    elif result.resample is not None and data is not None:
        samples = bootstrap_recompute(
            result.resample,
            data.y_true,
            n_classes=data.n_candidates,
            scheme=unc.scheme,
            n_boot=unc.n_boot,
            seed=unc.seed,
            vectorized=True,
        )
        lo, hi = (float(v) for v in confidence_interval(samples, level=unc.level))
    else:
        return None
    return Interval(lo=lo, hi=hi, level=unc.level, scheme=unc.scheme, n_boot=unc.n_boot)


def _class_values(result: MetricResult) -> ClassValues | None:
    """Per-class summaries for paired tests between stored runs: the metric's own (curve
    areas), its ratio's, else its 1D decomposition's (None without any)."""
    values: RunClassValues | None
    if result.class_values is not None:
        values = result.class_values
    elif result.ratio is not None:
        values = ratio_class_values(result.ratio)
    elif result.decomposition is not None:
        values = class_values(result.decomposition)
    else:
        return None
    return None if values is None else ClassValues.model_validate(values, from_attributes=True)


def _public(details: dict[str, Any]) -> dict[str, Any]:
    """Details without the scorer's private keys (``_aux``: per-image arrays for streaming)."""
    return {k: v for k, v in details.items() if not k.startswith("_")}


def score_setting(
    setting: str,
    chunks: Iterable[MetricInput],
    entries: list[MetricSpec],
    uncertainty: Uncertainty,
) -> list[ScoreEntry]:
    """Score one setting: every entry on every chunk, reduced once, each with its interval."""
    accumulators = []
    for entry in entries:
        metric = metrics.get(entry.name)
        accumulators.append(_Accumulator(metric, entry, entry.metric_params, []))
    whole: MetricInput | None = None
    for n_chunks, chunk in enumerate(chunks, start=1):
        whole = chunk if n_chunks == 1 else None
        for acc in accumulators:
            if n_chunks > 1 and not acc.metric.chunkable:
                raise MetricError(
                    f"metric '{acc.metric.name}' needs all predictions at once; use dense"
                    " predictions for this benchmark"
                )
            acc.results.append(acc.metric(chunk, acc.params))
    out = []
    for acc in accumulators:
        result = acc.final()
        out.append(
            ScoreEntry(
                setting=setting,
                metric=acc.entry.result_key,
                function=acc.metric.name,
                version=acc.metric.version,
                value=float(result.value),
                higher_is_better=acc.metric.higher_is_better,
                details=_public(result.details),
                interval=_interval(uncertainty, result, whole),
                class_values=_class_values(result),
            )
        )
    return out


def _dense(
    bench: PreparedBenchmark, predictions: dict[str, Predictions], name: str, setting: str
) -> np.ndarray:
    found = predictions.get(name)
    if found is None or found.scores is None:
        raise MetricError(
            f"{bench.spec.benchmark}/{setting}: metrics tuned on validation need dense"
            f" '{name}' predictions"
        )
    return found.scores


def _score_scales(
    bench: PreparedBenchmark, predictions: dict[str, Predictions], setting: str
) -> dict[str, float]:
    """Each fit's score scale, from its predictions on the scale images."""
    return {
        name: score_scale(_dense(bench, predictions, name, setting))
        for name in bench.spec.scale_settings()
    }


def score(bench: PreparedBenchmark, predictions: dict[str, Predictions]) -> list[ScoreEntry]:
    """Every metric the spec declares, per setting, in spec order, each with its interval."""
    entries: list[ScoreEntry] = []
    scales: dict[str, float] = {}  # each fit's score scale, measured once for every setting
    for setting in bench.spec.settings:
        specs = bench.spec.metrics_for(setting)
        validation = None
        if any(metrics.get(e.name).needs_validation for e in specs):
            val_setting = f"{setting}_val"
            scales = scales or _score_scales(bench, predictions, setting)
            validation = metric_input(
                bench,
                val_setting,
                _dense(bench, predictions, val_setting, setting),
                score_scale=scales["scale_val"],
            )
        scale = scales.get("scale") if validation is not None else None
        chunks = _chunks(bench, setting, predictions[setting], validation, scale)
        entries.extend(score_setting(setting, chunks, specs, bench.spec.uncertainty))
    return entries


def chance_checked(function: str) -> bool:
    """Whether :func:`below_chance` checks metric ``function``: a per-class mean whose chance
    level is k / C, registered with ``checked_against_chance``.

    >>> chance_checked("gzsl_harmonic_mean"), chance_checked("gzsl_seen_accuracy")
    (True, False)
    """
    return function in metrics and metrics.get(function).checked_against_chance


#: What a below-chance score most likely means; every warning about one says it.
BELOW_CHANCE_CAUSE = (
    "columns of the score matrix in another class order than the benchmark's class list "
    "(see `zsl spec describe`), or labels shifted"
)


def chance_level(n_candidates: int, k: int = 1) -> float:
    """Per-class top-``k`` accuracy of scores that ignore the image: ``k / n_candidates``.

    Scores independent of the image rank the true class among the first ``k`` of
    ``n_candidates`` with probability ``k / n_candidates`` on average over classes (a constant
    ranking: exactly ``k`` of the classes score 1, the others 0); GZSL unseen accuracy and H
    (both accuracies at chance) share it. At most 1.

    >>> chance_level(20)
    0.05
    >>> chance_level(50, k=5)
    0.1
    """
    if n_candidates < 1 or k < 1:
        raise ValueError(
            f"chance_level needs n_candidates >= 1 and k >= 1; got n_candidates={n_candidates}, "
            f"k={k}"
        )
    return min(1.0, k / n_candidates)


def n_candidates(benchmark: BenchmarkInfo, setting: str) -> int | None:
    """How many candidate classes ``setting`` ranks: the unseen classes (``zsl``), or the seen
    and unseen ones (``gzsl``); None when the record does not say (class counts of 0)."""
    count = {"zsl": benchmark.n_unseen, "gzsl": benchmark.n_seen + benchmark.n_unseen}.get(
        setting, 0
    )
    return count if count > 0 and benchmark.n_unseen > 0 else None


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def below_chance(record: RunRecord) -> list[str]:
    """One warning per checked score of ``record`` below chance, in score order.

    Checked: :func:`chance_checked` (per-class top-k, GZSL unseen accuracy and H), each
    against :func:`chance_level` of its setting's candidates and its ``k``, except the scores
    0 by design (``zero_for_seen_only``) in the settings the submission declares ``seen_only``.
    With a bootstrap interval the score is below chance when the interval's upper bound is;
    without one, when its value is.
    """
    # A seen-class baseline's unseen accuracy (and so H) is 0 by design in the settings it
    # declares; its top-k over all candidates is not, and stays checked (a shifted column).
    declared = record.submission.declarations.get("seen_only")
    seen_only = set(declared) if isinstance(declared, list) else set()
    warnings = []
    for entry in record.scores:
        if not chance_checked(entry.function):
            continue
        if entry.setting in seen_only and metrics.get(entry.function).zero_for_seen_only:
            continue
        n = n_candidates(record.benchmark, entry.setting)
        if n is None:
            continue
        k = entry.details.get("k", 1)
        k = k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else 1
        chance = chance_level(n, k)
        if entry.interval is not None:
            if entry.interval.hi >= chance:
                continue
            shown = (
                f"{_percent(entry.value)} ({100 * entry.interval.level:g} % interval "
                f"{_percent(entry.interval.lo)} to {_percent(entry.interval.hi)})"
            )
        elif entry.value >= chance:
            continue
        else:
            shown = _percent(entry.value)
        warnings.append(
            f"{entry.setting} {entry.metric} = {shown} is below chance ({_percent(chance)} = "
            f"{k}/{n} candidate classes); likely cause: {BELOW_CHANCE_CAUSE}"
        )
    return warnings


__all__ = [
    "BELOW_CHANCE_CAUSE",
    "below_chance",
    "chance_checked",
    "chance_level",
    "n_candidates",
    "score",
    "score_setting",
]


#: The key of a run's logs that holds its below-chance warnings (:func:`below_chance`).
WARNINGS_LOG = "warnings"


def with_chance_warnings(record: RunRecord) -> RunRecord:
    """``record`` with ``logs["warnings"]`` saying what :func:`below_chance` finds in its
    scores now (removed when nothing): a run and a re-score keep it in step with the scores."""
    warnings = below_chance(record)
    logs = {k: v for k, v in record.logs.items() if k != WARNINGS_LOG}
    if warnings:
        logs[WARNINGS_LOG] = "\n".join(warnings)
    return record.model_copy(update={"logs": logs})
