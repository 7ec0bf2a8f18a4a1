"""Small text files read by line: one place for the steps every list reader shares.

Class lists, WordNet id lists, class maps and taxonomy files are all read the same way: read the
file (a missing or undecodable file is an error *worded by the caller*, in its own error class),
then take one item per line, checking each item's form and that none repeats. The readers keep
their own wording and error classes; these two functions keep the steps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.errors import HarnessError

__all__ = ["read_text_file", "unique_tokens"]


def read_text_file(
    path: Path,
    error: type[HarnessError],
    *,
    missing: str,
    unreadable: Callable[[Exception], str],
    encoding: str = "utf-8",
) -> str:
    """The text of ``path``, or ``error`` worded by the caller when it cannot be read.

    Parameters
    ----------
    path : Path
        The file to read.
    error : type of HarnessError
        What to raise (each reader raises its own kind: ``SpecError``, ``HierarchyError``, ...).
    missing : str
        The message for a file that does not exist.
    unreadable : callable
        ``unreadable(err)`` is the message for any other ``OSError`` or for text that is not
        valid in ``encoding``.
    encoding : str, default="utf-8"
        ``"utf-8-sig"`` also drops a byte-order mark.
    """
    try:
        return path.read_text(encoding=encoding)
    except FileNotFoundError:
        raise error(missing) from None
    except (OSError, UnicodeDecodeError) as err:
        raise error(unreadable(err)) from None


def unique_tokens(
    lines: Iterable[str],
    error: type[HarnessError],
    *,
    token: Callable[[str], str],
    valid: re.Pattern[str],
    bad: Callable[[int, str], str],
    repeated: Callable[[int, str, int], str],
) -> list[tuple[int, str]]:
    """``(line number, token)`` for each line of a list file that holds one, each checked once.

    The shared loop of the readers of one-item-a-line lists (class names, WordNet ids): line
    numbers start at 1, ``token(line)`` picks a line's item (``""`` skips the line), and the
    first bad or repeated item raises ``error``.

    Parameters
    ----------
    lines : iterable of str
        The file's lines, in order.
    error : type of HarnessError
        What to raise.
    token : callable
        ``token(line)``: the line's item, ``""`` for a line without one (blank, a comment).
    valid : re.Pattern
        An item must match it in full; otherwise the message is ``bad(number, item)``.
    bad, repeated : callable
        The messages for a malformed item and for ``repeated(number, item, first)``, an item
        seen before on line ``first``.

    Examples
    --------
    >>> from harness.errors import SpecError
    >>> rules = dict(
    ...     token=lambda line: line.split("#")[0].strip(),
    ...     valid=re.compile(r"n\\d+"),
    ...     bad=lambda number, item: f"line {number}: {item!r} is no id",
    ...     repeated=lambda number, item, first: f"line {number}: {item} repeats line {first}",
    ... )
    >>> unique_tokens(["n01", "", "n02  # dog"], SpecError, **rules)
    [(1, 'n01'), (3, 'n02')]
    >>> unique_tokens(["n01", "", "n02  # dog", "n01"], SpecError, **rules)
    Traceback (most recent call last):
    ...
    harness.errors.SpecError: line 4: n01 repeats line 1
    >>> unique_tokens(["dog"], SpecError, **rules)
    Traceback (most recent call last):
    ...
    harness.errors.SpecError: line 1: 'dog' is no id
    """
    first_line: dict[str, int] = {}
    out: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        item = token(line)
        if not item:
            continue
        if valid.fullmatch(item) is None:
            raise error(bad(number, item))
        if item in first_line:
            raise error(repeated(number, item, first_line[item]))
        first_line[item] = number
        out.append((number, item))
    return out
