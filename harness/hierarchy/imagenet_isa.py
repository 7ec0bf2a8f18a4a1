"""ImageNet's is-a graph (``wordnet.is_a.txt``) as a :class:`~harness.hierarchy.Hierarchy`.

The ImageNet lists directory (``$ZSL_IMAGENET_DIR``, see :mod:`harness.hierarchy.class_sets`)
holds three files this module reads.

See docs/hierarchy.md.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from harness.core.errors import HierarchyError, SpecError
from harness.hierarchy.class_sets import imagenet_lists_dir, read_wnids
from harness.hierarchy.dag import Hierarchy

__all__ = [
    "load_isa_hierarchy",
    "read_text_lines",
]

ISA_FILE = "wordnet.is_a.txt"
WORDS_FILE = "words.txt"
CANDIDATES_FILE = "fall11_wnids.txt"

_WNID = re.compile(r"^n\d{8}$")


def _stat_key(*files: Path) -> tuple[tuple[str, int, int], ...]:
    key = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            raise SpecError(
                f"{file} does not exist; the ImageNet lists directory must hold {file.name}"
                " (set ZSL_IMAGENET_DIR or data.params.lists_dir)"
            ) from None
        key.append((str(file), stat.st_size, stat.st_mtime_ns))
    return tuple(key)


def read_text_lines(file: Path) -> list[str]:
    """The lines of a UTF-8 list file; a :class:`~harness.core.errors.SpecError` naming it if
    not."""
    try:
        return file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read {file}: {err}") from None


def _read_isa(file: Path) -> list[tuple[str, str]]:
    edges = []
    for number, line in enumerate(read_text_lines(file), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not (_WNID.match(parts[0]) and _WNID.match(parts[1])):
            raise SpecError(
                f"{file}:{number}: expected 'parent_wnid child_wnid', got {line.strip()!r}"
            )
        edges.append((parts[0], parts[1]))
    return edges


def _read_words(file: Path) -> dict[str, str]:
    names = {}
    for number, line in enumerate(read_text_lines(file), start=1):
        if not line.strip():
            continue
        wnid, _, synonyms = line.partition("\t")
        if not _WNID.match(wnid):
            raise SpecError(f"{file}:{number}: expected 'wnid<TAB>synonyms', got {line!r}")
        names[wnid] = synonyms.strip() or wnid
    return names


@functools.lru_cache(maxsize=4)
def _isa_hierarchy(key: tuple[tuple[str, int, int], ...]) -> Hierarchy:
    isa, candidates, words = (Path(k[0]) for k in key)
    edges = _read_isa(isa)
    wnids = read_wnids(candidates, what="ImageNet-21K class list")
    names = _read_words(words)
    ids = sorted(set(wnids).union(*edges))
    try:
        return Hierarchy(
            ids,
            edges,
            [names.get(i, i) for i in ids],
            source=f"imagenet {ISA_FILE} + {CANDIDATES_FILE} (names: {WORDS_FILE})",
        )
    except HierarchyError as err:
        raise SpecError(f"{isa}: {err}") from None


def load_isa_hierarchy(directory: str | os.PathLike[str] | None = None) -> Hierarchy:
    """ImageNet's is-a graph: ``wordnet.is_a.txt`` edges plus every 21K wnid as a node.

    See docs/hierarchy.md, `load_isa_hierarchy`.
    """
    root = imagenet_lists_dir(directory)
    return _isa_hierarchy(_stat_key(root / ISA_FILE, root / CANDIDATES_FILE, root / WORDS_FILE))
