"""What a metric is to the harness: a pure function plus the facts the scorer and site need.

The functional API (``harness.metrics.flat`` etc.) takes arrays and returns numbers. A registered
:class:`Metric` wraps one of those functions for the scorer: it receives a :class:`MetricInput`
built from the frozen benchmark and the predictions, and returns a JSON-serializable
:class:`MetricResult`. Changing what a metric computes bumps its ``version``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.core.errors import MetricError
from harness.core.registry import Registry
from harness.records import Setting

if TYPE_CHECKING:
    from harness.hierarchy import Hierarchy
    from harness.metrics.comparison import RunClassValues
    from harness.metrics.decomposition import Decomposition

InputKind = Literal["dense", "topk"]
#: The unit a metric's value is a mean over: every test image weighs the same ("images"), or
#: every class with test images weighs the same ("classes"). On class-imbalanced splits (ImageNet)
#: the two differ; a reader must know which one a column holds.
AveragedOver = Literal["images", "classes"]
#: What each averaging unit means, in the words the CLI and the site use.
AVERAGING_TEXT: dict[str, str] = {
    "images": "mean over test images (each image weighs the same)",
    "classes": "mean over classes with test images (each class weighs the same)",
}
#: The column group a metric's column joins on the site's score tables (the column chooser's
#: entries; a record's function the registry lacks joins "other").
MetricGroup = Literal["flat", "hierarchical", "darts", "gzsl"]
METRIC_GROUPS: tuple[str, ...] = get_args(MetricGroup)
#: What the site draws from a metric's details, besides its column: the top-k or the hp@k curve
#: against k (``details["curve"]`` with ``k`` and ``value``), the DARTS accuracy-gain curve
#: (``details["curve"]``) and its operating point (a reward at one target accuracy, whose
#: details hold the accuracy reached on test), the seen-unseen curve (``details["curve"]``)
#: or the shares of top-1 relations to the true class (``details["correct"]`` etc.).
FigureKind = Literal[
    "top_k_curve",
    "hp_at_k_curve",
    "darts_curve",
    "darts_operating_point",
    "seen_unseen_curve",
    "relation_shares",
]
FIGURE_KINDS: tuple[str, ...] = get_args(FigureKind)


@dataclass(frozen=True)
class MetricInput:
    """Everything a metric may read for one (benchmark, setting), or one chunk of its rows.

    ``y_true[i]`` is the column of image i's true class among ``candidates``; ``seen[j]`` says
    whether candidate column j is a seen (training) class. Predictions are either dense
    ``scores [n, C]`` or top-K ``topk_indices``/``topk_scores [n, K]`` (rows sorted by
    decreasing score). ``candidate_nodes[j]`` is column j's hierarchy node. ``validation``
    holds the validation fit's predictions on the validation split of the same setting, for
    metrics that choose a parameter there (never on test). ``score_scale`` is the scale of the
    fit that made ``scores`` (:mod:`harness.metrics.score_scale`), measured on the scale images;
    a value chosen on ``validation`` reaches these scores in units of it.
    """

    setting: Setting
    y_true: np.ndarray
    scores: np.ndarray | None
    candidates: np.ndarray
    seen: np.ndarray
    hierarchy: Hierarchy | None = None
    topk_indices: np.ndarray | None = None
    topk_scores: np.ndarray | None = None
    candidate_nodes: np.ndarray | None = None
    validation: MetricInput | None = None
    score_scale: float | None = None

    @property
    def kind(self) -> InputKind:
        return "dense" if self.scores is not None else "topk"

    @property
    def n_candidates(self) -> int:
        return len(self.candidates)

    def ranked(self, k: int) -> np.ndarray:
        """The top-``k`` candidate columns of every image, best first.

        From dense scores: a stable descending sort (ties: smaller column first). From top-K:
        the file's order; ``k`` larger than K gives the K available columns.
        """
        if self.scores is not None:
            # here, not at the top: harness.metrics.hierarchical imports this module
            from harness.metrics.hierarchical import ranked_from_scores

            scores = np.asarray(self.scores)
            if scores.ndim != 2:
                raise MetricError(
                    "Expected `scores` to be a 2D array of shape (n_images, n_candidates),"
                    f" but got shape {scores.shape}"
                )
            return ranked_from_scores(scores, min(k, scores.shape[1]))
        assert self.topk_indices is not None
        return self.topk_indices[:, :k]


@dataclass(frozen=True)
class MetricResult:
    """A metric's value, JSON-serializable details, and how to resample it.

    ``decomposition`` expresses the value as a reduction of per-image values (for bootstrap
    intervals and for streaming over chunks); ``resample`` recomputes the value on resamples of
    the images (for metrics that are not such reductions): ``[rows, n]`` image index rows in,
    one value per row out.

    What the record keeps for paired tests between runs is the class values of
    ``decomposition`` unless one of two fields says otherwise: ``ratio`` (a numerator and a
    denominator column per image, over every image: a ratio of image means such as mistake
    severity, concatenated over streamed chunks like ``decomposition``) or ``class_values`` (a
    curve area's per-class summaries, :mod:`harness.metrics.comparison`).
    """

    value: float
    details: dict[str, Any] = field(default_factory=dict)
    decomposition: Decomposition | None = None
    resample: Callable[[np.ndarray], np.ndarray] | None = None
    ratio: Decomposition | None = None
    class_values: RunClassValues | None = None


class MetricParams(BaseModel):
    """Base of every metric's parameter model: unknown parameters are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Metric:
    name: str
    version: str
    compute: Callable[[MetricInput, Any], MetricResult]
    params: type[MetricParams]
    settings: frozenset[str]
    higher_is_better: bool
    bounds: tuple[float, float]
    description: str
    averaged_over: AveragedOver
    group: MetricGroup  # the site's column group (score tables' column chooser)
    figure: FigureKind | None = None  # what the site draws from the details, if anything
    # A column header in the literature's tables (GBU's u, s, H: the site's cross-benchmark
    # table) and what it stands for; "" for a metric without one.
    short_name: str = ""
    short_description: str = ""
    # Whether a score below chance (k / candidates, a per-class mean) is warned about.
    checked_against_chance: bool = False
    # Whether the score is 0 by design for a method that predicts seen classes only (GZSL's
    # unseen accuracy and H): not warned about for a submission that declares ``seen_only``.
    zero_for_seen_only: bool = False
    averaging_note: str = ""  # what the mean runs over exactly, when more than the unit says
    # The glossary (``zsl metrics describe`` and the site's glossary.html read these): the
    # definition as a formula in plain text, and the paper it comes from.
    formula: str = ""
    reference: str = ""
    inputs: frozenset[str] = frozenset({"dense", "topk"})
    needs_hierarchy: bool = False
    needs_validation: bool = False
    chunkable: bool = True

    @property
    def averaging(self) -> str:
        """The averaging unit in words, with the metric's own note (CLI, column tooltips)."""
        text = AVERAGING_TEXT[self.averaged_over]
        return f"{text}; {self.averaging_note}" if self.averaging_note else text

    @property
    def percent(self) -> bool:
        """Whether values are fractions shown as percentages: from the declared bounds, never
        from the values of the runs at hand (a unit must not change when a run is added)."""
        return self.bounds == (0.0, 1.0)

    def __call__(self, data: MetricInput, params: MetricParams | None = None) -> MetricResult:
        if data.kind not in self.inputs:
            raise MetricError(
                f"Expected {' or '.join(sorted(self.inputs))} predictions for metric"
                f" '{self.name}', but got {data.kind} predictions"
            )
        return self.compute(data, params if params is not None else self.params())


metrics: Registry[Metric] = Registry("metric")


def register_metric(
    name: str,
    *,
    version: str,
    averaged_over: AveragedOver,
    group: MetricGroup,
    figure: FigureKind | None = None,
    short_name: str = "",
    short_description: str = "",
    checked_against_chance: bool = False,
    zero_for_seen_only: bool = False,
    averaging_note: str = "",
    formula: str = "",
    reference: str = "",
    params: type[MetricParams] = MetricParams,
    settings: tuple[str, ...] = ("zsl", "gzsl"),
    higher_is_better: bool = True,
    bounds: tuple[float, float] = (0.0, 1.0),
    inputs: tuple[str, ...] = ("dense", "topk"),
    needs_hierarchy: bool = False,
    needs_validation: bool = False,
    chunkable: bool = True,
) -> Callable[[Callable[[MetricInput, Any], MetricResult]], Metric]:
    """Register ``compute`` under ``name``; its docstring's first line becomes the description.

    ``averaged_over`` is required: every metric declares whether its value is a mean over test
    images or over classes (``averaging_note`` adds what the unit alone does not say).
    ``formula`` and ``reference`` are the metric's glossary entry (every built-in has both;
    a test checks it).

    ``group`` is required too: the column group the site files the metric's column under
    (:data:`METRIC_GROUPS`). ``figure`` names the chart the site draws from the metric's
    details (:data:`FIGURE_KINDS`; None: none), ``short_name`` and ``short_description`` its
    header in the literature's tables, ``checked_against_chance`` whether a score below
    chance is warned about, and ``zero_for_seen_only`` whether it is 0 by design for a
    seen-class baseline (no warning then). The site, the glossary, the CSV tables and ``zsl
    metrics`` read these from the registry only: registering a metric is all adding one takes.
    """
    if averaged_over not in AVERAGING_TEXT:
        raise ValueError(
            f"Expected `averaged_over` of metric '{name}' to be one of {sorted(AVERAGING_TEXT)},"
            f" but got {averaged_over!r}"
        )
    if group not in METRIC_GROUPS:
        raise ValueError(
            f"Expected `group` of metric '{name}' to be one of {list(METRIC_GROUPS)},"
            f" but got {group!r}"
        )
    if figure is not None and figure not in FIGURE_KINDS:
        raise ValueError(
            f"Expected `figure` of metric '{name}' to be None or one of {list(FIGURE_KINDS)},"
            f" but got {figure!r}"
        )
    if bool(short_name) != bool(short_description):
        raise ValueError(
            f"Expected `short_name` and `short_description` of metric '{name}' to be given"
            f" together, but got short_name={short_name!r}, short_description={short_description!r}"
        )

    def decorate(compute: Callable[[MetricInput, Any], MetricResult]) -> Metric:
        doc = (compute.__doc__ or "").strip().splitlines()
        metric = Metric(
            name=name,
            version=version,
            compute=compute,
            params=params,
            settings=frozenset(settings),
            higher_is_better=higher_is_better,
            bounds=bounds,
            description=doc[0] if doc else name,
            averaged_over=averaged_over,
            group=group,
            figure=figure,
            short_name=short_name,
            short_description=short_description,
            checked_against_chance=checked_against_chance,
            zero_for_seen_only=zero_for_seen_only,
            averaging_note=averaging_note,
            formula=formula,
            reference=reference,
            inputs=frozenset(inputs),
            needs_hierarchy=needs_hierarchy,
            needs_validation=needs_validation,
            chunkable=chunkable,
        )
        return metrics.add(name, metric)

    return decorate
