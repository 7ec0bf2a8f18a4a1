"""Tests for harness.hierarchy.cub_taxonomy: the real Wikispecies files, and malformed copies of a
synthetic taxonomy written into tmp_path.

The real files come from ``$ZSL_SHARED_DATA/cub-hierarchy`` (default ``../shared/data``); those
tests skip, saying so, where they are absent.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import HierarchyError
from harness.hierarchy.cub_taxonomy import (
    CLASSES_FILE,
    EDGES_FILE,
    N_CLASSES,
    TREE_FILE,
    cub_parent_child_ids,
    load_cub_taxonomy,
)

SHARED_DATA = Path(
    os.environ.get("ZSL_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)
CUB = SHARED_DATA / "cub-hierarchy"

needs_cub = pytest.mark.skipif(
    not (CUB / TREE_FILE).is_file(),
    reason=f"no CUB Wikispecies taxonomy under {CUB} (set ZSL_SHARED_DATA)",
)


# ----------------------------------------------------------------------------- the real files


@needs_cub
def test_real_taxonomy_shape() -> None:
    h, ids = load_cub_taxonomy(CUB)
    assert len(ids) == N_CLASSES == len(set(ids))
    assert sorted(h.node_ids[h.leaves].tolist()) == sorted(ids)
    assert (h.n_nodes, h.n_edges) == (383, 382)
    assert h.node_ids[h.roots].tolist() == ["cub:class:Aves"]
    summary = h.summary()
    assert summary["multi_parent_nodes"] == 0 and summary["max_depth"] == 6  # a tree
    assert len(h.topological_order) == h.n_nodes  # acyclic
    leaf_depths = np.bincount(h.depth[h.indices(ids)], minlength=7)
    assert leaf_depths.tolist() == [0, 0, 0, 2, 35, 25, 138]
    assert h.is_ancestor_or_self(h.roots[0], h.indices(ids)).all()  # every class reachable
    ranks = [i.split(":")[1] for i in h.node_ids.tolist()]
    assert {r: ranks.count(r) for r in set(ranks)} == {
        "class": 1, "order": 13, "suborder": 4, "superfamily": 6, "family": 37,
        "subfamily": 6, "genus": 120, "species": 196,
    }  # fmt: skip


@needs_cub
def test_real_taxonomy_known_taxa() -> None:
    h, ids = load_cub_taxonomy(CUB)
    assert ids[:3] == [
        "cub:species:Phoebastria nigripes",
        "cub:species:Phoebastria immutabilis",
        "cub:species:Phoebetria fusca",
    ]
    assert ids[43] == "cub:genus:Fregata" and ids[109] == "cub:genus:Geococcyx"
    albatrosses = h.index("cub:family:Diomedeidae")
    assert h.node_ids[h.parents(albatrosses)].tolist() == ["cub:order:Procellariiformes"]
    assert sorted(h.node_ids[h.descendants(albatrosses)].tolist()) == [
        "cub:genus:Phoebastria",
        "cub:genus:Phoebetria",
        *sorted(ids[:3]),
    ]
    procellariiformes = h.index("cub:order:Procellariiformes")
    assert h.node_ids[h.parents(procellariiformes)].tolist() == ["cub:class:Aves"]
    assert h.names[h.index("cub:suborder:Alcae")] == "Alcae"
    warbler = h.index("cub:species:Setophaga ruticilla")
    path = [h.node_ids[warbler]]
    while h.parents(h.index(path[-1])).size:
        path.append(h.node_ids[h.parents(h.index(path[-1]))[0]])
    assert path == [
        "cub:species:Setophaga ruticilla",
        "cub:genus:Setophaga",
        "cub:family:Parulidae",
        "cub:superfamily:Passeroidea",
        "cub:suborder:Passeri",
        "cub:order:Passeriformes",
        "cub:class:Aves",
    ]


@needs_cub
def test_real_parent_child_ids_are_identified() -> None:
    h, ids = load_cub_taxonomy(CUB)
    found = cub_parent_child_ids(CUB)
    assert len(found) == 383 and [found[c] for c in range(1, 201)] == ids
    assert found[243] == "cub:class:Aves" and found[244] == "cub:order:Procellariiformes"
    assert found[219] == "cub:family:Diomedeidae" and found[220] == "cub:genus:Phoebastria"
    edges = {tuple(e) for e in h.node_ids[h.edges].tolist()}
    lines = (CUB / EDGES_FILE).read_text(encoding="utf-8").split("\n")
    pairs = {(found[int(p)], found[int(c)]) for p, c in (x.split() for x in lines if x.strip())}
    assert pairs == edges


# ----------------------------------------------------------------------------- synthetic files


def _word(i: int) -> str:
    letters = "abcdefghij"
    return "".join(letters[int(d)] for d in f"{i:03d}")


def write_taxonomy(directory: Path, seed: int = 0) -> dict[str, list[str]]:
    """A valid 200-class taxonomy (4 orders x 5 families x 5 genera x 2 species; the last genus
    of each family is itself a class and the odd one out), with the higher taxa numbered in a
    shuffled order as in the real parent-child file. Returns the three files' lines."""
    tree = ["Aves", ""]
    classes: list[str] = []
    taxa: list[tuple[str, str | None]] = [("Aves", None)]  # (name, parent name)
    g = 0
    for o in range(4):
        order = f"Ord{_word(o)}iformes"
        tree.append(f"-- {order}")
        taxa.append((order, "Aves"))
        for f in range(5):
            family = f"Fam{_word(o * 5 + f)}idae"
            tree.append(f"---- {family}")
            taxa.append((family, order))
            for k in range(5):
                genus = f"Gen{_word(g)}"
                g += 1
                tree.append(f"------ {genus}")
                taxa.append((genus, family))
                kinds = [f"{genus} {_word(s)}" for s in range(2)] if k < 4 else []
                for species in kinds:
                    tree.append(f"-------- {species}")
                    taxa.append((species, genus))
                classes.extend(kinds or [genus])
        tree.append("")
    classes = classes[:N_CLASSES]
    assert len(classes) == 180  # 4*5*(4*2 + 1)
    # Top up to 200 with a fifth order of species directly in genera.
    order = "Ordzzziformes".replace("zzz", _word(9))
    tree.append(f"-- {order}")
    taxa.append((order, "Aves"))
    family = f"Fam{_word(99)}idae"
    tree.append(f"---- {family}")
    taxa.append((family, order))
    for k in range(10):
        genus = f"Gen{_word(500 + k)}"
        tree.append(f"------ {genus}")
        taxa.append((genus, family))
        for s in range(2):
            species = f"{genus} {_word(s)}"
            tree.append(f"-------- {species}")
            taxa.append((species, genus))
            classes.append(species)
    assert len(classes) == N_CLASSES
    rng = random.Random(seed)
    number = {name: i for i, name in enumerate(classes, start=1)}
    higher = [name for name, _ in taxa if name not in number]
    rng.shuffle(higher)
    number.update({name: N_CLASSES + 1 + i for i, name in enumerate(higher)})
    edges = [f"{number[p]} {number[c]}" for c, p in taxa if p is not None]
    rng.shuffle(edges)
    files = {
        CLASSES_FILE: [f"{i} {name}" for i, name in enumerate(classes, start=1)],
        TREE_FILE: tree,
        EDGES_FILE: edges,
    }
    _save(directory, files)
    return files


def _save(directory: Path, files: dict[str, list[str]]) -> None:
    for name, lines in files.items():
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def synthetic(tmp_path: Path) -> dict[str, list[str]]:
    return write_taxonomy(tmp_path)


def test_synthetic_taxonomy_loads(tmp_path: Path, synthetic: dict[str, list[str]]) -> None:
    h, ids = load_cub_taxonomy(tmp_path)
    assert len(ids) == 200 and sorted(h.node_ids[h.leaves].tolist()) == sorted(ids)
    assert ids[8] == "cub:genus:Genaae"  # the class-level genus of the first family
    assert ids[0] == "cub:species:Genaaa aaa"
    assert h.node_ids[h.roots].tolist() == ["cub:class:Aves"]
    found = cub_parent_child_ids(tmp_path)
    numbered = {int(line.split()[0]): line.split(" ", 1)[1] for line in synthetic[CLASSES_FILE]}
    assert all(found[i].endswith(":" + numbered[i]) for i in numbered)
    edges = {tuple(e) for e in h.node_ids[h.edges].tolist()}
    assert {
        (found[int(p)], found[int(c)]) for p, c in map(str.split, synthetic[EDGES_FILE])
    } == edges


def _broken(
    tmp_path: Path, files: dict[str, list[str]], name: str, edit: Callable[[list[str]], object]
) -> None:
    lines = list(files[name])
    edit(lines)
    _save(tmp_path, {**files, name: lines})


def _swap_parent(lines: list[str]) -> None:
    """Move class 1 under the parent of class 200: the edges then disagree with the listing."""
    parent_of = {c: p for p, c in map(str.split, lines)}
    at = next(i for i, line in enumerate(lines) if line.split()[1] == "1")
    lines[at] = f"{parent_of['200']} 1"


@pytest.mark.parametrize(
    ("name", "edit", "pattern"),
    [
        (
            CLASSES_FILE,
            lambda x: x.__setitem__(0, "one Genaaa aaa"),
            rf"{CLASSES_FILE}:1: expected '<class number> <scientific name>'",
        ),
        (
            CLASSES_FILE,
            lambda x: x.__setitem__(0, "201 Genaaa aaa"),
            rf"{CLASSES_FILE}:1: class number 201 is outside 1\.\.200",
        ),
        (
            CLASSES_FILE,
            lambda x: x.__setitem__(1, "1 Genaaa aab"),
            rf"{CLASSES_FILE}:2: class number 1 repeats line 1",
        ),
        (
            CLASSES_FILE,
            lambda x: x.__setitem__(1, "2 Genaaa aaa"),
            rf"{CLASSES_FILE}:2: 'Genaaa aaa' repeats line 1",
        ),
        (
            CLASSES_FILE,
            lambda x: x.pop(),
            rf"{CLASSES_FILE}: lists 199 classes; class number\(s\) \[200\] are missing",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(2, "--- Ordaaaiformes"),
            rf"{TREE_FILE}:3: expected an even number of dashes",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(3, "------ Famaaaidae"),
            rf"{TREE_FILE}:4: 'Famaaaidae' is indented 3 levels, but the entry above is at level 1",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(3, "---- Famaaaidae (tribe)"),
            rf"{TREE_FILE}:4: unknown rank tag \(tribe\)",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(4, "------ Genaaa (fam)"),
            rf"{TREE_FILE}:5: 'Genaaa' \(family\) is listed under 'Famaaaidae' \(family, line 4\)",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(4, "------ Ordbbbiformes"),
            rf"{TREE_FILE}:5: 'Ordbbbiformes' \(order\) is listed under 'Famaaaidae' \(family, line 4\), but a child must rank below its parent",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(0, "-- Aves"),
            rf"{TREE_FILE}:1: the first entry must be the root",
        ),
        (
            TREE_FILE,
            lambda x: x.insert(3, "Aves2"),
            rf"{TREE_FILE}:4: 'Aves2' is not a scientific name",
        ),
        (
            TREE_FILE,
            lambda x: x.insert(3, "Mammalia"),
            rf"{TREE_FILE}:4: 'Mammalia' has no dashes, but the root is already 'Aves'",
        ),
        (
            TREE_FILE,
            lambda x: x.insert(4, "------ Genaaa"),
            rf"{TREE_FILE}:6: 'Genaaa' \(genus\) repeats line 5",
        ),
        (
            TREE_FILE,
            lambda x: x.insert(4, "------ Genzzz"),
            rf"{TREE_FILE}:5: 'Genzzz' has nothing below it and is not a CUB class",
        ),
        (
            TREE_FILE,
            lambda x: x.__setitem__(5, "-------- Genaaa zzz"),
            rf"{TREE_FILE}: class 1 'Genaaa aaa' \({CLASSES_FILE}\) is not in the listing",
        ),
        (
            EDGES_FILE,
            lambda x: x.__setitem__(0, "1 2 3"),
            rf"{EDGES_FILE}:1: expected '<parent id> <child id>'",
        ),
        (
            EDGES_FILE,
            lambda x: x.__setitem__(0, "7 7"),
            rf"{EDGES_FILE}:1: node 7 is its own parent",
        ),
        (EDGES_FILE, lambda x: x.append(x[0]), rf"{EDGES_FILE}:\d+: edge \d+ \d+ repeats line 1"),
        (
            EDGES_FILE,
            lambda x: x.append("3 1"),
            rf"{EDGES_FILE}:\d+: node 1 gets a second parent, 3; it already has \d+ \(line \d+\), and the taxonomy is a tree",
        ),
        (
            EDGES_FILE,
            lambda x: x.append("1 999"),
            rf"{EDGES_FILE}:\d+: class 1 \(Genaaa aaa\) has a child \(999\)",
        ),
        (
            EDGES_FILE,
            lambda x: x.append("999 998"),
            rf"{EDGES_FILE}: the tree must have one root; found 2",
        ),
        (
            EDGES_FILE,
            lambda x: x.extend(["998 999", "999 998"]),
            rf"{EDGES_FILE}:\d+: node 99[89] is not reachable from the root",
        ),
        (
            EDGES_FILE,
            lambda x: x.remove(next(e for e in x if e.split()[1] == "1")),
            rf"{EDGES_FILE}: class 1 \(Genaaa aaa\) appears in no edge",
        ),
        (
            EDGES_FILE,
            lambda x: x.append("201 998"),
            rf"{EDGES_FILE}:\d+: node 998 has no children but is not a class id",
        ),
        (EDGES_FILE, _swap_parent, r"the two files disagree"),
        (EDGES_FILE, lambda x: x.clear(), rf"{EDGES_FILE}: holds no edges"),
    ],
)
def test_malformed_files_are_refused_naming_file_and_line(
    tmp_path: Path,
    synthetic: dict[str, list[str]],
    name: str,
    edit: Callable[[list[str]], object],
    pattern: str,
) -> None:
    _broken(tmp_path, synthetic, name, edit)
    with pytest.raises(HierarchyError, match=pattern):
        load_cub_taxonomy(tmp_path)


def test_missing_files_and_directory(tmp_path: Path, synthetic: dict[str, list[str]]) -> None:
    with pytest.raises(HierarchyError, match=r"nowhere: no such directory"):
        load_cub_taxonomy(tmp_path / "nowhere")
    (tmp_path / EDGES_FILE).unlink()
    with pytest.raises(
        HierarchyError, match=rf"{EDGES_FILE}: no such file; a CUB taxonomy directory holds"
    ):
        load_cub_taxonomy(tmp_path)
