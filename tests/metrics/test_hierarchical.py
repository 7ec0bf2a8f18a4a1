"""Tests of harness.metrics.hierarchical: hand cases, plain-Python references, properties, errors.

The references below are written independently of the module: full Python BFS distances, the
k-th smallest valid distance as the hCorrectSet radius, ancestor sets by DFS and LCA heights as a
minimum over common ancestors.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import deque
from pathlib import Path
from random import Random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import checks
from harness.core.errors import HierarchyError, MetricError
from harness.hierarchy import Hierarchy
from harness.metrics.hierarchical import (
    RELATIONS,
    average_hierarchical_distance_at_k,
    hcorrect_radii,
    hierarchical_cost,
    hierarchical_precision_at_k,
    hierarchical_retrieval_precision_at_k,
    mistake_severity,
    per_class_hierarchical_precision_at_k,
    prediction_relations,
    ranked_from_scores,
)

SHARED_DATA = Path(os.environ.get("ZSL_SHARED_DATA", Path(__file__).parents[3] / "shared" / "data"))

# --- fixtures: a tree and a DAG with multiple parents ---------------------------------------------

# entity -> {animal, vehicle}; animal -> {dog, cat}; vehicle -> {car, bus}.
# Heights: leaves 0, animal/vehicle 1, entity 2.
TREE = Hierarchy(
    ["entity", "animal", "vehicle", "dog", "cat", "car", "bus"],
    [
        ("entity", "animal"),
        ("entity", "vehicle"),
        ("animal", "dog"),
        ("animal", "cat"),
        ("vehicle", "car"),
        ("vehicle", "bus"),
    ],
)
TREE_LEAVES = ["dog", "cat", "car", "bus"]

# The same kind of taxonomy plus a second parent "pet" of dog, hamster and cat:
#   entity -> animal, artifact, pet;  animal -> canine, rodent, feline;  artifact -> car
#   canine -> dog, wolf;  rodent -> hamster, rat;  feline -> cat;  pet -> dog, hamster, cat
# Heights: leaves 0; canine, rodent, feline, pet, artifact 1; animal 2; entity 3.
DAG_EDGES = [
    ("entity", "animal"),
    ("entity", "artifact"),
    ("entity", "pet"),
    ("animal", "canine"),
    ("animal", "rodent"),
    ("animal", "feline"),
    ("artifact", "car"),
    ("canine", "dog"),
    ("canine", "wolf"),
    ("rodent", "hamster"),
    ("rodent", "rat"),
    ("feline", "cat"),
    ("pet", "dog"),
    ("pet", "hamster"),
    ("pet", "cat"),
]
DAG_IDS = sorted({x for edge in DAG_EDGES for x in edge})
DAG = Hierarchy(DAG_IDS, DAG_EDGES)
# The tree reduction: drop the "pet" edges below pet.
DAG_AS_TREE = Hierarchy(DAG_IDS, [e for e in DAG_EDGES if e[0] != "pet"])
DAG_LEAVES = ["dog", "wolf", "hamster", "rat", "cat", "car"]


def nodes_of(h: Hierarchy, names: list[str]) -> np.ndarray:
    return h.indices(names)


# --- plain-Python references ----------------------------------------------------------------------


_NEIGHBOURS: dict[int, tuple[Hierarchy, list[list[int]]]] = {}


def neighbours(h: Hierarchy) -> list[list[int]]:
    """Undirected adjacency lists (memoized per live hierarchy object)."""
    if id(h) not in _NEIGHBOURS or _NEIGHBOURS[id(h)][0] is not h:
        out: list[list[int]] = [[] for _ in range(h.n_nodes)]
        for p, c in h.edges.tolist():
            out[p].append(c)
            out[c].append(p)
        _NEIGHBOURS[id(h)] = (h, out)
    return _NEIGHBOURS[id(h)][1]


def bfs(h: Hierarchy, source: int) -> dict[int, int]:
    adj = neighbours(h)
    dist = {source: 0}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def ref_hcorrect(
    h: Hierarchy, valid: set[int], t: int, k: int, dist: dict[int, int] | None = None
) -> tuple[int, set[int], bool]:
    """Radius, set and short flag: R_k = distance of the k-th nearest valid label."""
    dist = bfs(h, t) if dist is None else dist
    valid_distances = sorted(d for v, d in dist.items() if v in valid)
    short = len(valid_distances) < k
    radius = max(dist.values()) if short else valid_distances[k - 1]
    return radius, {v for v, d in dist.items() if v in valid and d <= radius}, short


def ref_hp(
    h: Hierarchy,
    valid: set[int],
    t: int,
    preds: list[int],
    k: int,
    dist: dict[int, int] | None = None,
) -> float:
    _, hset, _ = ref_hcorrect(h, valid, t, k, dist)
    return sum(p in hset for p in preds[:k]) / k


def ref_ancestors(h: Hierarchy, node: int) -> set[int]:
    parents: dict[int, list[int]] = {}
    for p, c in h.edges.tolist():
        parents.setdefault(c, []).append(p)
    seen = {node}
    stack = [node]
    while stack:
        u = stack.pop()
        for p in parents.get(u, []):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def ref_heights(h: Hierarchy) -> list[int]:
    children: dict[int, list[int]] = {}
    for p, c in h.edges.tolist():
        children.setdefault(p, []).append(c)
    memo: dict[int, int] = {}

    def height(u: int) -> int:
        if u not in memo:
            memo[u] = max((height(c) + 1 for c in children.get(u, [])), default=0)
        return memo[u]

    return [height(u) for u in range(h.n_nodes)]


def ref_root_height(h: Hierarchy) -> int:
    heights = ref_heights(h)
    has_parent = {c for _, c in h.edges.tolist()}
    return max(heights[u] for u in range(h.n_nodes) if u not in has_parent)


def ref_lca_distance(h: Hierarchy, a: int, b: int) -> int:
    heights = ref_heights(h)
    common = ref_ancestors(h, a) & ref_ancestors(h, b)
    return min(heights[u] for u in common) if common else ref_root_height(h) + 1


def ref_cost(h: Hierarchy, t: int, p: int) -> int:
    return 0 if t in ref_ancestors(h, p) else ref_lca_distance(h, t, p)


def ref_similarity(h: Hierarchy, a: int, b: int) -> float:
    return min(1.0, max(0.0, 1.0 - ref_lca_distance(h, a, b) / max(ref_root_height(h), 1)))


def ref_retrieval(h: Hierarchy, cand: list[int], t: int, preds: list[int], k: int) -> float:
    best = sorted((ref_similarity(h, t, c) for c in cand), reverse=True)[:k]
    ideal = sum(best)
    got = sum(ref_similarity(h, t, p) for p in preds[:k])
    return 1.0 if ideal == 0 else min(got / ideal, 1.0)


def ref_relation(h: Hierarchy, t: int, p: int) -> int:
    """0 correct, 1 ancestor, 2 descendant, 3 sibling (a parent in common), 4 unrelated: the
    first that holds, by sets of ancestors and of parents read off the edge list."""
    if t == p:
        return 0
    if p in ref_ancestors(h, t):
        return 1
    if t in ref_ancestors(h, p):
        return 2
    parents_of_t = {parent for parent, child in h.edges.tolist() if child == t}
    parents_of_p = {parent for parent, child in h.edges.tolist() if child == p}
    return 3 if parents_of_t & parents_of_p else 4


# --- random inputs --------------------------------------------------------------------------------


def random_dag(rng: Random, n: int, p: float, *, connected: bool = False) -> Hierarchy:
    """Nodes n00..; edges only from a lower to a higher index, so acyclic; many multi-parents."""
    ids = [f"n{i:02d}" for i in range(n)]
    edges = {(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p}
    if connected:
        edges |= {(rng.randrange(j), j) for j in range(1, n)}
    return Hierarchy(ids, [(ids[i], ids[j]) for i, j in sorted(edges)])


def random_problem(
    rng: Random, h: Hierarchy, n_images: int, n_ranked: int, n_candidates: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cand = np.array(rng.sample(range(h.n_nodes), n_candidates))
    y = np.array([rng.randrange(n_candidates) for _ in range(n_images)])
    ranked = np.array([rng.sample(range(n_candidates), n_ranked) for _ in range(n_images)])
    return cand, y, ranked.reshape(n_images, n_ranked)


@st.composite
def problems(draw: Any, *, tree_leaves: bool = False) -> tuple[Hierarchy, np.ndarray, Any, Any]:
    """A random DAG (or tree with leaf candidates), candidates, y_true and a ranking."""
    n = draw(st.integers(2, 9))
    ids = [f"n{i:02d}" for i in range(n)]
    if tree_leaves:
        parents = [draw(st.integers(0, j - 1)) for j in range(1, n)]
        edges = [(ids[p], ids[j]) for j, p in zip(range(1, n), parents, strict=True)]
    else:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n))
        edges = [(ids[i], ids[j]) for i, j in sorted(chosen)]
    h = Hierarchy(ids, edges)
    if tree_leaves:
        cand = h.leaves.copy()
    else:
        cand = np.array(draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True)))
    c = cand.size
    n_images = draw(st.integers(1, 6))
    n_ranked = draw(st.integers(1, c))
    y = draw(st.lists(st.integers(0, c - 1), min_size=n_images, max_size=n_images))
    ranked = [draw(st.permutations(range(c)))[:n_ranked] for _ in range(n_images)]
    return h, cand, np.array(y), np.array(ranked).reshape(n_images, n_ranked)


HYPOTHESIS = settings(max_examples=60, deadline=None)

# --- ranked_from_scores ---------------------------------------------------------------------------


def test_ranked_from_scores_ties_go_to_the_smaller_column() -> None:
    # Row 0: 0.9 at columns 1 and 2 -> 1 before 2; then 0.1 at columns 0 and 3 -> 0 takes rank 3.
    # Row 1: all equal -> columns in order.
    scores = np.array([[0.1, 0.9, 0.9, 0.1], [0.5, 0.5, 0.5, 0.5]])
    assert ranked_from_scores(scores, 3).tolist() == [[1, 2, 0], [0, 1, 2]]
    assert ranked_from_scores(scores, 4).tolist() == [[1, 2, 0, 3], [0, 1, 2, 3]]


def test_ranked_from_scores_matches_lexsort_on_tied_scores() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, (200, 9)).astype(np.float32)  # many ties
    for k in (1, 4, 9):
        expected = [sorted(range(9), key=lambda j, r=row: (-r[j], j))[:k] for row in scores]
        assert ranked_from_scores(scores, k).tolist() == expected


def test_ranked_from_scores_errors() -> None:
    with pytest.raises(
        MetricError, match=r"Expected `k` to be at most the number of candidates \(2\)"
    ):
        ranked_from_scores([[0.1, 0.2]], 3)
    with pytest.raises(MetricError, match=r"row 1 holds NaN"):
        ranked_from_scores([[0.1, 0.2], [np.nan, 0.0]], 1)


# --- hcorrect_radii -------------------------------------------------------------------------------


def test_hcorrect_radii_on_the_dag_with_multiple_parents() -> None:
    # From dog over the DAG: R0 {dog}=1 valid; R1 adds canine, pet (not valid) -> 1;
    # R2 adds wolf, hamster, cat (+ animal, entity) -> 4; R3 adds rodent, feline, artifact -> 4;
    # R4 adds rat, car -> 6. So k=1..7 -> radii 0,2,2,2,4,4 and k=7 is short (radius 4 = ecc).
    valid = nodes_of(DAG, DAG_LEAVES)
    result = hcorrect_radii(DAG, [DAG.index("dog")], valid_nodes=valid, ks=range(1, 8))
    assert result.radii.tolist() == [[0, 2, 2, 2, 4, 4, 4]]
    assert result.sizes.tolist() == [[1, 4, 4, 4, 6, 6, 6]]
    assert result.short.tolist() == [[False] * 6 + [True]]
    # In the tree reduction dog reaches only wolf at radius 2 (via canine): sizes 1, 2.
    tree = hcorrect_radii(DAG_AS_TREE, [DAG.index("dog")], valid_nodes=valid, ks=[1, 2, 3])
    assert tree.radii.tolist() == [[0, 2, 4]]
    assert tree.sizes.tolist() == [[1, 2, 5]]


def test_hcorrect_radii_repeated_sources_and_isolated_node() -> None:
    # "z" is isolated: only itself reachable -> short for k=2 with radius 0 (eccentricity).
    h = Hierarchy(["r", "a", "b", "z"], [("r", "a"), ("r", "b")])
    idx = h.indices(["a", "z", "a"])
    result = hcorrect_radii(h, idx, valid_nodes=h.indices(["a", "b", "z"]), ks=[2, 1])
    # a: k=2 -> radius 2 ({a, b}); k=1 -> 0. z: k=2 short (radius 0, size 1); k=1 -> 0.
    assert result.radii.tolist() == [[2, 0], [0, 0], [2, 0]]
    assert result.sizes.tolist() == [[2, 1], [1, 1], [2, 1]]
    assert result.short.tolist() == [[False, False], [True, False], [False, False]]


def test_hcorrect_radii_agree_with_python_bfs_on_random_dags() -> None:
    rng = Random(11)
    for trial in range(25):
        h = random_dag(rng, rng.randint(3, 14), rng.uniform(0.1, 0.5))
        valid = sorted(rng.sample(range(h.n_nodes), rng.randint(1, h.n_nodes)))
        ks = [1, 2, 3, 5, 8]
        sources = np.arange(h.n_nodes)
        result = hcorrect_radii(h, sources, valid_nodes=valid, ks=ks)
        for s in sources.tolist():
            for j, k in enumerate(ks):
                radius, hset, short = ref_hcorrect(h, set(valid), s, k)
                got = (result.radii[s, j], result.sizes[s, j], result.short[s, j])
                assert got == (radius, len(hset), short), (trial, s, k)


@HYPOTHESIS
@given(problems())
def test_hcorrect_radii_are_non_decreasing_in_k(problem: Any) -> None:
    h, cand, _, _ = problem
    result = hcorrect_radii(h, np.arange(h.n_nodes), valid_nodes=cand, ks=[1, 2, 3, 4, 6])
    assert (np.diff(result.radii, axis=1) >= 0).all()
    assert (np.diff(result.sizes, axis=1) >= 0).all()
    assert np.array_equal(result.short, result.sizes < np.array([1, 2, 3, 4, 6]))


def test_hcorrect_radii_errors() -> None:
    valid = nodes_of(TREE, TREE_LEAVES)
    with pytest.raises(
        MetricError, match=r"Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got dict"
    ):
        hcorrect_radii({}, [0], valid_nodes=valid, ks=[1])  # type: ignore[arg-type]
    with pytest.raises(
        MetricError, match=r"Expected `sources` to be a 1D integer array .* shape \(1, 1\)"
    ):
        hcorrect_radii(TREE, [[0]], valid_nodes=valid, ks=[1])
    with pytest.raises(
        MetricError,
        match=r"Expected `sources` to hold node indices in \[0, 7\), but got sources\[1\] = 7",
    ):
        hcorrect_radii(TREE, [0, 7], valid_nodes=valid, ks=[1])
    with pytest.raises(
        MetricError,
        match=r"Expected `valid_nodes` to hold distinct node indices, but valid_nodes\[2\] = 3 repeats valid_nodes\[0\]",
    ):
        hcorrect_radii(TREE, [0], valid_nodes=[3, 4, 3], ks=[1])
    with pytest.raises(
        MetricError, match=r"Expected `valid_nodes` to hold at least one node index"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=[], ks=[1])
    with pytest.raises(
        MetricError, match=r"Expected `valid_nodes` to list the valid-label nodes, but got None"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=None, ks=[1])
    with pytest.raises(
        MetricError, match=r"Expected `valid_nodes` to be a 1D integer array .* dtype float64"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=[1.0], ks=[1])
    with pytest.raises(MetricError, match=r"Expected `ks` to hold at least one k"):
        hcorrect_radii(TREE, [0], valid_nodes=valid, ks=[])
    with pytest.raises(
        MetricError, match=r"Expected `ks` to hold integers >= 1, but got ks\[1\] = 0"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=valid, ks=[1, 0])
    with pytest.raises(
        MetricError, match=r"Expected `ks` to hold integers >= 1, but got ks\[0\] = True"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=valid, ks=[True])
    with pytest.raises(
        MetricError, match=r"Expected `ks` to hold distinct values, but ks\[2\] = 2 repeats ks\[1\]"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=valid, ks=[1, 2, 2])
    with pytest.raises(
        MetricError, match=r"Expected `ks` to be a sequence of integers >= 1, but got 'ab'"
    ):
        hcorrect_radii(TREE, [0], valid_nodes=valid, ks="ab")  # type: ignore[arg-type]


# --- hop distances (the hierarchy's hop queries, on this module's DAGs) --------------------------


def test_hop_distance_to_targets_multi_parent_shortcut() -> None:
    # dog -> hamster: 2 hops via pet in the DAG, 4 via animal in the tree reduction.
    dog, hamster = DAG.index("dog"), DAG.index("hamster")
    assert DAG.hop_distance([dog], targets=[hamster]).tolist() == [[2.0]]
    assert DAG_AS_TREE.hop_distance([dog], targets=[hamster]).tolist() == [[4.0]]
    assert DAG_AS_TREE.hop_distance([dog], radius=3, targets=[hamster]).tolist() == [[np.inf]]
    assert DAG.hop_distance([], radius=3, targets=[hamster]).shape == (0, 1)


# --- hp@k -----------------------------------------------------------------------------------------


def test_hp_at_k_hand_computed_tree() -> None:
    # True dog. hCorrectSet_1 = {dog}; _2 = {dog, cat} (radius 2); _3 needs radius 4 -> all 4.
    # Image 0 ranks cat, dog, car: hp@1 = 0; hp@2 = 2/2; hp@3 = 3/3 (car at 4 <= 4).
    # Image 1 ranks dog, bus, cat: hp@1 = 1; hp@2 = 1/2 (bus at 4 > 2); hp@3 = 3/3.
    cand = nodes_of(TREE, TREE_LEAVES)
    result = hierarchical_precision_at_k(
        [0, 0], [[1, 0, 2], [0, 3, 1]], hierarchy=TREE, candidate_nodes=cand, ks=[1, 2, 3]
    )
    assert result.per_image.tolist() == [[0.0, 1.0, 1.0], [1.0, 0.5, 1.0]]
    assert result.values == {1: 0.5, 2: 0.75, 3: 1.0}
    assert result.mean_hcorrect_size == {1: 1.0, 2: 2.0, 3: 4.0}
    assert result.short_classes == {1: (), 2: (), 3: ()}
    assert (result.ks, result.n_images, result.n_ranked) == ((1, 2, 3), 2, 3)


def test_hp_at_k_multiple_parents_matter() -> None:
    # True dog ranks hamster, rat. DAG: hCorrectSet_2(dog) = {dog, wolf, hamster, cat} (radius 2)
    # -> hamster in, rat (4 hops) out: hp@2 = 1/2. Tree reduction: hCorrectSet_2 = {dog, wolf}
    # -> hp@2 = 0.
    cand = nodes_of(DAG, DAG_LEAVES)
    dag = hierarchical_precision_at_k([0], [[2, 3]], hierarchy=DAG, candidate_nodes=cand, ks=2)
    tree = hierarchical_precision_at_k(
        [0], [[2, 3]], hierarchy=DAG_AS_TREE, candidate_nodes=cand, ks=2
    )
    assert dag.values == {2: 0.5}
    assert dag.mean_hcorrect_size == {2: 4.0}
    assert tree.values == {2: 0.0}
    assert tree.mean_hcorrect_size == {2: 2.0}


def test_hp_at_k_with_fewer_ranked_columns_than_k_divides_by_k() -> None:
    # K = 1: hp@3 of a correct top-1 is 1/3 (the two missing predictions count as misses).
    cand = nodes_of(TREE, TREE_LEAVES)
    result = hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=cand, ks=[3])
    assert result.values == {3: pytest.approx(1 / 3)}


def test_hp_at_k_valid_nodes_superset_and_short_classes() -> None:
    # Valid = leaves + canine: from dog, canine (1 hop) is now valid -> hCorrectSet_2 = {dog,
    # canine} at radius 1; ranked wolf (2 hops) is outside: hp@2 = 1/2 (dog in top 2).
    cand = nodes_of(DAG, DAG_LEAVES)
    valid = nodes_of(DAG, [*DAG_LEAVES, "canine"])
    result = hierarchical_precision_at_k(
        [0], [[1, 0]], hierarchy=DAG, candidate_nodes=cand, ks=[2], valid_nodes=valid
    )
    assert result.per_image[0, 0] == 0.5
    assert result.mean_hcorrect_size == {2: 2.0}
    # An isolated candidate "ufo": only itself is reachable, so its set is short for k = 2 and
    # holds ufo alone; ranked ufo, dog -> hp@2 = 1/2. Dog's set is not short.
    h = Hierarchy([*DAG_IDS, "ufo"], DAG_EDGES)
    cand = nodes_of(h, [*DAG_LEAVES, "ufo"])
    result = hierarchical_precision_at_k(
        [6, 0], [[6, 0], [0, 6]], hierarchy=h, candidate_nodes=cand, ks=[1, 2]
    )
    assert result.short_classes == {1: (), 2: (6,)}
    assert result.per_image.tolist() == [[1.0, 0.5], [1.0, 0.5]]
    assert result.mean_hcorrect_size == {1: 1.0, 2: (1 + 4) / 2}


def test_hp_at_k_agrees_with_python_bfs_on_random_dags() -> None:
    rng = Random(2024)
    for trial in range(30):
        h = random_dag(rng, rng.randint(4, 16), rng.uniform(0.1, 0.45))
        n_candidates = rng.randint(2, h.n_nodes)
        cand, y, ranked = random_problem(rng, h, 12, rng.randint(1, n_candidates), n_candidates)
        extra = rng.sample(range(h.n_nodes), rng.randint(0, h.n_nodes))
        valid = sorted(set(cand.tolist()) | set(extra))
        ks = sorted(rng.sample(range(1, n_candidates + 1), min(3, n_candidates)))
        result = hierarchical_precision_at_k(
            y, ranked, hierarchy=h, candidate_nodes=cand, ks=ks, valid_nodes=valid
        )
        for i in range(y.size):
            for j, k in enumerate(ks):
                expected = ref_hp(h, set(valid), int(cand[y[i]]), cand[ranked[i]].tolist(), k)
                assert result.per_image[i, j] == expected, (trial, i, k)


def test_hp_at_k_streaming_chunks_reuse_the_cache() -> None:
    rng = Random(7)
    h = random_dag(rng, 30, 0.12, connected=True)
    cand, y, ranked = random_problem(rng, h, 200, 5, 20)
    kwargs: dict[str, Any] = {"hierarchy": h, "candidate_nodes": cand, "ks": [1, 2, 5]}
    whole = hierarchical_precision_at_k(y, ranked, **kwargs).per_image
    cache = h.hop_balls(cand, ks=[5, 2, 1])  # the balls hp@k used, kept with the hierarchy
    cached = cache.n_cached
    assert cached == np.unique(y).size  # one entry per distinct true node, computed once
    parts = [
        hierarchical_precision_at_k(y[s : s + 37], ranked[s : s + 37], **kwargs).per_image
        for s in range(0, 200, 37)
    ]
    assert cache.n_cached == cached
    assert np.array_equal(np.concatenate(parts), whole)


def test_hop_balls_incremental_and_lookup() -> None:
    h = Hierarchy.from_arrays(DAG.to_arrays())  # a fresh copy: no balls kept yet
    valid = nodes_of(h, DAG_LEAVES)
    cache = h.hop_balls(valid, ks=[2, 1])
    assert cache.ks == (1, 2)
    assert h.hop_balls(valid[::-1], ks=(1, 2)) is cache  # kept with the hierarchy
    dog, cat, rat, car = (h.index(x) for x in ("dog", "cat", "rat", "car"))
    # Largest ball of dog (k=2, radius 2) holds dog, wolf, hamster, cat: rat and car are outside.
    distances = cache.distances([dog, dog], [[dog, cat], [rat, car]])
    far = np.iinfo(np.int64).max
    assert distances.tolist() == [[0, 2], [far, far]]
    assert cache.n_cached == 1
    assert cache.radii([cat, dog]).radii.tolist() == [[0, 2], [0, 2]]
    assert cache.n_cached == 2
    with pytest.raises(
        HierarchyError, match=r"pred_nodes must have shape \(n,\) or \(n, K\) with n = 2"
    ):
        cache.distances([dog, dog], [dog, cat, rat])
    with pytest.raises(
        HierarchyError, match=r"pred_nodes holds 1 index\(es\) out of range 0\.\.12"
    ):
        cache.distances([dog], [99])
    for bad in ([], [1, 1], 0, [0, 2.5]):
        with pytest.raises(HierarchyError, match=r"ks must be distinct integers >= 1"):
            h.hop_balls(valid, ks=bad)  # type: ignore[arg-type]
    with pytest.raises(HierarchyError, match=r"valid_nodes must be distinct"):
        h.hop_balls([dog, dog], ks=1)


@HYPOTHESIS
@given(problems())
def test_hp_at_1_is_per_image_top_1_and_hp_is_bounded(problem: Any) -> None:
    h, cand, y, ranked = problem
    ks = list(range(1, cand.size + 1))
    result = hierarchical_precision_at_k(y, ranked, hierarchy=h, candidate_nodes=cand, ks=ks)
    assert np.array_equal(result.per_image[:, 0], (ranked[:, 0] == y).astype(float))
    assert ((result.per_image >= 0) & (result.per_image <= 1)).all()
    for k in ks:
        assert 0.0 <= result.values[k] <= 1.0
        assert result.mean_hcorrect_size[k] >= 1.0


@HYPOTHESIS
@given(st.integers(2, 12), st.floats(0.0, 0.4), st.integers(0, 10_000))
def test_hp_at_k_is_1_for_rankings_by_hop_distance_when_every_node_is_valid(
    n: int, p: float, seed: int
) -> None:
    # Connected hierarchy, every node a candidate (so valid): the k nearest nodes all lie within
    # R_k, so listing candidates by hop distance from the truth gives hp@k = 1 for every k.
    rng = Random(seed)
    h = random_dag(rng, n, p, connected=True)
    cand = np.arange(n)
    y = np.array([rng.randrange(n) for _ in range(4)])
    distances = h.hop_distance(y)
    ranked = np.array(
        [sorted(range(n), key=lambda v, d=d: (d[v], rng.random())) for d in distances]
    )
    result = hierarchical_precision_at_k(
        y, ranked, hierarchy=h, candidate_nodes=cand, ks=range(1, n + 1)
    )
    assert (result.per_image == 1.0).all()


def test_hp_at_k_errors() -> None:
    cand = nodes_of(TREE, TREE_LEAVES)
    kw: dict[str, Any] = {"hierarchy": TREE, "candidate_nodes": cand, "ks": [1]}
    with pytest.raises(
        MetricError,
        match=r"Expected `valid_nodes` to contain every candidate's node .* candidate_nodes\[1\] = ",
    ):
        hierarchical_precision_at_k([0], [[0]], **kw, valid_nodes=cand[[0, 2, 3]])
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to hold distinct candidate columns in each row, but row 1 repeats column 2",
    ):
        hierarchical_precision_at_k([0, 1], [[0, 1], [2, 2]], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to hold candidate columns in \[0, 4\), but row 0 holds 4 \(at rank 1\)",
    ):
        hierarchical_precision_at_k([0], [[0, 4]], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to be a 2D integer array .* shape \(2,\)\. Use `ranked.reshape\(-1, 1\)`",
    ):
        hierarchical_precision_at_k([0, 1], [0, 1], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to hold integer candidate columns, but got dtype float64",
    ):
        hierarchical_precision_at_k([0], [[0.0]], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to have one row per image in `y_true` \(2 images\), but got 1 rows",
    ):
        hierarchical_precision_at_k([0, 1], [[0]], **kw)
    with pytest.raises(MetricError, match=r"Expected `ranked` to hold at least one ranked column"):
        hierarchical_precision_at_k([0], np.zeros((1, 0), dtype=int), **kw)
    with pytest.raises(
        MetricError, match=r"Expected `k` to be at most the number of candidates \(4\), but got k=5"
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=cand, ks=[1, 5])
    with pytest.raises(
        MetricError, match=r"Expected `y_true` to hold candidate column indices in \[0, 4\)"
    ):
        hierarchical_precision_at_k([4], [[0]], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to hold distinct node indices, but candidate_nodes\[2\] = 3 repeats candidate_nodes\[0\]",
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=[3, 4, 3], ks=1)
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to be a 1D integer array of hierarchy node indices, but got None",
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=None, ks=1)  # type: ignore[arg-type]
    with pytest.raises(
        MetricError, match=r"Expected `candidate_nodes` to hold at least one node index, but got 0"
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=[], ks=1)
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to hold node indices in \[0, 7\), but got candidate_nodes\[0\] = 9",
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=TREE, candidate_nodes=[9], ks=1)
    with pytest.raises(
        MetricError,
        match=r"Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got NoneType",
    ):
        hierarchical_precision_at_k([0], [[0]], hierarchy=None, candidate_nodes=cand, ks=1)  # type: ignore[arg-type]


# --- per-class hp@k -------------------------------------------------------------------------------


def test_per_class_hp_at_k_hand_computed_differs_from_per_image() -> None:
    # hCorrectSet_2(dog) = {dog, cat}, hCorrectSet_2(car) = {car, bus} (radius 2 each).
    # Three dog images rank (cat, dog): 2/2; (dog, car): 1/2; (cat, bus): 1/2 -> class dog 2/3.
    # One car image ranks (dog, cat): 0/2 -> class car 0. Cat and bus have no image.
    # Per image (1 + 1/2 + 1/2 + 0) / 4 = 1/2; per class (2/3 + 0) / 2 = 1/3.
    cand = nodes_of(TREE, TREE_LEAVES)
    y, ranked = [0, 0, 0, 2], [[1, 0], [0, 2], [1, 3], [0, 1]]
    kw: dict[str, Any] = {"hierarchy": TREE, "candidate_nodes": cand, "ks": [1, 2]}
    per_image = hierarchical_precision_at_k(y, ranked, **kw)
    result = per_class_hierarchical_precision_at_k(y, ranked, **kw, classes=[0, 1, 2, 3])
    assert per_image.values == {1: 0.25, 2: 0.5}
    assert result.values == {1: pytest.approx(1 / 6), 2: pytest.approx(1 / 3)}
    assert result.per_class == {
        1: (pytest.approx(1 / 3), None, 0.0, None),
        2: (pytest.approx(2 / 3), None, 0.0, None),
    }
    assert result.excluded_classes == (1, 3)
    assert (result.classes, result.n_images, result.ks) == ((0, 1, 2, 3), 4, (1, 2))
    assert result.per_image.tolist() == per_image.per_image.tolist()
    # Averaging over listed classes only: car alone.
    only_car = per_class_hierarchical_precision_at_k(y, ranked, **kw, classes=[2])
    assert only_car.values == {1: 0.0, 2: 0.0}
    assert only_car.n_images == 1


def test_per_class_hp_at_k_equals_per_image_when_classes_are_balanced() -> None:
    rng = Random(11)
    h = random_dag(rng, 14, 0.25, connected=True)
    cand, _, _ = random_problem(rng, h, 1, 1, 6)
    y = np.repeat(np.arange(6), 3)  # three images per class
    ranked = np.array([rng.sample(range(6), 4) for _ in range(y.size)])
    kw: dict[str, Any] = {"hierarchy": h, "candidate_nodes": cand, "ks": [1, 3, 4]}
    per_class = per_class_hierarchical_precision_at_k(y, ranked, **kw, classes=np.arange(6))
    per_image = hierarchical_precision_at_k(y, ranked, **kw)
    for k in (1, 3, 4):
        assert per_class.values[k] == pytest.approx(per_image.values[k])


def test_per_class_hp_at_k_agrees_with_python_bfs_on_random_dags() -> None:
    """An independent per-class hp@k: Python BFS radii, images grouped by class in a dict."""
    rng = Random(2025)
    for trial in range(30):
        h = random_dag(rng, rng.randint(4, 16), rng.uniform(0.1, 0.45))
        n_candidates = rng.randint(2, h.n_nodes)
        # Class-imbalanced: image counts drawn from a skewed distribution.
        weights = [rng.random() ** 3 for _ in range(n_candidates)]
        y = np.array(rng.choices(range(n_candidates), weights=weights, k=15))
        n_ranked = rng.randint(1, n_candidates)
        cand = np.array(rng.sample(range(h.n_nodes), n_candidates))
        ranked = np.array([rng.sample(range(n_candidates), n_ranked) for _ in range(y.size)])
        classes = sorted(rng.sample(range(n_candidates), rng.randint(1, n_candidates)))
        if not set(classes) & set(y.tolist()):
            classes.append(int(y[0]))
        ks = sorted(rng.sample(range(1, n_candidates + 1), min(3, n_candidates)))
        result = per_class_hierarchical_precision_at_k(
            y, ranked, hierarchy=h, candidate_nodes=cand, ks=ks, classes=classes
        )
        valid = set(cand.tolist())
        for k in ks:
            by_class: dict[int, list[float]] = {}
            for i, t in enumerate(y.tolist()):
                if t in classes:
                    preds = cand[ranked[i]].tolist()
                    by_class.setdefault(t, []).append(ref_hp(h, valid, int(cand[t]), preds, k))
            means = {c: sum(v) / len(v) for c, v in by_class.items()}
            expected = sum(means.values()) / len(means)
            assert result.values[k] == pytest.approx(expected, abs=1e-12), (trial, k)
            assert result.per_class[k] == tuple(
                pytest.approx(means[c], abs=1e-12) if c in means else None for c in classes
            ), (trial, k)
        assert result.excluded_classes == tuple(c for c in classes if c not in set(y.tolist()))


def test_per_class_hp_at_k_errors() -> None:
    cand = nodes_of(TREE, TREE_LEAVES)
    kw: dict[str, Any] = {"hierarchy": TREE, "candidate_nodes": cand, "ks": [1]}
    with pytest.raises(
        MetricError,
        match=r"Expected at least one test image whose true class is among `classes` \(2 classes\)"
        r".* The mean of per-class hp@k is undefined",
    ):
        per_class_hierarchical_precision_at_k([0, 0], [[0], [1]], **kw, classes=[1, 3])
    with pytest.raises(MetricError, match=r"classes\[1\] = 0 repeats classes\[0\]"):
        per_class_hierarchical_precision_at_k([0], [[0]], **kw, classes=[0, 0])
    with pytest.raises(MetricError, match=r"Expected `y_true` to hold candidate column indices"):
        per_class_hierarchical_precision_at_k([4], [[0]], **kw, classes=[0])


# --- hierarchical cost, mistake severity, AHD@k ---------------------------------------------------


def test_hierarchical_cost_hand_computed_tree() -> None:
    # Heights: leaves 0, animal/vehicle 1, entity 2.
    # Class dog: images predicted dog (0) and cat (LCA animal: 1) -> 0.5. Class car: predicted
    # dog (LCA entity: 2) -> 2. Class cat: no image, excluded. Mean (0.5 + 2) / 2 = 1.25.
    cand = nodes_of(TREE, TREE_LEAVES)
    result = hierarchical_cost(
        [0, 0, 2], [0, 1, 0], hierarchy=TREE, candidate_nodes=cand, classes=[0, 1, 2]
    )
    assert result.value == 1.25
    assert result.per_class == (0.5, None, 2.0)
    assert result.excluded_classes == (1,)
    assert result.per_image.tolist() == [0, 1, 2]
    assert result.n_images == 3


def test_hierarchical_cost_internal_candidates_and_multiple_parents() -> None:
    # Candidates: dog, hamster, canine, animal, entity.
    # dog -> hamster: common ancestors pet (h 1), animal (2), entity (3) -> 1 (2 in the tree).
    # dog -> canine: an ancestor of dog -> cost = height(canine) = 1.
    # animal -> dog: a descendant of the truth -> 0. entity -> entity: correct -> 0.
    cand = nodes_of(DAG, ["dog", "hamster", "canine", "animal", "entity"])
    y, top1 = [0, 0, 3, 4], [1, 2, 0, 4]
    dag = hierarchical_cost(y, top1, hierarchy=DAG, candidate_nodes=cand, classes=[0, 3, 4])
    assert dag.per_image.tolist() == [1, 1, 0, 0]
    # class dog (1 + 1) / 2 = 1, animal 0, entity 0 -> mean 1/3.
    assert dag.value == pytest.approx(1 / 3)
    tree = hierarchical_cost(y, top1, hierarchy=DAG_AS_TREE, candidate_nodes=cand, classes=[0])
    assert tree.per_image.tolist() == [2, 1, 0, 0]
    assert tree.value == 1.5


def test_hierarchical_cost_disjoint_roots_cost_one_above_the_highest_root() -> None:
    # Roots r (height 1) and s (height 0): a and s share no ancestor -> H + 1 = 2.
    h = Hierarchy(["r", "a", "s"], [("r", "a")])
    cand = h.indices(["a", "s"])
    result = hierarchical_cost([0], [1], hierarchy=h, candidate_nodes=cand, classes=[0, 1])
    assert result.per_image.tolist() == [2]


@HYPOTHESIS
@given(problems(tree_leaves=True))
def test_hierarchical_cost_zero_iff_correct_on_trees_with_leaf_candidates(problem: Any) -> None:
    h, cand, y, ranked = problem
    result = hierarchical_cost(
        y, ranked, hierarchy=h, candidate_nodes=cand, classes=np.arange(cand.size)
    )
    correct = ranked[:, 0] == y
    assert (result.per_image[correct] == 0).all()
    assert (result.per_image[~correct] >= 1).all()


def test_cost_severity_and_ahd_agree_with_python_on_random_dags() -> None:
    rng = Random(99)
    for trial in range(20):
        h = random_dag(rng, rng.randint(3, 14), rng.uniform(0.1, 0.4))
        n_candidates = rng.randint(2, h.n_nodes)
        n_ranked = rng.randint(1, n_candidates)
        cand, y, ranked = random_problem(rng, h, 15, n_ranked, n_candidates)
        kw: dict[str, Any] = {"hierarchy": h, "candidate_nodes": cand}
        costs = [
            [ref_cost(h, int(cand[t]), int(cand[p])) for p in row]
            for t, row in zip(y, ranked, strict=True)
        ]
        top1 = [row[0] for row in costs]
        cost = hierarchical_cost(y, ranked, **kw, classes=np.arange(n_candidates))
        assert cost.per_image.tolist() == top1
        severity = mistake_severity(y, ranked[:, 0], **kw)
        mistakes = ranked[:, 0] != y
        expected = [c for c, m in zip(top1, mistakes, strict=True) if m]
        assert severity.n_mistakes == len(expected)
        assert severity.value == (
            pytest.approx(sum(expected) / len(expected)) if expected else None
        )
        ks = list(range(1, n_ranked + 1))
        ahd = average_hierarchical_distance_at_k(y, ranked, **kw, ks=ks)
        for j, k in enumerate(ks):
            want = [sum(row[:k]) / k for row in costs]
            np.testing.assert_allclose(ahd.per_image[:, j], want, err_msg=f"trial {trial}")


def test_mistake_severity_hand_computed_and_no_mistakes() -> None:
    # Image 0 correct; dog -> cat (1); car -> dog (2): (1 + 2) / 2 = 1.5.
    cand = nodes_of(TREE, TREE_LEAVES)
    result = mistake_severity(
        [0, 0, 2], [[0, 1], [1, 0], [0, 1]], hierarchy=TREE, candidate_nodes=cand
    )
    assert (result.value, result.n_mistakes, result.n_images) == (1.5, 2, 3)
    assert result.mistakes.tolist() == [False, True, True]
    perfect = mistake_severity([0, 1], [0, 1], hierarchy=TREE, candidate_nodes=cand)
    assert perfect.value is None and perfect.n_mistakes == 0


def test_average_hierarchical_distance_hand_computed_and_errors() -> None:
    # True dog ranked dog (0), cat (1), car (2), bus (2): AHD@1 = 0, @2 = 1/2, @4 = 5/4.
    cand = nodes_of(TREE, TREE_LEAVES)
    result = average_hierarchical_distance_at_k(
        [0], [[0, 1, 2, 3]], hierarchy=TREE, candidate_nodes=cand, ks=[1, 2, 4]
    )
    assert result.values == {1: 0.0, 2: 0.5, 4: 1.25}
    with pytest.raises(
        MetricError,
        match=r"Expected `ks` to be at most the number of ranked columns K \(2\), but got ks\[1\] = 3",
    ):
        average_hierarchical_distance_at_k(
            [0], [[0, 1]], hierarchy=TREE, candidate_nodes=cand, ks=[1, 3]
        )


def test_cost_errors() -> None:
    cand = nodes_of(TREE, TREE_LEAVES)
    kw: dict[str, Any] = {"hierarchy": TREE, "candidate_nodes": cand}
    with pytest.raises(
        MetricError,
        match=r"Expected at least one test image whose true class is among `classes` \(1 classes\)",
    ):
        hierarchical_cost([0], [0], **kw, classes=[3])
    with pytest.raises(
        MetricError,
        match=r"Expected `classes` to list the candidate columns to average over, but got None",
    ):
        hierarchical_cost([0], [0], **kw, classes=None)  # type: ignore[arg-type]
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked_top1` to be a 1D array of top-1 candidate columns .* shape \(1, 1, 1\)",
    ):
        mistake_severity([0], [[[0]]], **kw)
    with pytest.raises(
        MetricError,
        match=r"Expected `ranked` to have one row per image in `y_true` \(1 images\), but got 2 rows",
    ):
        prediction_relations([0], [0, 1], **kw)


# --- hierarchical retrieval precision -------------------------------------------------------------


def test_retrieval_precision_hand_computed_tree() -> None:
    # H = 2. S(dog, dog) = 1, S(dog, cat) = 1/2, S(dog, car) = S(dog, bus) = 0.
    # Ranked car, cat: k=1: 0/1 = 0; k=2: (0 + 1/2) / (1 + 1/2) = 1/3;
    # k=3 (K=2, the third prediction adds 0): (1/2) / (3/2) = 1/3.
    cand = nodes_of(TREE, TREE_LEAVES)
    result = hierarchical_retrieval_precision_at_k(
        [0], [[2, 1]], hierarchy=TREE, candidate_nodes=cand, ks=[1, 2, 3]
    )
    assert result.per_image[0].tolist() == pytest.approx([0.0, 1 / 3, 1 / 3])
    assert result.root_height == 2


def test_retrieval_precision_multiple_parents() -> None:
    # H = 3 (entity). True dog: S(hamster) = 1 - 1/3 (via pet) = 2/3, S(wolf) = 2/3,
    # S(cat) = 2/3, S(rat) = 1 - 2/3 = 1/3, S(car) = 0. Ranked rat, hamster: k=2:
    # (1/3 + 2/3) / (1 + 2/3) = 3/5.
    cand = nodes_of(DAG, DAG_LEAVES)
    result = hierarchical_retrieval_precision_at_k(
        [0], [[3, 2]], hierarchy=DAG, candidate_nodes=cand, ks=2
    )
    assert result.values == {2: pytest.approx(3 / 5)}


def test_retrieval_precision_without_edges_and_with_root_true_class() -> None:
    # No edges: H = 0, S(i, j) = [i == j]. Ranked [1, 0] for truth 0: k=1 -> 0, k=2 -> 1.
    h = Hierarchy(["a", "b"], [])
    result = hierarchical_retrieval_precision_at_k(
        [0], [[1, 0]], hierarchy=h, candidate_nodes=[0, 1], ks=[1, 2]
    )
    assert result.per_image.tolist() == [[0.0, 1.0]]
    # True class = the highest root: S = 0 for every candidate, so every ranking is ideal -> 1.
    r = TREE.index("entity")
    result = hierarchical_retrieval_precision_at_k(
        [0], [[1]], hierarchy=TREE, candidate_nodes=[r, TREE.index("dog")], ks=1
    )
    assert result.values == {1: 1.0}


def test_retrieval_precision_agrees_with_python_on_random_dags() -> None:
    rng = Random(31)
    for trial in range(20):
        h = random_dag(rng, rng.randint(3, 14), rng.uniform(0.1, 0.4))
        n_candidates = rng.randint(2, h.n_nodes)
        cand, y, ranked = random_problem(rng, h, 10, rng.randint(1, n_candidates), n_candidates)
        ks = list(range(1, n_candidates + 1))
        result = hierarchical_retrieval_precision_at_k(
            y, ranked, hierarchy=h, candidate_nodes=cand, ks=ks
        )
        for i in range(y.size):
            want = [
                ref_retrieval(h, cand.tolist(), int(cand[y[i]]), cand[ranked[i]].tolist(), k)
                for k in ks
            ]
            np.testing.assert_allclose(
                result.per_image[i], want, atol=1e-12, err_msg=f"trial {trial}"
            )


@HYPOTHESIS
@given(problems())
def test_retrieval_precision_bounded_and_1_for_the_ideal_ranking(problem: Any) -> None:
    h, cand, y, ranked = problem
    ks = list(range(1, cand.size + 1))
    kw: dict[str, Any] = {"hierarchy": h, "candidate_nodes": cand, "ks": ks}
    result = hierarchical_retrieval_precision_at_k(y, ranked, **kw)
    assert ((result.per_image >= 0) & (result.per_image <= 1)).all()
    similarity = [[ref_similarity(h, int(cand[t]), int(c)) for c in cand] for t in y]
    ideal = np.array([sorted(range(cand.size), key=lambda c, s=s: -s[c]) for s in similarity])
    best = hierarchical_retrieval_precision_at_k(y, ideal, **kw)
    np.testing.assert_allclose(best.per_image, 1.0)


# --- relation breakdown ---------------------------------------------------------------------------


def test_prediction_relations_hand_computed_dag() -> None:
    # True dog (parents canine and pet) predicted: dog (correct), pet (ancestor through the
    # second parent), canine (ancestor), wolf (sibling through canine), hamster (sibling through
    # pet only: dog's second parent), rat (a cousin under animal, not a sibling: unrelated), car
    # (unrelated); true animal predicted dog (descendant). Counts 1, 2, 1, 2, 2 of 8.
    cand = nodes_of(DAG, ["dog", "pet", "canine", "wolf", "animal", "hamster", "rat", "car"])
    y = [0, 0, 0, 0, 4, 0, 0, 0]
    top1 = [0, 1, 2, 3, 0, 5, 6, 7]
    result = prediction_relations(
        y, [[p, (p + 1) % 8] for p in top1], hierarchy=DAG, candidate_nodes=cand
    )
    assert result.counts == {
        "correct": 1,
        "ancestor": 2,
        "descendant": 1,
        "sibling": 2,
        "unrelated": 2,
    }
    shares = (result.correct, result.ancestor, result.descendant, result.sibling, result.unrelated)
    assert shares == (0.125, 0.25, 0.125, 0.25, 0.25)
    assert result.semantic_accuracy_lower == 0.125
    assert result.semantic_accuracy_upper == 0.5  # a sibling is a mistake
    assert result.per_image.tolist() == [0, 1, 1, 3, 2, 3, 4, 4]
    # In the tree reduction pet has no children: pet is neither dog's ancestor nor its sibling
    # (pet's parent is entity), and hamster is a cousin of dog; wolf stays a sibling.
    tree = prediction_relations(y, top1, hierarchy=DAG_AS_TREE, candidate_nodes=cand)
    assert tree.per_image.tolist() == [0, 4, 1, 3, 2, 4, 4, 4]


def test_prediction_relations_ancestry_takes_precedence_over_a_shared_parent() -> None:
    # entity -> animal, dog, car; animal -> dog. Dog's parents are animal and entity, so animal
    # is both dog's parent and its sibling (both under entity): ancestor (resp. descendant) wins.
    h = Hierarchy(
        ["entity", "animal", "dog", "car"],
        [("entity", "animal"), ("entity", "dog"), ("animal", "dog"), ("entity", "car")],
    )
    entity, animal, dog = h.index("entity"), h.index("animal"), h.index("dog")
    assert entity in h.parents(dog) and entity in h.parents(animal)  # they share a parent
    cand = h.indices(["dog", "animal", "car"])
    result = prediction_relations([0, 1, 0, 1], [1, 0, 2, 2], hierarchy=h, candidate_nodes=cand)
    # dog->animal ancestor, animal->dog descendant, dog->car and animal->car siblings (entity)
    assert result.per_image.tolist() == [1, 2, 3, 3]
    assert result.semantic_accuracy_upper == 0.5


@HYPOTHESIS
@given(problems())
def test_prediction_relations_shares_sum_to_1_and_match_python(problem: Any) -> None:
    h, cand, y, ranked = problem
    result = prediction_relations(y, ranked, hierarchy=h, candidate_nodes=cand)
    shares = [getattr(result, name) for name in RELATIONS]
    assert sum(shares) == pytest.approx(1.0)
    assert sum(result.counts.values()) == y.size
    expected = [
        ref_relation(h, int(cand[t]), int(cand[p])) for t, p in zip(y, ranked[:, 0], strict=True)
    ]
    assert result.per_image.tolist() == expected
    assert result.semantic_accuracy_lower <= result.semantic_accuracy_upper


def test_prediction_relations_match_python_across_row_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checks, "CHUNK_ELEMENTS", 16)  # two images per chunk
    rng = Random(29)
    seen: set[int] = set()
    for trial in range(25):
        h = random_dag(rng, rng.randint(2, 14), rng.uniform(0.1, 0.5))
        cand, y, ranked = random_problem(rng, h, 21, 1, rng.randint(1, h.n_nodes))
        result = prediction_relations(y, ranked, hierarchy=h, candidate_nodes=cand)
        expected = [
            ref_relation(h, int(cand[t]), int(cand[p]))
            for t, p in zip(y, ranked[:, 0], strict=True)
        ]
        assert result.per_image.tolist() == expected, f"trial {trial}"
        seen.update(expected)
    assert seen == set(range(len(RELATIONS)))  # every relation was met


# --- serialization and real data ------------------------------------------------------------------


def test_results_are_json_serializable_after_conversion() -> None:
    cand = nodes_of(TREE, TREE_LEAVES)
    y, ranked = [0, 2], [[0, 1], [3, 2]]
    kw: dict[str, Any] = {"hierarchy": TREE, "candidate_nodes": cand}
    results = [
        hierarchical_precision_at_k(y, ranked, **kw, ks=[1, 2]),
        hierarchical_cost(y, ranked, **kw, classes=[0, 1, 2, 3]),
        mistake_severity(y, ranked, **kw),
        average_hierarchical_distance_at_k(y, ranked, **kw, ks=[1, 2]),
        hierarchical_retrieval_precision_at_k(y, ranked, **kw, ks=[1, 2]),
        prediction_relations(y, ranked, **kw),
    ]
    for result in results:
        fields = dataclasses.asdict(result)
        plain = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in fields.items()}
        json.dumps(plain)


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED_DATA / "imagenet" / "wordnet.is_a.txt").is_file(),
    reason=f"shared ImageNet data not found under {SHARED_DATA} (set ZSL_SHARED_DATA)",
)
def test_hp_at_k_on_the_imagenet_hierarchy_agrees_with_python_bfs() -> None:
    folder = SHARED_DATA / "imagenet"
    edges = [
        tuple(line.split())
        for line in (folder / "wordnet.is_a.txt").read_text().splitlines()
        if line.strip()
    ]
    wnids = [w for w in (folder / "fall11_wnids.txt").read_text().split() if w]
    h = Hierarchy(sorted(set(wnids).union(*edges)), edges)
    cand = h.indices(wnids)
    rng = np.random.default_rng(0)
    y = rng.integers(0, cand.size, 60)
    ranked = np.stack([rng.choice(cand.size, 10, replace=False) for _ in range(60)])
    for i in range(20):  # the first 20 images are correct at rank 0
        row = [c for c in ranked[i].tolist() if c != y[i]]
        ranked[i] = [int(y[i]), *row[:9]]
    ks = [1, 2, 5, 10]
    result = hierarchical_precision_at_k(y, ranked, hierarchy=h, candidate_nodes=cand, ks=ks)
    valid = set(cand.tolist())
    for i in range(60):
        dist = bfs(h, int(cand[y[i]]))
        want = [ref_hp(h, valid, int(cand[y[i]]), cand[ranked[i]].tolist(), k, dist) for k in ks]
        assert result.per_image[i].tolist() == want
    assert result.values[1] == pytest.approx(np.mean(ranked[:, 0] == y))
