"""Tests of harness.data.structure: structural ratio, exclusivity violations, split sizes."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import MetricError
from harness.data.structure import (
    SplitSize,
    SplitSizes,
    mutual_exclusivity_violations,
    split_sizes,
    structural_ratio,
)
from harness.hierarchy import Hierarchy
from tests.conftest import SHARED_DATA

IMAGENET = SHARED_DATA / "imagenet"
AWA2 = SHARED_DATA / "xlsa17" / "AWA2"

# A DAG with multiple parents: dog and cat are both animals and pets.
#
#   r -> animal, pet, vehicle
#   animal -> wolf, dog, cat          pet -> dog, cat, hamster
#   dog -> poodle                     vehicle -> car, bike
#
# plus a component without training classes (island -> isle1, isle2) and a lone node "x".
NODES = [
    "r", "animal", "pet", "vehicle", "wolf", "dog", "cat", "hamster", "poodle", "car", "bike",
    "island", "isle1", "isle2", "x",
]  # fmt: skip
EDGES = [
    ("r", "animal"), ("r", "pet"), ("r", "vehicle"),
    ("animal", "wolf"), ("animal", "dog"), ("animal", "cat"),
    ("pet", "dog"), ("pet", "cat"), ("pet", "hamster"),
    ("dog", "poodle"), ("vehicle", "car"), ("vehicle", "bike"),
    ("island", "isle1"), ("island", "isle2"),
]  # fmt: skip
DAG = Hierarchy(NODES, EDGES)
TRAIN = ["dog", "car"]
TEST = ["wolf", "hamster", "cat", "poodle", "bike"]


def ix(names: list[str]) -> np.ndarray:
    return DAG.indices(names)


def bfs_distances(n_nodes: int, edges: list[tuple[int, int]], source: int) -> list[float]:
    """Undirected hop distances by a plain breadth-first search (independent of scipy)."""
    neighbours: list[list[int]] = [[] for _ in range(n_nodes)]
    for p, c in edges:
        neighbours[p].append(c)
        neighbours[c].append(p)
    dist = [float("inf")] * n_nodes
    dist[source] = 0.0
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v in neighbours[u]:
            if dist[v] == float("inf"):
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def reference_ratio_terms(
    h: Hierarchy, train: list[int], test: list[int]
) -> tuple[list[float], list[float]]:
    edges = [(int(p), int(c)) for p, c in h.edges]
    numerators, denominators = [], []
    for c in test:
        dist = bfs_distances(h.n_nodes, edges, c)
        numerators.append(min(dist[t] for t in train))
        denominators.append(min((dist[o] for o in test if o != c), default=float("inf")))
    return numerators, denominators


# --- structural ratio ----------------------------------------------------------------------------


def test_structural_ratio_multi_parent_dag_hand_computed() -> None:
    result = structural_ratio(DAG, ix(TRAIN), ix(TEST))
    # Numerators (nearest of dog, car):
    #   wolf-animal-dog 2; hamster-pet-dog 2 (through dog's second parent: 4 in a tree without
    #   pet->dog); cat-animal-dog 2; poodle-dog 1; bike-vehicle-car 2.
    # Denominators (nearest other test class):
    #   wolf: cat via animal, 2. hamster: cat via pet, 2. cat: wolf or hamster, 2.
    #   poodle: poodle-dog-animal-wolf (or -cat, or dog-pet-hamster), 3.
    #   bike: bike-vehicle-r-animal-wolf (or r-pet-hamster), 4.
    assert result.numerator.tolist() == [2, 2, 2, 1, 2]
    assert result.denominator.tolist() == [2, 2, 2, 3, 4]
    # R = (1 + 1 + 1 + 1/3 + 1/2) / 5 = (23/6) / 5 = 23/30
    assert result.value == pytest.approx(23 / 30)
    np.testing.assert_allclose(result.ratio, [1, 1, 1, 1 / 3, 1 / 2])
    assert result.n_included == 5
    assert result.infinite_denominator.tolist() == []
    assert result.infinite_numerator.tolist() == []
    assert result.zero_denominator.tolist() == []
    assert result.test_nodes.tolist() == ix(TEST).tolist()


def test_structural_ratio_second_parent_matters() -> None:
    # Dropping the pet->dog edge makes a tree-like path: hamster is now 4 hops from dog
    # (hamster-pet-r-animal-dog) and still 2 from cat; its ratio goes from 1 to 2.
    tree = Hierarchy(NODES, [e for e in EDGES if e != ("pet", "dog")])
    result = structural_ratio(tree, tree.indices(TRAIN), tree.indices(TEST))
    assert result.numerator[1] == 4 and result.denominator[1] == 2


def test_structural_ratio_excludes_and_reports_unreachable_classes() -> None:
    # isle1, isle2: no training class in their component -> infinite numerator (they are 2
    # apart, finite denominator). x: alone -> infinite numerator and denominator.
    test = [*TEST, "isle1", "isle2", "x"]
    result = structural_ratio(DAG, ix(TRAIN), ix(test))
    assert result.infinite_numerator.tolist() == ix(["isle1", "isle2", "x"]).tolist()
    assert result.infinite_denominator.tolist() == ix(["x"]).tolist()
    assert result.zero_denominator.tolist() == []
    assert result.denominator[5:7].tolist() == [2.0, 2.0]
    assert np.isnan(result.ratio[5:]).all()
    assert result.n_included == 5
    assert result.value == pytest.approx(23 / 30)  # unchanged: the 3 are excluded


def test_structural_ratio_adjacent_test_classes() -> None:
    # Test classes dog and poodle are adjacent (denominator 1); train cat: cat-animal-dog 2,
    # cat-animal-dog-poodle 3 -> ratios 2 and 3, R = 2.5.
    result = structural_ratio(DAG, ix(["cat"]), ix(["dog", "poodle"]))
    assert result.denominator.tolist() == [1, 1]
    assert result.numerator.tolist() == [2, 3]
    assert result.value == 2.5


@st.composite
def dags(draw: st.DrawFn) -> tuple[Hierarchy, list[int], list[int]]:
    n = draw(st.integers(3, 14))
    ids = [f"n{i:02d}" for i in range(n)]
    # edges only from lower to higher index: acyclic; several parents allowed
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n)) if pairs else []
    h = Hierarchy(ids, [(ids[i], ids[j]) for i, j in chosen])
    roles = draw(st.lists(st.sampled_from(["train", "test", "none"]), min_size=n, max_size=n))
    train = [i for i, r in enumerate(roles) if r == "train"]
    test = [i for i, r in enumerate(roles) if r == "test"]
    if not train:
        train = [0]
        test = [i for i in test if i != 0]
    if len(test) < 2:
        test = [i for i in range(n) if i not in train][:2]
    return h, train, test


@settings(max_examples=200, deadline=None)
@given(dags())
def test_structural_ratio_agrees_with_plain_bfs(
    problem: tuple[Hierarchy, list[int], list[int]],
) -> None:
    h, train, test = problem
    if len(test) < 2:
        return
    numerators, denominators = reference_ratio_terms(h, train, test)
    finite = [
        n / d
        for n, d in zip(numerators, denominators, strict=True)
        if np.isfinite(n) and np.isfinite(d)
    ]
    if not finite:
        with pytest.raises(MetricError, match="structural ratio is undefined"):
            structural_ratio(h, train, test)
        return
    result = structural_ratio(h, train, test)
    assert result.numerator.tolist() == numerators
    assert result.denominator.tolist() == denominators
    assert result.value == pytest.approx(sum(finite) / len(finite))
    assert result.n_included == len(finite)


def test_structural_ratio_agrees_with_hop_distance_on_dag() -> None:
    # hop_distance is the hierarchy's own (scipy) distance: the two-search shortcut agrees.
    test = ix(TEST)
    dist = DAG.hop_distance(test)
    numerator = dist[:, ix(TRAIN)].min(axis=1)
    among = dist[:, test]
    np.fill_diagonal(among, np.inf)
    result = structural_ratio(DAG, ix(TRAIN), test)
    np.testing.assert_array_equal(result.numerator, numerator)
    np.testing.assert_array_equal(result.denominator, among.min(axis=1))


def _imagenet() -> tuple[Hierarchy, np.ndarray, np.ndarray, list[str]]:
    files = [
        IMAGENET / f
        for f in ("wordnet.is_a.txt", "ilsvrc2012_synsets.txt", "goz_v1_test_wnids.txt")
    ]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        pytest.skip(f"ImageNet lists not found ({', '.join(missing)}); set ZSL_SHARED_DATA")
    edges = [tuple(line.split()) for line in files[0].read_text().splitlines() if line.strip()]
    nodes = sorted({n for edge in edges for n in edge})
    h = Hierarchy(nodes, edges, source="imagenet wordnet.is_a.txt")
    train = [line.split()[0] for line in files[1].read_text().splitlines() if line.strip()]
    test = [line.split()[0] for line in files[2].read_text().splitlines() if line.strip()]
    known = set(nodes)
    absent = [w for w in test if w not in known]
    return h, h.indices(train), h.indices([w for w in test if w in known]), absent


def test_structural_ratio_imagenet_goz() -> None:
    h, train, test, absent = _imagenet()
    # n09450163 (sun) is a GOZ test class without an is-a edge in ImageNet's file.
    assert absent == ["n09450163"]
    result = structural_ratio(h, train, test)
    assert test.shape[0] == 499
    # 5 test classes lie in components without an ILSVRC class; one of them also has no other
    # GOZ class in its component.
    assert len(result.infinite_numerator) == 5
    assert len(result.infinite_denominator) == 1
    assert result.n_included == 494
    assert result.value == pytest.approx(2.1015262515262516, rel=1e-12)  # regression value
    # spot-check 40 test classes against per-source distances of the hierarchy itself
    dist = h.hop_distance(test[:40])
    np.testing.assert_array_equal(result.numerator[:40], dist[:, train].min(axis=1))
    among = dist[:, test]
    among[np.arange(40), np.arange(40)] = np.inf
    np.testing.assert_array_equal(result.denominator[:40], among.min(axis=1))
    assert mutual_exclusivity_violations(h, test) == []
    assert mutual_exclusivity_violations(h, train) == []


# --- mutual exclusivity --------------------------------------------------------------------------


def test_mutual_exclusivity_violations_multi_parent() -> None:
    split = ix(["animal", "pet", "dog", "poodle", "cat", "car"])
    # animal and pet are both above dog, poodle and cat (dog and cat have two parents);
    # dog is above poodle; car is unrelated.
    assert mutual_exclusivity_violations(DAG, split) == [
        ("animal", "cat"),
        ("animal", "dog"),
        ("animal", "poodle"),
        ("dog", "poodle"),
        ("pet", "cat"),
        ("pet", "dog"),
        ("pet", "poodle"),
    ]


def test_mutual_exclusivity_violations_none_and_trivial() -> None:
    assert mutual_exclusivity_violations(DAG, ix(TEST)) == []
    assert mutual_exclusivity_violations(DAG, ix(["dog"])) == []
    assert mutual_exclusivity_violations(DAG, np.zeros(0, dtype=np.int64)) == []


def test_mutual_exclusivity_violations_agree_with_loop() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        split = rng.choice(DAG.n_nodes, size=int(rng.integers(2, 10)), replace=False)
        want = sorted(
            (str(DAG.node_ids[a]), str(DAG.node_ids[b]))
            for a in split
            for b in split
            if a != b and a in DAG.ancestors(int(b))
        )
        assert mutual_exclusivity_violations(DAG, split) == want


# --- split sizes ---------------------------------------------------------------------------------


def test_split_sizes_hand_case() -> None:
    table = split_sizes(
        train_classes=[0, 1, 2],
        val_classes=[3],
        test_seen_classes=[0, 1, 2, 3],
        test_unseen_classes=[4, 5],
        train_images=[0, 1, 2],
        val_images=[3],
        test_seen_images=[2, 4],  # image 2 is also a training image
        test_unseen_images=[5, 6, 7],
    )
    assert table.splits == {
        "train": SplitSize(classes=3, images=3),
        "val": SplitSize(classes=1, images=1),
        "test_seen": SplitSize(classes=4, images=2),
        "test_unseen": SplitSize(classes=2, images=3),
    }
    assert table.class_overlap == {
        "train&val": 0,
        "train&test_seen": 3,
        "train&test_unseen": 0,
        "val&test_seen": 1,
        "val&test_unseen": 0,
        "test_seen&test_unseen": 0,
    }
    assert table.image_overlap["train&test_seen"] == 1
    assert table.n_classes == 6 and table.n_images == 8


def test_split_sizes_optional_splits() -> None:
    table = split_sizes(train_classes=[0], test_unseen_classes=[1])
    assert table == SplitSizes(
        splits={
            "train": SplitSize(classes=1, images=None),
            "test_unseen": SplitSize(classes=1, images=None),
        },
        class_overlap={"train&test_unseen": 0},
        image_overlap={},
        n_classes=2,
        n_images=None,
    )


def test_split_sizes_awa2_matches_gbu_table() -> None:
    mat = AWA2 / "att_splits.mat"
    if not mat.is_file():
        pytest.skip(f"xlsa17 AWA2 split file not found at {mat}; set ZSL_SHARED_DATA")
    from scipy.io import loadmat

    m = loadmat(mat)
    names = [str(x[0][0]) for x in m["allclasses_names"]]

    def classes(file: str) -> list[int]:
        return [
            names.index(line.strip())
            for line in (AWA2 / file).read_text().splitlines()
            if line.strip()
        ]

    def images(key: str) -> np.ndarray:
        return m[key].ravel().astype(np.int64) - 1  # MATLAB 1-based

    table = split_sizes(
        train_classes=classes("trainclasses1.txt"),
        val_classes=classes("valclasses1.txt"),
        test_seen_classes=classes("trainvalclasses.txt"),
        test_unseen_classes=classes("testclasses.txt"),
        train_images=images("train_loc"),
        val_images=images("val_loc"),
        test_seen_images=images("test_seen_loc"),
        test_unseen_images=images("test_unseen_loc"),
    )
    # GBU Table 1, AWA2: 27 + 13 training classes, 10 test classes; 5882 test-seen and 7913
    # test-unseen images; 37322 images in all.
    split = table.splits
    assert (split["train"].classes, split["val"].classes) == (27, 13)
    assert split["test_unseen"] == SplitSize(classes=10, images=7913)
    assert split["test_seen"] == SplitSize(classes=40, images=5882)
    assert table.n_classes == 50 and table.n_images == 37322
    assert table.class_overlap["train&val"] == 0
    assert table.class_overlap["train&test_unseen"] == 0
    # What the table is for: xlsa17's train_loc/val_loc (the train/val split used for tuning)
    # hold all 5882 test_seen images (4031 + 1851); only trainval_loc excludes them.
    assert table.image_overlap["train&test_seen"] + table.image_overlap["val&test_seen"] == 5882
    assert table.image_overlap["test_seen&test_unseen"] == 0


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("train", "test", "match"),
    [
        ([], [1, 2], r"Expected `train_nodes` to hold at least one node index, but got 0"),
        (
            [0],
            [1.0, 2.0],
            r"Expected `test_nodes` to be a 1D integer array of hierarchy node indices, but got dtype float64",
        ),
        (
            [[0]],
            [1, 2],
            r"Expected `train_nodes` to be a 1D integer array .* but got shape \(1, 1\)",
        ),
        (
            [0],
            [1, 99],
            r"Expected `test_nodes` to hold node indices in \[0, 15\), but got test_nodes\[1\] = 99",
        ),
        (
            [0],
            [1, 2, 1],
            r"Expected `test_nodes` to hold distinct node indices, but test_nodes\[2\] = 1 repeats test_nodes\[0\]",
        ),
        (
            [0, 1],
            [2, 1],
            r"Expected `train_nodes` and `test_nodes` to be disjoint, but test_nodes\[1\] = 1 \(bike\) is also a training class",
        ),
    ],
)
def test_error_structural_ratio_nodes(train: object, test: object, match: str) -> None:
    with pytest.raises(MetricError, match=match):
        structural_ratio(DAG, train, test)  # type: ignore[arg-type]


def test_error_structural_ratio_undefined() -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected at least one test class with a training class and another test class connected to it, but none of the 1 test classes",
    ):
        structural_ratio(DAG, ix(["dog"]), ix(["cat"]))
    with pytest.raises(
        MetricError, match=r"Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got dict"
    ):
        structural_ratio({}, [0], [1, 2])  # type: ignore[arg-type]


def test_error_mutual_exclusivity_violations() -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected `nodes` to hold distinct node indices, but nodes\[1\] = 3 repeats nodes\[0\]",
    ):
        mutual_exclusivity_violations(DAG, [3, 3])
    with pytest.raises(
        MetricError,
        match=r"Expected `nodes` to hold node indices in \[0, 15\), but got nodes\[0\] = -1",
    ):
        mutual_exclusivity_violations(DAG, [-1])
    with pytest.raises(
        MetricError, match=r"Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got None"
    ):
        mutual_exclusivity_violations(None, [0])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"train_classes": [0, 0]},
            r"Expected `train_classes` to hold distinct entries, but train_classes\[1\] = 0 repeats train_classes\[0\]",
        ),
        (
            {"test_unseen_classes": [-2]},
            r"Expected `test_unseen_classes` to hold non-negative indices, but got test_unseen_classes\[0\] = -2",
        ),
        (
            {"val_images": [1]},
            r"Expected `val_classes` with `val_images`, but got images for a split without classes",
        ),
        (
            {"train_images": [0.5]},
            r"Expected `train_images` to be a 1D integer array of indices, but got dtype float64",
        ),
        (
            {"train_images": [1, 2, 1]},
            r"Expected `train_images` to hold distinct entries, but train_images\[2\] = 1 repeats train_images\[0\]",
        ),
    ],
)
def test_error_split_sizes(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"train_classes": [0], "test_unseen_classes": [1]}
    with pytest.raises(MetricError, match=match):
        split_sizes(**{**base, **kwargs})  # type: ignore[arg-type]
