"""Freeze WordNet 3.0 subgraphs into :class:`~harness.hierarchy.Hierarchy` objects, through NLTK.

Nodes are noun synsets, named by WordNet ids in ImageNet's convention: ``"n"`` and the synset's
8-digit byte offset in WordNet 3.0's ``data.noun`` (``n02084071`` is ``dog.n.01``). Edges are
hypernym → hyponym links, counting instance hypernyms (``Mars`` is an instance of ``planet``) as
parents too. WordNet gives many synsets several hypernyms, so the result is a DAG.

See docs/hierarchy.md.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.errors import HierarchyError
from harness.core.textio import read_text_file, unique_tokens
from harness.hierarchy.dag import Hierarchy

if TYPE_CHECKING:  # NLTK (and the SciPy it pulls in) is imported when WordNet is opened:
    # the CLI names this module's environment variables without paying for it.
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

__all__ = [
    "build_wordnet_hierarchy",
    "first_lemma",
    "hypernym_hops",
    "open_wordnet",
    "read_wnid_list",
    "synset_hypernym_hops",
    "synset_of",
    "wnid",
]

#: The WordNet version whose offsets the harness's ids refer to.
WORDNET_VERSION = "3.0"
ENV_DIR = "ZSL_WORDNET_DIR"
ENV_LEXNAMES = "ZSL_WORDNET_LEXNAMES"

_WNID = re.compile(r"n\d{8}")
_LEXNAMES_LINE = re.compile(r"(\d+)\s+(\S+)\s+(\d+)")
_OVERLAYS: dict[tuple[str, str], Path] = {}
_READERS: dict[str, WordNetCorpusReader] = {}


@cache
def _wordnet30_reader() -> type[WordNetCorpusReader]:
    """NLTK's reader without the sense map to NLTK's own ``wordnet`` corpus (OMW only)."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class WordNet30Reader(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            return None

    return WordNet30Reader


def _install_hint() -> str:
    hint = (
        f"set {ENV_DIR} (or pass --wordnet-dir) to a WordNet 3.0 dict directory, e.g. "
        "/usr/share/wordnet from `apt-get install wordnet-base` together with "
        f"{ENV_LEXNAMES} (or --lexnames) naming a WordNet 3.0 lexnames file; or install NLTK's "
        "copy with `python -c \"import nltk; nltk.download('wordnet')\"`"
    )
    if Path("/usr/share/wordnet/data.noun").is_file():
        hint += f" (/usr/share/wordnet exists on this machine: try {ENV_DIR}=/usr/share/wordnet)"
    return hint


def _check_lexnames(path: Path) -> None:
    """Refuse a lexnames file NLTK would choke on, naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise HierarchyError(f"cannot read lexnames file {path}: {err}") from None
    if not lines:
        raise HierarchyError(f"lexnames file {path} is empty; expected WordNet 3.0's 45 lines")
    for number, line in enumerate(lines):
        match = _LEXNAMES_LINE.fullmatch(line.strip())
        if match is None or int(match.group(1)) != number:
            raise HierarchyError(
                f"{path}:{number + 1}: expected '{number:02d} <lexname> <pos number>', got "
                f"{line!r}; is this WordNet's lexnames file?"
            )


def _overlay(dict_dir: Path, lexnames: Path) -> Path:
    """A private directory with copies of ``dict_dir``'s files plus ``lexnames`` (cached)."""
    key = (str(dict_dir), str(lexnames))
    made = _OVERLAYS.get(key)
    if made is not None and (made / "lexnames").is_file():
        return made
    overlay = Path(tempfile.mkdtemp(prefix="zsl-wordnet-")).resolve()
    atexit.register(shutil.rmtree, overlay, ignore_errors=True)
    for entry in sorted(dict_dir.iterdir()):
        if entry.is_file() and entry.name != "lexnames":
            shutil.copyfile(entry, overlay / entry.name)
    shutil.copyfile(lexnames, overlay / "lexnames")
    _OVERLAYS[key] = overlay
    return overlay


def _allow(directory: Path) -> None:
    """Admit ``directory`` to NLTK's path sandbox (NLTK's documented ``nltk.data.path``)."""
    import nltk

    text = str(directory)
    if text not in nltk.data.path:
        nltk.data.path.append(text)


def _check_version(reader: WordNetCorpusReader, where: str) -> WordNetCorpusReader:
    version = reader.get_version()
    if version != WORDNET_VERSION:
        raise HierarchyError(
            f"{where} holds WordNet {version}, but the harness's ids are WordNet "
            f"{WORDNET_VERSION} offsets (as in ImageNet); point {ENV_DIR} at a WordNet 3.0 "
            "dict directory"
        )
    return reader


def open_wordnet(
    dict_dir: str | os.PathLike[str] | None = None,
    lexnames: str | os.PathLike[str] | None = None,
) -> WordNetCorpusReader:
    """Open a WordNet 3.0 database with NLTK.

    See docs/hierarchy.md, `open_wordnet`.
    """
    chosen = dict_dir if dict_dir is not None else os.environ.get(ENV_DIR) or None
    if chosen is None:
        from nltk.corpus import wordnet

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wordnet.ensure_loaded()
        except LookupError:
            raise HierarchyError(f"no WordNet database found: {_install_hint()}") from None
        return _check_version(wordnet, "NLTK's wordnet corpus")

    directory = Path(chosen).expanduser().resolve()
    if not directory.is_dir():
        raise HierarchyError(
            f"WordNet dict directory {directory} does not exist; {_install_hint()}"
        )
    if not (directory / "data.noun").is_file() or not (directory / "index.noun").is_file():
        raise HierarchyError(
            f"{directory} is not a WordNet dict directory (no data.noun / index.noun); "
            f"{_install_hint()}"
        )
    if (directory / "lexnames").is_file():
        root = directory
    else:
        lex = lexnames if lexnames is not None else os.environ.get(ENV_LEXNAMES) or None
        if lex is None:
            raise HierarchyError(
                f"{directory} has no 'lexnames' file, which NLTK's WordNet reader needs (Debian's "
                f"wordnet-base leaves it out). Set {ENV_LEXNAMES} (or pass --lexnames) to a "
                f"WordNet 3.0 lexnames file, or point {ENV_DIR} at a complete WordNet 3.0 dict "
                "directory such as NLTK's (`nltk.download('wordnet')`)"
            )
        lex_path = Path(lex).expanduser().resolve()
        if not lex_path.is_file():
            raise HierarchyError(
                f"lexnames file {lex_path} does not exist (from "
                f"{'the lexnames argument' if lexnames is not None else ENV_LEXNAMES})"
            )
        _check_lexnames(lex_path)
        root = _overlay(directory, lex_path)

    cached = _READERS.get(str(root))
    if cached is not None:
        return cached
    _allow(root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available"
            reader = _wordnet30_reader()(str(root), None)
    except (OSError, ValueError, AssertionError, LookupError) as err:
        raise HierarchyError(f"NLTK cannot read WordNet from {root}: {err}") from None
    _READERS[str(root)] = _check_version(reader, str(directory))
    return reader


def wnid(synset: Any) -> str:
    """The WordNet id of a noun synset: ``"n"`` and its 8-digit offset.

    Examples
    --------
    >>> class FakeSynset:
    ...     def pos(self): return "n"
    ...     def offset(self): return 2084071
    ...     def name(self): return "dog.n.01"
    >>> wnid(FakeSynset())
    'n02084071'
    """
    if synset.pos() != "n":
        raise HierarchyError(
            f"{synset.name()} is not a noun synset; WordNet ids (n + offset) name nouns only"
        )
    return f"n{synset.offset():08d}"


def synset_of(reader: WordNetCorpusReader, wnid: str) -> Any:
    """The noun synset with WordNet id ``wnid`` (like ``n02084071``).

    Raises
    ------
    HierarchyError
        If ``wnid`` is malformed or names no synset of this WordNet.
    """
    if not isinstance(wnid, str) or _WNID.fullmatch(wnid) is None:
        raise HierarchyError(
            f"malformed WordNet id {wnid!r}: expected 'n' and 8 digits, like 'n02084071'"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns and returns None on a bad offset
        synset = reader.synset_from_pos_and_offset("n", int(wnid[1:]))
    if synset is None:
        raise HierarchyError(
            f"unknown WordNet id {wnid!r}: WordNet {reader.get_version()} has no noun synset at "
            f"offset {int(wnid[1:])}; check the id against the WordNet 3.0 noun list"
        )
    return synset


def _name(synset: Any) -> str:
    return str(synset.lemmas()[0].name()).replace("_", " ")


def hypernym_hops(reader: WordNetCorpusReader, wordnet_id: str) -> dict[str, int]:
    """Every hypernym of a synset, transitively, with the fewest hypernym edges up to it.

    Instance hypernyms count as hypernyms (as in :func:`build_wordnet_hierarchy`). The synset
    itself is at 0 hops.

    Raises
    ------
    HierarchyError
        As :func:`synset_of`.
    """
    return synset_hypernym_hops(synset_of(reader, wordnet_id))


def synset_hypernym_hops(synset: Any) -> dict[str, int]:
    """:func:`hypernym_hops` of a synset object: its WordNet id and every hypernym's, with the
    fewest hypernym (or instance hypernym) edges up to it."""
    hops = {wnid(synset): 0}
    frontier = [synset]
    depth = 0
    while frontier:  # breadth first: the first visit is the shortest path
        depth += 1
        following = []
        for synset in frontier:
            for up in synset.hypernyms() + synset.instance_hypernyms():
                key = wnid(up)
                if key not in hops:
                    hops[key] = depth
                    following.append(up)
        frontier = following
    return hops


def first_lemma(reader: WordNetCorpusReader, wordnet_id: str) -> str:
    """The synset's first lemma, ``_`` as spaces (``giant panda``)."""
    return _name(synset_of(reader, wordnet_id))


def read_wnid_list(path: str | os.PathLike[str]) -> list[str]:
    """Read a class list: one WordNet id per line; ``#`` starts a comment, blank lines are skipped.

    Raises
    ------
    HierarchyError
        Naming ``file:line`` for a malformed or repeated id, or an empty list.
    """
    source = Path(path)
    text = read_text_file(
        source,
        HierarchyError,
        missing=f"{source}: no such class list",
        unreadable=lambda err: f"{source}: cannot read it ({err})",
    )
    ids = unique_tokens(
        text.splitlines(),
        HierarchyError,
        token=lambda line: line.split("#", 1)[0].strip(),
        valid=_WNID,
        bad=lambda number, wnid: (
            f"{source}:{number}: {wnid!r} is not a WordNet noun id ('n' and 8 digits, like "
            "n02084071); put one id per line and comments after '#'"
        ),
        repeated=lambda number, wnid, first: f"{source}:{number}: {wnid} repeats line {first}",
    )
    if not ids:
        raise HierarchyError(f"{source}: holds no WordNet ids")
    return [wnid for _, wnid in ids]


def _closure(seeds: list[Any], step: str) -> tuple[dict[str, Any], set[tuple[str, str]]]:
    """Synsets reachable from ``seeds`` upward (``step="up"``) or downward, with their edges."""
    nodes = {wnid(s): s for s in seeds}
    edges: set[tuple[str, str]] = set()
    stack = list(nodes.values())
    while stack:
        synset = stack.pop()
        here = wnid(synset)
        if step == "up":
            nexts = synset.hypernyms() + synset.instance_hypernyms()
        else:
            nexts = synset.hyponyms() + synset.instance_hyponyms()
        for other in nexts:
            there = wnid(other)
            edges.add((there, here) if step == "up" else (here, there))
            if there not in nodes:
                nodes[there] = other
                stack.append(other)
    return nodes, edges


def _hierarchy(nodes: dict[str, Any], edges: set[tuple[str, str]], source: str) -> Hierarchy:
    ids = sorted(nodes)
    return Hierarchy(ids, sorted(edges), [_name(nodes[i]) for i in ids], source=source)


def build_wordnet_hierarchy(
    reader: WordNetCorpusReader,
    *,
    root: str | None = None,
    leaves: Sequence[str] | None = None,
) -> Hierarchy:
    """Freeze a WordNet noun subgraph.

    See docs/hierarchy.md, `build_wordnet_hierarchy`.
    """
    if root is None and leaves is None:
        raise HierarchyError("give root, leaves, or both, to choose the WordNet subgraph")
    import nltk

    source = f"WordNet {reader.get_version()} via NLTK {nltk.__version__}"
    root_synset = synset_of(reader, root) if root is not None else None
    if leaves is None:
        nodes, edges = _closure([root_synset], "down")
        return _hierarchy(nodes, edges, source)

    classes = [leaves] if isinstance(leaves, str) else list(leaves)
    if not classes:
        raise HierarchyError("leaves is empty; give at least one WordNet id")
    first_at: dict[str, int] = {}
    for pos, cls in enumerate(classes):
        if cls in first_at:
            raise HierarchyError(f"leaves[{pos}] {cls!r} repeats leaves[{first_at[cls]}]")
        first_at[cls] = pos
    synsets = [synset_of(reader, cls) for cls in classes]
    nodes, edges = _closure(synsets, "up")
    full = _hierarchy(nodes, edges, source)
    idx = full.indices(classes)

    pairs_below, pairs_above = full.ancestor_pairs(idx)
    if pairs_below.size:
        below, above = int(pairs_below[0]), int(pairs_above[0])
        raise HierarchyError(
            f"classes must be mutually exclusive, but leaves[{above}] {classes[above]} "
            f"({full.names[idx[above]]}) is an ancestor of leaves[{below}] {classes[below]} "
            f"({full.names[idx[below]]}); drop one of them ({pairs_below.size} such pair(s))"
        )
    if root is None:
        return full

    assert root_synset is not None
    everything = np.arange(full.n_nodes)
    if root not in nodes:
        inside = np.zeros(full.n_nodes, dtype=bool)
    else:
        inside = full.is_ancestor_or_self(full.index(root), everything)
    outside = np.flatnonzero(~inside[idx])
    if outside.size:
        pos = int(outside[0])
        raise HierarchyError(
            f"leaves[{pos}] {classes[pos]} ({full.names[idx[pos]]}) is not below root {root} "
            f"({_name(root_synset)}) ({outside.size} class(es) outside); drop it or choose a "
            "higher root"
        )
    kept = {i: nodes[i] for i in full.node_ids[inside].tolist()}
    kept_edges = {(p, c) for p, c in edges if p in kept and c in kept}
    return _hierarchy(kept, kept_edges, source)
