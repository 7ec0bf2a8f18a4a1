"""Benchmark specs: YAML files validated into pydantic models.

A spec is data, not code: it names the data adapter that produces the raw arrays, the feature
set and what its backbone saw, the class embeddings, the hierarchy, the split variant, the
settings, the metrics (registry names with parameters) and the primary metric per setting.

Every problem is reported at once, each as ``file:line: key.path: message``. Unknown keys are
errors, YAML is loaded safely, and duplicate keys are refused.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from harness import yamlio
from harness.errors import SpecError
from harness.hashing import file_sha256, json_sha256
from harness.metrics import metrics

Setting = Literal["zsl", "gzsl"]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=64)]
Checksum = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
MetricKey = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9@._-]*$", max_length=32)
]
WNID = Annotated[str, StringConstraints(pattern=r"^n\d{8}$")]


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
    """What the feature backbone was trained on, for the leakage audit."""

    class_set: str | None = Field(None, description="named class set, e.g. 'ilsvrc2012' or 'none'")
    wnids: list[WNID] | None = Field(None, description="explicit WordNet ids")

    @model_validator(mode="after")
    def _exactly_one(self) -> PretrainedOn:
        if (self.class_set is None) == (self.wnids is None):
            raise ValueError("give exactly one of 'class_set' or 'wnids'")
        return self


class FeatureSpec(_Strict):
    name: str
    dim: int = Field(gt=0)
    backbone: str
    pretrained_on: PretrainedOn


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
    itself is valid (see :func:`_check_metric_params`).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    key: MetricKey | None = Field(None, description="result name; defaults to the metric name")
    settings: list[Setting] | None = Field(None, description="defaults to every spec setting")

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

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

    _path: Path | None = PrivateAttr(None)

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
    def _cross_checks(self) -> Spec:
        keys: dict[str, set[str]] = {s: set() for s in self.settings}
        for i, metric in enumerate(self.metrics):
            if metric.name in metrics and not _entry_settings(metric, self.settings):
                raise ValueError(
                    f"metrics[{i}] ('{metric.name}') applies to none of the settings"
                    f" {self.settings}"
                )
            for setting in _entry_settings(metric, self.settings):
                if setting not in keys:
                    raise ValueError(
                        f"metrics[{i}] names setting '{setting}', which is not in 'settings'"
                    )
                if metric.result_key in keys[setting]:
                    raise ValueError(
                        f"metrics[{i}]: key '{metric.result_key}' is used twice in '{setting}';"
                        " give each entry a distinct 'key'"
                    )
                keys[setting].add(metric.result_key)
        for setting, key in self.primary.items():
            if setting not in keys:
                raise ValueError(f"primary names setting '{setting}', which is not in 'settings'")
            if key not in keys[setting]:
                raise ValueError(
                    f"primary.{setting} is '{key}', which is not a metric key of that setting;"
                    f" one of {sorted(keys[setting])}"
                )
        missing = [s for s in self.settings if s not in self.primary]
        if missing:
            raise ValueError(f"primary needs a metric for every setting; missing {missing}")
        return self

    # -- derived -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        if self._path is None:
            raise SpecError(f"spec '{self.benchmark}' was not loaded from a file")
        return self._path

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
        payload["splits"] = self.splits.variant
        hierarchy = self.hierarchy_path()
        if hierarchy is not None:
            payload["hierarchy"] = _file_sha256(hierarchy)
        return json_sha256(payload)

    def spec_hash(self) -> str:
        """Hash of the whole validated spec (leaderboard rows record it)."""
        payload = self.model_dump(mode="json")
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


def _file_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as err:
        raise SpecError(f"cannot read hierarchy file {path}: {err.strerror}") from None


# -- YAML with line numbers ----------------------------------------------------------------------

Loc = tuple[str | int, ...]


def _compose(text: str, source: str) -> tuple[Any, dict[Loc, int]]:
    """Parse YAML safely; return the data and the 1-based line of every key path."""
    try:
        node = yamlio.compose(text, source, error=SpecError)  # bounded: no alias bombs
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err)
        raise SpecError(f"{where}: not valid YAML: {problem}") from None
    if node is None:
        raise SpecError(f"{source}: the spec is empty")
    lines: dict[Loc, int] = {}

    def walk(n: yaml.Node, loc: Loc) -> None:
        lines[loc] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in n.value:
                key = key_node.value
                if key in seen:
                    raise SpecError(
                        f"{source}:{key_node.start_mark.line + 1}: {_fmt_loc((*loc, key))}:"
                        f" duplicate key (first at line {seen[key]})"
                    )
                seen[key] = key_node.start_mark.line + 1
                lines[(*loc, key)] = key_node.start_mark.line + 1
                walk(value_node, (*loc, key))
                lines[(*loc, key)] = key_node.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*loc, i))

    walk(node, ())
    try:
        data = yamlio.construct(node, source)
    except yaml.YAMLError as err:  # e.g. a python/object tag: never constructed
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise SpecError(f"{where}: not valid YAML: {getattr(err, 'problem', err)}") from None
    return data, lines


def _fmt_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _line_of(lines: dict[Loc, int], loc: Loc) -> int:
    while loc not in lines and loc:
        loc = loc[:-1]
    return lines.get(loc, 1)


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The pydantic model that a key path points into, to list its allowed keys."""
    model: Any = Spec
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return None
        model = _unwrap(fields[part].annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """list[X] / X | None / dict[K, X] → X, so nested models can be found."""
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType, dict):
        for arg in reversed(typing.get_args(annotation)):
            if arg is not type(None):
                return _unwrap(arg)
    return annotation


_PYDANTIC_LOC_NOISE = re.compile(r"^(function-after|function-before|function-wrap)\[.*\]$")


def _describe(err: Any, data: Any) -> tuple[Loc, str]:
    loc: Loc = tuple(p for p in err["loc"] if not _PYDANTIC_LOC_NOISE.match(str(p)))
    kind = err["type"]
    if loc and loc[-1] == "[key]":  # a bad mapping key, e.g. primary: {extra: …}
        key = loc[-2]
        message = str(err["msg"]).removeprefix("Value error, ")
        return loc[:-2], f"key '{key}': {message}"
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = sorted(parent.model_fields) if parent is not None else []
        key = str(loc[-1])
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        return loc, f"unknown key '{key}'.{hint} Allowed keys: {', '.join(allowed)}"
    if kind == "missing":
        return loc, "required key is missing"
    message = str(err["msg"]).removeprefix("Value error, ")
    if kind == "literal_error" or ("input" in err and not isinstance(err["input"], dict | list)):
        return loc, f"{message}; got {err['input']!r}"
    return loc, message


def _check_metric_params(spec_data: dict[str, Any]) -> list[tuple[Loc, str]]:
    """Resolve every metric name in the registry and validate its inline parameters."""
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
            metric.params.model_validate(params)
        except ValidationError as err:
            for e in err.errors():
                loc: Loc = ("metrics", i, *e["loc"])
                if e["type"] == "extra_forbidden":
                    allowed = sorted(set(MetricSpec.model_fields) | set(metric.params.model_fields))
                    problems.append((loc, f"unknown key for metric '{name}'. Allowed: {allowed}"))
                else:
                    problems.append((loc, f"{e['msg']}; got {e.get('input')!r}"))
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
    """Validate spec text; raise one :class:`SpecError` listing every problem with its line."""
    data, lines = _compose(text, source)
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}:1: the spec must be a mapping of keys, got {type(data).__name__}"
        )
    problems: list[tuple[Loc, str]] = []
    spec: Spec | None = None
    try:
        spec = Spec.model_validate(data)
    except ValidationError as err:
        problems.extend(_describe(e, data) for e in err.errors())
    problems.extend(_check_metric_params(data))
    if problems:
        problems.sort(key=lambda p: _line_of(lines, p[0]))
        text_lines = [
            f"{source}:{_line_of(lines, loc)}: {_fmt_loc(loc)}: {msg}" for loc, msg in problems
        ]
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        raise SpecError(f"{count} in {source}:\n  " + "\n  ".join(text_lines))
    assert spec is not None
    spec._path = path
    return spec


def load_spec(path: str | Path) -> Spec:
    """Load and validate ``specs/<name>.yaml``."""
    path = Path(path)
    try:
        text = yamlio.read_text(path, error=SpecError)
    except FileNotFoundError:
        raise SpecError(f"spec file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read spec {path}: {err}") from None
    spec = parse_spec(text, source=str(path), path=path.resolve())
    hierarchy = spec.hierarchy_path()
    if hierarchy is not None and not hierarchy.is_file():
        raise SpecError(
            f"{path}: hierarchy.file: {spec.hierarchy.file!r} not found at {hierarchy}"  # type: ignore[union-attr]
        )
    return spec


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec, for editors."""
    schema = Spec.model_json_schema()
    schema["title"] = "zsl-harness benchmark spec"
    return schema
