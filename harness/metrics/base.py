"""What a metric is to the harness: a pure function plus the facts the scorer and site need.

The functional API (``harness.metrics.flat`` etc.) takes arrays and returns numbers. A registered
:class:`Metric` wraps one of those functions for the scorer: it receives a :class:`MetricInput`
built from the frozen benchmark and the predictions, and returns a JSON-serializable
:class:`MetricResult`. Changing what a metric computes bumps its ``version``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.registry import Registry

if TYPE_CHECKING:
    from harness.hierarchy import Hierarchy

Setting = Literal["zsl", "gzsl"]


@dataclass(frozen=True)
class MetricInput:
    """Everything a metric may read for one (benchmark, setting).

    ``y_true[i]`` is the column of image i's true class among ``candidates``; ``seen[j]`` says
    whether candidate column j is a seen (training) class.
    """

    setting: Setting
    y_true: np.ndarray
    scores: np.ndarray
    candidates: np.ndarray
    seen: np.ndarray
    hierarchy: Hierarchy | None = None


@dataclass(frozen=True)
class MetricResult:
    value: float
    details: dict[str, Any] = field(default_factory=dict)


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

    def __call__(self, data: MetricInput, params: MetricParams | None = None) -> MetricResult:
        return self.compute(data, params if params is not None else self.params())


metrics: Registry[Metric] = Registry("metric")


def register_metric(
    name: str,
    *,
    version: str,
    params: type[MetricParams] = MetricParams,
    settings: tuple[str, ...] = ("zsl", "gzsl"),
    higher_is_better: bool = True,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> Callable[[Callable[[MetricInput, Any], MetricResult]], Metric]:
    """Register ``compute`` under ``name``; its docstring's first line becomes the description."""

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
        )
        return metrics.add(name, metric)

    return decorate
