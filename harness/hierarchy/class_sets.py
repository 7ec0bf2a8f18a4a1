"""Named class sets: the WordNet ids a spec may refer to by name.

A spec names class sets in two places: ``features.pretrained_on.class_set`` (what the feature
backbone saw, for the leakage audit) and the ImageNet splits (training classes, test classes).
The names resolve here, in one place:

>>> resolve_class_set("none")
frozenset()
>>> sorted(CLASS_SET_FILES)
['goz_v1_test', 'ilsvrc2012', 'imagenet21k', 'none']

See docs/data.md.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from harness.core.errors import SpecError
from harness.core.textio import read_text_file, unique_tokens

__all__ = [
    "ENV_IMAGENET_DIR",
    "class_list_sha256",
    "imagenet_lists_dir",
    "read_wnid_lines",
    "read_wnids",
    "resolve_class_set",
]

#: Environment variable naming the ImageNet lists directory.
ENV_IMAGENET_DIR = "ZSL_IMAGENET_DIR"

#: Named class set -> its file in the ImageNet lists directory (``None``: needs no file).
CLASS_SET_FILES: dict[str, str | None] = {
    "ilsvrc2012": "ilsvrc2012_synsets.txt",
    "imagenet21k": "fall11_wnids.txt",
    "goz_v1_test": "goz_v1_test_wnids.txt",
    "none": None,
}

_WNID = re.compile(r"^n\d{8}$")


def class_set_names() -> list[str]:
    """The names :func:`resolve_class_set` accepts, sorted."""
    return sorted(CLASS_SET_FILES)


def _expected_files() -> str:
    return ", ".join(sorted(f for f in CLASS_SET_FILES.values() if f))


def imagenet_lists_dir(directory: str | os.PathLike[str] | None = None) -> Path:
    """The ImageNet lists directory: ``directory`` if given, else ``$ZSL_IMAGENET_DIR``.

    See docs/data.md, `imagenet_lists_dir`.
    """
    if directory is None or str(directory) == "":
        value = os.environ.get(ENV_IMAGENET_DIR, "")
        if not value:
            raise SpecError(
                f"no ImageNet lists directory: set the environment variable {ENV_IMAGENET_DIR}"
                f" (or data.params.lists_dir in the spec) to a directory holding"
                f" {_expected_files()} (and, for the ImageNet adapter, wordnet.is_a.txt and"
                " words.txt)"
            )
        where = f"{ENV_IMAGENET_DIR}={value}"
        path = Path(value)
    else:
        where = "lists_dir"
        path = Path(directory)
    if not path.is_dir():
        raise SpecError(
            f"ImageNet lists directory {path} (from {where}) does not exist or is not a"
            f" directory; point {ENV_IMAGENET_DIR} at the directory holding {_expected_files()}"
        )
    return path.resolve()


def read_wnid_lines(
    path: str | os.PathLike[str], *, what: str = "WordNet id list"
) -> tuple[tuple[int, str], ...]:
    """``(line number, wnid)`` for the first token of every non-empty line of ``path``, checked.

    Every token must look like a WordNet noun id (``n`` and 8 digits) and appear once. Line
    endings (``\\n``, ``\\r\\n``), surrounding whitespace, blank lines, anything after the first
    token and a UTF-8 byte-order mark are ignored.

    Raises
    ------
    SpecError
        If the file is missing or unreadable, or naming the first bad or repeated line.
    """
    file = Path(path)
    text = read_text_file(
        file,
        SpecError,
        missing=f"{what} not found: {file}",
        unreadable=lambda err: f"cannot read {what} {file}: {err}",
        encoding="utf-8-sig",
    )
    return tuple(
        unique_tokens(
            text.splitlines(),
            SpecError,
            token=_first_token,
            valid=_WNID,
            bad=lambda number, wnid: (
                f"{file}:{number}: expected a WordNet id like 'n01440764' at the start of the"
                f" line, got {wnid!r}"
            ),
            repeated=lambda number, wnid, first: (
                f"{file}:{number}: {wnid} repeats line {first}; each id may appear once"
            ),
        )
    )


def _first_token(line: str) -> str:
    parts = line.split(maxsplit=1)
    return parts[0] if parts else ""


def read_wnids(path: str | os.PathLike[str], *, what: str = "WordNet id list") -> tuple[str, ...]:
    """The first token of every non-empty line of ``path``, in file order, checked.

    Every token must look like a WordNet noun id (``n`` and 8 digits) and appear once (see
    :func:`read_wnid_lines`, which also gives the line numbers).

    Raises
    ------
    SpecError
        If the file is missing or unreadable, or naming the first bad or repeated line.
    """
    return tuple(wnid for _, wnid in read_wnid_lines(path, what=what))


def class_list_sha256(wnids: Iterable[str]) -> str:
    """The identity of a class list: sha256 of its sorted ids joined by ``\\n`` (no final newline).

    The hash is of the *set* of classes, not of a file's bytes: order, line endings, blank lines
    and extra columns do not change it. Give distinct ids (:func:`read_wnids` refuses repeats).

    Examples
    --------
    >>> class_list_sha256(["n02", "n01"]) == class_list_sha256(["n01", "n02"])
    True
    >>> class_list_sha256(["n01440764"])[:16]
    '15ce93dd849dd052'
    """
    return hashlib.sha256("\n".join(sorted(wnids)).encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=32)
def _cached(path: str, size: int, mtime_ns: int) -> frozenset[str]:
    del size, mtime_ns  # cache key only
    return frozenset(read_wnids(path, what="class list"))


def resolve_class_set(name: str, directory: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """The WordNet ids of a named class set.

    See docs/data.md, `resolve_class_set`.
    """
    if name not in CLASS_SET_FILES:
        close = difflib.get_close_matches(name, class_set_names(), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise SpecError(
            f"unknown class set {name!r}.{hint} Known class sets: {', '.join(class_set_names())}"
        )
    filename = CLASS_SET_FILES[name]
    if filename is None:
        return frozenset()
    file = imagenet_lists_dir(directory) / filename
    try:
        stat = file.stat()
    except OSError:
        raise SpecError(
            f"class set {name!r} needs {file}, which does not exist; {ENV_IMAGENET_DIR} (or"
            f" lists_dir) must point at a directory holding {_expected_files()}"
        ) from None
    return _cached(str(file), stat.st_size, stat.st_mtime_ns)
