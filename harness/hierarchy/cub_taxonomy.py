"""The CUB-200-2011 class taxonomy (Wikispecies: order > family > genus > species) as a Hierarchy.

CUB's 200 bird classes are not all WordNet synsets, so their hierarchy comes from the biological
taxonomy. It is distributed as three text files in one directory.

See docs/hierarchy.md.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HierarchyError
from harness.core.textio import read_text_file
from harness.hierarchy.dag import Hierarchy

__all__ = [
    "CLASSES_FILE",
    "EDGES_FILE",
    "N_CLASSES",
    "TREE_FILE",
    "cub_parent_child_ids",
    "load_cub_taxonomy",
]

CLASSES_FILE = "classes_wikispecies.txt"
EDGES_FILE = "cub_wikispecies.parent-child.txt"
TREE_FILE = "hierarchy_wikispecies.txt"
#: CUB-200-2011 has 200 classes, numbered 1..200.
N_CLASSES = 200
#: Ranks from the root down; a child ranks strictly below its parent.
RANKS = ("class", "order", "suborder", "superfamily", "family", "subfamily", "genus", "species")

_TAGS = {
    "ord": "order",
    "order": "order",
    "subord": "suborder",
    "suborder": "suborder",
    "superfam": "superfamily",
    "superfamily": "superfamily",
    "fam": "family",
    "family": "family",
    "subfam": "subfamily",
    "subfamily": "subfamily",
    "gen": "genus",
    "genus": "genus",
}
_SUFFIXES = (
    ("formes", "order"),
    ("oidea", "superfamily"),
    ("idae", "family"),
    ("inae", "subfamily"),
)
_TAGGED = re.compile(r"(?P<name>.*?)\s*\((?P<tag>[^()]*)\)")
_TAXON = re.compile(r"[A-Z][A-Za-z-]*( [a-z][a-z-]*)*")


@dataclass
class _Taxon:
    name: str
    rank: str
    line: int
    parent: int | None  # index into the taxon list
    children: list[int]

    @property
    def node_id(self) -> str:
        return f"cub:{self.rank}:{self.name}"


def _read_lines(path: Path) -> list[str]:
    return read_text_file(
        path,
        HierarchyError,
        missing=(
            f"{path}: no such file; a CUB taxonomy directory holds {CLASSES_FILE}, {TREE_FILE} "
            f"and {EDGES_FILE}"
        ),
        unreadable=lambda err: f"{path}: cannot read it as UTF-8 text ({err})",
    ).splitlines()


def _read_classes(path: Path) -> list[str]:
    """Class names indexed by class number - 1."""
    by_number: dict[int, tuple[str, int]] = {}
    by_name: dict[str, int] = {}
    for number, line in enumerate(_read_lines(path), start=1):
        text = " ".join(line.split())
        if not text:
            continue
        head, _, name = text.partition(" ")
        if not head.isdigit() or not name:
            raise HierarchyError(
                f"{path}:{number}: expected '<class number> <scientific name>', got {line!r}"
            )
        cls = int(head)
        if not 1 <= cls <= N_CLASSES:
            raise HierarchyError(
                f"{path}:{number}: class number {cls} is outside 1..{N_CLASSES} (CUB-200-2011)"
            )
        if cls in by_number:
            raise HierarchyError(
                f"{path}:{number}: class number {cls} repeats line {by_number[cls][1]}"
            )
        if name in by_name:
            raise HierarchyError(f"{path}:{number}: {name!r} repeats line {by_name[name]}")
        by_number[cls] = (name, number)
        by_name[name] = number
    missing = [c for c in range(1, N_CLASSES + 1) if c not in by_number]
    if missing:
        raise HierarchyError(
            f"{path}: lists {len(by_number)} classes; class number(s) {missing[:10]} are missing "
            f"(CUB-200-2011 has {N_CLASSES}, numbered 1..{N_CLASSES})"
        )
    return [by_number[c][0] for c in range(1, N_CLASSES + 1)]


def _rank(name: str, tag: str | None, is_root: bool, where: str) -> str:
    if tag is not None:
        rank = _TAGS.get(tag.strip().lower())
        if rank is None:
            raise HierarchyError(f"{where}: unknown rank tag ({tag}); known tags: {sorted(_TAGS)}")
        return rank
    if is_root:
        return "class"
    if " " in name:
        return "species"
    for suffix, rank in _SUFFIXES:
        if name.endswith(suffix):
            return rank
    return "genus"


def _read_tree(path: Path) -> list[_Taxon]:
    """The indented listing as taxa; index 0 is the root."""
    taxa: list[_Taxon] = []
    stack: list[int] = []  # stack[k] = index of the open taxon at depth k
    seen: dict[str, int] = {}
    for number, raw in enumerate(_read_lines(path), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        where = f"{path}:{number}"
        dashes = len(line) - len(line.lstrip("-"))
        body = line[dashes:]
        if dashes % 2 or (dashes and not body.startswith(" ")):
            raise HierarchyError(
                f"{where}: expected an even number of dashes (two per level), a space and a "
                f"name; got {raw!r}"
            )
        depth = dashes // 2
        text = " ".join(body.split())
        tagged = _TAGGED.fullmatch(text)
        name, tag = (tagged["name"], tagged["tag"]) if tagged else (text, None)
        if _TAXON.fullmatch(name) is None:
            raise HierarchyError(
                f"{where}: {name!r} is not a scientific name (a capitalised word, or a genus "
                "and lower-case epithets), optionally followed by a rank tag like '(subfam)'"
            )
        if not taxa and depth:
            raise HierarchyError(f"{where}: the first entry must be the root, without dashes")
        if taxa and depth == 0:
            raise HierarchyError(
                f"{where}: {name!r} has no dashes, but the root is already "
                f"{taxa[0].name!r} (line {taxa[0].line}); indent it by two dashes per level"
            )
        if depth > len(stack):
            raise HierarchyError(
                f"{where}: {name!r} is indented {depth} levels, but the entry above is at level "
                f"{len(stack) - 1}; indent by at most one level (two dashes) more"
            )
        del stack[depth:]
        parent = stack[-1] if stack else None
        rank = _rank(name, tag, parent is None, where)
        if parent is not None:
            above = taxa[parent]
            if RANKS.index(rank) <= RANKS.index(above.rank):
                raise HierarchyError(
                    f"{where}: {name!r} ({rank}) is listed under {above.name!r} ({above.rank}, "
                    f"line {above.line}), but a child must rank below its parent "
                    f"({' > '.join(RANKS)})"
                )
        taxon = _Taxon(name, rank, number, parent, [])
        if taxon.node_id in seen:
            raise HierarchyError(
                f"{where}: {name!r} ({rank}) repeats line {seen[taxon.node_id]}; each taxon is "
                "listed once"
            )
        seen[taxon.node_id] = number
        if parent is not None:
            taxa[parent].children.append(len(taxa))
        stack.append(len(taxa))
        taxa.append(taxon)
    if not taxa:
        raise HierarchyError(f"{path}: holds no taxa")
    return taxa


def _read_edges(path: Path) -> tuple[dict[int, list[tuple[int, int]]], dict[int, tuple[int, int]]]:
    """``children[parent] = [(child, line), ...]`` and ``parent_of[child] = (parent, line)``."""
    children: dict[int, list[tuple[int, int]]] = defaultdict(list)
    parent_of: dict[int, tuple[int, int]] = {}
    for number, line in enumerate(_read_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise HierarchyError(
                f"{path}:{number}: expected '<parent id> <child id>' (two integers), got {line!r}"
            )
        parent, child = int(fields[0]), int(fields[1])
        if parent == child:
            raise HierarchyError(f"{path}:{number}: node {parent} is its own parent")
        if child in parent_of:
            first, at = parent_of[child]
            if first == parent:
                raise HierarchyError(f"{path}:{number}: edge {parent} {child} repeats line {at}")
            raise HierarchyError(
                f"{path}:{number}: node {child} gets a second parent, {parent}; it already has "
                f"{first} (line {at}), and the taxonomy is a tree: one parent per node"
            )
        parent_of[child] = (parent, number)
        children[parent].append((child, number))
    if not parent_of:
        raise HierarchyError(f"{path}: holds no edges")
    return children, parent_of


def _match(directory: Path) -> tuple[list[_Taxon], list[str], list[int], dict[int, int]]:
    """Read the three files and match them: (taxa, class names, class → taxon, id → taxon)."""
    classes_path, tree_path, edges_path = (
        directory / CLASSES_FILE,
        directory / TREE_FILE,
        directory / EDGES_FILE,
    )
    if not directory.is_dir():
        raise HierarchyError(
            f"{directory}: no such directory; give the folder holding {CLASSES_FILE}, {TREE_FILE} "
            f"and {EDGES_FILE}"
        )
    names = _read_classes(classes_path)
    taxa = _read_tree(tree_path)
    children, parent_of = _read_edges(edges_path)
    class_taxon = _class_taxa(taxa, names, tree_path, classes_path)
    root, below = _tree_below(children, parent_of, names, edges_path)
    id_to_taxon = _match_taxa(
        taxa, _covers(taxa, class_taxon), root, children, below, tree_path, edges_path
    )
    return taxa, names, class_taxon, id_to_taxon


def _class_taxa(
    taxa: list[_Taxon], names: list[str], tree_path: Path, classes_path: Path
) -> list[int]:
    """The listing's taxon of each class; every class appears once, every leaf is a class."""
    index_of = {t.name: i for i, t in enumerate(taxa)}
    class_taxon: list[int] = []
    for cls, name in enumerate(names, start=1):
        found = index_of.get(name)
        if found is None:
            raise HierarchyError(
                f"{tree_path}: class {cls} {name!r} ({classes_path.name}) is not in the listing; "
                "every CUB class must appear once"
            )
        class_taxon.append(found)
    is_class = set(class_taxon)
    for i, taxon in enumerate(taxa):
        if not taxon.children and i not in is_class:
            raise HierarchyError(
                f"{tree_path}:{taxon.line}: {taxon.name!r} has nothing below it and is not a CUB "
                f"class in {classes_path.name}; remove it or list its species"
            )
        if taxon.children and i in is_class:
            raise HierarchyError(
                f"{tree_path}:{taxon.line}: CUB class {taxon.name!r} has taxa below it; classes "
                "must be leaves (mutually exclusive)"
            )
    return class_taxon


def _tree_below(
    children: dict[int, list[tuple[int, int]]],
    parent_of: dict[int, tuple[int, int]],
    names: list[str],
    edges_path: Path,
) -> tuple[int, dict[int, frozenset[int]]]:
    """The parent-child tree's root and the classes below each node, the tree checked.

    One root, classes 1..N are exactly its leaves, every node reachable.
    """
    nodes = set(parent_of) | set(children)
    roots = sorted(nodes - set(parent_of))
    if len(roots) != 1:
        detail = (
            "none: every node has a parent, so the edges form a cycle"
            if not roots
            else f"{len(roots)} ({roots[:5]})"
        )
        raise HierarchyError(f"{edges_path}: the tree must have one root; found {detail}")
    for cls in range(1, N_CLASSES + 1):
        if cls not in nodes:
            raise HierarchyError(
                f"{edges_path}: class {cls} ({names[cls - 1]}) appears in no edge; ids "
                f"1..{N_CLASSES} are the CUB classes and must all be leaves"
            )
        if cls in children:
            child, line = children[cls][0]
            raise HierarchyError(
                f"{edges_path}:{line}: class {cls} ({names[cls - 1]}) has a child ({child}); ids "
                f"1..{N_CLASSES} are the CUB classes and must be leaves"
            )
    for node in sorted(nodes):
        if node > N_CLASSES and node not in children:
            _, line = parent_of[node]
            raise HierarchyError(
                f"{edges_path}:{line}: node {node} has no children but is not a class id "
                f"(1..{N_CLASSES}); every higher taxon must have classes below it"
            )
    below: dict[int, frozenset[int]] = {}
    order: list[int] = []
    stack = [roots[0]]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(child for child, _ in children.get(node, []))
    if len(order) != len(nodes):
        lost = sorted(nodes - set(order))
        _, line = parent_of[lost[0]]
        raise HierarchyError(
            f"{edges_path}:{line}: node {lost[0]} is not reachable from the root {roots[0]} "
            f"({len(lost)} node(s) in a cycle); the edges must form one tree"
        )
    for node in reversed(order):
        kids = children.get(node)
        below[node] = (
            frozenset([node])
            if not kids
            else frozenset().union(*(below[child] for child, _ in kids))
        )
    return roots[0], below


def _covers(taxa: list[_Taxon], class_taxon: list[int]) -> list[frozenset[int]]:
    """The class numbers below each taxon of the listing."""
    number_of = {t: cls for cls, t in enumerate(class_taxon, start=1)}
    covers: list[frozenset[int]] = [frozenset()] * len(taxa)
    for i in range(len(taxa) - 1, -1, -1):  # children come after their parent
        taxon = taxa[i]
        covers[i] = (
            frozenset([number_of[i]])
            if not taxon.children
            else frozenset().union(*(covers[c] for c in taxon.children))
        )
    return covers


def _match_taxa(
    taxa: list[_Taxon],
    covers: list[frozenset[int]],
    root: int,
    children: dict[int, list[tuple[int, int]]],
    below: dict[int, frozenset[int]],
    tree_path: Path,
    edges_path: Path,
) -> dict[int, int]:
    """Match top down: the listing's root is the tree's root; children by their class sets."""
    id_to_taxon: dict[int, int] = {root: 0}
    todo = [(0, root)]
    while todo:
        t, node = todo.pop()
        kids = children.get(node, [])
        by_set = {below[child]: (child, line) for child, line in kids}
        for c in taxa[t].children:
            hit = by_set.pop(covers[c], None)
            if hit is None:
                lines = ", ".join(str(line) for _, line in kids[:5])
                raise HierarchyError(
                    f"{tree_path}:{taxa[c].line}: {taxa[c].name!r} (classes "
                    f"{sorted(covers[c])[:6]}) has no counterpart among the children of node "
                    f"{node} in {edges_path.name} (lines {lines}); the two files disagree"
                )
            id_to_taxon[hit[0]] = c
            todo.append((c, hit[0]))
        if by_set:
            child, line = next(iter(by_set.values()))
            raise HierarchyError(
                f"{edges_path}:{line}: node {child} (classes {sorted(below[child])[:6]}) matches "
                f"no child of {taxa[t].name!r} ({tree_path.name}:{taxa[t].line}); the two "
                "files disagree"
            )
    return id_to_taxon


def load_cub_taxonomy(directory: str | os.PathLike[str]) -> tuple[Hierarchy, list[str]]:
    """Load the CUB-200-2011 Wikispecies taxonomy (file formats and ids in docs/hierarchy.md).

    See docs/hierarchy.md, `load_cub_taxonomy`.
    """
    where = Path(directory)
    taxa, _, class_taxon, _ = _match(where)
    edges = [(taxa[t.parent].node_id, t.node_id) for t in taxa if t.parent is not None]
    hierarchy = Hierarchy(
        [t.node_id for t in taxa],
        edges,
        [t.name for t in taxa],
        source=(
            f"Wikispecies taxonomy of CUB-200-2011 ({TREE_FILE}, checked against {EDGES_FILE})"
        ),
    )
    return hierarchy, [taxa[t].node_id for t in class_taxon]


def cub_parent_child_ids(directory: str | os.PathLike[str]) -> dict[int, str]:
    """Which taxon each id of ``cub_wikispecies.parent-child.txt`` is: ``{id: node id}``.

    Ids 1..200 are the classes; ids above are the higher taxa, identified by matching (see the
    docs/hierarchy.md). Raises as :func:`load_cub_taxonomy`.
    """
    taxa, _, _, id_to_taxon = _match(Path(directory))
    return {node: taxa[t].node_id for node, t in sorted(id_to_taxon.items())}
