"""The ``imagenet`` data adapter: a split's classes and the user's images, frozen as a benchmark.

:class:`ImageNetAdapter` joins :mod:`~harness.data.imagenet.splits` (which classes) and
:mod:`~harness.data.imagenet.features` (which images), draws the validation classes and the
held-out seen images, and hands the result to ``prepare``.

See docs/data.md.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from harness.core.errors import SpecError
from harness.data.adapters import RawBenchmark, adapters
from harness.data.feature_set import EmbeddingSetRef, embedding_provenance, open_pinned_set
from harness.data.imagenet.features import (
    EMBEDDINGS_FILE,
    ENV_FEATURES_DIR,
    FEATURES_FILE,
    LABELS_FILE,
    WNIDS_FILE,
    IntArray,
    embedding_file,
    gather_features,
    open_user_features,
    select_images,
)
from harness.data.imagenet.splits import (
    ListSplit,
    SplitName,
    SplitParam,
    list_split,
    preview_ids,
    resolve_split_name,
    split_classes,
    split_structure,
)
from harness.data.sources import RawSource
from harness.hierarchy.class_sets import imagenet_lists_dir, resolve_class_set
from harness.hierarchy.imagenet_isa import load_isa_hierarchy

if TYPE_CHECKING:
    from harness.features.sets import ArtifactSet
    from harness.spec import Spec

__all__ = ["ImageNetAdapter", "ImageNetParams"]

logger = logging.getLogger(__name__)


class ImageNetParams(BaseModel):
    """``data.params`` of the ``imagenet`` adapter (see :mod:`harness.data.imagenet.adapter`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: SplitParam = Field(
        description="within-1-hop, within-2-hops, exactly-<d>-hops, all, goz,"
        " most-/least-populated, or a class list {list: FILE, sha256: HEX}"
    )
    n_classes: int | None = Field(None, gt=0, description="N of most-/least-populated splits")
    counts_file: str | None = Field(
        None, description="'wnid<TAB>count' file for the populated splits"
    )
    lists_dir: str | None = Field(None, description="ImageNet lists; else $ZSL_IMAGENET_DIR")
    features_dir: str | None = Field(
        None,
        description=f"the user's features (see specs/imagenet/README.md); else ${ENV_FEATURES_DIR}",
    )
    train_class_set: str = Field("ilsvrc2012", description="named class set of training classes")
    n_val_classes: int = Field(100, ge=1, description="training classes held out for validation")
    test_seen_fraction: float = Field(0.2, gt=0, lt=1, description="seen images held out for test")
    seed: int = Field(0, ge=0)
    classes_without_embedding: Literal["error", "drop"] = Field(
        "error",
        description="a split class missing from wnids.txt (or from an embedding set): refuse, or"
        " drop it (recorded in meta)",
    )
    embedding_sets: dict[str, EmbeddingSetRef] = Field(
        default_factory=dict,
        description="class embeddings from sets made by `zsl embeddings build` (rows matched by"
        " WordNet id), instead of the feature directory's class_embeddings*.npy files",
    )


def _embedding_sets(
    spec: Spec, params: ImageNetParams, tables: dict[str, np.ndarray]
) -> dict[str, tuple[str, dict[str, int], ArtifactSet]]:
    """Open each of ``params.embedding_sets`` (verified, hash-pinned), put its table into
    ``tables`` and return, per name, where it came from, its row of each WordNet id and the
    set."""
    found: dict[str, tuple[str, dict[str, int], ArtifactSet]] = {}
    for name, ref in params.embedding_sets.items():
        where = f"{spec.path}: data.params.embedding_sets.{name}"
        table = open_pinned_set(_spec_relative(spec, ref.path), "class-embeddings", ref.hash, where)
        dim = table.entries["embeddings"].shape[1]
        declared = next(e.dim for e in spec.class_embeddings if e.name == name)
        if dim != declared:
            raise SpecError(f"{where}: the set is {dim}-d, class_embeddings declares {declared}")
        tables[name] = table.array("embeddings")
        found[name] = (where, {w: i for i, w in enumerate(table.strings("class_ids"))}, table)
    return found


def _spec_relative(spec: Spec, value: str) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    try:
        return spec.path.parent / path
    except SpecError:
        return path


def _resolve_split(spec: Spec, params: ImageNetParams) -> tuple[SplitName, Path, Path | None]:
    """The split, the ImageNet lists directory and the counts file of a spec's parameters
    (relative ``lists_dir`` and ``counts_file`` are read relative to the spec file)."""
    lists_dir = imagenet_lists_dir(
        None if params.lists_dir is None else _spec_relative(spec, params.lists_dir)
    )
    counts = None if params.counts_file is None else _spec_relative(spec, params.counts_file)
    variant = spec.splits.variant
    if isinstance(params.split, ListSplit):
        try:
            split = list_split(
                params.split, lists_dir, name=None if variant == "default" else variant
            )
        except SpecError as err:
            raise SpecError(f"{spec.path}: {err}") from None
        return split, lists_dir, counts
    split = resolve_split_name(params.split, params.n_classes)
    if variant not in ("default", split.name, params.split):
        raise SpecError(
            f"{spec.path}: splits.variant is {variant!r} but data.params.split is"
            f" {params.split!r} ({split.name}); make them agree"
        )
    return split, lists_dir, counts


def _requested(params: ImageNetParams) -> str | dict[str, str]:
    split = params.split
    return split.model_dump() if isinstance(split, ListSplit) else split


def _class_list_meta(split: SplitName, n_ids: int) -> dict[str, Any] | None:
    if split.kind != "list":
        return None
    assert split.list_file is not None
    return {"file": split.list_file.name, "sha256": split.sha256, "n_ids": n_ids}


def _features_dir(spec: Spec, params: ImageNetParams) -> Path:
    if params.features_dir:
        return _spec_relative(spec, params.features_dir)
    value = os.environ.get(ENV_FEATURES_DIR, "")
    if not value:
        raise SpecError(
            f"{spec.path}: data.params.features_dir is not set and neither is"
            f" {ENV_FEATURES_DIR}: point one of them at your feature directory"
            f" ({FEATURES_FILE}, {LABELS_FILE}, {WNIDS_FILE}, {EMBEDDINGS_FILE}; see"
            " specs/imagenet/README.md)"
        )
    return Path(value)


def _pretrained(spec: Spec, lists_dir: Path) -> frozenset[str]:
    pre = spec.features.pretrained_on
    if pre.wnids is not None:
        return frozenset(pre.wnids)
    if pre.web is not None:  # a web corpus names no classes to keep out of the test classes
        return frozenset()
    assert pre.class_set is not None
    try:
        return resolve_class_set(pre.class_set, lists_dir)
    except SpecError as err:
        raise SpecError(f"{spec.path}: features.pretrained_on.class_set: {err}") from None


def _embedding_files(spec: Spec, params: ImageNetParams) -> dict[str, str]:
    """The class-embedding files of the feature directory, by embedding name (those not given
    as embedding sets)."""
    return {
        e.name: embedding_file(e.name, default=e.name == spec.default_embedding)
        for e in spec.class_embeddings
        if e.name not in params.embedding_sets
    }


def _feature_files(directory: Path, embeddings: dict[str, str]) -> dict[str, Path]:
    """The files of the user's feature directory that ``load`` reads."""
    names = (FEATURES_FILE, LABELS_FILE, WNIDS_FILE, *embeddings.values())
    return {name: directory / name for name in names if (directory / name).is_file()}


class ImageNetAdapter:
    """Adapter ``imagenet``: ILSVRC-2012 training classes, an ImageNet-21K test split, and the
    user's features (see :mod:`harness.data.imagenet.adapter`)."""

    name = "imagenet"
    params = ImageNetParams

    def describe_release(self, spec: Spec, params: ImageNetParams) -> dict[str, Any]:
        """The split from the class lists and is-a edges alone (no features): its honest name,
        its size, the hops from its test classes to the training classes and its structural
        ratio (:func:`split_structure`), and for a class list its file, sha256 and size."""
        split, lists_dir, counts = _resolve_split(spec, params)
        train, test = split_classes(
            split, lists_dir, train_class_set=params.train_class_set, counts_file=counts
        )
        hierarchy = load_isa_hierarchy(lists_dir)
        structure = split_structure(hierarchy, train, test)
        out: dict[str, Any] = {
            "split": split.name,
            "requested_as": _requested(params),
            "train_classes": len(train),
            "test_classes": len(test),
            "hops_to_train": structure.pop("hops_to_train"),
            "structure": structure,
        }
        class_list = _class_list_meta(split, len(test))
        if class_list is not None:
            out["class_list"] = class_list
        out.update(
            test_class_ids=list(test), test_class_names=list(test), seen_class_ids=list(train)
        )
        return out

    def sources(self, spec: Spec, params: ImageNetParams) -> dict[str, Path]:
        return _feature_files(_features_dir(spec, params), _embedding_files(spec, params))

    def load(self, spec: Spec, params: ImageNetParams) -> RawBenchmark:
        split, lists_dir, counts = _resolve_split(spec, params)
        train_all, test_all = split_classes(
            split, lists_dir, train_class_set=params.train_class_set, counts_file=counts
        )
        unknown = sorted(set(params.embedding_sets) - {e.name for e in spec.class_embeddings})
        if unknown:
            raise SpecError(
                f"{spec.path}: data.params.embedding_sets names {unknown}, which class_embeddings"
                " does not declare"
            )
        names = _embedding_files(spec, params)
        user = open_user_features(_features_dir(spec, params), names)
        set_rows = _embedding_sets(spec, params, user.embeddings)
        if user.dim != spec.features.dim:
            raise SpecError(
                f"{spec.path}: features.dim is {spec.features.dim} but"
                f" {user.directory / FEATURES_FILE} has {user.dim} columns"
            )
        position = {w: i for i, w in enumerate(user.wnids)}
        missing = [w for w in (*train_all, *test_all) if w not in position]
        if missing and params.classes_without_embedding == "error":
            raise SpecError(
                f"{user.directory / WNIDS_FILE} lacks {len(missing)} class(es) of split"
                f" {split.name!r} (so they have no class embedding): {preview_ids(missing)}. Add"
                " them, or set data.params.classes_without_embedding: drop (the dropped classes"
                " are recorded in the frozen meta)"
            )
        for where, rows_of, _ in set_rows.values():
            lacking = [w for w in (*train_all, *test_all) if w in position and w not in rows_of]
            if lacking and params.classes_without_embedding == "error":
                raise SpecError(
                    f"{where}: the set lacks {len(lacking)} class(es) of split {split.name!r}:"
                    f" {preview_ids(lacking)}. Build it from a class list holding them, or set"
                    " data.params.classes_without_embedding: drop"
                )
            missing += lacking
        dropped = set(missing)
        train = [w for w in train_all if w not in dropped]
        test = [w for w in test_all if w not in dropped]
        if not test:
            raise SpecError(f"{spec.path}: split {split.name!r} has no test class left")
        leaked = sorted(set(test) & _pretrained(spec, lists_dir))
        if leaked:
            raise SpecError(
                f"{spec.path}: {len(leaked)} test class(es) of split {split.name!r} are among"
                f" the classes the feature backbone was trained on"
                f" (features.pretrained_on): {preview_ids(leaked)}; they cannot be unseen"
            )
        if params.n_val_classes >= len(train):
            raise SpecError(
                f"{spec.path}: data.params.n_val_classes is {params.n_val_classes} but there"
                f" are only {len(train)} training classes"
            )
        class_ids = np.array(sorted({*train, *test}), dtype=str)
        n_classes = class_ids.size
        train_idx = np.searchsorted(class_ids, np.array(train, dtype=str))
        test_idx = np.searchsorted(class_ids, np.array(test, dtype=str))

        seeds = np.random.SeedSequence(params.seed).spawn(3)
        val_draw = np.random.Generator(np.random.PCG64(seeds[0])).permutation(train_idx.size)
        val_idx = np.sort(train_idx[val_draw[: params.n_val_classes]])
        fit_idx = np.sort(train_idx[val_draw[params.n_val_classes :]])

        lookup = np.full(len(user.wnids), -1, dtype=np.int64)
        lookup[[position[w] for w in class_ids.tolist()]] = np.arange(n_classes)
        rows, classes = select_images(user.labels, lookup, user.directory / LABELS_FILE)
        order = np.random.Generator(np.random.PCG64(seeds[1])).permutation(rows.size)
        labels = np.empty(rows.size, dtype=np.int64)
        labels[order] = classes
        features = gather_features(user.features, rows, order, user.directory / FEATURES_FILE)

        role = np.zeros(n_classes, dtype=np.int8)  # 1 train, 2 val, 3 unseen
        role[fit_idx], role[val_idx], role[test_idx] = 1, 2, 3
        image_role = role[labels]
        held_out = _hold_out(labels, image_role < 3, params.test_seen_fraction, seeds[2])
        splits = {
            "train_classes": fit_idx.astype(np.int64),
            "val_classes": val_idx.astype(np.int64),
            "unseen_classes": np.sort(test_idx).astype(np.int64),
            "train_images": np.flatnonzero((image_role == 1) & ~held_out),
            "val_images": np.flatnonzero((image_role == 2) & ~held_out),
            "test_seen_images": np.flatnonzero((image_role < 3) & held_out),
            "test_unseen_images": np.flatnonzero(image_role == 3),
        }
        embeddings = {}
        for name, (_, rows_of, _) in set_rows.items():
            table = user.embeddings[name]
            embeddings[name] = np.asarray(
                table[[rows_of[w] for w in class_ids.tolist()]], dtype=np.float32
            )
        source_rows = np.array([position[w] for w in class_ids.tolist()], dtype=np.int64)
        for name, table in user.embeddings.items():
            if name in set_rows:
                continue
            values = np.asarray(table[source_rows], dtype=np.float32)
            finite = np.isfinite(values).all(axis=1)
            if not finite.all():
                bad = str(class_ids[np.argmin(finite)])
                raise SpecError(
                    f"{user.directory / names[name]}: the row of {bad} (line"
                    f" {position[bad] + 1} of {WNIDS_FILE}) holds NaN or inf"
                )
            embeddings[name] = values

        full = load_isa_hierarchy(lists_dir)
        hierarchy = full.restrict_to_ancestors(full.indices(class_ids.tolist()))
        degree = np.bincount(full.edges.ravel(), minlength=full.n_nodes)
        isolated = np.flatnonzero(degree == 0)
        no_edges = sorted(set(full.node_ids[isolated].tolist()) & set(class_ids.tolist()))
        per_class = np.bincount(labels, minlength=n_classes)
        imageless = class_ids[test_idx][per_class[test_idx] == 0].tolist()
        if imageless:
            logger.warning(
                "%d of %d test classes of %s have no image in %s; they stay candidates",
                len(imageless),
                len(test),
                split.name,
                user.directory,
            )
        structure = split_structure(full, train, test)
        meta = {
            "adapter": "imagenet",
            "split": split.name,
            "requested_split": _requested(params),
            "class_list": _class_list_meta(split, len(test_all)),
            "train_class_set": params.train_class_set,
            "n_training_classes": len(train),
            "n_test_classes": len(test),
            "structural_ratio": structure["structural_ratio"],
            "structural_ratio_included": structure["n_included"],
            "hops_to_train": structure["hops_to_train"],
            "classes_without_isa_edges": no_edges,
            "dropped_without_embedding": sorted(dropped),
            "test_classes_without_images": len(imageless),
            "test_classes_without_images_first": imageless[:20],
            "source_images": user.n_images,
            "source_dtype": str(user.features.dtype),
            "selected_images": int(rows.size),
            "n_val_classes": params.n_val_classes,
            "test_seen_fraction": params.test_seen_fraction,
            "seed": params.seed,
        }
        if set_rows:
            sets_used = {name: found[2] for name, found in set_rows.items()}
            meta["provenance"] = {"class_embeddings": embedding_provenance(sets_used)}
        return RawBenchmark(
            source=RawSource(
                "own",
                "ImageNet features brought by the user (data.params.features_dir or"
                f" ${ENV_FEATURES_DIR}) for the class lists' images",
                files=_feature_files(user.directory, names),
            ),
            features=features,
            labels=labels,
            class_ids=class_ids,
            class_names=full.names[full.indices(class_ids)].astype(str),
            embeddings=embeddings,
            splits=splits,
            meta=meta,
            hierarchy=hierarchy,
        )


def _hold_out(
    labels: IntArray, seen: npt.NDArray[np.bool_], fraction: float, seed: np.random.SeedSequence
) -> npt.NDArray[np.bool_]:
    """Per seen class, a seeded ``round(fraction * n)`` of its images (at least 1 when n >= 2,
    at most n - 1), vectorized: rank images within their class by a random draw."""
    draw = np.random.Generator(np.random.PCG64(seed)).random(labels.size)
    out = np.zeros(labels.size, dtype=bool)
    idx = np.flatnonzero(seen)
    if idx.size == 0:
        return out
    order = idx[np.lexsort((draw[idx], labels[idx]))]
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    sizes = np.diff(np.r_[starts, sorted_labels.size])
    rank = np.arange(sorted_labels.size) - np.repeat(starts, sizes)
    size = np.repeat(sizes, sizes)
    quota = np.where(size >= 2, np.clip(np.round(fraction * size), 1, size - 1), 0)
    out[order[rank < quota]] = True
    return out


adapters.add("imagenet", ImageNetAdapter())
