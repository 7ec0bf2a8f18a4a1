"""``prepare``: spec → adapter → checks → frozen benchmark; and a typed view of one.

The checks here are the protocol of docs/design.md, "Conventions", made executable: validation
classes are disjoint from training classes, unseen classes from seen ones, every image sits in
at most one split, test_seen images belong to seen classes and never to training or validation.

The frozen benchmark also fixes the row order of prediction files (test images, shuffled with a
seed derived from the benchmark id so seen and unseen rows are interleaved in GZSL) and the column
order (candidate classes per setting).

It also holds the leakage audit of its test classes, made here, once (:func:`freeze_audit`):
a freeze whose audit inputs are missing is refused before any data is read, unless the
maintainer freezes without an audit on purpose (``no_audit``, recorded as ``not audited``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ValidationError

from harness.audit import AuditStatus, freeze_audit, plan_audit
from harness.core.errors import IntegrityError, SpecError
from harness.core.hashing import file_sha256, strings_sha256
from harness.core.registry import RegistryError
from harness.data.adapters import (
    SPLIT_CLASS_KEYS,
    SPLIT_IMAGE_KEYS,
    Adapter,
    RawBenchmark,
    adapters,
)
from harness.data.artifacts import (
    MANIFEST,
    FrozenBenchmark,
    OutdatedFormatError,
    benchmark_dir,
    cache_action,
    outdated_message,
    write_frozen,
)
from harness.data.facts import BenchmarkFacts, benchmark_facts
from harness.data.scale_images import scale_rows
from harness.data.sources import check_sources, source_manifest
from harness.hierarchy import Hierarchy
from harness.records import SCALE_SETTINGS
from harness.spec import Spec

__all__ = [
    "PreparedBenchmark",
    "check_frozen_sources",
    "check_raw",
    "load_benchmark",
    "prepare",
]


def check_raw(raw: RawBenchmark, spec: Spec) -> None:
    """Refuse raw data that breaks the protocol or the spec's declarations."""
    where = f"{spec.benchmark} (adapter '{spec.data.adapter}')"
    _check_arrays(raw, spec, where)
    _check_splits(raw, where)
    _check_expected_sizes(raw, spec)


def _check_arrays(raw: RawBenchmark, spec: Spec, where: str) -> None:
    """Features and class embeddings: shapes as the spec declares, finite, unique class ids."""
    n_images, n_classes = len(raw.labels), len(raw.class_ids)
    if raw.features.ndim != 2 or raw.features.shape[0] != n_images:
        raise SpecError(f"{where}: features must be [n_images={n_images}, dim]")
    if raw.features.shape[1] != spec.features.dim:
        raise SpecError(
            f"{spec.path}: features.dim is {spec.features.dim} but the data have"
            f" {raw.features.shape[1]} dimensions"
        )
    if not np.isfinite(raw.features).all():
        raise SpecError(f"{where}: features contain NaN or inf")
    if len(np.unique(raw.class_ids)) != n_classes:
        raise SpecError(f"{where}: class ids are not unique")
    for emb in spec.class_embeddings:
        table = raw.embeddings.get(emb.name)
        if table is None:
            raise SpecError(
                f"{spec.path}: class_embeddings: '{emb.name}' is not provided by the adapter"
                f" (it has {sorted(raw.embeddings)})"
            )
        if table.shape != (n_classes, emb.dim):
            raise SpecError(
                f"{spec.path}: class embedding '{emb.name}' has shape {table.shape},"
                f" expected ({n_classes}, {emb.dim}) from 'dim'"
            )


def _check_splits(raw: RawBenchmark, where: str) -> None:
    """The protocol: every split present, class sets disjoint, each image in its class set."""
    missing = [k for k in (*SPLIT_CLASS_KEYS, *SPLIT_IMAGE_KEYS) if k not in raw.splits]
    if missing:
        raise SpecError(f"{where}: the adapter produced no {missing}")
    cls = {k: set(raw.splits[k].tolist()) for k in SPLIT_CLASS_KEYS}
    if cls["train_classes"] & cls["val_classes"]:
        raise SpecError(f"{where}: validation classes overlap training classes")
    seen = cls["train_classes"] | cls["val_classes"]
    if seen & cls["unseen_classes"]:
        raise SpecError(f"{where}: unseen classes overlap seen classes")
    imgs = {k: raw.splits[k] for k in SPLIT_IMAGE_KEYS}
    all_imgs = np.concatenate(list(imgs.values()))
    if len(np.unique(all_imgs)) != len(all_imgs):
        raise SpecError(f"{where}: an image belongs to more than one split")
    allowed = {
        "train_images": cls["train_classes"],
        "val_images": cls["val_classes"],
        "test_seen_images": seen,
        "test_unseen_images": cls["unseen_classes"],
    }
    for key, classes in allowed.items():
        labels = set(raw.labels[imgs[key]].tolist())
        if not labels <= classes:
            raise SpecError(f"{where}: {key} contains images of classes outside its class set")


def _check_expected_sizes(raw: RawBenchmark, spec: Spec) -> None:
    """The split sizes the spec declares under ``splits.expect``, if any."""
    expect = spec.splits.expect
    if expect is not None:
        actual = {k: len(raw.splits[k]) for k in (*SPLIT_CLASS_KEYS, *SPLIT_IMAGE_KEYS)}
        for key, wanted in expect.model_dump(exclude_none=True).items():
            if actual[key] != wanted:
                raise SpecError(
                    f"{spec.path}: splits.expect.{key} is {wanted} but the data give {actual[key]}"
                )


def _order_seed(benchmark: str, version: int) -> int:
    digest = hashlib.sha256(f"{benchmark}/v{version}/test-order".encode()).digest()
    return int.from_bytes(digest[:8], "little")


CAL_VAL_FRACTION = 0.2
CAL_HOLDOUT_FRACTION = 0.2


def _validation_protocol(
    a: dict[str, np.ndarray], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The validation fit's split, for metrics tuned on validation predictions.

    Calibrated stacking and DARTS choose a parameter on validation predictions, which must come
    from a model that has not seen the validation classes. So a second, *validation* fit sees
    only training classes: they are split into ``cal_train``/``cal_val`` classes for the model's
    own tuning, and a class-stratified ``cal_holdout`` of their images is kept out. (The arrays
    keep the ``cal_`` prefix from when this fit was called "calibration": array names are
    hashed into every frozen benchmark.) Its
    predictions on validation-class images (ZSL-val: validation classes as candidates) and on
    holdout + validation-class images (GZSL-val: training ∪ validation classes as candidates)
    are the validation split of the metrics. Nothing here touches test images.
    """
    train_classes = a["splits/train_classes"]
    perm = train_classes[np.argsort(rng.random(len(train_classes)), kind="stable")]
    n_cal_val = max(1, round(CAL_VAL_FRACTION * len(train_classes)))
    labels = a["labels"]
    train_images = a["splits/train_images"]
    draw = rng.random(len(train_images))
    holdout = np.zeros(len(train_images), bool)
    image_labels = labels[train_images]
    for c in train_classes:
        members = np.flatnonzero(image_labels == c)
        n_out = round(CAL_HOLDOUT_FRACTION * len(members))
        if 0 < n_out < len(members):
            holdout[members[np.argsort(draw[members], kind="stable")[:n_out]]] = True
    val_images = a["splits/val_images"]
    out = {
        "splits/cal_train_classes": np.sort(perm[n_cal_val:]),
        "splits/cal_val_classes": np.sort(perm[:n_cal_val]),
        "splits/cal_fit_images": np.sort(train_images[~holdout]),
        "splits/cal_holdout_images": np.sort(train_images[holdout]),
        "order/zsl_val/columns": a["splits/val_classes"],
        "order/gzsl_val/columns": np.sort(np.concatenate([train_classes, a["splits/val_classes"]])),
    }
    out["order/zsl_val/rows"] = val_images[np.argsort(rng.random(len(val_images)), kind="stable")]
    gzsl_val = np.concatenate([out["splits/cal_holdout_images"], val_images])
    out["order/gzsl_val/rows"] = gzsl_val[np.argsort(rng.random(len(gzsl_val)), kind="stable")]
    return out


def freeze_arrays(raw: RawBenchmark, spec: Spec) -> dict[str, np.ndarray]:
    """Every artifact of the frozen benchmark, by name."""
    arrays: dict[str, np.ndarray] = {
        "features": raw.features,
        "labels": raw.labels.astype(np.int64),
        "class_ids": raw.class_ids.astype(str),
        "class_names": raw.class_names.astype(str),
    }
    for name, table in raw.embeddings.items():
        arrays[f"embeddings/{name}"] = table.astype(np.float32)
    for key, value in raw.splits.items():
        arrays[f"splits/{key}"] = np.sort(value.astype(np.int64))
    for key, value in raw.extra.items():
        arrays[f"extra/{key}"] = value
    rng = np.random.Generator(np.random.PCG64(_order_seed(spec.benchmark, spec.version)))
    unseen_imgs = arrays["splits/test_unseen_images"]
    gzsl_imgs = np.concatenate([arrays["splits/test_seen_images"], unseen_imgs])
    arrays["order/zsl/rows"] = unseen_imgs[np.argsort(rng.random(len(unseen_imgs)), kind="stable")]
    arrays["order/gzsl/rows"] = gzsl_imgs[np.argsort(rng.random(len(gzsl_imgs)), kind="stable")]
    arrays.update(_validation_protocol(arrays, rng))
    arrays["order/zsl/columns"] = arrays["splits/unseen_classes"]
    arrays["order/gzsl/columns"] = np.sort(
        np.concatenate(
            [
                arrays["splits/train_classes"],
                arrays["splits/val_classes"],
                arrays["splits/unseen_classes"],
            ]
        )
    )
    hierarchy_path = spec.hierarchy_path()
    hierarchy = None
    if spec.hierarchy is not None and spec.hierarchy.source == "adapter":
        if raw.hierarchy is None:
            raise SpecError(
                f"{spec.path}: hierarchy.source is 'adapter' but adapter '{spec.data.adapter}'"
                " built no hierarchy"
            )
        hierarchy = raw.hierarchy
    elif hierarchy_path is not None:
        hierarchy = Hierarchy.load_json(hierarchy_path)
    if hierarchy is not None:
        known = set(hierarchy.node_ids.tolist())
        missing = [c for c in arrays["class_ids"].tolist() if c not in known]
        if missing:
            raise SpecError(
                f"{spec.path}: hierarchy.file has no node for {len(missing)} class(es),"
                f" first {missing[0]!r}"
            )
        for key, value in hierarchy.to_arrays().items():
            arrays[f"hierarchy/{key}"] = value
    return arrays


def prepare(spec: Spec, *, no_audit: str | None = None, refresh: bool = False) -> FrozenBenchmark:
    """Freeze ``spec``'s benchmark under ``ZSL_HOME`` (or verify and reuse the frozen copy).

    ``no_audit``: freeze without the leakage audit, recording this reason, when its inputs are
    not available here (without it such a freeze is refused: :func:`harness.audit.plan_audit`).
    A frozen copy is reused as it is (the audit it holds is the benchmark's) while its source
    files are unchanged (:func:`harness.data.sources.check_sources`). ``refresh``: freeze again
    from the current files, replacing the frozen copy only once the new one is whole.
    """
    root = benchmark_dir(spec.benchmark, spec.version)
    data_hash = spec.data_hash()
    action = cache_action(root, data_hash)
    if refresh and action != "create":
        frozen = _refreeze(spec, root, *_adapter(spec), no_audit)
    elif action == "conflict":
        raise IntegrityError(
            f"{root} holds {spec.benchmark} v{spec.version} frozen from different spec data."
            f" A spec's data must not change within a version: bump 'version' in {spec.path}"
            f" (or, while you develop the spec, `zsl data prepare {spec.path} --refresh`)."
        )
    elif action == "outdated":
        found = json.loads((root / MANIFEST).read_text())["format"]
        raise OutdatedFormatError(outdated_message(root, found, str(spec.path)))
    elif action == "use":
        frozen = FrozenBenchmark(root)
        frozen.verify()
        _check_audit_rule(spec, frozen)
        check_frozen_sources(spec, frozen)
    else:
        frozen = _freeze(spec, root, *_adapter(spec), no_audit)
    if spec.data.checksum is not None and frozen.hash != spec.data.checksum:
        raise IntegrityError(
            f"{spec.benchmark} v{spec.version}: the frozen data hash {frozen.hash} differs from"
            f" data.checksum {spec.data.checksum} in {spec.path}. The raw files or the generator"
            f" changed; the frozen copy at {root} is kept for inspection."
        )
    return frozen


def check_frozen_sources(spec: Spec, frozen: FrozenBenchmark) -> None:
    """Refuse a frozen copy whose source files changed since it was frozen (the files the
    adapter would read now, and those it was frozen from): see
    :func:`harness.data.sources.check_sources`."""
    adapter, params = _adapter(spec)
    check_sources(
        frozen.raw_inputs, adapter.sources(spec, params), root=frozen.root, spec_path=spec.path
    )


def _adapter(spec: Spec) -> tuple[Adapter, BaseModel]:
    """The spec's adapter and its validated ``data.params``."""
    try:
        adapter = adapters.get(spec.data.adapter)
    except RegistryError as err:
        raise SpecError(f"{spec.path}: data.adapter: {err}") from None
    try:
        params = adapter.params.model_validate(spec.data.params)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise SpecError(
            f"{spec.path}: data.params.{loc}: {first['msg']}"
            f" ({len(err.errors())} problem(s) in data.params)"
        ) from None
    return adapter, params


def _freeze(
    spec: Spec, root: Path, adapter: Adapter, params: BaseModel, no_audit: str | None
) -> FrozenBenchmark:
    """Read the raw inputs, check them and write the frozen benchmark at ``root``."""
    plan = plan_audit(spec, without_audit=no_audit)  # refused here, before reading data
    raw = adapter.load(spec, params)
    check_raw(raw, spec)
    arrays = freeze_arrays(raw, spec)
    ids = arrays["class_ids"].tolist()
    frozen = write_frozen(
        root,
        arrays,
        benchmark=spec.benchmark,
        version=spec.version,
        spec_data_hash=spec.data_hash(),
        audit=freeze_audit(
            spec,
            plan,
            [ids[i] for i in arrays["splits/unseen_classes"].tolist()],
            dict(zip(ids, arrays["class_names"].tolist(), strict=True)),
        ),
        raw_inputs=source_manifest(raw.source),
        meta=raw.meta,
    )
    benchmark_facts(PreparedBenchmark(spec, frozen))  # kept with it, for every run to read
    return frozen


def _refreeze(
    spec: Spec, root: Path, adapter: Adapter, params: BaseModel, no_audit: str | None
) -> FrozenBenchmark:
    """Freeze again over an existing copy: the old one is moved aside and put back if the new
    freeze fails, so ``root`` always holds a whole benchmark or none."""
    aside = root.with_name(f".{root.name}.replaced.{os.getpid()}")
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(root, aside)
    try:
        frozen = _freeze(spec, root, adapter, params, no_audit)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        os.replace(aside, root)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    return frozen


def _check_audit_rule(spec: Spec, frozen: FrozenBenchmark) -> None:
    """Refuse a frozen copy whose audit was made under another ``audit`` rule than the spec's.

    The rule (``audit.match``, ``audit.related_within``, the ``audit.wordnet_map`` file) is not
    part of the spec data hash, but it decides the frozen audit and so the benchmark hash.
    """
    audit = frozen.audit
    if audit.status != AuditStatus.AUDITED:
        return
    map_path = spec.audit_map_path()
    recorded_map = audit.inputs.wordnet_map_sha256 if audit.inputs is not None else None
    try:
        spec_map = file_sha256(map_path) if map_path is not None else None
    except OSError as err:
        raise SpecError(f"cannot read audit.wordnet_map {map_path}: {err.strerror}") from None
    changed = [
        key
        for key, was, now in (
            ("audit.match", audit.match, spec.audit.match),
            ("audit.related_within", audit.related_within, spec.audit.related_within),
            ("audit.wordnet_map", recorded_map, spec_map),
        )
        if was != now
    ]
    if changed:
        raise IntegrityError(
            f"{frozen.root} holds {spec.benchmark} v{spec.version} with a leakage audit made"
            f" under another {', '.join(changed)} than {spec.path} gives. The audit is part of"
            f" the frozen benchmark: bump 'version' in {spec.path} (or delete {frozen.root} if"
            " you are developing the spec)."
        )


@dataclass
class PreparedBenchmark:
    """A typed view of a frozen benchmark for one spec: splits, orders, candidates, hierarchy."""

    spec: Spec
    frozen: FrozenBenchmark

    @property
    def hash(self) -> str:
        return self.frozen.hash

    def array(self, name: str) -> np.ndarray:
        return self.frozen.array(name)

    @cached_property
    def class_ids(self) -> np.ndarray:
        return self.array("class_ids")

    @cached_property
    def seen_classes(self) -> np.ndarray:
        return np.sort(
            np.concatenate([self.array("splits/train_classes"), self.array("splits/val_classes")])
        )

    def seen_for(self, setting: str) -> np.ndarray:
        """Seen classes of ``setting``: train ∪ val for test settings, train for ``*_val``."""
        if setting.endswith("_val"):
            return self.array("splits/train_classes")
        return self.seen_classes

    def rows(self, setting: str) -> np.ndarray:
        """Image indices of the prediction rows of ``setting``, in file order."""
        if setting in SCALE_SETTINGS:
            return self.scale_rows
        return self.array(f"order/{setting}/rows")

    def columns(self, setting: str) -> np.ndarray:
        """Class indices of the prediction columns of ``setting``, in file order."""
        if setting in SCALE_SETTINGS:
            return self.array("splits/train_classes")
        return self.array(f"order/{setting}/columns")

    @cached_property
    def scale_rows(self) -> np.ndarray:
        """The scale images both fits score (:mod:`harness.data.scale_images`): drawn from the
        validation fit's fitting images, which the main fit trains on too, with a seed taken
        from the benchmark hash (so they are a function of the frozen arrays, not stored)."""
        images = self.array("splits/cal_fit_images")
        digest = hashlib.sha256(f"{self.hash}/scale-rows".encode()).digest()
        return scale_rows(
            images, self.array("labels")[images], int.from_bytes(digest[:8], "little")
        )

    def class_order_hash(self, setting: str) -> str:
        return strings_sha256(self.class_ids[self.columns(setting)])

    @cached_property
    def facts(self) -> BenchmarkFacts:
        """The split's structure and its test classes, computed once per prepared benchmark
        and kept next to it (:func:`harness.data.facts.benchmark_facts`)."""
        return benchmark_facts(self)

    @cached_property
    def hierarchy(self) -> Hierarchy | None:
        if "hierarchy/node_ids" not in self.frozen:
            return None
        return Hierarchy.from_arrays(
            {k: self.array(f"hierarchy/{k}") for k in ("node_ids", "names", "edges")}
        )


def load_benchmark(spec: Spec) -> PreparedBenchmark:
    """Prepare (or reuse) and return the typed view."""
    return PreparedBenchmark(spec, prepare(spec))
