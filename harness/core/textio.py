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

from harness.core.errors import HarnessError

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

    See docs/core.md, `read_text_file`.
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

    See docs/core.md, `unique_tokens`.
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
