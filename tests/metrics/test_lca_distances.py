"""The two LCA distances (issue 27): Deng's LCA height and Bertinetto's max leaf depth minus the
LCA's depth, in the hierarchy, in every metric built on them, and in specs.

Hand-built hierarchies whose leaves lie at different depths (where the two distances differ)
give hand-computed values; a plain recursive Python reference over the edge list, written
independently of :mod:`harness.hierarchy.dag`, checks every leaf pair of random trees and DAGs
of ~200 nodes; the default (the LCA height) must leave every former value, record and detail as
it was.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from random import Random
from typing import Any

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from harness.core.errors import HierarchyError, MetricError, SpecError
from harness.hierarchy import LCA_DISTANCES, Hierarchy
from harness.metrics import MetricInput, metrics
from harness.metrics.hierarchical import (
    average_hierarchical_distance_at_k,
    hierarchical_cost,
    hierarchical_retrieval_precision_at_k,
    mistake_severity,
)
from harness.records import ScoreEntry
from harness.results.records_io import read_records
from harness.scoring import score_setting
from harness.spec import MetricSpec, Uncertainty, load_spec
from tests.conftest import REPO, SPECS

HEIGHT, BERTINETTO = "lca_height", "max_leaf_depth_minus_lca_depth"

#: The registered metrics built on an LCA distance, each of which takes ``lca_distance``.
LCA_METRICS = {
    "hierarchical_cost",
    "mistake_severity",
    "average_hierarchical_distance_at_k",
    "hierarchical_retrieval_precision_at_k",
}

# --- a hand-built tree with leaves at depths 1, 2 and 3 -------------------------------------------
#
#            root                      max_depth: root 0; animal, plant, rock 1;
#         /   |    \                              dog, cat, tree, moss 2; oak, pine 3
#    animal  plant  rock               max leaf depth D = 3 (oak, pine)
#    /  \    /  \                      height: leaves 0; animal, tree 1; plant 2; root 3
#  dog cat tree moss                   D - max_depth: root 3; animal, plant, rock 2;
#          /  \                                       dog, cat, tree, moss 1; oak, pine 0
#        oak  pine
TREE_EDGES = [
    ("root", "animal"),
    ("root", "plant"),
    ("root", "rock"),
    ("animal", "dog"),
    ("animal", "cat"),
    ("plant", "tree"),
    ("plant", "moss"),
    ("tree", "oak"),
    ("tree", "pine"),
]
TREE = Hierarchy(sorted({n for e in TREE_EDGES for n in e}), TREE_EDGES)
LEAVES = ["dog", "cat", "rock", "oak", "pine", "moss"]  # candidate columns 0..5
DOG, CAT, ROCK, OAK, PINE, MOSS = range(6)

# Hand-computed (LCA height, max leaf depth - LCA depth) of leaf pairs of TREE.
TREE_PAIRS = [
    ("dog", "cat", 1, 2),  # LCA animal: 1 high, but depth 1 of D = 3
    ("oak", "pine", 1, 1),  # LCA tree: at the deepest leaves' parent level, both agree
    ("oak", "moss", 2, 2),  # LCA plant
    ("moss", "pine", 2, 2),
    ("dog", "oak", 3, 3),  # LCA root
    ("rock", "dog", 3, 3),
    ("dog", "dog", 0, 1),  # a node with itself: its own height, or its level above the bottom
    ("rock", "rock", 0, 2),
    ("oak", "oak", 0, 0),
    ("animal", "dog", 1, 2),  # an ancestor and its descendant meet at the ancestor
    ("plant", "oak", 2, 2),
]

# --- a hand-built DAG where longest- and shortest-path depths disagree ---------------------------
#
#   root -> a -> b -> x -> y, z        x has two parents: b (x's max_depth 3) and root (depth 1)
#   root -> x;  b -> v;  root -> w     D = 4 (y, z); leaves v (depth 3) and w (depth 1)
DAG_EDGES = [
    ("root", "a"),
    ("a", "b"),
    ("b", "x"),
    ("root", "x"),
    ("x", "y"),
    ("x", "z"),
    ("b", "v"),
    ("root", "w"),
]
DAG = Hierarchy(sorted({n for e in DAG_EDGES for n in e}), DAG_EDGES)
DAG_PAIRS = [
    ("y", "z", 1, 1),  # LCA x at max_depth 3 of D = 4
    # LCA b: height 2 (b -> x -> y), max_depth 2, so 4 - 2 = 2. With shortest-path depths (x
    # and y one edge shallower through root -> x) it would read 3 - 2 = 1.
    ("y", "v", 2, 2),
    ("v", "v", 0, 1),
    ("w", "y", 4, 4),  # only the root in common
    ("w", "w", 0, 3),
    ("x", "v", 2, 2),
]


def _pairs(h: Hierarchy, table: list[tuple[str, str, int, int]]) -> tuple[Any, Any, Any, Any]:
    a = h.indices([row[0] for row in table])
    b = h.indices([row[1] for row in table])
    return a, b, [row[2] for row in table], [row[3] for row in table]


@pytest.mark.parametrize(
    ("h", "table"), [(TREE, TREE_PAIRS), (DAG, DAG_PAIRS)], ids=["tree", "dag"]
)
def test_lca_distances_hand_computed(h: Hierarchy, table: list[tuple[str, str, int, int]]) -> None:
    a, b, height, bertinetto = _pairs(h, table)
    assert h.lca_distance(a, b, HEIGHT).tolist() == height
    assert h.lca_height(a, b).tolist() == height
    assert h.lca_distance(a, b).tolist() == height  # the default is the LCA height
    assert h.lca_distance(a, b, BERTINETTO).tolist() == bertinetto
    assert h.lca_distance(b, a, BERTINETTO).tolist() == bertinetto  # symmetric


def test_levels_of_the_hand_built_tree() -> None:
    by_name = dict(zip(TREE.node_ids.tolist(), range(TREE.n_nodes), strict=True))
    level = {name: int(TREE.levels_above_deepest_leaf[i]) for name, i in by_name.items()}
    assert level == {
        "root": 3,
        "animal": 2,
        "plant": 2,
        "rock": 2,
        "dog": 1,
        "cat": 1,
        "tree": 1,
        "moss": 1,
        "oak": 0,
        "pine": 0,
    }
    assert TREE.max_leaf_depth == TREE.root_height == 3
    assert DAG.max_leaf_depth == DAG.root_height == 4
    assert (TREE.levels_above_deepest_leaf >= TREE.height).all()
    assert not TREE.levels_above_deepest_leaf.flags.writeable
    assert np.array_equal(TREE.lca_levels(HEIGHT), TREE.height)


def test_matrix_and_counts_hand_computed() -> None:
    idx = TREE.indices(LEAVES)
    # Pairwise over dog, cat, rock, oak, pine, moss.
    assert TREE.lca_distance_matrix(idx, BERTINETTO).tolist() == [
        [1, 2, 3, 3, 3, 3],
        [2, 1, 3, 3, 3, 3],
        [3, 3, 2, 3, 3, 3],
        [3, 3, 3, 0, 1, 2],
        [3, 3, 3, 1, 0, 2],
        [3, 3, 3, 2, 2, 1],
    ]
    assert TREE.lca_height_matrix(idx).tolist() == [
        [0, 1, 3, 3, 3, 3],
        [1, 0, 3, 3, 3, 3],
        [3, 3, 0, 3, 3, 3],
        [3, 3, 3, 0, 1, 2],
        [3, 3, 3, 1, 0, 2],
        [3, 3, 3, 2, 2, 0],
    ]
    # From dog: itself at 1, cat at 2 (animal), the other four at 3 (root).
    levels, counts = TREE.lca_distance_counts(TREE.indices(["dog"]), idx, limit=6, kind=BERTINETTO)
    assert levels.tolist() == [1, 2, 3] and counts.tolist() == [[1, 2, 6]]
    levels, counts = TREE.lca_distance_counts(TREE.indices(["dog"]), idx, limit=6)
    assert levels.tolist() == [0, 1, 3] and counts.tolist() == [[1, 2, 6]]


def test_unknown_kind_is_refused_naming_the_choices() -> None:
    with pytest.raises(
        HierarchyError,
        match=r"one of \['lca_height', 'max_leaf_depth_minus_lca_depth'\], but got 'bertinetto'",
    ):
        TREE.lca_distance(0, 1, "bertinetto")  # type: ignore[arg-type]
    with pytest.raises(HierarchyError, match="but got 'depth'"):
        TREE.lca_distance_matrix([0, 1], "depth")  # type: ignore[arg-type]
    with pytest.raises(HierarchyError, match="but got 'depth'"):
        TREE.lca_distance_counts([0], [1], limit=1, kind="depth")  # type: ignore[arg-type]


# --- an independent reference on random trees and DAGs ---------------------------------------------


def reference_distances(
    ids: list[str], edges: list[tuple[str, str]]
) -> Callable[[str, str], tuple[int, int]]:
    """``(LCA height, max leaf depth - LCA depth)`` of two node ids, from the edge list alone.

    Plain recursion: depth = longest path from a root (a root is 0), height = longest path down
    to a leaf, ancestors-or-self by walking up; -1 for both where no ancestor is shared.
    """
    parents: dict[str, list[str]] = {i: [] for i in ids}
    children: dict[str, list[str]] = {i: [] for i in ids}
    for parent, child in edges:
        parents[child].append(parent)
        children[parent].append(child)

    @cache
    def depth(u: str) -> int:
        return max((depth(p) + 1 for p in parents[u]), default=0)

    @cache
    def height(u: str) -> int:
        return max((height(c) + 1 for c in children[u]), default=0)

    @cache
    def up(u: str) -> frozenset[str]:
        return frozenset({u}).union(*(up(p) for p in parents[u]))

    deepest = max(depth(u) for u in ids if not children[u])

    def distances(a: str, b: str) -> tuple[int, int]:
        common = up(a) & up(b)
        if not common:
            return -1, -1
        return min(height(c) for c in common), deepest - max(depth(c) for c in common)

    return distances


def random_graph(seed: int, n: int, *, tree: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """Nodes n0..n{n-1} in topological order; each non-root has one parent (a tree) or one to
    three (a DAG, with a few extra roots), drawn among the earlier nodes."""
    rng = Random(seed)
    ids = [f"n{i:03d}" for i in range(n)]
    edges: list[tuple[str, str]] = []
    for i in range(1, n):
        if not tree and rng.random() < 0.03:
            continue  # another root
        k = 1 if tree else rng.choice([1, 1, 1, 2, 2, 3])
        for p in rng.sample(range(max(0, i - 30), i), min(k, i - max(0, i - 30))):
            edges.append((ids[p], ids[i]))
    return ids, edges


@pytest.mark.parametrize(("seed", "tree"), [(0, True), (1, True), (2, False), (3, False)])
def test_every_leaf_pair_agrees_with_the_reference(seed: int, tree: bool) -> None:
    ids, edges = random_graph(seed, 200, tree=tree)
    h = Hierarchy(ids, edges)
    ref = reference_distances(ids, edges)
    leaves = h.leaves
    names = h.node_ids[leaves].tolist()
    expected = np.array([[ref(a, b) for b in names] for a in names])  # [m, m, 2]
    a, b = np.meshgrid(leaves, leaves, indexing="ij")
    got_height = h.lca_distance(a, b, HEIGHT)
    got_bertinetto = h.lca_distance(a, b, BERTINETTO)
    assert np.array_equal(got_height, expected[..., 0])
    assert np.array_equal(got_bertinetto, expected[..., 1])
    assert np.array_equal(h.lca_distance_matrix(leaves, BERTINETTO), expected[..., 1])
    # Where leaves lie at different depths the two differ, never with Bertinetto's smaller.
    shared = got_height >= 0
    assert (got_bertinetto[shared] >= got_height[shared]).all()
    assert (got_bertinetto != got_height).any()
    # Counts: targets within each distance of a few sources, as the reference counts them.
    sources = leaves[:: max(1, leaves.size // 7)]
    levels, counts = h.lca_distance_counts(sources, leaves, limit=leaves.size, kind=BERTINETTO)
    for row, source in enumerate(h.node_ids[sources].tolist()):
        within = [ref(source, t)[1] for t in names]
        for column, level in enumerate(levels.tolist()):
            assert counts[row, column] == sum(0 <= d <= level for d in within)


# --- the metrics, hand-computed on TREE --------------------------------------------------------------
#
# Four images over the six leaf candidates. The hierarchical distance delta (0 for the true class)
# of each ranked prediction, LCA height / Bertinetto:
#   image 0, true dog:  cat 1/2 (animal), dog 0/0, oak 3/3
#   image 1, true oak:  pine 1/1 (tree), moss 2/2 (plant), rock 3/3
#   image 2, true rock: rock 0/0, dog 3/3, moss 3/3
#   image 3, true moss: oak 2/2 (plant), cat 3/3, moss 0/0
Y_TRUE = np.array([DOG, OAK, ROCK, MOSS])
RANKED = np.array([[CAT, DOG, OAK], [PINE, MOSS, ROCK], [ROCK, DOG, MOSS], [OAK, CAT, MOSS]])
NODES = TREE.indices(LEAVES)
OPTIONS = {"hierarchy": TREE, "candidate_nodes": NODES}


def test_mistake_severity_under_each_distance() -> None:
    # Mistakes: images 0, 1 and 3 (image 2 is correct).
    height = mistake_severity(Y_TRUE, RANKED, **OPTIONS)
    assert height.per_image.tolist() == [1, 1, 0, 2]
    assert height.value == pytest.approx(4 / 3) and height.lca_distance == HEIGHT
    bertinetto = mistake_severity(Y_TRUE, RANKED, **OPTIONS, lca_distance=BERTINETTO)
    assert bertinetto.per_image.tolist() == [2, 1, 0, 2]
    assert bertinetto.value == pytest.approx(5 / 3) and bertinetto.lca_distance == BERTINETTO


def test_average_hierarchical_distance_under_each_distance() -> None:
    height = average_hierarchical_distance_at_k(Y_TRUE, RANKED, **OPTIONS, ks=[1, 2, 3])
    assert height.values == pytest.approx({1: 1.0, 2: 1.5, 3: 1.75})
    bertinetto = average_hierarchical_distance_at_k(
        Y_TRUE, RANKED, **OPTIONS, ks=[1, 2, 3], lca_distance=BERTINETTO
    )
    assert bertinetto.values == pytest.approx({1: 1.25, 2: 1.625, 3: 11 / 6})
    assert bertinetto.per_image[0].tolist() == pytest.approx([2.0, 1.0, 5 / 3])
    assert bertinetto.lca_distance == BERTINETTO


def test_hierarchical_cost_under_each_distance() -> None:
    # Per class: dog (image 0), oak (1), rock (2), moss (3); cat and pine have no image.
    height = hierarchical_cost(Y_TRUE, RANKED, **OPTIONS, classes=list(range(6)))
    assert height.per_class == (1.0, None, 0.0, 1.0, None, 2.0)
    assert height.value == pytest.approx(1.0)
    bertinetto = hierarchical_cost(
        Y_TRUE, RANKED, **OPTIONS, classes=list(range(6)), lca_distance=BERTINETTO
    )
    assert bertinetto.per_class == (2.0, None, 0.0, 1.0, None, 2.0)
    assert bertinetto.value == pytest.approx(1.25)


def test_predicting_an_ancestor_or_a_descendant() -> None:
    # Candidates: the leaves dog, oak, and the inner nodes animal, plant.
    nodes = TREE.indices(["dog", "oak", "animal", "plant"])
    y_true = [0, 1, 2]  # dog, oak, animal
    top1 = [2, 3, 0]  # animal (ancestor of dog), plant (ancestor of oak), dog (descendant)
    options = {"hierarchy": TREE, "candidate_nodes": nodes}
    assert mistake_severity(y_true, top1, **options).per_image.tolist() == [1, 2, 0]
    got = mistake_severity(y_true, top1, **options, lca_distance=BERTINETTO)
    assert got.per_image.tolist() == [2, 2, 0]


def test_retrieval_precision_under_each_distance() -> None:
    # H = 3. LCA height: S(t, t) = 1 for the leaves; image 0: S(dog, cat) = 2/3 -> 2/3;
    # image 3: S(moss, oak) = 1/3 -> 1/3. Bertinetto: S(dog, dog) = 1 - 1/3, S(dog, cat) = 1/3
    # -> 1/2; S(moss, moss) = 2/3, S(moss, oak) = 1/3 -> 1/2; oak (deepest) and rock as before.
    height = hierarchical_retrieval_precision_at_k(Y_TRUE, RANKED, **OPTIONS, ks=[1, 2])
    assert height.per_image[:, 0].tolist() == pytest.approx([2 / 3, 2 / 3, 1.0, 1 / 3])
    bertinetto = hierarchical_retrieval_precision_at_k(
        Y_TRUE, RANKED, **OPTIONS, ks=[1, 2], lca_distance=BERTINETTO
    )
    assert bertinetto.per_image[:, 0].tolist() == pytest.approx([0.5, 2 / 3, 1.0, 0.5])
    # Image 0 at k = 2 ranks cat, dog: the two most similar classes under either distance.
    assert height.per_image[0, 1] == pytest.approx(1.0)
    assert bertinetto.per_image[0, 1] == pytest.approx(1.0)
    assert bertinetto.lca_distance == BERTINETTO and bertinetto.root_height == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda d: mistake_severity(Y_TRUE, RANKED, **OPTIONS, lca_distance=d),
        lambda d: hierarchical_cost(Y_TRUE, RANKED, **OPTIONS, classes=[0], lca_distance=d),
        lambda d: average_hierarchical_distance_at_k(
            Y_TRUE, RANKED, **OPTIONS, ks=1, lca_distance=d
        ),
        lambda d: hierarchical_retrieval_precision_at_k(
            Y_TRUE, RANKED, **OPTIONS, ks=1, lca_distance=d
        ),
    ],
    ids=["severity", "cost", "ahd", "hret"],
)
def test_metric_functions_refuse_an_unknown_distance(call: Callable[[Any], Any]) -> None:
    with pytest.raises(
        MetricError,
        match=r"Expected `lca_distance` to be one of \['lca_height', 'max_leaf_depth_minus_lca_depth'\], but got 'height'\.",
    ):
        call("height")


# --- the registry: parameter, details, versions ----------------------------------------------------


def _registry_input(
    h: Hierarchy, leaves: np.ndarray, *, seed: int, n_images: int = 300
) -> MetricInput:
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, leaves.size, n_images)
    scores = rng.standard_normal((n_images, leaves.size))
    scores[np.arange(n_images), y_true] += 1.0
    return MetricInput(
        setting="zsl",
        y_true=y_true,
        scores=scores,
        candidates=h.node_ids[leaves],
        seen=np.zeros(leaves.size, dtype=bool),
        hierarchy=h,
        candidate_nodes=leaves,
    )


def test_the_parameter_is_offered_by_exactly_the_lca_metrics() -> None:
    offering = {name for name in metrics if "lca_distance" in metrics.get(name).params.model_fields}
    assert offering == LCA_METRICS
    for name in LCA_METRICS:
        field = metrics.get(name).params.model_fields["lca_distance"]
        assert field.default == HEIGHT
        assert "Deng" in (field.description or "") and "Bertinetto" in (field.description or "")
        assert "max leaf depth" in metrics.get(name).formula


@pytest.mark.parametrize("name", sorted(LCA_METRICS))
def test_registry_metric_records_a_chosen_distance(name: str) -> None:
    metric = metrics.get(name)
    data = _registry_input(TREE, NODES, seed=0)
    extra = {"k": 2} if "k" in metric.params.model_fields else {}
    height = metric(data, metric.params(**extra))
    bertinetto = metric(data, metric.params(lca_distance=BERTINETTO, **extra))
    assert "lca_distance" not in height.details  # the default, as every earlier record
    assert bertinetto.details["lca_distance"] == BERTINETTO
    assert bertinetto.value != height.value  # dog/cat mistakes cost more from the bottom
    with pytest.raises(ValidationError, match="lca_distance"):
        metric.params.model_validate({"lca_distance": "bertinetto"})


DEMO_HIERARCHY = Hierarchy.load_json(SPECS / "demo" / "hierarchy.json")


@pytest.mark.parametrize("name", sorted(LCA_METRICS))
@pytest.mark.parametrize("seed", [0, 1])
def test_default_is_the_former_lca_height_on_the_demo_hierarchy(name: str, seed: int) -> None:
    """Default, explicit old name and the former definition (min height over common
    ancestors, recomputed here) give identical results on the demo's hierarchy and classes."""
    metric = metrics.get(name)
    h = DEMO_HIERARCHY
    data = _registry_input(h, h.leaves, seed=seed)
    extra = {"k": 5} if "k" in metric.params.model_fields else {}
    default = metric(data, metric.params(**extra))
    explicit = metric(data, metric.params(lca_distance=HEIGHT, **extra))
    assert default.value == explicit.value
    assert default.details == explicit.details
    assert default.decomposition is not None and explicit.decomposition is not None
    assert np.array_equal(default.decomposition.values, explicit.decomposition.values)
    other = metric(data, metric.params(lca_distance=BERTINETTO, **extra))
    assert other.value != default.value  # the demo's leaves lie at depths 2 to 7

    # The former definition of delta, written out (the candidates are leaves, so nothing lies
    # below a true class): 0 for the class itself, else the minimum height over the common
    # ancestors-or-self.
    edges = [(str(p), str(c)) for p, c in h.node_ids[h.edges].tolist()]
    ref = reference_distances(h.node_ids.tolist(), edges)
    names = h.node_ids[h.leaves].tolist()
    ranked = np.asarray(data.ranked(5))
    former = np.array(
        [
            [0 if t == p else ref(names[t], names[p])[0] for p in row]
            for t, row in zip(data.y_true, ranked, strict=True)
        ]
    )
    if name == "mistake_severity":
        wrong = ranked[:, 0] != data.y_true
        assert default.value == pytest.approx(former[wrong, 0].mean(), rel=0, abs=1e-12)
    if name == "average_hierarchical_distance_at_k":
        assert default.value == pytest.approx(former.mean(), rel=0, abs=1e-12)


def test_committed_demo_records_keep_their_versions_and_details() -> None:
    """No LCA metric changed version or details for the demo: its committed records still are
    what this harness writes (no spec cites Bertinetto et al., so every default stayed)."""
    records = read_records(REPO / "leaderboard" / "results" / "demo")
    seen = set()
    for record in records:
        for entry in record.scores:
            if entry.function in LCA_METRICS:
                seen.add(entry.function)
                assert entry.version == metrics.get(entry.function).version
                assert "lca_distance" not in entry.details
    assert seen == LCA_METRICS


def test_streamed_scores_keep_the_chosen_distance() -> None:
    data = _registry_input(TREE, NODES, seed=3, n_images=40)
    assert data.scores is not None
    order = np.argsort(-data.scores, axis=1, kind="stable")
    top = np.take_along_axis(data.scores, order, axis=1)
    chunks = [
        dataclasses.replace(
            data,
            y_true=data.y_true[rows],
            scores=None,
            topk_indices=order[rows],
            topk_scores=top[rows],
        )
        for rows in (slice(0, 25), slice(25, 40))
    ]
    entries = [
        MetricSpec.model_validate(
            {"name": "mistake_severity", "key": "sev", "lca_distance": BERTINETTO}
        ),
        MetricSpec.model_validate({"name": "mistake_severity", "key": "sev0"}),
    ]
    streamed: list[ScoreEntry] = score_setting("zsl", chunks, entries, Uncertainty(n_boot=0))
    whole = mistake_severity(data.y_true, order, **OPTIONS, lca_distance=BERTINETTO)
    assert streamed[0].details["streamed"] is True
    assert streamed[0].details["lca_distance"] == BERTINETTO
    assert streamed[0].value == pytest.approx(whole.value)
    assert "lca_distance" not in streamed[1].details


# --- specs -------------------------------------------------------------------------------------------

DEMO_TEXT = (SPECS / "demo.yaml").read_text()


def _spec(tmp_path: Path, text: str) -> Path:
    (tmp_path / "demo").mkdir(exist_ok=True)
    (tmp_path / "demo" / "hierarchy.json").write_text(
        (SPECS / "demo" / "hierarchy.json").read_text()
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_spec_accepts_either_distance(tmp_path: Path) -> None:
    text = DEMO_TEXT.replace(
        "    key: severity\n", f"    key: severity\n    lca_distance: {BERTINETTO}\n"
    )
    spec = load_spec(_spec(tmp_path, text))
    entry = next(m for m in spec.metrics if m.result_key == "severity")
    assert entry.params == {"lca_distance": BERTINETTO}
    assert spec.spec_hash() != load_spec(SPECS / "demo.yaml").spec_hash()


def test_spec_refuses_an_unknown_distance_naming_the_key_and_the_choices(tmp_path: Path) -> None:
    text = DEMO_TEXT.replace("    key: ahd@5\n", "    key: ahd@5\n    lca_distance: bertinetto\n")
    path = _spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if "lca_distance" in row)
    message = str(info.value)
    index = [m["name"] for m in yaml.safe_load(text)["metrics"]].index(
        "average_hierarchical_distance_at_k"
    )
    assert re.search(
        rf"{re.escape(str(path))}:{line}: metrics\[{index}\]\.lca_distance: must be one of "
        r"'lca_height', 'max_leaf_depth_minus_lca_depth'; got 'bertinetto'",
        message,
    ), message


def test_spec_refuses_the_distance_on_a_metric_without_one(tmp_path: Path) -> None:
    text = DEMO_TEXT.replace("    key: hp@2\n", "    key: hp@2\n    lca_distance: lca_height\n")
    with pytest.raises(SpecError, match=r"unknown key for metric 'hierarchical_precision_at_k'"):
        load_spec(_spec(tmp_path, text))


def test_no_shipped_spec_cites_bertinetto_so_no_default_changed() -> None:
    """Where a spec cites Making Better Mistakes, its distance metrics should say which distance
    they use; today none does, and none sets the parameter."""
    for path in itertools.chain(SPECS.glob("*.yaml"), SPECS.glob("*/*.yaml")):
        text = path.read_text()
        assert not re.search(r"bertinetto|better mistakes", text, re.IGNORECASE), path
        assert "lca_distance" not in text, path
    assert set(LCA_DISTANCES) == {HEIGHT, BERTINETTO}
