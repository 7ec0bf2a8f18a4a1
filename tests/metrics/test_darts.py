"""Tests of the DARTS modules: hand-computed DAG cases, the lambda search, properties, errors.

Temperature scaling and the Clopper-Pearson bound have their own tests (test_temperature.py,
test_binomial.py).

The hand-computed cases use a DAG in which "dog" has two parents ("pet" and "canine"), so any
node above both would count dog twice if posteriors were summed along paths instead of over the
leaf set. A plain-loop reference implementation (sets of leaves found by walking parents,
posteriors summed in Python, predictions by an explicit loop, Clopper-Pearson bounds from
``scipy.stats.binomtest``) checks the vectorized code on seeded random DAGs.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from harness import checks
from harness.core.errors import MetricError
from harness.hierarchy import Hierarchy
from harness.metrics import darts_posteriors
from harness.metrics.binomial import clopper_pearson_lower
from harness.metrics.darts import DEFAULT_TARGETS, darts_curve
from harness.metrics.darts_graph import DartsGraph, darts_graph
from harness.metrics.darts_posteriors import TopKPosteriors, darts_node_posteriors
from harness.metrics.darts_prediction import darts_per_image, darts_predict
from harness.metrics.darts_search import BISECTION_STEPS

# --- fixtures -----------------------------------------------------------------------------------

# animal -> mammal, fish; mammal -> pet, canine; pet -> cat, dog; canine -> dog, wolf.
# "dog" has two parents, and "mammal" reaches dog along two paths (via pet and via canine).
ZOO_IDS = ["animal", "mammal", "pet", "canine", "cat", "dog", "wolf", "fish"]
ZOO_EDGES = [
    ("animal", "mammal"),
    ("animal", "fish"),
    ("mammal", "pet"),
    ("mammal", "canine"),
    ("pet", "cat"),
    ("pet", "dog"),
    ("canine", "dog"),
    ("canine", "wolf"),
]
LEAVES = ["cat", "dog", "wolf", "fish"]

# Without "mammal": animal -> pet, canine, fish (every internal reward is a whole number).
FLAT_ZOO_EDGES = [
    ("animal", "pet"),
    ("animal", "canine"),
    ("animal", "fish"),
    ("pet", "cat"),
    ("pet", "dog"),
    ("canine", "dog"),
    ("canine", "wolf"),
]


def zoo() -> tuple[Hierarchy, np.ndarray]:
    h = Hierarchy(ZOO_IDS, ZOO_EDGES)
    return h, h.indices(LEAVES)


def flat_zoo() -> tuple[Hierarchy, np.ndarray]:
    h = Hierarchy([i for i in ZOO_IDS if i != "mammal"], FLAT_ZOO_EDGES)
    return h, h.indices(LEAVES)


def column(graph: DartsGraph, h: Hierarchy, node_id: str) -> int:
    return int(np.flatnonzero(graph.nodes == h.index(node_id))[0])


def two_leaves() -> tuple[Hierarchy, np.ndarray]:
    """Root r over leaves a and b: 1 bit per leaf, 0 for the root."""
    h = Hierarchy(["r", "a", "b"], [("r", "a"), ("r", "b")])
    return h, h.indices(["a", "b"])


# --- plain-loop reference -----------------------------------------------------------------------


def ref_leaf_sets(h: Hierarchy, candidate_nodes: list[int]) -> dict[int, set[int]]:
    """Node -> set of candidate positions below-or-at it, by walking up the parents."""
    leaves: dict[int, set[int]] = {}
    for position, node in enumerate(candidate_nodes):
        stack, seen = [node], {node}
        while stack:
            current = stack.pop()
            leaves.setdefault(current, set()).add(position)
            for parent in h.parents(current).tolist():
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
    return leaves


class Reference:
    """DARTS written with loops: columns, rewards, posteriors, prediction, search."""

    def __init__(self, h: Hierarchy, candidate_nodes: list[int]) -> None:
        sets = ref_leaf_sets(h, candidate_nodes)
        self.c = len(candidate_nodes)
        others = sorted(node for node in sets if node not in candidate_nodes)
        self.nodes = list(candidate_nodes) + others
        self.sets = [sets[node] for node in self.nodes]
        if not any(len(s) == self.c for s in self.sets):
            self.nodes.append(-1)
            self.sets.append(set(range(self.c)))
        self.rmax = math.log2(self.c)
        self.rewards = [self.rmax - math.log2(len(s)) for s in self.sets]

    def node_posteriors(self, row: list[float]) -> list[float]:
        total = sum(row)
        if total > 1:
            row = [p / total for p in row]
        out = []
        for s in self.sets:
            out.append(1.0 if len(s) == self.c else min(1.0, sum(row[j] for j in sorted(s))))
        return out

    def predict(self, node_p: list[float], lam: float) -> int:
        best = 0
        best_value = (self.rewards[0] + lam) * node_p[0]
        for v in range(1, len(self.nodes)):
            value = (self.rewards[v] + lam) * node_p[v]
            if value > best_value or (value == best_value and self.rewards[v] > self.rewards[best]):
                best, best_value = v, value
        return best

    def hits(self, node_ps: list[list[float]], y: list[int], lam: float) -> int:
        return sum(y[i] in self.sets[self.predict(p, lam)] for i, p in enumerate(node_ps))

    def search(
        self, node_ps: list[list[float]], y: list[int], needed: int, target: float
    ) -> float | None:
        if self.hits(node_ps, y, 0.0) >= needed:
            return 0.0
        eps = 1 - target
        low, high = 0.0, (self.rmax * (1 - eps) / eps if eps > 0 else self.rmax)
        while self.hits(node_ps, y, high) < needed:
            if high >= 2.0**60 * max(self.rmax, 1.0):
                return None
            low, high = high, 2 * high
        for _ in range(BISECTION_STEPS):
            middle = low + (high - low) / 2
            if self.hits(node_ps, y, middle) >= needed:
                high = middle
            else:
                low = middle
        return high

    def curve(
        self,
        vp: np.ndarray,
        vy: np.ndarray,
        tp: np.ndarray,
        ty: np.ndarray,
        targets: tuple[float, ...],
        confidence: float = 0.95,
    ) -> dict[str, Any]:
        v_nodes = [self.node_posteriors(list(row)) for row in vp]
        t_nodes = [self.node_posteriors(list(row)) for row in tp]
        n = len(vy)
        lows = [
            binomtest(k, n, alternative="greater").proportion_ci(confidence, method="exact").low
            for k in range(n + 1)
        ]
        points = []
        for target in targets:
            needed = next((k for k in range(n + 1) if lows[k] >= target), None)
            lam = None if needed is None else self.search(v_nodes, list(vy), needed, target)
            if lam is None:
                points.append({"target": target, "achieved": False})
                continue
            correct, gain, leaf, root = [], [], [], []
            for p, y in zip(t_nodes, ty, strict=True):
                v = self.predict(p, lam)
                ok = y in self.sets[v]
                correct.append(ok)
                gain.append(self.rewards[v] / self.rmax if ok else 0.0)
                leaf.append(v < self.c)
                root.append(len(self.sets[v]) == self.c)
            hits = self.hits(v_nodes, list(vy), lam)
            points.append(
                {
                    "target": target,
                    "achieved": True,
                    "lambda": lam,
                    "val_accuracy": hits / n,
                    "val_lower_bound": lows[hits],
                    "per_image_accuracy": sum(correct) / len(correct),
                    "per_image_info_gain": sum(gain) / len(gain),
                    "share_leaf": sum(leaf) / len(leaf),
                    "share_root": sum(root) / len(root),
                }
            )
        xy = sorted(
            (p["per_image_accuracy"], p["per_image_info_gain"]) for p in points if p["achieved"]
        )
        # Step envelope: the best gain reached with an accuracy of at least x, integrated over x.
        area, previous = 0.0, 0.0
        for i, (x, _) in enumerate(xy):
            area += (x - previous) * max(y for _, y in xy[i:])
            previous = x
        return {"points": points, "area": area}


def random_dag(
    rng: np.random.Generator, n_internal: int, n_leaves: int
) -> tuple[Hierarchy, np.ndarray]:
    """Internal nodes i0.. (each with 0-2 earlier internal parents), leaves with 1-3 parents."""
    ids = [f"i{k:02d}" for k in range(n_internal)] + [f"l{k:02d}" for k in range(n_leaves)]
    edges = set()
    for k in range(1, n_internal):
        for p in rng.choice(k, size=int(rng.integers(0, min(k, 2) + 1)), replace=False):
            edges.add((ids[int(p)], ids[k]))
    for k in range(n_leaves):
        size = int(rng.integers(1, min(n_internal, 3) + 1))
        for p in rng.choice(n_internal, size=size, replace=False):
            edges.add((ids[int(p)], ids[n_internal + k]))
    h = Hierarchy(ids, sorted(edges))
    order = rng.permutation(n_leaves)
    return h, h.indices([ids[n_internal + int(k)] for k in order])


def random_posteriors(rng: np.random.Generator, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Dirichlet posteriors that favour the true class (so accuracies spread over (0, 1))."""
    y = rng.integers(0, c, n)
    alpha = np.full((n, c), 0.5)
    alpha[np.arange(n), y] += 1.5 * rng.random(n)
    return rng.dirichlet(np.ones(c), size=n) * 0.3 + 0.7 * np.array(
        [rng.dirichlet(a) for a in alpha]
    ), y


# --- graph, rewards, posteriors -----------------------------------------------------------------


def test_darts_graph_columns_leaf_counts_and_rewards() -> None:
    h, candidates = zoo()
    graph = darts_graph(h, candidates)
    # Columns: the candidates in candidate order, then the other nodes by node index
    # (node ids sort as animal, canine, cat, dog, fish, mammal, pet, wolf).
    assert h.node_ids[graph.nodes].tolist() == [
        "cat",
        "dog",
        "wolf",
        "fish",
        "animal",
        "canine",
        "mammal",
        "pet",
    ]
    # Leaf sets: animal {cat,dog,wolf,fish} = 4, canine {dog,wolf} = 2, mammal {cat,dog,wolf} = 3
    # (dog once, although two paths lead from dog to mammal), pet {cat,dog} = 2.
    assert graph.n_leaves.tolist() == [1, 1, 1, 1, 4, 2, 3, 2]
    # r = log2 4 - log2 n: leaves 2, animal 0, canine and pet 1, mammal 2 - log2 3 ~ 0.415.
    np.testing.assert_allclose(graph.rewards, [2, 2, 2, 2, 0, 1, 2 - math.log2(3), 1])
    assert graph.rewards[:4].tolist() == [2.0] * 4 and graph.rewards[4] == 0.0  # exact
    assert graph.is_leaf.tolist() == [True] * 4 + [False] * 4
    assert graph.is_root.tolist() == [False] * 4 + [True, False, False, False]
    assert graph.n_candidates == 4 and graph.n_columns == 8 and graph.max_reward == 2.0
    # leaf_matrix row "dog" marks dog, animal, canine, mammal, pet.
    assert graph.leaf_matrix.toarray()[1].tolist() == [0, 1, 0, 0, 1, 1, 1, 1]


def test_darts_node_posteriors_multi_parent_node_is_not_double_counted() -> None:
    h, candidates = zoo()
    graph = darts_graph(h, candidates)
    p = [[0.125, 0.375, 0.25, 0.25]]  # cat, dog, wolf, fish
    nodes = darts_node_posteriors(p, graph)[0]
    # mammal = cat + dog + wolf = 0.125 + 0.375 + 0.25 = 0.75. Summing over paths would give
    # pet + canine = 0.5 + 0.625 = 1.125 (dog twice); animal = 1 (not mammal-paths + fish = 1.375).
    assert nodes[column(graph, h, "mammal")] == 0.75
    assert nodes[column(graph, h, "pet")] == 0.5
    assert nodes[column(graph, h, "canine")] == 0.625
    assert nodes[column(graph, h, "animal")] == 1.0
    assert nodes[:4].tolist() == p[0]


def test_darts_graph_virtual_root_when_no_node_covers_every_candidate() -> None:
    # Two trees: A -> a1, a2 and B -> b1. Nothing covers all three leaves.
    h = Hierarchy(["A", "B", "a1", "a2", "b1"], [("A", "a1"), ("A", "a2"), ("B", "b1")])
    graph = darts_graph(h, h.indices(["a1", "a2", "b1"]))
    assert graph.nodes[-1] == -1 and graph.is_root.tolist() == [False] * 5 + [True]
    # r = log2 3 - log2 n: A covers 2 -> log2 3 - 1; B covers only b1 -> the same as a leaf.
    np.testing.assert_allclose(
        graph.rewards, [math.log2(3)] * 3 + [math.log2(3) - 1, math.log2(3), 0]
    )
    nodes = darts_node_posteriors([[0.5, 0.25, 0.25]], graph)[0]
    assert nodes.tolist() == [0.5, 0.25, 0.25, 0.75, 0.25, 1.0]
    # b1 (column 2) and B (column 4) tie on value and reward; the candidate leaf (smaller column)
    # wins, so the prediction counts as a leaf. At a large lambda the virtual root wins.
    assert darts_predict([[0.0, 0.0, 1.0, 0.0, 1.0, 1.0]], graph.rewards, 0.0).tolist() == [2]
    assert darts_predict([nodes], graph.rewards, 100.0).tolist() == [5]


def test_darts_graph_every_node_above_all_leaves_is_a_root() -> None:
    # entity -> animal -> {a, b}: both entity and animal cover every candidate.
    h = Hierarchy(
        ["entity", "animal", "a", "b"], [("entity", "animal"), ("animal", "a"), ("animal", "b")]
    )
    graph = darts_graph(h, h.indices(["a", "b"]))
    assert graph.is_root.tolist() == [False, False, True, True]
    nodes = darts_node_posteriors([[0.5, 0.5]], graph)
    assert nodes.tolist() == [[0.5, 0.5, 1.0, 1.0]]
    # At lambda = 5 both roots score 5 > 6 * 0.5; the smaller column (animal, index 0) wins.
    assert graph.nodes[darts_predict(nodes, graph.rewards, 5.0)].tolist() == [h.index("animal")]
    _, gain = darts_per_image(
        [[0.5, 0.5]], [0], 5.0, hierarchy=h, candidate_nodes=h.indices(["a", "b"])
    )
    assert gain.tolist() == [0.0]


# --- prediction ---------------------------------------------------------------------------------


def test_darts_predict_hand_computed_path_from_leaf_to_root() -> None:
    h, candidates = flat_zoo()
    graph = darts_graph(h, candidates)  # columns cat, dog, wolf, fish, animal, canine, pet
    nodes = darts_node_posteriors([[0.125, 0.375, 0.25, 0.25]], graph)
    assert nodes.tolist() == [[0.125, 0.375, 0.25, 0.25, 1.0, 0.625, 0.5]]

    def predicted(lam: float) -> str:
        return str(h.node_ids[graph.nodes[darts_predict(nodes, graph.rewards, lam)[0]]])

    # lambda = 0: r * p = cat .25, dog .75, wolf .5, fish .5, animal 0, canine .625, pet .5.
    assert predicted(0.0) == "dog"
    # lambda = 0.5: dog 2.5 * .375 = .9375 = canine 1.5 * .625 (exact tie) -> fewer leaves: dog.
    assert predicted(0.5) == "dog"
    # lambda = 1: dog 3 * .375 = 1.125, canine 2 * .625 = 1.25, pet 1, animal 1 -> canine.
    assert predicted(1.0) == "canine"
    # canine vs root: .625 (1 + lambda) = lambda at lambda = 5/3. lambda = 2: canine 1.875 < 2.
    assert predicted(2.0) == "animal"


def test_darts_predict_ties_prefer_fewer_leaves_then_smaller_column() -> None:
    h, candidates = flat_zoo()
    graph = darts_graph(h, candidates)
    nodes = darts_node_posteriors([[0.25, 0.25, 0.25, 0.25]], graph)
    # lambda = 0: every leaf 2 * .25 = .5 ties pet and canine 1 * .5 -> leaves (fewer leaves),
    # then the smallest column: cat (column 0).
    assert darts_predict(nodes, graph.rewards, 0.0).tolist() == [0]
    # lambda = 1: leaves 3 * .25 = .75; canine = pet = 2 * .5 = 1 = root 1 * 1 -> two-leaf nodes
    # before the root, then the smaller column: canine (column 5) before pet (column 6).
    assert darts_predict(nodes, graph.rewards, 1.0).tolist() == [5]


def test_darts_per_image_root_prediction_is_correct_with_zero_gain() -> None:
    h, candidates = flat_zoo()
    p = [[0.125, 0.375, 0.25, 0.25]] * 3
    y = [1, 0, 3]  # dog, cat, fish
    # lambda = 0: dog predicted -> right for dog (gain 2/2 = 1), wrong for cat and fish.
    correct, gain = darts_per_image(p, y, 0.0, hierarchy=h, candidate_nodes=candidates)
    assert correct.tolist() == [True, False, False] and gain.tolist() == [1.0, 0.0, 0.0]
    # lambda = 1: canine (r = 1, 1/2 normalised) -> right for dog only.
    correct, gain = darts_per_image(p, y, 1.0, hierarchy=h, candidate_nodes=candidates)
    assert correct.tolist() == [True, False, False] and gain.tolist() == [0.5, 0.0, 0.0]
    # lambda = 2: the root -> right for everyone, no information.
    correct, gain = darts_per_image(p, y, 2.0, hierarchy=h, candidate_nodes=candidates)
    assert correct.tolist() == [True, True, True] and gain.tolist() == [0.0, 0.0, 0.0]


def test_darts_per_image_empirical_accuracy_is_not_monotone_in_lambda() -> None:
    # A tree: root -> A, B; A -> a, b; B -> c, d, e. |Y| = 5, r_leaf = log2 5 ~ 2.322,
    # r_A = log2 5 - 1 ~ 1.322, r_B = log2 5 - log2 3 ~ 0.737, r_root = 0.
    h = Hierarchy(
        ["root", "A", "B", "a", "b", "c", "d", "e"],
        [("root", "A"), ("root", "B"), ("A", "a"), ("A", "b"), ("B", "c"), ("B", "d"), ("B", "e")],
    )
    candidates = h.indices(["a", "b", "c", "d", "e"])
    p = [[0.3, 0.0, 0.7 / 3, 0.7 / 3, 0.7 / 3]]  # true class a; p_A = 0.3, p_B = 0.7
    graph = darts_graph(h, candidates)
    nodes = darts_node_posteriors(p, graph)
    # lambda = 0: a 2.322 * .3 = .697 beats B .737 * .7 = .516 -> a, correct.
    # lambda = .5: a 2.822 * .3 = .847 < B 1.237 * .7 = .866 (root .5) -> B, wrong.
    # lambda = 3: root 3 > B 3.737 * .7 = 2.616 > a 5.322 * .3 = 1.597 -> root, correct.
    correct = [
        darts_per_image(p, [0], lam, hierarchy=h, candidate_nodes=candidates)[0][0]
        for lam in (0.0, 0.5, 3.0)
    ]
    assert correct == [True, False, True]
    # What is monotone: the posterior of the prediction (.3, .7, 1) and its reward (down).
    chosen = [int(darts_predict(nodes, graph.rewards, lam)[0]) for lam in (0.0, 0.5, 3.0)]
    assert nodes[0, chosen].tolist() == pytest.approx([0.3, 0.7, 1.0])
    assert graph.rewards[chosen].tolist() == sorted(graph.rewards[chosen].tolist(), reverse=True)


def test_topk_missing_mass_goes_to_the_root_only() -> None:
    h, candidates = flat_zoo()
    graph = darts_graph(h, candidates)
    # Only dog = 0.5 is known: pet and canine get 0.5 (dog only), the root 1, the rest 0.
    nodes = darts_node_posteriors(TopKPosteriors([[1]], [[0.5]]), graph)
    assert nodes.tolist() == [[0.0, 0.5, 0.0, 0.0, 1.0, 0.5, 0.5]]
    # The same row dense (unknown mass spread over the other leaves) has more on pet/canine.
    dense = darts_node_posteriors([[0.25, 0.5, 0.125, 0.125]], graph)
    assert dense.tolist() == [[0.25, 0.5, 0.125, 0.125, 1.0, 0.625, 0.75]]


def test_posteriors_summing_slightly_above_one_are_scaled_down() -> None:
    h, candidates = two_leaves()
    graph = darts_graph(h, candidates)
    nodes = darts_node_posteriors([[0.50004, 0.50004]], graph)
    assert nodes[0, :2].tolist() == [0.5, 0.5] and nodes[0, 2] == 1.0


# --- Clopper-Pearson ----------------------------------------------------------------------------


# --- the curve ----------------------------------------------------------------------------------

# Validation for the two-leaf tree (1 bit per leaf): 8 images of a at p = (.75, .25), right at
# the leaf until the root wins at lambda > .75 / .25 = 3; 2 images of b at p = (.625, .375),
# predicted a (wrong) until the root wins at lambda > .625 / .375 = 5/3.
VAL_P = [[0.75, 0.25]] * 8 + [[0.625, 0.375]] * 2
VAL_Y = [0] * 8 + [1] * 2
# hits(lambda) = 8 for lambda <= 5/3, 10 above. Clopper-Pearson lower bounds (95%, n = 10):
# 7 -> 0.3934, 8 -> 0.4931, 9 -> 0.6058, 10 -> 0.05 ** 0.1 = 0.7411.
TEST_P = [[0.75, 0.25], [0.75, 0.25], [0.625, 0.375], [0.25, 0.75]]
TEST_Y = [0, 0, 1, 1]


def test_darts_curve_hand_computed() -> None:
    h, candidates = two_leaves()
    curve = darts_curve(
        VAL_P,
        VAL_Y,
        TEST_P,
        TEST_Y,
        hierarchy=h,
        candidate_nodes=candidates,
        targets=[0.0, 0.4, 0.7, 0.8, 0.9],
    )
    zero, forty, seventy, eighty, ninety = curve.points
    # Targets 0 and .4 need 0 and 8 hits: met at lambda = 0. Test: a, a, a (wrong), b -> 3/4,
    # every correct answer a leaf (gain 1): gain 3/4. Per class: a 2/2, b 1/2 -> 3/4.
    for point in (zero, forty):
        assert point.lam == 0.0 and point.val_accuracy == 0.8
        assert point.val_lower_bound == pytest.approx(0.493099, abs=1e-6)
        assert (point.per_image_accuracy, point.per_image_info_gain) == (0.75, 0.75)
        assert (point.per_class_accuracy, point.per_class_info_gain) == (0.75, 0.75)
        assert (point.share_leaf, point.share_internal, point.share_root) == (
            1.0,
            0.0,
            0.0,
        )
    # Target .7 needs all 10: lambda-bar = (1 * .7 - 0) / .3 = 7/3 already works (10 hits);
    # bisection on [0, 7/3] ends just above 5/3.
    assert 5 / 3 < seventy.lam <= 5 / 3 + (7 / 3) * 2.0**-BISECTION_STEPS * 2
    assert seventy.val_accuracy == 1.0 and seventy.val_lower_bound == pytest.approx(0.05**0.1)
    # Test at lambda ~ 5/3: images 0, 1 a ((1 + l) .75 = 2 > l), image 2 the root (correct, gain 0),
    # image 3 b: accuracy 1, gain 3/4; per class a 1 | 1, b 1 | (0 + 1) / 2 -> 1 and 3/4.
    assert (seventy.per_image_accuracy, seventy.per_image_info_gain) == (1.0, 0.75)
    assert (seventy.per_class_accuracy, seventy.per_class_info_gain) == (1.0, 0.75)
    assert (seventy.share_leaf, seventy.share_internal, seventy.share_root) == (
        0.75,
        0.0,
        0.25,
    )
    # .8 and .9 exceed 0.7411, the best the bound can give with 10 images: not achieved.
    for point in (eighty, ninety):
        assert point.achieved is False and point.lam is None and point.per_image_accuracy is None
    # Area: points (.75, .75), (.75, .75), (1, .75): the best gain at accuracy >= x is .75 for
    # every x in [0, 1] -> .75 * .75 + 0 + .25 * .75 = .75.
    assert curve.area == pytest.approx(0.75)
    assert curve.reward_at_90 is None
    assert (curve.n_val, curve.n_test, curve.n_candidates, curve.n_nodes) == (
        10,
        4,
        2,
        3,
    )
    assert curve.excluded_classes == () and curve.max_reward_bits == 1.0


def test_darts_curve_doubles_lambda_bar_for_overconfident_posteriors() -> None:
    h, candidates = two_leaves()
    # Now the 2 wrong images also sit at p = (.75, .25): the root only wins above lambda = 3,
    # beyond lambda-bar = 7/3 for target .7 (the model is overconfident). Doubling to 14/3 holds;
    # bisection on [7/3, 14/3] ends just above 3.
    val_p = [[0.75, 0.25]] * 10
    curve = darts_curve(
        val_p, VAL_Y, TEST_P, TEST_Y, hierarchy=h, candidate_nodes=candidates, targets=[0.7]
    )
    lam = curve.points[0].lam
    assert 3.0 < lam <= 3.0 + (7 / 3) * 2.0**-BISECTION_STEPS * 2
    assert curve.points[0].val_accuracy == 1.0


def test_darts_curve_target_one_is_never_achieved() -> None:
    h, candidates = two_leaves()
    curve = darts_curve(
        VAL_P, VAL_Y, TEST_P, TEST_Y, hierarchy=h, candidate_nodes=candidates, targets=[1.0, 0.0]
    )
    assert [p.achieved for p in curve.points] == [False, True]
    point = curve.points[1]  # one achieved point: a rectangle from accuracy 0
    assert curve.area == pytest.approx(point.per_image_accuracy * point.per_image_info_gain)


def test_darts_curve_unreachable_when_a_wrong_node_holds_all_the_mass() -> None:
    h, candidates = two_leaves()
    # Validation image of b with p_a = 1 exactly: a beats the root (1 + l > l) for every lambda.
    curve = darts_curve(
        [[1.0, 0.0]] * 10,
        [0] * 9 + [1],
        TEST_P,
        TEST_Y,
        hierarchy=h,
        candidate_nodes=candidates,
        targets=[0.7],
    )
    assert curve.points[0].achieved is False


def test_darts_curve_reward_at_90_and_excluded_classes() -> None:
    rng = np.random.default_rng(3)
    h, candidates = random_dag(rng, 5, 6)
    vp, vy = random_posteriors(rng, 400, 6)
    tp, ty = random_posteriors(rng, 50, 6)
    ty[ty == 2] = 3  # class 2 has no test image
    curve = darts_curve(vp, vy, tp, ty, hierarchy=h, candidate_nodes=candidates)
    at_90 = curve.points[DEFAULT_TARGETS.index(0.9)]
    assert at_90.achieved and curve.reward_at_90 == at_90.per_image_info_gain
    assert curve.excluded_classes == (2,)
    json.dumps(asdict(curve), allow_nan=False)  # plain Python values throughout


@pytest.mark.parametrize("seed", range(8))
def test_darts_curve_matches_plain_loop_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, candidates = random_dag(rng, int(rng.integers(2, 7)), int(rng.integers(2, 7)))
    c = candidates.shape[0]
    vp, vy = random_posteriors(rng, int(rng.integers(20, 60)), c)
    tp, ty = random_posteriors(rng, 25, c)
    ref = Reference(h, candidates.tolist())
    expected = ref.curve(vp, vy, tp, ty, DEFAULT_TARGETS)
    got = darts_curve(vp, vy, tp, ty, hierarchy=h, candidate_nodes=candidates)
    assert got.n_nodes == len(ref.nodes)
    assert got.area == pytest.approx(expected["area"], abs=1e-12)
    for mine, theirs in zip(got.points, expected["points"], strict=True):
        assert mine.achieved == theirs["achieved"], mine.target
        for key, value in theirs.items():
            assert getattr(mine, "lam" if key == "lambda" else key) == (
                pytest.approx(value, rel=1e-9, abs=1e-12) if isinstance(value, float) else value
            ), key


@pytest.mark.parametrize("seed", range(3))
def test_darts_curve_same_result_in_tiny_chunks_and_with_a_sparse_leaf_matrix(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    h, candidates = random_dag(rng, 6, 7)
    vp, vy = random_posteriors(rng, 80, 7)
    tp, ty = random_posteriors(rng, 30, 7)
    expected = darts_curve(vp, vy, tp, ty, hierarchy=h, candidate_nodes=candidates)
    monkeypatch.setattr(checks, "CHUNK_ELEMENTS", 16)  # a couple of rows per chunk
    monkeypatch.setattr(darts_posteriors, "_DENSE_LEAF_MATRIX_LIMIT", 0)  # scipy sparse product
    got = darts_curve(vp, vy, tp, ty, hierarchy=h, candidate_nodes=candidates)
    for mine, theirs in zip(got.points, expected.points, strict=True):
        assert asdict(mine) == {
            k: pytest.approx(v, rel=1e-9) if isinstance(v, float) else v
            for k, v in asdict(theirs).items()
        }
    correct, gain = darts_per_image(tp, ty, 1.7, hierarchy=h, candidate_nodes=candidates)
    monkeypatch.undo()
    correct_0, gain_0 = darts_per_image(tp, ty, 1.7, hierarchy=h, candidate_nodes=candidates)
    assert correct.tolist() == correct_0.tolist()
    np.testing.assert_allclose(gain, gain_0)


def test_darts_curve_large_lambda_and_every_default_target_on_awa2_like_sizes() -> None:
    rng = np.random.default_rng(11)
    h, candidates = random_dag(rng, 20, 50)
    vp, vy = random_posteriors(rng, 3000, 50)
    tp, ty = random_posteriors(rng, 2000, 50)
    curve = darts_curve(vp, vy, tp, ty, hierarchy=h, candidate_nodes=candidates)
    achieved = [p for p in curve.points if p.achieved]
    assert len(achieved) == len(DEFAULT_TARGETS)
    for point in achieved:
        assert point.val_lower_bound >= point.target
    assert 0.0 < curve.area < 1.0


# --- properties on random DAGs ------------------------------------------------------------------


@st.composite
def dag_problems(draw: st.DrawFn) -> tuple[Hierarchy, np.ndarray, np.ndarray, np.ndarray]:
    """A random DAG (multiple parents and several roots allowed), leaves as candidates, and
    posteriors from small integer weights (so exact ties between nodes happen)."""
    n_internal = draw(st.integers(1, 4))
    n_leaves = draw(st.integers(2, 5))
    ids = [f"i{k}" for k in range(n_internal)] + [f"l{k}" for k in range(n_leaves)]
    edges = set()
    for k in range(1, n_internal):
        for p in draw(st.lists(st.integers(0, k - 1), max_size=2, unique=True)):
            edges.add((ids[p], ids[k]))
    for k in range(n_leaves):
        for p in draw(st.lists(st.integers(0, n_internal - 1), max_size=3, unique=True)):
            edges.add((ids[p], ids[n_internal + k]))
    h = Hierarchy(ids, sorted(edges))
    order = draw(st.permutations(range(n_leaves)))
    candidates = h.indices([ids[n_internal + k] for k in order])
    n = draw(st.integers(1, 6))
    weights = np.array(
        draw(
            st.lists(
                st.lists(st.integers(0, 6), min_size=n_leaves, max_size=n_leaves),
                min_size=n,
                max_size=n,
            )
        ),
        dtype=float,
    )
    weights[weights.sum(axis=1) == 0, 0] = 1.0
    y = np.array(draw(st.lists(st.integers(0, n_leaves - 1), min_size=n, max_size=n)))
    return h, candidates, weights / weights.sum(axis=1, keepdims=True), y


lambdas = st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=2, max_size=6).map(sorted)


@settings(max_examples=150, deadline=None)
@given(dag_problems(), lambdas)
def test_prediction_posterior_rises_and_reward_falls_with_lambda(
    problem: Any, lams: list[float]
) -> None:
    # The per-image monotonicity that does hold (module docstring): for l1 < l2,
    # p(f_l2) >= p(f_l1) and r(f_l2) <= r(f_l1) (up to rounding of near-ties).
    h, candidates, p, _ = problem
    graph = darts_graph(h, candidates)
    nodes = darts_node_posteriors(p, graph)
    chosen = np.stack([darts_predict(nodes, graph.rewards, lam) for lam in lams])  # [L, n]
    chosen_p = np.take_along_axis(nodes.T, chosen, 0)
    chosen_r = graph.rewards[chosen]
    assert (np.diff(chosen_p, axis=0) >= -1e-12).all()
    assert (np.diff(chosen_r, axis=0) <= 1e-9).all()
    # Hence the model's own expected accuracy, mean_i p(f(x_i)), is non-decreasing too.
    assert (np.diff(chosen_p.mean(axis=1)) >= -1e-12).all()


@settings(max_examples=150, deadline=None)
@given(dag_problems(), st.floats(0.0, 50.0, allow_nan=False))
def test_prediction_is_argmax_with_the_tie_policy_and_gain_in_unit_interval(
    problem: Any, lam: float
) -> None:
    h, candidates, p, y = problem
    graph = darts_graph(h, candidates)
    nodes = darts_node_posteriors(p, graph)
    ref = Reference(h, candidates.tolist())
    assert graph.nodes.tolist() == ref.nodes and graph.rewards.tolist() == pytest.approx(
        ref.rewards
    )
    for lam_ in (0.0, lam):  # at 0: argmax_v r_v p_v
        expected = [ref.predict(row.tolist(), lam_) for row in nodes]
        assert darts_predict(nodes, graph.rewards, lam_).tolist() == expected
    correct, gain = darts_per_image(p, y, lam, hierarchy=h, candidate_nodes=candidates)
    assert ((gain >= 0) & (gain <= 1)).all() and (gain[~correct] == 0).all()
    chosen = darts_predict(nodes, graph.rewards, lam)
    assert correct.tolist() == [int(y_i) in ref.sets[c] for y_i, c in zip(y, chosen, strict=True)]
    np.testing.assert_array_equal(
        gain[correct], graph.rewards[chosen][correct] / math.log2(len(candidates))
    )


@settings(max_examples=100, deadline=None)
@given(dag_problems(), st.randoms(use_true_random=False))
def test_topk_with_k_equal_c_equals_dense_and_smaller_k_is_conservative(
    problem: Any, random: Any
) -> None:
    h, candidates, p, y = problem
    graph = darts_graph(h, candidates)
    n, c = p.shape
    indices = np.array([random.sample(range(c), c) for _ in range(n)])
    probs = np.take_along_axis(p, indices, 1)
    dense = darts_node_posteriors(p, graph)
    np.testing.assert_array_equal(
        darts_node_posteriors(TopKPosteriors(indices, probs), graph), dense
    )
    full = TopKPosteriors(indices, probs)
    kwargs: dict[str, Any] = {
        "hierarchy": h,
        "candidate_nodes": candidates,
        "targets": (0.0, 0.3, 0.6),
    }
    assert darts_curve(full, y, full, y, **kwargs) == darts_curve(p, y, p, y, **kwargs)
    # K < C: every non-root node gets at most its dense posterior; roots stay at 1.
    k = max(1, c - 1)
    partial = darts_node_posteriors(TopKPosteriors(indices[:, :k], probs[:, :k]), graph)
    assert (partial[:, ~graph.is_root] <= dense[:, ~graph.is_root] + 1e-12).all()
    assert (partial[:, graph.is_root] == 1.0).all()


@settings(max_examples=60, deadline=None)
@given(dag_problems(), st.data())
def test_darts_curve_invariants(problem: Any, data: st.DataObject) -> None:
    h, candidates, p, y = problem
    c = p.shape[1]
    n_val = data.draw(st.integers(1, 12))
    weights = np.array(
        data.draw(
            st.lists(
                st.lists(st.integers(0, 6), min_size=c, max_size=c), min_size=n_val, max_size=n_val
            )
        ),
        dtype=float,
    )
    weights[weights.sum(axis=1) == 0, 0] = 1.0
    vp = weights / weights.sum(axis=1, keepdims=True)
    vy = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n_val, max_size=n_val)))
    curve = darts_curve(vp, vy, p, y, hierarchy=h, candidate_nodes=candidates)
    assert 0.0 <= curve.area <= 1.0
    json.dumps(asdict(curve), allow_nan=False)
    for point in curve.points:
        if not point.achieved:
            continue
        assert point.val_lower_bound >= point.target
        assert 0.0 <= point.per_image_info_gain <= point.per_image_accuracy <= 1.0
        assert point.share_leaf + point.share_internal + point.share_root == pytest.approx(1.0)
        correct, gain = darts_per_image(p, y, point.lam, hierarchy=h, candidate_nodes=candidates)
        assert point.per_image_accuracy == float(np.mean(correct))
        assert point.per_image_info_gain == float(np.mean(gain))
        if point.lam > 0:  # otherwise lambda = 0 would have been taken
            val_correct, _ = darts_per_image(vp, vy, 0.0, hierarchy=h, candidate_nodes=candidates)
            assert clopper_pearson_lower(int(val_correct.sum()), len(vy)) < point.target


# --- scores to posteriors -----------------------------------------------------------------------


# --- errors -------------------------------------------------------------------------------------


def test_darts_graph_errors() -> None:
    h, candidates = zoo()
    with pytest.raises(
        MetricError, match=r"Expected `hierarchy` to be a harness.hierarchy.Hierarchy, but got dict"
    ):
        darts_graph({}, candidates)  # type: ignore[arg-type]
    with pytest.raises(
        MetricError, match=r"Expected `candidate_nodes` to be a 1D integer array .* but got None"
    ):
        darts_graph(h, None)  # type: ignore[arg-type]
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to be a 1D integer array .* but got shape \(2, 2\)",
    ):
        darts_graph(h, [[4, 5], [6, 7]])
    with pytest.raises(
        MetricError, match=r"Expected `candidate_nodes` to be a 1D integer array .* dtype float64"
    ):
        darts_graph(h, [4.0, 5.0])
    with pytest.raises(MetricError, match=r"at least two candidate leaves .* but got 1"):
        darts_graph(h, [candidates[0]])
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to hold node indices in \[0, 8\), but got candidate_nodes\[1\] = 8 \(first of 1 out-of-range value\(s\)\)\. Map ids to indices",
    ):
        darts_graph(h, [candidates[0], 8])
    with pytest.raises(
        MetricError,
        match=r"Expected `candidate_nodes` to hold distinct node indices, but candidate_nodes\[2\] = \d+ repeats candidate_nodes\[0\]",
    ):
        darts_graph(h, [candidates[0], candidates[1], candidates[0]])
    with pytest.raises(
        MetricError,
        match=r"candidate_nodes\[0\] = \d+ \('dog'\) lies below candidate_nodes\[1\] = \d+ \('pet'\)",
    ):
        darts_graph(h, h.indices(["dog", "pet"]))


@pytest.mark.parametrize(
    "posteriors, message",
    [
        ([0.5, 0.5], r"Expected `test_posteriors` to be a 2D array"),
        (
            [[0.5, float("nan")]],
            r"Expected `test_posteriors` to contain only finite values, but row 0 holds NaN",
        ),
        (
            [[0.5, 0.25, 0.25]],
            r"Expected `test_posteriors` to have one column per candidate \(2\), but got 3",
        ),
        (
            [[0.5, 0.5], [1.5, -0.5]],
            r"Expected `test_posteriors` to hold probabilities >= 0, but row 1 holds -0.5 \(at column 1\)",
        ),
        (
            [[0.5, 0.5], [0.5, 0.4]],
            r"Expected each row of `test_posteriors` to sum to 1 \(within 0.0001\), but row 1 sums to 0.9",
        ),
        ([["a", "b"]], r"Expected `test_posteriors` to be a real-valued \(float\) array"),
        (
            TopKPosteriors([0, 1], [0.5, 0.5]),
            r"Expected `test_posteriors.indices` to be a non-empty 2D integer array",
        ),
        (
            TopKPosteriors([[0.0, 1.0]], [[0.5, 0.5]]),
            r"Expected `test_posteriors.indices` to be a non-empty 2D integer array .* dtype float64",
        ),
        (
            TopKPosteriors([[0, 1, 1]], [[0.5, 0.2, 0.2]]),
            r"Expected `test_posteriors.indices` to have at most one column per candidate \(2\), but got K = 3",
        ),
        (
            TopKPosteriors([[0, 1]], [[0.5]]),
            r"Expected `test_posteriors.probs` to have the shape of `test_posteriors.indices` \(1, 2\), but got \(1, 1\)",
        ),
        (
            TopKPosteriors([[0], [2]], [[0.5], [0.5]]),
            r"Expected `test_posteriors.indices` to hold candidate columns in \[0, 2\), but row 1 holds \[2\]",
        ),
        (
            TopKPosteriors([[0, 1], [1, 1]], [[0.5, 0.5], [0.5, 0.5]]),
            r"Expected `test_posteriors.indices` to hold distinct candidate columns in each row, but row 1 repeats column 1",
        ),
        (
            TopKPosteriors([[0]], [[float("inf")]]),
            r"Expected `test_posteriors.probs` to contain only finite values, but row 0 holds inf",
        ),
        (
            TopKPosteriors([[0]], [[-0.1]]),
            r"Expected `test_posteriors.probs` to hold probabilities >= 0, but row 0 holds -0.1",
        ),
        (
            TopKPosteriors([[0, 1]], [[0.6, 0.6]]),
            r"Expected each row of `test_posteriors.probs` to sum to at most 1 \(within 0.0001\), but row 0 sums to 1.2",
        ),
    ],
)
def test_posterior_errors(posteriors: Any, message: str) -> None:
    h, candidates = two_leaves()
    with pytest.raises(MetricError, match=message):
        darts_per_image(posteriors, [0], 0.0, hierarchy=h, candidate_nodes=candidates)


def test_label_and_length_errors() -> None:
    h, candidates = two_leaves()
    kwargs: dict[str, Any] = {"hierarchy": h, "candidate_nodes": candidates}
    with pytest.raises(
        MetricError,
        match=r"Expected `val_y_true` to hold candidate column indices in \[0, 2\), but got val_y_true\[1\] = 2",
    ):
        darts_curve(VAL_P[:2], [0, 2], TEST_P, TEST_Y, **kwargs)
    with pytest.raises(
        MetricError,
        match=r"Expected `val_posteriors` to have one row per image in `val_y_true` \(3 images\), but got 10 rows",
    ):
        darts_curve(VAL_P, [0, 1, 0], TEST_P, TEST_Y, **kwargs)
    with pytest.raises(MetricError, match=r"Expected `test_y_true` to hold at least one image"):
        darts_curve(VAL_P, VAL_Y, TEST_P, [], **kwargs)
    with pytest.raises(
        MetricError,
        match=r"Expected `y_true` to hold candidate column indices in \[0, 2\), but got y_true\[0\] = -1",
    ):
        darts_per_image(TEST_P[:1], [-1], 0.0, **kwargs)
    with pytest.raises(MetricError, match=r"Expected `val_posteriors` to hold probabilities >= 0"):
        darts_curve([[1.5, -0.5]], [0], TEST_P, TEST_Y, **kwargs)


@pytest.mark.parametrize("lam", [-1.0, float("nan"), float("inf"), True, "1"])
def test_lambda_errors(lam: Any) -> None:
    h, candidates = two_leaves()
    with pytest.raises(MetricError, match=r"Expected `lam` to be a finite number >= 0, but got"):
        darts_per_image(TEST_P, TEST_Y, lam, hierarchy=h, candidate_nodes=candidates)
    with pytest.raises(MetricError, match=r"Expected `lam` to be a finite number >= 0, but got"):
        darts_predict([[1.0, 0.5]], [0.0, 1.0], lam)


@pytest.mark.parametrize(
    "targets, message",
    [
        ([], r"Expected `targets` to hold at least one accuracy, but got none"),
        ("0.9", r"Expected `targets` to be a sequence of accuracies in \[0, 1\], but got '0.9'"),
        (0.9, r"Expected `targets` to be a sequence of accuracies in \[0, 1\], but got 0.9"),
        ([0.5, 1.5], r"Expected `targets\[1\]` to be a number in \[0, 1\], but got 1.5"),
        ([0.5, float("nan")], r"Expected `targets\[1\]` to be a number in \[0, 1\], but got nan"),
        ([0.5, None], r"Expected `targets\[1\]` to be a number in \[0, 1\], but got None"),
        (
            [0.5, 0.9, 0.5],
            r"Expected `targets` to hold distinct accuracies, but targets\[2\] = 0.5 repeats targets\[0\]",
        ),
    ],
)
def test_target_errors(targets: Any, message: str) -> None:
    h, candidates = two_leaves()
    with pytest.raises(MetricError, match=message):
        darts_curve(
            VAL_P, VAL_Y, TEST_P, TEST_Y, hierarchy=h, candidate_nodes=candidates, targets=targets
        )


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, float("nan"), True])
def test_confidence_errors(confidence: Any) -> None:
    h, candidates = two_leaves()
    with pytest.raises(
        MetricError, match=r"Expected `confidence` to be a number in \(0, 1\), but got"
    ):
        darts_curve(
            VAL_P,
            VAL_Y,
            TEST_P,
            TEST_Y,
            hierarchy=h,
            candidate_nodes=candidates,
            confidence=confidence,
        )


def test_darts_predict_and_node_posterior_errors() -> None:
    with pytest.raises(MetricError, match=r"Expected `node_posteriors` to be a 2D array"):
        darts_predict([1.0, 0.5], [0.0, 1.0], 0.0)
    with pytest.raises(
        MetricError,
        match=r"Expected `node_posteriors` to contain only finite values, but row 0 holds inf",
    ):
        darts_predict([[1.0, float("inf")]], [0.0, 1.0], 0.0)
    with pytest.raises(
        MetricError,
        match=r"Expected `node_posteriors` to hold probabilities >= 0, but row 1 holds -0.5",
    ):
        darts_predict([[1.0, 0.5], [1.0, -0.5]], [0.0, 1.0], 0.0)
    for rewards in ([0.0], [[0.0, 1.0]], ["a", "b"]):
        with pytest.raises(
            MetricError,
            match=r"Expected `rewards` to (be a 1D real array, one entry per column, but got shape|have one entry per column in `node_posteriors` \(2 columns\), but got 1)",
        ):
            darts_predict([[1.0, 0.5]], rewards, 0.0)
    with pytest.raises(
        MetricError, match=r"Expected `rewards` to hold values >= 0, but got rewards\[1\] = -1.0"
    ):
        darts_predict([[1.0, 0.5]], [0.0, -1.0], 0.0)
    with pytest.raises(
        MetricError,
        match=r"Expected `rewards` to contain only finite values, but got rewards\[0\] = nan",
    ):
        darts_predict([[1.0, 0.5]], [float("nan"), 1.0], 0.0)
    with pytest.raises(
        MetricError, match=r"Expected `graph` to be a DartsGraph from darts_graph\(\), but got list"
    ):
        darts_node_posteriors([[0.5, 0.5]], [])  # type: ignore[arg-type]
