r"""ImageNet-21K zero-shot benchmarks: hop splits under honest names, literature lists, GOZ.

Splits
------
The training classes are the 1,000 ILSVRC-2012 classes (class set ``ilsvrc2012``); the
candidates are the 21,843 ImageNet fall 2011 classes (``imagenet21k``) minus the training
classes. Hop distances are undirected is-a edges of ImageNet's ``wordnet.is_a.txt``
(:func:`~harness.hierarchy.imagenet_isa.load_isa_hierarchy`), measured from the *nearest*
training class (:meth:`~harness.hierarchy.Hierarchy.nearest_hops`).

================================  ==================================================================
split                             test classes
================================  ==================================================================
``within-1-hop``                  candidates at hop distance 1 from the training set (1,548)
``within-2-hops``                 candidates at hop distance 1 or 2 (5,994)
``within-<d>-hops``               candidates at distance ``<= d``; ``exactly-<d>-hop(s)``: ``== d``
``all``                           every candidate: 21K minus the training classes (20,844)
``goz``                           the 500 GOZ test classes (Hascoet et al., CVPR 2019)
``most-populated`` /              the ``n_classes`` candidates with the most / fewest images, from a
``least-populated``               user-supplied counts file (``wnid<TAB>count``)
``{list: FILE, sha256: HEX}``     exactly the classes of a class list, e.g. a literature list
                                  (:class:`ListSplit`, :func:`read_class_list`)
================================  ==================================================================

Hop splits are named for what they are. The literature's test sets "2-hops" and "3-hops"
(DeViSE, Frome et al., NeurIPS 2013; ConSE, Norouzi et al., ICLR 2014; as distributed with the
GCNZ and DGP code) are *class lists*, not hop sets, and no split name stands for them
(:data:`LITERATURE_LISTS`; ``split: 2-hops`` is refused with directions). Measured on the
shared ImageNet lists:

* "2-hops" (1,549 classes) is ``within-1-hop`` (1,548) without ``n00021939`` (artifact) and
  with ``n00015388`` (animal, 3 hops from the nearest ILSVRC class on this is-a graph) and
  ``n06793231`` (sign, 7 hops): the list was built on another is-a graph.
* "3-hops" (7,860 classes; GBU counts 7,678) is not ``within-2-hops`` (5,994): it holds 5,984
  of them and 1,876 other classes, 1,871 of them 3 to 16 hops away and 5 without an is-a edge
  (about a quarter of the list lies beyond two hops).
* "all" (DGP: 20,842 classes) is ``all`` (20,844) without ``n03931044`` (picture, image) and
  ``n09859684`` (bleacher). GCNZ's ``all.txt`` adds 4 ids that are not fall 2011 classes.

A literature list is used exactly through a list split, ``split: {list: FILE, sha256: HEX}``:
the user's file (one wnid per line) must hash to ``HEX`` (:func:`class_list_sha256`: sha256
of the sorted ids joined by newlines), so every benchmark built from it tests the same classes.
The shipped specs ``literature-2-hops`` and ``literature-3-hops`` do this.

GZSL (the literature's "+1K" variants: the training classes join the candidates) is not a
separate split: list the ``gzsl`` setting in the spec, whose candidates are seen ∪ unseen
classes. :func:`hop_splits` also returns ``<name>+1k`` class lists for analysis.

Features the user provides
--------------------------
The project ships no ImageNet images or features. The user writes a directory (see
``specs/imagenet/README.md``)::

    features.npy            float16 or float32 [N, D]   one row per image (any images, any order)
    labels.npy              integer [N]                 row index into wnids.txt
    wnids.txt               one WordNet id per line     the classes labels.npy refers to
    class_embeddings.npy    float32 [len(wnids), E]     one embedding per wnids.txt line (the
                                                        spec's default class embedding)
    class_embeddings.<name>.npy                         further class embeddings named in the spec

``features.npy`` and ``labels.npy`` are memory-mapped (``allow_pickle=False``) and read in
chunks of bounded size: only the images of the split's classes are copied, one chunk at a time.

The frozen benchmark (adapter ``imagenet``)
-------------------------------------------
* classes: the training classes ∪ the split's test classes (sorted by WordNet id);
* ``val_classes``: ``n_val_classes`` training classes drawn with ``seed`` (default 100 of the
  1,000); ``train_classes`` the others. Both are seen classes in GZSL;
* ``test_seen_images``: a seeded ``test_seen_fraction`` of every seen class's images (at least
  one image of a class with two or more, never all); the rest are ``train_images`` /
  ``val_images``; every image of a test class is ``test_unseen``;
* image order: the selected images are shuffled with ``seed``, so a frozen image index says
  nothing about the user's file order (which is often sorted by class);
* hierarchy: the is-a graph restricted to the ancestors-or-self of the benchmark's classes
  (:meth:`~harness.hierarchy.Hierarchy.restrict_to_ancestors`);
* meta: the requested and honest split names (and, for a list split, the list's file name,
  sha256 and size), the structural ratio of the split and the histogram of hops from each test
  class to its nearest training class, both on the full is-a graph (:func:`split_structure`),
  classes without is-a edges, classes dropped for lack of an embedding, and test classes
  without images.

Examples
--------
>>> resolve_split_name("within-1-hops").name
'within-1-hop'
>>> h = Hierarchy(["r", "a", "b", "a1", "b1"],
...               [("r", "a"), ("r", "b"), ("a", "a1"), ("b", "b1")])
>>> splits = hop_splits(h, ["a1"], ["r", "a", "b", "a1", "b1"], max_hops=2)
>>> splits["within-1-hop"], splits["exactly-2-hops"], splits["all"]
(('a',), ('r',), ('a', 'b', 'b1', 'r'))
>>> splits["within-1-hop+1k"]
('a', 'a1')
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from harness.data.adapters import RawBenchmark, adapters
from harness.data.artifacts import zsl_home
from harness.data.class_sets import (
    ENV_IMAGENET_DIR,
    class_list_sha256,
    imagenet_lists_dir,
    read_wnid_lines,
    read_wnids,
    resolve_class_set,
)
from harness.errors import HierarchyError, MetricError, SpecError
from harness.hierarchy import Hierarchy
from harness.hierarchy.imagenet_isa import load_isa_hierarchy, read_text_lines
from harness.metrics.structure import structural_ratio

if TYPE_CHECKING:
    from harness.spec import Spec

__all__ = [
    "ENV_FEATURES_DIR",
    "LITERATURE_LISTS",
    "ImageNetAdapter",
    "ImageNetParams",
    "ListSplit",
    "LiteratureList",
    "SplitName",
    "UserFeatures",
    "class_list_sha256",
    "hop_histogram",
    "hop_splits",
    "list_split",
    "open_user_features",
    "populated_splits",
    "read_class_list",
    "read_counts",
    "resolve_split_name",
    "split_classes",
    "split_structure",
]

logger = logging.getLogger("harness.data.imagenet")

#: Environment variable naming the user's feature directory when the spec gives none.
ENV_FEATURES_DIR = "ZSL_IMAGENET_FEATURES"

#: Bytes of feature rows copied per chunk (bounds this module's peak memory).
CHUNK_BYTES = 64 << 20
#: Labels read per chunk.
LABEL_CHUNK_ROWS = 1 << 22
#: Selected features larger than this are assembled in an anonymous file-backed map under
#: ``ZSL_HOME/tmp`` rather than in memory.
SPILL_BYTES = 1 << 30

IntArray = npt.NDArray[np.int64]

_WNID = re.compile(r"^n\d{8}$")
_HOPS = re.compile(r"^(within|exactly)-(\d+)-hops?$")
_POPULATED = re.compile(r"^(most|least)-populated(?:-(\d+))?$")


# -- split names ----------------------------------------------------------------------------------


SplitKind = Literal["within", "exactly", "all", "goz", "most-populated", "least-populated", "list"]


@dataclass(frozen=True)
class LiteratureList:
    """A literature test list: what the literature calls it, its size and identity, the shipped
    spec that uses it exactly, and how it relates to the hop splits (on the shared lists)."""

    name: str
    n_classes: int
    sha256: str
    spec: str
    file: str
    relation: str


#: The literature's ImageNet test lists as distributed with the GCNZ (Wang et al., CVPR 2018)
#: and DGP (Kampffmeyer et al., CVPR 2019) code. They are class lists, not hop sets: no split
#: name stands for them. Use them through ``split: {list: FILE, sha256: HEX}``.
LITERATURE_LISTS: dict[str, LiteratureList] = {
    "2-hops": LiteratureList(
        "2-hops",
        1549,
        "174daed0a3dea5b356a08cd7383d9563a39db5b54a1647200bdb0810582368c9",
        "literature-2-hops",
        "2-hops.txt",
        "within-1-hop (1,548) without n00021939 and with n00015388 and n06793231",
    ),
    "3-hops": LiteratureList(
        "3-hops",
        7860,
        "58a6f7b9a3c02972d4819bb241cae1f1856b20bd35ccc5487111286a7d1db754",
        "literature-3-hops",
        "3-hops.txt",
        "about a quarter of it lies 3 to 16 hops from the nearest training class; within-2-hops"
        " has 5,994 classes",
    ),
}


class ListSplit(BaseModel):
    """``split: {list: FILE, sha256: HEX}``: exactly the classes of a class list.

    ``FILE`` holds one WordNet id per line (the first token of each non-empty line); a relative
    path is read from the ImageNet lists directory (``data.params.lists_dir`` or
    ``$ZSL_IMAGENET_DIR``). ``HEX`` is :func:`class_list_sha256` of its ids: a file with other
    ids is refused (:func:`read_class_list`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    list: str = Field(
        min_length=1,
        description="class list file, one wnid per line; relative to the ImageNet lists directory",
    )
    sha256: str = Field(
        pattern=r"^[0-9a-fA-F]{64}$",
        description="sha256 of the list's sorted wnids joined by newlines (no final newline)",
    )


def _split_tag(value: Any) -> str:
    return "list-file" if isinstance(value, dict | ListSplit) else "name"


#: ``data.params.split``: a split name, or a class list (pydantic reports errors under
#: ``split.name`` or ``split.list-file``).
SplitParam = Annotated[
    Annotated[str, Tag("name")] | Annotated[ListSplit, Tag("list-file")],
    Discriminator(_split_tag),
]


@dataclass(frozen=True)
class SplitName:
    """A resolved split: its honest ``name`` and ``kind``, and what the kind needs (``hops``,
    ``n_classes``, or a class list's resolved ``list_file`` and expected ``sha256``)."""

    name: str
    kind: SplitKind
    hops: int | None = None
    n_classes: int | None = None
    list_file: Path | None = None
    sha256: str | None = None


def _hop_word(d: int) -> str:
    return "hop" if d == 1 else "hops"


def _split_forms() -> str:
    return (
        "within-<d>-hops (within-1-hop, within-2-hops), exactly-<d>-hops, all, goz,"
        " most-populated, least-populated, or a class list {list: FILE, sha256: HEX}"
    )


def _literature_refusal(split: str, lit: LiteratureList) -> SpecError:
    return SpecError(
        f"data.params.split: {split!r} is the literature's name of a class list"
        f" ({lit.n_classes:,} classes as distributed with the GCNZ/DGP code), not a hop set:"
        f" {lit.relation}. Use the spec specs/imagenet/{lit.spec}.yaml (it reads {lit.file}"
        f" from the ImageNet lists directory), or give the list itself: split: {{list: FILE,"
        f" sha256: {lit.sha256}}}. Hop sets are named within-<d>-hops"
    )


def resolve_split_name(split: str, n_classes: int | None = None) -> SplitName:
    """Resolve a split name to its honest name.

    Parameters
    ----------
    split : str
        ``within-<d>-hop(s)``, ``exactly-<d>-hop(s)``, ``all``, ``goz``, ``most-populated``,
        ``least-populated`` (optionally ``-<N>``). Class lists are not named: see
        :func:`list_split`.
    n_classes : int, default=None
        ``N`` of the populated splits (or give it in the name, e.g. ``most-populated-500``).

    Returns
    -------
    SplitName

    Raises
    ------
    SpecError
        For an unknown name, a literature list name (``2-hops``, ``3-hops``: they are not hop
        sets; the message says how to use the list itself), a ``+1k`` name (a setting, not a
        split), or populated splits without a (consistent) ``N``.

    Examples
    --------
    >>> resolve_split_name("within-2-hops").hops
    2
    >>> resolve_split_name("least-populated", 500).name
    'least-populated-500'
    """
    name = split
    literature = LITERATURE_LISTS.get(name.removesuffix("+1k"))
    if literature is not None:
        raise _literature_refusal(split, literature)
    if name.endswith("+1k"):
        base = name.removesuffix("+1k")
        raise SpecError(
            f"data.params.split: {split!r} is a GZSL variant, not a split. Give split"
            f" {base!r} and list 'gzsl' in the spec's settings: GZSL candidates are the seen"
            " (ILSVRC-2012) classes plus the unseen ones"
        )
    hops = _HOPS.match(name)
    if hops:
        d = int(hops.group(2))
        if d < 1:
            raise SpecError(f"data.params.split: {split!r}: the hop count must be at least 1")
        kind: SplitKind = "within" if hops.group(1) == "within" else "exactly"
        return SplitName(f"{hops.group(1)}-{d}-{_hop_word(d)}", kind, hops=d)
    if name in ("all", "goz"):
        return SplitName(name, "all" if name == "all" else "goz")
    populated = _POPULATED.match(name)
    if populated:
        in_name = int(populated.group(2)) if populated.group(2) else None
        if in_name is not None and n_classes is not None and in_name != n_classes:
            raise SpecError(
                f"data.params: split {split!r} names N = {in_name} but n_classes is {n_classes};"
                " give one of them"
            )
        n = in_name if in_name is not None else n_classes
        if n is None or n < 1:
            raise SpecError(
                f"data.params: split {split!r} needs the number of classes: set n_classes"
                " (e.g. 500, 1000 or 5000 as in the literature)"
            )
        pop_kind: SplitKind = (
            "most-populated" if populated.group(1) == "most" else "least-populated"
        )
        return SplitName(f"{pop_kind}-{n}", pop_kind, n_classes=n)
    known = ["within-1-hop", "within-2-hops", "all", "goz", "most-populated", "least-populated"]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise SpecError(f"data.params.split: unknown split {split!r}.{hint} Splits: {_split_forms()}")


def list_split(
    split: ListSplit,
    lists_dir: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
) -> SplitName:
    """Resolve a class-list split: its file (a relative path is read from the ImageNet lists
    directory) and its name (``name``, e.g. the spec's ``splits.variant``; else
    ``list-<first 12 hex digits of sha256>``).

    Raises
    ------
    SpecError
        If the file does not exist (naming where it was looked for), or ``name`` is the name of
        a hop, GOZ or populated split (a class list is not one of them).
    """
    file = Path(split.list).expanduser()
    if not file.is_absolute():
        file = imagenet_lists_dir(lists_dir) / file
    if not file.is_file():
        raise SpecError(
            f"data.params.split.list: class list {file} not found; a relative path is read"
            f" from the ImageNet lists directory (data.params.lists_dir or {ENV_IMAGENET_DIR})."
            " Put the list there (one WordNet id per line; see specs/imagenet/README.md) or"
            " give an absolute path"
        )
    sha256 = split.sha256.lower()
    if name is not None:
        try:
            resolve_split_name(name)
        except SpecError:
            pass
        else:
            raise SpecError(
                f"splits.variant {name!r} names a split of the harness, but data.params.split"
                " is a class list: name the list split for what it is (e.g. literature-2-hops)"
            )
    return SplitName(name or f"list-{sha256[:12]}", "list", list_file=file, sha256=sha256)


# -- the is-a hierarchy ---------------------------------------------------------------------------


def hop_splits(
    hierarchy: Hierarchy,
    train_wnids: Iterable[str],
    candidate_wnids: Iterable[str],
    *,
    max_hops: int = 2,
) -> dict[str, tuple[str, ...]]:
    """Hop splits of ``candidate_wnids`` (minus the training classes) by distance to training.

    Parameters
    ----------
    hierarchy : Hierarchy
        Typically :func:`~harness.hierarchy.imagenet_isa.load_isa_hierarchy`.
    train_wnids : iterable of str
        The training classes (ILSVRC-2012).
    candidate_wnids : iterable of str
        The classes a test set may draw from (ImageNet-21K); training classes among them are
        left out.
    max_hops : int, default=2
        Largest ``d`` of the ``exactly-``/``within-`` splits.

    Returns
    -------
    dict of str to tuple of str
        Sorted wnid tuples: ``exactly-<d>-hop(s)`` (candidates whose nearest training class is
        ``d`` undirected hops away) and ``within-<d>-hop(s)`` (``<= d``) for ``d = 1 ..
        max_hops``; ``all`` (every candidate); and ``<name>+1k`` for every ``within`` split and
        ``all``: the same classes plus the training classes (the GZSL candidates).

    Raises
    ------
    HierarchyError
        If a training or candidate wnid is not a node of ``hierarchy``.
    """
    if max_hops < 1:
        raise HierarchyError(f"max_hops must be at least 1; got {max_hops}")
    train = sorted(set(train_wnids))
    candidates = np.array(sorted(set(candidate_wnids) - set(train)), dtype=str)
    dist = hierarchy.nearest_hops(hierarchy.indices(train), radius=max_hops)
    cand_dist = dist[hierarchy.indices(candidates)] if candidates.size else np.zeros(0)
    out: dict[str, tuple[str, ...]] = {}
    for d in range(1, max_hops + 1):
        word = _hop_word(d)
        out[f"exactly-{d}-{word}"] = tuple(candidates[cand_dist == d].tolist())
        out[f"within-{d}-{word}"] = tuple(candidates[cand_dist <= d].tolist())
    out["all"] = tuple(candidates.tolist())
    for name in [k for k in out if not k.startswith("exactly-")]:
        out[f"{name}+1k"] = tuple(sorted({*out[name], *train}))
    return out


# -- populated splits -----------------------------------------------------------------------------


def read_counts(path: str | os.PathLike[str]) -> dict[str, int]:
    """Per-class image counts from a ``wnid<TAB>count`` file (``#`` lines are comments).

    Raises
    ------
    SpecError
        If the file is missing, or naming the first malformed or repeated line.
    """
    file = Path(path)
    if not file.is_file():
        raise SpecError(
            f"counts file not found: {file}; data.params.counts_file must name a"
            " 'wnid<TAB>count' file with one line per class"
        )
    counts: dict[str, int] = {}
    for number, line in enumerate(read_text_lines(file), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not _WNID.match(parts[0]) or not parts[1].isdigit():
            raise SpecError(
                f"{file}:{number}: expected 'wnid<TAB>count' (count a non-negative integer),"
                f" got {line.strip()!r}"
            )
        if parts[0] in counts:
            raise SpecError(f"{file}:{number}: {parts[0]} is listed twice")
        counts[parts[0]] = int(parts[1])
    return counts


def populated_splits(
    counts: Mapping[str, int],
    train_wnids: Iterable[str],
    candidate_wnids: Iterable[str],
    n: int,
) -> dict[str, tuple[str, ...]]:
    """The ``n`` most and least populated candidate classes (training classes left out).

    Classes are ranked by image count; ties are broken by wnid (ascending), so the result is
    deterministic. Candidates missing from ``counts`` or with a count of 0 are not eligible
    (a class without images cannot be tested).

    Returns
    -------
    dict
        ``most-populated-<n>`` and ``least-populated-<n>``: sorted wnid tuples.

    Raises
    ------
    SpecError
        If fewer than ``n`` candidates are eligible.

    Examples
    --------
    >>> populated_splits({"n1": 5, "n2": 9, "n3": 1, "n4": 9}, ["n4"], ["n1", "n2", "n3", "n4"], 2)
    {'most-populated-2': ('n1', 'n2'), 'least-populated-2': ('n1', 'n3')}
    """
    train = set(train_wnids)
    eligible = sorted(
        (w for w in set(candidate_wnids) - train if counts.get(w, 0) > 0),
    )
    if len(eligible) < n:
        raise SpecError(
            f"populated splits need {n} candidate classes with a positive image count, but the"
            f" counts file gives {len(eligible)}"
        )
    most = sorted(eligible, key=lambda w: (-counts[w], w))[:n]
    least = sorted(eligible, key=lambda w: (counts[w], w))[:n]
    return {
        f"most-populated-{n}": tuple(sorted(most)),
        f"least-populated-{n}": tuple(sorted(least)),
    }


# -- structure and the split's classes ------------------------------------------------------------


def hop_histogram(
    hierarchy: Hierarchy, train_wnids: Sequence[str], test_wnids: Sequence[str]
) -> dict[str, int]:
    """How many test classes lie ``d`` undirected hops from their nearest training class.

    Returns
    -------
    dict of str to int
        ``{"1": n1, "2": n2, ..., "inf": n}`` in increasing distance, only distances that
        occur; ``"inf"`` counts test classes with no training class in their component (e.g.
        classes without is-a edges).

    Examples
    --------
    >>> h = Hierarchy(["r", "a", "b", "a1", "z"], [("r", "a"), ("r", "b"), ("a", "a1")])
    >>> hop_histogram(h, ["a1"], ["a", "b", "z"])
    {'1': 1, '3': 1, 'inf': 1}
    """
    dist = hierarchy.nearest_hops(hierarchy.indices(list(train_wnids)))
    hops = dist[hierarchy.indices(list(test_wnids))]
    labels = np.where(np.isfinite(hops), hops, -1).astype(np.int64)
    values, counts = np.unique(labels, return_counts=True)
    out = {str(v): c for v, c in zip(values.tolist(), counts.tolist(), strict=True) if v >= 0}
    if values.size and values[0] < 0:
        out["inf"] = int(counts[0])
    return out


def split_structure(
    hierarchy: Hierarchy, train_wnids: Sequence[str], test_wnids: Sequence[str]
) -> dict[str, Any]:
    """Size, hop histogram and structural ratio of a split (train classes vs. test classes).

    Returns
    -------
    dict
        ``classes`` (number of test classes), ``hops_to_train`` (:func:`hop_histogram`),
        ``structural_ratio`` (float, or ``None`` when it is undefined), ``n_included`` and
        ``excluded`` (test wnids left out of the ratio, by reason:
        ``no_training_class_connected``, ``no_other_test_class_connected``); see
        :func:`harness.metrics.structure.structural_ratio`.
    """
    out: dict[str, Any] = {
        "classes": len(test_wnids),
        "hops_to_train": hop_histogram(hierarchy, train_wnids, test_wnids),
    }
    try:
        result = structural_ratio(
            hierarchy, hierarchy.indices(list(train_wnids)), hierarchy.indices(list(test_wnids))
        )
    except MetricError as err:
        out.update(structural_ratio=None, n_included=0, excluded={}, note=str(err))
        return out
    ids = hierarchy.node_ids
    out.update(
        structural_ratio=result.value,
        n_included=result.n_included,
        excluded={
            "no_training_class_connected": ids[result.infinite_numerator].tolist(),
            "no_other_test_class_connected": ids[result.infinite_denominator].tolist(),
        },
    )
    return out


def read_class_list(
    path: str | os.PathLike[str],
    sha256: str,
    *,
    candidates: Iterable[str],
    train: Iterable[str],
    train_class_set: str = "ilsvrc2012",
) -> tuple[str, ...]:
    """The test classes of a class-list split, checked: exactly the ids the file lists.

    Parameters
    ----------
    path : path
        One WordNet id per line: the first token of each non-empty line (blank lines, extra
        columns, ``\\r\\n`` line endings and surrounding whitespace are ignored).
    sha256 : str
        The expected :func:`class_list_sha256` of the ids (hex, any case).
    candidates : iterable of str
        The classes a test list may hold (the ImageNet-21K fall 2011 classes).
    train : iterable of str
        The training classes, which a test list must not hold.
    train_class_set : str, default="ilsvrc2012"
        Their name, for messages.

    Returns
    -------
    tuple of str
        The listed ids, sorted.

    Raises
    ------
    SpecError
        One line each: a malformed or repeated id (file and line), an empty file, a hash that
        differs (naming the file, the expected and the actual hash), an id that is not a
        candidate, or a training class (naming the first such id and its line, and how many).
    """
    file = Path(path)
    lines = read_wnid_lines(file, what="class list (data.params.split.list)")
    if not lines:
        raise SpecError(f"{file}: the class list holds no WordNet id (one id per line expected)")
    ids = [wnid for _, wnid in lines]
    actual = class_list_sha256(ids)
    if actual != sha256.lower():
        raise SpecError(
            f"{file}: class list sha256 {actual} ({len(ids)} ids) differs from the spec's"
            f" data.params.split.sha256 {sha256.lower()}: this is not the list the spec names"
            " (the hash is of the sorted ids joined by newlines)"
        )
    candidate_set = frozenset(candidates)
    outside = [(n, w) for n, w in lines if w not in candidate_set]
    if outside:
        number, wnid = outside[0]
        raise SpecError(
            f"{file}:{number}: {wnid} is not an ImageNet-21K (fall 2011) class, so it has no"
            f" images to test on ({len(outside)} listed id(s) are not:"
            f" {_first([w for _, w in outside])})"
        )
    train_set = frozenset(train)
    seen = [(n, w) for n, w in lines if w in train_set]
    if seen:
        number, wnid = seen[0]
        raise SpecError(
            f"{file}:{number}: {wnid} is a training class ({train_class_set}); a test list must"
            f" not hold training classes ({len(seen)} listed: {_first([w for _, w in seen])})"
        )
    return tuple(sorted(ids))


def split_classes(
    split: SplitName,
    lists_dir: str | os.PathLike[str] | None = None,
    *,
    train_class_set: str = "ilsvrc2012",
    counts_file: str | os.PathLike[str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (training, test) wnids of a resolved split, each sorted.

    Raises
    ------
    SpecError
        If a list is missing, a populated split has no ``counts_file``, or a class list is
        refused (:func:`read_class_list`).
    """
    train = tuple(sorted(resolve_class_set(train_class_set, lists_dir)))
    if split.kind == "list":
        assert split.list_file is not None and split.sha256 is not None
        listed = read_class_list(
            split.list_file,
            split.sha256,
            candidates=resolve_class_set("imagenet21k", lists_dir),
            train=train,
            train_class_set=train_class_set,
        )
        return train, listed
    if split.kind == "goz":
        test = set(resolve_class_set("goz_v1_test", lists_dir)) - set(train)
        return train, tuple(sorted(test))
    candidates = resolve_class_set("imagenet21k", lists_dir)
    if split.kind in ("most-populated", "least-populated"):
        if counts_file is None:
            raise SpecError(
                f"data.params: split {split.name!r} needs counts_file, a 'wnid<TAB>count' file"
                " of per-class image counts"
            )
        assert split.n_classes is not None
        found = populated_splits(read_counts(counts_file), train, candidates, split.n_classes)
        return train, found[split.name]
    hops = split.hops or 1
    found = hop_splits(load_isa_hierarchy(lists_dir), train, candidates, max_hops=hops)
    return train, found[split.name]


# -- user features --------------------------------------------------------------------------------


FEATURES_FILE = "features.npy"
LABELS_FILE = "labels.npy"
WNIDS_FILE = "wnids.txt"
EMBEDDINGS_FILE = "class_embeddings.npy"


def embedding_file(name: str, *, default: bool) -> str:
    """File name of a class embedding: ``class_embeddings.npy`` for the spec's default one,
    ``class_embeddings.<name>.npy`` for the others."""
    return EMBEDDINGS_FILE if default else f"class_embeddings.{name}.npy"


@dataclass
class UserFeatures:
    """The user's feature directory, opened and checked (arrays memory-mapped, read-only)."""

    directory: Path
    features: np.ndarray
    labels: np.ndarray
    wnids: tuple[str, ...]
    embeddings: dict[str, np.ndarray]

    @property
    def n_images(self) -> int:
        return int(self.features.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])


def _open_npy(file: Path, what: str) -> np.ndarray:
    if not file.is_file():
        raise SpecError(
            f"{file}: missing {what}; see specs/imagenet/README.md for the feature directory format"
        )
    try:
        array: np.ndarray = np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise SpecError(
            f"{file}: not a readable .npy array ({err}); save it with numpy.save and no"
            " object dtype"
        ) from None
    return array


def open_user_features(
    directory: str | os.PathLike[str], embeddings: Mapping[str, str] | None = None
) -> UserFeatures:
    """Open and check a user feature directory (see the module docstring for the format).

    Parameters
    ----------
    directory : path
    embeddings : mapping of str to str, default=None
        Embedding name -> file name in ``directory``; ``None``: ``{"default":
        "class_embeddings.npy"}``.

    Raises
    ------
    SpecError
        Naming the file and what is wrong: missing, not ``.npy``, wrong dtype or shape,
        mismatched lengths.
    """
    root = Path(directory)
    if not root.is_dir():
        raise SpecError(
            f"feature directory {root} does not exist; set data.params.features_dir or"
            f" {ENV_FEATURES_DIR} to the directory holding {FEATURES_FILE}, {LABELS_FILE},"
            f" {WNIDS_FILE} and {EMBEDDINGS_FILE}"
        )
    features = _open_npy(root / FEATURES_FILE, "image features [N, D] float16/float32")
    if features.ndim != 2 or features.dtype not in (np.float16, np.float32):
        raise SpecError(
            f"{root / FEATURES_FILE}: expected a float16 or float32 array [N, D], got"
            f" {features.dtype} of shape {features.shape}"
        )
    labels = _open_npy(root / LABELS_FILE, "image labels [N] (integers indexing wnids.txt)")
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise SpecError(
            f"{root / LABELS_FILE}: expected a 1-D integer array, got {labels.dtype} of shape"
            f" {labels.shape}"
        )
    if labels.shape[0] != features.shape[0]:
        raise SpecError(
            f"{root}: {LABELS_FILE} has {labels.shape[0]} entries but {FEATURES_FILE} has"
            f" {features.shape[0]} rows; they must describe the same images in the same order"
        )
    wnids = read_wnids(root / WNIDS_FILE, what="class list wnids.txt")
    tables: dict[str, np.ndarray] = {}
    for name, filename in (embeddings or {"default": EMBEDDINGS_FILE}).items():
        table = _open_npy(root / filename, f"class embedding '{name}' [n_wnids, E]")
        if table.ndim != 2 or table.dtype.kind != "f" or table.shape[0] != len(wnids):
            raise SpecError(
                f"{root / filename}: expected a float array [{len(wnids)}, E] (one row per line"
                f" of {WNIDS_FILE}), got {table.dtype} of shape {table.shape}"
            )
        tables[name] = table
    return UserFeatures(root, features, labels, wnids, tables)


def _select_images(labels: np.ndarray, lookup: IntArray, file: Path) -> tuple[IntArray, IntArray]:
    """Rows whose label maps to a class (``lookup[label] >= 0``) and those classes, in chunks."""
    rows, classes = [], []
    n_wnids = lookup.size
    for start in range(0, labels.shape[0], LABEL_CHUNK_ROWS):
        chunk = np.asarray(labels[start : start + LABEL_CHUNK_ROWS]).astype(np.int64)
        bad = np.flatnonzero((chunk < 0) | (chunk >= n_wnids))
        if bad.size:
            row = start + int(bad[0])
            raise SpecError(
                f"{file}: row {row} holds label {int(chunk[bad[0]])}, outside 0..{n_wnids - 1}"
                f" (labels index the lines of {WNIDS_FILE}); {bad.size} bad label(s) in rows"
                f" {start}..{start + chunk.size - 1}"
            )
        mapped = lookup[chunk]
        keep = np.flatnonzero(mapped >= 0)
        rows.append(start + keep)
        classes.append(mapped[keep])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rows).astype(np.int64), np.concatenate(classes).astype(np.int64)


def _output_array(n: int, dim: int) -> np.ndarray:
    """A float32 [n, dim] array: in memory, or a file-backed map whose file is already unlinked
    (Linux keeps the mapping valid; the space is freed when the array is)."""
    if n * dim * 4 <= SPILL_BYTES:
        return np.empty((n, dim), dtype=np.float32)
    folder = zsl_home() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="imagenet-features.", suffix=".npy", dir=folder)
    os.close(fd)
    out = np.lib.format.open_memmap(name, mode="w+", dtype=np.float32, shape=(n, dim))
    try:
        os.unlink(name)
    except OSError:  # a platform that cannot unlink an open file: leave it for the user
        logger.warning("could not remove the temporary feature file %s; delete it later", name)
    return out


def _gather_features(
    features: np.ndarray, rows: IntArray, destination: IntArray, file: Path
) -> np.ndarray:
    """``out[destination[k]] = features[rows[k]]`` as float32, a bounded chunk at a time."""
    dim = features.shape[1]
    out = _output_array(rows.size, dim)
    step = max(1, CHUNK_BYTES // max(1, dim * features.dtype.itemsize))
    for start in range(0, rows.size, step):
        source = rows[start : start + step]
        block = np.asarray(features[source], dtype=np.float32)
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            row = int(source[np.argmin(finite)])
            raise SpecError(f"{file}: row {row} holds NaN or inf; features must be finite")
        out[destination[start : start + step]] = block
    return out


# -- the adapter ----------------------------------------------------------------------------------


class ImageNetParams(BaseModel):
    """``data.params`` of the ``imagenet`` adapter (see :mod:`harness.data.imagenet`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: SplitParam = Field(
        description="within-1-hop, within-2-hops, exactly-<d>-hops, all, goz,"
        " most-/least-populated, or a class list {list: FILE, sha256: HEX}"
    )
    n_classes: int | None = Field(None, gt=0, description="N of most-/least-populated splits")
    counts_file: str | None = Field(
        None, description="'wnid<TAB>count' file for the populated splits"
    )
    lists_dir: str | None = Field(None, description="ImageNet lists; else $ZSL_IMAGENET_DIR")
    features_dir: str | None = Field(
        None,
        description=f"the user's features (see specs/imagenet/README.md); else ${ENV_FEATURES_DIR}",
    )
    train_class_set: str = Field("ilsvrc2012", description="named class set of training classes")
    n_val_classes: int = Field(100, ge=1, description="training classes held out for validation")
    test_seen_fraction: float = Field(0.2, gt=0, lt=1, description="seen images held out for test")
    seed: int = Field(0, ge=0)
    classes_without_embedding: Literal["error", "drop"] = Field(
        "error",
        description="a split class missing from wnids.txt: refuse, or drop it (recorded in meta)",
    )


def _spec_relative(spec: Spec, value: str) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    try:
        return spec.path.parent / path
    except SpecError:
        return path


def _resolve_split(spec: Spec, params: ImageNetParams) -> tuple[SplitName, Path, Path | None]:
    """The split, the ImageNet lists directory and the counts file of a spec's parameters
    (relative ``lists_dir`` and ``counts_file`` are read relative to the spec file)."""
    lists_dir = imagenet_lists_dir(
        None if params.lists_dir is None else _spec_relative(spec, params.lists_dir)
    )
    counts = None if params.counts_file is None else _spec_relative(spec, params.counts_file)
    variant = spec.splits.variant
    if isinstance(params.split, ListSplit):
        try:
            split = list_split(
                params.split, lists_dir, name=None if variant == "default" else variant
            )
        except SpecError as err:
            raise SpecError(f"{spec.path}: {err}") from None
        return split, lists_dir, counts
    split = resolve_split_name(params.split, params.n_classes)
    if variant not in ("default", split.name, params.split):
        raise SpecError(
            f"{spec.path}: splits.variant is {variant!r} but data.params.split is"
            f" {params.split!r} ({split.name}); make them agree"
        )
    return split, lists_dir, counts


def _requested(params: ImageNetParams) -> str | dict[str, str]:
    split = params.split
    return split.model_dump() if isinstance(split, ListSplit) else split


def _class_list_meta(split: SplitName, n_ids: int) -> dict[str, Any] | None:
    if split.kind != "list":
        return None
    assert split.list_file is not None
    return {"file": split.list_file.name, "sha256": split.sha256, "n_ids": n_ids}


def _features_dir(spec: Spec, params: ImageNetParams) -> Path:
    if params.features_dir:
        return _spec_relative(spec, params.features_dir)
    value = os.environ.get(ENV_FEATURES_DIR, "")
    if not value:
        raise SpecError(
            f"{spec.path}: data.params.features_dir is not set and neither is"
            f" {ENV_FEATURES_DIR}: point one of them at your feature directory"
            f" ({FEATURES_FILE}, {LABELS_FILE}, {WNIDS_FILE}, {EMBEDDINGS_FILE}; see"
            " specs/imagenet/README.md)"
        )
    return Path(value)


def _pretrained(spec: Spec, lists_dir: Path) -> frozenset[str]:
    pre = spec.features.pretrained_on
    if pre.wnids is not None:
        return frozenset(pre.wnids)
    assert pre.class_set is not None
    try:
        return resolve_class_set(pre.class_set, lists_dir)
    except SpecError as err:
        raise SpecError(f"{spec.path}: features.pretrained_on.class_set: {err}") from None


def _first(items: Sequence[str], n: int = 5) -> str:
    shown = ", ".join(items[:n])
    return shown + (f", ... ({len(items)} in all)" if len(items) > n else "")


class ImageNetAdapter:
    """Adapter ``imagenet``: ILSVRC-2012 training classes, an ImageNet-21K test split, and the
    user's features (see :mod:`harness.data.imagenet`)."""

    name = "imagenet"
    params = ImageNetParams

    def describe_release(self, spec: Spec, params: ImageNetParams) -> dict[str, Any]:
        """The split from the class lists and is-a edges alone (no features): its honest name,
        its size, the hops from its test classes to the training classes and its structural
        ratio (:func:`split_structure`), and for a class list its file, sha256 and size."""
        split, lists_dir, counts = _resolve_split(spec, params)
        train, test = split_classes(
            split, lists_dir, train_class_set=params.train_class_set, counts_file=counts
        )
        hierarchy = load_isa_hierarchy(lists_dir)
        structure = split_structure(hierarchy, train, test)
        out: dict[str, Any] = {
            "split": split.name,
            "requested_as": _requested(params),
            "train_classes": len(train),
            "test_classes": len(test),
            "hops_to_train": structure.pop("hops_to_train"),
            "structure": structure,
        }
        class_list = _class_list_meta(split, len(test))
        if class_list is not None:
            out["class_list"] = class_list
        out.update(
            test_class_ids=list(test), test_class_names=list(test), seen_class_ids=list(train)
        )
        return out

    def load(self, spec: Spec, params: ImageNetParams) -> RawBenchmark:
        split, lists_dir, counts = _resolve_split(spec, params)
        train_all, test_all = split_classes(
            split, lists_dir, train_class_set=params.train_class_set, counts_file=counts
        )
        names = {
            e.name: embedding_file(e.name, default=e.name == spec.default_embedding)
            for e in spec.class_embeddings
        }
        user = open_user_features(_features_dir(spec, params), names)
        if user.dim != spec.features.dim:
            raise SpecError(
                f"{spec.path}: features.dim is {spec.features.dim} but"
                f" {user.directory / FEATURES_FILE} has {user.dim} columns"
            )
        position = {w: i for i, w in enumerate(user.wnids)}
        missing = [w for w in (*train_all, *test_all) if w not in position]
        if missing and params.classes_without_embedding == "error":
            raise SpecError(
                f"{user.directory / WNIDS_FILE} lacks {len(missing)} class(es) of split"
                f" {split.name!r} (so they have no class embedding): {_first(missing)}. Add"
                " them, or set data.params.classes_without_embedding: drop (the dropped classes"
                " are recorded in the frozen meta)"
            )
        dropped = set(missing)
        train = [w for w in train_all if w not in dropped]
        test = [w for w in test_all if w not in dropped]
        if not test:
            raise SpecError(f"{spec.path}: split {split.name!r} has no test class left")
        leaked = sorted(set(test) & _pretrained(spec, lists_dir))
        if leaked:
            raise SpecError(
                f"{spec.path}: {len(leaked)} test class(es) of split {split.name!r} are among"
                f" the classes the feature backbone was trained on"
                f" (features.pretrained_on): {_first(leaked)}; they cannot be unseen"
            )
        if params.n_val_classes >= len(train):
            raise SpecError(
                f"{spec.path}: data.params.n_val_classes is {params.n_val_classes} but there"
                f" are only {len(train)} training classes"
            )
        class_ids = np.array(sorted({*train, *test}), dtype=str)
        n_classes = class_ids.size
        train_idx = np.searchsorted(class_ids, np.array(train, dtype=str))
        test_idx = np.searchsorted(class_ids, np.array(test, dtype=str))

        seeds = np.random.SeedSequence(params.seed).spawn(3)
        val_draw = np.random.Generator(np.random.PCG64(seeds[0])).permutation(train_idx.size)
        val_idx = np.sort(train_idx[val_draw[: params.n_val_classes]])
        fit_idx = np.sort(train_idx[val_draw[params.n_val_classes :]])

        lookup = np.full(len(user.wnids), -1, dtype=np.int64)
        lookup[[position[w] for w in class_ids.tolist()]] = np.arange(n_classes)
        rows, classes = _select_images(user.labels, lookup, user.directory / LABELS_FILE)
        order = np.random.Generator(np.random.PCG64(seeds[1])).permutation(rows.size)
        labels = np.empty(rows.size, dtype=np.int64)
        labels[order] = classes
        features = _gather_features(user.features, rows, order, user.directory / FEATURES_FILE)

        role = np.zeros(n_classes, dtype=np.int8)  # 1 train, 2 val, 3 unseen
        role[fit_idx], role[val_idx], role[test_idx] = 1, 2, 3
        image_role = role[labels]
        held_out = _hold_out(labels, image_role < 3, params.test_seen_fraction, seeds[2])
        splits = {
            "train_classes": fit_idx.astype(np.int64),
            "val_classes": val_idx.astype(np.int64),
            "unseen_classes": np.sort(test_idx).astype(np.int64),
            "train_images": np.flatnonzero((image_role == 1) & ~held_out),
            "val_images": np.flatnonzero((image_role == 2) & ~held_out),
            "test_seen_images": np.flatnonzero((image_role < 3) & held_out),
            "test_unseen_images": np.flatnonzero(image_role == 3),
        }
        embeddings = {}
        source_rows = np.array([position[w] for w in class_ids.tolist()], dtype=np.int64)
        for name, table in user.embeddings.items():
            values = np.asarray(table[source_rows], dtype=np.float32)
            finite = np.isfinite(values).all(axis=1)
            if not finite.all():
                bad = str(class_ids[np.argmin(finite)])
                raise SpecError(
                    f"{user.directory / names[name]}: the row of {bad} (line"
                    f" {position[bad] + 1} of {WNIDS_FILE}) holds NaN or inf"
                )
            embeddings[name] = values

        full = load_isa_hierarchy(lists_dir)
        hierarchy = full.restrict_to_ancestors(full.indices(class_ids.tolist()))
        degree = np.bincount(full.edges.ravel(), minlength=full.n_nodes)
        isolated = np.flatnonzero(degree == 0)
        no_edges = sorted(set(full.node_ids[isolated].tolist()) & set(class_ids.tolist()))
        per_class = np.bincount(labels, minlength=n_classes)
        imageless = class_ids[test_idx][per_class[test_idx] == 0].tolist()
        if imageless:
            logger.warning(
                "%d of %d test classes of %s have no image in %s; they stay candidates",
                len(imageless),
                len(test),
                split.name,
                user.directory,
            )
        structure = split_structure(full, train, test)
        meta = {
            "adapter": "imagenet",
            "split": split.name,
            "requested_split": _requested(params),
            "class_list": _class_list_meta(split, len(test_all)),
            "train_class_set": params.train_class_set,
            "n_training_classes": len(train),
            "n_test_classes": len(test),
            "structural_ratio": structure["structural_ratio"],
            "structural_ratio_included": structure["n_included"],
            "hops_to_train": structure["hops_to_train"],
            "classes_without_isa_edges": no_edges,
            "dropped_without_embedding": sorted(dropped),
            "test_classes_without_images": len(imageless),
            "test_classes_without_images_first": imageless[:20],
            "source_images": user.n_images,
            "source_dtype": str(user.features.dtype),
            "selected_images": int(rows.size),
            "n_val_classes": params.n_val_classes,
            "test_seen_fraction": params.test_seen_fraction,
            "seed": params.seed,
        }
        return RawBenchmark(
            features=features,
            labels=labels,
            class_ids=class_ids,
            class_names=full.names[full.indices(class_ids)].astype(str),
            embeddings=embeddings,
            splits=splits,
            meta=meta,
            hierarchy=hierarchy,
        )


def _hold_out(
    labels: IntArray, seen: npt.NDArray[np.bool_], fraction: float, seed: np.random.SeedSequence
) -> npt.NDArray[np.bool_]:
    """Per seen class, a seeded ``round(fraction * n)`` of its images (at least 1 when n >= 2,
    at most n - 1), vectorized: rank images within their class by a random draw."""
    draw = np.random.Generator(np.random.PCG64(seed)).random(labels.size)
    out = np.zeros(labels.size, dtype=bool)
    idx = np.flatnonzero(seen)
    if idx.size == 0:
        return out
    order = idx[np.lexsort((draw[idx], labels[idx]))]
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    sizes = np.diff(np.r_[starts, sorted_labels.size])
    rank = np.arange(sorted_labels.size) - np.repeat(starts, sizes)
    size = np.repeat(sizes, sizes)
    quota = np.where(size >= 2, np.clip(np.round(fraction * size), 1, size - 1), 0)
    out[order[rank < quota]] = True
    return out


adapters.add("imagenet", ImageNetAdapter())
