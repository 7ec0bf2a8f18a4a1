"""Benchmark specs: YAML files validated into pydantic models.

A spec is data, not code: it names the data adapter that produces the raw arrays, the feature
set and what its backbone saw, the class embeddings, the hierarchy, the split variant, the
settings, the metrics (registry names with parameters) and the primary metric per setting.

Every problem is reported at once, each as ``file:line: key.path: message``. Unknown keys are
errors, YAML is loaded safely, and duplicate keys are refused.

A spec may start from a *spec base* with ``extends: _<name>.yaml`` (lm-evaluation-harness's
``include:``, one level deep).

See docs/scoring.md.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.class_embedding import DEFAULT_KIND, EmbeddingKind
from harness.core import yamlio
from harness.core.errors import SpecError
from harness.core.hashing import file_sha256, json_sha256
from harness.features.backbones import (
    is_weights_name,
    named_weights_pretrained_on,
    open_clip_arch,
)
from harness.features.preprocess import PRESETS, Preprocessing
from harness.metrics import metrics
from harness.metrics.base import MetricParams
from harness.records import SCALE_SETTINGS, Setting

Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=64)]
Checksum = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
MetricKey = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9@._-]*$", max_length=32)
]
WNID = Annotated[str, StringConstraints(pattern=r"^n\d{8}$")]
WebCorpus = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100, pattern=r"^\S")
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataSource(_Strict):
    """Where the raw arrays come from: a registered adapter and its parameters."""

    adapter: str = Field(description="registered data adapter, e.g. 'demo' or 'xlsa17'")
    params: dict[str, Any] = Field(default_factory=dict, description="adapter parameters")
    checksum: Checksum | None = Field(
        None, description="expected benchmark hash of the frozen artifacts ('sha256:<hex>')"
    )


class PretrainedOn(_Strict):
    """What the feature backbone was trained on, for the leakage audit: a class set, or a web
    corpus (image-text pairs, which no class list describes: the audit then says so)."""

    class_set: str | None = Field(None, description="named class set, e.g. 'ilsvrc2012' or 'none'")
    wnids: list[WNID] | None = Field(None, description="explicit WordNet ids")
    web: WebCorpus | None = Field(
        None,
        description="a named web corpus, e.g. 'LAION-2B' (vision-language pre-training): not"
        " auditable against a class list",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> PretrainedOn:
        given = [name for name in ("class_set", "wnids", "web") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'class_set', 'wnids' or 'web'"
                + (f"; got {' and '.join(given)}" if given else "")
            )
        return self

    @model_serializer(mode="wrap")
    def _without_web(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Specs that declare no web corpus hash as before the key existed (their frozen
        # benchmarks and records keep their hashes).
        data: dict[str, Any] = handler(self)
        if data.get("web") is None:
            data.pop("web", None)
        return data


class ExtractSpec(_Strict):
    """Features the harness extracts itself (`zsl features extract`, run by `zsl data prepare`
    and cached by the inputs' hashes): which images, which torchvision backbone and weights,
    how each image is preprocessed. See :mod:`harness.features`."""

    images: str = Field(
        description="folder of class folders, or an image list ('path<TAB>class_id[<TAB>box]'),"
        " relative to the spec file"
    )
    backbone: str = Field(
        "resnet101",
        description="torchvision classification model name, or open_clip:<arch> (the image"
        " tower of an open_clip model, e.g. open_clip:ViT-B-32)",
    )
    layer: str | None = Field(
        None, description="node to read (default: the input of the classifier head)"
    )
    weights: str = Field(
        description="weights file (relative to the spec file) or torchvision weights name"
        " (IMAGENET1K_V2, DEFAULT); for open_clip:<arch>, a file or a pretrained tag in the"
        " open_clip cache"
    )
    weights_sha256: Checksum | None = Field(
        None, description="the weights file's sha256 ('sha256:<hex>'); other weights are refused"
    )
    pretrained_on: PretrainedOn | None = Field(
        None,
        description="what a weights *file* was trained on (torchvision weights names need none:"
        " they are ILSVRC-2012's)",
    )
    preprocessing: str | Preprocessing | None = Field(
        None,
        description="a preset (imagenet-eval, whole-image-224, box-224) or the steps; default:"
        " the torchvision weights' own evaluation transform, else imagenet-eval",
    )
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"
    batch_size: int = Field(64, gt=0, le=4096)
    skip_bad: bool = Field(
        False, description="leave out (and record) images that cannot be read, instead of stopping"
    )

    @field_validator("preprocessing", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        # Validate the steps here, so a mistake is reported as itself rather than as "not a
        # string" (the first member of the union)
        if isinstance(value, dict):
            try:
                return Preprocessing.model_validate(value)
            except ValidationError as err:
                first = err.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                message = str(first["msg"]).removeprefix("Value error, ")
                raise ValueError(f"{where + ': ' if where else ''}{message}") from None
        return value

    @field_validator("preprocessing")
    @classmethod
    def _known_preset(cls, value: str | Preprocessing | None) -> str | Preprocessing | None:
        if isinstance(value, str) and value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; one of {', '.join(sorted(PRESETS))}")
        return value

    @model_validator(mode="after")
    def _declared_training(self) -> ExtractSpec:
        # torchvision weights names carry their training set; open_clip's never do
        named = is_weights_name(self.weights) and open_clip_arch(self.backbone) is None
        if named:
            named_weights_pretrained_on(self.weights)  # a name torchvision's ImageNet weights use
        if named and self.pretrained_on is not None:
            raise ValueError(
                "torchvision weights names carry what they were trained on (ILSVRC-2012);"
                " 'pretrained_on' is for weights files"
            )
        if not named and self.pretrained_on is None:
            raise ValueError(
                f"weights {self.weights!r}: declare what it was trained on in"
                " 'pretrained_on' (class_set: ilsvrc2012, none, ...; wnids; or web: LAION-2B,"
                " ... for web-scale image-text pre-training)"
            )
        return self

    def weights_pretrained_on(self) -> PretrainedOn:
        """What the weights were trained on: a file's declaration, or a torchvision name's."""
        if self.pretrained_on is not None:
            return self.pretrained_on
        return PretrainedOn(class_set=named_weights_pretrained_on(self.weights))


class FeatureSpec(_Strict):
    name: str
    dim: int = Field(gt=0)
    backbone: str
    pretrained_on: PretrainedOn = Field(
        description="what the backbone was trained on; with 'extract' it comes from the weights"
    )
    extract: ExtractSpec | None = Field(
        None, description="extract the features from images (adapter 'feature-set')"
    )

    @model_validator(mode="before")
    @classmethod
    def _pretrained_from_weights(cls, data: Any) -> Any:
        # Harness-extracted features: what the backbone saw is a property of the weights, so
        # the leakage audit needs no hand declaration (one given must agree).
        if not isinstance(data, dict) or not isinstance(data.get("extract"), dict):
            return data
        try:
            extract = ExtractSpec.model_validate(data["extract"])
        except ValidationError:
            # Reported at 'extract' by the field's own validation; a stand-in keeps a second,
            # misleading "pretrained_on: field required" out of the report (it never survives:
            # the spec is refused for 'extract').
            return (
                data
                if "pretrained_on" in data
                else {**data, "pretrained_on": {"class_set": "none"}}
            )
        derived = extract.weights_pretrained_on().model_dump(exclude_none=True)
        given = data.get("pretrained_on")
        if given is None:
            return {**data, "pretrained_on": derived}
        if given != derived:
            raise ValueError(
                f"pretrained_on: {given} contradicts the extraction's weights, trained on"
                f" {derived}; leave pretrained_on out (it comes from the weights)"
            )
        return data


class AuditSpec(_Strict):
    """How the leakage audit relates test classes to the backbone's pre-training classes.

    The audit reports every relation (:mod:`harness.audit`): ``same`` class, a pre-training class
    that is a ``hyponym`` of the test class (the backbone saw instances of it), a ``hypernym``
    within ``related_within`` hops, a ``sibling`` under a shared hypernym within
    ``related_within`` hops of both. ``match`` chooses which relations the badge and summary
    count as leakage.
    """

    match: Literal["exact", "descendants", "ancestors", "both"] = Field(
        "descendants",
        description="relations counted as leakage: exact = same class only; descendants = same"
        " or a pre-training hyponym (the default: the backbone saw instances of the class);"
        " ancestors = same or a hypernym; both = all three",
    )
    related_within: int = Field(
        1,
        ge=0,
        le=10,
        description="hops bounding the hypernym and sibling relations (WordNet hypernym edges):"
        " 1 = a direct parent, and siblings under a shared direct parent",
    )
    wordnet_map: str | None = Field(
        None,
        description="class map TSV (relative to the spec file) giving each class name its"
        " WordNet synset, for classes whose ids are not WordNet ids (CUB species, SUN scenes)",
    )


class ClassEmbeddingSpec(_Strict):
    name: Slug
    dim: int = Field(gt=0)
    description: str = ""
    default: bool = False
    kind: EmbeddingKind = Field(
        DEFAULT_KIND,
        description="what the embedding is: attributes (the default), word-vectors, sentence,"
        " or clip-text (a vision-language text tower's prompt embeddings, for image features of"
        " the same model); a package declaring a kind runs only where the spec has one",
    )


class HierarchySpec(_Strict):
    """The class hierarchy: a frozen JSON file shipped with the spec, or built by the adapter
    from the raw files the user provides (for taxonomies the project may not redistribute)."""

    source: Literal["file", "adapter"] = "file"
    file: str | None = Field(None, description="frozen hierarchy JSON, relative to the spec file")
    class_to_node: Literal["identity"] = Field(
        "identity", description="class ids are hierarchy node ids (adapters map names to ids)"
    )

    @model_validator(mode="after")
    def _file_for_source(self) -> HierarchySpec:
        if self.source == "file" and self.file is None:
            raise ValueError("hierarchy.source 'file' needs 'file'")
        if self.source == "adapter" and self.file is not None:
            raise ValueError("hierarchy.source 'adapter' takes no 'file'")
        return self


class SplitExpectation(_Strict):
    """Sizes the prepared benchmark must have; a mismatch stops `zsl data prepare`."""

    train_classes: int | None = Field(None, ge=0)
    val_classes: int | None = Field(None, ge=0)
    unseen_classes: int | None = Field(None, ge=0)
    train_images: int | None = Field(None, ge=0)
    val_images: int | None = Field(None, ge=0)
    test_seen_images: int | None = Field(None, ge=0)
    test_unseen_images: int | None = Field(None, ge=0)


class SplitSpec(_Strict):
    variant: str = Field("default", description="adapter-defined split variant")
    expect: SplitExpectation | None = None


class MetricSpec(BaseModel):
    """A metric entry: registry ``name``, result ``key``, ``settings``, and parameters inline.

    Parameters are checked against the registered metric's own parameter model after the spec
    itself is valid (see :func:`_check_metric_params`), once, at load; the entry keeps what that
    check parsed (:attr:`metric_params`), which scoring uses.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    key: MetricKey | None = Field(None, description="result name; defaults to the metric name")
    settings: list[Setting] | None = Field(None, description="defaults to every spec setting")
    _metric_params: MetricParams | None = PrivateAttr(None)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def metric_params(self) -> MetricParams:
        """The parameters parsed by the registered metric's parameter model: kept from the
        spec's load (:func:`parse_spec`); an entry made otherwise parses them on first use."""
        if self._metric_params is None:
            self._metric_params = metrics.get(self.name).params.model_validate(self.params)
        return self._metric_params

    @property
    def result_key(self) -> str:
        return self.key or self.name


def _entry_settings(entry: MetricSpec, spec_settings: Sequence[str]) -> list[str]:
    """An entry's settings: as written, else every spec setting the metric applies to."""
    if entry.settings is not None:
        return list(entry.settings)
    applies = metrics.get(entry.name).settings if entry.name in metrics else set(spec_settings)
    return [s for s in spec_settings if s in applies]


class PredictionFormat(_Strict):
    """Dense ``scores [n_test, n_candidates]``, or top-K ``topk_indices``/``topk_scores [n, K]``
    for huge label spaces (scored in streamed chunks)."""

    format: Literal["dense", "topk"] = "dense"
    k: int | None = Field(None, gt=0, le=1000, description="K of top-K files")

    @model_validator(mode="after")
    def _k_for_topk(self) -> PredictionFormat:
        if self.format == "topk" and self.k is None:
            raise ValueError("format 'topk' needs 'k'")
        if self.format == "dense" and self.k is not None:
            raise ValueError("'k' is only for format 'topk'")
        return self


class Uncertainty(_Strict):
    """Bootstrap intervals attached to every scalar score."""

    scheme: Literal["images_within_class", "classes"] = "images_within_class"
    n_boot: int = Field(1000, ge=0, le=100_000, description="0 turns intervals off")
    level: float = Field(0.95, gt=0, lt=1)
    seed: int = Field(0, ge=0)


FamilyLabel = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=32)]
SpecFileName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*\.yaml$")]


class FamilySpec(_Strict):
    """This benchmark's place in a *benchmark family*: the validation variants of one dataset
    and split (GBU's three validation splits of the proposed split, Fig. 3), run as one job.

    Every member spec declares the same ``id`` (the benchmark id of the family's main member)
    and ``members`` (the spec files of all of them, this one included, in the spec's folder),
    and its own ``member`` label. So any member finds the others (:func:`load_family`), and a
    record says where it belongs (:attr:`harness.records.BenchmarkInfo.family`).
    """

    id: Slug = Field(description="the benchmark id of the family's main member")
    member: FamilyLabel = Field(description="this spec's short label in the family, e.g. 'val2'")
    members: list[SpecFileName] = Field(
        min_length=2,
        description="file names of every member spec (this one included), in this spec's folder",
    )

    @field_validator("members")
    @classmethod
    def _distinct_files(cls, value: list[str]) -> list[str]:
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(twice)} more than once")
        if any(is_spec_base(name) for name in value):
            raise ValueError("a spec base ('_<name>.yaml') is not a spec, so not a member")
        return value


class Spec(_Strict):
    """A benchmark version, as declared in ``specs/<benchmark>.yaml``."""

    benchmark: Slug
    version: int = Field(gt=0)
    title: str
    citation: str = ""
    description: str = ""
    data: DataSource
    features: FeatureSpec
    class_embeddings: list[ClassEmbeddingSpec] = Field(min_length=1)
    hierarchy: HierarchySpec | None = None
    splits: SplitSpec = SplitSpec()
    settings: list[Setting] = Field(min_length=1)
    metrics: list[MetricSpec] = Field(min_length=1)
    primary: dict[Setting, str]
    predictions: PredictionFormat = PredictionFormat()
    uncertainty: Uncertainty = Uncertainty()
    audit: AuditSpec = AuditSpec()
    family: FamilySpec | None = Field(
        None, description="the benchmark family this spec is a member of (validation variants)"
    )
    experimental: bool = Field(
        False,
        description="a benchmark made for trying things out (your own images, a toy set): its"
        " runs are badged 'experimental' and stay out of the cross-benchmark tables (across,"
        " rank matrix, mean ranks, robustness) unless the reader opts in",
    )

    _path: Path | None = PrivateAttr(None)
    _base_path: Path | None = PrivateAttr(None)

    @field_validator("settings")
    @classmethod
    def _unique_settings(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("settings must not repeat")
        return value

    @field_validator("class_embeddings")
    @classmethod
    def _one_default(cls, value: list[ClassEmbeddingSpec]) -> list[ClassEmbeddingSpec]:
        names = [e.name for e in value]
        if len(set(names)) != len(names):
            raise ValueError(f"class embedding names must be unique; got {names}")
        if sum(e.default for e in value) > 1:
            raise ValueError("at most one class embedding may be 'default: true'")
        return value

    @model_validator(mode="after")
    def _clip_text_in_the_feature_space(self) -> Spec:
        # A CLIP model's text tower embeds into the space of its image tower: a clip-text
        # embedding of another width cannot go with these features. Which model made each is
        # not in the spec (only in the sets' provenance), so this is all a spec can check.
        for i, entry in enumerate(self.class_embeddings):
            if entry.kind == "clip-text" and entry.dim != self.features.dim:
                raise ValueError(
                    f"class_embeddings[{i}].dim: {entry.dim}, but a clip-text embedding lives in"
                    f" the image features' space (features.dim {self.features.dim}): its text"
                    " tower must be the features' model's"
                )
        return self

    @model_validator(mode="after")
    def _cross_checks(self) -> Spec:
        # Each message starts with the key path it is about ('primary.zsl: ...'), which
        # parse_spec turns back into the file and line of that key.
        keys: dict[str, set[str]] = {s: set() for s in self.settings}
        for i, metric in enumerate(self.metrics):
            if metric.name in metrics and not _entry_settings(metric, self.settings):
                raise ValueError(
                    f"metrics[{i}]: '{metric.name}' applies to none of the settings {self.settings}"
                )
            for setting in _entry_settings(metric, self.settings):
                if setting not in keys:
                    raise ValueError(
                        f"metrics[{i}].settings: names setting '{setting}', which is not in"
                        " 'settings'"
                    )
                if metric.result_key in keys[setting]:
                    raise ValueError(
                        f"metrics[{i}].key: key '{metric.result_key}' is used twice in"
                        f" '{setting}'; give each entry a distinct 'key'"
                    )
                keys[setting].add(metric.result_key)
        for setting, key in self.primary.items():
            if setting not in keys:
                raise ValueError(
                    f"primary.{setting}: names setting '{setting}', which is not in 'settings'"
                )
            if key not in keys[setting]:
                raise ValueError(
                    f"primary.{setting}: '{key}' is not a metric key of that setting;"
                    f" one of {sorted(keys[setting])}"
                )
        missing = [s for s in self.settings if s not in self.primary]
        if missing:
            raise ValueError(f"primary: needs a metric for every setting; missing {missing}")
        return self

    # -- derived -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        if self._path is None:
            raise SpecError(f"spec '{self.benchmark}' was not loaded from a file")
        return self._path

    @property
    def base_path(self) -> Path | None:
        """The spec base this spec ``extends`` (resolved), or None."""
        return self._base_path

    @property
    def default_embedding(self) -> str:
        for embedding in self.class_embeddings:
            if embedding.default:
                return embedding.name
        return self.class_embeddings[0].name

    def metrics_for(self, setting: str) -> list[MetricSpec]:
        return [m for m in self.metrics if setting in _entry_settings(m, self.settings)]

    def validation_settings(self) -> list[str]:
        """``<setting>_val`` for every setting with a metric tuned on validation predictions."""
        return [
            f"{s}_val"
            for s in self.settings
            if any(
                m.name in metrics and metrics.get(m.name).needs_validation
                for m in self.metrics_for(s)
            )
        ]

    def scale_settings(self) -> list[str]:
        """The score-scale prediction settings: ``scale`` (main fit) and ``scale_val``
        (validation fit), when a metric carries a parameter from the validation fit's scores to
        the main fit's (:mod:`harness.metrics.score_scale`); else none."""
        return list(SCALE_SETTINGS) if self.validation_settings() else []

    def fit_settings(self, fit: str) -> list[str]:
        """The prediction settings one fit (``main`` or ``validation``) predicts, in order."""
        scale = self.scale_settings()
        if fit == "main":
            return [*self.settings, *scale[:1]]
        return [*self.validation_settings(), *scale[1:]]

    def prediction_settings(self) -> list[str]:
        """Every prediction file a run needs: the main fit's settings (test, then scale), then
        the validation fit's (validation, then scale)."""
        return [*self.fit_settings("main"), *self.fit_settings("validation")]

    def hierarchy_path(self) -> Path | None:
        if self.hierarchy is None or self.hierarchy.file is None:
            return None
        return (self.path.parent / self.hierarchy.file).resolve()

    def audit_map_path(self) -> Path | None:
        """The leakage audit's class → WordNet map (``audit.wordnet_map``), if the spec has one."""
        if self.audit.wordnet_map is None:
            return None
        return (self.path.parent / self.audit.wordnet_map).resolve()

    def data_hash(self) -> str:
        """Hash of everything that defines the frozen arrays (not titles or metrics)."""
        payload: dict[str, Any] = self.model_dump(
            mode="json", include={"benchmark", "version", "data", "features", "class_embeddings"}
        )
        payload["data"].pop("checksum", None)  # an expectation about the data, not a definition
        for entry in payload["class_embeddings"]:
            del entry["kind"]  # what the arrays are, said of them: it makes no array
        _drop_absent_extract(payload)
        payload["splits"] = self.splits.variant
        hierarchy = self.hierarchy_path()
        if hierarchy is not None:
            payload["hierarchy"] = _file_sha256(hierarchy)
        return json_sha256(payload)

    def spec_hash(self) -> str:
        """Hash of the whole validated spec (leaderboard rows record it)."""
        payload = self.model_dump(mode="json")
        if payload["family"] is None:  # specs without a family hash as before the key existed
            del payload["family"]
        if not payload["experimental"]:  # and so do specs that are not experimental
            del payload["experimental"]
        for entry in payload["class_embeddings"]:  # and embeddings of the default kind
            if entry["kind"] == DEFAULT_KIND:
                del entry["kind"]
        _drop_absent_extract(payload)
        payload["_data"] = self.data_hash()
        audit_map = self.audit_map_path()
        if audit_map is not None:  # the map decides the audit a record carries
            try:
                payload["_audit_map"] = file_sha256(audit_map)
            except OSError as err:
                raise SpecError(
                    f"cannot read audit.wordnet_map {audit_map}: {err.strerror}"
                ) from None
        return json_sha256(payload)


def _drop_absent_extract(payload: dict[str, Any]) -> None:
    """Specs without ``features.extract`` hash as before the key existed (their frozen
    benchmarks and records keep their hashes)."""
    if payload["features"].get("extract", False) is None:
        del payload["features"]["extract"]


def _file_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as err:
        raise SpecError(f"cannot read hierarchy file {path}: {err.strerror}") from None


# -- YAML with line numbers ----------------------------------------------------------------------

Loc = yamlio.Loc


def _compose(text: str, source: str, what: str = "spec") -> tuple[Any, dict[Loc, int]]:
    """Parse YAML safely; return the data and the 1-based line of every key path."""
    data, lines = yamlio.load_document(text, source, error=SpecError, key_paths=True)
    if not lines:  # no YAML node at all ('~' is a node: a null, not an empty spec)
        raise SpecError(f"{source}: the {what} is empty")
    return data, lines


# -- extends: one level of spec bases ------------------------------------------------------------

BASE_NAME = re.compile(r"^_[A-Za-z0-9][A-Za-z0-9._-]*\.yaml$")
"""What ``extends`` may name: a base's file name, in the extending spec's folder."""

_BASE_FORBIDDEN = {
    "benchmark": "each spec names its own benchmark",
    "version": "each spec keeps its own version, to bump when the base changes its hash",
    "extends": "a base cannot extend another file (one level of extends only)",
    "family": "each spec names its own place in its family",
}


def is_spec_base(path: str | Path) -> bool:
    """Whether ``path`` names a spec base (``_<name>.yaml``), a part of specs, not a spec."""
    return Path(path).name.startswith("_")


def spec_files(folder: str | Path) -> list[Path]:
    """Every spec under ``folder`` (``*.yaml``, recursively, sorted), spec bases left out."""
    return sorted(p for p in Path(folder).rglob("*.yaml") if not is_spec_base(p))


def _base_data(
    text: str, source: str, extended_by: str | None = None
) -> tuple[dict[str, Any], dict[Loc, int]]:
    """A spec base's mapping and lines, refusing what a base may not hold (one line each)."""
    data, lines = _compose(text, source, what="spec base")
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}:1: a spec base must be a mapping of keys, got {type(data).__name__}"
        )
    for key, reason in _BASE_FORBIDDEN.items():
        if key in data:
            by = f" ({extended_by} extends it)" if extended_by and key == "extends" else ""
            raise SpecError(
                f"{source}:{lines.get((key,), 1)}: {key}: not allowed in a spec base: {reason}{by}"
            )
    return data, lines


def _read_base(
    name: Any, line: int, source: str, path: Path | None
) -> tuple[dict[str, Any], dict[Loc, int], str, Path]:
    """Read and check the base ``extends: name`` names (``line`` of ``source``, at ``path``)."""
    where = f"{source}:{line}: extends"
    if path is None:
        raise SpecError(f"{where}: a spec that extends a base must be loaded from its file")
    if not isinstance(name, str) or not BASE_NAME.fullmatch(name):
        raise SpecError(
            f"{where}: must be the file name of a spec base in the spec's own folder,"
            f" '_<name>.yaml' (no folder, no '..', no absolute path); got {name!r}"
        )
    folder = path.parent
    target = folder / name
    # Name the base the way the user named the spec (relative stays relative), unless the spec
    # came through a link from another folder: then by the path actually read.
    beside = os.path.join(os.path.dirname(source), name)
    base_source = beside if Path(source).resolve().parent == folder else str(target)
    try:
        text = yamlio.read_text(Path(base_source), error=SpecError, within=folder)
    except FileNotFoundError:
        raise SpecError(f"{where}: spec base {base_source} not found") from None
    except SpecError as err:  # not a regular file, too large, outside the folder, a link loop
        raise SpecError(f"{where}: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{where}: cannot read spec base {base_source}: {err}") from None
    data, lines = _base_data(text, base_source, extended_by=source)
    return data, lines, base_source, target.resolve()


def _resolve(
    text: str, source: str, path: Path | None
) -> tuple[dict[str, Any], dict[Loc, yamlio.Where], Path | None]:
    """The spec's mapping with its base merged in, and the file and line of every key path."""
    data, lines = _compose(text, source)
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}:1: the spec must be a mapping of keys, got {type(data).__name__}"
        )
    where: dict[Loc, yamlio.Where] = {loc: (source, line) for loc, line in lines.items()}
    if "extends" not in data:
        return data, where, None
    own = {k: v for k, v in data.items() if k != "extends"}
    base, base_lines, base_source, base_path = _read_base(
        data["extends"], lines[("extends",)], source, path
    )
    merged = dict(own)  # the spec's keys win, wholesale; the base fills in the others
    for key, value in base.items():
        merged.setdefault(key, value)
    for loc, line in base_lines.items():
        if loc and loc[0] not in own:
            where[loc] = (base_source, line)
    return merged, where, base_path


def _check_metric_params(
    spec_data: dict[str, Any], parsed: dict[int, MetricParams] | None = None
) -> list[tuple[Loc, str]]:
    """Resolve every metric name in the registry and validate its inline parameters; what
    parses goes into ``parsed`` (by entry index) for the spec to keep."""
    problems: list[tuple[Loc, str]] = []
    entries = spec_data.get("metrics") or []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        if name not in metrics:
            problems.append((("metrics", i, "name"), metrics.unknown_message(name)))
            continue
        metric = metrics.get(name)
        fmt = (spec_data.get("predictions") or {}).get("format", "dense")
        if isinstance(fmt, str) and fmt in ("dense", "topk") and fmt not in metric.inputs:
            problems.append(
                (
                    ("metrics", i, "name"),
                    f"metric '{name}' needs {'/'.join(sorted(metric.inputs))} predictions, but"
                    f" predictions.format is '{fmt}'",
                )
            )
        if metric.needs_hierarchy and not spec_data.get("hierarchy"):
            problems.append((("metrics", i, "name"), f"metric '{name}' needs a 'hierarchy'"))
        params = {k: v for k, v in entry.items() if k not in MetricSpec.model_fields}
        try:
            parsed_params = metric.params.model_validate(params)
            if parsed is not None:
                parsed[i] = parsed_params
        except ValidationError as err:
            for e in err.errors():
                loc: Loc = ("metrics", i, *e["loc"])
                if e["type"] == "extra_forbidden":
                    allowed = sorted(set(MetricSpec.model_fields) | set(metric.params.model_fields))
                    problems.append((loc, f"unknown key for metric '{name}'. Allowed: {allowed}"))
                else:  # worded as the spec's own problems are (a choice lists the allowed)
                    sub_loc, message = yamlio.describe_error(e, metric.params)
                    problems.append((("metrics", i, *sub_loc), message))
        for setting in entry.get("settings") or []:
            if isinstance(setting, str) and setting not in metric.settings:
                problems.append(
                    (
                        ("metrics", i, "settings"),
                        f"metric '{name}' does not apply to setting '{setting}'"
                        f" (it applies to {sorted(metric.settings)})",
                    )
                )
    return problems


def parse_spec(text: str, source: str = "<string>", path: Path | None = None) -> Spec:
    """Validate spec text; raise one :class:`SpecError` listing every problem with its line.

    ``path`` is the spec's file, resolved: relative paths in the spec, and the base it
    ``extends``, are found next to it.
    """
    data, where, base_path = _resolve(text, source, path)
    parsed: dict[int, MetricParams] = {}
    spec = yamlio.validate_model(
        data,
        Spec,
        source,
        where,
        error=SpecError,
        also_allowed=["extends"],
        checks=lambda checked: _check_metric_params(checked, parsed),
    )
    for index, entry in enumerate(spec.metrics):  # validated once: the entries keep them
        entry._metric_params = parsed.get(index)
    spec._path = path
    spec._base_path = base_path
    return spec


def _read_spec_text(path: Path, what: str = "spec") -> str:
    try:
        return yamlio.read_text(path, error=SpecError)
    except FileNotFoundError:
        raise SpecError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read {what} {path}: {err}") from None


def _refuse_base(path: Path) -> None:
    if is_spec_base(path):
        raise SpecError(
            f"{path}: a spec base (its name starts with '_'), not a spec: it is checked as part"
            f" of each spec that has 'extends: {path.name}'"
        )


def load_spec_data(path: str | Path) -> dict[str, Any]:
    """A spec file's mapping with the base it ``extends`` merged in, not validated.

    What the spec would be written out in one file (without ``extends``): for tools and tests
    that edit a shipped spec and write the result elsewhere. Raises :class:`SpecError` for what
    stops the merge (unreadable files, invalid YAML, a bad ``extends``).
    """
    path = Path(path)
    _refuse_base(path)
    data, _, _ = _resolve(_read_spec_text(path), str(path), path.resolve())
    return data


def load_spec_base(path: str | Path) -> dict[str, Any]:
    """Read a spec base (``_<name>.yaml``) on its own and check what can be checked alone.

    Its YAML, duplicate keys, that it is a mapping of known spec keys, and that it sets no
    ``benchmark``, ``version`` or ``extends``. Its values are validated with each spec that
    extends it (:func:`load_spec`), since a base alone is not a whole spec.
    """
    path = Path(path)
    if not is_spec_base(path):
        raise SpecError(f"{path}: not a spec base: a base's file name starts with '_'")
    data, lines = _base_data(_read_spec_text(path, "spec base"), str(path))
    allowed = sorted(set(Spec.model_fields) - set(_BASE_FORBIDDEN))
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise SpecError(
                f"{path}:{lines.get((str(key),), 1)}: {key}: unknown key '{key}'.{hint}"
                f" Allowed keys: {', '.join(allowed)}"
            )
    return data


def load_spec(path: str | Path) -> Spec:
    """Load and validate ``specs/<name>.yaml`` (with the base it ``extends``, if any)."""
    path = Path(path)
    _refuse_base(path)
    text = _read_spec_text(path)
    spec = parse_spec(text, source=str(path), path=path.resolve())
    hierarchy = spec.hierarchy_path()
    if hierarchy is not None and not hierarchy.is_file():
        raise SpecError(
            f"{path}: hierarchy.file: {spec.hierarchy.file!r} not found at {hierarchy}"  # type: ignore[union-attr]
        )
    return spec


# -- benchmark families --------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyMember:
    """One member of a benchmark family: its label, spec file and loaded spec."""

    label: str
    path: Path
    spec: Spec


@dataclass(frozen=True)
class Family:
    """A benchmark family, every member loaded and checked (:func:`load_family`)."""

    id: str
    members: tuple[FamilyMember, ...]  # in the order ``family.members`` lists them

    @property
    def main(self) -> FamilyMember:
        """The member whose benchmark id is the family's id."""
        return next(m for m in self.members if m.spec.benchmark == self.id)


def _family_line(path: Path, loc: Loc) -> int:
    """The line of ``loc`` in the spec file ``path`` (1 where it cannot be told)."""
    try:
        _, lines = _compose(_read_spec_text(path), str(path))
    except SpecError:
        return 1
    return lines.get(loc, lines.get(loc[:2], lines.get(("family",), 1)))


def load_family(spec: Spec) -> Family | None:
    """The family ``spec`` belongs to, every member loaded and checked; None without one.

    Each member must exist beside ``spec``, be a valid spec, declare the same ``family.id``
    and the same ``family.members``, and have a label of its own; ``spec``'s own file must be
    listed, and one member's benchmark id must be the family's id (the main member).

    Raises
    ------
    SpecError
        ``file:line: family.<key>: message`` for the first problem found.
    """
    declared = spec.family
    if declared is None:
        return None
    path = spec.path
    try:  # named as the user would: relative to the working folder where it is inside it
        source = str(path.relative_to(Path.cwd()))
    except ValueError:
        source = str(path)

    def problem(loc: Loc, message: str) -> SpecError:
        key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")
        return SpecError(f"{source}:{_family_line(path, loc)}: {key}: {message}")

    if path.name not in declared.members:
        raise problem(
            ("family", "members"),
            f"does not list this spec's own file {path.name!r}; every member lists all of them,"
            " itself included",
        )
    members: list[FamilyMember] = []
    labels: dict[str, str] = {}
    benchmarks: dict[str, str] = {}
    for i, name in enumerate(declared.members):
        loc: Loc = ("family", "members", i)
        member_path = path.parent / name
        if name == path.name:
            member = spec
        elif not member_path.is_file():
            raise problem(loc, f"member spec {name!r} not found in {path.parent}")
        else:
            try:
                member = load_spec(member_path)
            except SpecError as err:
                raise problem(loc, f"member spec {name!r} is not valid: {err}") from None
        theirs = member.family
        if theirs is None:
            raise problem(
                loc, f"{name} declares no 'family'; each member declares family.id {declared.id!r}"
            )
        if theirs.id != declared.id:
            raise problem(
                loc,
                f"{name} declares family.id {theirs.id!r}, not {declared.id!r}; a family's"
                " members all name the same main member",
            )
        if theirs.members != declared.members:
            raise problem(
                loc,
                f"{name} lists family.members {theirs.members}, this spec {declared.members};"
                " every member lists the same files in the same order",
            )
        if theirs.member in labels:
            raise problem(
                loc,
                f"{name} has family.member {theirs.member!r}, as {labels[theirs.member]} has;"
                " each member needs a label of its own",
            )
        if member.benchmark in benchmarks:
            raise problem(
                loc,
                f"{name} has benchmark id {member.benchmark!r}, as {benchmarks[member.benchmark]}"
                " has; each member is a benchmark of its own",
            )
        labels[theirs.member] = benchmarks[member.benchmark] = name
        members.append(FamilyMember(theirs.member, member_path.resolve(), member))
    if declared.id not in benchmarks:
        raise problem(
            ("family", "id"),
            f"{declared.id!r} is the benchmark id of none of the members"
            f" ({', '.join(sorted(benchmarks))}); a family is named after its main member",
        )
    return Family(declared.id, tuple(members))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec, for editors."""
    schema = Spec.model_json_schema()
    schema["title"] = "zsl-harness benchmark spec"
    schema["properties"]["extends"] = {
        "type": "string",
        "pattern": BASE_NAME.pattern,
        "description": "a spec base in this folder, '_<name>.yaml', whose top-level keys this"
        " spec takes unless it sets them itself (one level)",
    }
    required = schema.pop("required")
    schema["if"] = {"required": ["extends"]}  # the base may supply every key but these two
    schema["then"] = {"required": ["benchmark", "version"]}
    schema["else"] = {"required": required}
    return schema
