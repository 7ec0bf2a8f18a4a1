"""The xlsa17 (GBU) adapter on the real att_splits.mat + class lists and fixture res101.mat files.

The shared data hold the release's ``att_splits.mat`` and class lists but not ``res101.mat``;
``tests/xlsa17_fixture.py`` writes one in the release's layout that fits them. Tests skip when the
shared data are absent (``ZSL_SHARED_DATA``).
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pooch
import pytest
import scipy.io as sio
import yaml
from pydantic import ValidationError
from xlsa17_fixture import DATASETS, XLSA17

from harness.core.errors import HarnessError, IntegrityError, SpecError
from harness.data import download, xlsa17
from harness.data.adapters import RawBenchmark
from harness.data.prepare import check_raw, load_benchmark, prepare
from harness.data.xlsa17 import (
    ENV_CUB_TAXONOMY,
    ENV_DIR,
    LAMPERT_TEST_CLASSES,
    PASCAL_VOC_CLASSES,
    Xlsa17Adapter,
    Xlsa17Params,
    describe_counts,
    read_class_map,
    release_overlaps,
)
from harness.data.xlsa17_synthetic import copy_split_files, write_synthetic_res101
from harness.hierarchy import Hierarchy
from harness.spec import Spec, load_spec, load_spec_data, spec_files

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs" / "xlsa17"
DIM = 64  # fixture feature dimension: the adapter takes any D equal to the spec's features.dim

pytestmark = pytest.mark.skipif(
    not (XLSA17 / "AWA2" / "att_splits.mat").is_file(),
    reason=f"shared xlsa17 data not found at {XLSA17} (set ZSL_SHARED_DATA)",
)
pytestmark = [pytestmark, pytest.mark.slow]  # real data, a release per test: not in test-fast

SLUG = {"AWA1": "awa1", "AWA2": "awa2", "CUB": "cub", "SUN": "sun", "APY": "apy"}

#: GBU Table I (proposed split): attributes, classes train+val / test, images trainval /
#: test_seen / test_unseen.
GBU_TABLE_I = {
    "AWA1": (85, 27, 13, 10, 19832, 4958, 5685),
    "AWA2": (85, 27, 13, 10, 23527, 5882, 7913),
    "CUB": (312, 100, 50, 50, 7057, 1764, 2967),
    "SUN": (102, 580, 65, 72, 10320, 2580, 1440),
    "APY": (64, 15, 5, 12, 5932, 1483, 7924),
}
#: Measured on the real att_splits.mat: train_loc ∪ val_loc images that are test images.
RELEASE_OVERLAP = {"AWA1": 4958, "AWA2": 5882, "SUN": 2580, "APY": 0}
HIERARCHY_METRICS = {
    "hierarchical_precision_at_k",
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
    "prediction_relation_share",
    "darts_area",
    "darts_reward",
}


@pytest.fixture(scope="module")
def release_root(
    tmp_path_factory: pytest.TempPathFactory, xlsa17_release: Callable[..., Path]
) -> Path:
    """One folder with every dataset: real att_splits.mat + class lists, fixture res101.mat."""
    root = tmp_path_factory.mktemp("xlsa17")
    for dataset in DATASETS:
        xlsa17_release(root, dataset, dim=DIM)
    return root


def _spec_data(name: str, root: Path | None, *, dim: int = DIM) -> dict[str, Any]:
    """A shipped spec as data, without hierarchy (files another module provides), for ``root``."""
    data = load_spec_data(SPECS / f"{name}.yaml")
    data.pop("hierarchy", None)
    data["data"]["params"].pop("class_map", None)
    data["data"]["params"].pop("hierarchy", None)
    data["metrics"] = [m for m in data["metrics"] if m["name"] not in HIERARCHY_METRICS]
    data["features"]["dim"] = dim
    if data.get("audit", {}).get("wordnet_map"):  # read when frozen: the leakage audit's map
        data["audit"]["wordnet_map"] = str(SPECS / data["audit"]["wordnet_map"])
    if root is not None:
        data["data"]["params"]["path"] = str(root)
    return data


def _write_spec(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Spec:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def _load(spec: Spec) -> RawBenchmark:
    adapter = Xlsa17Adapter()
    raw = adapter.load(spec, Xlsa17Params.model_validate(spec.data.params))
    check_raw(raw, spec)
    return raw


def _raw(tmp_path: Path, name: str, root: Path, **params: Any) -> RawBenchmark:
    data = _spec_data(name, root)
    data["data"]["params"].update(params)
    return _load(_write_spec(tmp_path, data))


# -- shipped specs ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", spec_files(SPECS), ids=lambda p: p.name)
def test_shipped_spec_is_valid(path: Path) -> None:
    data = load_spec_data(path)
    params = Xlsa17Params.model_validate(data["data"]["params"])
    assert data["features"] == {
        "name": "resnet101-xlsa17",
        "dim": 2048,
        "backbone": "ResNet-101",
        "pretrained_on": {"class_set": "ilsvrc2012"},
    }
    assert data["class_embeddings"][0]["dim"] == GBU_TABLE_I[params.dataset][0]
    hierarchy_file = (data.get("hierarchy") or {}).get("file")
    if hierarchy_file and not (path.parent / hierarchy_file).is_file():
        pytest.skip(f"{hierarchy_file} is not written yet (another module provides it)")
    spec = load_spec(path)
    assert spec.data.adapter == "xlsa17"
    if params.split == "proposed":
        _, train, val, unseen, _, test_seen, test_unseen = GBU_TABLE_I[params.dataset]
        assert spec.splits.expect is not None
        assert spec.splits.expect.model_dump(exclude_none=True) == {
            "train_classes": train,
            "val_classes": val,
            "unseen_classes": unseen,
            "test_seen_images": test_seen,
            "test_unseen_images": test_unseen,
        }


def test_every_dataset_has_its_spec_files() -> None:
    names = {p.stem for p in spec_files(SPECS)}
    for slug in SLUG.values():
        assert {f"{slug}-ps", f"{slug}-ps-val2", f"{slug}-ps-val3", f"{slug}-ss"} <= names


# -- proposed split: counts, disjointness, overlaps, variants ----------------------------------


@pytest.mark.parametrize("dataset", DATASETS)
def test_counts_reproduce_gbu_table_1(tmp_path: Path, release_root: Path, dataset: str) -> None:
    raw = _raw(tmp_path, f"{SLUG[dataset]}-ps", release_root)
    counts = describe_counts(raw)
    n_att, train, val, unseen, trainval, test_seen, test_unseen = GBU_TABLE_I[dataset]
    assert counts["n_attributes"] == n_att
    assert (counts["train_classes"], counts["val_classes"], counts["test_classes"]) == (
        train,
        val,
        unseen,
    )
    assert counts["trainval_classes"] == train + val
    assert counts["n_classes"] == train + val + unseen
    assert (
        counts["trainval_images"],
        counts["test_seen_images"],
        counts["test_unseen_images"],
    ) == (trainval, test_seen, test_unseen)
    assert raw.features.shape == (raw.labels.size, DIM)
    assert raw.features.dtype == np.float32
    assert raw.embeddings["att"].shape == (train + val + unseen, n_att)
    assert raw.class_ids[0].startswith(f"xlsa17:{dataset}:")


@pytest.mark.parametrize("dataset", DATASETS)
def test_no_test_image_reaches_train_or_val(
    tmp_path: Path, release_root: Path, dataset: str
) -> None:
    raw = _raw(tmp_path, f"{SLUG[dataset]}-ps", release_root)
    s = raw.splits
    fit = np.union1d(s["train_images"], s["val_images"])
    test = np.union1d(s["test_seen_images"], s["test_unseen_images"])
    assert np.intersect1d(fit, test).size == 0
    assert set(raw.labels[s["train_images"]].tolist()) == set(s["train_classes"].tolist())
    assert set(raw.labels[s["val_images"]].tolist()) == set(s["val_classes"].tolist())
    assert set(raw.labels[s["test_unseen_images"]].tolist()) <= set(s["unseen_classes"].tolist())
    # the release's own test vectors are used unchanged
    att = sio.loadmat(release_root / dataset / "att_splits.mat", squeeze_me=True)
    np.testing.assert_array_equal(s["test_seen_images"], np.sort(att["test_seen_loc"] - 1))
    np.testing.assert_array_equal(s["test_unseen_images"], np.sort(att["test_unseen_loc"] - 1))


@pytest.mark.parametrize("dataset", DATASETS)
def test_release_overlap_is_reported(tmp_path: Path, release_root: Path, dataset: str) -> None:
    raw = _raw(tmp_path, f"{SLUG[dataset]}-ps", release_root)
    overlaps = raw.meta["release_overlaps"]
    if dataset == "CUB":  # no train_loc/val_loc in the CUB release
        assert "train_or_val_loc_in_test" not in overlaps
    else:
        assert overlaps["train_or_val_loc_in_test"] == RELEASE_OVERLAP[dataset]
    if RELEASE_OVERLAP.get(dataset):
        assert str(RELEASE_OVERLAP[dataset]) in raw.meta["release_overlap_note"]
    assert overlaps["trainval_loc&test_seen_loc"] == 0
    assert describe_counts(raw)["release_overlaps"] == overlaps


def test_awa2_train_and_val_loc_hold_every_test_seen_image() -> None:
    att = sio.loadmat(XLSA17 / "AWA2" / "att_splits.mat", squeeze_me=True)
    locs = {k: att[k].astype(np.int64) - 1 for k in att if k.endswith("_loc")}
    overlaps = release_overlaps(locs)
    assert overlaps["train_loc&test_seen_loc"] + overlaps["val_loc&test_seen_loc"] == 5882
    assert overlaps["train_or_val_loc_in_test"] == len(locs["test_seen_loc"]) == 5882


@pytest.mark.parametrize("dataset", ["AWA2", "CUB", "SUN"])
def test_validation_variants_differ(tmp_path: Path, release_root: Path, dataset: str) -> None:
    raws = {v: _raw(tmp_path, f"{SLUG[dataset]}-ps", release_root, validation=v) for v in (1, 2, 3)}
    val_sets = {v: tuple(r.splits["val_classes"].tolist()) for v, r in raws.items()}
    assert len(set(val_sets.values())) == 3
    for r in raws.values():  # the same trainval images and test sets, split differently
        fit = np.union1d(r.splits["train_images"], r.splits["val_images"])
        np.testing.assert_array_equal(
            fit, np.union1d(raws[1].splits["train_images"], raws[1].splits["val_images"])
        )
        np.testing.assert_array_equal(
            r.splits["test_seen_images"], raws[1].splits["test_seen_images"]
        )
    for v in (2, 3):
        shipped = load_spec_data(SPECS / f"{SLUG[dataset]}-ps-val{v}.yaml")
        assert shipped["data"]["params"]["validation"] == v


# -- standard split -----------------------------------------------------------------------------


def _names(raw: RawBenchmark, key: str) -> set[str]:
    return set(raw.class_names[raw.splits[key]].tolist())


@pytest.mark.parametrize("dataset", ["AWA1", "AWA2"])
def test_standard_split_awa_has_lampert_test_classes(
    tmp_path: Path, release_root: Path, dataset: str
) -> None:
    raw = _raw(tmp_path, f"{SLUG[dataset]}-ss", release_root)
    assert _names(raw, "unseen_classes") == set(LAMPERT_TEST_CLASSES)
    seen = _names(raw, "train_classes") | _names(raw, "val_classes")
    assert len(seen) == 40 and not seen & set(LAMPERT_TEST_CLASSES)
    valclasses = (release_root / dataset / "valclasses1.txt").read_text().split()
    assert _names(raw, "val_classes") == set(valclasses) - set(LAMPERT_TEST_CLASSES)
    s = raw.splits
    # every image of a test class is a test_unseen image
    unseen_mask = np.isin(raw.labels, s["unseen_classes"])
    np.testing.assert_array_equal(s["test_unseen_images"], np.flatnonzero(unseen_mask))
    # 20% of each seen class is held out as test_seen, the rest trains or validates
    for c in np.concatenate([s["train_classes"], s["val_classes"]]):
        members = np.flatnonzero(raw.labels == c)
        held = np.intersect1d(members, s["test_seen_images"]).size
        assert held == round(0.2 * members.size)
    everything = np.concatenate([s[k] for k in ("train_images", "val_images", "test_seen_images")])
    assert np.unique(everything).size == everything.size == (~unseen_mask).sum()


def test_standard_split_apy_is_pascal_vs_yahoo(tmp_path: Path, release_root: Path) -> None:
    raw = _raw(tmp_path, "apy-ss", release_root)
    assert _names(raw, "train_classes") | _names(raw, "val_classes") == set(PASCAL_VOC_CLASSES)
    yahoo = {
        "donkey", "monkey", "goat", "wolf", "jetski", "zebra", "centaur", "mug", "statue",
        "building", "bag", "carriage",
    }  # fmt: skip
    assert _names(raw, "unseen_classes") == yahoo
    assert _names(raw, "val_classes") == {"aeroplane", "sofa"}  # valclasses1.txt ∩ PASCAL


def test_standard_split_holdout_is_seeded(tmp_path: Path, release_root: Path) -> None:
    a = _raw(tmp_path, "awa2-ss", release_root)
    b = _raw(tmp_path, "awa2-ss", release_root)
    c = _raw(tmp_path, "awa2-ss", release_root, seed=1)
    np.testing.assert_array_equal(a.splits["test_seen_images"], b.splits["test_seen_images"])
    assert not np.array_equal(a.splits["test_seen_images"], c.splits["test_seen_images"])


def test_standard_split_user_lists(tmp_path: Path, release_root: Path) -> None:
    names = [ln for ln in (release_root / "CUB" / "testclasses.txt").read_text().split()]
    raw = _raw(tmp_path, "cub-ss", release_root, test_classes=names)
    assert _names(raw, "unseen_classes") == set(names)
    assert len(raw.splits["train_classes"]) + len(raw.splits["val_classes"]) == 150


def test_standard_split_without_its_classes_fails_at_prepare_only(
    tmp_path: Path, release_root: Path
) -> None:
    """CUB's and SUN's standard-split classes are not in the release (issue 29, item 11): the
    shipped specs validate without them; prepare refuses, saying where they come from, and so
    it does for a placeholder a user left."""
    for name, source in (("cub-ss", r"Reed et al\.'s CUB data"), ("sun-ss", "Jayaraman")):
        load_spec(SPECS / f"{name}.yaml")  # the shipped spec validates
        data = _spec_data(name, release_root)
        assert "test_classes" not in data["data"]["params"]
        spec = _write_spec(tmp_path, data, f"{name}.yaml")
        with pytest.raises(
            SpecError, match=rf"standard split of \w+ needs data\.params\.test_classes.*{source}"
        ):
            prepare(spec)
        data["data"]["params"]["test_classes"] = ["TODO: list them"]
        spec = _write_spec(tmp_path, data, f"{name}.yaml")
        with pytest.raises(
            SpecError,
            match=r"data\.params\.test_classes still holds the placeholder 'TODO: list them'",
        ):
            prepare(spec)


def test_standard_split_errors(tmp_path: Path, release_root: Path) -> None:
    with pytest.raises(SpecError, match=r"standard split of CUB needs data\.params\.test_classes"):
        _raw(tmp_path, "cub-ss", release_root, test_classes=None)
    with pytest.raises(
        SpecError,
        match=r"test_classes\[1\]: unknown AWA2 class 'giant panda' \(did you mean 'giant\+panda'",
    ):
        _raw(tmp_path, "awa2-ss", release_root, test_classes=["pig", "giant panda"])
    with pytest.raises(SpecError, match=r"train_classes and test_classes share class 'pig'"):
        _raw(tmp_path, "awa2-ss", release_root, train_classes=["pig", "rat"], test_classes=["pig"])
    with pytest.raises(SpecError, match=r"none of the classes of valclasses1\.txt is a seen class"):
        _raw(tmp_path, "awa2-ss", release_root, train_classes=["pig"], test_classes=["rat"])


# -- malformed inputs ---------------------------------------------------------------------------


@pytest.fixture
def awa2(tmp_path: Path, xlsa17_release: Callable[..., Path]) -> Path:
    """A private AWA2 folder (root returned) the test may damage."""
    root = tmp_path / "release"
    xlsa17_release(root, "AWA2", dim=DIM)
    return root


def _awa2_spec(tmp_path: Path, root: Path, **params: Any) -> Spec:
    data = _spec_data("awa2-ps", root)
    data["data"]["params"].update(params)
    return _write_spec(tmp_path, data)


def test_missing_res101_names_the_file(tmp_path: Path, awa2: Path) -> None:
    (awa2 / "AWA2" / "res101.mat").unlink()
    with pytest.raises(
        SpecError, match=r"AWA2/res101\.mat does not exist\. res101\.mat .* official release"
    ):
        prepare(_awa2_spec(tmp_path, awa2))


def test_missing_dataset_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        SpecError, match=r"empty/AWA2 does not exist \(data\.params\.path is .*found nothing"
    ):
        prepare(_awa2_spec(tmp_path, tmp_path / "empty"))


def test_feature_dim_must_match_the_spec(tmp_path: Path, awa2: Path) -> None:
    data = _spec_data("awa2-ps", awa2, dim=2048)
    with pytest.raises(
        SpecError,
        match=r"AWA2/res101\.mat: features are 64-dimensional but .*spec\.yaml declares features\.dim 2048",
    ):
        prepare(_write_spec(tmp_path, data))


def test_class_list_with_unknown_class(tmp_path: Path, awa2: Path) -> None:
    path = awa2 / "AWA2" / "valclasses1.txt"
    lines = path.read_text().splitlines()
    lines[2] = "zebraa"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        SpecError, match=r"AWA2/valclasses1\.txt:3: unknown class 'zebraa' \(did you mean 'zebra'"
    ):
        prepare(_awa2_spec(tmp_path, awa2))


def test_missing_class_list(tmp_path: Path, awa2: Path) -> None:
    (awa2 / "AWA2" / "trainclasses2.txt").unlink()
    with pytest.raises(SpecError, match=r"AWA2/trainclasses2\.txt does not exist"):
        prepare(_awa2_spec(tmp_path, awa2, validation=2))


@pytest.mark.parametrize("key", ["att", "test_unseen_loc", "allclasses_names"])
def test_att_splits_missing_a_key(tmp_path: Path, awa2: Path, key: str) -> None:
    path = awa2 / "AWA2" / "att_splits.mat"
    content = {k: v for k, v in sio.loadmat(path).items() if not k.startswith("__") and k != key}
    sio.savemat(path, content)
    with pytest.raises(
        SpecError,
        match=rf"AWA2/att_splits\.mat lacks '{key}' \(it has .*\); is this the release's att_splits\.mat\?",
    ):
        prepare(_awa2_spec(tmp_path, awa2))


def test_res101_missing_labels(tmp_path: Path, awa2: Path) -> None:
    path = awa2 / "AWA2" / "res101.mat"
    content = sio.loadmat(path)
    sio.savemat(path, {"features": content["features"], "image_files": content["image_files"]})
    with pytest.raises(SpecError, match=r"AWA2/res101\.mat lacks 'labels'"):
        prepare(_awa2_spec(tmp_path, awa2))


@pytest.mark.parametrize(
    "content",
    [b"not a matlab file at all" * 10, b"short", b""],
    ids=["garbage", "shorter-than-a-header", "empty"],
)
def test_not_a_mat_file(tmp_path: Path, awa2: Path, content: bytes) -> None:
    (awa2 / "AWA2" / "res101.mat").write_bytes(content)
    with pytest.raises(SpecError, match=r"AWA2/res101\.mat is not a readable MATLAB file"):
        prepare(_awa2_spec(tmp_path, awa2))


def test_res101_from_another_dataset(tmp_path: Path, awa2: Path) -> None:
    copy_split_files(XLSA17, tmp_path / "apy", "APY")
    write_synthetic_res101(
        tmp_path / "apy" / "APY", "APY", dim=DIM, path=awa2 / "AWA2" / "res101.mat"
    )
    with pytest.raises(
        SpecError,
        match=r"att_splits\.mat: 'trainval_loc' holds image index \d+ but res101\.mat has 15339 images",
    ):
        prepare(_awa2_spec(tmp_path, awa2))


def test_labels_inconsistent_with_class_lists(tmp_path: Path, awa2: Path) -> None:
    path = awa2 / "AWA2" / "res101.mat"
    content = sio.loadmat(path)
    att = sio.loadmat(awa2 / "AWA2" / "att_splits.mat", squeeze_me=True)
    labels = content["labels"].copy()
    first_unseen = int(att["test_unseen_loc"][0]) - 1
    labels[first_unseen, 0] = 1  # antelope: a training class
    sio.savemat(
        path, {**{k: v for k, v in content.items() if not k.startswith("__")}, "labels": labels}
    )
    with pytest.raises(
        SpecError,
        match=rf"res101\.mat gives image {first_unseen + 1} \(in test_unseen_loc of att_splits\.mat\) class 'antelope', which is not a class of testclasses\.txt",
    ):
        prepare(_awa2_spec(tmp_path, awa2))


def test_transposed_features_are_accepted(tmp_path: Path, awa2: Path) -> None:
    path = awa2 / "AWA2" / "res101.mat"
    content = sio.loadmat(path)
    sio.savemat(
        path,
        {
            **{k: v for k, v in content.items() if not k.startswith("__")},
            "features": content["features"].T,
        },
    )
    raw = _load(_awa2_spec(tmp_path, awa2))
    assert raw.meta["features_layout"] == "N x D"
    assert raw.features.shape == (37322, DIM)


def test_params_are_checked(tmp_path: Path, awa2: Path) -> None:
    base = {"dataset": "AWA2", "split": "proposed"}
    with pytest.raises(ValidationError, match="for split 'standard'"):
        Xlsa17Params.model_validate({**base, "test_classes": ["pig"]})
    with pytest.raises(ValidationError, match="'cub_taxonomy' is for dataset CUB"):
        Xlsa17Params.model_validate({**base, "hierarchy": "cub_taxonomy"})
    with pytest.raises(ValidationError, match="'wordnet_map' needs class_map"):
        Xlsa17Params.model_validate({**base, "hierarchy": "wordnet_map"})
    with pytest.raises(ValidationError, match="checksum must look like"):
        Xlsa17Params.model_validate({**base, "checksum": "abc"})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Xlsa17Params.model_validate({**base, "split_variant": 1})
    with pytest.raises(SpecError, match=r"data\.params\.validation: Input should be 1, 2 or 3"):
        prepare(_awa2_spec(tmp_path, awa2, validation=4))


def test_hierarchy_params_must_match_the_spec(tmp_path: Path, awa2: Path) -> None:
    data = _spec_data("awa2-ps", awa2)
    data["hierarchy"] = {"source": "adapter"}
    with pytest.raises(
        SpecError, match=r"hierarchy\.source is 'adapter', so set data\.params\.hierarchy"
    ):
        prepare(_write_spec(tmp_path, data))


# -- class ids and hierarchies ------------------------------------------------------------------


def _awa_names() -> list[str]:
    return (XLSA17 / "AWA2" / "allclasses.txt").read_text().split()


def test_class_map_gives_class_ids(tmp_path: Path, awa2: Path) -> None:
    names = _awa_names()
    rows = ["# xlsa17 name\tid\tname", ""] + [f"{n}\tn{i:08d}\t{n}" for i, n in enumerate(names)]
    (tmp_path / "map.tsv").write_text("\n".join(rows) + "\n")
    raw = _load(_awa2_spec(tmp_path, awa2, class_map="map.tsv"))
    assert raw.class_ids.tolist() == [f"n{i:08d}" for i in range(50)]
    assert raw.class_names.tolist() == names


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["antelope n00000001 a"], r"map\.tsv:1: expected 3 tab-separated fields"),
        (
            ["antilope\tn00000001\ta"],
            r"map\.tsv:1: unknown class 'antilope' \(did you mean 'antelope'",
        ),
        (
            ["antelope\tn00000001\ta", "antelope\tn00000002\ta"],
            r"map\.tsv:2: class 'antelope' is mapped twice",
        ),
        (
            ["antelope\tn00000001\ta", "beaver\tn00000001\tb"],
            r"map\.tsv:2: classes 'antelope' and 'beaver' both map to n00000001",
        ),
        (
            ["antelope\tn00000001\ta"],
            r"map\.tsv: 49 class\(es\) have no row, first 'grizzly\+bear'",
        ),
    ],
)
def test_class_map_errors(tmp_path: Path, rows: list[str], message: str) -> None:
    path = tmp_path / "map.tsv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(HarnessError, match=message):
        read_class_map(path, _awa_names())


def test_cub_taxonomy_hierarchy_from_the_adapter(
    tmp_path: Path, release_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring to ``harness.hierarchy.cub_taxonomy`` (a stand-in loader: class k → node 'sp<k>')."""
    calls: list[Path] = []

    def load_cub_taxonomy(directory: Path) -> tuple[Hierarchy, list[str]]:
        calls.append(Path(directory))
        species = [f"sp{k:03d}" for k in range(1, 201)]
        edges = [("aves", s) for s in species]
        return Hierarchy(["aves", *species], edges), species

    monkeypatch.setattr(xlsa17, "load_cub_taxonomy", load_cub_taxonomy)
    data = load_spec_data(SPECS / "cub-ps.yaml")
    assert data["hierarchy"] == {"source": "adapter", "class_to_node": "identity"}
    data["features"]["dim"] = DIM
    data["data"]["params"]["path"] = str(release_root)
    data["audit"]["wordnet_map"] = str(SPECS / data["audit"]["wordnet_map"])  # read when frozen
    spec = _write_spec(tmp_path, data)
    with pytest.raises(
        SpecError,
        match=rf"needs the CUB taxonomy folder: set data\.params\.taxonomy_path or \${ENV_CUB_TAXONOMY}",
    ):
        prepare(spec)
    monkeypatch.setenv(ENV_CUB_TAXONOMY, str(tmp_path / "taxonomy"))
    bench = load_benchmark(spec)
    assert calls == [tmp_path / "taxonomy"]
    names = bench.array("class_names").tolist()
    ids = bench.class_ids.tolist()
    assert all(i == f"sp{n[:3]}" for i, n in zip(ids, names, strict=True))  # CUB number → node
    assert bench.hierarchy is not None and bench.hierarchy.n_nodes == 201


def test_cub_taxonomy_real_module(
    tmp_path: Path, release_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(
        "harness.hierarchy.cub_taxonomy", reason="harness.hierarchy.cub_taxonomy not written yet"
    )
    taxonomy = XLSA17.parent / "cub-hierarchy"
    if not taxonomy.is_dir():
        pytest.skip(f"CUB taxonomy files not found at {taxonomy}")
    monkeypatch.setenv(ENV_CUB_TAXONOMY, str(taxonomy))
    data = load_spec_data(SPECS / "cub-ps.yaml")
    data["features"]["dim"] = DIM
    data["data"]["params"]["path"] = str(release_root)
    data["audit"]["wordnet_map"] = str(SPECS / data["audit"]["wordnet_map"])  # read when frozen
    bench = load_benchmark(_write_spec(tmp_path, data))
    hierarchy = bench.hierarchy
    assert hierarchy is not None
    assert set(bench.class_ids.tolist()) <= set(hierarchy.node_ids[hierarchy.leaves].tolist())


def test_wordnet_map_builds_the_hierarchy(
    tmp_path: Path, awa2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real WordNet 3.0 (skipped where absent), 50 mammal synsets standing in for the classes."""
    dict_dir = Path("/usr/share/wordnet")
    lexnames = XLSA17.parent / "wordnet" / "lexnames"
    if not (dict_dir / "data.noun").is_file() or not lexnames.is_file():
        pytest.skip("WordNet 3.0 (/usr/share/wordnet) or its lexnames file is absent")
    monkeypatch.setenv("ZSL_WORDNET_DIR", str(dict_dir))
    monkeypatch.setenv("ZSL_WORDNET_LEXNAMES", str(lexnames))
    lines = (REPO / "specs" / "demo" / "classes.txt").read_text().splitlines()
    wnids = [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()][:50]
    assert len(wnids) == 50
    rows = [f"{n}\t{w}\t{n}" for n, w in zip(_awa_names(), wnids, strict=True)]
    (tmp_path / "map.tsv").write_text("\n".join(rows) + "\n")
    data = _spec_data("awa2-ps", awa2)
    data["data"]["params"].update(class_map="map.tsv", hierarchy="wordnet_map")
    data["hierarchy"] = {"source": "adapter"}
    bench = load_benchmark(_write_spec(tmp_path, data))
    hierarchy = bench.hierarchy
    assert hierarchy is not None
    assert sorted(hierarchy.node_ids[hierarchy.leaves].tolist()) == sorted(wnids)


@pytest.mark.parametrize("name", ["awa1-ps", "awa2-ss", "apy-ps", "apy-ss"])
def test_shipped_wordnet_class_maps_and_hierarchies(
    tmp_path: Path, release_root: Path, name: str
) -> None:
    """The shipped AWA/aPY specs as they are (class map + frozen WordNet hierarchy)."""
    data = load_spec_data(SPECS / f"{name}.yaml")
    hierarchy = SPECS / data["hierarchy"]["file"]
    class_map = SPECS / data["data"]["params"]["class_map"]
    if not (hierarchy.is_file() and class_map.is_file()):
        pytest.skip(f"{hierarchy.name} / {class_map.name} are not written yet")
    data["hierarchy"]["file"] = str(hierarchy)
    data["data"]["params"]["class_map"] = str(class_map)
    data["features"]["dim"] = DIM
    data["data"]["params"]["path"] = str(release_root)
    bench = load_benchmark(_write_spec(tmp_path, data))
    assert bench.hierarchy is not None
    assert all(c.startswith("n") and len(c) == 9 for c in bench.class_ids.tolist())
    assert set(bench.class_ids.tolist()) <= set(bench.hierarchy.node_ids.tolist())


# -- where the raw files come from --------------------------------------------------------------


def test_env_dir_is_used_without_path(
    tmp_path: Path, release_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(release_root))
    raw = _load(_write_spec(tmp_path, _spec_data("apy-ps", None)))
    assert raw.meta["source"] == f"${ENV_DIR}"


def _zip_release(release: Path, dataset: str, out: Path) -> str:
    """A zip in the release's layout (xlsa17/data/<DATASET>/...) plus an unrelated member."""
    with zipfile.ZipFile(out, "w") as zf:
        for item in sorted((release / dataset).iterdir()):
            zf.write(item, f"xlsa17/data/{dataset}/{item.name}")
        zf.writestr("xlsa17/README.txt", "fixture archive")
    return f"sha256:{pooch.file_hash(str(out))}"


def test_mirror_archive_is_verified_and_unpacked(
    tmp_path: Path, release_root: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_DIR, raising=False)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    digest = _zip_release(release_root, "APY", mirror / "xlsa17.zip")
    data = _spec_data("apy-ps", None)
    data["data"]["params"].update(mirror="mirror", checksum=digest)
    raw = _load(_write_spec(tmp_path, data))
    assert raw.meta["source"].startswith("data.params.mirror")
    assert describe_counts(raw)["test_unseen_images"] == 7924
    cached = isolated_home / "downloads" / "xlsa17.zip"
    assert cached.is_file()
    unpacked = isolated_home / "downloads" / f"xlsa17-{digest[7:23]}-APY" / "APY"
    assert (unpacked / "res101.mat").is_file()
    assert not (unpacked.parent / "README.txt").exists()  # only the dataset's members

    data["data"]["params"]["checksum"] = "sha256:" + "0" * 64
    with pytest.raises(
        IntegrityError,
        match=r"downloads/xlsa17\.zip does not match data\.params\.checksum in .*spec\.yaml .*It is kept, not overwritten",
    ):
        _load(_write_spec(tmp_path, data))
    assert cached.is_file()


def test_download_goes_through_pooch(
    tmp_path: Path,
    release_root: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The official URL path, with pooch.retrieve replaced by a local copy (no network)."""
    monkeypatch.delenv(ENV_DIR, raising=False)
    archive = tmp_path / "served.zip"
    digest = _zip_release(release_root, "APY", archive)
    calls: list[dict[str, Any]] = []

    def fake_retrieve(url: str, known_hash: str | None = None, fname: str | None = None,
                      path: Any = None, **kwargs: Any) -> str:  # fmt: skip
        calls.append({"url": url, "known_hash": known_hash, "fname": fname, "path": path, **kwargs})
        target = Path(path) / str(fname)
        shutil.copyfile(archive, target)
        return str(target)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    with caplog.at_level(logging.WARNING, logger="harness.data.download"):
        raw = _load(_write_spec(tmp_path, _spec_data("apy-ps", None)))
    assert calls[0]["url"] == "https://datasets.d2.mpi-inf.mpg.de/xian/xlsa17.zip"
    assert calls[0]["known_hash"] is None and calls[0]["downloader"] is None
    assert Path(calls[0]["path"]) == isolated_home / "downloads"
    assert raw.meta["source"].startswith("download (https://datasets.d2.mpi-inf.mpg.de")
    assert digest in caplog.text and "Pin it as data.params.checksum in" in caplog.text


def test_failed_download_names_the_offline_alternative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_DIR, raising=False)

    def offline(url: str, **kwargs: Any) -> str:
        raise OSError("Network is unreachable")

    monkeypatch.setattr(pooch, "retrieve", offline)
    with pytest.raises(HarnessError) as info:
        _load(_write_spec(tmp_path, _spec_data("apy-ps", None)))
    assert str(info.value) == (
        "cannot fetch https://datasets.d2.mpi-inf.mpg.de/xian/xlsa17.zip: Network is"
        " unreachable. Check the network, or give a local copy (a mirror folder or the unpacked"
        " files). To work offline, unpack xlsa17.zip and set ZSL_XLSA17_DIR to the folder that"
        " holds APY/ (its att_splits.mat and res101.mat), or set data.params.path in the spec;"
        " data.params.mirror names a folder or URL holding a copy of xlsa17.zip."
    )


# -- download module ----------------------------------------------------------------------------


def test_fetch_action_decides_only(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    assert download.fetch_action(path, None) == "download"
    path.write_bytes(b"abc")
    good = f"sha256:{pooch.file_hash(str(path))}"
    assert download.fetch_action(path, None) == "use"
    assert download.fetch_action(path, good) == "use"
    assert download.fetch_action(path, good.upper().replace("SHA256", "sha256")) == "use"
    assert download.fetch_action(path, "sha256:" + "0" * 64) == "conflict"
    with pytest.raises(HarnessError, match="cannot check"):
        download.fetch_action(path, "crc99:abc")


def test_fetch_local_file_url_through_real_pooch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload" * 1000)
    good = f"sha256:{pooch.file_hash(str(src))}"
    out = tmp_path / "out"
    path, digest = download.fetch(src.as_uri(), fname="a.bin", known_hash=good, directory=out)
    assert path == out / "a.bin" and path.read_bytes() == src.read_bytes() and digest == good
    with pytest.raises(IntegrityError, match=r"does not match the known hash.*update the pin"):
        download.fetch(str(src), fname="b.bin", known_hash="sha256:" + "1" * 64, directory=out,
                       pin_hint="the pin")  # fmt: skip
    assert not (out / "b.bin").exists()  # a bad download is deleted, never kept
    with caplog.at_level(logging.WARNING, logger="harness.data.download"):
        _, digest = download.fetch(str(src), fname="c.bin", known_hash=None, directory=out,
                                   pin_hint="data.params.checksum")  # fmt: skip
    assert digest == good and "Pin it as data.params.checksum" in caplog.text
    with pytest.raises(HarnessError, match=r"missing\.zip does not exist \(the mirror copy"):
        download.fetch(str(tmp_path / "missing.zip"), fname="d.zip", known_hash=None, directory=out)


def test_extract_members_is_atomic_and_reused(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("top/data/X/keep.txt", "1")
        zf.writestr("top/data/Y/skip.txt", "2")

    def select(name: str) -> str | None:
        return "X/" + name.rsplit("/", 1)[-1] if "/X/" in name else None

    dest = download.extract_members(archive, tmp_path / "out", select)
    assert (dest / "X" / "keep.txt").read_text() == "1"
    assert not (dest / "Y").exists()
    archive.unlink()  # a complete folder is reused without the archive
    assert download.extract_members(archive, tmp_path / "out", select) == dest
    assert not list(tmp_path.glob(".out.*"))
    with pytest.raises(HarnessError, match="holds none of the files asked for"):
        bad = tmp_path / "b.zip"
        with zipfile.ZipFile(bad, "w") as zf:
            zf.writestr("other.txt", "x")
        download.extract_members(bad, tmp_path / "out2", select)
    (tmp_path / "c.zip").write_bytes(b"not a zip")
    with pytest.raises(HarnessError, match="cannot unpack"):
        download.extract_members(tmp_path / "c.zip", tmp_path / "out3", select)


# -- end to end ---------------------------------------------------------------------------------


def test_end_to_end_eszsl_on_awa2_ps_from_a_mirror(
    tmp_path: Path, release_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`zsl run submissions/eszsl --spec <awa2-ps>` with the data from a mirror directory."""
    from typer.testing import CliRunner

    from harness.cli.main import app
    from harness.store import load_runs, open_store

    monkeypatch.delenv(ENV_DIR, raising=False)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    digest = _zip_release(release_root, "AWA2", mirror / "xlsa17.zip")
    data = load_spec_data(SPECS / "awa2-ps.yaml")
    data["hierarchy"]["file"] = str(SPECS / data["hierarchy"]["file"])
    data["data"]["params"]["class_map"] = str(SPECS / data["data"]["params"]["class_map"])
    data["data"]["params"].update(mirror=str(mirror), checksum=digest)
    data["features"]["dim"] = DIM
    data["uncertainty"]["n_boot"] = 100
    spec_path = tmp_path / "awa2-ps.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(
        app, ["run", str(REPO / "submissions" / "eszsl"), "--spec", str(spec_path)]
    )
    assert result.exit_code == 0, result.output
    (record,) = load_runs(open_store())
    assert record.benchmark.n_unseen == 10
    top1 = record.score("zsl", "top1")
    assert top1 is not None and top1.value > 0.5  # chance is 1/10
    harmonic = record.score("gzsl", "H")
    assert harmonic is not None and harmonic.value > 0.1
    # The audit frozen with the benchmark (the audit_inputs fixture gives its inputs): ILSVRC's
    # sea lion, sorrel and ram are kinds of the test classes seal, horse and sheep.
    assert record.leakage is not None and record.leakage.inputs is not None
    assert (record.leakage.n_overlap, record.leakage.n_test) == (3, 10)
