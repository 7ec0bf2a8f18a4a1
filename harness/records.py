"""The run record: everything a score needs to be reproduced, as one JSON-serializable object.

The scorer produces a :class:`RunRecord`; the store persists it; the site renders it. The record
binds the benchmark hash, the package hash, the prediction hashes, the harness and metric
versions, the runner, the environment and the timings.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_serializer,
)

from harness.audit import LeakageAudit
from harness.core.identity import identity_text
from harness.hyperparameters import Hyperparameters, check_hyperparameters
from harness.submission.package import BIBTEX_MAX_CHARS, README_MAX_CHARS

__all__ = [
    "RUN_METADATA_FIELDS",
    "SCALE_SETTINGS",
    "BenchmarkInfo",
    "ClassCurve",
    "ClassValues",
    "EmbeddingProvenance",
    "Interval",
    "RawInputs",
    "RawOrigin",
    "RunKey",
    "RunRecord",
    "ScoreEntry",
    "ScoredClass",
    "Setting",
    "SubmissionInfo",
    "result_payload",
    "run_key",
]

Setting = Literal["zsl", "gzsl"]
#: The prediction settings of the scale images (:mod:`harness.data.scale_images`): the main
#: fit's, then the validation fit's. Here, not in the metrics, so spec and data share it.
SCALE_SETTINGS = ("scale", "scale_val")
#: A run's identity: benchmark id, benchmark version, submission name, submission version.
RunKey = tuple[str, int, str, str]
_STATE_HASH = re.compile(r"sha256:[0-9a-f]{64}")


class Interval(BaseModel):
    """A bootstrap confidence interval of a score."""

    model_config = ConfigDict(extra="forbid")

    lo: float
    hi: float
    level: float = 0.95
    scheme: str = Field(description="'images_within_class' or 'classes'")
    n_boot: int
    method: str = Field("percentile", description="how the interval was read off the samples")


class ClassCurve(BaseModel):
    """Per class and per curve point, the class's share of the point: resampling classes
    recomputes every point, hence the curve and its area (:class:`ClassValues` ``darts_area``
    and ``seen_unseen_area``).

    The points are a fixed selection: every DARTS target reached on validation (at most 14), or
    at most :data:`harness.metrics.comparison.CURVE_CELLS` / classes of the calibrated-stacking
    intervals (AUSUC), evenly spaced over the curve with both ends kept.
    """

    model_config = ConfigDict(extra="forbid")

    # One text row per class (numbers separated by spaces): a record file is indented JSON,
    # where a list of numbers would take a line per number.
    hits: list[Annotated[str, StringConstraints(pattern=r"^(\d+( \d+)*)?$")]] = Field(
        description="a row per class: its test images that are correct at each point"
    )
    gains: list[Annotated[str, StringConstraints(pattern=r"^([0-9.]+( [0-9.]+)*)?$")]] | None = (
        Field(
            None,
            description="darts_area: a row per class: the mean normalised information gain of its"
            " images at each point (10 decimals)",
        )
    )
    n_points: int = Field(
        description="points of the full curve; more than the kept ones when they were subsampled"
    )


class ClassValues(BaseModel):
    r"""Per-class summaries of a score's per-image values: what a paired test between two runs
    needs.

    Runs of one benchmark version score the same images, so two records' class values line up
    class by class. Resampling classes (within their groups) with the same draws for every run
    gives the class-level paired bootstrap of :mod:`harness.metrics.comparison`; per-image values
    are not kept (a record would grow with the test set).

    ``combine`` says how the summaries reduce to the score: ``class_mean``, ``image_mean`` and
    ``harmonic_of_groups`` from ``means``; ``ratio_of_means`` (mistake severity) as
    :math:`\sum_c n_c \bar a_c / \sum_c n_c \bar b_c` from ``means`` (:math:`\bar a`) and
    ``denominators`` (:math:`\bar b`); ``darts_area`` and ``seen_unseen_area`` (AUSUC) from
    ``curve``: every point recomputed from the classes, then the area.
    """

    model_config = ConfigDict(extra="forbid")

    combine: Literal[
        "class_mean",
        "image_mean",
        "harmonic_of_groups",
        "ratio_of_means",
        "darts_area",
        "seen_unseen_area",
    ]
    classes: list[int] = Field(description="candidate columns that have test images, ascending")
    counts: list[int] = Field(description="number of test images of each class")
    groups: list[int] = Field(description="group id of each class (GZSL: 0 seen, 1 unseen)")
    means: list[float] = Field(
        default_factory=list,
        description="mean per-image value of each class (ratio_of_means: of the numerator; "
        "empty for the curve areas)",
    )
    denominators: list[float] | None = Field(
        None, description="ratio_of_means: mean per-image denominator of each class"
    )
    curve: ClassCurve | None = Field(
        None, description="darts_area, seen_unseen_area: each class's share of every curve point"
    )

    @model_serializer(mode="wrap")
    def _without_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The fields of the newer reductions are left out where unused, so the class values of
        # the mean reductions serialize as they did before them (records stay byte-identical).
        data: dict[str, Any] = handler(self)
        for name in ("denominators", "curve"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def per_class_scores(self) -> bool:
        """Whether ``means`` are the classes' own scores (a per-class bar chart can show them)."""
        return self.combine in ("class_mean", "image_mean", "harmonic_of_groups")


class ScoreEntry(BaseModel):
    """One metric's result in one setting."""

    model_config = ConfigDict(extra="forbid")

    setting: Setting
    metric: str = Field(description="name as written in the spec, with parameters, e.g. 'top1'")
    function: str = Field(description="registry name of the metric function")
    version: str
    value: float
    higher_is_better: bool = True
    details: dict[str, Any] = Field(default_factory=dict)
    interval: Interval | None = None
    class_values: ClassValues | None = Field(
        None, description="per-class means for paired tests; None when the metric has none"
    )


class ScoredClass(BaseModel):
    """A class with test images: its name, its prediction column per setting, and (unseen
    classes, with a hierarchy) the nearest training class and how it is related.

    What a submission page needs to name the bars of :attr:`ClassValues.classes` (candidate
    columns) and say how near each unseen class is to what the model trained on
    (:func:`harness.data.structure.nearest_training_classes`; training classes are the seen
    classes, train and val).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    unseen: bool
    columns: dict[str, int] = Field(description="setting -> candidate column of this class")
    nearest: str | None = Field(None, description="id of the nearest training class")
    nearest_name: str | None = None
    hops: int | None = Field(None, description="hops to it; None when none is connected")
    relation: str | None = Field(
        None, description="parent, child, sibling, ancestor, descendant, relative, unconnected"
    )


class FeatureProvenance(BaseModel):
    """How a harness-extracted feature set was made (``zsl features extract``)."""

    model_config = ConfigDict(extra="forbid")

    set_hash: str
    backbone: str
    layer: str
    weights: dict[str, str] = Field(description="source, name and sha256 of the weights file")
    pretrained_on: dict[str, Any] = Field(description="what the weights were trained on")
    preprocessing: dict[str, Any] = Field(description="every step, image file to network input")
    preprocessing_summary: str = Field("", description="the same steps in words")
    precision: str
    device: str
    images: dict[str, Any] = Field(description="counts and hashes of the images extracted")
    skipped: int = Field(0, description="unreadable images left out (--skip-bad)")
    versions: dict[str, str] = Field(default_factory=dict)


class PromptTemplates(BaseModel):
    """The prompt templates of a clip-text class embedding (``zsl embeddings build
    --templates``): enough to name them and tell two sets apart."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the preset's name, or the templates file's name")
    count: int = Field(ge=1)
    sha256: str = Field(description="hash of the templates, in order")


class EmbeddingProvenance(BaseModel):
    """How a class-embedding set was made (``zsl embeddings build``)."""

    model_config = ConfigDict(extra="forbid")

    set_hash: str
    model: str | None = None
    model_files: dict[str, str] = Field(default_factory=dict, description="file -> sha256")
    text: str | None = Field(None, description="what was embedded per class")
    arch: str | None = Field(
        None, description="the text tower's open_clip architecture (clip-text)"
    )
    templates: PromptTemplates | None = Field(
        None, description="the prompt templates averaged per class (clip-text)"
    )

    @model_serializer(mode="wrap")
    def _without_prompts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Embeddings of models without prompts serialize as before these keys existed, so their
        # records keep their ids.
        data: dict[str, Any] = handler(self)
        for name in ("arch", "templates"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class BenchmarkProvenance(BaseModel):
    """The harness-made sets a benchmark was frozen from: a feature set (adapter
    ``feature-set``) and class-embedding sets (``feature-set``, or ``imagenet``'s
    ``embedding_sets``)."""

    model_config = ConfigDict(extra="forbid")

    features: FeatureProvenance | None = Field(
        None, description="None: the features were brought as files"
    )
    class_embeddings: dict[str, EmbeddingProvenance] = Field(default_factory=dict)


#: Where a benchmark's raw inputs came from (docs/data.md, "Where the raw inputs came from"):
#: ``release`` a dataset's published release (xlsa17), ``synthetic`` a stand-in the harness made
#: for a release (``zsl data synthetic-xlsa17``: real split files, generated features),
#: ``generated`` a benchmark the harness generates whole (the demo), ``own`` data the user made or
#: brought (features of their images, features brought as files).
RawOrigin = Literal["release", "synthetic", "generated", "own"]


class RawInputs(BaseModel):
    """Where a benchmark's raw inputs came from and whether they were checked, decided when it
    was frozen (:mod:`harness.data.sources`) and shown beside every score of its runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    origin: RawOrigin
    verified: bool = Field(
        description="the inputs matched a checksum pinned in the spec (data.checksum, or the"
        " adapter's own, such as the xlsa17 archive's data.params.checksum)"
    )
    how: str = Field(description="how the origin and the check were decided, in words")
    files: dict[str, str] = Field(
        default_factory=dict,
        description="source file, relative to the folder it was read from -> 'sha256:<hex>'",
    )


class BenchmarkInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    version: int
    title: str
    hash: str
    spec_hash: str
    primary: dict[str, str] = Field(default_factory=dict, description="setting -> metric key")
    n_classes: int = 0
    n_seen: int = 0
    n_unseen: int = 0
    structure: dict[str, Any] = Field(
        default_factory=dict,
        description="structure diagnostics of the split in the hierarchy (structural ratio, "
        "hops from each test class to the nearest training class); empty without a hierarchy",
    )
    test_classes: list[ScoredClass] = Field(
        default_factory=list,
        description="every class with test images, in class order (empty in older records)",
    )
    family: str | None = Field(
        None,
        description="the benchmark family this benchmark belongs to (the validation variants of"
        " one dataset and split, GBU Fig. 3): the id of its main member; None: no family",
    )
    family_member: str | None = Field(
        None, description="this benchmark's short label within its family, e.g. 'val2'"
    )
    provenance: BenchmarkProvenance | None = Field(
        None,
        description="the harness-made feature set (weights sha256, preprocessing) and class"
        " embeddings the benchmark was frozen from; None: features brought as files",
    )
    raw_inputs: RawInputs | None = Field(
        None, description="where the raw inputs came from; None: recorded before it was kept"
    )
    experimental: bool = Field(
        False,
        description="the spec marks the benchmark experimental (a user's own or toy set): its"
        " runs stay out of the cross-benchmark tables unless the reader opts in",
    )

    @model_serializer(mode="wrap")
    def _without_family(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A benchmark outside any family, or without harness-made features, serializes as it
        # did before those keys existed, so its records (the demo's) stay byte-identical and
        # keep their ids.
        data: dict[str, Any] = handler(self)
        for name in ("family", "family_member", "provenance", "raw_inputs"):
            if data.get(name) is None:
                data.pop(name, None)
        if not data.get("experimental"):
            data.pop("experimental", None)
        return data

    @field_validator("id")
    @classmethod
    def _one_spelling(cls, value: str) -> str:
        # An id names pages and record files: one NFC spelling, nothing invisible in it.
        return identity_text(value, "benchmark id")


class SubmissionInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    kind: Literal["predictions", "model"]
    package_hash: str
    authors: list[str] = Field(default_factory=list)
    paper: str | None = None
    url: str | None = None
    code: str | None = Field(None, description="where the method's code lives")
    bibtex: str | None = Field(None, max_length=BIBTEX_MAX_CHARS)
    readme: str = Field(
        "", max_length=README_MAX_CHARS, description="the package's README (head kept)"
    )
    description: str = ""
    declarations: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name", "version")
    @classmethod
    def _one_spelling(cls, value: str, info: ValidationInfo) -> str:
        # The run's identity: "café" composed and decomposed is one submission, and a name may
        # not hide characters (bidi overrides, zero-width spaces) from the reader.
        return identity_text(value, f"submission {info.field_name}")

    @field_validator("authors")
    @classmethod
    def _authors_in_nfc(cls, value: list[str]) -> list[str]:
        return [identity_text(a, f"author {i + 1}", author=True) for i, a in enumerate(value)]


class RunRecord(BaseModel):
    """A scored run of one submission on one benchmark version."""

    model_config = ConfigDict(extra="forbid")

    benchmark: BenchmarkInfo
    submission: SubmissionInfo
    predictions_hashes: dict[str, str] = Field(description="setting -> sha256 of the scores")
    harness_version: str
    runner: str
    environment: dict[str, str] = Field(default_factory=dict)
    timings: dict[str, float] = Field(
        default_factory=dict,
        description="step -> seconds: the harness's steps (prepare, validate, run, score) and, "
        "for a model, the worker's (fit_validation, fit_main, predict_<setting>, check_<fit>); "
        "plus peak_rss_mib, the largest peak resident memory of the worker and its model "
        "processes in MiB (the one number of the run's cost that is not seconds; records "
        "stored before these were kept have the harness's steps only)",
    )
    logs: dict[str, str] = Field(
        default_factory=dict,
        description="the runner's exit reason and the model's stdout/stderr (head and tail kept)",
    )
    leakage: LeakageAudit | None = Field(
        None,
        description="leakage audit of the test classes against the backbone's pre-training",
    )
    hyperparameters: dict[str, Hyperparameters] = Field(
        default_factory=dict,
        description="fit ('main', 'validation') -> what the model chose and exposed after that "
        "fit (harness.hyperparameters); empty when it exposed nothing",
    )
    model_state: dict[str, str] = Field(
        default_factory=dict,
        description="fit ('main', 'validation') -> content hash of the state the fit saved and "
        "every prediction pass loaded (harness.runners.state); empty for prediction files and "
        "runs stored before fits were separate runs",
    )
    scores: list[ScoreEntry]
    created_at: datetime

    @field_validator("model_state")
    @classmethod
    def _state_hashes(cls, value: dict[str, str]) -> dict[str, str]:
        # A record is untrusted input too: fits by name, hashes by form.
        for fit, digest in value.items():
            if fit not in ("main", "validation") or not _STATE_HASH.fullmatch(digest):
                raise ValueError(f"model_state[{fit[:40]!r}]: not a fit and a sha256 hash")
        return value

    @field_validator("hyperparameters")
    @classmethod
    def _bounded(cls, value: dict[str, Hyperparameters]) -> dict[str, Hyperparameters]:
        # A record is untrusted input too: the same limits as the worker's.
        return {
            fit: check_hyperparameters(v, f"hyperparameters[{fit!r}]") for fit, v in value.items()
        }

    def score(self, setting: str, metric: str) -> ScoreEntry | None:
        for entry in self.scores:
            if entry.setting == setting and entry.metric == metric:
                return entry
        return None


def run_key(record: RunRecord) -> RunKey:
    """The run's identity (and the store's order): benchmark id and version, submission name and
    version. The store keeps one run per key; a record file is named by it."""
    return (
        record.benchmark.id,
        record.benchmark.version,
        record.submission.name,
        record.submission.version,
    )


#: Fields of a record that say when, where and how fast a run happened (and what the model
#: printed), not what it measured: two runs of one package on the same data and platform differ
#: in these and nothing else. Everything else is the *result* (:func:`result_payload`): the
#: benchmark and its hash, the submission and its package hash, the prediction hashes, the
#: scores with their metric versions, the harness version, the runner, the leakage audit and
#: the hyperparameters. An exported record file is rewritten only when its result changes
#: (:func:`harness.results.records_io.write_records`), and CI compares results only
#: (:mod:`harness.ci.diff`).
RUN_METADATA_FIELDS = frozenset({"created_at", "timings", "environment", "logs"})


def result_payload(record: RunRecord) -> dict[str, Any]:
    """The record's canonical JSON (what a record file holds) without
    :data:`RUN_METADATA_FIELDS`: equal for two records exactly when they hold the same result."""
    payload: dict[str, Any] = record.model_dump(mode="json")
    for name in RUN_METADATA_FIELDS:
        payload.pop(name, None)
    return payload
