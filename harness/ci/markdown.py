"""Text for the CI report: submitted strings made literal Markdown, messages made one short line.

Contract: :func:`escape_markdown` is what every string that came from a submission, a record or
an error goes through before it reaches the pull-request comment; whatever it holds shows as
text and mentions, links or formats nothing. :func:`one_line` and :func:`short_list` only
shorten. Pure functions of their arguments.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_DETAIL", "escape_markdown", "one_line", "short_list"]

MAX_CELL = 200  # characters of submitted text kept in one table cell
MAX_DETAIL = 400  # characters of one failure's message kept in the report

# Characters with a meaning inside a Markdown line (emphasis, code, HTML and entities, links and
# images, headings, table pipes, strikethrough, footnotes, GitHub math); ``.``, ``-`` and ``:``
# only matter at the start of a line, which escaped text never is.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&^@$])")
_MENTION = re.compile(r"([@#])(?=\w)")
_SCHEME = re.compile(r":(?=//)")
_WWW = re.compile(r"(?i)\bwww\.")
_ZWSP = "\u200b"


def escape_markdown(text: str, *, limit: int = MAX_CELL) -> str:
    """``text`` as literal Markdown on one line, safe in a GitHub comment and a table cell.

    Control, format and line-separator characters become spaces (no line breaks, no bidi
    overrides); text beyond ``limit`` characters is cut with ``…``; ``@`` and ``#`` before a word
    get a zero-width space (no mentions, no issue links) and so do ``://`` and ``www.`` (no
    autolinks); then every character with a meaning inside a line is backslash-escaped, which
    CommonMark renders literally: no emphasis, code, HTML, links, images, math or table pipes.

    >>> escape_markdown("<b>@team</b> | x")
    '\\\\<b\\\\>\\\\@\\u200bteam\\\\</b\\\\> \\\\| x'
    """
    text = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text
    )
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = _MENTION.sub(lambda m: m.group(1) + _ZWSP, text)
    text = _SCHEME.sub(":" + _ZWSP, text)
    text = _WWW.sub(lambda m: m.group(0)[:3] + _ZWSP + ".", text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def one_line(message: str, repo_root: Path | None = None, limit: int = MAX_DETAIL) -> str:
    """An error message on one line, repository paths made relative, cut at ``limit``."""
    if repo_root is not None:
        message = message.replace(f"{repo_root}{os.sep}", "")
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def short_list(items: Sequence[str], limit: int = 6) -> str:
    """The first ``limit`` of ``items``, comma-separated, then how many more.

    >>> short_list(["a", "b", "c"], 2)
    'a, b and 1 more'
    """
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
