"""Tests for harness.hierarchy: a hand-built DAG with hand-computed answers, every validation
error, serialization round trips, and property tests on random DAGs against plain BFS.

The hand-built DAG (two roots with descendants, a diamond, a node with two parents at different
depths, and an isolated node)::

    R       S      Z
   / \\      |
  A   B     E
  |\\  |     |
  F  C      |
     |     /
     D ----

Edges: R→A, R→B, A→C, B→C, A→F, C→D, S→E, E→D. Sorted ids give the indices
A=0 B=1 C=2 D=3 E=4 F=5 R=6 S=7 Z=8.
"""

from __future__ import annotations

import json
from collections import deque
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import HierarchyError
from harness.hierarchy import FORMAT, Hierarchy

IDS = ["R", "S", "Z", "A", "B", "C", "D", "E", "F"]
EDGES = [
    ("R", "A"),
    ("R", "B"),
    ("A", "C"),
    ("B", "C"),
    ("A", "F"),
    ("C", "D"),
    ("S", "E"),
    ("E", "D"),
]
A, B, C, D, E, F, R, S, Z = range(9)
INF = np.inf


@pytest.fixture
def dag() -> Hierarchy:
    return Hierarchy(IDS, EDGES, [f"name of {i}" for i in IDS], source="hand-built")


# ---------------------------------------------------------------- hand-computed values


def test_nodes_are_sorted_and_names_follow(dag: Hierarchy) -> None:
    assert dag.node_ids.tolist() == ["A", "B", "C", "D", "E", "F", "R", "S", "Z"]
    assert dag.names.tolist() == [f"name of {i}" for i in dag.node_ids.tolist()]
    assert dag.node_ids.dtype.kind == "U" and dag.names.dtype.kind == "U"
    assert dag.n_nodes == 9 and dag.n_edges == 8 and dag.source == "hand-built"
    assert dag.edges.dtype == np.int64
    assert dag.edges.tolist() == [[A, C], [A, F], [B, C], [C, D], [E, D], [R, A], [R, B], [S, E]]


def test_index_and_indices(dag: Hierarchy) -> None:
    assert dag.index("D") == D
    assert dag.indices(["Z", "A", "C"]).tolist() == [Z, A, C]
    assert dag.indices(np.array([["R", "S"], ["E", "F"]])).tolist() == [[R, S], [E, F]]
    assert dag.indices([]).shape == (0,)


def test_parents_children_roots_leaves(dag: Hierarchy) -> None:
    assert dag.parents(D).tolist() == [C, E]
    assert dag.parents(C).tolist() == [A, B]
    assert dag.parents(R).tolist() == []
    assert dag.children(A).tolist() == [C, F]
    assert dag.children(R).tolist() == [A, B]
    assert dag.children(Z).tolist() == []
    assert dag.roots.tolist() == [R, S, Z]
    assert dag.leaves.tolist() == [D, F, Z]


def test_topological_order_puts_parents_first(dag: Hierarchy) -> None:
    order = dag.topological_order.tolist()
    assert sorted(order) == list(range(9))
    where = {node: k for k, node in enumerate(order)}
    for p, c in dag.edges.tolist():
        assert where[p] < where[c]


def test_ancestors_and_descendants(dag: Hierarchy) -> None:
    assert dag.ancestors(D).tolist() == [A, B, C, E, R, S]
    assert dag.ancestors(C).tolist() == [A, B, R]
    assert dag.ancestors(R).tolist() == []
    assert dag.ancestors(Z).tolist() == []
    assert dag.descendants(R).tolist() == [A, B, C, D, F]
    assert dag.descendants(S).tolist() == [D, E]
    assert dag.descendants(A).tolist() == [C, D, F]
    assert dag.descendants(D).tolist() == []


def test_ancestor_matrix_is_reflexive_bool_csr(dag: Hierarchy) -> None:
    m = dag.ancestor_matrix
    assert m.format == "csr" and m.dtype == bool and m.shape == (9, 9)
    dense = m.toarray()
    assert dense.diagonal().all()
    assert np.flatnonzero(dense[D]).tolist() == [A, B, C, D, E, R, S]
    assert np.array_equal(dag.descendant_matrix.toarray(), dense.T)
    assert dag.descendant_matrix.format == "csr"


def test_is_ancestor_or_self_broadcasts(dag: Hierarchy) -> None:
    assert dag.is_ancestor_or_self(R, D)
    assert dag.is_ancestor_or_self(D, D)
    assert not dag.is_ancestor_or_self(D, R)
    got = dag.is_ancestor_or_self(np.array([[A], [S]]), np.array([C, D, E, F]))
    assert got.shape == (2, 4)
    assert got.tolist() == [[True, True, False, True], [False, True, True, False]]


def test_depth_max_depth_height(dag: Hierarchy) -> None:
    #                              A  B  C  D  E  F  R  S  Z
    assert dag.depth.tolist() == [1, 1, 2, 2, 1, 2, 0, 0, 0]
    assert dag.max_depth.tolist() == [1, 1, 2, 3, 1, 2, 0, 0, 0]
    assert dag.height.tolist() == [2, 2, 1, 0, 1, 0, 3, 2, 0]
    assert dag.depth.dtype == np.int64 and dag.height.dtype == np.int64


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (C, F, 2),  # common: A (height 2), R (3)
        (D, F, 2),  # common: A, R
        (D, E, 1),  # E is an ancestor of D
        (B, F, 3),  # only R
        (B, C, 2),  # B is an ancestor of C
        (D, D, 0),
        (R, R, 3),
        (C, E, -1),  # disjoint roots
        (Z, A, -1),
        (Z, Z, 0),
    ],
)
def test_lca_height_hand_computed(dag: Hierarchy, a: int, b: int, expected: int) -> None:
    assert dag.lca_height(a, b) == expected
    assert dag.lca_height(b, a) == expected


def test_lca_height_vectorized_and_matrix(dag: Hierarchy) -> None:
    got = dag.lca_height(np.array([C, D, Z]), np.array([[F], [E]]))
    assert got.tolist() == [[2, 2, -1], [-1, 1, -1]]
    assert got.dtype == np.int64
    idx = np.array([C, D, F, Z])
    expected = [[1, 1, 2, -1], [1, 0, 2, -1], [2, 2, 0, -1], [-1, -1, -1, 0]]
    assert dag.lca_height_matrix(idx).tolist() == expected
    assert dag.lca_height_matrix(np.array([], dtype=int)).shape == (0, 0)


def test_hop_distance(dag: Hierarchy) -> None:
    #                 A  B  C  D  E  F    R    S    Z
    from_d = [2, 2, 1, 0, 1, 3, 3, 2, INF]
    from_f = [1, 3, 2, 3, 4, 0, 2, 5, INF]
    got = dag.hop_distance(np.array([D, F]))
    assert got.dtype == np.float64 and got.shape == (2, 9)
    assert got.tolist() == [from_d, from_f]
    within_2 = [2, 2, 1, 0, 1, INF, INF, 2, INF]
    assert dag.hop_distance([D], radius=2).tolist() == [within_2]
    only_self = [INF] * 9
    only_self[D] = 0
    assert dag.hop_distance(D, radius=0).tolist() == [only_self]


def test_hop_distance_to_targets(dag: Hierarchy) -> None:
    got = dag.hop_distance([D, F, D], targets=[Z, A, A, S])
    assert got.tolist() == [[INF, 2, 2, 2], [INF, 1, 1, 5], [INF, 2, 2, 2]]
    assert dag.hop_distance([F], radius=2, targets=[S, R]).tolist() == [[INF, 2]]
    assert dag.hop_distance([D], targets=[]).shape == (1, 0)


def test_nearest_hops_and_nearest_other_hops(dag: Hierarchy) -> None:
    #                                   A  B  C  D  E  F  R  S    Z
    assert dag.nearest_hops([D, F, D]).tolist() == [1, 2, 1, 0, 1, 0, 2, 2, INF]
    assert dag.nearest_hops([D, F], radius=1).tolist() == [1, INF, 1, 0, 1, 0, INF, INF, INF]
    assert np.isinf(dag.nearest_hops(np.zeros(0, dtype=np.int64))).all()
    # D and F are 3 apart; S is 2 from D; Z is alone.
    assert dag.nearest_other_hops([F, D, S, Z]).tolist() == [3, 2, 2, INF]


def test_adjacency_and_root_height(dag: Hierarchy) -> None:
    adjacency = dag.adjacency.toarray()
    assert (adjacency == adjacency.T).all() and adjacency.sum() == 2 * dag.n_edges
    assert adjacency[C, A] == adjacency[A, C] == 1 and adjacency[A, B] == 0
    assert dag.root_height == 3  # R -> A -> C -> D


def test_ancestor_pairs_and_restriction(dag: Hierarchy) -> None:
    below, above = dag.ancestor_pairs([D, R, Z, C])
    assert sorted(zip(below.tolist(), above.tolist(), strict=True)) == [(0, 1), (0, 3), (3, 1)]
    assert [x.size for x in dag.ancestor_pairs([D])] == [0, 0]
    sub = dag.restrict_to_ancestors([C, Z])
    assert sub.node_ids.tolist() == ["A", "B", "C", "R", "Z"]
    assert sub.node_ids[sub.edges].tolist() == [["A", "C"], ["B", "C"], ["R", "A"], ["R", "B"]]
    assert sub.source == "hand-built; ancestors-or-self of 2 classes"


def test_lca_height_counts(dag: Hierarchy) -> None:
    # From D: LCA heights with the targets D, F, E, B are 0, 2 (A), 1 (E), 2 (B); from F:
    # 2 (A), 0, none (-1, never counted), 3 (R).
    heights, counts = dag.lca_height_counts([D, F], [D, F, E, B], limit=4)
    assert heights.tolist() == [0, 1, 2, 3]
    assert counts.tolist() == [[1, 2, 4, 4], [1, 1, 2, 3]]
    # A source stops counting at the limit; heights stop once every source reached it.
    heights, counts = dag.lca_height_counts([D], [D, F, E, B], limit=2)
    assert heights.tolist() == [0, 1] and counts.tolist() == [[1, 2]]


def test_summary(dag: Hierarchy) -> None:
    s = dag.summary()
    assert {k: s[k] for k in ("nodes", "edges", "roots", "leaves")} == {
        "nodes": 9,
        "edges": 8,
        "roots": 3,
        "leaves": 3,
    }
    assert s["multi_parent_nodes"] == 2  # C and D
    assert s["max_depth"] == 3
    assert s["source"] == "hand-built"
    assert s["content_hash"] == dag.content_hash()


def test_arrays_are_read_only(dag: Hierarchy) -> None:
    for array in (dag.node_ids, dag.names, dag.edges, dag.depth, dag.height, dag.parents(D)):
        with pytest.raises(ValueError):
            array[0] = array[0]


# ---------------------------------------------------------------- validation errors


@pytest.mark.parametrize(
    ("ids", "edges", "match"),
    [
        (["a", "b", "a"], [], r"node id 'a' appears 2 times in node_ids \(positions 0, 2\)"),
        (["a", "b"], [("a", "b"), ("a", "q")], r"edge 1 \('a', 'q'\) names 'q', which is not"),
        (["a", "b"], [("q", "b")], r"edge 0 \('q', 'b'\) names 'q'"),
        (["a", "b"], [("a", "b"), ("b", "b")], r"edge 1 \('b', 'b'\) is a self loop"),
        (["a", "b"], [("a", "b"), ("a", "b")], r"edge 1 \('a', 'b'\) repeats edge 0"),
        ([], [], r"at least one node"),
        (["a", ""], [], r"node_ids\[1\] is an empty string"),
        (["a", 3], [], r"node_ids\[1\] must be a string; got int"),
        ("abc", [], r"not one string"),
        (["a", "b"], [("a",)], r"edges\[0\] must be a \(parent_id, child_id\) pair"),
        (["a", "b"], np.array([[0, 1]]), r"edges hold integers.*from_arrays"),
        (["a", "b"], np.array([["a", "b", "c"]]), r"shape \[E, 2\]"),
    ],
)
def test_construction_errors(ids: list, edges: list, match: str) -> None:
    with pytest.raises(HierarchyError, match=match):
        Hierarchy(ids, edges)


def test_cycle_error_lists_the_cycle() -> None:
    edges = [("d", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "e")]
    with pytest.raises(HierarchyError, match=r"cycle: ") as info:
        Hierarchy(["a", "b", "c", "d", "e"], edges)
    message = str(info.value)
    cycle = message.split("cycle: ")[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["'a'", "'b'", "'c'"]
    for parent, child in pairwise(cycle):
        assert (parent.strip("'"), child.strip("'")) in edges


def test_names_must_match_ids() -> None:
    with pytest.raises(HierarchyError, match=r"names has 1 entries but node_ids has 2"):
        Hierarchy(["a", "b"], [], ["x"])
    with pytest.raises(HierarchyError, match=r"source must be a string"):
        Hierarchy(["a"], [], source=None)  # type: ignore[arg-type]


def test_lookup_errors(dag: Hierarchy) -> None:
    with pytest.raises(HierarchyError, match=r"1 of 1 ids are not nodes.*'Q' at position 0"):
        dag.index("Q")
    with pytest.raises(HierarchyError, match=r"2 of 3 ids are not nodes.*'Q' at position 1"):
        dag.indices(["A", "Q", "W"])
    with pytest.raises(HierarchyError, match=r"i=99 is out of range; node indices run from 0 to 8"):
        dag.parents(99)
    with pytest.raises(HierarchyError, match=r"i must be a node index \(int\); got str"):
        dag.children("A")  # type: ignore[arg-type]
    with pytest.raises(HierarchyError, match=r"b must hold node indices \(integers\); got dtype"):
        dag.is_ancestor_or_self(0, np.array([0.5]))
    with pytest.raises(HierarchyError, match=r"a holds 1 index\(es\) out of range 0..8.*-1"):
        dag.lca_height(np.array([0, -1]), 0)
    with pytest.raises(HierarchyError, match=r"idx must be 1-D"):
        dag.lca_height_matrix(np.zeros((2, 2), dtype=int))
    with pytest.raises(HierarchyError, match=r"radius must be a non-negative int or None"):
        dag.hop_distance([0], radius=-1)
    with pytest.raises(HierarchyError, match=r"sources holds 1 index\(es\) out of range"):
        dag.hop_distance([9])
    with pytest.raises(HierarchyError, match=r"radius must be a non-negative int or None"):
        dag.nearest_hops([0], radius=True)  # type: ignore[arg-type]
    with pytest.raises(HierarchyError, match=r"targets must be 1-D"):
        dag.hop_distance([0], targets=[[0]])
    with pytest.raises(HierarchyError, match=r"nodes must be distinct"):
        dag.nearest_other_hops([0, 0])
    with pytest.raises(HierarchyError, match=r"idx must be 1-D"):
        dag.ancestor_pairs([[0, 1]])


# ---------------------------------------------------------------- serialization


def test_json_round_trip_and_format(dag: Hierarchy, tmp_path) -> None:
    path = tmp_path / "h.json"
    dag.save_json(path)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    data = json.loads(text)
    assert data["format"] == FORMAT
    assert data["source"] == "hand-built"
    assert [n["id"] for n in data["nodes"]] == sorted(IDS)
    assert data["edges"] == sorted([list(e) for e in EDGES])
    again = Hierarchy.load_json(path)
    assert again == dag
    assert again.to_json() == text
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_dict_round_trip(dag: Hierarchy) -> None:
    assert Hierarchy.from_dict(dag.to_dict()) == dag


def test_arrays_round_trip_without_pickle(dag: Hierarchy, tmp_path) -> None:
    arrays = dag.to_arrays()
    assert set(arrays) == {"node_ids", "names", "edges"}
    for key, array in arrays.items():
        assert array.dtype.kind != "O"
        np.save(tmp_path / f"{key}.npy", array, allow_pickle=False)
    loaded = {k: np.load(tmp_path / f"{k}.npy", allow_pickle=False) for k in arrays}
    back = Hierarchy.from_arrays(loaded, source="hand-built")
    assert back == dag
    assert Hierarchy.from_arrays(loaded) != dag  # source differs
    assert Hierarchy.from_arrays(loaded).content_hash() == dag.content_hash()


def test_content_hash_is_canonical(dag: Hierarchy) -> None:
    shuffled = Hierarchy(IDS[::-1], EDGES[::-1], [f"name of {i}" for i in IDS[::-1]])
    assert shuffled.content_hash() == dag.content_hash()
    assert dag.content_hash().startswith("sha256:") and len(dag.content_hash()) == 7 + 64
    renamed = Hierarchy(IDS, EDGES)
    assert renamed.content_hash() != dag.content_hash()
    assert hash(shuffled) == hash(Hierarchy(IDS, EDGES, [f"name of {i}" for i in IDS]))


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(format="zsl-hierarchy/0"), r"format is 'zsl-hierarchy/0'"),
        (lambda d: d.pop("edges"), r"missing key\(s\) \['edges'\]"),
        (lambda d: d.update(extra=1), r"unknown key\(s\) \['extra'\]"),
        (lambda d: d["nodes"].append({"id": "X"}), r'nodes\[9\] must be \{"id": str'),
        (lambda d: d["edges"].append(["A"]), r"edges\[8\] must be \[parent_id, child_id\]"),
        (lambda d: d["edges"].append(["A", "Q"]), r"edge 8 \('A', 'Q'\) names 'Q'"),
        (lambda d: d.update(source=3), r"source must be a string"),
    ],
)
def test_from_dict_errors(dag: Hierarchy, mutate, match: str) -> None:
    d = dag.to_dict()
    mutate(d)
    with pytest.raises(HierarchyError, match=match):
        Hierarchy.from_dict(d)


def test_load_json_errors_name_the_file(tmp_path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(HierarchyError, match=r"missing\.json: no such hierarchy file"):
        Hierarchy.load_json(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": ', encoding="utf-8")
    with pytest.raises(HierarchyError, match=r"broken\.json: not valid JSON \(line 1"):
        Hierarchy.load_json(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"format": "other", "source": "", "nodes": [], "edges": []}')
    with pytest.raises(HierarchyError, match=r"wrong\.json: format is 'other'"):
        Hierarchy.load_json(wrong)
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    with pytest.raises(HierarchyError, match=r"list\.json: expected a JSON object"):
        Hierarchy.load_json(listed)


def test_save_json_needs_the_directory(dag: Hierarchy, tmp_path) -> None:
    with pytest.raises(HierarchyError, match=r"directory .*nope does not exist"):
        dag.save_json(tmp_path / "nope" / "h.json")


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"node_ids": np.array(["a"]), "names": np.array(["a"])}, r"lack \['edges'\]"),
        (
            {"node_ids": np.array(["a"], dtype=object), "names": np.array(["a"]), "edges": []},
            r"'node_ids' must be a 1-D unicode array",
        ),
        (
            {"node_ids": np.array(["a"]), "names": np.array(["a"]), "edges": np.array([[0.0, 1]])},
            r"'edges' must be integers of shape \[E, 2\]",
        ),
        (
            {"node_ids": np.array(["a"]), "names": np.array(["a"]), "edges": np.array([[0, 1]])},
            r"row 0 \[0, 1\] indexes past node_ids \(size 1\)",
        ),
    ],
)
def test_from_arrays_errors(arrays: dict, match: str) -> None:
    with pytest.raises(HierarchyError, match=match):
        Hierarchy.from_arrays(arrays)


# ---------------------------------------------------------------- properties on random DAGs


@st.composite
def random_dags(draw: st.DrawFn) -> tuple[list[str], list[tuple[str, str]]]:
    """Up to 14 nodes ("v0".."v13", so sorted order differs from numeric order); edges only
    go from lower to higher rank of a random permutation, so the graph is acyclic."""
    n = draw(st.integers(min_value=1, max_value=14))
    rank = draw(st.permutations(list(range(n))))
    pairs = [(i, j) for i in range(n) for j in range(n) if rank[i] < rank[j]]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=30)) if pairs else []
    ids = [f"v{k}" for k in range(n)]
    return ids, [(ids[p], ids[c]) for p, c in chosen]


def _bfs_ancestors_or_self(h: Hierarchy) -> list[set[int]]:
    parents: dict[int, list[int]] = {i: [] for i in range(h.n_nodes)}
    for p, c in h.edges.tolist():
        parents[c].append(p)
    out = []
    for start in range(h.n_nodes):
        seen = {start}
        queue = deque([start])
        while queue:
            for p in parents[queue.popleft()]:
                if p not in seen:
                    seen.add(p)
                    queue.append(p)
        out.append(seen)
    return out


def _bfs_hops(h: Hierarchy, start: int) -> list[float]:
    nbrs: dict[int, set[int]] = {i: set() for i in range(h.n_nodes)}
    for p, c in h.edges.tolist():
        nbrs[p].add(c)
        nbrs[c].add(p)
    dist = [INF] * h.n_nodes
    dist[start] = 0
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for v in nbrs[u]:
            if dist[v] == INF:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


@settings(max_examples=150, deadline=None)
@given(random_dags())
def test_ancestry_agrees_with_bfs(graph: tuple[list[str], list[tuple[str, str]]]) -> None:
    h = Hierarchy(*graph)
    up = _bfs_ancestors_or_self(h)
    n = h.n_nodes
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    expected = np.array([[int(i) in up[j] for j in range(n)] for i in range(n)])
    assert np.array_equal(h.is_ancestor_or_self(a, b), expected)
    for i in range(n):
        assert h.ancestors(i).tolist() == sorted(up[i] - {i})
        assert h.descendants(i).tolist() == sorted(j for j in range(n) if i in up[j] and j != i)


@settings(max_examples=150, deadline=None)
@given(random_dags())
def test_depths_heights_and_lca(graph: tuple[list[str], list[tuple[str, str]]]) -> None:
    h = Hierarchy(*graph)
    n = h.n_nodes
    height, depth, max_depth = h.height, h.depth, h.max_depth
    for p, c in h.edges.tolist():
        assert height[p] >= height[c] + 1
        assert depth[c] <= depth[p] + 1
        assert max_depth[c] >= max_depth[p] + 1
    assert (height[h.leaves] == 0).all() and (depth[h.roots] == 0).all()
    assert (depth <= max_depth).all()
    up = _bfs_ancestors_or_self(h)
    brute = np.array(
        [
            [min((int(height[k]) for k in up[i] & up[j]), default=-1) for j in range(n)]
            for i in range(n)
        ]
    )
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    got = h.lca_height(a, b)
    assert np.array_equal(got, brute)
    assert np.array_equal(got, got.T)
    assert np.array_equal(np.diag(got), height)
    assert np.array_equal(h.lca_height_matrix(np.arange(n)), brute)
    pick = np.arange(n)[::-2]
    assert np.array_equal(h.lca_height_matrix(pick), brute[np.ix_(pick, pick)])


@settings(max_examples=100, deadline=None)
@given(random_dags(), st.integers(min_value=0, max_value=4))
def test_hops_and_round_trips(graph: tuple[list[str], list[tuple[str, str]]], radius: int) -> None:
    h = Hierarchy(*graph, source="random")
    full = h.hop_distance(np.arange(h.n_nodes))
    assert np.array_equal(full, full.T)
    for i in range(h.n_nodes):
        assert full[i].tolist() == _bfs_hops(h, i)
    cut = h.hop_distance(np.arange(h.n_nodes), radius=radius)
    assert np.array_equal(cut, np.where(full <= radius, full, INF))
    assert Hierarchy.from_dict(json.loads(h.to_json())) == h
    assert Hierarchy.from_arrays(h.to_arrays(), source="random") == h


@settings(max_examples=100, deadline=None)
@given(random_dags(), st.integers(min_value=0, max_value=4), st.data())
def test_hop_queries_agree_with_bfs(
    graph: tuple[list[str], list[tuple[str, str]]], radius: int, data: st.DataObject
) -> None:
    h = Hierarchy(*graph)
    n = h.n_nodes
    full = np.array([_bfs_hops(h, i) for i in range(n)]).reshape(n, n)
    sources = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=5)), dtype=np.int64)
    targets = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=np.int64)
    got = h.hop_distance(sources, radius=radius, targets=targets)
    want = full[np.ix_(sources, targets)]
    assert np.array_equal(got, np.where(want <= radius, want, INF))
    nearest = full[sources].min(axis=0) if sources.size else np.full(n, INF)
    assert np.array_equal(h.nearest_hops(sources), nearest)
    assert np.array_equal(
        h.nearest_hops(sources, radius), np.where(nearest <= radius, nearest, INF)
    )
    distinct = np.unique(sources)
    among = full[np.ix_(distinct, distinct)] + np.diag(np.full(distinct.size, INF))
    other = among.min(axis=1) if distinct.size > 1 else np.full(distinct.size, INF)
    assert np.array_equal(h.nearest_other_hops(distinct), other)


@settings(max_examples=100, deadline=None)
@given(random_dags(), st.data())
def test_ancestor_queries_agree_with_bfs(
    graph: tuple[list[str], list[tuple[str, str]]], data: st.DataObject
) -> None:
    h = Hierarchy(*graph)
    n = h.n_nodes
    up = _bfs_ancestors_or_self(h)
    idx = np.array(
        data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=6)), dtype=np.int64
    )
    below, above = h.ancestor_pairs(idx)
    expected = {
        (i, j) for i in range(idx.size) for j in range(idx.size) if i != j and idx[j] in up[idx[i]]
    }
    assert set(zip(below.tolist(), above.tolist(), strict=True)) == expected
    assert below.size == len(expected)
    if idx.size:
        kept = set().union(*(up[i] for i in idx.tolist()))
        sub = h.restrict_to_ancestors(idx)
        assert set(sub.node_ids.tolist()) == {str(h.node_ids[k]) for k in kept}
        for i in idx.tolist():
            j = sub.index(str(h.node_ids[i]))
            assert set(sub.node_ids[sub.ancestors(j)].tolist()) == set(
                h.node_ids[h.ancestors(i)].tolist()
            )
    height = h.height
    assert h.root_height == int(height.max())
    limit = data.draw(st.integers(1, n))
    heights, counts = h.lca_height_counts(idx, np.arange(n), limit=limit)
    for row, source in enumerate(idx.tolist()):
        lca = [min((int(height[k]) for k in up[source] & up[t]), default=-1) for t in range(n)]
        reached = None
        for column, level in enumerate(heights.tolist()):
            count = sum(0 <= x <= level for x in lca)
            assert counts[row, column] == (count if reached is None else reached)
            if reached is None and count >= limit:
                reached = count


@given(random_dags())
@settings(max_examples=60, deadline=None)
def test_shares_a_parent_matches_parent_set_intersection(dag: tuple[list, list]) -> None:
    ids, edges = dag
    h = Hierarchy(ids, edges)
    parents: dict[int, set[int]] = {i: set() for i in range(h.n_nodes)}
    for p, c in h.edges.tolist():
        parents[c].add(p)
    a, b = np.meshgrid(np.arange(h.n_nodes), np.arange(h.n_nodes), indexing="ij")
    expected = [[bool(parents[i] & parents[j]) for j in range(h.n_nodes)] for i in range(h.n_nodes)]
    assert h.shares_a_parent(a, b).tolist() == expected
