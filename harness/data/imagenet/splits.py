"""ImageNet-21K test splits: hop splits under honest names, literature lists, GOZ.

This module decides which classes an ImageNet benchmark tests: it resolves
``data.params.split`` and reads the class lists, the counts and the is-a graph it needs.

See docs/splits.md.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from harness.core.errors import HierarchyError, MetricError, SpecError
from harness.data.structure import structural_ratio
from harness.hierarchy import Hierarchy
from harness.hierarchy.class_sets import (
    ENV_IMAGENET_DIR,
    class_list_sha256,
    imagenet_lists_dir,
    read_wnid_lines,
    resolve_class_set,
)
from harness.hierarchy.imagenet_isa import load_isa_hierarchy, read_text_lines

__all__ = [
    "LITERATURE_LISTS",
    "ListSplit",
    "SplitName",
    "SplitParam",
    "hop_histogram",
    "hop_splits",
    "list_split",
    "populated_splits",
    "preview_ids",
    "read_class_list",
    "read_counts",
    "resolve_split_name",
    "split_classes",
    "split_structure",
]

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

    >>> resolve_split_name("within-2-hops").hops
    2
    >>> resolve_split_name("least-populated", 500).name
    'least-populated-500'

    See docs/splits.md, `resolve_split_name`.
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

    See docs/splits.md, `hop_splits`.
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

    >>> populated_splits({"n1": 5, "n2": 9, "n3": 1, "n4": 9}, ["n4"], ["n1", "n2", "n3", "n4"], 2)
    {'most-populated-2': ('n1', 'n2'), 'least-populated-2': ('n1', 'n3')}

    See docs/splits.md, `populated_splits`.
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
        :func:`harness.data.structure.structural_ratio`.
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


def preview_ids(items: Sequence[str], n: int = 5) -> str:
    """The first ``n`` items joined by commas, then how many there are in all."""
    shown = ", ".join(items[:n])
    return shown + (f", ... ({len(items)} in all)" if len(items) > n else "")


def read_class_list(
    path: str | os.PathLike[str],
    sha256: str,
    *,
    candidates: Iterable[str],
    train: Iterable[str],
    train_class_set: str = "ilsvrc2012",
) -> tuple[str, ...]:
    """The test classes of a class-list split, checked: exactly the ids the file lists.

    See docs/splits.md, `read_class_list`.
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
            f" {preview_ids([w for _, w in outside])})"
        )
    train_set = frozenset(train)
    seen = [(n, w) for n, w in lines if w in train_set]
    if seen:
        number, wnid = seen[0]
        raise SpecError(
            f"{file}:{number}: {wnid} is a training class ({train_class_set}); a test list must"
            f" not hold training classes ({len(seen)} listed: {preview_ids([w for _, w in seen])})"
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
