"""Adapter ``xlsa17``: AWA1, AWA2, CUB, SUN and aPY as released by Xian et al. (GBU).

Xian, Lampert, Schiele, Akata, "Zero-Shot Learning — A Comprehensive Evaluation of the Good, the
Bad and the Ugly", TPAMI 2018 (CVPR 2017). Release ``xlsa17.zip``, one folder per dataset.

See docs/data.md.
"""

from __future__ import annotations

import difflib
import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.core.errors import HarnessError, IntegrityError, SpecError
from harness.core.textio import read_text_file
from harness.data.adapters import RawBenchmark, adapters, hold_out_per_class, split_by_class
from harness.data.download import (
    DownloadRefused,
    approve,
    downloads_dir,
    extract_members,
    fetch,
    pending_download,
)
from harness.data.sources import RawSource
from harness.hierarchy.class_maps import read_class_map_rows
from harness.hierarchy.cub_taxonomy import load_cub_taxonomy
from harness.hierarchy.wordnet import build_wordnet_hierarchy, open_wordnet

if TYPE_CHECKING:
    from harness.hierarchy import Hierarchy
    from harness.spec import Spec

__all__ = [
    "DATASETS",
    "LAMPERT_TEST_CLASSES",
    "PASCAL_VOC_CLASSES",
    "SYNTHETIC_PREFIX",
    "Xlsa17Adapter",
    "Xlsa17Params",
    "describe_counts",
    "read_class_map",
    "release_class_names",
    "release_overlaps",
]

DATASETS = ("AWA1", "AWA2", "CUB", "SUN", "APY")
OFFICIAL_URL = "https://datasets.d2.mpi-inf.mpg.de/xian/xlsa17.zip"
ARCHIVE = "xlsa17.zip"
ARCHIVE_SIZE = "about 1 GB"
ENV_DIR = "ZSL_XLSA17_DIR"
#: How every image file name of a synthetic ``res101.mat`` starts
#: (:mod:`harness.data.xlsa17_synthetic`): how a benchmark frozen from one is told from the
#: release (its origin is ``synthetic``, whatever folder it was read from).
SYNTHETIC_PREFIX = "/synthetic-features"
ENV_CUB_TAXONOMY = "ZSL_CUB_TAXONOMY_DIR"
PLACEHOLDER = "TODO"
SS_TEST_SEEN_FRACTION = 0.2

#: Test classes of the standard AWA split (Lampert et al., CVPR 2009 / TPAMI 2014), xlsa17 names.
LAMPERT_TEST_CLASSES = (
    "chimpanzee",
    "giant+panda",
    "hippopotamus",
    "humpback+whale",
    "leopard",
    "pig",
    "raccoon",
    "rat",
    "seal",
    "persian+cat",
)
#: The 20 PASCAL VOC classes: the seen classes of the standard aPY split (Farhadi et al. 2009).
PASCAL_VOC_CLASSES = (
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)
#: Where the unseen classes of a standard split come from, for the datasets whose list the xlsa17
#: release does not ship: its class files are the proposed split's, and nothing in its files
#: (att_splits.mat, the class lists) says which classes the older split held out.
SS_TEST_CLASS_SOURCES = {
    "CUB": "CUB's standard split holds out the 50 test classes of Akata et al. (ALE, TPAMI"
    " 2016; SJE, CVPR 2015), the split GBU Table I reports (150 seen + 50 unseen); its"
    " testclasses.txt is published with Reed et al.'s CUB data (CVPR 2016, cvpr2016_cub), in"
    " the xlsa17 spelling ('001.Black_footed_Albatross')",
    "SUN": "SUN's standard split holds out the 72 test classes of Jayaraman & Grauman (NIPS"
    " 2014), the split GBU Table I reports (645 seen + 72 unseen); copy them from that paper's"
    " published split, in the xlsa17 spelling (att_splits.mat allclasses_names)",
}


def ss_test_classes_missing(spec_path: Path, dataset: str, placeholder: str | None = None) -> str:
    """Why a standard split of ``dataset`` without its unseen classes cannot be made, and where
    to get them (``placeholder``: the spec's placeholder entry, if it holds one)."""
    needs = (
        f"data.params.test_classes still holds the placeholder {placeholder!r}: the standard"
        f" split of {dataset} needs its unseen classes"
        if placeholder
        else f"the standard split of {dataset} needs data.params.test_classes, its unseen classes"
    )
    source = SS_TEST_CLASS_SOURCES.get(dataset)
    return (
        f"{spec_path}: {needs} (xlsa17 names), which the xlsa17 release does not ship and its"
        " files cannot give. " + (f"{source}: list them there." if source else "List them there.")
    )


_LOC_KEYS = ("trainval_loc", "test_seen_loc", "test_unseen_loc", "train_loc", "val_loc")
_REQUIRED_ATT_KEYS = ("allclasses_names", "att", "original_att", *_LOC_KEYS[:3])
_HASH = re.compile(r"^[a-z0-9]+:[0-9a-fA-F]+$")


class Xlsa17Params(BaseModel):
    """``data.params`` of a spec with ``data.adapter: xlsa17``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: Literal["AWA1", "AWA2", "CUB", "SUN", "APY"]
    split: Literal["proposed", "standard"]
    validation: Literal[1, 2, 3] = Field(1, description="which trainclassesN/valclassesN pair")
    embedding: Literal["att", "original_att"] = Field(
        "att", description="array given to a spec embedding not named att/original_att"
    )
    class_map: str | None = Field(
        None, description="TSV (relative to the spec) mapping xlsa17 class names to class ids"
    )
    hierarchy: Literal["none", "wordnet_map", "cub_taxonomy"] = "none"
    wordnet_root: str | None = Field(None, description="root WordNet id for 'wordnet_map'")
    taxonomy_path: str | None = Field(
        None, description=f"CUB taxonomy folder for 'cub_taxonomy' (else ${ENV_CUB_TAXONOMY})"
    )
    test_classes: list[str] | None = Field(None, description="standard split: unseen classes")
    train_classes: list[str] | None = Field(None, description="standard split: seen classes")
    seed: int = Field(0, ge=0, description="standard split: seed of the 20% test_seen holdout")
    path: str | None = Field(
        None, description=f"folder holding <DATASET>/ (relative to the spec; else ${ENV_DIR})"
    )
    mirror: str | None = Field(None, description=f"folder or URL holding a copy of {ARCHIVE}")
    url: str = Field(OFFICIAL_URL, description=f"where {ARCHIVE} is downloaded from")
    checksum: str | None = Field(
        None, description=f"hash of {ARCHIVE}, e.g. 'sha256:<hex>' (pin it after a download)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Xlsa17Params:
        if self.split == "proposed" and (
            self.test_classes is not None or self.train_classes is not None
        ):
            raise ValueError(
                "test_classes/train_classes are for split 'standard'; the proposed split takes"
                " its classes from the release's class files"
            )
        if self.hierarchy == "cub_taxonomy" and self.dataset != "CUB":
            raise ValueError(f"hierarchy 'cub_taxonomy' is for dataset CUB, not {self.dataset}")
        if self.hierarchy == "cub_taxonomy" and self.class_map is not None:
            raise ValueError("hierarchy 'cub_taxonomy' names the classes itself; drop class_map")
        if self.hierarchy == "wordnet_map" and self.class_map is None:
            raise ValueError("hierarchy 'wordnet_map' needs class_map (xlsa17 name → WordNet id)")
        if self.taxonomy_path is not None and self.hierarchy != "cub_taxonomy":
            raise ValueError("taxonomy_path is only used with hierarchy 'cub_taxonomy'")
        if self.wordnet_root is not None and self.hierarchy != "wordnet_map":
            raise ValueError("wordnet_root is only used with hierarchy 'wordnet_map'")
        if self.checksum is not None and not _HASH.match(self.checksum):
            raise ValueError(f"checksum must look like 'sha256:<hex>'; got {self.checksum!r}")
        return self


# -- reading the release ---------------------------------------------------------------------


@dataclass
class Release:
    """One dataset of the release, read and cross-checked. Indices are 0-based.

    ``att``/``original_att`` are ``[C, dims]`` (one row per class); ``features`` ``[N, D]``
    float32; ``locs`` the index vectors of ``att_splits.mat`` present in the file.
    """

    dataset: str
    directory: Path
    names: list[str]
    att: np.ndarray
    original_att: np.ndarray
    locs: dict[str, np.ndarray]
    features: np.ndarray
    labels: np.ndarray
    orientation: str = "D x N"
    synthetic: bool = False  # image file names start with SYNTHETIC_PREFIX
    class_files: dict[str, list[int]] = field(default_factory=dict)

    def class_file(self, name: str) -> list[int]:
        """Class indices listed in ``name`` (e.g. ``"testclasses.txt"``), read on first use."""
        if name not in self.class_files:
            self.class_files[name] = read_class_list(
                self.directory / name, {n: i for i, n in enumerate(self.names)}
            )
        return self.class_files[name]


def _loadmat(path: Path, keys: Sequence[str], required: Sequence[str]) -> dict[str, Any]:
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError  # a file shorter than a MATLAB header, say

    if not path.is_file():
        raise SpecError(f"{path} does not exist")
    try:
        content = loadmat(path, squeeze_me=True, variable_names=list(keys))
    except NotImplementedError:  # MATLAB v7.3 (HDF5)
        raise SpecError(
            f"{path} is a MATLAB v7.3 (HDF5) file; the release's files are MATLAB 5 files."
            " Use the original file, or re-save it with save(..., '-v7')."
        ) from None
    except (OSError, ValueError, TypeError, KeyError, MatReadError) as err:
        raise SpecError(f"{path} is not a readable MATLAB file: {err}") from None
    missing = [k for k in required if k not in content]
    if missing:
        raise SpecError(
            f"{path} lacks {', '.join(repr(k) for k in missing)} (it has"
            f" {sorted(k for k in content if not k.startswith('__'))}); is this the release's"
            f" {path.name}?"
        )
    return content


def _indices(value: Any, path: Path, key: str, n: int | None) -> np.ndarray:
    """A 1-based MATLAB index vector as 0-based int64, checked."""
    array = np.atleast_1d(np.asarray(value))
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.number):
        raise SpecError(f"{path}: '{key}' must be a numeric index vector; got {array.shape}")
    if array.size and not np.array_equal(array, np.round(array)):
        raise SpecError(f"{path}: '{key}' holds non-integer indices")
    out = array.astype(np.int64) - 1
    if out.size and out.min() < 0:
        raise SpecError(f"{path}: '{key}' holds index {out.min() + 1}; MATLAB indices start at 1")
    if n is not None and out.size and out.max() >= n:
        raise SpecError(
            f"{path}: '{key}' holds image index {out.max() + 1} but res101.mat has {n} images;"
            " are both files from the same dataset?"
        )
    unique, counts = np.unique(out, return_counts=True)
    if (counts > 1).any():
        raise SpecError(f"{path}: '{key}' lists image {unique[counts > 1][0] + 1} more than once")
    return out


def _names(value: Any) -> list[str]:
    return [str(np.asarray(v).squeeze()) for v in np.atleast_1d(value)]


def release_class_names(att_splits: Path) -> list[str]:
    """The class names of a release's ``att_splits.mat`` (``allclasses_names``), in order.

    SUN ships no ``allclasses.txt``: this is its class list.
    """
    att = _loadmat(att_splits, ["allclasses_names"], ["allclasses_names"])
    return _names(att["allclasses_names"])


def read_class_list(path: Path, index: Mapping[str, int]) -> list[int]:
    """Class indices of a class-list file (one name a line), each name checked.

    Raises
    ------
    SpecError
        The file is missing, repeats a name, or names a class that is not in ``index``
        (naming the line and the closest known names).
    """
    text = read_text_file(
        path,
        SpecError,
        missing=f"{path} does not exist (a class list of the xlsa17 release)",
        unreadable=lambda err: f"cannot read {path}: {err}",
    )
    out: list[int] = []
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        name = raw_line.strip()
        if not name:
            continue
        if name not in index:
            raise SpecError(f"{path}:{lineno}: unknown class {name!r}{_close(name, index)}")
        if index[name] in out:
            raise SpecError(f"{path}:{lineno}: class {name!r} is listed twice")
        out.append(index[name])
    return out


def _close(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def read_release(dataset_dir: Path, dataset: str) -> Release:
    """Read ``att_splits.mat`` and ``res101.mat`` of one dataset folder and cross-check them."""
    att_path = dataset_dir / "att_splits.mat"
    if not att_path.is_file():
        raise SpecError(f"{att_path} does not exist: {dataset_dir} is not an xlsa17 dataset folder")
    att = _loadmat(att_path, [*_REQUIRED_ATT_KEYS, *_LOC_KEYS[3:]], _REQUIRED_ATT_KEYS)
    names = _names(att["allclasses_names"])
    n_classes = len(names)
    if len(set(names)) != n_classes:
        raise SpecError(f"{att_path}: 'allclasses_names' repeats a class name")
    tables = {}
    for key in ("att", "original_att"):
        table = np.atleast_2d(np.asarray(att[key], dtype=np.float64))
        if table.ndim != 2 or table.shape[1] != n_classes:
            raise SpecError(
                f"{att_path}: '{key}' has shape {table.shape}; expected (dims, {n_classes}),"
                f" one column per class of 'allclasses_names'"
            )
        if not np.isfinite(table).all():
            raise SpecError(f"{att_path}: '{key}' contains NaN or inf")
        tables[key] = np.ascontiguousarray(table.T)
    res_path = dataset_dir / "res101.mat"
    if not res_path.is_file():
        raise SpecError(
            f"{res_path} does not exist. res101.mat (the ResNet-101 features) comes with the"
            f" official release {OFFICIAL_URL}: unpack it so that {dataset_dir} holds it, or"
            f" drop data.params.path and ${ENV_DIR} to let the harness download it."
        )
    res = _loadmat(res_path, ["features", "labels", "image_files"], ["features", "labels"])
    labels_raw = np.atleast_1d(np.asarray(res["labels"]))
    n_images = labels_raw.size
    features = np.asarray(res["features"])
    if features.ndim != 2 or n_images not in features.shape:
        raise SpecError(
            f"{res_path}: 'features' has shape {features.shape}, which does not fit {n_images}"
            " labels; expected (dim, n_images) as released"
        )
    orientation = "D x N" if features.shape[1] == n_images else "N x D"
    if orientation == "D x N":
        features = features.T
    if not np.issubdtype(features.dtype, np.number):
        raise SpecError(f"{res_path}: 'features' is not numeric ({features.dtype})")
    features = np.ascontiguousarray(features, dtype=np.float32)
    if labels_raw.ndim != 1 or not np.issubdtype(labels_raw.dtype, np.number):
        raise SpecError(f"{res_path}: 'labels' must be an N×1 numeric vector")
    if not np.array_equal(labels_raw, np.round(labels_raw)) or (
        n_images and (labels_raw.min() < 1 or labels_raw.max() > n_classes)
    ):
        raise SpecError(
            f"{res_path}: 'labels' must be class numbers 1..{n_classes} (the rows of"
            f" allclasses_names in {att_path.name}); got values in"
            f" [{labels_raw.min()}, {labels_raw.max()}]"
        )
    if "image_files" in res and np.atleast_1d(res["image_files"]).size != n_images:
        raise SpecError(
            f"{res_path}: 'image_files' has {np.atleast_1d(res['image_files']).size} entries"
            f" for {n_images} labels"
        )
    locs = {k: _indices(att[k], att_path, k, n_images) for k in _LOC_KEYS if k in att}
    files = np.atleast_1d(res["image_files"]) if "image_files" in res else np.array([])
    synthetic = files.size > 0 and str(np.asarray(files[0]).squeeze()).startswith(SYNTHETIC_PREFIX)
    return Release(
        dataset=dataset,
        directory=dataset_dir,
        names=names,
        att=tables["att"],
        original_att=tables["original_att"],
        locs=locs,
        features=features,
        labels=labels_raw.astype(np.int64) - 1,
        orientation=orientation,
        synthetic=synthetic,
    )


def release_overlaps(locs: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Indices shared by index vectors of ``att_splits.mat`` that a clean split keeps apart.

    Keys ``"<a>&<b>"`` count images in both ``a`` and ``b``; ``train_or_val_loc_in_test`` counts
    distinct ``train_loc``/``val_loc`` images that are ``test_seen`` or ``test_unseen`` images.

    >>> import numpy as np
    >>> locs = {"trainval_loc": np.array([0, 1]), "test_seen_loc": np.array([2]),
    ...         "test_unseen_loc": np.array([3]), "train_loc": np.array([0, 2]),
    ...         "val_loc": np.array([1])}
    >>> release_overlaps(locs)["train_loc&test_seen_loc"], release_overlaps(locs)[
    ...     "train_or_val_loc_in_test"]
    (1, 1)
    """
    pairs = [
        ("trainval_loc", "test_seen_loc"),
        ("trainval_loc", "test_unseen_loc"),
        ("test_seen_loc", "test_unseen_loc"),
        ("train_loc", "val_loc"),
        ("train_loc", "test_seen_loc"),
        ("train_loc", "test_unseen_loc"),
        ("val_loc", "test_seen_loc"),
        ("val_loc", "test_unseen_loc"),
    ]
    out: dict[str, int] = {}
    for a, b in pairs:
        if a in locs and b in locs:
            out[f"{a}&{b}"] = int(np.intersect1d(locs[a], locs[b]).size)
    if "train_loc" in locs and "val_loc" in locs:
        fit = np.union1d(locs["train_loc"], locs["val_loc"])
        test = np.union1d(locs["test_seen_loc"], locs["test_unseen_loc"])
        out["train_or_val_loc_in_test"] = int(np.intersect1d(fit, test).size)
    return out


# -- splits ----------------------------------------------------------------------------------


def _as_array(indices: Iterable[int]) -> np.ndarray:
    return np.sort(np.fromiter(indices, dtype=np.int64))


def _check_labels(release: Release, loc: str, allowed: np.ndarray, what: str) -> None:
    images = release.locs[loc]
    bad = images[~np.isin(release.labels[images], allowed)]
    if bad.size:
        first = int(bad[0])
        raise SpecError(
            f"{release.directory}: res101.mat gives image {first + 1} (in {loc} of"
            f" att_splits.mat) class {release.names[release.labels[first]]!r}, which is not"
            f" {what} ({bad.size} such image(s)); are res101.mat and att_splits.mat from the"
            " same release of the same dataset?"
        )


def _check_disjoint(a: np.ndarray, b: np.ndarray, what: str, release: Release) -> None:
    shared = np.intersect1d(a, b)
    if shared.size:
        raise SpecError(
            f"{release.directory / 'att_splits.mat'}: {what} share {shared.size} image(s)"
            f" (first {int(shared[0]) + 1}); a test image must never reach training or validation"
        )


def proposed_split(release: Release, validation: int) -> dict[str, np.ndarray]:
    """GBU's proposed split (see docs/data.md); ``train_loc``/``val_loc`` unused."""
    directory = release.directory
    train = _as_array(release.class_file(f"trainclasses{validation}.txt"))
    val = _as_array(release.class_file(f"valclasses{validation}.txt"))
    trainval = _as_array(release.class_file("trainvalclasses.txt"))
    unseen = _as_array(release.class_file("testclasses.txt"))
    if np.intersect1d(train, val).size:
        raise SpecError(
            f"{directory}: trainclasses{validation}.txt and valclasses{validation}.txt share"
            f" class {release.names[np.intersect1d(train, val)[0]]!r}"
        )
    if not np.array_equal(np.union1d(train, val), trainval):
        raise SpecError(
            f"{directory}: trainclasses{validation}.txt + valclasses{validation}.txt"
            f" ({train.size + val.size} classes) are not the {trainval.size} classes of"
            " trainvalclasses.txt"
        )
    if np.intersect1d(trainval, unseen).size:
        raise SpecError(f"{directory}: testclasses.txt shares classes with trainvalclasses.txt")
    locs = release.locs
    _check_labels(release, "trainval_loc", trainval, "a class of trainvalclasses.txt")
    _check_labels(release, "test_seen_loc", trainval, "a class of trainvalclasses.txt")
    _check_labels(release, "test_unseen_loc", unseen, "a class of testclasses.txt")
    test = np.union1d(locs["test_seen_loc"], locs["test_unseen_loc"])
    _check_disjoint(locs["trainval_loc"], test, "trainval_loc and the test index vectors", release)
    _check_disjoint(locs["test_seen_loc"], locs["test_unseen_loc"], "the test vectors", release)
    trainval_images = locs["trainval_loc"]
    image_class = release.labels[trainval_images]
    splits = {
        "train_classes": train,
        "val_classes": val,
        "unseen_classes": unseen,
        "train_images": np.sort(trainval_images[np.isin(image_class, train)]),
        "val_images": np.sort(trainval_images[np.isin(image_class, val)]),
        "test_seen_images": np.sort(locs["test_seen_loc"]),
        "test_unseen_images": np.sort(locs["test_unseen_loc"]),
    }
    _assert_no_test_in_fit(splits)
    return splits


def _assert_no_test_in_fit(splits: Mapping[str, np.ndarray]) -> None:
    fit = np.union1d(splits["train_images"], splits["val_images"])
    test = np.union1d(splits["test_seen_images"], splits["test_unseen_images"])
    leaked = np.intersect1d(fit, test)
    if leaked.size:  # cannot happen after the checks above; a guard, not a code path
        raise HarnessError(
            f"internal error: {leaked.size} test image(s) in train/val (first {leaked[0] + 1})"
        )


def _resolve_names(names: Sequence[str], release: Release, key: str, spec_path: Path) -> np.ndarray:
    index = {n: i for i, n in enumerate(release.names)}
    out = []
    for i, name in enumerate(names):
        if name.startswith(PLACEHOLDER) and key == "test_classes":
            raise SpecError(ss_test_classes_missing(spec_path, release.dataset, name))
        if name.startswith(PLACEHOLDER):
            raise SpecError(
                f"{spec_path}: data.params.{key} still holds the placeholder {name!r}: list the"
                f" {release.dataset} classes of the standard split there (xlsa17 names, as in"
                f" {release.directory.name}/allclasses.txt or att_splits.mat allclasses_names)"
            )
        if name not in index:
            raise SpecError(
                f"{spec_path}: data.params.{key}[{i}]: unknown {release.dataset} class"
                f" {name!r}{_close(name, index)}"
            )
        out.append(index[name])
    if len(set(out)) != len(out):
        raise SpecError(f"{spec_path}: data.params.{key} lists a class twice")
    return _as_array(out)


def standard_split(
    release: Release,
    validation: int,
    *,
    test_classes: Sequence[str] | None,
    train_classes: Sequence[str] | None,
    seed: int,
    spec_path: Path,
) -> dict[str, np.ndarray]:
    """The standard split (see docs/data.md), with a seeded 20 % test_seen holdout."""
    dataset = release.dataset
    all_classes = np.arange(len(release.names))
    if test_classes is None:
        if dataset in ("AWA1", "AWA2"):
            test_classes = LAMPERT_TEST_CLASSES
        elif dataset == "APY":
            test_classes = [n for n in release.names if n not in PASCAL_VOC_CLASSES]
        else:
            raise SpecError(ss_test_classes_missing(spec_path, dataset))
    if train_classes is None and dataset == "APY":
        train_classes = PASCAL_VOC_CLASSES
    unseen = _resolve_names(test_classes, release, "test_classes", spec_path)
    if train_classes is None:
        seen = np.setdiff1d(all_classes, unseen)
    else:
        seen = _resolve_names(train_classes, release, "train_classes", spec_path)
        both = np.intersect1d(seen, unseen)
        if both.size:
            raise SpecError(
                f"{spec_path}: data.params.train_classes and test_classes share class"
                f" {release.names[both[0]]!r}"
            )
    val = np.intersect1d(_as_array(release.class_file(f"valclasses{validation}.txt")), seen)
    if not val.size:
        raise SpecError(
            f"{spec_path}: none of the classes of valclasses{validation}.txt is a seen class of"
            f" this standard split, so there is no validation class; choose another"
            " data.params.validation"
        )
    train = np.setdiff1d(seen, val)
    labels = release.labels
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(dataset.encode())]))
    draw = rng.random(len(labels))
    held_out = hold_out_per_class(labels, seen, SS_TEST_SEEN_FRACTION, draw)
    splits = split_by_class(labels, train, val, unseen, held_out)
    _assert_no_test_in_fit(splits)
    return splits


# -- class ids and hierarchies ---------------------------------------------------------------


def read_class_map(path: Path, names: Sequence[str]) -> list[str]:
    """Class ids for ``names`` from a class-map TSV (format: :mod:`harness.hierarchy.class_maps`).

    Every class needs exactly one row, and no two classes may share an id.

    Raises
    ------
    SpecError
        Naming the file and line of an unknown or repeated class, a repeated id, or the classes
        left unmapped (malformed rows raise :class:`~harness.hierarchy.class_maps.ClassMapError`).
    """
    if not path.is_file():
        raise SpecError(f"class map {path} does not exist (data.params.class_map)")
    known = set(names)
    mapped: dict[str, str] = {}
    owner: dict[str, str] = {}
    for row in read_class_map_rows(path):
        where = f"{path}:{row.line}"
        if row.name not in known:
            raise SpecError(f"{where}: unknown class {row.name!r}{_close(row.name, known)}")
        if row.name in mapped:
            raise SpecError(f"{where}: class {row.name!r} is mapped twice")
        if row.broader:
            raise SpecError(
                f"{where}: class {row.name!r} is mapped 'broader' ({row.wnid} only contains it),"
                " so its id would not be the class; data.params.class_map needs every class to"
                " be its own synset (a 'broader' map serves the leakage audit: audit.wordnet_map)"
            )
        if row.wnid in owner:
            raise SpecError(
                f"{where}: {row.name!r} and {owner[row.wnid]!r} both map to {row.wnid};"
                " classes need distinct ids"
            )
        mapped[row.name] = row.wnid
        owner[row.wnid] = row.name
    missing = [n for n in names if n not in mapped]
    if missing:
        raise SpecError(
            f"{path}: {len(missing)} class(es) have no row, first {missing[0]!r}; map every class"
        )
    return [mapped[n] for n in names]


def _resolve(value: str, spec: Spec) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (spec.path.parent / path).resolve()


def _cub_taxonomy(
    release: Release, params: Xlsa17Params, spec: Spec
) -> tuple[Hierarchy, list[str]]:
    if params.taxonomy_path is not None:
        directory = _resolve(params.taxonomy_path, spec)
    elif os.environ.get(ENV_CUB_TAXONOMY):
        directory = Path(os.environ[ENV_CUB_TAXONOMY]).expanduser()
    else:
        raise SpecError(
            f"{spec.path}: hierarchy 'cub_taxonomy' needs the CUB taxonomy folder: set"
            f" data.params.taxonomy_path or ${ENV_CUB_TAXONOMY}"
        )
    try:
        hierarchy, node_ids = load_cub_taxonomy(directory)
    except HarnessError as err:
        raise SpecError(
            f"{spec.path}: data.params.hierarchy 'cub_taxonomy' (taxonomy folder {directory}):"
            f" {err}"
        ) from None
    ids = []
    for name in release.names:
        number = name.split(".", 1)[0]
        if not number.isdigit() or not 1 <= int(number) <= len(node_ids):
            raise SpecError(
                f"{release.directory / 'att_splits.mat'}: CUB class {name!r} does not start with"
                f" its CUB number (001-{len(node_ids):03d}), so it cannot be placed in the taxonomy"
            )
        ids.append(str(node_ids[int(number) - 1]))
    return hierarchy, ids


def _wordnet_hierarchy(ids: list[str], params: Xlsa17Params, spec: Spec) -> Hierarchy:

    try:
        return build_wordnet_hierarchy(open_wordnet(), root=params.wordnet_root, leaves=ids)
    except HarnessError as err:
        raise SpecError(f"{spec.path}: data.params.hierarchy 'wordnet_map': {err}") from None


# -- where the files come from ---------------------------------------------------------------


def offline_hint(dataset: str) -> str:
    """How to use the release without fetching it, for a failed download's message."""
    return (
        f"To work offline, unpack {ARCHIVE} and set {ENV_DIR} to the folder that holds"
        f" {dataset}/ (its att_splits.mat and res101.mat), or set data.params.path in the spec;"
        f" data.params.mirror names a folder or URL holding a copy of {ARCHIVE}."
    )


def local_root(params: Xlsa17Params, spec: Spec) -> tuple[Path, str] | None:
    """The folder the spec names for ``<DATASET>/`` (``data.params.path``, else ``$ZSL_XLSA17_DIR``)
    and how; None when it names none (:func:`locate` then fetches the archive)."""
    if params.path is not None:
        return _resolve(params.path, spec), "data.params.path"
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser().resolve(), f"${ENV_DIR}"
    return None


def locate(params: Xlsa17Params, spec: Spec) -> tuple[Path, str]:
    """The folder holding ``<DATASET>/`` and how it was found (for ``meta``)."""
    named = local_root(params, spec)
    if named is not None:
        return named
    if params.mirror is not None:
        mirror = params.mirror
        if "://" not in mirror:
            source = str(_resolve(mirror, spec) / ARCHIVE)
        else:
            source = mirror.rstrip("/") + "/" + ARCHIVE
        how = f"data.params.mirror ({source})"
    else:
        source, how = params.url, f"download ({params.url})"
    what = f"the xlsa17 release archive {ARCHIVE}"
    try:
        pending = pending_download(
            source, fname=ARCHIVE, known_hash=params.checksum, what=what, size=ARCHIVE_SIZE
        )
        if pending is not None:
            approve(pending)  # before fetch is called: a refused download fetches nothing
        archive, digest = fetch(
            source,
            fname=ARCHIVE,
            known_hash=params.checksum,
            pin_hint=f"data.params.checksum in {spec.path}",
            what=what,
            size=ARCHIVE_SIZE,
        )
    except DownloadRefused as err:
        via = f", data.params.mirror ({source})" if params.mirror is not None else ""
        raise HarnessError(
            f"{err}\n  looked in: data.params.path and ${ENV_DIR} (neither is set){via},"
            f" the download cache {downloads_dir() / ARCHIVE} (not there)"
            f"\n  {offline_hint(params.dataset)}"
        ) from None
    except IntegrityError:
        raise  # a file that does not match its pinned hash: no other copy is the answer
    except HarnessError as err:
        raise HarnessError(f"{err} {offline_hint(params.dataset)}") from None
    member = re.compile(rf"(?:^|/){params.dataset}/([^/]+)$")

    def select(name: str) -> str | None:
        match = member.search(name)
        return f"{params.dataset}/{match.group(1)}" if match else None

    root = downloads_dir() / f"xlsa17-{digest.split(':')[-1][:16]}-{params.dataset}"
    extract_members(archive, root, select)
    return root, how


# -- the adapter -----------------------------------------------------------------------------


def _embeddings(release: Release, params: Xlsa17Params, spec: Spec) -> dict[str, np.ndarray]:
    tables = {"att": release.att, "original_att": release.original_att}
    return {
        e.name: tables.get(e.name, tables[params.embedding]).astype(np.float32)
        for e in spec.class_embeddings
    }


class Xlsa17Adapter:
    """Adapter ``xlsa17`` (see docs/data.md)."""

    name = "xlsa17"
    params = Xlsa17Params

    def describe_release(self, spec: Spec, params: Xlsa17Params) -> dict[str, Any]:
        """GBU Table I counts without ``res101.mat`` (see :func:`describe_release`)."""
        return describe_release(spec, params)

    def load(self, spec: Spec, params: Xlsa17Params) -> RawBenchmark:
        from_adapter = spec.hierarchy is not None and spec.hierarchy.source == "adapter"
        if from_adapter and params.hierarchy == "none":
            raise SpecError(
                f"{spec.path}: hierarchy.source is 'adapter', so set data.params.hierarchy to"
                " 'wordnet_map' or 'cub_taxonomy'"
            )
        if not from_adapter and params.hierarchy != "none":
            raise SpecError(
                f"{spec.path}: data.params.hierarchy is {params.hierarchy!r}, which only serves"
                " a spec with 'hierarchy: {source: adapter}'"
            )
        root, how = locate(params, spec)
        dataset_dir = root / params.dataset
        if not dataset_dir.is_dir():
            found = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            raise SpecError(
                f"{dataset_dir} does not exist ({how} is {root}, which should hold one folder"
                f" per dataset; found {found or 'nothing'})"
            )
        release = read_release(dataset_dir, params.dataset)
        dim = release.features.shape[1]
        if dim != spec.features.dim:
            raise SpecError(
                f"{dataset_dir / 'res101.mat'}: features are {dim}-dimensional but {spec.path}"
                f" declares features.dim {spec.features.dim}"
            )
        if (dataset_dir / "allclasses.txt").is_file():
            listed = release.class_file("allclasses.txt")
            if sorted(listed) != list(range(len(release.names))):
                raise SpecError(
                    f"{dataset_dir / 'allclasses.txt'} lists {len(listed)} of the"
                    f" {len(release.names)} classes of att_splits.mat"
                )
        if params.split == "proposed":
            splits = proposed_split(release, params.validation)
            test_seen = "test_seen_loc of the release"
        else:
            splits = standard_split(
                release,
                params.validation,
                test_classes=params.test_classes,
                train_classes=params.train_classes,
                seed=params.seed,
                spec_path=spec.path,
            )
            test_seen = f"{SS_TEST_SEEN_FRACTION:.0%} of each seen class (seed {params.seed})"

        hierarchy = None
        if params.hierarchy == "cub_taxonomy":
            hierarchy, class_ids = _cub_taxonomy(release, params, spec)
        elif params.class_map is not None:
            class_ids = read_class_map(_resolve(params.class_map, spec), release.names)
        else:
            class_ids = [f"xlsa17:{params.dataset}:{n}" for n in release.names]
        if params.hierarchy == "wordnet_map":
            hierarchy = _wordnet_hierarchy(class_ids, params, spec)

        overlaps = release_overlaps(release.locs)
        meta: dict[str, Any] = {
            "adapter": "xlsa17",
            "dataset": params.dataset,
            "split": params.split,
            "validation": params.validation,
            "source": how,
            "n_release_images": len(release.labels),
            "n_attributes": int(release.att.shape[1]),
            "features_layout": release.orientation,
            "train_val_images": (
                f"images of trainval_loc by class (trainclasses{params.validation}.txt /"
                f" valclasses{params.validation}.txt); train_loc/val_loc unused"
                if params.split == "proposed"
                else "images of the seen classes outside test_seen, by class"
            ),
            "test_seen_images": test_seen,
            "release_overlaps": overlaps,
        }
        leaked = overlaps.get("train_or_val_loc_in_test", 0)
        if leaked:
            meta["release_overlap_note"] = (
                f"the release's train_loc/val_loc hold {leaked} test image(s); this benchmark"
                " does not use them"
            )
        return RawBenchmark(
            source=_raw_source(
                release, params, how, root, fetched=local_root(params, spec) is None
            ),
            features=release.features,
            labels=release.labels,
            class_ids=np.asarray(class_ids, dtype=str),
            class_names=np.asarray(release.names, dtype=str),
            embeddings=_embeddings(release, params, spec),
            splits=splits,
            meta=meta,
            hierarchy=hierarchy,
        )

    def sources(self, spec: Spec, params: Xlsa17Params) -> dict[str, Path] | None:
        named = local_root(params, spec)
        if named is None:
            return None  # in the download cache, found by the archive's hash: fetch checks it
        return _source_files(named[0], params)


#: The release's files the adapter reads, per dataset folder (class lists where present).
_SOURCE_FILES = ("att_splits.mat", "res101.mat", "allclasses.txt", "trainvalclasses.txt")


def _source_files(root: Path, params: Xlsa17Params) -> dict[str, Path]:
    """The files of ``root/<dataset>/`` that ``load`` reads, by their name in the release."""
    names = (
        *_SOURCE_FILES,
        "testclasses.txt",
        f"trainclasses{params.validation}.txt",
        f"valclasses{params.validation}.txt",
    )
    folder = root / params.dataset
    return {f"{params.dataset}/{n}": folder / n for n in names if (folder / n).is_file()}


def _raw_source(
    release: Release, params: Xlsa17Params, how: str, root: Path, *, fetched: bool
) -> RawSource:
    """Where the release was read from: synthetic whenever its image file names say so; the
    release, verified when it came from an archive ``fetched`` against data.params.checksum
    (a folder the spec names is not hashed)."""
    files = _source_files(root, params)
    if release.synthetic:
        return RawSource(
            "synthetic",
            f"a synthetic stand-in for the xlsa17 {params.dataset} release: its res101.mat holds"
            f" generated features (image files under {SYNTHETIC_PREFIX}, written by"
            " `zsl data synthetic-xlsa17`) beside the release's split files",
            files=files,
        )
    way = how.split(" (")[0]  # without the machine's paths: this goes into records
    return RawSource(
        "release",
        f"the xlsa17 {params.dataset} release, read from {way}",
        verified_by=(
            f"the sha256 of {ARCHIVE} matches data.params.checksum"
            if fetched and params.checksum is not None
            else None
        ),
        files=files,
    )


def describe_counts(raw: RawBenchmark) -> dict[str, Any]:
    """Class and image counts in the terms of GBU Table I, plus the release's overlaps.

    ``trainval_images`` are the images available for training (train + val images);
    ``test_classes`` are the unseen classes.
    """
    s = raw.splits
    meta = raw.meta
    if "n_attributes" in meta:
        n_attributes = int(meta["n_attributes"])
    else:
        n_attributes = int(next(iter(raw.embeddings.values())).shape[1])
    sizes = {k: len(s[k]) for k in s}
    return {
        "n_attributes": n_attributes,
        "n_classes": len(raw.class_ids),
        "train_classes": sizes["train_classes"],
        "val_classes": sizes["val_classes"],
        "trainval_classes": sizes["train_classes"] + sizes["val_classes"],
        "test_classes": sizes["unseen_classes"],
        "train_images": sizes["train_images"],
        "val_images": sizes["val_images"],
        "trainval_images": sizes["train_images"] + sizes["val_images"],
        "test_seen_images": sizes["test_seen_images"],
        "test_unseen_images": sizes["test_unseen_images"],
        "release_overlaps": dict(meta.get("release_overlaps", {})),
    }


def describe_release(spec: Spec, params: Xlsa17Params) -> dict[str, Any]:
    """GBU Table I from ``att_splits.mat`` and the class lists alone (no ``res101.mat``).

    Class counts follow the spec's split; image counts are the lengths of the release's index
    vectors (for the standard split they need the labels in ``res101.mat``: reported as None).
    """
    root, how = locate(params, spec)
    dataset_dir = root / params.dataset
    att_path = dataset_dir / "att_splits.mat"
    if not att_path.is_file():
        raise SpecError(
            f"{att_path} does not exist: {how} is {root}, which should hold {params.dataset}/"
            " with att_splits.mat and the class lists of the xlsa17 release"
        )
    att = _loadmat(att_path, [*_REQUIRED_ATT_KEYS, *_LOC_KEYS[3:]], _REQUIRED_ATT_KEYS)
    names = _names(att["allclasses_names"])
    index = {n: i for i, n in enumerate(names)}
    locs = {k: _indices(att[k], att_path, k, None) for k in _LOC_KEYS if k in att}
    ids = (
        read_class_map(_resolve(params.class_map, spec), names)
        if params.class_map
        else [f"xlsa17:{params.dataset}:{n}" for n in names]
    )
    v = params.validation
    if params.split == "proposed":
        train = read_class_list(dataset_dir / f"trainclasses{v}.txt", index)
        val = read_class_list(dataset_dir / f"valclasses{v}.txt", index)
        test = read_class_list(dataset_dir / "testclasses.txt", index)
        images: dict[str, int | None] = {
            "trainval_images": len(locs["trainval_loc"]),
            "test_seen_images": len(locs["test_seen_loc"]),
            "test_unseen_images": len(locs["test_unseen_loc"]),
        }
    else:
        test_names = params.test_classes
        if test_names is None and params.dataset in ("AWA1", "AWA2"):
            test_names = list(LAMPERT_TEST_CLASSES)
        elif test_names is None and params.dataset == "APY":
            test_names = [n for n in names if n not in PASCAL_VOC_CLASSES]
        if test_names is None:
            raise SpecError(ss_test_classes_missing(spec.path, params.dataset))
        if test_names and test_names[0].startswith(PLACEHOLDER):
            raise SpecError(ss_test_classes_missing(spec.path, params.dataset, test_names[0]))
        unknown = [n for n in test_names if n not in index]
        if unknown:
            raise SpecError(
                f"{spec.path}: data.params.test_classes: unknown {params.dataset} class"
                f" {unknown[0]!r}{_close(unknown[0], index)} (xlsa17 names)"
            )
        test = [index[n] for n in test_names]
        seen = [i for i in range(len(names)) if i not in set(test)]
        val = [i for i in read_class_list(dataset_dir / f"valclasses{v}.txt", index) if i in seen]
        train = [i for i in seen if i not in set(val)]
        images = dict.fromkeys(("trainval_images", "test_seen_images", "test_unseen_images"))
    return {
        "dataset": params.dataset,
        "split": params.split,
        "validation": v,
        "n_attributes": int(np.atleast_2d(att["att"]).shape[0]),
        "n_classes": len(names),
        "train_classes": len(train),
        "val_classes": len(val),
        "trainval_classes": len(train) + len(val),
        "test_classes": len(test),
        **images,
        "release_overlaps": release_overlaps(locs),
        "test_class_names": [names[i] for i in test],
        "test_class_ids": [ids[i] for i in test],
        "seen_class_ids": [ids[i] for i in [*train, *val]],
    }


adapters.add("xlsa17", Xlsa17Adapter())
