"""ImageNet-21K splits, class sets and the ``imagenet`` adapter.

Split tests read the real ImageNet lists of the shared development data
(``$ZSL_SHARED_DATA/imagenet``, default ``../shared/data/imagenet``) and skip, saying why, where
they are absent. Adapter tests run on tiny user feature directories written by
``tests/imagenet_fixture.py`` in the documented format.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.errors import HarnessError, SpecError
from harness.data.imagenet import features as imagenet_features
from harness.data.imagenet.adapter import ImageNetAdapter, ImageNetParams
from harness.data.imagenet.splits import (
    SplitName,
    hop_splits,
    populated_splits,
    read_counts,
    resolve_split_name,
    split_classes,
    split_structure,
)
from harness.data.prepare import load_benchmark
from harness.hierarchy.class_sets import (
    ENV_IMAGENET_DIR,
    imagenet_lists_dir,
    read_wnids,
    resolve_class_set,
)
from harness.hierarchy.imagenet_isa import load_isa_hierarchy
from harness.spec import load_spec
from tests.imagenet_fixture import (
    all_wnids,
    shared_lists,
    spec_copy,
    write_counts,
    write_user_features,
)

SPLIT_NAMES = ("within-1-hop", "within-2-hops", "all", "goz")


@pytest.fixture
def lists() -> Path:
    return shared_lists()


@pytest.fixture
def env_lists(lists: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_IMAGENET_DIR, str(lists))
    return lists


@pytest.fixture
def sets(lists: Path) -> dict[str, frozenset[str]]:
    return {n: resolve_class_set(n, lists) for n in ("ilsvrc2012", "imagenet21k", "goz_v1_test")}


@pytest.fixture
def splits(lists: Path, sets: dict[str, frozenset[str]]) -> dict[str, tuple[str, ...]]:
    return hop_splits(
        load_isa_hierarchy(lists), sets["ilsvrc2012"], sets["imagenet21k"], max_hops=2
    )


# -- class sets ----------------------------------------------------------------------------------


def test_class_sets_resolve_with_sizes_and_are_cached(lists: Path) -> None:
    sizes = {
        n: len(resolve_class_set(n, lists)) for n in ("ilsvrc2012", "imagenet21k", "goz_v1_test")
    }
    assert sizes == {"ilsvrc2012": 1000, "imagenet21k": 21843, "goz_v1_test": 500}
    assert resolve_class_set("none") == frozenset()
    assert resolve_class_set("ilsvrc2012", lists) is resolve_class_set("ilsvrc2012", lists)
    assert "n01440764" in resolve_class_set("ilsvrc2012", lists)  # tench: first token of the line
    # teddy bear is an ILSVRC-2012 class but not a fall 2011 one
    assert resolve_class_set("ilsvrc2012", lists) - resolve_class_set("imagenet21k", lists) == {
        "n04399382"
    }


def test_class_set_dir_from_env_and_clear_errors(
    lists: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_IMAGENET_DIR, str(lists))
    assert imagenet_lists_dir() == lists.resolve()
    assert len(resolve_class_set("goz_v1_test")) == 500
    monkeypatch.delenv(ENV_IMAGENET_DIR)
    with pytest.raises(
        SpecError, match=r"set the environment variable ZSL_IMAGENET_DIR.*fall11_wnids\.txt"
    ):
        resolve_class_set("ilsvrc2012")
    with pytest.raises(SpecError, match=r"does not exist.*ZSL_IMAGENET_DIR"):
        imagenet_lists_dir(tmp_path / "nowhere")
    with pytest.raises(SpecError, match=r"class set 'goz_v1_test' needs .*goz_v1_test_wnids\.txt"):
        resolve_class_set("goz_v1_test", tmp_path)
    with pytest.raises(
        SpecError, match=r"unknown class set 'ilsvrc2021'\. Did you mean 'ilsvrc2012'"
    ):
        resolve_class_set("ilsvrc2021", lists)


def test_wnid_list_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "fall11_wnids.txt"
    bad.write_text("n00000001\n\nnot-a-wnid\n")
    with pytest.raises(
        SpecError, match=r"fall11_wnids\.txt:3: expected a WordNet id.*'not-a-wnid'"
    ):
        resolve_class_set("imagenet21k", tmp_path)
    bad.write_text("n00000001\nn00000001\n")
    with pytest.raises(SpecError, match=r":2: n00000001 repeats line 1"):
        read_wnids(bad)


# -- the is-a hierarchy and hop splits -------------------------------------------------------------


def test_isa_hierarchy_has_every_21k_wnid_and_names(lists: Path) -> None:
    h = load_isa_hierarchy(lists)
    assert (h.n_nodes, h.n_edges) == (74378, 75783)
    sun = h.index("n09450163")  # GOZ's "sun": in fall 2011 but without an is-a edge
    assert h.parents(sun).size == 0 and h.children(sun).size == 0
    assert h.names[sun] == "sun, Sun"
    assert load_isa_hierarchy(lists) is h  # cached per process


def test_hop_split_sizes_and_distances(
    lists: Path, sets: dict[str, frozenset[str]], splits: dict[str, tuple[str, ...]]
) -> None:
    sizes = {k: len(v) for k, v in splits.items()}
    assert sizes == {
        "exactly-1-hop": 1548,
        "within-1-hop": 1548,
        "exactly-2-hops": 4446,
        "within-2-hops": 5994,
        "all": 20844,
        "within-1-hop+1k": 2548,
        "within-2-hops+1k": 6994,
        "all+1k": 21844,
    }
    train = sets["ilsvrc2012"]
    assert not set(splits["all"]) & train
    assert set(splits["within-1-hop+1k"]) == set(splits["within-1-hop"]) | train
    assert set(splits["within-2-hops"]) == set(splits["within-1-hop"]) | set(
        splits["exactly-2-hops"]
    )
    # spot-check with the hierarchy's own per-source distances
    h = load_isa_hierarchy(lists)
    train_idx = h.indices(sorted(train))
    rng = np.random.default_rng(1)
    for name, expected in (("within-1-hop", 1.0), ("exactly-2-hops", 2.0)):
        sample = rng.choice(np.array(splits[name]), 25, replace=False)
        nearest = h.hop_distance(h.indices(sample), radius=3)[:, train_idx].min(axis=1)
        assert (nearest == expected).all(), name
    outside = np.array(sorted(set(splits["all"]) - set(splits["within-2-hops"])))
    sample = rng.choice(outside, 25, replace=False)
    assert (h.hop_distance(h.indices(sample), radius=2)[:, train_idx].min(axis=1) > 2).all()


def test_structural_ratios_goz_is_not_lower_than_within_1_hop(
    lists: Path, sets: dict[str, frozenset[str]], splits: dict[str, tuple[str, ...]]
) -> None:
    # The harness's ratio is (distance to training) / (distance to another test class): the
    # hop splits hug the training classes (R < 1 for within-1-hop), GOZ's classes stand apart.
    h = load_isa_hierarchy(lists)
    train = sorted(sets["ilsvrc2012"])
    ratios = {
        name: split_structure(h, train, splits[name])
        for name in ("within-1-hop", "within-2-hops", "all")
    }
    ratios["goz"] = split_structure(h, train, sorted(sets["goz_v1_test"]))
    value = {k: v["structural_ratio"] for k, v in ratios.items()}
    assert value["within-1-hop"] == pytest.approx(0.6169573643410853, rel=1e-12)
    assert value["within-2-hops"] == pytest.approx(1.6554610165721275, rel=1e-12)
    assert value["goz"] == pytest.approx(2.1015262515262516, rel=1e-12)
    assert value["all"] == pytest.approx(3.7605816313498637, rel=1e-12)
    assert value["within-1-hop"] < value["within-2-hops"] < value["goz"] < value["all"]
    assert ratios["goz"]["n_included"] == 494
    assert "n09450163" in ratios["goz"]["excluded"]["no_training_class_connected"]
    assert ratios["within-1-hop"]["n_included"] == 1548


def test_split_names_and_errors() -> None:
    assert resolve_split_name("within-2-hops") == SplitName("within-2-hops", "within", hops=2)
    assert resolve_split_name("within-1-hops").name == "within-1-hop"
    assert resolve_split_name("exactly-3-hops").hops == 3
    assert resolve_split_name("most-populated-500").name == "most-populated-500"
    with pytest.raises(SpecError, match=r"GZSL variant.*split 'within-1-hop'.*'gzsl'"):
        resolve_split_name("within-1-hop+1k")
    with pytest.raises(
        SpecError, match=r"unknown split 'within-one-hop'\. Did you mean 'within-1-hop'"
    ):
        resolve_split_name("within-one-hop")
    with pytest.raises(SpecError, match=r"needs the number of classes: set n_classes"):
        resolve_split_name("least-populated")
    with pytest.raises(SpecError, match=r"names N = 500 but n_classes is 1000"):
        resolve_split_name("most-populated-500", 1000)


def test_split_classes_for_hops_and_goz(lists: Path, splits: dict[str, tuple[str, ...]]) -> None:
    train, test = split_classes(resolve_split_name("within-1-hops"), lists)
    assert test == splits["within-1-hop"] and len(train) == 1000
    _, goz = split_classes(resolve_split_name("goz"), lists)
    assert len(goz) == 500 and "n09450163" in goz


def test_populated_splits_from_a_counts_file(
    lists: Path, sets: dict[str, frozenset[str]], tmp_path: Path
) -> None:
    candidates = sorted(sets["imagenet21k"] - sets["ilsvrc2012"])[:8]
    counts = dict(zip(candidates, [10, 500, 3, 500, 0, 7, 1, 1], strict=True))
    counts["n01440764"] = 100_000  # a training class: never eligible
    path = write_counts(tmp_path / "counts.tsv", counts)
    read = read_counts(path)
    assert read == counts
    got = populated_splits(read, sets["ilsvrc2012"], sets["imagenet21k"], 3)
    c = candidates
    assert got["most-populated-3"] == tuple(sorted([c[1], c[3], c[0]]))
    # the zero count is not eligible; ties (1, 1) broken by wnid
    assert got["least-populated-3"] == tuple(sorted([c[6], c[7], c[2]]))
    _, test = split_classes(resolve_split_name("least-populated", 2), lists, counts_file=path)
    assert test == tuple(sorted([c[6], c[7]]))
    with pytest.raises(
        SpecError,
        match=r"need 8 candidate classes with a positive image count, but the counts file gives 7",
    ):
        populated_splits(read, sets["ilsvrc2012"], sets["imagenet21k"], 8)
    with pytest.raises(SpecError, match=r"needs counts_file"):
        split_classes(resolve_split_name("most-populated", 2), lists)
    path.write_text("n00000001\tmany\n")
    with pytest.raises(SpecError, match=r"counts\.tsv:1: expected 'wnid<TAB>count'"):
        read_counts(path)


def test_restrict_to_ancestors_keeps_every_ancestor(lists: Path) -> None:
    h = load_isa_hierarchy(lists)
    classes = ["n02084071", "n09450163", "n01440764"]  # dog, sun (no edges), tench
    sub = h.restrict_to_ancestors(h.indices(classes))
    for wnid in classes:
        expected = set(h.node_ids[h.ancestors(h.index(wnid))].tolist())
        assert set(sub.node_ids[sub.ancestors(sub.index(wnid))].tolist()) == expected
    assert sub.n_nodes == len(
        {*classes}.union(*(set(h.node_ids[h.ancestors(h.index(w))].tolist()) for w in classes))
    )


# -- the adapter -----------------------------------------------------------------------------------


def _fixture_classes(
    sets: dict[str, frozenset[str]], splits: dict[str, tuple[str, ...]]
) -> dict[str, list[str]]:
    rng = np.random.default_rng(3)

    def pick(pool: Any, n: int) -> list[str]:
        return sorted(rng.choice(sorted(pool), n, replace=False).tolist())

    far = set(splits["all"]) - set(splits["within-2-hops"]) - sets["goz_v1_test"]
    return {
        "train": pick(sets["ilsvrc2012"], 30),
        "hop1": pick(splits["within-1-hop"], 5),
        "hop2": pick(splits["exactly-2-hops"], 5),
        "far": pick(far, 5),
        "goz": [*pick(sets["goz_v1_test"] - {"n09450163"}, 4), "n09450163"],
    }


@pytest.fixture
def user_dir(
    tmp_path: Path, lists: Path, sets: dict[str, frozenset[str]], splits: dict[str, tuple[str, ...]]
) -> tuple[Path, dict[str, list[str]], dict[str, Any]]:
    classes = _fixture_classes(sets, splits)
    image_classes = sorted({w for group in classes.values() for w in group})
    written = write_user_features(tmp_path / "features", all_wnids(lists), image_classes)
    return tmp_path / "features", classes, written


@pytest.mark.slow  # a second or more (make test-fast leaves it out)
def test_adapter_end_to_end_within_1_hop(
    tmp_path: Path,
    lists: Path,
    sets: dict[str, frozenset[str]],
    splits: dict[str, tuple[str, ...]],
    user_dir: tuple[Path, dict[str, list[str]], dict[str, Any]],
) -> None:
    root, classes, written = user_dir
    params = {"split": "within-1-hops", "features_dir": str(root), "lists_dir": str(lists)}
    spec = load_spec(spec_copy(tmp_path, "within-1-hop", params=params))
    bench = load_benchmark(spec)
    meta = bench.frozen.meta
    assert (meta["split"], meta["requested_split"], meta["class_list"]) == (
        "within-1-hop",
        "within-1-hops",
        None,
    )
    assert meta["hops_to_train"] == {"1": 1548}
    assert meta["structural_ratio"] == pytest.approx(0.6169573643410853)
    assert meta["test_classes_without_images"] == 1548 - 5
    ids = bench.class_ids
    unseen = set(ids[bench.array("splits/unseen_classes")].tolist())
    assert unseen == set(splits["within-1-hop"])
    seen = set(ids[bench.seen_classes].tolist())
    assert seen == sets["ilsvrc2012"] and len(bench.array("splits/val_classes")) == 100
    # GZSL candidates are the literature's "+1K" list
    assert set(ids[bench.columns("gzsl")].tolist()) == set(splits["within-1-hop+1k"])
    # only images of the benchmark's classes are kept: train classes and 1-hop classes
    labels = ids[bench.array("labels")]
    assert sorted(set(labels.tolist())) == sorted({*classes["train"], *classes["hop1"]})
    assert len(labels) == 5 * 35
    assert set(
        ids[bench.array("labels")[bench.array("splits/test_unseen_images")]].tolist()
    ) == set(classes["hop1"])
    # one of five images per seen class is held out as test_seen
    held = bench.array("labels")[bench.array("splits/test_seen_images")]
    assert np.bincount(held).max() == 1 and len(held) == 30
    # features are the user's rows (as float32), shuffled away from the class-sorted file order
    feats = bench.array("features")
    assert feats.dtype == np.float32 and feats.shape == (175, 8)
    assert np.any(np.diff(bench.array("labels")) < 0)
    # each frozen row is one of the user's rows of a benchmark class, with that row's label
    wnid_list = all_wnids(lists)
    user_label = {
        tuple(row): wnid_list[label]
        for row, label in zip(written["features"], written["labels"], strict=True)
    }
    assert [user_label[tuple(r)] for r in feats] == labels.tolist()
    # embeddings: the rows of the classes, in class order
    np.testing.assert_array_equal(
        bench.array("embeddings/word2vec"),
        written["embeddings"][[written["position"][w] for w in ids]],
    )
    # hierarchy: ancestors-or-self of the classes; every class is a node
    h = bench.hierarchy
    assert h is not None and set(ids.tolist()) <= set(h.node_ids.tolist())
    full = load_isa_hierarchy(lists)
    tench = full.index("n01440764")
    assert set(full.node_ids[full.ancestors(tench)].tolist()) <= set(h.node_ids.tolist())


def test_adapter_goz_keeps_the_class_without_isa_edges(
    tmp_path: Path, lists: Path, user_dir: tuple[Path, dict[str, list[str]], dict[str, Any]]
) -> None:
    root, classes, _ = user_dir
    spec = load_spec(
        spec_copy(tmp_path, "goz", params={"features_dir": str(root), "lists_dir": str(lists)})
    )
    bench = load_benchmark(spec)
    assert bench.frozen.meta["classes_without_isa_edges"] == ["n09450163"]
    assert len(bench.array("splits/unseen_classes")) == 500
    h = bench.hierarchy
    assert h is not None
    sun = h.index("n09450163")
    assert h.parents(sun).size == 0 and h.children(sun).size == 0
    tested = set(
        bench.class_ids[bench.array("labels")[bench.array("splits/test_unseen_images")]].tolist()
    )
    assert tested == set(classes["goz"])


def test_adapter_is_deterministic_and_spills_large_selections(
    tmp_path: Path,
    lists: Path,
    user_dir: tuple[Path, dict[str, list[str]], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, _, _ = user_dir
    spec = load_spec(
        spec_copy(
            tmp_path, "within-2-hops", params={"features_dir": str(root), "lists_dir": str(lists)}
        )
    )
    params = ImageNetParams.model_validate(spec.data.params)
    adapter = ImageNetAdapter()
    in_memory = adapter.load(spec, params)
    monkeypatch.setattr(imagenet_features, "SPILL_BYTES", 0)
    monkeypatch.setattr(imagenet_features, "CHUNK_BYTES", 3 * 8 * 2)  # three float16 rows per chunk
    monkeypatch.setattr(imagenet_features, "LABEL_CHUNK_ROWS", 7)
    spilled = adapter.load(spec, params)
    assert isinstance(spilled.features, np.memmap)
    np.testing.assert_array_equal(spilled.features, in_memory.features)
    np.testing.assert_array_equal(spilled.labels, in_memory.labels)
    for key, value in in_memory.splits.items():
        np.testing.assert_array_equal(spilled.splits[key], value)
    assert len(in_memory.splits["unseen_classes"]) == 5994
    assert not list((Path(os.environ["ZSL_HOME"]) / "tmp").iterdir())  # the spill file is unlinked


def _load(tmp_path: Path, lists: Path, root: Path, **params: Any) -> Any:
    spec = load_spec(
        spec_copy(
            tmp_path,
            "within-1-hop",
            params={"features_dir": str(root), "lists_dir": str(lists), **params},
            drop=["expect"],
        )
    )
    return load_benchmark(spec)


def test_adapter_drops_or_refuses_classes_without_embedding(
    tmp_path: Path, lists: Path, splits: dict[str, tuple[str, ...]]
) -> None:
    gone = list(splits["within-1-hop"][:3])
    wnids = [w for w in all_wnids(lists) if w not in gone]
    root = tmp_path / "features"
    write_user_features(root, wnids, [wnids[0], "n01440764", splits["within-1-hop"][5]])
    with pytest.raises(
        SpecError,
        match=r"wnids\.txt lacks 3 class\(es\) of split 'within-1-hop'.*classes_without_embedding: drop",
    ):
        _load(tmp_path, lists, root)
    bench = _load(tmp_path, lists, root, classes_without_embedding="drop")
    assert bench.frozen.meta["dropped_without_embedding"] == sorted(gone)
    assert len(bench.array("splits/unseen_classes")) == 1548 - 3


def test_adapter_errors_are_clear(
    tmp_path: Path,
    lists: Path,
    user_dir: tuple[Path, dict[str, list[str]], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, classes, _ = user_dir
    monkeypatch.delenv(imagenet_features.ENV_FEATURES_DIR, raising=False)
    spec = load_spec(spec_copy(tmp_path, "goz", params={"lists_dir": str(lists)}))
    with pytest.raises(
        SpecError, match=r"features_dir is not set and neither is ZSL_IMAGENET_FEATURES"
    ):
        load_benchmark(spec)
    monkeypatch.setenv(imagenet_features.ENV_FEATURES_DIR, str(tmp_path / "missing"))
    with pytest.raises(SpecError, match=r"feature directory .*missing does not exist"):
        load_benchmark(spec)
    bad = load_spec(
        spec_copy(
            tmp_path,
            "goz",
            params={"features_dir": str(root), "lists_dir": str(lists), "split": "within-1-hop+1k"},
        )
    )
    with pytest.raises(SpecError, match=r"GZSL variant"):
        load_benchmark(bad)
    mismatch = load_spec(
        spec_copy(
            tmp_path, "goz", params={"features_dir": str(root), "lists_dir": str(lists)}, dim=16
        )
    )
    with pytest.raises(SpecError, match=r"features\.dim is 16 but .*features\.npy has 8 columns"):
        load_benchmark(mismatch)
    leak = spec_copy(
        tmp_path,
        "goz",
        params={"features_dir": str(root), "lists_dir": str(lists)},
        edit={
            "features": {
                "name": "x",
                "dim": 8,
                "backbone": "x",
                "pretrained_on": {"wnids": [classes["goz"][0]]},
            }
        },
    )
    with pytest.raises(
        SpecError,
        match=r"1 test class\(es\) of split 'goz' are among the classes the feature backbone was trained on",
    ):
        load_benchmark(load_spec(leak))


def _rows(root: Path) -> int:
    return int(np.load(root / "features.npy", mmap_mode="r").shape[0])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r, n: (r / "labels.npy").unlink(), r"labels\.npy: missing image labels"),
        (
            lambda r, n: np.save(r / "labels.npy", np.zeros(3, np.int64)),
            r"labels\.npy has 3 entries but features\.npy has \d+ rows",
        ),
        (
            lambda r, n: np.save(r / "features.npy", np.zeros((n, 8), np.float64)),
            r"expected a float16 or float32 array \[N, D\]",
        ),
        (
            lambda r, n: np.save(
                r / "labels.npy", np.r_[np.zeros(99), 10**6, np.zeros(n - 100)].astype(np.int64)
            ),
            r"row 99 holds label 1000000, outside 0\.\.21843",
        ),
        (
            lambda r, n: np.save(r / "class_embeddings.npy", np.zeros((5, 4), np.float32)),
            r"class_embeddings\.npy: expected a float array \[21844, E\]",
        ),
        (
            lambda r, n: np.save(r / "features.npy", np.full((n, 8), np.nan, np.float16)),
            r"features\.npy: row \d+ holds NaN or inf",
        ),
        (
            lambda r, n: np.save(
                r / "labels.npy", np.array([None] * n, dtype=object), allow_pickle=True
            ),
            r"labels\.npy: not a readable \.npy array",
        ),
        (
            lambda r, n: (r / "wnids.txt").write_text("n01440764\nbad\n"),
            r"wnids\.txt:2: expected a WordNet id",
        ),
    ],
)
def test_adapter_refuses_malformed_user_files(
    tmp_path: Path,
    lists: Path,
    user_dir: tuple[Path, dict[str, list[str]], dict[str, Any]],
    damage: Any,
    message: str,
) -> None:
    root, _, _ = user_dir
    damage(root, _rows(root))
    with pytest.raises(HarnessError, match=message):
        _load(tmp_path, lists, root)


# -- the shipped specs ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPLIT_NAMES)
def test_shipped_specs_validate_and_expect_the_true_sizes(lists: Path, name: str) -> None:
    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / "imagenet" / f"{name}.yaml")
    assert spec.data.adapter == "imagenet" and spec.predictions.format == "topk"
    assert spec.features.pretrained_on.class_set == "ilsvrc2012"
    split = resolve_split_name(spec.data.params["split"])
    assert spec.splits.variant == split.name == name
    train, test = split_classes(split, lists)
    expect = spec.splits.expect
    assert expect is not None and expect.unseen_classes == len(test)
    assert (expect.train_classes or 0) + (expect.val_classes or 0) == len(train)
    if name != "goz":  # hop splits are titled by their true size, not a literature name
        assert f"({len(test):,} classes)" in spec.title and "literature" not in spec.title


def _embedding_set(
    out: Path, wnids: list[str], dim: int = 4, seed: int = 1
) -> tuple[Any, np.ndarray]:
    """A class-embedding set, as `zsl embeddings build` writes one, for ``wnids``."""
    from harness.features.sets import write_set

    table = np.random.default_rng(seed).normal(size=(len(wnids), dim)).astype(np.float32)
    arrays = {
        "embeddings": table,
        "class_ids": np.array(wnids),
        "class_names": np.array(wnids),
        "texts": np.array(wnids),
    }
    provenance = {"model": "test-vectors", "model_files": {}, "text": "wnid"}
    return write_set(out, arrays, "class-embeddings", provenance), table


@pytest.mark.slow  # up to 12 s in `make test-fast` on a busy 2-core machine (issue 28)
def test_adapter_reads_class_embeddings_from_a_set_matched_by_wnid(
    tmp_path: Path,
    lists: Path,
    splits: dict[str, tuple[str, ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wnids = all_wnids(lists)
    root = tmp_path / "features"
    write_user_features(root, wnids, [wnids[0], "n01440764", splits["within-1-hop"][5]])

    def load(name: str, **params: Any) -> Any:
        # each variant in its own folder and ZSL_HOME (its spec data differ, its version not)
        (tmp_path / name).mkdir()
        monkeypatch.setenv("ZSL_HOME", str(tmp_path / name / "home"))
        return _load(tmp_path / name, lists, root, **params)

    # the set lists the classes in another order than wnids.txt: rows are matched by wnid
    shuffled = list(reversed(wnids))
    made, table = _embedding_set(tmp_path / "emb", shuffled)
    bench = load(
        "ok", embedding_sets={"word2vec": {"path": str(tmp_path / "emb"), "hash": made.hash}}
    )
    class_ids = bench.class_ids.tolist()
    row = {w: i for i, w in enumerate(shuffled)}
    np.testing.assert_array_equal(
        bench.array("embeddings/word2vec"), table[[row[w] for w in class_ids]]
    )
    provenance = bench.frozen.meta["provenance"]["class_embeddings"]["word2vec"]
    assert provenance["set_hash"] == made.hash and provenance["model"] == "test-vectors"
    assert "features" not in bench.frozen.meta["provenance"]  # the features were brought as files
    # a set without some split classes: refused, or those classes dropped
    gone = list(splits["within-1-hop"][:2])
    _embedding_set(tmp_path / "partial", [w for w in wnids if w not in gone])
    partial = {"word2vec": {"path": str(tmp_path / "partial")}}
    with pytest.raises(SpecError, match=r"embedding_sets\.word2vec: the set lacks 2 class\(es\)"):
        load("refused", embedding_sets=partial)
    dropped = load("dropped", embedding_sets=partial, classes_without_embedding="drop")
    assert dropped.frozen.meta["dropped_without_embedding"] == sorted(gone)
    _embedding_set(tmp_path / "wide", wnids, dim=6)
    for number, (bad, message) in enumerate(
        [
            (
                {"word2vec": {"path": str(tmp_path / "emb"), "hash": "sha256:" + "3" * 64}},
                "not the pinned",
            ),
            (
                {"glove": {"path": str(tmp_path / "emb")}},
                r"names \['glove'\], which class_embeddings",
            ),
            ({"word2vec": {"path": str(root)}}, "is not a class-embedding set"),
            (
                {"word2vec": {"path": str(tmp_path / "wide")}},
                "the set is 6-d, class_embeddings declares 4",
            ),
        ]
    ):
        with pytest.raises(SpecError, match=message):
            load(f"bad{number}", embedding_sets=bad)
