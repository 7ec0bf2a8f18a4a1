"""What the registered metrics share: the helpers that turn a :class:`MetricInput` into the
functional API's arguments and a result's decomposition.

Each family module ends with its registrations (``@register_metric`` wrappers from
:class:`MetricInput` to its functions, each returning a JSON-serializable :class:`MetricResult`
with a per-image decomposition, for bootstrap intervals and streamed top-K scoring, or a
resampling function); what more than one family uses lives here, once. A wrapper never
computes anything the functional API does not, it only selects inputs and shapes outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics.base import MetricInput
from harness.metrics.decomposition import Decomposition

if TYPE_CHECKING:
    from harness.metrics.flat import PerClassAccuracy


def class_ids(data: MetricInput) -> list[Any]:
    candidates = np.asarray(data.candidates)
    scores = data.scores
    n = scores.shape[1] if scores is not None and np.ndim(scores) == 2 else candidates.shape[0]
    if candidates.ndim != 1 or candidates.shape[0] != n:
        raise MetricError(
            f"Expected `candidates` to list one class id per score column ({n}), "
            f"but got shape {candidates.shape}."
        )
    return candidates.tolist()


def require_setting(data: MetricInput, name: str, settings: tuple[str, ...]) -> None:
    if data.setting not in settings:
        raise MetricError(
            f"Expected setting to be one of {list(settings)} for metric '{name}', "
            f"but got '{data.setting}'."
        )


def per_class_by_id(details: PerClassAccuracy, ids: list[Any]) -> dict[str, Any]:
    """A per-class accuracy's record details, keyed by candidate class ids, not columns."""
    return {
        "per_class": {
            str(ids[column]): value
            for column, value in zip(details.classes, details.per_class, strict=True)
        },
        "excluded_classes": [ids[column] for column in details.excluded_classes],
        "n_images": details.n_images,
    }


def _mean(
    values: np.ndarray,
    data: MetricInput,
    mask: np.ndarray | None = None,
    *,
    combine: Literal["class_mean", "image_mean"],
) -> Decomposition:
    """The decomposition of a mean of per-image ``values`` (those under ``mask``, if given)."""
    keep = slice(None) if mask is None else mask
    return Decomposition(
        values=np.asarray(values, dtype=np.float64)[keep],
        classes=np.asarray(data.y_true)[keep],
        n_classes=data.n_candidates,
        combine=combine,
    )


def class_mean(
    values: np.ndarray, data: MetricInput, mask: np.ndarray | None = None
) -> Decomposition:
    return _mean(values, data, mask, combine="class_mean")


def image_mean(
    values: np.ndarray, data: MetricInput, mask: np.ndarray | None = None
) -> Decomposition:
    return _mean(values, data, mask, combine="image_mean")


def gzsl_h(correct: np.ndarray, data: MetricInput) -> Decomposition:
    """H as the harmonic mean of the seen and the unseen per-class means of ``correct``."""
    return Decomposition.for_gzsl(
        correct.astype(np.float64), np.asarray(data.y_true), seen=np.asarray(data.seen, dtype=bool)
    )


def hierarchy_of(data: MetricInput, name: str) -> tuple[Hierarchy, np.ndarray]:
    if data.hierarchy is None or data.candidate_nodes is None:
        raise MetricError(f"Expected a hierarchy for metric '{name}', but the benchmark has none")
    return data.hierarchy, np.asarray(data.candidate_nodes)


#: The k of the top-k and hp@k curves a run's details hold (and the site draws), where the
#: candidates (and a top-K file's K) allow: the one or two k a spec scores make a line, not a
#: curve.
CURVE_KS = (1, 2, 5, 10, 20)


def curve_ks(data: MetricInput, k: int) -> list[int]:
    """:data:`CURVE_KS` below the number of candidates (ranking every candidate puts all of them
    in the top k: hp@k is then 1 whatever the scores) and up to K of top-K predictions, and
    ``k``."""
    n, K = data.n_candidates, None
    if data.topk_indices is not None:
        K = int(np.shape(data.topk_indices)[1])
    return sorted({k, *(c for c in CURVE_KS if c < n and (K is None or c <= K))})


def validation_of(data: MetricInput, name: str) -> MetricInput:
    if data.validation is None or data.validation.scores is None:
        raise MetricError(
            f"Expected validation predictions for metric '{name}', but got none; the bundle's"
            " validation fit provides them"
        )
    return data.validation


def fit_scales(data: MetricInput, val: MetricInput, name: str) -> tuple[float, float]:
    """(validation fit's, main fit's) score scale, which carry a value chosen on the validation
    fit's scores to the main fit's (:mod:`harness.metrics.score_scale`)."""
    if val.score_scale is None or data.score_scale is None:
        raise MetricError(
            f"Expected both fits' score scales for metric '{name}' (their predictions on the"
            " scale images: settings 'scale' and 'scale_val'), but got none"
        )
    return val.score_scale, data.score_scale
