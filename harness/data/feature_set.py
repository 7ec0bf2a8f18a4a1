"""Adapter ``feature-set``: a benchmark from your own images ("Bring your own images").

The features are a feature set made by ``zsl features extract`` (``data.params.features``,
pinned by ``features_hash``) or, when the spec declares ``features.extract``, extracted by
``zsl data prepare`` itself into ``ZSL_HOME/features/<key>/``, where ``<key>`` hashes every input
(the images' bytes, the weights' sha256, the preprocessing, the backbone, the batching), so the
same inputs are extracted once. Each class embedding of the spec is a class-embedding set made by
``zsl embeddings build`` (``data.params.embeddings.<name>``, pinned by its hash), holding a row
for every class of the features.

See docs/data.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from harness.core.errors import HarnessError, SpecError
from harness.core.hashing import json_sha256
from harness.core.home import zsl_home
from harness.data.adapters import RawBenchmark, adapters, hold_out_per_class, split_by_class
from harness.data.sources import RawSource

# A module reference, not its names: harness.features.sets imports harness.data.artifacts, so
# importing it first runs this package's __init__, which imports this module.
from harness.features import sets
from harness.features.extract import extract_features, plan_extraction
from harness.hierarchy.class_maps import read_class_list

if TYPE_CHECKING:
    from harness.spec import ExtractSpec, Spec

__all__ = [
    "EmbeddingSetRef",
    "embedding_provenance",
    "open_pinned_set",
]

SetHash = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class EmbeddingSetRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="class-embedding set folder, relative to the spec file")
    hash: SetHash | None = Field(None, description="its set hash; another set is refused")


class FeatureSetParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    features: str | None = Field(
        None,
        description="feature set folder made by `zsl features extract`, relative to the spec"
        " file (not with features.extract)",
    )
    features_hash: SetHash | None = Field(None, description="its set hash; another is refused")
    embeddings: dict[str, EmbeddingSetRef] = Field(
        description="one class-embedding set per class_embeddings name of the spec"
    )
    unseen_classes: str = Field(description="file of the unseen (test) class ids, one per line")
    val_classes: str | None = Field(None, description="file of the validation class ids")
    n_val: int | None = Field(None, ge=1, description="draw this many validation classes")
    test_seen_fraction: float = Field(0.2, gt=0, lt=1)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _one_validation_rule(self) -> FeatureSetParams:
        if (self.val_classes is None) == (self.n_val is None):
            raise ValueError("give exactly one of 'val_classes' (a file) or 'n_val'")
        return self


def _relative(spec: Spec, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else spec.path.parent / path


def extracted_features(
    spec: Spec, extract: ExtractSpec, *, quiet: bool = False
) -> sets.ArtifactSet:
    """The feature set ``extract`` describes: extracted into the cache, or found there."""
    request = plan_extraction(extract, spec.path.parent)
    key = json_sha256(
        {
            "request": request.key("auto"),
            "images_content": request.images.content_sha256(),
            "skip_bad": extract.skip_bad,
        }
    )
    out = zsl_home() / "features" / key.removeprefix("sha256:")[:32]
    out.parent.mkdir(parents=True, exist_ok=True)
    result = extract_features(
        request,
        out,
        skip_bad=extract.skip_bad,
        workers=min(4, os.cpu_count() or 1),
        quiet=quiet,
    )
    return result.feature_set


def open_pinned_set(path: Path, kind: Any, pinned: str | None, where: str) -> sets.ArtifactSet:
    """The set at ``path``, verified, of ``kind`` and hash ``pinned`` (when given); any problem
    is a :class:`SpecError` starting with ``where`` (the spec key)."""
    try:
        found = sets.ArtifactSet(path, kind=kind)
    except HarnessError as err:
        raise SpecError(f"{where}: {err}") from None
    if pinned is not None and found.hash != pinned:
        raise SpecError(
            f"{where}: {path} is set {found.hash}, not the pinned {pinned}; it was made again"
            " from other inputs (update the hash only if that is intended)"
        )
    found.verify()
    return found


def _class_indices(spec: Spec, file: str, index: dict[str, int], key: str) -> np.ndarray:
    path = _relative(spec, file)
    names = read_class_list(path)
    unknown = [name for name in names if name not in index]
    if unknown:
        raise SpecError(
            f"{path}: data.params.{key}: {len(unknown)} class id(s) the features do not have,"
            f" first {unknown[0]!r}"
        )
    return np.array(sorted(index[name] for name in names), dtype=np.int64)


def _provenance(
    features: sets.ArtifactSet, embeddings: dict[str, sets.ArtifactSet]
) -> dict[str, Any]:
    p = features.provenance
    return {
        "features": {
            "set_hash": features.hash,
            "backbone": p["backbone"]["name"],
            "layer": p["backbone"]["layer"],
            "weights": p["weights"],
            "pretrained_on": p["pretrained_on"],
            "preprocessing": p["preprocessing"],
            "preprocessing_summary": p["preprocessing_summary"],
            "precision": p["precision"],
            "device": p["device"],
            "images": p["images"],
            "skipped": len(p["skipped"]),
            "versions": p["versions"],
        },
        "class_embeddings": embedding_provenance(embeddings),
    }


def embedding_provenance(embeddings: dict[str, sets.ArtifactSet]) -> dict[str, Any]:
    """What a record keeps of each class-embedding set (``EmbeddingProvenance``)."""
    return {
        name: {
            "set_hash": table.hash,
            "model": table.provenance.get("model"),
            "model_files": table.provenance.get("model_files", {}),
            "text": table.provenance.get("text"),
            **_prompt_provenance(table.provenance),
        }
        for name, table in sorted(embeddings.items())
    }


def _prompt_provenance(provenance: dict[str, Any]) -> dict[str, Any]:
    """A clip-text set's text tower and templates, as a record keeps them (else nothing)."""
    if "templates" not in provenance or "clip" not in provenance:
        return {}
    templates = provenance["templates"]
    return {
        "arch": provenance["clip"]["arch"],
        "templates": {k: templates[k] for k in ("name", "count", "sha256")},
    }


def _check_prompt_embeddings(
    spec: Spec, features: dict[str, Any], embeddings: dict[str, sets.ArtifactSet]
) -> None:
    """Refuse a ``clip-text`` class embedding that is not the text tower of the image features'
    own model (the same open_clip architecture and weights file, by sha256), and a prompt
    embedding declared as another kind or the reverse: cosine between the two towers means
    something only for the pair trained together."""
    kinds = {e.name: e.kind for e in spec.class_embeddings}
    backbone = features["backbone"]["name"]
    image_weights = features.get("weights", {}).get("sha256")
    for name, table in sorted(embeddings.items()):
        where = f"{spec.path}: class_embeddings '{name}'"
        clip = table.provenance.get("clip")
        if clip is None:
            if kinds[name] == "clip-text":
                raise SpecError(
                    f"{where}: kind is clip-text, but its set was built with"
                    f" {table.provenance.get('model')!r}, not an image-text model's text tower;"
                    " build it with `zsl embeddings build --model clip-text` or declare its kind"
                )
            continue
        if kinds[name] != "clip-text":
            raise SpecError(
                f"{where}: its set holds prompt embeddings of open_clip {clip['arch']}'s text"
                f" tower; declare kind: clip-text (it says {kinds[name]})"
            )
        text_weights = clip["weights"]["sha256"]
        if backbone != f"open_clip:{clip['arch']}" or image_weights != text_weights:
            raise SpecError(
                f"{where}: the text tower is open_clip:{clip['arch']} with weights"
                f" {text_weights[:19]}…, but the image features come from {backbone} with"
                f" weights {str(image_weights)[:19]}…; the two towers must be one model's"
                " (build both from the same --arch and --weights)"
            )


def _set_manifests(features: Path | None, embeddings: dict[str, Path]) -> dict[str, Path]:
    """Each set's manifest (its hash covers every array of the set), by a name in the record."""
    files = {
        f"class-embeddings/{name}/{sets.MANIFEST}": path / sets.MANIFEST
        for name, path in embeddings.items()
    }
    if features is not None:
        files[f"features/{sets.MANIFEST}"] = features / sets.MANIFEST
    return files


def _raw_source(
    spec: Spec,
    params: FeatureSetParams,
    features: sets.ArtifactSet,
    embeddings: dict[str, sets.ArtifactSet],
) -> RawSource:
    made = (
        "features extracted by the harness from the user's images"
        if params.features is None
        else "a feature set brought by the user"
    )
    pinned = params.features is not None and params.features_hash is not None
    pinned = pinned and all(ref.hash is not None for ref in params.embeddings.values())
    return RawSource(
        "own",
        f"{made} (set {features.hash[:19]}…) with the user's class-embedding sets",
        verified_by="every set matches the hash pinned in data.params" if pinned else None,
        files=_set_manifests(features.root, {n: t.root for n, t in embeddings.items()}),
    )


class FeatureSetAdapter:
    """Adapter ``feature-set``: see docs/data.md."""

    name = "feature-set"
    params = FeatureSetParams

    def load(self, spec: Spec, params: FeatureSetParams) -> RawBenchmark:
        extract = spec.features.extract
        if (extract is None) == (params.features is None):
            raise SpecError(
                f"{spec.path}: data.params.features names a feature set, features.extract makes"
                " one: give exactly one of them"
            )
        if params.features is not None:
            features = open_pinned_set(
                _relative(spec, params.features),
                "features",
                params.features_hash,
                f"{spec.path}: data.params.features",
            )
        else:
            assert extract is not None
            features = extracted_features(spec, extract)
        declared = spec.features.pretrained_on.model_dump(mode="json", exclude_none=True)
        if features.provenance["pretrained_on"] != declared:
            raise SpecError(
                f"{spec.path}: features.pretrained_on is {declared}, but the feature set's"
                f" weights were trained on {features.provenance['pretrained_on']}; the leakage"
                " audit must see what the backbone saw"
            )
        class_ids = features.strings("class_ids")
        index = {c: i for i, c in enumerate(class_ids)}
        embeddings = self._embeddings(spec, params, class_ids, features.provenance)
        return self._split(spec, params, features, index, embeddings)

    def sources(self, spec: Spec, params: FeatureSetParams) -> dict[str, Path]:
        features = None if params.features is None else _relative(spec, params.features)
        embeddings = {name: _relative(spec, ref.path) for name, ref in params.embeddings.items()}
        return {n: p for n, p in _set_manifests(features, embeddings).items() if p.is_file()}

    def _embeddings(
        self,
        spec: Spec,
        params: FeatureSetParams,
        class_ids: list[str],
        features_provenance: dict[str, Any],
    ) -> dict[str, sets.ArtifactSet]:
        wanted = {e.name for e in spec.class_embeddings}
        if set(params.embeddings) != wanted:
            raise SpecError(
                f"{spec.path}: data.params.embeddings names {sorted(params.embeddings)}, but"
                f" class_embeddings declares {sorted(wanted)}; give one set per embedding"
            )
        found = {}
        for name, ref in params.embeddings.items():
            where = f"{spec.path}: data.params.embeddings.{name}"
            table = open_pinned_set(_relative(spec, ref.path), "class-embeddings", ref.hash, where)
            have = set(table.strings("class_ids"))
            missing = [c for c in class_ids if c not in have]
            if missing:
                raise SpecError(
                    f"{where}: {len(missing)} class(es) of the features have no embedding,"
                    f" first {missing[0]!r}; build the set from a class list holding every class"
                )
            found[name] = table
        _check_prompt_embeddings(spec, features_provenance, found)
        return found

    def _split(
        self,
        spec: Spec,
        params: FeatureSetParams,
        features: sets.ArtifactSet,
        index: dict[str, int],
        embeddings: dict[str, sets.ArtifactSet],
    ) -> RawBenchmark:
        labels = np.asarray(features.array("labels"), dtype=np.int64)
        n_classes = len(index)
        unseen = _class_indices(spec, params.unseen_classes, index, "unseen_classes")
        rng = np.random.Generator(np.random.PCG64(params.seed))
        seen = np.setdiff1d(np.arange(n_classes), unseen)
        if params.val_classes is not None:
            val = _class_indices(spec, params.val_classes, index, "val_classes")
            if np.intersect1d(val, unseen).size:
                raise SpecError(f"{spec.path}: data.params: a validation class is also unseen")
        else:
            assert params.n_val is not None
            if params.n_val >= seen.size:
                raise SpecError(
                    f"{spec.path}: data.params.n_val {params.n_val} leaves no training class"
                    f" among the {seen.size} seen classes"
                )
            val = np.sort(seen[np.argsort(rng.random(seen.size), kind="stable")[: params.n_val]])
        train = np.setdiff1d(seen, val)
        if train.size == 0:
            raise SpecError(f"{spec.path}: data.params: no training class is left")
        draw = rng.random(labels.size)
        held_out = hold_out_per_class(labels, seen.tolist(), params.test_seen_fraction, draw)
        splits = split_by_class(labels, train, val, unseen, held_out)
        class_ids = features.strings("class_ids")
        tables = {}
        names = None
        for name, table in embeddings.items():
            rows = {c: i for i, c in enumerate(table.strings("class_ids"))}
            order = np.array([rows[c] for c in class_ids], dtype=np.int64)
            tables[name] = np.asarray(table.array("embeddings"), dtype=np.float32)[order]
            if names is None:
                names = np.asarray(table.array("class_names"))[order].astype(str)
        return RawBenchmark(
            source=_raw_source(spec, params, features, embeddings),
            features=np.asarray(features.array("features"), dtype=np.float32),
            labels=labels,
            class_ids=np.array(class_ids),
            class_names=names if names is not None else np.array(class_ids),
            embeddings=tables,
            splits=splits,
            meta={"provenance": _provenance(features, embeddings)},
        )


adapters.add("feature-set", FeatureSetAdapter())
